/* decode: the protocol of one decode step, written once for the simulator's serving loop
 * (sim/serve.c) and the live engine (run_engine.c). In order: the controller's target for
 * the batch as it stands; migrate's move of whole pages toward it; the flush of the windows
 * that this step's token fills, placed toward the share of the spilled tokens plus the
 * flushed ones; the step's layers played (simulated, or run for real); every layer's halves
 * observed; the step's end. Every decision is the controller's (control.h), made here in
 * this order on the same sums, so the two callers differ only where they really do, behind
 * a small table of functions (ws_decode_ops): the simulator keeps token counts and plays
 * modeled durations; the runtime moves real pages and measures. With the runtime's measured
 * durations replaced by the model's the two agree to 1e-9 (tests/test_schedule.c). */
#ifndef WS_DECODE_H
#define WS_DECODE_H

#include "control.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The running batch, per layer, summed over its sequences. */
typedef struct ws_decode_sums {
    double batch;    /* sequences running */
    double spilled;  /* CPU + XFER tokens */
    double cpu;      /* of which in the CPU region */
    double resident; /* D-window tokens attended this step: each window with its new token */
} ws_decode_sums;

/* The step's decisions, made before it plays. */
typedef struct ws_decode_plan {
    ws_decode_sums sums;  /* after migrate's move */
    double r_star;        /* the target at the step's start */
    double r_real;        /* the realised share after migrate's move, before the flush */
    int migrate_pages;    /* whole pages migrate moves (> 0: XFER to CPU; 0: none) */
    double migrate_bytes; /* their bytes, per layer */
    int flush_seqs;       /* sequences whose window this step's token fills */
    int flush_pages;      /* their pages */
    int flush_cpu_pages;  /* of which to the CPU region */
    double flush_bytes;   /* the flush's bytes, per layer */
} ws_decode_plan;

/* One layer as played or run: what the controller observes (ws_ctl_observe). */
typedef struct ws_decode_obs {
    double n_cpu, cpu_s;  /* CPU-region tokens attended, the CPU half's time (s) */
    double m_xfer, gpu_s; /* streamed tokens, the GPU half's time (attention start to last copy) */
    double resident;      /* D-window tokens attended in HBM */
    double moe_s;         /* the layer's MoE phase (s) */
    double A, B;          /* set by ws_decode_step: the adopted estimates after this layer */
} ws_decode_obs;

/* What the simulator and the runtime each do their own way. */
typedef struct ws_decode_ops {
    /* The batch's sums as they are now. */
    void (*sums)(void *ctx, ws_decode_sums *s);
    /* Sequences whose window this step's token fills (0 where nothing spills). */
    int (*full_windows)(void *ctx);
    /* Moves `pages` whole pages between the regions (> 0: XFER to CPU, < 0: back), taken
     * from the sequences in slot order. Called only when migrate moves. */
    int (*migrate)(void *ctx, int pages, ws_err *err);
    /* Plays (or runs) the step's layers under plan, its flush placed as planned, and fills
     * obs[l] for each layer. */
    int (*play)(void *ctx, const ws_decode_plan *plan, ws_decode_obs *obs, ws_err *err);
} ws_decode_ops;

/* One decode step of `layers` layers, D-windows of `window` tokens, through ops (ctx
 * theirs): *plan gets the decisions, obs[layers] the layers as observed and the estimates
 * after each. Returns 0 or the code of the op that failed. */
int ws_decode_step(ws_ctl *ctl, int layers, int window, const ws_decode_ops *ops, void *ctx,
                   ws_decode_plan *plan, ws_decode_obs *obs, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
