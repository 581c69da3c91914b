/* cmd_sim: `writescope sim` -- a workload through the discrete-event simulator under one or
 * every KV policy, and `writescope sim grid` -- the reference paper's grid. Parsing, loading
 * the profiles and printing only: a workload's runs are one sim_job_run (sim/job.h), the
 * grid's points sim_grid_eval spread over the ranks and stored by sim_grid_store. Every
 * figure is modeled from the named profiles and says so. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "convert.h"
#include "grid.h"
#include "hw.h"
#include "job.h"
#include "record.h"
#include "serve.h"
#include "store.h"
#include "trace.h"
#include "trace_gen.h"
#include "workload.h"
#include "ws_par.h"
#include "ws_util.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: writescope sim --model NAME --gpu PROFILE --host PROFILE\n"
            "           [--batch B] [--prompt N --output M | --trace FILE [--format F]\n"
            "           [--skip-bad] | --arrivals poisson|gamma|closed [--rate R] [--cv C]\n"
            "           [--clients C] [--think T] --requests K --prompt-dist SPEC\n"
            "           --output-dist SPEC] [--policy NAME[,NAME...]|all] [--r R]\n"
            "           [--r-max R] [--detail step|layer] [--layers K]\n"
            "           [--slo-ttft S --slo-tpot S]\n"
            "           [--seed S] [--chunk T] [--prefill auto|cpu|gpu] [--window W]\n"
            "           [--gpu-kv-gb G] [--gpu-experts E] [--host-mem G]\n"
            "           [--cpu-sockets N] [--one-node-memory]\n"
            "           [--db PATH | --save] [--csv DIR] [--chrome-trace FILE\n"
            "           [--chrome-trace-limit N]] [--json]\n"
            "       writescope sim grid [--host PROFILE] [--model NAME] [--gpu PROFILE]\n"
            "           [--detail step|layer] [--db PATH | --save] [--json]\n"
            "\n"
            "Simulates decode and chunked prefill of an MoE model on a GPU and a host described\n"
            "by hardware profiles (datasheet names such as a100-40gb-pcie, v100-32gb-pcie,\n"
            "xeon-gold-5318y, or calibrated ones; see `writescope db show`; --host this: this\n"
            "machine's newest calibration), under the KV policies writescope, gpu-only,\n"
            "ktrans, stream, cpu-attn, static (--r) and migrate: a comma-separated list of\n"
            "them, or all (--policy all, the default).\n"
            "\n"
            "Workload: a closed batch of B requests of N prompt and M output tokens at time 0\n"
            "(defaults 4, 2048, 256); or a trace FILE (ours, azure, mooncake, burstgpt, vidur;\n"
            "detected, or --format); or a generator (as `writescope trace gen`, seeded by\n"
            "--seed): open arrivals (poisson, gamma) at --rate R, or a closed loop of\n"
            "--clients C, each sending its next request --think T (S or exp:S: exponential of\n"
            "mean S seconds; fixed:S; default 0) after its previous one ends, K requests in\n"
            "all. Continuous batching up to --batch sequences (32 for traces) within the GPU's\n"
            "KV budget (--gpu-kv-gb).\n"
            "\n"
            "Prints per policy: requests served and OOM, output tokens/s over the makespan,\n"
            "decode tokens/s over the decode steps, TTFT and TPOT percentiles, goodput under\n"
            "the SLOs, the policy's last target share r* and the realised share r, steps,\n"
            "events and wall time. --json adds every request and every step.\n"
            "Percentiles are exact up to 4096 served requests, then read from a log-bucketed\n"
            "histogram within 0.5%% relative error (memory does not grow with the trace).\n"
            "Results (--db, --save, --csv, --chrome-trace) are streamed as the run plays, one\n"
            "database transaction per run. All figures are modeled (discrete-event simulation\n"
            "on the profiles named).\n"
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

/* A time that may be missing (NAN, or negative for a request that never got there): null. */
static json_t *time_json(double v)
{
    return isfinite(v) && v >= 0 ? json_real(v) : json_null();
}

/* The memory tiers of sim_totals.kv_oom_need, as the table names them. */
static const char *const k_kv_tier[3] = {"GPU KV budget", "host DRAM left beside the weights",
                                         "pinned-memory limit"};

/* The first tier a KV out-of-memory request overflows. */
static int kv_oom_tier(const sim_totals *t)
{
    for (int k = 0; k < 3; k++)
        if (t->kv_oom_need[k] > t->kv_oom_room[k])
            return k;
    return 0;
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
    json_object_set_new(o, "ttft_p50_s", time_json(t->ttft_p50));
    json_object_set_new(o, "ttft_p90_s", time_json(t->ttft_p90));
    json_object_set_new(o, "ttft_p99_s", time_json(t->ttft_p99));
    json_object_set_new(o, "tpot_p50_s", time_json(t->tpot_p50));
    json_object_set_new(o, "tpot_p90_s", time_json(t->tpot_p90));
    json_object_set_new(o, "tpot_p99_s", time_json(t->tpot_p99));
    json_object_set_new(o, "goodput_rps", json_real(t->goodput_rps));
    json_object_set_new(o, "slo_fraction", json_real(t->slo_frac));
    json_object_set_new(o, "rstar_last", json_real(t->rstar_last));
    json_object_set_new(o, "r_realised_last", json_real(t->r_final));
    json_object_set_new(o, "busy_s", busy_json(t->busy));
    json_object_set_new(o, "steps", json_integer((json_int_t)t->steps));
    json_object_set_new(o, "events", json_integer((json_int_t)t->events));
    json_object_set_new(o, "folded_layers", json_integer((json_int_t)t->folded_layers));
    json_object_set_new(o, "fold_inexact_steps", json_integer((json_int_t)t->fold_inexact));
    json_object_set_new(o, "prefill_cpu_steps", json_integer((json_int_t)t->prefill_cpu_steps));
    json_object_set_new(o, "prefill_gpu_steps", json_integer((json_int_t)t->prefill_gpu_steps));
    json_object_set_new(o, "preempted", json_integer((json_int_t)t->preempted));
    json_object_set_new(o, "kv_oom", json_integer((json_int_t)t->kv_oom));
    if (t->kv_oom) {
        json_t *k = json_object();
        const int tier = kv_oom_tier(t);
        json_object_set_new(k, "tier", json_string(k_kv_tier[tier]));
        json_object_set_new(k, "tokens", json_integer(t->kv_oom_tokens));
        json_object_set_new(k, "kv_bytes", json_real(t->kv_oom_need[tier]));
        json_object_set_new(k, "room_bytes", json_real(t->kv_oom_room[tier]));
        json_object_set_new(o, "kv_oom_first", k);
    }
    json_object_set_new(o, "prefix_blocks", json_integer((json_int_t)t->prefix_blocks));
    json_object_set_new(o, "prefix_hits", json_integer((json_int_t)t->prefix_hits));
    json_object_set_new(o, "prefix_repeats", json_integer((json_int_t)t->prefix_repeats));
    json_object_set_new(o, "prefix_tier", json_string(t->prefix_tier));
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
        json_object_set_new(x, "ttft_s", time_json(q->ttft));
        json_object_set_new(x, "tpot_s", time_json(q->tpot));
        json_object_set_new(x, "e2e_s", time_json(q->e2e));
        json_array_append_new(rq, x);
    }
    json_object_set_new(o, "requests_detail", rq);
    json_t *st = json_array();
    for (size_t i = 0; i < r->n_step; i++) {
        ws_simdb_step row; /* the step as the database and the CSV hold it */
        sim_record_step(&r->step[i], &row);
        json_array_append_new(st, ws_row_json(ws_step_cols, &row));
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

/* A percentile for the table: "0.123s" or "12.3ms" (scale 1e3), "n/a" when there is none. */
static const char *pct_text(double v, double scale, const char *unit, char *buf, size_t cap)
{
    if (isfinite(v))
        snprintf(buf, cap, scale > 1 ? "%.1f%s" : "%.3f%s", scale * v, unit);
    else
        snprintf(buf, cap, "n/a");
    return buf;
}

static void print_row(FILE *o, const sim_results *r, int slo)
{
    const sim_totals *t = &r->tot;
    char a[32], b[32], c[32], d[32];
    fprintf(o,
            "%-10s %6llu %4llu %10.1f %10.1f %9s %9s %9s %9s %6.3f %6.3f %7llu "
            "%9llu %7.3fs",
            r->policy, (unsigned long long)t->served, (unsigned long long)t->oom, t->tokens_per_s,
            t->decode_tps, pct_text(t->ttft_p50, 1, "s", a, sizeof a),
            pct_text(t->ttft_p99, 1, "s", b, sizeof b),
            pct_text(t->tpot_p50, 1e3, "ms", c, sizeof c),
            pct_text(t->tpot_p99, 1e3, "ms", d, sizeof d), t->rstar_last, t->r_final,
            (unsigned long long)t->steps, (unsigned long long)t->events, t->wall_s);
    if (slo)
        fprintf(o, "  goodput %.3f req/s (%.0f%% within SLO)", t->goodput_rps, 100 * t->slo_frac);
    if (t->prefill_cpu_steps + t->prefill_gpu_steps)
        fprintf(o, "  prefill experts: cpu %llu gpu %llu chunks",
                (unsigned long long)t->prefill_cpu_steps, (unsigned long long)t->prefill_gpu_steps);
    if (t->prefix_blocks)
        fprintf(o, "  prefix hits (%s): %.1f%% of %llu blocks (the trace repeats %.1f%%)",
                t->prefix_tier, 100.0 * t->prefix_hits / t->prefix_blocks,
                (unsigned long long)t->prefix_blocks, 100.0 * t->prefix_repeats / t->prefix_blocks);
    if (t->preempted)
        fprintf(o, "  preempted %llu", (unsigned long long)t->preempted);
    /* why every request was out of memory, where it is the weights */
    const double G = 1073741824.0;
    if (t->no_room)
        fprintf(o, "  OOM: weights %.1f GiB + KV budget %.1f GiB exceed the GPU's %.1f GiB",
                t->gpu_weight_bytes / G, t->gpu_kv_budget / G, t->gpu_mem / G);
    else if (t->no_host_room)
        fprintf(o, "  OOM: CPU-resident weights %.1f GiB exceed host memory %.1f GiB",
                t->host_weight_bytes / G, t->host_mem / G);
    else if (t->kv_oom) {
        const int k = kv_oom_tier(t);
        fprintf(o, "  OOM: %llu request(s) whose own KV exceeds the %s (first: %d tokens, "
                   "%.3g GiB > %.3g GiB)",
                (unsigned long long)t->kv_oom, k_kv_tier[k], t->kv_oom_tokens,
                t->kv_oom_need[k] / G, t->kv_oom_room[k] / G);
    }
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

static void grid_json_points(json_t *root, const sim_grid_point *p, size_t n)
{
    json_t *pts = json_array();
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
}

static const int k_baselines[] = {WS_POLICY_GPU_ONLY, WS_POLICY_KTRANS, WS_POLICY_STREAM,
                                  WS_POLICY_CPU_ATTN, WS_POLICY_STATIC, WS_POLICY_MIGRATE};
#define N_BASELINES ((int)(sizeof k_baselines / sizeof k_baselines[0]))

/* What a stored grid wrote: its row, its runs and the database. */
typedef struct grid_written {
    ws_simdb_grid gr;
    long long first, last;
    char dbpath[WS_PATH_MAX];
} grid_written;

static int grid_json(const char *host, int embedded, const sim_grid_point *p, size_t n,
                     const grid_written *wr)
{
    json_t *root = json_object();
    json_object_set_new(root, "source", json_string("modeled"));
    json_object_set_new(root, "host", json_string(host));
    json_object_set_new(root, "embedded_profiles", json_boolean(embedded));
    grid_json_points(root, p, n);
    json_t *sp = json_array();
    for (int g = 0; g < SIM_GRID_GPUS; g++)
        for (int m = -1; m < SIM_GRID_MODELS; m++)
            for (int b = 0; b < N_BASELINES; b++) {
                int k;
                double v = sim_grid_speedup(p, n, m, g, k_baselines[b], 8192, &k);
                if (!k)
                    continue;
                json_t *x = json_object();
                json_object_set_new(x, "gpu", json_string(sim_grid_gpus[g]));
                json_object_set_new(x, "model",
                                    m < 0 ? json_string("all") : json_string(sim_grid_models[m]));
                json_object_set_new(x, "baseline", json_string(ws_policy_name(k_baselines[b])));
                json_object_set_new(x, "geomean_speedup", json_real(v));
                json_object_set_new(x, "points", json_integer(k));
                json_array_append_new(sp, x);
            }
    json_object_set_new(root, "speedups_ge_8k", sp);
    if (wr) {
        json_t *w = json_object();
        json_object_set_new(w, "database", json_string(wr->dbpath));
        json_object_set_new(w, "grid_id", json_integer(wr->gr.id));
        json_object_set_new(w, "first_run_id", json_integer(wr->first));
        json_object_set_new(w, "last_run_id", json_integer(wr->last));
        json_object_set_new(root, "written", w);
    }
    return cli_print_json(root);
}

/* One model on one GPU: decode tokens/s per batch, prompt and policy, and the speedups. */
static void grid_print_table(const char *host, const sim_grid_point *p, size_t n, int m, int g)
{
    int any = 0;
    for (size_t i = 0; i < n; i++)
        any |= p[i].model == m && p[i].gpu == g;
    if (!any)
        return;
    printf("\n%s on %s + %s (modeled)\n%-6s %-6s", sim_grid_models[m], sim_grid_gpus[g], host,
           "batch", "prompt");
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
    for (int b = 0; b < N_BASELINES; b++) {
        int k;
        double v = sim_grid_speedup(p, n, m, g, k_baselines[b], 8192, &k);
        if (k)
            printf(" %s %.2fx", ws_policy_name(k_baselines[b]), v);
        else
            printf(" %s n/a", ws_policy_name(k_baselines[b]));
    }
    printf("\n");
}

/* One GPU's summary over the models, beside the paper's figures. */
static void grid_print_summary(const sim_grid_point *p, size_t n, int g)
{
    int any = 0;
    for (size_t i = 0; i < n; i++)
        any |= p[i].gpu == g;
    if (!any)
        return;
    const sim_paper_range *pr = g == 0 ? &sim_paper_a100 : &sim_paper_v100;
    printf("%s: writescope speedup over", sim_grid_gpus[g]);
    for (int b = 0; b < N_BASELINES; b++) {
        int k;
        double v = sim_grid_speedup(p, n, -1, g, k_baselines[b], 8192, &k);
        if (k)
            printf(" %s %.2fx [%d]", ws_policy_name(k_baselines[b]), v, k);
        else
            printf(" %s n/a", ws_policy_name(k_baselines[b]));
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
        printf("    static r=0.5 / writescope per model %.2f-%.2f (paper %.2f-%.2f)\n", slo, shi,
               sim_paper_static.lo, sim_paper_static.hi);
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
        if (pts &&
            (pol == WS_POLICY_WRITESCOPE || pol == WS_POLICY_GPU_ONLY || pol == WS_POLICY_KTRANS))
            printf("    32 x 32K (~1M tokens), %d model(s): %-10s served %llu, OOM %llu\n", pts,
                   ws_policy_name(pol), (unsigned long long)served, (unsigned long long)oom);
    }
}

static void grid_print(const char *host, int embedded, const sim_grid_point *p, size_t n,
                       const grid_written *wr)
{
    printf("writescope sim grid: MODELED (discrete-event simulation) on host profile %s%s;\n"
           "decode tokens/s per policy, 256 output tokens, closed batches; OOM: no request\n"
           "fitted the memory limits (x/N: N requests did not).\n",
           host, embedded ? " (embedded datasheet profiles)" : "");
    for (int m = 0; m < SIM_GRID_MODELS; m++)
        for (int g = 0; g < SIM_GRID_GPUS; g++)
            grid_print_table(host, p, n, m, g);
    printf("\nsummary, modeled; geometric means over models, batches and prompts >= 8K where\n"
           "both policies served every request (points in brackets); the paper's beside\n");
    for (int g = 0; g < SIM_GRID_GPUS; g++)
        grid_print_summary(p, n, g);
    printf("    paper at 32 x 32K: vLLM, SGLang and KTransformers run out of memory; WriteScope "
           "serves\n");
    if (wr)
        printf("stored: grid %lld, runs %lld-%lld in %s (modeled)\n", wr->gr.id, wr->first,
               wr->last, wr->dbpath);
}

/* The grid's options: its host, and one model or GPU of it when named. */
static int grid_opts(const ws_par *par, const char *host, const char *model, const char *gpu,
                     int detail_layer, sim_grid_opts *o)
{
    const int rank = ws_par_rank(par);
    sim_grid_opts_default(o);
    if (host)
        o->host = host;
    o->detail_layer = detail_layer;
    if (model && (o->only_model = find_model_index(model)) < 0) {
        if (!rank)
            fprintf(stderr, "writescope: sim grid: model '%s' is not in the grid (%s, %s, %s)\n",
                    model, sim_grid_models[0], sim_grid_models[1], sim_grid_models[2]);
        return CLI_EXIT_FAIL;
    }
    if (gpu && (o->only_gpu = find_gpu_index(gpu)) < 0) {
        if (!rank)
            fprintf(stderr, "writescope: sim grid: GPU '%s' is not in the grid (%s, %s)\n", gpu,
                    sim_grid_gpus[0], sim_grid_gpus[1]);
        return CLI_EXIT_FAIL;
    }
    return 0;
}

static int cmd_grid(ws_par *par, const char *db, int store_runs, const char *host,
                    const char *model, const char *gpu, int detail_layer, int json)
{
    const int rank = ws_par_rank(par);
    sim_grid_opts o;
    int rc = grid_opts(par, host, model, gpu, detail_layer, &o);
    if (rc)
        return rc;
    /* Rank 0 creates or migrates the database before the others open it to read profiles. */
    ws_err err = {0};
    char this_host[64];
    ws_store *s = NULL;
    int embedded = 0;
    rc = cli_open_store_ranks(par, db, store_runs, &s, &embedded, &err);
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
    grid_written wr = {0};
    if (!rc && store_runs) { /* every rank exits non-zero when rank 0 could not store */
        if (!rank) {
            snprintf(wr.dbpath, sizeof wr.dbpath, "%s", ws_store_path(s));
            rc = sim_grid_store(s, &o, ws_par_size(par), p, n, &wr.gr, &wr.first, &wr.last, &err);
        }
        rc = ws_par_agree(par, rc, &err);
    }
    ws_store_close(s);
    if (rc || rank) {
        free(p);
        return rc ? grid_fail(par, &err) : CLI_EXIT_OK;
    }
    if (json)
        rc = grid_json(o.host, embedded, p, n, store_runs ? &wr : NULL);
    else
        grid_print(o.host, embedded, p, n, store_runs ? &wr : NULL);
    free(p);
    return rc;
}

typedef struct sim_opts {
    cli_workload w;
    const char *gpu, *csv, *ctrace;
    long long ctrace_limit;
} sim_opts;

#define SO sim_opts
static const cli_optdef k_opts[] = {
    {CLI_GROUP(SO, w, cli_workload, cli_workload_opts)},
    {"gpu", CLI_STR(SO, gpu), .arg = "PROFILE",
     .help = "the GPU's hardware profile: a datasheet name (a100-40gb-pcie, v100-32gb-pcie) or "
             "a calibrated one (gpu:<device name>)"},
    {CLI_GROUP(SO, w, cli_workload, cli_engine_opts)},
    {CLI_GROUP(SO, w, cli_workload, cli_sim_opts)},
    {CLI_GROUP(SO, w, cli_workload, cli_trace_opts)},
    {CLI_GROUP(SO, w, cli_workload, cli_gen_opts)},
    {CLI_GROUP(SO, w, cli_workload, cli_closed_opts)},
    {CLI_GROUP(SO, w, cli_workload, cli_serve_opts)},
    {"batch", CLI_TUNE,
     .help = "the most sequences running at once (continuous batching; default 4, the "
             "closed batch, or 32 for traces and generators)"},
    {"prompt", CLI_TUNE, .lo = 1, .hi = 1 << 26, .def = "2048"},
    {"output", CLI_TUNE, .lo = 1, .hi = 1 << 26, .def = "256"},
    {"detail", CLI_TUNE,
     .help = "layer (the default; sim grid: step) plays every layer as "
             "operations; step folds the identical layers (the same "
             "results where the pipeline is periodic, much faster)"},
    {"db", CLI_TUNE,
     .help = "read the profiles from PATH and store every run there (tables sim_runs, "
             "sim_requests, sim_steps; created or migrated as needed)"},
    {"r-max", CLI_DOUBLE(SO, w.r_max), .arg = "R", .lo = 0, .hi = 1, .def = "1",
     .help = "clips the share r* that writescope and migrate aim for (1: no clip)"},
    {"slo-ttft", CLI_DOUBLE(SO, w.slo_ttft), .arg = "S", .lo = 0, .hi = 1e9,
     .help = "time-to-first-token SLO (seconds) for the goodput"},
    {"slo-tpot", CLI_DOUBLE(SO, w.slo_tpot), .arg = "S", .lo = 0, .hi = 1e9,
     .help = "time-per-output-token SLO (seconds) for the goodput"},
    {CLI_GROUP(SO, w, cli_workload, cli_window_opts)},
    {"gpu-kv-gb", CLI_DOUBLE(SO, w.kv_gb), .arg = "G", .lo = 0.001, .hi = 1e6,
     .help = "the GPU's KV budget in GiB, by default 2 (0.3 for MLA models); a request that "
             "can never fit is counted as an out-of-memory (OOM) outcome"},
    {"gpu-experts", CLI_INT(SO, w.gpu_experts), .arg = "E", .lo = 0, .hi = 65536, .def = "0",
     .help = "routed experts per layer resident on the GPU (KTransformers' GPU experts)"},
    {CLI_GROUP(SO, w, cli_workload, cli_host_opts)},
    {CLI_GROUP(SO, w, cli_workload, cli_format_opts)},
    {"csv", CLI_STR(SO, csv), .arg = "DIR",
     .help = "DIR/requests.csv, steps.csv, summary.csv (every policy run)"},
    {"chrome-trace", CLI_STR(SO, ctrace), .arg = "FILE",
     .help = "the operation timeline of one run (one --policy) for Perfetto"},
    {"chrome-trace-limit", CLI_LL(SO, ctrace_limit), .arg = "N", .lo = 0, .hi = 1LL << 40,
     .def = "200000", .err = "--chrome-trace-limit needs a count of spans, not '%s'",
     .help = "the most spans of --chrome-trace (0: all)"},
    {0}};
#undef SO
static const cli_spec k_spec = {"sim", k_opts, 2, usage};

/* One `writescope sim`: the job as the library takes it (sim/job.h), what was loaded for
 * it, and how its runs are printed. */
typedef struct sim_cmd {
    const sim_opts *o;
    const cli_args *a;
    ws_server eng; /* --engine, as read (eng.name empty: none) */
    sim_job_cfg jc;
    ws_trace_gen tg;
    ws_model m;
    ws_hw hw;
    ws_store *s; /* open while the runs are stored */
    int store_runs, embedded, runs_done;
    char gen_desc[256], gen_line[256];
    cli_progress pg;
    json_t *root, *runs; /* --json */
    FILE *out;           /* the table, written to stdout when every run has succeeded */
    char *text;
    size_t text_len;
} sim_cmd;

/* The workload and the simulation's settings from the options; usage errors first. */
static int sim_check(const cli_args *a, sim_cmd *j)
{
    const sim_opts *o = j->o;
    const cli_workload *w = &o->w;
    sim_job_cfg *jc = &j->jc;
    const char *trace = w->trace, *arrivals = w->gen.arrivals;
    jc->budget_given = cli_given(a, "gpu-kv-gb") > 0;
    if (!w->model || !o->gpu || !w->host)
        return cli_usage_error("sim", "--model, --gpu and --host are required");
    if (w->db && w->save)
        return cli_usage_error("sim", "--db and --save both name the database: give one");
    if (trace && arrivals)
        return cli_usage_error("sim", "--trace and --arrivals are two different workloads");
    if ((trace || arrivals) && (cli_given(a, "prompt") || cli_given(a, "output")))
        return cli_usage_error("sim", "--prompt and --output make a closed batch; a trace or a "
                                      "generator gives its own lengths");
    jc->trace = trace;
    jc->topts = (ws_trace_opts){.format = WS_TRACE_AUTO, .skip_bad = w->skip_bad};
    ws_err err = {0};
    if (w->format && ws_trace_format_parse(w->format, &jc->topts.format, &err))
        return cli_usage_error("sim", "%s", err.msg);
    int rc;
    const cli_gen_args *g = &w->gen;
    if (arrivals && (rc = cli_gen_parse("sim", g, &j->tg)))
        return rc;
    if (!arrivals &&
        (g->rate || g->cv || g->clients || g->think || g->requests || g->pdist || g->odist))
        return cli_usage_error("sim", "--rate, --cv, --clients, --think, --requests and the "
                                      "length specs go with --arrivals");
    if ((rc = cli_to_sim_cfg("sim", a, w, &jc->cfg)))
        return rc;
    jc->gen = arrivals ? &j->tg : NULL;
    j->tg.seed = jc->cfg.seed;
    jc->n = jc->cfg.batch;
    jc->prompt = w->prompt;
    jc->output = w->output;
    if ((rc = cli_policy_list("sim", w->policy, &jc->policies)) ||
        (rc = cli_policy_opts("sim", a, w->policy, jc->policies)))
        return rc;
    jc->ct = (sim_export_trace_opts){.max_spans = (size_t)o->ctrace_limit};
    if (cli_given(a, "chrome-trace-limit") && !o->ctrace)
        return cli_usage_error("sim", "--chrome-trace-limit goes with --chrome-trace");
    if (o->ctrace && (jc->policies & (jc->policies - 1)))
        return cli_usage_error("sim", "--chrome-trace holds the timeline of one run: give one "
                                      "--policy");
    jc->csv = o->csv;
    jc->chrome_trace = o->ctrace;
    return cli_to_cost_cfg("sim", a, w, &jc->cc);
}

/* The store (kept open only to write runs), the model and profiles. */
static int sim_open(sim_cmd *j)
{
    const sim_opts *o = j->o;
    sim_job_cfg *jc = &j->jc;
    ws_err err = {0};
    j->store_runs = o->w.db || o->w.save;
    if (j->store_runs ? cli_open_store(o->w.db, &j->s, &err)
                      : cli_open_store_ro(o->w.db, &j->s, &j->embedded, &err))
        return cli_fail(&err);
    char this_host[64];
    const char *host = o->w.host;
    int rc = cli_host_this(j->s, &host, this_host, sizeof this_host, &err);
    if (!rc)
        rc = ws_hw_load(j->s, o->w.model, o->gpu, host, jc->cc.kv_dtype, &j->m, &j->hw, NULL,
                        &err);
    if (!j->store_runs) {
        ws_store_close(j->s);
        j->s = NULL;
    }
    if (rc)
        return cli_fail(&err);
    if ((rc = cli_serve_engine("sim", j->a, &o->w, &j->hw, &j->m, &jc->cfg, &jc->cc, &j->eng)))
        return rc;
    if (jc->cfg.layers > j->m.layers)
        return cli_usage_error("sim", "--layers %d: model %s has %d layers", jc->cfg.layers,
                               j->m.name, j->m.layers);
    jc->cfg.cpu_workers = ws_hw_cores(&j->hw);
    if (ws_deploy_check_host(&j->hw, &jc->cc, &err))
        return cli_usage_error("sim", "%s", err.msg);
    jc->m = &j->m;
    jc->hw = &j->hw;
    jc->db = j->s;
    return 0;
}

/* The generator in words: for the database and the JSON (gen_desc) and the table
 * (gen_line). */
static void sim_describe_gen(sim_cmd *j)
{
    const ws_trace_gen *tg = &j->tg;
    sim_job_gen_desc(tg, j->gen_desc, sizeof j->gen_desc);
    j->jc.gen_desc = j->gen_desc;
    if (tg->arrivals == WS_ARRIVALS_CLOSED) {
        char th[64];
        ws_trace_think_format(tg, th, sizeof th);
        snprintf(j->gen_line, sizeof j->gen_line,
                 "%llu requests from a closed loop of %d clients, think time %s (s)",
                 (unsigned long long)tg->requests, tg->clients, th);
        return;
    }
    snprintf(j->gen_line, sizeof j->gen_line, "%llu %s arrivals at %g/s",
             (unsigned long long)tg->requests, ws_trace_arrivals_name(tg->arrivals), tg->rate);
}

/* Part i's weight format as the runs use it: the format given, else the model's dtype. */
static const char *part_format(const sim_cmd *j, int i)
{
    const ws_deploy_cfg *c = &j->jc.cc;
    const ws_wformat *f[4] = {c->w_gpu, c->w_gpu_experts, c->w_shared, c->w_cpu_experts};
    return f[i] ? f[i]->name : ws_dtype_name(j->m.weight_dtype);
}

static const char *const k_parts[4] = {"attention and dense", "GPU experts", "shared experts",
                                       "CPU experts"};

static void sim_json_begin(sim_cmd *j)
{
    const sim_job_cfg *jc = &j->jc;
    json_t *root = j->root = json_object();
    j->runs = json_array();
    json_object_set_new(root, "source", json_string("modeled"));
    json_object_set_new(root, "model", json_string(j->m.name));
    json_object_set_new(root, "gpu", json_string(j->hw.gpu));
    json_object_set_new(root, "host", json_string(j->hw.host));
    json_object_set_new(root, "batch", json_integer(jc->cfg.batch));
    if (jc->trace)
        json_object_set_new(root, "trace", json_string(jc->trace));
    else if (jc->gen)
        json_object_set_new(root, "generator", json_string(j->gen_desc));
    else {
        json_object_set_new(root, "prompt", json_integer(jc->prompt));
        json_object_set_new(root, "output", json_integer(jc->output));
    }
    json_object_set_new(root, "detail", json_string(jc->cfg.detail_layer ? "layer" : "step"));
    static const char *const keys[4] = {"gpu", "gpu_experts", "shared_experts", "cpu_experts"};
    json_t *wf = json_object();
    for (int i = 0; i < 4; i++)
        json_object_set_new(wf, keys[i], json_string(part_format(j, i)));
    json_object_set_new(root, "weights", wf);
    json_object_set_new(root, "seed", json_integer(j->o->w.seed));
}

/* The table's head, into j->out (a memory stream: a failure prints only its error). */
static int sim_table_begin(sim_cmd *j)
{
    FILE *o = j->out = open_memstream(&j->text, &j->text_len);
    if (!o) {
        ws_err err;
        ws_err_set(&err, WS_ENOMEM, "out of memory");
        return cli_fail(&err);
    }
    const sim_job_cfg *jc = &j->jc;
    const sim_cfg *c = &jc->cfg;
    const ws_model *m = &j->m;
    fprintf(o,
            "writescope sim: MODELED on gpu %s + host %s%s; model %s, %d of %d layers, "
            "detail %s\n",
            j->hw.gpu, j->hw.host, j->embedded ? " (embedded datasheet profiles)" : "", m->name,
            c->layers > 0 && c->layers < m->layers ? c->layers : m->layers, m->layers,
            c->detail_layer ? "layer" : "step");
    fprintf(o, "weights:");
    for (int i = 0; i < 4; i++)
        fprintf(o, "%s %s %s", i ? "," : "", k_parts[i], part_format(j, i));
    fprintf(o, "; KV %s\n",
            jc->cc.w_kv ? jc->cc.w_kv->name : ws_dtype_name(jc->cc.kv_dtype));
    fprintf(o, "serving: %s%s%s, %s scheduler, %d-token budget, chunk %d, prefix cache %s, "
               "preemption %s\n",
            j->eng.name[0] ? "engine " : "", j->eng.name[0] ? j->eng.name : "no engine",
            j->eng.name[0] ? " (engines/, each value's reference there)" : "",
            ws_batching_name(c->batching), c->token_budget, c->chunk,
            c->prefix_cache ? "on" : "off", ws_preempt_name(c->preempt));
    if (jc->trace) {
        fprintf(o, "workload: trace %s, at most %d running\n", jc->trace, c->batch);
    } else if (jc->gen) {
        char a[64], b[64];
        ws_trace_len_format(&j->tg.prompt, a, sizeof a);
        ws_trace_len_format(&j->tg.output, b, sizeof b);
        fprintf(o, "workload: %s, prompts %s, outputs %s, seed %lld, at most %d running\n",
                j->gen_line, a, b, j->o->w.seed, c->batch);
    } else {
        fprintf(o,
                "workload: closed batch of %d requests x (%d prompt + %d output) tokens, at "
                "most %d running\n",
                jc->n, jc->prompt, jc->output, c->batch);
    }
    print_header(o);
    return 0;
}

/* The warnings of a run whose weights leave no room: every request is an OOM outcome. */
static void sim_warn_room(const sim_results *r)
{
    const double G = 1073741824.0;
    if (r->tot.no_room)
        fprintf(stderr,
                "sim: %s: the GPU KV budget (%.3g GiB) and the %.3g GiB of weights this "
                "policy keeps on the GPU exceed its %.3g GiB: every request is an OOM "
                "outcome (lower --gpu-kv-gb)\n",
                r->policy, r->tot.gpu_kv_budget / G, r->tot.gpu_weight_bytes / G,
                r->tot.gpu_mem / G);
    if (r->tot.no_host_room)
        fprintf(stderr,
                "sim: %s: the %.3g GiB of routed experts this policy keeps on the CPU fill "
                "the host's %.3g GiB of DRAM: every request is an OOM outcome (more "
                "--gpu-experts or --host-mem)\n",
                r->policy, r->tot.host_weight_bytes / G, r->tot.host_mem / G);
}

/* A run has ended (sim_job_cfg.on_run): its warnings, then its JSON or its table row. */
static int sim_on_run(void *ctx, const sim_results *r, long long run_id,
                      const ws_trace_counts *tc, ws_err *err)
{
    (void)err;
    sim_cmd *j = ctx;
    cli_progress_end(&j->pg);
    if (tc && (tc->bad || tc->failed) && j->out && j->runs_done == 0)
        fprintf(j->out, "trace: %llu malformed rows skipped, %llu failed requests skipped%s%s\n",
                (unsigned long long)tc->bad, (unsigned long long)tc->failed,
                tc->first_bad[0] ? "; first: " : "", tc->first_bad);
    j->runs_done++;
    sim_warn_room(r);
    if (j->root) {
        json_t *x = totals_json(r);
        if (j->store_runs)
            json_object_set_new(x, "run_id", json_integer(run_id));
        json_array_append_new(j->runs, x);
    } else {
        print_row(j->out, r, j->jc.cfg.slo_ttft > 0 || j->jc.cfg.slo_tpot > 0);
    }
    return 0;
}

static void sim_cmd_free(sim_cmd *j)
{
    ws_store_close(j->s);
    json_decref(j->root);
    json_decref(j->runs);
    if (j->out)
        fclose(j->out);
    free(j->text);
}

/* The ids of the runs this command stored, consecutive ones as a range: "1-3, 7". */
static const char *id_ranges(const sim_job_out *out, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < out->n_ids && n < cap; i++) {
        int j = i;
        while (j + 1 < out->n_ids && out->ids[j + 1] == out->ids[j] + 1)
            j++;
        n += (size_t)(j > i ? snprintf(buf + n, cap - n, "%s%lld-%lld", i ? ", " : "",
                                       out->ids[i], out->ids[j])
                            : snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", out->ids[i]));
        i = j;
    }
    return buf;
}

/* What the runs wrote, after the results: the JSON's "written", or the table's last lines. */
static int sim_finish(sim_cmd *j, const sim_job_out *out)
{
    const sim_opts *o = j->o;
    char dbpath[WS_PATH_MAX] = "";
    if (j->s)
        snprintf(dbpath, sizeof dbpath, "%s", ws_store_path(j->s));
    ws_store_close(j->s);
    j->s = NULL;
    if (j->root) {
        json_object_set_new(j->root, "runs", j->runs);
        j->runs = NULL;
        json_t *w = json_object();
        if (j->store_runs) {
            json_object_set_new(w, "database", json_string(dbpath));
            json_object_set_new(w, "first_run_id", json_integer(out->first_id));
            json_object_set_new(w, "last_run_id", json_integer(out->last_id));
            json_t *ids = json_array();
            for (int i = 0; i < out->n_ids; i++)
                json_array_append_new(ids, json_integer(out->ids[i]));
            json_object_set_new(w, "run_ids", ids);
        }
        if (o->csv)
            json_object_set_new(w, "csv", json_string(o->csv));
        if (o->ctrace) {
            json_object_set_new(w, "chrome_trace", json_string(o->ctrace));
            json_object_set_new(w, "chrome_trace_spans", json_integer((json_int_t)out->spans));
            json_object_set_new(w, "chrome_trace_dropped",
                                json_integer((json_int_t)out->dropped));
        }
        json_object_set_new(j->root, "written", w);
        int rc = cli_print_json(j->root);
        j->root = NULL;
        return rc;
    }
    if (j->store_runs) {
        char ids[WS_POLICY_COUNT * 48];
        fprintf(j->out, "stored: run%s %s in %s (modeled)\n", out->n_ids > 1 ? "s" : "",
                id_ranges(out, ids, sizeof ids), dbpath);
    }
    if (o->csv)
        fprintf(j->out, "csv: %s/requests.csv, steps.csv, summary.csv\n", o->csv);
    if (o->ctrace)
        fprintf(j->out, "chrome trace: %s, %zu spans (%zu more left out by the limit)\n",
                o->ctrace, out->spans, out->dropped);
    fclose(j->out);
    j->out = NULL;
    fwrite(j->text, 1, j->text_len, stdout);
    return CLI_EXIT_OK;
}

/* Every run asked for, in one call; then what they wrote. */
static int sim_runs(sim_cmd *j)
{
    sim_job_cfg *jc = &j->jc;
    cli_progress_start(&j->pg);
    jc->cfg.keep_steps = j->o->w.json; /* the table needs only the totals; writers stream */
    jc->cfg.keep_requests = j->o->w.json;
    jc->cfg.progress = on_progress;
    jc->cfg.progress_ctx = &j->pg;
    jc->on_run = sim_on_run;
    jc->on_run_ctx = j;
    ws_err err = {0};
    sim_job_out out;
    if (sim_job_run(jc, &out, &err)) {
        cli_progress_end(&j->pg);
        return cli_fail(&err);
    }
    return sim_finish(j, &out);
}

/* `sim grid`: under mpirun/srun every rank runs this; only rank 0 prints. */
static int sim_grid_cmd(const sim_opts *o, const cli_args *a, int detail_layer)
{
    ws_err err = {0};
    ws_par *par;
    if (ws_par_init(&par, &err))
        return cli_fail(&err);
    int rc = 0;
    /* The grid fixes its own workloads and settings: an option it would ignore is refused. */
    static const char *const takes[] = {"host", "model", "gpu", "detail", "db", "save", "json"};
    for (int k = 0; k < a->n && !rc; k++) {
        int ok = 0;
        for (size_t t = 0; t < sizeof takes / sizeof takes[0]; t++)
            ok |= !strcmp(a->opt[k].name, takes[t]);
        if (!ok && a->given[k])
            rc = ws_par_rank(par) ? CLI_EXIT_USAGE
                                  : cli_usage_error("sim",
                                                    "sim grid sets its own workloads and "
                                                    "settings: --%s is for one workload "
                                                    "(grid takes --host, --model, --gpu, "
                                                    "--detail, --db or --save, --json)",
                                                    a->opt[k].name);
    }
    if (!rc && o->w.db && o->w.save)
        rc = ws_par_rank(par) ? CLI_EXIT_USAGE
                              : cli_usage_error("sim", "--db and --save both name the "
                                                       "database: give one");
    if (!rc)
        rc = cmd_grid(par, o->w.db, o->w.db || o->w.save, o->w.host, o->w.model, o->gpu,
                      detail_layer, o->w.json);
    ws_par_finalize(par);
    return rc;
}

int cmd_sim(int argc, char **argv)
{
    sim_opts o = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_spec, argc, argv, &o, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    const int grid = a.npos > 0 && !strcmp(a.pos[0], "grid");
    if (a.npos > (grid ? 1 : 0))
        return cli_usage_error("sim", "unexpected argument '%s'", a.pos[grid ? 1 : 0]);
    const int detail_layer = cli_given(&a, "detail") ? o.w.detail : !grid;
    if (grid)
        return sim_grid_cmd(&o, &a, detail_layer);
    sim_cmd j = {.o = &o, .a = &a};
    if ((rc = sim_check(&a, &j)) || (rc = sim_open(&j)))
        goto done;
    if (j.jc.gen)
        sim_describe_gen(&j);
    if (o.w.json)
        sim_json_begin(&j);
    else if ((rc = sim_table_begin(&j)))
        goto done;
    rc = sim_runs(&j);
done:
    sim_cmd_free(&j);
    return rc;
}
