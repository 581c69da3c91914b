/* test_cli_plan: `writescope plan` end to end: a small users plan prints its table labelled
 * modeled, --json has one result per GPU x policy and a ranking by cost, --db stores the plan
 * and --plot draws it; bad SLO and price arguments (negative, non-numeric, no '=', a profile
 * not among --gpu) are one-line usage errors with nothing on stdout. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers.h"

static char g_dir[64], g_env_db[128];
static const char *g_env[] = {g_env_db, NULL};

static void fresh_db(void)
{
    th_tmpdir(g_dir, sizeof g_dir);
    snprintf(g_env_db, sizeof g_env_db, "WRITESCOPE_DB=%s/ws.db", g_dir);
}

TestSuite(cli_plan, .init = fresh_db);

#define BASE "plan", "--model", "qwen3-30b-a3b", "--host", "xeon-gold-5318y"
#define USERS "--prompt", "16384", "--output", "16"

Test(cli_plan, users_table_json_db_and_plot)
{
    th_run r = th_writescope((const char *[]){BASE, "--gpu", "v100-32gb-pcie", USERS,
                                              "--slo-tpot", "300ms", "--policy",
                                              "writescope,stream", "--fit-batches", "1,4", NULL},
                             g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, "MODELED"), NULL, "%s", r.out);
    cr_assert_neq(strstr(r.out, "max users"), NULL, "%s", r.out);
    cr_assert_neq(strstr(r.out, "v100-32gb-pcie: writescope"), NULL, "%s", r.out);
    cr_assert_neq(strstr(r.out, "OOM frontier"), NULL, "%s", r.out);
    th_run_free(&r);

    char db[128], png[128];
    snprintf(db, sizeof db, "%s/plan.db", g_dir);
    snprintf(png, sizeof png, "%s/plan.png", g_dir);
    const int plot = th_have_gnuplot(); /* without it, the same run without the figure */
    json_t *v = th_writescope_json(
        (const char *[]){BASE, "--gpu", "v100-32gb-pcie", "--gpu", "a100-40gb-pcie", USERS,
                         "--slo-tpot", "0.3", "--slo-pct", "p90", "--policy", "writescope,stream",
                         "--fit-batches", "none", "--price", "v100-32gb-pcie=1.5", "--price",
                         "a100-40gb-pcie=3", "--db", db, "--json", plot ? "--plot" : NULL, png,
                         NULL},
        g_env);
    cr_assert_str_eq(json_string_value(json_object_get(v, "source")), "modeled");
    cr_assert_str_eq(json_string_value(json_object_get(v, "load")), "users");
    cr_assert_eq(json_real_value(json_object_get(v, "slo_pct")), 90);
    json_t *res = json_object_get(v, "results");
    cr_assert_eq(json_array_size(res), 4);
    size_t i;
    json_t *x;
    json_array_foreach(res, i, x)
    {
        const double load = json_real_value(json_object_get(x, "max_load"));
        cr_assert_eq(load, floor(load), "users are whole: %g", load);
        if (load > 0)
            cr_assert(json_is_real(json_object_get(x, "cost_per_mtok")));
    }
    cr_assert_eq(json_array_size(json_object_get(v, "frontier")), 0);
    cr_assert_eq(json_array_size(json_object_get(v, "ranking_cost")), 2);
    cr_assert_gt(json_integer_value(json_object_get(v, "plan_id")), 0);
    json_decref(v);
    struct stat sb;
    if (plot) {
        cr_assert_eq(stat(png, &sb), 0, "the figure was drawn");
        cr_assert_gt(sb.st_size, 1000);
    }
    json_t *e = th_writescope_json((const char *[]){"db", "export", "--db", db, NULL}, NULL);
    cr_assert_eq(json_array_size(json_object_get(e, "plan_runs")), 1);
    cr_assert_eq(json_array_size(json_object_get(e, "plan_results")), 4);
    cr_assert_gt(json_array_size(json_object_get(e, "plan_points")), 4);
    json_decref(e);
}

Test(cli_plan, bad_slo_and_price_are_one_line_errors)
{
    const char *gpu[] = {"--gpu", "v100-32gb-pcie"};
#define P(...) (const char *[]){BASE, gpu[0], gpu[1], USERS, __VA_ARGS__, NULL}
    th_expect_fail(P("--slo-tpot", "-0.2"), 2, "--slo-tpot '-0.2'", g_env);
    th_expect_fail(P("--slo-tpot", "fast"), 2, "--slo-tpot 'fast'", g_env);
    th_expect_fail(P("--slo-ttft", "0"), 2, "--slo-ttft '0'", g_env);
    th_expect_fail(P("--slo-tpot", "0.2", "--slo-pct", "p101"), 2, "--slo-pct 'p101'", g_env);
    th_expect_fail(P("--slo-tpot", "0.2", "--slo-pct", "q99"), 2, "--slo-pct 'q99'", g_env);
    th_expect_fail(P("--output", "4"), 2, "give an SLO", g_env);
    th_expect_fail(P("--slo-tpot", "0.2", "--price", "v100-32gb-pcie"), 2, "PROFILE=USD_PER_HOUR",
                   g_env);
    th_expect_fail(P("--slo-tpot", "0.2", "--price", "v100-32gb-pcie=-1"), 2, "dollars per hour",
                   g_env);
    th_expect_fail(P("--slo-tpot", "0.2", "--price", "v100-32gb-pcie=cheap"), 2, "dollars per hour",
                   g_env);
    th_expect_fail(P("--slo-tpot", "0.2", "--price", "h100-80gb-sxm=2"), 2,
                   "'h100-80gb-sxm' is not one of the --gpu profiles", g_env);
    th_expect_fail(P("--slo-tpot", "0.2", "--policy", "bogus"), 2, "bogus", g_env);
    th_expect_fail((const char *[]){BASE, "--gpu", "no-such-gpu", USERS, "--slo-tpot", "1", NULL},
                   1, "no-such-gpu", g_env);
#undef P
}

Test(cli_plan, trace_rate_is_scaled_from_its_own)
{
    /* 20 requests one second apart: 20 requests over 19 s */
    char text[2048] = "arrival_s,prompt_tokens,output_tokens\n", path[256];
    for (int i = 0; i < 20; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "%d,2048,16\n", i);
    th_write(g_dir, "t.csv", text, path, sizeof path);
    json_t *v = th_writescope_json((const char *[]){BASE, "--gpu", "a100-40gb-pcie", "--trace",
                                                    path, "--slo-ttft", "30", "--slo-tpot", "1",
                                                    "--policy", "writescope", "--tol", "0.2",
                                                    "--fit-batches", "none", "--json", NULL},
                                   g_env);
    cr_assert_str_eq(json_string_value(json_object_get(v, "load")), "rate");
    cr_assert_float_eq(json_real_value(json_object_get(v, "trace_rate")), 20.0 / 19, 1e-9);
    json_t *x = json_array_get(json_object_get(v, "results"), 0);
    const double load = json_real_value(json_object_get(x, "max_load"));
    cr_assert_gt(load, 0);
    cr_assert_geq(json_real_value(json_object_get(x, "attainment")), 0.99);
    json_decref(v);
    th_expect_fail((const char *[]){BASE, "--gpu", "a100-40gb-pcie", "--trace", path, "--rate", "2",
                                    "--slo-tpot", "1", NULL},
                   2, "own arrivals", g_env);
}

#define SMALL                                                                                      \
    BASE, "--gpu", "a100-40gb-pcie", "--prompt", "64", "--output", "2", "--max-users", "1",        \
        "--slo-tpot", "1", "--policy", "writescope"

/* --tune's pages and windows follow sim's rule (a window is a whole number of pages): a
 * window that sim's --window would refuse, or a page that would silently stretch the
 * window, is a usage error; the defaults' kind of candidates run. */
Test(cli_plan, page_and_window_lists_agree_with_sim, .timeout = 60)
{
    th_expect_fail((const char *[]){"sim", "--model", "qwen3-30b-a3b", "--gpu", "a100-40gb-pcie",
                                    "--host", "xeon-gold-5318y", "--window", "100", NULL},
                   2, "multiple of the page (256 tokens)", g_env);
    th_expect_fail(
        (const char *[]){SMALL, "--fit-batches", "none", "--tune", "--window-list", "100", NULL}, 2,
        "a window of 100 tokens is not a multiple of the page (256 tokens)", g_env);
    th_expect_fail(
        (const char *[]){SMALL, "--fit-batches", "none", "--tune", "--page-list", "100", NULL}, 2,
        "a page of 100 tokens neither divides the 256-token window", g_env);
    json_t *v = th_writescope_json((const char *[]){SMALL, "--fit-batches", "none", "--tune",
                                                    "--kv-gb-list", "2", "--page-list", "128,512",
                                                    "--window-list", "512", "--json", NULL},
                                   g_env);
    int page128 = 0, page512 = 0, win512 = 0;
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(v, "results"), i, x)
    {
        json_t *set = json_object_get(x, "setting");
        page128 |= json_integer_value(json_object_get(set, "page")) == 128;
        page512 |= json_integer_value(json_object_get(set, "page")) == 512;
        win512 |= json_integer_value(json_object_get(set, "window")) == 512;
    }
    cr_assert(page128 && page512 && win512, "every candidate searched");
    json_decref(v);
}

/* The frontier's batches are bounded by what finishes in reasonable time (65536, the old
 * maximum, ran for many minutes); the bound itself runs. --db with --save is refused. */
Test(cli_plan, fit_batches_bounded_and_db_or_save, .timeout = 60)
{
    th_expect_fail((const char *[]){SMALL, "--fit-batches", "65536", NULL}, 2,
                   "--fit-batches '65536': not a number in 1..4096", g_env);
    json_t *v =
        th_writescope_json((const char *[]){SMALL, "--fit-batches", "4096", "--json", NULL}, g_env);
    json_t *fr = json_array_get(json_object_get(v, "frontier"), 0);
    cr_assert_eq(json_integer_value(json_object_get(fr, "batch")), 4096);
    json_decref(v);
    char db[128];
    snprintf(db, sizeof db, "%s/x.db", g_dir);
    th_expect_fail((const char *[]){SMALL, "--db", db, "--save", NULL}, 2, "--db and --save",
                   g_env);
}

/* plan takes sim's host options, parsed and checked by the same code: --host-mem (experts
 * that do not fit host DRAM: no load is met), --cpu-sockets (more than the host has is an
 * error), --one-node-memory (not with per-socket copies). */
Test(cli_plan, host_options_as_sim_takes_them)
{
    json_t *v = th_writescope_json((const char *[]){SMALL, "--max-users", "2", "--fit-batches",
                                                    "none", "--json", NULL},
                                   g_env);
    json_t *x = json_array_get(json_object_get(v, "results"), 0);
    cr_assert_gt(json_real_value(json_object_get(x, "max_load")), 0);
    json_decref(v);
    v = th_writescope_json((const char *[]){SMALL, "--max-users", "2", "--fit-batches", "none",
                                            "--host-mem", "1", "--json", NULL},
                           g_env);
    x = json_array_get(json_object_get(v, "results"), 0);
    cr_assert_eq(json_real_value(json_object_get(x, "max_load")), 0,
                 "60 GB of CPU experts do not fit 1 GiB of host DRAM");
    json_decref(v);
    th_expect_fail((const char *[]){SMALL, "--cpu-sockets", "2", NULL}, 1,
                   "--cpu-sockets 2: host xeon-gold-5318y has 1", g_env);
    th_expect_fail((const char *[]){SMALL, "--cpu-sockets", "1", "--one-node-memory", NULL}, 2,
                   "--one-node-memory", g_env);
    th_expect_fail((const char *[]){SMALL, "--host-mem", "0", NULL}, 2, "--host-mem", g_env);
    th_run r = th_writescope((const char *[]){"plan", "--help", NULL}, g_env);
    cr_assert_neq(strstr(r.out, "--host-mem G"), NULL, "%s", r.out);
    cr_assert_neq(strstr(r.out, "--cpu-sockets N"), NULL, "%s", r.out);
    cr_assert_neq(strstr(r.out, "--one-node-memory"), NULL, "%s", r.out);
    th_run_free(&r);
}
