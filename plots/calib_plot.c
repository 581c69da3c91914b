/* calib_plot: the data of plots/calib.gp (see calib_plot.h). */
#include "calib_plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibdb.h"
#include "ws_gnuplot.h"

#define CURVE_POINTS 16 /* model points between two measured sizes */

/* A stored fit's model: t = c0 + max(F / P, B / W) (roofline), c0 + B / W (transfer) or
 * c0 + F / P + B / W (serial); a rate the row leaves unset (NAN) drops its term. */
typedef enum fit_form { FORM_ROOFLINE, FORM_TRANSFER, FORM_SERIAL } fit_form;

typedef struct fit_model {
    fit_form form;
    double c0, peak_flops, bandwidth; /* s, flop/s, B/s; 0: none */
} fit_model;

static fit_model model_of(const ws_calibdb_fit *f)
{
    return (fit_model){.form = !strcmp(f->form, "transfer") ? FORM_TRANSFER
                               : !strcmp(f->form, "serial") ? FORM_SERIAL
                                                            : FORM_ROOFLINE,
                       .c0 = isnan(f->c0) ? 0 : f->c0,
                       .peak_flops = isnan(f->peak_flops) ? 0 : f->peak_flops,
                       .bandwidth = isnan(f->bandwidth) ? 0 : f->bandwidth};
}

/* The model's time of a call of `flops` and `bytes` (calib/fit.h's ws_fit_predict). */
static double model_time(const fit_model *r, double flops, double bytes)
{
    double tf = r->peak_flops > 0 ? flops / r->peak_flops : 0.0;
    double tb = r->bandwidth > 0 ? bytes / r->bandwidth : 0.0;
    if (r->form == FORM_SERIAL)
        return r->c0 + tf + tb;
    return r->c0 + (r->form == FORM_TRANSFER ? tb : (tf > tb ? tf : tb));
}

typedef struct panel_ctx {
    ws_store *store;
    long long run_id; /* in: 0 = newest; out: the run drawn */
} panel_ctx;

/* The size a sample is drawn at and the work its rate counts: flops for a compute-bound
 * fit, bytes otherwise. */
static double work(const ws_calibdb_sample *x, int by_flops)
{
    return by_flops ? x->flops : x->bytes;
}

static int by_work_flops(const void *a, const void *b)
{
    double x = ((const ws_calibdb_sample *)a)->flops, y = ((const ws_calibdb_sample *)b)->flops;
    return (x > y) - (x < y);
}

static int by_work_bytes(const void *a, const void *b)
{
    double x = ((const ws_calibdb_sample *)a)->bytes, y = ((const ws_calibdb_sample *)b)->bytes;
    return (x > y) - (x < y);
}

/* One panel's line of titles.tsv: the key, the fitted parameters, y label, x label, and
 * how the model is drawn (a curve, or a point per sample when the samples mix shapes). */
static void put_titles(FILE *t, const ws_calibdb_fit *f, const fit_model *r, int by_flops,
                       int curve)
{
    char key[160], rates[200] = "";
    snprintf(key, sizeof key, "%s %s%s%s%s%s (%s fit)%s", f->key.device, f->key.op,
             *f->key.attn_kind ? " " : "", f->key.attn_kind, *f->key.dtype ? " " : "",
             f->key.dtype, f->form, f->good ? "" : " - POOR FIT");
    ws_gnuplot_text(t, key);
    if (r->peak_flops > 0)
        snprintf(rates, sizeof rates, "P = %.3g GFLOP/s%s, ", r->peak_flops / 1e9,
                 f->p_fixed ? " (held)" : "");
    if (r->bandwidth > 0) {
        size_t l = strlen(rates);
        snprintf(rates + l, sizeof rates - l, "W = %.3g GB/s%s, ", r->bandwidth / 1e9,
                 f->w_fixed ? " (held)" : "");
    }
    size_t l = strlen(rates);
    snprintf(rates + l, sizeof rates - l, "c0 = %.3g us; held-out error %.1f%%", r->c0 * 1e6,
             f->heldout_mape_pct);
    fputc('\t', t);
    ws_gnuplot_text(t, rates);
    fprintf(t, "\t%s\t%s\t%s\n", by_flops ? "achieved GFLOP/s" : "achieved GB/s",
            by_flops ? "work per call (FLOP)" : "bytes moved per call (B)",
            curve ? "curve" : "points");
}

/* 1 when every sample has the same arithmetic intensity (flops/bytes within 1%): the model is
 * then one curve of size; samples of several shapes get the model at each sample instead. */
static int one_shape(const ws_calibdb_sample *x, int nx)
{
    double lo = INFINITY, hi = 0;
    for (int j = 0; j < nx; j++) {
        if (!(x[j].bytes > 0))
            return 0;
        double i = x[j].flops / x[j].bytes;
        lo = i < lo ? i : lo;
        hi = i > hi ? i : hi;
    }
    return hi <= lo * 1.01 || hi == 0;
}

/* Writes n.dat (size, rate median, rate at t_max, rate at t_min, model error %) and n.fit
 * (size, model rate: a smooth curve between the measured sizes, or one row per sample). */
static int put_panel(const char *dir, int n, ws_calibdb_sample *x, int nx, const fit_model *r,
                     int by_flops, int curve, ws_err *err)
{
    char name[32];
    qsort(x, (size_t)nx, sizeof *x, by_flops ? by_work_flops : by_work_bytes);
    snprintf(name, sizeof name, "%d.dat", n);
    FILE *d = ws_gnuplot_open(dir, name, err);
    if (!d)
        return err->code;
    for (int j = 0; j < nx; j++) {
        double w = work(&x[j], by_flops), t = x[j].t_median;
        double tmin = isnan(x[j].t_min) ? t : x[j].t_min, tmax = isnan(x[j].t_max) ? t : x[j].t_max;
        double tm = model_time(r, x[j].flops, x[j].bytes);
        if (!(t > 0 && w > 0))
            continue;
        fprintf(d, "%.6g\t%.6g\t%.6g\t%.6g\t%.6g\n", w, w / t / 1e9,
                tmax > 0 ? w / tmax / 1e9 : NAN, tmin > 0 ? w / tmin / 1e9 : NAN,
                100.0 * (tm - t) / t);
    }
    int rc = ws_gnuplot_close(d, name, err);
    if (rc)
        return rc;
    snprintf(name, sizeof name, "%d.fit", n);
    FILE *c = ws_gnuplot_open(dir, name, err);
    if (!c)
        return err->code;
    for (int j = 0; !curve && j < nx; j++) {
        double w = work(&x[j], by_flops), tm = model_time(r, x[j].flops, x[j].bytes);
        if (w > 0 && tm > 0)
            fprintf(c, "%.6g\t%.6g\n", w, w / tm / 1e9);
    }
    for (int j = 0; curve && j + 1 < nx; j++) {
        const ws_calibdb_sample *a = &x[j], *b = &x[j + 1];
        for (int k = 0; k <= CURVE_POINTS; k++) {
            if (k == CURVE_POINTS && j + 2 < nx)
                break;
            double u = (double)k / CURVE_POINTS;
            /* geometric steps, with flops and bytes moving together */
            double fl = a->flops > 0 && b->flops > 0 ? a->flops * pow(b->flops / a->flops, u)
                                                     : a->flops + u * (b->flops - a->flops);
            double by = a->bytes > 0 && b->bytes > 0 ? a->bytes * pow(b->bytes / a->bytes, u)
                                                     : a->bytes + u * (b->bytes - a->bytes);
            double w = by_flops ? fl : by, tm = model_time(r, fl, by);
            if (w > 0 && tm > 0)
                fprintf(c, "%.6g\t%.6g\n", w, w / tm / 1e9);
        }
    }
    return ws_gnuplot_close(c, name, err);
}

static int write_panels(void *vctx, const char *dir, int *n_out, ws_err *err)
{
    panel_ctx *ctx = vctx;
    ws_calibdb_run run;
    ws_calibdb_host host;
    ws_calibdb_fit *fits;
    int n_fits, n = 0, rc;
    *n_out = 0;
    if ((rc = ws_calibdb_get_run(ctx->store, ctx->run_id, &run, &host, err)) ||
        (rc = ws_calibdb_get_fits(ctx->store, run.id, &fits, &n_fits, err)))
        return rc;
    ctx->run_id = run.id;
    FILE *t = ws_gnuplot_open(dir, "titles.tsv", err);
    if (!t) {
        free(fits);
        return err->code;
    }
    for (int i = 0; i < n_fits && !rc; i++) {
        const ws_calibdb_fit *f = &fits[i];
        /* a factor has no curve; a saturating fit's rate follows the keys per query, which a
         * stored sample's flops and bytes do not carry: neither is drawn */
        if (!strcmp(f->form, "factor") || !strcmp(f->form, "saturating") || f->n_samples < 3)
            continue;
        const fit_model r = model_of(f);
        const int by_flops = r.form != FORM_TRANSFER && f->compute_bound && r.peak_flops > 0;
        ws_calibdb_sample *x;
        int nx;
        if ((rc = ws_calibdb_get_samples(ctx->store, run.id, &f->key, &x, &nx, err)))
            break;
        if (nx < 1) { /* a fit whose samples are not stored: nothing to draw it against */
            free(x);
            continue;
        }
        const int curve = one_shape(x, nx);
        rc = put_panel(dir, n + 1, x, nx, &r, by_flops, curve, err);
        free(x);
        if (!rc) {
            put_titles(t, f, &r, by_flops, curve);
            n++;
        }
    }
    free(fits);
    int crc = ws_gnuplot_close(t, "titles.tsv", err);
    if (!rc)
        rc = crc;
    if (!rc && n == 0)
        rc = ws_err_set(err, WS_ENOTFOUND, "calibration run %lld has no fits to plot", run.id);
    *n_out = n;
    return rc;
}

int ws_calib_plot(ws_store *store, const ws_plot_req *req, char *what, size_t cap, ws_err *err)
{
    panel_ctx ctx = {store, req->run};
    int n = 0;
    int rc = ws_gnuplot_figure("calib", req->out, write_panels, &ctx, &n, err);
    if (!rc)
        snprintf(what, cap, "%d panels, calibration run %lld, measured vs fitted", n, ctx.run_id);
    return rc;
}
