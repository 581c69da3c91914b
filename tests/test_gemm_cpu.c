/* test_gemm_cpu: BLAS GEMM and the expert FFN (kernels/gemm_cpu.c) against a plain loop. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "gemm_cpu.h"

static float rnd(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 9) & 0xffff) / 32768.0f - 1.0f;
}

Test(gemm_cpu, expert_ffn_matches_loops)
{
    const int H = 48, IN = 40, M = 5;
    unsigned s = 3;
    float *wgu = malloc(sizeof(float) * H * 2 * IN), *wd = malloc(sizeof(float) * IN * H);
    float *x = malloc(sizeof(float) * M * H), *y = malloc(sizeof(float) * M * H);
    float *scratch = malloc(sizeof(float) * M * 2 * IN);
    for (int i = 0; i < H * 2 * IN; i++)
        wgu[i] = rnd(&s) * 0.2f;
    for (int i = 0; i < IN * H; i++)
        wd[i] = rnd(&s) * 0.2f;
    for (int i = 0; i < M * H; i++)
        x[i] = rnd(&s);
    ws_expert_f32 e = {H, IN, wgu, wd};
    ws_err err = {0};
    cr_assert_eq(ws_expert_ffn_cpu(&e, x, y, M, scratch, 1, &err), 0, "%s", err.msg);
    for (int r = 0; r < M; r++)
        for (int c = 0; c < H; c++) {
            double acc = 0;
            for (int j = 0; j < IN; j++) {
                double g = 0, u = 0;
                for (int k = 0; k < H; k++) {
                    g += (double)x[r * H + k] * wgu[k * 2 * IN + j];
                    u += (double)x[r * H + k] * wgu[k * 2 * IN + IN + j];
                }
                acc += g / (1 + exp(-g)) * u * wd[j * H + c];
            }
            cr_assert_float_eq(y[r * H + c], acc, 1e-4, "r %d c %d", r, c);
        }
    double flops, bytes;
    ws_expert_cost(2048, 768, 8, &flops, &bytes);
    cr_assert_float_eq(flops, 2.0 * 8 * 2048 * 768 * 3 + 4.0 * 8 * 768, 1);
    cr_assert_eq(ws_gemm_cpu_f32(0, 1, 1, x, x, y, 1, &err), WS_EINVAL);
    free(wgu);
    free(wd);
    free(x);
    free(y);
    free(scratch);
}
