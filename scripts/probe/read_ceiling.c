/* read_ceiling: how fast can a core stream memory, depending on how the lines are asked for?
 * The read bandwidth `bench` reports (calib/probe/membw.c) is a plain reduction: demand loads,
 * the hardware prefetchers ahead of them. The AMX attention loop instead prefetches each
 * line to L2 (PREFETCHT1) two super-blocks ahead and later tile-loads it into L1. This probe
 * reads a 1 GiB buffer with T threads (pinned to CPUs 0..T-1, each its own slice) and prints
 * GB/s for:
 *   demand       AVX-512 loads of every line, in order (as bench's read pass);
 *   t1+demand    PREFETCHT1 64 KiB ahead, then the same loads (the loop's data flow, with
 *                no compute: its ceiling);
 *   t1           PREFETCHT1 of every line, nothing loaded (to L2 only; a prefetch the core
 *                drops under pressure still counts, so this may overstate);
 *   t1 turns     PREFETCHT1 only, eight 64 KiB-apart regions in turns of 256 bytes (the
 *                loop's prefetch order);
 *   t0           PREFETCHT0 of every line (to L1);
 *   tile         AMX tile loads of every 1 KiB in order, no software prefetch (how the loop
 *                reads, without its prefetch);
 *   t1+tile      PREFETCHT1 64 KiB ahead, then the tile loads (the loop's data flow).
 * The two tile modes run where the CPU has AMX and Linux grants the tile state. On the
 * development host (2 threads) demand, t1+demand, tile and t1+tile all read 23-25 GB/s in
 * the same minute and t1 alone 32: whatever consumes the lines runs at about the plain
 * reduction's rate, so the loop's ceiling is 1.03-1.10x the read bandwidth bench reports.
 * Build and run (x86-64 with AVX-512, Linux):
 *   gcc -O2 -mavx512f -mamx-tile -pthread scripts/probe/read_ceiling.c -o build/read_ceiling
 *   build/read_ceiling [T]        (default 2 threads; two passes of each mode) */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "amx_probe.h"

#define BIG (1ul << 30)
#define MAX_T 64
#define AHEAD 65536

static char *g_buf;
static int g_mode, g_threads, g_amx;
static double g_gbps[MAX_T];
static volatile float g_sink;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static __m512 load4(__m512 acc, const char *p)
{
    for (int b = 0; b < 256; b += 64)
        acc = _mm512_add_ps(acc, _mm512_load_ps((const float *)(p + b)));
    return acc;
}

/* PREFETCHT1 of the len bytes AHEAD beyond p + i, within the thread's per bytes. */
static void prefetch_ahead(const char *p, size_t i, size_t len, size_t per)
{
    for (size_t b = 0; b < len && i + AHEAD + b < per; b += 64)
        _mm_prefetch(p + i + AHEAD + b, _MM_HINT_T1);
}

static void *reader(void *arg)
{
    const long id = (long)arg;
    cpu_set_t cs;
    CPU_ZERO(&cs);
    CPU_SET((int)id, &cs);
    pthread_setaffinity_np(pthread_self(), sizeof cs, &cs);
    if (g_mode >= 5)
        amx_probe_configure();
    const size_t per = BIG / (size_t)g_threads & ~(size_t)(8 * AHEAD - 1);
    const char *p = g_buf + (size_t)id * per;
    __m512 acc = _mm512_setzero_ps();
    const double t0 = now();
    switch (g_mode) {
    case 0:
        for (size_t i = 0; i < per; i += 256)
            acc = load4(acc, p + i);
        break;
    case 1:
        for (size_t i = 0; i < per; i += 256) {
            prefetch_ahead(p, i, 256, per);
            acc = load4(acc, p + i);
        }
        break;
    case 2:
        for (size_t i = 0; i < per; i += 64)
            _mm_prefetch(p + i, _MM_HINT_T1);
        break;
    case 3:
        for (size_t base = 0; base < per; base += 8 * AHEAD)
            for (size_t o = 0; o < AHEAD; o += 256)
                for (int r = 0; r < 8; r++)
                    for (int b = 0; b < 256; b += 64)
                        _mm_prefetch(p + base + (size_t)r * AHEAD + o + b, _MM_HINT_T1);
        break;
    case 4:
        for (size_t i = 0; i < per; i += 64)
            _mm_prefetch(p + i, _MM_HINT_T0);
        break;
    case 5:
        for (size_t i = 0; i < per; i += 1024)
            _tile_loadd(6, p + i, 64);
        break;
    default:
        for (size_t i = 0; i < per; i += 1024) {
            prefetch_ahead(p, i, 1024, per);
            _tile_loadd(6, p + i, 64);
        }
    }
    if (g_mode >= 5)
        _tile_release();
    const double t = now() - t0;
    float f[16];
    _mm512_storeu_ps(f, acc);
    g_sink = f[0];
    g_gbps[id] = (double)per / t / 1e9;
    return NULL;
}

int main(int argc, char **argv)
{
    g_threads = argc > 1 ? atoi(argv[1]) : 2;
    if (g_threads < 1 || g_threads > MAX_T) {
        fprintf(stderr, "usage: %s [THREADS 1..%d]\n", argv[0], MAX_T);
        return 2;
    }
    g_buf = aligned_alloc(2u << 20, BIG);
    if (!g_buf) {
        fprintf(stderr, "read_ceiling: out of memory\n");
        return 1;
    }
    madvise(g_buf, BIG, MADV_HUGEPAGE);
    memset(g_buf, 1, BIG);
    __builtin_cpu_init();
    g_amx = __builtin_cpu_supports("amx-tile") &&
            syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
    if (!g_amx)
        fprintf(stderr, "read_ceiling: no AMX tiles here: the tile modes are left out\n");
    static const char *names[] = {"demand", "t1+demand", "t1", "t1 turns", "t0", "tile", "t1+tile"};
    for (int pass = 0; pass < 2; pass++)
        for (g_mode = 0; g_mode < (g_amx ? 7 : 5); g_mode++) {
            pthread_t th[MAX_T];
            for (long i = 0; i < g_threads; i++)
                pthread_create(&th[i], NULL, reader, (void *)i);
            double sum = 0;
            for (int i = 0; i < g_threads; i++) {
                pthread_join(th[i], NULL);
                sum += g_gbps[i];
            }
            printf("%-10s %6.2f GB/s (%d threads)\n", names[g_mode], sum, g_threads);
        }
    free(g_buf);
    return 0;
}
