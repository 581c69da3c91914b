/* engine: the simulator's discrete-event core: a clock, one binary min-heap of pending
 * events, and a table of handlers, one per event kind. It knows nothing of what the events
 * mean: resource models (resource.h, res_fifo.h, res_pool.h, res_fluid.h), the operation
 * graph (dag.h) and the serving loop register handlers for kinds they are given and push
 * events of those kinds.
 *
 * Order is fixed by one comparator, sim_event_before: earlier time first; at equal times
 * the smaller kind first; at equal kinds the event pushed first (a sequence number given
 * at push). The caller's choice of kind numbers is therefore a priority at equal times
 * (e.g. completions before arrivals, so resources are freed before new work asks for
 * them). Nothing else breaks ties, so a run is a pure function of its inputs and seed.
 *
 * Time is a double in seconds and never goes backwards: an event pushed before the current
 * time (or at a NaN or infinite time) is refused with WS_EINVAL. There is no cancel: a
 * model that reschedules (res_fluid) stamps its events with a version and ignores stale
 * ones when they arrive (lazy invalidation), which keeps the heap a plain array.
 *
 * The heap holds 32-byte events by value in one array that grows geometrically, so the
 * steady state allocates nothing. The engine also carries a seeded generator
 * (xoshiro256**) for models that draw random numbers, so one seed fixes a whole run. */
#ifndef WS_SIM_ENGINE_H
#define WS_SIM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SIM_KINDS 256   /* event kinds are 0 .. SIM_KINDS-1 */
#define SIM_SEQ_BITS 48 /* sequence numbers below 2^48; the kind sits above them */

/* One pending event. `key` packs kind (high 16 bits) and sequence (low 48), so the
 * comparator's tie-break is a single integer comparison. */
typedef struct sim_event {
    double t;     /* when, seconds */
    uint64_t key; /* kind << SIM_SEQ_BITS | sequence number */
    void *p;      /* payload: an object the handler acts on */
    uint64_t u;   /* payload: an id, an index or a version */
} sim_event;

static inline unsigned sim_event_kind(const sim_event *ev)
{
    return (unsigned)(ev->key >> SIM_SEQ_BITS);
}
static inline uint64_t sim_event_seq(const sim_event *ev)
{
    return ev->key & ((UINT64_C(1) << SIM_SEQ_BITS) - 1);
}
/* The one comparator: 1 if a is dispatched before b (time, then kind, then sequence). */
static inline int sim_event_before(const sim_event *a, const sim_event *b)
{
    return a->t < b->t || (a->t == b->t && a->key < b->key);
}

typedef struct sim_engine sim_engine;
/* Handles one event at time sim_now(e) == ev->t; returns 0, or a WS_E* code with err set,
 * which stops sim_engine_run and is returned by it. */
typedef int (*sim_handler)(sim_engine *e, const sim_event *ev, void *ctx, ws_err *err);

typedef struct sim_slot {
    sim_handler fn;
    void *ctx;
} sim_slot;

/* The fields are public so the engine can live inside another struct; read the counters,
 * change nothing except through the functions. */
struct sim_engine {
    double now;           /* current time, seconds */
    sim_event *heap;      /* heap[0] is the next event */
    size_t n, cap;        /* events pending, slots allocated */
    uint64_t seq;         /* sequence number of the next push */
    int stop;             /* set by sim_engine_stop: the run returns after this event */
    uint64_t n_pushed;    /* events pushed, all kinds */
    uint64_t n_processed; /* events dispatched, all kinds */
    size_t max_pending;   /* largest heap size seen */
    uint64_t rng[4];      /* xoshiro256** state */
    sim_slot slot[SIM_KINDS];
};

/* Time 0, no events, handlers cleared, generator seeded. Returns 0 or WS_ENOMEM. */
int sim_engine_init(sim_engine *e, uint64_t seed, ws_err *err);
void sim_engine_free(sim_engine *e);

/* Registers fn(ctx) for `kind`. Registering the same fn and ctx again is allowed (models
 * sharing a kind); a different handler for a taken kind is WS_EINVAL. */
int sim_engine_on(sim_engine *e, unsigned kind, sim_handler fn, void *ctx, ws_err *err);

/* Schedules an event of `kind` at time t >= sim_now(e), with payload (p, u). A kind
 * without a handler, a time in the past, NaN or infinite is WS_EINVAL. */
int sim_event_push(sim_engine *e, double t, unsigned kind, void *p, uint64_t u, ws_err *err);

/* Dispatches events in comparator order until none is left, the next is later than
 * `until` (pass INFINITY for no limit; a finite `until` then becomes the clock's time), or
 * a handler calls sim_engine_stop. Returns 0, or the first handler error. */
int sim_engine_run(sim_engine *e, double until, ws_err *err);
/* Makes sim_engine_run return after the event being handled. */
static inline void sim_engine_stop(sim_engine *e)
{
    e->stop = 1;
}

static inline double sim_now(const sim_engine *e)
{
    return e->now;
}
static inline size_t sim_pending(const sim_engine *e)
{
    return e->n;
}
/* The next event without removing it, or NULL when none is pending. */
static inline const sim_event *sim_peek(const sim_engine *e)
{
    return e->n ? &e->heap[0] : NULL;
}

/* The engine's generator: 64 random bits, or a double uniform in [0, 1). */
uint64_t sim_rand_u64(sim_engine *e);
double sim_rand_unit(sim_engine *e);

#ifdef __cplusplus
}
#endif
#endif
