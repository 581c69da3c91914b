/* measure: the calibrator's sweeps -- the real project kernels timed on this machine.
 *
 * Host: read bandwidth and triad from DRAM (each pass evicted from the caches first,
 * whatever the machine reports of them; membw.h), checked against each other; the dot-product
 * peak of the attention instruction path; CPU decode attention for GQA, MLA and sparse MLA
 * (shapes from the shipped model configs) in bf16 and fp16 over contexts from 1K to 1M
 * tokens of one layer, batch sizes and 1 vs all threads -- each repeat on pages evicted
 * from every cache level just before (cold, as in a real decode step), repeats taken
 * round robin over the sweep so host load spreads over samples; attention over pinned vs pageable
 * memory; the routed-expert phases the runtime runs (bf16 and int8 weights: distinct experts
 * one per pool thread, each single-threaded, as runtime/run_engine.h runs them) for the three
 * models' expert shapes over 1..512 tokens an expert. With a CUDA device, the GPU and link sweeps of the
 * device backend (calib/measure_gpu.c). Every sample is a median of repeats with min and max kept.
 * Called by a calibration run (calib/calib_run.h, `writescope calib`); its options,
 * ws_calib_opts, are in calib.h, where measure_gpu reads them too. */
#ifndef WS_MEASURE_H
#define WS_MEASURE_H

#include "calib.h"

/* Runs the sweeps into run->samples (and the machine figures into run). */
int ws_calib_measure(const ws_calib_opts *o, ws_calib_run *run, ws_err *err);

#endif
