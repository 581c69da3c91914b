/* test_sim_record: results as database rows and the streaming sink (sim/record.c): the
 * mapping (no time -> NULL, outcomes, a step's tokens, end and context, SLO 0 -> NULL,
 * extra totals in params); a run streamed into the database and the CSV files holds one
 * row per request and per step and the totals the loop computed; a write that fails part
 * way through a run leaves no part of it in the database, and the run before it intact. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "hw.h"
#include "record.h"
#include "serve.h"
#include "store.h"
#include "wformat.h"

Test(sim_record, mapping)
{
    sim_req_result oom = {.id = 4, .arrival_s = 1.5, .first_s = -1, .end_s = -1, .ttft = -1,
                          .tpot = -1, .e2e = -1, .prompt = 10, .output = 3,
                          .outcome = SIM_OUT_OOM};
    ws_simdb_request rq;
    sim_record_request(&oom, &rq);
    cr_assert_eq(rq.idx, 4);
    cr_assert_eq(rq.outcome, WS_SIMDB_OOM);
    cr_assert(isnan(rq.ttft_s) && isnan(rq.tpot_s) && isnan(rq.e2e_s));
    sim_step_rec st = {.idx = 9, .t_start = 2, .t_end = 2.25, .batch = 3, .decode_tokens = 3,
                       .prefill_tokens = 0, .r_star = 0.4, .r_real = 0.3, .context = 1500.4,
                       .busy = {0.2, 0.1, 0.05, 0.15}};
    ws_simdb_step row;
    sim_record_step(&st, &row);
    cr_assert_eq(row.t_end, 2.25);
    cr_assert_eq(row.tokens, 3);
    cr_assert_eq(row.context, 1500);
    cr_assert_eq(row.r_star, 0.4);
    cr_assert_eq(row.busy_h2d, 0.1);
    cr_assert_eq(row.busy_cpu, 0.15);
    st.decode_tokens = 0, st.prefill_tokens = 2048;
    sim_record_step(&st, &row);
    cr_assert_eq(row.tokens, 2048);
    cr_assert(isnan(row.r_star), "no target at a prefill step");

    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.slo_tpot = 0.05;
    sim_record_meta meta = {.model = "m", .gpu = "g", .host = "h", .workload = "closed",
                            .prompt = 100, .output = 5};
    sim_results res = {0};
    res.tot.requests = 10, res.tot.served = 8, res.tot.oom = 2, res.tot.slo_met = 6;
    res.tot.decode_tps = 123.5, res.tot.steps = 77, res.tot.pct_exact = 1;
    ws_simdb_run run;
    ws_err err = {0};
    cr_assert_eq(sim_record_run(&cfg, &meta, &res, &run, &err), 0, "%s", err.msg);
    cr_assert(isnan(run.slo_ttft));
    cr_assert_eq(run.slo_tpot, 0.05);
    cr_assert_eq(run.completed, 8);
    cr_assert_eq(run.slo_met, 6);
    cr_assert_str_eq(run.policy, "writescope");
    json_error_t je;
    json_t *p = json_loads(run.params, 0, &je);
    cr_assert(json_is_object(p), "%s: %s", run.params, je.text);
    cr_assert_eq(json_real_value(json_object_get(p, "decode_tokens_per_s")), 123.5);
    cr_assert_eq(json_integer_value(json_object_get(p, "steps")), 77);
    cr_assert_str_eq(json_string_value(json_object_get(p, "percentiles")), "exact");
    cr_assert_null(json_object_get(p, "n_gpu_layers"), "no cost settings given");
    json_decref(p);
    /* with the cost settings: placement, threads and formats are in the row */
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cc.n_gpu_layers = 12, cc.cpu_threads = 8, cc.n_cpu_moe = 3;
    cc.w_kv = ws_wformat_find("q8_0");
    cc.w_cpu_experts = ws_wformat_find("q4_k_m");
    meta.cc = &cc;
    cr_assert_eq(sim_record_run(&cfg, &meta, &res, &run, &err), 0, "%s", err.msg);
    p = json_loads(run.params, 0, &je);
    cr_assert(json_is_object(p), "%s: %s", run.params, je.text);
    cr_assert_eq(json_integer_value(json_object_get(p, "n_gpu_layers")), 12);
    cr_assert_eq(json_integer_value(json_object_get(p, "cpu_threads")), 8);
    cr_assert_eq(json_integer_value(json_object_get(p, "n_cpu_moe")), 3);
    cr_assert_str_eq(json_string_value(json_object_get(p, "kv_dtype")), "q8_0");
    cr_assert_str_eq(json_string_value(json_object_get(p, "cpu_expert_weights")), "q4_k_m");
    cr_assert_str_eq(json_string_value(json_object_get(p, "weights")), "model");
    json_decref(p);
}

static void load(ws_model *m, ws_hw *hw)
{
    ws_err err = {0};
    ws_store *s;
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_hw_load(s, "qwen3-30b-a3b", "a100-40gb-pcie", "xeon-gold-5318y", WS_DT_BF16,
                            m, hw, NULL, &err),
                 0, "%s", err.msg);
    ws_store_close(s);
}

/* One closed-batch run through the sink; returns sim_run's / the sink's code. */
static int run_one(ws_store *db, sim_sink *k, ws_policy_kind pol, sim_results *r, ws_err *err)
{
    ws_model m;
    ws_hw hw;
    load(&m, &hw);
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.policy = pol;
    cfg.batch = 4;
    cfg.layers = 2;
    cfg.keep_requests = cfg.keep_steps = 0;
    sim_record_meta meta = {.model = m.name, .gpu = hw.gpu, .host = hw.host,
                            .workload = "closed", .prompt = 700, .output = 40};
    (void)db;
    int rc = sim_sink_begin(k, &cfg, &meta, err);
    if (rc)
        return rc;
    sim_closed c;
    sim_source src;
    sim_closed_source(&c, 6, 700, 40, &src);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    rc = sim_run(&m, &hw, &cc, &cfg, &src, r, err);
    if (rc) {
        sim_sink_fail(k);
        return rc;
    }
    cr_assert_eq(r->n_req, 0, "nothing kept in memory");
    cr_assert_eq(r->n_step, 0);
    return sim_sink_end(k, r, err);
}

Test(sim_record, streamed_run_whole_or_not_at_all)
{
    char dir[64], path[256], csv[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ws.db", dir);
    snprintf(csv, sizeof csv, "%s/csv", dir);
    ws_err err = {0};
    ws_store *s;
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    sim_sink *k;
    cr_assert_eq(sim_sink_open(s, csv, NULL, NULL, &k, &err), 0, "%s", err.msg);
    sim_results r;
    cr_assert_eq(run_one(s, k, WS_POLICY_WRITESCOPE, &r, &err), 0, "%s", err.msg);
    const long long id = sim_sink_run_id(k);
    cr_assert_gt(id, 0);
    const unsigned long long steps = r.tot.steps;
    cr_assert_eq(r.tot.requests, 6);

    /* The second run fails part way through its rows. */
    ws_simdb_fault_after_rows = 20;
    sim_results r2;
    int rc = run_one(s, k, WS_POLICY_STATIC, &r2, &err);
    ws_simdb_fault_after_rows = -1;
    cr_assert_eq(rc, WS_EDB, "%d %s", rc, err.msg);
    cr_assert(!ws_store_in_transaction(s));
    sim_sink_abort(k);
    ws_store_close(s);

    char q[128];
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM sim_runs"), 1, "no partial run");
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM sim_requests"), 6);
    snprintf(q, sizeof q, "SELECT count(*) FROM sim_steps WHERE run_id = %lld", id);
    cr_assert_eq(th_count_file(path, q), (int)steps);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM sim_runs WHERE label = 'modeled' AND "
                                     "requests = 6 AND completed = 6 AND policy = 'writescope' "
                                     "AND gpu_profile = 'a100-40gb-pcie' AND host_profile = "
                                     "'xeon-gold-5318y' AND ttft_p50 > 0"),
                 1);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM sim_steps WHERE context <= 0"), 0);
    cr_assert_eq(th_dir_entries(csv), 0, "aborted: the CSV files are not written");
}

Test(sim_record, csv_rows)
{
    char dir[64], csv[256], f[512];
    th_tmpdir(dir, sizeof dir);
    snprintf(csv, sizeof csv, "%s/out", dir);
    ws_err err = {0};
    sim_sink *k;
    cr_assert_eq(sim_sink_open(NULL, csv, NULL, NULL, &k, &err), 0, "%s", err.msg);
    sim_results r1, r2;
    cr_assert_eq(run_one(NULL, k, WS_POLICY_WRITESCOPE, &r1, &err), 0, "%s", err.msg);
    cr_assert_eq(run_one(NULL, k, WS_POLICY_KTRANS, &r2, &err), 0, "%s", err.msg);
    cr_assert_eq(sim_sink_close(k, &err), 0, "%s", err.msg);
    size_t len;
    snprintf(f, sizeof f, "%s/requests.csv", csv);
    char *t = th_slurp(f, &len);
    cr_assert_eq(th_lines(t), 1 + 12);
    free(t);
    snprintf(f, sizeof f, "%s/steps.csv", csv);
    t = th_slurp(f, &len);
    cr_assert_eq(th_lines(t), 1 + (int)(r1.tot.steps + r2.tot.steps));
    free(t);
    snprintf(f, sizeof f, "%s/summary.csv", csv);
    t = th_slurp(f, &len);
    cr_assert_eq(th_lines(t), 3);
    cr_assert_neq(strstr(t, ",modeled,ktrans,qwen3-30b-a3b,a100-40gb-pcie,xeon-gold-5318y"), NULL,
                  "%s", t);
    free(t);
}
