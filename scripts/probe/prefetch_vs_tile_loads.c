/* prefetch_vs_tile_loads: does a core's stream of software prefetches from memory slow its AMX tile
 * loads? The AMX attention loop prefetches the KV of later super-blocks to L2 while it
 * tile-loads the current one's rows from L2; both need the core's line-fill buffers. This
 * probe times, in TSC cycles per iteration (one thread, pinned to CPU 0):
 *   tiles   T tile loads of 1 KB (16 rows of 64 B, 256 B apart) and T TDPBF16PS, from a
 *           buffer that stays in L2 (256 KB) or in L1 (16 KB);
 *   stream  N PREFETCHT1 of consecutive lines of a 1 GB buffer (memory);
 *   both    the two interleaved.
 * If `both` costs about `tiles` + `stream`, the two serialise on the fill buffers; if
 * about max(tiles, stream), they overlap. Build and run (x86-64 with AMX, Linux):
 *   gcc -O2 -mamx-tile -mamx-bf16 -mavx512f scripts/probe/prefetch_vs_tile_loads.c \
 *       -o build/prefetch_vs_tile_loads
 *   build/prefetch_vs_tile_loads [N T]        (defaults 8 lines and 2 tiles per iteration) */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <x86intrin.h>

#include "amx_probe.h"

#define BIG (1ul << 30)
#define ITERS 1000000

/* One timed pass: cycles per iteration. mode bit 0: tiles, bit 1: stream. */
static double pass(int mode, const char *mem, const char *tiles, size_t tile_mask, int n, int t)
{
    size_t off = 0, at = 0;
    const uint64_t t0 = __rdtsc();
    for (int i = 0; i < ITERS; i++) {
        if (mode & 2)
            for (int k = 0; k < n; k++, off += 64)
                _mm_prefetch(mem + (off & (BIG - 1)), _MM_HINT_T1);
        if (mode & 1)
            for (int k = 0; k < t; k++) {
                _tile_loadd(6, tiles + at, 256);
                _tile_loadd(4, tiles + at + 64, 256);
                _tile_dpbf16ps(0, 6, 4);
                at = (at + 4096) & tile_mask;
            }
    }
    return (double)(__rdtsc() - t0) / ITERS;
}

int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : 8, t = argc > 2 ? atoi(argv[2]) : 2;
    if (n < 1 || t < 1 || n > 64 || t > 16) {
        fprintf(stderr, "usage: %s [LINES 1..64] [TILES 1..16]\n", argv[0]);
        return 2;
    }
    if (amx_probe_init("prefetch_vs_tile_loads"))
        return 1;
    char *mem = aligned_alloc(2u << 20, BIG), *tiles = aligned_alloc(4096, 256u << 10);
    if (!mem || !tiles) {
        fprintf(stderr, "prefetch_vs_tile_loads: out of memory\n");
        return 1;
    }
    madvise(mem, BIG, MADV_HUGEPAGE);
    memset(mem, 1, BIG);
    memset(tiles, 0, 256u << 10);
    _tile_zero(0);
    printf("per iteration: %d prefetched lines from memory, %d tile loads + TDPBF16PS\n", n, t);
    const struct {
        const char *name;
        size_t mask;
    } where[2] = {{"L2 (256 KB)", (256u << 10) - 1}, {"L1 (16 KB)", (16u << 10) - 1}};
    for (int w = 0; w < 2; w++) {
        pass(3, mem, tiles, where[w].mask, n, t); /* warm-up */
        const double a = pass(1, mem, tiles, where[w].mask, n, t);
        const double b = pass(2, mem, tiles, where[w].mask, n, t);
        const double ab = pass(3, mem, tiles, where[w].mask, n, t);
        printf("tiles from %-11s  tiles %6.1f  stream %6.1f  both %6.1f cycles (TSC)  "
               "sum %6.1f  max %6.1f\n",
               where[w].name, a, b, ab, a + b, a > b ? a : b);
    }
    _tile_release();
    free(mem);
    free(tiles);
    return 0;
}
