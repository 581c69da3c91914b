/* test_cli: end-to-end runs of bin/writescope: the README's commands, --json output,
 * --help everywhere, and one-line errors with a non-zero exit for bad input. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "ws_util.h"

static char g_env_db[320];
static const char *g_env[] = {g_env_db, NULL};

/* Each test gets its own database through $WRITESCOPE_DB. */
static void fresh_db(void)
{
    char dir[64];
    th_tmpdir(dir, sizeof dir);
    snprintf(g_env_db, sizeof g_env_db, "WRITESCOPE_DB=%s/ws.db", dir);
}

static th_run run(const char *const *args) { return th_writescope(args, g_env); }

static json_t *run_json(const char *const *args) { return th_writescope_json(args, g_env); }

/* A failing command: status 1, exactly one line on stderr containing `needle`, nothing on stdout. */
static void expect_fail(const char *const *args, const char *needle)
{
    th_run r = run(args);
    cr_assert_eq(r.status, 1, "exit %d, stderr: %s", r.status, r.err);
    cr_assert_eq(th_lines(r.err), 1, "one line: %s", r.err);
    cr_assert_neq(strstr(r.err, needle), NULL, "stderr '%s' lacks '%s'", r.err, needle);
    cr_assert_str_eq(r.out, "");
    th_run_free(&r);
}

TestSuite(cli, .init = fresh_db);

Test(cli, model_show_json_qwen3)
{
    json_t *v = run_json((const char *[]){"model", "show", "qwen3-30b-a3b", "--json", NULL});
    cr_assert_eq(json_integer_value(json_object_get(v, "kv_bytes_per_token")), 98304);
    cr_assert_eq(json_integer_value(json_object_get(v, "kv_bytes_per_token_per_layer")), 2048);
    cr_assert_str_eq(json_string_value(json_object_get(v, "source")), "config");
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(v, "attention"), "kind")), "gqa");
    json_decref(v);
}

Test(cli, model_show_all_shipped)
{
    static const struct {
        const char *name;
        long per_layer, all;
        const char *kind;
    } want[] = {{"deepseek-v2-lite", 1152, 31104, "mla"},
                {"qwen3-30b-a3b", 2048, 98304, "gqa"},
                {"mixtral-8x7b", 4096, 131072, "gqa"},
                {"deepseek-v4-flash", 1152, 49536, "mla-sparse"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        json_t *v = run_json((const char *[]){"model", "show", want[i].name, "--json", NULL});
        cr_assert_eq(json_integer_value(json_object_get(v, "kv_bytes_per_token_per_layer")),
                     want[i].per_layer, "%s", want[i].name);
        cr_assert_eq(json_integer_value(json_object_get(v, "kv_bytes_per_token")), want[i].all,
                     "%s", want[i].name);
        cr_assert_str_eq(
            json_string_value(json_object_get(json_object_get(v, "attention"), "kind")),
            want[i].kind);
        json_decref(v);
    }
    th_run r = run((const char *[]){"model", "show", "deepseek-v2-lite", NULL});
    cr_assert_eq(r.status, 0);
    cr_assert_neq(strstr(r.out, "1,152 bytes/token/layer, 31,104 bytes/token"), NULL, "%s", r.out);
    cr_assert_neq(strstr(r.out, "derived from config.json"), NULL);
    th_run_free(&r);
}

Test(cli, model_bad_input)
{
    expect_fail((const char *[]){"model", "show", "llama-9000", NULL}, "unknown model 'llama-9000'");
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "config.json", "{\"hidden_size\": 2048, \"num_hidden_layers\": }", path,
             sizeof path);
    expect_fail((const char *[]){"model", "show", path, NULL}, path);
    expect_fail((const char *[]){"model", "show", path, NULL}, "invalid JSON at line 1");
    char missing[300];
    snprintf(missing, sizeof missing, "%s/nope/config.json", dir);
    expect_fail((const char *[]){"model", "show", missing, NULL}, "cannot open");
    th_write(dir, "heads.json",
             "{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":6,"
             "\"num_key_value_heads\":4,\"vocab_size\":10,\"intermediate_size\":8}",
             path, sizeof path);
    expect_fail((const char *[]){"model", "show", path, NULL}, "not a multiple");
}

Test(cli, usage_errors_exit_2)
{
    th_run r = run((const char *[]){"model", "show", "qwen3-30b-a3b", "--bogus", NULL});
    cr_assert_eq(r.status, 2);
    cr_assert_neq(strstr(r.err, "unknown option '--bogus'"), NULL, "%s", r.err);
    th_run_free(&r);
    r = run((const char *[]){"frobnicate", NULL});
    cr_assert_eq(r.status, 2);
    th_run_free(&r);
    r = run((const char *[]){"db", "export", "--format", "csv", NULL});
    cr_assert_eq(r.status, 2);
    cr_assert_neq(strstr(r.err, "--table"), NULL, "%s", r.err);
    th_run_free(&r);
}

Test(cli, help_everywhere)
{
    const char *cmds[][3] = {{"--help", NULL, NULL},
                             {"model", "--help", NULL},
                             {"db", "--help", NULL},
                             {"device", "--help", NULL},
                             {"model", "show", "--help"}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        const char *args[4] = {cmds[i][0], cmds[i][1], cmds[i][2], NULL};
        th_run r = run(args);
        cr_assert_eq(r.status, 0, "%s %s", cmds[i][0], cmds[i][1] ? cmds[i][1] : "");
        cr_assert_neq(strstr(r.out, "usage: writescope"), NULL, "%s", r.out);
        th_run_free(&r);
    }
}

Test(cli, db_show_lists_datasheet_profiles)
{
    th_run r = run((const char *[]){"db", "show", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *names[] = {"a100-40gb-pcie", "a100-80gb-sxm", "v100-32gb-pcie",
                           "h100-sxm",       "h200",          "xeon-gold-5318y"};
    for (size_t i = 0; i < 6; i++)
        cr_assert_neq(strstr(r.out, names[i]), NULL, "%s missing", names[i]);
    cr_assert_neq(strstr(r.out, "[datasheet]"), NULL);
    cr_assert_neq(strstr(r.out, "1.555 TB/s"), NULL, "%s", r.out);
    th_run_free(&r);

    json_t *v = run_json((const char *[]){"db", "show", "--json", NULL});
    json_t *profiles = json_object_get(v, "profiles");
    cr_assert_eq(json_array_size(profiles), 6);
    size_t i, j;
    json_t *p, *q;
    json_array_foreach(profiles, i, p) json_array_foreach(json_object_get(p, "params"), j, q)
    {
        const char *src = json_string_value(json_object_get(q, "source"));
        cr_assert(!strcmp(src, "datasheet") || !strcmp(src, "modeled"), "%s", src);
        cr_assert_gt(strlen(json_string_value(json_object_get(q, "reference"))), 0);
    }
    json_decref(v);
}

Test(cli, db_init_export_roundtrip)
{
    th_run r = run((const char *[]){"db", "init", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, "wrote 6 profile(s)"), NULL, "%s", r.out);
    th_run_free(&r);
    char dir[64], out[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/export.json", dir);
    r = run((const char *[]){"db", "export", "--output", out, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    json_error_t je;
    json_t *v = json_load_file(out, 0, &je);
    cr_assert_not_null(v, "%s", je.text);
    cr_assert_eq(json_array_size(json_object_get(v, "profiles")), 6);
    cr_assert_eq(json_array_size(json_object_get(v, "profile_params")), 5 * 11 + 10);
    json_decref(v);
}

Test(cli, db_bad_files)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    const char *junk = "SQLite format 2 -- no\n";
    th_write(dir, "junk.db", junk, path, sizeof path);
    expect_fail((const char *[]){"db", "show", "--db", path, NULL}, "not a SQLite database");
    expect_fail((const char *[]){"db", "init", "--db", path, NULL}, path);
    cr_assert(th_same_file_bytes(path, junk, strlen(junk)), "nothing written");

    char seed[256], db[256];
    th_write(dir, "seed.json", "{\"profiles\": [ {\"name\": \"x\"} ]}", seed, sizeof seed);
    snprintf(db, sizeof db, "%s/fresh.db", dir);
    expect_fail((const char *[]){"db", "init", "--db", db, "--seed", seed, NULL}, "seed.json");
    /* The failed seed left the seeded datasheet profiles only. */
    json_t *v = run_json((const char *[]){"db", "show", "--db", db, "--json", NULL});
    cr_assert_eq(json_array_size(json_object_get(v, "profiles")), 6);
    json_decref(v);
    char missing[300];
    snprintf(missing, sizeof missing, "%s/none.json", dir);
    expect_fail((const char *[]){"db", "init", "--db", db, "--seed", missing, NULL}, "cannot open");
}

Test(cli, device_runs_without_gpu)
{
    json_t *v = run_json((const char *[]){"device", "--json", NULL});
    json_t *cpu = json_object_get(v, "cpu");
    cr_assert_gt(json_integer_value(json_object_get(cpu, "logical_cpus")), 0);
    json_t *cuda = json_object_get(v, "cuda");
    cr_assert(json_is_array(json_object_get(cuda, "devices")));
    if (json_array_size(json_object_get(cuda, "devices")) == 0)
        cr_assert(json_is_string(json_object_get(cuda, "reason")), "a reason is given");
    json_decref(v);
}

/* Output that cannot be written (full disk, reader gone) is a failure: exit 1 and one
 * line on stderr, whether SIGPIPE is ignored by the parent or has its default action. */
Test(cli, output_errors_exit_nonzero)
{
    th_run r = run((const char *[]){"db", "init", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    const char *const cmds[][7] = {
        {"model", "show", "qwen3-30b-a3b", NULL},
        {"model", "show", "deepseek-v2-lite", "--json", NULL},
        {"model", "list", NULL},
        {"db", "show", NULL},
        {"db", "show", "--json", NULL},
        {"db", "export", NULL},
        {"db", "export", "--format", "csv", "--table", "profile_params", NULL},
        {"--help", NULL},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        int full = open("/dev/full", O_WRONLY);
        cr_assert_geq(full, 0);
        r = th_writescope_to(cmds[i], g_env, full, 0);
        close(full);
        cr_assert_eq(r.status, 1, "%s %s on /dev/full: exit %d, stderr: %s", cmds[i][0],
                     cmds[i][1], r.status, r.err);
        cr_assert_eq(th_lines(r.err), 1, "one line: %s", r.err);
        if (strcmp(cmds[i][0], "db") || strcmp(cmds[i][1], "export"))
            cr_assert_neq(strstr(r.err, "writescope: stdout: No space left on device"), NULL,
                          "%s", r.err);
        th_run_free(&r);

        for (int ign = 0; ign <= 1; ign++) {
            int p[2];
            cr_assert_eq(pipe(p), 0);
            close(p[0]); /* the reader is gone before anything is written */
            r = th_writescope_to(cmds[i], g_env, p[1], ign);
            close(p[1]);
            cr_assert_eq(r.status, 1, "%s %s into a closed pipe (SIGPIPE %s): exit %d, stderr: %s",
                         cmds[i][0], cmds[i][1], ign ? "ignored" : "default", r.status, r.err);
            cr_assert_eq(th_lines(r.err), 1, "one line: %s", r.err);
            if (strcmp(cmds[i][0], "db") || strcmp(cmds[i][1], "export"))
                cr_assert_neq(strstr(r.err, "writescope: stdout: Broken pipe"), NULL, "%s", r.err);
            th_run_free(&r);
        }
    }
}

/* Numbers on the command line are whole, in range, or a usage error (exit 2) naming the
 * option; nothing is opened or measured first. */
Test(cli, options_parse_numbers_strictly)
{
    const char *const cmds[][8] = {
        {"plot", "calib", "--run", "5abc", NULL},
        {"plot", "calib", "--run", "99999999999999999999", NULL},
        {"calib", "show", "--run", " 5", NULL},
        {"calib", "--only", "gpu", "--threads", "4294967297", NULL},
        {"bench", "membw", "--threads", " 2", "--isa", "bogus", NULL},
        {"bench", "membw", "--repeats", "3x", "--isa", "bogus", NULL},
    };
    const char *opt[] = {"--run", "--run", "--run", "--threads", "--threads", "--repeats"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        th_run r = run(cmds[i]);
        cr_assert_eq(r.status, 2, "%s %s %s '%s': exit %d, stderr: %s", cmds[i][0], cmds[i][1],
                     cmds[i][2], cmds[i][3], r.status, r.err);
        cr_assert_neq(strstr(r.err, opt[i]), NULL, "%s", r.err);
        cr_assert_eq(th_lines(r.err), 1, "one line: %s", r.err);
        th_run_free(&r);
    }
}

/* A numeric environment variable that does not parse is an error naming it, not a
 * silent default. */
Test(cli, bad_env_number_is_an_error)
{
    th_run r = run((const char *[]){"db", "init", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    const char *bad[] = {"WRITESCOPE_DB_TIMEOUT_MS=abc", "WRITESCOPE_DB_TIMEOUT_MS=-1",
                         "WRITESCOPE_DB_TIMEOUT_MS=250ms", "WRITESCOPE_DB_TIMEOUT_MS=99999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *env[] = {g_env_db, bad[i], NULL};
        r = th_writescope((const char *[]){"db", "show", NULL}, env);
        cr_assert_eq(r.status, 1, "%s: exit %d, stderr: %s", bad[i], r.status, r.err);
        cr_assert_eq(th_lines(r.err), 1, "one line: %s", r.err);
        cr_assert_neq(strstr(r.err, bad[i]), NULL, "names the variable: %s", r.err);
        cr_assert_str_eq(r.out, "");
        th_run_free(&r);
    }
    const char *ok[] = {g_env_db, "WRITESCOPE_DB_TIMEOUT_MS=250", NULL};
    r = th_writescope((const char *[]){"db", "show", NULL}, ok);
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
}

/* A profile file with a key given twice is refused, naming the file (the last value
 * would otherwise silently win). */
Test(cli, profile_import_rejects_duplicate_keys)
{
    char root[4096], ds[4200], dir[64], seed[256], db[256];
    ws_err err = {0};
    cr_assert_eq(ws_root_dir(root, sizeof root, &err), 0, "%s", err.msg);
    snprintf(ds, sizeof ds, "%s/profiles/datasheet.json", root);
    char *text = th_slurp(ds, NULL);
    cr_assert_not_null(text);
    char *brace = strchr(text, '{');
    cr_assert_not_null(brace);
    size_t n = strlen(text) + 32;
    char *dup = malloc(n);
    snprintf(dup, n, "{\"profiles\": [], %s", brace + 1); /* then the real "profiles" */
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "dup.json", dup, seed, sizeof seed);
    snprintf(db, sizeof db, "%s/dup.db", dir);
    expect_fail((const char *[]){"db", "init", "--db", db, "--seed", seed, NULL}, "dup.json");
    expect_fail((const char *[]){"db", "init", "--db", db, "--seed", seed, NULL}, "duplicate");
    free(dup);
    free(text);
}
