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
#include "opts.h"
#include "pool.h"
#include "ws_util.h"

static void usage(FILE *out)
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
            "show           the fits of run N (default: the newest) with standard errors, R^2\n"
            "               and the k-fold held-out MAPE; a poor fit is marked, not used\n");
}

#define CALIB_STR_(x) #x
#define CALIB_STR(x) CALIB_STR_(x)

static const char *const k_only[] = {"cpu", "gpu", "link", NULL};

typedef struct calib_opts {
    const char *db;
    int quick, only, threads, json;
    long long run;
} calib_opts;

static const cli_optdef k_opts[] = {
    {"quick", CLI_FLAG(calib_opts, quick),
     .help = "run: a coarse sweep (under a minute on 2 cores); the default sweep takes under "
             "10 minutes"},
    {"only", CLI_ENUM(calib_opts, only), .names = k_only, .err = "--only must be cpu, gpu or link",
     .help = "run: one device or the link (default: cpu, plus gpu and link when a device "
             "exists)"},
    {"threads", CLI_INT(calib_opts, threads), .arg = "N", .lo = 1, .hi = WS_POOL_MAX_THREADS,
     .err = "--threads must be an integer in 1.." CALIB_STR(WS_POOL_MAX_THREADS) " (got '%s')",
     .help = "run: worker threads for the CPU kernels (default: all logical CPUs)"},
    {"run", CLI_LL(calib_opts, run), .arg = "N", .lo = 1, .hi = LLONG_MAX,
     .err = "--run needs a positive run number, not '%s'",
     .help = "show: the run (default: the newest)"},
    {"db", CLI_STR(calib_opts, db), .arg = "PATH",
     .help = "the database (default: $WRITESCOPE_DB, else results/writescope.db)"},
    {"json", CLI_FLAG(calib_opts, json), .help = "machine-readable output"},
    {0}};
static const cli_spec k_spec = {"calib", k_opts, 1, usage};

static volatile sig_atomic_t g_stop; /* the signal that asked to stop (0: none) */
static void on_signal(int sig)
{
    g_stop = sig;
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

/* Strings from the database pass through cli_text: a stored name cannot drive the terminal. */
#define TXT(o, k, buf) cli_text(json_string_value(json_object_get((o), (k))), (buf), sizeof(buf))

static void print_fits(json_t *show)
{
    size_t k;
    json_t *m;
    json_t *r = json_object_get(show, "run");
    char at[64], mode[64], scope[64], host[256], cpu[256], note[1024];
    printf("run %lld  %s  %s, %s  host %s (%s, %lld CPUs)  %lld samples\n",
           (long long)json_integer_value(json_object_get(r, "id")), TXT(r, "started_at", at),
           TXT(r, "mode", mode), TXT(r, "scope", scope), TXT(r, "host", host),
           TXT(r, "cpu_model", cpu), (long long)json_integer_value(json_object_get(r, "cpu_cores")),
           (long long)json_integer_value(json_object_get(r, "samples")));
    const char *run_note = json_string_value(json_object_get(r, "note"));
    if (run_note && *run_note)
        printf("note      %s\n", TXT(r, "note", note));
    json_array_foreach(json_object_get(show, "measured"), k, m)
    {
        char v[32], key[256], unit[64], params[1024];
        printf("measured  %-22s %s  %s\n", TXT(m, "key", key),
               si(json_number_value(json_object_get(m, "value")), TXT(m, "unit", unit), v),
               TXT(m, "params", params));
    }
    printf("%-34s %-8s %-18s %-24s %-24s %-7s %-8s %s\n", "key", "form", "c0 (fitted)",
           "P flop/s", "W bytes/s", "R^2", "held-out", "verdict");
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(show, "fits"), i, f)
    {
        char a[32], b[32], c[32], d[32], P[64], W[64], C0[64], key[256], form_t[64], fnote[1024];
        const char *form = json_string_value(json_object_get(f, "form"));
        if (!form)
            form = "";
        double r2 = json_number_value(json_object_get(f, "r2"));
        double mape = json_number_value(json_object_get(f, "heldout_mape_pct"));
        int good = json_is_true(json_object_get(f, "good"));
        if (!strcmp(form, "factor")) {
            printf("%-34s %-8s factor %.3f +- %.3f (measured ratio)  %s\n", TXT(f, "key", key),
                   cli_text(form, form_t, sizeof form_t),
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
        printf("%-34s %-8s %-18s %-24s %-24s %-7.4f %6.2f%%  %s%s%s\n", TXT(f, "key", key),
               cli_text(form, form_t, sizeof form_t), C0, strcmp(form, "transfer") ? P : "-", W, r2,
               mape,
               good ? (json_is_true(json_object_get(f, "compute_bound")) ? "good, compute bound"
                       : strcmp(form, "transfer")                        ? "good, memory bound"
                                                                         : "good")
                    : "POOR",
               note && *note ? ": " : "", note ? TXT(f, "note", fnote) : "");
    }
}

static int calib_show(const char *db, long long id, int json)
{
    ws_err err = {0};
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

/* What --only (c->only, when given) asks for, on this machine's devices; derr says why
 * there is no GPU. */
static int calib_devices(const calib_opts *c, int only_given, ws_calib_opts *o, int *has_gpu,
                         ws_err *derr)
{
    const ws_backend *cuda = ws_backend_cuda(derr);
    *has_gpu = cuda && cuda->device_count(derr) > 0;
    if (!only_given) {
        o->do_cpu = 1;
        o->do_gpu = o->do_link = *has_gpu;
        return 0;
    }
    const char *only = k_only[c->only];
    if (!strcmp(only, "cpu")) {
        o->do_cpu = 1;
        return 0;
    }
    if (!*has_gpu) {
        ws_err err;
        ws_err_set(&err, WS_EDEVICE, "--only %s: no CUDA device (%s); nothing to calibrate", only,
                   derr->msg[0] ? derr->msg : "none found");
        return cli_fail(&err);
    }
    o->do_gpu = !strcmp(only, "gpu");
    o->do_link = !strcmp(only, "link");
    return 0;
}

/* Measures, fits and stores into s (closed here); *id is the stored run. */
static int calib_measure(ws_store *s, ws_calib_opts *o, ws_calib_run *run, bar *b, long long *id,
                         ws_err *err)
{
    o->progress = show_progress;
    o->progress_ctx = b;
    struct sigaction sa = {0}, old_int, old_term;
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    int rc = ws_calib_measure(o, run, err);
    if (!rc)
        rc = ws_calib_fit_all(run, err);
    ws_utc_now(run->finished_at, sizeof run->finished_at);
    /* A Ctrl-C that lands during the commit is held until it is done: the run is stored
     * whole, and then it is not "interrupted". */
    if (!rc && !g_stop)
        rc = ws_calib_store(s, run, id, err);
    else if (!rc)
        rc = ws_err_set(err, WS_ECANCELED, "calibration interrupted; nothing was written");
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return rc;
}

static int calib_run(const calib_opts *c, int only_given)
{
    ws_calib_opts o = {.quick = c->quick, .threads = c->threads, .stop = &g_stop};
    ws_err err = {0}, derr = {0};
    int has_gpu, rc;
    if ((rc = calib_devices(c, only_given, &o, &has_gpu, &derr)))
        return rc;
    /* Open (and so validate) the database before spending minutes measuring. */
    ws_store *s;
    if (cli_open_store(c->db, &s, &err))
        return cli_fail(&err);
    ws_isa isa;
    ws_calib_run run;
    ws_calib_run_init(&run);
    if ((rc = ws_isa_resolve(WS_ISA_AUTO, &isa, &err)) ||
        (rc = ws_host_fp_detect(ws_isa_name(isa), &run.host, &err))) {
        ws_store_close(s);
        return cli_fail(&err);
    }
    snprintf(run.mode, sizeof run.mode, "%s", c->quick ? "quick" : "default");
    snprintf(run.scope, sizeof run.scope, "%s", only_given ? k_only[c->only] : "all");
    if (!only_given && !has_gpu) {
        snprintf(run.note, sizeof run.note, "CPU only: %.200s",
                 derr.msg[0] ? derr.msg : "no CUDA device");
        fprintf(stderr, "calib: no CUDA device (%s): calibrating the CPU only\n",
                derr.msg[0] ? derr.msg : "none found");
    }
    ws_utc_now(run.started_at, sizeof run.started_at);
    bar b = {.tty = isatty(2), .t0 = ws_now_s()};
    long long id = 0;
    rc = calib_measure(s, &o, &run, &b, &id, &err);
    ws_calib_run_free(&run);
    if (rc) {
        if (b.tty)
            fputc('\n', stderr);
        ws_store_close(s);
        cli_fail(&err);
        /* stopped by a signal: 128 + its number, the status a shell gives any command
         * that the signal ended */
        return rc == WS_ECANCELED && g_stop ? 128 + g_stop : CLI_EXIT_FAIL;
    }
    json_t *show = ws_calib_show(s, id, &err);
    ws_store_close(s);
    if (!show)
        return cli_fail(&err);
    fprintf(stderr, "calib: stored run %lld (%.0f s)\n", id, ws_now_s() - b.t0);
    if (c->json)
        return cli_print_json(show);
    print_fits(show);
    json_decref(show);
    return CLI_EXIT_OK;
}

int cmd_calib(int argc, char **argv)
{
    calib_opts c = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_spec, argc, argv, &c, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    const char *sub = a.npos ? a.pos[0] : "run";
    if (!strcmp(sub, "show"))
        return calib_show(c.db, c.run, c.json);
    if (strcmp(sub, "run"))
        return cli_usage_error("calib", "unknown subcommand '%s' (run or show)", sub);
    if (cli_given(&a, "run"))
        return cli_usage_error("calib", "--run goes with 'calib show'");
    return calib_run(&c, cli_given(&a, "only") > 0);
}
