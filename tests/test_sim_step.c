/* test_sim_step: one step's operation graph (sim/step.c) against the cost model it calls:
 * a no-spill decode step is the serial chain of its ops' cost-model times (the GPU stream
 * runs them in order, the CPU experts beside the shared experts), and the next layer's
 * stream overlaps this layer's MoE phase (the prefetch), so a later layer's period is
 * shorter than the first layer's, which has nothing prefetched. Folded steps (the schedule's
 * player, and the graph when a timeline is recorded) equal the layer-level graph. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>

#include "control.h"
#include "hw.h"
#include "step.h"
#include "store.h"
#include "timeline.h"

typedef struct world {
    ws_model m;
    ws_hw hw;
    ws_cost_model cm;
    sim_engine e;
    sim_step st;
} world;

static void world_init(world *w, int layers, int fold)
{
    ws_err err = {0};
    ws_store *s;
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_hw_load(s, "qwen3-30b-a3b", "a100-40gb-pcie", "xeon-gold-5318y", WS_DT_BF16,
                            &w->m, &w->hw, NULL, &err),
                 0, "%s", err.msg);
    ws_store_close(s);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cr_assert_eq(ws_cost_model_init(&w->hw, &w->m, &cc, &w->cm, &err), 0, "%s", err.msg);
    cr_assert_eq(sim_engine_init(&w->e, 1, &err), 0);
    cr_assert_eq(sim_step_init(&w->st, &w->e, 0, &w->cm, layers, 24, fold, &err), 0, "%s", err.msg);
}

static void world_free(world *w)
{
    sim_step_free(&w->st);
    sim_engine_free(&w->e);
    ws_cost_model_free(&w->cm);
}

Test(sim_step, nospill_decode_is_the_chain_of_cost_model_times)
{
    world w;
    world_init(&w, 6, 0);
    const ws_cost_model *cm = &w.cm;
    const double T = 8, ctx = 8 * 3000.0;
    sim_step_in in = {.T = T, .nospill = 1, .resident = ctx, .n_seqs = T};
    sim_step_out out;
    ws_err err = {0};
    cr_assert_eq(sim_step_run(&w.st, &in, &out, &err), 0, "%s", err.msg);
    /* per layer: residual add, RMSNorm, QKV GEMM, RoPE; the KV append; attention; output
     * GEMM, add, RMSNorm; the hidden states to the host; the router and its top-k; the
     * experts with their permute and combine, and their output back to the GPU, beside the
     * shared experts. One step overhead before layer 0. */
    const double router = ws_cost_router(cm, cm->n_dense_layers, T) +
                          ws_cost_topk(cm, cm->n_dense_layers, T),
                 experts = ws_cost_cpu_experts(cm, cm->n_dense_layers, T) +
                           ws_cost_moe_permute_cpu(cm, cm->n_dense_layers, T);
    const double layer = ws_cost_add(cm, T) + ws_cost_norm(cm, T) + ws_cost_qkv_proj(cm, T) +
                         ws_cost_rope(cm, T) + ws_cost_append(cm, T) + ws_cost_gpu_attn(cm, ctx) +
                         ws_cost_o_proj(cm, T) + ws_cost_add(cm, T) + ws_cost_norm(cm, T) +
                         ws_cost_handoff(cm, T, 1) + router +
                         fmax(experts + ws_cost_handoff(cm, T, 0), ws_cost_shared_experts(cm, T));
    cr_assert_gt(ws_cost_handoff(cm, T, 1), 0);
    const double want = ws_cost_step(cm) + 6 * layer;
    cr_assert_gt(ws_cost_step(cm), 0);
    cr_assert(fabs((out.t1 - out.t0) - want) <= 1e-12 + 1e-9 * want, "step %.12g, want %.12g",
              out.t1 - out.t0, want);
    /* the router runs beside the CPU's routed experts */
    cr_assert(ws_cost_layer(cm, cm->n_dense_layers)->router_on_cpu);
    cr_assert(fabs(out.busy[SIM_RES_CPU] - 6 * (router + experts)) < 1e-12);
    cr_assert_eq(out.busy[SIM_RES_H2D], 0);
    world_free(&w);
}

Test(sim_step, next_layer_streams_during_the_moe_phase)
{
    world w;
    world_init(&w, 4, 0);
    /* a GPU half of 4 MB per layer: well inside one ping-pong half */
    sim_step_in in = {.T = 4, .m_xfer = 2048, .resident = 4, .n_seqs = 4};
    sim_step_out out;
    ws_err err = {0};
    cr_assert_eq(sim_step_run(&w.st, &in, &out, &err), 0, "%s", err.msg);
    const sim_step_layer *L = w.st.lay;
    const double p0 = L[0].t_end - L[0].t_start, p2 = L[2].t_end - L[1].t_end;
    const double stream = ws_cost_h2d(&w.cm, 2048 * w.cm.b_tok, 1);
    cr_assert_lt(p2, p0, "prefetched layer %.9g vs first %.9g", p2, p0);
    cr_assert(p0 - p2 > 0.5 * stream, "the overlap hides most of the %.9g s stream", stream);
    /* the first layer waits for its whole stream after qkv */
    cr_assert_geq(L[0].gpu_end - L[0].qkv_end, stream * (1 - 1e-9));
    world_free(&w);
}

Test(sim_step, fold_equals_layers_with_flushes)
{
    world a, b;
    world_init(&a, 48, 0);
    world_init(&b, 48, 1);
    sim_step_in in = {.T = 16,
                      .n_cpu = 16 * 9000.0,
                      .m_xfer = 16 * 1000.0,
                      .resident = 16 * 100.0,
                      .n_seqs = 16,
                      .flush_bytes = 4 * 256 * a.cm.b_tok};
    sim_step_out oa, ob;
    ws_err err = {0};
    cr_assert_eq(sim_step_run(&a.st, &in, &oa, &err), 0, "%s", err.msg);
    cr_assert_eq(sim_step_run(&b.st, &in, &ob, &err), 0, "%s", err.msg);
    cr_assert_gt(ob.folded, 0);
    cr_assert_eq(ob.fold_inexact, 0);
    cr_assert(fabs((oa.t1 - oa.t0) - (ob.t1 - ob.t0)) <= 1e-9 * (oa.t1 - oa.t0), "%.12g vs %.12g",
              oa.t1 - oa.t0, ob.t1 - ob.t0);
    for (int k = 0; k < SIM_RES_COUNT; k++)
        cr_assert(fabs(oa.busy[k] - ob.busy[k]) <= 1e-9 * (oa.t1 - oa.t0), "res %d", k);
    cr_assert_lt(ob.events, oa.events);
    world_free(&a);
    world_free(&b);
}

/* The controller's estimate of a layer is the layer the simulator plays: for every layer kind
 * and placement (GPU experts, --n-cpu-moe, --n-gpu-layers; a model with a dense layer) and
 * every prefill strategy, and for a decode step with both attention halves, each layer's
 * span and end in ws_ctl_play (the schedule's player) equal those of the step's event graph
 * (sim/step.c, unfolded) to 1e-9. */
typedef struct placement {
    const char *model;
    int gpu_experts, n_cpu_moe, n_gpu_layers;
} placement;

/* The cost model of a placement on the A100 40 GB and the Xeon Gold 5318Y datasheets. */
static void placement_model(const placement *p, ws_model *m, ws_hw *hw, ws_cost_model *cm)
{
    ws_err err = {0};
    ws_store *s;
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    cr_assert_eq(
        ws_hw_load(s, p->model, "a100-40gb-pcie", "xeon-gold-5318y", WS_DT_BF16, m, hw, NULL, &err),
        0, "%s", err.msg);
    ws_store_close(s);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cc.gpu_experts = p->gpu_experts;
    cc.n_cpu_moe = p->n_cpu_moe;
    cc.n_gpu_layers = p->n_gpu_layers;
    cr_assert_eq(ws_cost_model_init(hw, m, &cc, cm, &err), 0, "%s", err.msg);
}

/* Steps of each kind: prefill chunks (CPU experts on the CPU, then streamed to the GPU), a
 * decode step with both attention halves and a flush; and (the last two, which the
 * controller's test leaves out) a decode step that spills nothing and a mixed step with a
 * flush and prefill writes. */
#define STEP_KINDS 5
#define STEP_KINDS_CONTROLLER 3
static void step_kinds(const ws_cost_model *cm, sim_step_in *in)
{
    const double q = 512, ctx = 1000, b = cm->b_tok;
    in[0] = (sim_step_in){.T = q, .prefill_q = q, .prefill_ctx = ctx, .write_bytes = q * b};
    in[1] = in[0];
    in[1].prefill_gpu = 1;
    in[2] = (sim_step_in){.T = 8,
                          .n_cpu = 8 * 9000.0,
                          .m_xfer = 8 * 2000.0,
                          .resident = 8 * 100.0,
                          .n_seqs = 8,
                          .flush_bytes = 8 * 256 * b};
    in[3] = (sim_step_in){.T = 4, .nospill = 1, .resident = 4 * 3000.0, .n_seqs = 4};
    in[4] = (sim_step_in){.T = 4 + q,
                          .n_cpu = 4 * 9000.0,
                          .m_xfer = 4 * 2000.0,
                          .resident = 4 * 100.0,
                          .n_seqs = 4,
                          .flush_bytes = 4 * 256 * b,
                          .prefill_q = q,
                          .prefill_ctx = ctx,
                          .write_bytes = q * b};
}

static void check_layers(const char *what, const ws_sched_times *want, const sim_step *st,
                         double t0, int L)
{
    for (int l = 0; l < L; l++) {
        const sim_step_layer *g = &st->lay[l];
        const double end = g->t_end - t0, span = g->t_end - g->t_start;
        const double tol = 1e-9 * fmax(end, 1e-9);
        cr_assert(fabs(end - want[l].t_end) <= tol,
                  "%s layer %d: played end %.12g, controller %.12g", what, l, end, want[l].t_end);
        cr_assert(fabs(span - (want[l].t_end - want[l].t_start)) <= tol,
                  "%s layer %d: span %.12g vs %.12g", what, l, span,
                  want[l].t_end - want[l].t_start);
        cr_assert(fabs(g->moe_s - want[l].moe_s) <= tol, "%s layer %d: MoE phase", what, l);
    }
}

Test(sim_step, controller_estimate_is_the_played_layer)
{
    static const placement P[] = {
        {"qwen3-30b-a3b", 0, 0, 0},    {"qwen3-30b-a3b", 32, 0, 0},
        {"qwen3-30b-a3b", 32, 10, 0},  {"qwen3-30b-a3b", 32, 0, 44},
        {"qwen3-30b-a3b", 128, 0, 40}, {"deepseek-v2-lite", 8, 4, 25},
        {"deepseek-v2-lite", 0, 0, 0},
    };
    int kinds_seen[WS_LAYER_KINDS] = {0};
    for (size_t p = 0; p < sizeof P / sizeof P[0]; p++) {
        ws_err err = {0};
        ws_model m;
        ws_hw hw;
        ws_cost_model cm;
        placement_model(&P[p], &m, &hw, &cm);
        for (int l = 0; l < cm.layers; l++)
            kinds_seen[ws_cost_layer(&cm, l)->kind] = 1;
        ws_policy_params par;
        ws_policy_params_default(&par);
        ws_ctl c;
        cr_assert_eq(ws_ctl_init(&c, &cm, WS_POLICY_WRITESCOPE, &par, cm.layers, &err), 0);
        sim_step_in steps[STEP_KINDS];
        step_kinds(&cm, steps);
        for (int k = 0; k < STEP_KINDS_CONTROLLER; k++) {
            sim_engine e;
            sim_step st;
            cr_assert_eq(sim_engine_init(&e, 1, &err), 0);
            cr_assert_eq(sim_step_init(&st, &e, 0, &cm, cm.layers, 24, 0, &err), 0, "%s", err.msg);
            sim_step_out out;
            cr_assert_eq(sim_step_run(&st, &steps[k], &out, &err), 0, "%s", err.msg);
            ws_sched_times want[64];
            cr_assert_leq(cm.layers, 64);
            const double t = ws_ctl_play(&c, &steps[k], want);
            char what[96];
            snprintf(what, sizeof what, "%s gpu_experts %d n_cpu_moe %d ngl %d, step %d",
                     P[p].model, P[p].gpu_experts, P[p].n_cpu_moe, P[p].n_gpu_layers, k);
            check_layers(what, want, &st, out.t0, cm.layers);
            cr_assert(fabs((out.t1 - out.t0) - t) <= 1e-9 * t, "%s: step %.12g vs %.12g", what,
                      out.t1 - out.t0, t);
            sim_step_free(&st);
            sim_engine_free(&e);
        }
        ws_cost_model_free(&cm);
    }
    for (int k = 0; k < WS_LAYER_KINDS; k++)
        cr_assert(kinds_seen[k], "no placement above has a %s layer", ws_layer_kind_name(k));
}

/* The schedule's player folds every run of identical layers, not only the last: the CPU-MoE
 * layers of --n-cpu-moe before the GPU-MoE ones, CPU layers (--n-gpu-layers) before GPU
 * ones, a dense first layer. Both folded steps, the player (the default) and the event graph
 * (when a timeline is recorded: it folds the last run), have the unfolded step's end, busy
 * time per resource and every layer's end, span and MoE phase to 1e-9, in fewer events;
 * for decode, prefill (either strategy) and a mixed step with both a flush and prefill
 * writes. */
Test(sim_step, folded_steps_fold_every_run_and_equal_the_layer_graph)
{
    static const placement P[] = {
        {"qwen3-30b-a3b", 0, 24, 0},
        {"qwen3-30b-a3b", 32, 10, 0},
        {"qwen3-30b-a3b", 0, 0, 30},
        {"deepseek-v2-lite", 8, 14, 20},
    };
    int folded = 0;
    for (size_t p = 0; p < sizeof P / sizeof P[0]; p++) {
        ws_err err = {0};
        ws_model m;
        ws_hw hw;
        ws_cost_model cm;
        placement_model(&P[p], &m, &hw, &cm);
        sim_step_in steps[STEP_KINDS];
        step_kinds(&cm, steps);
        for (int k = 0; k < STEP_KINDS; k++) {
            /* 0: unfolded graph, 1: folded graph (timeline on), 2: folded player */
            sim_engine e[3];
            sim_step st[3];
            sim_step_out out[3];
            sim_timeline tl;
            sim_timeline_init(&tl);
            for (int f = 0; f < 3; f++) {
                cr_assert_eq(sim_engine_init(&e[f], 1, &err), 0);
                cr_assert_eq(sim_step_init(&st[f], &e[f], 0, &cm, cm.layers, 24, f > 0, &err), 0,
                             "%s", err.msg);
                if (f == 1)
                    sim_dag_record(&st[f].g, &tl);
                cr_assert_eq(sim_step_run(&st[f], &steps[k], &out[f], &err), 0, "%s", err.msg);
            }
            ws_sched_times want[64];
            cr_assert_leq(cm.layers, 64);
            for (int l = 0; l < cm.layers; l++) {
                want[l] = st[0].lay[l];
                want[l].t_start -= out[0].t0, want[l].t_end -= out[0].t0;
            }
            const double t = out[0].t1 - out[0].t0;
            for (int f = 1; f < 3; f++) {
                char what[128];
                snprintf(what, sizeof what, "%s gpu_experts %d n_cpu_moe %d ngl %d, step %d, %s",
                         P[p].model, P[p].gpu_experts, P[p].n_cpu_moe, P[p].n_gpu_layers, k,
                         f == 1 ? "folded graph" : "player");
                cr_assert(fabs((out[f].t1 - out[f].t0) - t) <= 1e-9 * t,
                          "%s: folded %.12g vs %.12g", what, out[f].t1 - out[f].t0, t);
                for (int r = 0; r < SIM_RES_COUNT; r++)
                    cr_assert(fabs(out[f].busy[r] - out[0].busy[r]) <= 1e-9 * t, "%s: busy %d",
                              what, r);
                check_layers(what, want, &st[f], out[f].t0, cm.layers);
                cr_assert_eq(out[f].fold_inexact, 0, "%s", what);
                cr_assert_lt(out[f].events, out[0].events, "%s", what);
            }
            folded += out[2].folded > 0;
            for (int f = 0; f < 3; f++) {
                sim_step_free(&st[f]);
                sim_engine_free(&e[f]);
            }
            sim_timeline_free(&tl);
        }
        ws_cost_model_free(&cm);
    }
    cr_assert_geq(folded, 15, "the player folded %d steps", folded);
}
