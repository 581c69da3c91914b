/* dag: operations with dependencies, run on the engine over the resource models. The step
 * model builds each layer's graph (QKV -> GPU half || CPU half -> merge -> MoE ...) out of
 * these and lets the engine play it; the graph knows nothing of what an op computes.
 *
 * An operation (sim_op_spec) has, all optional:
 *   hold      a queueing resource (res_fifo.h, res_pool.h) and `width` units of it, held
 *             from the op's start to its end;
 *   seconds   a fixed duration, run first;
 *   channel   a fluid channel (res_fluid.h) through which `bytes` then flow, at most at
 *             `max_rate` bytes/s, at the rate the channel's sharing rule gives;
 * so a kernel on the GPU stream is {hold gpu, seconds}, a copy is {hold h2d, channel
 * host-memory, bytes, max_rate PCIe}, a CPU attention piece is {hold cpu x k, seconds =
 * fixed cost, channel host-memory, bytes = KV read, max_rate = its uncontended rate}, and
 * an op with none of them is a barrier (or, with seconds, a pure delay).
 *
 * Life of an op: added with its predecessors (ids returned by earlier adds, so the graph
 * is acyclic by construction) -> ready when the last predecessor ends (t_ready) -> start
 * when its resource grants it (t_start) -> fixed part -> flow -> end (t_end): the resource
 * is released (granting queued ops first), then successors become ready in the order they
 * were added, then the on_done callback runs. Every end, even of an op with no duration,
 * goes through an engine event, so chains of ops never recurse and every op ends exactly
 * once (a second end is an error). Ops ready at the same instant reach a resource's queue
 * in event order, so a run is deterministic.
 *
 * Memory: ops live in a ring indexed by id, holding the window from the oldest op not yet
 * ended to the newest; ids below the window are ended ops and count as done predecessors.
 * Memory follows the ops in flight, not the length of the run. Units: seconds, bytes,
 * bytes/s. */
#ifndef WS_SIM_DAG_H
#define WS_SIM_DAG_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "res_fluid.h"
#include "resource.h"
#include "timeline.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t sim_op_id;
#define SIM_OP_NONE UINT64_MAX /* no op: an error return, or a skipped predecessor */

typedef struct sim_op_spec {
    sim_res *hold;      /* resource held while the op runs, or NULL */
    uint32_t width;     /* units of hold (0 means 1) */
    double seconds;     /* fixed part, seconds >= 0 */
    sim_fluid *channel; /* channel the bytes go through, or NULL */
    double bytes;       /* bytes through channel after the fixed part, >= 0 */
    double max_rate;    /* the op's own maximum through channel, bytes/s (0: the channel's) */
    const char *label;  /* for the timeline; must outlive it */
    uint32_t tag;       /* the caller's (e.g. layer) */
    uint64_t user;      /* the caller's (e.g. step or request) */
} sim_op_spec;

typedef enum sim_op_state {
    SIM_OP_WAITING = 0, /* predecessors not all ended */
    SIM_OP_QUEUED = 1,  /* ready, waiting for its resource */
    SIM_OP_FIXED = 2,   /* running its fixed part */
    SIM_OP_FLOWING = 3, /* moving its bytes */
    SIM_OP_DONE = 4,    /* ended */
} sim_op_state;

typedef struct sim_op {
    sim_op_spec s;
    sim_op_id id;
    uint32_t n_wait;               /* predecessors not yet ended */
    uint32_t state;                /* sim_op_state */
    uint32_t succ_head, succ_tail; /* successor list in the edge pool */
    double t_ready, t_start, t_end;
} sim_op;

typedef struct sim_dag sim_dag;
/* Told that an op ended (at sim_now); `op` is a copy, valid during the call. The callback
 * may add ops. Returns 0 or a WS_E* code, which stops the run. */
typedef int (*sim_dag_done_fn)(void *ctx, sim_dag *g, const sim_op *op, ws_err *err);

struct sim_dag {
    sim_engine *eng;
    unsigned kind; /* event kind of the ops' fixed-part ends */
    sim_op *ops;   /* ring of cap (a power of two) ops */
    uint64_t cap;
    sim_op_id lo, hi; /* window: ops lo .. hi-1 are kept; hi is the next id */
    sim_op_id *e_to;  /* edge pool: successor id, next edge */
    uint32_t *e_next;
    uint32_t e_cap, e_used, e_free;
    sim_dag_done_fn on_done;
    void *on_done_ctx;
    sim_timeline *tl; /* spans appended here when non-NULL */
    uint64_t n_added, n_started, n_done;
};

/* An empty graph on engine e whose fixed-part ends are events of `kind` (its handler is
 * registered here; graphs may share a kind). */
int sim_dag_init(sim_dag *g, sim_engine *e, unsigned kind, ws_err *err);
void sim_dag_free(sim_dag *g);
/* The callback told of every op's end (NULL: none); the timeline spans go to (NULL: none). */
static inline void sim_dag_on_done(sim_dag *g, sim_dag_done_fn fn, void *ctx)
{
    g->on_done = fn;
    g->on_done_ctx = ctx;
}
static inline void sim_dag_record(sim_dag *g, sim_timeline *tl)
{
    g->tl = tl;
}

/* Adds an op that starts after the ops in preds[0..n_preds) have ended (SIM_OP_NONE
 * entries are skipped); if they all have, it is ready now and asks for its resource at
 * once. Returns its id, or SIM_OP_NONE with err set (bad spec, unknown predecessor, a
 * resource or channel already driven by another graph, out of memory). */
sim_op_id sim_dag_add(sim_dag *g, const sim_op_spec *spec, const sim_op_id *preds, size_t n_preds,
                      ws_err *err);

/* The op with this id while it is in the window, else NULL (ended and forgotten, or not
 * added yet). */
const sim_op *sim_dag_op(const sim_dag *g, sim_op_id id);
/* 1 if the op has ended (ids below the window have). */
int sim_dag_ended(const sim_dag *g, sim_op_id id);
/* Ops added and not yet ended. */
static inline uint64_t sim_dag_in_flight(const sim_dag *g)
{
    return g->n_added - g->n_done;
}

#ifdef __cplusplus
}
#endif
#endif
