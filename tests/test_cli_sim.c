/* test_cli_sim: `writescope sim` end to end: a small run prints every policy labelled
 * modeled with its profiles, --json parses and carries every request; unknown model,
 * profile and policy names are one-line errors (exit 1), bad options usage errors (exit 2). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "calib.h"
#include "helpers.h"
#include "store.h"

static char g_env_db[128];
static const char *g_env[] = {g_env_db, NULL};

static void fresh_db(void)
{
    char dir[64];
    th_tmpdir(dir, sizeof dir);
    snprintf(g_env_db, sizeof g_env_db, "WRITESCOPE_DB=%s/ws.db", dir);
}

TestSuite(cli_sim, .init = fresh_db);

#define BASE                                                                                       \
    "sim", "--model", "qwen3-30b-a3b", "--gpu", "a100-40gb-pcie", "--host", "xeon-gold-5318y"

Test(cli_sim, small_run_every_policy)
{
    th_run r = th_writescope((const char *[]){BASE, "--batch", "2", "--prompt", "512", "--output",
                                              "8", "--layers", "3", NULL},
                             g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, "MODELED on gpu a100-40gb-pcie + host xeon-gold-5318y"), NULL, "%s",
                  r.out);
    const char *pol[] = {"writescope", "static", "stream", "cpu-attn",
                         "gpu-only",   "ktrans", "migrate"};
    for (int i = 0; i < 7; i++)
        cr_assert_neq(strstr(r.out, pol[i]), NULL, "%s missing: %s", pol[i], r.out);
    th_run_free(&r);
}

Test(cli_sim, json_one_policy)
{
    json_t *v = th_writescope_json((const char *[]){BASE, "--batch", "3", "--prompt", "300",
                                                    "--output", "5", "--layers", "2", "--policy",
                                                    "static", "--r", "0.25", "--json", NULL},
                                   g_env);
    cr_assert_str_eq(json_string_value(json_object_get(v, "source")), "modeled");
    json_t *runs = json_object_get(v, "runs");
    cr_assert_eq(json_array_size(runs), 1);
    json_t *r0 = json_array_get(runs, 0);
    cr_assert_str_eq(json_string_value(json_object_get(r0, "policy")), "static");
    cr_assert_eq(json_integer_value(json_object_get(r0, "served")), 3);
    cr_assert_eq(json_array_size(json_object_get(r0, "requests_detail")), 3);
    json_decref(v);
}

/* Settings that used to be taken silently: a KV budget of 0 (it meant the default), an
 * empty --db (SQLite's throw-away temporary database), a budget the GPU cannot hold. */
Test(cli_sim, silent_settings_are_refused_or_said)
{
    th_expect_fail((const char *[]){BASE, "--gpu-kv-gb", "0", NULL}, 2, "--gpu-kv-gb", g_env);
    th_expect_fail((const char *[]){BASE, "--db", "", NULL}, 1, "empty database path", g_env);
    th_expect_fail((const char *[]){"db", "init", "--db", "", NULL}, 1, "empty database path",
                   g_env);
    /* one policy: a budget beyond the GPU less its weights is an error naming the limit */
    th_expect_fail((const char *[]){BASE, "--policy", "writescope", "--batch", "2", "--prompt",
                                    "1024", "--output", "2", "--gpu-kv-gb", "200", NULL},
                   1, "its KV budget is at most 37.", g_env);
    /* every policy: each that cannot hold it says so and serves nothing */
    th_run r = th_writescope((const char *[]){BASE, "--policy", "all", "--batch", "2",
                                              "--prompt", "1024", "--output", "2", "--gpu-kv-gb",
                                              "200", NULL},
                             g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.err, "exceed its 40 GiB: every request is an OOM outcome"), "%s", r.err);
    th_run_free(&r);
}

Test(cli_sim, bad_names_one_line)
{
    th_expect_fail((const char *[]){"sim", "--model", "nosuch-model", "--gpu", "a100-40gb-pcie",
                                    "--host", "xeon-gold-5318y", NULL},
                   1, "nosuch-model", g_env);
    th_expect_fail((const char *[]){"sim", "--model", "qwen3-30b-a3b", "--gpu", "no-gpu", "--host",
                                    "xeon-gold-5318y", NULL},
                   1, "no-gpu", g_env);
    th_expect_fail((const char *[]){"sim", "--model", "qwen3-30b-a3b", "--gpu", "a100-40gb-pcie",
                                    "--host", "no-host", NULL},
                   1, "no-host", g_env);
    th_expect_fail((const char *[]){BASE, "--policy", "bogus", NULL}, 2, "unknown policy 'bogus'",
                   g_env);
    th_expect_fail((const char *[]){"sim", "--model", "qwen3-30b-a3b", "--gpu", "xeon-gold-5318y",
                                    "--host", "xeon-gold-5318y", NULL},
                   1, "not a GPU", g_env);
}

Test(cli_sim, usage_errors)
{
    th_run r = th_writescope((const char *[]){BASE, "--detail", "bogus", NULL}, g_env);
    cr_assert_eq(r.status, 2, "%s", r.err);
    th_run_free(&r);
    r = th_writescope((const char *[]){BASE, "--batch", "0", NULL}, g_env);
    cr_assert_eq(r.status, 2, "%s", r.err);
    th_run_free(&r);
    r = th_writescope((const char *[]){"sim", "--model", "qwen3-30b-a3b", NULL}, g_env);
    cr_assert_eq(r.status, 2, "%s", r.err);
    th_run_free(&r);
    /* one node's memory and per-socket copies contradict each other */
    r = th_writescope((const char *[]){"sim", "--model", "qwen3-30b-a3b", "--gpu", "rtx-5090",
                                       "--host", "xeon-gold-6454s-2s", "--cpu-sockets", "1",
                                       "--one-node-memory", NULL},
                      g_env);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "--one-node-memory"), "%s", r.err);
    th_run_free(&r);
    r = th_writescope((const char *[]){"sim", "--help", NULL}, g_env);
    cr_assert_eq(r.status, 0);
    cr_assert_neq(strstr(r.out, "usage: writescope sim"), NULL);
    th_run_free(&r);
}

Test(cli_sim, trace_file_and_generator)
{
    char dir[64], path[256], bad[256];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "t.csv",
             "arrival_s,prompt_tokens,output_tokens\n0,300,4\n0.5,900,2\n1.25,40,1\n7,2000,3\n",
             path, sizeof path);
    json_t *v = th_writescope_json((const char *[]){BASE, "--trace", path, "--layers", "2",
                                                    "--policy", "writescope", "--json", NULL},
                                   g_env);
    json_t *r0 = json_array_get(json_object_get(v, "runs"), 0);
    cr_assert_eq(json_integer_value(json_object_get(r0, "served")), 4);
    cr_assert_eq(json_integer_value(json_object_get(r0, "output_tokens")), 10);
    json_decref(v);
    v = th_writescope_json((const char *[]){BASE, "--arrivals", "poisson", "--rate", "2",
                                            "--requests", "9", "--prompt-dist", "uniform:100:900",
                                            "--output-dist", "fixed:3", "--seed", "7", "--layers",
                                            "2", "--policy", "stream", "--json", NULL},
                           g_env);
    r0 = json_array_get(json_object_get(v, "runs"), 0);
    cr_assert_eq(json_integer_value(json_object_get(r0, "requests")), 9);
    cr_assert_eq(json_integer_value(json_object_get(r0, "output_tokens")), 27);
    json_decref(v);
    th_write(dir, "bad.csv", "arrival_s,prompt_tokens,output_tokens\n0,300,4\n0.5,x,2\n", bad,
             sizeof bad);
    th_expect_fail((const char *[]){BASE, "--trace", bad, NULL}, 1, "bad.csv:3", g_env);
    th_expect_fail((const char *[]){BASE, "--trace", "/nonexistent/t.csv", NULL}, 1,
                   "/nonexistent/t.csv", g_env);
}

Test(cli_sim, mooncake_trace_every_request_ends)
{
    char full[4096];
    if (!th_real_trace("mooncake_conversation.jsonl", full, sizeof full))
        cr_skip_test("mooncake_conversation.jsonl absent (../shared/traces or "
                     "$WRITESCOPE_TRACES): real-trace run skipped");
    json_t *v =
        th_writescope_json((const char *[]){BASE, "--trace", full, "--layers", "2", "--detail",
                                            "step", "--policy", "stream", "--json", NULL},
                           g_env);
    json_t *r0 = json_array_get(json_object_get(v, "runs"), 0);
    cr_assert_eq(json_integer_value(json_object_get(r0, "requests")), 12031);
    cr_assert_eq(json_integer_value(json_object_get(r0, "served")) +
                     json_integer_value(json_object_get(r0, "oom")),
                 12031);
    json_decref(v);
}

/* A closed loop of clients runs (each client's next request after its previous one ends),
 * is stored as a generator saying so, and its options are checked. */
Test(cli_sim, closed_loop_generator)
{
    char dir[64], db[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/runs.db", dir);
    json_t *v = th_writescope_json(
        (const char *[]){BASE, "--arrivals", "closed", "--clients", "3", "--think", "fixed:0.5",
                         "--requests", "7", "--prompt-dist", "uniform:100:900", "--output-dist",
                         "fixed:3", "--layers", "2", "--policy", "writescope", "--db", db,
                         "--json", NULL},
        g_env);
    json_t *r0 = json_array_get(json_object_get(v, "runs"), 0);
    cr_assert_eq(json_integer_value(json_object_get(r0, "requests")), 7);
    cr_assert_eq(json_integer_value(json_object_get(r0, "served")), 7);
    cr_assert_eq(json_integer_value(json_object_get(r0, "output_tokens")), 21);
    json_decref(v);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM sim_runs WHERE workload = 'generator' "
                                   "AND generator LIKE 'arrivals=closed clients=3 "
                                   "think=fixed:0.5 requests=7 %'"),
                 1);
    th_expect_fail((const char *[]){BASE, "--arrivals", "closed", "--requests", "4",
                                    "--prompt-dist", "fixed:10", "--output-dist", "fixed:2", NULL},
                   2, "--clients", g_env);
    th_expect_fail((const char *[]){BASE, "--arrivals", "closed", "--clients", "2", "--rate", "3",
                                    "--requests", "4", "--prompt-dist", "fixed:10", "--output-dist",
                                    "fixed:2", NULL},
                   2, "--rate", g_env);
    th_expect_fail((const char *[]){BASE, "--arrivals", "closed", "--clients", "2", "--think",
                                    "gauss:1", "--requests", "4", "--prompt-dist", "fixed:10",
                                    "--output-dist", "fixed:2", NULL},
                   2, "think", g_env);
    th_expect_fail((const char *[]){BASE, "--clients", "2", NULL}, 2, "--arrivals", g_env);
    th_run r = th_writescope((const char *[]){"sim", "--help", NULL}, g_env);
    cr_assert_neq(strstr(r.out, "closed loop"), NULL, "%s", r.out);
    th_run_free(&r);
}

#define SMALL BASE, "--batch", "3", "--prompt", "600", "--output", "12", "--layers", "2"

/* --db stores one run per policy with every request and step, labelled modeled, naming the
 * profiles; the counts are the JSON totals'; `db export` reads them back. */
Test(cli_sim, db_stores_every_run)
{
    char dir[64], db[256], q[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/runs.db", dir);
    json_t *v = th_writescope_json((const char *[]){SMALL, "--db", db, "--json", NULL}, g_env);
    json_t *runs = json_object_get(v, "runs");
    cr_assert_eq(json_array_size(runs), 7);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM sim_runs"), 7);
    cr_assert_eq(th_count_file(db, "SELECT count(DISTINCT policy) FROM sim_runs WHERE label = "
                                   "'modeled' AND gpu_profile = 'a100-40gb-pcie' AND "
                                   "host_profile = 'xeon-gold-5318y' AND workload = 'closed'"),
                 7);
    for (size_t i = 0; i < 7; i++) {
        json_t *r = json_array_get(runs, i);
        const long long id = json_integer_value(json_object_get(r, "run_id"));
        snprintf(q, sizeof q, "SELECT count(*) FROM sim_requests WHERE run_id = %lld", id);
        cr_assert_eq(th_count_file(db, q), json_integer_value(json_object_get(r, "requests")));
        snprintf(q, sizeof q, "SELECT count(*) FROM sim_steps WHERE run_id = %lld", id);
        cr_assert_eq(th_count_file(db, q), json_integer_value(json_object_get(r, "steps")));
        snprintf(q, sizeof q,
                 "SELECT count(*) FROM sim_runs WHERE id = %lld AND policy = '%s' AND "
                 "completed = %lld AND oom = %lld AND tokens_out = %lld",
                 id, json_string_value(json_object_get(r, "policy")),
                 json_integer_value(json_object_get(r, "served")),
                 json_integer_value(json_object_get(r, "oom")),
                 json_integer_value(json_object_get(r, "output_tokens")));
        cr_assert_eq(th_count_file(db, q), 1, "%s", q);
    }
    json_decref(v);
    v = th_writescope_json((const char *[]){"db", "export", "--db", db, NULL}, g_env);
    cr_assert_eq(json_array_size(json_object_get(v, "sim_runs")), 7);
    json_decref(v);
    /* The table output says where the runs went. */
    th_run r = th_writescope((const char *[]){SMALL, "--db", db, "--policy", "stream", NULL}, g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, "stored: run 8 in"), NULL, "%s", r.out);
    th_run_free(&r);
}

/* The runs a command reports stored are its own: another writer's run that lands between
 * two of them (a trigger inserts one right after this command's first) is not among them. */
Test(cli_sim, stored_ids_are_this_commands)
{
    char dir[64], db[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/runs.db", dir);
    th_run r = th_writescope((const char *[]){"db", "init", "--db", db, NULL}, g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    th_exec_sql(db, "CREATE TRIGGER other_writer AFTER INSERT ON sim_runs WHEN NEW.model <> "
                    "'other' AND NEW.policy = 'writescope' BEGIN INSERT INTO sim_runs("
                    "started_at, tool_version, model, gpu_profile, host_profile, policy, "
                    "workload, batch, detail, seed) VALUES ('2026-01-01T00:00:00Z', 'x', "
                    "'other', 'g', 'h', 'stream', 'closed', 1, 'step', 0); END");
    r = th_writescope((const char *[]){SMALL, "--db", db, NULL}, g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, "stored: runs 1, 3-8 in"), NULL, "%s", r.out);
    th_run_free(&r);
    json_t *v = th_writescope_json((const char *[]){SMALL, "--db", db, "--json", NULL}, g_env);
    json_t *ids = json_object_get(json_object_get(v, "written"), "run_ids");
    cr_assert_eq(json_array_size(ids), 7);
    cr_assert_eq(json_integer_value(json_array_get(ids, 0)), 9);
    for (size_t i = 1; i < 7; i++)
        cr_assert_eq(json_integer_value(json_array_get(ids, i)), 10 + (json_int_t)i);
    json_decref(v);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM sim_runs WHERE model = 'other'"), 2);
}

Test(cli_sim, csv_files_and_rows)
{
    char dir[64], out[256], f[512];
    th_tmpdir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/csv", dir);
    json_t *v = th_writescope_json(
        (const char *[]){SMALL, "--policy", "static", "--csv", out, "--json", NULL}, g_env);
    json_t *r0 = json_array_get(json_object_get(v, "runs"), 0);
    size_t len;
    snprintf(f, sizeof f, "%s/requests.csv", out);
    char *t = th_slurp(f, &len);
    cr_assert_eq(th_lines(t), 1 + 3);
    free(t);
    snprintf(f, sizeof f, "%s/steps.csv", out);
    t = th_slurp(f, &len);
    cr_assert_eq(th_lines(t), 1 + json_integer_value(json_object_get(r0, "steps")));
    free(t);
    snprintf(f, sizeof f, "%s/summary.csv", out);
    t = th_slurp(f, &len);
    cr_assert_eq(th_lines(t), 2);
    cr_assert_neq(strstr(t, ",modeled,static,qwen3-30b-a3b,a100-40gb-pcie,xeon-gold-5318y,closed"),
                  NULL, "%s", t);
    free(t);
    json_decref(v);
}

Test(cli_sim, chrome_trace_valid_and_capped)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/t.json", dir);
    th_run r = th_writescope((const char *[]){SMALL, "--policy", "writescope", "--chrome-trace",
                                              path, "--chrome-trace-limit", "100", NULL},
                             g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    json_error_t je;
    json_t *v = json_load_file(path, 0, &je);
    cr_assert_not_null(v, "%s: %s (line %d)", path, je.text, je.line);
    json_t *ev = json_object_get(v, "traceEvents");
    size_t spans = 0, i;
    json_t *e;
    json_array_foreach(ev, i, e) spans += !strcmp(json_string_value(json_object_get(e, "ph")), "X");
    cr_assert_eq(spans, 100);
    json_t *od = json_object_get(v, "otherData");
    cr_assert_str_eq(json_string_value(json_object_get(od, "label")), "modeled");
    cr_assert_neq(strstr(json_string_value(json_object_get(od, "title")), "xeon-gold-5318y"), NULL);
    cr_assert_gt(json_integer_value(json_object_get(od, "spans_dropped")), 0);
    json_decref(v);
    /* the default cap lets a small run through whole */
    r = th_writescope((const char *[]){SMALL, "--policy", "stream", "--chrome-trace", path, NULL},
                      g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    v = json_load_file(path, 0, &je);
    cr_assert_not_null(v, "%s", je.text);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(v, "otherData"),
                                                    "spans_dropped")),
                 0);
    json_decref(v);
    /* one run per trace */
    r = th_writescope((const char *[]){SMALL, "--chrome-trace", path, NULL}, g_env);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert_neq(strstr(r.err, "one --policy"), NULL, "%s", r.err);
    th_run_free(&r);
}

/* --host this: this machine's newest calibration by its fingerprint's name, in sim, sim grid
 * and plan; without one, one line saying so. The profile is stored by hand (a copy of the
 * datasheet host's parameters under this machine's name), so no calibration is timed. */
Test(cli_sim, host_this_is_this_machines_calibration)
{
    const char *db = g_env_db + strlen("WRITESCOPE_DB=");
    th_run r = th_writescope((const char *[]){"db", "init", "--db", db, NULL}, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    const char *sim[] = {"sim", "--model", "qwen3-30b-a3b", "--gpu", "a100-40gb-pcie", "--host",
                         "this", "--batch", "1", "--prompt", "2048", "--output", "4", "--policy",
                         "writescope", "--db", db, NULL};
    th_expect_fail(sim, 1, "--host this: no calibration of this machine", g_env);
    char name[64];
    ws_store *st;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(db, &st, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_calib_host_profile(st, name, sizeof name), 0, "not stored yet");
    ws_store_close(st);
    cr_assert(!strncmp(name, "host:", 5), "%s", name);
    /* The profile the command looks for, as it names it: the one this test stores (the
     * fingerprint rounds the memory to GiB, which a guest's balloon can move between two
     * processes). */
    r = th_writescope(sim, NULL);
    const char *at = strstr(r.err, "host:");
    cr_assert_not_null(at, "%s", r.err);
    cr_assert_eq(sscanf(at, "%63[a-z0-9:]", name), 1);
    th_run_free(&r);
    char *sql = sqlite3_mprintf(
        "INSERT INTO profiles(name, kind, description, source, created_at, devices) "
        "SELECT %Q, kind, 'test copy', source, created_at, devices FROM profiles "
        "WHERE name = 'xeon-gold-5318y';"
        "INSERT INTO profile_params(profile_id, key, value, unit, source, reference) "
        "SELECT (SELECT id FROM profiles WHERE name = %Q), key, value, unit, source, reference "
        "FROM profile_params WHERE profile_id = (SELECT id FROM profiles WHERE name = "
        "'xeon-gold-5318y');",
        name, name);
    th_exec_sql(db, sql);
    sqlite3_free(sql);
    r = th_writescope(sim, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, name), NULL, "the run names %s: %s", name, r.out);
    th_run_free(&r);
    r = th_writescope((const char *[]){"sim", "grid", "--model", "qwen3-30b-a3b", "--gpu",
                                       "a100-40gb-pcie", "--host", "this", "--db", db, NULL},
                      NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, name), NULL, "the grid names %s: %s", name, r.out);
    th_run_free(&r);
    r = th_writescope((const char *[]){"plan", "--model", "qwen3-30b-a3b", "--gpu",
                                       "a100-40gb-pcie", "--host", "this", "--prompt", "4096",
                                       "--output", "16", "--slo-tpot", "1", "--policy",
                                       "writescope", "--fit-batches", "1", "--db", db, NULL},
                      NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, name), NULL, "the plan names %s: %s", name, r.out);
    th_run_free(&r);
}

/* A run that serves nothing has no TTFT or TPOT: the table says n/a and JSON null (the
 * database stores NULL), not 0 and -1. gpu-only cannot place qwen3-30b-a3b's weights on a
 * 40 GB GPU, so every request is out of memory. */
Test(cli_sim, nothing_served_prints_na_and_json_null)
{
    const char *args[] = {BASE, "--policy", "gpu-only", "--batch",  "2",    "--prompt",
                          "64", "--output", "2",        "--detail", "step", NULL};
    th_run r = th_writescope(args, g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *row = strstr(r.out, "\ngpu-only ");
    cr_assert_not_null(row, "%s", r.out);
    char line[256];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(row + 1, "\n"), row + 1);
    int na = 0;
    for (const char *p = line; (p = strstr(p, "n/a")); p += 3)
        na++;
    cr_assert_eq(na, 4, "TTFT p50/p99 and TPOT p50/p99 are n/a: %s", line);
    th_run_free(&r);
    const char *jargs[] = {BASE,       "--policy", "gpu-only", "--batch", "2",
                           "--prompt", "64",       "--output", "2",       "--detail",
                           "step",     "--json",   NULL};
    json_t *v = th_writescope_json(jargs, g_env);
    json_t *run = json_array_get(json_object_get(v, "runs"), 0);
    cr_assert_eq(json_integer_value(json_object_get(run, "served")), 0);
    const char *keys[] = {"ttft_p50_s", "ttft_p90_s", "ttft_p99_s",
                          "tpot_p50_s", "tpot_p90_s", "tpot_p99_s"};
    for (int i = 0; i < 6; i++)
        cr_assert(json_is_null(json_object_get(run, keys[i])), "%s is not null", keys[i]);
    json_t *q = json_array_get(json_object_get(run, "requests_detail"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(q, "outcome")), "oom");
    cr_assert(json_is_null(json_object_get(q, "ttft_s")), "an OOM request's TTFT is null");
    cr_assert(json_is_null(json_object_get(q, "tpot_s")));
    cr_assert(json_is_null(json_object_get(q, "e2e_s")));
    json_decref(v);
}

/* Options that contradict each other, or that a command would ignore, are one-line usage
 * errors: --db with --save, --layers past the model's, and sim grid's fixed workloads. */
Test(cli_sim, conflicting_options_are_refused)
{
    char dir[64], db[128];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/x.db", dir);
    th_expect_fail((const char *[]){BASE, "--db", db, "--save", NULL}, 2, "--db and --save", g_env);
    th_expect_fail((const char *[]){BASE, "--layers", "49", NULL}, 2,
                   "--layers 49: model qwen3-30b-a3b has 48 layers", g_env);
    th_expect_fail((const char *[]){"sim", "grid", "--batch", "4", NULL}, 2, "--batch", g_env);
    th_expect_fail((const char *[]){"sim", "grid", "--prompt", "1024", NULL}, 2, "--prompt", g_env);
    th_expect_fail((const char *[]){"sim", "grid", "--policy", "writescope", NULL}, 2, "--policy",
                   g_env);
    th_expect_fail((const char *[]){"sim", "grid", "--db", db, "--save", NULL}, 2,
                   "--db and --save", g_env);
    th_expect_fail((const char *[]){"run", "--model", "qwen3-30b-a3b", "--layers", "49", NULL}, 2,
                   "--layers 49: model qwen3-30b-a3b has 48 layers", g_env);
    struct stat st;
    cr_assert_neq(stat(db, &st), 0, "a refused command created %s", db);
}

/* --prefill: a 2K chunk streams its experts under gpu and auto on the paper's setup, not
 * under cpu, and the first token comes sooner for it; a bad mode is a usage error. */
Test(cli_sim, prefill_strategy_flag)
{
    const char *modes[] = {"cpu", "gpu", "auto"};
    double ttft[3];
    for (int i = 0; i < 3; i++) {
        json_t *v = th_writescope_json(
            (const char *[]){BASE, "--batch", "1", "--prompt", "2048", "--output", "2", "--layers",
                             "3", "--policy", "writescope", "--prefill", modes[i], "--json", NULL},
            g_env);
        json_t *r0 = json_array_get(json_object_get(v, "runs"), 0);
        const json_int_t g = json_integer_value(json_object_get(r0, "prefill_gpu_steps")),
                         c = json_integer_value(json_object_get(r0, "prefill_cpu_steps"));
        cr_assert_eq(g, i == 0 ? 0 : 1, "--prefill %s: %lld streamed", modes[i], (long long)g);
        cr_assert_eq(c, i == 0 ? 1 : 0, "--prefill %s: %lld on the CPU", modes[i], (long long)c);
        ttft[i] = json_number_value(json_object_get(r0, "ttft_p50_s"));
        json_decref(v);
    }
    cr_assert_lt(ttft[1], ttft[0]);
    cr_assert_eq(ttft[2], ttft[1]);
    th_expect_fail((const char *[]){BASE, "--prefill", "fast", NULL}, 2, "--prefill", g_env);
}

/* Requests whose own KV does not fit say why, as weights that do not fit do: the table's row
 * names the tier with the first request's tokens and bytes, the JSON the same fields. */
Test(cli_sim, kv_oom_says_why)
{
    const char *args[] = {BASE,    "--policy", "ktrans", "--batch", "2",      "--prompt",
                          "32768", "--output", "2",      "--layers", "2", "--gpu-kv-gb",
                          "1",     NULL};
    th_run r = th_writescope(args, g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, "OOM: 2 request(s) whose own KV exceeds the GPU KV budget (first: "
                                "32770 tokens, 3 GiB > 1 GiB)"),
                  NULL, "%s", r.out);
    th_run_free(&r);
    json_t *v = th_writescope_json((const char *[]){BASE, "--policy", "ktrans", "--batch", "2",
                                                    "--prompt", "32768", "--output", "2",
                                                    "--layers", "2", "--gpu-kv-gb", "1",
                                                    "--json", NULL},
                                   g_env);
    json_t *run = json_array_get(json_object_get(v, "runs"), 0);
    cr_assert_eq(json_integer_value(json_object_get(run, "kv_oom")), 2);
    json_t *k = json_object_get(run, "kv_oom_first");
    cr_assert_str_eq(json_string_value(json_object_get(k, "tier")), "GPU KV budget");
    cr_assert_eq(json_integer_value(json_object_get(k, "tokens")), 32770);
    cr_assert_float_eq(json_number_value(json_object_get(k, "room_bytes")), 1073741824.0, 1);
    cr_assert_gt(json_number_value(json_object_get(k, "kv_bytes")), 3 * 1073741824.0 * 0.99);
    json_decref(v);
}

#define TINYRUN BASE, "--batch", "2", "--prompt", "512", "--output", "4", "--layers", "2"

/* An option only work on the CPU uses, given with a policy that runs none there, is a usage
 * error naming the option and the policy; with a policy list that has one that does (all
 * among them), or with layers put on the CPU, it runs. */
Test(cli_sim, options_a_policy_ignores_are_refused)
{
    static const char *const cpu_only[][2] = {
        {"--n-cpu-moe", "3"},      {"--gpu-experts", "4"}, {"--cpu-expert-weights", "int8"},
        {"--prefill", "gpu"},      {"--cpu-threads", "4"}, {"--cpu-sockets", "1"},
    };
    char want[96];
    for (size_t i = 0; i < sizeof cpu_only / sizeof cpu_only[0]; i++) {
        snprintf(want, sizeof want, "%s does not apply to --policy gpu-only, which",
                 cpu_only[i][0]);
        th_expect_fail((const char *[]){TINYRUN, "--policy", "gpu-only", cpu_only[i][0],
                                        cpu_only[i][1], NULL},
                       2, want, g_env);
        th_run r = th_writescope((const char *[]){TINYRUN, "--policy", "all", cpu_only[i][0],
                                                  cpu_only[i][1], NULL},
                                 g_env);
        cr_assert_eq(r.status, 0, "%s %s: %s", cpu_only[i][0], cpu_only[i][1], r.err);
        th_run_free(&r);
        r = th_writescope((const char *[]){TINYRUN, "--policy", "gpu-only,ktrans", cpu_only[i][0],
                                           cpu_only[i][1], NULL},
                          g_env);
        cr_assert_eq(r.status, 0, "%s %s: %s", cpu_only[i][0], cpu_only[i][1], r.err);
        th_run_free(&r);
    }
    /* layers wholly on the CPU use the CPU's options under any policy, not the expert split */
    th_run r = th_writescope((const char *[]){TINYRUN, "--policy", "gpu-only", "--n-gpu-layers",
                                              "40", "--cpu-threads", "4", "--prefill", "cpu",
                                              NULL},
                             g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    th_expect_fail((const char *[]){TINYRUN, "--policy", "gpu-only", "--n-gpu-layers", "40",
                                    "--n-cpu-moe", "3", NULL},
                   2, "--n-cpu-moe does not apply to --policy gpu-only", g_env);
    th_expect_fail((const char *[]){"plan", "--model", "qwen3-30b-a3b", "--host",
                                    "xeon-gold-5318y", "--gpu", "a100-40gb-pcie", "--prompt", "64",
                                    "--output", "2", "--slo-tpot", "1", "--policy", "gpu-only",
                                    "--cpu-threads", "4", NULL},
                   2, "--cpu-threads does not apply to --policy gpu-only", g_env);
}

/* More CPU threads than the host's cores (of the sockets used) are refused, not clipped. */
Test(cli_sim, cpu_threads_above_the_cores_are_refused)
{
    th_expect_fail((const char *[]){TINYRUN, "--policy", "writescope", "--cpu-threads", "25",
                                    NULL},
                   2, "--cpu-threads 25: host xeon-gold-5318y has 24 cores", g_env);
    th_run r = th_writescope((const char *[]){TINYRUN, "--policy", "writescope", "--cpu-threads",
                                              "24", NULL},
                             g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    const char *two[] = {"sim",      "--model",  "qwen3-30b-a3b", "--gpu",          "h200",
                         "--host",   "xeon-gold-6454s-2s", "--batch", "1", "--prompt", "256",
                         "--output", "2",        "--layers",      "2",              "--policy",
                         "ktrans",   "--cpu-sockets", "1",         "--cpu-threads", "33", NULL};
    th_expect_fail(two, 2, "--cpu-threads 33: host xeon-gold-6454s-2s has 32 cores on the sockets "
                           "used", g_env);
    th_expect_fail((const char *[]){"plan", "--model", "qwen3-30b-a3b", "--host",
                                    "xeon-gold-5318y", "--gpu", "a100-40gb-pcie", "--prompt", "64",
                                    "--output", "2", "--slo-tpot", "1", "--policy", "writescope",
                                    "--cpu-threads", "48", NULL},
                   1, "--cpu-threads 48: host xeon-gold-5318y has 24 cores", g_env);
}

/* --n-cpu-moe 0 (the fidelity points' "no layer's experts on the CPU") puts every routed
 * expert on the GPU: ktrans then runs as gpu-only does, step for step. */
Test(cli_sim, n_cpu_moe_zero_puts_every_expert_on_the_gpu)
{
    const char *pol[2] = {"ktrans", "gpu-only"};
    double tpot[2], ttft[2];
    for (int i = 0; i < 2; i++) {
        json_t *v = th_writescope_json(
            (const char *[]){"sim", "--model", "qwen3-30b-a3b", "--gpu", "h200", "--host",
                             "xeon-gold-5318y", "--batch", "2", "--prompt", "512", "--output",
                             "4", "--layers", "2", "--policy", pol[i], "--json",
                             i ? NULL : "--n-cpu-moe", "0", NULL},
            g_env);
        json_t *r0 = json_array_get(json_object_get(v, "runs"), 0);
        cr_assert_eq(json_integer_value(json_object_get(r0, "served")), 2);
        tpot[i] = json_number_value(json_object_get(r0, "tpot_p50_s"));
        ttft[i] = json_number_value(json_object_get(r0, "ttft_p50_s"));
        json_decref(v);
    }
    cr_assert_eq(tpot[0], tpot[1]);
    cr_assert_eq(ttft[0], ttft[1]);
}

/* --policy takes a comma-separated list, as plan's does: its runs in the policies' order. */
Test(cli_sim, policy_list_like_plan)
{
    json_t *v = th_writescope_json(
        (const char *[]){TINYRUN, "--policy", "ktrans,writescope", "--json", NULL}, g_env);
    json_t *runs = json_object_get(v, "runs");
    cr_assert_eq(json_array_size(runs), 2);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(runs, 0), "policy")),
                     "writescope");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(runs, 1), "policy")),
                     "ktrans");
    json_decref(v);
    th_expect_fail((const char *[]){TINYRUN, "--policy", "ktrans,bogus", NULL}, 2,
                   "unknown policy 'bogus'", g_env);
    th_expect_fail((const char *[]){TINYRUN, "--policy", ",", NULL}, 2, "names no policy", g_env);
    th_expect_fail((const char *[]){TINYRUN, "--policy", "ktrans,writescope", "--chrome-trace",
                                    "x.json", NULL},
                   2, "one --policy", g_env);
}

/* --weights is the CPU experts' format too (a GGUF file's experts are its type wherever they
 * run), and the header says what each part runs at; --cpu-expert-weights still overrides. */
Test(cli_sim, weights_cover_the_cpu_experts)
{
    double tpot[3];
    const char *const extra[3][4] = {{"--weights", "q4_k_m", NULL, NULL},
                                     {"--weights", "q4_k_m", "--cpu-expert-weights", "q4_k_m"},
                                     {"--weights", "q4_k_m", "--cpu-expert-weights", "bf16"}};
    for (int i = 0; i < 3; i++) {
        json_t *v = th_writescope_json((const char *[]){TINYRUN, "--policy", "ktrans",
                                                        extra[i][0], extra[i][1], "--json",
                                                        extra[i][2], extra[i][3], NULL},
                                       g_env);
        json_t *w = json_object_get(v, "weights");
        cr_assert_str_eq(json_string_value(json_object_get(w, "cpu_experts")),
                         i == 2 ? "bf16" : "q4_k_m");
        cr_assert_str_eq(json_string_value(json_object_get(w, "gpu")), "q4_k_m");
        tpot[i] = json_number_value(
            json_object_get(json_array_get(json_object_get(v, "runs"), 0), "tpot_p50_s"));
        json_decref(v);
    }
    cr_assert_eq(tpot[0], tpot[1]);
    cr_assert_neq(tpot[0], tpot[2]);
    th_run r = th_writescope((const char *[]){TINYRUN, "--policy", "ktrans", "--weights",
                                              "q4_k_m", NULL},
                             g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, "weights: attention and dense q4_k_m, GPU experts q4_k_m, shared "
                                "experts q4_k_m, CPU experts q4_k_m; KV bf16"),
                  NULL, "%s", r.out);
    th_run_free(&r);
}
