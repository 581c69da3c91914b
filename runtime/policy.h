/* policy: WriteScope's placement rule and the baselines', as pure functions and a small state
 * (no I/O, no KV memory), shared unchanged by the simulator and the live runtime.
 *
 * The CPU share that makes both halves of a layer's attention end together (cost.h terms):
 *     C_cpu + A r L = C_gpu + B (1 - r) L
 *     r*(L) = (B L + C_gpu - C_cpu) / ((A + B) L),  clipped to [0, r_max]
 * L: spilled (CPU + XFER) tokens of one layer summed over the batch's sequences; A, B in
 * s/token, C in s. Bytes never move, so the share is steered only where pages are written:
 *   - prefill: round(r n_pages) of a prompt's pages go to the CPU region, r = r*(prompt +
 *     expected output) (summed over the batch);
 *   - a D-window flush of n pages goes, page by page, to the region that brings the realised
 *     share (CPU tokens / spilled tokens) nearest r*(L + W).
 * Feedback: each layer-step's measured half (tokens, seconds) with the fixed cost the model
 * gives it yields a per-token sample (seconds - fixed) / tokens of A or B. The estimate is an
 * EWMA (weight alpha) or the mean of the last `window` samples. Against flapping it replaces
 * the value r* uses only after min_obs samples, and only when it has stayed more than
 * `hysteresis` (relative) away on the same side for `confirm` samples in a row. Placements
 * made before keep their region; only future ones follow.
 *
 * Baselines (DESIGN section 5) by enum and name: static (fixed r, default 0.5), stream (r = 0),
 * cpu-attn (r = 1), gpu-only and ktrans (no spill: all KV on the GPU, admit what fits), migrate
 * (dynamic r like writescope on a single-state cache: when r moves by min_delta or more the
 * caller moves |dr| x spilled bytes and pays for it, ws_policy_migrate). */
#ifndef WS_POLICY_H
#define WS_POLICY_H

#include "cost.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ws_policy_kind {
    WS_POLICY_WRITESCOPE = 0, /* r*(L) with feedback, placement by write */
    WS_POLICY_STATIC = 1,     /* r = r_static */
    WS_POLICY_STREAM = 2,     /* r = 0: all spilled KV streamed */
    WS_POLICY_CPU_ATTN = 3,   /* r = 1: all spilled KV attended by the CPU */
    WS_POLICY_GPU_ONLY = 4,   /* no spill, experts on the GPU (vLLM, SGLang) */
    WS_POLICY_KTRANS = 5,     /* no spill, experts on the CPU (KTransformers) */
    WS_POLICY_MIGRATE = 6,    /* dynamic r, bytes moved when r changes */
    WS_POLICY_COUNT
} ws_policy_kind;

/* What a kind does, for callers that branch on mechanism rather than name. */
typedef struct ws_policy_info {
    const char
        *name;   /* "writescope", "static", "stream", "cpu-attn", "gpu-only", "ktrans", "migrate" */
    int spills;  /* 1: KV beyond the GPU budget goes to host regions */
    int dynamic; /* 1: the share follows r*(L) and the feedback */
    int reformats;   /* 1: a change of r moves bytes (migrate) */
    int cpu_experts; /* 1: routed experts run on the CPU (0: gpu-only) */
    const char *stands_for;
} ws_policy_info;

const ws_policy_info *ws_policy_info_of(ws_policy_kind k);
const char *ws_policy_name(ws_policy_kind k);
/* WS_ENOTFOUND "unknown policy 'x' (writescope, static, ...)". */
int ws_policy_from_name(const char *name, ws_policy_kind *k, ws_err *err);

#define WS_POLICY_WINDOW_MAX 256 /* longest sliding window of samples */

typedef struct ws_policy_params {
    double r_max;      /* upper clip of r* (default 1) */
    double r_static;   /* static's share (default 0.5) */
    int page_tokens;   /* P, tokens per page (default 256) */
    double alpha;      /* EWMA weight of a new sample (default 0.2); unused when window > 0 */
    int window;        /* mean of the last `window` samples instead of the EWMA (default 0) */
    int min_obs;       /* samples before an estimate can replace the model's (default 8) */
    double hysteresis; /* relative distance an estimate must keep to be adopted (default 0.1) */
    int confirm;       /* consecutive samples beyond the hysteresis to adopt (default 3) */
    double min_tokens; /* halves with fewer tokens give no sample (default 256) */
    double min_delta;  /* migrate: change of r that triggers a move (default 0.05) */
} ws_policy_params;

void ws_policy_params_default(ws_policy_params *p);

/* One estimated per-token cost (A or B). */
typedef struct ws_policy_est {
    double prior;   /* the cost model's value */
    double est;     /* running estimate */
    double adopted; /* the value r* uses */
    long long n_obs, adoptions;
    int streak, streak_dir;
    double win[WS_POLICY_WINDOW_MAX];
    int win_n, win_pos;
    double win_sum;
} ws_policy_est;

typedef struct ws_policy {
    ws_policy_kind kind;
    ws_policy_params par;
    ws_policy_est A, B;
} ws_policy;

/* A_model, B_model: the cost model's A and B (s/token, > 0). WS_EINVAL on bad params. */
int ws_policy_init(ws_policy *p, ws_policy_kind kind, const ws_policy_params *par, double A_model,
                   double B_model, ws_err *err);
/* A measured half of one layer-step: `tokens` attended on that side in `seconds`, of which the
 * model puts `fixed_s` (C_cpu, or C_gpu of that layer) outside the per-token part. Returns 1
 * when the adopted value changed (future placements follow), else 0. */
int ws_policy_observe_cpu(ws_policy *p, double tokens, double seconds, double fixed_s);
int ws_policy_observe_gpu(ws_policy *p, double tokens, double seconds, double fixed_s);
double ws_policy_A(const ws_policy *p); /* adopted A, s/token */
double ws_policy_B(const ws_policy *p); /* adopted B, s/token */

/* r*(L) as above; L <= 0 gives 0. */
double ws_policy_rstar(double A, double B, double C_cpu, double C_gpu, double L, double r_max);
/* The share the policy's kind wants for L spilled tokens with the split's fixed costs (its
 * A and B are replaced by the policy's adopted ones): writescope and migrate r*(L), static
 * r_static, stream 0, cpu-attn 1, gpu-only and ktrans 0 (they do not spill). */
double ws_policy_target(const ws_policy *p, const ws_cost_split *s, double L);

/* Pages of a prefill of n_pages that go to the CPU region for share r: round(r n_pages). */
int ws_policy_prefill_cpu_pages(double r, int n_pages);
/* Pages of a flush of n_pages (page_tokens each) that go to the CPU region, given the realised
 * cpu_tokens of spilled_tokens before it: the count whose share after the flush is nearest r
 * (a tie goes to XFER). */
int ws_policy_flush_cpu_pages(double cpu_tokens, double spilled_tokens, int n_pages,
                              int page_tokens, double r);
/* migrate: given the cache's current share r_cur and the target, the share after this step
 * (*r_new: the target when it is min_delta or more away, else r_cur) and the bytes moved,
 * |r_new - r_cur| x spilled_tokens x bytes_per_token; time them with ws_cost_reformat. */
double ws_policy_migrate(const ws_policy *p, double r_cur, double r_target, double spilled_tokens,
                         double bytes_per_token, double *r_new);

#ifdef __cplusplus
}
#endif
#endif
