/* cmd_plot: `writescope plot NAME` -- one table of figures, each a library function that
 * reads the database, writes its data files and runs plots/NAME.gp through gnuplot
 * (plots/ws_gnuplot.h). This file only parses, picks the row and prints. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib_plot.h"
#include "cli.h"
#include "opts.h"
#include "run_plot.h"
#include "sim_plot.h"
#include "validate_plot.h"
#include "ws_gnuplot.h"
#include "ws_util.h"

typedef int (*plot_fn)(ws_store *s, const ws_plot_req *req, char *what, size_t cap, ws_err *err);

typedef struct figure {
    const char *name;
    const char *help; /* one line: what it draws, from which table */
    plot_fn draw;     /* the figure of --run N (0: the newest) */
    plot_fn live;     /* the same from a live run (--live N); NULL: none */
} figure;

static const figure figures[] = {
    {"calib", "achieved rate against size, fitted model and residuals per fit (calibration run)",
     ws_calib_plot, NULL},
    {"speedup", "writescope's decode tokens/s over each baseline, per model and hardware "
                "(closed-batch sim runs)",
     sim_plot_speedup, NULL},
    {"throughput", "decode tokens/s against prompt length per policy, a panel per batch "
                   "(closed-batch sim runs of one model and GPU)",
     sim_plot_throughput, NULL},
    {"share", "target share r* and the realised CPU share over a run (sim run, or --live)",
     sim_plot_share, ws_run_plot_share},
    {"latency", "TTFT and TPOT CDFs per policy (the sim runs of one workload)",
     sim_plot_latency, NULL},
    {"util", "busy % of GPU, H2D, D2H and CPU over time (sim run, or --live)", sim_plot_util,
     ws_run_plot_util},
    {"plan", "goodput and SLO attainment against load per policy (a `plan --save` run)",
     sim_plot_plan, NULL},
    {"validate", "the cost model's predictions against the live runtime's measurements, per "
                 "quantity (a `validate --save` run)",
     ws_validate_plot_fig, NULL},
};
#define N_FIGURES (sizeof figures / sizeof figures[0])

static void usage(FILE *out)
{
    fprintf(out, "usage: writescope plot NAME [--run N] [--live N] [--model M] [--gpu G]\n"
                 "                        [--grid N] [--db PATH] [--out FILE.png|svg|pdf]\n\n"
                 "Figures:\n");
    for (size_t i = 0; i < N_FIGURES; i++)
        fprintf(out, "  %-11s %s\n", figures[i].name, figures[i].help);
    fprintf(out, "\nFigures over many runs take the newest run of each point. Every figure labels\n"
                 "what is measured and what is modeled. Needs gnuplot (make deps). Details:\n"
                 "docs/plots.md\n");
}

typedef struct plot_opts {
    const char *db, *out, *model, *gpu;
    long long run, live, grid;
} plot_opts;

static const cli_optdef k_opts[] = {
    {"run", CLI_LL(plot_opts, run), .arg = "N", .lo = 1, .hi = LLONG_MAX,
     .help = "the figure's run: a calibration run (calib) or a simulation run (share, util; "
             "latency: the newest run of every policy on its workload; throughput: its model "
             "and hardware); default the newest"},
    {"live", CLI_LL(plot_opts, live), .arg = "N", .lo = 0, .hi = LLONG_MAX,
     .help = "share, util: run N of `writescope run` (CPU measured, GPU as the run says); 0: "
             "the newest"},
    {"model", CLI_STR(plot_opts, model), .arg = "M",
     .help = "speedup, throughput: only the runs of this model"},
    {"gpu", CLI_STR(plot_opts, gpu), .arg = "G",
     .help = "speedup, throughput: only the runs of this GPU profile"},
    {"grid", CLI_LL(plot_opts, grid), .arg = "N", .lo = 1, .hi = LLONG_MAX,
     .help = "speedup, throughput: only the runs of `sim grid` N (--db/--save)"},
    {"db", CLI_STR(plot_opts, db), .arg = "PATH",
     .help = "the database (default: $WRITESCOPE_DB, else results/writescope.db)"},
    {"out", CLI_STR(plot_opts, out), .arg = "FILE.png|svg|pdf",
     .help = "the figure (default: results/NAME.png), its type from its name: PNG, SVG or "
             "PDF; replaced whole, never through a link, FIFO or device"},
    {0}};
static const cli_spec k_spec = {"plot", k_opts, 1, usage};

int cmd_plot(int argc, char **argv)
{
    plot_opts o = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_spec, argc, argv, &o, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    if (a.npos == 0)
        return cli_usage_error("plot", "which figure? (see --help)");
    const figure *fig = NULL;
    for (size_t i = 0; i < N_FIGURES && !fig; i++)
        if (!strcmp(a.pos[0], figures[i].name))
            fig = &figures[i];
    if (!fig)
        return cli_usage_error("plot", "no figure '%s' (see --help)", a.pos[0]);
    const int live = cli_given(&a, "live") > 0;
    if (live && !fig->live)
        return cli_usage_error("plot", "figure '%s' takes no --live run", fig->name);
    if (live && cli_given(&a, "run"))
        return cli_usage_error("plot", "--run and --live name two runs: give one");
    ws_plot_req req = {
        .model = o.model, .gpu = o.gpu, .run = o.run, .grid = o.grid, .live = o.live};
    const char *out = o.out;
    ws_err err = {0};
    char outbuf[WS_PATH_MAX + 64];
    if (!out) {
        char root[WS_PATH_MAX];
        if (ws_root_dir(root, sizeof root, &err))
            return cli_fail(&err);
        snprintf(outbuf, sizeof outbuf, "%s/results/%s.png", root, fig->name);
        out = outbuf;
    }
    req.out = out;
    if (!ws_gnuplot_term(out))
        return cli_usage_error("plot", "--out %s: a figure is a .png, .svg or .pdf file", out);
    if (ws_ensure_parent_dir(out, &err) || ws_gnuplot_check_out(out, &err))
        return cli_fail(&err);
    ws_store *s;
    int embedded = 0; /* no database yet: the figures say there is nothing to draw */
    if (cli_open_store_ro(o.db, &s, &embedded, &err))
        return cli_fail(&err);
    char what[512];
    rc = (live ? fig->live : fig->draw)(s, &req, what, sizeof what, &err);
    ws_store_close(s);
    if (rc)
        return cli_fail(&err);
    for (char *p = what; *p; p++) /* names from the database stay on one line */
        if ((unsigned char)*p < ' ')
            *p = ' ';
    printf("%s (%s)\n", out, what);
    return CLI_EXIT_OK;
}
