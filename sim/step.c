/* step: one forward step as a per-layer operation graph (see step.h). */
#include "step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "res_fifo.h"
#include "res_pool.h"

/* An op's schedule kind is kept in its `user` field; the layer is its tag. */

static int add_layer(sim_step *st, int l, ws_err *err);

/* 1 when layers a and b have the same record relative to their starts. */
static int same_layer(const sim_step_layer *a, const sim_step_layer *b)
{
    const double d = a->t_end - a->t_start, tol = 1e-9 * (d > 0 ? d : 1e-12);
#define SAME(f) (fabs((a->f - a->t_start) - (b->f - b->t_start)) <= tol)
    return SAME(t_end) && SAME(qkv_end) && SAME(attn_start) && SAME(gpu_end) &&
           SAME(gpu_main_end) && SAME(moe_start) && fabs(a->cpu_s - b->cpu_s) <= tol &&
           fabs(a->moe_s - b->moe_s) <= tol;
#undef SAME
}

/* Folding may stop after layer l: l-2 .. l are MoE layers past the first and identical, and
 * every layer left is of their kind (the GPU-MoE layers past --n-cpu-moe come last). */
static int periodic_at(const sim_step *st, int l)
{
    const int first = st->cm->n_dense_layers > 1 ? st->cm->n_dense_layers : 1;
    const ws_layer_kind k = ws_cost_layer(st->cm, l)->kind;
    return l - 2 >= first && ws_cost_layer(st->cm, l - 2)->kind == k &&
           ws_cost_layer(st->cm, st->layers - 1)->kind == k &&
           same_layer(&st->lay[l - 2], &st->lay[l - 1]) &&
           same_layer(&st->lay[l - 1], &st->lay[l]);
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
        st->busy[r - st->res] += d;
        st->busy_lay[op->s.tag][r - st->res] += d;
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
    st->busy_lay = calloc((size_t)layers, sizeof *st->busy_lay);
    if (!st->lay || !st->ids || !st->busy_lay) {
        sim_step_free(st);
        return ws_err_set(err, WS_ENOMEM, "sim step: out of memory");
    }
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
    free(st->busy_lay);
    st->lay = NULL;
    st->ids = NULL;
    st->busy_lay = NULL;
}

/* Adds layer l's schedule to the graph. From layer 2 on, a layer's ops depend on it only
 * through its kind (schedule.h): built once per step and kind. */
static int add_layer(sim_step *st, int l, ws_err *err)
{
    ws_sched_layer own;
    const ws_sched_layer *s = &own;
    if (l >= 2) {
        const int k = ws_cost_layer(st->cm, l)->kind;
        if (!st->memo_ok[k]) {
            ws_sched_build(st->cm, &st->split, st->in, l, &st->memo[k]);
            st->memo_ok[k] = 1;
        }
        s = &st->memo[k];
    } else {
        ws_sched_build(st->cm, &st->split, st->in, l, &own);
    }
    st->added = l + 1;
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
        anc[a] = s->anchor[a] >= 0 ? id[s->anchor[a]]
                 : a == WS_ANCHOR_H2D && l > 0 ? st->ids[(size_t)(l - 1) * WS_ANCHORS + a]
                                               : SIM_OP_NONE;
    return 0;
}

int sim_step_run(sim_step *st, const sim_step_in *in, sim_step_out *out, ws_err *err)
{
    memset(out, 0, sizeof *out);
    memset(st->busy, 0, sizeof st->busy);
    const ws_cost_model *cm = st->cm;
    const int L = st->layers;
    memset(st->busy_lay, 0, (size_t)L * sizeof *st->busy_lay);
    st->in = in;
    st->added = 0;
    st->stop = 0;
    memset(st->memo_ok, 0, sizeof st->memo_ok);
    ws_cost_split_terms(cm, in->resident, 0, 0, 0, &st->split);
    const uint64_t ev0 = st->eng->n_processed;
    out->t0 = sim_now(st->eng);
    int rc = 0;
    for (int l = 0; l < 2 && l < L && !rc; l++)
        rc = add_layer(st, l, err);
    if (rc || (rc = sim_engine_run(st->eng, INFINITY, err)))
        return rc;
    st->in = NULL;
    double t1 = sim_now(st->eng);
    const int K = st->added;
    if (K < L) {
        /* Extrapolate the last played layer's period to the rest. */
        const double p1 = st->lay[K - 1].t_end - st->lay[K - 2].t_end;
        out->fold_inexact = !periodic_at(st, K - 1);
        for (int l = K; l < L; l++) {
            sim_step_layer *d = &st->lay[l];
            const sim_step_layer *s = &st->lay[K - 1];
            const double sh = (l - K + 1) * p1;
            *d = *s;
            d->t_start += sh, d->t_end += sh, d->qkv_end += sh, d->gpu_end += sh;
            d->gpu_main_end += sh, d->moe_start += sh, d->attn_start += sh;
        }
        for (int i = 0; i < SIM_RES_COUNT; i++)
            st->busy[i] += (L - K) * st->busy_lay[K - 1][i];
        out->folded = L - K;
        t1 = st->lay[L - 1].t_end;
    }
    if (st->fold) {
        /* The D2H chain in closed form: it feeds no other op. A layer's chunk KV write is
         * ready at its qkv's end, its flush at its GPU attention's, both before the next
         * layer's qkv ends. */
        const double dw = in->prefill_q > 0 && in->write_bytes > 0
                              ? ws_cost_d2h(cm, in->write_bytes) : 0;
        const double df = in->flush_bytes > 0 ? ws_cost_d2h(cm, in->flush_bytes) : 0;
        if (dw > 0 || df > 0) {
            double f = -INFINITY;
            for (int l = 0; l < L; l++) {
                if (dw > 0)
                    f = fmax(f, st->lay[l].qkv_end) + dw;
                if (df > 0)
                    f = fmax(f, st->lay[l].gpu_main_end) + df;
            }
            st->busy[SIM_RES_D2H] += L * (dw + df);
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
