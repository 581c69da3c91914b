/* gemm_cpu: BLAS-backed GEMM and expert FFN (see gemm_cpu.h). */
#include "gemm_cpu.h"

#include <cblas.h>
#include <math.h>

int ws_gemm_cpu_f32(int m, int n, int k, const float *a, const float *b, float *c, int threads,
                    ws_err *err)
{
    if (m <= 0 || n <= 0 || k <= 0 || !a || !b || !c)
        return ws_err_set(err, WS_EINVAL, "gemm: bad shape %dx%dx%d or NULL operand", m, n, k);
    if (threads > 0)
        openblas_set_num_threads(threads);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    return 0;
}

int ws_expert_ffn_cpu(const ws_expert_f32 *e, const float *x, float *y, int m, float *scratch,
                      int threads, ws_err *err)
{
    const int hd = e->hidden, in = e->inter; /* not H/I: cblas.h pulls in <complex.h>'s I */
    int rc = ws_gemm_cpu_f32(m, 2 * in, hd, x, e->w_gate_up, scratch, threads, err);
    if (rc)
        return rc;
    /* h = silu(gate) * up, written over the gate half, rows packed to stride I. */
    for (int r = 0; r < m; r++) {
        float *row = scratch + (size_t)r * 2 * in, *out = scratch + (size_t)r * in;
        for (int j = 0; j < in; j++) {
            float g = row[j], u = row[in + j];
            out[j] = g / (1.0f + expf(-g)) * u;
        }
    }
    return ws_gemm_cpu_f32(m, hd, in, scratch, e->w_down, y, threads, err);
}

void ws_expert_cost(int hidden, int inter, int m, double *flops, double *bytes)
{
    const double hd = hidden, in = inter, tok = m;
    *flops = 2.0 * tok * hd * in * 3.0 + 4.0 * tok * in; /* three GEMMs + silu/product */
    *bytes = 4.0 * (3.0 * hd * in + tok * (2.0 * hd + 4.0 * in));
}
