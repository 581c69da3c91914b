/* test_oppoints: operator rows against the cost model (validate/oppoints.c). Each row kind is
 * predicted with runtime/cost's kernel functions at its per-GPU shape (worked out by hand on
 * the A100 80GB datasheet profile), and the per-group statistics (median, mean, nearest-rank
 * percentiles, worst with its row, the long rows apart, held-out rows only) are those of the
 * rows given. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "oppoints.h"
#include "profile.h"
#include "store.h"

static void a100(ws_hw *hw)
{
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    ws_profile p;
    cr_assert_eq(ws_profile_load(s, "a100-80gb-sxm", &p, &err), 0, "%s", err.msg);
    memset(hw, 0, sizeof *hw);
    cr_assert_eq(ws_hw_gpu_from_profile(&p, WS_ATTN_GQA, WS_DT_FP16, WS_DT_FP16, hw, &err), 0, "%s",
                 err.msg);
    ws_profile_free(&p);
    ws_store_close(s);
}

#define NEAR(a, b) cr_assert(fabs((a) - (b)) <= 1e-9 * fabs(b), "%s = %.12g, not %.12g", #a, a, b)

Test(oppoints, each_row_kind_on_its_kernel)
{
    ws_hw hw;
    a100(&hw);
    const double W = 2.039e12;
    /* decode: 8 sequences of 1024 tokens, 4 kv heads of 128 (fp16): 16 MiB of KV */
    ws_vidur_row d = {.op = WS_VOP_ATTN_DECODE, .q_heads = 32, .kv_heads = 4, .head_dim = 128,
                      .batch = 8, .kv = 1024};
    NEAR(ws_oppoint_predict(&d, &hw, 2), 15e-6 + 8 * 1024 * 2048.0 / (W * 0.85));
    /* prefill: 1024 tokens after 1024, one sequence */
    ws_vidur_row p = {.op = WS_VOP_ATTN_PREFILL, .q_heads = 32, .kv_heads = 4, .head_dim = 128,
                      .batch = 1, .kv = 1024, .chunk = 1024};
    const double pairs = 1024 * 1024.0 + 1024 * 1025 / 2.0, k = pairs / 1024;
    NEAR(ws_oppoint_predict(&p, &hw, 2),
         4e-6 + 4 * 32 * 128 * pairs / (3.12e14 * 0.43 * k / (k + 1100)));
    p.batch = 3; /* one kernel: its fixed cost once */
    NEAR(ws_oppoint_predict(&p, &hw, 2),
         4e-6 + 3 * 4 * 32 * 128 * pairs / (3.12e14 * 0.43 * k / (k + 1100)));
    /* a GEMM and the elementwise kernels, 512 tokens */
    ws_vidur_row g = {.op = WS_VOP_DOWN, .M = 512, .K = 7168, .N = 4096};
    NEAR(ws_oppoint_predict(&g, &hw, 2),
         8e-6 + fmax(2 * 512 * 7168 * 4096.0 / (3.12e14 * 0.7),
                     (512 * 7168.0 + 7168 * 4096.0 + 512 * 4096.0) * 2 / (W * 0.85)));
    ws_vidur_row e = {.op = WS_VOP_NORM_POST, .M = 512, .K = 4096};
    NEAR(ws_oppoint_predict(&e, &hw, 2), 1.5e-6 + (2 * 512 * 4096.0 + 4096) * 2 / (W * 0.35));
    e = (ws_vidur_row){.op = WS_VOP_ROPE, .M = 512, .K = 20, .N = 128};
    NEAR(ws_oppoint_predict(&e, &hw, 2), 1.5e-6 + 2 * 512 * 20 * 128.0 * 2 / (W * 0.44));
    e = (ws_vidur_row){.op = WS_VOP_ACT, .M = 512, .K = 7168};
    NEAR(ws_oppoint_predict(&e, &hw, 2), 1.5e-6 + 3 * 512 * 7168.0 * 2 / (W * 0.49));
    e = (ws_vidur_row){.op = WS_VOP_ADD, .M = 512, .K = 4096};
    NEAR(ws_oppoint_predict(&e, &hw, 2), 1.5e-6 + 3 * 512 * 4096.0 * 2 / (W * 0.92));
}

Test(oppoints, statistics_per_group)
{
    ws_hw hw;
    a100(&hw);
    /* Ten GEMM rows whose times are the model's times 1.00 .. 1.09 times (errors 0..9%, as a
     * measured / predicted ratio r the error is |1/r - 1|), one of them held out; and one
     * decode row. */
    ws_vidur_row v[11];
    double pct[10];
    for (int i = 0; i < 10; i++) {
        v[i] = (ws_vidur_row){.op = WS_VOP_QKV, .M = 64 << i, .K = 4096, .N = 6144,
                              .heldout = i == 7};
        const double t = ws_oppoint_predict(&v[i], &hw, 2);
        v[i].t = t * (1 + 0.01 * i);
        pct[i] = 100 * fabs(t - v[i].t) / v[i].t;
    }
    v[10] = (ws_vidur_row){.op = WS_VOP_ATTN_DECODE, .q_heads = 32, .kv_heads = 4,
                           .head_dim = 128, .batch = 1, .kv = 64};
    v[10].t = 2 * ws_oppoint_predict(&v[10], &hw, 2); /* predicted half: 50% */
    ws_vidur_rows rows = {.v = v, .n = 11};
    ws_oppoints op;
    ws_err err = {0};
    const double min_s = v[5].t; /* rows 5.. are the long ones */
    cr_assert_eq(ws_oppoints_eval(&rows, &hw, 2, 0, min_s, &op, &err), 0, "%s", err.msg);
    const ws_oppoint_stats *g = &op.group[WS_VIDUR_GEMM];
    cr_assert_eq(g->n, 10);
    NEAR(g->median_pct, 0.5 * (pct[4] + pct[5]));
    double mean = 0;
    for (int i = 0; i < 10; i++)
        mean += pct[i] / 10;
    NEAR(g->mean_pct, mean);
    NEAR(g->p90_pct, pct[8]); /* nearest rank: the 9th of 10 */
    NEAR(g->p95_pct, pct[9]);
    NEAR(g->worst_pct, pct[9]);
    cr_assert_eq(g->worst_row, 9);
    cr_assert_eq(g->n_long, 5);
    NEAR(g->median_long_pct, pct[7]);
    cr_assert_eq(op.group[WS_VIDUR_DECODE_ATTN].n, 1);
    NEAR(op.group[WS_VIDUR_DECODE_ATTN].worst_pct, 50.0);
    cr_assert_eq(op.group[WS_VIDUR_PREFILL_ATTN].n, 0);
    cr_assert(isnan(op.group[WS_VIDUR_PREFILL_ATTN].median_pct));
    cr_assert_eq(op.group[WS_VIDUR_PREFILL_ATTN].worst_row, -1);
    /* held-out rows only */
    cr_assert_eq(ws_oppoints_eval(&rows, &hw, 2, 1, 0, &op, &err), 0, "%s", err.msg);
    cr_assert_eq(op.group[WS_VIDUR_GEMM].n, 1);
    NEAR(op.group[WS_VIDUR_GEMM].worst_pct, pct[7]);
    cr_assert_eq(op.group[WS_VIDUR_DECODE_ATTN].n, 0);
}
