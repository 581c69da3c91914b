/* cmd_calib: `writescope calib [run|show]` -- measure this machine with the project's real
 * kernels, fit the cost model's roofline parameters and store samples, fits and the
 * machine's profile in the database (one transaction per run: an interrupted run writes
 * nothing). `calib show` prints a run's fits. */
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn_cpu.h"
#include "backend.h"
#include "calib.h"
#include "cli.h"
#include "measure.h"
#include "pool.h"
#include "ws_parse.h"
#include "ws_util.h"

static void help(FILE *out)
{
    fprintf(out,
            "usage: writescope calib [run] [--quick] [--only cpu|gpu|link] [--threads N]\n"
            "                        [--db PATH] [--json]\n"
            "       writescope calib show [--run N] [--db PATH] [--json]\n"
            "\n"
            "run (default)  time the project's kernels on this machine: read bandwidth, triad,\n"
            "               the attention dot-product peak, CPU decode attention (GQA, MLA,\n"
            "               sparse MLA; bf16 and fp16; contexts 1K..1M tokens of one layer;\n"
            "               batch; 1 vs all threads), pinned vs pageable reads, expert GEMMs;\n"
            "               with a CUDA device also the GPU and PCIe link. Fits\n"
            "               t = c0 + max(F/P, B/W) (transfers t = c0 + B/W) per (device, op,\n"
            "               dtype, attention kind) with GSL and stores samples, fits and the\n"
            "               profile host:<fingerprint> (gpu:<name>) in one transaction.\n"
            "  --quick      coarse sweep (under a minute on 2 cores); default under 10 minutes\n"
            "  --only       cpu, gpu or link (default: cpu, plus gpu and link when a device exists)\n"
            "  --threads    worker threads for the CPU kernels (default: all logical CPUs)\n"
            "show           the fits of run N (default: the newest) with standard errors, R^2\n"
            "               and the k-fold held-out MAPE; a poor fit is marked, not used\n"
            "--db defaults to $WRITESCOPE_DB, else results/writescope.db.\n");
}

static volatile sig_atomic_t g_stop;
static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

typedef struct bar {
    int tty;
    char last[96];
    double t0;
} bar;

/* Progress on stderr: a redrawn bar on a terminal, one line per new phase otherwise. */
static void show_progress(void *ctx, double frac, const char *what)
{
    bar *b = ctx;
    if (b->tty) {
        int w = 30, fill = (int)(frac * w + 0.5);
        fprintf(stderr, "\rcalib [%.*s%*s] %3.0f%% %5.0fs  %-48.48s", fill,
                "##############################", w - fill, "", 100 * frac, ws_now_s() - b->t0,
                what);
        if (frac >= 1.0)
            fputc('\n', stderr);
    } else {
        /* Phase = the label up to its first digit (e.g. "attn gqa bf16 ctx "). */
        char phase[96];
        size_t n = strcspn(what, "0123456789");
        snprintf(phase, sizeof phase, "%.*s", (int)n, what);
        if (strcmp(phase, b->last)) {
            fprintf(stderr, "calib: %3.0f%% %5.0fs %s\n", 100 * frac, ws_now_s() - b->t0, what);
            snprintf(b->last, sizeof b->last, "%s", phase);
        }
    }
    fflush(stderr);
}

static const char *si(double v, const char *unit, char *buf)
{
    if (!isfinite(v) || v == 0)
        return "-";
    return cli_si(v, unit, buf, 32);
}

static void print_fits(json_t *show)
{
    size_t k;
    json_t *m;
    json_t *r = json_object_get(show, "run");
    printf("run %lld  %s  %s, %s  host %s (%s, %lld CPUs)  %lld samples\n",
           (long long)json_integer_value(json_object_get(r, "id")),
           json_string_value(json_object_get(r, "started_at")),
           json_string_value(json_object_get(r, "mode")),
           json_string_value(json_object_get(r, "scope")),
           json_string_value(json_object_get(r, "host")),
           json_string_value(json_object_get(r, "cpu_model")),
           (long long)json_integer_value(json_object_get(r, "cpu_cores")),
           (long long)json_integer_value(json_object_get(r, "samples")));
    const char *run_note = json_string_value(json_object_get(r, "note"));
    if (run_note && *run_note)
        printf("note      %s\n", run_note);
    json_array_foreach(json_object_get(show, "measured"), k, m)
    {
        char v[32];
        printf("measured  %-22s %s  %s\n", json_string_value(json_object_get(m, "key")),
               si(json_number_value(json_object_get(m, "value")),
                  json_string_value(json_object_get(m, "unit")), v),
               json_string_value(json_object_get(m, "params")));
    }
    printf("%-34s %-8s %-18s %-24s %-24s %-7s %-8s %s\n", "key", "form", "c0 (fitted)",
           "P flop/s", "W bytes/s", "R^2", "held-out", "verdict");
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(show, "fits"), i, f)
    {
        char a[32], b[32], c[32], d[32], P[64], W[64], C0[64];
        const char *form = json_string_value(json_object_get(f, "form"));
        double r2 = json_number_value(json_object_get(f, "r2"));
        double mape = json_number_value(json_object_get(f, "heldout_mape_pct"));
        int good = json_is_true(json_object_get(f, "good"));
        if (!strcmp(form, "factor")) {
            printf("%-34s %-8s factor %.3f +- %.3f (measured ratio)  %s\n",
                   json_string_value(json_object_get(f, "key")), form,
                   json_number_value(json_object_get(f, "factor")),
                   json_number_value(json_object_get(f, "factor_se")), good ? "good" : "poor");
            continue;
        }
        snprintf(C0, sizeof C0, "%s", si(json_number_value(json_object_get(f, "c0")), "s", a));
        if (json_is_true(json_object_get(f, "p_fixed")))
            snprintf(P, sizeof P, "%s (measured)", si(json_number_value(json_object_get(f, "peak_flops")), "", b));
        else
            snprintf(P, sizeof P, "%s +-%s", si(json_number_value(json_object_get(f, "peak_flops")), "", b),
                     si(json_number_value(json_object_get(f, "peak_flops_se")), "", c));
        if (json_is_true(json_object_get(f, "w_fixed")))
            snprintf(W, sizeof W, "%s (measured)", si(json_number_value(json_object_get(f, "bandwidth")), "", d));
        else
            snprintf(W, sizeof W, "%s +-%s", si(json_number_value(json_object_get(f, "bandwidth")), "", d),
                     si(json_number_value(json_object_get(f, "bandwidth_se")), "", c));
        const char *note = json_string_value(json_object_get(f, "note"));
        printf("%-34s %-8s %-18s %-24s %-24s %-7.4f %6.2f%%  %s%s%s\n",
               json_string_value(json_object_get(f, "key")), form, C0,
               strcmp(form, "transfer") ? P : "-", W, r2, mape,
               good ? (json_is_true(json_object_get(f, "compute_bound")) ? "good, compute bound"
                       : strcmp(form, "transfer") ? "good, memory bound" : "good")
                    : "POOR",
               note && *note ? ": " : "", note ? note : "");
    }
}

static int calib_show(const char *db, const char *run_arg, int json)
{
    ws_err err = {0};
    long long id = 0;
    if (run_arg && ws_parse_int64(run_arg, 1, LLONG_MAX, &id))
        return cli_usage_error("calib", "--run needs a positive run number, not '%s'", run_arg);
    ws_store *s;
    if (cli_open_store_ro(db, &s, NULL, &err))
        return cli_fail(&err);
    json_t *show = ws_calib_show(s, id, &err);
    ws_store_close(s);
    if (!show)
        return cli_fail(&err);
    if (json)
        return cli_print_json(show);
    print_fits(show);
    json_decref(show);
    return CLI_EXIT_OK;
}

int cmd_calib(int argc, char **argv)
{
    int json = 0, quick = 0, nargs = 0;
    const char *db = NULL, *only = NULL, *threads_s = NULL, *run_arg = NULL;
    const cli_opt opts[] = {{"json", NULL, &json},        {"quick", NULL, &quick},
                            {"db", &db, NULL},            {"only", &only, NULL},
                            {"threads", &threads_s, NULL}, {"run", &run_arg, NULL},
                            {0}};
    char *args[1];
    int rc = cli_parse("calib", argc, argv, opts, args, 1, &nargs, help);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    const char *sub = nargs ? args[0] : "run";
    if (!strcmp(sub, "show"))
        return calib_show(db, run_arg, json);
    if (strcmp(sub, "run"))
        return cli_usage_error("calib", "unknown subcommand '%s' (run or show)", sub);
    if (run_arg)
        return cli_usage_error("calib", "--run goes with 'calib show'");

    ws_calib_opts o = {.quick = quick, .stop = &g_stop};
    if (threads_s) {
        long long t;
        if (ws_parse_int64(threads_s, 1, WS_POOL_MAX_THREADS, &t))
            return cli_usage_error("calib", "--threads must be an integer in 1..%d (got '%s')",
                                   WS_POOL_MAX_THREADS, threads_s);
        o.threads = (int)t;
    }
    ws_err err = {0}, derr = {0};
    const ws_backend *cuda = ws_backend_cuda(&derr);
    int has_gpu = cuda && cuda->device_count(&derr) > 0;
    if (!only) {
        o.do_cpu = 1;
        o.do_gpu = o.do_link = has_gpu;
    } else if (!strcmp(only, "cpu")) {
        o.do_cpu = 1;
    } else if (!strcmp(only, "gpu") || !strcmp(only, "link")) {
        if (!has_gpu) {
            ws_err_set(&err, WS_EDEVICE, "--only %s: no CUDA device (%s); nothing to calibrate",
                       only, derr.msg[0] ? derr.msg : "none found");
            return cli_fail(&err);
        }
        o.do_gpu = !strcmp(only, "gpu");
        o.do_link = !strcmp(only, "link");
    } else {
        return cli_usage_error("calib", "--only must be cpu, gpu or link");
    }

    /* Open (and so validate) the database before spending minutes measuring. */
    ws_store *s;
    if (cli_open_store(db, &s, &err))
        return cli_fail(&err);
    ws_isa isa;
    ws_calib_run run;
    ws_calib_run_init(&run);
    if ((rc = ws_isa_resolve(WS_ISA_AUTO, &isa, &err)) ||
        (rc = ws_host_fp_detect(ws_isa_name(isa), &run.host, &err))) {
        ws_store_close(s);
        return cli_fail(&err);
    }
    snprintf(run.mode, sizeof run.mode, "%s", quick ? "quick" : "default");
    snprintf(run.scope, sizeof run.scope, "%s", only ? only : "all");
    if (!only && !has_gpu)
        snprintf(run.note, sizeof run.note, "CPU only: %.200s", derr.msg[0] ? derr.msg : "no CUDA device");
    if (!only && !has_gpu)
        fprintf(stderr, "calib: no CUDA device (%s): calibrating the CPU only\n",
                derr.msg[0] ? derr.msg : "none found");
    ws_utc_now(run.started_at, sizeof run.started_at);

    bar b = {.tty = isatty(2), .t0 = ws_now_s()};
    o.progress = show_progress;
    o.progress_ctx = &b;
    struct sigaction sa = {0}, old_int, old_term;
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    rc = ws_calib_measure(&o, &run, &err);
    if (!rc)
        rc = ws_calib_fit_all(&run, &err);
    ws_utc_now(run.finished_at, sizeof run.finished_at);
    long long id = 0;
    /* A Ctrl-C that lands during the commit is held until it is done: the run is stored
     * whole, and then it is not "interrupted". */
    if (!rc && !g_stop)
        rc = ws_calib_store(s, &run, &id, &err);
    else if (!rc)
        rc = ws_err_set(&err, WS_ECANCELED, "calibration interrupted; nothing was written");
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    ws_calib_run_free(&run);
    if (rc) {
        if (b.tty)
            fputc('\n', stderr);
        ws_store_close(s);
        cli_fail(&err);
        return rc == WS_ECANCELED ? 130 : CLI_EXIT_FAIL;
    }
    json_t *show = ws_calib_show(s, id, &err);
    ws_store_close(s);
    if (!show)
        return cli_fail(&err);
    fprintf(stderr, "calib: stored run %lld (%.0f s)\n", id, ws_now_s() - b.t0);
    if (json)
        return cli_print_json(show);
    print_fits(show);
    json_decref(show);
    return CLI_EXIT_OK;
}
