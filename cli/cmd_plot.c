/* cmd_plot: `writescope plot calib` -- renders plots/calib.gp with gnuplot from the
 * database: measured samples and the fitted roofline per operation, PNG or SVG. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "cli.h"
#include "ws_parse.h"
#include "ws_util.h"

static void help(FILE *out)
{
    fprintf(out, "usage: writescope plot calib [--run N] [--db PATH] [--out FILE.png|FILE.svg]\n"
                 "\nDraws every fit of a calibration run (default: the newest): measured samples\n"
                 "with min-max bars and the fitted model, log-log time against bytes. Default\n"
                 "output: results/calib-run<N>.png. Needs gnuplot (installed by make deps).\n");
}

int cmd_plot(int argc, char **argv)
{
    int nargs = 0;
    const char *db = NULL, *run_arg = NULL, *out = NULL;
    const cli_opt opts[] = {{"db", &db, NULL}, {"run", &run_arg, NULL}, {"out", &out, NULL}, {0}};
    char *args[1];
    int rc = cli_parse("plot", argc, argv, opts, args, 1, &nargs, help);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    if (nargs == 0 || strcmp(args[0], "calib"))
        return cli_usage_error("plot", "what to plot: 'calib'");
    long long id = 0;
    if (run_arg && ws_parse_int64(run_arg, 1, LLONG_MAX, &id))
        return cli_usage_error("plot", "--run needs a positive run number, not '%s'", run_arg);
    ws_err err = {0};
    char root[WS_PATH_MAX], script[WS_PATH_MAX + 32], outbuf[WS_PATH_MAX + 64];
    if (ws_root_dir(root, sizeof root, &err))
        return cli_fail(&err);
    snprintf(script, sizeof script, "%s/plots/calib.gp", root);
    ws_store *s;
    if (cli_open_store_ro(db, &s, NULL, &err))
        return cli_fail(&err);
    json_t *show = ws_calib_show(s, id, &err);
    if (!show) {
        ws_store_close(s);
        return cli_fail(&err);
    }
    id = json_integer_value(json_object_get(json_object_get(show, "run"), "id"));
    json_decref(show);
    if (!out) {
        snprintf(outbuf, sizeof outbuf, "%s/results/calib-run%lld.png", root, id);
        out = outbuf;
    }
    int n = 0;
    rc = ws_calib_plot(s, id, script, out, &n, &err);
    ws_store_close(s);
    if (rc)
        return cli_fail(&err);
    printf("%s (%d panels, run %lld)\n", out, n, id);
    return CLI_EXIT_OK;
}
