/* test_cli_sim: `writescope sim` end to end: a small run prints every policy labelled
 * modeled with its profiles, --json parses and carries every request; unknown model,
 * profile and policy names are one-line errors (exit 1), bad options usage errors (exit 2). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

static char g_env_db[128];
static const char *g_env[] = {g_env_db, NULL};

static void fresh_db(void)
{
    char dir[64];
    th_tmpdir(dir, sizeof dir);
    snprintf(g_env_db, sizeof g_env_db, "WRITESCOPE_DB=%s/ws.db", dir);
}

static void expect_fail(const char *const *args, int status, const char *needle)
{
    th_run r = th_writescope(args, g_env);
    cr_assert_eq(r.status, status, "exit %d, stderr: %s", r.status, r.err);
    cr_assert_eq(th_lines(r.err), 1, "one line: %s", r.err);
    cr_assert_neq(strstr(r.err, needle), NULL, "stderr '%s' lacks '%s'", r.err, needle);
    cr_assert_str_eq(r.out, "");
    th_run_free(&r);
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

Test(cli_sim, bad_names_one_line)
{
    expect_fail((const char *[]){"sim", "--model", "nosuch-model", "--gpu", "a100-40gb-pcie",
                                 "--host", "xeon-gold-5318y", NULL},
                1, "nosuch-model");
    expect_fail((const char *[]){"sim", "--model", "qwen3-30b-a3b", "--gpu", "no-gpu", "--host",
                                 "xeon-gold-5318y", NULL},
                1, "no-gpu");
    expect_fail((const char *[]){"sim", "--model", "qwen3-30b-a3b", "--gpu", "a100-40gb-pcie",
                                 "--host", "no-host", NULL},
                1, "no-host");
    expect_fail((const char *[]){BASE, "--policy", "bogus", NULL}, 1, "unknown policy 'bogus'");
    expect_fail((const char *[]){"sim", "--model", "qwen3-30b-a3b", "--gpu", "xeon-gold-5318y",
                                 "--host", "xeon-gold-5318y", NULL},
                1, "not a GPU");
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
    expect_fail((const char *[]){BASE, "--trace", bad, NULL}, 1, "bad.csv:3");
    expect_fail((const char *[]){BASE, "--trace", "/nonexistent/t.csv", NULL}, 1,
                "/nonexistent/t.csv");
}

Test(cli_sim, mooncake_trace_every_request_ends)
{
    const char *path = "../shared/traces/mooncake_conversation.jsonl";
    char full[4096];
    const char *root = getenv("WRITESCOPE_HOME");
    snprintf(full, sizeof full, "%s/%s", root ? root : ".", path);
    FILE *f = fopen(full, "r");
    if (!f) {
        snprintf(full, sizeof full, "/work/shared/traces/mooncake_conversation.jsonl");
        f = fopen(full, "r");
    }
    if (!f)
        cr_skip_test("no %s: the shared traces are absent", path);
    fclose(f);
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
