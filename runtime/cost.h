/* cost: the operations room of the cost model -- the time of every operation of a layer on
 * the device the deployment (deploy.h) puts it on, from the deployed rates (hw.h). Every
 * operation is a roofline t = c0 + max(F / P, B / W) over the work it does; an operation whose
 * cost depends on where a layer's parts run takes the layer, and reads that layer's row of the
 * placement table (its GPU experts, routing shares, router's device), never a default layer.
 * Nothing here composes a layer: the layer schedule (schedule.h) orders these operations on
 * their resources, and every estimate of a layer is that schedule played.
 *
 * Attention split (DESIGN section 3), per layer, n tokens in the CPU region, m streamed:
 *     t_cpu(n) = C_cpu + A n,   A = max(f_tok / P_cpu, b_tok / (W_cpu c_copy))
 *     t_gpu(m) = C_gpu + B m,   B = max(b_tok / W_h2d_eff, f_tok / P_gpu, b_tok / W_hbm)
 * with c_copy the CPU attention's share of W beside the copy engine's reads (the calibrated
 * cpu.attn_copy_factor; 1 where no copy runs), W_h2d_eff the H2D rate while the CPU
 * computes (the profile's contention factor),
 * C_gpu = c0(gpu attn) + c0(h2d) + D t_res - prefetch, D resident tokens at t_res each and
 * prefetch the XFER bytes that arrived during the previous layer's MoE phase (capped at one
 * ping-pong half). Routed experts: T tokens each pick k of E experts with probabilities q_i;
 * D(T) = sum_i 1 - (1 - q_i)^T distinct experts are hit; their time is n c0 + max(F/P, B/W)
 * with n = D calls on the CPU (one FFN an expert) and 2 on a GPU (grouped GEMMs). The
 * formulas of each operation are in docs/design.md ("Operation costs"). */
#ifndef WS_COST_H
#define WS_COST_H

#include "deploy.h"
#include "hw.h"
#include "model.h"
#include "ws_dtype.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- one kernel by shape: the work each operation does (the calibration importer fits
 * against the same F and B, calib/import.h) and its time on hw ------------------------- */

/* GQA/MHA attention of q_heads over kv_heads of width dim at `elem` bytes: the flop per
 * (query, key) pair and the KV bytes per token, as model.h derives them. */
static inline void ws_cost_gqa_terms(double q_heads, double kv_heads, double dim, double elem,
                                     double *f_tok, double *b_tok)
{
    *f_tok = 4.0 * q_heads * dim;
    *b_tok = 2.0 * kv_heads * dim * elem;
}
/* Causal pairs (query, key) of q new tokens after ctx cached ones. */
double ws_cost_causal_pairs(double q, double ctx);
/* An M x K by K x N GEMM at `elem` bytes per element: F = 2MKN, B = (MK + KN + MN) elem. */
void ws_cost_gemm_work(double M, double K, double N, double elem, double *flops, double *bytes);
double ws_cost_gemm_time(const ws_hw *hw, double M, double K, double N, double elem);
/* Decode attention reading kv_bytes of KV (all sequences) with `flops` of work. */
double ws_cost_decode_attn_time(const ws_hw *hw, double kv_bytes, double flops);
/* Prefill attention of q tokens after ctx (one sequence): f_tok flop per (query, key) pair,
 * b_tok KV bytes per token (read once per 128-query block, the memory side). */
double ws_cost_prefill_attn_time(const ws_hw *hw, double q, double ctx, double f_tok,
                                 double b_tok);
/* Bytes the elementwise kernels read and write, T tokens at `elem` bytes per element:
 * RMSNorm over width H (plus its weight), RoPE of `heads` heads of `dim`, the gated
 * activation of width I (reads gate and up, writes one), a residual add of width H. */
double ws_cost_norm_bytes(double T, double H, double elem);
double ws_cost_rope_bytes(double T, double heads, double dim, double elem);
double ws_cost_act_bytes(double T, double I, double elem);
double ws_cost_add_bytes(double T, double H, double elem);
/* One memory-bound kernel of `kind` moving `bytes` over `rows` rows (tokens, or (token,
 * expert) pairs): c0 + max(bytes / W, bytes / rows / P), P the rate of one row where a
 * calibration measured it (a thread block per row: a kernel with too few rows to fill the
 * GPU takes one row's latency), else c0 + bytes / W. 0 bytes: nothing runs, 0 s. */
double ws_cost_elem_time(const ws_hw *hw, int kind, double bytes, double rows);


/* A model deployed on a machine: the per-token and per-operation constants, precomputed. It
 * owns the deployment's arrays: share it by pointer (read-only, any number of threads). */
typedef struct ws_cost_model {
    ws_deploy_cfg cfg;
    ws_deploy dep;              /* rates as deployed (dep.hw), parts, placement per layer */
    ws_model_stats st;
    int layers, n_dense_layers; /* dense layers come first (first_k_dense_replace) */
    int n_experts, top_k, hidden, moe_inter, dense_inter;
    double b_tok, f_tok;         /* B and flop per token per layer (attended) */
    double A, B;                 /* s per token per layer: CPU side, GPU side (contended) */
    double t_res;                /* s per HBM-resident token on the GPU */
    double w_h2d_eff;            /* B/s, H2D under CPU load */
    double w_elem;               /* B per weight element (the model's dtype) */
    double qkv_params, o_params; /* attention projections, elements per layer */
    double qkv_out, o_in;        /* their GEMMs' N and K (the other side is hidden) */
    double router_params, shared_params, dense_params, expert_params;
    double shared_inter;         /* shared experts' width (0: none) */
    double rope_heads, rope_dim; /* heads RoPE rotates per token (q and k) and their width */
    double merge_bytes;          /* B per query the merge reads and writes */
} ws_cost_model;

/* Deploys m on hw under cfg (deploy.h) and builds the constants. WS_EINVAL for a model
 * without attention or a cfg out of range; WS_ENOMEM. Free with ws_cost_model_free. */
int ws_cost_model_init(const ws_hw *hw, const ws_model *m, const ws_deploy_cfg *cfg,
                       ws_cost_model *cm, ws_err *err);
void ws_cost_model_free(ws_cost_model *cm);
/* Layer l's row of the placement table. */
const ws_deploy_layer *ws_cost_layer(const ws_cost_model *cm, int layer);

/* ---- the attention split ------------------------------------------------------------ */

/* The linear terms of one layer-step of a batch (s/token and s). */
typedef struct ws_cost_split {
    double A, B;         /* per spilled token: CPU region, XFER region */
    double C_cpu, C_gpu; /* fixed: CPU half, GPU half (prefetch subtracted; may be < 0) */
    double prefetch_s;   /* the prefetch credit inside C_gpu */
    double xfer_s;       /* transfer part of B: b_tok / W_h2d_eff (caps the credit) */
} ws_cost_split;

/* Terms for a layer whose GPU half also attends `resident_tokens` D-window tokens (summed
 * over the batch), after a previous MoE phase of t_moe_prev seconds (0: first layer of a
 * step, or no overlap). A and B are the model's unless A_obs/B_obs > 0 (estimates). */
void ws_cost_split_terms(const ws_cost_model *cm, double resident_tokens, double t_moe_prev,
                         double A_obs, double B_obs, ws_cost_split *out);
/* CPU half, GPU half and the layer's attention time max(t_cpu, t_gpu) for n CPU and m XFER
 * tokens. An empty CPU half costs nothing. */
double ws_cost_split_cpu(const ws_cost_split *s, double n);
double ws_cost_split_gpu(const ws_cost_split *s, double m);
double ws_cost_split_time(const ws_cost_split *s, double n, double m);

/* ---- operations of one layer, as functions of tokens -------------------------------- */

double ws_cost_cpu_attn(const ws_cost_model *cm, double tokens); /* over CPU pages */
double ws_cost_gpu_attn(const ws_cost_model *cm, double tokens); /* over HBM pages */
/* Causal prefill attention of q new tokens after ctx cached ones (one sequence). */
double ws_cost_gpu_prefill_attn(const ws_cost_model *cm, double q, double ctx);
/* The memory-bound kernels of T tokens: RMSNorm of the hidden state, RoPE of the new q and
 * k, a residual add, the gated activation of width I. */
double ws_cost_norm(const ws_cost_model *cm, double T);
double ws_cost_rope(const ws_cost_model *cm, double T);
double ws_cost_add(const ws_cost_model *cm, double T);
double ws_cost_act(const ws_cost_model *cm, double T, double I);
/* The new tokens' KV written into the D-window pages, n_seqs sequences (one kernel). */
double ws_cost_append(const ws_cost_model *cm, double n_seqs);
/* The merge of the CPU and GPU halves' partial outputs for T queries (one kernel). */
double ws_cost_merge(const ws_cost_model *cm, double T);
/* The per-step overhead (scheduling, launches, synchronisation), s. */
double ws_cost_step(const ws_cost_model *cm);
/* Sparse models: the indexer scoring ctx tokens for q queries (0 for dense attention). */
double ws_cost_gpu_indexer(const ws_cost_model *cm, double q, double ctx);
/* Copies of `bytes`: H2D alone / while the CPU computes, and D2H. */
double ws_cost_h2d(const ws_cost_model *cm, double bytes, int contended);
double ws_cost_d2h(const ws_cost_model *cm, double bytes);
/* T tokens' hidden states between the devices around a layer's CPU experts: to_host 1, the
 * copy before the router and experts run there; 0, their output's copy back. Its fixed cost
 * is the engine's hand-off cost where one is deployed (the host's synchronisation around
 * the copy), else the copy's c0. */
double ws_cost_handoff(const ws_cost_model *cm, double T, int to_host);
/* Host-memory weights copied to the GPU: at the pageable H2D rate where the deployment's
 * weights are pageable, else pinned; uncontended. */
double ws_cost_weights_h2d(const ws_cost_model *cm, double bytes);
/* D2H of one D-window flush: window tokens of each of n_seqs sequences, one layer. */
double ws_cost_flush(const ws_cost_model *cm, int n_seqs, int window_tokens);
/* Host-side move of bytes (read + write at the DRAM rate). */
double ws_cost_host_copy(const ws_cost_model *cm, double bytes);
/* A single-state KV cache's reformat of `bytes` (what migrate pays per byte it moves). */
double ws_cost_reformat(const ws_cost_model *cm, double bytes);
/* GPU GEMMs for T tokens at the GPU part's format: QKV and output projections; the shared
 * experts and a dense layer's MLP (gate-up GEMM, activation, down GEMM; 0 when none). */
double ws_cost_qkv_proj(const ws_cost_model *cm, double T);
double ws_cost_o_proj(const ws_cost_model *cm, double T);
double ws_cost_shared_experts(const ws_cost_model *cm, double T);
double ws_cost_dense_mlp(const ws_cost_model *cm, double T);
/* The same on the CPU, for a layer wholly there (at the CPU's roofline for each part's
 * format), and its causal prefill attention over host memory. */
double ws_cost_cpu_qkv_proj(const ws_cost_model *cm, double T);
double ws_cost_cpu_o_proj(const ws_cost_model *cm, double T);
double ws_cost_cpu_shared_experts(const ws_cost_model *cm, double T);
double ws_cost_cpu_dense_mlp(const ws_cost_model *cm, double T);
double ws_cost_cpu_prefill_attn(const ws_cost_model *cm, double q, double ctx);
/* Layer `layer`'s router GEMM and top-k on its router's device (the CPU's: an fp32 GEMM at
 * act_bytes on the experts' roofline); the permute and combine of the (token, expert) pairs
 * of its GPU / CPU experts; its routed experts on the CPU / on the GPU. */
double ws_cost_router(const ws_cost_model *cm, int layer, double T);
double ws_cost_topk(const ws_cost_model *cm, int layer, double T);
double ws_cost_moe_permute_gpu(const ws_cost_model *cm, int layer, double T);
double ws_cost_moe_permute_cpu(const ws_cost_model *cm, int layer, double T);
double ws_cost_cpu_experts(const ws_cost_model *cm, int layer, double T);
/* The same while H2D copies read host memory beside them (the next layer's prefetch): their
 * bandwidth at the host's cpu_copy_contention share. */
double ws_cost_cpu_experts_copying(const ws_cost_model *cm, int layer, double T);
double ws_cost_gpu_experts(const ws_cost_model *cm, int layer, double T);
/* Expected distinct experts T tokens hit: of all, of the layer's CPU / GPU experts. */
double ws_cost_distinct_experts(const ws_cost_model *cm, double T);
double ws_cost_distinct_cpu_experts(const ws_cost_model *cm, int layer, double T);
double ws_cost_distinct_gpu_experts(const ws_cost_model *cm, int layer, double T);
/* Bytes of the model's weights on the GPU and in host DRAM, each part at its format. */
void ws_cost_weight_bytes(const ws_cost_model *cm, double *gpu, double *host);

/* ---- prefill chunks with host-resident weights streamed to the GPU -------------------- */

/* A MoE layer's CPU experts that a chunk of T tokens hits: their bytes, their uncontended
 * H2D copy (ws_cost_weights_h2d), and the GPU's grouped GEMMs over them (with activation, permute, combine). */
double ws_cost_expert_stream_bytes(const ws_cost_model *cm, int layer, double T);
double ws_cost_expert_stream(const ws_cost_model *cm, int layer, double T);
double ws_cost_gpu_streamed_experts(const ws_cost_model *cm, int layer, double T);
/* The router and top-k on the GPU (where they run when the experts do). */
double ws_cost_router_gpu(const ws_cost_model *cm, double T);
/* A layer wholly on the CPU run on the GPU: the bytes it streams (its weights at their
 * formats, the routed experts the chunk hits, its KV before the chunk) and its MoE phase
 * (router, shared and streamed experts) or dense MLP on the GPU for q tokens. */
double ws_cost_cpu_layer_stream_bytes(const ws_cost_model *cm, int layer, double q, double ctx);
/* Their copy: the weights as ws_cost_weights_h2d copies them, the KV pinned. */
double ws_cost_cpu_layer_stream(const ws_cost_model *cm, int layer, double q, double ctx);
double ws_cost_cpu_layer_streamed_moe(const ws_cost_model *cm, int layer, double q);

#ifdef __cplusplus
}
#endif
#endif
