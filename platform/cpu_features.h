/* cpu_features: what the CPU this process runs on can do, read with CPUID at run time.
 *
 * Kernels dispatch on these flags (never on compile-time macros alone), so one binary
 * runs on any x86-64 CPU; the calibrator stores them in the host fingerprint. */
#ifndef WS_CPU_FEATURES_H
#define WS_CPU_FEATURES_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ws_cpu_features {
    char model[96];     /* brand string, e.g. "Intel(R) Xeon(R) Gold 5318Y CPU @ 2.10GHz" */
    int logical_cpus;   /* online logical CPUs */
    double mem_bytes;   /* physical memory */
    int avx2, fma, f16c;          /* AVX2 path prerequisites */
    int avx512f, avx512bw, avx512vl; /* AVX-512 foundation */
    int avx512_bf16;    /* VDPBF16PS */
    int avx512_fp16;    /* native fp16 arithmetic */
    int amx_bf16;       /* AMX tiles with bf16 (and OS permission not yet requested) */
    long l3_bytes;      /* last-level cache CPU 0 shares (sysfs, else sysconf), 0 if unknown */
} ws_cpu_features;

/* Fills f once per process (cached); always succeeds, unknown fields stay 0. */
const ws_cpu_features *ws_cpu_features_get(void);
/* A cache size as sysfs writes it ("32768K", "1M", "512") in bytes; 0 if unreadable. */
long ws_cpu_cache_size_parse(const char *s);
/* Space-separated list of the SIMD flags present, e.g. "avx2 fma f16c avx512f ...". */
void ws_cpu_features_isa_string(const ws_cpu_features *f, char *buf, int cap);

#ifdef __cplusplus
}
#endif
#endif
