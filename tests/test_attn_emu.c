/* test_attn_emu: the GPU decode-attention kernels (kernels/cuda/attn_kernel.cuh) run on the
 * CPU by tests/gpu/attn_emu.cpp -- every thread of every block, with real barriers and lane
 * exchanges -- against the fp64 reference, on every machine. Shapes cover each compiled
 * variant (d 64/128/256, MLA 576/512), GQA groups 1..16, several sub-groups of MLA heads,
 * bf16 and fp16, pages shorter and longer than a tile, empty and one-token sequences,
 * single-chunk (direct write) and split-K (pass 2) plans. The bound is tighter than the
 * GPU test's because the emulation's exp2f is libm's. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/attn_emu.h"
#include "half.h"

static unsigned g_rng = 2024;
static float frand(void)
{
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)((g_rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* Builds a random problem (pages handed out back to front), runs the emulation with the
 * given plan inputs and compares with ws_attn_ref; returns the plan's stats. */
static ws_gpu_attn_stats run(const char *name, ws_kv_layout kv, int n_q, int n_seqs,
                             const int *lens, int n_sm, int chunk)
{
    ws_attn_problem p = {.kv = kv, .n_q_heads = n_q, .scale = 1.0f / sqrtf((float)kv.d_k),
                         .n_seqs = n_seqs};
    ws_attn_seq seq[8];
    const void *tab[256];
    int pages = 0;
    for (int s = 0; s < n_seqs; s++)
        pages += (lens[s] + kv.page_tokens - 1) / kv.page_tokens;
    cr_assert_leq(pages, 256);
    const size_t pe = ws_kv_page_bytes(&kv) / 2;
    uint16_t *pool = malloc(2 * pe * (size_t)(pages + 1));
    for (size_t i = 0; i < pe * (size_t)pages; i++)
        pool[i] = kv.dtype == WS_DT_BF16 ? ws_f32_to_bf16(frand()) : ws_f32_to_fp16(frand());
    int next = pages - 1, k = 0;
    for (int s = 0; s < n_seqs; s++) {
        seq[s] = (ws_attn_seq){.pages = tab + k, .n_tokens = lens[s]};
        for (int i = 0; i < (lens[s] + kv.page_tokens - 1) / kv.page_tokens; i++)
            tab[k++] = pool + pe * (size_t)(next--);
    }
    p.seqs = seq;
    const size_t rows = (size_t)n_seqs * n_q;
    float *q = malloc(sizeof(float) * rows * kv.d_k), *o = malloc(sizeof(float) * rows * kv.d_v),
          *lse = malloc(sizeof(float) * rows);
    for (size_t i = 0; i < rows * kv.d_k; i++)
        q[i] = 2.0f * frand();
    for (size_t i = 0; i < rows * kv.d_v; i++)
        o[i] = NAN; /* every output must be written */
    for (size_t i = 0; i < rows; i++)
        lse[i] = NAN;
    p.q = q;
    p.o = o;
    p.lse = lse;
    double *o_ref = malloc(sizeof(double) * rows * kv.d_v), *l_ref = malloc(sizeof(double) * rows);
    ws_err err = {0};
    cr_assert_eq(ws_attn_ref(&p, o_ref, l_ref, &err), 0, "%s", err.msg);
    ws_gpu_attn_stats st = {0};
    cr_assert_eq(ws_attn_emu_run(&p, n_sm, chunk, &st, &err), 0, "%s: %s", name, err.msg);
    for (size_t r = 0; r < rows; r++) {
        if (isinf(l_ref[r]))
            cr_assert(isinf(lse[r]) && lse[r] < 0, "%s: row %zu lse %g, expected -inf", name, r, lse[r]);
        else
            cr_assert(fabs(lse[r] - l_ref[r]) <= 1e-4, "%s: row %zu lse %.7f vs %.7f", name, r,
                      lse[r], l_ref[r]);
        for (int d = 0; d < kv.d_v; d++)
            cr_assert(fabs(o[r * kv.d_v + d] - o_ref[r * kv.d_v + d]) <= 1e-4,
                      "%s (chunk %d, %d chunks): row %zu d %d: %.7f vs %.7f", name, st.chunk_tokens,
                      st.n_chunks, r, d, o[r * kv.d_v + d], o_ref[r * kv.d_v + d]);
    }
    free(pool);
    free(q);
    free(o);
    free(lse);
    free(o_ref);
    free(l_ref);
    return st;
}

Test(attn_emu, gqa_d64_split_and_single_chunk)
{
    ws_kv_layout kv = {.page_tokens = 16, .n_kv_heads = 2, .d_k = 64, .d_v = 64, .dtype = WS_DT_BF16};
    int lens[4] = {200, 1, 0, 70};
    ws_gpu_attn_stats st = run("d64 g8 auto", kv, 16, 4, lens, 2, 0);
    cr_assert_eq(st.second_pass, 1);
    st = run("d64 g8 chunk 64", kv, 16, 4, lens, 2, 64);
    cr_assert_eq(st.n_chunks, 4 + 1 + 0 + 2);
    st = run("d64 g8 one chunk", kv, 16, 1, lens, 2, 1 << 20);
    cr_assert_eq(st.second_pass, 0, "one chunk per sequence: pass 1 writes the output");
}

Test(attn_emu, gqa_group_sizes)
{
    const int groups[] = {1, 3, 5, 16};
    int lens[2] = {130, 7};
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        ws_kv_layout kv = {.page_tokens = 128, .n_kv_heads = 2, .d_k = 64, .d_v = 64, .dtype = WS_DT_FP16};
        char name[64];
        snprintf(name, sizeof name, "d64 group %d", groups[g]);
        run(name, kv, 2 * groups[g], 2, lens, 1, 64);
    }
}

Test(attn_emu, gqa_d128_and_d256)
{
    ws_kv_layout kv = {.page_tokens = 256, .n_kv_heads = 1, .d_k = 128, .d_v = 128, .dtype = WS_DT_FP16};
    int lens[1] = {150};
    run("d128 group 4", kv, 4, 1, lens, 1, 64);
    ws_kv_layout kv2 = {.page_tokens = 32, .n_kv_heads = 2, .d_k = 256, .d_v = 256, .dtype = WS_DT_BF16};
    int lens2[2] = {100, 33};
    run("d256 group 2", kv2, 4, 2, lens2, 1, 32);
}

Test(attn_emu, mla_absorbed)
{
    ws_kv_layout kv = {.page_tokens = 64, .n_kv_heads = 1, .d_k = 576, .d_v = 512, .v_shares_k = 1,
                       .dtype = WS_DT_FP16};
    int lens[2] = {90, 3};
    run("mla 16 heads", kv, 16, 2, lens, 1, 32);
    kv.dtype = WS_DT_BF16;
    int lens2[1] = {40};
    run("mla 48 heads (3 sub-groups)", kv, 48, 1, lens2, 1, 0);
}

Test(attn_emu, unsupported_shapes)
{
    ws_kv_layout kv = {.page_tokens = 16, .n_kv_heads = 1, .d_k = 96, .d_v = 96, .dtype = WS_DT_FP16};
    uint16_t page[16 * 96 * 2] = {0};
    const void *tab[1] = {page};
    ws_attn_seq s = {.pages = tab, .n_tokens = 3};
    float q[96] = {0}, o[96], l[1];
    ws_attn_problem p = {.kv = kv, .n_q_heads = 1, .scale = 1, .n_seqs = 1, .seqs = &s, .q = q, .o = o, .lse = l};
    ws_err err = {0};
    cr_assert_eq(ws_attn_emu_run(&p, 1, 0, NULL, &err), WS_EUNSUP);
}
