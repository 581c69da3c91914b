/* cost: operation times of a deployed model (see cost.h). */
#include "cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the model on the machine ---------------------------------------------------------- */

int ws_cost_model_init(const ws_hw *hw, const ws_model *m, const ws_deploy_cfg *cfg,
                       ws_cost_model *cm, ws_err *err)
{
    memset(cm, 0, sizeof *cm);
    int rc = ws_deploy_init(hw, m, cfg, &cm->dep, err);
    if (rc)
        return rc;
    cm->cfg = *cfg;
    ws_model_derive(m, cfg->kv_dtype, &cm->st);
    if (cfg->w_kv) {
        const double f = cfg->w_kv->bytes / ws_dtype_size(cfg->kv_dtype);
        cm->st.kv_bytes_tok_layer *= f;
        cm->st.kv_bytes_tok *= f;
    }
    if (!(cm->st.kv_bytes_tok_layer > 0) || !(cm->st.attn_flops_tok_layer > 0)) {
        ws_deploy_free(&cm->dep);
        return ws_err_set(err, WS_EINVAL, "%s: model has no attention", m->name);
    }
    const ws_hw *dh = &cm->dep.hw;
    cm->layers = m->layers;
    cm->n_dense_layers = m->n_dense_layers;
    cm->n_experts = m->n_experts;
    cm->top_k = m->experts_per_tok;
    cm->hidden = m->hidden;
    cm->moe_inter = m->moe_intermediate;
    cm->dense_inter = m->intermediate;
    cm->b_tok = cm->st.kv_bytes_tok_layer;
    cm->f_tok = cm->st.attn_flops_tok_layer;
    cm->w_h2d_eff = hw->h2d.W.v * hw->h2d_contention.v;
    const double b = cm->b_tok, f = cm->f_tok;
    /* A decode step's CPU half runs while the copy engine streams the XFER pages from the
     * same DRAM: its memory side at the calibrated share of W beside a copy */
    const double w_copy = cfg->no_copies || !(dh->cpu_attn_copy.v > 0) ? 1.0 : dh->cpu_attn_copy.v;
    cm->A = fmax(dh->cpu_attn.P.v > 0 ? f / dh->cpu_attn.P.v : 0, b / (dh->cpu_attn.W.v * w_copy));
    cm->t_res = fmax(hw->gpu_attn.P.v > 0 ? f / hw->gpu_attn.P.v : 0, b / hw->gpu_attn.W.v);
    cm->B = fmax(b / cm->w_h2d_eff, cm->t_res);

    const double H = m->hidden, nq = m->n_q_heads,
                 vd = m->v_head_dim > 0 ? m->v_head_dim : m->head_dim;
    const double ws = ws_dtype_size(m->weight_dtype);
    cm->w_elem = ws;
    cm->o_params = nq * vd * H;
    cm->qkv_params = fmax(cm->st.attn_weight_bytes_layer / ws - cm->o_params, 0);
    cm->qkv_out = cm->qkv_params / H;
    cm->o_in = nq * vd;
    cm->router_params = m->n_experts > 0 ? H * m->n_experts : 0;
    cm->shared_params = cm->st.shared_bytes_layer / ws;
    cm->shared_inter = cm->shared_params / (3.0 * H);
    cm->dense_params = m->n_dense_layers > 0 ? 3.0 * H * m->intermediate : 0;
    cm->expert_params = 3.0 * H * m->moe_intermediate;
    /* RoPE rotates every query head and the keys: GQA/MHA the KV heads at head_dim, MLA the
     * one shared rope key at rope_dim. */
    const int mla = m->attn == WS_ATTN_MLA || m->attn == WS_ATTN_MLA_SPARSE;
    cm->rope_heads = nq + (mla ? 1 : m->n_kv_heads);
    cm->rope_dim = mla ? m->rope_dim : m->head_dim;
    /* The merge reads the two halves' fp32 outputs and log-sum-exps, writes one output. */
    cm->merge_bytes = nq * (3.0 * vd + 2.0) * 4.0;
    return 0;
}

void ws_cost_model_free(ws_cost_model *cm)
{
    ws_deploy_free(&cm->dep);
}

const ws_deploy_layer *ws_cost_layer(const ws_cost_model *cm, int layer)
{
    return ws_deploy_at(&cm->dep, layer);
}

/* ---- the attention split --------------------------------------------------------------- */

void ws_cost_split_terms(const ws_cost_model *cm, double resident_tokens, double t_moe_prev,
                         double A_obs, double B_obs, ws_cost_split *out)
{
    out->A = A_obs > 0 ? A_obs : cm->A;
    out->B = B_obs > 0 ? B_obs : cm->B;
    out->C_cpu = cm->dep.hw.cpu_attn.c0.v;
    const double bytes = fmin(cm->cfg.pingpong_bytes, fmax(t_moe_prev, 0) * cm->w_h2d_eff);
    out->prefetch_s = bytes / cm->w_h2d_eff;
    out->xfer_s = cm->b_tok / cm->w_h2d_eff;
    out->C_gpu = cm->dep.hw.gpu_attn.c0.v + cm->dep.hw.h2d.c0.v + fmax(resident_tokens, 0) * cm->t_res -
                 out->prefetch_s;
}

double ws_cost_split_cpu(const ws_cost_split *s, double n)
{
    return n > 0 ? s->C_cpu + s->A * n : 0.0;
}

double ws_cost_split_gpu(const ws_cost_split *s, double m)
{
    /* The prefetch credit is at most the streamed tokens' own transfer, so the GPU half
     * never ends before its resident part. */
    double credit = fmin(s->prefetch_s, fmax(m, 0) * s->xfer_s);
    return s->C_gpu + s->prefetch_s - credit + s->B * fmax(m, 0);
}

double ws_cost_split_time(const ws_cost_split *s, double n, double m)
{
    return fmax(ws_cost_split_cpu(s, n), ws_cost_split_gpu(s, m));
}

/* ---- single operations -------------------------------------------------------------------- */

double ws_cost_cpu_attn(const ws_cost_model *cm, double tokens)
{
    return tokens > 0 ? ws_hw_roof_time(&cm->dep.hw.cpu_attn, cm->f_tok * tokens, cm->b_tok * tokens)
                      : 0;
}

double ws_cost_gpu_attn(const ws_cost_model *cm, double tokens)
{
    return tokens > 0 ? ws_hw_roof_time(&cm->dep.hw.gpu_attn, cm->f_tok * tokens, cm->b_tok * tokens)
                      : 0;
}

double ws_cost_gpu_prefill_attn(const ws_cost_model *cm, double q, double ctx)
{
    return ws_cost_prefill_attn_time(&cm->dep.hw, q, ctx, cm->f_tok, cm->b_tok);
}

double ws_cost_norm(const ws_cost_model *cm, double T)
{
    return ws_cost_elem_time(&cm->dep.hw, WS_ELEM_NORM, ws_cost_norm_bytes(T, cm->hidden, cm->w_elem),
                             T);
}

double ws_cost_rope(const ws_cost_model *cm, double T)
{
    return ws_cost_elem_time(&cm->dep.hw, WS_ELEM_ROPE,
                             ws_cost_rope_bytes(T, cm->rope_heads, cm->rope_dim, cm->w_elem), T);
}

double ws_cost_add(const ws_cost_model *cm, double T)
{
    return ws_cost_elem_time(&cm->dep.hw, WS_ELEM_ADD, ws_cost_add_bytes(T, cm->hidden, cm->w_elem), T);
}

double ws_cost_act(const ws_cost_model *cm, double T, double I)
{
    return ws_cost_elem_time(&cm->dep.hw, WS_ELEM_ACT, ws_cost_act_bytes(T, I, cm->w_elem), T);
}

double ws_cost_append(const ws_cost_model *cm, double n_seqs)
{
    /* read the projected K/V, write them into the pages */
    return ws_cost_elem_time(&cm->dep.hw, WS_ELEM_ADD, n_seqs > 0 ? 2.0 * n_seqs * cm->b_tok : 0,
                             n_seqs);
}

double ws_cost_merge(const ws_cost_model *cm, double T)
{
    return ws_cost_elem_time(&cm->dep.hw, WS_ELEM_ADD, T > 0 ? T * cm->merge_bytes : 0, T);
}

double ws_cost_step(const ws_cost_model *cm)
{
    return cm->dep.hw.step.v;
}

double ws_cost_gpu_indexer(const ws_cost_model *cm, double q, double ctx)
{
    if (q <= 0 || !(cm->st.index_flops_tok_layer > 0))
        return 0;
    return ws_hw_roof_time(&cm->dep.hw.gpu_attn, cm->st.index_flops_tok_layer * q * ctx,
                             cm->st.index_bytes_tok_layer * ctx);
}

double ws_cost_h2d(const ws_cost_model *cm, double bytes, int contended)
{
    if (bytes <= 0)
        return 0;
    return cm->dep.hw.h2d.c0.v + bytes / (contended ? cm->w_h2d_eff : cm->dep.hw.h2d.W.v);
}

double ws_cost_d2h(const ws_cost_model *cm, double bytes)
{
    return bytes > 0 ? cm->dep.hw.d2h.c0.v + bytes / cm->dep.hw.d2h.W.v : 0;
}

double ws_cost_handoff(const ws_cost_model *cm, double T, int to_host)
{
    const double bytes = T * cm->hidden * cm->w_elem;
    const ws_hw *hw = &cm->dep.hw;
    if (!(bytes > 0))
        return 0;
    const ws_hw_roof *r = to_host ? &hw->d2h : &hw->h2d;
    return fmax(r->c0.v, hw->handoff_c0.v) + bytes / r->W.v;
}

double ws_cost_weights_h2d(const ws_cost_model *cm, double bytes)
{
    const ws_hw_roof *r = &cm->dep.hw.h2d_weights;
    return bytes > 0 ? r->c0.v + bytes / r->W.v : 0;
}

double ws_cost_flush(const ws_cost_model *cm, int n_seqs, int window_tokens)
{
    return ws_cost_d2h(cm, (double)n_seqs * window_tokens * cm->b_tok);
}

double ws_cost_host_copy(const ws_cost_model *cm, double bytes)
{
    return bytes > 0 ? 2.0 * bytes / cm->dep.hw.cpu_mem_bw.v : 0;
}

double ws_cost_reformat(const ws_cost_model *cm, double bytes)
{
    return bytes > 0 ? bytes / cm->dep.hw.kv_reformat.v : 0;
}

/* ---- one kernel by shape ----------------------------------------------------------------- */

double ws_cost_causal_pairs(double q, double ctx)
{
    return q > 0 ? q * fmax(ctx, 0) + q * (q + 1) / 2 : 0;
}

void ws_cost_gemm_work(double M, double K, double N, double elem, double *flops, double *bytes)
{
    *flops = 2.0 * M * K * N;
    *bytes = (M * K + K * N + M * N) * elem;
}

double ws_cost_gemm_time(const ws_hw *hw, double M, double K, double N, double elem)
{
    if (M <= 0 || K <= 0 || N <= 0)
        return 0;
    double f, b;
    ws_cost_gemm_work(M, K, N, elem, &f, &b);
    return ws_hw_roof_time(&hw->gpu_gemm, f, b);
}

double ws_cost_decode_attn_time(const ws_hw *hw, double kv_bytes, double flops)
{
    return kv_bytes > 0 ? ws_hw_roof_time(&hw->gpu_attn, flops, kv_bytes) : 0;
}

double ws_cost_prefill_attn_time(const ws_hw *hw, double q, double ctx, double f_tok,
                                 double b_tok)
{
    if (q <= 0)
        return 0;
    /* Causal pairs at the curve's rate for k = pairs / q keys per query; K/V read once per
     * 128-query block at the decode kernel's bandwidth (the memory side of short chunks). */
    const double pairs = ws_cost_causal_pairs(q, ctx), k = pairs / q;
    const ws_hw_curve *c = &hw->gpu_prefill;
    const double tf = c->P.v > 0 ? f_tok * pairs / c->P.v * (1.0 + fmax(c->half.v, 0) / k) : 0;
    const double W = hw->gpu_attn.W.v,
                 tb = W > 0 ? b_tok * (fmax(ctx, 0) + q) * ceil(q / 128.0) / W : 0;
    return c->c0.v + fmax(tf, tb);
}

double ws_cost_norm_bytes(double T, double H, double elem)
{
    return T > 0 ? (2.0 * T * H + H) * elem : 0;
}

double ws_cost_rope_bytes(double T, double heads, double dim, double elem)
{
    return T > 0 ? 2.0 * T * heads * dim * elem : 0;
}

double ws_cost_act_bytes(double T, double I, double elem)
{
    return T > 0 ? 3.0 * T * I * elem : 0;
}

double ws_cost_add_bytes(double T, double H, double elem)
{
    return T > 0 ? 3.0 * T * H * elem : 0;
}

double ws_cost_elem_time(const ws_hw *hw, int kind, double bytes, double rows)
{
    if (!(bytes > 0) || kind < 0 || kind >= WS_ELEM_KINDS)
        return 0;
    const ws_hw_roof *r = &hw->gpu_elem[kind];
    const double all = r->W.v > 0 ? bytes / r->W.v : 0,
                 row = r->P.v > 0 && rows >= 1 ? bytes / rows / r->P.v : 0;
    return r->c0.v + (row > all ? row : all);
}

/* A GEMM of T tokens, K inputs and N outputs per token, on the GPU. */
static double gpu_gemm(const ws_cost_model *cm, double T, double K, double N)
{
    if (T <= 0 || K <= 0 || N <= 0)
        return 0;
    return ws_cost_gemm_time(&cm->dep.hw, T, K, N, cm->w_elem);
}

/* The same on part p's roofline, with its weights' bytes (activations at the model's dtype). */
static double part_gemm(const ws_cost_model *cm, const ws_deploy_part *p, double T, double K,
                        double N)
{
    if (T <= 0 || K <= 0 || N <= 0)
        return 0;
    double f, b;
    ws_cost_gemm_work(T, K, N, cm->w_elem, &f, &b);
    if (p->wb != cm->w_elem)
        b += K * N * (p->wb - cm->w_elem);
    return ws_hw_roof_time(&p->roof, f, b);
}

static const ws_deploy_part *part(const ws_cost_model *cm, ws_part p)
{
    return &cm->dep.part[p];
}

double ws_cost_qkv_proj(const ws_cost_model *cm, double T)
{
    return part_gemm(cm, part(cm, WS_PART_GPU), T, cm->hidden, cm->qkv_out);
}
double ws_cost_o_proj(const ws_cost_model *cm, double T)
{
    return part_gemm(cm, part(cm, WS_PART_GPU), T, cm->o_in, cm->hidden);
}

double ws_cost_cpu_qkv_proj(const ws_cost_model *cm, double T)
{
    return part_gemm(cm, part(cm, WS_PART_CPU_DENSE), T, cm->hidden, cm->qkv_out);
}
double ws_cost_cpu_o_proj(const ws_cost_model *cm, double T)
{
    return part_gemm(cm, part(cm, WS_PART_CPU_DENSE), T, cm->o_in, cm->hidden);
}

/* A gated MLP of width I on a CPU part: gate-up and down GEMMs (the activation runs inside
 * the CPU's FFN call, as the routed experts' does). */
static double cpu_gated_mlp(const ws_cost_model *cm, const ws_deploy_part *p, double T, double I)
{
    if (T <= 0 || !(I > 0))
        return 0;
    return part_gemm(cm, p, T, cm->hidden, 2.0 * I) + part_gemm(cm, p, T, I, cm->hidden);
}

double ws_cost_cpu_shared_experts(const ws_cost_model *cm, double T)
{
    return cpu_gated_mlp(cm, part(cm, WS_PART_CPU_SHARED), T, cm->shared_inter);
}
double ws_cost_cpu_dense_mlp(const ws_cost_model *cm, double T)
{
    return cm->dense_params > 0 ? cpu_gated_mlp(cm, part(cm, WS_PART_CPU_DENSE), T, cm->dense_inter)
                                : 0;
}

double ws_cost_cpu_prefill_attn(const ws_cost_model *cm, double q, double ctx)
{
    if (q <= 0)
        return 0;
    return ws_hw_roof_time(&cm->dep.hw.cpu_attn, ws_cost_causal_pairs(q, ctx) * cm->f_tok,
                             (q + ctx) * cm->b_tok);
}

double ws_cost_router(const ws_cost_model *cm, int layer, double T)
{
    if (!ws_cost_layer(cm, layer)->router_on_cpu)
        return gpu_gemm(cm, T, cm->hidden, cm->n_experts);
    if (T <= 0)
        return 0;
    const double ab = cm->cfg.act_bytes;
    return ws_hw_roof_time(&cm->dep.hw.cpu_expert, 2.0 * T * cm->router_params,
                             (cm->router_params + T * cm->hidden + T * cm->n_experts) * ab);
}

/* A gated MLP of width I on a GPU part: gate-up GEMM, activation, down GEMM. */
static double gated_mlp(const ws_cost_model *cm, const ws_deploy_part *p, double T, double I)
{
    if (T <= 0 || !(I > 0))
        return 0;
    return part_gemm(cm, p, T, cm->hidden, 2.0 * I) + ws_cost_act(cm, T, I) +
           part_gemm(cm, p, T, I, cm->hidden);
}

double ws_cost_shared_experts(const ws_cost_model *cm, double T)
{
    return gated_mlp(cm, part(cm, WS_PART_SHARED), T, cm->shared_inter);
}
double ws_cost_dense_mlp(const ws_cost_model *cm, double T)
{
    return cm->dense_params > 0 ? gated_mlp(cm, part(cm, WS_PART_GPU), T, cm->dense_inter) : 0;
}

/* Bytes of the top-k over T tokens' router logits: fp32 logits read, k ids and weights
 * written. */
static double topk_bytes(const ws_cost_model *cm, double T)
{
    return T * (4.0 * cm->n_experts + 8.0 * cm->top_k);
}

double ws_cost_topk(const ws_cost_model *cm, int layer, double T)
{
    if (T <= 0 || cm->router_params <= 0)
        return 0;
    if (ws_cost_layer(cm, layer)->router_on_cpu)
        return ws_cost_host_copy(cm, topk_bytes(cm, T));
    return ws_cost_elem_time(&cm->dep.hw, WS_ELEM_MOE, topk_bytes(cm, T), T);
}

/* Permute: each (token, expert) pair's hidden row gathered (read and written); combine: each
 * pair's output read, one row per token written. */
static double permute_bytes(const ws_cost_model *cm, double pairs)
{
    return 2.0 * pairs * cm->hidden * cm->w_elem;
}

static double combine_bytes(const ws_cost_model *cm, double pairs, double T)
{
    return (pairs + T) * cm->hidden * cm->w_elem;
}

double ws_cost_moe_permute_gpu(const ws_cost_model *cm, int layer, double T)
{
    const double pairs = T * ws_cost_layer(cm, layer)->gpu_q;
    if (!(pairs > 0))
        return 0;
    return ws_cost_elem_time(&cm->dep.hw, WS_ELEM_MOE, permute_bytes(cm, pairs), pairs) +
           ws_cost_elem_time(&cm->dep.hw, WS_ELEM_MOE, combine_bytes(cm, pairs, T), T);
}

double ws_cost_moe_permute_cpu(const ws_cost_model *cm, int layer, double T)
{
    const double pairs = T * ws_cost_layer(cm, layer)->cpu_q;
    /* host memory: ws_cost_host_copy counts a read and a write of what it is given */
    return pairs > 0 ? ws_cost_host_copy(cm, pairs * cm->hidden * cm->cfg.act_bytes) +
                           ws_cost_host_copy(cm, (pairs + T) * cm->hidden * cm->cfg.act_bytes / 2)
                     : 0;
}

void ws_cost_weight_bytes(const ws_cost_model *cm, double *gpu, double *host)
{
    const double w = cm->w_elem, routed = cm->st.routed_bytes / w, shared = cm->st.shared_bytes / w,
                 rest = cm->st.total_params - routed - shared;
    const double wb_gpu = part(cm, WS_PART_GPU)->wb, wb_shared = part(cm, WS_PART_SHARED)->wb;
    double cpu_n = 0; /* routed experts (expert x layer) on the CPU */
    const int n_moe = cm->layers - cm->n_dense_layers;
    for (int l = cm->n_dense_layers; cm->n_experts > 0 && l < cm->layers; l++)
        cpu_n += cm->n_experts - ws_cost_layer(cm, l)->gpu_experts;
    const double cpu_share = cm->n_experts > 0 && n_moe > 0 ? cpu_n / ((double)n_moe * cm->n_experts)
                                                           : 0;
    /* a copy per socket used */
    *host = routed * cpu_share * part(cm, WS_PART_CPU_EXP)->wb * cm->dep.cpu_replicas;
    *gpu = rest * wb_gpu + shared * wb_shared + routed * (1 - cpu_share) * part(cm, WS_PART_GPU_EXP)->wb;
    /* Layers on the CPU hold their projections, router, shared experts or dense MLP there. */
    for (int l = 0; l < cm->dep.cpu_layers; l++) {
        const int moe = ws_cost_layer(cm, l)->moe;
        const double own = (cm->qkv_params + cm->o_params + (moe ? cm->router_params : 0) +
                            (moe ? 0 : cm->dense_params)) * wb_gpu +
                           (moe ? cm->shared_params * wb_shared : 0);
        *host += own;
        *gpu -= own;
    }
    if (*gpu < 0)
        *gpu = 0;
}

/* ---- routed experts --------------------------------------------------------------------- */

double ws_cost_distinct_experts(const ws_cost_model *cm, double T)
{
    return ws_deploy_distinct(&cm->dep, 0, cm->n_experts, T);
}

double ws_cost_distinct_cpu_experts(const ws_cost_model *cm, int layer, double T)
{
    const ws_deploy_layer *y = ws_cost_layer(cm, layer);
    return y->cpu_q > 0 ? ws_deploy_distinct(&cm->dep, y->gpu_experts, cm->n_experts, T) : 0;
}

double ws_cost_distinct_gpu_experts(const ws_cost_model *cm, int layer, double T)
{
    const ws_deploy_layer *y = ws_cost_layer(cm, layer);
    return ws_deploy_distinct(&cm->dep, 0, y->gpu_experts, T);
}

/* D experts hit by `pairs` (token, expert) assignments in `calls` kernel calls:
 * calls c0 + max(F/P, B/W), the piece of a piecewise roofline chosen by F/B (the tokens per
 * expert). */
static double experts_time(const ws_cost_model *cm, const ws_deploy_part *p, double D, double pairs,
                           double abytes, double calls)
{
    if (D <= 0 || pairs <= 0)
        return 0;
    const double H = cm->hidden, I = cm->moe_inter;
    const double flops = pairs * (6.0 * H * I + 4.0 * I);
    const double bytes = D * cm->expert_params * p->wb + pairs * (2.0 * H + 4.0 * I) * abytes;
    return ws_hw_roof_time(&p->roof, flops, bytes) +
           (calls - 1.0) * ws_hw_roof_c0(&p->roof, flops, bytes);
}

/* The CPU's routed experts of a layer for T tokens, their bandwidth scaled by w_share: one
 * FFN call per expert hit (the runtime's, and the calibrator's c0). */
static double cpu_experts(const ws_cost_model *cm, int layer, double T, double w_share)
{
    const ws_deploy_layer *y = ws_cost_layer(cm, layer);
    if (!(y->cpu_q > 0))
        return 0;
    const double D = y->on_cpu ? ws_cost_distinct_experts(cm, T)
                               : ws_deploy_distinct(&cm->dep, y->gpu_experts, cm->n_experts, T);
    ws_deploy_part p = *part(cm, WS_PART_CPU_EXP);
    p.roof.W.v *= w_share;
    return experts_time(cm, &p, D, T * y->cpu_q, cm->cfg.act_bytes, D);
}

double ws_cost_cpu_experts(const ws_cost_model *cm, int layer, double T)
{
    return cpu_experts(cm, layer, T, 1.0);
}

double ws_cost_cpu_experts_copying(const ws_cost_model *cm, int layer, double T)
{
    return cpu_experts(cm, layer, T, cm->cfg.no_copies ? 1.0 : cm->dep.hw.cpu_copy_contention.v);
}

double ws_cost_gpu_experts(const ws_cost_model *cm, int layer, double T)
{
    const ws_deploy_layer *y = ws_cost_layer(cm, layer);
    const double pairs = T * y->gpu_q;
    /* a GPU runs its experts as grouped GEMMs (vLLM's and SGLang's fused_moe, llama.cpp's
     * mul_mat_id): one kernel for every expert's gate/up product and one for the down
     * product, whatever the count hit; activations at the model's dtype */
    const double t = experts_time(cm, part(cm, WS_PART_GPU_EXP),
                                  ws_deploy_distinct(&cm->dep, 0, y->gpu_experts, T), pairs,
                                  cm->w_elem, 2.0);
    /* the activation between the experts' two GEMMs, one kernel over every pair */
    return t > 0 ? t + ws_cost_act(cm, pairs, cm->moe_inter) : 0;
}

/* ---- prefill: CPU-resident weights streamed to the GPU -------------------------------- */

double ws_cost_expert_stream_bytes(const ws_cost_model *cm, int layer, double T)
{
    return ws_cost_distinct_cpu_experts(cm, layer, T) * cm->expert_params *
           part(cm, WS_PART_CPU_EXP)->wb;
}

double ws_cost_expert_stream(const ws_cost_model *cm, int layer, double T)
{
    return ws_cost_weights_h2d(cm, ws_cost_expert_stream_bytes(cm, layer, T));
}

/* The GPU's grouped GEMMs over D streamed experts and their (token, expert) pairs, with their
 * activation, permute and combine. */
static double streamed_experts(const ws_cost_model *cm, double D, double pairs, double T)
{
    const double t = experts_time(cm, part(cm, WS_PART_STREAM_EXP), D, pairs, cm->w_elem, 2.0);
    if (!(t > 0))
        return 0;
    return t + ws_cost_act(cm, pairs, cm->moe_inter) +
           ws_cost_elem_time(&cm->dep.hw, WS_ELEM_MOE, permute_bytes(cm, pairs), pairs) +
           ws_cost_elem_time(&cm->dep.hw, WS_ELEM_MOE, combine_bytes(cm, pairs, T), T);
}

double ws_cost_gpu_streamed_experts(const ws_cost_model *cm, int layer, double T)
{
    return streamed_experts(cm, ws_cost_distinct_cpu_experts(cm, layer, T),
                            T * ws_cost_layer(cm, layer)->cpu_q, T);
}

double ws_cost_router_gpu(const ws_cost_model *cm, double T)
{
    if (T <= 0 || cm->router_params <= 0)
        return 0;
    return gpu_gemm(cm, T, cm->hidden, cm->n_experts) +
           ws_cost_elem_time(&cm->dep.hw, WS_ELEM_MOE, topk_bytes(cm, T), T);
}

double ws_cost_cpu_layer_stream_bytes(const ws_cost_model *cm, int layer, double q, double ctx)
{
    const ws_deploy_layer *y = ws_cost_layer(cm, layer);
    if (!y->on_cpu || !(q > 0))
        return 0;
    const double wb_gpu = part(cm, WS_PART_GPU)->wb;
    double b = (cm->qkv_params + cm->o_params) * wb_gpu;
    if (y->moe)
        b += cm->router_params * wb_gpu + cm->shared_params * part(cm, WS_PART_SHARED)->wb +
             ws_cost_distinct_experts(cm, q) * cm->expert_params * part(cm, WS_PART_CPU_EXP)->wb;
    else
        b += cm->dense_params * wb_gpu;
    return b + fmax(ctx, 0) * cm->b_tok;
}

double ws_cost_cpu_layer_stream(const ws_cost_model *cm, int layer, double q, double ctx)
{
    const double b = ws_cost_cpu_layer_stream_bytes(cm, layer, q, ctx);
    if (!(b > 0))
        return 0;
    const double kv = fmax(ctx, 0) * cm->b_tok;
    return ws_cost_weights_h2d(cm, b - kv) + kv / cm->dep.hw.h2d.W.v;
}

double ws_cost_cpu_layer_streamed_moe(const ws_cost_model *cm, int layer, double q)
{
    const ws_deploy_layer *y = ws_cost_layer(cm, layer);
    if (!y->on_cpu || !(q > 0))
        return 0;
    if (!y->moe)
        return ws_cost_dense_mlp(cm, q);
    return ws_cost_router_gpu(cm, q) + ws_cost_shared_experts(cm, q) +
           streamed_experts(cm, ws_cost_distinct_experts(cm, q), q * y->cpu_q, q);
}
