/* test_simdb: simulation results in the database (store/simdb.c): a run with its requests
 * and steps round-trips (NaN as NULL, outcomes, a 64-bit seed); a run is stored whole or
 * not at all (fault injection part-way, in the one-call and the streaming path); a
 * trace-sized run (12,000 requests, 100,000 steps) stores in well under a second; bad rows
 * are refused; a schema-3 database migrates on the next write and keeps its data; the
 * export knows the new tables. */
#include <criterion/criterion.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "embedded.h"
#include "helpers.h"
#include "simdb.h"
#include "store.h"
#include "ws_util.h"

static ws_store *fresh_store(char *path, size_t cap)
{
    char dir[64];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, cap, "%s/ws.db", dir);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    return s;
}

static void sample_run(ws_simdb_run *r, const char *policy)
{
    memset(r, 0, sizeof *r);
    snprintf(r->model, sizeof r->model, "qwen3-30b-a3b");
    snprintf(r->gpu_profile, sizeof r->gpu_profile, "a100-40gb-pcie");
    snprintf(r->host_profile, sizeof r->host_profile, "xeon-gold-5318y");
    snprintf(r->policy, sizeof r->policy, "%s", policy);
    snprintf(r->workload, sizeof r->workload, "closed");
    r->batch = 4;
    r->prompt_tokens = 8192;
    r->output_tokens = 256;
    snprintf(r->detail, sizeof r->detail, "layer");
    r->seed = 0xfedcba9876543210ull; /* above 2^63: stored as a signed 64-bit integer */
    snprintf(r->params, sizeof r->params, "{\"gpu_kv_budget\": 2e9, \"page\": 256}");
    r->wall_s = 0.125;
    r->events = 123456;
    r->sim_s = 42.5;
    r->requests = 4;
    r->completed = 3;
    r->oom = 1;
    r->tokens_out = 768;
    r->tokens_per_s = 768 / 42.5;
    r->ttft_p50 = 1.5, r->ttft_p90 = 2.5, r->ttft_p99 = 2.9;
    r->tpot_p50 = 0.05, r->tpot_p90 = 0.07, r->tpot_p99 = 0.08;
    r->slo_ttft = 2.0;
    r->slo_tpot = NAN; /* no TPOT objective */
    r->slo_met = 2;
    r->goodput = 2 / 42.5;
}

static ws_simdb_request *sample_requests(size_t n)
{
    ws_simdb_request *v = calloc(n, sizeof *v);
    for (size_t i = 0; i < n; i++) {
        v[i] = (ws_simdb_request){.idx = (long long)i, .arrival_s = 0.25 * (double)i,
                                  .prompt = 100 + (long long)i, .output = 16,
                                  .ttft_s = 0.1 + 1e-3 * (double)i, .tpot_s = 0.02,
                                  .e2e_s = 0.4 + 1e-3 * (double)i, .outcome = WS_SIMDB_DONE};
        if (i % 7 == 3) { /* never ran */
            v[i].outcome = WS_SIMDB_OOM;
            v[i].ttft_s = v[i].tpot_s = v[i].e2e_s = NAN;
        }
    }
    return v;
}

static ws_simdb_step *sample_steps(size_t n)
{
    ws_simdb_step *v = calloc(n, sizeof *v);
    for (size_t i = 0; i < n; i++) {
        double t = 0.01 * (double)i;
        v[i] = (ws_simdb_step){.idx = (long long)i, .t_start = t, .t_end = t + 0.009,
                               .batch = 4, .tokens = 4, .context = 4 * (8192 + (long long)i),
                               .r_star = 0.3 + 1e-6 * (double)i, .r_real = 0.28,
                               .busy_gpu = 0.008, .busy_h2d = 0.004, .busy_d2h = 0.0005,
                               .busy_cpu = 0.007};
        if (i == 1)
            v[i].r_star = NAN; /* a step with no r* */
        if (i == 2)
            snprintf(v[i].busy_other, sizeof v[i].busy_other, "{\"membw\": 0.006}");
    }
    return v;
}

static int count(ws_store *s, const char *sql) { return th_count_file(ws_store_path(s), sql); }

static int same_num(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

Test(simdb, round_trip)
{
    char path[256];
    ws_store *s = fresh_store(path, sizeof path);
    ws_err err = {0};
    ws_simdb_run run;
    sample_run(&run, "writescope");
    ws_simdb_request *req = sample_requests(10);
    ws_simdb_step *st = sample_steps(20);
    cr_assert_eq(ws_simdb_store_run(s, &run, req, 10, st, 20, &err), 0, "%s", err.msg);
    cr_assert_gt(run.id, 0);
    cr_assert_str_eq(run.label, "modeled");
    cr_assert_str_eq(run.tool_version, WS_VERSION);
    cr_assert_eq(strlen(run.started_at), 20, "%s", run.started_at);

    ws_simdb_run back;
    cr_assert_eq(ws_simdb_get_run(s, 0, &back, &err), 0, "%s", err.msg);
    cr_assert_eq(back.id, run.id);
    cr_assert_str_eq(back.policy, "writescope");
    cr_assert_str_eq(back.gpu_profile, "a100-40gb-pcie");
    cr_assert_str_eq(back.host_profile, "xeon-gold-5318y");
    cr_assert_str_eq(back.workload, "closed");
    cr_assert_str_eq(back.detail, "layer");
    cr_assert_str_eq(back.label, "modeled");
    cr_assert_str_eq(back.params, run.params);
    cr_assert_eq(back.seed, 0xfedcba9876543210ull);
    cr_assert_eq(back.prompt_tokens, 8192);
    cr_assert_eq(back.events, 123456);
    cr_assert_eq(back.oom, 1);
    cr_assert_eq(back.slo_met, 2);
    cr_assert(same_num(back.ttft_p99, 2.9));
    cr_assert(same_num(back.tokens_per_s, run.tokens_per_s));
    cr_assert(isnan(back.slo_tpot), "no objective stays none");
    cr_assert_eq(count(s, "SELECT count(*) FROM sim_runs WHERE slo_tpot IS NULL"), 1);

    ws_simdb_request *rq;
    size_t n;
    cr_assert_eq(ws_simdb_get_requests(s, run.id, &rq, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 10);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(rq[i].idx, req[i].idx);
        cr_assert_eq(rq[i].outcome, req[i].outcome, "request %zu", i);
        cr_assert(same_num(rq[i].arrival_s, req[i].arrival_s));
        cr_assert(same_num(rq[i].ttft_s, req[i].ttft_s), "request %zu", i);
        cr_assert(same_num(rq[i].tpot_s, req[i].tpot_s));
        cr_assert(same_num(rq[i].e2e_s, req[i].e2e_s));
        cr_assert_eq(rq[i].prompt, req[i].prompt);
    }
    free(rq);
    cr_assert_eq(count(s, "SELECT count(*) FROM sim_requests WHERE outcome = 'oom' AND ttft_s "
                          "IS NULL"),
                 1);

    ws_simdb_step *sb;
    cr_assert_eq(ws_simdb_get_steps(s, run.id, &sb, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 20);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(sb[i].idx, st[i].idx);
        cr_assert(same_num(sb[i].r_star, st[i].r_star), "step %zu", i);
        cr_assert(same_num(sb[i].t_end, st[i].t_end));
        cr_assert(same_num(sb[i].busy_h2d, st[i].busy_h2d));
        cr_assert_eq(sb[i].context, st[i].context);
        cr_assert_str_eq(sb[i].busy_other, st[i].busy_other[0] ? st[i].busy_other : "{}");
    }
    free(sb);

    /* A second run; the list has both, oldest first; the newest is run 0. */
    ws_simdb_run run2;
    sample_run(&run2, "stream");
    cr_assert_eq(ws_simdb_store_run(s, &run2, req, 3, NULL, 0, &err), 0, "%s", err.msg);
    ws_simdb_run *list;
    cr_assert_eq(ws_simdb_list_runs(s, &list, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(list[0].policy, "writescope");
    cr_assert_str_eq(list[1].policy, "stream");
    cr_assert_eq(list[1].id, run2.id);
    free(list);
    cr_assert_eq(ws_simdb_get_run(s, 0, &back, &err), 0);
    cr_assert_eq(back.id, run2.id);
    cr_assert_eq(ws_simdb_get_run(s, 999, &back, &err), WS_ENOTFOUND);
    cr_assert_neq(strstr(err.msg, "no simulation run 999"), NULL, "%s", err.msg);
    cr_assert_eq(ws_simdb_get_steps(s, run2.id, &sb, &n, &err), 0);
    cr_assert_eq(n, 0);
    cr_assert_null(sb);
    free(req);
    free(st);
    ws_store_close(s);
}

Test(simdb, empty_database_has_no_run)
{
    char path[256];
    ws_store *s = fresh_store(path, sizeof path);
    ws_err err = {0};
    ws_simdb_run r;
    cr_assert_eq(ws_simdb_get_run(s, 0, &r, &err), WS_ENOTFOUND);
    cr_assert_neq(strstr(err.msg, "no simulation run yet"), NULL, "%s", err.msg);
    ws_simdb_run *list;
    size_t n = 5;
    cr_assert_eq(ws_simdb_list_runs(s, &list, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 0);
    ws_store_close(s);
}

/* A failure part-way through a run's rows leaves the database as it was. */
Test(simdb, run_is_stored_whole_or_not_at_all)
{
    char path[256];
    ws_store *s = fresh_store(path, sizeof path);
    ws_err err = {0};
    ws_simdb_run run;
    sample_run(&run, "writescope");
    ws_simdb_request *req = sample_requests(1000);
    ws_simdb_step *st = sample_steps(3000);
    cr_assert_eq(ws_simdb_store_run(s, &run, req, 50, st, 60, &err), 0, "%s", err.msg);

    /* One call: the fault comes among the steps. */
    ws_simdb_run bad;
    sample_run(&bad, "ktrans");
    ws_simdb_fault_after_rows = 2500;
    int rc = ws_simdb_store_run(s, &bad, req, 1000, st, 3000, &err);
    ws_simdb_fault_after_rows = -1;
    cr_assert_eq(rc, WS_EDB);
    cr_assert_neq(strstr(err.msg, "injected fault after 2500 rows"), NULL, "%s", err.msg);
    cr_assert_eq(bad.id, 0, "the id of a rolled-back row is not handed out");
    cr_assert(!ws_store_in_transaction(s));
    cr_assert_eq(count(s, "SELECT count(*) FROM sim_runs"), 1);
    cr_assert_eq(count(s, "SELECT count(*) FROM sim_requests"), 50);
    cr_assert_eq(count(s, "SELECT count(*) FROM sim_steps"), 60);

    /* Streaming inside the caller's transaction: rolled back by the caller. */
    cr_assert_eq(ws_store_begin(s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_simdb_put_run(s, &bad, &err), 0, "%s", err.msg);
    ws_simdb_writer *w;
    cr_assert_eq(ws_simdb_writer_open(s, bad.id, &w, &err), 0, "%s", err.msg);
    ws_simdb_fault_after_rows = 700;
    rc = 0;
    for (size_t i = 0; !rc && i < 1000; i++)
        rc = ws_simdb_add_request(w, &req[i], &err);
    ws_simdb_fault_after_rows = -1;
    cr_assert_eq(rc, WS_EDB);
    cr_assert_eq(ws_simdb_writer_rows(w), 700);
    ws_simdb_writer_close(w);
    ws_store_rollback(s);
    cr_assert_eq(count(s, "SELECT count(*) FROM sim_runs"), 1);
    cr_assert_eq(count(s, "SELECT count(*) FROM sim_requests"), 50);

    /* The same stream, finished and committed: totals written last. */
    cr_assert_eq(ws_store_begin(s, &err), 0, "%s", err.msg);
    ws_simdb_run live;
    sample_run(&live, "migrate");
    live.requests = live.completed = 0;
    cr_assert_eq(ws_simdb_put_run(s, &live, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_simdb_writer_open(s, live.id, &w, &err), 0, "%s", err.msg);
    for (size_t i = 0; i < 100; i++)
        cr_assert_eq(ws_simdb_add_request(w, &req[i], &err), 0, "%s", err.msg);
    for (size_t i = 0; i < 100; i++)
        cr_assert_eq(ws_simdb_add_step(w, &st[i], &err), 0, "%s", err.msg);
    ws_simdb_writer_close(w);
    live.requests = 100;
    live.completed = 85;
    cr_assert_eq(ws_simdb_finish_run(s, &live, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_store_commit(s, &err), 0, "%s", err.msg);
    cr_assert_eq(count(s, "SELECT count(*) FROM sim_runs WHERE policy = 'migrate' AND requests = "
                          "100 AND completed = 85"),
                 1);
    cr_assert_eq(count(s, "SELECT count(*) FROM sim_steps"), 160);
    free(req);
    free(st);
    ws_store_close(s);
}

/* A trace-sized run: the Mooncake conversation trace's 12,031 requests and ~100,000 steps. */
Test(simdb, bulk_run_round_trip)
{
    char path[256];
    ws_store *s = fresh_store(path, sizeof path);
    ws_err err = {0};
    ws_simdb_run run;
    sample_run(&run, "writescope");
    const size_t nr = 12031, ns = 100000;
    ws_simdb_request *req = sample_requests(nr);
    ws_simdb_step *st = sample_steps(ns);
    double t0 = ws_now_s();
    cr_assert_eq(ws_simdb_store_run(s, &run, req, nr, st, ns, &err), 0, "%s", err.msg);
    double dt = ws_now_s() - t0;
    cr_log_info("simdb: %zu requests + %zu steps stored in %.3f s", nr, ns, dt);
    cr_assert_eq(count(s, "SELECT count(*) FROM sim_steps"), (int)ns);
    cr_assert_eq(count(s, "SELECT count(*) FROM sim_requests"), (int)nr);
    ws_simdb_step *back;
    size_t n;
    cr_assert_eq(ws_simdb_get_steps(s, run.id, &back, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, ns);
    cr_assert_eq(back[ns - 1].idx, (long long)ns - 1);
    free(back);
    free(req);
    free(st);
    ws_store_close(s);
}

Test(simdb, bad_rows_are_refused)
{
    char path[256];
    ws_store *s = fresh_store(path, sizeof path);
    ws_err err = {0};
    ws_simdb_run run;
    sample_run(&run, "writescope");
    snprintf(run.workload, sizeof run.workload, "bogus");
    cr_assert_eq(ws_simdb_store_run(s, &run, NULL, 0, NULL, 0, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "workload 'bogus'"), NULL, "%s", err.msg);
    sample_run(&run, "writescope");
    snprintf(run.detail, sizeof run.detail, "op");
    cr_assert_eq(ws_simdb_store_run(s, &run, NULL, 0, NULL, 0, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "detail 'op'"), NULL, "%s", err.msg);
    sample_run(&run, "writescope");
    snprintf(run.params, sizeof run.params, "[1, 2");
    cr_assert_eq(ws_simdb_store_run(s, &run, NULL, 0, NULL, 0, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "params is not a JSON object"), NULL, "%s", err.msg);
    /* An unknown outcome, and a request index given twice: the whole run is refused. */
    sample_run(&run, "writescope");
    ws_simdb_request *req = sample_requests(4);
    req[2].outcome = 9;
    cr_assert_eq(ws_simdb_store_run(s, &run, req, 4, NULL, 0, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "unknown outcome 9"), NULL, "%s", err.msg);
    req[2].outcome = WS_SIMDB_DONE;
    req[3].idx = 1;
    cr_assert_eq(ws_simdb_store_run(s, &run, req, 4, NULL, 0, &err), WS_EDB);
    cr_assert_neq(strstr(err.msg, "cannot store simulation request"), NULL, "%s", err.msg);
    cr_assert_eq(count(s, "SELECT count(*) FROM sim_runs"), 0);
    cr_assert_eq(count(s, "SELECT count(*) FROM sim_requests"), 0);
    free(req);
    ws_store_close(s);
}

/* A schema-3 database (as the previous writescope left it, with a user profile): read-only
 * opens refuse it untouched; the next write migrates it, keeping its data. */
Test(simdb, schema_3_database_migrates_on_write)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/v3.db", dir);
    const char *migs[] = {"store/schema/001_initial.sql", "store/schema/002_fit_bounds.sql",
                          "store/schema/003_profile_devices.sql"};
    for (int i = 0; i < 3; i++) {
        const ws_embedded_file *f = ws_embedded_find(migs[i]);
        cr_assert_not_null(f, "%s", migs[i]);
        th_exec_sql(path, f->data);
    }
    th_exec_sql(path, "INSERT INTO profiles(name, kind, description, source, created_at) VALUES "
                      "('mine', 'gpu', 'kept', 'measured', 'then'); PRAGMA user_version = 3;");
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open_readonly(path, &s, &err), WS_EDB);
    cr_assert_neq(strstr(err.msg, "schema version 3 is older"), NULL, "%s", err.msg);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM sqlite_master WHERE name = 'sim_runs'"),
                 0);
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    ws_store_close(s);
    cr_assert_eq(th_count_file(path, "PRAGMA user_version"), WS_SCHEMA_VERSION);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                                     "name IN ('sim_runs', 'sim_requests', 'sim_steps')"),
                 3);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM profiles WHERE name = 'mine'"), 1);
    /* Now current: read-only opens work, and a run can be stored. */
    cr_assert_eq(ws_store_open_readonly(path, &s, &err), 0, "%s", err.msg);
    ws_store_close(s);
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    ws_simdb_run run;
    sample_run(&run, "gpu-only");
    cr_assert_eq(ws_simdb_store_run(s, &run, NULL, 0, NULL, 0, &err), 0, "%s", err.msg);
    ws_store_close(s);
}

Test(simdb, export_includes_the_tables)
{
    char path[256];
    ws_store *s = fresh_store(path, sizeof path);
    ws_err err = {0};
    ws_simdb_run run;
    sample_run(&run, "writescope");
    ws_simdb_request *req = sample_requests(5);
    ws_simdb_step *st = sample_steps(7);
    cr_assert_eq(ws_simdb_store_run(s, &run, req, 5, st, 7, &err), 0, "%s", err.msg);
    const char *want[] = {"sim_grids", "sim_runs", "sim_requests", "sim_steps"};
    for (int i = 0; i < 4; i++) {
        int found = 0;
        for (int j = 0; ws_store_tables[j]; j++)
            found |= !strcmp(ws_store_tables[j], want[i]);
        cr_assert(found, "%s is not in ws_store_tables", want[i]);
    }
    json_t *all = ws_store_export(s, &err);
    cr_assert_not_null(all, "%s", err.msg);
    cr_assert_eq(json_array_size(json_object_get(all, "sim_runs")), 1);
    cr_assert_eq(json_array_size(json_object_get(all, "sim_requests")), 5);
    cr_assert_eq(json_array_size(json_object_get(all, "sim_steps")), 7);
    json_t *r0 = json_array_get(json_object_get(all, "sim_runs"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(r0, "label")), "modeled");
    cr_assert(json_is_null(json_object_get(r0, "slo_tpot")));
    json_decref(all);

    char csv[300];
    snprintf(csv, sizeof csv, "%s.steps.csv", path);
    FILE *f = fopen(csv, "w");
    cr_assert_eq(ws_store_export_csv(s, "sim_steps", f, &err), 0, "%s", err.msg);
    fclose(f);
    char *text = th_slurp(csv, NULL);
    cr_assert_eq(strncmp(text, "run_id,idx,t_start,t_end,batch", 30), 0, "%s", text);
    cr_assert_eq(th_lines(text), 8);
    free(text);
    cr_assert_eq(ws_store_export_csv(s, "sim_nothing", stdout, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "sim_steps"), NULL, "the message lists the tables: %s",
                  err.msg);
    free(req);
    free(st);
    ws_store_close(s);
}

/* A grid and its runs round-trip (grid_id set on each run, NULL on a plain run); a grid whose
 * settings are not JSON leaves no row, neither grid nor run; schema 005 gains the table. */
Test(simdb, grid_round_trip_whole_or_not_at_all)
{
    char path[256];
    ws_store *s = fresh_store(path, sizeof path);
    ws_err err = {0};
    ws_simdb_run plain;
    sample_run(&plain, "stream");
    cr_assert_eq(ws_simdb_store_run(s, &plain, NULL, 0, NULL, 0, &err), 0, "%s", err.msg);
    ws_simdb_run runs[3];
    const char *pol[] = {"writescope", "static", "gpu-only"};
    for (int i = 0; i < 3; i++)
        sample_run(&runs[i], pol[i]);
    ws_simdb_grid g = {.ranks = 4};
    snprintf(g.params, sizeof g.params, "{\"host\":\"xeon-gold-5318y\",\"models\":[\"a\"]}");
    cr_assert_eq(ws_simdb_store_grid(s, &g, runs, 3, &err), 0, "%s", err.msg);
    cr_assert_gt(g.id, 0);
    cr_assert_neq(g.started_at[0], '\0');
    ws_simdb_grid back;
    cr_assert_eq(ws_simdb_get_grid(s, 0, &back, &err), 0, "%s", err.msg);
    cr_assert_eq(back.id, g.id);
    cr_assert_eq(back.ranks, 4);
    cr_assert_str_eq(back.params, g.params);
    cr_assert_str_eq(back.tool_version, WS_VERSION);
    ws_simdb_run *got;
    size_t n;
    cr_assert_eq(ws_simdb_get_grid_runs(s, g.id, &got, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 3);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(got[i].grid_id, g.id);
        cr_assert_eq(got[i].id, runs[i].id);
        cr_assert_str_eq(got[i].policy, pol[i]);
        cr_assert_str_eq(got[i].params, runs[i].params);
        cr_assert_eq(got[i].events, 123456);
    }
    free(got);
    ws_simdb_run one;
    cr_assert_eq(ws_simdb_get_run(s, plain.id, &one, &err), 0, "%s", err.msg);
    cr_assert_eq(one.grid_id, 0);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM sim_runs WHERE grid_id IS NULL"), 1);

    ws_simdb_grid bad = {.ranks = 1};
    snprintf(bad.params, sizeof bad.params, "[not json");
    for (int i = 0; i < 3; i++)
        sample_run(&runs[i], pol[i]);
    cr_assert_eq(ws_simdb_store_grid(s, &bad, runs, 3, &err), WS_EINVAL);
    cr_assert_eq(bad.id, 0);
    /* a bad run part-way rolls back the grid row and the runs before it */
    snprintf(bad.params, sizeof bad.params, "{}");
    snprintf(runs[2].workload, sizeof runs[2].workload, "bogus");
    cr_assert_eq(ws_simdb_store_grid(s, &bad, runs, 3, &err), WS_EINVAL);
    cr_assert_eq(runs[0].id, 0);
    ws_store_close(s);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM sim_grids"), 1);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM sim_runs"), 4);
    cr_assert_eq(ws_store_open_readonly(path, &s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_simdb_get_grid(s, 99, &back, &err), WS_ENOTFOUND);
    ws_store_close(s);
}
