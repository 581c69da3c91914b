/* test_sim_engine: the event core (sim/engine.c): dispatch order by the one comparator
 * (time, kind, sequence) including ties, the clock never going backwards, determinism for a
 * seed, handler registration and errors, running up to a horizon. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define MAXLOG 20000

typedef struct rec {
    double t;
    unsigned kind;
    uint64_t seq, u;
} rec;

static rec logv[MAXLOG];
static size_t n_log;

static int record(sim_engine *e, const sim_event *ev, void *ctx, ws_err *err)
{
    (void)ctx;
    (void)err;
    cr_assert_eq(sim_now(e), ev->t);
    cr_assert_lt(n_log, MAXLOG);
    logv[n_log++] = (rec){ev->t, sim_event_kind(ev), sim_event_seq(ev), ev->u};
    return 0;
}

static void engine_with(sim_engine *e, unsigned kinds)
{
    ws_err err = {0};
    cr_assert_eq(sim_engine_init(e, 1, &err), 0);
    for (unsigned k = 0; k < kinds; k++)
        cr_assert_eq(sim_engine_on(e, k, record, NULL, &err), 0, "%s", err.msg);
    n_log = 0;
}

Test(sim_engine, comparator_time_then_kind_then_sequence)
{
    sim_event a = {1.0, (uint64_t)2 << SIM_SEQ_BITS | 5, NULL, 0};
    sim_event b = {2.0, (uint64_t)0 << SIM_SEQ_BITS | 0, NULL, 0};
    cr_assert(sim_event_before(&a, &b)); /* time first, whatever the kind */
    cr_assert(!sim_event_before(&b, &a));
    sim_event c = {1.0, (uint64_t)1 << SIM_SEQ_BITS | 9, NULL, 0};
    cr_assert(sim_event_before(&c, &a)); /* same time: smaller kind, whatever the sequence */
    sim_event d = {1.0, (uint64_t)2 << SIM_SEQ_BITS | 4, NULL, 0};
    cr_assert(sim_event_before(&d, &a)); /* same time and kind: pushed first */
    cr_assert(!sim_event_before(&a, &a));
    cr_assert_eq(sim_event_kind(&a), 2);
    cr_assert_eq(sim_event_seq(&a), 5);
}

/* Ties at one time: kind order, then push order within a kind. */
Test(sim_engine, ties_break_by_kind_then_push_order)
{
    sim_engine e;
    ws_err err = {0};
    engine_with(&e, 3);
    unsigned kinds[] = {2, 1, 2, 0, 1, 2, 0};
    for (unsigned i = 0; i < 7; i++)
        cr_assert_eq(sim_event_push(&e, 5.0, kinds[i], NULL, i, &err), 0);
    cr_assert_eq(sim_event_push(&e, 4.0, 2, NULL, 99, &err), 0);
    cr_assert_eq(sim_engine_run(&e, INFINITY, &err), 0);
    uint64_t want[] = {99, 3, 6, 1, 4, 0, 2, 5};
    cr_assert_eq(n_log, 8);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(logv[i].u, want[i], "position %d: got u=%llu", i,
                     (unsigned long long)logv[i].u);
    cr_assert_eq(e.n_processed, 8);
    cr_assert_eq(e.n_pushed, 8);
    sim_engine_free(&e);
}

static int cmp_rec(const void *a, const void *b)
{
    const rec *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Many events with heavy ties (times on a coarse grid, few kinds), past the heap's first
 * allocation: the dispatch order is exactly the sort by (time, kind, sequence). */
Test(sim_engine, many_events_come_out_sorted)
{
    sim_engine e;
    ws_err err = {0};
    engine_with(&e, 4);
    static rec pushed[MAXLOG];
    size_t n = 10000;
    for (size_t i = 0; i < n; i++) {
        double t = (double)(sim_rand_u64(&e) % 50) * 0.25;
        unsigned k = (unsigned)(sim_rand_u64(&e) % 4);
        pushed[i] = (rec){t, k, i, i};
        cr_assert_eq(sim_event_push(&e, t, k, NULL, i, &err), 0);
    }
    cr_assert_eq(e.max_pending, n);
    cr_assert_eq(sim_engine_run(&e, INFINITY, &err), 0);
    qsort(pushed, n, sizeof *pushed, cmp_rec);
    cr_assert_eq(n_log, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(logv[i].u, pushed[i].u, "position %zu", i);
    sim_engine_free(&e);
}

/* A handler that keeps pushing events at random delays (zero included) from the engine's
 * generator, for a fixed number of events. */
typedef struct churn {
    uint64_t left;
    uint64_t hash;
    double last;
} churn;

static int churn_handler(sim_engine *e, const sim_event *ev, void *ctx, ws_err *err)
{
    churn *c = ctx;
    cr_assert_geq(ev->t, c->last, "time went backwards: %g after %g", ev->t, c->last);
    c->last = ev->t;
    uint64_t bits;
    memcpy(&bits, &ev->t, sizeof bits);
    c->hash = (c->hash ^ bits ^ ev->key) * UINT64_C(0x100000001B3);
    if (c->left == 0)
        return 0;
    c->left--;
    double dt = (sim_rand_u64(e) % 4 == 0) ? 0.0 : sim_rand_unit(e);
    unsigned k = (unsigned)(sim_rand_u64(e) % 3);
    return sim_event_push(e, ev->t + dt, k, NULL, 0, err);
}

static uint64_t churn_run(uint64_t seed, double *t_end)
{
    sim_engine e;
    ws_err err = {0};
    churn c = {50000, UINT64_C(1469598103934665603), 0};
    cr_assert_eq(sim_engine_init(&e, seed, &err), 0);
    for (unsigned k = 0; k < 3; k++)
        cr_assert_eq(sim_engine_on(&e, k, churn_handler, &c, &err), 0);
    for (int i = 0; i < 64; i++)
        cr_assert_eq(sim_event_push(&e, sim_rand_unit(&e), (unsigned)i % 3, NULL, 0, &err), 0);
    cr_assert_eq(sim_engine_run(&e, INFINITY, &err), 0, "%s", err.msg);
    cr_assert_eq(e.n_processed, 50000 + 64);
    *t_end = sim_now(&e);
    sim_engine_free(&e);
    return c.hash;
}

Test(sim_engine, time_monotone_and_deterministic_for_a_seed)
{
    double t1, t2, t3;
    uint64_t a = churn_run(7, &t1), b = churn_run(7, &t2), c = churn_run(8, &t3);
    cr_assert_eq(a, b);
    cr_assert_eq(t1, t2);
    cr_assert_neq(a, c);
}

Test(sim_engine, past_nan_infinite_and_unhandled_refused)
{
    sim_engine e;
    ws_err err = {0};
    engine_with(&e, 1);
    cr_assert_eq(sim_event_push(&e, 2.0, 0, NULL, 0, &err), 0);
    cr_assert_eq(sim_engine_run(&e, INFINITY, &err), 0);
    cr_assert_eq(sim_now(&e), 2.0);
    cr_assert_eq(sim_event_push(&e, 1.5, 0, NULL, 0, &err), WS_EINVAL);
    cr_assert(strstr(err.msg, "before the clock"), "%s", err.msg);
    cr_assert_eq(sim_event_push(&e, NAN, 0, NULL, 0, &err), WS_EINVAL);
    cr_assert_eq(sim_event_push(&e, INFINITY, 0, NULL, 0, &err), WS_EINVAL);
    cr_assert_eq(sim_event_push(&e, 3.0, 1, NULL, 0, &err), WS_EINVAL);
    cr_assert(strstr(err.msg, "no handler"), "%s", err.msg);
    cr_assert_eq(sim_event_push(&e, 3.0, SIM_KINDS, NULL, 0, &err), WS_EINVAL);
    cr_assert_eq(sim_event_push(&e, 2.0, 0, NULL, 0, &err), 0); /* now itself is fine */
    cr_assert_eq(sim_pending(&e), 1);
    sim_engine_free(&e);
}

static int other(sim_engine *e, const sim_event *ev, void *ctx, ws_err *err)
{
    (void)e;
    (void)ev;
    (void)ctx;
    return ws_err_set(err, WS_EDEVICE, "handler failed");
}

Test(sim_engine, registration_and_handler_errors)
{
    sim_engine e;
    ws_err err = {0};
    engine_with(&e, 1);
    cr_assert_eq(sim_engine_on(&e, 0, record, NULL, &err), 0); /* same again: shared kind */
    cr_assert_eq(sim_engine_on(&e, 0, other, NULL, &err), WS_EINVAL);
    cr_assert_eq(sim_engine_on(&e, 0, record, &e, &err), WS_EINVAL);
    cr_assert_eq(sim_engine_on(&e, SIM_KINDS, record, NULL, &err), WS_EINVAL);
    cr_assert_eq(sim_engine_on(&e, 1, other, NULL, &err), 0);
    sim_event_push(&e, 1.0, 0, NULL, 1, &err);
    sim_event_push(&e, 2.0, 1, NULL, 2, &err);
    sim_event_push(&e, 3.0, 0, NULL, 3, &err);
    err = (ws_err){0};
    cr_assert_eq(sim_engine_run(&e, INFINITY, &err), WS_EDEVICE);
    cr_assert_str_eq(err.msg, "handler failed");
    cr_assert_eq(n_log, 1);
    cr_assert_eq(sim_now(&e), 2.0);
    cr_assert_eq(sim_pending(&e), 1);
    sim_engine_free(&e);
}

static int stopper(sim_engine *e, const sim_event *ev, void *ctx, ws_err *err)
{
    record(e, ev, ctx, err);
    sim_engine_stop(e);
    return 0;
}

Test(sim_engine, run_until_a_horizon_and_stop)
{
    sim_engine e;
    ws_err err = {0};
    engine_with(&e, 1);
    cr_assert_eq(sim_engine_on(&e, 1, stopper, NULL, &err), 0);
    for (int i = 1; i <= 5; i++)
        sim_event_push(&e, i, 0, NULL, (uint64_t)i, &err);
    sim_event_push(&e, 4.0, 1, NULL, 40, &err);
    cr_assert_eq(sim_engine_run(&e, 2.5, &err), 0);
    cr_assert_eq(n_log, 2);
    cr_assert_eq(sim_now(&e), 2.5);                 /* the clock moves to the horizon */
    cr_assert_eq(sim_engine_run(&e, 3.0, &err), 0); /* an event at the horizon runs */
    cr_assert_eq(n_log, 3);
    cr_assert_eq(sim_engine_run(&e, INFINITY, &err), 0);
    cr_assert_eq(n_log, 5); /* 4.0 kind 0, then 4.0 kind 1 which stops */
    cr_assert_eq(logv[4].u, 40);
    cr_assert_eq(sim_peek(&e)->u, 5);
    cr_assert_eq(sim_engine_run(&e, INFINITY, &err), 0);
    cr_assert_eq(n_log, 6);
    cr_assert_eq(sim_now(&e), 5.0);
    cr_assert_null(sim_peek(&e));
    sim_engine_free(&e);
}

Test(sim_engine, generator_seeded)
{
    sim_engine a, b, c;
    sim_engine_init(&a, 42, NULL);
    sim_engine_init(&b, 42, NULL);
    sim_engine_init(&c, 43, NULL);
    int same_c = 1;
    for (int i = 0; i < 100; i++) {
        uint64_t x = sim_rand_u64(&a);
        cr_assert_eq(x, sim_rand_u64(&b));
        same_c &= x == sim_rand_u64(&c);
        double u = sim_rand_unit(&a);
        sim_rand_unit(&b);
        sim_rand_unit(&c);
        cr_assert(u >= 0 && u < 1);
    }
    cr_assert(!same_c);
    sim_engine_free(&a);
    sim_engine_free(&b);
    sim_engine_free(&c);
}
