/* test_cli: end-to-end runs of bin/writescope: the README's commands, --json output,
 * --help everywhere, and one-line errors with a non-zero exit for bad input. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "store.h"
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

/* Every command's --help has its options part, generated from its option table (a table
 * that declares a name twice aborts instead). */
Test(cli, help_lists_options_of_every_command)
{
    const char *cmds[][2] = {{"model", NULL},     {"db", NULL},       {"device", NULL},
                             {"calib", NULL},     {"plot", NULL},     {"sim", NULL},
                             {"bench", NULL},     {"run", NULL},      {"validate", NULL},
                             {"plan", NULL},      {"trace", "stats"}, {"trace", "gen"},
                             {"trace", "convert"}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        const char *args[4] = {cmds[i][0], cmds[i][1] ? cmds[i][1] : "--help",
                               cmds[i][1] ? "--help" : NULL, NULL};
        th_run r = run(args);
        cr_assert_eq(r.status, 0, "%s --help: exit %d, stderr: %s", cmds[i][0], r.status, r.err);
        cr_assert_neq(strstr(r.out, "usage: writescope"), NULL, "%s", r.out);
        cr_assert_neq(strstr(r.out, "\noptions:\n  --"), NULL, "%s: %s", cmds[i][0], r.out);
        cr_assert_str_eq(r.err, "");
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
    cr_assert_eq(json_array_size(profiles), th_datasheet_profiles(NULL));
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
    /* Every profile and parameter of the datasheet comes back out of the export. */
    size_t n_params, n_profiles = th_datasheet_profiles(&n_params);
    char wrote[64];
    snprintf(wrote, sizeof wrote, "wrote %zu profile(s)", n_profiles);
    th_run r = run((const char *[]){"db", "init", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, wrote), NULL, "%s", r.out);
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
    cr_assert_eq(json_array_size(json_object_get(v, "profiles")), n_profiles);
    cr_assert_eq(json_array_size(json_object_get(v, "profile_params")), n_params);
    const char *sim[] = {"sim_runs", "sim_requests", "sim_steps"};
    for (int i = 0; i < 3; i++)
        cr_assert(json_is_array(json_object_get(v, sim[i])), "%s", sim[i]);
    json_decref(v);
}

/* A database of the previous schema (3): read-only commands refuse it untouched, `db init`
 * migrates it (adding the simulation tables), then they read it. */
Test(cli, db_init_migrates_schema_3)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/v3.db", dir);
    const char *files[] = {"store/schema/001_initial.sql", "store/schema/002_fit_bounds.sql",
                           "store/schema/003_profile_devices.sql"};
    for (int i = 0; i < 3; i++) {
        char *sql = th_slurp(files[i], NULL);
        cr_assert_not_null(sql, "run the tests from the project folder");
        th_exec_sql(path, sql);
        free(sql);
    }
    th_exec_sql(path, "PRAGMA user_version = 3");
    expect_fail((const char *[]){"db", "export", "--db", path, NULL}, "schema version 3 is older");
    th_run r = run((const char *[]){"db", "init", "--db", path, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    char want[32];
    snprintf(want, sizeof want, "(schema %d)", WS_SCHEMA_VERSION);
    cr_assert_neq(strstr(r.out, want), NULL, "%s", r.out);
    th_run_free(&r);
    json_t *v = run_json((const char *[]){"db", "export", "--db", path, NULL});
    cr_assert_eq(json_integer_value(json_object_get(v, "schema_version")), WS_SCHEMA_VERSION);
    cr_assert_eq(json_array_size(json_object_get(v, "sim_runs")), 0);
    cr_assert(json_is_array(json_object_get(v, "sim_steps")));
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
    char missing[300];
    snprintf(missing, sizeof missing, "%s/none.json", dir);
    expect_fail((const char *[]){"db", "init", "--db", db, "--seed", missing, NULL}, "cannot open");
}

/* A seed that fails leaves no database behind when the command created it, and one it
 * found as it was (its datasheet profiles only). */
Test(cli, db_init_failed_seed_leaves_no_new_database)
{
    char dir[64], seed[256], db[256];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "seed.json", "{\"profiles\": [ {\"name\": \"x\"} ]}", seed, sizeof seed);
    snprintf(db, sizeof db, "%s/fresh.db", dir);
    expect_fail((const char *[]){"db", "init", "--db", db, "--seed", seed, NULL}, "seed.json");
    struct stat st;
    cr_assert_neq(stat(db, &st), 0, "%s was left behind", db);
    cr_assert_eq(th_dir_entries(dir), 1, "only the seed file is left");
    th_run r = run((const char *[]){"db", "init", "--db", db, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    expect_fail((const char *[]){"db", "init", "--db", db, "--seed", seed, NULL}, "seed.json");
    json_t *v = run_json((const char *[]){"db", "show", "--db", db, "--json", NULL});
    cr_assert_eq(json_array_size(json_object_get(v, "profiles")), th_datasheet_profiles(NULL));
    json_decref(v);
}

/* A seeded profile whose values no hardware has is refused with one line naming the key, the
 * value and the bound, and nothing is written. */
Test(cli, db_init_seed_refuses_unphysical_values)
{
    static const struct {
        const char *kind, *param, *needle;
    } bad[] = {
        {"host", "\"sockets\": {\"value\": 1e9",
         "sockets = 1000000000: a count of CPU sockets is [1, 16]"},
        {"host", "\"cores\": {\"value\": 0", "cores = 0:"},
        {"host", "\"cores\": {\"value\": 2.5",
         "cores = 2.5: a count of CPU cores is [1, 4096], a whole number"},
        {"host", "\"dram_eff\": {\"value\": -0.5", "dram_eff = -0.5: an efficiency"},
        {"host", "\"flops_eff\": {\"value\": 0",
         "flops_eff = 0: an efficiency (a fraction of the peak) is (0, 1]"},
        {"host", "\"mem_bytes\": {\"value\": 0", "mem_bytes = 0: a memory size (B) is [1e+06,"},
        {"gpu", "\"hbm_eff\": {\"value\": 5", "hbm_eff = 5:"},
        {"gpu", "\"hbm_bw\": {\"value\": 5e-324", "hbm_bw = 4.9406564584124654e-324:"},
        {"gpu", "\"link.h2d.bandwidth\": {\"value\": 5e-324", "link.h2d.bandwidth ="},
    };
    char dir[64], seed[256], db[256], text[1024];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    th_run r = run((const char *[]){"db", "init", "--db", db, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text,
                 "{\"profiles\": [{\"name\": \"odd\", \"kind\": \"%s\", \"description\": \"\", "
                 "\"params\": {%s, \"unit\": \"1\", \"source\": \"datasheet\", "
                 "\"reference\": \"\"}}}]}",
                 bad[i].kind, bad[i].param);
        th_write(dir, "odd.json", text, seed, sizeof seed);
        expect_fail((const char *[]){"db", "init", "--db", db, "--seed", seed, NULL},
                    bad[i].needle);
    }
    char q[] = "SELECT count(*) FROM profiles WHERE name = 'odd'";
    cr_assert_eq(th_count_file(db, q), 0);
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

/* A schema-1 database as an older writescope left it, at dir/v1.db. */
static void old_schema_db(const char *dir, char *path, size_t cap)
{
    snprintf(path, cap, "%s/v1.db", dir);
    char *sql = th_slurp("store/schema/001_initial.sql", NULL);
    cr_assert_not_null(sql, "run the tests from the project folder");
    th_exec_sql(path, sql);
    th_exec_sql(path, "PRAGMA user_version = 1");
    free(sql);
}

/* Read-only commands on a --db that does not exist: one-line error, nothing created. */
Test(cli, read_only_commands_never_create)
{
    char dir[64], db[256], sub[128];
    th_tmpdir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/typo", dir);
    snprintf(db, sizeof db, "%s/ws.db", sub);
    const char *const cmds[][6] = {{"db", "show", "--db", db, NULL},
                                   {"db", "show", "h200", "--db", db, NULL},
                                   {"db", "export", "--db", db, NULL},
                                   {"calib", "show", "--db", db, NULL},
                                   {"plot", "calib", "--db", db, NULL}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        th_run r = run(cmds[i]);
        cr_assert_eq(r.status, 1, "%s %s: exit %d", cmds[i][0], cmds[i][1], r.status);
        cr_assert_eq(th_lines(r.err), 1, "%s", r.err);
        cr_assert_neq(strstr(r.err, "database does not exist"), NULL, "%s", r.err);
        cr_assert_neq(strstr(r.err, db), NULL, "%s", r.err);
        cr_assert_eq(access(sub, F_OK), -1, "%s %s created %s", cmds[i][0], cmds[i][1], sub);
        th_run_free(&r);
    }
}

/* An empty file or an older schema, opened by a read-only command: refused, untouched. */
Test(cli, read_only_commands_leave_files_alone)
{
    char dir[64], empty[256], old[256];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "empty.db", "", empty, sizeof empty);
    old_schema_db(dir, old, sizeof old);
    size_t old_len;
    char *old_bytes = th_slurp(old, &old_len);
    const char *const verbs[][2] = {{"db", "show"}, {"db", "export"}, {"calib", "show"},
                                    {"plot", "calib"}};
    for (size_t i = 0; i < 4; i++) {
        const char *a1[] = {verbs[i][0], verbs[i][1], "--db", empty, NULL};
        th_run r = run(a1);
        cr_assert_eq(r.status, 1, "%s %s on an empty file: exit %d", verbs[i][0], verbs[i][1], r.status);
        cr_assert_eq(th_lines(r.err), 1, "%s", r.err);
        cr_assert_neq(strstr(r.err, "empty file"), NULL, "%s", r.err);
        th_run_free(&r);
        cr_assert(th_same_file_bytes(empty, "", 0), "%s %s wrote to the empty file", verbs[i][0],
                  verbs[i][1]);
        const char *a2[] = {verbs[i][0], verbs[i][1], "--db", old, NULL};
        r = run(a2);
        cr_assert_eq(r.status, 1, "%s %s on schema 1: exit %d", verbs[i][0], verbs[i][1], r.status);
        cr_assert_eq(th_lines(r.err), 1, "%s", r.err);
        cr_assert_neq(strstr(r.err, "older"), NULL, "%s", r.err);
        th_run_free(&r);
        cr_assert(th_same_file_bytes(old, old_bytes, old_len), "%s %s migrated the file",
                  verbs[i][0], verbs[i][1]);
    }
    free(old_bytes);
}

/* No --db and no database yet: the embedded datasheet profiles, said on stderr, no file. */
Test(cli, read_only_without_database_uses_embedded_profiles)
{
    const char *db = strchr(g_env_db, '=') + 1;
    th_run r = run((const char *[]){"db", "show", "--json", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.err, "embedded datasheet profiles"), NULL, "%s", r.err);
    cr_assert_neq(strstr(r.out, "h100-sxm"), NULL);
    th_run_free(&r);
    cr_assert_eq(access(db, F_OK), -1, "db show created %s", db);
    r = run((const char *[]){"db", "show", "h200", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, "hbm_bw"), NULL, "%s", r.out);
    th_run_free(&r);
    r = run((const char *[]){"calib", "show", NULL});
    cr_assert_eq(r.status, 1);
    cr_assert_eq(th_lines(r.err), 1, "%s", r.err);
    cr_assert_neq(strstr(r.err, "no calibration run yet"), NULL, "%s", r.err);
    th_run_free(&r);
    cr_assert_eq(access(db, F_OK), -1, "calib show created %s", db);
}

Test(cli, db_show_profile_by_name)
{
    json_t *v = run_json((const char *[]){"db", "show", "h100-sxm", "--json", NULL});
    json_t *p = json_object_get(v, "profile");
    cr_assert_str_eq(json_string_value(json_object_get(p, "name")), "h100-sxm");
    cr_assert_str_eq(json_string_value(json_object_get(p, "datasheet")), "h100-sxm");
    cr_assert(json_is_null(json_object_get(p, "calibrated")));
    cr_assert_eq(json_array_size(json_object_get(p, "params")), 25);
    json_decref(v);
    expect_fail((const char *[]){"db", "show", "no-such-gpu", NULL}, "no profile named 'no-such-gpu'");
    expect_fail((const char *[]){"db", "show", "gpu:Nothing", "--json", NULL}, "no profile named");
}

/* `db export --output` replaces regular files only and never leaves its temporary file. */
Test(cli, db_export_output_refuses_non_regular_targets)
{
    char dir[64], target[256], link[256], fifo[256], folder[256], inner[300];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "target.txt", "keep me\n", target, sizeof target);
    snprintf(link, sizeof link, "%s/link.json", dir);
    cr_assert_eq(symlink(target, link), 0);
    snprintf(fifo, sizeof fifo, "%s/fifo.json", dir);
    cr_assert_eq(mkfifo(fifo, 0644), 0);
    snprintf(folder, sizeof folder, "%s/folder.json", dir);
    cr_assert_eq(mkdir(folder, 0755), 0);
    th_write(folder, "x", "x", inner, sizeof inner); /* a rename over it would fail */
    const char *const targets[] = {link, fifo, folder};
    const char *const what[] = {"symbolic link", "FIFO", "folder"};
    for (int i = 0; i < 3; i++) {
        th_run r = run((const char *[]){"db", "export", "--output", targets[i], NULL});
        cr_assert_eq(r.status, 1, "%s: exit %d", targets[i], r.status);
        cr_assert_eq(th_lines(r.err), 1, "%s", r.err);
        cr_assert_neq(strstr(r.err, what[i]), NULL, "%s", r.err);
        th_run_free(&r);
    }
    struct stat st;
    cr_assert(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "the link was replaced");
    cr_assert(th_same_file_bytes(target, "keep me\n", 8), "written through the link");
    cr_assert(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO was replaced");
    cr_assert(lstat(folder, &st) == 0 && S_ISDIR(st.st_mode));
    char dev[300];
    snprintf(dev, sizeof dev, "%s/dev.json", dir);
    const char *dev_kind = th_device_like(dev);
    th_run r = run((const char *[]){"db", "export", "--output", dev, NULL});
    cr_assert_eq(r.status, 1, "%s: exit %d", dev, r.status);
    cr_assert_neq(strstr(r.err, dev_kind), NULL, "%s", r.err);
    th_run_free(&r);
    cr_assert(th_is_device_like(dev));
    /* A failing export (unknown table) leaves nothing either. */
    char out[300];
    snprintf(out, sizeof out, "%s/out.csv", dir);
    expect_fail((const char *[]){"db", "export", "--format", "csv", "--table", "nope", "--output", out, NULL},
                "unknown table");
    cr_assert_eq(th_dir_entries(dir), 5, "a temporary file was left in %s", dir);
    /* A regular file is replaced whole. */
    r = run((const char *[]){"db", "export", "--format", "csv", "--table", "hosts", "--output", target, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    cr_assert_eq(th_dir_entries(dir), 5);
    char *text = th_slurp(target, NULL);
    cr_assert_eq(strncmp(text, "id,fingerprint", 14), 0, "%s", text);
    free(text);
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

/* `db export --format json --table T` exports T alone (it used to export every table);
 * an unknown T is an error naming the tables. */
Test(cli, db_export_json_table_is_that_table)
{
    th_run r = run((const char *[]){"db", "init", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    json_t *v =
        run_json((const char *[]){"db", "export", "--format", "json", "--table", "profiles", NULL});
    cr_assert_eq(json_object_size(v), 2, "schema_version and profiles only");
    cr_assert(json_is_integer(json_object_get(v, "schema_version")));
    size_t n_params, n_profiles = th_datasheet_profiles(&n_params);
    cr_assert_eq(json_array_size(json_object_get(v, "profiles")), n_profiles);
    json_decref(v);
    v = run_json((const char *[]){"db", "export", "--table", "profile_params", NULL});
    cr_assert_eq(json_object_size(v), 2);
    cr_assert_eq(json_array_size(json_object_get(v, "profile_params")), n_params);
    json_decref(v);
    expect_fail((const char *[]){"db", "export", "--table", "nope", NULL}, "unknown table 'nope'");
}

/* Text stored in the database reaches the terminal escaped: an ESC sequence or a newline in
 * a profile's description, a parameter's unit or reference cannot drive the terminal or
 * fake a line of `db show`. */
Test(cli, db_show_escapes_stored_text)
{
    th_run r = run((const char *[]){"db", "init", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    const char *db = strchr(g_env_db, '=') + 1;
    th_exec_sql(db, "UPDATE profiles SET description = 'evil' || char(27) || '[2J' || char(10) || "
                    "'fake line' || char(13) WHERE name = 'h200';"
                    "UPDATE profile_params SET reference = 'ref' || char(27) || ']0;title' || "
                    "char(7) || char(155) || '31m', unit = 'B' || char(10) WHERE key = 'mem_bytes' "
                    "AND profile_id = (SELECT id FROM profiles WHERE name = 'h200');");
    const char *const cmds[][4] = {{"db", "show", NULL}, {"db", "show", "h200", NULL}};
    for (int i = 0; i < 2; i++) {
        r = run(cmds[i]);
        cr_assert_eq(r.status, 0, "%s", r.err);
        cr_assert_null(strchr(r.out, 27), "an ESC reached the terminal: %s", r.out);
        cr_assert_null(strchr(r.out, 7), "a BEL reached the terminal");
        cr_assert_null(strchr(r.out, '\r'), "a CR reached the terminal");
        cr_assert_null(strstr(r.out, "\xc2\x9b"), "a C1 CSI reached the terminal");
        cr_assert_null(strstr(r.out, "\nfake line"), "a stored newline started a line");
        cr_assert_neq(strstr(r.out, "evil\\x1b[2J\\nfake line\\r"), NULL, "%s", r.out);
        cr_assert_neq(strstr(r.out, "ref\\x1b]0;title\\x07\\x9b31m"), NULL, "%s", r.out);
        th_run_free(&r);
    }
}

/* A bad value is named with one dash pair: the message of an option's own wording says
 * "--run needs ...", never "----run needs ...". */
Test(cli, bad_values_name_the_option_once)
{
    const char *const cmds[][8] = {
        {"calib", "show", "--run", "x", NULL},
        {"plot", "share", "--run", "x", NULL},
        {"sim", "--chrome-trace-limit", "x", NULL},
        {"sim", "--seed", "-1", NULL},
        {"plan", "--seed", "x", NULL},
        {"run", "--seed", "x", NULL},
        {"validate", "--seed", "x", NULL},
        {"trace", "gen", "--seed", "x", NULL},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        th_run r = th_writescope(cmds[i], NULL);
        cr_assert_eq(r.status, 2, "%s %s: %d %s", cmds[i][0], cmds[i][1], r.status, r.err);
        cr_assert_null(strstr(r.err, "----"), "%s", r.err);
        cr_assert(strstr(r.err, " --") != NULL, "%s", r.err);
        const char *nl = strchr(r.err, '\n');
        cr_assert(nl && !nl[1], "one line: %s", r.err);
        th_run_free(&r);
    }
}
