/* cuda_gemm: the GEMM wrapper over cuBLAS (cublasGemmEx, fp32 accumulation) for the
 * expert and dense shapes the calibrator and the runtime time. Row-major C = A B (or
 * A B^T for [out][in] weights) is computed as the column-major C^T = B^T A^T, so no
 * operand is copied or transposed. bf16 needs compute capability 8.0+; on V100 use fp16.
 * cuBLAS is linked dynamically (libcublas.so from the toolkit the backend was built
 * with, found through the .so's rpath); every cuBLAS failure becomes a ws_err with
 * file:line, the call and cuBLAS's own name and description of the status. */
#include <cublas_v2.h>
#include <stdlib.h>

#include "cuda_util.h"

#define WS_CUBLAS(err, call)                                                                 \
    do {                                                                                     \
        cublasStatus_t st_ = (call);                                                         \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                                    \
            return ws_err_set(err, WS_EDEVICE, "%s:%d: %s: %s (%s)", __FILE__, __LINE__,     \
                              #call, cublasGetStatusName(st_), cublasGetStatusString(st_));  \
    } while (0)

struct ws_gpu_blas {
    cublasHandle_t h;
    int cc;
};

int cu_blas_create(ws_gpu_blas **out, ws_err *err)
{
    *out = NULL;
    ws_gpu_blas *b = (ws_gpu_blas *)calloc(1, sizeof *b);
    if (!b)
        return ws_err_set(err, WS_ENOMEM, "cuBLAS: out of memory");
    cublasStatus_t st = cublasCreate(&b->h);
    if (st != CUBLAS_STATUS_SUCCESS) {
        free(b);
        return ws_err_set(err, WS_EDEVICE, "%s:%d: cublasCreate: %s (%s)", __FILE__, __LINE__,
                          cublasGetStatusName(st), cublasGetStatusString(st));
    }
    b->cc = cu_current_cc();
    *out = b;
    return 0;
}

void cu_blas_destroy(ws_gpu_blas *b)
{
    if (!b)
        return;
    cublasDestroy(b->h);
    free(b);
}

int cu_gemm(ws_gpu_blas *b, const ws_gemm_problem *g, ws_gpu_stream *s, ws_err *err)
{
    if (g->m <= 0 || g->n <= 0 || g->k <= 0 || !g->a || !g->b || !g->c)
        return ws_err_set(err, WS_EINVAL, "GEMM: m=%d n=%d k=%d must be positive, A/B/C non-NULL",
                          g->m, g->n, g->k);
    if (g->ab_dtype != WS_DT_BF16 && g->ab_dtype != WS_DT_FP16)
        return ws_err_set(err, WS_EUNSUP, "GEMM: inputs must be bf16 or fp16, not %s",
                          ws_dtype_name(g->ab_dtype));
    if (g->c_dtype != WS_DT_FP32 && g->c_dtype != g->ab_dtype)
        return ws_err_set(err, WS_EUNSUP, "GEMM: output %s must be fp32 or the input type %s",
                          ws_dtype_name(g->c_dtype), ws_dtype_name(g->ab_dtype));
    if (g->ab_dtype == WS_DT_BF16 && b->cc < 80)
        return ws_err_set(err, WS_EUNSUP,
                          "GEMM: bf16 needs compute capability 8.0+ (device is %d.%d); use fp16",
                          b->cc / 10, b->cc % 10);
    const cudaDataType ab = g->ab_dtype == WS_DT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const cudaDataType ct = g->c_dtype == WS_DT_FP32 ? CUDA_R_32F : ab;
    WS_CUBLAS(err, cublasSetStream(b->h, cu_stream(s)));
    WS_CUBLAS(err, cublasGemmEx(b->h, g->b_trans ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, g->n,
                                g->m, g->k, &g->alpha, g->b, ab, g->b_trans ? g->k : g->n, g->a,
                                ab, g->k, &g->beta, g->c, ct, g->n, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
    return 0;
}
