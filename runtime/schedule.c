/* schedule: one layer's operations as data, and their player (schedule.h). */
#include "schedule.h"

#include <math.h>
#include <string.h>

const char *ws_op_name(int kind)
{
    static const char *const names[WS_OP_KINDS] = {
        "qkv",       "append",        "indexer",      "host",
        "migrate",   "cpu_attn",      "h2d_prefetch", "h2d_stream",
        "gpu_attn",  "gpu_half",      "merge",        "o_proj",
        "router",    "experts_cpu",   "experts_gpu",  "shared_experts",
        "dense_mlp", "layer_end",     "prefill_attn", "kv_write",
        "flush",     "step_overhead", "h2d_experts",  "experts_streamed",
        "to_host",   "to_gpu"};
    return kind >= 0 && kind < WS_OP_KINDS ? names[kind] : "?";
}

/* Builder state: the layer and its ops so far. */
typedef struct bld {
    ws_sched_layer *s;
} bld;

#define HERE(i) ((ws_sched_dep){0, (signed char)(i)})
#define PREV(n, a) ((ws_sched_dep){(signed char)(n), (signed char)(a)})
#define NO_DEP ((ws_sched_dep){-1, -1})

/* Adds an op (deps with back < 0 or ref < 0 are left out); returns its index. */
static int add(ws_sched_layer *s, int kind, int res, double seconds, int n, const ws_sched_dep *dep)
{
    ws_sched_op *o = &s->op[s->n];
    *o = (ws_sched_op){.kind = kind, .res = res, .seconds = seconds > 0 ? seconds : 0};
    for (int i = 0; i < n; i++)
        if (dep[i].back >= 0 && dep[i].ref >= 0 && (dep[i].back == 0 || s->layer >= dep[i].back))
            o->dep[o->n_dep++] = dep[i];
    s->at[kind] = s->n;
    return s->n++;
}

#define ADD(kind, res, sec, ...)                                                                   \
    add(s, kind, res, sec, sizeof((ws_sched_dep[]){__VA_ARGS__}) / sizeof(ws_sched_dep),           \
        (ws_sched_dep[]){__VA_ARGS__})

static ws_sched_dep here_or_none(int i)
{
    return i >= 0 ? HERE(i) : NO_DEP;
}

/* The step's chunks: its list, or the one chunk of prefill_q after prefill_ctx. */
static int chunks_of(const ws_sched_in *in, const ws_sched_chunk **c, ws_sched_chunk *one)
{
    if (in->n_chunks > 0) {
        *c = in->chunks;
        return in->n_chunks;
    }
    *one = (ws_sched_chunk){in->prefill_q, in->prefill_ctx};
    *c = one;
    return in->prefill_q > 0;
}

/* Prefill attention of every chunk of the step, on the GPU (with the indexer of a sparse
 * model) or on the CPU: one kernel per chunk. */
static double pf_attn(const ws_cost_model *cm, const ws_sched_in *in, int on_cpu)
{
    ws_sched_chunk one;
    const ws_sched_chunk *c;
    const int n = chunks_of(in, &c, &one);
    double t = 0;
    for (int i = 0; i < n; i++)
        t += on_cpu ? ws_cost_cpu_prefill_attn(cm, c[i].q, c[i].ctx)
                    : ws_cost_gpu_prefill_attn(cm, c[i].q, c[i].ctx) +
                          ws_cost_gpu_indexer(cm, c[i].q, c[i].ctx + c[i].q);
    return t;
}

/* Tokens of the step's prompts before their chunks, summed. */
static double pf_ctx(const ws_sched_in *in)
{
    ws_sched_chunk one;
    const ws_sched_chunk *c;
    const int n = chunks_of(in, &c, &one);
    double t = 0;
    for (int i = 0; i < n; i++)
        t += c[i].ctx;
    return t;
}

/* A layer wholly on the CPU in a prefill chunk under the GPU strategy (cost.h,
 * ws_cost_cpu_layer_stream_bytes): its weights and KV stream H2D (two layers in flight, as a
 * GPU layer's streamed experts), then it runs on the GPU as a GPU layer does. The chunk's new
 * KV going back to host memory (q x one layer's KV bytes, beside the layer's weights) is left
 * out, as the hidden state's copy is. */
static void build_streamed_cpu_layer(const ws_cost_model *cm, const ws_sched_in *in, int l,
                                     ws_sched_dep pe, ws_sched_layer *s)
{
    const double T = in->T, q = in->prefill_q;
    const double t_x = ws_cost_cpu_layer_stream(cm, l, q, pf_ctx(in));
    const int x = l == 0 ? ADD(WS_OP_H2D_EXP, WS_RES_H2D, t_x, pe)
                         : ADD(WS_OP_H2D_EXP, WS_RES_H2D, t_x, PREV(1, WS_ANCHOR_H2D),
                               PREV(2, WS_ANCHOR_END));
    s->anchor[WS_ANCHOR_H2D] = x;
    const int qkv = ADD(WS_OP_QKV, WS_RES_GPU,
                        ws_cost_add(cm, T) + ws_cost_norm(cm, T) + ws_cost_qkv_proj(cm, T) +
                            ws_cost_rope(cm, T),
                        pe, HERE(x));
    s->anchor[WS_ANCHOR_MAIN] = qkv;
    const int a = ADD(WS_OP_PF_ATTN, WS_RES_GPU, pf_attn(cm, in, 0), HERE(qkv));
    const int o = ADD(WS_OP_OPROJ, WS_RES_GPU,
                      ws_cost_o_proj(cm, T) + ws_cost_add(cm, T) + ws_cost_norm(cm, T), HERE(a));
    const int kind = ws_cost_layer(cm, l)->moe ? WS_OP_EXP_STREAM : WS_OP_DENSE;
    const int m = ADD(kind, WS_RES_GPU, ws_cost_cpu_layer_streamed_moe(cm, l, q), HERE(o));
    s->anchor[WS_ANCHOR_END] = ADD(WS_OP_END, WS_RES_NONE, 0, HERE(m));
}

/* A layer wholly on the CPU (n_gpu_layers): qkv, attention over every KV token of the layer
 * (host memory: the decoding sequences' and the chunks' own), o_proj, then the router, routed and shared experts (MoE) or the dense MLP,
 * all on the CPU pool, in that order. It streams nothing, so its H2D anchor is the layer
 * before's; its main anchor (a free ping-pong half) is its qkv. The hidden state's copy to
 * the first GPU layer (T x hidden elements, once a step) is left out: a few KB. */
static void build_cpu_layer(const ws_cost_model *cm, const ws_sched_in *in, int l,
                            ws_sched_dep pe, ws_sched_layer *s)
{
    const double T = in->T;
    if (in->prefill_q > 0 && in->prefill_gpu && !(in->n_seqs > 0)) {
        build_streamed_cpu_layer(cm, in, l, pe, s);
        return;
    }
    const int qkv = ADD(WS_OP_QKV, WS_RES_CPU, ws_cost_cpu_qkv_proj(cm, T), pe);
    s->anchor[WS_ANCHOR_MAIN] = qkv;
    const double dec = in->n_cpu + in->m_xfer + in->resident;
    const double attn = (in->prefill_q > 0 ? pf_attn(cm, in, 1) : 0) +
                        (dec > 0 ? ws_cost_cpu_attn(cm, dec) : 0);
    const int a = ADD(WS_OP_CPU_ATTN, WS_RES_CPU, attn, HERE(qkv));
    const int o = ADD(WS_OP_OPROJ, WS_RES_CPU, ws_cost_cpu_o_proj(cm, T), HERE(a));
    if (ws_cost_layer(cm, l)->moe) {
        const int r = ADD(WS_OP_ROUTER, WS_RES_CPU,
                          ws_cost_router(cm, l, T) + ws_cost_topk(cm, l, T), HERE(o));
        double tc = ws_cost_cpu_experts(cm, l, T);
        tc += tc > 0 ? ws_cost_moe_permute_cpu(cm, l, T) : 0;
        const double ts = ws_cost_cpu_shared_experts(cm, T);
        const int ec = tc > 0 ? ADD(WS_OP_EXP_CPU, WS_RES_CPU, tc, HERE(r)) : -1;
        const int sh = ts > 0 ? ADD(WS_OP_SHARED, WS_RES_CPU, ts, HERE(r)) : -1;
        s->anchor[WS_ANCHOR_END] =
            ADD(WS_OP_END, WS_RES_NONE, 0, HERE(r), here_or_none(ec), here_or_none(sh));
    } else {
        const int d = ADD(WS_OP_DENSE, WS_RES_CPU, ws_cost_cpu_dense_mlp(cm, T), HERE(o));
        s->anchor[WS_ANCHOR_END] = ADD(WS_OP_END, WS_RES_NONE, 0, HERE(d));
    }
}

/* A decode layer's attention after qkv: the append (and the indexer), the runtime's own
 * work and migrate's reformat before the CPU half, the GPU half (the XFER stream, its
 * prefetch during layer l-1's MoE phase, attention over it and the D-window), the flush and
 * the merge. x >= 0: this layer's expert weights' stream (a mixed step's), which the XFER
 * stream follows, so the copy engine serves the layers' copies in layer order. Returns the
 * merge's index. */
static int build_decode_attn(const ws_cost_model *cm, const ws_cost_split *split,
                             const ws_sched_in *in, int l, int qkv, int x, ws_sched_layer *s)
{
    int a = ADD(WS_OP_APPEND, WS_RES_GPU, ws_cost_append(cm, in->n_seqs), HERE(qkv));
    if (in->indexer_s > 0)
        a = ADD(WS_OP_INDEX, WS_RES_GPU, in->indexer_s, HERE(a));
    const ws_sched_dep prev = PREV(1, WS_ANCHOR_END);
    const int host = in->host_s > 0 ? ADD(WS_OP_HOST, WS_RES_CPU, in->host_s, prev) : -1;
    const int mig = in->migrate_bytes > 0
                        ? ADD(WS_OP_MIGRATE, WS_RES_CPU, ws_cost_reformat(cm, in->migrate_bytes),
                              prev)
                        : -1;
    const int cpu = in->n_cpu > 0
                        ? ADD(WS_OP_CPU_ATTN, WS_RES_CPU, ws_cost_split_cpu(split, in->n_cpu),
                              HERE(a), here_or_none(host), here_or_none(mig))
                        : -1;
    const double bytes = in->nospill ? 0 : in->m_xfer * cm->b_tok;
    int gend;
    if (bytes > 0) {
        const double pre = fmin(cm->cfg.pingpong_bytes, bytes), rest = bytes - pre;
        const ws_sched_dep after = x >= 0 ? HERE(x) : PREV(1, WS_ANCHOR_H2D);
        const int p = l == 0 ? ADD(WS_OP_H2D_PRE, WS_RES_H2D, ws_cost_h2d(cm, pre, 1), HERE(qkv),
                                   here_or_none(x))
                             : ADD(WS_OP_H2D_PRE, WS_RES_H2D, ws_cost_h2d(cm, pre, 1), after,
                                   PREV(2, WS_ANCHOR_MAIN));
        const int g = ADD(WS_OP_GPU_ATTN, WS_RES_GPU,
                          ws_cost_gpu_attn(cm, in->resident + in->m_xfer), HERE(a), HERE(p));
        s->anchor[WS_ANCHOR_MAIN] = g;
        int last = p;
        if (rest > 0)
            last = ADD(WS_OP_H2D_REST, WS_RES_H2D, ws_cost_h2d(cm, rest, 1), HERE(p), HERE(qkv));
        s->anchor[WS_ANCHOR_H2D] = last;
        gend = ADD(WS_OP_GPU_END, WS_RES_NONE, 0, HERE(g), HERE(last));
    } else {
        gend = ADD(WS_OP_GPU_ATTN, WS_RES_GPU, ws_cost_gpu_attn(cm, in->resident), HERE(a));
        s->anchor[WS_ANCHOR_MAIN] = gend;
    }
    if (in->flush_bytes > 0)
        ADD(WS_OP_FLUSH, WS_RES_D2H, ws_cost_d2h(cm, in->flush_bytes),
            HERE(s->anchor[WS_ANCHOR_MAIN]));
    /* The merge: one small kernel when there is a CPU part to merge. */
    return ADD(WS_OP_MERGE, WS_RES_GPU, cpu >= 0 ? ws_cost_merge(cm, in->T) : 0, HERE(gend),
               here_or_none(cpu));
}

/* The stream of a MoE layer's CPU experts' weights to the GPU in a prefill chunk (two layers
 * in flight). */
static int add_expert_stream(const ws_cost_model *cm, const ws_sched_in *in, int l, int step,
                             ws_sched_layer *s)
{
    const double t = ws_cost_expert_stream(cm, l, in->T);
    return l == 0 ? ADD(WS_OP_H2D_EXP, WS_RES_H2D, t, here_or_none(step))
                  : ADD(WS_OP_H2D_EXP, WS_RES_H2D, t, PREV(1, WS_ANCHOR_H2D),
                        PREV(2, WS_ANCHOR_END));
}

/* A MoE layer's phase after o_proj in a prefill chunk that streams its CPU experts' weights
 * (their stream x, added before): the router on the GPU, the GPU-resident and shared
 * experts, the streamed experts after their weights. */
static void build_streamed_moe(const ws_cost_model *cm, const ws_sched_in *in, int l, int o,
                               int x, ws_sched_layer *s)
{
    const double T = in->T;
    if (s->anchor[WS_ANCHOR_H2D] < 0)
        s->anchor[WS_ANCHOR_H2D] = x;
    const int r = ADD(WS_OP_ROUTER, WS_RES_GPU, ws_cost_router_gpu(cm, T), HERE(o));
    double tg = ws_cost_gpu_experts(cm, l, T);
    tg += tg > 0 ? ws_cost_moe_permute_gpu(cm, l, T) : 0;
    const double ts = ws_cost_shared_experts(cm, T);
    const int eg = tg > 0 ? ADD(WS_OP_EXP_GPU, WS_RES_GPU, tg, HERE(r)) : -1;
    const int sh = ts > 0 ? ADD(WS_OP_SHARED, WS_RES_GPU, ts, HERE(r)) : -1;
    const int es = ADD(WS_OP_EXP_STREAM, WS_RES_GPU, ws_cost_gpu_streamed_experts(cm, l, T),
                       HERE(r), HERE(x));
    s->anchor[WS_ANCHOR_END] =
        ADD(WS_OP_END, WS_RES_NONE, 0, HERE(es), here_or_none(eg), here_or_none(sh));
}

/* A MoE layer's phase after o_proj with its experts where they live: the router beside the
 * routed experts (on the CPU once the hidden states are there when any run there), the CPU
 * experts and their output's copy back, the GPU experts and the shared experts. */
static void build_moe(const ws_cost_model *cm, const ws_sched_in *in, int l, int o,
                      ws_sched_layer *s)
{
    const double T = in->T;
    /* With XFER pages in the step the next layer's prefetch reads host memory beside them. */
    double tc = in->m_xfer > 0 ? ws_cost_cpu_experts_copying(cm, l, T) : ws_cost_cpu_experts(cm, l, T);
    double tg = ws_cost_gpu_experts(cm, l, T);
    const double ts = ws_cost_shared_experts(cm, T);
    tc += tc > 0 ? ws_cost_moe_permute_cpu(cm, l, T) : 0;
    tg += tg > 0 ? ws_cost_moe_permute_gpu(cm, l, T) : 0;
    const int out =
        tc > 0 ? ADD(WS_OP_TO_HOST, WS_RES_NONE, ws_cost_handoff(cm, T, 1), HERE(o)) : -1;
    const int cpu_r = ws_cost_layer(cm, l)->router_on_cpu;
    const int r = ADD(WS_OP_ROUTER, cpu_r ? WS_RES_CPU : WS_RES_GPU,
                      ws_cost_router(cm, l, T) + ws_cost_topk(cm, l, T), HERE(o),
                      cpu_r ? here_or_none(out) : NO_DEP);
    const int ec = tc > 0 ? ADD(WS_OP_EXP_CPU, WS_RES_CPU, tc, HERE(r), HERE(out)) : -1;
    const int back =
        ec >= 0 ? ADD(WS_OP_TO_GPU, WS_RES_NONE, ws_cost_handoff(cm, T, 0), HERE(ec)) : -1;
    const int eg = tg > 0 ? ADD(WS_OP_EXP_GPU, WS_RES_GPU, tg, HERE(r)) : -1;
    const int sh = ts > 0 ? ADD(WS_OP_SHARED, WS_RES_GPU, ts, HERE(r)) : -1;
    s->anchor[WS_ANCHOR_END] = ADD(WS_OP_END, WS_RES_NONE, 0, HERE(r), here_or_none(back),
                                   here_or_none(eg), here_or_none(sh));
}

void ws_sched_build(const ws_cost_model *cm, const ws_cost_split *split, const ws_sched_in *in,
                    int l, ws_sched_layer *s)
{
    s->layer = l;
    s->n = 0;
    for (int k = 0; k < WS_OP_KINDS; k++)
        s->at[k] = -1;
    for (int a = 0; a < WS_ANCHORS; a++)
        s->anchor[a] = -1;
    const double T = in->T, t_step = l == 0 ? ws_cost_step(cm) : 0;
    const int step = t_step > 0 ? ADD(WS_OP_STEP, WS_RES_NONE, t_step, NO_DEP) : -1;
    const ws_sched_dep pe = step >= 0 ? HERE(step) : PREV(1, WS_ANCHOR_END);
    const ws_deploy_layer *y = ws_cost_layer(cm, l);
    if (y->on_cpu) {
        build_cpu_layer(cm, in, l, pe, s);
        return;
    }
    const int streams = y->moe && in->prefill_q > 0 && in->prefill_gpu &&
                        ws_cost_expert_stream_bytes(cm, l, T) > 0 && ws_cost_cpu_experts(cm, l, T) > 0;
    const int decodes = in->n_seqs > 0 || !(in->prefill_q > 0);
    /* With decodes in the step the weights' stream comes first, the XFER pages' after it. */
    const int x = streams && decodes ? add_expert_stream(cm, in, l, step, s) : -1;
    const int qkv = ADD(WS_OP_QKV, WS_RES_GPU,
                        ws_cost_add(cm, T) + ws_cost_norm(cm, T) + ws_cost_qkv_proj(cm, T) +
                            ws_cost_rope(cm, T),
                        pe);
    /* The decode tokens' attention, then the chunks' (after the merge, so that the decode
     * halves the controller observes are their own); the chunks' KV leaves D2H once qkv
     * has made it. */
    int attn_end = decodes ? build_decode_attn(cm, split, in, l, qkv, x, s) : qkv;
    if (in->prefill_q > 0) {
        attn_end = ADD(WS_OP_PF_ATTN, WS_RES_GPU, pf_attn(cm, in, 0), HERE(attn_end));
        if (!decodes)
            s->anchor[WS_ANCHOR_MAIN] = qkv; /* the chunk's KV exists once qkv has run */
        if (in->write_bytes > 0)
            ADD(WS_OP_WRITE, WS_RES_D2H, ws_cost_d2h(cm, in->write_bytes), HERE(qkv));
    }
    const int o = ADD(WS_OP_OPROJ, WS_RES_GPU,
                      ws_cost_o_proj(cm, T) + ws_cost_add(cm, T) + ws_cost_norm(cm, T),
                      HERE(attn_end));
    if (streams) {
        build_streamed_moe(cm, in, l, o, x >= 0 ? x : add_expert_stream(cm, in, l, step, s), s);
    } else if (y->moe) {
        build_moe(cm, in, l, o, s);
    } else {
        const int d = ADD(WS_OP_DENSE, WS_RES_GPU, ws_cost_dense_mlp(cm, T), HERE(o));
        s->anchor[WS_ANCHOR_END] = ADD(WS_OP_END, WS_RES_NONE, 0, HERE(d));
    }
}

double ws_sched_op_time(const ws_cost_model *cm, const ws_sched_in *in, int l, int kind)
{
    ws_cost_split sp;
    ws_cost_split_terms(cm, in->resident, 0, 0, 0, &sp);
    ws_sched_layer s;
    ws_sched_build(cm, &sp, in, l, &s);
    return kind >= 0 && kind < WS_OP_KINDS && s.at[kind] >= 0 ? s.op[s.at[kind]].seconds : 0;
}

void ws_sched_set(ws_sched_layer *s, int kind, double seconds)
{
    if (kind >= 0 && kind < WS_OP_KINDS && s->at[kind] >= 0)
        s->op[s->at[kind]].seconds = seconds > 0 ? seconds : 0;
}

void ws_sched_times_op(ws_sched_times *t, int kind, double t_ready, double t_start, double t_end)
{
    switch (kind) {
    case WS_OP_QKV:
        t->t_start = t_ready;
        t->cpu_s = t->exp_cpu_s = 0;
        t->qkv_end = t->attn_start = t_end;
        t->gpu_main_end = t->gpu_end = t_end;
        break;
    case WS_OP_APPEND:
    case WS_OP_INDEX: t->attn_start = t_end; break;
    case WS_OP_CPU_ATTN: t->cpu_s = t_end - t_start; break;
    case WS_OP_GPU_ATTN: t->gpu_main_end = t->gpu_end = t_end; break;
    case WS_OP_GPU_END: t->gpu_end = t_end; break;
    case WS_OP_EXP_CPU: t->exp_cpu_s = t_end - t_start; break;
    case WS_OP_ROUTER:
    case WS_OP_OPROJ: t->moe_start = t_end; break;
    case WS_OP_END:
        t->t_end = t_end;
        t->moe_s = t_end - t->moe_start;
        break;
    default: break;
    }
}

void ws_sched_play_start(ws_sched_play *p, double t0)
{
    memset(p, 0, sizeof *p);
    p->t0 = p->t_end = t0;
    for (int r = 0; r < WS_RES_COUNT; r++)
        p->free[r] = t0;
    for (int b = 0; b < 2; b++)
        for (int a = 0; a < WS_ANCHORS; a++)
            p->anchor[b][a] = NAN;
}

void ws_sched_play_layer(ws_sched_play *p, const ws_sched_layer *s, ws_sched_times *t, double *ends)
{
    double end[WS_SCHED_MAX_OPS];
    memset(t, 0, sizeof *t);
    for (int i = 0; i < s->n; i++) {
        const ws_sched_op *o = &s->op[i];
        double ready = p->t0;
        for (int d = 0; d < o->n_dep; d++) {
            const ws_sched_dep *dp = &o->dep[d];
            const double e = dp->back == 0 ? end[dp->ref] : p->anchor[dp->back - 1][dp->ref];
            if (e > ready) /* NAN (no such op) never is */
                ready = e;
        }
        double start = ready;
        if (o->res >= 0) {
            if (p->free[o->res] > start)
                start = p->free[o->res];
            p->free[o->res] = start + o->seconds;
            p->busy[o->res] += o->seconds;
        }
        end[i] = start + o->seconds;
        if (end[i] > p->t_end)
            p->t_end = end[i];
        if (ends)
            ends[i] = end[i];
        ws_sched_times_op(t, o->kind, ready, start, end[i]);
    }
    const double h2d_prev = p->anchor[0][WS_ANCHOR_H2D];
    memcpy(p->anchor[1], p->anchor[0], sizeof p->anchor[0]);
    for (int a = 0; a < WS_ANCHORS; a++)
        p->anchor[0][a] = s->anchor[a] >= 0 ? end[s->anchor[a]] : NAN;
    if (s->anchor[WS_ANCHOR_H2D] < 0)
        p->anchor[0][WS_ANCHOR_H2D] = h2d_prev;
}

double ws_sched_play_step(const ws_cost_model *cm, const ws_cost_split *split,
                          const ws_sched_in *in, int layers, ws_sched_times *lay)
{
    ws_sched_layer memo[WS_LAYER_KINDS], own;
    int have[WS_LAYER_KINDS] = {0};
    ws_sched_play play;
    ws_sched_play_start(&play, 0);
    for (int l = 0; l < layers; l++) {
        const ws_sched_layer *s = &own;
        if (l >= 2) {
            const int k = ws_cost_layer(cm, l)->kind;
            if (!have[k]) {
                ws_sched_build(cm, split, in, l, &memo[k]);
                have[k] = 1;
            }
            s = &memo[k];
        } else {
            ws_sched_build(cm, split, in, l, &own);
        }
        ws_sched_times t;
        ws_sched_play_layer(&play, s, &t, NULL);
        if (lay)
            lay[l] = t;
    }
    return play.t_end;
}
