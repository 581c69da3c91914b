/* test_cli_run: `writescope run` end to end on a tiny model file: the summary says
 * gpu=modeled:<profile> and labels what is measured and what is modeled, --json parses,
 * --verify checks the merged attention, --db stores the run, its steps and its (step,
 * layer) records in one go, the progress line comes every N steps on stderr; bad model,
 * profile, policy and --gpu values are one-line errors; --cpu-expert-weights int8 runs
 * int8 experts and --verify checks them, on oneDNN's best path and on its AVX2 one. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "steprow.h"

static char g_dir[64], g_model[256], g_db[256], g_env_db[300];
static const char *g_env[] = {g_env_db, NULL};

static void setup(void)
{
    th_tmpdir(g_dir, sizeof g_dir);
    th_write(g_dir, "tiny.json", th_tiny_moe, g_model, sizeof g_model);
    snprintf(g_db, sizeof g_db, "%s/ws.db", g_dir);
    snprintf(g_env_db, sizeof g_env_db, "WRITESCOPE_DB=%s/default.db", g_dir);
}

TestSuite(cli_run, .init = setup);

#define TINY(...)                                                                                  \
    (const char *[])                                                                               \
    {                                                                                              \
        "run", "--model", g_model, "--host", "xeon-gold-5318y", "--batch", "2", "--prompt", "300", \
            "--output", "40", "--window", "256", "--threads", "2", __VA_ARGS__, NULL               \
    }

Test(cli_run, summary_labels_what_is_modeled)
{
    th_run r = th_writescope(TINY("--every", "10"), g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, "gpu=modeled:a100-40gb-pcie"), NULL, "%s", r.out);
    cr_assert_neq(strstr(r.out, "3 of 3 layers (what fits in"), NULL, "%s", r.out);
    cr_assert_neq(strstr(r.out, "CPU measured, GPU modeled"), NULL, "%s", r.out);
    cr_assert_neq(strstr(r.out, "experts: bf16 weights"), NULL, "%s", r.out);
    cr_assert_neq(strstr(r.out, "bytes moved after placement 0"), NULL, "%s", r.out);
    int steps = 0;
    for (const char *p = r.err; (p = strstr(p, "run: step ")); p++)
        steps++;
    cr_assert_eq(steps, 4, "a line every 10 of 40 steps: %s", r.err);
    th_run_free(&r);
}

Test(cli_run, json_verify_and_db)
{
    json_t *v = th_writescope_json(TINY("--verify", "--layers", "2", "--policy", "static", "--r",
                                        "0.25", "--db", g_db, "--json"),
                                   g_env);
    cr_assert_str_eq(json_string_value(json_object_get(v, "gpu")), "modeled:a100-40gb-pcie");
    cr_assert_str_eq(json_string_value(json_object_get(v, "gpu_source")), "modeled");
    cr_assert_str_eq(json_string_value(json_object_get(v, "policy")), "static");
    cr_assert_eq(json_integer_value(json_object_get(v, "layers")), 2);
    cr_assert_str_eq(json_string_value(json_object_get(v, "expert_dtype")), "bf16");
    const char *eb = json_string_value(json_object_get(v, "expert_backend"));
    cr_assert(eb && (strstr(eb, "onednn") || strstr(eb, "sbgemm") || strstr(eb, "fp32")), "%s",
              eb ? eb : "(none)");
    const double e = json_number_value(json_object_get(v, "verify_max_err"));
    cr_assert(e <= 2e-3, "verify %g", e);
    cr_assert_eq(json_integer_value(json_object_get(v, "bytes_moved")), 0);
    cr_assert_eq(json_array_size(json_object_get(v, "steps")), 40);
    cr_assert_eq(json_array_size(json_object_get(v, "step_layers")), 80);
    /* a step and a layer in JSON have the database's column names, each of them */
    const json_t *s0 = json_array_get(json_object_get(v, "steps"), 0);
    const json_t *l0 = json_array_get(json_object_get(v, "step_layers"), 0);
    cr_assert_eq(json_object_size(s0), ws_cols_count(ws_step_cols));
    cr_assert_eq(json_object_size(l0), ws_cols_count(ws_layer_cols));
    for (int i = 0; ws_step_cols[i].name; i++)
        cr_assert_not_null(json_object_get(s0, ws_step_cols[i].name), "%s", ws_step_cols[i].name);
    cr_assert(json_is_number(json_object_get(s0, "verify_err")));
    cr_assert_str_eq(json_string_value(json_object_get(l0, "gpu_source")), "modeled");
    json_decref(v);
    cr_assert_eq(th_count_file(g_db, "SELECT count(*) FROM run_runs"), 1);
    cr_assert_eq(th_count_file(g_db, "SELECT count(*) FROM run_steps"), 40);
    /* the CPU's phases of a step are columns of the step row */
    cr_assert_eq(th_count_file(g_db, "SELECT count(*) FROM run_steps WHERE cpu_attn_s >= 0 AND "
                                     "experts_s > 0 AND overhead_s >= 0 AND tokens = batch"),
                 40);
    cr_assert_eq(th_count_file(g_db, "SELECT count(*) FROM run_layers"), 80);
    cr_assert_eq(th_count_file(g_db, "SELECT count(*) FROM run_layers WHERE gpu_source = "
                                     "'modeled' AND cpu_attn_s >= 0 AND pred_cpu_s >= 0"),
                 80);
    cr_assert_eq(th_count_file(g_db, "SELECT count(*) FROM run_runs WHERE gpu = "
                                     "'modeled:a100-40gb-pcie' AND verify_max_err <= 2e-3"),
                 1);
}

Test(cli_run, bad_names_are_one_line_errors)
{
    th_expect_fail((const char *[]){"run", "--model", "no-such-model", NULL}, 1, "no-such-model",
                   g_env);
    th_expect_fail(TINY("--policy", "nope"), 1, "nope", g_env);
    /* --layers K is held to the RAM as the depth chosen without it is */
    th_run big = th_writescope((const char *[]){"run", "--model", "qwen3-30b-a3b", "--batch", "64",
                                                "--prompt", "1048576", "--output", "2", "--layers",
                                                "48", NULL},
                               g_env);
    cr_assert_eq(big.status, 1, "%s", big.err);
    cr_assert(strstr(big.err, "48 layers of batch 64 x 1048578 tokens do not fit"), "%s", big.err);
    th_run_free(&big);
    th_expect_fail(TINY("--policy", "gpu-only"), 2, "gpu-only", g_env);
    th_expect_fail(TINY("--gpu", "modeled:no-such-gpu"), 1, "no-such-gpu", g_env);
    th_expect_fail(TINY("--gpu", "h100"), 2, "modeled:<profile>", g_env);
    th_expect_fail((const char *[]){"run", "--model", g_model, "--host", "no-such-host", NULL}, 1,
                   "no-such-host", g_env);
    th_expect_fail(TINY("--batch", "0"), 2, "--batch", g_env);
    /* without a CUDA device the run fails with the reason on its last line; with one it runs
     * and says the GPU half was measured on it */
    th_run r;
    if (th_cuda_device_present()) { /* the tiny model at a head size the CUDA kernels have */
        char moe128[1024], path[256];
        const char *hd = strstr(th_tiny_moe, "\"head_dim\": 32");
        cr_assert_not_null(hd);
        snprintf(moe128, sizeof moe128, "%.*s\"head_dim\": 128%s", (int)(hd - th_tiny_moe),
                 th_tiny_moe, hd + strlen("\"head_dim\": 32"));
        th_write(g_dir, "tiny128.json", moe128, path, sizeof path);
        r = th_writescope((const char *[]){"run", "--model", path, "--host", "xeon-gold-5318y",
                                           "--batch", "2", "--prompt", "300", "--output", "4",
                                           "--gpu", "cuda", "--verify", NULL},
                          g_env);
        cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
        cr_assert(strstr(r.out, "gpu=cuda:") && strstr(r.out, "verify: "), "%s", r.out);
    } else {
        r = th_writescope(TINY("--gpu", "cuda"), g_env);
        cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
        const char *last = strstr(r.err, "writescope: ");
        cr_assert(last && strcasestr(last, "cuda") && th_lines(last) == 1, "%s", r.err);
        cr_assert_str_eq(r.out, "");
    }
    th_run_free(&r);
    th_expect_fail((const char *[]){"run", NULL}, 2, "--model", g_env);
}

/* --cpu-expert-weights int8: the experts run in int8 and --verify checks them against the
 * reference, on oneDNN's best path here and (a child process capped by DNNL_MAX_CPU_ISA) on
 * its AVX2 one, whose 7-bit weights the run quantizes for; the database records the dtype;
 * a format no kernel runs, or no format at all, is a one-line error naming it. */
Test(cli_run, int8_experts_run_and_verify)
{
    char env_isa[] = "DNNL_MAX_CPU_ISA=AVX2";
    const char *env_avx2[] = {g_env_db, env_isa, NULL};
    const char *const *envs[2] = {g_env, env_avx2};
    for (int k = 0; k < 2; k++) {
        json_t *v = th_writescope_json(TINY("--cpu-expert-weights", "int8", "--verify", "--layers",
                                            "1", "--output", "4", "--db", g_db, "--json"),
                                       envs[k]);
        cr_assert_str_eq(json_string_value(json_object_get(v, "expert_dtype")), "int8");
        const char *eb = json_string_value(json_object_get(v, "expert_backend"));
        cr_assert(eb && !strncmp(eb, "onednn ", 7), "%s", eb ? eb : "(none)");
        if (k)
            cr_assert(strstr(eb, " avx2"), "%s", eb);
        const double ev = json_number_value(json_object_get(v, "expert_verify"));
        cr_assert(ev >= 0 && ev <= 1, "int8 experts off by %g x the bound", ev);
        cr_assert(json_number_value(json_object_get(v, "verify_max_err")) <= 2e-3);
        json_decref(v);
    }
    cr_assert_eq(th_count_file(g_db, "SELECT count(*) FROM run_runs WHERE params LIKE "
                                     "'%\"expert_dtype\": \"int8\"%'"),
                 2);
    th_run r = th_writescope(TINY("--cpu-expert-weights", "int8"), g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, "experts: int8 weights"), NULL, "%s", r.out);
    th_run_free(&r);
    th_expect_fail(TINY("--cpu-expert-weights", "q4_k_m"), 1, "q4_k_m", g_env);
    th_expect_fail(TINY("--cpu-expert-weights", "q9"), 2, "q9", g_env);
}
