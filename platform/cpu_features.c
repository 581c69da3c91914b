/* cpu_features: see cpu_features.h. */
#include "cpu_features.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ws_cpu_features g_feat;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static unsigned long long xgetbv0(void)
{
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

long ws_cpu_cache_size_parse(const char *s)
{
    char *end;
    const long v = s ? strtol(s, &end, 10) : 0;
    if (!s || end == s || v <= 0)
        return 0;
    const long mul = *end == 'K' ? 1L << 10 : *end == 'M' ? 1L << 20 : *end == 'G' ? 1L << 30 : 1;
    if (mul > 1)
        end++;
    return (*end == '\0' || *end == '\n') && v <= (1L << 50) / mul ? v * mul : 0;
}

/* The highest-level cache CPU 0 has, from sysfs: the cache this process's threads share.
 * glibc's sysconf(_SC_LEVEL3_CACHE_SIZE) can report a whole socket's L3 instead (an AMD
 * EPYC VM of 2 vCPUs: 384 MiB where sysfs, and the CCD its vCPUs share, give 32 MiB).
 * Falls back to sysconf where sysfs says nothing. */
static long llc_bytes(void)
{
    long best = 0;
    int best_level = 0;
    for (int i = 0; i < 16; i++) {
        char path[96], buf[32];
        int level = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *fp = fopen(path, "r");
        if (!fp)
            break;
        const int ok = fscanf(fp, "%d", &level) == 1;
        fclose(fp);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!ok || !(fp = fopen(path, "r")))
            continue;
        const long size = fgets(buf, sizeof buf, fp) ? ws_cpu_cache_size_parse(buf) : 0;
        fclose(fp);
        if (level > best_level && size > 0)
            best = size, best_level = level;
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (best == 0) {
        const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
        best = l3 > 0 ? l3 : 0;
    }
#endif
    return best;
}

static void detect(void)
{
    ws_cpu_features *f = &g_feat;
    unsigned a, b, c, d;
    unsigned max_leaf = __get_cpuid_max(0, NULL);
    int osxsave = 0, avx_os = 0, avx512_os = 0;
    if (max_leaf >= 1) {
        __cpuid(1, a, b, c, d);
        f->fma = (c >> 12) & 1;
        f->f16c = (c >> 29) & 1;
        osxsave = (c >> 27) & 1;
        if (osxsave) {
            unsigned long long x = xgetbv0();
            avx_os = (x & 0x6) == 0x6;         /* XMM and YMM state enabled */
            avx512_os = (x & 0xe6) == 0xe6;    /* plus opmask and ZMM state */
        }
        if (!avx_os)
            f->fma = f->f16c = 0;
    }
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f->avx2 = avx_os && ((b >> 5) & 1);
        f->avx512f = avx512_os && ((b >> 16) & 1);
        f->avx512bw = avx512_os && ((b >> 30) & 1);
        f->avx512vl = avx512_os && ((b >> 31) & 1);
        f->avx512_fp16 = avx512_os && ((d >> 23) & 1);
        f->amx_bf16 = (d >> 22) & 1;
        unsigned max_sub = a;
        if (max_sub >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            f->avx512_bf16 = avx512_os && ((a >> 5) & 1);
        }
    }
    /* Brand string from the extended leaves. */
    unsigned ext = __get_cpuid_max(0x80000000, NULL);
    if (ext >= 0x80000004) {
        unsigned r[12];
        for (unsigned i = 0; i < 3; i++)
            __cpuid(0x80000002 + i, r[4 * i], r[4 * i + 1], r[4 * i + 2], r[4 * i + 3]);
        char s[49];
        memcpy(s, r, 48);
        s[48] = '\0';
        const char *p = s;
        while (*p == ' ')
            p++;
        snprintf(f->model, sizeof f->model, "%s", p);
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    f->logical_cpus = n > 0 ? (int)n : 1;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    f->mem_bytes = (pages > 0 && psz > 0) ? (double)pages * (double)psz : 0.0;
    f->l3_bytes = llc_bytes();
}

const ws_cpu_features *ws_cpu_features_get(void)
{
    pthread_once(&g_once, detect);
    return &g_feat;
}

void ws_cpu_features_isa_string(const ws_cpu_features *f, char *buf, int cap)
{
    struct { int on; const char *name; } flags[] = {
        {f->avx2, "avx2"},           {f->fma, "fma"},           {f->f16c, "f16c"},
        {f->avx512f, "avx512f"},     {f->avx512bw, "avx512bw"}, {f->avx512vl, "avx512vl"},
        {f->avx512_bf16, "avx512_bf16"}, {f->avx512_fp16, "avx512_fp16"},
        {f->amx_bf16, "amx_bf16"},
    };
    int len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        if (!flags[i].on)
            continue;
        int n = snprintf(buf + len, (size_t)(cap - len), "%s%s", len ? " " : "", flags[i].name);
        if (n < 0 || n >= cap - len)
            break;
        len += n;
    }
}
