/* cuda_backend: the CUDA implementation of the device backend table (kernels/backend.h):
 * device query, memory, streams and events, copy-bandwidth probes, and the table that
 * gathers the entries of cuda_attn.cu, cuda_stream.cu and cuda_gemm.cu.
 *
 * Built by nvcc into bin/libwritescope_cuda.so with the CUDA runtime linked statically
 * (cuBLAS dynamically, see cuda_gemm.cu), and loaded by kernels/backend.c with dlopen.
 * Without a driver or a device every entry returns "no device" instead of failing to
 * load. A tiny probe kernel is launched when a device exists, so a device whose
 * architecture this build does not cover is reported as such rather than failing later. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_util.h"

#define CUDA_MSG(err, call, rc)                                                          \
    ws_err_set(err, WS_EDEVICE, "%s:%d: %s: %s", __FILE__, __LINE__, call,               \
               cudaGetErrorString(rc))

__global__ void ws_probe_kernel(int *out) { *out = 42; }

/* Launches the probe on the current device: proves this build has code for its arch. */
static int probe_arch(ws_err *err)
{
    int *d = NULL, h = 0;
    cudaError_t rc = cudaMalloc(&d, sizeof(int));
    if (rc != cudaSuccess)
        return CUDA_MSG(err, "cudaMalloc", rc);
    ws_probe_kernel<<<1, 1>>>(d);
    rc = cudaGetLastError();
    if (rc == cudaSuccess)
        rc = cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(d);
    if (rc != cudaSuccess)
        return CUDA_MSG(err, "probe kernel", rc);
    if (h != 42)
        return ws_err_set(err, WS_EDEVICE, "probe kernel wrote %d, expected 42", h);
    return 0;
}

static int cuda_device_count(ws_err *err)
{
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess) {
        CUDA_MSG(err, "cudaGetDeviceCount", rc);
        cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
        return 0;
    }
    if (n == 0)
        ws_err_set(err, WS_EDEVICE, "no CUDA device");
    return n;
}

static int cuda_device_info(int index, ws_device_info *out, ws_err *err)
{
    cudaDeviceProp p;
    cudaError_t rc = cudaGetDeviceProperties(&p, index);
    if (rc != cudaSuccess)
        return CUDA_MSG(err, "cudaGetDeviceProperties", rc);
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%.127s", p.name);
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->mem_bytes = (double)p.totalGlobalMem;
    out->units = p.multiProcessorCount;
    cudaDriverGetVersion(&out->driver_version);
    cudaRuntimeGetVersion(&out->runtime_version);
    snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%04x:%02x:%02x.0", p.pciDomainID,
             p.pciBusID, p.pciDeviceID);
    rc = cudaSetDevice(index);
    if (rc != cudaSuccess)
        return CUDA_MSG(err, "cudaSetDevice", rc);
    return probe_arch(err);
}

static int cuda_set_device(int index, ws_err *err)
{
    WS_CU(err, cudaSetDevice(index));
    return 0;
}

static int cuda_dev_alloc(size_t bytes, void **out, ws_err *err)
{
    *out = NULL;
    cudaError_t rc = cudaMalloc(out, bytes);
    if (rc != cudaSuccess)
        return ws_err_set(err, rc == cudaErrorMemoryAllocation ? WS_ENOMEM : WS_EDEVICE,
                          "%s:%d: cudaMalloc(%zu bytes): %s", __FILE__, __LINE__, bytes,
                          cudaGetErrorString(rc));
    return 0;
}

static void cuda_dev_free(void *p) { cudaFree(p); }

static int cuda_host_alloc(size_t bytes, void **out, ws_err *err)
{
    *out = NULL;
    /* Default flags: page-locked, cached (not write-combined: the CPU also reads it). */
    cudaError_t rc = cudaHostAlloc(out, bytes, cudaHostAllocDefault);
    if (rc != cudaSuccess)
        return ws_err_set(err, rc == cudaErrorMemoryAllocation ? WS_ENOMEM : WS_EDEVICE,
                          "%s:%d: cudaHostAlloc(%zu bytes): %s", __FILE__, __LINE__, bytes,
                          cudaGetErrorString(rc));
    return 0;
}

static void cuda_host_free(void *p) { cudaFreeHost(p); }

static int cuda_copy_async(void *dst, const void *src, size_t bytes, ws_gpu_stream *s,
                           ws_err *err)
{
    WS_CU(err, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cu_stream(s)));
    return 0;
}

static int cuda_memset_async(void *dst, int value, size_t bytes, ws_gpu_stream *s, ws_err *err)
{
    WS_CU(err, cudaMemsetAsync(dst, value, bytes, cu_stream(s)));
    return 0;
}

static int cuda_stream_create(ws_gpu_stream **out, ws_err *err)
{
    cudaStream_t st = NULL;
    *out = NULL;
    WS_CU(err, cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    *out = (ws_gpu_stream *)st;
    return 0;
}

static void cuda_stream_destroy(ws_gpu_stream *s)
{
    if (s)
        cudaStreamDestroy(cu_stream(s));
}

static int cuda_stream_sync(ws_gpu_stream *s, ws_err *err)
{
    WS_CU(err, cudaStreamSynchronize(cu_stream(s)));
    return 0;
}

static int cuda_event_create(ws_gpu_event **out, ws_err *err)
{
    cudaEvent_t e = NULL;
    *out = NULL;
    WS_CU(err, cudaEventCreate(&e));
    *out = (ws_gpu_event *)e;
    return 0;
}

static void cuda_event_destroy(ws_gpu_event *e)
{
    if (e)
        cudaEventDestroy(cu_event(e));
}

static int cuda_event_record(ws_gpu_event *e, ws_gpu_stream *s, ws_err *err)
{
    WS_CU(err, cudaEventRecord(cu_event(e), cu_stream(s)));
    return 0;
}

static int cuda_stream_wait_event(ws_gpu_stream *s, ws_gpu_event *e, ws_err *err)
{
    WS_CU(err, cudaStreamWaitEvent(cu_stream(s), cu_event(e), 0));
    return 0;
}

static int cuda_event_sync(ws_gpu_event *e, ws_err *err)
{
    WS_CU(err, cudaEventSynchronize(cu_event(e)));
    return 0;
}

static int cuda_event_elapsed_ms(ws_gpu_event *start, ws_gpu_event *end, double *ms, ws_err *err)
{
    float f = 0;
    WS_CU(err, cudaEventElapsedTime(&f, cu_event(start), cu_event(end)));
    *ms = f;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Times `reps` copies of `bytes` (after one warm-up) with events; the median rate. */
static int cuda_copy_bandwidth(ws_gpu_copy_kind kind, size_t bytes, int reps, double *bytes_per_s,
                               ws_err *err)
{
    if (bytes == 0 || reps <= 0 || reps > 1000)
        return ws_err_set(err, WS_EINVAL, "copy bandwidth: %zu bytes, %d repetitions", bytes, reps);
    void *src = NULL, *dst = NULL;
    cudaStream_t st = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double ms[1000];
    cudaMemcpyKind k = kind == WS_COPY_H2D   ? cudaMemcpyHostToDevice
                       : kind == WS_COPY_D2H ? cudaMemcpyDeviceToHost
                                             : cudaMemcpyDeviceToDevice;
    cudaError_t rc = kind == WS_COPY_H2D ? cudaHostAlloc(&src, bytes, cudaHostAllocDefault)
                                         : cudaMalloc(&src, bytes);
    const char *what = "allocation";
    if (rc == cudaSuccess)
        rc = kind == WS_COPY_D2H ? cudaHostAlloc(&dst, bytes, cudaHostAllocDefault)
                                 : cudaMalloc(&dst, bytes);
    if (rc == cudaSuccess)
        rc = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    if (rc == cudaSuccess)
        rc = cudaEventCreate(&e0);
    if (rc == cudaSuccess)
        rc = cudaEventCreate(&e1);
    if (rc == cudaSuccess) {
        what = "cudaMemset";
        rc = kind == WS_COPY_H2D ? (memset(src, 1, bytes), cudaSuccess) : cudaMemset(src, 1, bytes);
    }
    for (int i = -1; i < reps && rc == cudaSuccess; i++) {
        what = "timed cudaMemcpyAsync";
        rc = cudaEventRecord(e0, st);
        if (rc == cudaSuccess)
            rc = cudaMemcpyAsync(dst, src, bytes, k, st);
        if (rc == cudaSuccess)
            rc = cudaEventRecord(e1, st);
        if (rc == cudaSuccess)
            rc = cudaEventSynchronize(e1);
        float f = 0;
        if (rc == cudaSuccess)
            rc = cudaEventElapsedTime(&f, e0, e1);
        if (i >= 0)
            ms[i] = f;
    }
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    if (st)
        cudaStreamDestroy(st);
    if (kind == WS_COPY_H2D)
        cudaFreeHost(src);
    else
        cudaFree(src);
    if (kind == WS_COPY_D2H)
        cudaFreeHost(dst);
    else
        cudaFree(dst);
    if (rc != cudaSuccess)
        return ws_err_set(err, WS_EDEVICE, "%s:%d: copy bandwidth: %s: %s", __FILE__, __LINE__,
                          what, cudaGetErrorString(rc));
    qsort(ms, (size_t)reps, sizeof ms[0], cmp_double);
    double med = ms[reps / 2];
    if (med <= 0)
        return ws_err_set(err, WS_EDEVICE, "copy bandwidth: timer resolution too coarse for %zu bytes",
                          bytes);
    *bytes_per_s = (kind == WS_COPY_D2D ? 2.0 : 1.0) * (double)bytes / (med * 1e-3);
    return 0;
}

/* Filled field by field so that the table follows backend.h whatever order it grows in. */
static ws_backend make_table(void)
{
    ws_backend b;
    memset(&b, 0, sizeof b);
    b.abi = WS_BACKEND_ABI;
    b.name = "cuda";
    b.device_count = cuda_device_count;
    b.device_info = cuda_device_info;
    b.set_device = cuda_set_device;
    b.dev_alloc = cuda_dev_alloc;
    b.dev_free = cuda_dev_free;
    b.host_alloc = cuda_host_alloc;
    b.host_free = cuda_host_free;
    b.copy_async = cuda_copy_async;
    b.memset_async = cuda_memset_async;
    b.stream_create = cuda_stream_create;
    b.stream_destroy = cuda_stream_destroy;
    b.stream_sync = cuda_stream_sync;
    b.event_create = cuda_event_create;
    b.event_destroy = cuda_event_destroy;
    b.event_record = cuda_event_record;
    b.stream_wait_event = cuda_stream_wait_event;
    b.event_sync = cuda_event_sync;
    b.event_elapsed_ms = cuda_event_elapsed_ms;
    b.attn_create = cu_attn_create;
    b.attn_destroy = cu_attn_destroy;
    b.attn_run = cu_attn_run;
    b.attn_merge = cu_attn_merge;
    b.xfer_create = cu_xfer_create;
    b.xfer_destroy = cu_xfer_destroy;
    b.xfer_submit = cu_xfer_submit;
    b.xfer_acquire = cu_xfer_acquire;
    b.xfer_release = cu_xfer_release;
    b.dwin_create = cu_dwin_create;
    b.dwin_destroy = cu_dwin_destroy;
    b.dwin_append = cu_dwin_append;
    b.dwin_pages = cu_dwin_pages;
    b.dwin_flush = cu_dwin_flush;
    b.dwin_flush_wait = cu_dwin_flush_wait;
    b.blas_create = cu_blas_create;
    b.blas_destroy = cu_blas_destroy;
    b.gemm = cu_gemm;
    b.copy_bandwidth = cuda_copy_bandwidth;
    return b;
}

static const ws_backend g_cuda_backend = make_table();

extern "C" __attribute__((visibility("default"))) const ws_backend *ws_cuda_backend_entry(void)
{
    return &g_cuda_backend;
}
