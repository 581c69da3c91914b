/* cmd_calib: `writescope calib [run|show|import|check|export|load]` -- parsing and printing.
 * A run measures this machine with the project's real kernels, fits the cost model's
 * roofline parameters and stores samples, fits and the machine's profile in the database
 * (calib/calib_run.h; one transaction per run: an interrupted run writes nothing); here
 * Ctrl-C becomes its stop flag and its progress a bar on stderr. `calib show` prints a
 * run's fits; `calib import` fits a GPU from operator profiles others measured
 * (calib/import.h); check, export and load are calib/calib_file.h and validate/oppoints.h. */
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib.h"
#include "calib_file.h"
#include "calib_run.h"
#include "cli.h"
#include "import.h"
#include "oppoints.h"
#include "opts.h"
#include "pool.h"
#include "ws_atomic.h"
#include "ws_util.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: writescope calib [run] [--quick] [--only cpu|gpu|link] [--threads N]\n"
            "                        [--db PATH] [--json]\n"
            "       writescope calib show [--run N] [--db PATH] [--json]\n"
            "       writescope calib import PATH... [--gpu NAME] [options]  (calib import --help)\n"
            "       writescope calib check PATH... [--gpu NAME] [options]   (calib check --help)\n"
            "       writescope calib export [N...] --out FILE [--db PATH]   (calib export --help)\n"
            "       writescope calib load FILE [--db PATH] [--json]\n"
            "\n"
            "run (default)  time the project's kernels on this machine: read bandwidth, triad,\n"
            "               the attention dot-product peak, CPU decode attention (GQA, MLA,\n"
            "               sparse MLA; bf16 and fp16; contexts 1K..1M tokens of one layer;\n"
            "               batch; 1 vs all threads), pinned vs pageable reads, attention\n"
            "               after the experts and beside a copy, the experts as the runtime\n"
            "               runs them; with a CUDA device also the GPU and PCIe link. Each\n"
            "               sample is the median of the fastest half of its round-robin\n"
            "               repeats; a reference read is timed between sweeps, and a run\n"
            "               that drifts (or is loaded from elsewhere most of the time) is\n"
            "               measured again, then stored flagged and not used. Fits\n"
            "               t = c0 + max(F/P, B/W) (transfers t = c0 + B/W) per (device, op,\n"
            "               dtype, attention kind) with GSL and stores samples, fits and the\n"
            "               profile host:<fingerprint> (gpu:<name>) in one transaction.\n"
            "show           the fits of run N (default: the newest) with standard errors, R^2,\n"
            "               the k-fold held-out MAPE, the samples' spread and the fallback the\n"
            "               cost model takes without the fit (a fit is used only when better)\n"
            "import         fit a GPU's parameters from operator profiles measured elsewhere\n"
            "check          a GPU profile's predictions against such operator profiles, or\n"
            "               against a calibration file's GPU and link samples\n"
            "export         runs' samples as a small calibration file (what a lent machine\n"
            "               measured, kept in the project: profiles/measured/)\n"
            "load           a calibration file into the database: its samples refitted and\n"
            "               stored as calibration runs, their profiles rebuilt\n");
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
    const double drift = json_number_value(json_object_get(r, "drift_pct"));
    if (json_is_number(json_object_get(r, "drift_pct")))
        printf(
            "probe     reference read %.1f GB/s (fastest half), drifted %.1f%% between the run's "
            "halves (bound %.0f%%)%s%s\n",
            json_number_value(json_object_get(r, "probe_gbps")), drift, WS_CALIB_DRIFT_PCT,
            json_is_true(json_object_get(r, "remeasured")) ? "; measured twice" : "",
            json_is_true(json_object_get(r, "flagged")) ? "; FLAGGED: no fit of it is used" : "");
    json_array_foreach(json_object_get(show, "measured"), k, m)
    {
        char v[32], key[256], unit[64], params[1024];
        printf("measured  %-22s %s  %s\n", TXT(m, "key", key),
               si(json_number_value(json_object_get(m, "value")), TXT(m, "unit", unit), v),
               TXT(m, "params", params));
    }
    json_array_foreach(json_object_get(show, "sources"), k, m)
    {
        char path[1200], sha[80], what[256], by[160], tool[128], gpu[256], dt[64], lic[256];
        printf("source    %s  %lld rows, %lld bytes, sha256 %s\n          %s; measured by %s "
               "with the %s on %s, %s; licence %s\n",
               TXT(m, "path", path), (long long)json_integer_value(json_object_get(m, "rows")),
               (long long)json_integer_value(json_object_get(m, "bytes")), TXT(m, "sha256", sha),
               TXT(m, "what", what), TXT(m, "measured_by", by), TXT(m, "tool", tool),
               TXT(m, "gpu", gpu), TXT(m, "dtype", dt), TXT(m, "licence", lic));
    }
    printf("%-34s %-9s %-18s %-24s %-24s %-7s %-8s %-7s %s\n", "key", "form", "c0 (fitted)",
           "P flop/s", "W bytes/s", "R^2", "held-out", "spread", "verdict");
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
        if (!strcmp(form, "saturating")) /* W: the keys per query at half the rate */
            snprintf(W, sizeof W, "half at %.0f keys",
                     json_number_value(json_object_get(f, "half_keys")));
        if (json_is_true(json_object_get(f, "p_fixed")))
            snprintf(P, sizeof P, "%s (measured)",
                     si(json_number_value(json_object_get(f, "peak_flops")), "", b));
        else
            snprintf(P, sizeof P, "%s +-%s",
                     si(json_number_value(json_object_get(f, "peak_flops")), "", b),
                     si(json_number_value(json_object_get(f, "peak_flops_se")), "", c));
        if (!strcmp(form, "saturating"))
            ;
        else if (json_is_true(json_object_get(f, "w_fixed")))
            snprintf(W, sizeof W, "%s (measured)",
                     si(json_number_value(json_object_get(f, "bandwidth")), "", d));
        else
            snprintf(W, sizeof W, "%s +-%s",
                     si(json_number_value(json_object_get(f, "bandwidth")), "", d),
                     si(json_number_value(json_object_get(f, "bandwidth_se")), "", c));
        const char *note = json_string_value(json_object_get(f, "note"));
        char spread[16] = "-";
        if (json_is_number(json_object_get(f, "spread_pct")))
            snprintf(spread, sizeof spread, "%5.1f%%",
                     json_number_value(json_object_get(f, "spread_pct")));
        printf("%-34s %-9s %-18s %-24s %-24s %-7.4f %6.2f%%  %-7s %s%s%s\n", TXT(f, "key", key),
               cli_text(form, form_t, sizeof form_t), C0, strcmp(form, "transfer") ? P : "-", W, r2,
               mape, spread,
               good ? (json_is_true(json_object_get(f, "compute_bound")) ? "good, compute bound"
                       : strcmp(form, "transfer")                        ? "good, memory bound"
                                                                         : "good")
                    : "POOR",
               note && *note ? ": " : "", note ? TXT(f, "note", fnote) : "");
        json_t *pc;
        size_t j;
        json_array_foreach(json_object_get(f, "pieces"), j, pc)
        {
            char pa[32], pb[32], pd[32];
            printf("%-34s %-9s %-18s %-24s %-24s up to %.3g flop/B\n", "", "  piece",
                   si(json_number_value(json_object_get(pc, "c0")), "s", pa),
                   si(json_number_value(json_object_get(pc, "peak_flops")), "", pb),
                   si(json_number_value(json_object_get(pc, "bandwidth")), "", pd),
                   json_number_value(json_object_get(pc, "upto")));
        }
        if (json_is_string(json_object_get(f, "fallback"))) {
            char fb[256];
            printf("%-34s fallback  %s: %.2f%% on these samples%s\n", "", TXT(f, "fallback", fb),
                   json_number_value(json_object_get(f, "fallback_mape_pct")),
                   note && strstr(note, "fallback used") ? " (used instead)" : "");
        }
    }
}

/* A run as ws_calib_show gives it: the JSON itself, or its table (show is consumed). */
static int print_show(json_t *show, int json)
{
    if (json)
        return cli_print_json(show);
    print_fits(show);
    json_decref(show);
    return CLI_EXIT_OK;
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
    return print_show(show, json);
}

static void on_notice(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "calib: %s\n", line);
}

static int calib_run(const calib_opts *c, int only_given)
{
    ws_calib_run_cfg cfg = {.quick = c->quick,
                            .threads = c->threads,
                            .stop = &g_stop,
                            .progress = show_progress,
                            .notice = on_notice};
    ws_err err = {0};
    if (ws_calib_run_devices(&cfg, only_given ? k_only[c->only] : NULL, &err))
        return cli_fail(&err);
    /* Open (and so validate) the database before spending minutes measuring. */
    ws_store *s;
    if (cli_open_store(c->db, &s, &err))
        return cli_fail(&err);
    bar b = {.tty = isatty(2), .t0 = ws_now_s()};
    cfg.progress_ctx = &b;
    /* Stopped by SIGINT/SIGTERM while measuring: the run ends cleanly and stores nothing. */
    struct sigaction sa = {0}, old[2];
    sa.sa_handler = on_signal;
    const int sigs[] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; i++)
        /* as in main: a signal ignored by whoever started us stays ignored */
        if (sigaction(sigs[i], NULL, &old[i]) == 0 && old[i].sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
    ws_calib_run_out out;
    int rc = ws_calib_run_exec(s, &cfg, &out, &err);
    for (int i = 0; i < 2; i++)
        sigaction(sigs[i], &old[i], NULL);
    if (rc) {
        if (b.tty && out.measured)
            fputc('\n', stderr);
        ws_store_close(s);
        cli_fail(&err);
        /* stopped by a signal: 128 + its number, the status a shell gives any command
         * that the signal ended */
        return rc == WS_ECANCELED && g_stop ? 128 + g_stop : CLI_EXIT_FAIL;
    }
    json_t *show = ws_calib_show(s, out.run_id, &err);
    ws_store_close(s);
    if (!show)
        return cli_fail(&err);
    fprintf(stderr, "calib: stored run %lld (%.0f s)\n", out.run_id, ws_now_s() - b.t0);
    return print_show(show, c->json);
}

/* ---- calib import ------------------------------------------------------------------------ */

static void usage_import(FILE *out)
{
    fprintf(out,
            "usage: writescope calib import PATH... [--gpu NAME] [--name NAME [--replace]]\n"
            "                               [--by TEXT] [--tool TEXT] [--dtype fp16|bf16|fp32]\n"
            "                               [--licence TEXT] [--db PATH] [--json]\n"
            "\n"
            "Fits the cost model's GPU parameters from operator profiles measured by others on a\n"
            "real GPU, in Vidur's CSV format (attention.csv, mlp_<model>.csv; a folder: its .csv\n"
            "files): decode attention (c0 + KV bytes / W), prefill attention (c0 + flops at a\n"
            "rate rising with the keys per query), the GEMMs at their per-GPU shapes\n"
            "(c0 + max(F/P, B/W)), RMSNorm, RoPE, the activation and the residual add\n"
            "(c0 + bytes / W), with GSL. Every 5th row of each operation of a file is held out:\n"
            "each fit reports its k-fold held-out MAPE and the held-out rows' MAPE, median and\n"
            "worst. A fit is used only when physical for the GPU: a fixed cost of at most\n"
            "1 s, a flop rate at most 1.5x the datasheet's peak at the precision, a bandwidth\n"
            "at most 1.5x its memory bandwidth (else NOT USED, with the bound it broke).\n"
            "Stores samples, fits and the files' provenance (path, SHA-256, who measured, the\n"
            "tool, the GPU, the precision, the licence) as a calibration run, and the profile\n"
            "imported:<gpu>, which the datasheet profile <gpu> picks up (`writescope db show\n"
            "<gpu>`) like any calibration of its device. --name writes another name instead;\n"
            "it may not be a profile of another kind, a datasheet profile or this machine's\n"
            "calibration, and replaces an earlier import's only with --replace. One\n"
            "transaction: a malformed file is one error naming the file and row, and nothing\n"
            "is written (a database this import created is removed).\n");
}

typedef struct import_opts {
    const char *db, *gpu, *name, *by, *tool, *dtype, *licence;
    int json, replace;
} import_opts;

static const cli_optdef k_import_opts[] = {
    {"gpu", CLI_STR(import_opts, gpu), .arg = "NAME", .def = "a100-80gb-sxm",
     .help = "the datasheet profile of the GPU that was measured (it must list the device); "
             "Vidur's profiles are of an A100 80GB"},
    {"name", CLI_STR(import_opts, name), .arg = "NAME",
     .help = "the profile to write (default: imported:<gpu>); not a datasheet profile, a "
             "host's or a calibration measured here"},
    {"replace", CLI_FLAG(import_opts, replace),
     .help = "--name may be an earlier import's GPU profile, replaced"},
    {"by", CLI_STR(import_opts, by), .arg = "TEXT", .def = "Vidur (microsoft/vidur)",
     .help = "who measured, for the provenance"},
    {"tool", CLI_STR(import_opts, tool), .arg = "TEXT",
     .help = "what measured (default: the files' profile_method, PyTorch Kineto profiler)"},
    {"dtype", CLI_STR(import_opts, dtype), .arg = "T", .def = "fp16",
     .help = "the precision the operators ran at"},
    {"licence", CLI_STR(import_opts, licence), .arg = "TEXT",
     .help = "the files' licence (default: read from a LICENSE file beside them)"},
    {"db", CLI_STR(import_opts, db), .arg = "PATH",
     .help = "the database (default: $WRITESCOPE_DB, else results/writescope.db)"},
    {"json", CLI_FLAG(import_opts, json), .help = "machine-readable output"},
    {0}};
static const cli_spec k_import = {"calib import", k_import_opts, CLI_POS_MAX, usage_import};

static json_t *jnum(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *import_json(const ws_import_result *r)
{
    json_t *o = json_object(), *fits = json_array();
    json_object_set_new(o, "run", json_integer(r->run_id));
    json_object_set_new(o, "profile", json_string(r->profile));
    json_object_set_new(o, "gpu", json_string(r->gpu));
    json_object_set_new(o, "device", json_string(r->device));
    json_object_set_new(o, "rows", json_integer(r->rows));
    json_object_set_new(o, "heldout_rows", json_integer(r->heldout));
    for (int i = 0; i < r->n_fits; i++) {
        const ws_import_fit *f = &r->fits[i];
        const int sat = f->r.form == WS_FIT_SATURATING;
        char key[128];
        ws_import_key_name(&f->key, key, sizeof key);
        json_t *x = json_object();
        json_object_set_new(x, "key", json_string(key));
        json_object_set_new(x, "form",
                            json_string(f->r.form == WS_FIT_TRANSFER ? "transfer"
                                        : sat                        ? "saturating"
                                                                     : "roofline"));
        json_object_set_new(x, "c0", jnum(f->r.c0));
        json_object_set_new(
            x, "peak_flops",
            jnum(f->r.form == WS_FIT_TRANSFER || f->per_row ? NAN : f->r.peak_flops));
        json_object_set_new(x, "row_bandwidth", jnum(f->per_row ? f->r.peak_flops : NAN));
        json_object_set_new(x, "bandwidth", jnum(sat ? NAN : f->r.bandwidth));
        json_object_set_new(x, "half_keys", jnum(sat ? f->r.factor : NAN));
        json_object_set_new(x, "r2", jnum(f->r.r2));
        json_object_set_new(x, "n_train", json_integer(f->n_train));
        json_object_set_new(x, "n_heldout", json_integer(f->n_heldout));
        json_object_set_new(x, "kfold_mape_pct", jnum(f->r.heldout_mape_pct));
        json_object_set_new(x, "heldout_mape_pct", jnum(f->ho_mape_pct));
        json_object_set_new(x, "heldout_median_pct", jnum(f->ho_median_pct));
        json_object_set_new(x, "heldout_worst_pct", jnum(f->ho_worst_pct));
        json_object_set_new(x, "good", json_boolean(f->r.good));
        json_object_set_new(x, "note", json_string(f->r.note));
        json_array_append_new(fits, x);
    }
    json_object_set_new(o, "sources", ws_calib_sources_json(r->files, r->n_files));
    json_object_set_new(o, "fits", fits);
    return o;
}

static void import_print(const ws_import_result *r)
{
    printf("calib import: run %lld, profile %s (%s; the datasheet profile %s uses it)\n", r->run_id,
           r->profile, r->device, r->gpu);
    for (int i = 0; i < r->n_files; i++) {
        const ws_calibdb_source *f = &r->files[i];
        char path[1200], what[256], lic[256];
        printf("source  %s: %d rows, sha256 %.16s..., %s\n        measured by %s with the %s, "
               "%s; licence %s\n",
               cli_text(f->path, path, sizeof path), f->rows, f->sha256,
               cli_text(f->what, what, sizeof what), f->measured_by, f->tool, f->dtype,
               cli_text(f->licence, lic, sizeof lic));
    }
    printf("%-26s %-10s %-9s %-12s %-13s %7s %7s | %-5s %7s %7s %7s  %s\n", "key", "form", "c0",
           "P flop/s*", "W B/s", "R^2", "k-fold", "held", "MAPE", "median", "worst", "verdict");
    for (int i = 0; i < r->n_fits; i++) {
        const ws_import_fit *f = &r->fits[i];
        char key[128], c0[32], P[32], W[48];
        ws_import_key_name(&f->key, key, sizeof key);
        const int sat = f->r.form == WS_FIT_SATURATING;
        snprintf(P, sizeof P, "%s%s", f->per_row ? "row " : "",
                 f->r.form == WS_FIT_TRANSFER ? "-" : si(f->r.peak_flops, "", c0));
        if (sat)
            snprintf(W, sizeof W, "half %.0f keys", f->r.factor);
        else
            snprintf(W, sizeof W, "%s", si(f->r.bandwidth, "", c0));
        snprintf(c0, sizeof c0, "%.2f us", f->r.c0 * 1e6);
        printf("%-26s %-10s %-9s %-12s %-13s %7.4f %6.1f%% | %5d %6.1f%% %6.1f%% %6.1f%%  %s%s%s\n",
               key,
               f->r.form == WS_FIT_TRANSFER ? "transfer"
               : sat                        ? "saturating"
                                            : "roofline",
               c0, P, W, f->r.r2, f->r.heldout_mape_pct, f->n_heldout, f->ho_mape_pct,
               f->ho_median_pct, f->ho_worst_pct, f->r.good ? "used" : "NOT USED",
               f->why[0] ? ": " : "", f->why);
    }
    printf("* an elementwise kernel's P is one row's bytes/s: c0 + max(B / W, B / rows / P)\n");
}

static int calib_import(int argc, char **argv)
{
    import_opts c = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_import, argc, argv, &c, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    if (a.npos < 1)
        return cli_usage_error("calib import", "give the profile files or a folder of them");
    if (c.replace && !c.name)
        return cli_usage_error("calib import", "--replace goes with --name");
    ws_err err = {0};
    ws_store *s;
    if (cli_open_store(c.db, &s, &err))
        return cli_fail(&err);
    /* Progress only on a terminal: to a file or a pipe, an error is the one line. */
    bar b = {.tty = isatty(2), .t0 = ws_now_s()};
    const ws_import_opts o = {.paths = (const char *const *)a.pos,
                              .n_paths = a.npos,
                              .gpu = c.gpu,
                              .name = c.name,
                              .by = c.by,
                              .tool = c.tool,
                              .dtype = c.dtype,
                              .licence = c.licence,
                              .replace = c.replace,
                              .progress = b.tty ? show_progress : NULL,
                              .progress_ctx = &b};
    ws_import_result *r = calloc(1, sizeof *r);
    if (!r) {
        ws_store_discard(s);
        return cli_fail(&(ws_err){.code = WS_ENOMEM, .msg = "out of memory"});
    }
    rc = ws_calib_import(s, &o, r, &err);
    if (rc)
        ws_store_discard(s); /* a database this import created goes with it */
    else
        ws_store_close(s);
    if (rc) {
        if (b.tty)
            fputc('\n', stderr);
        free(r);
        return cli_fail(&err);
    }
    if (c.json) {
        json_t *j = import_json(r);
        free(r);
        return cli_print_json(j);
    }
    import_print(r);
    free(r);
    return CLI_EXIT_OK;
}

/* ---- calib check ------------------------------------------------------------------------- */

static void usage_check(FILE *out)
{
    fprintf(
        out,
        "usage: writescope calib check PATH... [--gpu NAME] [--heldout] [--min-us T]\n"
        "                              [--dtype fp16|bf16|fp32] [--db PATH] [--json]\n"
        "       writescope calib check FILE.json --gpu NAME [--datasheet] [--db PATH] [--json]\n"
        "\n"
        "Predicts every operator row of profiles measured by others on a real GPU (Vidur's\n"
        "CSV format, as `calib import` reads them) with the cost model on GPU profile NAME\n"
        "as every command loads it (a datasheet name: the datasheet with its newest\n"
        "calibration over it), and prints the absolute percentage error per group\n"
        "(decode attention, prefill attention, GEMM, elementwise): rows, median, mean and\n"
        "worst (with its file line), and the median and worst over the rows measured at\n"
        "T us or longer. --heldout: only the rows `calib import` holds out (every 5th of\n"
        "each operation of a file, whatever else is read with it): the rows a calibration\n"
        "imported from these files never saw.\n"
        "\n"
        "With a calibration file (`calib export`, profiles/measured/): predicts its GPU and\n"
        "link samples (device copy, decode attention, GEMM, pinned H2D/D2H, H2D under CPU\n"
        "GEMMs) with the cost model's rooflines on profile NAME, and prints per operation the\n"
        "errors, their median sign (bias: < 0, the profile is optimistic) and the rate that\n"
        "decides them, the profile's against the one the samples fit: which figure is off\n"
        "and by how much. --datasheet: the profiles as shipped, whatever the database holds.\n");
}

typedef struct check_opts {
    const char *db, *gpu, *dtype;
    double min_us;
    int heldout, json, datasheet;
} check_opts;

static const cli_optdef k_check_opts[] = {
    {"gpu", CLI_STR(check_opts, gpu), .arg = "NAME", .def = "a100-80gb-sxm",
     .help = "the GPU profile to predict with"},
    {"heldout", CLI_FLAG(check_opts, heldout),
     .help = "only the held-out rows (those a calibration imported from the files never saw)"},
    {"min-us", CLI_DOUBLE(check_opts, min_us), .arg = "T", .lo = 0, .hi = 1e9, .def = "10",
     .help = "the bound of the long rows, microseconds measured"},
    {"dtype", CLI_STR(check_opts, dtype), .arg = "T", .def = "fp16",
     .help = "the precision the operators ran at"},
    {"db", CLI_STR(check_opts, db), .arg = "PATH",
     .help = "the database (default: $WRITESCOPE_DB, else results/writescope.db; the embedded "
             "datasheet profiles when there is none)"},
    {"datasheet", CLI_FLAG(check_opts, datasheet),
     .help = "calibration file: the shipped datasheet profiles, no calibration over them"},
    {"json", CLI_FLAG(check_opts, json), .help = "machine-readable output"},
    {0}};
static const cli_spec k_check = {"calib check", k_check_opts, CLI_POS_MAX, usage_check};

/* Row i as "attn_decode line 12" in buf, or NULL when there is none (i < 0). */
static const char *row_where(const ws_vidur_rows *rows, int i, char *buf, size_t cap)
{
    if (i < 0)
        return NULL;
    const ws_vidur_row *w = &rows->v[i];
    snprintf(buf, cap, "%s line %d", ws_vidur_op_name(w->op), w->line);
    return buf;
}

static int ends_with(const char *s, const char *tail)
{
    const size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

/* calib check FILE.json: the profile against a calibration file's GPU and link samples. */
static int check_file(const check_opts *c, const char *path)
{
    ws_err err = {0};
    ws_store *s;
    int embedded = c->datasheet;
    if (c->datasheet ? ws_store_open_embedded(&s, &err)
                     : cli_open_store_ro(c->db, &s, &embedded, &err))
        return cli_fail(&err);
    ws_calib_check k;
    int rc = ws_calib_file_check(s, path, c->gpu, &k, &err);
    ws_store_close(s);
    if (rc)
        return cli_fail(&err);
    json_t *o = json_object(), *ops = json_array();
    json_object_set_new(o, "file", json_string(path));
    json_object_set_new(o, "profile", json_string(k.profile));
    json_object_set_new(o, "datasheet", json_string(k.datasheet));
    json_object_set_new(o, "calibrated", json_string(k.calibrated));
    json_object_set_new(o, "skipped_samples", json_integer(k.skipped));
    if (!c->json)
        printf("calib check: %s against the samples of %s (%s%s%s)\n"
               "%-26s %3s %8s %8s %8s %8s  %-4s %14s %14s %9s  %s\n",
               k.profile, path, k.calibrated[0] ? "calibrated by " : "datasheet only", k.calibrated,
               embedded ? "; the embedded datasheet profiles" : "", "operation", "n", "median",
               "mean", "worst", "bias", "rate", "profile", "samples' fit", "profile/fit",
               "profile's figure from");
    for (int i = 0; i < k.n_op; i++) {
        const ws_calib_check_op *x = &k.op[i];
        const char *unit = x->rate[0] == 'P' ? "flop/s" : "B/s";
        char pr[32], fr[32], ratio[16] = "-";
        cli_si(x->profile_rate, unit, pr, sizeof pr);
        if (isfinite(x->fitted_rate) && x->fitted_rate > 0) {
            cli_si(x->fitted_rate, unit, fr, sizeof fr);
            snprintf(ratio, sizeof ratio, "%+.1f%%", 100 * (x->profile_rate / x->fitted_rate - 1));
        } else {
            snprintf(fr, sizeof fr, "(poor fit)");
        }
        if (!c->json)
            printf("%-26s %3d %7.1f%% %7.1f%% %7.1f%% %+7.1f%%  %-4s %14s %14s %9s  %s\n", x->key,
                   x->n, x->median_pct, x->mean_pct, x->worst_pct, x->bias_pct, x->rate, pr, fr,
                   ratio, x->profile_from);
        json_t *j = json_object();
        json_object_set_new(j, "key", json_string(x->key));
        json_object_set_new(j, "samples", json_integer(x->n));
        json_object_set_new(j, "median_pct", jnum(x->median_pct));
        json_object_set_new(j, "mean_pct", jnum(x->mean_pct));
        json_object_set_new(j, "worst_pct", jnum(x->worst_pct));
        json_object_set_new(j, "bias_pct", jnum(x->bias_pct));
        json_object_set_new(j, "rate", json_string(x->rate));
        json_object_set_new(j, "profile_rate", jnum(x->profile_rate));
        json_object_set_new(j, "fitted_rate", jnum(x->fitted_rate));
        json_object_set_new(j, "profile_from", json_string(x->profile_from));
        json_array_append_new(ops, j);
    }
    json_object_set_new(o, "operations", ops);
    if (c->json)
        return cli_print_json(o);
    if (k.skipped)
        printf("(%d samples of operations the cost model has no term for, e.g. pageable copies, "
               "not predicted)\n",
               k.skipped);
    json_decref(o);
    return CLI_EXIT_OK;
}

static int calib_check(int argc, char **argv)
{
    check_opts c = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_check, argc, argv, &c, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    if (a.npos < 1)
        return cli_usage_error("calib check", "give the profile files or a folder of them");
    if (a.npos == 1 && ends_with(a.pos[0], ".json")) {
        if (c.datasheet && c.db)
            return cli_usage_error("calib check", "--datasheet reads no database: drop --db");
        return check_file(&c, a.pos[0]);
    }
    if (c.datasheet)
        return cli_usage_error("calib check", "--datasheet goes with a calibration file (.json)");
    ws_err err = {0};
    ws_store *s;
    int embedded = 0;
    if (cli_open_store_ro(c.db, &s, &embedded, &err))
        return cli_fail(&err);
    ws_vidur_rows rows;
    ws_hw *hw = calloc(1, sizeof *hw);
    ws_oppoints op;
    rc = hw ? ws_oppoints_check(s, (const char *const *)a.pos, a.npos, c.gpu, c.dtype, c.heldout,
                                c.min_us * 1e-6, &rows, hw, &op, &err)
            : ws_err_set(&err, WS_ENOMEM, "out of memory");
    ws_store_close(s);
    if (rc) {
        free(hw);
        return cli_fail(&err);
    }
    json_t *o = json_object(), *groups = json_array();
    json_object_set_new(o, "gpu", json_string(c.gpu));
    json_object_set_new(o, "heldout_only", json_boolean(c.heldout));
    json_object_set_new(o, "min_us", json_real(c.min_us));
    if (!c.json)
        printf("calib check: profile %s%s, %s rows; |predicted - measured| / measured\n"
               "%-18s %6s %8s %8s %8s %8s %8s  %-28s | %6s %8s %8s (>= %g us)\n",
               c.gpu, embedded ? " (embedded datasheet profiles)" : "",
               c.heldout ? "held-out" : "all", "group", "rows", "median", "mean", "p90", "p95",
               "worst", "worst row", "rows", "median", "worst", c.min_us);
    for (int g = 0; g < WS_VIDUR_GROUPS; g++) {
        const ws_oppoint_stats *x = &op.group[g];
        char b1[96], b2[96];
        const char *w1 = row_where(&rows, x->worst_row, b1, sizeof b1),
                   *w2 = row_where(&rows, x->worst_long_row, b2, sizeof b2);
        if (!c.json && x->n)
            printf(
                "%-18s %6d %7.1f%% %7.1f%% %7.1f%% %7.1f%% %7.1f%%  %-28s | %6d %7.1f%% %7.1f%%  "
                "%s\n",
                ws_vidur_group_name(g), x->n, x->median_pct, x->mean_pct, x->p90_pct, x->p95_pct,
                x->worst_pct, w1 ? w1 : "-", x->n_long, x->median_long_pct, x->worst_long_pct,
                w2 ? w2 : "-");
        json_t *j = json_object();
        json_object_set_new(j, "group", json_string(ws_vidur_group_name(g)));
        json_object_set_new(j, "rows", json_integer(x->n));
        json_object_set_new(j, "median_pct", jnum(x->median_pct));
        json_object_set_new(j, "mean_pct", jnum(x->mean_pct));
        json_object_set_new(j, "p90_pct", jnum(x->p90_pct));
        json_object_set_new(j, "p95_pct", jnum(x->p95_pct));
        json_object_set_new(j, "worst_pct", jnum(x->worst_pct));
        json_object_set_new(j, "worst_row", w1 ? json_string(w1) : json_null());
        json_object_set_new(j, "long_rows", json_integer(x->n_long));
        json_object_set_new(j, "median_long_pct", jnum(x->median_long_pct));
        json_object_set_new(j, "worst_long_pct", jnum(x->worst_long_pct));
        json_object_set_new(j, "worst_long_row", w2 ? json_string(w2) : json_null());
        json_array_append_new(groups, j);
    }
    json_object_set_new(o, "groups", groups);
    ws_vidur_rows_free(&rows);
    free(hw);
    if (c.json)
        return cli_print_json(o);
    json_decref(o);
    return CLI_EXIT_OK;
}

/* ---- calib export / load (calib/calib_file.h) ------------------------------------------- */

static void usage_export(FILE *out)
{
    fprintf(out,
            "usage: writescope calib export [N...] --out FILE [--db PATH]\n"
            "       writescope calib load FILE [--db PATH] [--json]\n"
            "\n"
            "export writes calibration runs N... (default: the newest) as one JSON file of their\n"
            "samples and machines: a few kB, to keep in the project where a database is never\n"
            "committed (profiles/measured/). load reads such a file, refits its samples with\n"
            "this version's fits and stores each run with its profiles (host:<fingerprint>,\n"
            "gpu:<device>), so a datasheet profile of that device picks the fits up.\n");
}

typedef struct export_opts {
    const char *db, *out;
    int json;
} export_opts;

static const cli_optdef k_export_opts[] = {
    {"out", CLI_STR(export_opts, out), .arg = "FILE", .help = "export: the file to write"},
    {"db", CLI_STR(export_opts, db), .arg = "PATH",
     .help = "the database (default: $WRITESCOPE_DB, else results/writescope.db)"},
    {"json", CLI_FLAG(export_opts, json), .help = "load: machine-readable output"},
    {0}};
static const cli_spec k_export = {"calib export", k_export_opts, CLI_POS_MAX, usage_export};
static const cli_spec k_load = {"calib load", k_export_opts, 1, usage_export};

static int calib_export(int argc, char **argv)
{
    export_opts c = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_export, argc, argv, &c, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    if (!c.out)
        return cli_usage_error("calib export", "--out FILE is required");
    if (c.json)
        return cli_usage_error("calib export", "--json goes with 'calib load'");
    if (a.npos > WS_CALIB_FILE_MAX_RUNS)
        return cli_usage_error("calib export", "at most %d runs", WS_CALIB_FILE_MAX_RUNS);
    long long ids[WS_CALIB_FILE_MAX_RUNS] = {0};
    for (int i = 0; i < a.npos; i++) {
        char *end;
        ids[i] = strtoll(a.pos[i], &end, 10);
        if (*end || end == a.pos[i] || ids[i] <= 0)
            return cli_usage_error("calib export", "'%s' is not a run number", a.pos[i]);
    }
    ws_err err = {0};
    ws_store *s;
    if (cli_open_store_ro(c.db, &s, NULL, &err))
        return cli_fail(&err);
    json_t *doc = ws_calib_file_export(s, ids, a.npos ? a.npos : 1, &err);
    ws_store_close(s);
    if (!doc)
        return cli_fail(&err);
    ws_atomic_file af;
    rc = ws_atomic_open(&af, c.out, &err);
    if (!rc) {
        json_dumpf(doc, af.f, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
        fputc('\n', af.f);
        rc = ws_atomic_commit(&af, &err);
    }
    const size_t runs = json_array_size(json_object_get(doc, "runs"));
    json_decref(doc);
    if (rc)
        return cli_fail(&err);
    printf("calib export: %zu run%s written to %s\n", runs, runs == 1 ? "" : "s", c.out);
    return CLI_EXIT_OK;
}

static int calib_load(int argc, char **argv)
{
    export_opts c = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_load, argc, argv, &c, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    if (a.npos != 1)
        return cli_usage_error("calib load", "give one calibration file");
    if (c.out)
        return cli_usage_error("calib load", "--out goes with 'calib export'");
    ws_err err = {0};
    ws_store *s;
    if (cli_open_store(c.db, &s, &err))
        return cli_fail(&err);
    long long ids[WS_CALIB_FILE_MAX_RUNS];
    int n = 0;
    rc = ws_calib_file_load(s, a.pos[0], ids, WS_CALIB_FILE_MAX_RUNS, &n, &err);
    json_t *shown = json_array();
    for (int i = 0; !rc && i < n; i++) {
        json_t *v = ws_calib_show(s, ids[i], &err);
        if (!v)
            rc = err.code;
        else
            json_array_append_new(shown, v);
    }
    ws_store_close(s);
    if (rc) {
        json_decref(shown);
        return cli_fail(&err);
    }
    if (c.json) {
        json_t *o = json_object();
        json_object_set_new(o, "file", json_string(a.pos[0]));
        json_object_set_new(o, "runs", shown);
        return cli_print_json(o);
    }
    size_t i;
    json_t *v;
    json_array_foreach(shown, i, v)
    {
        json_t *r = json_object_get(v, "run"), *fits = json_object_get(v, "fits");
        printf("calib load: %s run %lld (%s, %s; %s%s%s): %zu fits, refitted from %lld samples\n",
               a.pos[0], (long long)json_integer_value(json_object_get(r, "id")),
               json_string_value(json_object_get(r, "mode")),
               json_string_value(json_object_get(r, "scope")),
               json_string_value(json_object_get(r, "cpu_model")),
               json_is_string(json_object_get(r, "gpu_name")) ? ", " : "",
               json_is_string(json_object_get(r, "gpu_name"))
                   ? json_string_value(json_object_get(r, "gpu_name"))
                   : "",
               json_array_size(fits), (long long)json_integer_value(json_object_get(r, "samples")));
        size_t j;
        json_t *f;
        json_array_foreach(fits, j, f)
        {
            const json_t *ho = json_object_get(f, "heldout_mape_pct");
            char h[32] = "-";
            if (json_is_number(ho))
                snprintf(h, sizeof h, "%.1f%%", json_number_value(ho));
            printf("  %-34s %-4s  held-out %s\n", json_string_value(json_object_get(f, "key")),
                   json_is_true(json_object_get(f, "good")) ? "good" : "POOR", h);
        }
    }
    json_decref(shown);
    return CLI_EXIT_OK;
}

int cmd_calib(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "check"))
        return calib_check(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "import"))
        return calib_import(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "export"))
        return calib_export(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "load"))
        return calib_load(argc - 1, argv + 1);
    calib_opts c = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_spec, argc, argv, &c, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    const char *sub = a.npos ? a.pos[0] : "run";
    if (!strcmp(sub, "show"))
        return calib_show(c.db, c.run, c.json);
    if (strcmp(sub, "run"))
        return cli_usage_error(
            "calib", "unknown subcommand '%s' (run, show, import, check, export or load)", sub);
    if (cli_given(&a, "run"))
        return cli_usage_error("calib", "--run goes with 'calib show'");
    return calib_run(&c, cli_given(&a, "only") > 0);
}
