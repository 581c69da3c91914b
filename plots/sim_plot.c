/* sim_plot: see sim_plot.h. */
#include "sim_plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_plot.h"
#include "run_plot.h"
#include "simdb.h"

#define WS_POLICY "writescope" /* the policy every speedup is of */

static int served(const ws_simdb_point *p)
{
    return p->oom == 0 && p->completed > 0 && p->decode_tokens_per_s > 0;
}

static int same_hw(const ws_simdb_point *a, const ws_simdb_point *b)
{
    return !strcmp(a->model, b->model) && !strcmp(a->gpu_profile, b->gpu_profile) &&
           !strcmp(a->host_profile, b->host_profile);
}

static int same_point(const ws_simdb_point *a, const ws_simdb_point *b)
{
    return same_hw(a, b) && a->batch == b->batch && a->prompt_tokens == b->prompt_tokens &&
           a->output_tokens == b->output_tokens;
}

/* "2K" for 2048, "500" for 500. */
static void tokens_label(long long n, char *buf, size_t cap)
{
    if (n >= 1024 && n % 1024 == 0)
        snprintf(buf, cap, "%lldK", n / 1024);
    else
        snprintf(buf, cap, "%lld", n);
}

/* The distinct policy names of pts, in first-seen order, writescope left out; *n_out. */
static int policies(const ws_simdb_point *pts, size_t n, const char ***out, int *n_out,
                    ws_err *err)
{
    const char **names = calloc(n + 1, sizeof *names); /* room for one more */
    int k = 0;
    if (!names)
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int seen = !strcmp(pts[i].policy, WS_POLICY);
        for (int j = 0; j < k && !seen; j++)
            seen = !strcmp(names[j], pts[i].policy);
        if (!seen)
            names[k++] = pts[i].policy;
    }
    *out = names;
    *n_out = k;
    return 0;
}

/* speedup */

typedef struct points_ctx {
    ws_store *s;
    const ws_plot_req *req;
    int panels, pairs;
    ws_simdb_point ref; /* throughput: the run whose model and hardware are drawn */
} points_ctx;

static int write_speedup(void *vctx, const char *dir, int *n_out, ws_err *err)
{
    points_ctx *c = vctx;
    ws_simdb_point *pts;
    size_t n;
    const char **base = NULL;
    int nb = 0, rc = ws_simdb_list_points(c->s, c->req->model, c->req->gpu, c->req->grid, &pts, &n, err);
    if (rc || (rc = policies(pts, n, &base, &nb, err))) {
        free(pts);
        return rc;
    }
    FILE *t = ws_gnuplot_open(dir, "panels.tsv", err);
    if (!t) {
        free(pts);
        free(base);
        return err->code;
    }
    int panel = 0;
    for (size_t g = 0; g < n && !rc; g++) {
        size_t first = g;
        while (g + 1 < n && same_hw(&pts[g + 1], &pts[first]))
            g++;
        /* pts[first..g]: one model on one pair of profiles */
        char name[32];
        snprintf(name, sizeof name, "%d.bars", panel + 1);
        FILE *bars = ws_gnuplot_open(dir, name, err);
        snprintf(name, sizeof name, "%d.pts", panel + 1);
        FILE *dots = bars ? ws_gnuplot_open(dir, name, err) : NULL;
        if (!dots) {
            if (bars)
                fclose(bars);
            rc = err->code;
            break;
        }
        int shown = 0, finite = 0;
        for (int b = 0; b < nb; b++) {
            double lsum = 0;
            int pairs = 0, lost = 0, present = 0;
            for (size_t i = first; i <= g; i++) {
                const ws_simdb_point *w = &pts[i];
                if (strcmp(w->policy, WS_POLICY))
                    continue;
                for (size_t j = first; j <= g; j++) {
                    const ws_simdb_point *o = &pts[j];
                    if (strcmp(o->policy, base[b]) || !same_point(w, o))
                        continue;
                    present = 1;
                    if (!served(w) || !served(o)) {
                        lost++;
                        continue;
                    }
                    const double r = w->decode_tokens_per_s / o->decode_tokens_per_s;
                    char bt[24], pt[24];
                    tokens_label(w->prompt_tokens, pt, sizeof pt);
                    tokens_label(w->batch, bt, sizeof bt);
                    /* spread the points of one bar sideways by their index */
                    fprintf(dots, "%.4f\t%.6g\tB%s %s\n", shown + 0.25 * ((pairs % 7) - 3) / 3.0,
                            r, bt, pt);
                    lsum += log(r);
                    pairs++;
                }
            }
            if (!present)
                continue;
            fprintf(bars, "%d\t%.6g\t", shown, pairs ? exp(lsum / pairs) : NAN);
            ws_gnuplot_text(bars, base[b]);
            if (lost)
                fprintf(bars, "\t%d pts, %d OOM\n", pairs, lost);
            else
                fprintf(bars, "\t%d pts\n", pairs);
            shown++;
            finite += pairs > 0;
            c->pairs += pairs;
        }
        rc = ws_gnuplot_close(bars, "bars", err);
        int rc2 = ws_gnuplot_close(dots, "pts", err);
        if (!rc)
            rc = rc2;
        if (rc || finite == 0) /* nothing both served: no panel */
            continue;
        panel++;
        char title[512];
        snprintf(title, sizeof title, "%s on %s + %s", pts[first].model, pts[first].gpu_profile,
                 pts[first].host_profile);
        ws_gnuplot_text(t, title);
        fprintf(t, "\t%d\n", shown);
    }
    int crc = ws_gnuplot_close(t, "panels.tsv", err);
    free(pts);
    free(base);
    if (!rc)
        rc = crc;
    if (!rc && panel == 0)
        rc = ws_err_set(err, WS_ENOTFOUND,
                        "no closed-batch simulation of '" WS_POLICY "' beside a baseline to plot "
                        "(run 'writescope sim --model M --gpu G --host H --policy all --db PATH')");
    c->panels = panel;
    *n_out = panel;
    return rc;
}

int sim_plot_speedup(ws_store *s, const ws_plot_req *req, char *what, size_t cap, ws_err *err)
{
    points_ctx c = {.s = s, .req = req};
    int rc = ws_gnuplot_figure("speedup", req->out, write_speedup, &c, NULL, err);
    if (!rc)
        snprintf(what, cap, "%d panels, %d point pairs, modeled", c.panels, c.pairs);
    return rc;
}

/* throughput */

/* The run asked for (when one is): a closed batch of 'writescope sim', whose model and GPU
 * the figure draws. */
static int throughput_run(points_ctx *c, ws_simdb_run *run, const char **model, const char **gpu,
                          ws_err *err)
{
    int rc = ws_simdb_get_run(c->s, c->req->run, run, err);
    if (rc)
        return rc;
    if (strcmp(run->workload, "closed"))
        return ws_err_set(err, WS_EINVAL,
                          "simulation run %lld is not a closed batch: throughput against "
                          "prompt length needs closed-batch runs",
                          run->id);
    if (strcmp(run->origin, "sim"))
        return ws_err_set(err, WS_EINVAL,
                          "simulation run %lld is a validation's (%d layers): throughput "
                          "draws the runs of 'writescope sim'",
                          run->id, run->layers);
    *model = run->model;
    *gpu = run->gpu_profile;
    return 0;
}

/* Panel `panel`'s data files, one a policy: the points of the reference's hardware at the
 * batch and output of pts[i]; the policies drawn into list (their numbers from 1). */
static int throughput_panel(const points_ctx *c, const char *dir, const ws_simdb_point *pts,
                            size_t n, size_t i, int panel, const char **pol, int np, char *list,
                            size_t cap, ws_err *err)
{
    int rc = 0;
    for (int k = 0; k < np && !rc; k++) {
        char name[48];
        snprintf(name, sizeof name, "%d-%d.dat", panel, k + 1);
        FILE *f = NULL;
        int rows = 0;
        for (size_t j = i; j < n && !rc; j++) {
            const ws_simdb_point *p = &pts[j];
            if (!same_hw(p, &c->ref) || p->batch != pts[i].batch ||
                p->output_tokens != pts[i].output_tokens || strcmp(p->policy, pol[k]) ||
                !served(p))
                continue;
            if (!f) {
                if (!(f = ws_gnuplot_open(dir, name, err))) {
                    rc = err->code;
                    break;
                }
                ws_gnuplot_text(f, pol[k]);
                fputs("\tdecode tokens/s\n", f);
            }
            fprintf(f, "%lld\t%.6g\n", p->prompt_tokens, p->decode_tokens_per_s);
            rows++;
        }
        if (f && (rc = ws_gnuplot_close(f, name, err)))
            break;
        if (rows) {
            size_t l = strlen(list);
            snprintf(list + l, cap - l, "%s%d", l ? " " : "", k + 1);
        }
    }
    return rc;
}

static int write_throughput(void *vctx, const char *dir, int *n_out, ws_err *err)
{
    points_ctx *c = vctx;
    ws_simdb_point *pts;
    size_t n;
    int rc;
    const char *model = c->req->model, *gpu = c->req->gpu;
    ws_simdb_run run;
    if (c->req->run && (rc = throughput_run(c, &run, &model, &gpu, err)))
        return rc;
    if ((rc = ws_simdb_list_points(c->s, model, gpu, c->req->grid, &pts, &n, err)))
        return rc;
    if (n == 0) {
        free(pts);
        return ws_err_set(err, WS_ENOTFOUND,
                          "no closed-batch simulation run to plot (run 'writescope sim ... "
                          "--prompt N --db PATH' for a few N)");
    }
    /* the reference: the run asked for, else the newest point */
    size_t ref = 0;
    for (size_t i = 0; i < n; i++)
        if (pts[i].id > pts[ref].id)
            ref = i;
    c->ref = pts[ref];
    if (c->req->run) {
        snprintf(c->ref.model, sizeof c->ref.model, "%s", run.model);
        snprintf(c->ref.gpu_profile, sizeof c->ref.gpu_profile, "%s", run.gpu_profile);
        snprintf(c->ref.host_profile, sizeof c->ref.host_profile, "%s", run.host_profile);
    }
    /* every policy, each one colour in every panel; writescope last, drawn on top */
    const char **pol = NULL;
    int np = 0;
    if ((rc = policies(pts, n, &pol, &np, err))) {
        free(pts);
        return rc;
    }
    pol[np++] = WS_POLICY;
    FILE *t = ws_gnuplot_open(dir, "panels.tsv", err);
    int panel = 0;
    for (size_t i = 0; t && i < n && !rc; i++) {
        /* a panel per (batch, output) of the reference's model and hardware, in order */
        if (!same_hw(&pts[i], &c->ref))
            continue;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = same_hw(&pts[j], &c->ref) && pts[j].batch == pts[i].batch &&
                   pts[j].output_tokens == pts[i].output_tokens;
        if (seen)
            continue;
        panel++;
        char list[256] = "";
        if ((rc = throughput_panel(c, dir, pts, n, i, panel, pol, np, list, sizeof list, err)))
            break;
        if (!*list) { /* every policy ran out of memory at this batch */
            panel--;
            continue;
        }
        fprintf(t, "batch %d, %lld output tokens\t%s\n", pts[i].batch, pts[i].output_tokens,
                list);
    }
    if (!t)
        rc = err->code;
    else if (ws_gnuplot_close(t, "panels.tsv", err) && !rc)
        rc = err->code;
    if (!rc && panel == 0)
        rc = ws_err_set(err, WS_ENOTFOUND,
                        "%s on %s: every closed-batch run ran out of memory: nothing to plot",
                        c->ref.model, c->ref.gpu_profile);
    char title[512];
    snprintf(title, sizeof title, "Decode throughput against prompt length (modeled): %s on %s + %s",
             c->ref.model, c->ref.gpu_profile, c->ref.host_profile);
    char last[16];
    snprintf(last, sizeof last, "%d", np);
    const char *lines[] = {title, last};
    if (!rc)
        rc = ws_gnuplot_lines(dir, "labels.tsv", lines, 2, err);
    if (!rc)
        rc = ws_gnuplot_lines(dir, "policies.tsv", pol, np, err);
    free(pts);
    free(pol);
    c->panels = panel;
    *n_out = panel;
    return rc;
}

int sim_plot_throughput(ws_store *s, const ws_plot_req *req, char *what, size_t cap,
                        ws_err *err)
{
    points_ctx c = {.s = s, .req = req};
    int rc = ws_gnuplot_figure("throughput", req->out, write_throughput, &c, NULL, err);
    if (!rc)
        snprintf(what, cap, "%d panels, %s on %s, modeled", c.panels, c.ref.model,
                 c.ref.gpu_profile);
    return rc;
}

/* share, util: one run's steps */

typedef struct run_ctx {
    ws_store *s;
    long long id;
    int util;
    ws_simdb_run run;
    int series;
} run_ctx;

/* ", a validation's simulation of K layers" for a run `writescope validate` made (read
 * only when asked for by id), else "". */
static const char *origin_note(const ws_simdb_run *r, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!strcmp(r->origin, "validate"))
        snprintf(buf, cap, ", a validation's simulation of %d layer%s", r->layers,
                 r->layers == 1 ? "" : "s");
    return buf;
}

/* A run's title, "what, simulation run N (modeled): model on gpu + host[, policy P]", and
 * its workload, for the line under it. */
static void run_title(const ws_simdb_run *r, const char *what, int policy, char *title,
                      size_t cap, char *wl, size_t wcap)
{
    char note[64];
    if (!strcmp(r->workload, "closed"))
        snprintf(wl, wcap, "closed batch of %d x (%lld prompt + %lld output) tokens", r->batch,
                 r->prompt_tokens, r->output_tokens);
    else if (!strcmp(r->workload, "trace"))
        snprintf(wl, wcap, "trace %s, batch cap %d", r->trace_path, r->batch);
    else
        snprintf(wl, wcap, "generator %s, batch cap %d", r->generator, r->batch);
    snprintf(title, cap, "%s, simulation run %lld (modeled%s): %s on %s + %s%s%s", what, r->id,
             origin_note(r, note, sizeof note), r->model, r->gpu_profile, r->host_profile,
             policy ? ", policy " : "", policy ? r->policy : "");
}

static int write_steps(void *vctx, const char *dir, int *n_out, ws_err *err)
{
    run_ctx *c = vctx;
    ws_simdb_step *rows;
    size_t n;
    int rc = ws_simdb_get_run(c->s, c->id, &c->run, err);
    if (rc || (rc = ws_simdb_get_steps(c->s, c->run.id, &rows, &n, err)))
        return rc;
    if (n == 0)
        return ws_err_set(err, WS_ENOTFOUND, "simulation run %lld has no steps to plot%s",
                          c->run.id, c->run.oom ? " (its requests ran out of memory)" : "");
    size_t n_share;
    rc = ws_run_plot_steps(dir, rows, n, &n_share, err);
    free(rows);
    if (rc)
        return rc;
    if (!c->util && n_share == 0)
        return ws_err_set(err, WS_ENOTFOUND,
                          "simulation run %lld has no step with a target share (policy %s)",
                          c->run.id, c->run.policy);
    char title[768], wl[400];
    const char *xl = c->util ? "simulated time (s)" : "step (steps with a decode, where the policy sets r*)";
    if (c->util) {
        run_title(&c->run, "Resource utilisation", 1, title, sizeof title, wl, sizeof wl);
        const char *lines[] = {title, wl, "GPU compute", "H2D copy", "D2H copy", "CPU workers", xl};
        *n_out = 4;
        return ws_gnuplot_lines(dir, "labels.tsv", lines, 7, err);
    }
    run_title(&c->run, "CPU share", 1, title, sizeof title, wl, sizeof wl);
    const char *lines[] = {title, wl, "r* (policy target, modeled)", "realised share (modeled)", xl};
    *n_out = 2;
    return ws_gnuplot_lines(dir, "labels.tsv", lines, 5, err);
}

static int steps_figure(ws_store *s, const ws_plot_req *req, int util, char *what, size_t cap,
                        ws_err *err)
{
    run_ctx c = {.s = s, .id = req->run, .util = util};
    int rc = ws_gnuplot_figure(util ? "util" : "share", req->out, write_steps, &c, NULL, err);
    char note[64];
    if (!rc)
        snprintf(what, cap, "simulation run %lld, %s, modeled%s", c.run.id, c.run.policy,
                 origin_note(&c.run, note, sizeof note));
    return rc;
}

int sim_plot_share(ws_store *s, const ws_plot_req *req, char *what, size_t cap, ws_err *err)
{
    return steps_figure(s, req, 0, what, cap, err);
}

int sim_plot_util(ws_store *s, const ws_plot_req *req, char *what, size_t cap, ws_err *err)
{
    return steps_figure(s, req, 1, what, cap, err);
}

/* latency */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Writes dir/name: a header (the policy), then the sorted finite values times scale with their
 * cumulative fraction. Returns the number of values. */
static int put_cdf(const char *dir, const char *name, const char *policy, double *v, size_t n,
                   double scale, int *count, ws_err *err)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i]))
            v[k++] = v[i];
    qsort(v, k, sizeof *v, cmp_double);
    *count = (int)k;
    FILE *f = ws_gnuplot_open(dir, name, err);
    if (!f)
        return err->code;
    ws_gnuplot_text(f, policy);
    fputs("\tfraction\n", f);
    if (k) /* the CDF rises from 0 at the smallest value */
        fprintf(f, "%.6g\t0\n", v[0] * scale);
    for (size_t i = 0; i < k; i++)
        fprintf(f, "%.6g\t%.6g\n", v[i] * scale, (double)(i + 1) / (double)k);
    return ws_gnuplot_close(f, name, err);
}

static int write_latency(void *vctx, const char *dir, int *n_out, ws_err *err)
{
    run_ctx *c = vctx;
    ws_simdb_run *runs;
    size_t nr;
    int rc = ws_simdb_list_siblings(c->s, c->id, &runs, &nr, err);
    if (rc)
        return rc;
    FILE *t = ws_gnuplot_open(dir, "series.tsv", err);
    if (!t) {
        free(runs);
        return err->code;
    }
    char none[512] = "";
    int k = 0;
    for (size_t i = 0; i < nr && !rc; i++) {
        ws_simdb_request *rq;
        size_t n;
        if ((rc = ws_simdb_get_requests(c->s, runs[i].id, &rq, &n, err)))
            break;
        double *a = malloc((n ? n : 1) * sizeof *a), *b = malloc((n ? n : 1) * sizeof *b);
        if (!a || !b) {
            free(a);
            free(b);
            free(rq);
            rc = ws_err_set(err, WS_ENOMEM, "out of memory");
            break;
        }
        for (size_t j = 0; j < n; j++) {
            const int done = rq[j].outcome == WS_SIMDB_DONE;
            a[j] = done ? rq[j].ttft_s : NAN;
            b[j] = done ? rq[j].tpot_s : NAN;
        }
        free(rq);
        char fa[32], fb[32];
        int na = 0, nb = 0;
        snprintf(fa, sizeof fa, "%d.ttft", k + 1);
        snprintf(fb, sizeof fb, "%d.tpot", k + 1);
        rc = put_cdf(dir, fa, runs[i].policy, a, n, 1, &na, err);
        if (!rc)
            rc = put_cdf(dir, fb, runs[i].policy, b, n, 1e3, &nb, err);
        free(a);
        free(b);
        if (rc)
            break;
        if (na == 0 || nb == 0) {
            size_t l = strlen(none);
            snprintf(none + l, sizeof none - l, "%s%s", l ? ", " : "", runs[i].policy);
            continue;
        }
        /* the TPOT of a one-token request does not exist: TTFT's count may be larger */
        fprintf(t, "%d\t%d\t%d\n", k + 1, na, nb);
        k++;
    }
    int crc = ws_gnuplot_close(t, "series.tsv", err);
    if (!rc)
        rc = crc;
    if (!rc && k == 0)
        rc = ws_err_set(err, WS_ENOTFOUND, "simulation run %lld: no policy served a request",
                        c->id ? c->id : (nr ? runs[nr - 1].id : 0));
    if (!rc) {
        c->run = runs[nr - 1];
        char title[900], wl[400], foot[600];
        run_title(&runs[nr - 1], "Request latency", 0, title, sizeof title, wl, sizeof wl);
        snprintf(foot, sizeof foot, "%s%s", *none ? "served nothing (out of memory): " : "",
                 none);
        const char *lines[] = {title, wl, foot};
        rc = ws_gnuplot_lines(dir, "labels.tsv", lines, 3, err);
    }
    free(runs);
    c->series = k;
    *n_out = k;
    return rc;
}

int sim_plot_latency(ws_store *s, const ws_plot_req *req, char *what, size_t cap, ws_err *err)
{
    run_ctx c = {.s = s, .id = req->run};
    int rc = ws_gnuplot_figure("latency", req->out, write_latency, &c, NULL, err);
    char note[64];
    if (!rc)
        snprintf(what, cap, "%d policies of simulation run %lld's workload, modeled%s", c.series,
                 c.run.id, origin_note(&c.run, note, sizeof note));
    return rc;
}

int sim_plot_plan(ws_store *s, const ws_plot_req *req, char *what, size_t cap, ws_err *err)
{
    const int rc = ws_plan_plot(s, req->run, req->out, err);
    if (!rc)
        snprintf(what, cap, req->run ? "plan %lld" : "the newest plan", req->run);
    return rc;
}
