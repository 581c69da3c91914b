/* gpu: the types of the GPU operations in the device backend table (backend.h): opaque
 * handles for streams, events and the stateful GPU engines (attention workspace, ping-pong
 * streaming engine, D-window), and the plain-C descriptions of their configurations and of
 * a GEMM. No CUDA header is needed to use them: the CUDA backend (kernels/cuda/) is the only
 * code that knows what is behind the handles.
 *
 * Memory conventions: "device" pointers come from the backend's dev_alloc (or are inside a
 * D-window / ping-pong buffer); "pinned" pointers from host_alloc. Asynchronous copies from
 * or to pageable host memory work but are not asynchronous; the XFER region must be pinned.
 * A NULL ws_gpu_stream means the device's default stream. Callers: runtime, calibrator,
 * tests/test_gpu.c, tests/gpu/bench_gpu.c. */
#ifndef WS_GPU_H
#define WS_GPU_H

#include <stddef.h>

#include "attn.h"
#include "ws_dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ws_gpu_stream ws_gpu_stream; /* an ordered queue of device work */
typedef struct ws_gpu_event ws_gpu_event;   /* a marker recorded in a stream (timing-capable) */
typedef struct ws_gpu_attn ws_gpu_attn;     /* attention workspace: split-K partials, staging */
typedef struct ws_gpu_xfer ws_gpu_xfer;     /* ping-pong streaming engine for XFER pages */
typedef struct ws_gpu_dwin ws_gpu_dwin;     /* D-windows: per-(layer, sequence) rings on the GPU */
typedef struct ws_gpu_blas ws_gpu_blas;     /* a cuBLAS handle */

/* Upper bounds an attention workspace is sized for; attn_run refuses larger problems. */
typedef struct ws_gpu_attn_limits {
    int max_seqs;      /* sequences per call */
    int max_pages;     /* pages over all sequences of one call */
    int max_q_heads;   /* query heads */
    int max_d_v;       /* value width */
    int max_chunks;    /* split-K chunks over all sequences of one call (0: 4096) */
} ws_gpu_attn_limits;

/* Optional knobs of one attention call; NULL = automatic. */
typedef struct ws_gpu_attn_opts {
    int chunk_tokens;  /* split-K chunk length in tokens; 0 = chosen from the problem and
                          the device; rounded up to the kernel's tile */
} ws_gpu_attn_opts;

/* What a call did (for tests and benchmarks). */
typedef struct ws_gpu_attn_stats {
    int chunk_tokens;  /* chunk length used */
    int n_chunks;      /* chunks over all sequences */
    int tile_tokens;   /* tokens per shared-memory tile */
    int second_pass;   /* 1 if the lse reduction kernel ran */
} ws_gpu_attn_stats;

/* Ping-pong streaming engine: two halves of pages_per_half landing slots of page_bytes. */
typedef struct ws_gpu_xfer_config {
    size_t page_bytes;   /* bytes of one XFER page (ws_kv_page_bytes) */
    int pages_per_half;  /* landing slots per half: the most pages one layer streams */
} ws_gpu_xfer_config;

/* D-windows: one ring of `window` tokens for each (layer, sequence). */
typedef struct ws_gpu_dwin_config {
    ws_kv_layout kv;     /* page layout; window must be a multiple of kv.page_tokens */
    int window;          /* W, tokens per ring */
    int n_layers;
    int max_seqs;
} ws_gpu_dwin_config;

/* One flush request: the oldest n_pages full pages of ring (layer, seq) go to dst[i]
 * (host addresses, each one page; pinned for an asynchronous copy). */
typedef struct ws_gpu_dwin_flush {
    int layer, seq, n_pages;
    void *const *dst;
} ws_gpu_dwin_flush;

/* C[m][n] = alpha * A[m][k] B + beta * C, row-major; B is [k][n], or [n][k] used
 * transposed when b_trans (weights stored as [out][in]). A and B share the 16-bit dtype
 * (bf16 or fp16); C is fp32 or the same 16-bit dtype; accumulation is fp32. */
typedef struct ws_gemm_problem {
    int m, n, k;
    ws_dtype ab_dtype;   /* WS_DT_BF16 or WS_DT_FP16 (bf16 needs compute capability >= 8.0) */
    ws_dtype c_dtype;    /* WS_DT_FP32 or ab_dtype */
    int b_trans;
    float alpha, beta;
    const void *a, *b;   /* device */
    void *c;             /* device */
} ws_gemm_problem;

typedef enum ws_gpu_copy_kind {
    WS_COPY_H2D = 0, /* pinned host -> device */
    WS_COPY_D2H = 1, /* device -> pinned host */
    WS_COPY_D2D = 2, /* device -> device (reports read + write traffic: 2 bytes per byte) */
} ws_gpu_copy_kind;

#ifdef __cplusplus
}
#endif
#endif
