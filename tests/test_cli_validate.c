/* test_cli_validate: `writescope validate` end to end: on a tiny model file the table names
 * every quantity and labels the GPU as modeled; --json has the quantities with finite errors,
 * the terms and the verdict; --save stores the comparison linked to the runtime runs and the
 * simulation; a shipped MLA model (DeepSeek-V2-Lite, two layers) runs too; bad arguments are
 * one-line errors with nothing on stdout. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

static char g_dir[64], g_model[256], g_db[256], g_env_db[300];
static const char *g_env[] = {g_env_db, NULL};

static void setup(void)
{
    th_tmpdir(g_dir, sizeof g_dir);
    th_write(g_dir, "tiny.json", th_tiny_moe, g_model, sizeof g_model);
    snprintf(g_db, sizeof g_db, "%s/ws.db", g_dir);
    snprintf(g_env_db, sizeof g_env_db, "WRITESCOPE_DB=%s/default.db", g_dir);
}

TestSuite(cli_validate, .init = setup);

#define TINY(...)                                                                                  \
    (const char *[])                                                                               \
    {                                                                                              \
        "validate", "--model", g_model, "--host", "xeon-gold-5318y", "--batch", "2", "--prompt",   \
            "300", "--output", "6", "--layers", "2", "--threads", "2", __VA_ARGS__, NULL           \
    }

Test(cli_validate, table_labels_what_is_modeled)
{
    th_run r = th_writescope(TINY("--repeat", "2"), g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *q[] = {"step_time",
                       "cpu_attn",
                       "experts",
                       "cpu_share",
                       "gpu_half",
                       "verdict:",
                       "gpu=modeled:a100-40gb-pcie",
                       "CPU measured",
                       "(NOT this machine)"};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        cr_assert_neq(strstr(r.out, q[i]), NULL, "'%s' missing: %s", q[i], r.out);
    cr_assert_neq(strstr(r.err, "runtime run 2/2"), NULL, "progress on stderr: %s", r.err);
    cr_assert_neq(strstr(r.err, "simulating"), NULL, "%s", r.err);
    th_run_free(&r);
}

Test(cli_validate, json_and_save)
{
    const char *env[] = {g_env_db, NULL};
    json_t *v = th_writescope_json(TINY("--json", "--db", g_db), env);
    cr_assert_str_eq(json_string_value(json_object_get(v, "gpu")), "modeled:a100-40gb-pcie");
    cr_assert_str_eq(json_string_value(json_object_get(v, "gpu_source")), "modeled");
    cr_assert_eq(json_integer_value(json_object_get(v, "layers")), 2);
    json_t *qs = json_object_get(v, "quantities");
    const char *names[] = {"step_time", "cpu_attn", "experts", "cpu_share", "gpu_half"};
    for (int i = 0; i < 5; i++) {
        json_t *x = json_object_get(qs, names[i]);
        cr_assert_not_null(x, "%s", names[i]);
        cr_assert(json_is_number(json_object_get(x, "mean_ape_pct")), "%s", names[i]);
        cr_assert(json_is_number(json_object_get(x, "p95_ape_pct")), "%s", names[i]);
        cr_assert(isfinite(json_number_value(json_object_get(x, "mean_ape_pct"))));
        cr_assert(json_is_null(json_object_get(x, "noise_mean_ape_pct")), "one run: no noise");
        cr_assert_str_eq(json_string_value(json_object_get(x, "simulator_source")), "modeled");
    }
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(qs, "gpu_half"), "runtime_source")),
        "modeled");
    cr_assert(json_array_size(json_object_get(v, "terms")) >= 5);
    cr_assert(json_string_length(json_object_get(v, "verdict")) > 0);
    const long long id = json_integer_value(json_object_get(v, "validation_id"));
    cr_assert(id > 0);
    json_decref(v);
    cr_assert_eq(th_count_file(g_db, "SELECT count(*) FROM validate_runs v JOIN run_runs r ON "
                                     "r.id = v.run_id JOIN sim_runs s ON s.id = v.sim_run_id"),
                 1);
    cr_assert_eq(th_count_file(g_db, "SELECT count(*) FROM validate_points WHERE quantity = "
                                     "'cpu_attn'"),
                 12);
}

Test(cli_validate, shipped_mla_model)
{
    json_t *v = th_writescope_json((const char *[]){"validate", "--model", "deepseek-v2-lite",
                                                    "--host", "xeon-gold-5318y", "--batch", "1",
                                                    "--prompt", "600", "--output", "3", "--layers",
                                                    "2", "--threads", "2", "--json", NULL},
                                   g_env);
    json_t *ex = json_object_get(json_object_get(v, "quantities"), "experts");
    /* layer 0 is dense (first_k_dense_replace): routed experts only in layer 1, over the
     * 3 - 1 steps past the warm-up */
    cr_assert_eq(json_integer_value(json_object_get(ex, "n")), 2);
    cr_assert_eq(json_integer_value(json_object_get(v, "warmup_steps")), 1);
    json_decref(v);
}

Test(cli_validate, bad_arguments_are_one_line_errors)
{
    th_expect_fail((const char *[]){"validate", NULL}, 2, "--model", g_env);
    th_expect_fail(TINY("--repeat", "0"), 2, "--repeat", g_env);
    th_expect_fail(TINY("--gpu", "h100"), 2, "modeled:<profile>", g_env);
    th_expect_fail(TINY("--policy", "gpu-only"), 2, "gpu-only", g_env);
    th_expect_fail(TINY("--policy", "nope"), 1, "nope", g_env);
    th_expect_fail(TINY("--plot", "out.txt"), 2, "--plot", g_env);
    th_expect_fail(TINY("--db", g_db, "--save"), 2, "--save", g_env);
    th_expect_fail(TINY("--calibrate"), 2, "--calibrate", g_env);
    th_expect_fail(TINY("--warmup", "6"), 2, "warm-up", g_env);
    th_expect_fail(TINY("--gpu", "modeled:no-such-gpu"), 1, "no-such-gpu", g_env);
    th_expect_fail((const char *[]){"validate", "--model", "no-such-model", NULL}, 1,
                   "no-such-model", g_env);
}

/* Points where neither side measured anything (no KV on the CPU: no CPU attention, a share
 * of 0) are no evidence of agreement: left out, and a quantity left with none is "n/a"
 * (JSON null), not "0.0%". */
Test(cli_validate, both_zero_points_have_no_error)
{
    json_t *v = th_writescope_json(TINY("--policy", "static", "--r", "0", "--json"), g_env);
    json_t *qs = json_object_get(v, "quantities");
    const char *none[] = {"cpu_attn", "cpu_share"};
    for (int i = 0; i < 2; i++) {
        json_t *x = json_object_get(qs, none[i]);
        cr_assert_eq(json_integer_value(json_object_get(x, "n")), 0, "%s", none[i]);
        cr_assert(json_is_null(json_object_get(x, "mean_ape_pct")), "%s: not null", none[i]);
        cr_assert(json_is_null(json_object_get(x, "p95_ape_pct")), "%s: not null", none[i]);
    }
    cr_assert_gt(json_integer_value(json_object_get(json_object_get(qs, "step_time"), "n")), 0);
    json_decref(v);
    th_run r = th_writescope(TINY("--policy", "static", "--r", "0"), g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *row = strstr(r.out, "\ncpu_attn ");
    cr_assert_not_null(row, "%s", r.out);
    const char *eol = strchr(row + 1, '\n');
    cr_assert(strstr(row, "n/a") && strstr(row, "n/a") < eol, "%.*s", (int)(eol - row), row);
    cr_assert(!strstr(row, "0.0%") || strstr(row, "0.0%") > eol, "%.*s", (int)(eol - row), row);
    th_run_free(&r);
}
