/* cmd_plan: `writescope plan` -- what-if capacity planning with the simulator. Parsing and
 * printing only: the search over the ranks and its storing are ws_plan_run_all
 * (sim/plan_run.h), the figure ws_plan_plot (plots/plan_plot.h). Every figure is modeled
 * from the named profiles and says so. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cmd_plan_space.h"
#include "convert.h"
#include "plan.h"
#include "plan_plot.h"
#include "plan_run.h"
#include "plan_store.h"
#include "policy.h"
#include "store.h"
#include "trace.h"
#include "trace_gen.h"
#include "workload.h"
#include "ws_gnuplot.h"
#include "ws_par.h"
#include "ws_parse.h"
#include "ws_util.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: writescope plan --model NAME --gpu PROFILE[,PROFILE...] [--gpu ...]\n"
            "           --host PROFILE|this [--slo-ttft S] [--slo-tpot S] [--slo-pct P|pP]\n"
            "           ( --prompt N --output M [--max-users U]\n"
            "           | --trace FILE [--format F] [--skip-bad] [--requests K]\n"
            "           | --arrivals poisson|gamma [--rate R] [--cv C] [--requests K]\n"
            "             --prompt-dist SPEC --output-dist SPEC )\n"
            "           [--batch B] [--policy NAME[,NAME...]|all] [--tol T] [--start X]\n"
            "           [--max-rate R] [--price PROFILE=USD_PER_HOUR ...] [--tune]\n"
            "           [--kv-gb-list G,..] [--page-list P,..] [--window-list W,..]\n"
            "           [--fit-batches B,..|none] [--fit-max TOKENS] [--detail step|layer]\n"
            "           [--seed S] [--chunk T] [--prefill auto|cpu|gpu] [--host-mem G]\n"
            "           [--cpu-sockets N] [--one-node-memory] [--db PATH | --save]\n"
            "           [--plot FILE.png|svg|pdf] [--json]\n"
            "           [--search [--space KNOB=LIST ...]]\n"
            "\n"
            "Finds with the simulator, per GPU profile and KV policy, the highest load that\n"
            "meets the SLOs: at least P%% (--slo-pct, default 99; '99' or 'p99') of requests\n"
            "served within --slo-ttft and --slo-tpot (seconds, or with 'ms'; at least one).\n"
            "Load is an arrival rate (requests/s) for a trace (its arrivals compressed or\n"
            "stretched in time) or a generator (its rate replaced), or, for --prompt N\n"
            "--output M, the number of concurrent users: a closed batch that must all run at\n"
            "once, whose TPOT is the time of each decode step with no prefill in it.\n"
            "Search: bracket (rate x4, users x2) from --start (default: the trace's rate, the\n"
            "generator's --rate, 1 user), then bisection until the bracket is within --tol\n"
            "(relative, default 0.05) for rates, exact for users; the answer met the SLOs and\n"
            "lies within that tolerance below the threshold.\n"
            "\n"
            "Also: the OOM frontier, the longest prompt per sequence (in 1024-token steps, up\n"
            "to --fit-max, default 4Mi) with B sequences resident at once, per --fit-batches\n"
            "(default 1,8,32); with --tune, the best GPU KV budget (--kv-gb-list, default\n"
            "1,2,4,8 GiB), page size P (--page-list, 128,256,512) and window W (--window-list,\n"
            "256,512,1024), one at a time from the defaults, best by highest load. GPUs are\n"
            "ranked by goodput (requests/s within the SLOs; users: decode tokens/s at the most\n"
            "users) and, with --price PROFILE=USD_PER_HOUR (repeatable), by dollars per\n"
            "million output tokens at the highest load.\n"
            "\n"
            "Progress goes to stderr. Results: a table, --json, --db PATH / --save (tables\n"
            "plan_runs, plan_points, plan_results, plan_fits), --plot. All figures are modeled\n"
            "(discrete-event simulation on the profiles named).\n");
}

typedef struct plan_opts {
    cli_workload w;
    cli_list gpus, prices, space;
    int search;
    const char *ttft, *tpot, *pct, *kv_l, *page_l, *win_l, *fit_l, *plot;
    double tol, start, max_rate;
    int max_users, tune;
    long long fit_max;
} plan_opts;

_Static_assert(WS_PLAN_FIT_BATCH_MAX == 4096, "--fit-batches' help names the largest batch");
#define PO plan_opts
static const cli_optdef k_opts[] = {
    {CLI_GROUP(PO, w, cli_workload, cli_workload_opts)},
    {"gpu", CLI_LIST(PO, gpus), .arg = "PROFILE[,PROFILE...]", .hi = WS_PLAN_MAX_GPUS,
     .help = "the GPU profiles to compare"},
    {CLI_GROUP(PO, w, cli_workload, cli_sim_opts)},
    {CLI_GROUP(PO, w, cli_workload, cli_trace_opts)},
    {CLI_GROUP(PO, w, cli_workload, cli_gen_opts)},
    {CLI_GROUP(PO, w, cli_workload, cli_host_opts)},
    {CLI_GROUP(PO, w, cli_workload, cli_format_opts)},
    {CLI_GROUP(PO, w, cli_workload, cli_serve_opts)},
    {"policy", CLI_TUNE, .arg = "NAME[,NAME...]|all",
     .help = "the KV policies (writescope, gpu-only, ktrans, stream, cpu-attn, static, "
             "migrate), comma-separated, or all"},
    {"batch", CLI_TUNE, .def = "32", .help = "rates: the most sequences running at once"},
    {"prompt", CLI_TUNE, .help = "users: prompt tokens of each user's request"},
    {"output", CLI_TUNE, .help = "users: output tokens of each user's request"},
    {"detail", CLI_TUNE,
     .help = "step (the default) folds the identical layers; layer plays "
             "every layer as operations"},
    {"trace", CLI_TUNE,
     .help = "rates: a request trace, its arrivals compressed or stretched "
             "in time (ours, azure, mooncake, burstgpt, vidur)"},
    {"arrivals", CLI_TUNE, .arg = "poisson|gamma",
     .help = "rates: generated requests, poisson or gamma, their --rate replaced"},
    {"requests", CLI_TUNE,
     .help = "rates: requests per point (default 200; a trace's first K, default 200)"},
    {"db", CLI_TUNE,
     .help = "store the plan there (tables plan_runs, plan_points, "
             "plan_results, plan_fits); the profiles are read from it too"},
    {"slo-ttft", CLI_STR(PO, ttft), .arg = "S",
     .help = "the time-to-first-token SLO: seconds, or with ms (0.2, 0.2s, 200ms)"},
    {"slo-tpot", CLI_STR(PO, tpot), .arg = "S",
     .help = "the time-per-output-token SLO, as --slo-ttft"},
    {"slo-pct", CLI_STR(PO, pct), .arg = "P|pP",
     .help = "the share of requests that must meet the SLOs, as 99 or p99 (default 99)"},
    {"tol", CLI_DOUBLE(PO, tol), .arg = "T", .lo = 1e-4, .hi = 0.5, .def = "0.05",
     .help = "rates: bisect until the bracket is within T (relative)"},
    {"start", CLI_DOUBLE(PO, start), .arg = "X", .lo = 1e-6, .hi = 1e9,
     .help = "the search's first load (default: the trace's rate, the generator's --rate, 1 "
             "user)"},
    {"max-rate", CLI_DOUBLE(PO, max_rate), .arg = "R", .lo = 1e-6, .hi = 1e9, .def = "10000",
     .help = "rates: the highest rate tried"},
    {"max-users", CLI_INT(PO, max_users), .arg = "U", .lo = 1, .hi = 1 << 16, .def = "1024",
     .help = "users: the most users tried"},
    {"price", CLI_LIST(PO, prices), .arg = "PROFILE=USD_PER_HOUR", .hi = WS_PLAN_MAX_GPUS,
     .help = "a GPU's price, to rank by dollars per million output tokens"},
    {"tune", CLI_FLAG(PO, tune),
     .help = "also search the best GPU KV budget, page size and window, one at a time from "
             "the defaults"},
    {"kv-gb-list", CLI_STR(PO, kv_l), .arg = "G,..",
     .help = "--tune: GPU KV budgets in GiB (default 1,2,4,8)"},
    {"page-list", CLI_STR(PO, page_l), .arg = "P,..",
     .help = "--tune: page sizes in tokens, each dividing the 256-token window or a multiple "
             "of it, a window of one page (default 128,256,512)"},
    {"window-list", CLI_STR(PO, win_l), .arg = "W,..",
     .help = "--tune: GPU windows in tokens, multiples of the 256-token page (default "
             "256,512,1024)"},
    {"fit-batches", CLI_STR(PO, fit_l), .arg = "B,..|none",
     .help = "the OOM frontier's batch sizes, at most 4096 (a point's time grows as B^2; "
             "default 1,8,32; none: no frontier)"},
    {"fit-max", CLI_LL(PO, fit_max), .arg = "TOKENS", .lo = WS_PLAN_FIT_UNIT,
     .hi = 4LL * WS_TRACE_TOKENS_MAX, .def = "4194304",
     .help = "the OOM frontier's longest prompt tried (in 1024-token steps)"},
    {"plot", CLI_STR(PO, plot), .arg = "FILE.png|svg|pdf",
     .help = "goodput and SLO attainment against load per policy (gnuplot; the type from "
             "the name); with --search, goodput against context (or $/h) and the Pareto "
             "frontier; checked before the search, replaced whole"},
    {"search", CLI_FLAG(PO, search),
     .help = "search the configurations of --space (default: w-cpu, n-cpu-moe, kv and chunk "
             "auto): the best per engine and policy with its command line, the Pareto "
             "frontier, and when nothing meets, what binds and the smallest change "
             "(docs/plan.md)"},
    {"space", CLI_LIST(PO, space), .arg = "KNOB=LIST", .hi = CLI_LIST_MAX,
     .help = "--search: a knob's candidates, a comma-separated list or auto: engine "
             "(none = writescope's own serving, llama.cpp, ik_llama.cpp, ktransformers, "
             "kt-kernel, vllm-v1, sglang, ...), w-gpu and w-cpu (weight formats; auto: those the "
             "model is published in), kv (bf16, fp16, q8_0, q4_0), n-cpu-moe (none, all, N), "
             "gpu-experts, ngl (all, N), chunk, prefill (auto, cpu, gpu), threads (all, N), "
             "sockets; repeatable"},
    {0}};
#undef PO
static const cli_spec k_spec = {"plan", k_opts, 0, usage};

static void on_progress(void *ctx, int round, long long points, int open)
{
    cli_progress_line(ctx, 0, "plan: round %d, %lld simulations, %d searches open", round, points,
                      open);
}

/* Seconds: "0.2", "0.2s" or "200ms"; > 0. */
static int parse_secs(const char *opt, const char *v, double *out)
{
    char buf[64];
    size_t l = strlen(v);
    double scale = 1;
    if (l >= sizeof buf)
        return cli_usage_error("plan", "--%s '%s': not a time", opt, v);
    memcpy(buf, v, l + 1);
    if (l > 2 && !strcmp(buf + l - 2, "ms"))
        buf[l - 2] = 0, scale = 1e-3;
    else if (l > 1 && buf[l - 1] == 's')
        buf[l - 1] = 0;
    double x;
    if (ws_parse_double(buf, 0, 1e9, &x) || !(x > 0))
        return cli_usage_error("plan", "--%s '%s': not a time > 0 (seconds, or with ms)", opt, v);
    *out = x * scale;
    return 0;
}

/* A comma-separated list of numbers in [lo, hi]. */
static int parse_list(const char *opt, const char *v, double lo, double hi, double *out, int cap,
                      int *n)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    *n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n >= cap)
            return cli_usage_error("plan", "--%s: at most %d values", opt, cap);
        if (ws_parse_double(t, lo, hi, &out[*n]))
            return cli_usage_error("plan", "--%s '%s': not a number in %g..%g", opt, t, lo, hi);
        (*n)++;
    }
    if (!*n)
        return cli_usage_error("plan", "--%s needs at least one value", opt);
    return 0;
}

static int parse_int_list(const char *opt, const char *v, int lo, int hi, int *out, int cap, int *n)
{
    double d[WS_PLAN_MAX_CAND];
    int rc = parse_list(opt, v, lo, hi, d, cap, n);
    for (int i = 0; !rc && i < *n; i++) {
        if (d[i] != floor(d[i]))
            return cli_usage_error("plan", "--%s: '%g' is not a whole number", opt, d[i]);
        out[i] = (int)d[i];
    }
    return rc;
}

static const char *fmt_load(const ws_plan_spec *s, const ws_plan_best *b, char *buf, size_t cap)
{
    if (!(b->max_load > 0))
        snprintf(buf, cap, "none");
    else if (s->load == WS_PLAN_USERS)
        snprintf(buf, cap, "%s%.0f", b->capped ? ">=" : "", b->max_load);
    else
        snprintf(buf, cap, "%s%.4g", b->capped ? ">=" : "", b->max_load);
    return buf;
}

static const char *fmt_ctx(long long t, int capped, char *buf, size_t cap)
{
    if (t <= 0)
        snprintf(buf, cap, "none");
    else
        snprintf(buf, cap, "%s%lldK", capped ? ">=" : "", t / 1024);
    return buf;
}

static json_t *setting_json(const ws_plan_setting *set)
{
    json_t *o = json_object();
    json_object_set_new(o, "gpu_kv_gb",
                        set->gpu_kv_gb > 0 ? json_real(set->gpu_kv_gb) : json_string("default"));
    json_object_set_new(o, "page",
                        set->page > 0 ? json_integer(set->page) : json_string("default"));
    json_object_set_new(o, "window",
                        set->window > 0 ? json_integer(set->window) : json_string("default"));
    return o;
}

/* Indices of (gpu) ranked by goodput of their best policy, or by cost (NAN last). */
typedef struct rank_row {
    int gpu, policy;
    double key;
} rank_row;

static int cmp_rank_desc(const void *a, const void *b)
{
    const rank_row *x = a, *y = b;
    return (x->key < y->key) - (x->key > y->key);
}

static int cmp_rank_asc(const void *a, const void *b)
{
    const rank_row *x = a, *y = b;
    if (isnan(x->key) != isnan(y->key))
        return isnan(x->key) - isnan(y->key);
    return (x->key > y->key) - (x->key < y->key);
}

/* Per GPU: its best policy by the key (goodput: highest; cost: lowest). */
static int ranking(const ws_plan_spec *s, const ws_plan_report *rep, int by_cost, rank_row *rows)
{
    int n = 0;
    for (int g = 0; g < s->n_gpus; g++) {
        rank_row best = {g, -1, by_cost ? NAN : 0};
        for (int p = 0; p < WS_POLICY_COUNT; p++) {
            const ws_plan_best *b = ws_plan_best_of(rep, s, g, p);
            if (!b || !(b->max_load > 0))
                continue;
            const double k = by_cost ? ws_plan_cost_per_mtok(s, b) : ws_plan_goodput(s, b);
            if (best.policy < 0 ||
                (by_cost ? (!isnan(k) && (isnan(best.key) || k < best.key)) : k > best.key))
                best = (rank_row){g, p, k};
        }
        rows[n++] = best;
    }
    qsort(rows, n, sizeof *rows, by_cost ? cmp_rank_asc : cmp_rank_desc);
    return n;
}

/* The plan's header: what was modeled, the workload, the SLOs and the search. */
static void print_head(const ws_plan_spec *s, const ws_plan_report *rep, int embedded)
{
    const int users = s->load == WS_PLAN_USERS;
    char wl[512], a[32];
    ws_plan_workload_text(s, wl, sizeof wl);
    char slo[128] = "";
    if (s->slo_ttft > 0)
        snprintf(slo, sizeof slo, "TTFT <= %s", cli_plan_secs(s->slo_ttft, a, sizeof a));
    if (s->slo_tpot > 0)
        snprintf(slo + strlen(slo), sizeof slo - strlen(slo), "%sTPOT <= %s", slo[0] ? ", " : "",
                 cli_plan_secs(s->slo_tpot, a, sizeof a));
    printf("writescope plan: MODELED (discrete-event simulation); model %s on host %s%s\n",
           rep->model, rep->host, embedded ? " (embedded datasheet profiles)" : "");
    printf("workload: %s\n", wl);
    if (rep->native_rate > 0)
        printf("trace rate: %.4g requests/s as recorded; rates below scale its arrival times\n",
               rep->native_rate);
    printf("SLO: %s for >= %g%% of %s (%s); detail %s\n", slo, s->slo_pct,
           users ? "users' TTFT and decode steps" : "requests", "OOM counts as a miss",
           s->detail_layer ? "layer" : "step");
    if (users)
        printf("search: users doubled from %g, then bisected to 1; %d rounds, %zu simulations, "
               "%.2f s\n",
               s->start > 0 ? s->start : 1, rep->rounds, rep->n_evals, rep->wall_s);
    else
        printf("search: rate x4 from %.4g req/s, then bisected to %g%% relative; %d rounds, %zu "
               "simulations, %.2f s\n",
               s->start > 0           ? s->start
               : rep->native_rate > 0 ? rep->native_rate
                                      : s->gen.rate,
               100 * s->tol, rep->rounds, rep->n_evals, rep->wall_s);
}

/* What bound a search that met nothing, at the lowest load it tried: the SLOs whose
 * percentile missed ("ttft", "tpot", both, or "oom" for requests that did not fit). */
static const char *none_binding(const ws_plan_spec *s, const ws_plan_best *x)
{
    const ws_plan_result *m = &x->miss;
    const int t = s->slo_ttft > 0 && !(m->ttft_q <= s->slo_ttft);
    const int p = s->slo_tpot > 0 && !(m->tpot_q <= s->slo_tpot);
    return m->oom ? "oom" : t && p ? "ttft+tpot" : t ? "ttft" : p ? "tpot" : "attainment";
}

/* Why a row says none: the lowest load tried, the share that missed there and the SLO. */
static void print_none(const ws_plan_spec *s, const ws_plan_best *x)
{
    const ws_plan_result *m = &x->miss;
    char a[32], b[32], c[32] = "no SLO", d[32] = "no SLO";
    if (s->slo_ttft > 0)
        cli_plan_secs(s->slo_ttft, c, sizeof c);
    if (s->slo_tpot > 0)
        cli_plan_secs(s->slo_tpot, d, sizeof d);
    printf("  why none (%s, %s): at %.4g %s, the lowest load tried, %.1f%% of requests missed "
           "(p%g TTFT %s against %s, TPOT %s against %s%s); binding: %s\n",
           s->gpus[x->gpu], ws_policy_name(x->policy), x->miss_load,
           s->load == WS_PLAN_USERS ? "users" : "req/s", 100 * (1 - m->attain), s->slo_pct,
           cli_plan_secs(m->ttft_q, a, sizeof a), c, cli_plan_secs(m->tpot_q, b, sizeof b), d,
           m->oom ? "; some did not fit (OOM)" : "", none_binding(s, x));
}

/* One row per GPU and policy (per setting with --tune: the best). */
static void print_results(const ws_plan_spec *s, const ws_plan_report *rep)
{
    const int users = s->load == WS_PLAN_USERS;
    char a[32], b[32];
    char tq[24], pq[24];
    snprintf(tq, sizeof tq, "TTFT p%g", s->slo_pct);
    snprintf(pq, sizeof pq, "TPOT p%g", s->slo_pct);
    printf("\n%-16s %-10s %-9s %10s %11s %10s %10s %9s %6s %10s\n", "gpu", "policy", "setting",
           users ? "max users" : "max req/s", users ? "dec tok/s" : "goodput/s",
           users ? "tok/s" : "out tok/s", tq, pq, "evals", "$/Mtok");
    for (int g = 0; g < s->n_gpus; g++)
        for (int p = 0; p < WS_POLICY_COUNT; p++) {
            const ws_plan_best *best = ws_plan_best_of(rep, s, g, p);
            for (size_t i = 0; i < rep->n_search; i++) {
                const ws_plan_best *x = &rep->search[i];
                if (x->gpu != g || x->policy != p || (s->tune && x != best))
                    continue;
                char set[32], ld[32], cost[32] = "-";
                ws_plan_setting_text(&x->set, set, sizeof set);
                const double cpm = ws_plan_cost_per_mtok(s, x);
                if (isfinite(cpm))
                    snprintf(cost, sizeof cost, "%.2f", cpm);
                const int some = x->max_load > 0;
                printf("%-16s %-10s %-9s %10s %11.4g %10.1f %10s %9s %6d %10s%s\n", s->gpus[g],
                       ws_policy_name(p), set, fmt_load(s, x, ld, sizeof ld),
                       some ? ws_plan_goodput(s, x) : 0, some ? x->at.tokens_per_s : 0,
                       some ? cli_plan_secs(x->at.ttft_q, a, sizeof a) : "-",
                       some ? cli_plan_secs(x->at.tpot_q, b, sizeof b) : "-", x->evals, cost, "");
            }
        }
    printf("(%s, %s: at the highest load that met the SLOs%s)\n", tq, pq,
           users ? "; TPOT: decode steps with every user running" : "");
    for (size_t i = 0; i < rep->n_search; i++) {
        const ws_plan_best *x = &rep->search[i];
        if (!(x->max_load > 0) && x->miss_load > 0 &&
            (!s->tune || x == ws_plan_best_of(rep, s, x->gpu, x->policy)))
            print_none(s, x);
    }
    if (s->tune) {
        printf("(--tune: the best setting of each policy among the default and, one at a time,");
        for (int i = 0; i < s->n_kv; i++)
            printf(" kv=%gG", s->kv_gb[i]);
        for (int i = 0; i < s->n_page; i++)
            printf(" P=%d", s->page[i]);
        for (int i = 0; i < s->n_window; i++)
            printf(" W=%d", s->window[i]);
        printf("; P and W for spilling policies only; ties keep the default; --json has all)\n");
    }
}

/* What writescope buys over each baseline, per GPU. */
static void print_vs(const ws_plan_spec *s, const ws_plan_report *rep)
{
    const int users = s->load == WS_PLAN_USERS;
    char a[32], b[32];
    for (int g = 0; g < s->n_gpus && (s->policies & 1u << WS_POLICY_WRITESCOPE); g++) {
        const ws_plan_best *w = ws_plan_best_of(rep, s, g, WS_POLICY_WRITESCOPE);
        printf("%s: writescope %s %s", s->gpus[g], fmt_load(s, w, a, sizeof a),
               users ? "users" : "req/s");
        for (int p = 0; p < WS_POLICY_COUNT; p++) {
            const ws_plan_best *x = ws_plan_best_of(rep, s, g, p);
            if (p == WS_POLICY_WRITESCOPE || !x)
                continue;
            if (x->max_load > 0 && w->max_load > 0)
                printf("; vs %s %s (%.2fx)", ws_policy_name(p), fmt_load(s, x, b, sizeof b),
                       w->max_load / x->max_load);
            else
                printf("; vs %s %s", ws_policy_name(p), fmt_load(s, x, b, sizeof b));
        }
        printf("\n");
    }
}

/* The OOM frontier: the longest prompt per sequence with B sequences resident. */
static void print_frontier(const ws_plan_spec *s, const ws_plan_report *rep)
{
    char c[32];
    if (rep->n_fit) {
        printf("\nOOM frontier: longest prompt per sequence with B sequences resident at once\n");
        printf("%-16s %-10s", "gpu", "policy");
        for (int i = 0; i < s->n_fit; i++) {
            char h[16];
            snprintf(h, sizeof h, "B=%d", s->fit_batch[i]);
            printf(" %9s", h);
        }
        printf("  most tokens resident\n");
        for (size_t i = 0; i < rep->n_fit; i += s->n_fit) {
            printf("%-16s %-10s", s->gpus[rep->fit[i].gpu], ws_policy_name(rep->fit[i].policy));
            double most = 0;
            for (int k = 0; k < s->n_fit; k++) {
                const ws_plan_fit *f = &rep->fit[i + k];
                printf(" %9s", fmt_ctx(f->max_context, f->capped, c, sizeof c));
                most = fmax(most, (double)f->batch * f->max_context);
            }
            if (most > 0)
                printf("  %.3gM\n", most / 1e6);
            else
                printf("  -\n");
        }
    }
}

/* The GPUs ranked by goodput, and by cost when priced. */
static void print_rankings(const ws_plan_spec *s, const ws_plan_report *rep)
{
    const int users = s->load == WS_PLAN_USERS;
    rank_row rows[WS_PLAN_MAX_GPUS];
    if (s->n_gpus > 1) {
        const int n = ranking(s, rep, 0, rows);
        printf("\nranking by goodput (%s, best policy each):", users ? "decode tokens/s at the "
                                                                       "most users"
                                                                     : "requests/s within SLO");
        for (int i = 0; i < n; i++)
            if (rows[i].policy >= 0)
                printf(" %d. %s (%s, %.4g)", i + 1, s->gpus[rows[i].gpu],
                       ws_policy_name(rows[i].policy), rows[i].key);
            else
                printf(" %d. %s (none meets)", i + 1, s->gpus[rows[i].gpu]);
        printf("\n");
    }
    int priced = 0;
    for (int g = 0; g < s->n_gpus; g++)
        priced |= s->price[g] > 0;
    if (priced) {
        const int n = ranking(s, rep, 1, rows);
        printf("ranking by cost ($ per million output tokens at the highest load):");
        for (int i = 0; i < n; i++)
            if (isfinite(rows[i].key))
                printf(" %d. %s (%s, $%.2f)", i + 1, s->gpus[rows[i].gpu],
                       ws_policy_name(rows[i].policy), rows[i].key);
            else
                printf(" %d. %s (no price or none meets)", i + 1, s->gpus[rows[i].gpu]);
        printf("\n");
    }
}

static void print_table(const ws_plan_spec *s, const ws_plan_report *rep, int embedded,
                        long long plan_id, const char *dbpath, const char *plot)
{
    print_head(s, rep, embedded);
    print_results(s, rep);
    print_vs(s, rep);
    print_frontier(s, rep);
    print_rankings(s, rep);
    if (plan_id)
        printf("stored: plan %lld in %s (modeled)\n", plan_id, dbpath);
    if (plot)
        printf("plot: %s\n", plot);
}

static json_t *report_json(const ws_plan_spec *s, const ws_plan_report *rep, int embedded,
                           long long plan_id, const char *dbpath, const char *plot)
{
    json_t *root = json_object(), *res = json_array(), *fr = json_array();
    char wl[512];
    ws_plan_workload_text(s, wl, sizeof wl);
    json_object_set_new(root, "source", json_string("modeled"));
    json_object_set_new(root, "model", json_string(rep->model));
    json_object_set_new(root, "host", json_string(rep->host));
    json_object_set_new(root, "embedded_profiles", json_boolean(embedded));
    json_object_set_new(root, "load", json_string(s->load == WS_PLAN_USERS ? "users" : "rate"));
    json_object_set_new(root, "workload", json_string(wl));
    if (rep->native_rate > 0)
        json_object_set_new(root, "trace_rate", json_real(rep->native_rate));
    json_object_set_new(root, "slo_ttft_s", s->slo_ttft > 0 ? json_real(s->slo_ttft) : json_null());
    json_object_set_new(root, "slo_tpot_s", s->slo_tpot > 0 ? json_real(s->slo_tpot) : json_null());
    json_object_set_new(root, "slo_pct", json_real(s->slo_pct));
    json_object_set_new(root, "tolerance", json_real(s->tol));
    json_object_set_new(root, "rounds", json_integer(rep->rounds));
    json_object_set_new(root, "simulations", json_integer((json_int_t)rep->n_evals));
    json_object_set_new(root, "wall_s", json_real(rep->wall_s));
    for (size_t i = 0; i < rep->n_search; i++) {
        const ws_plan_best *x = &rep->search[i];
        const int some = x->max_load > 0;
        json_t *o = json_object();
        json_object_set_new(o, "gpu", json_string(s->gpus[x->gpu]));
        json_object_set_new(o, "policy", json_string(ws_policy_name(x->policy)));
        json_object_set_new(o, "setting", setting_json(&x->set));
        json_object_set_new(o, "best",
                            json_boolean(ws_plan_best_of(rep, s, x->gpu, x->policy) == x));
        json_object_set_new(o, "max_load", json_real(x->max_load));
        json_object_set_new(o, "capped", json_boolean(x->capped));
        json_object_set_new(o, "goodput", some ? json_real(ws_plan_goodput(s, x)) : json_null());
        json_object_set_new(o, "tokens_per_s", some ? json_real(x->at.tokens_per_s) : json_null());
        json_object_set_new(o, "ttft_q_s", some ? cli_plan_num(x->at.ttft_q) : json_null());
        json_object_set_new(o, "tpot_q_s", some ? cli_plan_num(x->at.tpot_q) : json_null());
        json_object_set_new(o, "attainment", some ? json_real(x->at.attain) : json_null());
        json_object_set_new(o, "cost_per_mtok", cli_plan_num(ws_plan_cost_per_mtok(s, x)));
        json_object_set_new(o, "simulations", json_integer(x->evals));
        if (!some && x->miss_load > 0) { /* what failed at the lowest load tried */
            json_t *w = json_object();
            json_object_set_new(w, "load", json_real(x->miss_load));
            json_object_set_new(w, "attainment", json_real(x->miss.attain));
            json_object_set_new(w, "ttft_q_s", cli_plan_num(x->miss.ttft_q));
            json_object_set_new(w, "tpot_q_s", cli_plan_num(x->miss.tpot_q));
            json_object_set_new(w, "oom", json_integer((json_int_t)x->miss.oom));
            json_object_set_new(w, "binding", json_string(none_binding(s, x)));
            json_object_set_new(o, "why_none", w);
        }
        json_array_append_new(res, o);
    }
    json_object_set_new(root, "results", res);
    for (size_t i = 0; i < rep->n_fit; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "gpu", json_string(s->gpus[rep->fit[i].gpu]));
        json_object_set_new(o, "policy", json_string(ws_policy_name(rep->fit[i].policy)));
        json_object_set_new(o, "batch", json_integer(rep->fit[i].batch));
        json_object_set_new(o, "max_context", json_integer(rep->fit[i].max_context));
        json_object_set_new(o, "capped", json_boolean(rep->fit[i].capped));
        json_array_append_new(fr, o);
    }
    json_object_set_new(root, "frontier", fr);
    for (int by_cost = 0; by_cost < 2; by_cost++) {
        rank_row rows[WS_PLAN_MAX_GPUS];
        const int n = ranking(s, rep, by_cost, rows);
        json_t *r = json_array();
        for (int i = 0; i < n; i++) {
            json_t *o = json_object();
            json_object_set_new(o, "gpu", json_string(s->gpus[rows[i].gpu]));
            json_object_set_new(o, "policy",
                                rows[i].policy >= 0 ? json_string(ws_policy_name(rows[i].policy))
                                                    : json_null());
            json_object_set_new(o, by_cost ? "cost_per_mtok" : "goodput",
                                cli_plan_num(rows[i].key));
            json_array_append_new(r, o);
        }
        json_object_set_new(root, by_cost ? "ranking_cost" : "ranking_goodput", r);
    }
    if (plan_id) {
        json_object_set_new(root, "plan_id", json_integer(plan_id));
        json_object_set_new(root, "database", json_string(dbpath));
    }
    if (plot)
        json_object_set_new(root, "plot", json_string(plot));
    return root;
}

/* The figure, on rank 0: from the stored plan, or, not stored, from a copy in an in-memory
 * database. */
static int plan_plot(ws_store *st, const ws_plan_spec *s, const ws_plan_run_result *res,
                     const char *plot, ws_err *err)
{
    if (res->plan_id)
        return ws_plan_plot(st, res->plan_id, plot, err);
    ws_store *mem = NULL;
    long long mid = 0;
    int rc = ws_store_open(":memory:", &mem, err);
    if (!rc)
        rc = ws_plan_store(mem, s, &res->rep, &mid, err);
    if (!rc)
        rc = ws_plan_plot(mem, mid, plot, err);
    ws_store_close(mem);
    return rc;
}

/* The plan on every rank of par (under mpirun/srun; else one): rank 0 creates the database
 * when storing, every rank searches, rank 0 stores, draws and prints. */
static int plan_ranks(ws_par *par, ws_plan_spec *s, const char *db, int store_it, int json,
                      const char *plot)
{
    const int rank = ws_par_rank(par);
    ws_err err = {0};
    ws_store *st = NULL;
    int embedded = 0;
    int rc = cli_open_store_ranks(par, db, store_it, &st, &embedded, &err);
    char this_host[64];
    if (!rc)
        rc = cli_host_this(st, &s->host, this_host, sizeof this_host, &err);
    cli_progress pg;
    cli_progress_start(&pg);
    const ws_plan_ranks ranks = cli_plan_ranks(par);
    const ws_plan_run_cfg cfg = {.spec = s,
                                 .ranks = &ranks,
                                 .store = store_it,
                                 .progress = on_progress,
                                 .progress_ctx = &pg};
    ws_plan_run_result res = {0};
    if ((rc = ws_par_agree(par, rc, &err)) == 0)
        rc = ws_plan_run_all(st, &cfg, &res, &err);
    cli_progress_end(&pg);
    if (!rc && !rank && plot)
        rc = plan_plot(st, s, &res, plot, &err);
    ws_store_close(st);
    rc = ws_par_agree(par, rc, &err);
    if (rc || rank) {
        ws_plan_run_result_free(&res);
        return rc ? (rank ? CLI_EXIT_FAIL : cli_fail(&err)) : CLI_EXIT_OK;
    }
    if (json)
        rc = cli_print_json(report_json(s, &res.rep, embedded, res.plan_id, res.database, plot));
    else
        print_table(s, &res.rep, embedded, res.plan_id, res.database, plot);
    ws_plan_run_result_free(&res);
    return rc;
}

/* GPUs: every --gpu, each a comma-separated list; then the prices of some of them. */
static int plan_gpus(const plan_opts *o, ws_plan_spec *s)
{
    static char gbuf[WS_PLAN_MAX_GPUS][160];
    for (int i = 0; i < o->gpus.n; i++) {
        const char *p = o->gpus.v[i];
        while (*p) {
            const char *e = strchr(p, ',');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            if (l) {
                if (s->n_gpus >= WS_PLAN_MAX_GPUS || l >= sizeof gbuf[0])
                    return cli_usage_error("plan", "at most %d GPU profiles of < 160 characters",
                                           WS_PLAN_MAX_GPUS);
                memcpy(gbuf[s->n_gpus], p, l);
                gbuf[s->n_gpus][l] = 0;
                for (int k = 0; k < s->n_gpus; k++)
                    if (!strcmp(gbuf[k], gbuf[s->n_gpus]))
                        return cli_usage_error("plan", "--gpu %s given twice", gbuf[k]);
                s->gpus[s->n_gpus] = gbuf[s->n_gpus];
                s->n_gpus++;
            }
            p += l + (e != NULL);
        }
    }
    return 0;
}

static int plan_prices(const plan_opts *o, ws_plan_spec *s)
{
    for (int i = 0; i < o->prices.n; i++) {
        const char *pv = o->prices.v[i], *eq = strchr(pv, '=');
        if (!eq)
            return cli_usage_error("plan", "--price '%s': expected PROFILE=USD_PER_HOUR", pv);
        int g = -1;
        for (int k = 0; k < s->n_gpus; k++)
            if (strlen(s->gpus[k]) == (size_t)(eq - pv) &&
                !strncmp(s->gpus[k], pv, (size_t)(eq - pv)))
                g = k;
        if (g < 0)
            return cli_usage_error("plan", "--price '%s': '%.*s' is not one of the --gpu profiles",
                                   pv, (int)(eq - pv), pv);
        double v;
        if (ws_parse_double(eq + 1, 0, 1e9, &v) || !(v > 0))
            return cli_usage_error("plan", "--price '%s': the price is dollars per hour > 0", pv);
        s->price[g] = v;
    }
    return 0;
}

static int plan_slos(const plan_opts *o, ws_plan_spec *s)
{
    int rc;
    if (o->ttft && (rc = parse_secs("slo-ttft", o->ttft, &s->slo_ttft)))
        return rc;
    if (o->tpot && (rc = parse_secs("slo-tpot", o->tpot, &s->slo_tpot)))
        return rc;
    if (!o->ttft && !o->tpot)
        return cli_usage_error("plan", "give an SLO: --slo-ttft S and/or --slo-tpot S");
    if (o->pct) {
        const char *v = o->pct[0] == 'p' || o->pct[0] == 'P' ? o->pct + 1 : o->pct;
        if (ws_parse_double(v, 0, 100, &s->slo_pct) || !(s->slo_pct > 0))
            return cli_usage_error("plan",
                                   "--slo-pct '%s': a percentile in (0, 100], as 99 or "
                                   "p99",
                                   o->pct);
    }
    return 0;
}

/* Users (a closed batch), or the rates of a trace or a generator. */
static int plan_load(const plan_opts *o, const cli_args *a, ws_plan_spec *s)
{
    const cli_workload *w = &o->w;
    const int closed = cli_given(a, "prompt") || cli_given(a, "output");
    if ((w->trace != NULL) + (w->gen.arrivals != NULL) + closed != 1)
        return cli_usage_error("plan", "give one workload: --prompt N --output M (users), "
                                       "--trace FILE, or --arrivals ...");
    if (closed) {
        s->load = WS_PLAN_USERS;
        if (!cli_given(a, "prompt") || !cli_given(a, "output"))
            return cli_usage_error("plan", "users need both --prompt and --output");
        s->prompt = w->prompt;
        s->output = w->output;
        s->max_users = o->max_users;
        if (w->gen.requests || w->gen.rate || cli_given(a, "batch") || cli_given(a, "max-rate"))
            return cli_usage_error("plan", "--requests, --rate, --batch and --max-rate are for "
                                           "rates; users are searched with --max-users");
        return 0;
    }
    if (cli_given(a, "max-users"))
        return cli_usage_error("plan", "--max-users goes with --prompt/--output (users)");
    long long ll;
    int rc;
    if (w->gen.requests) {
        if ((rc = cli_opt_ll("plan", "requests", w->gen.requests, 1, 1LL << 40, &ll)))
            return rc;
        s->requests = (uint64_t)ll;
    }
    s->batch = w->batch;
    s->max_rate = o->max_rate;
    return 0;
}

/* The trace's or the generator's options, each only with its workload. */
static int plan_source(const cli_workload *w, ws_plan_spec *s, int closed)
{
    ws_err perr = {0};
    const cli_gen_args *g = &w->gen;
    if (w->trace) {
        s->trace = w->trace;
        s->topts.skip_bad = w->skip_bad;
        if (w->format && ws_trace_format_parse(w->format, &s->topts.format, &perr))
            return cli_usage_error("plan", "%s", perr.msg);
        if (g->rate || g->cv || g->pdist || g->odist)
            return cli_usage_error("plan", "a trace has its own arrivals and lengths");
    } else if (w->format || w->skip_bad)
        return cli_usage_error("plan", "--format and --skip-bad go with --trace");
    if (!g->arrivals) {
        if (g->pdist || g->odist || g->cv || (g->rate && !w->trace && !closed))
            return cli_usage_error("plan", "--prompt-dist, --output-dist, --rate and --cv go "
                                           "with --arrivals");
        return 0;
    }
    if (ws_trace_arrivals_parse(g->arrivals, &s->gen.arrivals, &perr))
        return cli_usage_error("plan", "%s", perr.msg);
    if (s->gen.arrivals == WS_ARRIVALS_CLOSED)
        return cli_usage_error("plan", "closed-loop arrivals have no rate to search; use "
                                       "--prompt/--output for users");
    if (!g->pdist || !g->odist)
        return cli_usage_error("plan", "--arrivals needs --prompt-dist and --output-dist");
    if (ws_trace_len_parse(g->pdist, &s->gen.prompt, &perr) ||
        ws_trace_len_parse(g->odist, &s->gen.output, &perr))
        return cli_usage_error("plan", "%s", perr.msg);
    int rc;
    if (g->rate && (rc = cli_opt_double("plan", "rate", g->rate, 1e-6, 1e9, &s->gen.rate)))
        return rc;
    if (g->cv && (rc = cli_opt_double("plan", "cv", g->cv, 0.01, 100, &s->gen.cv)))
        return rc;
    return 0;
}

/* The search and the simulation: policies, --tune's candidates, the frontier. */
static int plan_search(const plan_opts *o, const cli_args *a, ws_plan_spec *s)
{
    const cli_workload *w = &o->w;
    s->tol = o->tol;
    s->start = o->start;
    s->chunk = w->chunk;
    s->prefill_mode = w->prefill;
    s->prefill_gpu_tokens = w->prefill_gpu_tokens;
    s->batching = w->sched;
    s->token_budget = w->token_budget;
    s->prefix_cache = w->prefix;
    s->preempt = w->preempt;
    s->engine = w->engine;
    s->given = (cli_given(a, "scheduler") ? WS_PLAN_GIVEN_BATCHING : 0) |
               (cli_given(a, "token-budget") ? WS_PLAN_GIVEN_BUDGET : 0) |
               (cli_given(a, "prefix-cache") ? WS_PLAN_GIVEN_PREFIX : 0) |
               (cli_given(a, "preempt") ? WS_PLAN_GIVEN_PREEMPT : 0) |
               (cli_given(a, "batch") ? WS_PLAN_GIVEN_BATCH : 0) |
               (cli_given(a, "chunk") ? WS_PLAN_GIVEN_CHUNK : 0);
    int rc;
    if ((rc = cli_policy_list("plan", w->policy, &s->policies)) ||
        (rc = cli_policy_opts("plan", a, w->policy, s->policies)))
        return rc;
    s->tune = o->tune;
    if (!o->tune && (o->kv_l || o->page_l || o->win_l))
        return cli_usage_error("plan", "--kv-gb-list, --page-list and --window-list go with "
                                       "--tune");
    if ((o->kv_l && (rc = parse_list("kv-gb-list", o->kv_l, 0.01, 1e5, s->kv_gb, WS_PLAN_MAX_CAND,
                                     &s->n_kv))) ||
        (o->page_l && (rc = parse_int_list("page-list", o->page_l, 16, 1 << 16, s->page,
                                           WS_PLAN_MAX_CAND, &s->n_page))) ||
        (o->win_l && (rc = parse_int_list("window-list", o->win_l, 16, 1 << 20, s->window,
                                          WS_PLAN_MAX_CAND, &s->n_window))))
        return rc;
    if (o->fit_l && !strcmp(o->fit_l, "none"))
        s->n_fit = 0;
    else if (o->fit_l && (rc = parse_int_list("fit-batches", o->fit_l, 1, WS_PLAN_FIT_BATCH_MAX,
                                              s->fit_batch, WS_PLAN_MAX_CAND, &s->n_fit)))
        return rc;
    s->fit_max = o->fit_max;
    if (cli_given(a, "detail"))
        s->detail_layer = w->detail;
    s->seed = (uint64_t)w->seed;
    return 0;
}

/* --search's space: each --space KNOB=LIST, or the default one. */
static int plan_space_opts(const plan_opts *o, ws_plan_spec *s, ws_plan_space *sp)
{
    ws_err err = {0};
    if (o->w.save)
        return cli_usage_error("plan", "--search prints its answer (--json); it is not stored: "
                                       "leave out --save");
    if (s->tune || o->fit_l)
        return cli_usage_error("plan", "--search tunes its own knobs and draws its own frontier: "
                                       "leave out --tune and --fit-batches");
    s->n_fit = 0;
    if (!o->space.n) {
        static const char *const dflt[] = {"w-cpu=auto", "n-cpu-moe=auto", "kv=auto", "chunk=auto"};
        for (int i = 0; i < 4; i++) {
            const char *eq = strchr(dflt[i], '=');
            for (int k = 0; k < WS_KNOBS; k++)
                if (strlen(ws_space_knob_name(k)) == (size_t)(eq - dflt[i]) &&
                    !strncmp(ws_space_knob_name(k), dflt[i], (size_t)(eq - dflt[i])))
                    ws_plan_space_add(sp, k, eq + 1, &err);
        }
    }
    for (int i = 0; i < o->space.n; i++) {
        const char *v = o->space.v[i], *eq = strchr(v, '=');
        int k = -1;
        for (int q = 0; eq && q < WS_KNOBS; q++)
            if (strlen(ws_space_knob_name(q)) == (size_t)(eq - v) &&
                !strncmp(ws_space_knob_name(q), v, (size_t)(eq - v)))
                k = q;
        if (k < 0)
            return cli_usage_error("plan",
                                   "--space '%s': expected KNOB=LIST, KNOB one of engine, w-gpu, "
                                   "w-cpu, kv, n-cpu-moe, gpu-experts, ngl, chunk, prefill, "
                                   "threads, sockets",
                                   v);
        if (sp->n[k])
            return cli_usage_error("plan", "--space %s given twice", ws_space_knob_name(k));
        if (ws_plan_space_add(sp, k, eq + 1, &err))
            return cli_usage_error("plan", "%s",
                                   strncmp(err.msg, "plan: ", 6) ? err.msg : err.msg + 6);
    }
    return 0;
}

int cmd_plan(int argc, char **argv)
{
    plan_opts o = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_spec, argc, argv, &o, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    ws_plan_spec s;
    ws_plan_spec_default(&s);
    if ((rc = plan_gpus(&o, &s)))
        return rc;
    if (!o.w.model || !s.n_gpus || !o.w.host)
        return cli_usage_error("plan", "--model, --gpu and --host are required");
    if (o.w.db && o.w.save)
        return cli_usage_error("plan", "--db and --save both name the database: give one");
    s.model = o.w.model;
    s.host = o.w.host;
    if ((rc = cli_to_cost_cfg("plan", &a, &o.w, &s.cost)))
        return rc;
    s.host_limit = o.w.host_gb * 1073741824.0;
    if ((rc = plan_prices(&o, &s)) || (rc = plan_slos(&o, &s)) || (rc = plan_load(&o, &a, &s)) ||
        (rc = plan_source(&o.w, &s, s.load == WS_PLAN_USERS)) || (rc = plan_search(&o, &a, &s)))
        return rc;
    ws_err err = {0};
    if (ws_plan_spec_check(&s, &err))
        return cli_usage_error("plan", "%s", strncmp(err.msg, "plan: ", 6) ? err.msg : err.msg + 6);
    if (o.plot && !ws_gnuplot_term(o.plot))
        return cli_usage_error("plan", "--plot needs a .png, .svg or .pdf file, not '%s'", o.plot);
    if (o.plot && ws_gnuplot_check_out(o.plot, &err)) /* before the search, not after */
        return cli_fail(&err);
    ws_plan_space sp = {0};
    if ((o.search || o.space.n) && (rc = plan_space_opts(&o, &s, &sp)))
        return rc;
    ws_par *par;
    if (ws_par_init(&par, &err))
        return cli_fail(&err);
    if (o.search || o.space.n)
        rc = cli_plan_space(par, &s, &sp, o.w.db, o.w.json, o.plot);
    else
        rc = plan_ranks(par, &s, o.w.db, o.w.db || o.w.save, o.w.json, o.plot);
    ws_par_finalize(par);
    return rc;
}
