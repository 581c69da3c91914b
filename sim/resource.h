/* resource: what the queueing resource models (res_fifo.h, res_pool.h) share: a number of
 * identical units, a FIFO queue of requests waiting for them, busy-time accounting, and a
 * table of functions (sim_res_vt) through which the operation graph (dag.h) acquires and
 * releases units without knowing which model it talks to.
 *
 * A request is an id (the caller's: dag.h uses op ids) and a width (units it holds). A
 * request granted at once is reported by the return value of sim_res_acquire; one that
 * queues is reported later through the grant callback, from inside sim_res_release, at
 * the time of the release. Nothing here schedules events: how long units are held is the
 * caller's business, so a model is a pure queueing rule and the same unit-seconds
 * accounting serves them all.
 *
 * Accounting (units: seconds): unit_s is the integral of busy units over time
 * (unit-seconds), busy_s the time with at least one unit busy. Over any interval,
 * d(unit_s) <= units * dt and d(busy_s) <= dt, so utilisation d(unit_s) / (units * dt)
 * never exceeds 1. sim_res_unit_seconds and sim_res_busy_seconds include the time up to
 * the engine's clock; take them at two instants and divide the difference. */
#ifndef WS_SIM_RESOURCE_H
#define WS_SIM_RESOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SIM_NAME_MAX 32 /* resource and channel names, including the NUL */

typedef struct sim_res sim_res;

/* Told that request `id` now holds its units (at sim_now). Returns 0 or a WS_E* code. */
typedef int (*sim_res_grant_fn)(void *ctx, sim_res *r, uint64_t id, ws_err *err);

typedef struct sim_res_vt {
    const char *model; /* the queueing rule's name: "fifo", "pool" */
    /* 1: granted now; 0: queued (granted later through r->grant); -1: error (err set) */
    int (*acquire)(sim_res *r, uint64_t id, uint32_t width, ws_err *err);
    /* Gives back `width` units and grants the queued requests the rule lets start. */
    int (*release)(sim_res *r, uint32_t width, ws_err *err);
} sim_res_vt;

typedef struct sim_res_req {
    uint64_t id;
    uint32_t width;
} sim_res_req;

struct sim_res {
    const sim_res_vt *vt;
    const sim_engine *eng;   /* the clock */
    char name[SIM_NAME_MAX]; /* "gpu", "h2d", "cpu", ... */
    uint32_t units;          /* identical units (1 for a FIFO serial resource) */
    uint32_t in_use;         /* units held now */
    sim_res_grant_fn grant;  /* set by the user of the resource (dag.h) */
    void *grant_ctx;
    /* queue of waiting requests: a ring of q_cap (a power of two) slots */
    sim_res_req *q;
    size_t q_head, q_len, q_cap;
    /* accounting */
    double t_mark;      /* time unit_s and busy_s are integrated to */
    double unit_s;      /* unit-seconds busy up to t_mark */
    double busy_s;      /* seconds with in_use > 0 up to t_mark */
    uint64_t n_granted; /* requests granted */
    uint64_t n_waited;  /* requests that queued before their grant */
    size_t max_queue;   /* longest queue seen */
};

/* For the models: sets the common fields; `units` >= 1. Returns 0 or WS_EINVAL. */
int sim_res_setup(sim_res *r, const sim_res_vt *vt, const sim_engine *eng, const char *name,
                  uint32_t units, ws_err *err);
void sim_res_free(sim_res *r);

static inline int sim_res_acquire(sim_res *r, uint64_t id, uint32_t width, ws_err *err)
{
    return r->vt->acquire(r, id, width, err);
}
static inline int sim_res_release(sim_res *r, uint32_t width, ws_err *err)
{
    return r->vt->release(r, width, err);
}

/* Unit-seconds busy, and seconds with any unit busy, from time 0 to the engine's clock. */
double sim_res_unit_seconds(const sim_res *r);
double sim_res_busy_seconds(const sim_res *r);
static inline size_t sim_res_queued(const sim_res *r)
{
    return r->q_len;
}

/* For the models: integrates the accounting up to the clock (call before changing
 * in_use); queue push, peek and pop in arrival order. */
void sim_res_account(sim_res *r);
int sim_res_enqueue(sim_res *r, uint64_t id, uint32_t width, ws_err *err);
static inline const sim_res_req *sim_res_head(const sim_res *r)
{
    return r->q_len ? &r->q[r->q_head] : NULL;
}
void sim_res_dequeue(sim_res *r);
/* Takes `width` units for `id` now and counts the grant. */
void sim_res_take(sim_res *r, uint32_t width);

#ifdef __cplusplus
}
#endif
#endif
