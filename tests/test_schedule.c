/* test_schedule: the step's one home (runtime/schedule, runtime/control). The live runtime,
 * with every duration it measures replaced by the cost model's (cpu_time_modeled), and the
 * simulator's serving loop play the same workload; per decode step and per layer they agree
 * on the step time, the CPU half, the GPU half, the layer's timeline and the placement (CPU,
 * XFER and window tokens, the realised share, r*) to 1e-9 relative, for every runtime
 * policy, migrate included, on a GQA and an MLA model with flushes. A bad schedule, a
 * controller that decides differently in one caller, or a second model of the step on
 * either side fails it. Also: the player on its own equals the simulator's event graph for
 * one step with prefetch, and migrate's reformat really moves pages (counted apart). Prefill:
 * the runtime's modeled chunks equal the simulator's (time, count, strategy) under auto, cpu
 * and gpu, and a streamed chunk's weights for layer 1 cross PCIe while layer 0 computes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "run_engine.h"
#include "schedule.h"
#include "serve.h"

static const char *k_mla =
    "{\"architectures\": [\"DeepseekV2ForCausalLM\"], \"model_type\": \"deepseek_v2\", "
    "\"hidden_size\": 64, \"num_hidden_layers\": 3, \"num_attention_heads\": 4, "
    "\"num_key_value_heads\": 4, \"kv_lora_rank\": 64, \"qk_rope_head_dim\": 16, "
    "\"qk_nope_head_dim\": 32, \"v_head_dim\": 32, \"q_lora_rank\": null, "
    "\"intermediate_size\": 128, \"moe_intermediate_size\": 32, \"n_routed_experts\": 8, "
    "\"num_experts_per_tok\": 2, \"n_shared_experts\": 1, \"first_k_dense_replace\": 1, "
    "\"vocab_size\": 1000, \"torch_dtype\": \"bfloat16\"}";

#define TOL 1e-9

/* a and b equal to TOL relative to scale (the step's length for times) */
#define SAME(a, b, scale, what, k, l)                                                              \
    cr_assert(fabs((double)(a) - (double)(b)) <= TOL * (scale) + 1e-300,                           \
              "%s: step %d layer %d: runtime %.17g, simulator %.17g", what, k, l, (double)(a),     \
              (double)(b))

/* The simulator's decode steps, kept with their layers. */
typedef struct sim_steps {
    int n, cap, layers;
    sim_step_rec *rec;
    sim_step_layer *lay;
} sim_steps;

static int keep_step(void *ctx, const sim_step_rec *r, ws_err *err)
{
    (void)err;
    sim_steps *s = ctx;
    if (!r->decode_tokens)
        return 0;
    cr_assert_lt(s->n, s->cap);
    s->rec[s->n] = *r;
    memcpy(s->lay + (size_t)s->n * s->layers, r->lay, (size_t)s->layers * sizeof *s->lay);
    s->n++;
    return 0;
}

static void load(const char *json, ws_model *m, ws_hw *hw)
{
    ws_err err = {0};
    cr_assert_eq(ws_model_parse(json, "tiny.json", m, &err), 0, "%s", err.msg);
    th_paper_hw(NULL, m, hw);
}

static void compare(const char *json, ws_policy_kind pol)
{
    ws_model m;
    ws_hw hw;
    ws_err err = {0};
    load(json, &m, &hw);
    ws_engine_cfg c;
    ws_engine_cfg_default(&c);
    c.model = &m;
    c.hw = &hw;
    c.policy = pol;
    c.par.page_tokens = 16;
    c.window = 32;
    c.batch = 3;
    c.prompt = 200;
    c.output = 70;
    c.layers = m.layers;
    c.threads = 1;
    c.pingpong_bytes = 4096; /* a prefetch smaller than a layer's stream: both copies run */
    c.cpu_time_modeled = 1;
    ws_run_result r;
    cr_assert_eq(ws_engine_run(&c, &r, &err), 0, "%s: %s", ws_policy_name(pol), err.msg);

    ws_deploy_cfg cc; /* the runtime's own conversion: the same copies, the same prefetch */
    ws_engine_cost_cfg(&c, &cc);
    sim_cfg sc;
    sim_cfg_default(&sc);
    sc.policy = pol;
    sc.par = c.par;
    sc.batch = c.batch;
    sc.window = c.window;
    sc.layers = c.layers;
    sim_steps ss = {.cap = c.output + 2, .layers = r.layers};
    ss.rec = calloc((size_t)ss.cap, sizeof *ss.rec);
    ss.lay = calloc((size_t)ss.cap * ss.layers, sizeof *ss.lay);
    sc.on_step = keep_step;
    sc.on_step_ctx = &ss;
    sim_closed cl;
    sim_source src;
    /* the simulator's prefill yields the first token: output + 1 for `output` decode steps */
    sim_closed_source(&cl, c.batch, c.prompt, c.output + 1, &src);
    sim_results sr;
    cr_assert_eq(sim_run(&m, &hw, &cc, &sc, &src, &sr, &err), 0, "%s", err.msg);
    cr_assert_eq(ss.n, r.steps, "%s: %d simulated decode steps, %d run", ws_policy_name(pol), ss.n,
                 r.steps);

    int flushes = 0, moved = 0;
    for (int k = 0; k < r.steps; k++) {
        const ws_run_step *a = &r.step[k];
        const sim_step_rec *b = &ss.rec[k];
        const double dt = a->t_end - a->t_start, t0a = a->t_start, t0b = b->t_start;
        SAME(dt, b->t_end - b->t_start, dt, "step time", k, -1);
        SAME(a->r_star, b->r_star, 1, "r*", k, -1);
        SAME(a->r_real, b->r_real, 1, "realised share", k, -1);
        for (int l = 0; l < r.layers; l++) {
            const ws_run_layer *y = &r.lay[(size_t)k * r.layers + l];
            const sim_step_layer *z = &ss.lay[(size_t)k * ss.layers + l];
            SAME(y->n_cpu, b->n_cpu, 1, "CPU tokens", k, l);
            SAME(y->m_xfer, b->m_xfer, 1, "XFER tokens", k, l);
            SAME(y->resident, b->resident, 1, "window tokens", k, l);
            SAME(y->cpu_attn_s, z->cpu_s, dt, "CPU half", k, l);
            SAME(y->gpu_s, z->gpu_end - z->attn_start, dt, "GPU half", k, l);
            SAME(y->t.t_start - t0a, z->t_start - t0b, dt, "layer start", k, l);
            SAME(y->t.t_end - t0a, z->t_end - t0b, dt, "layer end", k, l);
            SAME(y->t.moe_s, z->moe_s, dt, "MoE phase", k, l);
            SAME(y->t.exp_cpu_s, z->exp_cpu_s, dt, "CPU experts", k, l);
            flushes += y->flush_pages > 0;
        }
        moved += k > 0 && fabs(a->r_real - r.step[k - 1].r_real) > 0.02;
    }
    if (getenv("WS_TEST_VERBOSE"))
        cr_log_info("%s: %d steps, %d flushing layers, r %.3f -> %.3f, r* %.3f, %llu B reformatted",
                    ws_policy_name(pol), r.steps, flushes, r.step[0].r_real,
                    r.step[r.steps - 1].r_real, r.step[r.steps - 1].r_star,
                    (unsigned long long)r.bytes_reformatted);
    cr_assert_gt(flushes, 0, "%s: windows flushed", ws_policy_name(pol));
    /* placement never moves a byte; migrate's reformats are counted apart */
    cr_assert_eq(r.bytes_moved, 0);
    if (pol == WS_POLICY_MIGRATE)
        cr_assert_gt(r.bytes_reformatted, 0, "migrate moved its share (%d jumps)", moved);
    else
        cr_assert_eq(r.bytes_reformatted, 0);
    sim_results_free(&sr);
    ws_run_result_free(&r);
    free(ss.rec);
    free(ss.lay);
}

static void every_policy(const char *json)
{
    const ws_policy_kind k[] = {WS_POLICY_WRITESCOPE, WS_POLICY_STATIC, WS_POLICY_STREAM,
                                WS_POLICY_CPU_ATTN, WS_POLICY_MIGRATE};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        compare(json, k[i]);
}

Test(schedule, runtime_equals_simulator_per_step_and_layer_gqa)
{
    every_policy(th_tiny_moe);
}

Test(schedule, runtime_equals_simulator_per_step_and_layer_mla)
{
    every_policy(k_mla);
}

/* The player alone, against hand-computed times of a two-layer step that streams. */
Test(schedule, player_is_first_come_first_served_on_each_resource)
{
    ws_model m;
    ws_hw hw;
    ws_err err = {0};
    load(th_tiny_moe, &m, &hw);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    ws_cost_model cm;
    cr_assert_eq(ws_cost_model_init(&hw, &m, &cc, &cm, &err), 0, "%s", err.msg);
    const ws_sched_in in = {.T = 2, .n_cpu = 512, .m_xfer = 4096, .resident = 40, .n_seqs = 2};
    ws_cost_split sp;
    ws_cost_split_terms(&cm, in.resident, 0, 0, 0, &sp);
    ws_sched_play p;
    ws_sched_play_start(&p, 10.0);
    ws_sched_layer s;
    ws_sched_times t0, t1;
    double e0[WS_SCHED_MAX_OPS];
    ws_sched_build(&cm, &sp, &in, 0, &s);
    ws_sched_play_layer(&p, &s, &t0, e0);
    /* layer 0: the step's overhead, qkv (the residual add, RMSNorm, QKV GEMM and RoPE, each
     * paying its fixed cost), append, then the CPU half beside the GPU half, whose prefetch
     * waits for its own qkv */
    const double step = ws_cost_step(&cm), qkv = ws_cost_add(&cm, 2) + ws_cost_norm(&cm, 2) +
                                                 ws_cost_qkv_proj(&cm, 2) + ws_cost_rope(&cm, 2);
    cr_assert_gt(step, 0, "the datasheet has a per-step overhead");
    cr_assert_gt(ws_cost_norm(&cm, 2), cm.dep.hw.gpu_elem[WS_ELEM_NORM].c0.v, "c0 + bytes / W");
    cr_assert_gt(cm.dep.hw.gpu_elem[WS_ELEM_NORM].c0.v, 0, "every kernel has a fixed cost");
    cr_assert_geq(s.at[WS_OP_STEP], 0);
    cr_assert_float_eq(t0.t_start, 10.0 + step, 1e-12);
    cr_assert_float_eq(t0.qkv_end, 10.0 + step + qkv, 1e-12);
    cr_assert_float_eq(e0[s.at[WS_OP_H2D_PRE]],
                       t0.qkv_end + ws_cost_h2d(&cm, fmin(cc.pingpong_bytes, 4096 * cm.b_tok), 1),
                       1e-12);
    cr_assert_float_eq(t0.cpu_s, ws_cost_split_cpu(&sp, 512), 1e-15);
    cr_assert_geq(t0.gpu_end, e0[s.at[WS_OP_H2D_PRE]]);
    cr_assert_eq(s.op[s.at[WS_OP_ROUTER]].res, WS_RES_CPU); /* beside the CPU's experts */
    const int pre0 = s.at[WS_OP_H2D_PRE]; /* layer 0's ops are laid out apart (the step op) */
    /* layer 1 starts at layer 0's end; its prefetch may start before that */
    ws_sched_build(&cm, &sp, &in, 1, &s);
    double e1[WS_SCHED_MAX_OPS];
    ws_sched_play_layer(&p, &s, &t1, e1);
    cr_assert_float_eq(t1.t_start, t0.t_end, 1e-15);
    cr_assert_eq(s.at[WS_OP_STEP], -1, "one overhead per step, before layer 0");
    const int pre = s.at[WS_OP_H2D_PRE];
    cr_assert_lt(e1[pre] - s.op[pre].seconds, t1.t_start, "prefetched during layer 0");
    cr_assert_float_eq(e1[pre] - s.op[pre].seconds, e0[pre0], 1e-12);
    cr_assert_geq(p.t_end, t1.t_end);
    ws_cost_model_free(&cm);
}

/* From layer 2 on a layer's ops depend on it only through its kind, which lets the simulator
 * build them once per step and kind (sim/step.c): layers 2 and 3 (dense) and 4 and 5 (MoE)
 * of a model with four dense layers first are built alike, op for op. */
Test(schedule, layers_past_the_second_depend_only_on_their_kind)
{
    char json[2048];
    snprintf(json, sizeof json, "%s", k_mla);
    char *p = strstr(json, "\"num_hidden_layers\": 3"), *q = strstr(json, "\"first_k_dense_replace\": 1");
    cr_assert(p && q);
    p[strlen("\"num_hidden_layers\": ")] = '6';
    q[strlen("\"first_k_dense_replace\": ")] = '4';
    ws_model m;
    ws_hw hw;
    ws_err err = {0};
    load(json, &m, &hw);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cc.pingpong_bytes = 4096; /* both copies run */
    ws_cost_model cm;
    cr_assert_eq(ws_cost_model_init(&hw, &m, &cc, &cm, &err), 0, "%s", err.msg);
    const ws_sched_in in = {.T = 3, .n_cpu = 900, .m_xfer = 3000, .resident = 60, .n_seqs = 3,
                            .flush_bytes = 1e5, .migrate_bytes = 2e5, .host_s = 1e-6};
    ws_cost_split sp;
    ws_cost_split_terms(&cm, in.resident, 0, 0, 0, &sp);
    for (int pair = 0; pair < 2; pair++) {
        ws_sched_layer a, b;
        ws_sched_build(&cm, &sp, &in, 2 + 2 * pair, &a);
        ws_sched_build(&cm, &sp, &in, 3 + 2 * pair, &b);
        cr_assert_eq(ws_cost_layer(&cm, 2 + 2 * pair)->moe, pair);
        cr_assert_eq(a.n, b.n);
        for (int i = 0; i < a.n; i++) {
            const ws_sched_op *x = &a.op[i], *y = &b.op[i];
            cr_assert(x->kind == y->kind && x->res == y->res && x->seconds == y->seconds &&
                          x->n_dep == y->n_dep,
                      "layers %d, %d: op %d differs", 2 + 2 * pair, 3 + 2 * pair, i);
            for (int d = 0; d < x->n_dep; d++)
                cr_assert(x->dep[d].back == y->dep[d].back && x->dep[d].ref == y->dep[d].ref);
        }
        cr_assert_eq(memcmp(a.at, b.at, sizeof a.at), 0);
        cr_assert_eq(memcmp(a.anchor, b.anchor, sizeof a.anchor), 0);
    }
    ws_cost_model_free(&cm);
}

/* The simulator's prefill chunks: their summed durations and how many streamed. */
typedef struct pf_sum {
    double s;
    int n, gpu;
} pf_sum;

static int sum_prefill(void *ctx, const sim_step_rec *r, ws_err *err)
{
    (void)err;
    pf_sum *p = ctx;
    if (r->prefill_tokens) {
        p->s += r->t_end - r->t_start;
        p->n++;
        p->gpu += r->prefill_gpu;
    }
    return 0;
}

/* The runtime's modeled prefill plays the simulator's chunks: the same chunks, the same
 * strategy per chunk, the same time to 1e-9, under each prefill mode. */
static void compare_prefill(const char *json, ws_policy_kind pol, int mode)
{
    ws_model m;
    ws_hw hw;
    ws_err err = {0};
    load(json, &m, &hw);
    ws_engine_cfg c;
    ws_engine_cfg_default(&c);
    c.model = &m;
    c.hw = &hw;
    c.policy = pol;
    c.par.page_tokens = 16;
    c.window = 32;
    c.batch = 3;
    c.prompt = 200;
    c.output = 2;
    c.layers = m.layers;
    c.threads = 1;
    c.cpu_time_modeled = 1;
    c.chunk = 64; /* four chunks per prompt, three after some context */
    c.prefill_mode = mode;
    ws_run_result r;
    cr_assert_eq(ws_engine_run(&c, &r, &err), 0, "%s: %s", ws_policy_name(pol), err.msg);

    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    sim_cfg sc;
    sim_cfg_default(&sc);
    sc.policy = pol;
    sc.par = c.par;
    sc.batch = c.batch;
    sc.window = c.window;
    sc.layers = c.layers;
    sc.chunk = c.chunk;
    sc.batching = c.batching;
    sc.prefill_mode = mode;
    pf_sum ps = {0};
    sc.on_step = sum_prefill;
    sc.on_step_ctx = &ps;
    sim_closed cl;
    sim_source src;
    sim_closed_source(&cl, c.batch, c.prompt, c.output + 1, &src);
    sim_results sr;
    cr_assert_eq(sim_run(&m, &hw, &cc, &sc, &src, &sr, &err), 0, "%s", err.msg);
    const char *pn = ws_policy_name(pol), *mn = ws_prefill_mode_name(mode);
    cr_assert_eq(r.prefill_chunks, 12, "%s %s", pn, mn);
    cr_assert_eq(ps.n, r.prefill_chunks, "%s %s", pn, mn);
    cr_assert_eq(ps.gpu, r.prefill_gpu_chunks, "%s %s", pn, mn);
    cr_assert_eq((uint64_t)ps.gpu, sr.tot.prefill_gpu_steps, "%s %s", pn, mn);
    cr_assert_eq((uint64_t)(ps.n - ps.gpu), sr.tot.prefill_cpu_steps, "%s %s", pn, mn);
    if (mode == WS_PREFILL_GPU)
        cr_assert_eq(ps.gpu, ps.n, "%s: forced gpu streams every chunk", pn);
    if (mode == WS_PREFILL_CPU)
        cr_assert_eq(ps.gpu, 0, "%s: forced cpu streams none", pn);
    cr_assert(fabs(r.prefill_modeled_s - ps.s) <= TOL * ps.s, "%s %s: runtime %.17g, sim %.17g", pn,
              mn, r.prefill_modeled_s, ps.s);
    sim_results_free(&sr);
    ws_run_result_free(&r);
}

static void every_policy_prefill(const char *json)
{
    const ws_policy_kind k[] = {WS_POLICY_WRITESCOPE, WS_POLICY_STATIC, WS_POLICY_STREAM,
                                WS_POLICY_CPU_ATTN, WS_POLICY_MIGRATE};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        for (int mode = WS_PREFILL_AUTO; mode <= WS_PREFILL_GPU; mode++)
            compare_prefill(json, k[i], mode);
}

Test(schedule, runtime_prefill_equals_simulator_per_strategy_gqa)
{
    every_policy_prefill(th_tiny_moe);
}

Test(schedule, runtime_prefill_equals_simulator_per_strategy_mla)
{
    every_policy_prefill(k_mla);
}

/* Qwen3-30B-A3B on the paper's hardware with cfg cc (NULL: the defaults). */
static void qwen_on_paper_hw(const ws_deploy_cfg *cc, ws_model *m, ws_hw *hw, ws_cost_model *cm)
{
    ws_err err = {0};
    char path[4096];
    cr_assert_eq(ws_model_resolve("qwen3-30b-a3b", path, sizeof path, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_model_load(path, m, &err), 0, "%s", err.msg);
    th_paper_hw(NULL, m, hw);
    ws_deploy_cfg def;
    ws_deploy_cfg_default(&def);
    cr_assert_eq(ws_cost_model_init(hw, m, cc ? cc : &def, cm, &err), 0, "%s", err.msg);
}

/* Layers 0 and 1 of one step built from in and played from time 0. */
static void play_two_layers(const ws_cost_model *cm, const ws_sched_in *in, ws_sched_layer *s0,
                            ws_sched_layer *s1, ws_sched_times *t0, ws_sched_times *t1, double *e0,
                            double *e1)
{
    ws_sched_play p;
    ws_sched_play_start(&p, 0);
    ws_sched_build(cm, NULL, in, 0, s0);
    ws_sched_play_layer(&p, s0, t0, e0);
    ws_sched_build(cm, NULL, in, 1, s1);
    ws_sched_play_layer(&p, s1, t1, e1);
}

/* A prefill chunk that streams its CPU experts: layer 1's stream is on the H2D engine right
 * after layer 0's, while layer 0 still computes (it waits for neither layer 0's experts nor
 * its end), and layer 1's experts wait for their stream; the router runs on the GPU. */
Test(schedule, streamed_experts_pipeline_with_the_previous_layer)
{
    ws_model m;
    ws_hw hw;
    ws_cost_model cm;
    qwen_on_paper_hw(NULL, &m, &hw, &cm);
    /* a chunk after a long context: the GPU's attention makes each layer's compute longer
     * than one layer's stream, so the stream hides under the compute */
    const double q = 2048, ctx = 250000;
    const ws_sched_in in = {.T = q, .prefill_q = q, .prefill_ctx = ctx, .prefill_gpu = 1};
    ws_sched_layer s0, s1;
    ws_sched_times t0, t1;
    double e0[WS_SCHED_MAX_OPS], e1[WS_SCHED_MAX_OPS];
    play_two_layers(&cm, &in, &s0, &s1, &t0, &t1, e0, e1);
    const int x0 = s0.at[WS_OP_H2D_EXP], x1 = s1.at[WS_OP_H2D_EXP];
    cr_assert(x0 >= 0 && x1 >= 0 && s0.at[WS_OP_EXP_CPU] < 0 && s1.at[WS_OP_EXP_STREAM] >= 0);
    cr_assert_eq(s1.op[x1].res, WS_RES_H2D);
    cr_assert_eq(s1.op[s1.at[WS_OP_ROUTER]].res, WS_RES_GPU);
    const double stream = ws_cost_expert_stream(&cm, cm.n_dense_layers, q);
    cr_assert_float_eq(s1.op[x1].seconds, stream, 1e-15);
    cr_assert_float_eq(e0[x0], ws_cost_step(&cm) + stream, 1e-12);
    cr_assert_float_eq(e1[x1], e0[x0] + stream, 1e-12, "layer 1's stream follows layer 0's");
    cr_assert_lt(e1[x1] - stream, t0.t_end, "streamed while layer 0 computes");
    const int es = s1.at[WS_OP_EXP_STREAM], r1 = s1.at[WS_OP_ROUTER];
    cr_assert_geq(e1[es] - s1.op[es].seconds, e1[x1], "experts after their weights");
    /* compute-bound: layer 1's weights are in before its router ends, so its experts start
     * right after the router and the stream costs the layer nothing */
    cr_assert_float_eq(t1.t_start, t0.t_end, 1e-12);
    cr_assert_lt(e1[x1], e1[r1]);
    cr_assert_float_eq(e1[es] - s1.op[es].seconds, e1[r1], 1e-12);
    /* a short context: the stream is the longer, and the layers follow the H2D engine */
    const ws_sched_in sh = {.T = q, .prefill_q = q, .prefill_ctx = 0, .prefill_gpu = 1};
    play_two_layers(&cm, &sh, &s0, &s1, &t0, &t1, e0, e1);
    cr_assert_float_eq(e1[x1], e0[x0] + stream, 1e-12);
    cr_assert_gt(e1[x1], t0.t_end, "stream-bound: layer 1 waits for its weights");
    cr_assert_lt(t1.t_end, 2 * (stream + (t0.t_end - t0.t_start)), "overlapped, not serial");
    ws_cost_model_free(&cm);
}

/* A streamed chunk's GPU-resident experts pay their permute and combine, as a decode step's
 * do: with 32 experts on the GPU and the first 4 layers wholly on the CPU, a GPU layer's
 * GPU-experts op is their grouped GEMMs plus that layer's permute, in the streamed branch
 * as in the CPU one (not the first MoE layer's, a CPU layer with no GPU experts). */
Test(schedule, streamed_chunk_costs_the_gpu_experts_permute)
{
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cc.gpu_experts = 32;
    cc.n_gpu_layers = 44;
    ws_model m;
    ws_hw hw;
    ws_cost_model cm;
    qwen_on_paper_hw(&cc, &m, &hw, &cm);
    cr_assert(ws_cost_layer(&cm, 0)->on_cpu && !ws_cost_layer(&cm, 10)->on_cpu);
    const double q = 512;
    for (int gpu = 0; gpu < 2; gpu++) {
        const ws_sched_in in = {.T = q, .prefill_q = q, .prefill_ctx = 0, .prefill_gpu = gpu};
        ws_sched_layer s;
        ws_sched_build(&cm, NULL, &in, 10, &s);
        const int eg = s.at[WS_OP_EXP_GPU];
        cr_assert_geq(eg, 0);
        const double perm = ws_cost_moe_permute_gpu(&cm, 10, q);
        cr_assert_gt(perm, 0);
        cr_assert_float_eq(s.op[eg].seconds, ws_cost_gpu_experts(&cm, 10, q) + perm, 1e-15,
                           "strategy %d", gpu);
    }
    ws_cost_model_free(&cm);
}

/* Layers wholly on the CPU in a streamed prefill chunk: each streams its weights and KV on
 * the H2D engine (layer 1's right after layer 0's), then runs on the GPU from qkv on, qkv
 * after its stream; nothing holds the CPU. Not streamed, they run on the CPU. */
Test(schedule, cpu_layers_stream_and_run_on_the_gpu)
{
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cc.gpu_experts = 128;
    cc.n_gpu_layers = 46; /* layers 0 and 1 on the CPU */
    ws_model m;
    ws_hw hw;
    ws_cost_model cm;
    qwen_on_paper_hw(&cc, &m, &hw, &cm);
    const double q = 512, ctx = 0;
    const ws_sched_in in = {.T = q, .prefill_q = q, .prefill_ctx = ctx, .prefill_gpu = 1};
    ws_sched_layer s0, s1;
    ws_sched_times t0, t1;
    double e0[WS_SCHED_MAX_OPS], e1[WS_SCHED_MAX_OPS];
    play_two_layers(&cm, &in, &s0, &s1, &t0, &t1, e0, e1);
    const double stream = ws_cost_h2d(&cm, ws_cost_cpu_layer_stream_bytes(&cm, 1, q, ctx), 0);
    const int x0 = s0.at[WS_OP_H2D_EXP], x1 = s1.at[WS_OP_H2D_EXP], k1 = s1.at[WS_OP_QKV];
    cr_assert(x0 >= 0 && x1 >= 0 && k1 >= 0 && s1.at[WS_OP_EXP_STREAM] >= 0);
    cr_assert_float_eq(s1.op[x1].seconds, stream, 1e-15);
    cr_assert_float_eq(e1[x1], e0[x0] + stream, 1e-12, "layer 1's stream follows layer 0's");
    cr_assert_geq(e1[k1] - s1.op[k1].seconds, e1[x1], "qkv after its weights");
    for (int i = 0; i < s1.n; i++)
        cr_assert_neq(s1.op[i].res, WS_RES_CPU, "op %s on the CPU", ws_op_name(s1.op[i].kind));
    cr_assert_eq(s1.op[k1].res, WS_RES_GPU);
    const double D = ws_cost_distinct_experts(&cm, q);
    cr_assert_gt(s1.op[s1.at[WS_OP_EXP_STREAM]].seconds, 0, "%g experts hit", D);
    const ws_sched_in cpu = {.T = q, .prefill_q = q, .prefill_ctx = ctx, .prefill_gpu = 0};
    play_two_layers(&cm, &cpu, &s0, &s1, &t0, &t1, e0, e1);
    cr_assert_lt(s1.at[WS_OP_H2D_EXP], 0);
    cr_assert_eq(s1.op[s1.at[WS_OP_QKV]].res, WS_RES_CPU);
    cr_assert_eq(s1.op[s1.at[WS_OP_EXP_CPU]].res, WS_RES_CPU);
    ws_cost_model_free(&cm);
}

Test(schedule, cpu_experts_wait_for_the_hidden_states_hand_off)
{
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cc.gpu_experts = 32;
    cc.n_cpu_moe = 1; /* MoE layer 0 keeps 96 experts on the CPU, layer 1 holds all 128 */
    ws_model m;
    ws_hw hw;
    ws_cost_model cm;
    qwen_on_paper_hw(&cc, &m, &hw, &cm);
    const double T = 4;
    const ws_sched_in in = {.T = T, .n_seqs = 4, .resident = 4096};
    ws_sched_layer s0, s1;
    ws_sched_times t0, t1;
    double e0[WS_SCHED_MAX_OPS], e1[WS_SCHED_MAX_OPS];
    play_two_layers(&cm, &in, &s0, &s1, &t0, &t1, e0, e1);
    const int out = s0.at[WS_OP_TO_HOST], back = s0.at[WS_OP_TO_GPU];
    const int r = s0.at[WS_OP_ROUTER], ec = s0.at[WS_OP_EXP_CPU], o = s0.at[WS_OP_OPROJ];
    cr_assert(out >= 0 && back >= 0 && ec >= 0);
    cr_assert_eq(s0.op[out].res, WS_RES_NONE);
    cr_assert_eq(s0.op[back].res, WS_RES_NONE);
    /* one copy each way of T x hidden at the model's dtype, copy_c0 plus the bytes */
    const double bytes = T * m.hidden * cm.w_elem;
    cr_assert_float_eq(s0.op[out].seconds, hw.d2h.c0.v + bytes / hw.d2h.W.v, 1e-15);
    cr_assert_float_eq(s0.op[back].seconds, hw.h2d.c0.v + bytes / hw.h2d.W.v, 1e-15);
    cr_assert_gt(s0.op[out].seconds, 0);
    /* o_proj -> to_host -> router (on the CPU) -> CPU experts -> to_gpu -> layer end */
    cr_assert_float_eq(e0[out], e0[o] + s0.op[out].seconds, 1e-12);
    cr_assert_eq(s0.op[r].res, WS_RES_CPU);
    cr_assert_geq(e0[r] - s0.op[r].seconds, e0[out]);
    cr_assert_float_eq(e0[back], e0[ec] + s0.op[back].seconds, 1e-12);
    cr_assert_geq(t0.t_end, e0[back]);
    /* a layer with every expert on the GPU hands nothing off */
    cr_assert_lt(s1.at[WS_OP_TO_HOST], 0);
    cr_assert_lt(s1.at[WS_OP_TO_GPU], 0);
    cr_assert_lt(s1.at[WS_OP_EXP_CPU], 0);
    ws_cost_model_free(&cm);
}
