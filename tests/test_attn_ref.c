/* test_attn_ref: the fp64 reference attention, the merge and the half conversions
 * (kernels/attn_ref.c, kernels/half.h) -- the oracle every fast kernel is compared with. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "attn_fixture.h"
#include "half.h"

Test(half, bf16_known_values)
{
    cr_assert_eq(ws_f32_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(ws_f32_to_bf16(-2.0f), 0xc000);
    cr_assert_eq(ws_bf16_to_f32(0x3f80), 1.0f);
    /* 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even (1.0). */
    cr_assert_eq(ws_f32_to_bf16(1.00390625f), 0x3f80);
    cr_assert_eq(ws_f32_to_bf16(1.01171875f), 0x3f82); /* halfway, odd below -> up */
    cr_assert(isnan(ws_bf16_to_f32(ws_f32_to_bf16(NAN))));
}

Test(half, fp16_known_values)
{
    cr_assert_eq(ws_f32_to_fp16(1.0f), 0x3c00);
    cr_assert_eq(ws_f32_to_fp16(-2.0f), 0xc000);
    cr_assert_eq(ws_f32_to_fp16(65504.0f), 0x7bff);
    cr_assert_eq(ws_f32_to_fp16(65520.0f), 0x7c00);        /* rounds to inf */
    cr_assert_eq(ws_f32_to_fp16(5.9604645e-8f), 0x0001);   /* 2^-24, smallest subnormal */
    cr_assert_eq(ws_f32_to_fp16(2.0f * 5.9604645e-8f), 0x0002);
    cr_assert_eq(ws_f32_to_fp16(1e-9f), 0x0000);
    cr_assert_eq(ws_fp16_to_f32(0x0001), 5.9604645e-8f);
    cr_assert_eq(ws_fp16_to_f32(0x7bff), 65504.0f);
    cr_assert(isinf(ws_fp16_to_f32(0x7c00)));
    cr_assert(isnan(ws_fp16_to_f32(ws_f32_to_fp16(NAN))));
    /* Every finite half survives a round trip through float. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00)
            continue;
        cr_assert_eq(ws_f32_to_fp16(ws_fp16_to_f32((uint16_t)h)), h, "0x%04x", h);
    }
}

typedef th_attn fixture; /* tests/attn_fixture.h */

Test(attn_ref, single_token_and_empty)
{
    fixture f;
    ws_kv_layout kv = {.page_tokens = 4, .n_kv_heads = 2, .d_k = 8, .d_v = 8, .dtype = WS_DT_BF16};
    int lens[2] = {1, 0};
    th_attn_make(&f, kv, 4, 2, lens, 1.0f);
    double o[2 * 4 * 8], lse[8];
    ws_err err = {0};
    cr_assert_eq(ws_attn_ref(&f.p, o, lse, &err), 0, "%s", err.msg);
    const uint16_t *pg = f.seq[0].pages[0];
    for (int h = 0; h < 4; h++) {
        int kvh = h / 2;
        double dot = 0;
        for (int d = 0; d < 8; d++)
            dot += f.q[h * 8 + d] * ws_bf16_to_f32(pg[ws_kv_k_off(&kv, kvh, 0) + d]);
        cr_assert_float_eq(lse[h], dot * f.p.scale, 1e-12);
        for (int d = 0; d < 8; d++)
            cr_assert_float_eq(o[h * 8 + d], ws_bf16_to_f32(pg[ws_kv_v_off(&kv, kvh, 0) + d]),
                               1e-12);
    }
    for (int h = 4; h < 8; h++) {
        cr_assert(isinf(lse[h]) && lse[h] < 0);
        for (int d = 0; d < 8; d++)
            cr_assert_eq(o[h * 8 + d], 0.0);
    }
    th_attn_free(&f);
}

Test(attn_ref, zero_keys_average_values)
{
    fixture f;
    ws_kv_layout kv = {.page_tokens = 16, .n_kv_heads = 1, .d_k = 576, .d_v = 512,
                       .v_shares_k = 1, .dtype = WS_DT_FP16};
    int lens[1] = {37};
    th_attn_make(&f, kv, 16, 1, lens, 1.0f);
    /* Zero q: all scores 0 -> o = mean of V rows (the first 512 of each 576 row), lse = log n. */
    memset(f.q, 0, sizeof(float) * 16 * 576);
    double o[16 * 512], lse[16];
    ws_err err = {0};
    cr_assert_eq(ws_attn_ref(&f.p, o, lse, &err), 0, "%s", err.msg);
    for (int d = 0; d < 512; d += 97) {
        double mean = 0;
        for (int t = 0; t < 37; t++)
            mean += ws_fp16_to_f32(((const uint16_t *)f.seq[0].pages[t / 16])[ws_kv_k_off(&kv, 0, t % 16) + d]);
        mean /= 37;
        cr_assert_float_eq(o[5 * 512 + d], mean, 1e-12);
    }
    cr_assert_float_eq(lse[3], log(37.0), 1e-12);
    th_attn_free(&f);
}

Test(attn_ref, merge_of_parts_equals_union)
{
    fixture f;
    ws_kv_layout kv = {.page_tokens = 8, .n_kv_heads = 2, .d_k = 64, .d_v = 64, .dtype = WS_DT_BF16};
    int lens[1] = {100};
    th_attn_make(&f, kv, 8, 1, lens, 1.0f);
    double o_full[8 * 64], lse_full[8];
    ws_err err = {0};
    cr_assert_eq(ws_attn_ref(&f.p, o_full, lse_full, &err), 0, "%s", err.msg);
    /* Split the 100 tokens into parts (one empty), attend each sparsely, merge in float. */
    for (int parts = 2; parts <= 8; parts++) {
        float acc_o[8 * 64], acc_l[8];
        for (int r = 0; r < 8; r++)
            acc_l[r] = -INFINITY;
        memset(acc_o, 0, sizeof acc_o);
        for (int k = 0; k <= parts; k++) { /* part `parts` gets nothing */
            int32_t sel[100];
            int n = 0;
            for (int t = 0; t < 100; t++)
                if (k < parts && (t * 7 + 3) % parts == k)
                    sel[n++] = t;
            f.seq[0].sel = sel;
            f.seq[0].n_sel = n;
            double o[8 * 64], l[8];
            cr_assert_eq(ws_attn_ref(&f.p, o, l, &err), 0, "%s", err.msg);
            float of[8 * 64], lf[8];
            for (int i = 0; i < 8 * 64; i++)
                of[i] = (float)o[i];
            for (int i = 0; i < 8; i++)
                lf[i] = (float)l[i];
            ws_attn_merge(acc_o, acc_l, of, lf, acc_o, acc_l, 8, 64);
        }
        f.seq[0].sel = NULL;
        for (int i = 0; i < 8 * 64; i++)
            cr_assert_float_eq(acc_o[i], o_full[i], 2e-6, "parts %d elem %d", parts, i);
        for (int i = 0; i < 8; i++)
            cr_assert_float_eq(acc_l[i], lse_full[i], 2e-5);
    }
    th_attn_free(&f);
}

Test(attn_ref, merge_empty_sides)
{
    float oa[2] = {1, 2}, la[1] = {-INFINITY}, ob[2] = {3, 4}, lb[1] = {0.5f}, o[2], l[1];
    ws_attn_merge(oa, la, ob, lb, o, l, 1, 2);
    cr_assert_eq(o[0], 3.0f);
    cr_assert_eq(o[1], 4.0f);
    cr_assert_eq(l[0], 0.5f);
    lb[0] = -INFINITY;
    ws_attn_merge(oa, la, ob, lb, o, l, 1, 2);
    cr_assert_eq(o[0], 0.0f);
    cr_assert(isinf(l[0]) && l[0] < 0);
    /* Large lse values do not overflow. */
    la[0] = 1000.0f;
    lb[0] = 1000.0f;
    ws_attn_merge(oa, la, ob, lb, o, l, 1, 2);
    cr_assert_float_eq(o[0], 2.0f, 1e-6);
    cr_assert_float_eq(l[0], 1000.0f + logf(2.0f), 1e-3);
}

Test(attn_ref, validation_errors)
{
    fixture f;
    ws_kv_layout kv = {.page_tokens = 4, .n_kv_heads = 2, .d_k = 8, .d_v = 8, .dtype = WS_DT_BF16};
    int lens[1] = {10};
    th_attn_make(&f, kv, 4, 1, lens, 1.0f);
    ws_err err = {0};
    int32_t dup[3] = {1, 5, 1}, out_of_range[2] = {0, 10}, unsorted[3] = {9, 0, 4};
    f.seq[0].sel = dup;
    f.seq[0].n_sel = 3;
    cr_assert_eq(ws_attn_validate(&f.p, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "listed twice"), NULL, "%s", err.msg);
    f.seq[0].sel = out_of_range;
    f.seq[0].n_sel = 2;
    cr_assert_eq(ws_attn_validate(&f.p, &err), WS_EINVAL);
    f.seq[0].sel = unsorted;
    f.seq[0].n_sel = 3;
    cr_assert_eq(ws_attn_validate(&f.p, &err), 0, "unsorted is fine: %s", err.msg);
    th_attn_free(&f);
    /* The same indices in two sequences are fine (the duplicate check is per sequence),
     * and a sequence after a shorter one sees a clean slate. */
    int lens2[3] = {10, 6, 10};
    th_attn_make(&f, kv, 4, 3, lens2, 1.0f);
    int32_t a0[3] = {9, 2, 5}, a1[2] = {5, 2}, a2[4] = {2, 5, 9, 2};
    f.seq[0].sel = a0, f.seq[0].n_sel = 3;
    f.seq[1].sel = a1, f.seq[1].n_sel = 2;
    cr_assert_eq(ws_attn_validate(&f.p, &err), 0, "%s", err.msg);
    f.seq[2].sel = a2, f.seq[2].n_sel = 4;
    cr_assert_eq(ws_attn_validate(&f.p, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "sequence 2: sparse index 2 listed twice"), NULL, "%s", err.msg);
    f.seq[2].n_sel = 3;
    cr_assert_eq(ws_attn_validate(&f.p, &err), 0, "%s", err.msg);
    f.seq[0].sel = f.seq[1].sel = f.seq[2].sel = NULL;
    f.p.n_q_heads = 3;
    cr_assert_eq(ws_attn_validate(&f.p, &err), WS_EINVAL);
    f.p.n_q_heads = 4;
    f.p.kv.dtype = WS_DT_FP32;
    cr_assert_eq(ws_attn_validate(&f.p, &err), WS_EUNSUP);
    f.p.kv.dtype = WS_DT_BF16;
    f.p.kv.d_k = 0;
    cr_assert_eq(ws_attn_validate(&f.p, &err), WS_EUNSUP);
    f.p.kv.d_k = 8;
    f.p.kv.n_kv_heads = 0;
    cr_assert_eq(ws_attn_validate(&f.p, &err), WS_EINVAL);
    f.p.kv.n_kv_heads = 2;
    const void *holes[3] = {f.tables[0][0], NULL, f.tables[0][2]};
    f.seq[0].pages = holes;
    cr_assert_eq(ws_attn_validate(&f.p, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "page 1 is NULL"), NULL, "%s", err.msg);
    th_attn_free(&f);
}

/* V in token pairs: element d of token t at pair row t / 2, slot 2 d + t % 2, after the K
 * block; only with a separate V block and an even page size. */
Test(attn_ref, v_pairs_layout)
{
    ws_kv_layout kv = {.page_tokens = 4, .n_kv_heads = 2, .d_k = 8, .d_v = 6, .dtype = WS_DT_BF16};
    kv.v_pairs = 1;
    const size_t vbase = 2 * 4 * 8; /* the K block */
    cr_assert_eq(ws_kv_v_elem(&kv, 0, 0, 0), vbase);
    cr_assert_eq(ws_kv_v_elem(&kv, 0, 1, 0), vbase + 1);
    cr_assert_eq(ws_kv_v_elem(&kv, 0, 1, 5), vbase + 11);
    cr_assert_eq(ws_kv_v_elem(&kv, 0, 2, 0), vbase + 12);
    cr_assert_eq(ws_kv_v_elem(&kv, 1, 3, 2), vbase + 4 * 6 + 12 + 5);
    cr_assert_eq(ws_kv_v_pair_off(&kv, 1, 3), vbase + 4 * 6 + 12);
    kv.v_pairs = 0;
    cr_assert_eq(ws_kv_v_elem(&kv, 1, 3, 2), ws_kv_v_off(&kv, 1, 3) + 2);
    /* The page is the same size either way, and the reference reads it in pair order. */
    fixture f;
    int lens[1] = {4};
    kv.d_v = 8;
    th_attn_make(&f, kv, 2, 1, lens, 0.0f); /* q = 0: o is the mean of the V rows */
    f.p.kv.v_pairs = 1;
    uint16_t *pg = (uint16_t *)f.tables[0][0];
    ws_err err = {0};
    cr_assert_eq(ws_attn_ref(&f.p, f.o_ref, f.lse_ref, &err), 0, "%s", err.msg);
    for (int d = 0; d < 8; d++) {
        double mean = 0;
        for (int t = 0; t < 4; t++)
            mean += ws_bf16_to_f32(pg[2 * 4 * 8 + (t / 2) * 16 + 2 * d + t % 2]) / 4.0;
        cr_assert_float_eq(f.o_ref[d], mean, 1e-9, "d %d", d);
    }
    f.p.kv.page_tokens = 3;
    f.seq[0].n_tokens = 3;
    cr_assert_eq(ws_attn_validate(&f.p, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "token pairs"), NULL, "%s", err.msg);
    f.p.kv.page_tokens = 4;
    f.p.kv.v_shares_k = 1;
    cr_assert_eq(ws_attn_validate(&f.p, &err), WS_EINVAL);
    th_attn_free(&f);
}

/* K in tiles: element d of token t at tile t / 16 (16 d_k elements), row d / 2, slot
 * 2 (t % 16) + d % 2; only with a separate V block, pages of a multiple of 16 tokens and an
 * even d_k. */
Test(attn_ref, k_tiles_layout)
{
    ws_kv_layout kv = {.page_tokens = 32, .n_kv_heads = 2, .d_k = 8, .d_v = 6, .dtype = WS_DT_BF16};
    kv.k_tiles = 1;
    cr_assert_eq(ws_kv_k_elem(&kv, 0, 0, 0), 0);
    cr_assert_eq(ws_kv_k_elem(&kv, 0, 0, 1), 1);
    cr_assert_eq(ws_kv_k_elem(&kv, 0, 1, 0), 2);
    cr_assert_eq(ws_kv_k_elem(&kv, 0, 0, 2), 32);
    cr_assert_eq(ws_kv_k_elem(&kv, 0, 15, 7), 3 * 32 + 30 + 1);
    cr_assert_eq(ws_kv_k_elem(&kv, 0, 17, 3), 16 * 8 + 32 + 2 + 1);
    cr_assert_eq(ws_kv_k_elem(&kv, 1, 16, 0), ws_kv_k_off(&kv, 1, 16));
    cr_assert_eq(ws_kv_v_off(&kv, 0, 0), 2 * 32 * 8); /* the K block is as large as rows */
    kv.k_tiles = 0;
    cr_assert_eq(ws_kv_k_elem(&kv, 1, 17, 3), ws_kv_k_off(&kv, 1, 17) + 3);
    /* The reference reads K in tile order: with q = e_0 (one head), each token's score is
     * its K element 0, and softmax weights follow them. */
    fixture f;
    int lens[1] = {32};
    kv.d_v = 8;
    th_attn_make(&f, kv, 2, 1, lens, 0.0f);
    f.p.kv.k_tiles = 1;
    memset(f.q, 0, sizeof(float) * 2 * 8);
    f.q[0] = 1.0f;
    f.p.scale = 1.0f;
    const uint16_t *pg = (const uint16_t *)f.tables[0][0];
    ws_err err = {0};
    cr_assert_eq(ws_attn_ref(&f.p, f.o_ref, f.lse_ref, &err), 0, "%s", err.msg);
    double sum = 0;
    for (int t = 0; t < 32; t++)
        sum += exp((double)ws_bf16_to_f32(pg[(t / 16) * 16 * 8 + 2 * (t % 16)]));
    cr_assert_float_eq(f.lse_ref[0], log(sum), 1e-9);
    f.p.kv.page_tokens = 24;
    f.seq[0].n_tokens = 24;
    cr_assert_eq(ws_attn_validate(&f.p, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "K in tiles"), NULL, "%s", err.msg);
    f.p.kv.page_tokens = 32;
    f.p.kv.v_shares_k = 1;
    cr_assert_eq(ws_attn_validate(&f.p, &err), WS_EINVAL);
    th_attn_free(&f);
}
