/* expert_bench: the bf16 expert FFN (kernels/gemm_bf16.c) through each present backend, and
 * the int8 one (kernels/gemm_int8.c, the same weights quantized per channel), at the
 * shipped models' expert shapes and a decode step's token counts, to choose between them on
 * this CPU. Each timed call starts with the expert's weights evicted from every
 * cache (ws_membw_evict), as a decode step streams each expert it hits from DRAM. One line
 * per (model, tokens, backend): median and min..max of the repeats in ms, GFLOP/s (GOP/s for
 * int8), GB/s of weights. Then the backend the probe of ws_expert_ffn_bf16 picks for each
 * shape, and the oneDNN path the int8 FFN ran on.
 * No assertion: a benchmark, not a test (docs/notes/expert-gemm.md).
 * Usage: ws_expert_bench [threads [repeats [max-tokens [model]]]] (make bench-expert). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "gemm_bf16.h"
#include "gemm_int8.h"
#include "half.h"
#include "membw.h"
#include "model.h"
#include "ws_util.h"

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    static const char *const models[] = {"qwen3-30b-a3b", "deepseek-v2-lite", "mixtral-8x7b"};
    static const int toks[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
    const int threads = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 2 ? atoi(argv[2]) : 5;
    const int max_m = argc > 3 ? atoi(argv[3]) : 512;
    const char *only = argc > 4 ? argv[4] : NULL; /* one model's shape alone */
    ws_err err = {0};
    printf("# threads %d, repeats %d; backends:", threads, reps);
    for (int b = 0; b < WS_GEMM_BF16_N; b++)
        printf(" %s=%s", ws_gemm_bf16_label(b), ws_gemm_bf16_present(b) ? "yes" : "absent");
    printf("\n%-18s %5s %-7s %9s %19s %8s %7s\n", "model", "m", "backend", "median_ms",
           "min..max_ms", "GFLOP/s", "GB/s_w");
    for (int mi = 0; mi < 3; mi++) {
        if (only && strcmp(only, models[mi]))
            continue;
        char path[WS_PATH_MAX];
        ws_model md;
        if (ws_model_resolve(models[mi], path, sizeof path, &err) ||
            ws_model_load(path, &md, &err)) {
            fprintf(stderr, "expert_bench: %s\n", err.msg);
            return 1;
        }
        const int H = md.hidden, I = md.moe_intermediate;
        const size_t wn = (size_t)3 * H * I;
        const size_t huge = (size_t)2 << 20, wb = (2 * wn + huge - 1) / huge * huge;
        uint16_t *w = aligned_alloc(huge, wb);
        if (w)
            madvise(w, wb, MADV_HUGEPAGE); /* as the runtime's weights; a hint */
        float *x = malloc(sizeof(float) * 512 * H), *y = malloc(sizeof(float) * 512 * H);
        if (!w || !x || !y)
            return 1;
        unsigned s = 7;
        for (size_t i = 0; i < wn; i++) {
            s = s * 1664525u + 1013904223u;
            w[i] = ws_f32_to_bf16(((float)(s >> 9 & 0xffff) / 32768.0f - 1.0f) * 0.05f);
        }
        for (int i = 0; i < 512 * H; i++)
            x[i] = (float)(i % 17) * 0.01f - 0.08f;
        ws_expert_bf16 e = {H, I, w, w + (size_t)H * 2 * I};
        const size_t qb = ws_expert_int8_bytes(H, I);
        void *qm = aligned_alloc(huge, (qb + huge - 1) / huge * huge);
        ws_expert_int8 q;
        if (!qm || ws_expert_int8_from_bf16(&e, ws_gemm_int8_qmax(), qm, &q, &err))
            return 1;
        for (int ti = 0; ti < 10 && toks[ti] <= max_m; ti++) {
            const int m = toks[ti];
            for (int b = 0; b <= WS_GEMM_BF16_N; b++) { /* WS_GEMM_BF16_N: int8 */
                const int i8 = b == WS_GEMM_BF16_N;
                if (!i8 && !ws_gemm_bf16_present(b))
                    continue;
                double t[64];
                for (int r = -1; r < reps && r < 64; r++) {
                    ws_membw_evict(i8 ? qm : (void *)w, i8 ? qb : 2 * wn);
                    double t0 = ws_now_s();
                    if (i8 ? ws_expert_ffn_int8(&q, x, y, m, threads, &err)
                           : ws_expert_ffn_bf16_with(b, &e, x, y, m, threads, &err)) {
                        fprintf(stderr, "expert_bench: %s\n", err.msg);
                        return 1;
                    }
                    if (r >= 0)
                        t[r] = ws_now_s() - t0;
                }
                qsort(t, reps, sizeof *t, cmp_d);
                const double med = t[reps / 2], fl = 6.0 * m * H * I;
                printf("%-18s %5d %-7s %9.3f %9.3f..%-9.3f %8.1f %7.1f\n", models[mi], m,
                       i8 ? "int8" : ws_gemm_bf16_label(b), med * 1e3, t[0] * 1e3,
                       t[reps - 1] * 1e3, fl / med * 1e-9, (i8 ? qb : 2.0 * wn) / med * 1e-9);
                fflush(stdout);
            }
        }
        printf("# probe's choice for %s:", models[mi]);
        for (int ti = 0; ti < 10 && toks[ti] <= max_m; ti++) {
            ws_membw_evict(w, 2 * wn);
            if (ws_expert_ffn_bf16(&e, x, y, toks[ti], threads, &err)) {
                fprintf(stderr, "expert_bench: %s\n", err.msg);
                return 1;
            }
            printf(" m%d=%s", toks[ti], ws_gemm_bf16_backend_name(H, I, toks[ti], threads));
        }
        char d[200];
        ws_gemm_int8_describe(H, I, 1, d, sizeof d);
        printf("\n# int8 for %s: %s (oneDNN ISA %s, weights |q| <= %d)\n", models[mi], d,
               ws_gemm_int8_isa(), q.qmax);
        free(w), free(x), free(y), free(qm);
    }
    ws_gemm_bf16_release();
    ws_gemm_int8_release();
    return 0;
}
