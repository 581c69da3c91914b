/* engine: see engine.h. */
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SIM_HEAP_MIN 256 /* first heap allocation, events */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

int sim_engine_init(sim_engine *e, uint64_t seed, ws_err *err)
{
    memset(e, 0, sizeof *e);
    e->heap = malloc(SIM_HEAP_MIN * sizeof *e->heap);
    if (!e->heap)
        return ws_err_set(err, WS_ENOMEM, "sim: out of memory for the event heap");
    e->cap = SIM_HEAP_MIN;
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        e->rng[i] = splitmix64(&x);
    return 0;
}

void sim_engine_free(sim_engine *e)
{
    free(e->heap);
    e->heap = NULL;
    e->n = e->cap = 0;
}

int sim_engine_on(sim_engine *e, unsigned kind, sim_handler fn, void *ctx, ws_err *err)
{
    if (kind >= SIM_KINDS || !fn)
        return ws_err_set(err, WS_EINVAL, "sim: event kind %u out of range 0..%d or no handler",
                          kind, SIM_KINDS - 1);
    sim_slot *s = &e->slot[kind];
    if (s->fn && (s->fn != fn || s->ctx != ctx))
        return ws_err_set(err, WS_EINVAL, "sim: event kind %u already has another handler", kind);
    s->fn = fn;
    s->ctx = ctx;
    return 0;
}

static int grow(sim_engine *e, ws_err *err)
{
    size_t cap = e->cap ? 2 * e->cap : SIM_HEAP_MIN;
    sim_event *h = realloc(e->heap, cap * sizeof *h);
    if (!h)
        return ws_err_set(err, WS_ENOMEM, "sim: out of memory for %zu pending events", cap);
    e->heap = h;
    e->cap = cap;
    return 0;
}

int sim_event_push(sim_engine *e, double t, unsigned kind, void *p, uint64_t u, ws_err *err)
{
    if (kind >= SIM_KINDS || !e->slot[kind].fn)
        return ws_err_set(err, WS_EINVAL, "sim: event kind %u has no handler", kind);
    if (!(t >= e->now) || isinf(t)) /* also refuses NaN */
        return ws_err_set(err, WS_EINVAL,
                          "sim: event of kind %u at t=%.9g s, before the clock (%.9g s) or "
                          "not finite",
                          kind, t, e->now);
    if (e->seq >> SIM_SEQ_BITS)
        return ws_err_set(err, WS_EINVAL, "sim: more than 2^%d events pushed", SIM_SEQ_BITS);
    if (e->n == e->cap && grow(e, err))
        return WS_ENOMEM;
    sim_event ev = {t, (uint64_t)kind << SIM_SEQ_BITS | e->seq++, p, u};
    sim_event *h = e->heap;
    size_t i = e->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!sim_event_before(&ev, &h[parent]))
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = ev;
    e->n_pushed++;
    if (e->n > e->max_pending)
        e->max_pending = e->n;
    return 0;
}

/* Removes heap[0] into *out: the last event fills the hole sifted down from the root. */
static void pop(sim_engine *e, sim_event *out)
{
    sim_event *h = e->heap;
    *out = h[0];
    size_t n = --e->n;
    if (n == 0)
        return;
    sim_event last = h[n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && sim_event_before(&h[c + 1], &h[c]))
            c++;
        if (!sim_event_before(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
}

int sim_engine_run(sim_engine *e, double until, ws_err *err)
{
    e->stop = 0;
    while (e->n > 0 && e->heap[0].t <= until) {
        sim_event ev;
        pop(e, &ev);
        e->now = ev.t; /* ev.t >= now: sim_event_push refuses the past */
        e->n_processed++;
        const sim_slot *s = &e->slot[sim_event_kind(&ev)];
        int rc = s->fn(e, &ev, s->ctx, err);
        if (rc)
            return rc;
        if (e->stop) {
            e->stop = 0;
            return 0;
        }
    }
    if (isfinite(until) && until > e->now)
        e->now = until;
    return 0;
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t sim_rand_u64(sim_engine *e)
{
    uint64_t *s = e->rng;
    uint64_t r = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

double sim_rand_unit(sim_engine *e)
{
    return (double)(sim_rand_u64(e) >> 11) * 0x1.0p-53;
}
