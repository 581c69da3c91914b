/* test_sim_serve: the serving loop (sim/serve.c) over the step graph, on the embedded
 * datasheet profiles: a golden text of a small trace-like workload; conservation (every
 * request ends exactly once, every token accounted for, no resource over 100% busy, time
 * never goes backwards) under every policy; stream == static r = 0 and cpu-attn == static
 * r = 1 step for step; same seed, same output; detail step == detail layer; OOM outcomes
 * (weights that do not fit, KV beyond the budget) counted, never a crash; sparse attention
 * streams the top-k, not the context. No timing assertions. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "hw.h"
#include "control.h"
#include "schedule.h"
#include "serve.h"
#include "store.h"
#include "timeline.h"
#include "trace.h"
#include "wformat.h"
#include "trace_gen.h"
#include "ws_util.h"

#define load th_load_hw

static const sim_req k_mix[] = {
    {0.0, 700, 300, NULL, 0}, {0.0, 300, 40, NULL, 0},  {0.5, 1200, 5, NULL, 0},
    {2.0, 90, 1, NULL, 0},    {2.0, 513, 260, NULL, 0}, {40.0, 64, 8, NULL, 0},
};
#define N_MIX ((int)(sizeof k_mix / sizeof k_mix[0]))

static void run_mix(const ws_model *m, const ws_hw *hw, sim_cfg *cfg, sim_results *r)
{
    ws_err err = {0};
    th_list_src l;
    sim_source src;
    th_list_src_init(&l, k_mix, N_MIX, &src);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cr_assert_eq(sim_run(m, hw, &cc, cfg, &src, r, &err), 0, "%s", err.msg);
}

static void run_closed(const ws_model *m, const ws_hw *hw, sim_cfg *cfg, int b, int p, int o,
                       sim_results *r)
{
    ws_err err = {0};
    sim_closed c;
    sim_source src;
    sim_closed_source(&c, b, p, o, &src);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cr_assert_eq(sim_run(m, hw, &cc, cfg, &src, r, &err), 0, "%s", err.msg);
}

/* The results as text: every request, every step, the totals that are not wall time. */
static char *results_text(const sim_results *r)
{
    size_t cap = 1 << 20, n = 0;
    char *b = malloc(cap);
    n += (size_t)snprintf(b + n, cap - n, "policy %s model %s gpu %s host %s\n", r->policy,
                          r->model, r->gpu, r->host);
    for (size_t i = 0; i < r->n_req; i++) {
        const sim_req_result *q = &r->req[i];
        n += (size_t)snprintf(b + n, cap - n,
                              "req %llu arr %.6f prompt %d out %d gen %d %s ttft %.9g tpot %.9g "
                              "e2e %.9g\n",
                              (unsigned long long)q->id, q->arrival_s, q->prompt, q->output,
                              q->generated, sim_outcome_name(q->outcome), q->ttft, q->tpot, q->e2e);
    }
    for (size_t i = 0; i < r->n_step && n < cap - 512; i++) {
        if (i >= 40 && i % 25 && i + 1 != r->n_step)
            continue; /* the first steps, then a sample */
        const sim_step_rec *s = &r->step[i];
        n += (size_t)snprintf(b + n, cap - n,
                              "step %llu t %.9g dt %.9g batch %d dec %d pf %d r* %.6f r %.6f "
                              "busy %.9g %.9g %.9g %.9g ev %llu\n",
                              (unsigned long long)s->idx, s->t_start, s->t_end - s->t_start, s->batch,
                              s->decode_tokens, s->prefill_tokens, s->r_star, s->r_real, s->busy[0],
                              s->busy[1], s->busy[2], s->busy[3], (unsigned long long)s->events);
    }
    const sim_totals *t = &r->tot;
    snprintf(b + n, cap - n,
             "totals served %llu oom %llu out %llu tok/s %.9g dec tok/s %.9g ttft %.9g %.9g "
             "%.9g tpot %.9g %.9g %.9g events %llu steps %llu\n",
             (unsigned long long)t->served, (unsigned long long)t->oom,
             (unsigned long long)t->output_tokens, t->tokens_per_s, t->decode_tps, t->ttft_p50,
             t->ttft_p90, t->ttft_p99, t->tpot_p50, t->tpot_p90, t->tpot_p99,
             (unsigned long long)t->events, (unsigned long long)t->steps);
    return b;
}

/* The golden file: tests/golden/<name>; WS_UPDATE_GOLDEN=1 rewrites it. */
static void golden(const char *name, const char *text)
{
    ws_err err = {0};
    char root[4096], path[4300];
    cr_assert_eq(ws_root_dir(root, sizeof root, &err), 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/tests/golden/%s", root, name);
    if (getenv("WS_UPDATE_GOLDEN")) {
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f, "%s", path);
        fputs(text, f);
        fclose(f);
    }
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s missing (WS_UPDATE_GOLDEN=1 writes it)", path);
    size_t cap = strlen(text) + 2;
    char *want = calloc(cap + 1, 1);
    size_t got = fread(want, 1, cap, f);
    fclose(f);
    want[got] = 0;
    /* First differing line, for the message. */
    const char *a = text, *b = want;
    int line = 1;
    while (*a && *a == *b) {
        if (*a == '\n')
            line++;
        a++, b++;
    }
    cr_assert(*a == 0 && *b == 0, "%s differs at line %d:\n got:  %.160s\n want: %.160s", name,
              line, a, b);
    free(want);
}

Test(sim_serve, golden_small_workload)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-40gb-pcie", &m, &hw);
    const ws_policy_kind pols[] = {WS_POLICY_WRITESCOPE, WS_POLICY_STATIC, WS_POLICY_KTRANS};
    /* the CPU's experts at every chunk, and auto, which keeps 512-token chunks there on this
     * setup (it streams from about 1K tokens): the same text */
    for (int mode = WS_PREFILL_CPU; mode >= WS_PREFILL_AUTO; mode--) {
        size_t cap = 1 << 22, n = 0;
        char *all = malloc(cap);
        all[0] = 0;
        for (size_t k = 0; k < 3; k++) {
            sim_cfg cfg;
            sim_cfg_default(&cfg);
            cfg.prefill_mode = mode;
            cfg.policy = pols[k];
            cfg.layers = 4;
            cfg.batch = 3;
            cfg.chunk = 512;
            cfg.batching = WS_BATCH_SERIAL; /* golden_mixed_workload has the mixed batches */
            cfg.gpu_kv_budget = 2.0 * 1073741824.0;
            cfg.slo_ttft = 5, cfg.slo_tpot = 0.05;
            sim_results r;
            run_mix(&m, &hw, &cfg, &r);
            char *t = results_text(&r);
            n += (size_t)snprintf(all + n, cap - n, "%s", t);
            free(t);
            sim_results_free(&r);
        }
        golden("sim_small.txt", all);
        free(all);
    }
}

/* Conservation on one run. */
static void check_conserved(const sim_results *r, const sim_req *reqs, int n)
{
    cr_assert_eq(r->n_req, (size_t)n);
    uint64_t served = 0, oom = 0, tokens = 0;
    for (int i = 0; i < n; i++) {
        const sim_req_result *q = &r->req[i];
        cr_assert_eq(q->prompt, reqs[i].prompt);
        if (q->outcome == SIM_OUT_OOM) {
            oom++;
            cr_assert_eq(q->generated, 0);
            cr_assert(q->ttft < 0 && q->end_s < 0);
            continue;
        }
        cr_assert_eq(q->outcome, SIM_OUT_DONE);
        served++;
        cr_assert_eq(q->generated, reqs[i].output, "req %d generated %d of %d", i, q->generated,
                     reqs[i].output);
        tokens += (uint64_t)q->generated;
        cr_assert(q->first_s >= q->arrival_s && q->end_s >= q->first_s, "req %d times", i);
        cr_assert(q->ttft > 0 && fabs(q->e2e - (q->end_s - q->arrival_s)) < 1e-9);
    }
    cr_assert_eq(served, r->tot.served);
    cr_assert_eq(oom, r->tot.oom);
    cr_assert_eq(served + oom, (uint64_t)n, "every request ends exactly once");
    cr_assert_eq(tokens, r->tot.output_tokens, "all tokens accounted");
    double t = 0;
    uint64_t ev = 0;
    for (size_t i = 0; i < r->n_step; i++) {
        const sim_step_rec *s = &r->step[i];
        cr_assert(s->t_start >= t - 1e-12, "step %zu starts at %.9g before %.9g", i, s->t_start, t);
        cr_assert((s->t_end - s->t_start) > 0, "step %zu has no duration", i);
        for (int k = 0; k < SIM_RES_COUNT; k++)
            cr_assert(s->busy[k] >= 0 && s->busy[k] <= (s->t_end - s->t_start) * (1 + 1e-9),
                      "step %zu resource %d busy %.9g of %.9g", i, k, s->busy[k], (s->t_end - s->t_start));
        cr_assert(s->r_real >= 0 && s->r_real <= 1 && s->r_star >= 0 && s->r_star <= 1);
        t = s->t_start + (s->t_end - s->t_start);
        ev += s->events;
    }
    cr_assert_eq(ev, r->tot.events);
}

Test(sim_serve, conservation_every_policy)
{
    const char *models[] = {"qwen3-30b-a3b", "deepseek-v2-lite", "deepseek-v4-flash"};
    for (int mi = 0; mi < 3; mi++) {
        ws_model m;
        ws_hw hw;
        load(models[mi], "a100-40gb-pcie", &m, &hw);
        for (int p = 0; p < WS_POLICY_COUNT; p++)
            for (int d = 0; d < 2; d++) {
                sim_cfg cfg;
                sim_cfg_default(&cfg);
                cfg.policy = (ws_policy_kind)p;
                cfg.layers = 6;
                cfg.batch = 2;
                cfg.chunk = 256;
                cfg.detail_layer = d;
                cfg.gpu_kv_budget = 0.05 * 1073741824.0; /* forces waits and OOMs */
                sim_results r;
                run_mix(&m, &hw, &cfg, &r);
                check_conserved(&r, k_mix, N_MIX);
                sim_results_free(&r);
            }
    }
}

static void expect_same(const sim_results *a, const sim_results *b)
{
    cr_assert_eq(a->n_req, b->n_req);
    cr_assert_eq(a->n_step, b->n_step);
    for (size_t i = 0; i < a->n_req; i++) {
        cr_assert_eq(a->req[i].outcome, b->req[i].outcome);
        cr_assert(a->req[i].ttft == b->req[i].ttft && a->req[i].e2e == b->req[i].e2e,
                  "req %zu: %.17g/%.17g vs %.17g/%.17g", i, a->req[i].ttft, a->req[i].e2e,
                  b->req[i].ttft, b->req[i].e2e);
    }
    for (size_t i = 0; i < a->n_step; i++) {
        cr_assert((a->step[i].t_end - a->step[i].t_start) == (b->step[i].t_end - b->step[i].t_start), "step %zu: %.17g vs %.17g", i, (a->step[i].t_end - a->step[i].t_start),
                  (b->step[i].t_end - b->step[i].t_start));
        cr_assert(a->step[i].r_real == b->step[i].r_real);
    }
}

Test(sim_serve, stream_and_cpu_attn_are_static_at_0_and_1)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-40gb-pcie", &m, &hw);
    const struct {
        ws_policy_kind k;
        double r;
    } pairs[] = {{WS_POLICY_STREAM, 0.0}, {WS_POLICY_CPU_ATTN, 1.0}};
    for (int i = 0; i < 2; i++) {
        sim_cfg a, b;
        sim_cfg_default(&a);
        a.layers = 8;
        a.batch = 4;
        b = a;
        a.policy = pairs[i].k;
        b.policy = WS_POLICY_STATIC;
        b.par.r_static = pairs[i].r;
        sim_results ra, rb;
        run_closed(&m, &hw, &a, 4, 3000, 300, &ra);
        run_closed(&m, &hw, &b, 4, 3000, 300, &rb);
        expect_same(&ra, &rb);
        cr_assert_eq(ra.tot.r_final, pairs[i].r);
        sim_results_free(&ra);
        sim_results_free(&rb);
    }
}

Test(sim_serve, same_seed_same_output)
{
    ws_model m;
    ws_hw hw;
    load("mixtral-8x7b", "v100-32gb-pcie", &m, &hw);
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.layers = 5;
    cfg.batch = 3;
    cfg.seed = 42;
    sim_results a, b;
    run_mix(&m, &hw, &cfg, &a);
    run_mix(&m, &hw, &cfg, &b);
    char *ta = results_text(&a), *tb = results_text(&b);
    cr_assert_str_eq(ta, tb);
    free(ta), free(tb);
    sim_results_free(&a);
    sim_results_free(&b);
}

/* detail step folds layers; where the pipeline is periodic it must give the layer run. */
Test(sim_serve, detail_step_equals_detail_layer)
{
    const char *models[] = {"qwen3-30b-a3b", "deepseek-v2-lite", "mixtral-8x7b",
                            "deepseek-v4-flash"};
    for (int mi = 0; mi < 4; mi++) {
        ws_model m;
        ws_hw hw;
        load(models[mi], "a100-40gb-pcie", &m, &hw);
        const ws_policy_kind pols[] = {WS_POLICY_WRITESCOPE, WS_POLICY_STREAM, WS_POLICY_STATIC,
                                       WS_POLICY_KTRANS, WS_POLICY_MIGRATE};
        for (int p = 0; p < 5; p++) {
            sim_cfg a;
            sim_cfg_default(&a);
            a.policy = pols[p];
            a.batch = 3;
            a.chunk = 4096;
            a.gpu_kv_budget = 16.0 * 1073741824.0;
            a.host_limit = 4096 * 1073741824.0; /* bf16 experts of the largest models */
            sim_cfg b = a;
            b.detail_layer = 0;
            sim_results ra, rb;
            run_closed(&m, &hw, &a, 3, 6000, 300, &ra);
            run_closed(&m, &hw, &b, 3, 6000, 300, &rb);
            cr_assert_gt(rb.tot.folded_layers, 0, "%s: nothing folded", models[mi]);
            cr_assert_eq(rb.tot.fold_inexact, 0, "%s %s", models[mi], ra.policy);
            cr_assert_eq(ra.n_step, rb.n_step);
            cr_assert_lt(rb.tot.events, ra.tot.events);
            for (size_t i = 0; i < ra.n_step; i++)
                cr_assert(fabs((ra.step[i].t_end - ra.step[i].t_start) - (rb.step[i].t_end - rb.step[i].t_start)) <= 1e-9 * (ra.step[i].t_end - ra.step[i].t_start),
                          "%s %s step %zu: layer %.12g, step %.12g", models[mi], ra.policy, i,
                          (ra.step[i].t_end - ra.step[i].t_start), (rb.step[i].t_end - rb.step[i].t_start));
            for (size_t i = 0; i < ra.n_req; i++)
                cr_assert(fabs(ra.req[i].e2e - rb.req[i].e2e) <= 1e-9 * ra.req[i].e2e);
            sim_results_free(&ra);
            sim_results_free(&rb);
        }
    }
}

Test(sim_serve, oom_outcomes_not_crashes)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-40gb-pcie", &m, &hw);
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.layers = 4;
    cfg.policy = WS_POLICY_GPU_ONLY; /* 61 GB of weights on a 40 GB GPU */
    sim_results r;
    run_closed(&m, &hw, &cfg, 3, 128, 4, &r);
    cr_assert_eq(r.tot.oom, 3);
    cr_assert_eq(r.tot.served, 0);
    cr_assert_eq(r.n_step, 0);
    sim_results_free(&r);
    /* ktrans keeps all KV in 2 GiB: 32K-token prompts never fit; writescope serves them. */
    sim_cfg_default(&cfg);
    cfg.policy = WS_POLICY_KTRANS;
    cfg.detail_layer = 0;
    run_closed(&m, &hw, &cfg, 2, 32768, 2, &r);
    cr_assert_eq(r.tot.oom, 2);
    sim_results_free(&r);
    cfg.policy = WS_POLICY_WRITESCOPE;
    run_closed(&m, &hw, &cfg, 2, 32768, 2, &r);
    cr_assert_eq(r.tot.oom, 0);
    cr_assert_eq(r.tot.served, 2);
    sim_results_free(&r);
}

/* A request whose own KV exceeds a tier is an OOM outcome that says so: how many, and the
 * first one's tokens, its bytes and the tier's room (weights that do not fit are not). */
Test(sim_serve, kv_oom_names_the_tier_and_the_bytes)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-40gb-pcie", &m, &hw);
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.policy = WS_POLICY_KTRANS; /* all KV in the 1 GiB budget */
    cfg.detail_layer = 0;
    cfg.gpu_kv_budget = 1073741824.0;
    sim_results r;
    run_closed(&m, &hw, &cfg, 2, 32768, 2, &r);
    cr_assert_eq(r.tot.oom, 2);
    cr_assert_eq(r.tot.kv_oom, 2);
    cr_assert_eq(r.tot.no_room, 0);
    cr_assert_eq(r.tot.kv_oom_tokens, 32770);
    cr_assert_float_eq(r.tot.kv_oom_room[0], 1073741824.0, 1);
    const double kv = 32770.0 * m.layers * 2 * m.n_kv_heads * m.head_dim * 2; /* GQA bf16 */
    cr_assert_float_eq(r.tot.kv_oom_need[0], kv, 1e-6 * kv, "%g vs %g", r.tot.kv_oom_need[0], kv);
    cr_assert_gt(r.tot.kv_oom_need[0], r.tot.kv_oom_room[0]);
    sim_results_free(&r);
    /* weights that leave no room are the other reason, not this one */
    sim_cfg_default(&cfg);
    cfg.layers = 4;
    cfg.policy = WS_POLICY_GPU_ONLY;
    run_closed(&m, &hw, &cfg, 3, 128, 4, &r);
    cr_assert_eq(r.tot.oom, 3);
    cr_assert_eq(r.tot.kv_oom, 0);
    sim_results_free(&r);
}

/* Admission over the largest batch: SIM_BATCH_MAX requests at once, none of which fits,
 * each an OOM outcome. Admitting n requests costs O(n + batch), about a second here; at
 * O(n x batch) (the batch's sums, or a free slot searched from slot 0, per request) this
 * size takes hours. */
Test(sim_serve, admission_is_linear_in_the_batch)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-40gb-pcie", &m, &hw);
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.policy = WS_POLICY_KTRANS;
    cfg.detail_layer = 0;
    cfg.keep_requests = cfg.keep_steps = 0;
    cfg.batch = SIM_BATCH_MAX;
    cfg.gpu_kv_budget = 1073741824.0;
    sim_results r;
    run_closed(&m, &hw, &cfg, SIM_BATCH_MAX, 32768, 1, &r);
    cr_assert_eq(r.tot.oom, SIM_BATCH_MAX);
    cr_assert_eq(r.tot.kv_oom, SIM_BATCH_MAX);
    sim_results_free(&r);
    /* one more than the cap is refused, not run */
    cfg.batch = SIM_BATCH_MAX + 1;
    ws_err err = {0};
    sim_closed c;
    sim_source src;
    sim_closed_source(&c, 1, 10, 10, &src);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cr_assert_eq(sim_run(&m, &hw, &cc, &cfg, &src, &r, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "more than 1048576"), NULL, "%s", err.msg);
}

/* Decode H2D time per step for a prompt length (stream: every spilled token streamed). */
static double h2d_per_decode_step(const char *model, int prompt)
{
    ws_model m;
    ws_hw hw;
    load(model, "a100-40gb-pcie", &m, &hw);
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.policy = WS_POLICY_STREAM;
    cfg.layers = 4;
    cfg.chunk = 8192;
    cfg.host_limit = 4096 * 1073741824.0; /* bf16 experts of the largest models */
    sim_results r;
    run_closed(&m, &hw, &cfg, 1, prompt, 3, &r);
    const sim_step_rec *s = &r.step[r.n_step - 1];
    cr_assert_gt(s->decode_tokens, 0);
    double v = s->busy[SIM_RES_H2D];
    sim_results_free(&r);
    return v;
}

Test(sim_serve, sparse_attention_streams_the_top_k)
{
    /* dense: twice the context, about twice the stream */
    double d1 = h2d_per_decode_step("qwen3-30b-a3b", 16384),
           d2 = h2d_per_decode_step("qwen3-30b-a3b", 32768);
    cr_assert_gt(d2, 1.8 * d1, "dense %.6g -> %.6g", d1, d2);
    /* sparse: past top-k + window the stream stays put */
    double s1 = h2d_per_decode_step("deepseek-v4-flash", 16384),
           s2 = h2d_per_decode_step("deepseek-v4-flash", 32768);
    cr_assert(fabs(s2 - s1) <= 1e-9 * s1 && s1 > 0, "sparse %.9g -> %.9g", s1, s2);
}

Test(sim_serve, bad_settings_and_requests)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-40gb-pcie", &m, &hw);
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.window = 300; /* not a multiple of the page */
    ws_err err = {0};
    sim_closed c;
    sim_source src;
    sim_closed_source(&c, 1, 10, 10, &src);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    sim_results r;
    cr_assert_eq(sim_run(&m, &hw, &cc, &cfg, &src, &r, &err), WS_EINVAL);
    sim_cfg_default(&cfg);
    const sim_req bad[] = {{1.0, 10, 10, NULL, 0}, {0.5, 10, 10, NULL, 0}}; /* out of order */
    th_list_src l;
    sim_source s2;
    th_list_src_init(&l, bad, 2, &s2);
    cr_assert_eq(sim_run(&m, &hw, &cc, &cfg, &s2, &r, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "request 1"), NULL, "%s", err.msg);
}

/* A step whose layer ends settle before its GPU half does (the prefetch catching up over
 * several layers while the CPU paces the layers): folding on the layer ends alone would
 * feed the policy different halves and migrate would diverge. */
Test(sim_serve, detail_step_equals_layer_when_the_gpu_half_settles_late)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "v100-32gb-pcie", &m, &hw);
    sim_cfg a;
    sim_cfg_default(&a);
    a.policy = WS_POLICY_MIGRATE;
    a.batch = 4;
    a.chunk = 8192;
    a.keep_steps = 1;
    sim_cfg b = a;
    b.detail_layer = 0;
    sim_results ra, rb;
    run_closed(&m, &hw, &a, 4, 32768, 256, &ra);
    run_closed(&m, &hw, &b, 4, 32768, 256, &rb);
    cr_assert_gt(rb.tot.folded_layers, 0);
    cr_assert_eq(ra.n_step, rb.n_step);
    for (size_t i = 0; i < ra.n_step; i++)
        cr_assert(fabs((ra.step[i].t_end - ra.step[i].t_start) - (rb.step[i].t_end - rb.step[i].t_start)) <= 1e-9 * (ra.step[i].t_end - ra.step[i].t_start) &&
                      ra.step[i].r_real == rb.step[i].r_real,
                  "step %zu: layer %.12g r %.6f, step %.12g r %.6f", i, (ra.step[i].t_end - ra.step[i].t_start),
                  ra.step[i].r_real, (rb.step[i].t_end - rb.step[i].t_start), rb.step[i].r_real);
    sim_results_free(&ra);
    sim_results_free(&rb);
}

typedef struct step_seen {
    sim_timeline *tl;
    size_t steps, spans, stop_at;
} step_seen;

static int on_step(void *ctx, const sim_step_rec *rec, ws_err *err)
{
    step_seen *s = ctx;
    cr_assert_eq(rec->idx, s->steps);
    s->steps++;
    for (size_t i = 0; i < s->tl->n; i++)
        cr_assert(s->tl->v[i].t_end <= rec->t_end + 1e-12 && s->tl->v[i].label);
    s->spans += s->tl->n;
    sim_timeline_clear(s->tl); /* as a streaming writer does */
    if (s->stop_at && s->steps == s->stop_at)
        return ws_err_set(err, WS_EIO, "writer failed");
    return 0;
}

Test(sim_serve, step_callback_and_timeline)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-40gb-pcie", &m, &hw);
    sim_timeline tl;
    sim_timeline_init(&tl);
    step_seen seen = {.tl = &tl};
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.layers = 3;
    cfg.timeline = &tl;
    cfg.on_step = on_step;
    cfg.on_step_ctx = &seen;
    sim_results r;
    run_closed(&m, &hw, &cfg, 2, 600, 20, &r);
    cr_assert_eq(seen.steps, r.tot.steps);
    cr_assert_gt(seen.spans, 10 * seen.steps);
    sim_results_free(&r);
    /* a failing writer stops the run with its error */
    seen = (step_seen){.tl = &tl, .stop_at = 5};
    ws_err err = {0};
    sim_closed c;
    sim_source src;
    sim_closed_source(&c, 2, 600, 20, &src);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cr_assert_eq(sim_run(&m, &hw, &cc, &cfg, &src, &r, &err), WS_EIO);
    cr_assert_str_eq(err.msg, "writer failed");
    sim_timeline_free(&tl);
}

/* Streaming: with nothing kept, every request reaches on_request exactly once (in the
 * order they end, each with its result as the kept run has it), every step reaches on_step,
 * and the totals are those of the run that keeps everything. */
typedef struct collect {
    sim_req_result *req;
    size_t n, cap;
    uint64_t steps;
} collect;

static int collect_req(void *ctx, const sim_req_result *r, ws_err *err)
{
    (void)err;
    collect *c = ctx;
    cr_assert_lt(r->id, c->cap);
    cr_assert_eq(c->req[r->id].id, UINT64_MAX, "request %llu ended twice",
                 (unsigned long long)r->id);
    c->req[r->id] = *r;
    c->n++;
    return 0;
}

static int count_step(void *ctx, const sim_step_rec *rec, ws_err *err)
{
    (void)err;
    collect *c = ctx;
    cr_assert_eq(rec->idx, c->steps);
    c->steps++;
    return 0;
}

Test(sim_serve, streamed_results_equal_kept_ones)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-40gb-pcie", &m, &hw);
    for (int pol = 0; pol < WS_POLICY_COUNT; pol++) {
        sim_cfg cfg;
        sim_cfg_default(&cfg);
        cfg.policy = (ws_policy_kind)pol;
        cfg.batch = 3;
        cfg.layers = 3;
        cfg.gpu_kv_budget = 0.05 * 1073741824.0; /* small: requests wait for room */
        sim_results kept, streamed;
        run_mix(&m, &hw, &cfg, &kept);
        collect c = {.cap = N_MIX};
        c.req = malloc(N_MIX * sizeof *c.req);
        for (int i = 0; i < N_MIX; i++)
            c.req[i].id = UINT64_MAX;
        cfg.keep_requests = cfg.keep_steps = 0;
        cfg.on_request = collect_req;
        cfg.on_request_ctx = &c;
        cfg.on_step = count_step;
        cfg.on_step_ctx = &c;
        run_mix(&m, &hw, &cfg, &streamed);
        cr_assert_eq(streamed.n_req, 0);
        cr_assert_null(streamed.req);
        cr_assert_eq(streamed.n_step, 0);
        cr_assert_eq(c.n, N_MIX);
        cr_assert_eq(c.steps, kept.tot.steps);
        for (int i = 0; i < N_MIX; i++)
            cr_assert_eq(memcmp(&c.req[i], &kept.req[i], sizeof c.req[i]), 0, "%s request %d",
                         kept.policy, i);
        kept.tot.wall_s = streamed.tot.wall_s = 0;
        cr_assert_eq(memcmp(&kept.tot, &streamed.tot, sizeof kept.tot), 0, "%s totals",
                     kept.policy);
        cr_assert(kept.tot.pct_exact);
        cr_assert_eq(kept.tot.requests, N_MIX);
        free(c.req);
        sim_results_free(&kept);
        sim_results_free(&streamed);
    }
}

/* A step's context is the KV it attends: a prefill chunk its prompt so far, a decode step
 * every sequence's context plus its new token. */
Test(sim_serve, step_context)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-40gb-pcie", &m, &hw);
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.layers = 2;
    cfg.chunk = 1000;
    cfg.batching = WS_BATCH_SERIAL;
    sim_results r;
    run_closed(&m, &hw, &cfg, 2, 1500, 4, &r);
    /* chunks: 1000, 500 of the first prompt, then of the second, then decode steps */
    cr_assert_eq(r.step[0].context, 1000);
    cr_assert_eq(r.step[1].context, 1500);
    cr_assert_eq(r.step[3].context, 1500);
    cr_assert_eq(r.step[4].decode_tokens, 2);
    cr_assert_eq(r.step[4].context, 2 * 1501);
    cr_assert_eq(r.step[5].context, 2 * 1502);
    sim_results_free(&r);
}

/* A closed-loop generator (traces/trace_gen.h) of `clients`, think spec `think`. */
static void run_closed_loop(const ws_model *m, const ws_hw *hw, sim_cfg *cfg, int clients,
                            const char *think, uint64_t requests, uint64_t seed, sim_results *r)
{
    ws_err err = {0};
    ws_trace_gen g = {.arrivals = WS_ARRIVALS_CLOSED, .clients = clients, .requests = requests,
                      .seed = seed};
    cr_assert_eq(ws_trace_think_parse(think, &g, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_trace_len_parse("uniform:200:1500", &g.prompt, &err), 0);
    cr_assert_eq(ws_trace_len_parse("uniform:1:40", &g.output, &err), 0);
    ws_trace *t;
    cr_assert_eq(ws_trace_gen_open(&g, &t, &err), 0, "%s", err.msg);
    sim_source src;
    cr_assert_eq(sim_trace_source(t, &src, &err), 0, "%s", err.msg);
    cr_assert_eq(src.clients, clients);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cr_assert_eq(sim_run(m, hw, &cc, cfg, &src, r, &err), 0, "%s", err.msg);
    ws_trace_close(t);
}

/* One client: request i arrives exactly the generator's i-th think time after request i-1
 * ended (fixed and exponential think times), so requests never overlap. */
Test(sim_serve, closed_loop_one_client_serialises)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-40gb-pcie", &m, &hw);
    const char *thinks[] = {"fixed:0.25", "exp:0.5", "0"};
    for (int k = 0; k < 3; k++) {
        sim_cfg cfg;
        sim_cfg_default(&cfg);
        cfg.layers = 2;
        sim_results r;
        run_closed_loop(&m, &hw, &cfg, 1, thinks[k], 12, 5, &r);
        /* The think times the generator draws, read from the same generator. */
        ws_err err = {0};
        ws_trace_gen g = {.arrivals = WS_ARRIVALS_CLOSED, .clients = 1, .requests = 12, .seed = 5};
        ws_trace_think_parse(thinks[k], &g, &err);
        ws_trace_len_parse("uniform:200:1500", &g.prompt, &err);
        ws_trace_len_parse("uniform:1:40", &g.output, &err);
        ws_trace *t;
        cr_assert_eq(ws_trace_gen_open(&g, &t, &err), 0);
        cr_assert_eq(r.n_req, 12);
        cr_assert_eq(r.tot.served, 12);
        for (size_t i = 0; i < r.n_req; i++) {
            ws_trace_req q;
            cr_assert_eq(ws_trace_next(t, &q, &err), 1);
            const sim_req_result *a = &r.req[i];
            cr_assert_eq(a->prompt, q.prompt_tokens);
            cr_assert_eq(a->output, q.output_tokens);
            const double want = i == 0 ? 0 : r.req[i - 1].end_s + q.arrival_s;
            cr_assert_eq(a->arrival_s, want, "%s: request %zu at %.17g, want %.17g", thinks[k], i,
                         a->arrival_s, want);
            if (k == 0 && i > 0)
                cr_assert_eq(q.arrival_s, 0.25);
            cr_assert_gt(a->end_s, a->arrival_s);
        }
        ws_trace_close(t);
        sim_results_free(&r);
    }
}

/* N clients: at every arrival at most N requests are waiting or running, and N are at
 * some point (the loop keeps every client busy); a batch smaller than N queues the rest. */
Test(sim_serve, closed_loop_at_most_n_in_flight)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-40gb-pcie", &m, &hw);
    const int batches[] = {32, 2};
    for (int b = 0; b < 2; b++) {
        sim_cfg cfg;
        sim_cfg_default(&cfg);
        cfg.layers = 2;
        cfg.batch = batches[b];
        sim_results r;
        const int N = 5;
        run_closed_loop(&m, &hw, &cfg, N, "exp:0.2", 60, 9, &r);
        cr_assert_eq(r.n_req, 60);
        cr_assert_eq(r.tot.served + r.tot.oom, 60);
        int most = 0;
        for (size_t i = 0; i < r.n_req; i++) {
            const double t = r.req[i].arrival_s;
            int in = 0;
            for (size_t j = 0; j < r.n_req; j++)
                in += r.req[j].arrival_s <= t && r.req[j].end_s > t;
            cr_assert_leq(in, N, "batch %d: %d in flight at %g s", cfg.batch, in, t);
            most = in > most ? in : most;
            if (i > 0)
                cr_assert_geq(t, r.req[i - 1].arrival_s, "arrivals in order");
        }
        cr_assert_eq(most, N, "batch %d: the clients were never all busy", cfg.batch);
        sim_results_free(&r);
    }
}

/* The same seed gives the same run; another seed another one. */
Test(sim_serve, closed_loop_deterministic_for_a_seed)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-40gb-pcie", &m, &hw);
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.layers = 2;
    sim_results a, b, c;
    run_closed_loop(&m, &hw, &cfg, 3, "exp:0.3", 30, 11, &a);
    run_closed_loop(&m, &hw, &cfg, 3, "exp:0.3", 30, 11, &b);
    run_closed_loop(&m, &hw, &cfg, 3, "exp:0.3", 30, 12, &c);
    char *ta = results_text(&a), *tb = results_text(&b), *tc = results_text(&c);
    cr_assert_str_eq(ta, tb);
    cr_assert_str_neq(ta, tc);
    free(ta), free(tb), free(tc);
    sim_results_free(&a), sim_results_free(&b), sim_results_free(&c);
}

/* migrate on Qwen3-30B-A3B / V100, 4 x 32K (where its own moves used to perturb the next
 * step's samples): r moves at most once after the first decode step and never reverses,
 * and a step that moves r keeps the CPU busy at least the moved bytes at kv_reformat_bw. */
Test(sim_serve, migrate_pays_the_reformat_and_does_not_flap)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "v100-32gb-pcie", &m, &hw);
    cr_assert_gt(hw.kv_reformat.v, 0);
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.policy = WS_POLICY_MIGRATE;
    cfg.detail_layer = 0;
    cfg.batching = WS_BATCH_SERIAL; /* every prompt in before the first decode step */
    sim_results r;
    run_closed(&m, &hw, &cfg, 4, 32768, 256, &r);
    cr_assert_eq(r.tot.served, 4);
    double prev = -1, moved_cpu = 0;
    int changes = 0, first = 1;
    for (size_t i = 0; i < r.n_step; i++) {
        const sim_step_rec *s = &r.step[i];
        if (!s->decode_tokens)
            continue;
        if (first) {
            /* The first decode step moves the prompts' KV from r = 0 to r*: the CPU is busy
             * at least that reformat in every layer. */
            const double bytes = s->r_real * s->spilled * 2048.0;
            cr_assert_gt(bytes, 0);
            moved_cpu = s->busy[SIM_RES_CPU];
            cr_assert_geq(moved_cpu, 48 * bytes / hw.kv_reformat.v, "CPU busy %g s", moved_cpu);
            first = 0;
        } else if (fabs(s->r_real - prev) > 1e-9) {
            changes++;
        }
        prev = s->r_real;
    }
    cr_assert_leq(changes, 1, "r moved %d times after the first decode step", changes);
    sim_results_free(&r);
}

/* The routed experts left on the CPU live in host DRAM beside the spilled KV: a host that
 * cannot hold them makes every request an OOM outcome, more GPU experts make room, and
 * the KV that still fits the rest is served. */
Test(sim_serve, cpu_experts_count_against_host_dram)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-40gb-pcie", &m, &hw);
    cr_assert_float_eq(hw.host_mem.v, 512 * 1073741824.0, 1);
    ws_model_stats st;
    ws_model_derive(&m, WS_DT_BF16, &st);
    const double experts = st.routed_bytes; /* every routed expert, bf16 */
    ws_err err = {0};
    for (int gpu_experts = 0; gpu_experts <= 32; gpu_experts += 32) {
        const double on_cpu = experts * (1.0 - gpu_experts / 128.0);
        const double limits[] = {0.9 * on_cpu, on_cpu + 2.0 * 1073741824.0};
        for (int k = 0; k < 2; k++) {
            sim_cfg cfg;
            sim_cfg_default(&cfg);
            cfg.policy = WS_POLICY_WRITESCOPE;
            cfg.layers = 2;
            cfg.batch = 2;
            cfg.host_limit = limits[k];
            ws_deploy_cfg cc;
            ws_deploy_cfg_default(&cc);
            cc.gpu_experts = gpu_experts;
            sim_closed cl;
            sim_source src;
            sim_closed_source(&cl, 2, 2048, 4, &src);
            sim_results r;
            cr_assert_eq(sim_run(&m, &hw, &cc, &cfg, &src, &r, &err), 0, "%s", err.msg);
            cr_assert_float_eq(r.tot.host_weight_bytes, on_cpu, 1e-6 * on_cpu);
            cr_assert_eq(r.tot.no_host_room, k == 0, "gpu_experts %d limit %d", gpu_experts, k);
            cr_assert_eq(r.tot.oom, k == 0 ? 2u : 0u, "gpu_experts %d k %d: oom %llu served %llu no_room %d", gpu_experts, k, (unsigned long long)r.tot.oom, (unsigned long long)r.tot.served, r.tot.no_room);
            cr_assert_eq(r.tot.served, k == 0 ? 0u : 2u);
            sim_results_free(&r);
        }
    }
    /* gpu-only keeps nothing on the host. */
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.policy = WS_POLICY_GPU_ONLY;
    cfg.host_limit = 1.0;
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    sim_closed cl;
    sim_source src;
    sim_closed_source(&cl, 1, 16, 2, &src);
    sim_results r;
    cr_assert_eq(sim_run(&m, &hw, &cc, &cfg, &src, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.tot.host_weight_bytes, 0);
    cr_assert_eq(r.tot.no_host_room, 0);
    sim_results_free(&r);
}

/* Qwen3-30B-A3B on an RTX 5090 and the embedded profile of `host`. */
static void load_qwen_5090(const char *host, ws_model *m, ws_hw *hw)
{
    ws_err err = {0};
    ws_store *s;
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_hw_load(s, "qwen3-30b-a3b", "rtx-5090", host, WS_DT_BF16, m, hw, NULL, &err), 0,
                 "%s", err.msg);
    ws_store_close(s);
}

/* One request of 256 prompt and 8 output tokens under `policy` and cc (cpu_workers > 0: the
 * CPU's workers): its TPOT, and the weights in host memory. */
static double one_request_tpot(const ws_model *m, const ws_hw *hw, const ws_deploy_cfg *cc,
                               ws_policy_kind policy, int cpu_workers, double *host_w)
{
    ws_err err = {0};
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.policy = policy;
    if (cpu_workers > 0)
        cfg.cpu_workers = cpu_workers;
    sim_closed cl;
    sim_source src;
    sim_closed_source(&cl, 1, 256, 8, &src);
    sim_results r;
    cr_assert_eq(sim_run(m, hw, cc, &cfg, &src, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.tot.served, 1);
    const double t = r.tot.tpot_p50;
    if (host_w)
        *host_w = r.tot.host_weight_bytes;
    sim_results_free(&r);
    return t;
}

/* Sockets: the CPU's work on one of two sockets gets half the host's bandwidth; on both, each
 * with its own copy of the experts, all of it and twice the DRAM for the experts; more
 * sockets than the host has is refused. */
Test(sim_serve, cpu_sockets_share_bandwidth_and_copy_the_experts)
{
    ws_model m;
    ws_hw hw;
    ws_err err = {0};
    load_qwen_5090("xeon-gold-6454s-2s", &m, &hw);
    cr_assert_eq(hw.sockets.v, 2);
    double tpot[3], host_w[3];
    for (int n = 0; n <= 2; n++) {
        ws_deploy_cfg cc;
        ws_deploy_cfg_default(&cc);
        cc.cpu_sockets = n;
        /* ktrans: every layer's experts on the CPU, so the 4 ms step overhead is not all */
        tpot[n] = one_request_tpot(&m, &hw, &cc, WS_POLICY_KTRANS, 0, &host_w[n]);
    }
    cr_assert_float_eq(tpot[2], tpot[0], 1e-12 * tpot[0]);
    cr_assert_gt(tpot[1], 1.3 * tpot[0], "one socket %.6g, both %.6g", tpot[1], tpot[0]);
    cr_assert_float_eq(host_w[1], host_w[0], 1e-9 * host_w[0]);
    cr_assert_float_eq(host_w[2], 2 * host_w[0], 1e-9 * host_w[0]);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cc.cpu_sockets = 3;
    ws_cost_model cm;
    cr_assert_eq(ws_cost_model_init(&hw, &m, &cc, &cm, &err), WS_EINVAL);
    cr_assert(strstr(err.msg, "3 CPU sockets"), "%s", err.msg);
}

/* One node's memory (llama.cpp without --numa) on a two-socket host: the CPU's bandwidth is
 * one socket's, its flop/s both sockets'; a layer-offloaded decode step is slower for it; a
 * one-socket host, or the work on given sockets (each with its own copy), is unchanged. */
Test(sim_serve, one_node_memory_reads_at_one_sockets_bandwidth)
{
    ws_model m;
    ws_hw hw;
    ws_err err = {0};
    load_qwen_5090("xeon-gold-6454s-2s", &m, &hw);
    cr_assert_eq(hw.sockets.v, 2);
    ws_cost_model cm[3];
    double tpot[2];
    for (int one = 0; one <= 1; one++) {
        ws_deploy_cfg cc;
        ws_deploy_cfg_default(&cc);
        cc.one_node_memory = one;
        cr_assert_eq(ws_cost_model_init(&hw, &m, &cc, &cm[one], &err), 0, "%s", err.msg);
        cc.n_gpu_layers = 24;
        tpot[one] = one_request_tpot(&m, &hw, &cc, WS_POLICY_GPU_ONLY, 0, NULL);
    }
    cr_assert_float_eq(cm[1].dep.hw.cpu_expert.W.v, cm[0].dep.hw.cpu_expert.W.v / 2, 1e-9);
    cr_assert_float_eq(cm[1].dep.hw.cpu_attn.W.v, cm[0].dep.hw.cpu_attn.W.v / 2, 1e-9);
    cr_assert_float_eq(cm[1].dep.hw.cpu_mem_bw.v, cm[0].dep.hw.cpu_mem_bw.v / 2, 1e-9);
    cr_assert_eq(cm[1].dep.hw.cpu_expert.P.v, cm[0].dep.hw.cpu_expert.P.v);
    cr_assert_gt(tpot[1], 1.3 * tpot[0], "one node %.6g, pooled %.6g", tpot[1], tpot[0]);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cc.cpu_sockets = 2;
    ws_cost_model both;
    cr_assert_eq(ws_cost_model_init(&hw, &m, &cc, &both, &err), 0, "%s", err.msg);
    cc.one_node_memory = 1;
    cr_assert_eq(ws_cost_model_init(&hw, &m, &cc, &cm[2], &err), 0, "%s", err.msg);
    cr_assert_eq(cm[2].dep.hw.cpu_expert.W.v, both.dep.hw.cpu_expert.W.v, "own copies: no one node");
    ws_cost_model_free(&both);
    ws_hw one = hw;
    one.sockets.v = 1;
    ws_cost_model single;
    cc.cpu_sockets = 0;
    cr_assert_eq(ws_cost_model_init(&one, &m, &cc, &single, &err), 0, "%s", err.msg);
    cr_assert_eq(single.dep.hw.cpu_expert.W.v, cm[0].dep.hw.cpu_expert.W.v, "one socket: its own node");
    ws_cost_model_free(&single);
    for (int i = 0; i < 3; i++)
        ws_cost_model_free(&cm[i]);
}

/* Threads: fewer than the cores take their share of the flop/s and cap the bandwidth at
 * threads x core_bw (a host with core_bw); at or above the cores, or on a host without
 * core_bw, the bandwidth stays the sockets'. Fewer threads never make a step faster. */
Test(sim_serve, cpu_threads_share_flops_and_cap_bandwidth)
{
    ws_model m;
    ws_hw hw;
    ws_err err = {0};
    load_qwen_5090("epyc-9355-2s", &m, &hw);
    cr_assert_eq(hw.cores.v, 64);
    cr_assert_gt(hw.core_bw.v, 0, "%s", hw.core_bw.from);
    const int threads[] = {0, 64, 128, 16, 4};
    double P[5], W[5], tpot[5];
    for (int i = 0; i < 5; i++) {
        ws_deploy_cfg cc;
        ws_deploy_cfg_default(&cc);
        cc.cpu_threads = threads[i];
        ws_cost_model cm;
        cr_assert_eq(ws_cost_model_init(&hw, &m, &cc, &cm, &err), 0, "%s", err.msg);
        P[i] = cm.dep.hw.cpu_expert.P.v;
        W[i] = cm.dep.hw.cpu_expert.W.v;
        ws_cost_model_free(&cm);
        tpot[i] = one_request_tpot(&m, &hw, &cc, WS_POLICY_KTRANS, 64, NULL);
    }
    for (int i = 1; i <= 2; i++) { /* every core, or more threads than cores: unchanged */
        cr_assert_float_eq(P[i], P[0], 1e-12 * P[0]);
        cr_assert_float_eq(W[i], W[0], 1e-12 * W[0]);
        cr_assert_float_eq(tpot[i], tpot[0], 1e-12 * tpot[0]);
    }
    cr_assert_float_eq(P[3], P[0] * 16 / 64, 1e-9 * P[0]);
    cr_assert_float_eq(W[3], fmin(W[0], 16 * hw.core_bw.v), 1e-9 * W[0]);
    cr_assert_float_eq(W[4], fmin(W[0], 4 * hw.core_bw.v), 1e-9 * W[0]);
    cr_assert_lt(W[4], W[0]);
    cr_assert_geq(tpot[3], tpot[0]);
    cr_assert_gt(tpot[4], tpot[3], "4 threads %.6g, 16 threads %.6g", tpot[4], tpot[3]);
    /* no core_bw: the bandwidth stays, the flop/s still shrink */
    hw.core_bw.v = 0;
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cc.cpu_threads = 4;
    ws_cost_model cm;
    cr_assert_eq(ws_cost_model_init(&hw, &m, &cc, &cm, &err), 0, "%s", err.msg);
    cr_assert_float_eq(cm.dep.hw.cpu_expert.W.v, W[0], 1e-12 * W[0]);
    cr_assert_float_eq(cm.dep.hw.cpu_expert.P.v, P[0] / 16, 1e-9 * P[0]);
    ws_cost_model_free(&cm);
    cc.cpu_threads = -1;
    cr_assert_eq(ws_cost_model_init(&hw, &m, &cc, &cm, &err), WS_EINVAL);
}

/* Whole layers on the CPU (llama.cpp -ngl): the first layers' weights and KV leave the GPU
 * for host DRAM, their ops all run on the CPU pool, a step takes longer the fewer layers the
 * GPU keeps, and folded steps agree with played layers. */
Test(sim_serve, layers_on_the_cpu_move_weights_kv_and_work)
{
    ws_model m;
    ws_hw hw;
    ws_err err = {0};
    ws_store *s;
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_hw_load(s, "qwen3-30b-a3b", "rtx-4090", "ryzen-9-9950x", WS_DT_BF16, &m, &hw,
                            NULL, &err),
                 0, "%s", err.msg);
    ws_store_close(s);
    const ws_wformat *q4 = ws_wformat_find("q4_k_m");
    const int ngl[] = {0, 48, 36, 12};
    double gw[4], hwb[4], tpot[4];
    for (int i = 0; i < 4; i++) {
        ws_deploy_cfg cc;
        ws_deploy_cfg_default(&cc);
        cc.w_gpu = cc.w_shared = cc.w_gpu_experts = cc.w_cpu_experts = q4;
        cc.n_gpu_layers = ngl[i];
        double t[2];
        for (int detail = 0; detail < 2; detail++) {
            sim_cfg cfg;
            sim_cfg_default(&cfg);
            cfg.policy = WS_POLICY_GPU_ONLY;
            cfg.detail_layer = detail;
            sim_closed cl;
            sim_source src;
            sim_closed_source(&cl, 1, 256, 8, &src);
            sim_results r;
            cr_assert_eq(sim_run(&m, &hw, &cc, &cfg, &src, &r, &err), 0, "%s", err.msg);
            cr_assert_eq(r.tot.served, 1, "ngl %d", ngl[i]);
            t[detail] = r.tot.tpot_p50;
            gw[i] = r.tot.gpu_weight_bytes;
            hwb[i] = r.tot.host_weight_bytes;
            sim_results_free(&r);
        }
        cr_assert_float_eq(t[0], t[1], 1e-9 * t[1], "ngl %d: step %.9g layer %.9g", ngl[i], t[0],
                           t[1]);
        tpot[i] = t[1];
    }
    /* -ngl 48 of 48 layers is every layer on the GPU */
    cr_assert_float_eq(tpot[1], tpot[0], 1e-12 * tpot[0]);
    cr_assert_eq(hwb[0], 0);
    cr_assert_float_eq(gw[0] + hwb[0], gw[2] + hwb[2], 1e-9 * gw[0]);
    cr_assert_float_eq(gw[0] + hwb[0], gw[3] + hwb[3], 1e-9 * gw[0]);
    cr_assert_lt(gw[3], gw[2]);
    cr_assert_gt(tpot[2], tpot[0]);
    cr_assert_gt(tpot[3], tpot[2]);
    /* every op of a CPU layer holds the CPU (or nothing) */
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cc.n_gpu_layers = 36;
    ws_cost_model cm;
    cr_assert_eq(ws_cost_model_init(&hw, &m, &cc, &cm, &err), 0, "%s", err.msg);
    cr_assert_eq(cm.dep.cpu_layers, 12);
    cr_assert(ws_cost_layer(&cm, 11)->on_cpu && !ws_cost_layer(&cm, 12)->on_cpu);
    cr_assert_eq(ws_cost_layer(&cm, 3)->gpu_experts, 0);
    cr_assert_eq(ws_cost_layer(&cm, 3)->kind, WS_LAYER_CPU_MOE);
    ws_cost_split sp;
    ws_cost_split_terms(&cm, 0, 0, 0, 0, &sp);
    ws_sched_in in = {.T = 1, .nospill = 1, .resident = 300, .n_seqs = 1};
    ws_sched_layer L;
    ws_sched_build(&cm, &sp, &in, 3, &L);
    int cpu_ops = 0;
    for (int i = 0; i < L.n; i++) {
        cr_assert(L.op[i].res == WS_RES_CPU || L.op[i].res == WS_RES_NONE, "%s",
                  ws_op_name(L.op[i].kind));
        cpu_ops += L.op[i].res == WS_RES_CPU;
    }
    cr_assert_geq(cpu_ops, 5);
    cr_assert_gt(L.op[L.at[WS_OP_CPU_ATTN]].seconds, 0);
    ws_cost_model_free(&cm);
}
