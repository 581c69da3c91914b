/* validate_plot: a validation drawn as predicted against measured (see validate_plot.h). */
#include "validate_plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The figure's panels, in plots/validate.gp's order, by the quantity names the rows carry
 * (validate/validate.c writes them). measured NULL: the GPU half, whose runtime side is
 * measured or modeled as the run's gpu_source says. */
typedef struct panel {
    const char *quantity, *title, *measured, *predicted;
    int share; /* 1: a share, drawn in percent; 0: a time, in ms */
} panel;

static const panel panels[] = {
    {"step_time", "decode step time", "runtime, CPU measured + GPU modeled",
     "simulator, modeled", 0},
    {"cpu_attn", "CPU attention per layer", "runtime, measured", "simulator, predicted", 0},
    {"experts", "routed experts per layer (CPU)", "runtime, measured", "simulator, predicted", 0},
    {"cpu_share", "realised CPU share per step", "runtime, realised", "simulator, predicted", 1},
    {"gpu_half", "GPU half per layer", NULL, "simulator, modeled", 0},
};
#define N_PANELS (int)(sizeof panels / sizeof panels[0])

static int draw(const ws_validatedb_run *run, const ws_validatedb_stat *st, size_t n_st,
                const ws_validatedb_point *pt, size_t n_pt, const char *script, const char *out,
                ws_err *err)
{
    char dir[64];
    if (ws_gnuplot_check_out(out, err) || ws_gnuplot_tmpdir(dir, sizeof dir, err))
        return err->code;
    char spec[N_PANELS][256], header[1024];
    int rc = 0;
    for (int q = 0; q < N_PANELS && !rc; q++) {
        const panel *pn = &panels[q];
        char name[32];
        snprintf(name, sizeof name, "%d.dat", q + 1);
        FILE *f = ws_gnuplot_open(dir, name, err);
        if (!f) {
            rc = err->code;
            break;
        }
        const double k = pn->share ? 100 : 1e3;
        size_t n = 0;
        for (size_t i = 0; i < n_pt; i++) {
            const ws_validatedb_point *p = &pt[i];
            if (strcmp(p->quantity, pn->quantity) || p->step < run->warmup ||
                !isfinite(p->measured) || !isfinite(p->predicted))
                continue;
            fprintf(f, "%.9g %.9g %d\n", k * p->measured, k * p->predicted, p->rep);
            n++;
        }
        if (!n) /* an empty panel still draws: one point at the origin, marked as no data */
            fprintf(f, "0 0 0\n");
        if ((rc = ws_gnuplot_close(f, name, err)))
            break;
        ws_validatedb_stat s = {0};
        for (size_t i = 0; i < n_st; i++)
            if (!strcmp(st[i].quantity, pn->quantity)) {
                s = st[i];
                break;
            }
        const char *unit = pn->share ? "%" : "ms";
        const char *measured = pn->measured ? pn->measured
                               : strcmp(run->gpu_source, "measured") ? "runtime, MODELED"
                                                                     : "runtime, measured";
        char noise[96] = "";
        if (isfinite(s.noise_mean_ape))
            snprintf(noise, sizeof noise, "; noise %.1f%% / %.1f%%", s.noise_mean_ape,
                     s.noise_p95_ape);
        snprintf(spec[q], sizeof spec[q],
                 "%s\nAPE mean %.1f%%, p95 %.1f%% (n %lld%s)|%s (%s)|%s (%s)", pn->title,
                 s.mean_ape, s.p95_ape, s.n, noise, measured, unit, pn->predicted, unit);
    }
    snprintf(header, sizeof header,
             "WriteScope validate: simulator (modeled) vs live runtime (CPU measured, GPU %s), %s, "
             "batch %d x (%d + %d), %d layers, %s\ngpu=%s, host profile %s; %d run%s, first %d "
             "step%s of each left out as warm-up",
             run->gpu_source, run->model, run->batch, run->prompt_tokens, run->output_tokens,
             run->layers, run->policy, run->gpu, run->host_profile, run->repeats,
             run->repeats == 1 ? "" : "s", run->warmup, run->warmup == 1 ? "" : "s");
    if (!rc) {
        const char *args[] = {
            dir, out, ws_gnuplot_term(out), header, spec[0], spec[1], spec[2], spec[3], spec[4]};
        rc = ws_gnuplot_draw(script, args, 9, 1, dir, err);
    }
    ws_gnuplot_rmdir(dir);
    return rc;
}

int ws_validate_plot_rows(const ws_validatedb_run *run, const ws_validatedb_stat *st,
                          size_t n_st, const ws_validatedb_point *pt, size_t n_pt,
                          const char *out, ws_err *err)
{
    char script[4096];
    if (ws_gnuplot_script("validate", script, sizeof script, err))
        return err->code;
    return draw(run, st, n_st, pt, n_pt, script, out, err);
}

int ws_validate_plot(ws_store *s, long long id, const char *out, ws_err *err)
{
    char script[4096];
    if (ws_gnuplot_script("validate", script, sizeof script, err))
        return err->code;
    ws_validatedb_run run;
    ws_validatedb_stat *st = NULL;
    ws_validatedb_point *pt = NULL;
    size_t n_st = 0, n_pt = 0;
    int rc = ws_validatedb_get(s, id, &run, &st, &n_st, &pt, &n_pt, NULL, NULL, err);
    if (!rc)
        rc = draw(&run, st, n_st, pt, n_pt, script, out, err);
    free(st);
    free(pt);
    return rc;
}

int ws_validate_plot_fig(ws_store *s, const ws_plot_req *req, char *what, size_t cap,
                         ws_err *err)
{
    const int rc = ws_validate_plot(s, req->run, req->out, err);
    if (!rc)
        snprintf(what, cap, req->run ? "validation %lld" : "the newest validation", req->run);
    return rc;
}
