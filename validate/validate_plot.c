/* validate_plot: a validation drawn as predicted against measured (see validate.h). One data
 * file per quantity (measured, predicted, repeat; times in ms, the share in percent) and one
 * panel spec per quantity ("title|x label|y label") as gnuplot script arguments. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "validate.h"
#include "ws_gnuplot.h"

static const char *q_title(int q)
{
    switch (q) {
    case WS_VQ_STEP: return "decode step time";
    case WS_VQ_CPU_ATTN: return "CPU attention per layer";
    case WS_VQ_EXPERTS: return "routed experts per layer (CPU)";
    case WS_VQ_SHARE: return "realised CPU share per step";
    default: return "GPU half per layer";
    }
}

/* What the runtime's side of quantity q is, for the x axis. */
static const char *q_measured(int q, const char *gpu_source)
{
    switch (q) {
    case WS_VQ_STEP: return "runtime, CPU measured + GPU modeled";
    case WS_VQ_SHARE: return "runtime, realised";
    case WS_VQ_GPU:
        return strcmp(gpu_source, "measured") ? "runtime, MODELED" : "runtime, measured";
    default: return "runtime, measured";
    }
}

int ws_validate_plot_report(const ws_validate_report *r, const char *script, const char *out,
                            ws_err *err)
{
    char dir[64];
    if (ws_gnuplot_tmpdir(dir, sizeof dir, err))
        return err->code;
    char spec[WS_VQ_COUNT][256], header[1024];
    int rc = 0;
    for (int q = 0; q < WS_VQ_COUNT && !rc; q++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%d.dat", dir, q + 1);
        FILE *f = fopen(path, "w");
        if (!f) {
            rc = ws_err_set(err, WS_EIO, "%s: cannot write the plot data", path);
            break;
        }
        const double k = q == WS_VQ_SHARE ? 100 : 1e3;
        size_t n = 0;
        for (size_t i = 0; i < r->n_pt; i++) {
            const ws_validate_point *p = &r->pt[i];
            if (strcmp(p->quantity, ws_validate_q_name(q)) || p->step < r->run.warmup ||
                !isfinite(p->measured) || !isfinite(p->predicted))
                continue;
            fprintf(f, "%.9g %.9g %d\n", k * p->measured, k * p->predicted, p->rep);
            n++;
        }
        if (!n) /* an empty panel still draws: one point at the origin, marked as no data */
            fprintf(f, "0 0 0\n");
        if (fclose(f)) {
            rc = ws_err_set(err, WS_EIO, "%s: cannot write the plot data", path);
            break;
        }
        const ws_validate_stat *s = &r->stat[q];
        const char *unit = q == WS_VQ_SHARE ? "%" : "ms";
        char noise[96] = "";
        if (isfinite(s->noise_mean_ape))
            snprintf(noise, sizeof noise, "; noise %.1f%% / %.1f%%", s->noise_mean_ape,
                     s->noise_p95_ape);
        snprintf(spec[q], sizeof spec[q],
                 "%s\nAPE mean %.1f%%, p95 %.1f%% (n %lld%s)|%s (%s)|%s (%s)", q_title(q),
                 s->mean_ape, s->p95_ape, s->n, noise, q_measured(q, r->run.gpu_source), unit,
                 q == WS_VQ_GPU || q == WS_VQ_STEP ? "simulator, modeled" : "simulator, predicted",
                 unit);
    }
    snprintf(header, sizeof header,
             "WriteScope validate: simulator (modeled) vs live runtime (CPU measured, GPU %s), %s, "
             "batch %d x (%d + %d), %d layers, %s\ngpu=%s, host profile %s; %d run%s, first %d "
             "step%s of each left out as warm-up",
             r->run.gpu_source, r->run.model, r->run.batch, r->run.prompt_tokens,
             r->run.output_tokens, r->run.layers, r->run.policy, r->run.gpu, r->run.host_profile,
             r->run.repeats, r->run.repeats == 1 ? "" : "s", r->run.warmup,
             r->run.warmup == 1 ? "" : "s");
    if (!rc) {
        const char *args[] = {
            dir, out, ws_gnuplot_term(out), header, spec[0], spec[1], spec[2], spec[3], spec[4]};
        rc = ws_gnuplot_run(script, args, 9, err);
    }
    ws_gnuplot_rmdir(dir);
    return rc;
}

int ws_validate_plot(ws_store *s, long long id, const char *out, ws_err *err)
{
    char script[4096];
    if (ws_gnuplot_script("validate", script, sizeof script, err))
        return err->code;
    ws_validate_report r;
    int rc = ws_validate_load(s, id, &r, err);
    if (rc)
        return rc;
    rc = ws_validate_plot_report(&r, script, out, err);
    ws_validate_report_free(&r);
    return rc;
}
