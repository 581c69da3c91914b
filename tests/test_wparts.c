/* test_wparts: weight formats per part and layer placement in the cost model:
 * each part's bytes per weight set its GEMMs' weight bytes and the memory the weights take;
 * the format's compute picks the peak (CPU: the calibrated int8 / bf16 fit, else the
 * instruction family the host has, AMX before AVX-512; GPU: fp8_flops, else the fp16 rate,
 * said so); --n-cpu-moe keeps the routed experts of the first N MoE layers on the CPU (CPU
 * expert time only there, the router beside them, host memory for them only), and a folded
 * step equals the layer-by-layer one across the CPU/GPU boundary; the CLI's flags (run
 * refuses a KV dtype its kernels lack). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "cost.h"
#include "helpers.h"
#include "hw.h"
#include "schedule.h"
#include "step.h"
#include "store.h"

#define near(a, b)                                                                                 \
    cr_assert(fabs((double)(a) - (double)(b)) <= 1e-9 * fabs((double)(b)) + 1e-300,                \
              "%s = %.12g, not %.12g", #a, (double)(a), (double)(b))

static void load(const char *model, ws_model *m, ws_hw *hw)
{
    ws_err err = {0};
    ws_store *s;
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_hw_load(s, model, "a100-40gb-pcie", "xeon-gold-5318y", WS_DT_BF16, m, hw,
                            NULL, &err),
                 0, "%s", err.msg);
    ws_store_close(s);
}

static void init(const ws_hw *hw, const ws_model *m, const ws_deploy_cfg *cc, ws_cost_model *cm)
{
    ws_err err = {0};
    cr_assert_eq(ws_cost_model_init(hw, m, cc, cm, &err), 0, "%s", err.msg);
}

Test(wparts, bytes_per_part_set_gemm_bytes_and_memory)
{
    ws_model m;
    ws_hw hw;
    load("deepseek-v2-lite", &m, &hw);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    ws_cost_model base, q;
    init(&hw, &m, &cc, &base);
    const ws_wformat *q4 = ws_wformat_find("Q4_K_M");
    cr_assert_not_null(q4);
    cc.w_gpu = cc.w_shared = q4;
    cc.w_cpu_experts = ws_wformat_find("q8_0");
    init(&hw, &m, &cc, &q);
    /* one token: the projections read their weights, the memory side; q4_k_m reads ~0.3x */
    const double T = 1, H = m.hidden, N = base.qkv_out;
    double f, b;
    ws_cost_gemm_work(T, H, N, 2.0, &f, &b);
    near(ws_cost_qkv_proj(&base, T), ws_hw_roof_time(&hw.gpu_gemm, f, b));
    const double bq = b - H * N * 2.0 + H * N * q4->bytes;
    near(ws_cost_qkv_proj(&q, T), ws_hw_roof_time(&hw.gpu_gemm, f, bq));
    cr_assert_lt(ws_cost_shared_experts(&q, T), ws_cost_shared_experts(&base, T));
    cr_assert_lt(ws_cost_cpu_experts(&q, q.n_dense_layers, T), ws_cost_cpu_experts(&base, base.n_dense_layers, T));
    /* routed experts on the GPU keep the model's dtype (not given) */
    near(q.dep.part[WS_PART_GPU_EXP].wb, 2.0);
    /* memory: every routed expert on the CPU (gpu_experts 0) at q8_0 in host DRAM; the rest
     * on the GPU at q4_k_m */
    double g0, h0, g1, h1;
    ws_cost_weight_bytes(&base, &g0, &h0);
    ws_cost_weight_bytes(&q, &g1, &h1);
    const double routed = base.st.routed_bytes / 2.0;
    near(h0, routed * 2.0);
    near(h1, routed * 34.0 / 32);
    near(g0, base.st.total_params * 2.0 - routed * 2.0);
    near(g1, (base.st.total_params - routed) * q4->bytes);
    ws_cost_model_free(&base);
    ws_cost_model_free(&q);
}

/* A host with the given extra parameters beside the datasheet basics. */
static void host_hw(const ws_profile_param *extra, int n, ws_hw *hw)
{
    ws_profile_param hp[16] = {
        {"dram_bw", 1e11, "B/s", WS_SOURCE_DATASHEET, ""},
        {"dram_eff", 0.5, "1", WS_SOURCE_MODELED, ""},
        {"fp32_flops", 1e12, "flop/s", WS_SOURCE_DATASHEET, ""},
        {"flops_eff", 0.5, "1", WS_SOURCE_MODELED, ""},
    };
    for (int i = 0; i < n; i++)
        hp[4 + i] = extra[i];
    ws_profile_param gp[] = {
        {"mem_bytes", 4e10, "B", WS_SOURCE_DATASHEET, ""},
        {"hbm_bw", 1e12, "B/s", WS_SOURCE_DATASHEET, ""},
        {"bf16_flops", 1e14, "flop/s", WS_SOURCE_DATASHEET, ""},
        {"fp16_flops", 1e14, "flop/s", WS_SOURCE_DATASHEET, ""},
        {"tensor_eff", 0.5, "1", WS_SOURCE_MODELED, ""},
        {"fp8_flops", 4e14, "flop/s", WS_SOURCE_DATASHEET, ""},
        {"h2d_bw", 2e10, "B/s", WS_SOURCE_MODELED, ""},
        {"d2h_bw", 2e10, "B/s", WS_SOURCE_MODELED, ""},
    };
    ws_profile host = {.name = "h", .kind = "host", .params = hp, .n_params = (size_t)(4 + n)};
    ws_profile gpu = {.name = "g", .kind = "gpu", .params = gp, .n_params = 8};
    ws_err err = {0};
    cr_assert_eq(ws_hw_from_profiles(&gpu, &host, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, hw, &err), 0,
                 "%s", err.msg);
}

Test(wparts, cpu_compute_picks_fit_then_family)
{
    const ws_profile_param vnni = {"cpu_peak.avx512_vnni", 8e12, "op/s", WS_SOURCE_MODELED, ""};
    const ws_profile_param amx8 = {"cpu_peak.amx_int8", 6e13, "op/s", WS_SOURCE_MODELED, ""};
    const ws_profile_param b16 = {"cpu_peak.avx512_bf16", 4e12, "flop/s", WS_SOURCE_MODELED, ""};
    const ws_profile_param amxb = {"cpu_peak.amx_bf16", 3e13, "flop/s", WS_SOURCE_MODELED, ""};
    const ws_profile_param fit8[] = {
        {"cpu.expert_gemm.int8.peak_flops", 2e12, "op/s", WS_SOURCE_FITTED, ""},
        {"cpu.expert_gemm.int8.bandwidth", 3e10, "B/s", WS_SOURCE_FITTED, ""}};
    ws_hw hw;
    /* no family: fp32_flops x flops_eff for every compute */
    host_hw(NULL, 0, &hw);
    near(hw.cpu_expert_wc[WS_WC_INT8].P.v, 0.5e12);
    near(hw.cpu_expert_wc[WS_WC_BF16].P.v, 0.5e12);
    /* VNNI for int8, AVX512-BF16 for bf16 */
    ws_profile_param e1[] = {vnni, b16};
    host_hw(e1, 2, &hw);
    near(hw.cpu_expert_wc[WS_WC_INT8].P.v, 8e12 * 0.5);
    cr_assert_str_eq(hw.cpu_expert_wc[WS_WC_INT8].P.from, "cpu_peak.avx512_vnni x flops_eff");
    near(hw.cpu_expert_wc[WS_WC_BF16].P.v, 4e12 * 0.5);
    near(hw.cpu_expert_wc[WS_WC_FP32].P.v, 0.5e12);
    /* AMX before AVX-512 */
    ws_profile_param e2[] = {vnni, amx8, b16, amxb};
    host_hw(e2, 4, &hw);
    near(hw.cpu_expert_wc[WS_WC_INT8].P.v, 6e13 * 0.5);
    near(hw.cpu_expert_wc[WS_WC_BF16].P.v, 3e13 * 0.5);
    cr_assert_str_eq(hw.cpu_expert_wc[WS_WC_BF16].P.from, "cpu_peak.amx_bf16 x flops_eff");
    /* the calibrated int8 fit wins over the family; bf16 keeps its family */
    ws_profile_param e3[] = {vnni, amx8, amxb, fit8[0], fit8[1]};
    host_hw(e3, 5, &hw);
    near(hw.cpu_expert_wc[WS_WC_INT8].P.v, 2e12);
    near(hw.cpu_expert_wc[WS_WC_INT8].W.v, 3e10);
    cr_assert_str_eq(hw.cpu_expert_wc[WS_WC_INT8].W.from, "cpu.expert_gemm.int8.bandwidth");
    near(hw.cpu_expert_wc[WS_WC_BF16].P.v, 3e13 * 0.5);
    near(hw.cpu_expert_wc[WS_WC_BF16].W.v, 1e11 * 0.5);
    /* the cost model uses the CPU experts' format's roofline */
    ws_model m;
    ws_hw real;
    load("qwen3-30b-a3b", &m, &real);
    /* the paper's Xeon has VNNI and no AVX512_BF16 or AMX */
    near(real.cpu_expert_wc[WS_WC_INT8].P.v, 1.29024e13 * 0.5);
    near(real.cpu_expert_wc[WS_WC_BF16].P.v, real.cpu_expert.P.v);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cc.w_cpu_experts = ws_wformat_find("int8");
    ws_cost_model cm;
    init(&real, &m, &cc, &cm);
    cr_assert_eq(memcmp(&cm.dep.part[WS_PART_CPU_EXP].roof, &real.cpu_expert_wc[WS_WC_INT8], sizeof cm.dep.part[WS_PART_CPU_EXP].roof),
                 0);
    ws_cost_model_free(&cm);
    cc.w_cpu_experts = ws_wformat_find("bf16");
    init(&real, &m, &cc, &cm);
    cr_assert_eq(memcmp(&cm.dep.part[WS_PART_CPU_EXP].roof, &real.cpu_expert_wc[WS_WC_BF16], sizeof cm.dep.part[WS_PART_CPU_EXP].roof),
                 0);
    ws_cost_model_free(&cm);
}

Test(wparts, gpu_fp8_uses_fp8_flops_where_present)
{
    ws_hw hw;
    host_hw(NULL, 0, &hw);
    near(hw.gpu_gemm_wc[WS_WC_FP8].P.v, 4e14 * 0.5);
    cr_assert_str_eq(hw.gpu_gemm_wc[WS_WC_FP8].P.from, "fp8_flops x tensor_eff");
    near(hw.gpu_gemm_wc[WS_WC_BF16].P.v, hw.gpu_gemm.P.v);
    /* no int8_flops in this profile: the fp16 rate, said so */
    near(hw.gpu_gemm_wc[WS_WC_INT8].P.v, hw.gpu_gemm.P.v);
    cr_assert_not_null(strstr(hw.gpu_gemm_wc[WS_WC_INT8].P.from, "no int8_flops"));
    /* the A100 profile has no fp8_flops: fp8 weights run at its 16-bit rate */
    ws_model m;
    ws_hw a100;
    load("qwen3-30b-a3b", &m, &a100);
    near(a100.gpu_gemm_wc[WS_WC_FP8].P.v, a100.gpu_gemm.P.v);
    cr_assert_not_null(strstr(a100.gpu_gemm_wc[WS_WC_FP8].P.from, "no fp8_flops"));
}

Test(wparts, n_cpu_moe_puts_the_first_layers_on_the_cpu)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", &m, &hw);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cc.n_cpu_moe = 10;
    ws_cost_model cm, all_cpu;
    init(&hw, &m, &cc, &cm);
    cc.n_cpu_moe = 0;
    init(&hw, &m, &cc, &all_cpu);
    const double T = 16;
    for (int l = 0; l < m.layers; l++) {
        const int cpu = l < 10;
        cr_assert_eq(ws_cost_layer(&cm, l)->gpu_experts, cpu ? 0 : m.n_experts, "layer %d", l);
        cr_assert_eq(ws_cost_layer(&cm, l)->kind, cpu ? WS_LAYER_MOE : WS_LAYER_MOE_GPU);
        cr_assert_eq(ws_cost_cpu_experts(&cm, l, T) > 0, cpu, "layer %d", l);
        cr_assert_eq(ws_cost_gpu_experts(&cm, l, T) > 0, !cpu, "layer %d", l);
        cr_assert_eq(ws_cost_layer(&cm, l)->router_on_cpu, cpu);
        cr_assert_eq(ws_cost_layer(&all_cpu, l)->gpu_experts, 0);
    }
    near(ws_cost_cpu_experts(&cm, 3, T), ws_cost_cpu_experts(&all_cpu, all_cpu.n_dense_layers, T));
    /* the schedule: CPU experts only in the CPU layers */
    ws_cost_split sp;
    ws_cost_split_terms(&cm, 0, 0, 0, 0, &sp);
    ws_sched_in in = {.T = T, .nospill = 1, .resident = T * 1000, .n_seqs = T};
    ws_sched_layer s;
    ws_sched_build(&cm, &sp, &in, 5, &s);
    cr_assert_geq(s.at[WS_OP_EXP_CPU], 0);
    ws_sched_build(&cm, &sp, &in, 20, &s);
    cr_assert_lt(s.at[WS_OP_EXP_CPU], 0);
    cr_assert_geq(s.at[WS_OP_EXP_GPU], 0);
    /* memory: 10 of 48 layers' experts in host DRAM */
    double g, h, g0, h0;
    ws_cost_weight_bytes(&cm, &g, &h);
    ws_cost_weight_bytes(&all_cpu, &g0, &h0);
    near(h, cm.st.routed_bytes * 10.0 / 48);
    near(g + h, g0 + h0);
    ws_cost_model_free(&cm);
    ws_cost_model_free(&all_cpu);
}

/* A step folded (identical layers extrapolated) equals the one played layer by layer, with
 * the CPU-MoE and GPU-MoE layers kept apart. */
Test(wparts, folding_keeps_cpu_and_gpu_moe_layers_apart)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", &m, &hw);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cc.n_cpu_moe = 12;
    ws_cost_model cm;
    init(&hw, &m, &cc, &cm);
    double t[2];
    for (int fold = 0; fold < 2; fold++) {
        sim_engine e;
        sim_step st;
        ws_err err = {0};
        cr_assert_eq(sim_engine_init(&e, 1, &err), 0);
        cr_assert_eq(sim_step_init(&st, &e, 0, &cm, m.layers, 24, fold, &err), 0, "%s", err.msg);
        sim_step_in in = {.T = 8, .nospill = 1, .resident = 8 * 2000.0, .n_seqs = 8};
        sim_step_out out;
        cr_assert_eq(sim_step_run(&st, &in, &out, &err), 0, "%s", err.msg);
        t[fold] = out.t1 - out.t0;
        if (fold)
            cr_assert_gt(out.folded, 0);
        sim_step_free(&st);
        sim_engine_free(&e);
    }
    cr_assert(fabs(t[1] - t[0]) <= 1e-9 * t[0], "folded %.12g, layers %.12g", t[1], t[0]);
    ws_cost_model_free(&cm);
}

#define BASE                                                                                       \
    "sim", "--model", "qwen3-30b-a3b", "--gpu", "a100-40gb-pcie", "--host", "xeon-gold-5318y",     \
        "--policy", "writescope", "--batch", "2", "--prompt", "256", "--output", "4", "--layers", \
        "4"

Test(wparts, cli_flags_parse_and_refuse)
{
    th_run r = th_writescope((const char *[]){BASE, "--weights", "q4_z", NULL}, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert_eq(th_lines(r.err), 1, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "q4_k_m"), "%s", r.err);
    th_run_free(&r);
    r = th_writescope((const char *[]){BASE, "--kv-dtype", "q5_1", NULL}, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert_eq(th_lines(r.err), 1, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "q8_0, q4_0"), "%s", r.err);
    th_run_free(&r);
    r = th_writescope((const char *[]){BASE, "--kv-dtype", "q8_0", NULL}, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    r = th_writescope((const char *[]){"plan", "--model", "qwen3-30b-a3b", "--gpu",
                                       "a100-40gb-pcie", "--host", "xeon-gold-5318y",
                                       "--slo-ttft", "1", "--cpu-expert-weights", "q9", NULL},
                      NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "unknown weight format 'q9'"), "%s", r.err);
    th_run_free(&r);
    /* the live engine holds bf16 KV only: run refuses the others with the reason */
    r = th_writescope((const char *[]){"run", "--model", "qwen3-30b-a3b", "--kv-dtype", "fp8",
                                       NULL},
                      NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert_eq(th_lines(r.err), 1, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "bf16 only"), "%s", r.err);
    th_run_free(&r);
    /* int8 CPU experts on a VNNI host: faster decode than bf16 ones */
    double tpot[2];
    for (int i = 0; i < 2; i++) {
        json_t *v = th_writescope_json(
            (const char *[]){BASE, "--json", "--cpu-expert-weights", i ? "AMXINT8" : "bf16", NULL},
            NULL);
        json_t *r0 = json_array_get(json_object_get(v, "runs"), 0);
        cr_assert_not_null(r0);
        cr_assert_eq(json_integer_value(json_object_get(r0, "served")), 2);
        tpot[i] = json_number_value(json_object_get(r0, "tpot_p50_s"));
        json_decref(v);
    }
    cr_assert_gt(tpot[0], 0);
    cr_assert_lt(tpot[1], tpot[0]);
}

/* A block-quantized KV cache: its block bytes per element (q8_0: 34 B per 32, q4_0: 18 B per
 * 32) in place of bf16's 2, the attention's rates unchanged; the KV each token takes shrinks
 * in the simulator's memory and its copies by the same factor. */
Test(wparts, block_quantized_kv_takes_its_bytes)
{
    ws_model m;
    ws_hw hw;
    ws_err err = {0};
    ws_store *s;
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_hw_load(s, "qwen3-30b-a3b", "a100-40gb-pcie", "xeon-gold-5318y", WS_DT_BF16,
                            &m, &hw, NULL, &err),
                 0, "%s", err.msg);
    ws_store_close(s);
    const char *names[] = {"q8_0", "q4_0"};
    const double per[] = {34.0 / 32, 18.0 / 32};
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    ws_cost_model base;
    cr_assert_eq(ws_cost_model_init(&hw, &m, &cc, &base, &err), 0, "%s", err.msg);
    for (int i = 0; i < 2; i++) {
        cc.w_kv = ws_wformat_find(names[i]);
        cr_assert_not_null(cc.w_kv);
        ws_cost_model cm;
        cr_assert_eq(ws_cost_model_init(&hw, &m, &cc, &cm, &err), 0, "%s", err.msg);
        cr_assert_float_eq(cm.b_tok, base.b_tok * per[i] / 2, 1e-12 * base.b_tok);
        cr_assert_float_eq(cm.st.kv_bytes_tok, base.st.kv_bytes_tok * per[i] / 2,
                           1e-12 * base.st.kv_bytes_tok);
        cr_assert_lt(ws_cost_h2d(&cm, cm.b_tok * 1e5, 0), ws_cost_h2d(&base, base.b_tok * 1e5, 0));
        ws_cost_model_free(&cm);
    }
    ws_cost_model_free(&base);
}
