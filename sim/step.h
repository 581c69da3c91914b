/* step: one forward step of an MoE model (a decode step of a batch, or one chunk of a
 * prefill) on four resources: the GPU compute stream, the H2D and D2H copy engines and the
 * CPU worker pool (every CPU op takes all workers). Each layer's operations, their
 * resources, dependencies and durations come from the one layer schedule
 * (runtime/schedule.h), which the live runtime plays too; this file only plays them.
 *
 * Contention between CPU compute and DMA: ONE mechanism, the cost model's calibrated (or
 * datasheet) factor: every H2D copy of a step is timed at W_h2d_eff (ws_cost_h2d contended),
 * since the CPU half or the CPU experts run through each layer.
 *
 * Layer detail: every layer's ops on the event graph (dag.h), the layers added two ahead of
 * the one running, which is before any of their ops can be ready.
 * Step detail (folded): the schedule's player (ws_sched_play, exact on FIFO resources, where
 * every resource's ops are ready in schedule order), and once a layer of a run of one kind
 * leaves the player's state one period after the layer before, the rest of the run is that
 * layer shifted period by period. A recorded timeline needs the graph: there, once three
 * layers of the last run have the same record (times, each resource's first start and last
 * end), no further layer is added and the last period is extrapolated to the end; a step
 * whose last played layers differ after all is counted (fold_inexact). Folded, the D2H chain
 * (flushes, prefill writes, which feed no other op) is computed in closed form from the attention
 * ends. Both equal the layer detail (tests/test_sim_step.c). */
#ifndef WS_SIM_STEP_H
#define WS_SIM_STEP_H

#include <stdint.h>

#include "cost.h"
#include "dag.h"
#include "engine.h"
#include "schedule.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The resources are the schedule's (schedule.h). */
typedef ws_res sim_step_res;
#define SIM_RES_GPU WS_RES_GPU
#define SIM_RES_H2D WS_RES_H2D
#define SIM_RES_D2H WS_RES_D2H
#define SIM_RES_CPU WS_RES_CPU
#define SIM_RES_COUNT WS_RES_COUNT

/* What one step does, per layer, and one layer as played: the schedule's types. */
typedef ws_sched_in sim_step_in;
typedef ws_sched_times sim_step_layer;

typedef struct sim_step_out {
    double t0, t1;              /* step start and end */
    double busy[SIM_RES_COUNT]; /* busy seconds per resource in this step */
    uint64_t events;            /* engine events this step */
    int folded;                 /* layers extrapolated, not played */
    int fold_inexact;           /* 1: the last played periods differed */
} sim_step_out;

/* What a layer's ops did with one resource: busy seconds (an op's duration x its share of
 * the units), the first op's start and the last op's end (absolute; +inf and -inf: none).
 * The starts and ends are part of a layer's record for folding: a copy stream that falls
 * behind by a little each layer shows there before it shows in the layer's end. */
typedef struct sim_step_use {
    double busy, first, last;
} sim_step_use;

typedef struct sim_step {
    sim_engine *eng;
    const ws_cost_model *cm;
    int layers;
    sim_res res[SIM_RES_COUNT];
    sim_dag g;
    int fold;                           /* 1: detail step */
    sim_step_layer *lay;                /* [layers] */
    sim_op_id *ids;                     /* [layers x anchors] the schedule's anchors' op ids */
    double busy[SIM_RES_COUNT];         /* this step, per resource, seconds */
    sim_step_use (*use)[SIM_RES_COUNT]; /* [layers] each resource's use by the layer's ops */
    int *run_end;          /* [layers] the last layer of the run of layers of each one's kind */
    const sim_step_in *in; /* the step being played */
    ws_cost_split split;   /* its attention terms */
    int added;             /* layers added to the graph */
    int stop;              /* 1: periodic, add no more layers */
    ws_sched_layer memo[WS_LAYER_KINDS]; /* this step's ops of a layer past the second, by kind */
    int memo_ok[WS_LAYER_KINDS];         /* 1: memo[k] built for this step */
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
