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
 *   experts    where a prefill chunk's host-resident weights run (the step played both ways).
 * Every estimate it makes is the layer schedule played (schedule.h), never a closed form.
 * No I/O, no memory of the KV: pure decisions on the caller's numbers. */
#ifndef WS_CONTROL_H
#define WS_CONTROL_H

#include "cost.h"
#include "policy.h"
#include "schedule.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a prefill chunk's host-resident weights run: the CPU-resident routed experts on the
 * CPU (as a decode step's do), or streamed H2D and run on the GPU (llama.cpp offloads a
 * matrix product whose weights sit in host memory once the batch reaches 32 tokens;
 * KTransformers prefills on the GPU); layers wholly on the CPU likewise. */
typedef enum ws_prefill_mode {
    WS_PREFILL_AUTO = 0, /* per chunk, the strategy whose played step is shorter (ties: CPU) */
    WS_PREFILL_CPU = 1,  /* on the CPU */
    WS_PREFILL_GPU = 2,  /* streamed to the GPU */
} ws_prefill_mode;
/* "auto", "cpu", "gpu"; ws_prefill_mode_parse: the mode of a name, -1 for none. */
const char *ws_prefill_mode_name(int mode);
int ws_prefill_mode_parse(const char *name);

typedef struct ws_ctl {
    const ws_cost_model *cm; /* shared, not owned */
    const ws_policy_info *info;
    ws_policy pol;
    int page_tokens; /* P */
    double last_moe; /* the last decode step's final MoE phase, s (0: none yet) */
    double r_cur;    /* migrate: the cache's one share (the others: unused) */
    int prefill_mode; /* ws_prefill_mode: auto after ws_ctl_init */
    int prefill_gpu_tokens; /* > 0: auto streams a step of this many prompt tokens or more */
    int layers;       /* the played layers (the last one's MoE phase is the estimate) */
    int streams;      /* 1: some weights sit in host memory, so a chunk may stream them */
} ws_ctl;

/* The controller of policy `kind` on cost model cm (kept by pointer), for `layers` played
 * layers (migrate confirms an estimate over two steps' samples before r* follows it, or r
 * flaps every other step). WS_EINVAL on bad params. */
int ws_ctl_init(ws_ctl *c, const ws_cost_model *cm, ws_policy_kind kind,
                const ws_policy_params *par, int layers, ws_err *err);

/* The MoE phase the next stream overlaps, for a batch of `batch` sequences (s): the last
 * decode step's, else the last played layer's MoE phase in the schedule for a decode step
 * of the batch with no attention. */
double ws_ctl_moe_estimate(const ws_ctl *c, double batch);
/* The step `in` describes played over the model's layers (schedule.h); each layer's times
 * into lay[l] (NULL: none). The controller's estimate of any layer or step is this. */
double ws_ctl_play(const ws_ctl *c, const ws_sched_in *in, ws_sched_times *lay);
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

/* The prefill strategy mode (ws_prefill_mode) and, for auto, an engine's threshold: a step
 * of gpu_tokens prompt tokens or more streams (0: none, the cost model decides). WS_EINVAL
 * for another mode or a negative threshold. */
int ws_ctl_set_prefill(ws_ctl *c, int mode, int gpu_tokens, ws_err *err);
/* 1: the prefill chunk `in` describes (its prefill_gpu ignored) streams its host-resident
 * weights to the GPU; 0: they run on the CPU. Forced modes are honoured; auto with a
 * threshold compares the step's prompt tokens with it (KTransformers' kt-kernel prefills
 * layer-wise on the GPU above --kt-gpu-prefill-token-threshold); auto without one plays the
 * chunk's step both ways (ws_ctl_play) and takes the shorter, the CPU on a tie. */
int ws_ctl_prefill_gpu(const ws_ctl *c, const ws_sched_in *in);

double ws_ctl_A(const ws_ctl *c); /* adopted A, s/token */
double ws_ctl_B(const ws_ctl *c); /* adopted B, s/token */

#ifdef __cplusplus
}
#endif
#endif
