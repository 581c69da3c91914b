/* cuda_util: what the CUDA backend's .cu files share: error macros that turn a failed
 * CUDA runtime call into a ws_err message carrying __FILE__:__LINE__ and the call's
 * text, the handle casts between the opaque gpu.h types and CUDA's, and the entry points
 * each module contributes to the backend table (cuda_backend.cu assembles it). Internal
 * to kernels/cuda/: nothing outside includes it. */
#ifndef WS_CUDA_UTIL_H
#define WS_CUDA_UTIL_H

#include <cuda_runtime.h>

#include "backend.h"

/* Returns from the enclosing function with WS_EDEVICE and "file:line: call: reason". */
#define WS_CU(err, call)                                                                     \
    do {                                                                                     \
        cudaError_t rc_ = (call);                                                            \
        if (rc_ != cudaSuccess)                                                              \
            return ws_err_set(err, WS_EDEVICE, "%s:%d: %s: %s", __FILE__, __LINE__, #call,   \
                              cudaGetErrorString(rc_));                                      \
    } while (0)

/* The same for a kernel launch just made (launch errors are reported by the next call). */
#define WS_CU_LAUNCH(err, what)                                                              \
    do {                                                                                     \
        cudaError_t rc_ = cudaGetLastError();                                                \
        if (rc_ != cudaSuccess)                                                              \
            return ws_err_set(err, WS_EDEVICE, "%s:%d: launch of %s: %s", __FILE__,          \
                              __LINE__, what, cudaGetErrorString(rc_));                      \
    } while (0)

static inline cudaStream_t cu_stream(ws_gpu_stream *s) { return (cudaStream_t)s; }
static inline cudaEvent_t cu_event(ws_gpu_event *e) { return (cudaEvent_t)e; }

/* Compute capability of the current device as 10*major + minor; 0 on failure. */
int cu_current_cc(void);

/* cuda_attn.cu */
int cu_attn_create(const ws_gpu_attn_limits *lim, ws_gpu_attn **out, ws_err *err);
void cu_attn_destroy(ws_gpu_attn *a);
int cu_attn_run(ws_gpu_attn *a, const ws_attn_problem *p, const ws_gpu_attn_opts *opts,
                ws_gpu_stream *s, ws_gpu_attn_stats *stats, ws_err *err);
int cu_attn_merge(const float *o_a, const float *lse_a, const float *o_b, const float *lse_b,
                  float *o_out, float *lse_out, int n_rows, int d_v, ws_gpu_stream *s,
                  ws_err *err);

/* cuda_stream.cu */
int cu_xfer_create(const ws_gpu_xfer_config *cfg, ws_gpu_xfer **out, ws_err *err);
void cu_xfer_destroy(ws_gpu_xfer *x);
int cu_xfer_submit(ws_gpu_xfer *x, const void *const *host_pages, int n_pages, long tag,
                   const void **dev_pages, int *half, ws_err *err);
int cu_xfer_acquire(ws_gpu_xfer *x, int half, ws_gpu_stream *compute, ws_err *err);
int cu_xfer_release(ws_gpu_xfer *x, int half, ws_gpu_stream *compute, ws_err *err);
int cu_dwin_create(const ws_gpu_dwin_config *cfg, ws_gpu_dwin **out, ws_err *err);
void cu_dwin_destroy(ws_gpu_dwin *d);
int cu_dwin_append(ws_gpu_dwin *d, int layer, const int *seqs, int n, const void *k_new,
                   const void *v_new, ws_gpu_stream *s, ws_err *err);
int cu_dwin_pages(ws_gpu_dwin *d, int layer, int seq, const void **pages, int *n_tokens,
                  ws_err *err);
int cu_dwin_flush(ws_gpu_dwin *d, const ws_gpu_dwin_flush *req, int n_req, ws_gpu_stream *s,
                  ws_err *err);
int cu_dwin_flush_wait(ws_gpu_dwin *d, ws_err *err);

/* cuda_gemm.cu */
int cu_blas_create(ws_gpu_blas **out, ws_err *err);
void cu_blas_destroy(ws_gpu_blas *b);
int cu_gemm(ws_gpu_blas *b, const ws_gemm_problem *g, ws_gpu_stream *s, ws_err *err);

#endif
