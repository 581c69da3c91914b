/* gemm_cpu: dense fp32 matrix products on the CPU through the BLAS (OpenBLAS), and the
 * routed expert feed-forward block built on them, y = (silu(x Wg) * (x Wu)) Wd, fp32
 * weights. The calibrator's link-contention load runs it; the runtime's experts and the
 * calibrator's expert sweep run the bf16-weight block of gemm_bf16.h. */
#ifndef WS_GEMM_CPU_H
#define WS_GEMM_CPU_H

#include "ws_err.h"

/* C[m x n] = A[m x k] B[k x n], row-major, fp32. threads <= 0 keeps the BLAS default. */
int ws_gemm_cpu_f32(int m, int n, int k, const float *a, const float *b, float *c, int threads,
                    ws_err *err);

typedef struct ws_expert_f32 {
    int hidden, inter;     /* H, I */
    const float *w_gate_up; /* [H x 2I]: gate columns 0..I-1, up columns I..2I-1 */
    const float *w_down;    /* [I x H] */
} ws_expert_f32;

/* y[m x H] = expert(x[m x H]); scratch holds m x 2I floats. */
int ws_expert_ffn_cpu(const ws_expert_f32 *e, const float *x, float *y, int m, float *scratch,
                      int threads, ws_err *err);
/* Flops and bytes (weights + activations, fp32) of one expert call on m tokens. */
void ws_expert_cost(int hidden, int inter, int m, double *flops, double *bytes);

#endif
