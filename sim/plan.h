/* plan: what-if capacity planning with the simulator (`writescope plan`). For one model, a
 * host and one or more GPU profiles, a workload and SLOs, it finds per (GPU, policy, setting)
 * the highest load that meets the SLOs, the largest context that fits per batch (the OOM
 * frontier), the best GPU KV budget / page size P / window W among a few candidates, and
 * ranks the GPUs by goodput and, with prices, by dollars per million output tokens.
 *
 * Load is a request rate (requests/s; a trace's arrivals compressed or stretched in time, a
 * generator's rate replaced) or, for a closed batch (prompt N, output M), the number of
 * concurrent users. A point meets the SLOs when at least slo_pct % of it is within them
 * (DistServe's attainment): for a rate, of its requests within both TTFT and TPOT (an OOM
 * request is a miss); for users, all of them run at once, their TTFT, and the time of each
 * decode step with no prefill in it (the TPOT every user sees in steady state).
 *
 * The search over load is Vidur-Search's: bracket (x4 from the start, x2 for integers), then
 * bisection at the geometric midpoint until hi/lo - 1 <= tol (users and contexts: to 1), so
 * the answer lo meets and lies within a factor 1 + tol below the threshold; it assumes
 * attainment falls as load rises. A rate that misses with every request running alone
 * (peak_batch <= 1) ends its search with none: lower rates only space them further apart; so
 * does, while none met, a rate whose 4x lower neighbour changed neither the attainment, the
 * TTFT at the percentile nor the peak batch (ws_plan_best.miss keeps what failed). The OOM
 * frontier bisects the prompt length (in 1024-token units) of a closed batch of B sequences
 * that must all be resident at once.
 *
 * Every search advances in ROUNDS: each round collects one point from every open search
 * into one array and hands it to one evaluation function (ws_plan_eval_fn). The points of a
 * round are independent, so that function may run them anywhere (ws_plan_eval_points runs
 * them here, one after the other; an MPI map can spread them over ranks), and results never
 * depend on how they were run. Settings search is coordinate-wise: the default, then each
 * candidate of one setting with the others at their defaults. Everything is modeled. A
 * report goes to the database through plan_store.h and is drawn from there by
 * plots/plan_plot.h; plan_run.h runs a whole plan over MPI ranks and stores it, as
 * cli/cmd_plan.c asks. */
#ifndef WS_SIM_PLAN_H
#define WS_SIM_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "cost.h"
#include "store.h"
#include "trace.h"
#include "trace_gen.h"
#include "wformat.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sim_memory;

#define WS_PLAN_MAX_GPUS 16   /* GPU profiles in one plan */
#define WS_PLAN_MAX_CAND 8    /* candidates per setting, batches of the frontier */
#define WS_PLAN_FIT_UNIT 1024 /* tokens: the frontier's context resolution */
#define WS_PLAN_FIT_BATCH_MAX                                                                      \
    4096 /* largest frontier batch: a frontier search's time grows                                 \
          * about as B^2 (4096: under a second per GPU and policy;                                 \
          * 65536: many minutes) */

typedef enum ws_plan_load {
    WS_PLAN_RATE = 0,  /* open arrivals: requests/s */
    WS_PLAN_USERS = 1, /* a closed batch: concurrent users */
} ws_plan_load;

typedef enum ws_plan_kind {
    WS_PLAN_PT_LOAD = 0,  /* does the load meet the SLOs? */
    WS_PLAN_PT_FIT = 1,   /* do `batch` sequences of `context` tokens fit at once? */
    WS_PLAN_PT_ALONE = 2, /* one request of `context` prompt and `batch` output tokens, alone:
                           * does it meet the SLOs (the bound of plan_space.h)? */
    WS_PLAN_PT_BURST = 3, /* spec->burst[batch] alone: how many of its requests meet? */
} ws_plan_kind;

#define WS_PLAN_MAX_ENGINES 8 /* engines in one configuration search */

/* One configuration of a search over the settings users turn (plan_space.h): the GPU, the
 * engine, the weight formats, the KV's type, where the experts and layers run, the prefill
 * chunk and strategy, threads and sockets. Each overrides the spec's value for the points
 * that name it. */
typedef struct ws_plan_config {
    int gpu;                         /* index into spec->gpus */
    int engine;                      /* index into spec->engines; -1: none */
    const ws_wformat *w_gpu, *w_cpu; /* the GPU-resident parts (attention, dense, shared and
                                      * GPU experts) and the CPU experts; NULL: the model's */
    ws_dtype kv_dtype;               /* the KV's rates */
    const ws_wformat *w_kv;          /* a block-quantized KV (q8_0, q4_0), else NULL */
    int n_cpu_moe, gpu_experts, n_gpu_layers; /* ws_deploy_cfg's */
    int chunk;                    /* prefill chunk, tokens (0: the engine's or spec's) */
    int prefill_mode;             /* ws_prefill_mode (< 0: the spec's) */
    int cpu_threads, cpu_sockets; /* ws_deploy_cfg's */
} ws_plan_config;

/* Simulator settings a plan tunes; 0 everywhere: the simulator's defaults. */
typedef struct ws_plan_setting {
    double gpu_kv_gb; /* GPU KV budget, GiB (0: 2 GiB, 0.3 GiB for MLA models) */
    int page;         /* P, tokens per page (0: the policy's default, ws_policy_params_default) */
    int window; /* W, D-window tokens, a multiple of P (0: the simulator's, sim_cfg_default) */
} ws_plan_setting;

/* One independent evaluation. */
typedef struct ws_plan_point {
    int kind;   /* ws_plan_kind */
    int gpu;    /* index into spec->gpus */
    int policy; /* ws_policy_kind */
    ws_plan_setting set;
    int config;        /* index into spec->configs (no configs: 0, unused) */
    double load;       /* LOAD: requests/s or users */
    int batch;         /* FIT: sequences resident at once */
    long long context; /* FIT: prompt tokens of each */
    int verdict;       /* LOAD at a rate: 1 when only `meets` is wanted, so the run may stop
                        * once too many requests have missed (ws_plan_result.stopped) */
} ws_plan_point;

typedef struct ws_plan_result {
    int meets;             /* LOAD: attainment >= slo_pct; FIT: all resident, no OOM */
    double attain;         /* share within the SLOs (0..1) */
    double ttft_q, tpot_q; /* the slo_pct percentile, s (INFINITY: an OOM inside it) */
    double goodput;        /* requests within the SLOs per second of makespan */
    double tokens_per_s;   /* rate: output tokens / makespan; users: decode tokens/s */
    uint64_t requests, served, oom;
    int peak_batch; /* most sequences running at once */
    double busy[4]; /* s each resource was busy: GPU, H2D, D2H, CPU (sim_totals.busy) */
    double wall_s;  /* host seconds the simulation took */
    int stopped;    /* 1: a verdict point stopped once it could not meet: attain is an upper
                     * bound, the other figures cover the run up to then */
} ws_plan_result;

/* Evaluates pts[0..n) into out[0..n); 0 or an error code with err set. */
typedef int (*ws_plan_eval_fn)(void *ctx, const ws_plan_point *pts, int n, ws_plan_result *out,
                               ws_err *err);

typedef struct ws_plan_spec {
    const char *model, *host;
    const char *gpus[WS_PLAN_MAX_GPUS];
    int n_gpus;
    double price[WS_PLAN_MAX_GPUS]; /* $/hour per GPU profile; 0: none */
    unsigned policies;              /* bit per ws_policy_kind */
    /* workload */
    ws_plan_load load;
    const char *trace; /* RATE: a trace file (else the generator) */
    ws_trace_opts topts;
    ws_trace_gen gen;   /* RATE without a trace: rate is the search's start */
    uint64_t requests;  /* requests per point (trace: its first; 0: all of it) */
    int prompt, output; /* USERS: each user's prompt and output tokens */
    int batch;          /* RATE: most sequences running at once (32) */
    /* objectives */
    double slo_ttft, slo_tpot; /* s; 0: none (at least one) */
    double slo_pct;            /* percent within them (99) */
    double tol;                /* relative tolerance of the rate (0.05) */
    double start;              /* first load tried (0: the trace's rate, the generator's, 1) */
    double max_rate;           /* highest rate tried (1e4 requests/s) */
    int max_users;             /* most users tried (1024) */
    /* settings: candidates of each, searched one at a time when tune */
    int tune;
    double kv_gb[WS_PLAN_MAX_CAND];
    int n_kv;
    int page[WS_PLAN_MAX_CAND], n_page;
    int window[WS_PLAN_MAX_CAND], n_window;
    /* the OOM frontier's batches (n_fit 0: none) */
    int fit_batch[WS_PLAN_MAX_CAND], n_fit;
    long long fit_max; /* longest context tried, tokens (4 Mi) */
    /* simulation */
    int detail_layer;           /* 0: fold identical layers (default) */
    int chunk;                  /* prefill chunk (2048) */
    int prefill_mode;           /* where chunks' CPU experts run: ws_prefill_mode (auto) */
    int prefill_gpu_tokens;     /* > 0: auto's threshold over the engine's (0: the engine's) */
    int batching, token_budget; /* how steps are filled (serving.h; chunked, 2048) */
    int prefix_cache, preempt;  /* serving.h (off, none) */
    const char *engine;         /* serve as this engine does (engines/NAME.json, resolved per
                                 * GPU), NULL: none; then the settings above that `given`
                                 * marks (WS_PLAN_GIVEN_*) override its values */
    unsigned given;
    /* A configuration search (plan_space.h): the configurations points may name, and the
     * engines those name (NULL configs: every point runs the settings above) */
    const ws_plan_config *configs;
    size_t n_configs;
    /* The bursts BURST points run: in-memory Mooncake JSONL of requests arriving at one
     * instant, [0] with their prompts, [1] with only the tokens no earlier request cached */
    const char *burst[2];
    size_t burst_len[2];
    int engine_ctx; /* > 0: an engine that sizes its KV by a context (llama.cpp -c) gets this
                     * many tokens (a configuration search: the workload's longest request) */
    const char *engines[WS_PLAN_MAX_ENGINES];
    int n_engines;
    uint64_t seed;
    ws_deploy_cfg cost; /* weight formats, KV dtype, expert placement (the defaults) */
    double host_limit;  /* B of host DRAM (sim_cfg.host_limit); 0: the profile's */
    /* after every round: points evaluated so far, open searches */
    void (*progress)(void *ctx, int round, long long points, int open);
    void *progress_ctx;
} ws_plan_spec;

enum {
    WS_PLAN_GIVEN_BATCHING = 1,
    WS_PLAN_GIVEN_BUDGET = 2,
    WS_PLAN_GIVEN_PREFIX = 4,
    WS_PLAN_GIVEN_PREEMPT = 8,
    WS_PLAN_GIVEN_BATCH = 16,
    WS_PLAN_GIVEN_CHUNK = 32,
};

/* Defaults: all policies, 99 %, tol 0.05, batch 32, 200 requests, candidates kv 1/2/4/8 GiB,
 * page 128/256/512, window 256/512/1024, frontier batches 1/8/32, step detail. */
void ws_plan_spec_default(ws_plan_spec *s);
/* Checks the spec's numbers; WS_EINVAL naming the problem. */
int ws_plan_spec_check(const ws_plan_spec *s, ws_err *err);

/* One search's outcome: the highest load that met the SLOs (0: none did, even the lowest
 * tried; capped: the highest tried met them), with the result there. */
typedef struct ws_plan_best {
    int gpu, policy;
    ws_plan_setting set;
    double max_load;
    int capped;
    ws_plan_result at; /* at max_load (zero when none) */
    /* The lowest load tried that missed (0: none missed) and its result: where none met,
     * what failed at the lowest load (the SLO, the share of requests, OOM). */
    double miss_load;
    ws_plan_result miss;
    int evals;
} ws_plan_best;

typedef struct ws_plan_fit {
    int gpu, policy, batch;
    long long max_context; /* prompt tokens of each (0: not even one unit fits) */
    int capped;            /* fit_max fitted */
} ws_plan_fit;

/* Every evaluated point, with its round. */
typedef struct ws_plan_eval_rec {
    ws_plan_point pt;
    ws_plan_result res;
    int round;
} ws_plan_eval_rec;

typedef struct ws_plan_report {
    ws_plan_best *search; /* one per (gpu, policy, setting) */
    size_t n_search;
    int *best;        /* per (gpu, policy): index into search of the best setting, or -1 */
    ws_plan_fit *fit; /* per (gpu, policy, fit batch) */
    size_t n_fit;
    ws_plan_eval_rec *evals;
    size_t n_evals, cap_evals;
    int rounds;
    double native_rate; /* the trace's own rate (requests/s), else 0 */
    double wall_s;
    char model[64], host[160];
} ws_plan_report;

void ws_plan_report_free(ws_plan_report *r);

/* The best setting's search of (gpu, policy), or NULL. */
const ws_plan_best *ws_plan_best_of(const ws_plan_report *r, const ws_plan_spec *s, int gpu,
                                    int policy);
/* Ranking key of a best search: goodput (requests/s within the SLOs; users: decode tokens/s
 * at the most users). Cost per million output tokens at the best load under price $/h, or
 * NAN when there is no price or no throughput. */
double ws_plan_goodput(const ws_plan_spec *s, const ws_plan_best *b);
double ws_plan_cost_per_mtok(const ws_plan_spec *s, const ws_plan_best *b);

/* One search over load (or context units): bracket from start (x4, integers x2), then
 * bisection at the geometric midpoint (integers: the middle) until hi/lo - 1 <= tol; lo
 * met (0: none yet), hi did not (0: none yet). Its rules for ending are the header's. */
typedef struct ws_plan_bisect {
    double lo, hi;
    double start, min, max, tol;
    int integer; /* users, context units: whole numbers, to 1 */
    int done, capped;
    ws_plan_result at_lo, at_hi;
    int evals;
} ws_plan_bisect;
void ws_plan_bisect_init(ws_plan_bisect *s, double start, double min, double max, double tol,
                         int integer);
/* The next load to try, or 0 with s->done set. */
double ws_plan_bisect_next(ws_plan_bisect *s);
void ws_plan_bisect_update(ws_plan_bisect *s, double x, const ws_plan_result *r);

/* The load a search starts from: given, the trace's rate, the generator's, or 1 user. */
double ws_plan_load_start(const ws_plan_spec *s, double native_rate);
/* Runs the rounds with `eval` (ctx passed through) until every search has ended. */
int ws_plan_search(const ws_plan_spec *s, ws_plan_eval_fn eval, void *ctx, double native_rate,
                   ws_plan_report *rep, ws_err *err);

/* The simulator behind the points: the model and every GPU profile loaded once. */
typedef struct ws_plan ws_plan;
int ws_plan_open(ws_store *store, const ws_plan_spec *s, ws_plan **out, ws_err *err);
void ws_plan_close(ws_plan *p);
/* The trace's own rate (requests / duration of the requests used), 0 without a trace. */
double ws_plan_native_rate(const ws_plan *p);
/* The names the profiles loaded under (hw.gpu, hw.host) and the model's. */
const char *ws_plan_gpu_name(const ws_plan *p, int gpu);
/* The memory a point's run has (sim_memory_of): its GPU, policy and configuration. */
int ws_plan_memory(const ws_plan *p, const ws_plan_point *pt, struct sim_memory *out, ws_err *err);
/* 1 when a point's run caches prompt prefixes (the spec's setting or its engine's). */
int ws_plan_prefix_cache(const ws_plan *p, const ws_plan_point *pt);
/* ws_plan_eval_fn over a ws_plan (ctx): each point through sim_run, one after the other. */
int ws_plan_eval_points(void *plan, const ws_plan_point *pts, int n, ws_plan_result *out,
                        ws_err *err);

/* open + search with ws_plan_eval_points + close. */
int ws_plan_run(ws_store *store, const ws_plan_spec *s, ws_plan_report *rep, ws_err *err);
/* The same with each round handed to round(ctx, plan, pts, n, out, err), which evaluates the
 * points (through ws_plan_eval_points, wherever it likes: cli spreads them over MPI ranks)
 * and must fill out[] exactly as ws_plan_eval_points would. round NULL: ws_plan_run. */
typedef int (*ws_plan_round_fn)(void *ctx, ws_plan *plan, const ws_plan_point *pts, int n,
                                ws_plan_result *out, ws_err *err);
int ws_plan_run_rounds(ws_store *store, const ws_plan_spec *s, ws_plan_round_fn round, void *ctx,
                       ws_plan_report *rep, ws_err *err);

/* Short text of a setting ("default", "kv=4G", "P=512", "W=1024") into buf. */
const char *ws_plan_setting_text(const ws_plan_setting *set, char *buf, size_t cap);
/* The workload in words ("poisson arrivals, prompts fixed:131072, ..."). */
void ws_plan_workload_text(const ws_plan_spec *s, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
