/* measure: the calibrator's sweeps -- the real project kernels timed on this machine.
 *
 * Host: read bandwidth and triad from DRAM (each pass evicted from the caches first,
 * whatever the machine reports of them; membw.h), checked against each other; the dot-product
 * peak of the attention instruction path; CPU decode attention for GQA, MLA and sparse MLA
 * (shapes from the shipped model configs) in bf16 and fp16 over contexts from 1K to 1M
 * tokens of one layer, batch sizes and 1 vs all threads -- each repeat on pages evicted
 * from every cache level just before (cold, as in a real decode step), repeats taken
 * round robin over the sweep so host load spreads over samples; attention over pinned vs pageable
 * memory; the expert GEMMs the runtime runs (bf16 and int8 weights) for the three models'
 * expert shapes over 1..512 tokens. With a CUDA device, the GPU and link sweeps of the
 * device backend (see measure_gpu in measure.c). Every sample is a median of repeats with min and max kept.
 * Called by a calibration run (calib/calib_run.h, `writescope calib`). */
#ifndef WS_MEASURE_H
#define WS_MEASURE_H

#include <signal.h>

#include "calib.h"

typedef void (*ws_calib_progress_fn)(void *ctx, double frac, const char *what);

/* ws_calib_opts.sweeps: 0 runs every sweep of the scope; else only the CPU expert GEMM
 * sweeps named by its bits (no machine figures: their fits need none, the token counts span
 * intensities). */
#define WS_CALIB_SWEEP_EXPERT_BF16 1 /* cpu.expert_gemm.bf16 */
#define WS_CALIB_SWEEP_EXPERT_INT8 2 /* cpu.expert_gemm.int8 */

typedef struct ws_calib_opts {
    int quick;                  /* coarse sweep (< 60 s on 2 cores) */
    int sweeps;                 /* 0: all; else WS_CALIB_SWEEP_* bits */
    int do_cpu, do_gpu, do_link;
    int threads;                /* 0 = every logical CPU */
    ws_calib_progress_fn progress;
    void *progress_ctx;
    volatile sig_atomic_t *stop; /* set asynchronously to stop: WS_ECANCELED */
} ws_calib_opts;

/* Runs the sweeps into run->samples (and the machine figures into run). */
int ws_calib_measure(const ws_calib_opts *o, ws_calib_run *run, ws_err *err);

#endif
