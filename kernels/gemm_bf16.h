/* gemm_bf16: the routed experts' feed-forward block with bf16 weights on the CPU,
 * y = (silu(x Wg) * (x Wu)) Wd, fp32 activations in and out. The runtime runs each decode
 * step's CPU experts through it and the calibrator times it (cpu.expert_gemm.bf16), so the
 * cost model predicts the very code that runs.
 *
 * Three backends, in a table: oneDNN's matmul (bf16 source and weights, fp32 result; x and
 * the hidden activations are rounded to bf16 for it), OpenBLAS's cblas_sbgemm where the
 * linked OpenBLAS exports it (Debian's does not: it is looked up at run time, never
 * assumed), and fp32 sgemm on weights widened from bf16 panel by panel (no fp32 copy of an
 * expert is kept). Which is fastest depends on the CPU and the shape, not on the vendor,
 * so the first call at a shape class (hidden, inter, threads, m rounded up to a power of
 * two) times every present backend on that call's data and keeps the fastest for the
 * class; ws_gemm_bf16_backend_name() says which. oneDNN primitives are costly to create:
 * they are cached by (m, hidden, inter, threads) per calling thread. Scratch (bf16 copies of x and h, the
 * gate/up product) is per calling thread, grown on demand.
 *
 * Every backend runs on `threads` OpenMP threads (the OpenBLAS ones call the BLAS
 * single-threaded per panel of output columns): two libraries' worker pools on the same
 * cores stall each other. Calls are thread-safe and run concurrently: each calling thread
 * has its own oneDNN stream and primitives, with their own scratchpads (up to 32 threads;
 * more share slots under a lock). ws_gemm_bf16_release() frees the primitives, the probe's
 * choices and the calling thread's scratch (OpenMP workers keep their panels). */
#ifndef WS_GEMM_BF16_H
#define WS_GEMM_BF16_H

#include <stdint.h>

#include "ws_err.h"

/* Weights as checkpoints store a linear layer, [out x in] (nn.Linear): each output's inputs
 * contiguous, so a decode step's few tokens stream every weight row once, front to back
 * (the [in x out] layout reads them across rows at ~0.4-0.6x the bandwidth here:
 * docs/notes/expert-gemm.md). */
typedef struct ws_expert_bf16 {
    int hidden, inter;         /* H, I */
    const uint16_t *w_gate_up; /* [2I x H] bf16: gate rows 0..I-1, up rows I..2I-1 */
    const uint16_t *w_down;    /* [H x I] bf16 */
} ws_expert_bf16;

typedef enum ws_gemm_bf16_backend {
    WS_GEMM_BF16_AUTO = -1,  /* the fastest for the shape class, probed at first use */
    WS_GEMM_BF16_ONEDNN = 0, /* oneDNN matmul, bf16 x bf16 -> fp32 */
    WS_GEMM_BF16_SBGEMM,     /* OpenBLAS cblas_sbgemm, when the library exports it */
    WS_GEMM_BF16_FP32,       /* bf16 weights widened per panel, OpenBLAS sgemm */
    WS_GEMM_BF16_N
} ws_gemm_bf16_backend;

/* y[m x H] = expert(x[m x H]) through the backend chosen for the shape class. threads <= 0:
 * the libraries' defaults. */
int ws_expert_ffn_bf16(const ws_expert_bf16 *e, const float *x, float *y, int m, int threads,
                       ws_err *err);
/* The same through one backend (WS_EUNSUPPORTED when it is absent). */
int ws_expert_ffn_bf16_with(ws_gemm_bf16_backend b, const ws_expert_bf16 *e, const float *x,
                            float *y, int m, int threads, ws_err *err);

/* 1 when backend b can run here. */
int ws_gemm_bf16_present(ws_gemm_bf16_backend b);
/* "onednn", "sbgemm", "fp32"; "auto" for WS_GEMM_BF16_AUTO. */
const char *ws_gemm_bf16_label(ws_gemm_bf16_backend b);
/* The backend chosen for the shape class of (hidden, inter, m, threads): its label, or
 * "unprobed" before the first call at that class. */
const char *ws_gemm_bf16_backend_name(int hidden, int inter, int m, int threads);
/* Frees the primitive cache, the probe's choices and the calling thread's scratch. */
void ws_gemm_bf16_release(void);

/* Flops and bytes of one call on m tokens: bf16 weights (2 B) plus the fp32 activations
 * (x, y, gate|up, h: 4 B), the terms runtime/cost.c uses for the CPU experts. */
void ws_expert_bf16_cost(int hidden, int inter, int m, double *flops, double *bytes);

/* h[r][j] = silu(gu[r][j]) * gu[r][I + j] in fp32, gu [m x 2I] (gate | up), h [m x I]: the
 * gate of every backend (vectorised exp), shared with the int8 FFN (gemm_int8.h). */
void ws_expert_silu_mul(const float *gu, int m, int inter, float *h, int threads);


#endif
