/* serve: the simulator's serving loop. Requests come from a source (a closed batch, or any
 * function yielding them in arrival order: a trace reader, a generator), are admitted
 * first-come first-served up to `batch` sequences under the memory limits, and run as steps
 * (step.h) until every request has ended, under one placement policy. The scheduler
 * (serving.h, ws_batching) fills each step: the running decodes and prompt chunks up to a
 * token budget (chunked, llama.cpp's slots), chunks alone while any prompt has tokens left
 * (prefill-first), or one chunk of the oldest prompt (serial); a step's decodes follow the
 * one decode-step protocol (decode.h) on the controller (control.h) the live runtime also
 * calls, its layers the one layer schedule, a mixed step's too.
 * Memory: no-spill policies keep a request's KV in the GPU KV budget, spilling ones its
 * D-window there and the rest in host (and pinned) memory; a request reserves its whole KV
 * at admission, or (preemption by recompute) its prompt, growing per token, the newest
 * sequences preempted when it runs out. Prefix caching (prefix.h) shares cached prompt
 * blocks. Weights and budgets must fit the GPU's and the host's memory; a request that
 * cannot fit even alone is an out-of-memory outcome. Results stream to on_step and
 * on_request; totals are running sums and percentiles a bounded summary, so memory follows
 * the running requests (and the prefix cache's blocks), not the trace. The full rules are
 * in docs/sim.md ("The serving loop"). */
#ifndef WS_SIM_SERVE_H
#define WS_SIM_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "cost.h"
#include "model.h"
#include "policy.h"
#include "server.h"
#include "serving.h"
#include "step.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- request sources ---------------------------------------------------------------- */

typedef struct sim_req {
    double arrival_s; /* seconds from the start */
    int prompt;       /* prompt tokens, >= 1 */
    int output;       /* output tokens, >= 1 */
    /* The hashes of the prompt's leading blocks of WS_TRACE_BLOCK_TOKENS tokens (a trace's
     * hash_ids; the source's, valid until its next call), for the prefix cache; NULL: none */
    const int64_t *blocks;
    int n_blocks;
} sim_req;

/* Yields the next request (arrivals non-decreasing): 1 = *req filled, 0 = no more, or a
 * negative WS_E* code with err set. */
typedef int (*sim_source_next)(void *ctx, sim_req *req, ws_err *err);

/* clients = 0: an open source, arrival_s is the time the request arrives. clients = N > 0:
 * a closed loop of N clients. The run draws N requests at the start (each arrives at its
 * arrival_s), then one more each time a request ends (served or out of memory): it comes
 * from the client that request freed and arrives its arrival_s (the think time) after that
 * end; so at most N requests are waiting or running at any time. */
typedef struct sim_source {
    sim_source_next next;
    void *ctx;
    int clients;
} sim_source;

/* The closed batch: n requests of `prompt` and `output` tokens at time 0. */
typedef struct sim_closed {
    int n, i, prompt, output;
} sim_closed;
void sim_closed_source(sim_closed *c, int n, int prompt, int output, sim_source *src);

/* A trace source (traces/trace.h: a file or a generator) as a request source; t stays the
 * caller's. A closed-loop generator (trace_gen.h) gives a closed source of its clients. */
struct ws_trace;
int sim_trace_source(struct ws_trace *t, sim_source *src, ws_err *err);

struct sim_step_rec;
struct sim_req_result;
struct sim_timeline;

/* ---- configuration ------------------------------------------------------------------ */

#define WS_SIM_HOST_DEFAULT (512 * 1073741824.0) /* host DRAM when no profile says */
#define SIM_BATCH_MAX                                                                              \
    (1 << 20) /* the most sequences running at once (sim --batch, a points                         \
               * file's batch): admission and each step are linear in it */

typedef struct sim_cfg {
    WS_SERVING_MEMBERS;   /* policy, par, batch, chunk, window, prefill_mode, seed (serving.h) */
    int layers;           /* layers played (0: the model's); memory stays the model's */
    int detail_layer;     /* 1: every layer as ops; 0: fold identical layers */
    int cpu_workers;      /* CPU pool units (the host's cores; default 1); with the cost
                           * settings' cpu_sockets and cpu_threads, the run uses their share
                           * (ws_deploy_cpu_workers) */
    double gpu_kv_budget; /* B; 0: kv_mem's, else 2 GiB (0.3 GiB for MLA models) */
    ws_server_kv kv_mem;  /* an engine's KV sizing (server.h; default: the budget) */
    double pinned_limit;  /* B; 0: 256 GiB */
    double host_limit;    /* B of host DRAM for the CPU's weights and the spilled KV; 0:
                           * the host profile's mem_bytes, else WS_SIM_HOST_DEFAULT */
    double slo_ttft, slo_tpot; /* s; 0: no SLO */
    /* > 0: the run stops once this many requests have missed the SLOs (ended outside them,
     * out of memory, or past slo_ttft at their first token), for a caller that needs only
     * the verdict "more than stop_misses - 1 miss"; the totals then cover the run so far
     * (sim_totals.stopped). 0: never. */
    uint64_t stop_misses;
    int keep_steps;            /* 1: keep the per-step records in res->step (default 1) */
    int keep_requests;         /* 1: keep the per-request records in res->req (default 1) */
    /* Every op's span goes here when non-NULL (a Chrome-trace writer drains it from
     * on_step, e.g. with sim_timeline_clear after writing). */
    struct sim_timeline *timeline;
    /* Called after every step with its record (NULL: none); a non-zero return stops the
     * run with that code (err set by the callee). */
    int (*on_step)(void *ctx, const struct sim_step_rec *rec, ws_err *err);
    void *on_step_ctx;
    /* Called when a request ends (served, or out of memory at admission), in the order
     * they end; the same contract as on_step. */
    int (*on_request)(void *ctx, const struct sim_req_result *rec, ws_err *err);
    void *on_request_ctx;
    /* Called every few hundred steps and at the end (NULL: none). */
    void (*progress)(void *ctx, double sim_t, uint64_t steps, uint64_t ended, uint64_t seen);
    void *progress_ctx;
} sim_cfg;

void sim_cfg_default(sim_cfg *c);

/* ---- results ------------------------------------------------------------------------ */

typedef enum sim_outcome {
    SIM_OUT_DONE = 0, /* served */
    SIM_OUT_OOM = 1,  /* could not fit the memory limits even alone */
} sim_outcome;

typedef struct sim_req_result {
    uint64_t id; /* order of arrival, from 0 */
    double arrival_s, first_s, end_s;
    double ttft, tpot, e2e; /* s (tpot 0 for a single output token); -1 for OOM */
    int prompt, output, generated;
    int outcome; /* sim_outcome */
    int slo_ok;  /* 1: served within the SLOs given */
} sim_req_result;

/* A step as it streams out of the serving loop: the one step row's names (store/steprow.h,
 * which sim_record_step fills from it) and the simulator's own extras. */
typedef struct sim_step_rec {
    uint64_t idx;
    double t_start, t_end;      /* s */
    int batch;                  /* sequences running */
    int decode_tokens;          /* tokens decoded */
    int prefill_tokens;         /* prompt tokens of the chunk */
    int prefill_gpu;            /* 1: the chunk's CPU experts streamed to the GPU */
    double r_star;              /* the policy's target share at the step */
    double r_real;              /* CPU tokens / spilled tokens at the step */
    double spilled;             /* spilled tokens per layer, summed over the batch */
    double context;             /* KV tokens attended per layer, summed over the batch */
    double busy[SIM_RES_COUNT]; /* s */
    uint64_t events;
    /* Per layer, summed over the batch (0 at a prefill step): attended tokens in the CPU
     * region, streamed from XFER, resident in HBM. */
    double n_cpu, m_xfer, resident;
    /* The step's layers as played (n_lay of them; folded ones extrapolated): valid only
     * inside on_step, NULL in the kept records. */
    const sim_step_layer *lay;
    int n_lay;
} sim_step_rec;

typedef struct sim_totals {
    uint64_t requests, served, oom;
    uint64_t prompt_tokens, output_tokens, decode_tokens;
    double makespan_s;    /* first arrival to last end */
    double tokens_per_s;  /* output tokens / makespan */
    double decode_time_s; /* sum of decode steps */
    double decode_tps;    /* decode tokens / decode time */
    double ttft_p50, ttft_p90, ttft_p99, tpot_p50, tpot_p90, tpot_p99; /* NAN: no sample */
    int pct_exact;      /* 1: the percentiles are exact (few enough served requests) */
    uint64_t slo_met;   /* served requests within the SLOs */
    uint64_t missed;    /* requests known to miss them (see sim_cfg.stop_misses) */
    int stopped;        /* 1: stopped at sim_cfg.stop_misses, before every request ended */
    double goodput_rps; /* served requests within the SLOs per second of makespan */
    double slo_frac;    /* their share of all requests */
    double busy[SIM_RES_COUNT];
    double r_final;           /* realised share at the last step */
    double rstar_last;        /* the policy's target at the last decode step */
    double gpu_weight_bytes;  /* weights resident on the GPU under this policy */
    double gpu_kv_budget;     /* the GPU KV budget in force, B */
    int no_room;              /* 1: those weights and the budget exceed the GPU: all OOM */
    double gpu_mem;           /* the GPU's memory, B */
    double host_weight_bytes; /* routed experts resident in host DRAM */
    double host_mem;          /* host DRAM in force, B */
    int no_host_room;         /* 1: those weights fill the host DRAM: all OOM */
    /* Requests out of memory because their own KV exceeds a tier even with nothing else
     * running, and the first one's: its tokens, its bytes in the GPU KV budget, host DRAM and
     * pinned memory, and what each tier holds for KV (the budget, the host DRAM the weights
     * leave, the pinned limit). */
    uint64_t kv_oom;
    int kv_oom_tokens;
    double kv_oom_need[3], kv_oom_room[3]; /* B: GPU KV budget, host DRAM, pinned */
    uint64_t steps, events, fold_inexact, folded_layers;
    /* prefill chunks whose CPU-resident experts ran on the CPU / were streamed to the GPU
     * (neither where every expert is on the GPU) */
    uint64_t prefill_cpu_steps, prefill_gpu_steps;
    uint64_t preempted; /* sequences preempted (their KV freed, recomputed later) */
    /* Prefix caching: the requests' hashed prompt blocks, those found cached at admission,
     * and those repeating a block seen before (the trace's own bound on hits); the tier the
     * cache lives in: "gpu" (no-spill policies) or "host". */
    uint64_t prefix_blocks, prefix_hits, prefix_repeats;
    char prefix_tier[8];
    double wall_s; /* host time the run took */
} sim_totals;

typedef struct sim_results {
    char model[64], gpu[160], host[160], policy[32];
    sim_req_result *req; /* by id, when cfg.keep_requests */
    size_t n_req, cap_req;
    sim_step_rec *step; /* when cfg.keep_steps */
    size_t n_step, cap_step;
    sim_totals tot;
} sim_results;

/* The memory a run under cfg has before its first request: the weights on the GPU and in
 * host DRAM (each part at its format, per the policy's placement), the GPU KV budget, the
 * host DRAM and pinned limits in force, the KV bytes per token in each tier (the GPU's
 * layers, the layers wholly on the CPU), and whether the weights fit (gpu_fits: weights and
 * the KV budget within the GPU's memory; host_fits: the CPU's weights leave host DRAM
 * free). sim_run takes exactly these; a run that does not fit makes every request OOM. */
typedef struct sim_memory {
    double gpu_weights, gpu_kv, gpu_mem;
    double host_weights, host_mem, pinned;
    double kv_gpu_token, kv_host_token;
    int gpu_fits, host_fits;
} sim_memory;
int sim_memory_of(const ws_model *m, const ws_hw *hw, const ws_deploy_cfg *ccfg, const sim_cfg *cfg,
                  sim_memory *out, ws_err *err);

/* Runs the workload from src under cfg on model m and hardware hw (cost settings ccfg;
 * gpu-only puts every routed expert on the GPU). res is filled (free with
 * sim_results_free). Bad cfg: WS_EINVAL; a source error is returned as it is. */
int sim_run(const ws_model *m, const ws_hw *hw, const ws_deploy_cfg *ccfg, const sim_cfg *cfg,
            const sim_source *src, sim_results *res, ws_err *err);
void sim_results_free(sim_results *res);

/* Name of an outcome: "done", "oom". */
const char *sim_outcome_name(int outcome);

#ifdef __cplusplus
}
#endif
#endif
