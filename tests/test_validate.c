/* test_validate: the runtime-vs-simulator comparison (validate/validate.c) on a tiny model,
 * GPU modeled. The report has every quantity with finite errors and the points of every
 * repeat; the simulator's decode step k attends the same context as the runtime's (the
 * prefill-token offset is right); with the runtime's CPU half timed by the cost model the
 * two agree on CPU attention and share (so a difference seen on real runs is the machine,
 * not the bookkeeping); the noise floor exists only with repeats; the comparison is stored
 * linked to its runtime runs and simulation and reads back the same; the figure renders. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers.h"
#include "hw.h"
#include "store.h"
#include "validate.h"
#include "validate_plot.h"
#include "wformat.h"

static ws_model g_m;
static ws_hw g_hw;

static void tiny(ws_validate_cfg *c)
{
    ws_err err = {0};
    cr_assert_eq(ws_model_parse(th_tiny_moe, "tiny.json", &g_m, &err), 0, "%s", err.msg);
    th_paper_hw(NULL, &g_m, &g_hw);
    ws_validate_cfg_default(c);
    ws_engine_cfg *e = &c->eng;
    e->model = &g_m;
    e->hw = &g_hw;
    e->batch = 2;
    e->prompt = 700; /* 2 full pages and a partial one in the window */
    e->output = 70;  /* the windows fill and flush once */
    e->layers = 2;
    e->threads = 2;
}

static const ws_validate_point *find(const ws_validate_report *r, int rep, const char *q, int s,
                                     int l)
{
    for (size_t i = 0; i < r->n_pt; i++)
        if (r->pt[i].rep == rep && !strcmp(r->pt[i].quantity, q) && r->pt[i].step == s &&
            r->pt[i].layer == l)
            return &r->pt[i];
    return NULL;
}

Test(validate, report_shape_and_alignment)
{
    ws_validate_cfg c;
    tiny(&c);
    c.repeat = 2;
    ws_validate_report r;
    ws_err err = {0};
    cr_assert_eq(ws_validate_run_all(&c, NULL, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.run.repeats, 2);
    cr_assert_eq(r.run.layers, 2);
    cr_assert_str_eq(r.run.gpu, "modeled:a100-40gb-pcie");
    cr_assert_str_eq(r.run.gpu_source, "modeled");
    cr_assert_eq(r.run.id, 0, "nothing stored without a store");
    /* every quantity, its label, finite errors; the noise floor with two repeats */
    /* the first step of each run is warm-up: points kept, left out of the statistics */
    const long long want[WS_VQ_COUNT] = {2 * 69, -1, 2 * 69 * 2, 2 * 69, 2 * 69 * 2};
    for (int q = 0; q < WS_VQ_COUNT; q++) {
        const ws_validate_stat *s = &r.stat[q];
        cr_assert_str_eq(s->quantity, ws_validate_q_name(q));
        cr_assert(s->n > 0, "%s: no points", s->quantity);
        if (want[q] > 0)
            cr_assert_eq(s->n, want[q], "%s: %lld points", s->quantity, s->n);
        cr_assert(isfinite(s->mean_ape) && isfinite(s->p95_ape) && s->p95_ape >= 0, "%s: %g %g",
                  s->quantity, s->mean_ape, s->p95_ape);
        cr_assert(isfinite(s->noise_mean_ape), "%s: noise floor", s->quantity);
        cr_assert(isfinite(s->mean_measured) && isfinite(s->mean_predicted));
    }
    cr_assert_str_eq(r.stat[WS_VQ_GPU].measured_source, "modeled");
    cr_assert_str_eq(r.stat[WS_VQ_STEP].measured_source, "mixed");
    cr_assert_str_eq(r.stat[WS_VQ_CPU_ATTN].measured_source, "measured");
    /* decode step k attends the same context in both */
    json_error_t je;
    json_t *p = json_loads(r.run.params, 0, &je);
    cr_assert_not_null(p, "%s", r.run.params);
    cr_assert_eq(json_number_value(json_object_get(p, "context_mismatch_max")), 0, "%s",
                 r.run.params);
    cr_assert_eq(json_array_size(json_object_get(p, "run_ids")), 2);
    json_decref(p);
    cr_assert_not_null(find(&r, 1, "cpu_attn", 69, 1));
    cr_assert_null(find(&r, 2, "cpu_attn", 0, 0));
    /* terms: the CPU attention's, the experts', the engine's, the placement */
    int seen = 0;
    for (size_t i = 0; i < r.n_term; i++) {
        const char *t = r.term[i].term;
        seen |= !strcmp(t, "cpu_attn.per_token") << 0 | !strcmp(t, "engine") << 1 |
                (!strncmp(t, "experts.", 8)) << 2 | !strcmp(t, "placement") << 3 |
                !strcmp(t, "router") << 4;
        cr_assert(t[0] && r.term[i].note[0]);
    }
    cr_assert_eq(seen, 31, "terms present (mask %d)", seen);
    cr_assert(r.run.verdict[0]);
    ws_validate_report_free(&r);
}

Test(validate, modeled_cpu_agrees_and_one_run_has_no_noise_floor)
{
    ws_validate_cfg c;
    tiny(&c);
    c.eng.cpu_time_modeled = 1; /* the runtime's CPU half takes the cost model's time */
    c.eng.pingpong_bytes = 1;   /* no prefetch credit: r* does not follow the measured MoE */
    ws_validate_report r;
    ws_err err = {0};
    cr_assert_eq(ws_validate_run_all(&c, NULL, &r, &err), 0, "%s", err.msg);
    cr_assert(r.stat[WS_VQ_SHARE].p95_ape < 1e-9, "share %g%%", r.stat[WS_VQ_SHARE].p95_ape);
    cr_assert(r.stat[WS_VQ_CPU_ATTN].p95_ape < 1e-6, "cpu attention %g%%",
              r.stat[WS_VQ_CPU_ATTN].p95_ape);
    for (int q = 0; q < WS_VQ_COUNT; q++)
        cr_assert(isnan(r.stat[q].noise_mean_ape), "%s: one run has no noise floor",
                  r.stat[q].quantity);
    /* without a floor the CPU-side quantities are judged by the goal */
    cr_assert_str_eq(r.stat[WS_VQ_CPU_ATTN].verdict, "within the goal");
    ws_validate_report_free(&r);
}

/* Against the noise floor: within it when mean <= max(5%, noise mean + 2) and p95 <= noise
 * p95 + 5; one run (no floor): the goal, mean <= 3% and p95 <= 10%. */
Test(validate, within_noise_bounds)
{
    ws_validate_stat s = {.mean_ape = 4.9, .p95_ape = 20, .noise_mean_ape = 1, .noise_p95_ape = 15};
    cr_assert(ws_validate_within_noise(&s));
    s.mean_ape = 5.1;
    cr_assert(!ws_validate_within_noise(&s));
    s.noise_mean_ape = 3.2;
    cr_assert(ws_validate_within_noise(&s));
    s.p95_ape = 20.1;
    cr_assert(!ws_validate_within_noise(&s));
    s = (ws_validate_stat){
        .mean_ape = 2.9, .p95_ape = 9.9, .noise_mean_ape = NAN, .noise_p95_ape = NAN};
    cr_assert(ws_validate_within_noise(&s));
    s.mean_ape = 3.1;
    cr_assert(!ws_validate_within_noise(&s));
}

Test(validate, stored_linked_and_read_back)
{
    char dir[64], db[128], png[128];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/v.db", dir);
    snprintf(png, sizeof png, "%s/v.png", dir);
    ws_validate_cfg c;
    tiny(&c);
    c.eng.output = 5;
    ws_store *s = NULL;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(db, &s, &err), 0, "%s", err.msg);
    ws_validate_report r, b;
    cr_assert_eq(ws_validate_run_all(&c, s, &r, &err), 0, "%s", err.msg);
    cr_assert(r.run.id > 0 && r.run.run_id > 0 && r.run.sim_run_id > 0);
    cr_assert_eq(ws_validate_load(s, 0, &b, &err), 0, "%s", err.msg);
    cr_assert_eq(b.run.id, r.run.id);
    cr_assert_eq(b.n_pt, r.n_pt);
    cr_assert_eq(b.n_term, r.n_term);
    cr_assert_str_eq(b.run.verdict, r.run.verdict);
    for (int q = 0; q < WS_VQ_COUNT; q++) {
        cr_assert_eq(b.stat[q].n, r.stat[q].n);
        cr_assert_float_eq(b.stat[q].mean_ape, r.stat[q].mean_ape, 1e-9 * (1 + r.stat[q].mean_ape));
    }
    ws_validate_report_free(&b);
    cr_assert_eq(ws_validate_load(s, r.run.id + 1, &b, &err), WS_ENOTFOUND);
    ws_validate_report_free(&r);
    ws_store_close(s);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM validate_runs v JOIN run_runs r ON "
                                   "r.id = v.run_id JOIN sim_runs m ON m.id = v.sim_run_id"),
                 1);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM validate_stats"), WS_VQ_COUNT);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM validate_points WHERE quantity = "
                                   "'step_time' AND layer = -1"),
                 5);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM validate_stats WHERE quantity = "
                                   "'gpu_half' AND measured_source = 'modeled'"),
                 1);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM sim_runs WHERE output_tokens = 6"), 1);
    /* the figure from the database */
    cr_assert_eq(ws_store_open(db, &s, &err), 0, "%s", err.msg);
    const int rc = ws_validate_plot(s, 0, png, &err);
    ws_store_close(s);
    if (rc && strstr(err.msg, "gnuplot not found"))
        cr_skip_test("gnuplot is not installed: %s", err.msg);
    cr_assert_eq(rc, 0, "%s", err.msg);
    struct stat st;
    cr_assert(stat(png, &st) == 0 && st.st_size > 1000, "a PNG was drawn");
}

/* The calibrator's reference probe is timed around the runtime's runs and held against the
 * probe of the calibration the host profile came from: a host far from it (here a profile
 * that says the host read 1 PB/s when calibrated) is named in the verdict, stored and read
 * back; a profile without a probe has no drift to judge. */
Test(validate, the_host_is_held_against_its_calibration)
{
    ws_validate_cfg c;
    tiny(&c);
    c.eng.output = 8;
    c.repeat = 2;
    ws_validate_report r;
    ws_err err = {0};
    cr_assert_eq(ws_validate_run_all(&c, NULL, &r, &err), 0, "%s", err.msg);
    cr_assert(r.probe_bw > 1e8 && r.probe_bw < 1e13, "probe %g B/s", r.probe_bw);
    cr_assert(isnan(r.calib_probe_bw) && isnan(r.host_drift_pct));
    cr_assert_null(strstr(r.run.verdict, "host moved"), "%s", r.run.verdict);
    ws_validate_report_free(&r);

    g_hw.cpu_probe_bw.v = 1e15;
    char dir[64], db[128];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/v.db", dir);
    ws_store *s = NULL;
    cr_assert_eq(ws_store_open(db, &s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_validate_run_all(&c, s, &r, &err), 0, "%s", err.msg);
    cr_assert_float_eq(r.calib_probe_bw, 1e15, 1);
    cr_assert_lt(r.host_drift_pct, -99.0);
    cr_assert(strstr(r.run.verdict, "the host moved since its calibration"), "%s", r.run.verdict);
    ws_validate_report back;
    cr_assert_eq(ws_validate_load(s, r.run.id, &back, &err), 0, "%s", err.msg);
    cr_assert_float_eq(back.probe_bw, r.probe_bw, 1e-3 * r.probe_bw);
    cr_assert_float_eq(back.host_drift_pct, r.host_drift_pct, 0.01);
    ws_validate_report_free(&back);
    ws_validate_report_free(&r);
    ws_store_close(s);
}

Test(validate, bad_settings_are_errors)
{
    ws_validate_cfg c;
    tiny(&c);
    ws_validate_report r;
    ws_err err = {0};
    c.repeat = 0;
    cr_assert_eq(ws_validate_run_all(&c, NULL, &r, &err), WS_EINVAL);
    cr_assert(strstr(err.msg, "repeat"), "%s", err.msg);
    c.repeat = 1;
    c.eng.model = NULL;
    cr_assert_eq(ws_validate_run_all(&c, NULL, &r, &err), WS_EINVAL);
}

/* The simulator's CPU experts per MoE layer of a batch of 2 (their op: the GEMMs and the
 * permute), on the cost model of the tiny model with CPU experts of `bytes` per weight. */
static double sim_experts_s(double bytes)
{
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cc.pingpong_bytes = 1;
    cc.cpu_expert_bytes = bytes;
    ws_cost_model cm;
    ws_err err = {0};
    cr_assert_eq(ws_cost_model_init(&g_hw, &g_m, &cc, &cm, &err), 0, "%s", err.msg);
    double s = 0;
    int n = 0;
    for (int l = 0; l < 2; l++)
        if (ws_cost_layer(&cm, l)->moe) {
            s += ws_cost_cpu_experts(&cm, l, 2) + ws_cost_moe_permute_cpu(&cm, l, 2);
            n++;
        }
    ws_cost_model_free(&cm);
    cr_assert_gt(n, 0, "the tiny model has MoE layers");
    return s / n;
}

/* The engine's cost settings reach the simulator: with int8 CPU experts the runtime's cost
 * model streams 1 B per expert weight, and so must the simulator's (validate once built its
 * cost settings by hand, leaving the model's 2 B per weight there). */
Test(validate, int8_experts_reach_the_simulator)
{
    ws_validate_cfg c;
    tiny(&c);
    c.eng.output = 8;
    c.eng.cpu_time_modeled = 1;
    c.eng.pingpong_bytes = 1;
    c.eng.cpu_expert_weights = ws_wformat_find("int8");
    cr_assert_not_null(c.eng.cpu_expert_weights);
    ws_validate_report r;
    ws_err err = {0};
    cr_assert_eq(ws_validate_run_all(&c, NULL, &r, &err), 0, "%s", err.msg);
    const double want = sim_experts_s(1), bf16 = sim_experts_s(2);
    cr_assert_gt(bf16 - want, 0.05 * want, "int8 experts cost less than bf16 ones");
    const ws_validate_stat *x = &r.stat[WS_VQ_EXPERTS];
    cr_assert_gt(x->n, 0);
    cr_assert(fabs(x->mean_predicted - want) <= 1e-9 * want,
              "the simulator's experts %.9g s per layer, int8's %.9g, bf16's %.9g",
              x->mean_predicted, want, bf16);
    ws_validate_report_free(&r);
}
