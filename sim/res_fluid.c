/* res_fluid: see res_fluid.h. */
#include "res_fluid.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_FLOWS_MIN 8 /* first flow-array allocation */

static int fluid_event(sim_engine *e, const sim_event *ev, void *ctx, ws_err *err);

int sim_fluid_init(sim_fluid *ch, sim_engine *e, unsigned kind, const char *name, double capacity,
                   sim_fluid_share share, ws_err *err)
{
    memset(ch, 0, sizeof *ch);
    snprintf(ch->name, sizeof ch->name, "%s", name ? name : "fluid");
    if (!(capacity > 0) || isinf(capacity))
        return ws_err_set(err, WS_EINVAL, "sim: channel %s: capacity %g bytes/s", ch->name,
                          capacity);
    if (share != SIM_FLUID_MAXMIN && share != SIM_FLUID_PROPORTIONAL)
        return ws_err_set(err, WS_EINVAL, "sim: channel %s: unknown sharing rule %d", ch->name,
                          (int)share);
    ch->eng = e;
    ch->kind = kind;
    ch->capacity = capacity;
    ch->share = share;
    ch->t_mark = sim_now(e);
    return sim_engine_on(e, kind, fluid_event, NULL, err);
}

void sim_fluid_free(sim_fluid *ch)
{
    free(ch->f);
    free(ch->done_ids);
    ch->f = NULL;
    ch->done_ids = NULL;
    ch->n = ch->cap = ch->done_cap = 0;
}

/* Moves every flow forward to the clock at its current rate. */
static void advance(sim_fluid *ch)
{
    double now = sim_now(ch->eng), dt = now - ch->t_mark;
    if (dt > 0 && ch->n) {
        double moved = 0;
        for (size_t i = 0; i < ch->n; i++) {
            sim_flow *f = &ch->f[i];
            double d = f->rate * dt;
            if (d > f->left)
                d = f->left;
            f->left -= d;
            moved += d;
        }
        ch->bytes_moved += moved;
        ch->busy_s += dt;
    }
    ch->t_mark = now;
}

static void share_maxmin(sim_fluid *ch)
{
    double room = ch->capacity;
    size_t open = ch->n;
    for (size_t i = 0; i < ch->n; i++)
        ch->f[i].rate = -1; /* not fixed yet */
    while (open) {
        double fair = room / (double)open;
        int fixed = 0;
        for (size_t i = 0; i < ch->n; i++) {
            sim_flow *f = &ch->f[i];
            if (f->rate < 0 && f->max_rate <= fair) {
                f->rate = f->max_rate;
                room -= f->max_rate;
                open--;
                fixed = 1;
            }
        }
        if (!fixed) {
            for (size_t i = 0; i < ch->n; i++)
                if (ch->f[i].rate < 0)
                    ch->f[i].rate = fair;
            break;
        }
    }
}

static void share_proportional(sim_fluid *ch)
{
    double demand = 0;
    for (size_t i = 0; i < ch->n; i++)
        demand += ch->f[i].max_rate;
    double scale = demand > ch->capacity ? ch->capacity / demand : 1.0;
    for (size_t i = 0; i < ch->n; i++)
        ch->f[i].rate = ch->f[i].max_rate * scale;
}

/* New rates for the active flows, and a new completion event for the first to finish. */
static int reschedule(sim_fluid *ch, ws_err *err)
{
    ch->version++;
    if (!ch->n)
        return 0;
    if (ch->share == SIM_FLUID_MAXMIN)
        share_maxmin(ch);
    else
        share_proportional(ch);
    double best = INFINITY;
    size_t arg = 0;
    for (size_t i = 0; i < ch->n; i++) {
        double t = ch->f[i].left / ch->f[i].rate;
        if (t < best) {
            best = t;
            arg = i;
        }
    }
    ch->next_id = ch->f[arg].id;
    return sim_event_push(ch->eng, sim_now(ch->eng) + best, ch->kind, ch, ch->version, err);
}

int sim_fluid_start(sim_fluid *ch, uint64_t id, double bytes, double max_rate, ws_err *err)
{
    if (!(bytes > 0) || isinf(bytes) || !(max_rate >= 0) || isinf(max_rate))
        return ws_err_set(err, WS_EINVAL, "sim: channel %s: flow of %g bytes at most %g bytes/s",
                          ch->name, bytes, max_rate);
    if (ch->n == ch->cap) {
        size_t cap = ch->cap ? 2 * ch->cap : SIM_FLOWS_MIN;
        sim_flow *f = realloc(ch->f, cap * sizeof *f);
        uint64_t *d = realloc(ch->done_ids, cap * sizeof *d);
        if (f)
            ch->f = f;
        if (d)
            ch->done_ids = d;
        if (!f || !d)
            return ws_err_set(err, WS_ENOMEM, "sim: channel %s: out of memory for %zu flows",
                              ch->name, cap);
        ch->cap = ch->done_cap = cap;
    }
    advance(ch);
    double cap_rate = max_rate > 0 ? max_rate : ch->capacity;
    ch->f[ch->n++] = (sim_flow){id, bytes, bytes, cap_rate, 0};
    ch->n_started++;
    if (ch->n > ch->max_flows)
        ch->max_flows = ch->n;
    return reschedule(ch, err);
}

static int fluid_event(sim_engine *e, const sim_event *ev, void *ctx, ws_err *err)
{
    (void)e;
    (void)ctx;
    sim_fluid *ch = ev->p;
    if (ev->u != ch->version) {
        ch->n_stale++;
        return 0;
    }
    advance(ch);
    size_t n_done = 0, keep = 0;
    for (size_t i = 0; i < ch->n; i++) {
        sim_flow *f = &ch->f[i];
        if (f->id == ch->next_id || f->left <= SIM_FLUID_REL_EPS * f->bytes) {
            ch->bytes_moved += f->left; /* the sliver rounding left */
            ch->done_ids[n_done++] = f->id;
        } else {
            ch->f[keep++] = *f;
        }
    }
    ch->n = keep;
    ch->n_done += n_done;
    int rc = reschedule(ch, err);
    /* Callbacks may start flows here (which reschedules again); done_ids is not touched by
     * a start, and no other completion can run before this handler returns. */
    for (size_t i = 0; i < n_done && !rc; i++)
        if (ch->done)
            rc = ch->done(ch->done_ctx, ch, ch->done_ids[i], err);
    return rc;
}

double sim_fluid_bytes(const sim_fluid *ch)
{
    double dt = sim_now(ch->eng) - ch->t_mark, moved = ch->bytes_moved;
    for (size_t i = 0; i < ch->n; i++) {
        double d = ch->f[i].rate * dt;
        moved += d < ch->f[i].left ? d : ch->f[i].left;
    }
    return moved;
}

double sim_fluid_busy_seconds(const sim_fluid *ch)
{
    return ch->busy_s + (ch->n ? sim_now(ch->eng) - ch->t_mark : 0.0);
}

double sim_fluid_rate(const sim_fluid *ch, uint64_t id)
{
    for (size_t i = 0; i < ch->n; i++)
        if (ch->f[i].id == id)
            return ch->f[i].rate;
    return -1;
}
