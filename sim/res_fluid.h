/* res_fluid: the shared-bandwidth (fluid) resource model: a channel of capacity W bytes/s
 * (host memory bandwidth) through which flows of B bytes each (CPU attention reading KV,
 * DMA copies to and from the GPU) progress at the same time, at rates recomputed whenever
 * a flow starts or ends. Each flow also has its own maximum rate (what it would reach
 * alone: PCIe bandwidth for a copy, the cores' share of DRAM bandwidth for CPU compute).
 *
 * Two sharing rules, chosen at init:
 *   SIM_FLUID_MAXMIN        max-min fair share (water-filling): every flow gets an equal
 *                           share of W, except flows whose own maximum is below that
 *                           share, which run at their maximum and leave the rest to the
 *                           others (the rule of SimGrid's network model);
 *   SIM_FLUID_PROPORTIONAL  each flow runs at its own maximum scaled by
 *                           min(1, W / sum of maxima): demand-proportional slowdown
 *                           (a maximum above W counts as demand as it is).
 * Either way the rates sum to at most W and no flow exceeds its maximum.
 *
 * Events: the channel keeps one completion event pending, for the flow that will finish
 * first at the current rates, stamped with a version. Every start or end bumps the
 * version and schedules a new one; an event whose version is stale is ignored when it
 * arrives (counted in n_stale). A flow is done when less than SIM_FLUID_REL_EPS of its
 * bytes remain, so rounding cannot leave a sliver for another event. Flows ending at the
 * same instant are reported in the order they started, after the channel's rates for the
 * remaining flows are set.
 *
 * Units: bytes, seconds, bytes/s. Accounting: bytes moved (utilisation over an interval is
 * d(bytes) / (W * dt) <= 1) and seconds with at least one flow. */
#ifndef WS_SIM_RES_FLUID_H
#define WS_SIM_RES_FLUID_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "resource.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SIM_FLUID_REL_EPS 1e-9 /* a flow with less than this fraction left is done */

typedef enum sim_fluid_share {
    SIM_FLUID_MAXMIN = 0,       /* max-min fair share, capped by each flow's maximum */
    SIM_FLUID_PROPORTIONAL = 1, /* each flow's maximum scaled by min(1, W / sum of maxima) */
} sim_fluid_share;

typedef struct sim_fluid sim_fluid;
/* Told that flow `id` has moved all its bytes (at sim_now). Returns 0 or a WS_E* code. */
typedef int (*sim_fluid_done_fn)(void *ctx, sim_fluid *ch, uint64_t id, ws_err *err);

typedef struct sim_flow {
    uint64_t id;     /* the caller's */
    double bytes;    /* total, bytes */
    double left;     /* bytes not yet moved */
    double max_rate; /* the flow's own maximum, bytes/s */
    double rate;     /* current rate, bytes/s */
} sim_flow;

struct sim_fluid {
    sim_engine *eng;
    unsigned kind; /* event kind of the completion events */
    char name[SIM_NAME_MAX];
    double capacity; /* W, bytes/s */
    sim_fluid_share share;
    sim_flow *f; /* active flows, in the order they started */
    size_t n, cap;
    uint64_t *done_ids; /* scratch: flows ending at one event */
    size_t done_cap;
    double t_mark;          /* time the flows' `left` and the accounting are integrated to */
    uint64_t version;       /* of the pending completion event */
    uint64_t next_id;       /* the flow that event is for */
    sim_fluid_done_fn done; /* set by the user of the channel (dag.h) */
    void *done_ctx;
    double bytes_moved; /* up to t_mark */
    double busy_s;      /* seconds with at least one flow, up to t_mark */
    uint64_t n_started, n_done, n_stale;
    size_t max_flows; /* most flows at once */
};

/* A channel of `capacity` > 0 bytes/s on engine e, whose completion events are of `kind`
 * (the handler is registered here; channels may share a kind). Free with sim_fluid_free. */
int sim_fluid_init(sim_fluid *ch, sim_engine *e, unsigned kind, const char *name, double capacity,
                   sim_fluid_share share, ws_err *err);
void sim_fluid_free(sim_fluid *ch);

/* Starts flow `id` (distinct from the ids of the channel's active flows) of `bytes` > 0 at
 * the current time; max_rate in bytes/s, 0 meaning the channel's capacity. Its end is
 * reported through ch->done. */
int sim_fluid_start(sim_fluid *ch, uint64_t id, double bytes, double max_rate, ws_err *err);

/* Bytes moved, and seconds with at least one flow, from time 0 to the engine's clock. */
double sim_fluid_bytes(const sim_fluid *ch);
double sim_fluid_busy_seconds(const sim_fluid *ch);
/* The current rate of flow `id`, bytes/s, or -1 if it is not active. */
double sim_fluid_rate(const sim_fluid *ch, uint64_t id);

#ifdef __cplusplus
}
#endif
#endif
