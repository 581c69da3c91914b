/* calib: run bookkeeping, fitting by key, transactional storage, profiles (see calib.h). */
#include "calib.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_cpu.h"
#include "profile.h"
#include "ws_util.h"

int ws_calib_fault_after_samples = -1;

void ws_calib_run_init(ws_calib_run *run)
{
    memset(run, 0, sizeof *run);
    run->drift_pct = NAN;
    run->probe_bw = NAN;
}

void ws_calib_run_free(ws_calib_run *run)
{
    free(run->samples);
    free(run->fits);
    memset(run, 0, sizeof *run);
}

int ws_calib_add_sample(ws_calib_run *run, const ws_calib_sample *s, ws_err *err)
{
    if (run->n_samples == run->cap_samples) {
        int cap = run->cap_samples ? 2 * run->cap_samples : 64;
        ws_calib_sample *n = realloc(run->samples, sizeof *n * (size_t)cap);
        if (!n)
            return ws_err_set(err, WS_ENOMEM, "calib: out of memory");
        run->samples = n;
        run->cap_samples = cap;
    }
    run->samples[run->n_samples++] = *s;
    return 0;
}

double ws_calib_estimate(double *t, int n)
{
    ws_median_sort(t, n); /* sorts */
    const int half = (n + 1) / 2;
    return half % 2 ? t[half / 2] : 0.5 * (t[half / 2 - 1] + t[half / 2]);
}

int ws_calib_add_timed(ws_calib_run *run, ws_err *err, const char *device, const char *op,
                       const char *dtype, const char *kind, double flops, double bytes, double *t,
                       int n, const char *params_fmt, ...)
{
    if (n <= 0)
        return ws_err_set(err, WS_EINVAL, "calib: %s: no timed repeat", op);
    const double est = ws_calib_estimate(t, n); /* t is sorted: extremes at both ends */
    const double med = ws_median_sort(t, n);
    ws_calib_sample x = {.flops = flops,
                         .bytes = bytes,
                         .repeats = n,
                         .t_median = med,
                         .t_min = t[0],
                         .t_max = t[n - 1],
                         .t_est = est,
                         .spread_pct = n >= 4 && est > 0
                                           ? 100.0 * (t[(3 * (n - 1)) / 4] - t[(n - 1) / 4]) / est
                                           : NAN};
    snprintf(x.key.device, sizeof x.key.device, "%s", device);
    snprintf(x.key.op, sizeof x.key.op, "%s", op);
    snprintf(x.key.dtype, sizeof x.key.dtype, "%s", dtype);
    snprintf(x.key.attn_kind, sizeof x.key.attn_kind, "%s", kind);
    va_list ap;
    va_start(ap, params_fmt);
    vsnprintf(x.params, sizeof x.params, params_fmt, ap);
    va_end(ap);
    return ws_calib_add_sample(run, &x, err);
}

static int same_key(const ws_calib_key *a, const ws_calib_key *b)
{
    return !strcmp(a->device, b->device) && !strcmp(a->op, b->op) && !strcmp(a->dtype, b->dtype) &&
           !strcmp(a->attn_kind, b->attn_kind);
}

/* Ops whose cost is a transfer (t = c0 + B/W); everything else is a roofline. */
static int is_transfer_op(const char *op)
{
    static const char *const ops[] = {"membw_read",
                                      "membw_read_1t",
                                      "membw_triad",
                                      "h2d",
                                      "h2d_pageable",
                                      "d2h",
                                      "d2h_pageable",
                                      "d2d",
                                      "h2d_concurrent",
                                      "h2d_under_gemm",
                                      NULL};
    for (int i = 0; ops[i]; i++)
        if (!strcmp(op, ops[i]))
            return 1;
    return 0;
}

/* Ops that are single measurements of the machine, not fitted. */
static int is_unfitted_op(const char *op)
{
    return !strcmp(op, "peak_flops") || !strcmp(op, "peak_flops_1t") || !strcmp(op, "pinned_cmp") ||
           !strcmp(op, "moe_cmp") || !strcmp(op, "copy_cmp") || !strcmp(op, "membw_read_1t") ||
           !strcmp(op, "membw_triad");
}

static int add_fit(ws_calib_run *run, const ws_calib_key *k, const ws_fit_result *r, ws_err *err);

/* The instruction family the key's samples ran on (their params' "family", and "impl" when
 * given: the expert GEMMs, calib/measure.c), appended to the fit's note: "ran on
 * avx512_vnni (oneDNN gemm:jit, ISA avx512_core_bf16)". Several families (a backend
 * that changes with the shape) are listed in order of first appearance. */
static void note_family(const ws_calib_run *run, const ws_calib_key *k, ws_fit_result *r)
{
    char fams[96] = "", impl[64] = "", isa[32] = "";
    for (int i = 0; i < run->n_samples; i++) {
        const ws_calib_sample *s = &run->samples[i];
        if (!same_key(k, &s->key))
            continue;
        const struct {
            const char *name;
            char *out;
            size_t cap;
        } f[3] = {{"\"family\": \"", NULL, 0},
                  {"\"impl\": \"", impl, sizeof impl},
                  {"\"isa\": \"", isa, sizeof isa}};
        for (int j = 0; j < 3; j++) {
            const char *p = strstr(s->params, f[j].name);
            if (!p)
                continue;
            p += strlen(f[j].name);
            const int len = (int)strcspn(p, "\"");
            char v[64];
            snprintf(v, sizeof v, "%.*s", len, p);
            if (f[j].out) {
                if (!f[j].out[0])
                    snprintf(f[j].out, f[j].cap, "%s", v);
            } else {
                char pat[70], have[100];
                snprintf(pat, sizeof pat, ",%s,", v);
                snprintf(have, sizeof have, ",%s,", fams);
                if (!strstr(have, pat)) {
                    size_t l = strlen(fams);
                    snprintf(fams + l, sizeof fams - l, "%s%s", l ? "," : "", v);
                }
            }
        }
    }
    if (!fams[0])
        return;
    size_t l = strlen(r->note);
    snprintf(r->note + l, sizeof r->note - l, "%sran on %s (%s%s%sISA %s)", l ? "; " : "", fams,
             impl[0] ? "oneDNN " : "", impl, impl[0] ? ", " : "", isa[0] ? isa : "?");
}

/* The factor t(num) / t(den) of a pair of samples as key op `name` (nothing without both). */
static int pair_factor(ws_calib_run *run, const ws_calib_sample *num, const ws_calib_sample *den,
                       const char *name, ws_err *err)
{
    if (!num || !den)
        return 0;
    ws_fit_result r;
    double a[3] = {num->t_median, num->t_min, num->t_max},
           b[3] = {den->t_median, den->t_min, den->t_max};
    int rc =
        ws_fit_factor(a, b, num->repeats < den->repeats ? num->repeats : den->repeats, &r, err);
    if (rc)
        return rc;
    ws_calib_key k = num->key;
    snprintf(k.op, sizeof k.op, "%s", name);
    return add_fit(run, &k, &r, err);
}

/* Factor fits from paired samples: op "pinned_cmp" with params "memory": pinned/pageable
 * gives key op "pinned_read_factor" = t(pinned) / t(pageable); op "moe_cmp" with "phase":
 * after_moe/alone gives "attn_after_moe_factor"; op "copy_cmp" with "phase": alone/with_copy
 * gives "expert_copy_factor" = t(alone) / t(with copy), the experts' share of their
 * bandwidth beside a copy (attention kind "moe"), and "attn_copy_factor" the same for CPU
 * attention (kind "gqa"). */
static int fit_factors(ws_calib_run *run, ws_err *err)
{
    const ws_calib_sample *after_moe = NULL, *attn_alone = NULL;
    const ws_calib_sample *num = NULL, *den = NULL, *x_alone = NULL, *x_copy = NULL;
    const ws_calib_sample *a_alone = NULL, *a_copy = NULL;
    for (int i = 0; i < run->n_samples; i++) {
        const ws_calib_sample *s = &run->samples[i];
        if (!strcmp(s->key.op, "moe_cmp")) {
            if (strstr(s->params, "\"phase\": \"after_moe\""))
                after_moe = s;
            else if (strstr(s->params, "\"phase\": \"alone\""))
                attn_alone = s;
        }
        if (!strcmp(s->key.op, "copy_cmp")) {
            const int attn = !strcmp(s->key.attn_kind, "gqa");
            if (strstr(s->params, "\"phase\": \"with_copy\""))
                *(attn ? &a_copy : &x_copy) = s;
            else if (strstr(s->params, "\"phase\": \"alone\""))
                *(attn ? &a_alone : &x_alone) = s;
        }
        if (strcmp(s->key.op, "pinned_cmp"))
            continue;
        if (strstr(s->params, "\"memory\": \"pinned\""))
            num = s;
        else if (strstr(s->params, "\"memory\": \"pageable\""))
            den = s;
    }
    int rc = 0;
    /* Link contention: the H2D bandwidth while the CPU runs expert GEMMs (or while D2H
     * runs) over the H2D bandwidth alone, from the two transfer fits. It is the share of
     * the bandwidth left, at most 1: a ratio above 1 (the loaded copy as fast or a little
     * faster, within its spread) saw no contention and is stored as 1, the ratio in the
     * note. */
    const ws_calib_fit *alone = NULL;
    for (int i = 0; i < run->n_fits; i++)
        if (!strcmp(run->fits[i].key.op, "h2d") && !strcmp(run->fits[i].key.device, "link"))
            alone = &run->fits[i];
    for (int i = 0; alone && alone->r.good && i < run->n_fits && !rc; i++) {
        const ws_calib_fit *f = &run->fits[i];
        const char *name = !strcmp(f->key.op, "h2d_under_gemm")   ? "h2d_gemm_contention_factor"
                           : !strcmp(f->key.op, "h2d_concurrent") ? "h2d_duplex_factor"
                                                                  : NULL;
        if (!name || !f->r.good)
            continue;
        ws_fit_result r = {.form = WS_FIT_FACTOR,
                           .n = f->r.n,
                           .converged = 1,
                           .good = 1,
                           .r2 = NAN,
                           .heldout_mape_pct = NAN};
        const double ratio = f->r.bandwidth / alone->r.bandwidth;
        double a = f->r.bandwidth_se / f->r.bandwidth,
               b = alone->r.bandwidth_se / alone->r.bandwidth;
        r.factor = fmin(ratio, 1.0);
        r.factor_se = ratio * sqrt(a * a + b * b);
        if (ratio > 1.0)
            snprintf(r.note, sizeof r.note,
                     "W(%s) / W(h2d) = %.3f +- %.3f measured: no contention seen, held at 1",
                     f->key.op, ratio, r.factor_se);
        else
            snprintf(r.note, sizeof r.note, "W(%s) / W(h2d)", f->key.op);
        ws_calib_key k = f->key;
        snprintf(k.op, sizeof k.op, "%s", name);
        rc = add_fit(run, &k, &r, err);
    }
    if (!rc)
        rc = pair_factor(run, num, den, "pinned_read_factor", err);
    if (!rc)
        rc = pair_factor(run, after_moe, attn_alone, "attn_after_moe_factor", err);
    if (!rc)
        rc = pair_factor(run, x_alone, x_copy, "expert_copy_factor", err);
    if (!rc)
        rc = pair_factor(run, a_alone, a_copy, "attn_copy_factor", err);
    return rc;
}

static int add_fit(ws_calib_run *run, const ws_calib_key *k, const ws_fit_result *r, ws_err *err)
{
    if (run->n_fits == run->cap_fits) {
        int cap = run->cap_fits ? 2 * run->cap_fits : 16;
        ws_calib_fit *n = realloc(run->fits, sizeof *n * (size_t)cap);
        if (!n)
            return ws_err_set(err, WS_ENOMEM, "calib: out of memory");
        run->fits = n;
        run->cap_fits = cap;
    }
    ws_calib_fit *f = &run->fits[run->n_fits];
    memset(f, 0, sizeof *f);
    f->key = *k;
    f->r = *r;
    f->spread_pct = f->fallback_mape_pct = NAN;
    run->n_fits++;
    return 0;
}

/* The fallback the cost model takes for a key this run does not fit well (runtime/hw.c):
 * no fixed cost, the run's measured peak and read bandwidth (the GPU's best GEMM rate and
 * copy bandwidth). Named in name; 0 when the run measured neither (or the key is one of
 * those measurements). */
static int fallback_roof(const ws_calib_run *run, const ws_calib_key *k, ws_fit_result *fb,
                         char *name, size_t cap)
{
    if (is_transfer_op(k->op))
        return 0;
    const int one_thread = strstr(k->op, "_1t") != NULL, gpu = !strcmp(k->device, "gpu");
    const double P = gpu ? run->gpu_peak : run->peak_flops[one_thread];
    const double W = gpu ? run->gpu_bw : one_thread ? run->read_bw_1t : run->read_bw;
    if (!(P > 0) && !(W > 0))
        return 0;
    memset(fb, 0, sizeof *fb);
    fb->form = WS_FIT_ROOFLINE;
    fb->peak_flops = P > 0 ? P : 0;
    fb->bandwidth = W > 0 ? W : 0;
    snprintf(name, cap, "c0 0, %s peak %.4g Gflop/s, %s %.4g GB/s", gpu ? "GEMM" : "measured",
             P / 1e9, gpu ? "copy" : "read", W / 1e9);
    return 1;
}

/* The fallback's MAPE (%) on the points, and the verdict between it and the fit r: a fit is
 * used when it is valid and its held-out error is below the fallback's; without a fallback,
 * when it is valid and within WS_FIT_GOOD_MAPE_PCT (fit.c's judge). The note says which. */
static void against_fallback(const ws_calib_run *run, const ws_fit_point *pts, int n,
                             ws_calib_fit *f)
{
    ws_fit_result fb;
    f->fallback[0] = '\0';
    f->fallback_mape_pct = NAN;
    if (!fallback_roof(run, &f->key, &fb, f->fallback, sizeof f->fallback))
        return;
    double ape = 0;
    for (int i = 0; i < n; i++)
        ape += fabs(ws_fit_predict(&fb, pts[i].flops, pts[i].bytes) - pts[i].t) / pts[i].t;
    f->fallback_mape_pct = 100.0 * ape / n;
    ws_fit_result *r = &f->r;
    const int poor = !!strstr(r->note, "poor: held-out");
    const int valid = r->converged && isfinite(r->heldout_mape_pct) && (r->good || poor);
    const int better = valid && r->heldout_mape_pct < f->fallback_mape_pct;
    if (r->good == better)
        return;
    r->good = better;
    char was[sizeof r->note];
    snprintf(was, sizeof was, "%s", r->note);
    if (better) /* over the threshold, but better than what would stand in */
        snprintf(r->note, sizeof r->note,
                 "used: held-out %.1f%% beats the fallback's %.1f%%%s%.100s", r->heldout_mape_pct,
                 f->fallback_mape_pct, *was && !poor ? "; " : "", poor ? "" : was);
    else
        snprintf(r->note, sizeof r->note, "fallback used (%.1f%% against the fit's %.1f%%)%s%.90s",
                 f->fallback_mape_pct, r->heldout_mape_pct, *was ? "; " : "", was);
}

/* The median of the key's samples' spreads (NAN: none kept). */
static double key_spread(const ws_calib_run *run, const ws_calib_key *k)
{
    double v[512];
    int n = 0;
    for (int i = 0; i < run->n_samples && n < 512; i++)
        if (same_key(k, &run->samples[i].key) && isfinite(run->samples[i].spread_pct))
            v[n++] = run->samples[i].spread_pct;
    return n ? ws_median_sort(v, n) : NAN;
}

/* The time a fit takes for a sample: its robust estimate, the median where none was kept. */
static double sample_t(const ws_calib_sample *s)
{
    return s->t_est > 0 ? s->t_est : s->t_median;
}

#define PIECE_MARGIN_PTS 0.1 /* held-out points a piecewise fit must gain over a simpler one */

/* The expert GEMM's candidate forms besides the roofline: the serial and the piecewise in two
 * and three pieces (oneDNN switches kernels as the tokens per expert grow); the best held-out
 * one wins. */
static void expert_candidates(const ws_fit_point *pts, int n, ws_fit_result *r)
{
    ws_fit_result c;
    ws_err ferr = {0};
    for (int form = 0; form < 3; form++) {
        const int rc =
            form ? ws_fit_piecewise(pts, n, form + 1, &c, &ferr) : ws_fit_serial(pts, n, &c, &ferr);
        const int rates = form ? c.converged : c.converged && c.peak_flops > 0 && c.bandwidth > 0;
        /* pieces add parameters: kept only when better by more than PIECE_MARGIN_PTS */
        const double margin = form ? PIECE_MARGIN_PTS : 0;
        if (!rc && rates && isfinite(c.heldout_mape_pct) &&
            !(c.heldout_mape_pct + margin >= r->heldout_mape_pct))
            *r = c;
    }
}

int ws_calib_fit_all(ws_calib_run *run, ws_err *err)
{
    char *done = calloc((size_t)run->n_samples + 1, 1);
    ws_fit_point *pts = malloc(sizeof *pts * ((size_t)run->n_samples + 1));
    if (!done || !pts) {
        free(done);
        free(pts);
        return ws_err_set(err, WS_ENOMEM, "calib: out of memory");
    }
    int rc = 0;
    for (int i = 0; i < run->n_samples && !rc; i++) {
        if (done[i] || is_unfitted_op(run->samples[i].key.op))
            continue;
        const ws_calib_key *k = &run->samples[i].key;
        int n = 0;
        double ai_min = INFINITY, ai_max = 0;
        for (int j = i; j < run->n_samples; j++) {
            if (done[j] || !same_key(k, &run->samples[j].key))
                continue;
            done[j] = 1;
            const ws_calib_sample *s = &run->samples[j];
            pts[n++] = (ws_fit_point){s->flops, s->bytes, sample_t(s)};
            double ai = s->bytes > 0 ? s->flops / s->bytes : 0;
            ai_min = fmin(ai_min, ai);
            ai_max = fmax(ai_max, ai);
        }
        ws_fit_result r;
        ws_err ferr = {0};
        if (n < 3) {
            memset(&r, 0, sizeof r);
            r.n = n;
            r.heldout_mape_pct = NAN;
            snprintf(r.note, sizeof r.note, "too few samples (%d) to fit", n);
        } else if (is_transfer_op(k->op)) {
            if (ws_fit_transfer(pts, n, &r, &ferr))
                return ws_err_set(err, ferr.code, "calib: %s: %s", k->op, ferr.msg);
        } else {
            /* One intensity: only one rate is identifiable. Hold the other at the
             * machine's measured figure, on the side the samples do not sit on. */
            int one_thread = strstr(k->op, "_1t") != NULL, gpu = !strcmp(k->device, "gpu");
            double P = gpu ? run->gpu_peak : run->peak_flops[one_thread];
            double W = gpu ? run->gpu_bw : one_thread ? run->read_bw_1t : run->read_bw;
            double p_fix = 0, w_fix = 0;
            if (ai_max <= 1.5 * ai_min && P > 0 && W > 0) {
                if (ai_max * W < P)
                    p_fix = P; /* memory bound: fit W */
                else
                    w_fix = W; /* compute bound: fit P */
            } else if (ai_max <= 1.5 * ai_min) {
                p_fix = INFINITY; /* no machine figures: fit the byte rate alone */
            }
            if (ws_fit_roofline(pts, n, p_fix, w_fix, &r, &ferr))
                return ws_err_set(err, ferr.code, "calib: %s: %s", k->op, ferr.msg);
            if (isinf(p_fix))
                r.p_fixed = 0; /* P was left out, not held at a measurement */
            if (!strcmp(k->op, "expert_gemm") && ai_max > 1.5 * ai_min)
                expert_candidates(pts, n, &r);
            if (!strcmp(k->op, "expert_gemm"))
                note_family(run, k, &r);
        }
        if ((rc = add_fit(run, k, &r, err)))
            break;
        ws_calib_fit *f = &run->fits[run->n_fits - 1];
        f->spread_pct = key_spread(run, k);
        if (n >= 3)
            against_fallback(run, pts, n, f);
    }
    free(done);
    free(pts);
    if (!rc)
        rc = fit_factors(run, err);
    /* a flagged run is kept as a record, but its profile takes none of its fits */
    for (int i = 0; !rc && run->flagged && i < run->n_fits; i++) {
        ws_fit_result *r = &run->fits[i].r;
        if (!r->good)
            continue;
        r->good = 0;
        char was[sizeof r->note];
        snprintf(was, sizeof was, "%s", r->note);
        snprintf(r->note, sizeof r->note, "not used: the run is flagged as noisy%s%.110s",
                 *was ? "; the fit: " : "", was);
    }
    return rc;
}

/* A fit as a database row; the rates a form leaves out are NAN (NULL in the table). */
static void fit_row(const ws_calib_fit *f, ws_calibdb_fit *row)
{
    const ws_fit_result *r = &f->r;
    memset(row, 0, sizeof *row);
    row->key = f->key;
    snprintf(row->form, sizeof row->form, "%s",
             r->form == WS_FIT_TRANSFER     ? "transfer"
             : r->form == WS_FIT_FACTOR     ? "factor"
             : r->form == WS_FIT_SERIAL     ? "serial"
             : r->form == WS_FIT_SATURATING ? "saturating"
             : r->form == WS_FIT_PIECEWISE  ? "piecewise"
                                            : "roofline");
    row->c0 = r->c0;
    row->c0_se = r->c0_se;
    const int sat = r->form == WS_FIT_SATURATING;
    const int pw = r->form == WS_FIT_PIECEWISE;
    const int has_p =
        (r->form == WS_FIT_ROOFLINE || r->form == WS_FIT_SERIAL || sat || pw) && r->peak_flops > 0;
    row->peak_flops = has_p ? r->peak_flops : NAN;
    row->peak_flops_se = has_p ? r->peak_flops_se : NAN;
    row->bandwidth = sat ? NAN : r->bandwidth;
    row->bandwidth_se = sat ? NAN : r->bandwidth_se;
    /* a saturating fit keeps its half point x_h in the factor columns */
    row->factor = r->form == WS_FIT_FACTOR || sat ? r->factor : NAN;
    row->factor_se = r->form == WS_FIT_FACTOR || sat ? r->factor_se : NAN;
    row->r2 = r->r2;
    row->heldout_mape_pct = r->heldout_mape_pct;
    row->n_samples = r->n;
    row->good = r->good;
    row->p_fixed = r->p_fixed;
    row->w_fixed = r->w_fixed;
    row->compute_bound = r->compute_bound;
    snprintf(row->note, sizeof row->note, "%s", r->note);
    row->spread_pct = f->spread_pct;
    snprintf(row->fallback, sizeof row->fallback, "%s", f->fallback);
    row->fallback_mape_pct = f->fallback_mape_pct;
    if (pw && r->n_low > 0) {
        json_t *a = json_array();
        for (int k = 0; k < r->n_low; k++)
            json_array_append_new(a, json_pack("{s:f, s:f, s:f, s:f}", "upto", r->low[k].upto, "c0",
                                               r->low[k].c0, "peak_flops", r->low[k].peak_flops,
                                               "bandwidth", r->low[k].bandwidth));
        char *text = json_dumps(a, JSON_COMPACT | JSON_REAL_PRECISION(6));
        snprintf(row->pieces, sizeof row->pieces, "%s", text ? text : "");
        free(text);
        json_decref(a);
    }
}

/* "device.op[.attn_kind][.dtype]", the key profiles and `calib show` name a fit by. */
static void key_name(const ws_calib_key *k, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s.%s%s%s%s%s", k->device, k->op, *k->attn_kind ? "." : "", k->attn_kind,
             *k->dtype ? "." : "", k->dtype);
}

/* A piecewise fit's lower pieces as profile parameters <key>.low<k>.{upto, c0, peak_flops,
 * bandwidth}, k from 1 (runtime/hw.h reads them); a rate of 0 (left out) is not written. */
static void profile_pieces(json_t *params, const char *key, const char *ref, const char *text)
{
    json_t *a = json_loads(text, 0, NULL), *pc;
    size_t k;
    json_array_foreach(a, k, pc)
    {
        static const struct {
            const char *name, *unit;
        } f[4] = {{"upto", "flop/B"}, {"c0", "s"}, {"peak_flops", "flop/s"}, {"bandwidth", "B/s"}};
        for (int j = 0; j < 4; j++) {
            const double v = json_number_value(json_object_get(pc, f[j].name));
            if (!(v > 0) && j != 1)
                continue;
            char pk[200];
            snprintf(pk, sizeof pk, "%s.low%zu.%s", key, k + 1, f[j].name);
            json_object_set_new(params, pk,
                                json_pack("{s:f, s:s, s:s, s:s}", "value", v, "unit", f[j].unit,
                                          "source", "fitted", "reference", ref));
        }
    }
    json_decref(a);
}

/* The attention reference of run run_id (calib.h): for every model whose bf16 attention the
 * run timed at the reference shape, cpu.reference_attn.<model>.bf16.bandwidth, the sample's
 * KV read rate at its estimate. A run without such samples adds nothing. */
static void reference_attn(ws_store *st, long long run_id, json_t *params)
{
    static const char *const kinds[] = {"gqa", "mla"};
    for (int k = 0; k < 2; k++) {
        ws_calibdb_key key = {.device = "cpu", .op = "attn", .dtype = "bf16"};
        snprintf(key.attn_kind, sizeof key.attn_kind, "%s", kinds[k]);
        ws_calibdb_sample *x = NULL;
        int n = 0;
        ws_err err = {0};
        if (ws_calibdb_get_samples(st, run_id, &key, &x, &n, &err))
            continue;
        for (int i = 0; i < n; i++) {
            json_t *sp = json_loads(x[i].params, 0, NULL);
            const char *model = json_string_value(json_object_get(sp, "model"));
            const double t = x[i].t_est > 0 ? x[i].t_est : x[i].t_median;
            if (model && t > 0 &&
                json_integer_value(json_object_get(sp, "batch")) == WS_CALIB_ATTN_REF_BATCH &&
                json_integer_value(json_object_get(sp, "ctx")) == WS_CALIB_ATTN_REF_CTX) {
                char pk[160];
                snprintf(pk, sizeof pk, "cpu.reference_attn.%s.bf16.bandwidth", model);
                json_object_set_new(
                    params, pk,
                    json_pack("{s:f, s:s, s:s, s:o}", "value", x[i].bytes / t, "unit", "B/s",
                              "source", "measured", "reference",
                              json_sprintf("run %lld's attention sample %s %d x %d tokens "
                                           "(median of the fastest half; calib/calib.h)",
                                           run_id, model, WS_CALIB_ATTN_REF_BATCH,
                                           WS_CALIB_ATTN_REF_CTX)));
            }
            json_decref(sp);
        }
        free(x);
    }
}

/* Rebuilds profile `name` from the newest good fit of every key of this host whose
 * device is one of the n `devices`. */
static int rebuild_profile(ws_store *st, long long host_id, const char *name, const char *kind,
                           const char *const *devices, int n_devices, const char *desc,
                           long long run_id, ws_err *err)
{
    ws_calibdb_fit *fits;
    int n;
    int rc = ws_calibdb_newest_good_fits(st, host_id, devices, n_devices, &fits, &n, err);
    if (rc || n == 0)
        return rc; /* nothing to write when the host has no good fit on these devices */
    json_t *params = json_object();
    for (int i = 0; i < n; i++) {
        const ws_calibdb_fit *f = &fits[i];
        char key[128], ref[256], pk[160];
        key_name(&f->key, key, sizeof key);
        /* the instruction family an expert GEMM ran on is part of where the value came from */
        const char *fam = strstr(f->note, "ran on ");
        snprintf(ref, sizeof ref, "fit %lld of run %lld%s%s", f->id, f->run_id, fam ? ", " : "",
                 fam ? fam : "");
        const int factor = !strcmp(f->form, "factor"), sat = !strcmp(f->form, "saturating");
        const int pw = !strcmp(f->form, "piecewise");
        const struct {
            const char *suffix, *unit;
            double v;
            int fixed;
        } cols[] = {
            {"c0", "s", f->c0, 0},
            {"peak_flops", "flop/s", f->peak_flops, f->p_fixed},
            {"bandwidth", "B/s", f->bandwidth, f->w_fixed},
            {"factor", "1", factor ? f->factor : NAN, 0},
            /* 1: t = c0 + F/P + B/W (runtime/cost.h), not the max */
            {"serial", "1", strcmp(f->form, "serial") && !pw ? NAN : 1.0, 0},
            /* the keys per query at half the rate (runtime/cost.h, prefill) */
            {"half_keys", "tokens", sat ? f->factor : NAN, 0},
        };
        for (int c = 0; c < (int)(sizeof cols / sizeof cols[0]); c++) {
            double v = cols[c].v;
            if (isnan(v) || (c > 0 && !(v > 0)) || (c == 0 && factor))
                continue; /* a factor has no fixed cost */
            snprintf(pk, sizeof pk, "%s.%s", key, cols[c].suffix);
            json_t *p = json_object();
            json_object_set_new(p, "value", json_real(v));
            json_object_set_new(p, "unit", json_string(cols[c].unit));
            json_object_set_new(p, "source", json_string(cols[c].fixed ? "measured" : "fitted"));
            json_object_set_new(
                p, "reference",
                cols[c].fixed ? json_sprintf("%s (held at the run's measured peak/bandwidth)", ref)
                              : json_string(ref));
            json_object_set_new(params, pk, p);
        }
        if (pw)
            profile_pieces(params, key, ref, f->pieces);
    }
    free(fits);
    /* the host's reference probe when calibrated: what validate holds the host against */
    double probe_bw;
    long long probe_run;
    ws_err perr = {0};
    if (!strcmp(kind, "host") &&
        !ws_calibdb_newest_probe(st, host_id, &probe_bw, &probe_run, &perr)) {
        json_t *p = json_object();
        json_object_set_new(p, "value", json_real(probe_bw));
        json_object_set_new(p, "unit", json_string("B/s"));
        json_object_set_new(p, "source", json_string("measured"));
        json_object_set_new(
            p, "reference",
            json_sprintf("run %lld's reference probe (median; calib/measure.h)", probe_run));
        json_object_set_new(params, "cpu.reference_read.bandwidth", p);
        reference_attn(st, probe_run, params);
    }
    json_t *profile = json_object();
    json_object_set_new(profile, "name", json_string(name));
    json_object_set_new(profile, "kind", json_string(kind));
    json_object_set_new(profile, "description", json_string(desc));
    json_object_set_new(profile, "params", params);
    json_t *file = json_object(), *arr = json_array();
    json_array_append_new(arr, profile);
    json_object_set_new(file, "profiles", arr);
    char *text = json_dumps(file, 0);
    json_decref(file);
    rc = ws_store_import_profiles(st, text, name, NULL, err); /* joins our transaction */
    free(text);
    if (!rc)
        rc = ws_calibdb_link_profile(st, name, host_id, run_id, err);
    return rc;
}

static int store_in_tx(ws_store *st, const ws_calib_run *run, long long *run_id, ws_err *err)
{
    const ws_host_fp *h = &run->host;
    ws_calibdb_host host = {.cpu_cores = h->cpu_cores,
                            .mem_bytes = h->mem_bytes,
                            .has_gpu = h->has_gpu,
                            .gpu_mem_bytes = h->gpu_mem_bytes};
    snprintf(host.fingerprint, sizeof host.fingerprint, "%s", h->id);
    snprintf(host.cpu_model, sizeof host.cpu_model, "%s", h->cpu_model);
    snprintf(host.isa, sizeof host.isa, "%s", h->isa);
    snprintf(host.gpu_name, sizeof host.gpu_name, "%s", h->gpu_name);
    snprintf(host.gpu_cc, sizeof host.gpu_cc, "%s", h->gpu_cc);
    snprintf(host.gpu_driver, sizeof host.gpu_driver, "%s", h->gpu_driver);
    snprintf(host.pcie_link, sizeof host.pcie_link, "%s", h->pcie_link);
    ws_calibdb_run row = {0};
    int rc = ws_calibdb_put_host(st, &host, &row.host_id, err);
    if (rc)
        return rc;
    snprintf(row.tool_version, sizeof row.tool_version, "%s", WS_VERSION);
    snprintf(row.mode, sizeof row.mode, "%s", run->mode);
    snprintf(row.scope, sizeof row.scope, "%s", run->scope);
    snprintf(row.started_at, sizeof row.started_at, "%s", run->started_at);
    snprintf(row.finished_at, sizeof row.finished_at, "%s", run->finished_at);
    snprintf(row.note, sizeof row.note, "%s", run->note);
    row.drift_pct = run->drift_pct;
    row.remeasured = run->remeasured;
    row.flagged = run->flagged;
    row.probe_bw = run->probe_bw;
    if ((rc = ws_calibdb_put_run(st, &row, err)))
        return rc;

    const int fault =
        ws_calib_fault_after_samples >= 0 && ws_calib_fault_after_samples < run->n_samples;
    if ((rc = ws_calibdb_put_samples(st, row.id, run->samples,
                                     fault ? ws_calib_fault_after_samples : run->n_samples, err)))
        return rc;
    if (fault)
        return ws_err_set(err, WS_EDB, "%s: injected fault after %d samples", ws_store_path(st),
                          ws_calib_fault_after_samples);

    if (run->n_sources &&
        (rc = ws_calibdb_put_sources(st, row.id, run->sources, run->n_sources, err)))
        return rc;
    ws_calibdb_fit *rows = calloc((size_t)run->n_fits + 1, sizeof *rows);
    if (!rows)
        return ws_err_set(err, WS_ENOMEM, "calib: out of memory");
    for (int i = 0; i < run->n_fits; i++)
        fit_row(&run->fits[i], &rows[i]);
    rc = ws_calibdb_put_fits(st, row.id, rows, run->n_fits, err);
    free(rows);
    if (rc)
        return rc;

    char name[160], desc[320];
    snprintf(name, sizeof name, "host:%s", h->id);
    snprintf(desc, sizeof desc, "calibrated host: %s, %d CPUs (%s)", h->cpu_model, h->cpu_cores,
             h->isa);
    static const char *const cpu[] = {"cpu"}, *const gpu[] = {"gpu", "link"};
    if ((rc = rebuild_profile(st, row.host_id, name, "host", cpu, 1, desc, row.id, err)))
        return rc;
    if (h->has_gpu) {
        if (run->gpu_profile[0])
            snprintf(name, sizeof name, "%s", run->gpu_profile);
        else
            snprintf(name, sizeof name, "gpu:%s", h->gpu_name);
        if (run->n_sources)
            snprintf(desc, sizeof desc, "imported GPU %.120s: %.120s (calib import, run sources)",
                     h->gpu_name, run->note);
        else
            snprintf(desc, sizeof desc, "calibrated GPU %s (sm %s) and its host link, on host %s",
                     h->gpu_name, h->gpu_cc, h->id);
        if ((rc = rebuild_profile(st, row.host_id, name, "gpu", gpu, 2, desc, row.id, err)))
            return rc;
    }
    *run_id = row.id;
    return 0;
}

int ws_calib_store(ws_store *store, const ws_calib_run *run, long long *run_id, ws_err *err)
{
    /* Ctrl-C during the commit must not split it: hold SIGINT/SIGTERM until it is done
     * (SQLite's journal covers a kill -9). */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &old);
    int rc = ws_store_begin(store, err);
    if (!rc) {
        rc = store_in_tx(store, run, run_id, err);
        if (!rc)
            rc = ws_store_commit(store, err);
        if (rc)
            ws_store_rollback(store);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* A number for JSON: null where the row has none. */
static json_t *num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

json_t *ws_calib_sources_json(const ws_calibdb_source *src, int n)
{
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        const ws_calibdb_source *x = &src[i];
        json_t *o = json_object();
        json_object_set_new(o, "path", json_string(x->path));
        json_object_set_new(o, "sha256", json_string(x->sha256));
        json_object_set_new(o, "bytes", json_integer(x->bytes));
        json_object_set_new(o, "rows", json_integer(x->rows));
        json_object_set_new(o, "what", json_string(x->what));
        json_object_set_new(o, "measured_by", json_string(x->measured_by));
        json_object_set_new(o, "tool", json_string(x->tool));
        json_object_set_new(o, "gpu", json_string(x->gpu));
        json_object_set_new(o, "dtype", json_string(x->dtype));
        json_object_set_new(o, "licence", json_string(x->licence));
        json_array_append_new(arr, o);
    }
    return arr;
}

/* The run's row and its host's, as `calib show` prints them. */
static json_t *show_run(const ws_calibdb_run *run, const ws_calibdb_host *host)
{
    json_t *r = json_object();
    json_object_set_new(r, "id", json_integer(run->id));
    json_object_set_new(r, "tool_version", json_string(run->tool_version));
    json_object_set_new(r, "mode", json_string(run->mode));
    json_object_set_new(r, "scope", json_string(run->scope));
    json_object_set_new(r, "started_at", json_string(run->started_at));
    json_object_set_new(r, "finished_at", json_string(run->finished_at));
    json_object_set_new(r, "host", json_string(host->fingerprint));
    json_object_set_new(r, "cpu_model", json_string(host->cpu_model));
    json_object_set_new(r, "cpu_cores", json_integer(host->cpu_cores));
    json_object_set_new(r, "isa", json_string(host->isa));
    json_object_set_new(r, "gpu_name", host->has_gpu ? json_string(host->gpu_name) : json_null());
    json_object_set_new(r, "samples", json_integer(run->n_samples));
    json_object_set_new(r, "note", json_string(run->note));
    json_object_set_new(r, "drift_pct", num(run->drift_pct));
    json_object_set_new(r, "remeasured", json_boolean(run->remeasured));
    json_object_set_new(r, "flagged", json_boolean(run->flagged));
    json_object_set_new(r, "probe_gbps", num(run->probe_bw / 1e9));
    return r;
}

static json_t *show_fits(const ws_calibdb_fit *fits, int n_fits)
{
    json_t *arr = json_array();
    for (int i = 0; i < n_fits; i++) {
        const ws_calibdb_fit *f = &fits[i];
        json_t *o = json_object();
        char key[128];
        key_name(&f->key, key, sizeof key);
        json_object_set_new(o, "key", json_string(key));
        json_object_set_new(o, "id", json_integer(f->id));
        json_object_set_new(o, "device", json_string(f->key.device));
        json_object_set_new(o, "op", json_string(f->key.op));
        json_object_set_new(o, "dtype", json_string(f->key.dtype));
        json_object_set_new(o, "attn_kind", json_string(f->key.attn_kind));
        json_object_set_new(o, "form", json_string(f->form));
        json_object_set_new(o, "c0", num(f->c0));
        json_object_set_new(o, "c0_se", num(f->c0_se));
        json_object_set_new(o, "peak_flops", num(f->peak_flops));
        json_object_set_new(o, "peak_flops_se", num(f->peak_flops_se));
        json_object_set_new(o, "bandwidth", num(f->bandwidth));
        json_object_set_new(o, "bandwidth_se", num(f->bandwidth_se));
        json_object_set_new(o, "p_fixed", json_boolean(f->p_fixed));
        json_object_set_new(o, "w_fixed", json_boolean(f->w_fixed));
        json_object_set_new(o, "compute_bound", json_boolean(f->compute_bound));
        json_object_set_new(o, "r2", num(f->r2));
        json_object_set_new(o, "heldout_mape_pct", num(f->heldout_mape_pct));
        json_object_set_new(o, "n_samples", json_integer(f->n_samples));
        json_object_set_new(o, "good", json_boolean(f->good));
        json_object_set_new(o, "note", json_string(f->note));
        const int sat = !strcmp(f->form, "saturating");
        json_object_set_new(o, "factor", num(sat ? NAN : f->factor));
        json_object_set_new(o, "factor_se", num(sat ? NAN : f->factor_se));
        json_object_set_new(o, "half_keys", num(sat ? f->factor : NAN));
        json_object_set_new(o, "half_keys_se", num(sat ? f->factor_se : NAN));
        json_object_set_new(o, "spread_pct", num(f->spread_pct));
        json_object_set_new(o, "fallback", *f->fallback ? json_string(f->fallback) : json_null());
        json_object_set_new(o, "fallback_mape_pct", num(f->fallback_mape_pct));
        json_t *pieces = *f->pieces ? json_loads(f->pieces, 0, NULL) : NULL;
        json_object_set_new(o, "pieces", pieces ? pieces : json_array());
        json_array_append_new(arr, o);
    }
    return arr;
}

/* Single measurements of the machine (not fitted): rates from their samples. */
static json_t *show_measured(const ws_calibdb_sample *samples, int n_samples)
{
    static const char *const single[] = {"membw_read_1t", "membw_triad", "peak_flops",
                                         "peak_flops_1t", NULL};
    json_t *meas = json_array();
    for (int i = 0; i < n_samples; i++) {
        const ws_calibdb_sample *x = &samples[i];
        int k = 0;
        while (single[k] && strcmp(single[k], x->key.op))
            k++;
        if (!single[k])
            continue;
        const int is_flops = x->flops > 0;
        json_t *m = json_object();
        json_object_set_new(m, "key", json_sprintf("%s.%s", x->key.device, x->key.op));
        json_object_set_new(m, "value", num((is_flops ? x->flops : x->bytes) / x->t_median));
        json_object_set_new(m, "unit", json_string(is_flops ? "flop/s" : "B/s"));
        json_object_set_new(m, "source", json_string("measured"));
        json_object_set_new(m, "params", json_string(x->params));
        json_array_append_new(meas, m);
    }
    return meas;
}

json_t *ws_calib_show(ws_store *store, long long run_id, ws_err *err)
{
    ws_calibdb_run run;
    ws_calibdb_host host;
    if (ws_calibdb_get_run(store, run_id, &run, &host, err))
        return NULL;
    ws_calibdb_fit *fits = NULL;
    ws_calibdb_sample *samples = NULL;
    ws_calibdb_source *src = NULL;
    int n_fits = 0, n_samples = 0, n_src = 0;
    if (ws_calibdb_get_fits(store, run.id, &fits, &n_fits, err) ||
        ws_calibdb_get_samples(store, run.id, NULL, &samples, &n_samples, err) ||
        ws_calibdb_get_sources(store, run.id, &src, &n_src, err)) {
        free(fits);
        free(samples);
        return NULL;
    }
    json_t *out = json_object();
    json_object_set_new(out, "run", show_run(&run, &host));
    json_object_set_new(out, "fits", show_fits(fits, n_fits));
    /* An imported run: the files its samples came from. */
    json_object_set_new(out, "sources", ws_calib_sources_json(src, n_src));
    json_object_set_new(out, "measured", show_measured(samples, n_samples));
    free(src);
    free(fits);
    free(samples);
    return out;
}

int ws_calib_host_profile(ws_store *s, char *buf, size_t cap)
{
    ws_host_fp fp;
    ws_profile p = {0};
    ws_isa isa;
    if (cap)
        buf[0] = 0;
    if (ws_isa_resolve(WS_ISA_AUTO, &isa, NULL) || ws_host_fp_detect(ws_isa_name(isa), &fp, NULL))
        return 0;
    snprintf(buf, cap, "host:%s", fp.id);
    if (ws_profile_load(s, buf, &p, NULL))
        return 0;
    ws_profile_free(&p);
    return 1;
}
