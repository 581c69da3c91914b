/* cuda_backend: the CUDA implementation of the device backend table (kernels/backend.h).
 *
 * Built by nvcc into bin/libwritescope_cuda.so with the CUDA runtime linked statically,
 * and loaded by kernels/backend.c with dlopen. Without a driver or a device every entry
 * returns "no device" instead of failing to load. A tiny probe kernel is launched when a
 * device exists, so a device whose architecture this build does not cover is reported
 * as such rather than failing later. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"

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

static const ws_backend g_cuda_backend = {
    WS_BACKEND_ABI,
    "cuda",
    cuda_device_count,
    cuda_device_info,
};

extern "C" __attribute__((visibility("default"))) const ws_backend *ws_cuda_backend_entry(void)
{
    return &g_cuda_backend;
}
