/* step: one forward step of an MoE model (a decode step of a batch, or one chunk of a
 * prefill) as a per-layer operation graph (dag.h) on four resources: the GPU compute stream,
 * the H2D and D2H copy engines (res_fifo) and the CPU worker pool (res_pool, every CPU op
 * takes all workers). Every duration comes from runtime/cost; nothing here re-derives one.
 *
 * A decode layer l: qkv -> D-window append -> [indexer] -> CPU half || GPU half -> merge ->
 * o_proj -> router -> CPU experts || GPU experts || shared experts -> layer end (dense
 * layers: o_proj -> dense MLP). The GPU half is the XFER pages streamed H2D through the
 * ping-pong buffers, pipelined with GPU attention over them and the D-window: a prefetch
 * copy (at most one ping-pong half) that may start once the previous layer's pages are in
 * and layer l-2's buffer half is free, i.e. during layer l-1's MoE phase, then the rest,
 * which waits for qkv (the buffer drains only while attention runs); the half ends when
 * both the attention kernel and the last copy have. Layer 0's prefetch waits for its own
 * qkv (no prefetch into a step, as in the cost model). A sequence whose D-window fills in
 * this step flushes it D2H per layer after that layer's GPU attention; a prefill chunk
 * writes its KV D2H per layer after qkv. No-spill policies attend all KV in HBM.
 *
 * Contention between CPU compute and DMA: ONE mechanism, the cost model's calibrated (or
 * datasheet) factor: every H2D copy of a step is timed at W_h2d_eff (ws_cost_h2d contended),
 * since the CPU half or the CPU experts run through each layer. The fluid channel is not
 * used here, so the slowdown is not counted twice.
 *
 * Layers are added two ahead of the one running (layer l+2 when layer l's qkv ends), which
 * is before any of their ops can be ready, so the graph plays as if built whole.
 * Folding (detail step): once three consecutive MoE layers (past the first) show the same
 * record relative to their start (duration, qkv, attention start, both halves, MoE phase),
 * no further layer is added; the last played layer's period is extrapolated to the rest,
 * and the D2H chain (flushes, prefill writes, which feed no other op) is computed in closed
 * form from the attention ends. That equals the layer-level run; a step whose last played
 * layers are not periodic after all is counted (fold_inexact).
 */
#ifndef WS_SIM_STEP_H
#define WS_SIM_STEP_H

#include <stdint.h>

#include "cost.h"
#include "dag.h"
#include "engine.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sim_step_res {
    SIM_RES_GPU = 0, /* compute stream */
    SIM_RES_H2D = 1, /* host-to-device copy engine */
    SIM_RES_D2H = 2, /* device-to-host copy engine */
    SIM_RES_CPU = 3, /* worker pool */
    SIM_RES_COUNT
} sim_step_res;

/* What one step does, per layer (token counts summed over the batch). */
typedef struct sim_step_in {
    double T;             /* tokens through the GEMMs (decode tokens or the chunk) */
    int nospill;          /* 1: all KV in HBM (gpu-only, ktrans) */
    double n_cpu;         /* attended tokens in the CPU region */
    double m_xfer;        /* attended tokens streamed from XFER */
    double resident;      /* attended tokens in HBM (D-windows; everything for no-spill) */
    double n_seqs;        /* decode sequences (for the append) */
    double indexer_s;     /* GPU indexer time per layer (sparse models), s */
    double prefill_q;     /* prefill chunk tokens (0: decode step) */
    double prefill_ctx;   /* tokens of that prompt before the chunk */
    double write_bytes;   /* prefill KV written D2H per layer, B */
    double flush_bytes;   /* D-window flush D2H per layer, B (0: none) */
    double migrate_bytes; /* host bytes moved per layer (migrate), B */
} sim_step_in;

/* One layer as played (seconds, absolute times). */
typedef struct sim_step_layer {
    double t_start, t_end; /* layer start (its qkv ready) and end */
    double qkv_end;        /* qkv projection end */
    double attn_start;     /* the attention halves may start (append, indexer done) */
    double cpu_s;          /* CPU half duration (0: none) */
    double gpu_end;        /* GPU half end (attention and last copy) */
    double gpu_main_end;   /* GPU attention kernel end */
    double moe_start;      /* router (dense: o_proj) end */
    double moe_s;          /* MoE (or dense MLP) phase: moe_start -> layer end */
    double exp_cpu_s;      /* the routed experts on the CPU (0: none) */
} sim_step_layer;

typedef struct sim_step_out {
    double t0, t1;              /* step start and end */
    double busy[SIM_RES_COUNT]; /* busy seconds per resource in this step */
    uint64_t events;            /* engine events this step */
    int folded;                 /* layers extrapolated, not played */
    int fold_inexact;           /* 1: the last played periods differed */
} sim_step_out;

typedef struct sim_step {
    sim_engine *eng;
    const ws_cost_model *cm;
    int layers;
    sim_res res[SIM_RES_COUNT];
    sim_dag g;
    int fold;                          /* 1: detail step */
    sim_step_layer *lay;               /* [layers] */
    sim_op_id *ids;                    /* [3 layers] scratch: layer ends, GPU attention, last H2D */
    double busy[SIM_RES_COUNT];        /* this step, per resource, seconds */
    double (*busy_lay)[SIM_RES_COUNT]; /* [layers] the same per layer */
    const sim_step_in *in;             /* the step being played */
    ws_cost_split split;               /* its attention terms */
    int added;                         /* layers added to the graph */
    int stop;                          /* 1: periodic, add no more layers */
} sim_step;

/* Resources and graph on engine e (event kind `kind` for op ends); `layers` played per step
 * (<= the model's), `cpu_workers` units in the pool, fold = 1 for detail step. */
int sim_step_init(sim_step *st, sim_engine *e, unsigned kind, const ws_cost_model *cm, int layers,
                  int cpu_workers, int fold, ws_err *err);
void sim_step_free(sim_step *st);

/* Plays one step from the engine's clock to its end (the clock is left there). Per-layer
 * records in st->lay. */
int sim_step_run(sim_step *st, const sim_step_in *in, sim_step_out *out, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
