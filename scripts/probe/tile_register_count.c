/* tile_register_count: does the number of tile registers a loop uses change its speed? The same AMX
 * work (operands in L1) is timed with its tiles numbered so that it touches 4, 5, 6 or 8
 * of the 8 tile registers. Each timed call starts from LDTILECFG (every tile in its init
 * state) and ends with TILERELEASE, as the attention kernel's calls do, so tiles a call
 * never writes stay in the init state for all of it.
 *   pv     one P.V column step of Qwen3's shape (O 16 x 32 fp32 += P 16 x 32 tokens . V):
 *          "6" O in 0-1, P held in 4-5, V in 6-7 (the kernel's layout for one head group);
 *          "5" V in one tile; "4" O in one tile, 16 columns at a time; "8" as "6" with the
 *          second pair's V in 2-3;
 *   mla    the tile work of 64 tokens of DeepSeek-V2-Lite (16 heads, d 576 / 512: 144
 *          TDPBF16PS of scores, 128 of P.V): "8" scores of four sub-blocks at once (S in
 *          0-3), P held in 2-5, O in 0-1, V in 6-7; "6" scores in two passes of two
 *          sub-blocks (S in 0-1), O and V one tile each, P held in 4, 5, 1, 7; "4" scores
 *          one sub-block per pass, P reloaded per pair.
 * It prints each variant's median time over alternated calls, relative to the first, so
 * that a host whose speed drifts between minutes still compares them fairly. On the
 * development host (Xeon model 207, shared): pv 8 tiles 1.69x the time of 6, 5 tiles
 * 0.85x, 4 tiles 0.76x; mla 6 tiles 0.61x of 8, 4 tiles 0.59x. Tiles left in the init
 * state seem to free physical tile registers for the loads and products in flight.
 * Build and run (x86-64 with AMX, Linux):
 *   gcc -O2 scripts/probe/tile_register_count.c -o build/tile_register_count
 *   build/tile_register_count [ROUNDS]   (default 100) */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "amx_probe.h"

#define PV_ITERS 5000 /* column steps x 4 per call */
#define MLA_ITERS 400 /* 64-token super-blocks per call */

static uint16_t g_k[4][18][512] __attribute__((aligned(64))); /* 4 sub-blocks x 18 K tiles */
static uint16_t g_q[18][2][512] __attribute__((aligned(64))); /* q hi, lo per 32 dims */
static uint16_t g_p[4][512] __attribute__((aligned(64)));     /* P tiles */
static uint16_t g_v[4][512] __attribute__((aligned(64)));     /* V tiles */
static float g_s[4][256] __attribute__((aligned(64)));        /* scores out */
static float g_o[16 * 512] __attribute__((aligned(64)));      /* O, 16 rows */

#define T_START                                                                                    \
    const uint64_t t0 = __rdtsc();                                                                 \
    amx_probe_configure()
#define T_END(N)                                                                                   \
    _tile_release();                                                                               \
    return (double)(__rdtsc() - t0) / (N)

/* ---- P.V of one head group (O 128 columns, two pairs of 16-token sub-blocks) ---- */

/* O in 0-1, P held in 4-5, pair 0's V in 6-7, pair 1's in VA-VB. */
#define PV_HELD_BODY(VA, VB)                                                                       \
    T_START;                                                                                       \
    _tile_loadd(4, g_p[0], 64);                                                                    \
    _tile_loadd(5, g_p[1], 64);                                                                    \
    for (int it = 0; it < PV_ITERS; it++)                                                          \
        for (int c = 0; c < 4; c++) {                                                              \
            _tile_loadd(0, g_o + 32 * c, 512);                                                     \
            _tile_loadd(1, g_o + 32 * c + 16, 512);                                                \
            _tile_loadd(6, g_v[0], 64);                                                            \
            _tile_loadd(7, g_v[1], 64);                                                            \
            _tile_dpbf16ps(0, 4, 6);                                                               \
            _tile_dpbf16ps(1, 4, 7);                                                               \
            _tile_loadd(VA, g_v[2], 64);                                                           \
            _tile_loadd(VB, g_v[3], 64);                                                           \
            _tile_dpbf16ps(0, 5, VA);                                                              \
            _tile_dpbf16ps(1, 5, VB);                                                              \
            _tile_stored(0, g_o + 32 * c, 512);                                                    \
            _tile_stored(1, g_o + 32 * c + 16, 512);                                               \
        }                                                                                          \
    T_END(4.0 * PV_ITERS)

__attribute__((target("amx-tile,amx-bf16"))) static double pv6(void)
{
    PV_HELD_BODY(6, 7);
}

__attribute__((target("amx-tile,amx-bf16"))) static double pv5(void)
{
    T_START;
    _tile_loadd(4, g_p[0], 64);
    _tile_loadd(5, g_p[1], 64);
    for (int it = 0; it < PV_ITERS; it++)
        for (int c = 0; c < 4; c++) {
            _tile_loadd(0, g_o + 32 * c, 512);
            _tile_loadd(1, g_o + 32 * c + 16, 512);
            _tile_loadd(6, g_v[0], 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(6, g_v[1], 64);
            _tile_dpbf16ps(1, 4, 6);
            _tile_loadd(6, g_v[2], 64);
            _tile_dpbf16ps(0, 5, 6);
            _tile_loadd(6, g_v[3], 64);
            _tile_dpbf16ps(1, 5, 6);
            _tile_stored(0, g_o + 32 * c, 512);
            _tile_stored(1, g_o + 32 * c + 16, 512);
        }
    T_END(4.0 * PV_ITERS);
}

__attribute__((target("amx-tile,amx-bf16"))) static double pv4(void)
{
    T_START;
    _tile_loadd(4, g_p[0], 64);
    _tile_loadd(5, g_p[1], 64);
    for (int it = 0; it < PV_ITERS; it++)
        for (int c = 0; c < 8; c++) { /* 16 columns per step */
            _tile_loadd(0, g_o + 16 * c, 512);
            _tile_loadd(6, g_v[c & 1], 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(6, g_v[2 + (c & 1)], 64);
            _tile_dpbf16ps(0, 5, 6);
            _tile_stored(0, g_o + 16 * c, 512);
        }
    T_END(4.0 * PV_ITERS);
}

__attribute__((target("amx-tile,amx-bf16"))) static double pv8(void)
{
    PV_HELD_BODY(2, 3);
}

/* ---- MLA: scores (K sub-block J's tile of step ks into S, q hi in QH, lo in QL) and P.V ---- */

#define QK(S, J, QH, QL)                                                                           \
    do {                                                                                           \
        _tile_loadd(6, g_k[J][ks], 64);                                                            \
        _tile_dpbf16ps(S, 6, QH);                                                                  \
        _tile_dpbf16ps(S, 6, QL);                                                                  \
    } while (0)

__attribute__((target("amx-tile,amx-bf16"))) static double mla8(void)
{
    T_START;
    for (int it = 0; it < MLA_ITERS; it++) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int ks = 0; ks < 18; ks++) {
            _tile_loadd(4, g_q[ks][0], 64);
            _tile_loadd(5, g_q[ks][1], 64);
            QK(0, 0, 4, 5);
            QK(1, 1, 4, 5);
            QK(2, 2, 4, 5);
            QK(3, 3, 4, 5);
        }
        _tile_stored(0, g_s[0], 64);
        _tile_stored(1, g_s[1], 64);
        _tile_stored(2, g_s[2], 64);
        _tile_stored(3, g_s[3], 64);
        _tile_loadd(2, g_p[0], 64);
        _tile_loadd(3, g_p[1], 64);
        _tile_loadd(4, g_p[2], 64);
        _tile_loadd(5, g_p[3], 64);
        for (int c = 0; c < 16; c++) {
            _tile_loadd(0, g_o + 32 * c, 2048);
            _tile_loadd(1, g_o + 32 * c + 16, 2048);
            _tile_loadd(6, g_v[0], 64);
            _tile_loadd(7, g_v[1], 64);
            _tile_dpbf16ps(0, 2, 6);
            _tile_dpbf16ps(1, 2, 7);
            _tile_dpbf16ps(0, 3, 6);
            _tile_dpbf16ps(1, 3, 7);
            _tile_loadd(6, g_v[2], 64);
            _tile_loadd(7, g_v[3], 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(0, 5, 6);
            _tile_dpbf16ps(1, 5, 7);
            _tile_stored(0, g_o + 32 * c, 2048);
            _tile_stored(1, g_o + 32 * c + 16, 2048);
        }
    }
    T_END(MLA_ITERS);
}

__attribute__((target("amx-tile,amx-bf16"))) static double mla6(void)
{
    T_START;
    for (int it = 0; it < MLA_ITERS; it++) {
        for (int j = 0; j < 4; j += 2) {
            _tile_zero(0);
            _tile_zero(1);
            for (int ks = 0; ks < 18; ks++) {
                _tile_loadd(4, g_q[ks][0], 64);
                _tile_loadd(5, g_q[ks][1], 64);
                QK(0, j, 4, 5);
                QK(1, j + 1, 4, 5);
            }
            _tile_stored(0, g_s[j], 64);
            _tile_stored(1, g_s[j + 1], 64);
        }
        _tile_loadd(4, g_p[0], 64);
        _tile_loadd(5, g_p[1], 64);
        _tile_loadd(1, g_p[2], 64);
        _tile_loadd(7, g_p[3], 64);
        for (int c = 0; c < 32; c++) {
            _tile_loadd(0, g_o + 16 * c, 2048);
            _tile_loadd(6, g_v[c & 1], 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(0, 5, 6);
            _tile_loadd(6, g_v[2 + (c & 1)], 64);
            _tile_dpbf16ps(0, 1, 6);
            _tile_dpbf16ps(0, 7, 6);
            _tile_stored(0, g_o + 16 * c, 2048);
        }
    }
    T_END(MLA_ITERS);
}

__attribute__((target("amx-tile,amx-bf16"))) static double mla4(void)
{
    T_START;
    for (int it = 0; it < MLA_ITERS; it++) {
        for (int j = 0; j < 4; j++) {
            _tile_zero(0);
            for (int ks = 0; ks < 18; ks++) {
                _tile_loadd(4, g_q[ks][0], 64);
                _tile_loadd(5, g_q[ks][1], 64);
                QK(0, j, 4, 5);
            }
            _tile_stored(0, g_s[j], 64);
        }
        for (int c = 0; c < 32; c++) {
            _tile_loadd(0, g_o + 16 * c, 2048);
            for (int b = 0; b < 2; b++) {
                _tile_loadd(6, g_v[2 * b + (c & 1)], 64);
                _tile_loadd(4, g_p[2 * b], 64);
                _tile_loadd(5, g_p[2 * b + 1], 64);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(0, 5, 6);
            }
            _tile_stored(0, g_o + 16 * c, 2048);
        }
    }
    T_END(MLA_ITERS);
}

typedef struct variant {
    const char *name;
    double (*fn)(void);
} variant;

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Alternates the variants (the first one before and after the others each round) and
 * prints each one's median time relative to the first's. */
static void compare(const char *what, const char *unit, const variant *v, int n, int rounds)
{
    double *r = malloc(sizeof(double) * (size_t)n * (size_t)rounds);
    double *base = malloc(sizeof(double) * (size_t)rounds);
    if (!r || !base) {
        fprintf(stderr, "tile_register_count: out of memory\n");
        exit(1);
    }
    for (int k = 0; k < rounds; k++) {
        const double b0 = v[0].fn();
        for (int i = 1; i < n; i++)
            r[(size_t)i * rounds + k] = v[i].fn();
        base[k] = (b0 + v[0].fn()) / 2;
        for (int i = 1; i < n; i++)
            r[(size_t)i * rounds + k] /= base[k];
    }
    qsort(base, (size_t)rounds, sizeof(double), cmp_double);
    printf("%s %-8s %8.1f TSC cycles per %s (median)\n", what, v[0].name, base[rounds / 2], unit);
    for (int i = 1; i < n; i++) {
        double *ri = r + (size_t)i * rounds;
        qsort(ri, (size_t)rounds, sizeof(double), cmp_double);
        printf("%s %-8s %8.3f x the time of %s (quartiles %.3f..%.3f)\n", what, v[i].name,
               ri[rounds / 2], v[0].name, ri[rounds / 4], ri[3 * rounds / 4]);
    }
    free(r);
    free(base);
}

int main(int argc, char **argv)
{
    const int rounds = argc > 1 ? atoi(argv[1]) : 100;
    if (rounds < 1) {
        fprintf(stderr, "usage: %s [ROUNDS]   (ROUNDS >= 1, default 100)\n", argv[0]);
        return 2;
    }
    if (amx_probe_init("tile_register_count"))
        return 1;
    for (int i = 0; i < 16 * 512; i++)
        g_o[i] = 0;
    const variant pv[] = {{"6 tiles", pv6}, {"5 tiles", pv5}, {"4 tiles", pv4}, {"8 tiles", pv8}};
    const variant mla[] = {{"8 tiles", mla8}, {"6 tiles", mla6}, {"4 tiles", mla4}};
    compare("pv ", "column step of 32", pv, 4, rounds);
    compare("mla", "64 tokens (272 TDPBF16PS)", mla, 3, rounds > 60 ? 60 : rounds);
    return 0;
}
