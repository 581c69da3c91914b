/* plan_plot: plots/plan.gp's data from a stored plan (see plan_plot.h). */
#include "plan_plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plandb.h"
#include "ws_gnuplot.h"

#define PLAN_PLOT_GPUS 16     /* GPU profiles drawn (a plan holds at most 16: sim/plan.h) */
#define PLAN_PLOT_POLICIES 16 /* policies drawn */

static int cmp_load(const void *a, const void *b)
{
    const ws_plandb_point *x = a, *y = b;
    return (x->load > y->load) - (x->load < y->load);
}

/* Appends name to words as one word (characters gnuplot's word() would split on become _). */
static void add_word(char *words, size_t cap, const char *name)
{
    size_t l = strlen(words);
    if (l && l + 1 < cap)
        words[l++] = ' ';
    for (; *name && l + 1 < cap; name++) {
        const unsigned char c = (unsigned char)*name;
        words[l++] = c > ' ' && c < 127 && c != '\'' && c != '"' && c != '\\' ? (char)c : '_';
    }
    words[l] = 0;
}

/* Writes DIR/g<i>_p<j>.dat (load, goodput or tokens/s, attainment %) for the default setting
 * of every (GPU, policy) of the plan, sorted by load; the names as words. */
static int plot_data(const ws_plandb_run *run, ws_plandb_point *pts, size_t n, const char *dir,
                     char *gpus, char *pols, size_t cap, int *ng, int *np, ws_err *err)
{
    char gname[PLAN_PLOT_GPUS][160], pname[PLAN_PLOT_POLICIES][32];
    *ng = *np = 0;
    gpus[0] = pols[0] = 0;
    for (size_t i = 0; i < n; i++) {
        if (pts[i].fit)
            continue;
        int g = 0, p = 0;
        while (g < *ng && strcmp(gname[g], pts[i].gpu_profile))
            g++;
        if (g == *ng && *ng < PLAN_PLOT_GPUS) {
            snprintf(gname[(*ng)++], sizeof gname[0], "%s", pts[i].gpu_profile);
            add_word(gpus, cap, pts[i].gpu_profile);
        }
        while (p < *np && strcmp(pname[p], pts[i].policy))
            p++;
        if (p == *np && *np < PLAN_PLOT_POLICIES) {
            snprintf(pname[(*np)++], sizeof pname[0], "%s", pts[i].policy);
            add_word(pols, cap, pts[i].policy);
        }
    }
    if (!*ng)
        return ws_err_set(err, WS_ENOTFOUND, "plan %lld has no load points to draw", run->id);
    qsort(pts, n, sizeof *pts, cmp_load);
    const int users = !strcmp(run->load_kind, "users");
    for (int g = 0; g < *ng; g++)
        for (int p = 0; p < *np; p++) {
            char name[64];
            snprintf(name, sizeof name, "g%d_p%d.dat", g + 1, p + 1);
            FILE *f = ws_gnuplot_open(dir, name, err);
            if (!f)
                return err->code;
            int rows = 0;
            for (size_t i = 0; i < n; i++) {
                const ws_plandb_point *q = &pts[i];
                if (q->fit || q->kv_gb > 0 || q->page || q->window ||
                    strcmp(q->gpu_profile, gname[g]) || strcmp(q->policy, pname[p]))
                    continue;
                fprintf(f, "%.9g %.9g %.9g %d\n", q->load,
                        users ? (q->meets ? q->tokens_per_s : 0) : q->goodput, 100 * q->attain,
                        q->meets);
                rows++;
            }
            if (!rows) /* a series with nothing: one point off the axes keeps gnuplot quiet */
                fprintf(f, "NaN NaN NaN 0\n");
            if (ws_gnuplot_close(f, name, err))
                return err->code;
        }
    return 0;
}

int ws_plan_plot(ws_store *store, long long id, const char *out, ws_err *err)
{
    char script[4096];
    int rc = ws_gnuplot_check_out(out, err);
    if (!rc)
        rc = ws_gnuplot_script("plan", script, sizeof script, err);
    if (rc)
        return rc;
    ws_plandb_run run;
    if ((rc = ws_plandb_get_run(store, id, &run, err)))
        return rc;
    ws_plandb_point *pts;
    size_t n;
    if ((rc = ws_plandb_get_points(store, run.id, &pts, &n, err)))
        return rc;
    char dir[64], gpus[1024], pols[1024], pct[32], title[512];
    if ((rc = ws_gnuplot_tmpdir(dir, sizeof dir, err))) {
        free(pts);
        return rc;
    }
    int ng, np;
    rc = plot_data(&run, pts, n, dir, gpus, pols, sizeof pols, &ng, &np, err);
    if (!rc) {
        snprintf(pct, sizeof pct, "%g", run.slo_pct);
        char slo[128] = "";
        if (isfinite(run.slo_ttft))
            snprintf(slo, sizeof slo, "TTFT <= %g s", run.slo_ttft);
        if (isfinite(run.slo_tpot))
            snprintf(slo + strlen(slo), sizeof slo - strlen(slo), "%sTPOT <= %g ms",
                     slo[0] ? ", " : "", 1e3 * run.slo_tpot);
        snprintf(title, sizeof title, "plan %lld: %s on host %s, %s at %g%% (MODELED)", run.id,
                 run.model, run.host_profile, slo, run.slo_pct);
        const char *args[] = {dir,   gpus, pols, pct, run.load_kind, title,
                              out,   ws_gnuplot_term(out)};
        rc = ws_gnuplot_draw(script, args, 8, 6, dir, err);
    }
    ws_gnuplot_rmdir(dir);
    free(pts);
    return rc;
}
