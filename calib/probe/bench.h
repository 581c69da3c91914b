/* bench: the measurements behind `writescope bench membw|attn-cpu`, as library calls that
 * take a config and fill a result, so that the CLI only parses, calls and prints.
 *
 *   membw:    read and gather passes over one buffer in round-robin rounds, the STREAM
 *             triad and the dot-product peak (membw.h), and the read/triad cross-check;
 *   attn-cpu: one layer's model-shaped paged KV (attn_bench.h), the CPU kernel timed R times,
 *             each repeat after one read pass over a read buffer (and, for token lists, a
 *             gather pass) so that the kernel and the bandwidth it is divided by come from
 *             the same minutes of a host whose speed drifts; with `scaling` the same round
 *             again on one thread. The KV is evicted from the caches before every kernel
 *             repeat (cold, as in a decode step) and the read pass evicts its own buffer
 *             (membw.h), so neither depends on what the machine reports of its caches.
 * Every figure is measured. The timing primitives (eviction, read/gather/triad passes,
 * peak) are membw.c's, shared with the calibrator (calib/measure.c). */
#ifndef WS_BENCH_H
#define WS_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "attn_bench.h"
#include "attn_cpu.h"
#include "model.h"
#include "pool.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- membw ---- */

#define WS_BENCH_GATHER_N 4 /* gather row sizes: a line, a GQA K row, an MLA row, 4 KiB */
extern const size_t ws_bench_gather_seg[WS_BENCH_GATHER_N];

typedef struct ws_bench_membw_cfg {
    size_t bytes; /* read buffer; also the triad's three arrays together */
    int repeats;  /* rounds (read and gather) and triad repeats */
    ws_isa isa;   /* path of the peak (resolved) */
} ws_bench_membw_cfg;

typedef struct ws_bench_membw {
    double read_gbps, triad_gbps, peak_gflops;     /* medians, GB/s and GFLOP/s */
    double gather_gbps[WS_BENCH_GATHER_N];         /* per ws_bench_gather_seg size */
    double triad_over_read;                        /* the cross-check's ratio */
    int triad_agrees;                              /* 1: inside the expected band */
} ws_bench_membw;

int ws_bench_membw_run(ws_pool *pool, const ws_bench_membw_cfg *cfg, ws_bench_membw *out,
                       ws_err *err);

/* ---- attn-cpu ---- */

/* bench attn-cpu's repeats by default: as many rounds as fill about WS_BENCH_AUTO_S seconds
 * (timed on the warm-up round), odd, within [WS_BENCH_AUTO_MIN, WS_BENCH_AUTO_MAX]. */
#define WS_BENCH_AUTO_S 3.0
#define WS_BENCH_AUTO_MIN 11
#define WS_BENCH_AUTO_MAX 101
/* KV plus read buffer the bench allows (bytes), and at most this fraction of memory for KV. */
#define WS_BENCH_MAX_BYTES 6.5e9
#define WS_BENCH_MAX_MEM_FRACTION 0.6

typedef void (*ws_bench_note_fn)(void *ctx, const char *msg);

typedef struct ws_bench_attn_cfg {
    const ws_model *model;
    ws_dtype dtype;       /* bf16 | fp16 */
    int page, ctx, batch;
    long topk;            /* < 0: the model's index_topk for sparse models, else dense */
    ws_sparse_mode mode;  /* pages | tokens, when sparse */
    uint64_t seed;
    int v_layout;         /* -1 auto (the CPU region's for the path), 0 rows, 1 pairs */
    int k_layout;         /* -1 auto, 0 rows, 1 tiles */
    ws_isa isa;           /* requested path (resolved) */
    ws_attn_prec prec;    /* requested precision (resolved; see attn_cpu.h) */
    int repeats;          /* 0: chosen by time (WS_BENCH_AUTO_*) */
    size_t read_bytes;    /* read buffer of the interleaved read passes */
    int scaling;          /* also one thread, same rounds */
    ws_bench_note_fn note; /* progress lines (may be NULL) */
    void *note_ctx;
} ws_bench_attn_cfg;

/* One thread count's figures: medians over the repeats of the kernel's time and of the
 * read (and gather) pass before it. */
typedef struct ws_bench_attn_fig {
    int threads;
    double sec, smin, smax;  /* kernel seconds: median, min, max */
    double kv_gbps, gflops;  /* the kernel's, from the median */
    double rd;               /* read bandwidth, GB/s */
    double gb;               /* gather bandwidth, GB/s (0: not measured) */
    double pk, roof;         /* peak and roofline GFLOP/s */
    /* the kernel's rate over the read pass's in each round (back to back): quartiles */
    double fr_q1, fr_med, fr_q3;
    int compute_bound;
} ws_bench_attn_fig;

typedef struct ws_bench_attn {
    ws_attn_bench_cfg problem; /* the shape run: layouts and sparsity resolved */
    ws_isa used;               /* path serving the shape */
    const char *loop;          /* amx | dpbf16 | fma | generic */
    ws_attn_prec precision;    /* the precision run (resolved) */
    int p_bf16;                /* 1: the loop rounded p to bf16 too (ws_attn_cpu_p_bf16) */
    const char *peak_instr;    /* the roofline's instruction (ws_cpu_roof_peak) */
    int repeats, nodes;
    double kv_bytes, flops, alloc_bytes;
    size_t gather_seg;         /* bytes of a gather row (token lists), else 0 */
    ws_bench_attn_fig fig;     /* all threads */
    ws_bench_attn_fig fig1;    /* one thread (scaling) */
} ws_bench_attn;

/* Resolves the problem (sparsity, layouts) and checks it without allocating. */
int ws_bench_attn_resolve(const ws_bench_attn_cfg *cfg, int threads, ws_attn_bench_cfg *out,
                          ws_err *err);
int ws_bench_attn_run(ws_pool *pool, const ws_bench_attn_cfg *cfg, ws_bench_attn *out,
                      ws_err *err);
/* The figures of R rounds (secs, rsecs, gsecs sorted in place; gsecs NULL: no gather). */
ws_bench_attn_fig ws_bench_attn_figures(int threads, double *secs, double *rsecs, double *gsecs,
                                        int R, size_t read_covered, size_t gather_covered,
                                        double kv_bytes, double flops, double peak_gflops);

#ifdef __cplusplus
}
#endif
#endif
