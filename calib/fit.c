/* fit: GSL roofline and transfer fits with k-fold held-out error (see fit.h). */
#include "fit.h"

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IRLS_ROUNDS 12   /* reweighting rounds of the least-absolute-deviation fit */
#define IRLS_FLOOR 1e-3  /* smallest |relative residual| a weight is computed from */

/* Parameters are fitted in scaled units so LM sees O(1) numbers:
 * c0 in microseconds, 1/P in ns per Mflop... chosen as s per 1e9 units (s/GB, s/Gflop). */
#define C0_UNIT 1e-6
#define RATE_UNIT 1e9

typedef struct fit_data {
    const ws_fit_point *pts;
    const int *idx; /* points used */
    int n;
    double inv_p_fixed, inv_w_fixed; /* > 0 when held fixed (in s per 1e9) */
    int free_p, free_w;              /* which rates are parameters */
    int fix_c0;                      /* c0 held at 0 (a negative fixed cost is unphysical) */
    const double *w;                 /* IRLS residual weights (per used point), NULL = 1 */
} fit_data;

/* Unpacks the parameter vector: x = [c0, (1/P), (1/W)] in scaled units. */
static void unpack(const fit_data *d, const gsl_vector *x, double *c0, double *ip, double *iw)
{
    int k = 0;
    *c0 = d->fix_c0 ? 0.0 : gsl_vector_get(x, k++);
    *ip = d->free_p ? gsl_vector_get(x, k++) : d->inv_p_fixed;
    *iw = d->free_w ? gsl_vector_get(x, k++) : d->inv_w_fixed;
}

/* The roofline's time for one point, from parameters in scaled units. */
static double predict_raw(double c0, double ip, double iw, const ws_fit_point *p)
{
    double tf = p->flops / RATE_UNIT * ip, tb = p->bytes / RATE_UNIT * iw;
    return c0 * C0_UNIT + (tf > tb ? tf : tb);
}

static int roof_f(const gsl_vector *x, void *params, gsl_vector *f)
{
    const fit_data *d = params;
    double c0, ip, iw;
    unpack(d, x, &c0, &ip, &iw);
    for (int i = 0; i < d->n; i++) {
        const ws_fit_point *p = &d->pts[d->idx[i]];
        gsl_vector_set(f, i, (d->w ? d->w[i] : 1.0) * (predict_raw(c0, ip, iw, p) - p->t) / p->t);
    }
    return GSL_SUCCESS;
}

static int roof_df(const gsl_vector *x, void *params, gsl_matrix *J)
{
    const fit_data *d = params;
    double c0, ip, iw;
    unpack(d, x, &c0, &ip, &iw);
    for (int i = 0; i < d->n; i++) {
        const ws_fit_point *p = &d->pts[d->idx[i]];
        double tf = p->flops / RATE_UNIT * ip, tb = p->bytes / RATE_UNIT * iw;
        double wt = (d->w ? d->w[i] : 1.0) / p->t;
        int k = 0;
        if (!d->fix_c0)
            gsl_matrix_set(J, i, k++, C0_UNIT * wt);
        if (d->free_p)
            gsl_matrix_set(J, i, k++, tf > tb ? p->flops / RATE_UNIT * wt : 0.0);
        if (d->free_w)
            gsl_matrix_set(J, i, k++, tf > tb ? 0.0 : p->bytes / RATE_UNIT * wt);
    }
    return GSL_SUCCESS;
}

/* One LM solve from x0; returns 0 and fills x, cost (sum of squares), covar (scaled). */
static int lm_solve(fit_data *d, const double *x0, int np, double *x_out, double *cov_out,
                    double *cost_out)
{
    gsl_multifit_nlinear_fdf fdf = {.f = roof_f, .df = roof_df, .fvv = NULL,
                                    .n = (size_t)d->n, .p = (size_t)np, .params = d};
    gsl_multifit_nlinear_parameters fp = gsl_multifit_nlinear_default_parameters();
    gsl_multifit_nlinear_workspace *w =
        gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &fp, (size_t)d->n, (size_t)np);
    if (!w)
        return -1;
    gsl_vector_const_view xv = gsl_vector_const_view_array(x0, (size_t)np);
    int info, rc = gsl_multifit_nlinear_init(&xv.vector, &fdf, w);
    if (rc == GSL_SUCCESS)
        rc = gsl_multifit_nlinear_driver(200, 1e-10, 1e-10, 1e-12, NULL, NULL, &info, w);
    if (rc == GSL_SUCCESS || rc == GSL_EMAXITER) {
        gsl_vector *x = gsl_multifit_nlinear_position(w);
        gsl_vector *f = gsl_multifit_nlinear_residual(w);
        gsl_matrix *J = gsl_multifit_nlinear_jac(w);
        double chisq;
        gsl_blas_ddot(f, f, &chisq);
        gsl_matrix *cov = gsl_matrix_alloc((size_t)np, (size_t)np);
        gsl_multifit_nlinear_covar(J, 0.0, cov);
        double dof = d->n > np ? d->n - np : 1;
        for (int i = 0; i < np; i++) {
            x_out[i] = gsl_vector_get(x, (size_t)i);
            cov_out[i] = gsl_matrix_get(cov, (size_t)i, (size_t)i) * chisq / dof;
        }
        *cost_out = chisq;
        gsl_matrix_free(cov);
        rc = rc == GSL_SUCCESS ? 0 : 1; /* 1: stopped at the iteration limit */
    } else {
        rc = -1;
    }
    gsl_multifit_nlinear_free(w);
    return rc;
}

static int roof_fit_once(fit_data *d, double *c0, double *ip, double *iw, double var[3],
                         int *converged);

/* Fits on the points in idx[0..n); fills c0 / 1/P / 1/W (scaled) and their variances. */
static int roof_fit_subset(fit_data *d, double *c0, double *ip, double *iw, double var[3],
                           int *converged)
{
    d->fix_c0 = 0;
    int rc = roof_fit_once(d, c0, ip, iw, var, converged);
    if (rc == 0 && *c0 < 0) { /* refit with the fixed cost at its bound */
        d->fix_c0 = 1;
        rc = roof_fit_once(d, c0, ip, iw, var, converged);
    }
    return rc;
}

static int roof_fit_once(fit_data *d, double *c0, double *ip, double *iw, double var[3],
                         int *converged)
{
    int np = !d->fix_c0 + d->free_p + d->free_w;
    /* Starting point: the slope of t against bytes (or flops) over the extremes. */
    double smin = INFINITY, smax = 0, tlo = 0, thi = 0, blo = 0, bhi = 0, flo = 0, fhi = 0;
    for (int i = 0; i < d->n; i++) {
        const ws_fit_point *p = &d->pts[d->idx[i]];
        double s = p->bytes + p->flops;
        if (s < smin) {
            smin = s;
            tlo = p->t, blo = p->bytes, flo = p->flops;
        }
        if (s > smax) {
            smax = s;
            thi = p->t, bhi = p->bytes, fhi = p->flops;
        }
    }
    double slope_b = bhi > blo ? (thi - tlo) / ((bhi - blo) / RATE_UNIT) : thi / (bhi / RATE_UNIT);
    double slope_f = fhi > flo ? (thi - tlo) / ((fhi - flo) / RATE_UNIT) : thi / (fhi / RATE_UNIT + 1e-30);
    if (!(slope_b > 0) || !isfinite(slope_b))
        slope_b = thi / (bhi / RATE_UNIT + 1e-30);
    if (!(slope_f > 0) || !isfinite(slope_f))
        slope_f = thi / (fhi / RATE_UNIT + 1e-30);
    double c_init = tlo / C0_UNIT * 0.5;
    /* Two starts when both rates are free: memory-dominated and compute-dominated. */
    double best_cost = INFINITY, best[3] = {0}, best_var[3] = {0};
    int best_rc = -1;
    for (int start = 0; start < (d->free_p && d->free_w ? 2 : 1); start++) {
        double x0[3], x[3], v[3], cost;
        int k = 0;
        if (!d->fix_c0)
            x0[k++] = c_init;
        if (d->free_p)
            x0[k++] = start == 0 && d->free_w ? slope_f * 0.3 : slope_f;
        if (d->free_w)
            x0[k++] = start == 1 ? slope_b * 0.3 : slope_b;
        int rc = lm_solve(d, x0, np, x, v, &cost);
        if (rc >= 0 && cost < best_cost) {
            best_cost = cost;
            best_rc = rc;
            memcpy(best, x, sizeof best);
            memcpy(best_var, v, sizeof best_var);
        }
    }
    if (best_rc < 0)
        return -1;
    /* Least absolute relative deviation by iteratively reweighted least squares: the
     * error that matters (and that is reported) is |model - t| / t, and bursts of load
     * from elsewhere on the host make a few samples slow that squared residuals would
     * chase. Weights 1/|r| (floored), a few rounds from the least-squares solution. */
    double *w = malloc(sizeof(double) * (size_t)d->n);
    for (int it = 0; w && it < IRLS_ROUNDS; it++) {
        int k = 0;
        double c0v = d->fix_c0 ? 0.0 : best[k++];
        double ipv = d->free_p ? best[k++] : d->inv_p_fixed;
        double iwv = d->free_w ? best[k++] : d->inv_w_fixed;
        for (int i = 0; i < d->n; i++) {
            const ws_fit_point *p = &d->pts[d->idx[i]];
            double r = fabs(predict_raw(c0v, ipv, iwv, p) - p->t) / p->t;
            w[i] = 1.0 / sqrt(r > IRLS_FLOOR ? r : IRLS_FLOOR);
        }
        d->w = w;
        double x[3], v[3], cost;
        int rc = lm_solve(d, best, np, x, v, &cost);
        d->w = NULL;
        if (rc < 0)
            break;
        double change = 0;
        for (int j = 0; j < np; j++)
            change = fmax(change, fabs(x[j] - best[j]) / (fabs(best[j]) + 1e-30));
        memcpy(best, x, sizeof best);
        memcpy(best_var, v, sizeof best_var);
        best_rc = rc;
        if (change < 1e-6)
            break;
    }
    free(w);
    int k = 0;
    *c0 = d->fix_c0 ? 0.0 : best[k];
    var[0] = d->fix_c0 ? 0.0 : best_var[k++];
    *ip = d->free_p ? best[k] : d->inv_p_fixed;
    var[1] = d->free_p ? best_var[k++] : 0;
    *iw = d->free_w ? best[k] : d->inv_w_fixed;
    var[2] = d->free_w ? best_var[k++] : 0;
    *converged = best_rc == 0;
    return 0;
}

double ws_fit_predict(const ws_fit_result *f, double flops, double bytes)
{
    for (int k = 0; f->form == WS_FIT_PIECEWISE && k < f->n_low; k++)
        if (bytes > 0 && flops <= f->low[k].upto * bytes)
            return f->low[k].c0 + (f->low[k].peak_flops > 0 ? flops / f->low[k].peak_flops : 0.0) +
                   (f->low[k].bandwidth > 0 ? bytes / f->low[k].bandwidth : 0.0);
    double tf = f->peak_flops > 0 ? flops / f->peak_flops : 0.0;
    double tb = f->bandwidth > 0 ? bytes / f->bandwidth : 0.0;
    if (f->form == WS_FIT_SERIAL || f->form == WS_FIT_PIECEWISE)
        return f->c0 + tf + tb;
    if (f->form == WS_FIT_SATURATING)
        return f->c0 + (bytes > 0 ? tf * (1.0 + f->factor / bytes) : tf);
    return f->c0 + (f->form == WS_FIT_TRANSFER ? tb : (tf > tb ? tf : tb));
}

/* A point's size and index, for ordering the folds. */
typedef struct size_idx {
    double size;
    int i;
} size_idx;

static int cmp_size(const void *a, const void *b)
{
    const size_idx *x = a, *y = b;
    return x->size < y->size ? -1 : x->size > y->size ? 1 : (x->i > y->i) - (x->i < y->i);
}

/* Fold of point i: points are ordered by size so every fold spans the whole range. */
static int *fold_order(const ws_fit_point *pts, int n)
{
    int *ord = malloc(sizeof(int) * (size_t)n);
    size_idx *k = malloc(sizeof *k * (size_t)n);
    if (!ord || !k) {
        free(ord);
        free(k);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        k[i] = (size_idx){pts[i].bytes + pts[i].flops, i};
    qsort(k, (size_t)n, sizeof *k, cmp_size);
    for (int i = 0; i < n; i++)
        ord[i] = k[i].i;
    free(k);
    return ord;
}

/* One form's fit of some of the points, for the k-fold error: fit() fits the points
 * train[0..m) into ctx (non-zero: it failed), predict() is that fit's time of a point. */
typedef struct fold_model {
    int (*fit)(void *ctx, const int *train, int m);
    double (*predict)(void *ctx, const ws_fit_point *p);
    void *ctx;
} fold_model;

/* The k-fold held-out MAPE (%): the points in fold_order, fold f holding out every k-th from
 * f and fitted on the rest; NAN when a fold's fit failed or no point was held out. */
static double kfold_mape(const ws_fit_point *pts, int n, const fold_model *fm)
{
    const int k = n < WS_FIT_KFOLD ? n : WS_FIT_KFOLD;
    int *ord = fold_order(pts, n), *train = malloc(sizeof(int) * (size_t)n);
    double ape = 0;
    int tested = 0, failed = 0;
    for (int fold = 0; fold < k; fold++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (i % k != fold)
                train[m++] = ord[i];
        if (fm->fit(fm->ctx, train, m)) {
            failed = 1;
            break;
        }
        for (int i = fold; i < n; i += k) {
            const ws_fit_point *p = &pts[ord[i]];
            ape += fabs(fm->predict(fm->ctx, p) - p->t) / p->t;
            tested++;
        }
    }
    free(ord);
    free(train);
    return failed || !tested ? NAN : 100.0 * ape / tested;
}

/* The indices 0..n-1: every point. */
static int *all_points(int n)
{
    int *all = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; all && i < n; i++)
        all[i] = i;
    return all;
}

static void stats(const ws_fit_point *pts, int n, const ws_fit_result *r, double *r2, double *mape)
{
    double mean = 0, ss_tot = 0, ss_res = 0, ape = 0;
    for (int i = 0; i < n; i++)
        mean += pts[i].t / n;
    for (int i = 0; i < n; i++) {
        double m = ws_fit_predict(r, pts[i].flops, pts[i].bytes);
        ss_res += (m - pts[i].t) * (m - pts[i].t);
        ss_tot += (pts[i].t - mean) * (pts[i].t - mean);
        ape += fabs(m - pts[i].t) / pts[i].t;
    }
    *r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 0.0;
    *mape = 100.0 * ape / n;
}

static int check_points(const ws_fit_point *pts, int n, ws_err *err)
{
    if (n < 3)
        return ws_err_set(err, WS_EINVAL, "fit: %d samples, need at least 3", n);
    for (int i = 0; i < n; i++)
        if (!(pts[i].t > 0) || !isfinite(pts[i].t) || pts[i].bytes < 0 || pts[i].flops < 0)
            return ws_err_set(err, WS_EINVAL, "fit: sample %d has t=%g, bytes=%g, flops=%g", i,
                              pts[i].t, pts[i].bytes, pts[i].flops);
    return 0;
}

static void judge(ws_fit_result *r)
{
    if (r->form == WS_FIT_FACTOR)
        return;
    if (r->form == WS_FIT_SATURATING) {
        /* the serial fit's verdict, on P and x_h instead of P and W */
        r->good = r->converged && r->peak_flops > 0 && r->factor >= 0 &&
                  isfinite(r->heldout_mape_pct) && r->heldout_mape_pct <= WS_FIT_GOOD_MAPE_PCT;
        if (!r->converged)
            snprintf(r->note, sizeof r->note, "did not converge");
        else if (!(r->peak_flops > 0) || !(r->factor >= 0))
            snprintf(r->note, sizeof r->note, "non-positive rate or half point");
        else if (!(r->heldout_mape_pct <= WS_FIT_GOOD_MAPE_PCT))
            snprintf(r->note, sizeof r->note, "poor: held-out MAPE %.1f%% > %.0f%%",
                     r->heldout_mape_pct, WS_FIT_GOOD_MAPE_PCT);
        return;
    }
    if (r->form == WS_FIT_PIECEWISE) {
        /* each piece needs a rate */
        int rates = r->bandwidth > 0 || r->peak_flops > 0;
        for (int k = 0; k < r->n_low; k++)
            rates &= r->low[k].bandwidth > 0 || r->low[k].peak_flops > 0;
        r->good = r->converged && rates && isfinite(r->heldout_mape_pct) &&
                  r->heldout_mape_pct <= WS_FIT_GOOD_MAPE_PCT;
        if (!rates)
            snprintf(r->note, sizeof r->note, "a piece without a rate");
        else if (!(r->heldout_mape_pct <= WS_FIT_GOOD_MAPE_PCT))
            snprintf(r->note, sizeof r->note, "poor: held-out MAPE %.1f%% > %.0f%%",
                     r->heldout_mape_pct, WS_FIT_GOOD_MAPE_PCT);
        return;
    }
    if (r->c0_at_bound)
        snprintf(r->note, sizeof r->note, "c0 held at 0 (the free fit gave c0 < 0)");
    r->good = r->converged && r->bandwidth > 0 && (r->form == WS_FIT_TRANSFER || r->peak_flops > 0) &&
              isfinite(r->heldout_mape_pct) && r->heldout_mape_pct <= WS_FIT_GOOD_MAPE_PCT;
    if (!r->converged)
        snprintf(r->note, sizeof r->note, "did not converge");
    else if (!(r->bandwidth > 0) || (r->form != WS_FIT_TRANSFER && !(r->peak_flops > 0)))
        snprintf(r->note, sizeof r->note, "non-positive rate");
    else if (!(r->heldout_mape_pct <= WS_FIT_GOOD_MAPE_PCT))
        snprintf(r->note, sizeof r->note, "poor: held-out MAPE %.1f%% > %.0f%%",
                 r->heldout_mape_pct, WS_FIT_GOOD_MAPE_PCT);
}

/* A fit's start: out cleared and named, the points checked, GSL's aborting handler off. */
static int fit_begin(ws_fit_result *out, ws_fit_form form, const ws_fit_point *pts, int n,
                     ws_err *err)
{
    memset(out, 0, sizeof *out);
    out->form = form;
    out->n = n;
    int rc = check_points(pts, n, err);
    if (!rc)
        gsl_set_error_handler_off();
    return rc;
}

/* A fit's end: its error on the points it saw, its k-fold held-out error, its verdict. */
static void fit_end(const ws_fit_point *pts, int n, const fold_model *fm, ws_fit_result *out)
{
    stats(pts, n, out, &out->r2, &out->train_mape_pct);
    out->heldout_mape_pct = kfold_mape(pts, n, fm);
    judge(out);
}

/* The roofline's fold: roof_fit_subset on the training points. */
typedef struct roof_fold {
    fit_data *d;
    double c0, ip, iw;
} roof_fold;

static int roof_fold_fit(void *ctx, const int *train, int m)
{
    roof_fold *f = ctx;
    f->d->idx = train;
    f->d->n = m;
    double var[3];
    int conv;
    return m < 2 || roof_fit_subset(f->d, &f->c0, &f->ip, &f->iw, var, &conv);
}

static double roof_fold_predict(void *ctx, const ws_fit_point *p)
{
    const roof_fold *f = ctx;
    return predict_raw(f->c0, f->ip, f->iw, p);
}

int ws_fit_roofline(const ws_fit_point *pts, int n, double p_fix, double w_fix, ws_fit_result *out,
                    ws_err *err)
{
    int rc = fit_begin(out, WS_FIT_ROOFLINE, pts, n, err);
    if (rc)
        return rc;
    if (p_fix > 0 && w_fix > 0)
        return ws_err_set(err, WS_EINVAL, "fit: cannot hold both P and W fixed");
    fit_data d = {.pts = pts, .free_p = !(p_fix > 0), .free_w = !(w_fix > 0),
                  .inv_p_fixed = p_fix > 0 ? RATE_UNIT / p_fix : 0,
                  .inv_w_fixed = w_fix > 0 ? RATE_UNIT / w_fix : 0};
    int *all = all_points(n);
    d.idx = all;
    d.n = n;
    double c0, ip, iw, var[3];
    int conv = 0;
    if (roof_fit_subset(&d, &c0, &ip, &iw, var, &conv)) {
        free(all);
        out->heldout_mape_pct = NAN;
        snprintf(out->note, sizeof out->note, "fit failed");
        return 0; /* a failed fit is a result (good = 0), not an error */
    }
    out->converged = conv;
    out->c0_at_bound = d.fix_c0;
    out->c0 = c0 * C0_UNIT;
    out->c0_se = sqrt(var[0]) * C0_UNIT;
    out->peak_flops = ip > 0 ? RATE_UNIT / ip : p_fix; /* p_fix = INFINITY: P left out */
    out->peak_flops_se = ip > 0 ? RATE_UNIT * sqrt(var[1]) / (ip * ip) : 0;
    out->bandwidth = iw > 0 ? RATE_UNIT / iw : 0;
    out->bandwidth_se = iw > 0 ? RATE_UNIT * sqrt(var[2]) / (iw * iw) : 0;
    out->p_fixed = !d.free_p;
    out->w_fixed = !d.free_w;
    int on_compute = 0;
    for (int i = 0; i < n; i++)
        on_compute += pts[i].flops / RATE_UNIT * ip > pts[i].bytes / RATE_UNIT * iw;
    out->compute_bound = 2 * on_compute > n;
    roof_fold rf = {.d = &d};
    const fold_model fm = {roof_fold_fit, roof_fold_predict, &rf};
    fit_end(pts, n, &fm, out);
    free(all);
    return 0;
}

/* Weighted linear fit t = a + b*B on the points idx; weights 1/t^2 (relative error). */
static int lin_subset(const ws_fit_point *pts, const int *idx, int n, double *a, double *b,
                      double cov[4], double *chisq)
{
    gsl_matrix *X = gsl_matrix_alloc((size_t)n, 2), *C = gsl_matrix_alloc(2, 2);
    gsl_vector *y = gsl_vector_alloc((size_t)n), *w = gsl_vector_alloc((size_t)n),
               *c = gsl_vector_alloc(2);
    for (int i = 0; i < n; i++) {
        const ws_fit_point *p = &pts[idx[i]];
        gsl_matrix_set(X, (size_t)i, 0, 1.0);
        gsl_matrix_set(X, (size_t)i, 1, p->bytes / RATE_UNIT);
        gsl_vector_set(y, (size_t)i, p->t);
        gsl_vector_set(w, (size_t)i, 1.0 / (p->t * p->t));
    }
    gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc((size_t)n, 2);
    int rc = gsl_multifit_wlinear(X, w, y, c, C, chisq, ws);
    /* Least absolute relative deviation (see roof_fit_once): reweight by 1/|r|. */
    for (int it = 0; rc == GSL_SUCCESS && it < IRLS_ROUNDS; it++) {
        double a0 = gsl_vector_get(c, 0), b0 = gsl_vector_get(c, 1);
        for (int i = 0; i < n; i++) {
            double t = gsl_vector_get(y, (size_t)i);
            double r = fabs(a0 + b0 * gsl_matrix_get(X, (size_t)i, 1) - t) / t;
            gsl_vector_set(w, (size_t)i, 1.0 / (t * t * (r > IRLS_FLOOR ? r : IRLS_FLOOR)));
        }
        rc = gsl_multifit_wlinear(X, w, y, c, C, chisq, ws);
        double ch = fmax(fabs(gsl_vector_get(c, 0) - a0) / (fabs(a0) + 1e-30),
                         fabs(gsl_vector_get(c, 1) - b0) / (fabs(b0) + 1e-30));
        if (ch < 1e-6)
            break;
    }
    *a = gsl_vector_get(c, 0);
    *b = gsl_vector_get(c, 1);
    if (*a < 0) { /* a negative fixed cost is unphysical: fit through the origin */
        double sxy = 0, sxx = 0;
        for (int i = 0; i < n; i++) {
            double xb = gsl_matrix_get(X, (size_t)i, 1), wt = gsl_vector_get(w, (size_t)i);
            sxy += wt * xb * gsl_vector_get(y, (size_t)i);
            sxx += wt * xb * xb;
        }
        *a = 0;
        *b = sxy / sxx;
        *chisq = 0;
        for (int i = 0; i < n; i++) {
            double res = gsl_vector_get(y, (size_t)i) - *b * gsl_matrix_get(X, (size_t)i, 1);
            *chisq += gsl_vector_get(w, (size_t)i) * res * res;
        }
        gsl_matrix_set(C, 0, 0, 0);
        gsl_matrix_set(C, 1, 1, 1.0 / sxx);
    }
    /* wlinear's covariance assumes the weights are exact inverse variances: rescale. */
    double s = n > 2 ? *chisq / (n - 2) : 1.0;
    cov[0] = gsl_matrix_get(C, 0, 0) * s;
    cov[3] = gsl_matrix_get(C, 1, 1) * s;
    gsl_multifit_linear_free(ws);
    gsl_matrix_free(X);
    gsl_matrix_free(C);
    gsl_vector_free(y);
    gsl_vector_free(w);
    gsl_vector_free(c);
    return rc;
}

/* The transfer form's fold: lin_subset on the training points. */
typedef struct lin_fold {
    const ws_fit_point *pts;
    double a, b;
} lin_fold;

static int lin_fold_fit(void *ctx, const int *train, int m)
{
    lin_fold *f = ctx;
    double cov[4], chisq;
    lin_subset(f->pts, train, m, &f->a, &f->b, cov, &chisq);
    return 0;
}

static double lin_fold_predict(void *ctx, const ws_fit_point *p)
{
    const lin_fold *f = ctx;
    return f->a + f->b * p->bytes / RATE_UNIT;
}

int ws_fit_transfer(const ws_fit_point *pts, int n, ws_fit_result *out, ws_err *err)
{
    int rc = fit_begin(out, WS_FIT_TRANSFER, pts, n, err);
    if (rc)
        return rc;
    int *all = all_points(n);
    double a, b, cov[4], chisq;
    out->converged = lin_subset(pts, all, n, &a, &b, cov, &chisq) == GSL_SUCCESS;
    out->c0_at_bound = a == 0;
    out->c0 = a;
    out->c0_se = sqrt(cov[0]);
    out->bandwidth = b > 0 ? RATE_UNIT / b : 0;
    out->bandwidth_se = b > 0 ? RATE_UNIT * sqrt(cov[3]) / (b * b) : 0;
    lin_fold lf = {.pts = pts};
    const fold_model fm = {lin_fold_fit, lin_fold_predict, &lf};
    fit_end(pts, n, &fm, out);
    free(all);
    return 0;
}

/* Weighted linear fit t = c[0] + c[1] F + c[2] B on the points idx (rates in RATE_UNIT),
 * least absolute relative deviation by reweighting as lin_subset; c0 < 0 refits through
 * the origin. se[] are the standard errors of c[]. */
static int serial_subset(const ws_fit_point *pts, const int *idx, int n, double c[3],
                         double se[3])
{
    int rc = GSL_SUCCESS;
    for (int p0 = 0; p0 < 2; p0++) { /* p0 1: c0 held at 0 */
        const size_t np = p0 ? 2 : 3;
        gsl_matrix *X = gsl_matrix_alloc((size_t)n, np), *C = gsl_matrix_alloc(np, np);
        gsl_vector *y = gsl_vector_alloc((size_t)n), *w = gsl_vector_alloc((size_t)n),
                   *v = gsl_vector_alloc(np);
        for (int i = 0; i < n; i++) {
            const ws_fit_point *p = &pts[idx[i]];
            if (!p0)
                gsl_matrix_set(X, (size_t)i, 0, 1.0);
            gsl_matrix_set(X, (size_t)i, np - 2, p->flops / RATE_UNIT);
            gsl_matrix_set(X, (size_t)i, np - 1, p->bytes / RATE_UNIT);
            gsl_vector_set(y, (size_t)i, p->t);
            gsl_vector_set(w, (size_t)i, 1.0 / (p->t * p->t));
        }
        gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc((size_t)n, np);
        double chisq = 0;
        rc = gsl_multifit_wlinear(X, w, y, v, C, &chisq, ws);
        for (int it = 0; rc == GSL_SUCCESS && it < IRLS_ROUNDS; it++) {
            for (int i = 0; i < n; i++) {
                double t = gsl_vector_get(y, (size_t)i), m = 0;
                for (size_t j = 0; j < np; j++)
                    m += gsl_matrix_get(X, (size_t)i, j) * gsl_vector_get(v, j);
                double r = fabs(m - t) / t;
                gsl_vector_set(w, (size_t)i, 1.0 / (t * t * (r > IRLS_FLOOR ? r : IRLS_FLOOR)));
            }
            rc = gsl_multifit_wlinear(X, w, y, v, C, &chisq, ws);
        }
        const double s = n > (int)np ? chisq / (n - (int)np) : 1.0;
        c[0] = p0 ? 0 : gsl_vector_get(v, 0);
        se[0] = p0 ? 0 : sqrt(gsl_matrix_get(C, 0, 0) * s);
        for (int j = 1; j < 3; j++) {
            c[j] = gsl_vector_get(v, np - 3 + j);
            se[j] = sqrt(gsl_matrix_get(C, np - 3 + j, np - 3 + j) * s);
        }
        gsl_multifit_linear_free(ws);
        gsl_matrix_free(X);
        gsl_matrix_free(C);
        gsl_vector_free(y);
        gsl_vector_free(w);
        gsl_vector_free(v);
        if (rc != GSL_SUCCESS || c[0] >= 0)
            break;
    }
    return rc;
}

/* The serial form's fold: serial_subset on the training points. */
typedef struct serial_fold {
    const ws_fit_point *pts;
    double c[3];
} serial_fold;

static int serial_fold_fit(void *ctx, const int *train, int m)
{
    serial_fold *f = ctx;
    double se[3];
    serial_subset(f->pts, train, m, f->c, se);
    return 0;
}

static double serial_fold_predict(void *ctx, const ws_fit_point *p)
{
    const serial_fold *f = ctx;
    return f->c[0] + (f->c[1] * p->flops + f->c[2] * p->bytes) / RATE_UNIT;
}

int ws_fit_serial(const ws_fit_point *pts, int n, ws_fit_result *out, ws_err *err)
{
    int rc = fit_begin(out, WS_FIT_SERIAL, pts, n, err);
    if (rc)
        return rc;
    int *all = all_points(n);
    double c[3], se[3];
    out->converged = serial_subset(pts, all, n, c, se) == GSL_SUCCESS;
    out->c0_at_bound = c[0] == 0;
    out->c0 = c[0];
    out->c0_se = se[0];
    out->peak_flops = c[1] > 0 ? RATE_UNIT / c[1] : 0;
    out->peak_flops_se = c[1] > 0 ? RATE_UNIT * se[1] / (c[1] * c[1]) : 0;
    out->bandwidth = c[2] > 0 ? RATE_UNIT / c[2] : 0;
    out->bandwidth_se = c[2] > 0 ? RATE_UNIT * se[2] / (c[2] * c[2]) : 0;
    double tf = 0, tb = 0;
    for (int i = 0; i < n; i++) {
        tf += c[1] * pts[i].flops / RATE_UNIT;
        tb += c[2] * pts[i].bytes / RATE_UNIT;
    }
    out->compute_bound = tf > tb;
    serial_fold sf = {.pts = pts};
    const fold_model fm = {serial_fold_fit, serial_fold_predict, &sf};
    fit_end(pts, n, &fm, out);
    free(all);
    return 0;
}

/* ---- piecewise: the serial form on each piece of the intensity axis ------------------ */

#define PIECE_GAP 1.3 /* consecutive intensities at least this far apart may be split */
#define PIECE_MAX (WS_FIT_MAX_LOW + 1)

static double intensity(const ws_fit_point *p)
{
    return p->bytes > 0 ? p->flops / p->bytes : 0;
}

/* The fit of one piece, the points idx, with no negative rate: the serial form where the
 * piece spans intensities, else (or where a coefficient comes out negative) one rate, the
 * transfer form over the bytes (or over the flops). c[] as serial_subset's; the sum of
 * |relative error| in *sae. */
static void piece_fit(const ws_fit_point *pts, const int *idx, int n, double c[3], double *sae)
{
    double amin = INFINITY, amax = 0, se[3];
    for (int i = 0; i < n; i++)
        amin = fmin(amin, intensity(&pts[idx[i]])), amax = fmax(amax, intensity(&pts[idx[i]]));
    c[0] = c[1] = c[2] = -1;
    if (amax > PIECE_GAP * amin)
        serial_subset(pts, idx, n, c, se);
    if (c[1] < 0 || c[2] < 0) {
        const int on_flops = c[2] < 0 && c[1] >= 0;
        ws_fit_point *q = malloc(sizeof *q * (size_t)n);
        int *all = all_points(n);
        double a = 0, b = 0, cov[4], chisq;
        if (q && all) {
            for (int i = 0; i < n; i++)
                q[i] = (ws_fit_point){0, on_flops ? pts[idx[i]].flops : pts[idx[i]].bytes,
                                      pts[idx[i]].t};
            lin_subset(q, all, n, &a, &b, cov, &chisq);
        }
        free(q);
        free(all);
        c[0] = a;
        c[1] = on_flops ? fmax(b, 0) : 0;
        c[2] = on_flops ? 0 : fmax(b, 0);
    }
    *sae = 0;
    for (int i = 0; i < n; i++) {
        const ws_fit_point *p = &pts[idx[i]];
        *sae += fabs(c[0] + (c[1] * p->flops + c[2] * p->bytes) / RATE_UNIT - p->t) / p->t;
    }
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A piecewise model in raw coefficients: piece k covers intensities up to cut[k] (the top
 * piece: cut INFINITY). */
typedef struct pieces {
    int n;
    double cut[PIECE_MAX], c[PIECE_MAX][3];
} pieces;

static const double *piece_of(const pieces *m, const ws_fit_point *p)
{
    const double x = intensity(p);
    int k = 0;
    while (k + 1 < m->n && x > m->cut[k])
        k++;
    return m->c[k];
}

/* Fits the points idx in pieces cut at cuts[0..np-1) (rising); the sum of |relative
 * error|, INFINITY when a piece holds fewer than 3 points. */
static double fit_cuts(const ws_fit_point *pts, const int *idx, int n, const double *cuts, int np,
                       int *buf, pieces *out)
{
    double total = 0;
    out->n = np;
    for (int k = 0; k < np; k++) {
        const double lo = k ? cuts[k - 1] : -INFINITY, hi = k + 1 < np ? cuts[k] : INFINITY;
        int m = 0;
        for (int i = 0; i < n; i++) {
            const double x = intensity(&pts[idx[i]]);
            if (x > lo && x <= hi)
                buf[m++] = idx[i];
        }
        if (m < 3)
            return INFINITY;
        double sae;
        piece_fit(pts, buf, m, out->c[k], &sae);
        out->cut[k] = hi;
        total += sae;
    }
    return total;
}

/* The best cuts of the points idx into np pieces, every gap between consecutive
 * intensities (PIECE_GAP apart) a candidate; non-zero when no choice works. */
static int piece_subset(const ws_fit_point *pts, const int *idx, int n, int np, pieces *best)
{
    double *ai = malloc(sizeof(double) * (size_t)n), *gap = malloc(sizeof(double) * (size_t)n);
    int *buf = malloc(sizeof(int) * (size_t)n), ng = 0;
    double best_e = INFINITY;
    if (!ai || !gap || !buf) {
        free(ai), free(gap), free(buf);
        return 1;
    }
    for (int i = 0; i < n; i++)
        ai[i] = intensity(&pts[idx[i]]);
    qsort(ai, (size_t)n, sizeof *ai, cmp_double);
    for (int g = 0; g + 1 < n; g++)
        if (ai[g + 1] > PIECE_GAP * ai[g])
            gap[ng++] = sqrt(ai[g] * ai[g + 1]);
    pieces m;
    for (int i = 0; i < ng; i++)
        for (int j = i + 1; j <= (np == 3 ? ng - 1 : i + 1); j++) {
            /* two pieces: the cut gap[i] alone (j only counts once) */
            const double cuts[2] = {gap[i], np == 3 ? gap[j] : INFINITY};
            const double e = fit_cuts(pts, idx, n, cuts, np, buf, &m);
            if (e < best_e)
                best_e = e, *best = m;
        }
    free(ai), free(gap), free(buf);
    return !isfinite(best_e);
}

typedef struct piece_fold {
    const ws_fit_point *pts;
    int np;
    pieces m;
} piece_fold;

static int piece_fold_fit(void *ctx, const int *train, int m)
{
    piece_fold *f = ctx;
    return piece_subset(f->pts, train, m, f->np, &f->m);
}

static double piece_fold_predict(void *ctx, const ws_fit_point *p)
{
    const piece_fold *f = ctx;
    const double *c = piece_of(&f->m, p);
    return c[0] + (c[1] * p->flops + c[2] * p->bytes) / RATE_UNIT;
}

int ws_fit_piecewise(const ws_fit_point *pts, int n, int np, ws_fit_result *out, ws_err *err)
{
    int rc = fit_begin(out, WS_FIT_PIECEWISE, pts, n, err);
    if (rc)
        return rc;
    if (np < 2 || np > PIECE_MAX)
        return ws_err_set(err, WS_EINVAL, "fit: %d pieces (2..%d)", np, PIECE_MAX);
    int *all = all_points(n);
    if (!all)
        return ws_err_set(err, WS_ENOMEM, "fit: out of memory");
    pieces m;
    if (piece_subset(pts, all, n, np, &m)) {
        free(all);
        return ws_err_set(err, WS_EINVAL,
                          "fit: no %d pieces of 3 samples each between the intensities' gaps", np);
    }
    out->converged = 1;
    const double *top = m.c[np - 1];
    out->c0 = top[0];
    out->c0_at_bound = top[0] == 0;
    out->peak_flops = top[1] > 0 ? RATE_UNIT / top[1] : 0;
    out->bandwidth = top[2] > 0 ? RATE_UNIT / top[2] : 0;
    out->n_low = np - 1;
    for (int k = 0; k + 1 < np; k++)
        out->low[k] = (ws_fit_piece){.upto = m.cut[k],
                                     .c0 = m.c[k][0],
                                     .peak_flops = m.c[k][1] > 0 ? RATE_UNIT / m.c[k][1] : 0,
                                     .bandwidth = m.c[k][2] > 0 ? RATE_UNIT / m.c[k][2] : 0};
    double tf = 0, tb = 0;
    for (int i = 0; i < n; i++) {
        const double *c = piece_of(&m, &pts[i]);
        tf += c[1] * pts[i].flops;
        tb += c[2] * pts[i].bytes;
    }
    out->compute_bound = tf > tb;
    piece_fold pf = {.pts = pts, .np = np};
    const fold_model fm = {piece_fold_fit, piece_fold_predict, &pf};
    fit_end(pts, n, &fm, out);
    free(all);
    return 0;
}

int ws_fit_saturating(const ws_fit_point *pts, int n, ws_fit_result *out, ws_err *err)
{
    int rc = fit_begin(out, WS_FIT_SATURATING, pts, n, err);
    if (rc)
        return rc;
    for (int i = 0; i < n; i++)
        if (!(pts[i].bytes > 0) || !(pts[i].flops > 0))
            return ws_err_set(err, WS_EINVAL, "fit: sample %d has x=%g, flops=%g (both > 0)", i,
                              pts[i].bytes, pts[i].flops);
    /* F / (P x / (x + x_h)) = F / P + (F / x) x_h / P: the serial form in F and F / x, whose
     * second rate W is P / x_h. */
    ws_fit_point *q = malloc(sizeof *q * (size_t)n);
    if (!q)
        return ws_err_set(err, WS_ENOMEM, "fit: out of memory");
    for (int i = 0; i < n; i++)
        q[i] = (ws_fit_point){pts[i].flops, pts[i].flops / pts[i].bytes, pts[i].t};
    ws_fit_result s;
    rc = ws_fit_serial(q, n, &s, err);
    free(q);
    if (rc)
        return rc;
    *out = s;
    out->form = WS_FIT_SATURATING;
    out->note[0] = '\0';
    if (s.bandwidth > 0 && s.peak_flops > 0) {
        out->factor = s.peak_flops / s.bandwidth;
        const double a = s.peak_flops_se / s.peak_flops, b = s.bandwidth_se / s.bandwidth;
        out->factor_se = out->factor * sqrt(a * a + b * b);
    } else {
        out->factor = out->factor_se = NAN; /* no rising rate fitted: not this form */
    }
    out->bandwidth = out->bandwidth_se = 0;
    out->compute_bound = 1;
    judge(out);
    return 0;
}

int ws_fit_factor(const double num[3], const double den[3], int n, ws_fit_result *out,
                  ws_err *err)
{
    memset(out, 0, sizeof *out);
    out->form = WS_FIT_FACTOR;
    out->n = n;
    if (!(num[0] > 0) || !(den[0] > 0) || n < 1)
        return ws_err_set(err, WS_EINVAL, "factor: non-positive time or no repeats");
    out->factor = num[0] / den[0];
    double rn = (num[2] - num[1]) / 4.0 / num[0], rd = (den[2] - den[1]) / 4.0 / den[0];
    out->factor_se = out->factor * sqrt(rn * rn + rd * rd) / sqrt((double)n);
    out->converged = 1;
    out->r2 = NAN;
    out->heldout_mape_pct = NAN;
    out->good = n >= 3;
    if (!out->good)
        snprintf(out->note, sizeof out->note, "fewer than 3 repeats");
    return 0;
}
