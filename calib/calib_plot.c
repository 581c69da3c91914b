/* calib_plot: writes the data files plots/calib.gp draws -- for every roofline or transfer
 * fit of a run, the run's samples of that key (bytes, median, min, max time) beside the
 * fitted model's time for the same operation (see calib.h). Titles are made of a safe
 * character set: they reach gnuplot as data and are split into words there. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "ws_gnuplot.h"
#include "ws_util.h"

/* Appends `t` to titles as one word: characters that gnuplot's word() or a terminal would
 * treat specially (blanks, quotes, backslash, control and non-ASCII bytes) become '_'. */
static void append_title(char *titles, size_t cap, const char *t)
{
    size_t l = strlen(titles);
    if (l && l + 1 < cap)
        titles[l++] = ' ';
    for (; *t && l + 1 < cap; t++) {
        unsigned char c = (unsigned char)*t;
        titles[l++] = c > ' ' && c < 127 && c != '\'' && c != '"' && c != '\\' && c != '`' ? (char)c
                                                                                          : '_';
    }
    titles[l] = '\0';
}

int ws_calib_plot_data(ws_store *store, long long run_id, const char *dir, int *n_out,
                       char *titles, size_t titles_cap, ws_err *err)
{
    ws_calibdb_run run;
    ws_calibdb_host host;
    ws_calibdb_fit *fits;
    int n_fits, n = 0, rc;
    *n_out = 0;
    if ((rc = ws_calibdb_get_run(store, run_id, &run, &host, err)) ||
        (rc = ws_calibdb_get_fits(store, run.id, &fits, &n_fits, err)))
        return rc;
    titles[0] = '\0';
    for (int i = 0; i < n_fits && !rc; i++) {
        const ws_calibdb_fit *f = &fits[i];
        if (!strcmp(f->form, "factor") || f->n_samples < 3)
            continue;
        ws_fit_result r = {.form = strcmp(f->form, "transfer") ? WS_FIT_ROOFLINE : WS_FIT_TRANSFER,
                           .c0 = isnan(f->c0) ? 0 : f->c0,
                           .peak_flops = isnan(f->peak_flops) ? 0 : f->peak_flops,
                           .bandwidth = isnan(f->bandwidth) ? 0 : f->bandwidth};
        ws_calibdb_sample *x;
        int nx;
        if ((rc = ws_calibdb_get_samples(store, run.id, &f->key, &x, &nx, err)))
            break;
        char path[WS_PATH_MAX];
        snprintf(path, sizeof path, "%s/%d.dat", dir, n + 1);
        FILE *out = fopen(path, "w");
        if (!out) {
            free(x);
            rc = ws_err_set(err, WS_EIO, "%s: cannot write", path);
            break;
        }
        for (int j = 0; j < nx; j++)
            fprintf(out, "%.6g %.6g %.6g %.6g %.6g %.6g\n", x[j].bytes, x[j].t_median, x[j].t_min,
                    x[j].t_max, ws_fit_predict(&r, x[j].flops, x[j].bytes), x[j].flops);
        free(x);
        if (fclose(out) != 0) {
            rc = ws_err_set(err, WS_EIO, "%s: cannot write", path);
            break;
        }
        n++;
        char key[128], rates[64] = "", t[260];
        snprintf(key, sizeof key, "%s.%s%s%s%s%s", f->key.device, f->key.op,
                 *f->key.attn_kind ? "." : "", f->key.attn_kind, *f->key.dtype ? "." : "",
                 f->key.dtype);
        if (r.peak_flops > 0 && !f->p_fixed)
            snprintf(rates, sizeof rates, "_P=%.3gGflop/s", r.peak_flops / 1e9);
        if (r.bandwidth > 0 && !f->w_fixed) {
            size_t rl = strlen(rates);
            snprintf(rates + rl, sizeof rates - rl, "_W=%.3gGB/s", r.bandwidth / 1e9);
        }
        snprintf(t, sizeof t, "%s%s_heldout_MAPE=%.1f%%%s", key, rates, f->heldout_mape_pct,
                 f->good ? "" : "_(POOR)");
        append_title(titles, titles_cap, t);
    }
    free(fits);
    if (!rc && n == 0)
        rc = ws_err_set(err, WS_ENOTFOUND, "run %lld has no fits to plot", run.id);
    *n_out = n;
    return rc;
}

int ws_calib_plot(ws_store *store, long long run_id, const char *script, const char *out,
                  int *n_out, ws_err *err)
{
    char dir[64], nbuf[16], titles[16384];
    int n = 0;
    *n_out = 0;
    if (ws_gnuplot_tmpdir(dir, sizeof dir, err))
        return err->code;
    int rc = ws_calib_plot_data(store, run_id, dir, &n, titles, sizeof titles, err);
    if (!rc) {
        snprintf(nbuf, sizeof nbuf, "%d", n);
        const char *args[] = {dir, nbuf, titles, out, ws_gnuplot_term(out)};
        rc = ws_gnuplot_run(script, args, 5, err);
    }
    ws_gnuplot_rmdir(dir);
    *n_out = n;
    return rc;
}
