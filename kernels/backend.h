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

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_BACKEND_ABI 1 /* bump when ws_backend changes; a stale .so is refused */

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
