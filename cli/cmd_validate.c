/* cmd_validate: `writescope validate` -- the live runtime against the simulator on one
 * workload (validate/validate.h): parses the options, loads the model and the profiles (after
 * a quick calibration with --calibrate), runs the comparison with progress on stderr, prints
 * the table (or --json), and with --db/--save stores it; --plot draws it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib.h"
#include "cli.h"
#include "convert.h"
#include "hw.h"
#include "validate.h"
#include "validate_plot.h"
#include "workload.h"
#include "ws_util.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: writescope validate --model NAME [--batch B] [--prompt N] [--output M]\n"
            "                           [--layers K] [--policy "
            "writescope|static|stream|cpu-attn|migrate]\n"
            "                           [--r R] [--host PROFILE] [--gpu modeled:<profile>|cuda]\n"
            "                           [--calibrate] [--repeat N] [--warmup W] [--threads T]\n"
            "                           [--seed S]\n"
            "                           [--db PATH | --save] [--json] [--plot FILE.png|svg|pdf]\n"
            "\n"
            "Serves one closed batch with the live runtime (`writescope run`) and plays the same\n"
            "workload in the simulator (`writescope sim --detail layer`) on the same cost model\n"
            "and profiles, then compares them decode step by step and layer by layer: step time,\n"
            "CPU attention, routed experts, realised CPU share and the GPU half. Per quantity the\n"
            "mean and p95 absolute percentage error of the simulator against the runtime; with\n"
            "--repeat N (N >= 2) also the runtime against itself (the noise floor) and a verdict\n"
            "per quantity: within noise (mean <= max(5%%, noise mean + 2 points), p95 <= noise\n"
            "p95 + 5 points), else the term most off. The cost model's terms are checked on the\n"
            "runtime's own token counts; without a noise floor the goal is mean <= 3%%, p95 <=\n"
            "10%%. CPU times are measured; with --gpu modeled:<profile> (default "
            "modeled:" CLI_DEFAULT_GPU ")\n"
            "every GPU time on both sides is modeled and labelled so. Details: docs/validate.md\n");
}

typedef struct validate_opts {
    cli_workload w;
    int repeat, warmup, calibrate, save;
    const char *plot;
} validate_opts;

static const cli_optdef k_opts[] = {
    {CLI_GROUP(validate_opts, w, cli_workload, cli_workload_opts)},
    {CLI_GROUP(validate_opts, w, cli_workload, cli_engine_opts)},
    {CLI_GROUP(validate_opts, w, cli_workload, cli_live_opts)},
    CLI_LIVE_TUNES,
    {"output", CLI_TUNE, .lo = 1, .hi = 1 << 20, .def = "16"},
    {"layers", CLI_TUNE, .help = "K of the model's layers; by default what fits in the RAM"},
    {"host", CLI_TUNE,
     .help = "the host profile (default: this machine's calibration, else " CLI_FALLBACK_HOST
             ", and the output says it is not this machine; this: this machine's, an error "
             "when none is stored)"},
    {"db", CLI_TUNE,
     .help = "store the runtime runs, the simulation and the comparison there (tables "
             "validate_*, linked to run_runs and sim_runs)"},
    {"repeat", CLI_INT(validate_opts, repeat), .arg = "N", .lo = 1, .hi = 100, .def = "1",
     .help = "runtime runs; from 2 on, also the runtime against itself (the noise floor)"},
    {"warmup", CLI_INT(validate_opts, warmup), .arg = "W", .lo = 0, .hi = 1 << 20, .def = "1",
     .help = "the first W decode steps of each run (one-time costs such as the expert GEMM's "
             "backend probe) are kept but left out of the statistics"},
    {"calibrate", CLI_FLAG(validate_opts, calibrate),
     .help = "run a quick calibration of this machine first (calib --quick) and use its "
             "profile (stored in --db, else the default database)"},
    {"save", CLI_FLAG(validate_opts, save), .help = "store as --db does, in the default database"},
    {"plot", CLI_STR(validate_opts, plot), .arg = "FILE.png|svg|pdf",
     .help = "predicted against measured per quantity (gnuplot; the type from the name); "
             "checked before the runs, replaced whole"},
    {0}};
static const cli_spec k_spec = {"validate", k_opts, 0, usage};

typedef struct prog {
    int tty;
    double t0;
} prog;

static void on_progress(void *ctx, const char *phase, int rep, int reps, int step, int steps)
{
    const prog *p = ctx;
    if (!strcmp(phase, "run")) {
        if (step != steps && (step % 8) && !p->tty)
            return;
        fprintf(stderr, "%svalidate: runtime run %d/%d, step %d/%d (%.0f s)%s", p->tty ? "\r" : "",
                rep + 1, reps, step, steps, ws_now_s() - p->t0,
                p->tty && step != steps ? "" : "\n");
    } else if (!strcmp(phase, "sim")) {
        fprintf(stderr, "validate: simulating the same workload (%.0f s)\n", ws_now_s() - p->t0);
    } else {
        fprintf(stderr, "validate: storing (%.0f s)\n", ws_now_s() - p->t0);
    }
    fflush(stderr);
}

static void on_calib(void *ctx, double frac, const char *what)
{
    prog *p = ctx;
    static char last[64];
    char phase[64];
    snprintf(phase, sizeof phase, "%.*s", (int)strcspn(what, "0123456789"), what);
    if (strcmp(phase, last) || frac >= 1.0) {
        fprintf(stderr, "validate: calibrating %3.0f%% %5.0f s %s\n", 100 * frac,
                ws_now_s() - p->t0, what);
        snprintf(last, sizeof last, "%s", phase);
    }
}

static json_t *num_or_null(double v)
{
    return isfinite(v) ? cli_num(v) : json_null();
}

static json_t *report_json(const ws_validate_report *r)
{
    const ws_validate_run *v = &r->run;
    json_t *o = json_object();
    json_object_set_new(o, "validation_id", v->id ? json_integer(v->id) : json_null());
    json_object_set_new(o, "model", json_string(v->model));
    json_object_set_new(o, "gpu", json_string(v->gpu));
    json_object_set_new(o, "gpu_source", json_string(v->gpu_source));
    json_object_set_new(o, "host", json_string(v->host_profile));
    json_object_set_new(o, "host_is_this_machine", json_boolean(r->host_is_this_machine));
    json_object_set_new(o, "policy", json_string(v->policy));
    json_object_set_new(o, "batch", json_integer(v->batch));
    json_object_set_new(o, "prompt", json_integer(v->prompt_tokens));
    json_object_set_new(o, "output", json_integer(v->output_tokens));
    json_object_set_new(o, "layers", json_integer(v->layers));
    json_object_set_new(o, "layers_note", json_string(r->layers_note));
    json_object_set_new(o, "repeats", json_integer(v->repeats));
    json_object_set_new(o, "warmup_steps", json_integer(v->warmup));
    json_t *ids = json_array();
    for (int k = 0; r->rep_run_id && k < v->repeats; k++)
        json_array_append_new(ids, r->rep_run_id[k] ? json_integer(r->rep_run_id[k]) : json_null());
    json_object_set_new(o, "run_ids", ids);
    json_object_set_new(o, "sim_run_id", v->sim_run_id ? json_integer(v->sim_run_id) : json_null());
    json_object_set_new(o, "calib_run_id",
                        v->calib_run_id ? json_integer(v->calib_run_id) : json_null());
    json_t *goal = json_object();
    json_object_set_new(goal, "mean_ape_pct", cli_num(WS_VALIDATE_GOAL_MEAN));
    json_object_set_new(goal, "p95_ape_pct", cli_num(WS_VALIDATE_GOAL_P95));
    json_object_set_new(o, "goal_cpu_side", goal);
    json_t *nf = json_object();
    json_object_set_new(nf, "mean_ape_pct_min", cli_num(WS_VALIDATE_NOISE_MEAN_MIN));
    json_object_set_new(nf, "mean_ape_points_over_noise", cli_num(WS_VALIDATE_NOISE_MEAN_PTS));
    json_object_set_new(nf, "p95_ape_points_over_noise", cli_num(WS_VALIDATE_NOISE_P95_PTS));
    json_object_set_new(o, "within_noise_bound", nf);
    json_t *hp = json_object();
    json_object_set_new(hp, "now_gbps", cli_num(r->probe_bw / 1e9));
    json_object_set_new(hp, "calibrated_gbps", cli_num(r->calib_probe_bw / 1e9));
    json_object_set_new(hp, "drift_pct", cli_num(r->host_drift_pct));
    json_object_set_new(hp, "bound_pct", cli_num(WS_CALIB_DRIFT_PCT));
    json_object_set_new(hp, "attn_now_gbps", cli_num(r->attn_probe_bw / 1e9));
    json_object_set_new(hp, "attn_calibrated_gbps", cli_num(r->calib_attn_bw / 1e9));
    json_object_set_new(hp, "attn_drift_pct", cli_num(r->attn_drift_pct));
    json_object_set_new(
        hp, "attn_shape",
        json_pack("{s:i, s:i}", "batch", WS_CALIB_ATTN_REF_BATCH, "ctx", WS_CALIB_ATTN_REF_CTX));
    json_object_set_new(hp, "host_moved",
                        json_boolean(fabs(r->host_drift_pct) > WS_CALIB_DRIFT_PCT ||
                                     fabs(r->attn_drift_pct) > WS_CALIB_DRIFT_PCT));
    json_object_set_new(o, "reference_probe", hp);
    json_t *qs = json_object();
    for (int q = 0; q < WS_VQ_COUNT; q++) {
        const ws_validate_stat *s = &r->stat[q];
        json_t *x = json_object();
        json_object_set_new(x, "scope", json_string(s->scope));
        json_object_set_new(x, "runtime_source", json_string(s->measured_source));
        json_object_set_new(x, "simulator_source", json_string("modeled"));
        json_object_set_new(x, "cpu_side", json_boolean(ws_validate_q_cpu_side(q)));
        json_object_set_new(x, "unit", json_string(s->unit));
        json_object_set_new(x, "n", json_integer(s->n));
        json_object_set_new(x, "mean_ape_pct", num_or_null(s->mean_ape));
        json_object_set_new(x, "p95_ape_pct", num_or_null(s->p95_ape));
        json_object_set_new(x, "noise_mean_ape_pct", num_or_null(s->noise_mean_ape));
        json_object_set_new(x, "noise_p95_ape_pct", num_or_null(s->noise_p95_ape));
        json_object_set_new(x, "mean_runtime", num_or_null(s->mean_measured));
        json_object_set_new(x, "mean_simulator", num_or_null(s->mean_predicted));
        json_object_set_new(x, "verdict", *s->verdict ? json_string(s->verdict) : json_null());
        json_object_set_new(x, "within_noise",
                            ws_validate_q_cpu_side(q) && s->n
                                ? json_boolean(ws_validate_within_noise(s))
                                : json_null());
        json_object_set_new(qs, s->quantity, x);
    }
    json_object_set_new(o, "quantities", qs);
    json_t *ts = json_array();
    for (size_t i = 0; i < r->n_term; i++) {
        const ws_validate_term *t = &r->term[i];
        json_t *x = json_object();
        json_object_set_new(x, "term", json_string(t->term));
        json_object_set_new(x, "measured", num_or_null(t->measured));
        json_object_set_new(x, "predicted", num_or_null(t->predicted));
        json_object_set_new(x, "unit", json_string(t->unit));
        json_object_set_new(x, "error_pct", num_or_null(t->error_pct));
        json_object_set_new(x, "step_share_pct", num_or_null(t->step_share_pct));
        json_object_set_new(x, "note", json_string(t->note));
        json_array_append_new(ts, x);
    }
    json_object_set_new(o, "terms", ts);
    json_object_set_new(o, "verdict", json_string(v->verdict));
    json_object_set_new(o, "sim_wall_s", cli_num(r->sim_wall_s));
    json_object_set_new(o, "run_wall_s", cli_num(r->run_wall_s));
    return o;
}

static const char *pct(double v, char *buf)
{
    if (!isfinite(v))
        return "-";
    snprintf(buf, 16, "%.1f%%", v);
    return buf;
}

static const char *val(double v, const char *unit, char *buf)
{
    if (!isfinite(v))
        return "-";
    if (!strcmp(unit, "s") || !strncmp(unit, "s/", 2))
        snprintf(buf, 32, "%.4g ms", 1e3 * v);
    else if (!strcmp(unit, "1"))
        snprintf(buf, 32, "%.4f", v);
    else
        snprintf(buf, 32, "%.4g", v);
    return buf;
}

static void print_report(const ws_validate_report *r)
{
    const ws_validate_run *v = &r->run;
    printf("writescope validate: model %s, batch %d x (%d prompt + %d output), %s, policy %s\n",
           v->model, v->batch, v->prompt_tokens, v->output_tokens, r->layers_note, v->policy);
    printf("runtime: %d run%s, CPU measured, gpu=%s; simulator: modeled; host profile %s%s; "
           "first %d step%s of each run left out as warm-up\n",
           v->repeats, v->repeats > 1 ? "s" : "", v->gpu, v->host_profile,
           r->host_is_this_machine ? " (this machine)" : " (NOT this machine)", v->warmup,
           v->warmup == 1 ? "" : "s");
    if (isfinite(r->probe_bw))
        printf("host: reference read %.1f GB/s over the runs%s\n", r->probe_bw / 1e9,
               isfinite(r->host_drift_pct) ? "" : " (no calibration timed one to hold it against)");
    if (isfinite(r->host_drift_pct))
        printf("      %.1f GB/s when calibrated: %+.1f%% (bound %.0f%%: %s)\n",
               r->calib_probe_bw / 1e9, r->host_drift_pct, WS_CALIB_DRIFT_PCT,
               fabs(r->host_drift_pct) > WS_CALIB_DRIFT_PCT ? "the host moved since its calibration"
                                                            : "the host the calibration measured");
    if (isfinite(r->attn_drift_pct))
        printf("      attention reference (%d x %d tokens): %.1f GB/s now, %.1f when calibrated: "
               "%+.1f%% (bound %.0f%%: %s)\n",
               WS_CALIB_ATTN_REF_BATCH, WS_CALIB_ATTN_REF_CTX, r->attn_probe_bw / 1e9,
               r->calib_attn_bw / 1e9, r->attn_drift_pct, WS_CALIB_DRIFT_PCT,
               fabs(r->attn_drift_pct) > WS_CALIB_DRIFT_PCT ? "the host moved since its calibration"
                                                            : "the host the calibration measured");
    printf("%-10s %-5s %-30s %6s %9s %9s %11s %11s %12s %12s\n", "quantity", "scope",
           "runtime side", "n", "mean APE", "p95 APE", "noise mean", "noise p95", "runtime",
           "simulator");
    for (int q = 0; q < WS_VQ_COUNT; q++) {
        const ws_validate_stat *s = &r->stat[q];
        char a[16], b[16], c[16], d[16], e[32], f[32], side[256];
        if (q == WS_VQ_GPU)
            snprintf(side, sizeof side, "%s (gpu=%s)", s->measured_source, v->gpu);
        else if (q == WS_VQ_STEP)
            snprintf(side, sizeof side, "CPU measured + GPU %s", v->gpu_source);
        else
            snprintf(side, sizeof side, "%s", q == WS_VQ_SHARE ? "realised" : s->measured_source);
        /* n/a: no point where the runtime measured something to take an error against */
        printf("%-10s %-5s %-30.30s %6lld %9s %9s %11s %11s %12s %12s\n", s->quantity, s->scope,
               side, s->n, s->n ? pct(s->mean_ape, a) : "n/a", s->n ? pct(s->p95_ape, b) : "n/a",
               pct(s->noise_mean_ape, c), pct(s->noise_p95_ape, d),
               val(s->mean_measured, s->unit, e), val(s->mean_predicted, s->unit, f));
    }
    for (int q = 0; q < WS_VQ_COUNT; q++)
        if (*r->stat[q].verdict)
            printf("  %-10s %s\n", r->stat[q].quantity, r->stat[q].verdict);
    printf("cost-model terms on the runtime's own tokens (runtime measured vs model predicted):\n");
    printf("  %-20s %14s %14s %9s %9s  %s\n", "term", "runtime", "model", "error", "of step",
           "note");
    for (size_t i = 0; i < r->n_term; i++) {
        const ws_validate_term *t = &r->term[i];
        char a[32], b[32], c[16], d[16];
        printf("  %-20s %14s %14s %9s %9s  %s\n", t->term, val(t->measured, t->unit, a),
               val(t->predicted, t->unit, b), pct(t->error_pct, c), pct(t->step_share_pct, d),
               t->note);
    }
    printf("verdict: %s\n", v->verdict);
}

/* The options into *c (the engine's model and profiles come later); *gpu_prof: the
 * profile of the GPU's cost model. */
static int validate_config(const validate_opts *o, const cli_args *a, ws_validate_cfg *c,
                           const char **gpu_prof)
{
    const cli_workload *w = &o->w;
    if (w->db && o->save)
        return cli_usage_error("validate", "--db and --save both name the database: give one");
    if (w->host && o->calibrate)
        return cli_usage_error("validate", "--calibrate makes this machine's profile: drop --host");
    ws_validate_cfg_default(c);
    int rc = cli_to_engine_cfg("validate", a, w, &c->eng, gpu_prof);
    if (rc)
        return rc;
    c->repeat = o->repeat;
    c->warmup = o->warmup;
    if (c->warmup >= c->eng.output)
        return cli_usage_error("validate", "--output %d leaves no step past the %d warm-up step%s",
                               c->eng.output, c->warmup, c->warmup == 1 ? "" : "s");
    if (o->plot && !ws_gnuplot_term(o->plot))
        return cli_usage_error("validate", "--plot needs a .png, .svg or .pdf file, not '%s'",
                               o->plot);
    return 0;
}

/* The host profile (after a quick calibration with --calibrate; by default this machine's
 * calibration, else the fallback), then the model and the profiles. */
static int validate_load(const validate_opts *o, ws_store *s, const char *gpu_prof, prog *pg,
                         ws_validate_cfg *c, ws_model *m, ws_hw *hw, int *this_machine)
{
    ws_err err = {0};
    char hbuf[64];
    const char *host = o->w.host;
    int fallback = 0, auto_host = 0;
    *this_machine = 0;
    if (o->calibrate) {
        fprintf(stderr, "validate: quick calibration of this machine (calib --quick)\n");
        if (ws_validate_calibrate(s, c->eng.threads, on_calib, pg, hbuf, sizeof hbuf,
                                  &c->calib_run_id, &err))
            return cli_fail(&err);
        fprintf(stderr, "validate: calibration run %lld stored; host profile %s\n", c->calib_run_id,
                hbuf);
        host = hbuf;
        *this_machine = 1;
    } else if (!host) {
        *this_machine = ws_calib_host_profile(s, hbuf, sizeof hbuf);
        host = *this_machine ? hbuf : CLI_FALLBACK_HOST;
        fallback = !*this_machine;
        auto_host = *this_machine;
    } else {
        char mine[64];
        if (cli_host_this(s, &host, hbuf, sizeof hbuf, &err))
            return cli_fail(&err);
        *this_machine = ws_calib_host_profile(s, mine, sizeof mine) && !strcmp(mine, host);
    }
    if (ws_hw_load(s, o->w.model, gpu_prof, host, WS_DT_BF16, m, hw, NULL, &err)) {
        if (auto_host)
            ws_err_prefix(&err,
                          "validate: this machine's calibrated profile %s cannot drive the cost "
                          "model (poor fits are left out of it; writescope calib show); give "
                          "--host or recalibrate",
                          host);
        else if (o->calibrate) /* a poor fit is left out of the profile: say where to look */
            ws_err_prefix(&err,
                          "validate: the quick calibration (run %lld) left %s without a usable "
                          "fit (writescope calib show --run %lld; a default `writescope calib` "
                          "sweeps more)",
                          c->calib_run_id, host, c->calib_run_id);
        return cli_fail(&err);
    }
    if (fallback) {
        /* say why when this machine's newest calibration was refused as noisy */
        json_t *sh = ws_calib_show(s, 0, NULL), *r = json_object_get(sh, "run");
        const char *fp = json_string_value(json_object_get(r, "host"));
        if (json_is_true(json_object_get(r, "flagged")) && fp && !strncmp(hbuf, "host:", 5) &&
            !strcmp(hbuf + 5, fp))
            fprintf(stderr,
                    "validate: this machine's newest calibration (run %lld) is flagged as noisy "
                    "and not used: its reference probe drifted %.1f%% (bound %.0f%%)\n",
                    (long long)json_integer_value(json_object_get(r, "id")),
                    json_number_value(json_object_get(r, "drift_pct")), WS_CALIB_DRIFT_PCT);
        json_decref(sh);
        fprintf(stderr,
                "validate: no calibration of this machine is stored; host profile %s (the "
                "comparison is not this machine's: try --calibrate)\n",
                host);
    }
    c->cpu_workers = ws_hw_cores(hw);
    return 0;
}

/* Runs the comparison on the loaded model; stores, draws and prints it. */
static int validate_report(const validate_opts *o, ws_store *s, ws_validate_cfg *c,
                           int this_machine)
{
    const ws_engine_cfg *e = &c->eng;
    char glabel[200];
    if (e->gpu == WS_ENGINE_GPU_CUDA)
        snprintf(glabel, sizeof glabel, "cuda (predictions: %.160s)", e->hw->gpu);
    else
        snprintf(glabel, sizeof glabel, "modeled:%.160s", e->hw->gpu);
    fprintf(stderr,
            "validate: model %s, batch %d x (%d + %d), policy %s, gpu=%s host=%s, %d run%s\n",
            e->model->name, e->batch, e->prompt, e->output, ws_policy_name(e->policy), glabel,
            e->hw->host, c->repeat, c->repeat > 1 ? "s" : "");
    ws_err err = {0};
    ws_validate_report r;
    const int store_it = o->w.db || o->save;
    if (ws_validate_run_all(c, store_it ? s : NULL, &r, &err))
        return cli_fail(&err);
    r.host_is_this_machine = this_machine;
    int rc = CLI_EXIT_OK;
    if (store_it)
        fprintf(stderr,
                "validate: stored as validation %lld (runtime run %lld, simulation %lld) in %s\n",
                r.run.id, r.run.run_id, r.run.sim_run_id, ws_store_path(s));
    if (o->plot) {
        if (ws_validate_plot_rows(&r.run, r.stat, WS_VQ_COUNT, r.pt, r.n_pt, o->plot, &err))
            rc = cli_fail(&err);
        else
            fprintf(stderr, "validate: figure %s\n", o->plot);
    }
    if (o->w.json)
        cli_print_json(report_json(&r));
    else
        print_report(&r);
    ws_validate_report_free(&r);
    return rc;
}

int cmd_validate(int argc, char **argv)
{
    validate_opts o = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_spec, argc, argv, &o, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    if (!o.w.model)
        return cli_usage_error("validate", "--model is required");
    ws_validate_cfg c;
    const char *gpu_prof = CLI_DEFAULT_GPU;
    if ((rc = validate_config(&o, &a, &c, &gpu_prof)))
        return rc;
    ws_err err = {0};
    if (o.plot && ws_gnuplot_check_out(o.plot, &err)) /* before the runs, not after */
        return cli_fail(&err);
    /* The database: written with --db/--save (and by --calibrate), else read for profiles. */
    const int writes = o.w.db || o.save || o.calibrate;
    ws_store *s = NULL;
    int embedded = 0;
    if (writes ? cli_open_store(o.w.db, &s, &err) : cli_open_store_ro(NULL, &s, &embedded, &err))
        return cli_fail(&err);
    prog pg = {.tty = isatty(2), .t0 = ws_now_s()};
    ws_model m;
    ws_hw hw;
    int this_machine = 0;
    rc = validate_load(&o, s, gpu_prof, &pg, &c, &m, &hw, &this_machine);
    if (!rc) {
        c.eng.model = &m;
        c.eng.hw = &hw;
        c.progress = on_progress;
        c.progress_ctx = &pg;
        rc = validate_report(&o, s, &c, this_machine);
        if (embedded && rc == CLI_EXIT_OK)
            cli_note_embedded();
    }
    ws_store_close(s);
    return rc;
}
