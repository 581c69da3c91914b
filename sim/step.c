/* step: one forward step as a per-layer operation graph (see step.h). */
#include "step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "res_fifo.h"
#include "res_pool.h"

/* What an op is, kept in its `user` field; the layer is its tag. */
enum {
    OP_QKV,
    OP_APPEND,
    OP_INDEX,
    OP_MIGRATE,
    OP_CPU_ATTN,
    OP_H2D_PRE,
    OP_H2D_REST,
    OP_GPU_ATTN,
    OP_GPU_END,
    OP_MERGE,
    OP_OPROJ,
    OP_ROUTER,
    OP_EXP_CPU,
    OP_EXP_GPU,
    OP_SHARED,
    OP_DENSE,
    OP_END,
    OP_PF_ATTN,
    OP_WRITE,
    OP_FLUSH,
};

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

/* Folding may stop after layer l: l-2 .. l are MoE layers past the first and identical. */
static int periodic_at(const sim_step *st, int l)
{
    const int first = st->cm->n_dense_layers > 1 ? st->cm->n_dense_layers : 1;
    return l - 2 >= first && same_layer(&st->lay[l - 2], &st->lay[l - 1]) &&
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
    switch (op->s.user) {
    case OP_QKV:
        L->t_start = op->t_ready;
        L->cpu_s = L->exp_cpu_s = 0;
        L->qkv_end = L->attn_start = op->t_end;
        L->gpu_main_end = L->gpu_end = op->t_end;
        /* Two layers ahead: none of layer l+2's ops can be ready before this. */
        if (!st->stop && st->added < st->layers) {
            int rc = add_layer(st, st->added, err);
            if (rc)
                return rc;
        }
        break;
    case OP_APPEND:
    case OP_INDEX: L->attn_start = op->t_end; break;
    case OP_CPU_ATTN: L->cpu_s = op->t_end - op->t_start; break;
    case OP_GPU_ATTN: L->gpu_main_end = op->t_end; break;
    case OP_GPU_END: L->gpu_end = op->t_end; break;
    case OP_EXP_CPU: L->exp_cpu_s = op->t_end - op->t_start; break;
    case OP_ROUTER: L->moe_start = op->t_end; break;
    case OP_OPROJ: L->moe_start = op->t_end; break;
    case OP_END:
        L->t_end = op->t_end;
        L->moe_s = op->t_end - L->moe_start;
        if (st->fold && !st->stop && periodic_at(st, (int)op->s.tag))
            st->stop = 1;
        break;
    default: break;
    }
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
    st->ids = calloc((size_t)layers * 3, sizeof *st->ids);
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

/* Adds an op; preds may hold SIM_OP_NONE. */
static sim_op_id add(sim_step *st, int res, double seconds, int kind, int layer, const char *label,
                     const sim_op_id *preds, size_t n, ws_err *err)
{
    sim_op_spec s = {0};
    if (res >= 0) {
        s.hold = &st->res[res];
        s.width = res == SIM_RES_CPU ? st->res[res].units : 1;
    }
    s.seconds = seconds > 0 ? seconds : 0;
    s.label = label;
    s.tag = (uint32_t)layer;
    s.user = (uint64_t)kind;
    return sim_dag_add(&st->g, &s, preds, n, err);
}

#define ADD(res, sec, kind, l, label, ...)                                                         \
    do {                                                                                           \
        const sim_op_id p_[] = {__VA_ARGS__};                                                      \
        id = add(st, res, sec, kind, l, label, p_, sizeof p_ / sizeof p_[0], err);                 \
        if (id == SIM_OP_NONE)                                                                     \
            return err->code ? err->code : WS_EINVAL;                                              \
    } while (0)

/* Adds layer l's ops. */
static int add_layer(sim_step *st, int l, ws_err *err)
{
    const ws_cost_model *cm = st->cm;
    const sim_step_in *in = st->in;
    const ws_cost_split *split = &st->split;
    st->added = l + 1;
    sim_op_id *end_id = st->ids, *main_id = st->ids + st->layers, *rest_id = main_id + st->layers;
    const sim_op_id pe = l > 0 ? end_id[l - 1] : SIM_OP_NONE, N = SIM_OP_NONE;
    const double T = in->T;
    sim_op_id id, qkv, attn_end;
    ADD(SIM_RES_GPU, ws_cost_qkv_proj(cm, T), OP_QKV, l, "qkv", pe);
    qkv = id;
    if (in->prefill_q > 0) {
        ADD(SIM_RES_GPU,
            ws_cost_gpu_prefill_attn(cm, in->prefill_q, in->prefill_ctx) +
                ws_cost_gpu_indexer(cm, in->prefill_q, in->prefill_ctx + in->prefill_q),
            OP_PF_ATTN, l, "prefill_attn", qkv);
        attn_end = id;
        main_id[l] = qkv; /* the chunk's KV exists once qkv has run */
        rest_id[l] = l > 0 ? rest_id[l - 1] : N;
        if (in->write_bytes > 0 && !st->fold)
            ADD(SIM_RES_D2H, ws_cost_d2h(cm, in->write_bytes), OP_WRITE, l, "kv_write", qkv);
    } else {
        /* The D-window append: the new tokens' KV written into HBM by the projection. */
        ADD(SIM_RES_GPU, in->n_seqs * cm->b_tok / cm->hw.gpu_attn.W.v, OP_APPEND, l, "append", qkv);
        sim_op_id a = id, mig = N, cpu = N, gend, R = l > 0 ? rest_id[l - 1] : N;
        if (in->indexer_s > 0) {
            ADD(SIM_RES_GPU, in->indexer_s, OP_INDEX, l, "indexer", a);
            a = id;
        }
        if (in->migrate_bytes > 0) {
            ADD(SIM_RES_CPU, ws_cost_reformat(cm, in->migrate_bytes), OP_MIGRATE, l, "migrate",
                pe);
            mig = id;
        }
        if (in->n_cpu > 0) {
            ADD(SIM_RES_CPU, ws_cost_split_cpu(split, in->n_cpu), OP_CPU_ATTN, l, "cpu_attn", a,
                mig);
            cpu = id;
        }
        const double bytes = in->nospill ? 0 : in->m_xfer * cm->b_tok;
        if (bytes > 0) {
            const double pre = fmin(cm->cfg.pingpong_bytes, bytes), rest = bytes - pre;
            if (l == 0) {
                ADD(SIM_RES_H2D, ws_cost_h2d(cm, pre, 1), OP_H2D_PRE, l, "h2d_prefetch", qkv);
            } else {
                ADD(SIM_RES_H2D, ws_cost_h2d(cm, pre, 1), OP_H2D_PRE, l, "h2d_prefetch", R,
                    l >= 2 ? main_id[l - 2] : N);
            }
            const sim_op_id P = id;
            ADD(SIM_RES_GPU, ws_cost_gpu_attn(cm, in->resident + in->m_xfer), OP_GPU_ATTN, l,
                "gpu_attn", a, P);
            main_id[l] = id;
            R = P;
            if (rest > 0) {
                ADD(SIM_RES_H2D, ws_cost_h2d(cm, rest, 1), OP_H2D_REST, l, "h2d_stream", P, qkv);
                R = id;
            }
            ADD(-1, 0, OP_GPU_END, l, "gpu_half", main_id[l], R);
            gend = id;
        } else {
            ADD(SIM_RES_GPU, ws_cost_gpu_attn(cm, in->resident), OP_GPU_ATTN, l, "gpu_attn", a);
            main_id[l] = gend = id;
        }
        rest_id[l] = R;
        if (in->flush_bytes > 0 && !st->fold)
            ADD(SIM_RES_D2H, ws_cost_d2h(cm, in->flush_bytes), OP_FLUSH, l, "flush", main_id[l]);
        /* The merge: one small kernel when there is a CPU part to merge. */
        ADD(SIM_RES_GPU, cpu != N ? cm->hw.gpu_attn.c0.v : 0, OP_MERGE, l, "merge", gend, cpu);
        attn_end = id;
    }
    ADD(SIM_RES_GPU, ws_cost_o_proj(cm, T), OP_OPROJ, l, "o_proj", attn_end);
    const sim_op_id o = id;
    if (ws_cost_layer_is_moe(cm, l)) {
        ADD(SIM_RES_GPU, ws_cost_router(cm, T), OP_ROUTER, l, "router", o);
        const sim_op_id r = id;
        sim_op_id ec = N, eg = N, sh = N;
        const double tc = ws_cost_cpu_experts(cm, T), tg = ws_cost_gpu_experts(cm, T),
                     ts = ws_cost_shared_experts(cm, T);
        if (tc > 0) {
            ADD(SIM_RES_CPU, tc, OP_EXP_CPU, l, "experts_cpu", r);
            ec = id;
        }
        if (tg > 0) {
            ADD(SIM_RES_GPU, tg, OP_EXP_GPU, l, "experts_gpu", r);
            eg = id;
        }
        if (ts > 0) {
            ADD(SIM_RES_GPU, ts, OP_SHARED, l, "shared_experts", r);
            sh = id;
        }
        ADD(-1, 0, OP_END, l, "layer_end", r, ec, eg, sh);
    } else {
        ADD(SIM_RES_GPU, ws_cost_dense_mlp(cm, T), OP_DENSE, l, "dense_mlp", o);
        ADD(-1, 0, OP_END, l, "layer_end", id);
    }
    end_id[l] = id;
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
        /* The D2H chain in closed form: it feeds no other op. */
        const double bytes = in->prefill_q > 0 ? in->write_bytes : in->flush_bytes;
        if (bytes > 0) {
            const double d = ws_cost_d2h(cm, bytes);
            double f = -INFINITY;
            for (int l = 0; l < L; l++) {
                const double ready =
                    in->prefill_q > 0 ? st->lay[l].qkv_end : st->lay[l].gpu_main_end;
                f = fmax(f, ready) + d;
            }
            st->busy[SIM_RES_D2H] += L * d;
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
