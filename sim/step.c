/* step: one forward step, played by the schedule's player or as an operation graph (see
 * step.h). */
#include "step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "res_fifo.h"
#include "res_pool.h"

/* An op's schedule kind is kept in its `user` field; the layer is its tag. */

static int add_layer(sim_step *st, int l, ws_err *err);

/* 1 when layers a and b have the same record relative to their starts: the schedule's
 * times and each resource's first start and last end. */
static int same_layer(const sim_step *st, int a, int b)
{
    const sim_step_layer *x = &st->lay[a], *y = &st->lay[b];
    const double d = x->t_end - x->t_start, tol = 1e-9 * (d > 0 ? d : 1e-12);
#define SAME(f) (fabs((x->f - x->t_start) - (y->f - y->t_start)) <= tol)
    if (!(SAME(t_end) && SAME(qkv_end) && SAME(attn_start) && SAME(gpu_end) && SAME(gpu_main_end) &&
          SAME(moe_start) && fabs(x->cpu_s - y->cpu_s) <= tol && fabs(x->moe_s - y->moe_s) <= tol))
        return 0;
#undef SAME
    for (int r = 0; r < SIM_RES_COUNT; r++) {
        const sim_step_use *u = &st->use[a][r], *v = &st->use[b][r];
        if (isinf(u->first) != isinf(v->first) || fabs(u->busy - v->busy) > tol)
            return 0;
        if (!isinf(u->first) && (fabs((u->first - x->t_start) - (v->first - y->t_start)) > tol ||
                                 fabs((u->last - x->t_start) - (v->last - y->t_start)) > tol))
            return 0;
    }
    return 1;
}

/* A layer's times moved dt later. */
static void shift_times(sim_step_layer *d, double dt)
{
    d->t_start += dt, d->t_end += dt, d->qkv_end += dt, d->gpu_end += dt;
    d->gpu_main_end += dt, d->moe_start += dt, d->attn_start += dt;
}

/* Layer l's record moved dt later. */
static void shift_layer(sim_step *st, int l, double dt)
{
    shift_times(&st->lay[l], dt);
    for (int r = 0; r < SIM_RES_COUNT; r++)
        st->use[l][r].first += dt, st->use[l][r].last += dt; /* infinities stay */
}

/* Layers l-2 .. l are layers past the first (and past the dense ones) of one kind, with the
 * same record relative to their starts. */
static int repeats_at(const sim_step *st, int l)
{
    const int first = st->cm->n_dense_layers > 1 ? st->cm->n_dense_layers : 1;
    const ws_layer_kind k = ws_cost_layer(st->cm, l)->kind;
    return l - 2 >= first && ws_cost_layer(st->cm, l - 2)->kind == k &&
           ws_cost_layer(st->cm, l - 1)->kind == k && same_layer(st, l - 2, l - 1) &&
           same_layer(st, l - 1, l);
}

/* Folding may stop after layer l: it repeats, and every layer left is of its kind. */
static int periodic_at(const sim_step *st, int l)
{
    return repeats_at(st, l) && st->run_end[l] == st->layers - 1;
}

static int on_done(void *ctx, sim_dag *g, const sim_op *op, ws_err *err)
{
    (void)g;
    sim_step *st = ctx;
    sim_step_layer *L = &st->lay[op->s.tag];
    if (op->s.hold) {
        const sim_res *r = op->s.hold;
        const double w = (op->s.width ? op->s.width : 1) / (double)r->units;
        const double d = (op->t_end - op->t_start) * w;
        sim_step_use *u = &st->use[op->s.tag][r - st->res];
        st->busy[r - st->res] += d;
        u->busy += d;
        u->first = fmin(u->first, op->t_start);
        u->last = fmax(u->last, op->t_end);
    }
    const int kind = (int)op->s.user;
    ws_sched_times_op(L, kind, op->t_ready, op->t_start, op->t_end);
    if (kind == WS_OP_QKV && !st->stop && st->added < st->layers) {
        /* Two layers ahead: none of layer l+2's ops can be ready before this. */
        int rc = add_layer(st, st->added, err);
        if (rc)
            return rc;
    }
    if (kind == WS_OP_END && st->fold && !st->stop && periodic_at(st, (int)op->s.tag))
        st->stop = 1;
    return 0;
}

int sim_step_init(sim_step *st, sim_engine *e, unsigned kind, const ws_cost_model *cm, int layers,
                  int cpu_workers, int fold, ws_err *err)
{
    memset(st, 0, sizeof *st);
    if (layers < 1 || layers > cm->layers || cpu_workers < 1)
        return ws_err_set(err, WS_EINVAL, "sim step: %d layers (model has %d), %d CPU workers",
                          layers, cm->layers, cpu_workers);
    st->eng = e;
    st->cm = cm;
    st->layers = layers;
    st->fold = fold;
    int rc = sim_fifo_init(&st->res[SIM_RES_GPU], e, "gpu", err);
    if (!rc)
        rc = sim_fifo_init(&st->res[SIM_RES_H2D], e, "h2d", err);
    if (!rc)
        rc = sim_fifo_init(&st->res[SIM_RES_D2H], e, "d2h", err);
    if (!rc)
        rc = sim_pool_init(&st->res[SIM_RES_CPU], e, "cpu", (uint32_t)cpu_workers, err);
    if (!rc)
        rc = sim_dag_init(&st->g, e, kind, err);
    if (rc) {
        sim_step_free(st);
        return rc;
    }
    sim_dag_on_done(&st->g, on_done, st);
    st->lay = calloc((size_t)layers, sizeof *st->lay);
    st->ids = calloc((size_t)layers * WS_ANCHORS, sizeof *st->ids);
    st->use = calloc((size_t)layers, sizeof *st->use);
    st->run_end = malloc((size_t)layers * sizeof *st->run_end);
    if (!st->lay || !st->ids || !st->use || !st->run_end) {
        sim_step_free(st);
        return ws_err_set(err, WS_ENOMEM, "sim step: out of memory");
    }
    for (int l = layers - 1; l >= 0; l--)
        st->run_end[l] =
            l + 1 < layers && ws_cost_layer(cm, l + 1)->kind == ws_cost_layer(cm, l)->kind
                ? st->run_end[l + 1]
                : l;
    return 0;
}

void sim_step_free(sim_step *st)
{
    if (st->g.ops)
        sim_dag_free(&st->g);
    for (int i = 0; i < SIM_RES_COUNT; i++)
        if (st->res[i].vt)
            sim_res_free(&st->res[i]);
    free(st->lay);
    free(st->ids);
    free(st->use);
    free(st->run_end);
    st->run_end = NULL;
    st->lay = NULL;
    st->ids = NULL;
    st->use = NULL;
}

/* Layer l's schedule for this step: from layer 2 on, a layer's ops depend on it only through
 * its kind (schedule.h), so they are built once per step and kind; earlier layers into *own.
 * A folded step leaves the flushes and prefill writes to the closed form in sim_step_run:
 * they hold nothing and take no time here. */
static const ws_sched_layer *layer_schedule(sim_step *st, int l, ws_sched_layer *own)
{
    ws_sched_layer *s = own;
    if (l >= 2) {
        const int k = ws_cost_layer(st->cm, l)->kind;
        s = &st->memo[k];
        if (st->memo_ok[k])
            return s;
        st->memo_ok[k] = 1;
    }
    ws_sched_build(st->cm, &st->split, st->in, l, s);
    if (st->fold)
        for (int i = 0; i < s->n; i++)
            if (s->op[i].kind == WS_OP_FLUSH || s->op[i].kind == WS_OP_WRITE) {
                s->op[i].res = WS_RES_NONE;
                s->op[i].seconds = 0;
            }
    return s;
}

/* Adds layer l's schedule to the graph. */
static int add_layer(sim_step *st, int l, ws_err *err)
{
    ws_sched_layer own;
    const ws_sched_layer *s = layer_schedule(st, l, &own);
    st->added = l + 1;
    for (int r = 0; r < SIM_RES_COUNT; r++)
        st->use[l][r] = (sim_step_use){0, INFINITY, -INFINITY};
    sim_op_id id[WS_SCHED_MAX_OPS], *anc = st->ids + (size_t)l * WS_ANCHORS;
    for (int i = 0; i < s->n; i++) {
        const ws_sched_op *o = &s->op[i];
        id[i] = SIM_OP_NONE;
        if (st->fold && (o->kind == WS_OP_FLUSH || o->kind == WS_OP_WRITE))
            continue; /* closed form in sim_step_run */
        sim_op_id pred[WS_SCHED_MAX_DEPS];
        for (int d = 0; d < o->n_dep; d++) {
            const ws_sched_dep *dp = &o->dep[d];
            pred[d] = dp->back == 0 ? id[dp->ref]
                                    : st->ids[(size_t)(l - dp->back) * WS_ANCHORS + dp->ref];
        }
        sim_op_spec sp = {0};
        if (o->res >= 0) {
            sp.hold = &st->res[o->res];
            sp.width = o->res == WS_RES_CPU ? st->res[o->res].units : 1;
        }
        sp.seconds = o->seconds;
        sp.label = ws_op_name(o->kind);
        sp.tag = (uint32_t)l;
        sp.user = (uint64_t)o->kind;
        if ((id[i] = sim_dag_add(&st->g, &sp, pred, (size_t)o->n_dep, err)) == SIM_OP_NONE)
            return err && err->code ? err->code : WS_EINVAL;
    }
    for (int a = 0; a < WS_ANCHORS; a++)
        anc[a] = s->anchor[a] >= 0             ? id[s->anchor[a]]
                 : a == WS_ANCHOR_H2D && l > 0 ? st->ids[(size_t)(l - 1) * WS_ANCHORS + a]
                                               : SIM_OP_NONE;
    return 0;
}

/* 1 when the player's state after layer l (b) is its state after layer l-1 (a) moved p
 * later: every resource's next free time, both layers' anchors and the latest end, each
 * moved by p to within tol; left as it was only where layer l's schedule s neither reads
 * nor writes it (a resource it does not use, the copy anchor of a layer without copies);
 * NAN (no such op) in both. And every op of s, played after b, waits for an earlier op: one
 * that waited for none would start at the step's start, which does not move. */
static int moved_by(const ws_sched_play *a, const ws_sched_play *b, const ws_sched_layer *s,
                    double p, double tol)
{
    int used[WS_RES_COUNT] = {0}, waits[WS_SCHED_MAX_OPS];
    for (int i = 0; i < s->n; i++) {
        const ws_sched_op *o = &s->op[i];
        if (o->res >= 0)
            used[o->res] = 1;
        waits[i] = 0;
        for (int d = 0; d < o->n_dep; d++) {
            const ws_sched_dep *dp = &o->dep[d];
            waits[i] |= dp->back == 0 ? waits[dp->ref] : !isnan(b->anchor[dp->back - 1][dp->ref]);
        }
        if (!waits[i])
            return 0;
    }
#define MOVED(x, y) (fabs(((y) - (x)) - p) <= tol)
    for (int r = 0; r < WS_RES_COUNT; r++)
        if (!(MOVED(a->free[r], b->free[r]) || (!used[r] && a->free[r] == b->free[r])))
            return 0;
    for (int k = 0; k < 2; k++)
        for (int x = 0; x < WS_ANCHORS; x++) {
            const double u = a->anchor[k][x], v = b->anchor[k][x];
            const int keep = x == WS_ANCHOR_H2D && !used[WS_RES_H2D] && u == v;
            if (!((isnan(u) && isnan(v)) || (!isnan(u) && !isnan(v) && MOVED(u, v)) || keep))
                return 0;
        }
    return MOVED(a->t_end, b->t_end);
#undef MOVED
}

/* The folded step: the schedule's player (schedule.h) plays the layers in order, as the
 * controller and the live runtime do. The player is a function of its state and the
 * layer's schedule that commutes with moving every time by the same amount. So once a
 * layer of a run of one kind (from layer 2 on, where one schedule serves the whole run)
 * leaves the state exactly one period later than the layer before left it, each later
 * layer of the run does the same: the rest of the run is that layer moved period by period,
 * and the player goes on from the run's last layer. Returns the end of the last layer. */
static double play_folded(sim_step *st, sim_step_out *out)
{
    const int L = st->layers;
    ws_sched_play p, before;
    ws_sched_play_start(&p, out->t0);
    for (int l = 0; l < L; l++) {
        ws_sched_layer own;
        const ws_sched_layer *s = layer_schedule(st, l, &own);
        before = p;
        ws_sched_play_layer(&p, s, &st->lay[l], NULL);
        const int e = st->run_end[l];
        if (l < 2 || e == l)
            continue;
        const double per = p.t_end - before.t_end;
        if (!(per > 0) || !moved_by(&before, &p, s, per, 1e-12 * p.t_end + 1e-9 * per))
            continue;
        const int k = e - l;
        for (int j = 1; j <= k; j++) {
            st->lay[l + j] = st->lay[l];
            shift_times(&st->lay[l + j], j * per);
        }
        const double dt = k * per;
        for (int r = 0; r < WS_RES_COUNT; r++) {
            p.busy[r] += k * (p.busy[r] - before.busy[r]);
            if (p.free[r] != before.free[r])
                p.free[r] += dt;
        }
        for (int a = 0; a < 2; a++)
            for (int x = 0; x < WS_ANCHORS; x++)
                if (p.anchor[a][x] != before.anchor[a][x])
                    p.anchor[a][x] += dt; /* NAN stays */
        p.t_end += dt;
        out->folded += k;
        l = e;
    }
    memcpy(st->busy, p.busy, sizeof st->busy);
    return st->lay[L - 1].t_end;
}

/* The step played as the event graph, two layers ahead of the one running; folded, it stops
 * adding layers once the last run repeats and extrapolates the rest. Sets *t1 to the end of
 * the last layer. */
static int play_graph(sim_step *st, sim_step_out *out, double *t1, ws_err *err)
{
    const int L = st->layers;
    int rc = 0;
    for (int l = 0; l < 2 && l < L && !rc; l++)
        rc = add_layer(st, l, err);
    if (rc || (rc = sim_engine_run(st->eng, INFINITY, err)))
        return rc;
    *t1 = sim_now(st->eng);
    const int K = st->added;
    if (K < L) {
        /* Extrapolate the last played layer's period to the rest. */
        const double p1 = st->lay[K - 1].t_end - st->lay[K - 2].t_end;
        out->fold_inexact = !periodic_at(st, K - 1);
        for (int l = K; l < L; l++) {
            st->lay[l] = st->lay[K - 1];
            memcpy(st->use[l], st->use[K - 1], sizeof st->use[l]);
            shift_layer(st, l, (l - K + 1) * p1);
        }
        for (int i = 0; i < SIM_RES_COUNT; i++)
            st->busy[i] += (L - K) * st->use[K - 1][i].busy;
        out->folded = L - K;
        *t1 = st->lay[L - 1].t_end;
    }
    return 0;
}

int sim_step_run(sim_step *st, const sim_step_in *in, sim_step_out *out, ws_err *err)
{
    memset(out, 0, sizeof *out);
    memset(st->busy, 0, sizeof st->busy);
    const ws_cost_model *cm = st->cm;
    const int L = st->layers;
    st->in = in;
    st->added = 0;
    st->stop = 0;
    memset(st->memo_ok, 0, sizeof st->memo_ok);
    ws_cost_split_terms(cm, in->resident, 0, 0, 0, &st->split);
    const uint64_t ev0 = st->eng->n_processed;
    out->t0 = sim_now(st->eng);
    double t1 = out->t0;
    int rc = 0;
    if (st->fold && !st->g.tl)
        t1 = play_folded(st, out);
    else
        rc = play_graph(st, out, &t1, err);
    st->in = NULL;
    if (rc)
        return rc;
    if (st->fold) {
        /* The D2H chain in closed form: it feeds no other op. A layer's chunk KV write is
         * ready at its qkv's end, its flush at its GPU attention's, both before the next
         * layer's qkv ends. */
        const double dw =
            in->prefill_q > 0 && in->write_bytes > 0 ? ws_cost_d2h(cm, in->write_bytes) : 0;
        const double df = in->flush_bytes > 0 ? ws_cost_d2h(cm, in->flush_bytes) : 0;
        if (dw > 0 || df > 0) {
            double f = -INFINITY;
            for (int l = 0; l < L; l++) {
                if (ws_cost_layer(cm, l)->on_cpu)
                    continue; /* its KV is in host memory */
                if (dw > 0)
                    f = fmax(f, st->lay[l].qkv_end) + dw;
                if (df > 0)
                    f = fmax(f, st->lay[l].gpu_main_end) + df;
                st->busy[SIM_RES_D2H] += dw + df;
            }
            t1 = fmax(t1, f);
        }
        if (t1 > sim_now(st->eng) && (rc = sim_engine_run(st->eng, t1, err)))
            return rc;
    }
    out->t1 = t1;
    memcpy(out->busy, st->busy, sizeof out->busy);
    out->events = st->eng->n_processed - ev0;
    return 0;
}
