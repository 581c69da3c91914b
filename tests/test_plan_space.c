/* test_plan_space: the configuration search (sim/plan_space.h). Memory is judged as the
 * simulator judges it (the weights sim_run reports); pruning by bound and incumbent never
 * loses the best a search of every configuration finds; where nothing meets, the report
 * names what binds and a change one step past the space. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "helpers.h"
#include "plan.h"
#include "plan_space.h"
#include "policy.h"
#include "serve.h"
#include "store.h"

static void small_spec(ws_plan_spec *s)
{
    ws_plan_spec_default(s);
    s->model = "qwen3-30b-a3b";
    s->host = "xeon-gold-5318y";
    s->gpus[0] = "a100-40gb-pcie";
    s->n_gpus = 1;
    s->policies = 1u << WS_POLICY_WRITESCOPE;
    s->gen.rate = 0.05;
    s->gen.prompt = (ws_trace_len){WS_LEN_FIXED, 2048, 0};
    s->gen.output = (ws_trace_len){WS_LEN_FIXED, 16, 0};
    s->requests = 12;
    s->slo_tpot = 0.5;
    s->slo_ttft = 30;
    s->tol = 0.2;
    s->n_fit = 0;
}

static void add(ws_plan_space *sp, int k, const char *v)
{
    ws_err err = {0};
    cr_assert_eq(ws_plan_space_add(sp, k, v, &err), 0, "%s", err.msg);
}

/* The gate's memory is sim_run's: the same weights on the GPU and in host DRAM, and a host
 * too small for the CPU's experts is refused there and OOMs every request in the simulator. */
Test(plan_space, memory_is_the_simulators)
{
    ws_store *st;
    ws_err err = {0};
    cr_assert_eq(ws_store_open_embedded(&st, &err), 0, "%s", err.msg);
    ws_plan_spec s;
    small_spec(&s);
    s.host_limit = 20e9; /* bf16 experts (~57 GB) do not fit; q4_k_m (~17 GB) do */
    ws_plan_space sp = {0};
    add(&sp, WS_KNOB_W_CPU, "bf16,q4_k_m");
    add(&sp, WS_KNOB_N_CPU_MOE, "all");
    ws_space_report r;
    cr_assert_eq(ws_plan_space_run(st, &s, &sp, NULL, NULL, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.n_e, 2);
    int seen_host = 0, seen_ok = 0;
    for (size_t i = 0; i < r.n_e; i++) {
        const ws_space_entry *e = &r.e[i];
        const ws_plan_config *c = &r.configs[e->config];
        if (!strcmp(c->w_cpu->name, "bf16")) {
            cr_assert_eq(e->status, WS_SPACE_MEM_HOST, "%s", ws_space_status_name(e->status));
            seen_host = 1;
        } else {
            cr_assert_neq(e->status, WS_SPACE_MEM_HOST);
            seen_ok = 1;
        }
        /* the simulator on the same configuration reports the same weights */
        ws_model m;
        ws_hw hw;
        cr_assert_eq(ws_hw_load(st, s.model, s.gpus[0], s.host, WS_DT_BF16, &m, &hw, NULL, &err), 0,
                     "%s", err.msg);
        ws_deploy_cfg cc = s.cost;
        cc.w_cpu_experts = c->w_cpu;
        cc.n_cpu_moe = c->n_cpu_moe;
        sim_cfg cfg;
        sim_cfg_default(&cfg);
        cfg.host_limit = s.host_limit;
        cfg.policy = WS_POLICY_WRITESCOPE;
        sim_closed cl;
        sim_source src;
        sim_closed_source(&cl, 1, 1024, 2, &src);
        sim_results res;
        cr_assert_eq(sim_run(&m, &hw, &cc, &cfg, &src, &res, &err), 0, "%s", err.msg);
        cr_assert_float_eq(res.tot.gpu_weight_bytes, e->mem.gpu_weights, 1);
        cr_assert_float_eq(res.tot.host_weight_bytes, e->mem.host_weights, 1);
        cr_assert_eq(res.tot.no_host_room, e->status == WS_SPACE_MEM_HOST);
        sim_results_free(&res);
    }
    cr_assert(seen_host && seen_ok);
    ws_space_report_free(&r);
    ws_store_close(st);
}

/* Pruning keeps the best: the search's best load per group equals the best of a full search
 * of every configuration on its own (the same spec, one configuration each). */
Test(plan_space, pruning_keeps_the_best)
{
    ws_store *st;
    ws_err err = {0};
    cr_assert_eq(ws_store_open_embedded(&st, &err), 0, "%s", err.msg);
    ws_plan_spec s;
    small_spec(&s);
    ws_plan_space sp = {0};
    add(&sp, WS_KNOB_N_CPU_MOE, "none,all,24");
    add(&sp, WS_KNOB_CHUNK, "512,2048");
    add(&sp, WS_KNOB_W_CPU, "bf16,q4_k_m");
    ws_space_report r;
    cr_assert_eq(ws_plan_space_run(st, &s, &sp, NULL, NULL, &r, &err), 0, "%s", err.msg);
    /* none keeps one CPU format: 2 chunks + 2 x 2 x 2 */
    cr_assert_eq(r.n_configs, 10, "%zu", r.n_configs);
    double best = 0;
    for (size_t i = 0; i < r.n_e; i++)
        if (r.e[i].status == WS_SPACE_SEARCHED)
            best = fmax(best, r.e[i].best.max_load);
    /* every configuration searched on its own, no incumbent */
    double full = 0;
    long long full_sims = 0;
    for (size_t i = 0; i < r.n_configs; i++) {
        ws_plan_spec one = s;
        one.configs = &r.configs[i];
        one.n_configs = 1;
        ws_plan_report rep;
        ws_plan_config c = r.configs[i];
        c.gpu = 0;
        one.configs = &c;
        cr_assert_eq(ws_plan_run(st, &one, &rep, &err), 0, "%s", err.msg);
        full = fmax(full, rep.search[0].max_load);
        full_sims += (long long)rep.n_evals;
        ws_plan_report_free(&rep);
    }
    cr_assert_gt(full, 0);
    /* the same bracket within the tolerance */
    cr_assert_geq(best, full / (1 + s.tol) - 1e-12, "search %g, every configuration %g", best,
                  full);
    cr_assert(r.count[WS_SPACE_PRUNED] + r.count[WS_SPACE_BOUND_TTFT] +
                  r.count[WS_SPACE_BOUND_TPOT] + r.count[WS_SPACE_MEM_GPU] >
              0);
    cr_assert_lt(r.sims - r.alone_sims, full_sims, "%lld searched vs %lld", r.sims, full_sims);
    cr_assert_gt(r.n_frontier, 0);
    ws_space_report_free(&r);
    ws_store_close(st);
}

/* Nothing meets a 10 ms TTFT on 2K-token prompts: the report says TTFT binds and tries a
 * change past the space. */
Test(plan_space, none_names_the_binding_constraint)
{
    ws_store *st;
    ws_err err = {0};
    cr_assert_eq(ws_store_open_embedded(&st, &err), 0, "%s", err.msg);
    ws_plan_spec s;
    small_spec(&s);
    s.slo_ttft = 0.01;
    ws_plan_space sp = {0};
    add(&sp, WS_KNOB_N_CPU_MOE, "all");
    add(&sp, WS_KNOB_CHUNK, "2048");
    ws_space_report r;
    cr_assert_eq(ws_plan_space_run(st, &s, &sp, NULL, NULL, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.n_frontier, 0);
    cr_assert_eq(r.count[WS_SPACE_BOUND_TTFT], 1);
    cr_assert(strstr(r.binding, "TTFT"), "%s", r.binding);
    cr_assert(strstr(r.binding, "2048-token prompt"), "%s", r.binding);
    cr_assert_neq(r.change.what[0], 0);
    ws_space_report_free(&r);
    ws_store_close(st);
}

/* Requests that arrive at one instant stay together at any rate: a burst of eight 8K-token
 * prompts that each meet a TTFT alone but not together is a bound, and why-none says so. */
Test(plan_space, a_burst_that_misses_is_a_bound)
{
    char dir[64], path[128];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/burst.jsonl", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < 8; i++)
        fprintf(f, "{\"timestamp\": 0, \"input_length\": 8192, \"output_length\": 8}\n");
    for (int i = 0; i < 12; i++)
        fprintf(f, "{\"timestamp\": %d, \"input_length\": 1024, \"output_length\": 8}\n",
                600000 * (i + 1));
    fclose(f);
    ws_store *st;
    ws_err err = {0};
    cr_assert_eq(ws_store_open_embedded(&st, &err), 0, "%s", err.msg);
    ws_plan_spec s;
    small_spec(&s);
    s.trace = path;
    s.requests = 0;
    ws_plan_space sp = {0};
    add(&sp, WS_KNOB_N_CPU_MOE, "all");
    /* one 8K prompt alone, then the burst: find a TTFT between the two */
    s.slo_ttft = 1e6;
    ws_space_report r;
    cr_assert_eq(ws_plan_space_run(st, &s, &sp, NULL, NULL, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.burst_requests, 8);
    cr_assert_eq(r.burst_tokens, 8 * 8192);
    const double one = r.e[0].alone.ttft_q;
    cr_assert_gt(r.e[0].burst.ttft_q, 2 * one, "burst p TTFT %g, alone %g", r.e[0].burst.ttft_q,
                 one);
    ws_space_report_free(&r);
    s.slo_ttft = 1.5 * one;
    cr_assert_eq(ws_plan_space_run(st, &s, &sp, NULL, NULL, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.count[WS_SPACE_BOUND_BURST], 1, "%s", ws_space_status_name(r.e[0].status));
    cr_assert_eq(r.n_frontier, 0);
    cr_assert(strstr(r.binding, "8 requests that arrive at one instant"), "%s", r.binding);
    ws_space_report_free(&r);
    ws_store_close(st);
}

/* n-cpu-moe fit: the fewest CPU MoE layers for the rest to fit the GPU. On an RTX 5070
 * (12 GB) Qwen3-30B-A3B in q4_k_m fits with that many layers' experts on the CPU, not with
 * one fewer. */
Test(plan_space, fit_is_the_fewest_cpu_layers_that_fit)
{
    ws_store *st;
    ws_err err = {0};
    cr_assert_eq(ws_store_open_embedded(&st, &err), 0, "%s", err.msg);
    ws_plan_spec s;
    small_spec(&s);
    s.gpus[0] = "rtx-5070";
    s.host = "ryzen-9-7950x";
    s.policies = 1u << WS_POLICY_KTRANS;
    ws_plan_space sp = {0};
    add(&sp, WS_KNOB_N_CPU_MOE, "fit");
    add(&sp, WS_KNOB_W_GPU, "q4_k_m");
    add(&sp, WS_KNOB_W_CPU, "q4_k_m");
    ws_space_report r;
    cr_assert_eq(ws_plan_space_run(st, &s, &sp, NULL, NULL, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.n_e, 1);
    const int n = r.configs[0].n_cpu_moe;
    cr_assert(n > 1 && n < 48, "fit %d", n);
    cr_assert_neq(r.e[0].status, WS_SPACE_MEM_GPU);
    ws_space_report_free(&r);
    char fewer[16];
    snprintf(fewer, sizeof fewer, "%d", n - 1);
    ws_plan_space sp2 = {0};
    add(&sp2, WS_KNOB_N_CPU_MOE, fewer);
    add(&sp2, WS_KNOB_W_GPU, "q4_k_m");
    add(&sp2, WS_KNOB_W_CPU, "q4_k_m");
    cr_assert_eq(ws_plan_space_run(st, &s, &sp2, NULL, NULL, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.e[0].status, WS_SPACE_MEM_GPU, "%d layers: %s", n - 1,
                 ws_space_status_name(r.e[0].status));
    ws_space_report_free(&r);
    ws_store_close(st);
}
