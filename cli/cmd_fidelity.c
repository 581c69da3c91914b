/* cmd_fidelity: `writescope fidelity` -- the simulator against measurements others
 * published (validate/fidelity.h): each point's published and predicted figure, their
 * ratio or the knob the model lacks, and per group the median and worst absolute error and
 * the host time its simulations took. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "fidelity.h"
#include "server.h"
#include "opts.h"
#include "store.h"
#include "ws_util.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: writescope fidelity [--points FILE] [--db PATH] [--group G]\n"
            "           [--ops DIR [--ops-gpu PROFILE] [--heldout] | --no-ops] [--json]\n"
            "\nRuns the simulator (MODELED) on every published point (fidelity/README.md):\n"
            "end-to-end points (fidelity/e2e.json: decode tok/s, TPOT, TTFT, prefill tok/s\n"
            "of MoE models on one GPU, with and without CPU offload, each a closed batch) on\n"
            "the closest setup it can express, and serving points (fidelity/serving.json:\n"
            "latency statistics and throughputs of an engine under a published load: all\n"
            "requests at once, Poisson arrivals, or a closed loop of clients), each under\n"
            "its engine's file (engines/). Prints predicted, published and their ratio, or\n"
            "the knob it lacks, or BAD and why a point cannot run as written (the others\n"
            "still run). The summary gives the median and worst |ratio - 1| per group\n"
            "(the offload points also all together, 'offload, all', and per engine file,\n"
            "'offload @ENGINE') and the host time its simulations took. Operator points: every kernel of public\n"
            "A100 profiles (Vidur's Kineto CSVs) predicted by the cost model on --ops-gpu.\n"
            "Profiles come from --db (else the default database, else the embedded datasheet\n"
            "profiles).\n");
}

typedef struct fid_opts {
    const char *points, *db, *group, *ops, *ops_gpu, *engine;
    int json, heldout, no_ops;
} fid_opts;

static const cli_optdef k_opts[] = {
    {"points", CLI_STR(fid_opts, points), .arg = "FILE",
     .help = "the points, end-to-end or serving (default: fidelity/e2e.json and "
             "fidelity/serving.json in the project folder)"},
    {"db", CLI_STR(fid_opts, db), .arg = "PATH",
     .help = "database with the profiles (default: the default database)"},
    {"group", CLI_STR(fid_opts, group), .arg = "G",
     .help = "only points of this group (e2e gpu-only, e2e offload, e2e quantized, serving, "
             "op GEMM, ...)"},
    {"ops", CLI_STR(fid_opts, ops), .arg = "DIR",
     .help = "operator profiles in Vidur's CSV format (default: ../shared/profiling/vidur-a100 "
             "beside the project folder, when it is there)"},
    {"ops-gpu", CLI_STR(fid_opts, ops_gpu), .arg = "PROFILE", .def = "a100-80gb-sxm",
     .help = "the GPU profile the operator rows are predicted on (with its newest "
             "calibration, e.g. a `calib import` of the same files)"},
    {"heldout", CLI_FLAG(fid_opts, heldout),
     .help = "operator points: only the rows a `calib import` of the same files never saw"},
    {"no-ops", CLI_FLAG(fid_opts, no_ops), .help = "end-to-end points only"},
    {"engine", CLI_STR(fid_opts, engine), .arg = "NAME",
     .help = "run every end-to-end and serving point under this engine (engines/NAME.json) "
             "instead of its own: what the same setups would give served by another engine"},
    {"json", CLI_FLAG(fid_opts, json), .help = "machine-readable output"},
    {0}};
static const cli_spec k_spec = {"fidelity", k_opts, 0, usage};

static void on_progress(void *ctx, size_t done, size_t n)
{
    cli_progress_line(ctx, done == n, "fidelity: %zu of %zu points simulated", done, n);
}

static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *point_json(const ws_fid_point *p)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(p->id));
    json_object_set_new(o, "kind", json_string(p->kind));
    json_object_set_new(o, "group", json_string(p->group));
    json_object_set_new(o, "engine", json_string(p->engine));
    json_object_set_new(o, "engine_version",
                        *p->engine_version ? json_string(p->engine_version) : json_null());
    json_object_set_new(o, "engine_file",
                        *p->engine_file ? json_string(p->engine_file) : json_null());
    json_object_set_new(o, "source", json_string(p->source));
    json_object_set_new(o, "url", json_string(p->url));
    json_object_set_new(o, "hardware", json_string(p->hw_desc));
    json_object_set_new(o, "gpu", json_string(p->gpu));
    json_object_set_new(o, "host", json_string(p->host));
    json_object_set_new(o, "model", json_string(p->model));
    json_object_set_new(o, "metric", json_string(p->metric));
    json_object_set_new(o, "stat", *p->stat ? json_string(p->stat) : json_null());
    json_object_set_new(o, "offload", json_boolean(p->offload));
    json_object_set_new(o, "quantized", json_boolean(p->quantized));
    if (!strcmp(p->kind, "serving")) {
        const ws_fid_workload *l = &p->load;
        json_t *w = json_object();
        json_object_set_new(w, "arrival", json_string(l->arrival));
        json_object_set_new(w, "rate_rps", num_or_null(l->rate_rps));
        json_object_set_new(w, "concurrency",
                            l->concurrency ? json_integer(l->concurrency) : json_null());
        json_object_set_new(w, "num_requests", json_integer(l->requests));
        json_object_set_new(w, "lengths", json_string(l->lengths));
        json_object_set_new(o, "workload", w);
    }
    json_object_set_new(o, "batch", p->batch ? json_integer(p->batch) : json_null());
    json_object_set_new(o, "prompt", p->prompt < 0 ? json_null() : json_integer(p->prompt));
    json_object_set_new(o, "output", json_integer(p->output));
    json_object_set_new(o, "policy", *p->policy ? json_string(p->policy) : json_null());
    json_object_set_new(o, "published", json_real(p->published));
    json_object_set_new(o, "predicted", num_or_null(p->predicted));
    json_object_set_new(o, "ratio", num_or_null(p->ratio));
    json_object_set_new(o, "missing", *p->missing ? json_string(p->missing) : json_null());
    json_object_set_new(o, "bad", *p->bad ? json_string(p->bad) : json_null());
    json_object_set_new(o, "assumed", *p->assumed ? json_string(p->assumed) : json_null());
    if (strcmp(p->kind, "op"))
        json_object_set_new(o, "wall_s", json_real(p->wall_s));
    return o;
}

/* One point as a line of the "points" array (a report may hold a million operator points:
 * each is made, written and freed in turn); 0, or -1 when out of memory. */
static int put_point(const ws_fid_point *p, int first)
{
    json_t *o = point_json(p);
    char *t = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10))
                : NULL;
    json_decref(o);
    if (!t)
        return -1;
    printf("%s\n    %s", first ? "" : ",", t);
    free(t);
    return 0;
}

static int print_json(const ws_fid_report *r)
{
    json_t *gs = json_array();
    printf("{\n  \"source\": \"modeled\",\n  \"points\": [");
    int rc = 0;
    for (size_t i = 0; i < r->n && !rc; i++)
        rc = put_point(&r->pt[i], i == 0);
    for (size_t i = 0; i < r->n_op && !rc; i++) {
        ws_fid_point p;
        ws_fidelity_op_point(r, i, &p);
        rc = put_point(&p, r->n + i == 0);
    }
    if (rc) {
        json_decref(gs);
        ws_err err;
        ws_err_set(&err, WS_ENOMEM, "out of memory formatting JSON output");
        return cli_fail(&err);
    }
    printf("\n  ],\n  \"groups\": ");
    for (size_t k = 0; k < r->ng; k++) {
        const ws_fid_group *g = &r->g[k];
        json_t *o = json_object();
        json_object_set_new(o, "group", json_string(g->group));
        json_object_set_new(o, "points", json_integer(g->n));
        json_object_set_new(o, "expressed", json_integer(g->expressed));
        json_object_set_new(o, "median_abs_err", num_or_null(g->median_err));
        json_object_set_new(o, "worst_abs_err", num_or_null(g->worst_err));
        json_object_set_new(o, "worst_point", g->expressed ? json_string(g->worst_id) : json_null());
        json_object_set_new(o, "wall_s", json_real(g->wall_s));
        json_array_append_new(gs, o);
    }
    char *t = json_dumps(gs, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(gs);
    if (!t) {
        ws_err err;
        ws_err_set(&err, WS_ENOMEM, "out of memory formatting JSON output");
        return cli_fail(&err);
    }
    printf("%s\n}\n", t);
    free(t);
    return CLI_EXIT_OK;
}

/* Strings from the points files (ids aside, which are refused with control characters) go
 * to the terminal through cli_text: escaped, cut to their column's buffer. */
static void print_table(const ws_fid_report *r, int embedded)
{
    char id[128], metric[96], what[512], group[128];
    printf("writescope fidelity: the simulator (MODELED%s) against published measurements\n",
           embedded ? ", embedded datasheet profiles" : "");
    printf("%-34s %-24s %-14s %12s %12s %7s  %s\n", "point", "metric", "policy", "published",
           "predicted", "ratio", "source / missing knob");
    const size_t n_op = r->n_op;
    for (size_t i = 0; i < r->n; i++) {
        const ws_fid_point *p = &r->pt[i];
        char pred[32] = "-", ratio[16] = "-";
        if (isfinite(p->ratio)) {
            snprintf(pred, sizeof pred, "%.4g", p->predicted);
            snprintf(ratio, sizeof ratio, "%.2f", p->ratio);
        }
        char ms[40];
        snprintf(ms, sizeof ms, "%s%s%s", p->metric, *p->stat ? " " : "", p->stat);
        const char *tag = *p->bad ? "BAD " : *p->missing ? "MISSING " : "";
        printf("%-34s %-24s %-14s %12.4g %12s %7s  %s%s\n", cli_text(p->id, id, sizeof id),
               cli_text(ms, metric, sizeof metric), *p->policy ? p->policy : "-", p->published,
               pred, ratio, tag,
               cli_text(*p->bad ? p->bad : *p->missing ? p->missing : p->source, what,
                        sizeof what));
    }
    if (n_op)
        printf("(%zu operator points, one per profiled kernel: in --json; summarised below)\n",
               n_op);
    printf("\n%-28s %7s %10s %13s %12s %8s  %s\n", "group", "points", "expressed",
           "median |err|", "worst |err|", "sim s", "worst point");
    for (size_t k = 0; k < r->ng; k++) {
        const ws_fid_group *g = &r->g[k];
        char wall[16] = "-";
        if (g->wall_s > 0)
            snprintf(wall, sizeof wall, "%.1f", g->wall_s);
        cli_text(g->group, group, sizeof group);
        if (!g->expressed) {
            printf("%-28s %7d %10d %13s %12s %8s\n", group, g->n, 0, "n/a", "n/a", wall);
            continue;
        }
        printf("%-28s %7d %10d %12.1f%% %11.1f%% %8s  %s\n", group, g->n, g->expressed,
               100 * g->median_err, 100 * g->worst_err, wall, cli_text(g->worst_id, id, sizeof id));
    }
}

/* Drops the points outside --group. */
static void keep_group(ws_fid_report *r, const char *group)
{
    size_t w = 0;
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->pt[i].group, group))
            r->pt[w++] = r->pt[i];
    r->n = w;
    char g[48];
    w = 0;
    for (size_t i = 0; i < r->n_op; i++)
        if (!strcmp(ws_fidelity_op_group(&r->op[i], g, sizeof g), group))
            r->op[w++] = r->op[i];
    r->n_op = w;
}

/* The default points: every file of k_point_files in the project folder's fidelity/. */
static const char *const k_point_files[] = {"fidelity/e2e.json", "fidelity/serving.json"};

static int load_points(const char *points, ws_fid_report *r, ws_err *err)
{
    if (points)
        return ws_fidelity_load(points, r, err);
    char root[WS_PATH_MAX], path[WS_PATH_MAX];
    if (ws_root_dir(root, sizeof root, err))
        return err->code;
    for (size_t i = 0; i < sizeof k_point_files / sizeof *k_point_files; i++) {
        int rc = ws_path_join(path, sizeof path, root, k_point_files[i], err);
        if (rc || (rc = ws_fidelity_load(path, r, err)))
            return rc;
    }
    return 0;
}

/* The error, its text escaped: it names files and echoes what they hold. */
static int fid_fail(const ws_err *err)
{
    ws_err e = {.code = err->code};
    cli_text(err->msg, e.msg, sizeof e.msg);
    return cli_fail(&e);
}

int cmd_fidelity(int argc, char **argv)
{
    fid_opts o = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_spec, argc, argv, &o, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    /* the operator points' options, where no operator point is read */
    const int op_opts = o.ops || o.heldout || cli_given(&a, "ops-gpu");
    if (o.no_ops && op_opts)
        return cli_usage_error("fidelity", "--no-ops contradicts --ops, --ops-gpu and --heldout");
    char group[160] = "";
    if (o.group)
        cli_text(o.group, group, sizeof group);
    if (o.group && strncmp(o.group, "op ", 3) && op_opts)
        return cli_usage_error("fidelity", "--ops, --ops-gpu and --heldout are for operator "
                                           "points, not group '%s'",
                               group);
    if (o.engine) { /* a usage error before any work */
        char names[32][64];
        const int n = ws_server_list(names, 32);
        int known = 0;
        for (int i = 0; i < n; i++)
            known |= !strcmp(names[i], o.engine);
        if (!known) {
            char eng[160];
            cli_text(o.engine, eng, sizeof eng);
            return cli_usage_error("fidelity", "--engine '%s': no engines/%s.json", eng, eng);
        }
    }
    ws_err err = {0};
    ws_fid_report r = {0};
    if (load_points(o.points, &r, &err)) {
        ws_fidelity_free(&r);
        return fid_fail(&err);
    }
    ws_store *s = NULL;
    int embedded = 0;
    if (cli_open_store_ro(o.db, &s, &embedded, &err)) {
        ws_fidelity_free(&r);
        return fid_fail(&err);
    }
    char root[WS_PATH_MAX], ops[WS_PATH_MAX];
    /* operator points only where they are asked for: every group, or one of theirs */
    const int want_ops = !o.no_ops && (!o.group || !strncmp(o.group, "op ", 3));
    if (want_ops && !o.ops) {
        if (!ws_root_dir(root, sizeof root, &err) &&
            !ws_path_join(ops, sizeof ops, root, "../shared/profiling/vidur-a100", &err) &&
            ws_dir_exists(ops))
            o.ops = ops;
        else
            fprintf(stderr, "fidelity: no operator profiles (../shared/profiling/vidur-a100 "
                            "is not beside the project folder; --ops DIR): end-to-end "
                            "and serving points only\n");
        err = (ws_err){0};
    }
    if (want_ops && o.ops && (rc = ws_fidelity_add_ops(s, o.ops, o.ops_gpu, o.heldout, &r, &err))) {
        ws_store_close(s);
        ws_fidelity_free(&r);
        return fid_fail(&err);
    }
    if (o.group) {
        keep_group(&r, o.group);
        if (!r.n && !r.n_op) {
            ws_store_close(s);
            ws_fidelity_free(&r);
            return cli_usage_error("fidelity", "no point in group '%s'", group);
        }
    }
    if (o.engine)
        snprintf(r.engine, sizeof r.engine, "%s", o.engine);
    cli_progress prog;
    cli_progress_start(&prog);
    rc = ws_fidelity_predict(s, &r, on_progress, &prog, &err);
    cli_progress_end(&prog);
    ws_store_close(s);
    if (!rc)
        rc = ws_fidelity_summarise(&r, &err);
    if (rc) {
        ws_fidelity_free(&r);
        return fid_fail(&err);
    }
    if (o.json)
        rc = print_json(&r);
    else {
        print_table(&r, embedded);
        rc = CLI_EXIT_OK;
    }
    size_t bad = 0;
    for (size_t i = 0; i < r.n; i++)
        bad += r.pt[i].bad[0] != '\0';
    if (bad) {
        fflush(stdout); /* after the report, also when both go to one pipe */
        fprintf(stderr, "fidelity: %zu bad point%s (each says why): the others ran\n", bad,
                bad == 1 ? "" : "s");
    }
    ws_fidelity_free(&r);
    return rc;
}
