/* test_attn_split: the split-K plan and its CPU model (kernels/attn_split.c): chunk lists
 * cover each sequence exactly once, and the chunked attention reduced by the GPU's lse
 * rule equals the unsplit fp64 reference, for GQA and MLA shapes, bf16 and fp16. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_split.h"
#include "half.h"

static unsigned g_rng = 777;
static float frand(void)
{
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)((g_rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

typedef struct prob {
    ws_attn_problem p;
    ws_attn_seq seq[8];
    const void **tab[8];
    uint16_t *pool;
    float *q, *o, *lse;
} prob;

static void make(prob *f, ws_kv_layout kv, int n_q, int n_seqs, const int *lens, float qamp)
{
    memset(f, 0, sizeof *f);
    f->p.kv = kv;
    f->p.n_q_heads = n_q;
    f->p.scale = 1.0f / sqrtf((float)kv.d_k);
    f->p.n_seqs = n_seqs;
    f->p.seqs = f->seq;
    int pages = 0;
    for (int s = 0; s < n_seqs; s++)
        pages += (lens[s] + kv.page_tokens - 1) / kv.page_tokens;
    size_t pe = ws_kv_page_bytes(&kv) / 2;
    f->pool = malloc(2 * pe * (size_t)(pages + 1));
    for (size_t i = 0; i < pe * (size_t)pages; i++)
        f->pool[i] = kv.dtype == WS_DT_BF16 ? ws_f32_to_bf16(frand()) : ws_f32_to_fp16(frand());
    int next = 0;
    for (int s = 0; s < n_seqs; s++) {
        int np = (lens[s] + kv.page_tokens - 1) / kv.page_tokens;
        f->tab[s] = malloc(sizeof(void *) * (size_t)(np + 1));
        for (int i = 0; i < np; i++)
            f->tab[s][i] = f->pool + pe * (size_t)(next++);
        f->seq[s].pages = f->tab[s];
        f->seq[s].n_tokens = lens[s];
    }
    size_t nqk = (size_t)n_seqs * n_q * kv.d_k;
    f->q = malloc(sizeof(float) * nqk);
    for (size_t i = 0; i < nqk; i++)
        f->q[i] = qamp * frand();
    f->o = malloc(sizeof(float) * (size_t)n_seqs * n_q * kv.d_v);
    f->lse = malloc(sizeof(float) * (size_t)n_seqs * n_q);
    f->p.q = f->q;
    f->p.o = f->o;
    f->p.lse = f->lse;
}

static void unmake(prob *f)
{
    for (int s = 0; s < f->p.n_seqs; s++)
        free(f->tab[s]);
    free(f->pool);
    free(f->q);
    free(f->o);
    free(f->lse);
}

/* Split-K model vs the unsplit reference for several chunk lengths. */
static void check_split(ws_kv_layout kv, int n_q, int n_seqs, const int *lens, float qamp)
{
    prob f;
    make(&f, kv, n_q, n_seqs, lens, qamp);
    size_t rows = (size_t)n_seqs * n_q;
    double *o_ref = malloc(sizeof(double) * rows * kv.d_v), *l_ref = malloc(sizeof(double) * rows);
    ws_err err = {0};
    cr_assert_eq(ws_attn_ref(&f.p, o_ref, l_ref, &err), 0, "%s", err.msg);
    const int chunks[] = {1, 3, 16, 64, 100000};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        cr_assert_eq(ws_attn_splitk_ref(&f.p, chunks[c], &err), 0, "%s", err.msg);
        for (size_t r = 0; r < rows; r++) {
            if (isinf(l_ref[r])) {
                cr_assert(isinf(f.lse[r]) && f.lse[r] < 0, "row %zu", r);
                continue;
            }
            cr_assert_float_eq(f.lse[r], l_ref[r], 1e-4, "chunk %d row %zu", chunks[c], r);
            for (int d = 0; d < kv.d_v; d++)
                cr_assert_float_eq(f.o[r * kv.d_v + d], o_ref[r * kv.d_v + d], 2e-5,
                                   "chunk %d row %zu d %d", chunks[c], r, d);
        }
    }
    free(o_ref);
    free(l_ref);
    unmake(&f);
}

Test(attn_split, gqa_bf16_matches_reference)
{
    ws_kv_layout kv = {.page_tokens = 16, .n_kv_heads = 2, .d_k = 64, .d_v = 64, .dtype = WS_DT_BF16};
    int lens[4] = {200, 1, 0, 47};
    check_split(kv, 8, 4, lens, 3.0f);
}

Test(attn_split, mla_fp16_matches_reference)
{
    ws_kv_layout kv = {.page_tokens = 32, .n_kv_heads = 1, .d_k = 576, .d_v = 512,
                       .v_shares_k = 1, .dtype = WS_DT_FP16};
    int lens[2] = {130, 33};
    check_split(kv, 16, 2, lens, 1.0f);
}

Test(attn_split, chunk_list_covers_each_sequence_once)
{
    prob f;
    ws_kv_layout kv = {.page_tokens = 8, .n_kv_heads = 1, .d_k = 64, .d_v = 64, .dtype = WS_DT_FP16};
    int lens[5] = {0, 1, 64, 65, 1000};
    make(&f, kv, 1, 5, lens, 1.0f);
    ws_attn_chunk ch[256];
    int first[5], count[5];
    int n = ws_attn_split(&f.p, 64, ch, 256, first, count);
    cr_assert_eq(n, 0 + 1 + 1 + 2 + 16);
    for (int s = 0; s < 5; s++) {
        int covered = 0;
        for (int i = 0; i < count[s]; i++) {
            const ws_attn_chunk *c = &ch[first[s] + i];
            cr_assert_eq(c->seq, s);
            cr_assert_eq(c->begin, covered, "chunks are in order and contiguous");
            cr_assert(c->end > c->begin && c->end - c->begin <= 64);
            covered = c->end;
        }
        cr_assert_eq(covered, lens[s]);
    }
    cr_assert_eq(ws_attn_split(&f.p, 64, ch, 19, NULL, NULL), -1, "capacity is enforced");
    unmake(&f);
}

Test(attn_split, chunk_length_rule)
{
    prob f;
    ws_kv_layout kv = {.page_tokens = 256, .n_kv_heads = 8, .d_k = 128, .d_v = 128, .dtype = WS_DT_BF16};
    int lens[1] = {32768};
    make(&f, kv, 32, 1, lens, 1.0f);
    /* 8 blocks per chunk, 1056 target blocks: 132 chunks -> 249 tokens -> tile 64 -> 256. */
    int t = ws_attn_split_chunk_tokens(&f.p, 8, 1056, 64, 128);
    cr_assert_eq(t, 256);
    cr_assert_eq(t % 64, 0);
    /* Never below the minimum, never longer than the longest sequence (rounded up). */
    cr_assert_eq(ws_attn_split_chunk_tokens(&f.p, 8, 1 << 20, 64, 512), 512);
    cr_assert_eq(ws_attn_split_chunk_tokens(&f.p, 8, 1, 64, 128), 32768);
    f.seq[0].n_tokens = 5;
    cr_assert_eq(ws_attn_split_chunk_tokens(&f.p, 8, 1056, 64, 128), 64);
    f.seq[0].n_tokens = 32768;
    unmake(&f);
}

Test(attn_split, reduce_row_edge_cases)
{
    float o[3 * 2] = {1, 2, 3, 4, 5, 6}, l[3] = {-INFINITY, -INFINITY, -INFINITY}, out[2], lse;
    ws_attn_reduce_row(o, l, 3, 2, out, &lse);
    cr_assert(isinf(lse) && lse < 0);
    cr_assert_eq(out[0], 0.0f);
    ws_attn_reduce_row(o, l, 0, 2, out, &lse);
    cr_assert(isinf(lse) && lse < 0);
    l[1] = 2000.0f; /* one non-empty part, huge lse: exact pass-through, no overflow */
    ws_attn_reduce_row(o, l, 3, 2, out, &lse);
    cr_assert_eq(out[0], 3.0f);
    cr_assert_eq(out[1], 4.0f);
    cr_assert_eq(lse, 2000.0f);
    l[2] = 2000.0f; /* two equal parts: average, lse + log 2 */
    ws_attn_reduce_row(o, l, 3, 2, out, &lse);
    cr_assert_float_eq(out[0], 4.0f, 1e-6);
    cr_assert_float_eq(lse, 2000.0f + logf(2.0f), 1e-3);
}
