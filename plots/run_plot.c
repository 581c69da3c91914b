/* run_plot: see run_plot.h. */
#include "run_plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rundb.h"

static void put_row(FILE *f, double t0, double t1, double ctx, double rs, double rr,
                    const double busy[4], long long idx)
{
    const double dur = t1 - t0;
    fprintf(f, "%.9g\t%.9g\t%.9g\t%.6g\t%.6g", t0, t1, ctx, rs, rr);
    for (int k = 0; k < 4; k++)
        fprintf(f, "\t%.6g", dur > 0 && isfinite(busy[k]) ? 100.0 * busy[k] / dur : NAN);
    fprintf(f, "\t%lld\n", idx);
}

/* One step as the step files want it. NAN: none. */
typedef struct plot_step {
    long long idx;         /* step number */
    double t_start, t_end; /* seconds on the run's timeline */
    double context;        /* mean context tokens per sequence */
    double r_star, r_real; /* CPU share: target and realised */
    double busy[4];        /* seconds busy: GPU, H2D, D2H, CPU */
} plot_step;

static int put_steps(const char *dir, const plot_step *st, size_t n, size_t *n_share,
                     ws_err *err)
{
    FILE *f = ws_gnuplot_open(dir, "steps.dat", err);
    if (!f)
        return err->code;
    *n_share = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(st[i].r_star)) {
            put_row(f, st[i].t_start, st[i].t_end, st[i].context, st[i].r_star, st[i].r_real,
                    st[i].busy, st[i].idx);
            ++*n_share;
        }
    int rc = ws_gnuplot_close(f, "steps.dat", err);
    if (rc || !(f = ws_gnuplot_open(dir, "util.dat", err)))
        return rc ? rc : err->code;
    const size_t per = (n + WS_RUN_PLOT_BINS - 1) / WS_RUN_PLOT_BINS;
    for (size_t i = 0; i < n; i += per) {
        size_t end = i + per < n ? i + per : n;
        double busy[4] = {0}, dur = 0, ctx = 0;
        int have[4] = {0};
        for (size_t j = i; j < end; j++) {
            dur += st[j].t_end - st[j].t_start;
            ctx += st[j].context;
            for (int k = 0; k < 4; k++)
                if (isfinite(st[j].busy[k])) {
                    busy[k] += st[j].busy[k];
                    have[k] = 1;
                }
        }
        for (int k = 0; k < 4; k++)
            if (!have[k])
                busy[k] = NAN;
        /* the bin as one step of its summed duration, so busy % is time-weighted */
        put_row(f, st[i].t_start, st[i].t_start + dur, ctx / (double)(end - i),
                st[end - 1].r_star, st[end - 1].r_real, busy, st[i].idx);
    }
    return ws_gnuplot_close(f, "util.dat", err);
}

int ws_run_plot_steps(const char *dir, const ws_step_row *rows, size_t n, size_t *n_share,
                      ws_err *err)
{
    plot_step *st = calloc(n ? n : 1, sizeof *st);
    if (!st)
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const ws_step_row *x = &rows[i];
        st[i] = (plot_step){x->idx, x->t_start, x->t_end,
                            x->batch > 0 ? (double)x->context / x->batch : NAN,
                            x->r_star, x->r_real,
                            {x->busy_gpu, x->busy_h2d, x->busy_d2h, x->busy_cpu}};
    }
    const int rc = put_steps(dir, st, n, n_share, err);
    free(st);
    return rc;
}

typedef struct live_ctx {
    ws_store *s;
    long long id;
    int util;
    ws_rundb_run run;
} live_ctx;

static int write_live(void *vctx, const char *dir, int *n_out, ws_err *err)
{
    live_ctx *c = vctx;
    ws_rundb_step *rows;
    size_t n;
    int rc = ws_rundb_get_run(c->s, c->id, &c->run, err);
    if (rc || (rc = ws_rundb_get_steps(c->s, c->run.id, &rows, &n, err)))
        return rc;
    if (n == 0)
        return ws_err_set(err, WS_ENOTFOUND, "runtime run %lld has no steps to plot", c->run.id);
    size_t n_share;
    rc = ws_run_plot_steps(dir, rows, n, &n_share, err);
    free(rows);
    if (rc)
        return rc;
    if (!c->util && n_share == 0)
        return ws_err_set(err, WS_ENOTFOUND, "runtime run %lld has no step with a target share",
                          c->run.id);
    const ws_rundb_run *r = &c->run;
    const int gpu_meas = !strcmp(r->gpu_source, "measured");
    char title[640], wl[200], l1[160], l2[160], l3[160], l4[160], l5[160];
    snprintf(title, sizeof title, "%s, live run %lld: %s on %s + host %s, policy %s",
             c->util ? "Resource utilisation" : "CPU share", r->id, r->model, r->gpu,
             r->host_profile, r->policy);
    snprintf(wl, sizeof wl,
             "closed batch of %d x (%d prompt + %d output) tokens, %d of the model's %d layers",
             r->batch, r->prompt_tokens, r->output_tokens, r->layers, r->model_layers);
    if (c->util) {
        snprintf(l1, sizeof l1, "GPU (%s)", gpu_meas ? "measured" : "modeled");
        snprintf(l2, sizeof l2, "H2D copy (%s)", gpu_meas ? "measured" : "modeled");
        snprintf(l3, sizeof l3, "D2H copy (%s)", gpu_meas ? "measured" : "modeled");
        snprintf(l4, sizeof l4, "CPU (measured)");
        snprintf(l5, sizeof l5, "time on the step timeline (s): CPU measured, GPU %s",
                 gpu_meas ? "measured" : "modeled");
        const char *lines[] = {title, wl, l1, l2, l3, l4, l5};
        *n_out = 4;
        return ws_gnuplot_lines(dir, "labels.tsv", lines, 7, err);
    }
    snprintf(l1, sizeof l1, "r* (policy target from measured A, B)");
    snprintf(l2, sizeof l2, "realised share (measured: pages placed)");
    snprintf(l3, sizeof l3, "decode step");
    const char *lines[] = {title, wl, l1, l2, l3};
    *n_out = 2;
    return ws_gnuplot_lines(dir, "labels.tsv", lines, 5, err);
}

static int live(ws_store *s, const ws_plot_req *req, int util, char *what, size_t cap,
                ws_err *err)
{
    live_ctx c = {.s = s, .id = req->live, .util = util};
    int rc = ws_gnuplot_figure(util ? "util" : "share", req->out, write_live, &c, NULL, err);
    if (!rc)
        snprintf(what, cap, "live run %lld, %s, GPU %s%s", c.run.id, c.run.policy,
                 c.run.gpu_source, strcmp(c.run.origin, "validate") ? "" : ", a validation's run");
    return rc;
}

int ws_run_plot_share(ws_store *s, const ws_plot_req *req, char *what, size_t cap, ws_err *err)
{
    return live(s, req, 0, what, cap, err);
}

int ws_run_plot_util(ws_store *s, const ws_plot_req *req, char *what, size_t cap, ws_err *err)
{
    return live(s, req, 1, what, cap, err);
}
