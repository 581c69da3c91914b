/* cmd_sim: `writescope sim` -- a workload through the discrete-event simulator under one or
 * every KV policy, and `writescope sim grid` -- the reference paper's grid. Parsing and
 * printing only: the runs are sim_run and sim_grid_run. Every figure is modeled from the
 * named profiles and says so. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "grid.h"
#include "hw.h"
#include "record.h"
#include "serve.h"
#include "store.h"
#include "trace.h"
#include "trace_gen.h"
#include "ws_par.h"
#include "ws_parse.h"
#include "ws_util.h"

static void help(FILE *out)
{
    fprintf(out,
            "usage: writescope sim --model NAME --gpu PROFILE --host PROFILE\n"
            "           [--batch B] [--prompt N --output M | --trace FILE [--format F]\n"
            "           [--skip-bad] | --arrivals poisson|gamma|closed [--rate R] [--cv C]\n"
            "           [--clients C] [--think T] --requests K --prompt-dist SPEC\n"
            "           --output-dist SPEC] [--policy NAME|all] [--r R] [--r-max R]\n"
            "           [--detail step|layer] [--layers K] [--slo-ttft S --slo-tpot S]\n"
            "           [--seed S] [--chunk T] [--window W] [--gpu-kv-gb G] [--gpu-experts E]\n"
            "           [--db PATH | --save] [--csv DIR] [--chrome-trace FILE\n"
            "           [--chrome-trace-limit N]] [--json]\n"
            "       writescope sim grid [--host PROFILE] [--model NAME] [--gpu PROFILE]\n"
            "           [--detail step|layer] [--db PATH | --save] [--json]\n"
            "\n"
            "Simulates decode and chunked prefill of an MoE model on a GPU and a host described\n"
            "by hardware profiles (datasheet names such as a100-40gb-pcie, v100-32gb-pcie,\n"
            "xeon-gold-5318y, or calibrated ones; see `writescope db show`; --host this: this\n"
            "machine's newest calibration), under the KV\n"
            "policies writescope, gpu-only, ktrans, stream, cpu-attn, static (--r, default\n"
            "0.5) and migrate, or all of them (--policy all, the default). --r-max clips the\n"
            "share r* that writescope and migrate aim for (default 1: no clip).\n"
            "\n"
            "Workload: a closed batch of B requests of N prompt and M output tokens at time 0\n"
            "(defaults 4, 2048, 256); or a trace FILE (ours, azure, mooncake, burstgpt, vidur;\n"
            "detected, or --format); or a generator (as `writescope trace gen`, seeded by\n"
            "--seed): open arrivals (poisson, gamma) at --rate R, or a closed loop of\n"
            "--clients C, each sending its next request --think T (S or exp:S: exponential of\n"
            "mean S seconds; fixed:S; default 0) after its previous one ends, K requests in\n"
            "all. Continuous batching up to --batch sequences (32 for traces); GPU KV\n"
            "budget --gpu-kv-gb (default 2 GiB, 0.3 GiB for MLA models); a request that can\n"
            "never fit is counted as an out-of-memory (OOM) outcome.\n"
            "--detail layer plays every layer as operations; step folds the identical layers\n"
            "(same results where the pipeline is periodic, much faster). --layers K plays\n"
            "the first K layers only.\n"
            "\n"
            "Prints per policy: requests served and OOM, output tokens/s over the makespan,\n"
            "decode tokens/s over the decode steps, TTFT and TPOT percentiles, goodput under\n"
            "the SLOs, the policy's last target share r* and the realised share r, steps,\n"
            "events and wall time. --json adds every request and every step.\n"
            "Percentiles are exact up to 4096 served requests, then read from a log-bucketed\n"
            "histogram within 0.5%% relative error (memory does not grow with the trace).\n"
            "\n"
            "Results, streamed as the run plays (one database transaction per run):\n"
            "  --db PATH    read the profiles from PATH and store every run there (tables\n"
            "               sim_runs, sim_requests, sim_steps; created or migrated as needed)\n"
            "  --save       the same with the default database ($WRITESCOPE_DB, else\n"
            "               results/writescope.db)\n"
            "  --csv DIR    DIR/requests.csv, steps.csv, summary.csv (every policy run)\n"
            "  --chrome-trace FILE  the operation timeline of one run (one --policy) for\n"
            "               Perfetto; at most --chrome-trace-limit spans (200000; 0: all)\n"
            "All figures are modeled (discrete-event simulation on the profiles named).\n"
            "\n"
            "grid: DeepSeek-V2-Lite, Qwen3-30B-A3B, Mixtral-8x7B on a100-40gb-pcie and\n"
            "v100-32gb-pcie, batch 4/16/32, prompts 2K/8K/32K, 256 output tokens, all policies;\n"
            "decode throughput per policy and the geometric-mean speedup of writescope over\n"
            "each baseline at >= 8K, beside the paper's reported figures. --model and --gpu\n"
            "keep one model or GPU of the grid. --db PATH / --save store every point's run\n"
            "(totals, table sim_runs) under one sim_grids row, in one transaction.\n"
            "Under MPI (mpirun -n N writescope sim grid ..., or srun) the points are spread\n"
            "over the ranks; rank 0 gathers them, prints and writes the database, with the\n"
            "same results as one process (docs/scaleout.md).\n");
}

static void on_progress(void *ctx, double sim_t, uint64_t steps, uint64_t ended, uint64_t seen)
{
    cli_progress_line(ctx, 0,
                      "sim: %.1f s simulated, %llu steps, %llu of %llu requests ended", sim_t,
                      (unsigned long long)steps, (unsigned long long)ended,
                      (unsigned long long)seen);
}

static void on_grid_progress(cli_progress *p, int done, int total)
{
    cli_progress_line(p, done == total, "sim grid: %d of %d runs", done, total);
}

static const char *res_name[SIM_RES_COUNT] = {"gpu", "h2d", "d2h", "cpu"};

/* {"gpu": s, "h2d": s, ...}: busy seconds per resource. */
static json_t *busy_json(const double *busy)
{
    json_t *b = json_object();
    for (int i = 0; i < SIM_RES_COUNT; i++)
        json_object_set_new(b, res_name[i], json_real(busy[i]));
    return b;
}

static json_t *totals_json(const sim_results *r)
{
    const sim_totals *t = &r->tot;
    json_t *o = json_object();
    json_object_set_new(o, "policy", json_string(r->policy));
    json_object_set_new(o, "requests", json_integer((json_int_t)t->requests));
    json_object_set_new(o, "served", json_integer((json_int_t)t->served));
    json_object_set_new(o, "oom", json_integer((json_int_t)t->oom));
    json_object_set_new(o, "output_tokens", json_integer((json_int_t)t->output_tokens));
    json_object_set_new(o, "makespan_s", json_real(t->makespan_s));
    json_object_set_new(o, "tokens_per_s", json_real(t->tokens_per_s));
    json_object_set_new(o, "decode_tokens_per_s", json_real(t->decode_tps));
    json_object_set_new(o, "ttft_p50_s", json_real(t->ttft_p50));
    json_object_set_new(o, "ttft_p90_s", json_real(t->ttft_p90));
    json_object_set_new(o, "ttft_p99_s", json_real(t->ttft_p99));
    json_object_set_new(o, "tpot_p50_s", json_real(t->tpot_p50));
    json_object_set_new(o, "tpot_p90_s", json_real(t->tpot_p90));
    json_object_set_new(o, "tpot_p99_s", json_real(t->tpot_p99));
    json_object_set_new(o, "goodput_rps", json_real(t->goodput_rps));
    json_object_set_new(o, "slo_fraction", json_real(t->slo_frac));
    json_object_set_new(o, "rstar_last", json_real(t->rstar_last));
    json_object_set_new(o, "r_realised_last", json_real(t->r_final));
    json_object_set_new(o, "busy_s", busy_json(t->busy));
    json_object_set_new(o, "steps", json_integer((json_int_t)t->steps));
    json_object_set_new(o, "events", json_integer((json_int_t)t->events));
    json_object_set_new(o, "folded_layers", json_integer((json_int_t)t->folded_layers));
    json_object_set_new(o, "fold_inexact_steps", json_integer((json_int_t)t->fold_inexact));
    json_object_set_new(o, "wall_s", json_real(t->wall_s));
    json_t *rq = json_array();
    for (size_t i = 0; i < r->n_req; i++) {
        const sim_req_result *q = &r->req[i];
        json_t *x = json_object();
        json_object_set_new(x, "id", json_integer((json_int_t)q->id));
        json_object_set_new(x, "arrival_s", json_real(q->arrival_s));
        json_object_set_new(x, "prompt", json_integer(q->prompt));
        json_object_set_new(x, "output", json_integer(q->output));
        json_object_set_new(x, "outcome", json_string(sim_outcome_name(q->outcome)));
        json_object_set_new(x, "ttft_s", json_real(q->ttft));
        json_object_set_new(x, "tpot_s", json_real(q->tpot));
        json_object_set_new(x, "e2e_s", json_real(q->e2e));
        json_array_append_new(rq, x);
    }
    json_object_set_new(o, "requests_detail", rq);
    json_t *st = json_array();
    for (size_t i = 0; i < r->n_step; i++) {
        const sim_step_rec *s = &r->step[i];
        json_t *x = json_object();
        json_object_set_new(x, "t_start_s", json_real(s->t_start));
        json_object_set_new(x, "dt_s", json_real(s->dt));
        json_object_set_new(x, "batch", json_integer(s->batch));
        json_object_set_new(x, "decode_tokens", json_integer(s->decode_tokens));
        json_object_set_new(x, "prefill_tokens", json_integer(s->prefill_tokens));
        json_object_set_new(x, "rstar", json_real(s->rstar));
        json_object_set_new(x, "r_realised", json_real(s->r_real));
        json_object_set_new(x, "busy_s", busy_json(s->busy));
        json_array_append_new(st, x);
    }
    json_object_set_new(o, "steps_detail", st);
    return o;
}

static void print_header(FILE *o)
{
    fprintf(o, "%-10s %6s %4s %10s %10s %9s %9s %9s %9s %6s %6s %7s %9s %8s\n", "policy", "served",
            "oom", "out tok/s", "dec tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "r*",
            "r", "steps", "events", "wall");
}

static void print_row(FILE *o, const sim_results *r, int slo)
{
    const sim_totals *t = &r->tot;
    fprintf(o,
            "%-10s %6llu %4llu %10.1f %10.1f %8.3fs %8.3fs %7.1fms %7.1fms %6.3f %6.3f %7llu "
            "%9llu %7.3fs",
            r->policy, (unsigned long long)t->served, (unsigned long long)t->oom, t->tokens_per_s,
            t->decode_tps, t->ttft_p50, t->ttft_p99, 1e3 * t->tpot_p50, 1e3 * t->tpot_p99,
            t->rstar_last, t->r_final, (unsigned long long)t->steps, (unsigned long long)t->events,
            t->wall_s);
    if (slo)
        fprintf(o, "  goodput %.3f req/s (%.0f%% within SLO)", t->goodput_rps, 100 * t->slo_frac);
    fprintf(o, "\n");
}

static int find_model_index(const char *name)
{
    for (int i = 0; i < SIM_GRID_MODELS; i++)
        if (!strcmp(name, sim_grid_models[i]))
            return i;
    return -1;
}

static int find_gpu_index(const char *name)
{
    for (int i = 0; i < SIM_GRID_GPUS; i++)
        if (!strcmp(name, sim_grid_gpus[i]))
            return i;
    return -1;
}

/* Evaluates grid points for ws_par_map; rank 0 shows its own share's progress. */
typedef struct grid_work {
    sim_grid *g;
    cli_progress *pg;
    int done, share, show;
} grid_work;

static int grid_point(void *ctx, size_t i, void *rec, ws_err *err)
{
    grid_work *w = ctx;
    int rc = sim_grid_eval(w->g, i, rec, err);
    if (!rc && w->show)
        on_grid_progress(w->pg, ++w->done, w->share);
    return rc;
}

/* The grid's failure: printed by rank 0 only (every rank holds the same message). */
static int grid_fail(const ws_par *par, const ws_err *err)
{
    return ws_par_rank(par) ? CLI_EXIT_FAIL : cli_fail(err);
}

/* Stores the grid's runs (rank 0, s open for writing); *gr gets the grid row. */
static int grid_store(ws_store *s, const sim_grid_opts *o, int ranks, const sim_grid_point *p,
                      size_t n, ws_simdb_grid *gr, long long *first, long long *last, ws_err *err)
{
    memset(gr, 0, sizeof *gr);
    gr->ranks = ranks;
    int rc = sim_grid_params(o, gr->params, sizeof gr->params, err);
    if (rc)
        return rc;
    ws_simdb_run *runs = calloc(n ? n : 1, sizeof *runs);
    if (!runs)
        return ws_err_set(err, WS_ENOMEM, "sim grid: out of memory");
    for (size_t i = 0; i < n; i++)
        runs[i] = p[i].run;
    if (!(rc = ws_simdb_store_grid(s, gr, runs, n, err)) && n) {
        *first = runs[0].id;
        *last = runs[n - 1].id;
    }
    free(runs);
    return rc;
}

static int cmd_grid(ws_par *par, const char *db, int store_runs, const char *host,
                    const char *model, const char *gpu, int detail_layer, int json)
{
    const int rank = ws_par_rank(par);
    sim_grid_opts o;
    sim_grid_opts_default(&o);
    if (host)
        o.host = host;
    o.detail_layer = detail_layer;
    if (model && (o.only_model = find_model_index(model)) < 0) {
        if (!rank)
            fprintf(stderr, "writescope: sim grid: model '%s' is not in the grid (%s, %s, %s)\n",
                    model, sim_grid_models[0], sim_grid_models[1], sim_grid_models[2]);
        return CLI_EXIT_FAIL;
    }
    if (gpu && (o.only_gpu = find_gpu_index(gpu)) < 0) {
        if (!rank)
            fprintf(stderr, "writescope: sim grid: GPU '%s' is not in the grid (%s, %s)\n", gpu,
                    sim_grid_gpus[0], sim_grid_gpus[1]);
        return CLI_EXIT_FAIL;
    }
    /* Rank 0 creates or migrates the database before the others open it to read profiles. */
    ws_err err = {0};
    char this_host[64];
    ws_store *s = NULL;
    int embedded = 0;
    int rc = cli_open_store_ranks(par, db, store_runs, &s, &embedded, &err);
    sim_grid *g = NULL;
    if (!rc)
        rc = cli_host_this(s, &o.host, this_host, sizeof this_host, &err);
    if (!rc)
        rc = sim_grid_open(s, &o, &g, &err);
    rc = ws_par_agree(par, rc, &err);
    if (rc) {
        sim_grid_close(g);
        ws_store_close(s);
        return grid_fail(par, &err);
    }
    const size_t n = sim_grid_count(g);
    sim_grid_point *p = rank ? NULL : calloc(n ? n : 1, sizeof *p);
    cli_progress pg;
    cli_progress_start(&pg);
    grid_work w = {.g = g, .pg = &pg, .share = (int)ws_par_share(par, n), .show = !rank};
    rc = ws_par_map(par, n, sizeof *p, grid_point, &w, p, WS_PAR_TO_ROOT, &err);
    cli_progress_end(&pg);
    sim_grid_close(g);
    ws_simdb_grid gr = {0};
    long long first = 0, last = 0;
    char dbpath[WS_PATH_MAX] = "";
    if (!rc && store_runs) { /* every rank exits non-zero when rank 0 could not store */
        if (!rank) {
            snprintf(dbpath, sizeof dbpath, "%s", ws_store_path(s));
            rc = grid_store(s, &o, ws_par_size(par), p, n, &gr, &first, &last, &err);
        }
        rc = ws_par_agree(par, rc, &err);
    }
    ws_store_close(s);
    if (rc) {
        free(p);
        return grid_fail(par, &err);
    }
    if (rank)
        return CLI_EXIT_OK;
    const int baselines[] = {WS_POLICY_GPU_ONLY, WS_POLICY_KTRANS, WS_POLICY_STREAM,
                             WS_POLICY_CPU_ATTN, WS_POLICY_STATIC, WS_POLICY_MIGRATE};
    const int nb = sizeof baselines / sizeof baselines[0];
    if (json) {
        json_t *root = json_object(), *pts = json_array();
        json_object_set_new(root, "source", json_string("modeled"));
        json_object_set_new(root, "host", json_string(o.host));
        json_object_set_new(root, "embedded_profiles", json_boolean(embedded));
        for (size_t i = 0; i < n; i++) {
            json_t *x = json_object();
            json_object_set_new(x, "model", json_string(sim_grid_models[p[i].model]));
            json_object_set_new(x, "gpu", json_string(sim_grid_gpus[p[i].gpu]));
            json_object_set_new(x, "batch", json_integer(p[i].batch));
            json_object_set_new(x, "prompt", json_integer(p[i].prompt));
            json_object_set_new(x, "output", json_integer(SIM_GRID_OUTPUT));
            json_object_set_new(x, "policy", json_string(ws_policy_name(p[i].policy)));
            json_object_set_new(x, "tokens_per_s", json_real(p[i].tps));
            json_object_set_new(x, "decode_tokens_per_s", json_real(p[i].decode_tps));
            json_object_set_new(x, "served", json_integer((json_int_t)p[i].served));
            json_object_set_new(x, "oom", json_integer((json_int_t)p[i].oom));
            json_object_set_new(x, "r_realised_last", json_real(p[i].r_final));
            json_array_append_new(pts, x);
        }
        json_object_set_new(root, "points", pts);
        json_t *sp = json_array();
        for (int g = 0; g < SIM_GRID_GPUS; g++)
            for (int m = -1; m < SIM_GRID_MODELS; m++)
                for (int b = 0; b < nb; b++) {
                    int k;
                    double v = sim_grid_speedup(p, n, m, g, baselines[b], 8192, &k);
                    if (!k)
                        continue;
                    json_t *x = json_object();
                    json_object_set_new(x, "gpu", json_string(sim_grid_gpus[g]));
                    json_object_set_new(
                        x, "model", m < 0 ? json_string("all") : json_string(sim_grid_models[m]));
                    json_object_set_new(x, "baseline", json_string(ws_policy_name(baselines[b])));
                    json_object_set_new(x, "geomean_speedup", json_real(v));
                    json_object_set_new(x, "points", json_integer(k));
                    json_array_append_new(sp, x);
                }
        json_object_set_new(root, "speedups_ge_8k", sp);
        if (store_runs) {
            json_t *wr = json_object();
            json_object_set_new(wr, "database", json_string(dbpath));
            json_object_set_new(wr, "grid_id", json_integer(gr.id));
            json_object_set_new(wr, "first_run_id", json_integer(first));
            json_object_set_new(wr, "last_run_id", json_integer(last));
            json_object_set_new(root, "written", wr);
        }
        free(p);
        return cli_print_json(root);
    }
    printf("writescope sim grid: MODELED (discrete-event simulation) on host profile %s%s;\n"
           "decode tokens/s per policy, 256 output tokens, closed batches; OOM: no request\n"
           "fitted the memory limits (x/N: N requests did not).\n",
           o.host, embedded ? " (embedded datasheet profiles)" : "");
    for (int m = 0; m < SIM_GRID_MODELS; m++)
        for (int g = 0; g < SIM_GRID_GPUS; g++) {
            int any = 0;
            for (size_t i = 0; i < n; i++)
                any |= p[i].model == m && p[i].gpu == g;
            if (!any)
                continue;
            printf("\n%s on %s + %s (modeled)\n%-6s %-6s", sim_grid_models[m], sim_grid_gpus[g],
                   o.host, "batch", "prompt");
            for (int k = 0; k < WS_POLICY_COUNT; k++)
                printf(" %10s", ws_policy_name(k));
            printf("\n");
            for (size_t i = 0; i < n; i += WS_POLICY_COUNT) {
                if (p[i].model != m || p[i].gpu != g)
                    continue;
                printf("%-6d %-6d", p[i].batch, p[i].prompt);
                for (int k = 0; k < WS_POLICY_COUNT; k++) {
                    const sim_grid_point *x = &p[i + k];
                    if (x->oom && !x->served)
                        printf(" %10s", "OOM");
                    else if (x->oom)
                        printf(" %6.1f/%llu", x->decode_tps, (unsigned long long)x->oom);
                    else
                        printf(" %10.1f", x->decode_tps);
                }
                printf("\n");
            }
            printf("geomean speedup of writescope at >= 8K:");
            for (int b = 0; b < nb; b++) {
                int k;
                double v = sim_grid_speedup(p, n, m, g, baselines[b], 8192, &k);
                if (k)
                    printf(" %s %.2fx", ws_policy_name(baselines[b]), v);
                else
                    printf(" %s n/a", ws_policy_name(baselines[b]));
            }
            printf("\n");
        }
    printf("\nsummary, modeled; geometric means over models, batches and prompts >= 8K where\n"
           "both policies served every request (points in brackets); the paper's beside\n");
    for (int g = 0; g < SIM_GRID_GPUS; g++) {
        int any = 0;
        for (size_t i = 0; i < n; i++)
            any |= p[i].gpu == g;
        if (!any)
            continue;
        const sim_paper_range *pr = g == 0 ? &sim_paper_a100 : &sim_paper_v100;
        printf("%s: writescope speedup over", sim_grid_gpus[g]);
        for (int b = 0; b < nb; b++) {
            int k;
            double v = sim_grid_speedup(p, n, -1, g, baselines[b], 8192, &k);
            if (k)
                printf(" %s %.2fx [%d]", ws_policy_name(baselines[b]), v, k);
            else
                printf(" %s n/a", ws_policy_name(baselines[b]));
        }
        printf("\n    paper: %.2f-%.2fx over its four baselines\n", pr->lo, pr->hi);
        double slo = INFINITY, shi = -INFINITY, mlo = INFINITY, mhi = -INFINITY;
        for (int m = 0; m < SIM_GRID_MODELS; m++) {
            int k;
            double v = sim_grid_speedup(p, n, m, g, WS_POLICY_STATIC, 8192, &k);
            if (k)
                slo = fmin(slo, 1 / v), shi = fmax(shi, 1 / v);
            v = sim_grid_speedup(p, n, m, g, WS_POLICY_MIGRATE, 8192, &k);
            if (k)
                mlo = fmin(mlo, 1 / v), mhi = fmax(mhi, 1 / v);
        }
        if (slo <= shi)
            printf("    static r=0.5 / writescope per model %.2f-%.2f (paper %.2f-%.2f)\n", slo,
                   shi, sim_paper_static.lo, sim_paper_static.hi);
        if (mlo <= mhi)
            printf("    migrate (single-state) / writescope per model %.2f-%.2f (paper "
                   "%.2f-%.2f)\n",
                   mlo, mhi, sim_paper_single.lo, sim_paper_single.hi);
        for (int pol = 0; pol < WS_POLICY_COUNT; pol++) {
            uint64_t served = 0, oom = 0;
            int pts = 0;
            for (size_t i = 0; i < n; i++)
                if (p[i].gpu == g && p[i].batch == 32 && p[i].prompt == 32768 && p[i].policy == pol)
                    served += p[i].served, oom += p[i].oom, pts++;
            if (pts && (pol == WS_POLICY_WRITESCOPE || pol == WS_POLICY_GPU_ONLY ||
                        pol == WS_POLICY_KTRANS))
                printf("    32 x 32K (~1M tokens), %d model(s): %-10s served %llu, OOM %llu\n", pts,
                       ws_policy_name(pol), (unsigned long long)served, (unsigned long long)oom);
        }
    }
    printf("    paper at 32 x 32K: vLLM, SGLang and KTransformers run out of memory; WriteScope "
           "serves\n");
    if (store_runs)
        printf("stored: grid %lld, runs %lld-%lld in %s (modeled)\n", gr.id, first, last, dbpath);
    free(p);
    return CLI_EXIT_OK;
}

int cmd_sim(int argc, char **argv)
{
    const char *model = NULL, *gpu = NULL, *host = NULL, *batch_s = NULL, *prompt_s = NULL,
               *output_s = NULL, *trace = NULL, *policy = NULL, *r_s = NULL, *detail = NULL,
               *layers_s = NULL, *ttft_s = NULL, *tpot_s = NULL, *seed_s = NULL, *chunk_s = NULL,
               *window_s = NULL, *kv_s = NULL, *gexp_s = NULL, *db = NULL, *format = NULL,
               *arrivals = NULL, *rate_s = NULL, *cv_s = NULL, *requests_s = NULL, *pdist = NULL,
               *odist = NULL, *csv = NULL, *ctrace = NULL, *ctrace_lim_s = NULL, *clients_s = NULL,
               *think_s = NULL, *rmax_s = NULL;
    int json = 0, nargs = 0, skip_bad = 0, save = 0;
    const cli_opt opts[] = {{"model", &model, NULL},
                            {"gpu", &gpu, NULL},
                            {"host", &host, NULL},
                            {"batch", &batch_s, NULL},
                            {"prompt", &prompt_s, NULL},
                            {"output", &output_s, NULL},
                            {"trace", &trace, NULL},
                            {"policy", &policy, NULL},
                            {"r", &r_s, NULL},
                            {"r-max", &rmax_s, NULL},
                            {"detail", &detail, NULL},
                            {"layers", &layers_s, NULL},
                            {"slo-ttft", &ttft_s, NULL},
                            {"slo-tpot", &tpot_s, NULL},
                            {"seed", &seed_s, NULL},
                            {"chunk", &chunk_s, NULL},
                            {"window", &window_s, NULL},
                            {"gpu-kv-gb", &kv_s, NULL},
                            {"gpu-experts", &gexp_s, NULL},
                            {"db", &db, NULL},
                            {"json", NULL, &json},
                            {"format", &format, NULL},
                            {"skip-bad", NULL, &skip_bad},
                            {"arrivals", &arrivals, NULL},
                            {"rate", &rate_s, NULL},
                            {"cv", &cv_s, NULL},
                            {"requests", &requests_s, NULL},
                            {"clients", &clients_s, NULL},
                            {"think", &think_s, NULL},
                            {"prompt-dist", &pdist, NULL},
                            {"output-dist", &odist, NULL},
                            {"save", NULL, &save},
                            {"csv", &csv, NULL},
                            {"chrome-trace", &ctrace, NULL},
                            {"chrome-trace-limit", &ctrace_lim_s, NULL},
                            {0}};
    char *args[2];
    int rc = cli_parse("sim", argc, argv, opts, args, 2, &nargs, help);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    int grid = nargs > 0 && !strcmp(args[0], "grid");
    if (nargs > (grid ? 1 : 0))
        return cli_usage_error("sim", "unexpected argument '%s'", args[grid ? 1 : 0]);
    int detail_layer = grid ? 0 : 1;
    if (detail) {
        if (!strcmp(detail, "layer"))
            detail_layer = 1;
        else if (!strcmp(detail, "step"))
            detail_layer = 0;
        else
            return cli_usage_error("sim", "--detail is step or layer, not '%s'", detail);
    }
    ws_err err = {0};
    ws_store *s = NULL;
    int embedded = 0;
    if (grid) {
        /* Under mpirun/srun every rank runs this; only rank 0 prints. */
        ws_par *par;
        if (ws_par_init(&par, &err))
            return cli_fail(&err);
        if (csv || ctrace || ctrace_lim_s)
            rc = ws_par_rank(par) ? CLI_EXIT_USAGE
                                  : cli_usage_error("sim", "--csv and --chrome-trace are for one "
                                                           "workload, not sim grid");
        else
            rc = cmd_grid(par, db, db || save, host, model, gpu, detail_layer, json);
        ws_par_finalize(par);
        return rc;
    }
    if (!model || !gpu || !host)
        return cli_usage_error("sim", "--model, --gpu and --host are required");
    if (trace && arrivals)
        return cli_usage_error("sim", "--trace and --arrivals are two different workloads");
    if ((trace || arrivals) && (prompt_s || output_s))
        return cli_usage_error("sim", "--prompt and --output make a closed batch; a trace or a "
                                      "generator gives its own lengths");
    ws_trace_opts topts = {.format = WS_TRACE_AUTO, .skip_bad = skip_bad};
    ws_trace_gen tg = {0};
    ws_err perr = {0};
    if (format && ws_trace_format_parse(format, &topts.format, &perr))
        return cli_usage_error("sim", "%s", perr.msg);
    if (arrivals) {
        const cli_gen_args ga = {arrivals, rate_s,     cv_s,  clients_s,
                                 think_s,  requests_s, pdist, odist};
        if ((rc = cli_gen_parse("sim", &ga, &tg)))
            return rc;
    } else if (rate_s || cv_s || clients_s || think_s || requests_s || pdist || odist) {
        return cli_usage_error("sim", "--rate, --cv, --clients, --think, --requests and the "
                                      "length specs go with --arrivals");
    }
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    int batch = trace || arrivals ? 32 : 4, prompt = 2048, output = 256, gexp = 0, all = 1;
    double kv_gb = 0;
    long long seed = 0;
    if ((batch_s && (rc = cli_opt_int("sim", "batch", batch_s, 1, 1 << 20, &batch))) ||
        (prompt_s && (rc = cli_opt_int("sim", "prompt", prompt_s, 1, 1 << 26, &prompt))) ||
        (output_s && (rc = cli_opt_int("sim", "output", output_s, 1, 1 << 26, &output))) ||
        (layers_s && (rc = cli_opt_int("sim", "layers", layers_s, 1, 100000, &cfg.layers))) ||
        (chunk_s && (rc = cli_opt_int("sim", "chunk", chunk_s, 1, 1 << 24, &cfg.chunk))) ||
        (window_s && (rc = cli_opt_int("sim", "window", window_s, 1, 1 << 24, &cfg.window))) ||
        (gexp_s && (rc = cli_opt_int("sim", "gpu-experts", gexp_s, 0, 65536, &gexp))) ||
        (r_s && (rc = cli_opt_double("sim", "r", r_s, 0, 1, &cfg.par.r_static))) ||
        (rmax_s && (rc = cli_opt_double("sim", "r-max", rmax_s, 0, 1, &cfg.par.r_max))) ||
        (ttft_s && (rc = cli_opt_double("sim", "slo-ttft", ttft_s, 0, 1e9, &cfg.slo_ttft))) ||
        (tpot_s && (rc = cli_opt_double("sim", "slo-tpot", tpot_s, 0, 1e9, &cfg.slo_tpot))) ||
        (kv_s && (rc = cli_opt_double("sim", "gpu-kv-gb", kv_s, 0, 1e6, &kv_gb))))
        return rc;
    if (seed_s && ws_parse_int64(seed_s, 0, (long long)1 << 62, &seed))
        return cli_usage_error("sim", "--seed needs a non-negative integer, not '%s'", seed_s);
    cfg.batch = batch;
    cfg.detail_layer = detail_layer;
    cfg.seed = (uint64_t)seed;
    tg.seed = (uint64_t)seed;
    cfg.gpu_kv_budget = kv_gb * 1073741824.0;
    if (cfg.window % cfg.par.page_tokens)
        return cli_usage_error("sim", "--window must be a multiple of the page (%d tokens)",
                               cfg.par.page_tokens);
    ws_policy_kind one = WS_POLICY_WRITESCOPE;
    if (policy && strcmp(policy, "all")) {
        all = 0;
        if (ws_policy_from_name(policy, &one, &err))
            return cli_fail(&err);
    }
    sim_export_trace_opts topts_ct = {.max_spans = 200000};
    if (ctrace_lim_s) {
        long long lim;
        if (!ctrace)
            return cli_usage_error("sim", "--chrome-trace-limit goes with --chrome-trace");
        if (ws_parse_int64(ctrace_lim_s, 0, 1LL << 40, &lim))
            return cli_usage_error("sim", "--chrome-trace-limit needs a count of spans, not '%s'",
                                   ctrace_lim_s);
        topts_ct.max_spans = (size_t)lim;
    }
    if (ctrace && all)
        return cli_usage_error("sim", "--chrome-trace holds the timeline of one run: give one "
                                      "--policy");
    const int store_runs = db || save;
    if (store_runs ? cli_open_store(db, &s, &err) : cli_open_store_ro(db, &s, &embedded, &err))
        return cli_fail(&err);
    ws_model m;
    ws_cost_hw hw;
    int cores = 1;
    char this_host[64];
    rc = cli_host_this(s, &host, this_host, sizeof this_host, &err);
    if (!rc)
        rc = ws_hw_load(s, model, gpu, host, WS_DT_BF16, &m, &hw, &cores, &err);
    if (!store_runs) {
        ws_store_close(s);
        s = NULL;
    }
    if (rc) {
        ws_store_close(s);
        return cli_fail(&err);
    }
    sim_sink *sink = NULL;
    if ((store_runs || csv || ctrace) &&
        sim_sink_open(s, csv, ctrace, &topts_ct, &sink, &err)) {
        ws_store_close(s);
        return cli_fail(&err);
    }
    char gen_desc[256] = "", gen_line[256] = "";
    if (arrivals) {
        char pd[64], od[64], th[64];
        ws_trace_len_format(&tg.prompt, pd, sizeof pd);
        ws_trace_len_format(&tg.output, od, sizeof od);
        ws_trace_think_format(&tg, th, sizeof th);
        if (tg.arrivals == WS_ARRIVALS_CLOSED) {
            snprintf(gen_desc, sizeof gen_desc,
                     "arrivals=closed clients=%d think=%s requests=%llu prompt=%s output=%s",
                     tg.clients, th, (unsigned long long)tg.requests, pd, od);
            snprintf(gen_line, sizeof gen_line,
                     "%llu requests from a closed loop of %d clients, think time %s (s)",
                     (unsigned long long)tg.requests, tg.clients, th);
        } else {
            char cv[32] = "";
            if (tg.arrivals == WS_ARRIVALS_GAMMA)
                snprintf(cv, sizeof cv, " cv=%g", tg.cv);
            snprintf(gen_desc, sizeof gen_desc,
                     "arrivals=%s rate=%g%s requests=%llu prompt=%s output=%s", arrivals, tg.rate,
                     cv, (unsigned long long)tg.requests, pd, od);
            snprintf(gen_line, sizeof gen_line, "%llu %s arrivals at %g/s",
                     (unsigned long long)tg.requests, arrivals, tg.rate);
        }
    }
    long long first_id = 0, last_id = 0;
    cfg.cpu_workers = cores;
    ws_cost_cfg cc;
    ws_cost_cfg_default(&cc);
    cc.gpu_experts = gexp;
    cli_progress pg;
    cli_progress_start(&pg);
    cfg.keep_steps = json; /* the table needs only the totals; writers stream */
    cfg.keep_requests = json;
    cfg.progress = on_progress;
    cfg.progress_ctx = &pg;
    json_t *root = NULL, *runs = NULL;
    FILE *o = NULL;
    char *text = NULL;
    size_t text_len = 0;
    if (json) {
        root = json_object();
        runs = json_array();
        json_object_set_new(root, "source", json_string("modeled"));
        json_object_set_new(root, "model", json_string(m.name));
        json_object_set_new(root, "gpu", json_string(hw.gpu));
        json_object_set_new(root, "host", json_string(hw.host));
        json_object_set_new(root, "batch", json_integer(batch));
        if (trace)
            json_object_set_new(root, "trace", json_string(trace));
        else if (arrivals)
            json_object_set_new(root, "generator", json_string(gen_desc));
        else {
            json_object_set_new(root, "prompt", json_integer(prompt));
            json_object_set_new(root, "output", json_integer(output));
        }
        json_object_set_new(root, "detail", json_string(detail_layer ? "layer" : "step"));
        json_object_set_new(root, "seed", json_integer(seed));
    } else {
        /* The table is written when every run has succeeded: a failure prints only its
         * error. */
        o = open_memstream(&text, &text_len);
        if (!o) {
            ws_err_set(&err, WS_ENOMEM, "out of memory");
            return cli_fail(&err);
        }
        fprintf(o,
                "writescope sim: MODELED on gpu %s + host %s%s; model %s, %d of %d layers, "
                "detail %s\n",
                hw.gpu, hw.host, embedded ? " (embedded datasheet profiles)" : "", m.name,
                cfg.layers > 0 && cfg.layers < m.layers ? cfg.layers : m.layers, m.layers,
                detail_layer ? "layer" : "step");
        if (trace)
            fprintf(o, "workload: trace %s, at most %d running\n", trace, cfg.batch);
        else if (arrivals) {
            char a[64], b[64];
            ws_trace_len_format(&tg.prompt, a, sizeof a);
            ws_trace_len_format(&tg.output, b, sizeof b);
            fprintf(o, "workload: %s, prompts %s, outputs %s, seed %lld, at most %d running\n",
                    gen_line, a, b, seed, cfg.batch);
        } else
            fprintf(o,
                    "workload: closed batch of %d requests x (%d prompt + %d output) tokens, at "
                    "most %d running\n",
                    batch, prompt, output, cfg.batch);
        print_header(o);
    }
    for (int k = 0; k < WS_POLICY_COUNT; k++) {
        if (!all && k != (int)one)
            continue;
        cfg.policy = (ws_policy_kind)k;
        sim_closed c;
        sim_source src;
        ws_trace *t = NULL;
        sim_results r;
        rc = 0;
        if (trace)
            rc = ws_trace_open(trace, &topts, &t, &err);
        else if (arrivals)
            rc = ws_trace_gen_open(&tg, &t, &err);
        else
            sim_closed_source(&c, batch, prompt, output, &src);
        if (!rc && t)
            rc = sim_trace_source(t, &src, &err);
        const sim_record_meta meta = {
            .model = m.name,
            .gpu = hw.gpu,
            .host = hw.host,
            .workload = trace ? "trace" : arrivals ? "generator" : "closed",
            .prompt = trace || arrivals ? 0 : prompt,
            .output = trace || arrivals ? 0 : output,
            .trace_path = trace,
            .trace_format = trace && t ? ws_trace_format_name(ws_trace_format_of(t)) : NULL,
            .generator = arrivals ? gen_desc : NULL,
            .gpu_experts = gexp};
        if (!rc && sink)
            rc = sim_sink_begin(sink, &cfg, &meta, &err);
        if (!rc) {
            rc = sim_run(&m, &hw, &cc, &cfg, &src, &r, &err);
            if (sink)
                rc = rc ? (sim_sink_fail(sink), rc) : sim_sink_end(sink, &r, &err);
            if (rc && !err.code)
                err.code = rc;
        }
        if (!rc && sink && store_runs) {
            last_id = sim_sink_run_id(sink);
            if (!first_id)
                first_id = last_id;
        }
        if (t) {
            const ws_trace_counts *tc = ws_trace_get_counts(t);
            if (!rc && (tc->bad || tc->failed) && !json && k == (int)(all ? 0 : one))
                fprintf(o, "trace: %llu malformed rows skipped, %llu failed requests skipped%s%s\n",
                        (unsigned long long)tc->bad, (unsigned long long)tc->failed,
                        tc->first_bad[0] ? "; first: " : "", tc->first_bad);
            ws_trace_close(t);
        }
        cli_progress_end(&pg);
        if (rc) {
            sim_sink_abort(sink);
            ws_store_close(s);
            json_decref(root);
            json_decref(runs);
            if (o)
                fclose(o);
            free(text);
            return cli_fail(&err);
        }
        if (json) {
            json_t *x = totals_json(&r);
            if (store_runs)
                json_object_set_new(x, "run_id", json_integer(last_id));
            json_array_append_new(runs, x);
        } else
            print_row(o, &r, cfg.slo_ttft > 0 || cfg.slo_tpot > 0);
        sim_results_free(&r);
    }
    const size_t spans = sink ? sim_sink_trace_written(sink) : 0,
                 dropped = sink ? sim_sink_trace_dropped(sink) : 0;
    char dbpath[WS_PATH_MAX] = "";
    if (s)
        snprintf(dbpath, sizeof dbpath, "%s", ws_store_path(s));
    rc = sink ? sim_sink_close(sink, &err) : 0;
    ws_store_close(s);
    if (rc) {
        json_decref(root);
        json_decref(runs);
        if (o)
            fclose(o);
        free(text);
        return cli_fail(&err);
    }
    if (json) {
        json_object_set_new(root, "runs", runs);
        json_t *w = json_object();
        if (store_runs) {
            json_object_set_new(w, "database", json_string(dbpath));
            json_object_set_new(w, "first_run_id", json_integer(first_id));
            json_object_set_new(w, "last_run_id", json_integer(last_id));
        }
        if (csv)
            json_object_set_new(w, "csv", json_string(csv));
        if (ctrace) {
            json_object_set_new(w, "chrome_trace", json_string(ctrace));
            json_object_set_new(w, "chrome_trace_spans", json_integer((json_int_t)spans));
            json_object_set_new(w, "chrome_trace_dropped", json_integer((json_int_t)dropped));
        }
        json_object_set_new(root, "written", w);
        return cli_print_json(root);
    }
    if (store_runs)
        fprintf(o, "stored: runs %lld-%lld in %s (modeled)\n", first_id, last_id, dbpath);
    if (csv)
        fprintf(o, "csv: %s/requests.csv, steps.csv, summary.csv\n", csv);
    if (ctrace)
        fprintf(o, "chrome trace: %s, %zu spans (%zu more left out by the limit)\n", ctrace, spans,
                dropped);
    fclose(o);
    fwrite(text, 1, text_len, stdout);
    free(text);
    return CLI_EXIT_OK;
}
