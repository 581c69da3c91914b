/* test_cost: the shared cost model (runtime/cost.c). Rates from the datasheet profiles and
 * their sources, calibrated keys winning over the datasheet (in a hand-built profile and
 * through a stored calibration), A and B of DESIGN section 3 worked out by hand for
 * Qwen3-30B-A3B on the paper's A100 PCIe + Xeon Gold 5318Y, H2D under contention, the
 * prefetch term, distinct experts against exhaustive enumeration, and the per-op times. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "calib.h"
#include "control.h"
#include "cost.h"
#include "schedule.h"
#include "helpers.h"

#define A100 "NVIDIA A100-PCIE-40GB" /* the CUDA name datasheet.json lists for a100-40gb-pcie */

static void load_model(const char *name, ws_model *m)
{
    char path[4096];
    ws_err err = {0};
    cr_assert_eq(ws_model_resolve(name, path, sizeof path, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_model_load(path, m, &err), 0, "%s", err.msg);
}

static void paper_model(ws_cost_model *cm, const ws_deploy_cfg *cfg_in)
{
    ws_model m;
    load_model("qwen3-30b-a3b", &m);
    ws_hw hw;
    th_paper_hw(NULL, &m, &hw);
    ws_deploy_cfg cfg;
    ws_deploy_cfg_default(&cfg);
    if (cfg_in)
        cfg = *cfg_in;
    ws_err err = {0};
    cr_assert_eq(ws_cost_model_init(&hw, &m, &cfg, cm, &err), 0, "%s", err.msg);
}

/* The controller's prefill strategy under `mode` for a chunk of q tokens after ctx, and the
 * step it plays for that chunk under a strategy (gpu 1: streamed). */
static int prefill_gpu_at(const ws_cost_model *cm, int mode, int threshold, double q,
                          double ctx)
{
    ws_policy_params par;
    ws_policy_params_default(&par);
    ws_ctl c;
    ws_err err = {0};
    cr_assert_eq(ws_ctl_init(&c, cm, WS_POLICY_WRITESCOPE, &par, cm->layers, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(ws_ctl_set_prefill(&c, mode, threshold, &err), 0);
    const ws_sched_in in = {.T = q, .prefill_q = q, .prefill_ctx = ctx};
    return ws_ctl_prefill_gpu(&c, &in);
}

static int prefill_gpu(const ws_cost_model *cm, int mode, double q, double ctx)
{
    return prefill_gpu_at(cm, mode, 0, q, ctx);
}

static double chunk_step(const ws_cost_model *cm, double q, double ctx, int gpu,
                         ws_sched_times *lay)
{
    const ws_sched_in in = {.T = q, .prefill_q = q, .prefill_ctx = ctx, .prefill_gpu = gpu};
    return ws_sched_play_step(cm, NULL, &in, cm->layers, lay);
}

/* A GPU profile "g" of the keys every hand-built test profile needs (40 GB, 1 TB/s HBM,
 * 100 Tflop/s bf16, 20 GB/s each way over the link) and the test's own `extra` after them. */
typedef struct test_gpu {
    ws_profile_param p[32];
    ws_profile prof;
} test_gpu;

static const ws_profile *base_gpu(test_gpu *g, const ws_profile_param *extra, size_t n)
{
    static const ws_profile_param base[] = {
        {"mem_bytes", 4e10, "B", WS_SOURCE_DATASHEET, ""},
        {"hbm_bw", 1e12, "B/s", WS_SOURCE_DATASHEET, ""},
        {"bf16_flops", 1e14, "flop/s", WS_SOURCE_DATASHEET, ""},
        {"h2d_bw", 2e10, "B/s", WS_SOURCE_MODELED, ""},
        {"d2h_bw", 2e10, "B/s", WS_SOURCE_MODELED, ""},
    };
    const size_t nb = sizeof base / sizeof *base;
    cr_assert_leq(nb + n, sizeof g->p / sizeof *g->p);
    memcpy(g->p, base, sizeof base);
    if (n)
        memcpy(g->p + nb, extra, n * sizeof *extra);
    g->prof = (ws_profile){.name = "g", .kind = "gpu", .params = g->p, .n_params = (int)(nb + n)};
    return &g->prof;
}

#define near(a, b)                                                                                 \
    cr_assert(fabs((double)(a) - (double)(b)) <= 1e-9 * fabs((double)(b)) + 1e-300,                \
              "%s = %.12g, not %.12g", #a, (double)(a), (double)(b))

Test(cost, roofline)
{
    ws_hw_roof r = {.c0 = {.v = 1e-5}, .P = {.v = 1e12}, .W = {.v = 1e11}};
    near(ws_hw_roof_time(&r, 1e9, 1e6), 1e-5 + 1e-3); /* compute-bound */
    near(ws_hw_roof_time(&r, 1e6, 1e9), 1e-5 + 1e-2); /* memory-bound */
    r.P.v = 0;                                          /* no compute side */
    near(ws_hw_roof_time(&r, 1e15, 1e9), 1e-5 + 1e-2);
}

Test(cost, datasheet_rates_and_sources)
{
    ws_model m;
    load_model("qwen3-30b-a3b", &m);
    ws_hw hw;
    th_paper_hw(NULL, &m, &hw);
    near(hw.cpu_attn.W.v, 1.877e11 * 0.75);
    near(hw.cpu_attn.P.v, 3.2256e12 * 0.50);
    cr_assert_eq(hw.cpu_attn.W.src, WS_SOURCE_MODELED);
    cr_assert_str_eq(hw.cpu_attn.W.from, "dram_bw x dram_eff");
    cr_assert_eq(hw.cpu_attn.c0.v, 0);
    near(hw.gpu_attn.W.v, 1.555e12 * 0.85);
    near(hw.gpu_attn.P.v, 3.12e14 * 0.70);
    near(hw.gpu_gemm.P.v, 3.12e14 * 0.70);
    near(hw.h2d.W.v, 2.52e10);
    near(hw.d2h.W.v, 2.52e10);
    near(hw.h2d_contention.v, 0.587);
    cr_assert_eq(hw.h2d_contention.src, WS_SOURCE_MODELED);
    cr_assert_str_eq(hw.h2d_contention.from, "h2d_contention");
    near(hw.gpu_mem.v, 42949672960.0);
    cr_assert_eq(hw.gpu_mem.src, WS_SOURCE_DATASHEET);
    cr_assert_str_eq(hw.gpu, "a100-40gb-pcie");
    cr_assert_str_eq(hw.host, "xeon-gold-5318y");
}

Test(cost, v100_without_bf16_uses_fp16_rate)
{
    ws_err err = {0};
    ws_store *s;
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    ws_profile g, h;
    cr_assert_eq(ws_profile_load(s, "v100-32gb-pcie", &g, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_profile_load(s, "xeon-gold-5318y", &h, &err), 0, "%s", err.msg);
    ws_hw hw;
    cr_assert_eq(ws_hw_from_profiles(&g, &h, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0, "%s",
                 err.msg);
    near(hw.gpu_gemm.P.v, 1.12e14 * 0.70);
    cr_assert_str_eq(hw.gpu_gemm.P.from, "fp16_flops x tensor_eff");
    /* A host profile as the GPU: no GPU rates, one clear error. */
    cr_assert_neq(ws_hw_from_profiles(&h, &h, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0);
    cr_assert(strstr(err.msg, "xeon-gold-5318y has no positive parameter"), "%s", err.msg);
    ws_profile_free(&g);
    ws_profile_free(&h);
    ws_store_close(s);
}

/* A hand-built profile: calibrated keys win over the datasheet keys next to them. */
Test(cost, calibrated_key_wins)
{
    ws_profile_param hp[] = {
        {"dram_bw", 1e11, "B/s", WS_SOURCE_DATASHEET, ""},
        {"dram_eff", 0.5, "1", WS_SOURCE_MODELED, ""},
        {"fp32_flops", 1e12, "flop/s", WS_SOURCE_DATASHEET, ""},
        {"flops_eff", 0.5, "1", WS_SOURCE_MODELED, ""},
        {"cpu.attn.gqa.bf16.c0", 2e-5, "s", WS_SOURCE_FITTED, ""},
        {"cpu.attn.gqa.bf16.peak_flops", 3e11, "flop/s", WS_SOURCE_FITTED, ""},
        {"cpu.attn.gqa.bf16.bandwidth", 4e10, "B/s", WS_SOURCE_MEASURED, ""},
        {"cpu.expert_gemm.fp32.bandwidth", 3e10, "B/s", WS_SOURCE_FITTED, ""},
        {"cpu.membw_read.bandwidth", 4.5e10, "B/s", WS_SOURCE_FITTED, ""},
    };
    ws_profile_param gx[] = {
        {"h2d_contention", 0.6, "1", WS_SOURCE_MODELED, ""},
        {"link.h2d.c0", 1e-5, "s", WS_SOURCE_FITTED, ""},
        {"link.h2d.bandwidth", 2.2e10, "B/s", WS_SOURCE_FITTED, ""},
        {"link.h2d_gemm_contention_factor.factor", 0.5, "1", WS_SOURCE_FITTED, ""},
        {"gpu.attn.mha.bf16.bandwidth", 9e11, "B/s", WS_SOURCE_FITTED, ""},
    };
    ws_profile host = {.name = "h", .kind = "host", .params = hp, .n_params = 9};
    test_gpu tg;
    ws_profile gpu = *base_gpu(&tg, gx, sizeof gx / sizeof *gx);
    ws_hw hw;
    ws_err err = {0};
    /* MHA finds the calibrator's gqa fit on the CPU and its own on the GPU. */
    cr_assert_eq(ws_hw_from_profiles(&gpu, &host, WS_ATTN_MHA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                 "%s", err.msg);
    near(hw.cpu_attn.c0.v, 2e-5);
    near(hw.cpu_attn.P.v, 3e11);
    near(hw.cpu_attn.W.v, 4e10);
    cr_assert_eq(hw.cpu_attn.W.src, WS_SOURCE_MEASURED);
    cr_assert_eq(hw.cpu_attn.P.src, WS_SOURCE_FITTED);
    cr_assert_str_eq(hw.cpu_attn.W.from, "cpu.attn.gqa.bf16.bandwidth");
    /* The expert fit has no P: the datasheet fills it in. */
    near(hw.cpu_expert.W.v, 3e10);
    near(hw.cpu_expert.P.v, 0.5e12);
    cr_assert_eq(hw.cpu_expert.P.src, WS_SOURCE_MODELED);
    near(hw.cpu_mem_bw.v, 4.5e10);
    /* No kv_reformat_bw (a database seeded before it): a DRAM copy, said so. */
    near(hw.kv_reformat.v, 4.5e10 / 2);
    cr_assert_eq(hw.kv_reformat.src, WS_SOURCE_MODELED);
    cr_assert_neq(strstr(hw.kv_reformat.from, "no kv_reformat_bw"), NULL, "%s", hw.kv_reformat.from);
    near(hw.h2d.W.v, 2.2e10);
    near(hw.h2d.c0.v, 1e-5);
    near(hw.d2h.W.v, 2e10);
    near(hw.h2d_contention.v, 0.5);
    cr_assert_eq(hw.h2d_contention.src, WS_SOURCE_FITTED);
    near(hw.gpu_attn.W.v, 9e11);
    cr_assert_eq(hw.gpu_attn.W.src, WS_SOURCE_FITTED);
    /* Without the calibrated keys, the datasheet values (last ones dropped). */
    host.n_params = 4;
    gpu.n_params = 6;
    cr_assert_eq(ws_hw_from_profiles(&gpu, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                 "%s", err.msg);
    near(hw.cpu_attn.W.v, 0.5e11);
    near(hw.h2d.W.v, 2e10);
    near(hw.h2d_contention.v, 0.6);
    cr_assert_eq(hw.h2d_contention.src, WS_SOURCE_MODELED);
    /* A profile from before h2d_contention existed: no contention, said so. */
    gpu.n_params = 5;
    cr_assert_eq(ws_hw_from_profiles(&gpu, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                 "%s", err.msg);
    near(hw.h2d_contention.v, 1.0);
    cr_assert(strstr(hw.h2d_contention.from, "no h2d_contention"), "%s", hw.h2d_contention.from);
}

/* A calibrated host with no datasheet profile whose expert fit was rejected: the experts'
 * roofline comes from the calibrated figures the host has, each saying where from. */
Test(cost, calibrated_only_host_falls_back)
{
    ws_profile_param hp[] = {
        {"cpu.attn.gqa.bf16.c0", 2e-5, "s", WS_SOURCE_FITTED, ""},
        {"cpu.attn.gqa.bf16.peak_flops", 3e11, "flop/s", WS_SOURCE_FITTED, ""},
        {"cpu.attn.gqa.bf16.bandwidth", 4e10, "B/s", WS_SOURCE_MEASURED, ""},
        {"cpu.membw_read.bandwidth", 4.5e10, "B/s", WS_SOURCE_FITTED, ""},
    };
    ws_profile host = {.name = "host:x", .kind = "host", .params = hp, .n_params = 4};
    test_gpu tg;
    ws_profile gpu = *base_gpu(&tg, NULL, 0);
    ws_hw hw;
    ws_err err = {0};
    cr_assert_eq(ws_hw_from_profiles(&gpu, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                 "%s", err.msg);
    near(hw.cpu_expert.P.v, 3e11);
    cr_assert_eq(hw.cpu_expert.P.src, WS_SOURCE_FITTED);
    cr_assert(strstr(hw.cpu_expert.P.from, "no datasheet fp32_flops") &&
                  strstr(hw.cpu_expert.P.from, "cpu.attn.gqa.bf16.peak_flops"),
              "%s", hw.cpu_expert.P.from);
    near(hw.cpu_expert.W.v, 4.5e10);
    cr_assert(strstr(hw.cpu_expert.W.from, "cpu.membw_read.bandwidth"), "%s", hw.cpu_expert.W.from);
    near(hw.cpu_expert.c0.v, 0);
    /* Attention without its fit either: W from the read bandwidth, no flops side. */
    host.params = hp + 3;
    host.n_params = 1;
    cr_assert_eq(ws_hw_from_profiles(&gpu, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                 "%s", err.msg);
    near(hw.cpu_attn.W.v, 4.5e10);
    cr_assert(strstr(hw.cpu_attn.W.from, "no datasheet dram_bw"), "%s", hw.cpu_attn.W.from);
    near(hw.cpu_attn.P.v, 0);
    near(hw.cpu_expert.W.v, 4.5e10);
    /* Nothing to stand in for the bandwidth: an error naming it. */
    host.n_params = 0;
    cr_assert_neq(ws_hw_from_profiles(&gpu, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0);
}

/* A stored calibration of the paper's GPU with the link measured alone and under CPU expert
 * GEMMs: loading the datasheet name gives the measured contention, source fitted. */
Test(cost, stored_calibration_sets_contention)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/c.db", dir);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    ws_calib_run run;
    ws_calib_run_init(&run);
    strcpy(run.mode, "quick");
    strcpy(run.scope, "link");
    strcpy(run.started_at, "2026-12-01T10:00:00Z");
    strcpy(run.finished_at, "2026-12-01T10:00:10Z");
    strcpy(run.host.cpu_model, "Test CPU");
    run.host.cpu_cores = 2;
    run.host.mem_bytes = 24e9;
    strcpy(run.host.isa, "avx2; path avx2");
    run.host.has_gpu = 1;
    strcpy(run.host.gpu_name, A100);
    strcpy(run.host.gpu_cc, "8.0");
    ws_host_fp_hash(&run.host);
    const struct {
        const char *op;
        double W;
    } links[] = {{"h2d", 24e9}, {"h2d_under_gemm", 15e9}};
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < 6; i++) {
            double B = 1e6 * (1 << (2 * i)), t = 8e-6 + B / links[l].W;
            ws_calib_sample x = {.bytes = B, .repeats = 3, .t_median = t, .t_min = t, .t_max = t};
            strcpy(x.key.device, "link");
            strcpy(x.key.op, links[l].op);
            cr_assert_eq(ws_calib_add_sample(&run, &x, &err), 0);
        }
    cr_assert_eq(ws_calib_fit_all(&run, &err), 0, "%s", err.msg);
    long long id;
    cr_assert_eq(ws_calib_store(s, &run, &id, &err), 0, "%s", err.msg);
    ws_calib_run_free(&run);

    ws_model m;
    load_model("qwen3-30b-a3b", &m);
    ws_hw hw;
    th_paper_hw(s, &m, &hw);
    cr_assert_float_eq(hw.h2d.W.v, 24e9, 24e6);
    cr_assert_float_eq(hw.h2d_contention.v, 15.0 / 24.0, 1e-3);
    cr_assert_eq(hw.h2d_contention.src, WS_SOURCE_FITTED);
    cr_assert_str_eq(hw.h2d_contention.from, "link.h2d_gemm_contention_factor.factor");
    cr_assert_neq(hw.h2d.W.src, WS_SOURCE_MODELED);
    /* The host side is still the datasheet's. */
    cr_assert_eq(hw.cpu_attn.W.src, WS_SOURCE_MODELED);
    ws_store_close(s);
}

/* A and B of DESIGN section 3 for Qwen3-30B-A3B (b_tok = 2 x 4 x 128 x 2 B = 2048 B, f_tok =
 * 4 x 32 x 128 = 16384 flop), worked out from the datasheet numbers. */
Test(cost, paper_setting_a_and_b)
{
    ws_cost_model cm;
    paper_model(&cm, NULL);
    near(cm.b_tok, 2048);
    near(cm.f_tok, 16384);
    const double A = fmax(16384 / (3.2256e12 * 0.5), 2048 / (1.877e11 * 0.75));
    const double Wh2d = 2.52e10 * 0.587;
    const double B = fmax(fmax(2048 / Wh2d, 16384 / (3.12e14 * 0.7)), 2048 / (1.555e12 * 0.85));
    near(cm.A, A);
    near(cm.B, B);
    near(cm.B, 2048 / Wh2d); /* transfer dominates on PCIe */
    near(cm.w_h2d_eff, Wh2d);
    near(ws_cost_cpu_attn(&cm, 1e5), 1e5 * A);
    cr_assert_eq(ws_cost_cpu_attn(&cm, 0), 0);
    ws_cost_model_free(&cm);
}

Test(cost, contention_lowers_h2d)
{
    ws_cost_model cm;
    paper_model(&cm, NULL);
    cr_assert_lt(cm.w_h2d_eff, cm.dep.hw.h2d.W.v);
    const double b = 64e6;
    /* copy_c0 6 us per call (profiles/README.md#copy_c0) */
    near(ws_cost_h2d(&cm, b, 0), 6e-6 + b / 2.52e10);
    near(ws_cost_h2d(&cm, b, 1), 6e-6 + b / (2.52e10 * 0.587));
    cr_assert_gt(ws_cost_h2d(&cm, b, 1), ws_cost_h2d(&cm, b, 0));
    /* The streamed half's B follows the contended rate: without contention B shrinks. */
    ws_hw hw = cm.dep.hw;
    hw.h2d_contention.v = 1.0;
    ws_model m;
    load_model("qwen3-30b-a3b", &m);
    ws_cost_model un;
    ws_err err = {0};
    cr_assert_eq(ws_cost_model_init(&hw, &m, &cm.cfg, &un, &err), 0, "%s", err.msg);
    near(un.B, 2048 / 2.52e10);
    cr_assert_lt(un.B, cm.B);
    ws_cost_model_free(&un);
    ws_cost_model_free(&cm);
}

/* C_gpu carries the prefetch of the previous layer's MoE phase, capped by the ping-pong
 * half; the first layer of a step (t_moe_prev = 0) has none. */
Test(cost, prefetch_term)
{
    ws_cost_model cm;
    paper_model(&cm, NULL);
    const double W = 2.52e10 * 0.587, pp = 32.0 * 1024 * 1024;
    ws_cost_split first, s_short, s_long;
    ws_cost_split_terms(&cm, 0, 0, 0, 0, &first);
    cr_assert_eq(first.prefetch_s, 0);
    /* the GPU half's fixed costs: its attention kernel (attn_c0) and its copy (copy_c0) */
    const double c0 = 15e-6 + 6e-6;
    near(first.C_gpu, c0);
    near(first.C_cpu, 0);
    ws_cost_split_terms(&cm, 0, 1e-3, 0, 0, &s_short); /* 14.7 MB arrive: under the cap */
    near(s_short.prefetch_s, 1e-3);
    near(s_short.C_gpu, c0 - 1e-3);
    ws_cost_split_terms(&cm, 0, 1.0, 0, 0, &s_long); /* capped by one ping-pong half */
    near(s_long.prefetch_s, pp / W);
    /* Resident D-window tokens cost their HBM attention. */
    ws_cost_split r;
    ws_cost_split_terms(&cm, 8192, 0, 0, 0, &r);
    near(r.C_gpu, c0 + 8192 * fmax(16384 / (3.12e14 * 0.7), 2048 / (1.555e12 * 0.85)));
    /* The credit never exceeds the streamed tokens' own transfer. */
    near(ws_cost_split_gpu(&s_short, 0), c0);
    near(ws_cost_split_gpu(&s_short, 1e6), c0 + 1e6 * cm.B - 1e-3);
    near(ws_cost_split_gpu(&s_short, 1000), c0 + 1000 * cm.B - fmin(1e-3, 1000 * 2048 / W));
    near(ws_cost_split_time(&first, 100, 100), fmax(100 * cm.A, c0 + 100 * cm.B));
    /* Estimates replace the model's A and B. */
    ws_cost_split e;
    ws_cost_split_terms(&cm, 0, 0, 3e-8, 2e-7, &e);
    near(e.A, 3e-8);
    near(e.B, 2e-7);
    ws_cost_model_free(&cm);
}

/* Exhaustive expectation of distinct experts: every sequence of T k-subsets of E. */
static double enumerate_uniform(int E, int k, int T)
{
    int subsets[64], n = 0;
    for (int m = 0; m < (1 << E); m++)
        if (__builtin_popcount(m) == k)
            subsets[n++] = m;
    double total = 0;
    long combos = 1;
    for (int t = 0; t < T; t++)
        combos *= n;
    for (long c = 0; c < combos; c++) {
        int mask = 0;
        long x = c;
        for (int t = 0; t < T; t++, x /= n)
            mask |= subsets[x % n];
        total += __builtin_popcount(mask);
    }
    return total / (double)combos;
}

/* A small MoE model config with E experts, k per token. */
static void small_moe(int E, int k, ws_model *m)
{
    char json[512];
    snprintf(json, sizeof json,
             "{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"model_type\":\"qwen3_moe\","
             "\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
             "\"num_key_value_heads\":2,\"head_dim\":16,\"intermediate_size\":128,"
             "\"moe_intermediate_size\":32,\"num_experts\":%d,\"num_experts_per_tok\":%d,"
             "\"vocab_size\":100}",
             E, k);
    ws_err err = {0};
    cr_assert_eq(ws_model_parse(json, "small.json", m, &err), 0, "%s", err.msg);
}

static void small_cost(int E, int k, double skew, int gpu_experts, ws_cost_model *cm)
{
    ws_model m;
    small_moe(E, k, &m);
    ws_hw hw;
    th_paper_hw(NULL, &m, &hw);
    ws_deploy_cfg cfg;
    ws_deploy_cfg_default(&cfg);
    cfg.routing_skew = skew;
    cfg.gpu_experts = gpu_experts;
    ws_err err = {0};
    cr_assert_eq(ws_cost_model_init(&hw, &m, &cfg, cm, &err), 0, "%s", err.msg);
}

Test(cost, distinct_experts_uniform_exact)
{
    const int cases[][3] = {{4, 1, 3}, {4, 2, 3}, {5, 2, 4}, {6, 3, 3}, {8, 2, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int E = cases[i][0], k = cases[i][1], T = cases[i][2];
        const double exact = enumerate_uniform(E, k, T);
        cr_assert_float_eq(ws_deploy_distinct_uniform(E, k, T), exact, 1e-12, "E %d k %d T %d", E, k,
                           T);
        ws_cost_model cm;
        small_cost(E, k, 0, 0, &cm);
        cr_assert_float_eq(ws_cost_distinct_experts(&cm, T), exact, 1e-12, "E %d k %d T %d", E, k,
                           T);
        ws_cost_model_free(&cm);
    }
    cr_assert_eq(ws_deploy_distinct_uniform(8, 2, 0), 0);
    cr_assert_eq(ws_deploy_distinct_uniform(8, 8, 5), 8);
    /* Qwen3-30B-A3B, batch 32: 128 (1 - (120/128)^32). */
    ws_cost_model cm;
    paper_model(&cm, NULL);
    near(ws_cost_distinct_experts(&cm, 32), 128 * (1 - pow(120.0 / 128, 32)));
    ws_cost_model_free(&cm);
}

/* Skewed routing with one expert per token is exact: sum_i 1 - (1 - p_i)^T, checked against
 * enumeration of every token sequence with its probability. */
Test(cost, distinct_experts_skewed)
{
    const int E = 4, T = 3;
    const double s = 1.2;
    double p[4], z = 0;
    for (int i = 0; i < E; i++)
        z += p[i] = pow(i + 1.0, -s);
    double exact = 0;
    for (int c = 0; c < E * E * E; c++) {
        int a = c % E, b = c / E % E, d = c / (E * E), mask = (1 << a) | (1 << b) | (1 << d);
        exact += p[a] / z * p[b] / z * p[d] / z * __builtin_popcount(mask);
    }
    ws_cost_model cm;
    small_cost(E, 1, s, 0, &cm);
    cr_assert_float_eq(ws_cost_distinct_experts(&cm, T), exact, 1e-12);
    ws_cost_model_free(&cm);
    /* More skew, fewer distinct experts; the GPU's hot experts and the CPU's add up. */
    ws_cost_model u, k1, k2;
    small_cost(64, 4, 0, 0, &u);
    small_cost(64, 4, 0.8, 8, &k1);
    small_cost(64, 4, 1.5, 8, &k2);
    const double du = ws_cost_distinct_experts(&u, 16), d1 = ws_cost_distinct_experts(&k1, 16),
                 d2 = ws_cost_distinct_experts(&k2, 16);
    cr_assert(du > d1 && d1 > d2, "%g %g %g", du, d1, d2);
    cr_assert_float_eq(
        ws_cost_distinct_cpu_experts(&k1, k1.n_dense_layers, 16) + ws_cost_distinct_gpu_experts(&k1, k1.n_dense_layers, 16), d1, 1e-9);
    cr_assert_leq(ws_cost_distinct_gpu_experts(&k1, k1.n_dense_layers, 16), 8.0);
    /* Pick probabilities sum to k, none above 1. */
    double sum = 0;
    for (int i = 0; i < 64; i++) {
        cr_assert_leq(k2.dep.q[i], 1.0 + 1e-12);
        sum += k2.dep.q[i];
    }
    cr_assert_float_eq(sum, 4.0, 1e-9);
    cr_assert_float_eq(ws_cost_layer(&k1, 0)->cpu_q + ws_cost_layer(&k1, 0)->gpu_q, 4.0, 1e-9);
    ws_cost_model_free(&u);
    ws_cost_model_free(&k1);
    ws_cost_model_free(&k2);
}

/* The CPU experts of one MoE layer through the host roofline: D distinct experts of
 * 3 H I bf16 weights, T k (token, expert) pairs of 6 H I + 4 I flop. */
Test(cost, cpu_expert_time)
{
    ws_cost_model cm;
    paper_model(&cm, NULL);
    const double H = 2048, I = 768, T = 32, D = 128 * (1 - pow(120.0 / 128, 32)), pairs = T * 8;
    const double flops = pairs * (6 * H * I + 4 * I),
                 bytes = D * 3 * H * I * 2 + pairs * (2 * H + 4 * I) * 4;
    near(ws_cost_cpu_experts(&cm, cm.n_dense_layers, T), fmax(flops / (3.2256e12 * 0.5), bytes / (1.877e11 * 0.75)));
    cr_assert_eq(ws_cost_gpu_experts(&cm, cm.n_dense_layers, T), 0); /* none resident on the GPU */
    cr_assert_eq(ws_cost_cpu_experts(&cm, cm.n_dense_layers, 0), 0);
    /* More tokens, more time; half the experts on the GPU, less CPU time. */
    cr_assert_gt(ws_cost_cpu_experts(&cm, cm.n_dense_layers, 64), ws_cost_cpu_experts(&cm, cm.n_dense_layers, 32));
    ws_deploy_cfg cfg = cm.cfg;
    cfg.gpu_experts = 64;
    ws_cost_model half;
    paper_model(&half, &cfg);
    cr_assert_lt(ws_cost_cpu_experts(&half, half.n_dense_layers, T), ws_cost_cpu_experts(&cm, cm.n_dense_layers, T));
    cr_assert_gt(ws_cost_gpu_experts(&half, half.n_dense_layers, T), 0);
    ws_cost_model_free(&half);
    ws_cost_model_free(&cm);
}

Test(cost, gpu_ops)
{
    ws_cost_model cm;
    paper_model(&cm, NULL);
    /* One flush of 32 sequences x 256 tokens of one layer: 16 MiB over D2H. */
    near(ws_cost_flush(&cm, 32, 256), 6e-6 + 32.0 * 256 * 2048 / 2.52e10);
    /* The output projection: a 32 x 4096 by 4096 x 2048 bf16 GEMM, memory-bound at batch 32,
     * after its fixed cost gemm_c0 (8 us, profiles/README.md#gemm_c0). */
    const double o = 32.0 * 128 * 2048;
    near(ws_cost_o_proj(&cm, 32),
         8e-6 + fmax(2 * 32 * o / (3.12e14 * 0.7),
                     (o + 32 * 4096.0 + 32 * 2048.0) * 2 / (1.555e12 * 0.85)));
    /* The router beside the routed experts: on the CPU (an fp32 GEMM on the experts'
     * roofline) while they run there, on the GPU once they all live on the GPU. */
    cr_assert(ws_cost_layer(&cm, cm.n_dense_layers)->router_on_cpu);
    near(ws_cost_router(&cm, cm.n_dense_layers, 32),
         ws_hw_roof_time(&cm.dep.hw.cpu_expert, 2 * 32 * 2048.0 * 128,
                           (2048.0 * 128 + 32 * 2048 + 32 * 128) * 4));
    ws_cost_model_free(&cm);
    ws_deploy_cfg all_gpu;
    ws_deploy_cfg_default(&all_gpu);
    all_gpu.gpu_experts = 128;
    paper_model(&cm, &all_gpu);
    cr_assert(!ws_cost_layer(&cm, cm.n_dense_layers)->router_on_cpu);
    near(ws_cost_router(&cm, cm.n_dense_layers, 32),
         8e-6 + fmax(2 * 32 * 2048.0 * 128 / (3.12e14 * 0.7),
                     (2048.0 * 128 + 32 * 2048 + 32 * 128) * 2 / (1.555e12 * 0.85)));
    cr_assert_gt(ws_cost_qkv_proj(&cm, 32), 0);
    cr_assert_eq(ws_cost_shared_experts(&cm, 32), 0); /* Qwen3-30B-A3B has none */
    cr_assert_eq(ws_cost_dense_mlp(&cm, 32), 0);      /* nor dense layers */
    cr_assert(ws_cost_layer(&cm, 0)->moe && ws_cost_layer(&cm, 47)->moe);
    cr_assert_eq(ws_cost_gpu_indexer(&cm, 1, 1000), 0);
    /* Prefill attention grows faster than linearly in the prompt (quadratic pairs at a rate
     * that rises with the keys per query); decode attention is linear. */
    cr_assert_gt(ws_cost_gpu_prefill_attn(&cm, 8192, 0),
                 3.0 * ws_cost_gpu_prefill_attn(&cm, 4096, 0));
    const double ac0 = cm.dep.hw.gpu_attn.c0.v; /* attn_c0, one kernel */
    near(ws_cost_gpu_attn(&cm, 2e6) - ac0, 2 * (ws_cost_gpu_attn(&cm, 1e6) - ac0));
    near(ws_cost_host_copy(&cm, 1e9), 2e9 / (1.877e11 * 0.75));
    /* The reformat: the paper's host's kv_reformat_bw, 186 ms for 64K Mixtral tokens of one
     * layer (profiles/README.md#kv_reformat_bw). */
    near(cm.dep.hw.kv_reformat.v, 1.443e9);
    cr_assert_str_eq(cm.dep.hw.kv_reformat.from, "kv_reformat_bw");
    near(ws_cost_reformat(&cm, 1.443e9), 1.0);
    cr_assert(fabs(ws_cost_reformat(&cm, 65536.0 * 4096) - 0.186) < 5e-4);
    cr_assert_eq(ws_cost_reformat(&cm, 0), 0);
    ws_cost_model_free(&cm);
    /* DeepSeek-V2-Lite: a dense first layer, shared experts. */
    ws_model m;
    load_model("deepseek-v2-lite", &m);
    ws_hw hw;
    th_paper_hw(NULL, &m, &hw);
    ws_deploy_cfg cfg;
    ws_deploy_cfg_default(&cfg);
    ws_err err = {0};
    cr_assert_eq(ws_cost_model_init(&hw, &m, &cfg, &cm, &err), 0, "%s", err.msg);
    cr_assert(!ws_cost_layer(&cm, 0)->moe && ws_cost_layer(&cm, 1)->moe);
    cr_assert_gt(ws_cost_shared_experts(&cm, 32), 0);
    cr_assert_gt(ws_cost_dense_mlp(&cm, 32), 0);
    ws_cost_model_free(&cm);
}

Test(cost, bad_config)
{
    ws_model m;
    load_model("mixtral-8x7b", &m);
    ws_hw hw;
    th_paper_hw(NULL, &m, &hw);
    ws_deploy_cfg cfg;
    ws_deploy_cfg_default(&cfg);
    cfg.gpu_experts = 9; /* Mixtral has 8 */
    ws_cost_model cm;
    ws_err err = {0};
    cr_assert_eq(ws_cost_model_init(&hw, &m, &cfg, &cm, &err), WS_EINVAL);
    cr_assert(strstr(err.msg, "9 GPU experts"), "%s", err.msg);
    ws_deploy_cfg_default(&cfg);
    cfg.routing_skew = -1;
    cr_assert_eq(ws_cost_model_init(&hw, &m, &cfg, &cm, &err), WS_EINVAL);
}

/* Every shipped model on every shipped GPU profile: a model, positive A and B. */
Test(cost, every_model_on_every_profile)
{
    char names[32][64];
    ws_err err = {0};
    int n = ws_model_list(names, 32, &err);
    cr_assert_gt(n, 3, "%s", err.msg);
    const char *gpus[] = {"a100-40gb-pcie", "a100-80gb-sxm", "v100-32gb-pcie", "h100-sxm", "h200"};
    ws_store *s;
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    ws_profile h;
    cr_assert_eq(ws_profile_load(s, "xeon-gold-5318y", &h, &err), 0, "%s", err.msg);
    for (int i = 0; i < n; i++) {
        ws_model m;
        load_model(names[i], &m);
        for (int g = 0; g < 5; g++) {
            ws_profile gp;
            cr_assert_eq(ws_profile_load(s, gpus[g], &gp, &err), 0, "%s", err.msg);
            ws_dtype kv = g == 2 ? WS_DT_FP16 : WS_DT_BF16;
            ws_hw hw;
            cr_assert_eq(ws_hw_from_profiles(&gp, &h, m.attn, kv, m.weight_dtype, &hw, &err), 0,
                         "%s %s: %s", names[i], gpus[g], err.msg);
            ws_deploy_cfg cfg;
            ws_deploy_cfg_default(&cfg);
            cfg.kv_dtype = kv;
            ws_cost_model cm;
            cr_assert_eq(ws_cost_model_init(&hw, &m, &cfg, &cm, &err), 0, "%s", err.msg);
            cr_assert(cm.A > 0 && cm.B > 0 && isfinite(cm.A) && isfinite(cm.B), "%s %s", names[i],
                      gpus[g]);
            if (m.n_experts > 0)
                cr_assert_gt(ws_cost_cpu_experts(&cm, cm.n_dense_layers, 32), 0, "%s", names[i]);
            cr_assert_gt(ws_cost_qkv_proj(&cm, 32), 0, "%s", names[i]);
            ws_cost_model_free(&cm);
            ws_profile_free(&gp);
        }
    }
    ws_profile_free(&h);
    ws_store_close(s);
}

/* The CPU experts read the bf16 expert fit (what the runtime runs) before an fp32 one. */
Test(cost, expert_fit_prefers_bf16)
{
    ws_profile_param hp[] = {
        {"dram_bw", 1e11, "B/s", WS_SOURCE_DATASHEET, ""},
        {"dram_eff", 0.5, "1", WS_SOURCE_MODELED, ""},
        {"fp32_flops", 1e12, "flop/s", WS_SOURCE_DATASHEET, ""},
        {"flops_eff", 0.5, "1", WS_SOURCE_MODELED, ""},
        {"cpu.expert_gemm.fp32.bandwidth", 3e10, "B/s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.fp32.c0", 1e-5, "s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.bandwidth", 4e10, "B/s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.peak_flops", 6e11, "flop/s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.c0", 2e-5, "s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.serial", 1, "1", WS_SOURCE_FITTED, ""},
    };
    ws_profile_param gx[] = {
        {"h2d_contention", 0.6, "1", WS_SOURCE_MODELED, ""},
    };
    ws_profile host = {.name = "h", .kind = "host", .params = hp, .n_params = 10};
    test_gpu tg;
    ws_profile gpu = *base_gpu(&tg, gx, sizeof gx / sizeof *gx);
    ws_hw hw;
    ws_err err = {0};
    cr_assert_eq(ws_hw_from_profiles(&gpu, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                 "%s", err.msg);
    near(hw.cpu_expert.W.v, 4e10);
    near(hw.cpu_expert.P.v, 6e11);
    near(hw.cpu_expert.c0.v, 2e-5);
    cr_assert_str_eq(hw.cpu_expert.W.from, "cpu.expert_gemm.bf16.bandwidth");
    cr_assert_eq(hw.cpu_expert.serial, 1);
    /* The serial form adds the terms: c0 + F/P + B/W. */
    near(ws_hw_roof_time(&hw.cpu_expert, 6e9, 4e8), 2e-5 + 6e9 / 6e11 + 4e8 / 4e10);
    /* An older profile with the fp32 sweep only. */
    host.n_params = 6;
    cr_assert_eq(ws_hw_from_profiles(&gpu, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                 "%s", err.msg);
    near(hw.cpu_expert.W.v, 3e10);
    near(hw.cpu_expert.c0.v, 1e-5);
    near(hw.cpu_expert.P.v, 0.5e12);
    cr_assert_eq(hw.cpu_expert.serial, 0);
}

/* The calibrator's slow-down of attention right after a MoE phase: the memory side of a MoE
 * model's CPU attention runs at W / factor (its A and its per-call time follow); a dense
 * model, a host without the factor, or a factor below 1 leave W as fitted. */
Test(cost, attention_after_moe_factor)
{
    ws_profile_param hp[] = {
        {"cpu.attn.gqa.bf16.c0", 2e-5, "s", WS_SOURCE_FITTED, ""},
        {"cpu.attn.gqa.bf16.peak_flops", 1e12, "flop/s", WS_SOURCE_MEASURED, ""},
        {"cpu.attn.gqa.bf16.bandwidth", 4e10, "B/s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.bandwidth", 3e10, "B/s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.peak_flops", 1e12, "flop/s", WS_SOURCE_FITTED, ""},
        {"cpu.membw_read.bandwidth", 4.5e10, "B/s", WS_SOURCE_FITTED, ""},
        {"cpu.attn_after_moe_factor.gqa.bf16.factor", 1.25, "1", WS_SOURCE_FITTED, ""},
    };
    ws_profile host = {.name = "h", .kind = "host", .params = hp, .n_params = 7};
    ws_store *s = NULL;
    ws_err err = {0};
    ws_profile g;
    cr_assert_eq(ws_store_open(":memory:", &s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_profile_load(s, "a100-40gb-pcie", &g, &err), 0, "%s", err.msg);
    ws_model moe, dense;
    load_model("qwen3-30b-a3b", &moe);
    dense = moe;
    dense.n_experts = 0;
    dense.experts_per_tok = 0;
    ws_deploy_cfg cfg;
    ws_deploy_cfg_default(&cfg);
    double A[3], t[3];
    for (int k = 0; k < 3; k++) {
        host.n_params = k == 2 ? 6 : 7; /* k 2: no factor measured */
        ws_hw hw;
        cr_assert_eq(ws_hw_from_profiles(&g, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                     "%s", err.msg);
        near(hw.cpu_attn.W.v, 4e10); /* the hardware as fitted; the model applies the factor */
        near(hw.cpu_attn_after_moe.v, k == 2 ? 1.0 : 1.25);
        ws_cost_model cm;
        cr_assert_eq(ws_cost_model_init(&hw, k == 1 ? &dense : &moe, &cfg, &cm, &err), 0, "%s",
                     err.msg);
        A[k] = cm.A;
        t[k] = ws_cost_cpu_attn(&cm, 65536);
        if (k == 0)
            cr_assert_neq(strstr(cm.dep.hw.cpu_attn.W.from, "attn_after_moe_factor"), NULL, "%s",
                          cm.dep.hw.cpu_attn.W.from);
        ws_cost_model_free(&cm);
    }
    near(A[0], 1.25 * A[2]); /* memory-bound GQA: A = b_tok / W */
    near(A[1], A[2]);
    near(t[0] - 2e-5, 1.25 * (t[2] - 2e-5));
    /* A factor below 1 is not a slow-down: ignored, said so. */
    hp[6].value = 0.9;
    ws_hw hw;
    cr_assert_eq(ws_hw_from_profiles(&g, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                 "%s", err.msg);
    near(hw.cpu_attn_after_moe.v, 1.0);
    ws_profile_free(&g);
    ws_store_close(s);
}

/* The CPU experts beside a host-memory copy: the calibrated cpu.expert_copy_factor, else the
 * host's cpu_copy_contention, else none; their memory side at that share, and the layer
 * schedule takes the contended time only in a step that streams XFER pages (whose prefetch
 * runs beside the experts). */
Test(cost, cpu_experts_beside_copies)
{
    ws_profile_param hp[] = {
        {"cpu.expert_gemm.bf16.c0", 1e-6, "s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.bandwidth", 3e10, "B/s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.peak_flops", 1e13, "flop/s", WS_SOURCE_FITTED, ""},
        {"cpu.membw_read.bandwidth", 4.5e10, "B/s", WS_SOURCE_FITTED, ""},
        {"cpu.attn.gqa.bf16.bandwidth", 4e10, "B/s", WS_SOURCE_FITTED, ""},
        {"cpu.attn.gqa.bf16.peak_flops", 1e12, "flop/s", WS_SOURCE_MEASURED, ""},
        {"cpu.expert_copy_factor.moe.bf16.factor", 0.75, "1", WS_SOURCE_FITTED, ""},
        {"cpu_copy_contention", 0.6, "1", WS_SOURCE_MODELED, ""},
    };
    ws_profile host = {.name = "h", .kind = "host", .params = hp, .n_params = 8};
    ws_store *s = NULL;
    ws_err err = {0};
    ws_profile g;
    cr_assert_eq(ws_store_open(":memory:", &s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_profile_load(s, "a100-40gb-pcie", &g, &err), 0, "%s", err.msg);
    ws_model m;
    load_model("qwen3-30b-a3b", &m);
    ws_deploy_cfg cfg;
    ws_deploy_cfg_default(&cfg);
    const double want[3] = {0.75, 0.6, 1.0};
    for (int k = 0; k < 3; k++) {
        ws_profile hk = host;
        ws_profile_param sub[8];
        memcpy(sub, hp, sizeof hp);
        if (k == 1) { /* no calibrated factor: the profile's */
            sub[6] = sub[7];
            hk.n_params = 7;
        } else if (k == 2) { /* neither */
            hk.n_params = 6;
        }
        hk.params = sub;
        ws_hw hw;
        cr_assert_eq(ws_hw_from_profiles(&g, &hk, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err),
                     0, "%s", err.msg);
        near(hw.cpu_copy_contention.v, want[k]);
        ws_cost_model cm;
        cr_assert_eq(ws_cost_model_init(&hw, &m, &cfg, &cm, &err), 0, "%s", err.msg);
        const int l = cm.n_dense_layers;
        const double T = 4, alone = ws_cost_cpu_experts(&cm, l, T);
        const double beside = ws_cost_cpu_experts_copying(&cm, l, T);
        cr_assert_gt(alone, 0);
        if (k < 2)
            cr_assert_gt(beside, alone * 1.1, "memory-bound decode experts slow beside a copy");
        else
            near(beside, alone);
        ws_sched_in in = {.T = T, .n_seqs = T, .n_cpu = 4096, .resident = 512};
        near(ws_sched_op_time(&cm, &in, l, WS_OP_EXP_CPU) -
                 ws_cost_moe_permute_cpu(&cm, l, T), alone);
        in.m_xfer = 4096;
        near(ws_sched_op_time(&cm, &in, l, WS_OP_EXP_CPU) -
                 ws_cost_moe_permute_cpu(&cm, l, T), beside);
        ws_cost_model_free(&cm);
    }
    hp[6].value = 1.5; /* a measured factor above 1 saw no contention */
    ws_hw hw;
    cr_assert_eq(ws_hw_from_profiles(&g, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                 "%s", err.msg);
    near(hw.cpu_copy_contention.v, 1.0);
    ws_profile_free(&g);
    ws_store_close(s);
}

/* Every GPU kernel pays a fixed cost; the per-layer operations other than GEMMs and attention
 * are memory-bound kernels; the step has an overhead; all from the datasheet's defaults, each
 * labelled modeled with its key (profiles/README.md). */
Test(cost, fixed_costs_and_memory_bound_ops)
{
    ws_cost_model cm;
    paper_model(&cm, NULL);
    const ws_hw *hw = &cm.dep.hw;
    near(hw->gpu_attn.c0.v, 15e-6);
    cr_assert_str_eq(hw->gpu_attn.c0.from, "attn_c0");
    near(hw->gpu_gemm.c0.v, 8e-6);
    near(hw->h2d.c0.v, 6e-6);
    near(hw->d2h.c0.v, 6e-6);
    near(hw->step.v, 4e-3);
    cr_assert_eq(hw->step.src, WS_SOURCE_MODELED);
    static const struct {
        int kind;
        const char *eff;
        double v;
    } e[] = {{WS_ELEM_NORM, "rmsnorm_eff", 0.35}, {WS_ELEM_ROPE, "rope_eff", 0.44},
             {WS_ELEM_ACT, "act_eff", 0.49},      {WS_ELEM_ADD, "add_eff", 0.92},
             {WS_ELEM_MOE, "add_eff", 0.92}};
    for (int i = 0; i < 5; i++) {
        const ws_hw_roof *r = &hw->gpu_elem[e[i].kind];
        near(r->c0.v, 1.5e-6);
        near(r->W.v, 1.555e12 * e[i].v);
        char want[64];
        snprintf(want, sizeof want, "hbm_bw x %s", e[i].eff);
        cr_assert_str_eq(r->W.from, want);
        cr_assert_eq(r->W.src, WS_SOURCE_MODELED);
    }
    /* Qwen3-30B-A3B, 32 tokens, bf16: RMSNorm over 2048 (and its weight), RoPE of 32 q + 4
     * k heads of 128, a residual add, the experts' activation of width 768. */
    const double T = 32, H = 2048;
    near(ws_cost_norm(&cm, T), 1.5e-6 + (2 * T * H + H) * 2 / (1.555e12 * 0.35));
    near(ws_cost_rope(&cm, T), 1.5e-6 + 2 * T * 36 * 128 * 2 / (1.555e12 * 0.44));
    near(ws_cost_add(&cm, T), 1.5e-6 + 3 * T * H * 2 / (1.555e12 * 0.92));
    near(ws_cost_act(&cm, T, 768), 1.5e-6 + 3 * T * 768 * 2 / (1.555e12 * 0.49));
    near(ws_cost_append(&cm, 4), 1.5e-6 + 2 * 4 * 2048.0 / (1.555e12 * 0.92));
    cr_assert_eq(ws_cost_norm(&cm, 0), 0);
    near(ws_cost_step(&cm), 4e-3);
    /* MoE routing where the experts run: all on the CPU here, so the top-k and the permute
     * and combine are host-memory work and the GPU has none. */
    cr_assert(ws_cost_layer(&cm, cm.n_dense_layers)->router_on_cpu);
    near(ws_cost_topk(&cm, cm.n_dense_layers, T), 2 * T * (4.0 * 128 + 8 * 8) / (1.877e11 * 0.75));
    cr_assert_eq(ws_cost_moe_permute_gpu(&cm, cm.n_dense_layers, T), 0);
    const double pairs = T * 8;
    near(ws_cost_moe_permute_cpu(&cm, cm.n_dense_layers, T),
         (2 * pairs * H * 4 + (pairs + T) * H * 4) / (1.877e11 * 0.75));
    ws_cost_model_free(&cm);
    /* All experts on the GPU: the routing moves there, two kernels (permute, combine). */
    ws_deploy_cfg all_gpu;
    ws_deploy_cfg_default(&all_gpu);
    all_gpu.gpu_experts = 128;
    paper_model(&cm, &all_gpu);
    const double W = 1.555e12 * 0.92;
    near(ws_cost_topk(&cm, cm.n_dense_layers, T), 1.5e-6 + T * (4.0 * 128 + 8 * 8) / W);
    near(ws_cost_moe_permute_gpu(&cm, cm.n_dense_layers, T),
         2 * 1.5e-6 + (2 * pairs * H * 2 + (pairs + T) * H * 2) / W);
    cr_assert_eq(ws_cost_moe_permute_cpu(&cm, cm.n_dense_layers, T), 0);
    ws_cost_model_free(&cm);
}

/* Prefill attention runs on its own curve, c0 + F / (P k / (k + k_half)), not at the GEMMs'
 * tensor efficiency. */
Test(cost, prefill_attention_has_its_own_curve)
{
    ws_cost_model cm;
    paper_model(&cm, NULL);
    const ws_hw_curve *c = &cm.dep.hw.gpu_prefill;
    near(c->P.v, 3.12e14 * 0.43);
    cr_assert_str_eq(c->P.from, "bf16_flops x prefill_attn_eff");
    near(c->half.v, 1100);
    near(c->c0.v, 4e-6);
    const double q = 2048, ctx = 1024, pairs = q * ctx + q * (q + 1) / 2, k = pairs / q;
    const double f_tok = 4.0 * 32 * 128; /* Qwen3-30B-A3B: 32 query heads of 128 */
    near(cm.f_tok, f_tok);
    near(ws_cost_gpu_prefill_attn(&cm, q, ctx),
         4e-6 + f_tok * pairs / (3.12e14 * 0.43 * k / (k + 1100)));
    /* the rate rises with the keys per query: the same pairs in a longer context cost less */
    cr_assert_lt(ws_cost_prefill_attn_time(&cm.dep.hw, 512, 8192, f_tok, cm.b_tok) / (512 * 8448.0),
                 ws_cost_prefill_attn_time(&cm.dep.hw, 4096, 0, f_tok, cm.b_tok) /
                     ws_cost_causal_pairs(4096, 0));
    ws_cost_model_free(&cm);
}

/* Calibrated GPU keys of the other 16-bit type stand in for a bf16 model (fp16 and bf16 run
 * at one rate); a profile from before the new keys has no fixed costs and the GEMMs'
 * efficiency for prefill attention, each said so. */
Test(cost, calibrated_gpu_keys_and_old_profiles)
{
    ws_profile_param hp[] = {
        {"dram_bw", 1e11, "B/s", WS_SOURCE_DATASHEET, ""},
        {"fp32_flops", 1e12, "flop/s", WS_SOURCE_DATASHEET, ""},
    };
    ws_profile_param gx[] = {
        {"fp16_flops", 1e14, "flop/s", WS_SOURCE_DATASHEET, ""},
        {"tensor_eff", 0.5, "1", WS_SOURCE_MODELED, ""},
        {"gpu.attn.gqa.fp16.c0", 1.6e-5, "s", WS_SOURCE_FITTED, ""},
        {"gpu.attn.gqa.fp16.bandwidth", 1.6e12, "B/s", WS_SOURCE_FITTED, ""},
        {"gpu.prefill_attn.gqa.fp16.c0", 5e-6, "s", WS_SOURCE_FITTED, ""},
        {"gpu.prefill_attn.gqa.fp16.peak_flops", 1.3e14, "flop/s", WS_SOURCE_FITTED, ""},
        {"gpu.prefill_attn.gqa.fp16.half_keys", 900, "tokens", WS_SOURCE_FITTED, ""},
        {"gpu.gemm.fp16.c0", 7e-6, "s", WS_SOURCE_FITTED, ""},
        {"gpu.rmsnorm.fp16.c0", 1e-6, "s", WS_SOURCE_FITTED, ""},
        {"gpu.rmsnorm.fp16.bandwidth", 7e11, "B/s", WS_SOURCE_FITTED, ""},
    };
    ws_profile host = {.name = "h", .kind = "host", .params = hp, .n_params = 2};
    test_gpu tg;
    ws_profile gpu = *base_gpu(&tg, gx, sizeof gx / sizeof *gx);
    ws_hw hw;
    ws_err err = {0};
    cr_assert_eq(ws_hw_from_profiles(&gpu, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                 "%s", err.msg);
    near(hw.gpu_attn.c0.v, 1.6e-5);
    near(hw.gpu_attn.W.v, 1.6e12);
    cr_assert_str_eq(hw.gpu_attn.W.from, "gpu.attn.gqa.fp16.bandwidth");
    near(hw.gpu_prefill.P.v, 1.3e14);
    near(hw.gpu_prefill.half.v, 900);
    near(hw.gpu_prefill.c0.v, 5e-6);
    cr_assert_eq(hw.gpu_prefill.half.src, WS_SOURCE_FITTED);
    near(hw.gpu_gemm.c0.v, 7e-6);
    near(hw.gpu_gemm.P.v, 0.5e14); /* the calibration has no rate: the datasheet's */
    near(hw.gpu_elem[WS_ELEM_NORM].W.v, 7e11);
    cr_assert_str_eq(hw.gpu_elem[WS_ELEM_NORM].c0.from, "gpu.rmsnorm.fp16.c0");
    /* the CPU never borrows the other type: its bf16 and fp16 paths convert differently */
    ws_profile_param hp2[] = {
        {"dram_bw", 1e11, "B/s", WS_SOURCE_DATASHEET, ""},
        {"fp32_flops", 1e12, "flop/s", WS_SOURCE_DATASHEET, ""},
        {"cpu.attn.gqa.fp16.bandwidth", 3e10, "B/s", WS_SOURCE_FITTED, ""},
    };
    ws_profile host2 = {.name = "h2", .kind = "host", .params = hp2, .n_params = 3};
    cr_assert_eq(ws_hw_from_profiles(&gpu, &host2, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                 "%s", err.msg);
    near(hw.cpu_attn.W.v, 1e11);
    /* A profile from before the new keys (the datasheet part only) */
    gpu.n_params = 7;
    cr_assert_eq(ws_hw_from_profiles(&gpu, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(hw.gpu_gemm.c0.v, 0);
    cr_assert(strstr(hw.gpu_gemm.c0.from, "no fixed cost"), "%s", hw.gpu_gemm.c0.from);
    cr_assert_eq(hw.step.v, 0);
    cr_assert(strstr(hw.step.from, "no step_overhead"), "%s", hw.step.from);
    near(hw.gpu_prefill.P.v, 0.5e14);
    cr_assert_str_eq(hw.gpu_prefill.P.from, "bf16_flops x tensor_eff");
    cr_assert_eq(hw.gpu_prefill.half.v, 0);
    near(hw.gpu_elem[WS_ELEM_ADD].W.v, 1e12); /* no add_eff, no hbm_eff: hbm_bw */
    cr_assert_eq(hw.gpu_elem[WS_ELEM_ADD].c0.v, 0);
}

/* An elementwise kernel with a calibrated row rate P: c0 + max(B / W, B / rows / P), so a
 * kernel of few rows takes one row's time; a fixed cost fitted at 0 is the calibration's,
 * not the datasheet's elem_c0; without P (the datasheet) it stays c0 + B / W. */
Test(cost, elementwise_kernels_take_one_rows_latency)
{
    ws_profile_param hp[] = {
        {"dram_bw", 1e11, "B/s", WS_SOURCE_DATASHEET, ""},
        {"fp32_flops", 1e12, "flop/s", WS_SOURCE_DATASHEET, ""},
    };
    ws_profile_param gx[] = {
        {"elem_c0", 1.5e-6, "s", WS_SOURCE_MODELED, ""},
        {"gpu.rmsnorm.bf16.c0", 0, "s", WS_SOURCE_FITTED, ""},
        {"gpu.rmsnorm.bf16.peak_flops", 4e9, "B/s", WS_SOURCE_FITTED, ""},
        {"gpu.rmsnorm.bf16.bandwidth", 7e11, "B/s", WS_SOURCE_FITTED, ""},
    };
    ws_profile host = {.name = "h", .kind = "host", .params = hp, .n_params = 2};
    test_gpu tg;
    ws_profile gpu = *base_gpu(&tg, gx, sizeof gx / sizeof *gx);
    ws_hw hw;
    ws_err err = {0};
    cr_assert_eq(ws_hw_from_profiles(&gpu, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                 "%s", err.msg);
    const ws_hw_roof *n = &hw.gpu_elem[WS_ELEM_NORM];
    cr_assert_eq(n->c0.v, 0, "the fitted 0, not elem_c0");
    cr_assert_str_eq(n->c0.from, "gpu.rmsnorm.bf16.c0");
    near(n->P.v, 4e9);
    const double H = 4096, one = ws_cost_norm_bytes(1, H, 2), many = ws_cost_norm_bytes(8192, H, 2);
    near(ws_cost_elem_time(&hw, WS_ELEM_NORM, one, 1), one / 4e9);       /* one row */
    near(ws_cost_elem_time(&hw, WS_ELEM_NORM, many, 8192), many / 7e11); /* bandwidth */
    near(ws_cost_elem_time(&hw, WS_ELEM_NORM, 64 * one, 64), 64 * one / 64 / 4e9);
    cr_assert_eq(ws_cost_elem_time(&hw, WS_ELEM_NORM, 0, 0), 0, "nothing runs");
    /* the other kinds have no calibration: elem_c0 + B / hbm_bw, whatever the rows */
    const ws_hw_roof *a = &hw.gpu_elem[WS_ELEM_ADD];
    cr_assert_eq(a->P.v, 0);
    near(ws_cost_elem_time(&hw, WS_ELEM_ADD, one, 1), 1.5e-6 + one / 1e12);
    near(ws_cost_elem_time(&hw, WS_ELEM_ADD, one, 1), ws_cost_elem_time(&hw, WS_ELEM_ADD, one, 99));
}

/* The GPU's streamed experts worked out by hand: D experts' two grouped GEMMs at roofline g
 * (weights at wb B each, bf16 activations), their activation, permute and combine. */
static double streamed_by_hand(const ws_cost_model *cm, const ws_hw_roof *g, double T, double D,
                               double pairs, double wb)
{
    const double H = cm->hidden, I = cm->moe_inter;
    const double gemm = ws_hw_roof_time(g, pairs * (6 * H * I + 4 * I),
                                          D * 3 * H * I * wb + pairs * (2 * H + 4 * I) * 2.0) +
                        g->c0.v;
    const double perm = ws_cost_elem_time(&cm->dep.hw, WS_ELEM_MOE, 2 * pairs * H * 2.0, pairs) +
                        ws_cost_elem_time(&cm->dep.hw, WS_ELEM_MOE, (pairs + T) * H * 2.0, T);
    return gemm + ws_cost_act(cm, pairs, I) + perm;
}

/* Prefill with the CPU experts on the GPU: the bytes streamed are the distinct CPU experts a
 * chunk hits at the CPU experts' format, over H2D at the uncontended rate (the CPU is idle);
 * the GPU then runs them as two grouped GEMMs with their activation, permute and combine. */
Test(cost, streamed_experts_are_bytes_over_h2d_plus_the_gpu_gemm)
{
    ws_cost_model cm;
    paper_model(&cm, NULL);
    const double H = cm.hidden, I = cm.moe_inter, T = 2048;
    const double D = ws_cost_distinct_cpu_experts(&cm, cm.n_dense_layers, T), pairs = T * ws_cost_layer(&cm, cm.n_dense_layers)->cpu_q;
    cr_assert_gt(D, 127.9, "a 2K chunk hits every expert of 128");
    near(ws_cost_expert_stream_bytes(&cm, cm.n_dense_layers, T), D * 3 * H * I * 2.0);
    near(ws_cost_expert_stream(&cm, cm.n_dense_layers, T), cm.dep.hw.h2d.c0.v + D * 3 * H * I * 2.0 / cm.dep.hw.h2d.W.v);
    near(ws_cost_gpu_streamed_experts(&cm, cm.n_dense_layers, T),
         streamed_by_hand(&cm, &cm.dep.hw.gpu_gemm, T, D, pairs, 2.0));
    /* a quantized CPU format streams fewer bytes: Q4_K_M's 0.5625 B per weight */
    ws_deploy_cfg c;
    ws_deploy_cfg_default(&c);
    c.cpu_expert_bytes = 0.5625;
    ws_cost_model q;
    paper_model(&q, &c);
    near(ws_cost_expert_stream_bytes(&q, q.n_dense_layers, T), D * 3 * H * I * 0.5625);
    /* a policy with every expert on the GPU streams nothing and never chooses the GPU path */
    c.cpu_expert_bytes = 0;
    c.gpu_experts = 128;
    ws_cost_model all;
    paper_model(&all, &c);
    cr_assert_eq(ws_cost_expert_stream_bytes(&all, all.n_dense_layers, T), 0);
    cr_assert_eq(prefill_gpu(&all, WS_PREFILL_GPU, T, 0), 0);
    ws_cost_model_free(&cm);
    ws_cost_model_free(&q);
    ws_cost_model_free(&all);
}

/* Pageable host weights stream at the GPU's pageable share of the pinned rate; the KV and the
 * hidden states' copies keep the pinned rate. An engine's hand-off cost replaces the copy's
 * c0 in each hand-off, and only there. */
Test(cost, pageable_weights_and_engine_handoff)
{
    ws_cost_model pin, pg;
    paper_model(&pin, NULL);
    ws_deploy_cfg c;
    ws_deploy_cfg_default(&c);
    c.host_weights_pageable = 1;
    c.handoff_c0 = 4.31e-5;
    snprintf(c.handoff_from, sizeof c.handoff_from, "engine test");
    paper_model(&pg, &c);
    const int l = pin.n_dense_layers;
    const double T = 2048, f = pin.dep.hw.h2d_pageable.v;
    cr_assert(f > 0 && f < 1, "the A100 profile's pageable share %g", f);
    const double bytes = ws_cost_expert_stream_bytes(&pin, l, T);
    near(ws_cost_expert_stream(&pg, l, T), pin.dep.hw.h2d.c0.v + bytes / (pin.dep.hw.h2d.W.v * f));
    near(ws_cost_expert_stream(&pin, l, T), pin.dep.hw.h2d.c0.v + bytes / pin.dep.hw.h2d.W.v);
    near(ws_cost_h2d(&pg, bytes, 0), ws_cost_h2d(&pin, bytes, 0));
    const double hb = 4 * pin.hidden * pin.w_elem;
    near(ws_cost_handoff(&pin, 4, 1), pin.dep.hw.d2h.c0.v + hb / pin.dep.hw.d2h.W.v);
    near(ws_cost_handoff(&pg, 4, 1), 4.31e-5 + hb / pin.dep.hw.d2h.W.v);
    near(ws_cost_handoff(&pg, 4, 0), 4.31e-5 + hb / pin.dep.hw.h2d.W.v);
    cr_assert(strstr(pg.dep.hw.handoff_c0.from, "engine test") != NULL);
    near(ws_cost_d2h(&pg, hb), ws_cost_d2h(&pin, hb));
    ws_model m;
    load_model("qwen3-30b-a3b", &m);
    ws_hw hw;
    th_paper_hw(NULL, &m, &hw);
    c.handoff_c0 = -1;
    ws_cost_model bad;
    ws_err err = {0};
    cr_assert_neq(ws_cost_model_init(&hw, &m, &c, &bad, &err), 0, "a negative hand-off cost");
    ws_cost_model_free(&pin);
    ws_cost_model_free(&pg);
}

/* On the paper's setup a 2K chunk streams (its CPU experts take seconds), a 16-token one
 * stays on the CPU (it touches few experts' weights, read from DRAM faster than streamed);
 * auto takes the shorter played step at every chunk size, so it flips once, where they
 * cross; the forced modes are honoured whatever the steps. */
/* An engine's threshold decides auto by the step's prompt tokens, against the cost model
 * on both sides of the paper setup's crossing; forced modes stay forced; a negative
 * threshold is refused. */
Test(cost, prefill_threshold_decides_auto)
{
    ws_cost_model cm;
    paper_model(&cm, NULL);
    cr_assert_eq(prefill_gpu(&cm, WS_PREFILL_AUTO, 2048, 0), 1); /* the cost model streams */
    cr_assert_eq(prefill_gpu_at(&cm, WS_PREFILL_AUTO, 4096, 2048, 0), 0);
    cr_assert_eq(prefill_gpu_at(&cm, WS_PREFILL_AUTO, 4096, 4096, 0), 1);
    cr_assert_eq(prefill_gpu(&cm, WS_PREFILL_AUTO, 16, 0), 0); /* the cost model stays */
    cr_assert_eq(prefill_gpu_at(&cm, WS_PREFILL_AUTO, 8, 16, 0), 1);
    cr_assert_eq(prefill_gpu_at(&cm, WS_PREFILL_CPU, 8, 16, 0), 0);
    cr_assert_eq(prefill_gpu_at(&cm, WS_PREFILL_GPU, 4096, 16, 0), 1);
    ws_policy_params par;
    ws_policy_params_default(&par);
    ws_ctl c;
    ws_err err = {0};
    cr_assert_eq(ws_ctl_init(&c, &cm, WS_POLICY_WRITESCOPE, &par, cm.layers, &err), 0);
    cr_assert_eq(ws_ctl_set_prefill(&c, WS_PREFILL_AUTO, -1, &err), WS_EINVAL);
    ws_cost_model_free(&cm);
}

Test(cost, prefill_strategy_by_cost_or_forced)
{
    ws_cost_model cm;
    paper_model(&cm, NULL);
    cr_assert_eq(prefill_gpu(&cm, WS_PREFILL_AUTO, 2048, 0), 1);
    cr_assert_eq(prefill_gpu(&cm, WS_PREFILL_AUTO, 16, 0), 0);
    int flips = 0, prev = -1;
    for (int q = 1; q <= 4096; q += q < 256 ? 1 : 16) {
        const double tc = chunk_step(&cm, q, 0, 0, NULL), tg = chunk_step(&cm, q, 0, 1, NULL);
        const int a = prefill_gpu(&cm, WS_PREFILL_AUTO, q, 0);
        cr_assert_eq(a, tg < tc, "chunk %d: auto %d, CPU %.6g s, GPU %.6g s", q, a, tc, tg);
        cr_assert_eq(prefill_gpu(&cm, WS_PREFILL_CPU, q, 0), 0);
        cr_assert_eq(prefill_gpu(&cm, WS_PREFILL_GPU, q, 0), 1);
        flips += prev >= 0 && a != prev;
        prev = a;
    }
    cr_assert_eq(flips, 1, "one crossing on the paper's setup");
    /* the streamed step holds the copy engine for every MoE layer's stream, one after another */
    double streams = 0;
    for (int l = 0; l < cm.layers; l++)
        streams += ws_cost_expert_stream(&cm, l, 2048);
    cr_assert_geq(chunk_step(&cm, 2048, 0, 1, NULL), streams);
    cr_assert_eq(ws_prefill_mode_parse("gpu"), WS_PREFILL_GPU);
    cr_assert_eq(ws_prefill_mode_parse("fast"), -1);
    cr_assert_str_eq(ws_prefill_mode_name(WS_PREFILL_AUTO), "auto");
    ws_cost_model_free(&cm);
}

/* CPU experts in a block format (Q4_K_M) stream its bytes per weight, not the model's dtype,
 * and the GPU runs them at that format's roofline. */
Test(cost, streamed_experts_take_the_cpu_experts_format)
{
    const ws_wformat *f = ws_wformat_find("q4_k_m");
    cr_assert(f);
    ws_deploy_cfg c;
    ws_deploy_cfg_default(&c);
    c.w_cpu_experts = f;
    ws_cost_model cm;
    paper_model(&cm, &c);
    const double H = cm.hidden, I = cm.moe_inter, T = 2048;
    const double D = ws_cost_distinct_cpu_experts(&cm, cm.n_dense_layers, T), pairs = T * ws_cost_layer(&cm, cm.n_dense_layers)->cpu_q;
    near(ws_cost_expert_stream_bytes(&cm, cm.n_dense_layers, T), D * 3 * H * I * f->bytes);
    near(ws_cost_gpu_streamed_experts(&cm, cm.n_dense_layers, T),
         streamed_by_hand(&cm, &cm.dep.hw.gpu_gemm_wc[f->gpu], T, D, pairs, f->bytes));
    ws_cost_model_free(&cm);
}

/* Layers wholly on the CPU (-ngl) under the GPU strategy: each streams its projections,
 * router, shared experts and the routed experts the chunk hits, and its KV before the chunk;
 * a GPU layer streams nothing of its own. With every GPU layer holding all its experts the
 * CPU layers alone decide: forced modes are honoured, auto compares the played steps, and
 * a streamed CPU layer waits for its stream. */
Test(cost, cpu_layers_stream_their_weights_and_kv_under_the_gpu_strategy)
{
    ws_deploy_cfg c;
    ws_deploy_cfg_default(&c);
    c.gpu_experts = 128;
    c.n_gpu_layers = 44; /* layers 0..3 of 48 on the CPU */
    ws_cost_model cm;
    paper_model(&cm, &c);
    cr_assert_eq(cm.dep.cpu_layers, 4);
    const double q = 512, ctx = 1000;
    const double D = ws_cost_distinct_experts(&cm, q);
    const double want = (cm.qkv_params + cm.o_params + cm.router_params) * cm.dep.part[WS_PART_GPU].wb +
                        cm.shared_params * cm.dep.part[WS_PART_SHARED].wb + D * cm.expert_params * cm.dep.part[WS_PART_CPU_EXP].wb +
                        ctx * cm.b_tok;
    near(ws_cost_cpu_layer_stream_bytes(&cm, 0, q, ctx), want);
    cr_assert_eq(ws_cost_cpu_layer_stream_bytes(&cm, 10, q, ctx), 0, "a GPU layer");
    ws_sched_times lg[48], lc[48];
    const double tg = chunk_step(&cm, q, ctx, 1, lg), tc = chunk_step(&cm, q, ctx, 0, lc);
    cr_assert_geq(lg[0].t_end, ws_cost_h2d(&cm, want, 0), "layer 0 waits for its stream");
    cr_assert_gt(lc[0].t_end, ws_cost_cpu_experts(&cm, 0, q));
    cr_assert_eq(prefill_gpu(&cm, WS_PREFILL_GPU, q, ctx), 1);
    cr_assert_eq(prefill_gpu(&cm, WS_PREFILL_CPU, q, ctx), 0);
    cr_assert_eq(prefill_gpu(&cm, WS_PREFILL_AUTO, q, ctx), tg < tc);
    /* every layer on the GPU with all its experts: nothing in host memory to stream */
    c.n_gpu_layers = 0;
    ws_cost_model all;
    paper_model(&all, &c);
    cr_assert_eq(prefill_gpu(&all, WS_PREFILL_GPU, q, ctx), 0);
    ws_cost_model_free(&cm);
    ws_cost_model_free(&all);
}

/* A piecewise expert fit (the profile's cpu.expert_gemm.bf16.low<k>.*): an operation takes
 * the first piece whose bound covers its intensity F/B, the top piece above them all; the
 * fixed cost charged per expert hit is its piece's. */
Test(cost, piecewise_expert_fit_takes_the_operations_piece)
{
    ws_profile_param hp[] = {
        {"dram_bw", 1e11, "B/s", WS_SOURCE_DATASHEET, ""},
        {"fp32_flops", 1e12, "flop/s", WS_SOURCE_DATASHEET, ""},
        {"cpu.expert_gemm.bf16.bandwidth", 4e10, "B/s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.peak_flops", 8e11, "flop/s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.c0", 2e-5, "s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.serial", 1, "1", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.low1.upto", 1.5, "flop/B", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.low1.c0", 5e-6, "s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.low1.bandwidth", 6e10, "B/s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.low2.upto", 12, "flop/B", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.low2.c0", 4e-5, "s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.low2.bandwidth", 2.5e10, "B/s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.bf16.low2.peak_flops", 4e12, "flop/s", WS_SOURCE_FITTED, ""},
    };
    ws_profile host = {.name = "h", .kind = "host", .params = hp, .n_params = 13};
    test_gpu tg;
    ws_profile gpu = *base_gpu(&tg, NULL, 0);
    ws_hw hw;
    ws_err err = {0};
    cr_assert_eq(ws_hw_from_profiles(&gpu, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                 "%s", err.msg);
    const ws_hw_roof *r = &hw.cpu_expert;
    cr_assert_eq(r->n_low, 2);
    const double B = 1e7;
    near(ws_hw_roof_time(r, 1 * B, B), 5e-6 + B / 6e10);                  /* one token: GEMV */
    near(ws_hw_roof_time(r, 8 * B, B), 4e-5 + B / 2.5e10 + 8 * B / 4e12); /* the middle piece */
    near(ws_hw_roof_time(r, 64 * B, B), 2e-5 + B / 4e10 + 64 * B / 8e11); /* the top piece */
    near(ws_hw_roof_c0(r, 1 * B, B), 5e-6);
    near(ws_hw_roof_c0(r, 64 * B, B), 2e-5);
    near(ws_hw_roof_W(r, 8 * B, B), 2.5e10);
    /* a second bound not above the first ends the pieces there */
    hp[9].value = 1.0;
    cr_assert_eq(ws_hw_from_profiles(&gpu, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(hw.cpu_expert.n_low, 1);
    /* without pieces: one roofline */
    host.n_params = 6;
    cr_assert_eq(ws_hw_from_profiles(&gpu, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(hw.cpu_expert.n_low, 0);
    near(ws_hw_roof_time(&hw.cpu_expert, B, B), 2e-5 + B / 4e10 + B / 8e11);
}
