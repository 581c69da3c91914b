/* fingerprint: identifies the machine a calibration ran on, so samples and fits from
 * different hosts never mix. The fingerprint is a hash of the CPU model, logical CPUs,
 * memory (whole GiB), the SIMD instruction path the kernels use, and -- when a CUDA device
 * is present -- its name, compute capability, memory, driver and PCIe link. The profile a
 * calibration produces is named "host:<id>" (and "gpu:<device name>"). */
#ifndef WS_FINGERPRINT_H
#define WS_FINGERPRINT_H

#include "ws_err.h"

typedef struct ws_host_fp {
    char cpu_model[96];
    int cpu_cores;        /* logical CPUs online */
    double mem_bytes;
    char isa[160];        /* SIMD flags present and the path in use */
    int has_gpu;
    char gpu_name[128];
    char gpu_cc[8];       /* "9.0" */
    double gpu_mem_bytes;
    char gpu_driver[16];  /* "12080" */
    char pcie_link[32];   /* "gen4 x16", "" if unknown */
    char id[17];          /* 16 hex digits */
} ws_host_fp;

/* Detects this machine; `isa_path` is the attention kernels' instruction path name. */
int ws_host_fp_detect(const char *isa_path, ws_host_fp *fp, ws_err *err);
/* Recomputes fp->id from the other fields (exposed for tests). */
void ws_host_fp_hash(ws_host_fp *fp);

#endif
