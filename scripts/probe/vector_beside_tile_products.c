/* vector_beside_tile_products: does vector work overlap TDPBF16PS on this core? The AMX attention loop runs
 * its softmax (AVX-512: exp polynomials, i.e. FMAs, and permutes) between tile products.
 * This probe times, in TSC cycles per iteration (one thread, pinned to CPU 0):
 *   tmul     two TDPBF16PS into two accumulators (operands in tiles, no memory);
 *   fma      8 x K independent VFMADD231PS (zmm);
 *   perm     8 x K independent VPERMPS (zmm, port 5 only on Intel cores);
 *   and each vector kind interleaved with the two TDPBF16PS.
 * If `tmul + fma` costs about the sum, the tile products hold an FMA port (FMAs fall back
 * to the other one); about the max, they overlap. It also prints the TDPBF16PS rate, which
 * on a shared host can move 2x from minute to minute (a neighbour on the core's AMX unit).
 * Build and run (x86-64 with AMX, Linux):
 *   gcc -O2 scripts/probe/vector_beside_tile_products.c -o build/vector_beside_tile_products
 *   build/vector_beside_tile_products [K]   (default 8) */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "amx_probe.h"

#define ITERS 100000

static volatile float g_sink;

/* Best of 5 passes: TSC cycles per iteration. tmul: issue the two TDPBF16PS; kind: 0 none,
 * 1 FMAs, 2 permutes, k groups of 8 each. */
__attribute__((target("avx512f,amx-tile,amx-bf16"))) static double pass(int tmul, int kind, int k)
{
    __m512 a[8];
    for (int i = 0; i < 8; i++)
        a[i] = _mm512_set1_ps(1.0f + (float)i * 1e-3f);
    const __m512i ix = _mm512_set_epi32(0, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1);
    uint64_t best = UINT64_MAX;
    for (int r = 0; r < 5; r++) {
        const uint64_t t0 = __rdtsc();
        for (int it = 0; it < ITERS; it++) {
            if (tmul) {
                _tile_dpbf16ps(0, 6, 4);
                _tile_dpbf16ps(1, 6, 4);
            }
            for (int g = 0; g < k; g++)
#pragma GCC unroll 8
                for (int i = 0; i < 8; i++)
                    a[i] = kind == 1   ? _mm512_fmadd_ps(a[i], a[i], a[i])
                           : kind == 2 ? _mm512_permutexvar_ps(ix, a[i])
                                       : a[i];
        }
        const uint64_t t = __rdtsc() - t0;
        best = t < best ? t : best;
    }
    __m512 s = a[0];
    for (int i = 1; i < 8; i++)
        s = _mm512_add_ps(s, a[i]);
    g_sink = _mm512_reduce_add_ps(s);
    return (double)best / ITERS;
}

__attribute__((target("amx-tile"))) int main(int argc, char **argv)
{
    const int k = argc > 1 ? atoi(argv[1]) : 8;
    if (k < 1 || k > 64) {
        fprintf(stderr, "usage: %s [K 1..64]   (8 x K vector instructions per iteration)\n",
                argv[0]);
        return 2;
    }
    if (amx_probe_init("vector_beside_tile_products"))
        return 1;
    static char zero[1024] __attribute__((aligned(64)));
    _tile_zero(0);
    _tile_zero(1);
    _tile_loadd(4, zero, 64);
    _tile_loadd(6, zero, 64);
    const double tm = pass(1, 0, 0);
    printf("TDPBF16PS: %.1f TSC cycles each (two per iteration: %.1f)\n", tm / 2, tm);
    const char *name[3] = {"", "fma", "perm"};
    for (int kind = 1; kind <= 2; kind++) {
        const double v = pass(0, kind, k), both = pass(1, kind, k);
        printf("%-4s x%-3d alone %7.1f  with tmul %7.1f  (sum %7.1f, max %7.1f)\n", name[kind],
               8 * k, v, both, v + tm, v > tm ? v : tm);
    }
    _tile_release();
    return 0;
}
