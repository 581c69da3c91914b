/* backend: the device backend table. Each device family (the host CPU, CUDA GPUs)
 * provides one `ws_backend` of function pointers; callers use the table and never
 * `#ifdef` on CUDA.
 *
 * The CPU backend is always linked in. The CUDA backend lives in a separate shared
 * object (bin/libwritescope_cuda.so, built from kernels/cuda/ when nvcc is present) that
 * is loaded with dlopen on first use, so the binary starts on machines with no GPU, no
 * driver and no CUDA runtime; "no device" is an ordinary run-time answer. */
#ifndef WS_BACKEND_H
#define WS_BACKEND_H

#include <stddef.h>

#include "gpu.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_BACKEND_ABI 2 /* bump when ws_backend changes; a stale .so is refused */

typedef struct ws_device_info {
    char name[128];         /* marketing name, e.g. "NVIDIA H200" */
    int cc_major, cc_minor; /* compute capability (GPU), 0 for CPU */
    double mem_bytes;       /* device memory (GPU) or physical memory (CPU) */
    int units;              /* multiprocessors (GPU) or logical CPUs */
    int driver_version;     /* CUDA driver API version, e.g. 12080; 0 if none */
    int runtime_version;    /* CUDA runtime version linked into the backend */
    int pcie_gen, pcie_width; /* current PCIe link, 0 if unknown */
    char pci_bus_id[32];    /* "0000:3b:00.0", empty if unknown */
} ws_device_info;

typedef struct ws_backend {
    int abi;                /* WS_BACKEND_ABI of the code that built this table */
    const char *name;       /* "cpu", "cuda" */
    /* Number of usable devices; 0 with a message in err when none (not an error). */
    int (*device_count)(ws_err *err);
    int (*device_info)(int index, ws_device_info *out, ws_err *err);

    /* ---- GPU operations (ABI 2). The CPU backend leaves every entry below NULL: the host
     * CPU has no separate memory, streams or GPU kernels (its attention lives in attn.h).
     * All of them act on the current device (set_device; device 0 by default) and return
     * 0 or a WS_E* code with a file:line message. Types: gpu.h. ---- */
    int (*set_device)(int index, ws_err *err);
    /* Device memory and pinned (page-locked, not write-combined) host memory. */
    int (*dev_alloc)(size_t bytes, void **out, ws_err *err);
    void (*dev_free)(void *p);
    int (*host_alloc)(size_t bytes, void **out, ws_err *err);
    void (*host_free)(void *p);
    /* Copy in any direction (pointers are classified by the driver); asynchronous on s. */
    int (*copy_async)(void *dst, const void *src, size_t bytes, ws_gpu_stream *s, ws_err *err);
    int (*memset_async)(void *dst, int value, size_t bytes, ws_gpu_stream *s, ws_err *err);
    /* Streams (non-blocking w.r.t. the default stream) and events. */
    int (*stream_create)(ws_gpu_stream **out, ws_err *err);
    void (*stream_destroy)(ws_gpu_stream *s);
    int (*stream_sync)(ws_gpu_stream *s, ws_err *err);
    int (*event_create)(ws_gpu_event **out, ws_err *err);
    void (*event_destroy)(ws_gpu_event *e);
    int (*event_record)(ws_gpu_event *e, ws_gpu_stream *s, ws_err *err);
    int (*stream_wait_event)(ws_gpu_stream *s, ws_gpu_event *e, ws_err *err);
    int (*event_sync)(ws_gpu_event *e, ws_err *err);
    int (*event_elapsed_ms)(ws_gpu_event *start, ws_gpu_event *end, double *ms, ws_err *err);

    /* Decode attention (attn.h contract) with flash-decoding split-K and an lse reduction.
     * In the problem, page addresses, q, o and lse are DEVICE pointers (pages in a D-window,
     * a ping-pong half or any device buffer); seqs and the page-table arrays are host
     * memory. Sparse `sel` lists are not supported on the GPU (WS_EUNSUP). The workspace
     * holds the split-K partials and the staged page table: no allocation per call; the
     * next call overwrites them, so calls sharing a workspace must share a stream. */
    int (*attn_create)(const ws_gpu_attn_limits *lim, ws_gpu_attn **out, ws_err *err);
    void (*attn_destroy)(ws_gpu_attn *a);
    int (*attn_run)(ws_gpu_attn *a, const ws_attn_problem *p, const ws_gpu_attn_opts *opts,
                    ws_gpu_stream *s, ws_gpu_attn_stats *stats, ws_err *err);
    /* ws_attn_merge on the device (all pointers device; out may alias a). */
    int (*attn_merge)(const float *o_a, const float *lse_a, const float *o_b, const float *lse_b,
                      float *o_out, float *lse_out, int n_rows, int d_v, ws_gpu_stream *s,
                      ws_err *err);

    /* Streaming engine: pinned XFER pages -> ping-pong halves, one DMA per page on the
     * engine's own copy stream. Protocol per layer: xfer_submit (returns the half and the
     * landing addresses to put in the page table), xfer_acquire (compute stream waits for
     * the copies), the attention, xfer_release (the half may be overwritten once the
     * compute stream gets there). Submitting into a half not yet released is an error. */
    int (*xfer_create)(const ws_gpu_xfer_config *cfg, ws_gpu_xfer **out, ws_err *err);
    void (*xfer_destroy)(ws_gpu_xfer *x);
    int (*xfer_submit)(ws_gpu_xfer *x, const void *const *host_pages, int n_pages, long tag,
                       const void **dev_pages, int *half, ws_err *err);
    int (*xfer_acquire)(ws_gpu_xfer *x, int half, ws_gpu_stream *compute, ws_err *err);
    int (*xfer_release)(ws_gpu_xfer *x, int half, ws_gpu_stream *compute, ws_err *err);

    /* D-windows: dwin_append writes one new token per listed sequence (k_new
     * [n][n_kv_heads][d_k], v_new [n][n_kv_heads][d_v] device, KV dtype; v_new unused when V
     * shares K) into ring (layer, seqs[i]), on s; a full ring is an error (flush first).
     * dwin_pages gives the page table (device addresses, oldest first) and token count to
     * attend ring (layer, seq) in place. dwin_flush copies the oldest full pages of each
     * request to its host destinations in one batch on the D2H stream after the work
     * already queued on s; slots are reused only after the copies (appends wait for them).
     * dwin_flush_wait blocks the host until every flush has landed. */
    int (*dwin_create)(const ws_gpu_dwin_config *cfg, ws_gpu_dwin **out, ws_err *err);
    void (*dwin_destroy)(ws_gpu_dwin *d);
    int (*dwin_append)(ws_gpu_dwin *d, int layer, const int *seqs, int n, const void *k_new,
                       const void *v_new, ws_gpu_stream *s, ws_err *err);
    int (*dwin_pages)(ws_gpu_dwin *d, int layer, int seq, const void **pages, int *n_tokens,
                      ws_err *err);
    int (*dwin_flush)(ws_gpu_dwin *d, const ws_gpu_dwin_flush *req, int n_req,
                      ws_gpu_stream *s, ws_err *err);
    int (*dwin_flush_wait)(ws_gpu_dwin *d, ws_err *err);

    /* GEMM through cuBLAS (fp32 accumulate). */
    int (*blas_create)(ws_gpu_blas **out, ws_err *err);
    void (*blas_destroy)(ws_gpu_blas *b);
    int (*gemm)(ws_gpu_blas *b, const ws_gemm_problem *g, ws_gpu_stream *s, ws_err *err);

    /* Copy bandwidth probe: median over `reps` timed copies of `bytes` (after one warm-up),
     * in bytes per second (D2D counts read + write). Allocates its own buffers. */
    int (*copy_bandwidth)(ws_gpu_copy_kind kind, size_t bytes, int reps, double *bytes_per_s,
                          ws_err *err);
} ws_backend;

/* The host CPU backend; never NULL. */
const ws_backend *ws_backend_cpu(void);
/* The CUDA backend, loading its shared object on first call. Returns NULL with the
 * reason in err when this build has no CUDA backend or it cannot be loaded. A loaded
 * backend may still report 0 devices. $WRITESCOPE_CUDA_LIB overrides the .so path. */
const ws_backend *ws_backend_cuda(ws_err *err);

/* Symbol the CUDA shared object exports. */
typedef const ws_backend *(*ws_backend_entry_fn)(void);
#define WS_CUDA_ENTRY_SYMBOL "ws_cuda_backend_entry"

#ifdef __cplusplus
}
#endif
#endif
