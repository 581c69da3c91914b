/* cache_reuse_in_read_sweep: does the calibrator's read sweep measure DRAM, or caches the machine does not
 * report? The sweep times prefixes S, 2S, 4S of one buffer in round-robin rounds and fits
 * t = c0 + B/W over the medians; `bench membw` re-reads one whole buffer. This probe runs
 * the library's sweep (ws_membw_read_sweep) at the sizes given and prints GB/s per size
 * (median of 7 rounds), the least-squares W over the medians and, beside it, the largest
 * size re-read alone (ws_membw_read). Linked against the current calib/probe/membw.c every
 * pass is evicted first; linked against the one before eviction (commit 81f4708) it shows
 * what the old sweep saw. On the development host (KVM, 2 vCPUs of an AMD EPYC Zen 5, sysfs
 * L3 32 MiB) the old probe read 16/32/64 MiB at 66-68/54-63/48-52 GB/s and still 46.5-47.5
 * at 128 MiB (4x the L3), the evicted one 42-43 at every size (docs/notes/membw.md).
 * Build (after `make`) and run:
 *   cc -O2 -D_GNU_SOURCE -Icommon -Iplatform -Ikernels -Icalib/probe scripts/probe/cache_reuse_in_read_sweep.c \
 *      build/libwritescope.a -lopenblas -lm -pthread -o build/cache_reuse_in_read_sweep
 *   build/cache_reuse_in_read_sweep 16 32 64
 * The old probe: git show 81f4708:calib/probe/membw.c > build/membw_old.c, compile it with
 * the same flags (-c) and put build/membw_old.o before the library on the link line. */
#include <stdio.h>
#include <stdlib.h>

#include "membw.h"
#include "ws_util.h"

#define ROUNDS 7

int main(int argc, char **argv)
{
    ws_err err = {0};
    const int n = argc - 1;
    if (n < 2 || n > 8)
        return fprintf(stderr, "usage: cache_reuse_in_read_sweep MiB MiB [MiB ...] (2 to 8 sizes)\n"), 2;
    ws_pool *p = ws_pool_create(0, &err);
    size_t sizes[8], cov[8];
    double t[8 * ROUNDS], B[8], T[8], mb = 0, mt = 0, sxy = 0, sxx = 0, alone;
    for (int i = 0; i < n; i++)
        sizes[i] = (size_t)atoi(argv[i + 1]) << 20;
    if (!p || ws_membw_read_sweep(p, sizes, n, ROUNDS, t, cov, &err) ||
        ws_membw_read(p, sizes[n - 1], ROUNDS, &alone, &err))
        return fprintf(stderr, "cache_reuse_in_read_sweep: %s\n", err.msg), 1;
    for (int i = 0; i < n; i++) {
        B[i] = (double)cov[i], T[i] = ws_median_sort(t + i * ROUNDS, ROUNDS);
        mb += B[i] / n, mt += T[i] / n;
        printf("%zu MiB %.1f GB/s  ", sizes[i] >> 20, B[i] / T[i] / 1e9);
    }
    for (int i = 0; i < n; i++)
        sxy += (B[i] - mb) * (T[i] - mt), sxx += (B[i] - mb) * (B[i] - mb);
    printf("| fit W %.1f GB/s | %zu MiB alone %.1f GB/s\n", sxx / sxy / 1e9, sizes[n - 1] >> 20,
           alone);
    ws_pool_destroy(p);
    return 0;
}
