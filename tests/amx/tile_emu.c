/* tile_emu: the AMX attention loop (kernels/attn_cpu_amx.c) on software tiles, so that its
 * arithmetic, layouts and tile shapes are tested on CPUs without AMX (the rest of the loop
 * is AVX-512 BF16 and runs as it is). Tests install it with ws_attn_cpu_amx_emulate; it is
 * linked into the test binary only.
 *
 * Each thread has its own configuration and eight 1 KB tiles, as the hardware keeps them.
 * An operation the hardware would fault on aborts with a message: an unconfigured tile, a
 * configuration outside palette 1's limits, a product whose shapes disagree or that names
 * a tile twice. TDPBF16PS follows Intel's definition: per row m of the destination, per
 * 32-bit column k of A and column n of B, the even bf16 product then the odd one added to
 * the fp32 sum, denormal inputs and results flushed to zero; rows and columns past the
 * configured ones are zero after every write, as after the hardware's. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tile_emu.h"

enum { EMU_TILES = 8, EMU_ROWS = 16, EMU_COLSB = 64 };

typedef struct emu_state {
    int configured;
    uint8_t rows[EMU_TILES];
    uint16_t colsb[EMU_TILES];
    unsigned char t[EMU_TILES][EMU_ROWS * EMU_COLSB] __attribute__((aligned(64)));
} emu_state;

static __thread emu_state g_emu;

static void emu_fault(const char *what, int tile)
{
    fprintf(stderr, "amx tile emulation: %s (tile %d)\n", what, tile);
    abort();
}

static void emu_config(const void *cfg)
{
    const unsigned char *c = cfg;
    if (c[0] == 0) { /* palette 0: the tiles released */
        memset(&g_emu, 0, sizeof g_emu);
        return;
    }
    if (c[0] != 1)
        emu_fault("palette other than 1", -1);
    for (int b = 1; b < 16; b++)
        if (c[b])
            emu_fault("start_row or reserved bytes not zero", -1);
    for (int t = 0; t < 16; t++) {
        const unsigned colsb = (unsigned)c[16 + 2 * t] | (unsigned)c[17 + 2 * t] << 8;
        const unsigned rows = c[48 + t];
        if (t >= EMU_TILES ? colsb || rows
                           : rows > EMU_ROWS || colsb > EMU_COLSB || (rows == 0) != (colsb == 0))
            emu_fault("tile shape outside palette 1", t);
        if (t < EMU_TILES)
            g_emu.rows[t] = (uint8_t)rows, g_emu.colsb[t] = (uint16_t)colsb;
    }
    memset(g_emu.t, 0, sizeof g_emu.t);
    g_emu.configured = 1;
}

static void emu_check(int t)
{
    if (!g_emu.configured || t < 0 || t >= EMU_TILES || !g_emu.rows[t])
        emu_fault("tile not configured", t);
}

static void emu_load(int t, const void *base, size_t stride)
{
    emu_check(t);
    unsigned char *d = g_emu.t[t];
    memset(d, 0, sizeof g_emu.t[t]);
    for (int r = 0; r < g_emu.rows[t]; r++)
        memcpy(d + r * EMU_COLSB, (const char *)base + (size_t)r * stride, g_emu.colsb[t]);
}

static void emu_store(int t, void *base, size_t stride)
{
    emu_check(t);
    for (int r = 0; r < g_emu.rows[t]; r++)
        memcpy((char *)base + (size_t)r * stride, g_emu.t[t] + r * EMU_COLSB, g_emu.colsb[t]);
}

static void emu_zero(int t)
{
    emu_check(t);
    memset(g_emu.t[t], 0, sizeof g_emu.t[t]);
}

static float emu_bf16(const unsigned char *at)
{
    uint16_t h;
    memcpy(&h, at, 2);
    const uint32_t u = (h & 0x7f80u) ? (uint32_t)h << 16 : (uint32_t)(h & 0x8000u) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f; /* denormals as (signed) zero */
}

static float emu_ftz(float x)
{
    return fabsf(x) < 0x1p-126f ? copysignf(0.0f, x) : x;
}

static void emu_dp(int c, int a, int b)
{
    emu_check(c), emu_check(a), emu_check(b);
    if (c == a || c == b || a == b)
        emu_fault("TDPBF16PS names a tile twice", c);
    const int M = g_emu.rows[c], N = g_emu.colsb[c] / 4, K = g_emu.colsb[a] / 4;
    if (g_emu.rows[a] != M || g_emu.colsb[b] != g_emu.colsb[c] || g_emu.rows[b] != K ||
        g_emu.colsb[c] % 4 || g_emu.colsb[a] % 4)
        emu_fault("TDPBF16PS shapes disagree", c);
    float bv[EMU_ROWS][2][EMU_COLSB / 4];
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++)
            for (int e = 0; e < 2; e++)
                bv[k][e][n] = emu_bf16(g_emu.t[b] + k * EMU_COLSB + 4 * n + 2 * e);
    for (int m = 0; m < M; m++) {
        float acc[EMU_COLSB / 4];
        memcpy(acc, g_emu.t[c] + m * EMU_COLSB, sizeof acc);
        for (int k = 0; k < K; k++) {
            const float a0 = emu_bf16(g_emu.t[a] + m * EMU_COLSB + 4 * k),
                        a1 = emu_bf16(g_emu.t[a] + m * EMU_COLSB + 4 * k + 2);
            for (int n = 0; n < N; n++) {
                acc[n] = emu_ftz(acc[n] + a0 * bv[k][0][n]);
                acc[n] = emu_ftz(acc[n] + a1 * bv[k][1][n]);
            }
        }
        memset(g_emu.t[c] + m * EMU_COLSB, 0, EMU_COLSB);
        memcpy(g_emu.t[c] + m * EMU_COLSB, acc, (size_t)N * 4);
    }
    memset(g_emu.t[c] + M * EMU_COLSB, 0, (size_t)(EMU_ROWS - M) * EMU_COLSB);
}

#define tile_load(t, base, stride) emu_load(t, base, (size_t)(stride))
#define tile_store(t, base, stride) emu_store(t, base, (size_t)(stride))
#define tile_zero(t) emu_zero(t)
#define tile_dp(c, a, b) emu_dp(c, a, b)
#define tile_release() memset(&g_emu, 0, sizeof g_emu)
#define tile_config(cfg) emu_config(cfg)
#define WS_AMX_EMU 1
#include "attn_cpu_amx.c"
