/* space_plot: a configuration search's frontier figure (see space_plot.h). */
#include "space_plot.h"

#include <stdio.h>
#include <stdlib.h>

#include "ws_gnuplot.h"

static int by_x(const void *a, const void *b)
{
    const double x = ((const ws_space_plot_pt *)a)->x, y = ((const ws_space_plot_pt *)b)->x;
    return (x > y) - (x < y);
}

/* all.dat: every point; frontier.dat: the frontier's, by x, so the line runs along it. */
static int write_points(const ws_space_plot_pt *pts, int n, const char *dir, ws_err *err)
{
    ws_space_plot_pt *f = malloc(sizeof *f * (size_t)(n > 0 ? n : 1));
    if (!f)
        return ws_err_set(err, WS_ENOMEM, "plot: out of memory");
    int nf = 0;
    FILE *o = ws_gnuplot_open(dir, "all.dat", err);
    for (int i = 0; o && i < n; i++) {
        fprintf(o, "%.9g %.9g\n", pts[i].x, pts[i].y);
        if (pts[i].frontier)
            f[nf++] = pts[i];
    }
    if (o && !n)
        fprintf(o, "NaN NaN\n");
    int rc = !o ? err->code : ws_gnuplot_close(o, "all.dat", err) ? err->code : 0;
    qsort(f, (size_t)nf, sizeof *f, by_x);
    if (!rc && !(o = ws_gnuplot_open(dir, "frontier.dat", err)))
        rc = err->code;
    for (int i = 0; !rc && i < nf; i++)
        fprintf(o, "%.9g %.9g\n", f[i].x, f[i].y);
    if (!rc && !nf)
        fprintf(o, "NaN NaN\n");
    if (!rc && ws_gnuplot_close(o, "frontier.dat", err))
        rc = err->code;
    free(f);
    return rc;
}

int ws_space_plot(const ws_space_plot_pt *pts, int n, int price, int users, const char *title,
                  const char *out, ws_err *err)
{
    char script[4096], dir[64];
    int rc = ws_gnuplot_check_out(out, err);
    if (!rc)
        rc = ws_gnuplot_script("space", script, sizeof script, err);
    if (!rc)
        rc = ws_gnuplot_tmpdir(dir, sizeof dir, err);
    if (rc)
        return rc;
    if (!(rc = write_points(pts, n, dir, err))) {
        const char *args[] = {dir,
                              price ? "price" : "context",
                              users ? "decode tokens/s within the SLO"
                                    : "goodput (requests/s within the SLO)",
                              title,
                              out,
                              ws_gnuplot_term(out)};
        rc = ws_gnuplot_draw(script, args, 6, 4, dir, err);
    }
    ws_gnuplot_rmdir(dir);
    return rc;
}
