/* plan_space: `writescope plan --search`, a search over the settings offload users turn.
 * A space is a list of candidates per knob (the engine, the weight format of the GPU's parts
 * and of the CPU experts, the KV's type, --n-cpu-moe, GPU experts per layer, -ngl, the
 * prefill chunk and strategy, threads, sockets; the GPUs are the plan's), each a list or
 * `auto` for what the model, the GPU and the host allow (formats: those the model is
 * published in). Every configuration x policy goes through three gates, cheapest first:
 *   1. memory, exactly and without simulation: the weights of each part at its format, the
 *      GPU's KV budget and host DRAM, as sim_run would take them (sim_memory_of); and
 *      whether the engine's own flags can express it (plan_cmd.h);
 *   2. a bound: the request a percentile of the trace sets (the (a+1)-th longest prompt,
 *      a the misses the SLO allows) run alone; if it misses, a+1 requests miss at any load
 *      (a longer prompt only takes longer); with prefix caching the prompt counts only the
 *      tokens no earlier request's blocks cover, the cache's best case; and the largest
 *      burst of requests that arrive at one instant (they stay together at any rate) run
 *      alone: more misses than the SLO allows there, and no load meets;
 *   3. the load search of plan.h, in groups of (engine, policy, GPU), best bound first; a
 *      configuration starts at the group's incumbent load x (1 + tol), among incumbents that
 *      hold at least its context, and one miss there ends it: it cannot beat them.
 * n-cpu-moe "fit" is resolved in gate 1: the fewest CPU MoE layers for the rest to fit.
 * The answer: the best per (engine, policy), the Pareto frontier of goodput against $/h
 * (when every GPU has a price) or else against the longest context one sequence's KV fits,
 * and, when nothing meets, why and the smallest change (one knob one step past the space).
 * Rounds of points go through a ws_plan_eval_fn, so MPI ranks can share them; at most
 * WS_SPACE_ACTIVE searches run per group at once, so results do not depend on the ranks. */
#ifndef WS_SIM_PLAN_SPACE_H
#define WS_SIM_PLAN_SPACE_H

#include "plan.h"
#include "serve.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_SPACE_MAX 16   /* candidates per knob */
#define WS_SPACE_ACTIVE 4 /* load searches at once per group */

typedef enum ws_space_knob {
    WS_KNOB_ENGINE = 0,
    WS_KNOB_W_GPU,
    WS_KNOB_W_CPU,
    WS_KNOB_KV,
    WS_KNOB_N_CPU_MOE,
    WS_KNOB_GPU_EXPERTS,
    WS_KNOB_NGL,
    WS_KNOB_CHUNK,
    WS_KNOB_PREFILL,
    WS_KNOB_THREADS,
    WS_KNOB_SOCKETS,
    WS_KNOBS
} ws_space_knob;

/* The candidates: text as a user gives them ("auto", "bf16", "none", "all", numbers); a
 * knob with none keeps the spec's one value. */
typedef struct ws_plan_space {
    char cand[WS_KNOBS][WS_SPACE_MAX][32];
    int n[WS_KNOBS];
} ws_plan_space;

/* "engine", "w-gpu", "w-cpu", "kv", "n-cpu-moe", "gpu-experts", "ngl", "chunk", "prefill",
 * "threads", "sockets". */
const char *ws_space_knob_name(int k);
/* Adds the comma-separated candidates of text to knob k; WS_EINVAL past WS_SPACE_MAX. */
int ws_plan_space_add(ws_plan_space *sp, int k, const char *text, ws_err *err);

/* Where a configuration x policy stopped. */
typedef enum ws_space_status {
    WS_SPACE_SEARCHED = 0, /* searched to the end: best load in best */
    WS_SPACE_PRUNED,       /* missed at the incumbent's load x (1 + tol) */
    WS_SPACE_BOUND_TTFT,   /* the percentile's request alone missed TTFT */
    WS_SPACE_BOUND_TPOT,   /* ... TPOT */
    WS_SPACE_BOUND_BURST,  /* the largest burst of simultaneous arrivals, alone, missed more
                            * requests than the SLO allows */
    WS_SPACE_BOUND_OOM,    /* the lone request did not fit */
    WS_SPACE_MEM_GPU,      /* weights and KV budget exceed the GPU */
    WS_SPACE_MEM_HOST,     /* the CPU's weights fill host DRAM */
    WS_SPACE_UNEXPRESSED,  /* the engine's flags cannot express it */
    WS_SPACE_STATUSES
} ws_space_status;
/* "searched", "pruned", "alone misses TTFT", ... */
const char *ws_space_status_name(int st);

typedef struct ws_space_entry {
    int config, policy, status;
    sim_memory mem;
    double ctx_tokens;          /* the longest context one sequence's KV fits (memory; spilling
                                 * policies: host DRAM, pinned at r = 0) */
    ws_plan_result alone;       /* the bound's lone request (gate 2) */
    ws_plan_result burst;       /* the bound's burst (gate 2; requests 0: not run) */
    long long alone_prompt;     /* its prompt: the percentile's, or with prefix caching the
                                 * percentile's of the tokens no earlier request covers */
    ws_plan_best best;          /* gate 3 */
    double incumbent;           /* the load it had to beat (0: none) */
    double busy[SIM_RES_COUNT]; /* resource busy s of the lone request's run */
    char why[160];              /* UNEXPRESSED: the engine's reason */
} ws_space_entry;

typedef struct ws_space_change {
    char what[160]; /* "--chunk 8192", "--gpu h100-80gb-sxm", ... */
    int found;      /* 1: this change meets at max_load */
    double max_load;
    ws_plan_result at;
} ws_space_change;

typedef struct ws_space_report {
    ws_plan_config *configs; /* every configuration (owned), the spec's configs */
    size_t n_configs;
    ws_space_entry *e; /* per configuration x policy (owned) */
    size_t n_e;
    int *best;     /* per (engine + 1, policy): index into e, or -1 */
    int *frontier; /* indices into e on the frontier, by goodput (owned) */
    int n_frontier;
    int frontier_price; /* 1: against $/h; 0: against context */
    int count[WS_SPACE_STATUSES];
    long long sims, alone_sims;
    int rounds;
    double wall_s, native_rate;
    char model[64]; /* the model's name and shape, for command lines */
    int n_layers, n_moe_layers, n_experts, max_seqs;
    int engine_ctx; /* the context an engine sized by one gets (llama.cpp -c) */
    char engines[WS_PLAN_MAX_ENGINES][64]; /* the names configs' engine indices name */
    int n_engines;
    ws_space_change change; /* when nothing met */
    char binding[400];      /* when nothing met: what binds, in words */
    double alone_miss_pct;  /* when nothing met: the share of requests that miss even alone on
                             * the closest configuration (NAN: not found) */
    int alone_ok_prompt;    /* the longest prompt that meets alone there (0: none) */
    int alone_novel;        /* 1: those prompts count only what no earlier request cached */
    int burst_requests;     /* the largest burst: its requests and prompt tokens */
    long long burst_tokens;
    int allowed;           /* the misses the SLO's percentile allows of the workload's */
    double wall_gate_s[4]; /* host s in memory, the bound, the load searches, why none */
} ws_space_report;

void ws_space_report_free(ws_space_report *r);

/* Expands sp against the plan's model, GPUs and host into configurations (resolving auto),
 * and runs the gates. spec must have no configs of its own (they are set here and cleared
 * on return); round as for ws_plan_run_rounds (NULL: here). */
int ws_plan_space_run(ws_store *store, ws_plan_spec *spec, const ws_plan_space *sp,
                      ws_plan_round_fn round, void *ctx, ws_space_report *rep, ws_err *err);

/* A configuration in words ("llama.cpp q4_k_m/q4_k_m kv=q8_0 n-cpu-moe=24 chunk=2048 ..."),
 * only the knobs the space varied or set. */
const char *ws_space_config_text(const ws_space_report *r, const ws_plan_config *c, char *buf,
                                 size_t cap);

/* Entry i's configuration as a command line in its engine's own flags (plan_cmd.h); an
 * entry with no engine: WS_EINVAL. */
int ws_space_command(const ws_space_report *r, size_t i, char *buf, size_t cap, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
