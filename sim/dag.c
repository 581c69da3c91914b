/* dag: see dag.h. */
#include "dag.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SIM_DAG_MIN 256          /* first ring allocation, ops */
#define SIM_EDGE_NONE UINT32_MAX /* end of a successor list */

static int dag_event(sim_engine *e, const sim_event *ev, void *ctx, ws_err *err);
static int dag_grant(void *ctx, sim_res *r, uint64_t id, ws_err *err);
static int dag_flow_done(void *ctx, sim_fluid *ch, uint64_t id, ws_err *err);

static inline sim_op *at(const sim_dag *g, sim_op_id id)
{
    return &g->ops[id & (g->cap - 1)];
}

int sim_dag_init(sim_dag *g, sim_engine *e, unsigned kind, ws_err *err)
{
    memset(g, 0, sizeof *g);
    g->eng = e;
    g->kind = kind;
    g->e_free = SIM_EDGE_NONE;
    g->ops = malloc(SIM_DAG_MIN * sizeof *g->ops);
    if (!g->ops)
        return ws_err_set(err, WS_ENOMEM, "sim: out of memory for the op graph");
    g->cap = SIM_DAG_MIN;
    return sim_engine_on(e, kind, dag_event, NULL, err);
}

void sim_dag_free(sim_dag *g)
{
    free(g->ops);
    free(g->e_to);
    free(g->e_next);
    g->ops = NULL;
    g->e_to = NULL;
    g->e_next = NULL;
}

const sim_op *sim_dag_op(const sim_dag *g, sim_op_id id)
{
    return id >= g->lo && id < g->hi ? at(g, id) : NULL;
}

int sim_dag_ended(const sim_dag *g, sim_op_id id)
{
    return id < g->lo || (id < g->hi && at(g, id)->state == SIM_OP_DONE);
}

static int grow_ring(sim_dag *g, ws_err *err)
{
    uint64_t cap = 2 * g->cap;
    sim_op *ops = malloc(cap * sizeof *ops);
    if (!ops)
        return ws_err_set(err, WS_ENOMEM, "sim: out of memory for %llu ops in flight",
                          (unsigned long long)cap);
    for (sim_op_id id = g->lo; id < g->hi; id++)
        ops[id & (cap - 1)] = *at(g, id);
    free(g->ops);
    g->ops = ops;
    g->cap = cap;
    return 0;
}

static uint32_t new_edge(sim_dag *g, sim_op_id to, ws_err *err)
{
    uint32_t e;
    if (g->e_free != SIM_EDGE_NONE) {
        e = g->e_free;
        g->e_free = g->e_next[e];
    } else {
        if (g->e_used == g->e_cap) {
            uint32_t cap = g->e_cap ? 2 * g->e_cap : 1024;
            sim_op_id *t = realloc(g->e_to, (size_t)cap * sizeof *t);
            if (t)
                g->e_to = t;
            uint32_t *n = t ? realloc(g->e_next, (size_t)cap * sizeof *n) : NULL;
            if (n)
                g->e_next = n;
            if (!t || !n || cap >= SIM_EDGE_NONE) {
                ws_err_set(err, WS_ENOMEM, "sim: out of memory for %u dependencies", cap);
                return SIM_EDGE_NONE;
            }
            g->e_cap = cap;
        }
        e = g->e_used++;
    }
    g->e_to[e] = to;
    g->e_next[e] = SIM_EDGE_NONE;
    return e;
}

/* The op holds its resource from now: fixed part, then flow. */
static int start(sim_dag *g, sim_op *op, ws_err *err)
{
    op->t_start = sim_now(g->eng);
    g->n_started++;
    if (op->s.seconds > 0 || !op->s.channel || !(op->s.bytes > 0)) {
        op->state = SIM_OP_FIXED;
        return sim_event_push(g->eng, op->t_start + op->s.seconds, g->kind, g, op->id, err);
    }
    op->state = SIM_OP_FLOWING;
    return sim_fluid_start(op->s.channel, op->id, op->s.bytes, op->s.max_rate, err);
}

static int ready(sim_dag *g, sim_op *op, ws_err *err)
{
    op->t_ready = sim_now(g->eng);
    if (!op->s.hold)
        return start(g, op, err);
    int rc = sim_res_acquire(op->s.hold, op->id, op->s.width, err);
    if (rc < 0)
        return err && err->code ? err->code : WS_EINVAL;
    if (rc == 0) {
        op->state = SIM_OP_QUEUED;
        return 0;
    }
    return start(g, op, err);
}

static int finish(sim_dag *g, sim_op *op, ws_err *err)
{
    int rc;
    /* The callback's copy, taken before this op's fields change (the callback may add ops
     * and reuse this slot; copying fields just written would stall on their stores). */
    sim_op copy = *op;
    op->state = copy.state = SIM_OP_DONE;
    op->t_end = copy.t_end = sim_now(g->eng);
    copy.succ_head = copy.succ_tail = SIM_EDGE_NONE;
    g->n_done++;
    if (g->tl) {
        sim_span s = {op->id,
                      op->s.label,
                      op->s.hold ? op->s.hold->name : NULL,
                      op->s.channel ? op->s.channel->name : NULL,
                      op->s.width,
                      op->s.tag,
                      op->s.user,
                      op->s.bytes,
                      op->t_ready,
                      op->t_start,
                      op->t_end};
        if ((rc = sim_timeline_add(g->tl, &s, err)))
            return rc;
    }
    if (op->s.hold && (rc = sim_res_release(op->s.hold, op->s.width, err)))
        return rc;
    for (uint32_t e = op->succ_head, next; e != SIM_EDGE_NONE; e = next) {
        next = g->e_next[e];
        sim_op *s = at(g, g->e_to[e]);
        g->e_next[e] = g->e_free;
        g->e_free = e;
        if (--s->n_wait == 0 && (rc = ready(g, s, err)))
            return rc;
    }
    op->succ_head = op->succ_tail = SIM_EDGE_NONE;
    while (g->lo < g->hi && at(g, g->lo)->state == SIM_OP_DONE)
        g->lo++;
    return g->on_done ? g->on_done(g->on_done_ctx, g, &copy, err) : 0;
}

static int bad_state(sim_op_id id, uint32_t state, const char *what, ws_err *err)
{
    return ws_err_set(err, WS_EINVAL, "sim: op %llu %s in state %u", (unsigned long long)id, what,
                      state);
}

static int dag_event(sim_engine *e, const sim_event *ev, void *ctx, ws_err *err)
{
    (void)e;
    (void)ctx;
    sim_dag *g = ev->p;
    if (ev->u < g->lo || ev->u >= g->hi || at(g, ev->u)->state != SIM_OP_FIXED)
        return bad_state(ev->u, ev->u < g->lo ? SIM_OP_DONE : at(g, ev->u)->state,
                         "ended its fixed part", err);
    sim_op *op = at(g, ev->u);
    if (op->s.channel && op->s.bytes > 0) {
        op->state = SIM_OP_FLOWING;
        return sim_fluid_start(op->s.channel, op->id, op->s.bytes, op->s.max_rate, err);
    }
    return finish(g, op, err);
}

static int dag_grant(void *ctx, sim_res *r, uint64_t id, ws_err *err)
{
    (void)r;
    sim_dag *g = ctx;
    if (id < g->lo || id >= g->hi || at(g, id)->state != SIM_OP_QUEUED)
        return bad_state(id, id < g->lo ? SIM_OP_DONE : at(g, id)->state, "granted", err);
    return start(g, at(g, id), err);
}

static int dag_flow_done(void *ctx, sim_fluid *ch, uint64_t id, ws_err *err)
{
    (void)ch;
    sim_dag *g = ctx;
    if (id < g->lo || id >= g->hi || at(g, id)->state != SIM_OP_FLOWING)
        return bad_state(id, id < g->lo ? SIM_OP_DONE : at(g, id)->state, "ended its flow", err);
    return finish(g, at(g, id), err);
}

static int check_spec(sim_dag *g, const sim_op_spec *s, ws_err *err)
{
    const char *l = s->label ? s->label : "op";
    if (!(s->seconds >= 0) || isinf(s->seconds) || !(s->bytes >= 0) || isinf(s->bytes) ||
        !(s->max_rate >= 0) || isinf(s->max_rate))
        return ws_err_set(err, WS_EINVAL,
                          "sim: %s: seconds %g, bytes %g, max rate %g: each must be finite "
                          "and >= 0",
                          l, s->seconds, s->bytes, s->max_rate);
    if (s->bytes > 0 && !s->channel)
        return ws_err_set(err, WS_EINVAL, "sim: %s: %g bytes and no channel", l, s->bytes);
    if (s->hold) {
        uint32_t w = s->width ? s->width : 1;
        if (w > s->hold->units)
            return ws_err_set(err, WS_EINVAL, "sim: %s: %u units of %s, which has %u", l, w,
                              s->hold->name, s->hold->units);
        if (s->hold->grant && (s->hold->grant != dag_grant || s->hold->grant_ctx != g))
            return ws_err_set(err, WS_EINVAL, "sim: %s: resource %s belongs to another graph", l,
                              s->hold->name);
    }
    if (s->channel && s->channel->done &&
        (s->channel->done != dag_flow_done || s->channel->done_ctx != g))
        return ws_err_set(err, WS_EINVAL, "sim: %s: channel %s belongs to another graph", l,
                          s->channel->name);
    return 0;
}

sim_op_id sim_dag_add(sim_dag *g, const sim_op_spec *spec, const sim_op_id *preds, size_t n_preds,
                      ws_err *err)
{
    if (check_spec(g, spec, err))
        return SIM_OP_NONE;
    for (size_t i = 0; i < n_preds; i++)
        if (preds[i] != SIM_OP_NONE && preds[i] >= g->hi) {
            ws_err_set(err, WS_EINVAL, "sim: %s: predecessor %llu does not exist (next id %llu)",
                       spec->label ? spec->label : "op", (unsigned long long)preds[i],
                       (unsigned long long)g->hi);
            return SIM_OP_NONE;
        }
    if (g->hi - g->lo == g->cap && grow_ring(g, err))
        return SIM_OP_NONE;
    if (spec->hold && !spec->hold->grant) {
        spec->hold->grant = dag_grant;
        spec->hold->grant_ctx = g;
    }
    if (spec->channel && !spec->channel->done) {
        spec->channel->done = dag_flow_done;
        spec->channel->done_ctx = g;
    }
    sim_op_id id = g->hi++;
    sim_op *op = at(g, id);
    /* field by field: a compound literal zeroes the whole op first */
    op->s = *spec;
    op->id = id;
    op->n_wait = 0;
    op->state = SIM_OP_WAITING;
    op->succ_head = op->succ_tail = SIM_EDGE_NONE;
    op->t_ready = op->t_start = op->t_end = 0;
    if (op->s.hold && !op->s.width)
        op->s.width = 1;
    if (!op->s.hold)
        op->s.width = 0;
    g->n_added++;
    for (size_t i = 0; i < n_preds; i++) {
        if (preds[i] == SIM_OP_NONE || sim_dag_ended(g, preds[i]))
            continue;
        sim_op *p = at(g, preds[i]);
        uint32_t e = new_edge(g, id, err);
        if (e == SIM_EDGE_NONE)
            return SIM_OP_NONE;
        if (p->succ_tail == SIM_EDGE_NONE)
            p->succ_head = e;
        else
            g->e_next[p->succ_tail] = e;
        p->succ_tail = e;
        op->n_wait++;
    }
    if (op->n_wait == 0 && ready(g, op, err))
        return SIM_OP_NONE;
    return id;
}
