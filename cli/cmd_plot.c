/* cmd_plot: `writescope plot NAME` -- one table of figures, each a library function that
 * reads the database, writes its data files and runs plots/NAME.gp through gnuplot
 * (plots/ws_gnuplot.h). This file only parses, picks the row and prints. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib_plot.h"
#include "cli.h"
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

static void help(FILE *out)
{
    fprintf(out, "usage: writescope plot NAME [--run N] [--live N] [--model M] [--gpu G]\n"
                 "                        [--grid N] [--db PATH] [--out FILE.png|FILE.svg]\n\n"
                 "Figures:\n");
    for (size_t i = 0; i < N_FIGURES; i++)
        fprintf(out, "  %-11s %s\n", figures[i].name, figures[i].help);
    fprintf(out,
            "\n--run N      the figure's run: a calibration run (calib) or a simulation run\n"
            "             (share, util; latency: the newest run of every policy on its\n"
            "             workload; throughput: its model and hardware); default the newest\n"
            "--live N     share, util: run N of `writescope run` (CPU measured, GPU as the\n"
            "             run says); 0: the newest\n"
            "--model M, --gpu G  speedup, throughput: only the runs of this model / GPU profile\n"
            "--grid N     speedup, throughput: only the runs of `sim grid` N (--db/--save)\n"
            "Figures over many runs take the newest run of each point. Every figure labels\n"
            "what is measured and what is modeled. Default output: results/NAME.png (SVG\n"
            "for a .svg name). Needs gnuplot (make deps). Details: docs/plots.md\n");
}

int cmd_plot(int argc, char **argv)
{
    int nargs = 0;
    const char *db = NULL, *run_arg = NULL, *live_arg = NULL, *out = NULL, *model = NULL,
               *gpu = NULL, *grid_arg = NULL;
    const cli_opt opts[] = {{"db", &db, NULL},     {"run", &run_arg, NULL},
                            {"live", &live_arg, NULL}, {"out", &out, NULL},
                            {"model", &model, NULL}, {"gpu", &gpu, NULL},
                            {"grid", &grid_arg, NULL}, {0}};
    char *args[1];
    int rc = cli_parse("plot", argc, argv, opts, args, 1, &nargs, help);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    if (nargs == 0)
        return cli_usage_error("plot", "which figure? (see --help)");
    const figure *fig = NULL;
    for (size_t i = 0; i < N_FIGURES && !fig; i++)
        if (!strcmp(args[0], figures[i].name))
            fig = &figures[i];
    if (!fig)
        return cli_usage_error("plot", "no figure '%s' (see --help)", args[0]);
    ws_plot_req req = {.model = model, .gpu = gpu};
    if (run_arg && (rc = cli_opt_ll("plot", "--run", run_arg, 1, LLONG_MAX, &req.run)))
        return rc;
    if (grid_arg && (rc = cli_opt_ll("plot", "--grid", grid_arg, 1, LLONG_MAX, &req.grid)))
        return rc;
    if (live_arg) {
        if (!fig->live)
            return cli_usage_error("plot", "figure '%s' takes no --live run", fig->name);
        if (run_arg)
            return cli_usage_error("plot", "--run and --live name two runs: give one");
        if ((rc = cli_opt_ll("plot", "--live", live_arg, 0, LLONG_MAX, &req.live)))
            return rc;
    }
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
    if (ws_ensure_parent_dir(out, &err))
        return cli_fail(&err);
    ws_store *s;
    int embedded = 0; /* no database yet: the figures say there is nothing to draw */
    if (cli_open_store_ro(db, &s, &embedded, &err))
        return cli_fail(&err);
    char what[512];
    rc = (live_arg ? fig->live : fig->draw)(s, &req, what, sizeof what, &err);
    ws_store_close(s);
    if (rc)
        return cli_fail(&err);
    for (char *p = what; *p; p++) /* names from the database stay on one line */
        if ((unsigned char)*p < ' ')
            *p = ' ';
    printf("%s (%s)\n", out, what);
    return CLI_EXIT_OK;
}
