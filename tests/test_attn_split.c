/* test_attn_split: the split-K plan and its CPU model (kernels/attn_split.c): chunk lists
 * cover each sequence exactly once, and the chunked attention reduced by the GPU's lse
 * rule equals the unsplit fp64 reference, for GQA and MLA shapes, bf16 and fp16. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_fixture.h"
#include "attn_split.h"
#include "half.h"

typedef th_attn prob; /* tests/attn_fixture.h */

/* Split-K model vs the unsplit reference for several chunk lengths. */
static void check_split(ws_kv_layout kv, int n_q, int n_seqs, const int *lens, float qamp)
{
    prob f;
    th_attn_make(&f, kv, n_q, n_seqs, lens, qamp);
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
    th_attn_free(&f);
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
    th_attn_make(&f, kv, 1, 5, lens, 1.0f);
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
    th_attn_free(&f);
}

Test(attn_split, chunk_length_rule)
{
    prob f;
    ws_kv_layout kv = {.page_tokens = 256, .n_kv_heads = 8, .d_k = 128, .d_v = 128, .dtype = WS_DT_BF16};
    int lens[1] = {32768};
    th_attn_make(&f, kv, 32, 1, lens, 1.0f);
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
    th_attn_free(&f);
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
