/* control: the one controller of a decode (and prefill) step, called by both the live
 * runtime (run_engine.c) and the simulator's serving loop (sim/serve.c), so that every
 * placement decision is made here and nowhere else. It owns the policy state (policy.h),
 * the cost-model handle (cost.h), the estimate of the MoE phase that the next layer's XFER
 * stream overlaps, and migrate's one share of a single-state cache.
 *
 * Its decisions, each from sums the caller keeps over the running batch (tokens per layer):
 *   target     r*(L) for L spilled tokens with `resident` D-window tokens attended in HBM
 *              (ws_policy_target with the split terms of the MoE estimate);
 *   share      the share new writes follow: the target, or migrate's current share;
 *   prefill    a prompt's CPU pages, decided at its first chunk toward share(L), L = the
 *              batch's spilled tokens plus every running request's tokens still to come;
 *   flush      a flush's CPU pages, toward share(L + flushed), resident = what stays in the
 *              windows after it;
 *   migrate    at a step's start, whether migrate moves its share to the target, and how
 *              many whole pages (and bytes) change region for that;
 *   observe    the feedback from one layer's observed halves (measured in the runtime,
 *              played in the simulator) with the fixed costs the model gives that layer;
 *   step_end   the step's last MoE phase becomes the next estimate;
 *   experts    where a prefill chunk's CPU-resident routed experts run: on the CPU, or on the
 *              GPU with their weights streamed (ws_cost_prefill_gpu under the run's mode).
 * The MoE estimate before any decode step is the cost model's for a decode step of the
 * batch: router, then the slower of the CPU's routed experts and the GPU's experts plus
 * the shared ones. No I/O, no memory of the KV: pure decisions on the caller's numbers. */
#ifndef WS_CONTROL_H
#define WS_CONTROL_H

#include "cost.h"
#include "policy.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ws_ctl {
    const ws_cost_model *cm; /* shared, not owned */
    const ws_policy_info *info;
    ws_policy pol;
    int page_tokens; /* P */
    double last_moe; /* the last decode step's final MoE phase, s (0: none yet) */
    double r_cur;    /* migrate: the cache's one share (the others: unused) */
    int prefill_mode; /* ws_prefill_mode (cost.h): auto after ws_ctl_init */
} ws_ctl;

/* The controller of policy `kind` on cost model cm (kept by pointer), for `layers` played
 * layers (migrate confirms an estimate over two steps' samples before r* follows it, or r
 * flaps every other step). WS_EINVAL on bad params. */
int ws_ctl_init(ws_ctl *c, const ws_cost_model *cm, ws_policy_kind kind,
                const ws_policy_params *par, int layers, ws_err *err);

/* The MoE phase the next stream overlaps, for a batch of `batch` sequences (s). */
double ws_ctl_moe_estimate(const ws_ctl *c, double batch);
/* r*(L) as the policy wants it (0 for a policy that does not spill). */
double ws_ctl_target(const ws_ctl *c, double batch, double resident, double L);
/* The share new writes follow: migrate's current share, else the target. */
double ws_ctl_share(const ws_ctl *c, double batch, double resident, double L);
/* CPU pages of a prompt of n_pages full pages (0 for a policy that does not spill). */
int ws_ctl_prefill_cpu_pages(const ws_ctl *c, double batch, double resident, double L, int n_pages);
/* CPU pages of a flush of n_pages, given the realised cpu / spilled tokens before it and the
 * window tokens left after it. */
int ws_ctl_flush_cpu_pages(const ws_ctl *c, double batch, double resident_after, double cpu_tokens,
                           double spilled_tokens, int n_pages);

/* migrate at a step's start: when the target is min_delta or more from the current share,
 * the share becomes the target and *pages_to_cpu whole pages change region (> 0: XFER to
 * CPU, < 0: CPU to XFER), those whose move brings the realised share cpu_pages /
 * spilled_pages nearest it. Returns 1 when the share moved, else 0 (and *pages_to_cpu = 0).
 * Policies other than migrate never move. */
int ws_ctl_migrate(ws_ctl *c, double rstar, int cpu_pages, int spilled_pages, int *pages_to_cpu);

/* Feedback from one layer: n CPU tokens attended in cpu_s, m streamed tokens in gpu_s (the
 * GPU half from the attention's start to its last copy), `resident` D-window tokens, after
 * a previous MoE phase of t_moe_prev (0: the step's first layer). */
void ws_ctl_observe(ws_ctl *c, double n, double cpu_s, double m, double gpu_s, double resident,
                    double t_moe_prev);
/* The step is over: t_moe is its last layer's MoE phase. */
void ws_ctl_step_end(ws_ctl *c, double t_moe);

/* The prefill strategy mode (ws_prefill_mode); WS_EINVAL for another value. */
int ws_ctl_set_prefill(ws_ctl *c, int mode, ws_err *err);
/* 1: the prefill chunk of q tokens after ctx streams its CPU experts to the GPU; 0: they
 * run on the CPU. */
int ws_ctl_prefill_gpu(const ws_ctl *c, double q, double ctx);

double ws_ctl_A(const ws_ctl *c); /* adopted A, s/token */
double ws_ctl_B(const ws_ctl *c); /* adopted B, s/token */

#ifdef __cplusplus
}
#endif
#endif
