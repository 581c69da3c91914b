/* cost: the one cost model (hardware profile -> operation times) that the simulator and the
 * live runtime share. Every operation on a device costs the roofline
 *     t = c0 + max(F / P, B / W)          F flop, B bytes, P flop/s, W B/s, c0 s
 * with (c0, P, W) per (device, operation); c0 is the fixed cost of one kernel (launch,
 * first wave, tail), so every GPU kernel pays it. ws_cost_hw_load reads them ONCE from a GPU
 * and a host profile (store/profile.h) into plain structs, each value with its source: the
 * calibrated key where the profile has it (cpu.attn.<kind>.<dtype>.*, cpu.expert_gemm.bf16.*
 * (else .fp32.*), cpu.membw_read.bandwidth, gpu.attn.*, gpu.prefill_attn.*, gpu.gemm.<dtype>.*,
 * gpu.{rmsnorm,rope,act,add,moe_route}.<dtype>.*, link.h2d.*, link.d2h.*,
 * link.h2d_gemm_contention_factor.factor; a GPU key of the other 16-bit type stands in, said
 * so: fp16 and bf16 run at one rate), else the datasheet: rates x efficiency (fp32_flops x
 * flops_eff, dram_bw x dram_eff, <dtype>_flops x tensor_eff (prefill attention:
 * x prefill_attn_eff), hbm_bw x hbm_eff (elementwise: x <op>_eff), h2d_bw, d2h_bw,
 * h2d_contention; such products are labelled modeled), the fixed costs attn_c0,
 * prefill_attn_c0, gemm_c0, elem_c0, copy_c0 and the per-step overhead step_overhead (a
 * profile without them: 0, said so), and the host's kv_reformat_bw (the single-state cache's
 * reformat rate, migrate's cost). After that every function here is pure arithmetic on
 * structs (no I/O, no allocation past ws_cost_model_init), cheap enough for the simulator's
 * inner loop.
 *
 * Attention split (DESIGN section 3), per layer, n tokens in the CPU region, m streamed:
 *     t_cpu(n) = C_cpu + A n,   A = max(f_tok / P_cpu, b_tok / W_cpu)
 *     t_gpu(m) = C_gpu + B m,   B = max(b_tok / W_h2d_eff, f_tok / P_gpu, b_tok / W_hbm)
 * b_tok: KV bytes of one token of one layer; f_tok: attention flops per attended token per
 * query (model.h). W_h2d_eff = W_h2d x contention, the H2D rate while the CPU computes
 * (experts, attention): the factor is profile data, never a constant here.
 *     C_cpu = c0(cpu attn)
 *     C_gpu = c0(gpu attn) + c0(h2d) + D t_res - prefetch
 * with D resident (D-window) tokens attended in HBM at t_res = max(f_tok/P_gpu, b_tok/W_hbm)
 * each, and prefetch = min(pingpong_bytes, t_moe_prev x W_h2d_eff) / W_h2d_eff seconds: the
 * XFER bytes of this layer that arrived during the previous layer's MoE phase (0 for the
 * first layer of a step, where t_moe_prev = 0).
 *
 * Prefill attention has its own efficiency: FlashAttention's rate grows with the keys each
 * query attends, k = pairs / q, as  t = c0 + max(F / (P k / (k + k_half)), B / W_attn)  over
 * the causal pairs (P its peak rate, k_half the keys at half of it). The other per-layer
 * operations are memory-bound kernels, t = c0 + B / W: two RMSNorms, RoPE, the gated
 * activation, two residual adds, the KV append and the merge of the halves, and MoE routing
 * (top-k, permute, combine) on the device that runs the experts.
 *
 * Routed experts: T tokens each choosing k of E experts. Token-level pick probabilities q_i
 * (sum k): uniform q_i = k/E; skewed q_i proportional to (i+1)^-s (Zipf exponent s, capped at
 * 1 with the excess spread over the rest). Expected distinct experts hit by T tokens:
 *     D(T) = sum_i 1 - (1 - q_i)^T          (uniform: E (1 - (1 - k/E)^T), exact)
 * The gpu_experts most popular experts of each MoE layer live on the GPU, the rest on the CPU.
 * The experts' time is n c0 + max(F / P, B / W) over the experts hit: F = 2 x 3 H I flop
 * per (token, expert) pair, B = 3 H I weight bytes per distinct expert plus activations;
 * n = D calls on the CPU (one FFN per expert, as the runtime runs them), 2 on a GPU (grouped
 * GEMMs, as fused MoE kernels run them). Each part (attention and dense MLPs, shared experts,
 * GPU and CPU routed experts) may have its own weight format (wformat.h): its bytes per
 * weight in B, its compute choosing P; n_cpu_moe places the experts by layer. */
#ifndef WS_COST_H
#define WS_COST_H

#include "model.h"
#include "profile.h"
#include "wformat.h"
#include "ws_dtype.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One rate or constant with where it came from. */
typedef struct ws_cost_val {
    double v;              /* SI units: s, flop/s, B/s, B or 1 */
    ws_profile_source src; /* datasheet, measured, fitted or modeled */
    char from[192];        /* the profile key(s) it was read from, or how it was derived */
} ws_cost_val;

/* A roofline: t = c0 + max(F / P, B / W); P or W of 0 drops that side. */
typedef struct ws_cost_roof {
    ws_cost_val c0, P, W;
    int serial; /* 1: c0 + F/P + B/W (the profile's <prefix>.serial), a kernel that streams and
                 * computes in turn; 0: the roofline's max */
} ws_cost_roof;

/* Prefill attention: t = c0 + F / (P k / (k + half)), k the keys attended per query. */
typedef struct ws_cost_curve {
    ws_cost_val c0, P, half; /* s, flop/s, keys */
} ws_cost_curve;

/* The memory-bound per-layer operations on the GPU (calibrated key gpu.<name>.<dtype>). */
typedef enum ws_cost_elem {
    WS_ELEM_NORM = 0, /* RMSNorm: "rmsnorm" */
    WS_ELEM_ROPE,     /* rotary embedding of q and k: "rope" */
    WS_ELEM_ACT,      /* gated activation, act(gate) x up: "act" */
    WS_ELEM_ADD,      /* residual add (also the KV append and the merge): "add" */
    WS_ELEM_MOE,      /* MoE top-k, permute and combine: "moe_route" */
    WS_ELEM_KINDS
} ws_cost_elem;

/* "rmsnorm", "rope", "act", "add", "moe_route". */
const char *ws_cost_elem_name(int kind);

/* The hardware as the cost model sees it. */
typedef struct ws_cost_hw {
    char gpu[160], host[160];   /* profile names */
    ws_cost_roof cpu_attn;      /* CPU decode attention for the model's kind and KV dtype */
    ws_cost_val cpu_attn_after_moe; /* t(attention right after a MoE phase) / t(alone), the
                                     * calibrator's cpu.attn_after_moe_factor; 1 without one */
    ws_cost_roof cpu_expert;    /* one routed-expert FFN call on all CPU cores */
    ws_cost_val cpu_mem_bw;     /* B/s, DRAM read on all cores (host copies) */
    ws_cost_val kv_reformat;    /* B/s, re-laying a single-state KV cache (host kv_reformat_bw) */
    ws_cost_roof gpu_attn;      /* GPU decode attention over HBM-resident pages */
    ws_cost_curve gpu_prefill;  /* GPU prefill attention (FlashAttention's own curve) */
    ws_cost_roof gpu_gemm;      /* GPU GEMM at the weight dtype (projections, experts, MLPs) */
    ws_cost_roof gpu_gemm_wc[WS_WC_COUNT]; /* gpu_gemm with the peak of each weight format's
                                            * compute: bf16/fp16 the tensor rate, fp8 fp8_flops,
                                            * int8 int8_flops, fp32 fp32_flops (each x
                                            * tensor_eff; a key the GPU lacks: the fp16 rate) */
    ws_cost_roof cpu_expert_wc[WS_WC_COUNT]; /* cpu_expert per compute: the calibrated
                                              * cpu.expert_gemm.<bf16|int8|fp32>.* fit, else
                                              * cpu_peak.<family> x flops_eff for the family the
                                              * host has (int8: amx_int8, avx512_vnni; bf16:
                                              * amx_bf16, avx512_bf16), else fp32_flops x
                                              * flops_eff */
    ws_cost_roof gpu_elem[WS_ELEM_KINDS];    /* memory-bound kernels: c0 + B / W, and P the bytes/s
                                              * of one row where calibrated (0: none) */
    ws_cost_val step;           /* s per forward step: scheduling, launches, synchronisation */
    ws_cost_roof h2d, d2h;      /* pinned copies: c0 + bytes / W (P unused) */
    ws_cost_val h2d_contention; /* W_h2d(CPU computing) / W_h2d, in (0, 1] */
    ws_cost_val gpu_mem;        /* B of device memory */
    ws_cost_val host_mem;       /* B of host DRAM (host mem_bytes); 0: not in the profile */
    ws_cost_val sockets;        /* CPU sockets (host sockets; 1 when not given) */
    ws_cost_val cores;          /* CPU cores over all sockets (host cores; 1 when not given) */
    ws_cost_val core_bw;        /* B/s one core reads from DRAM alone: the calibrated
                                 * cpu.membw_read_1t.bandwidth, else the host's core_bw; 0:
                                 * not known (fewer threads then keep the sockets' bandwidth) */
} ws_cost_hw;

/* Reads the rates for attention kind `kind` with `kv` KV and `wt` weights. Missing keys with
 * no fallback: WS_ENOTFOUND naming the profile and key; a rate <= 0 where one is needed
 * (a V100's bf16_flops): the fp16 rate, else WS_EINVAL. */
int ws_cost_hw_load(const ws_profile *gpu, const ws_profile *host, ws_attn_kind kind, ws_dtype kv,
                    ws_dtype wt, ws_cost_hw *hw, ws_err *err);
/* The GPU's half of it alone (the GPU fields and name; the rest as hw held): what the GPU's
 * kernels cost, for checks against a GPU's operator measurements (validate/oppoints.h). */
int ws_cost_hw_load_gpu(const ws_profile *gpu, ws_attn_kind kind, ws_dtype kv, ws_dtype wt,
                        ws_cost_hw *hw, ws_err *err);

/* The roofline time of one operation (s). */
static inline double ws_cost_roof_time(const ws_cost_roof *r, double flops, double bytes)
{
    double tf = r->P.v > 0 ? flops / r->P.v : 0.0, tb = r->W.v > 0 ? bytes / r->W.v : 0.0;
    return r->c0.v + (r->serial ? tf + tb : tf > tb ? tf : tb);
}

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
double ws_cost_gemm_time(const ws_cost_hw *hw, double M, double K, double N, double elem);
/* Decode attention reading kv_bytes of KV (all sequences) with `flops` of work. */
double ws_cost_decode_attn_time(const ws_cost_hw *hw, double kv_bytes, double flops);
/* Prefill attention of q tokens after ctx (one sequence): f_tok flop per (query, key) pair,
 * b_tok KV bytes per token (read once per 128-query block, the memory side). */
double ws_cost_prefill_attn_time(const ws_cost_hw *hw, double q, double ctx, double f_tok,
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
double ws_cost_elem_time(const ws_cost_hw *hw, int kind, double bytes, double rows);

/* Choices of a run that the profile does not hold. */
typedef struct ws_cost_cfg {
    ws_dtype kv_dtype;       /* KV element type (default bf16) */
    double pingpong_bytes;   /* B, one ping-pong half: the prefetch cap (default 32 MiB) */
    double routing_skew;     /* Zipf exponent of expert popularity; 0 = uniform (default) */
    int gpu_experts;         /* routed experts per MoE layer resident on the GPU (default 0) */
    double cpu_expert_bytes; /* B per CPU expert weight element; 0 = the model's weight dtype */
    int cpu_sockets;         /* sockets whose cores and DRAM serve the CPU's work, each holding
                              * its own copy of the CPU experts (KTransformers' USE_NUMA=1);
                              * 0: every socket as one pooled memory, one copy */
    int one_node_memory;     /* 1 (cpu_sockets 0, more than one socket): the CPU's weights and
                              * KV sit in one socket's DRAM, read by every socket's cores, so
                              * at that socket's bandwidth (llama.cpp without --numa: the
                              * mmap'd file's page cache lands on the node that read it) */
    double act_bytes;        /* B per activation element in the expert GEMMs (default 4) */
    /* Weight formats per part (NULL: the model's dtype, its bytes and its rates): attention
     * and the dense MLPs on the GPU, the shared experts, the routed experts on the GPU and on
     * the CPU (w_cpu_experts overrides cpu_expert_bytes). A format's bytes per weight set its
     * GEMMs' weight bytes and the memory the weights take; its compute picks the peak
     * (ws_cost_hw.gpu_gemm_wc, cpu_expert_wc). */
    const ws_wformat *w_gpu, *w_shared, *w_gpu_experts, *w_cpu_experts;
    /* A block-quantized KV cache (q8_0, q4_0: llama.cpp --cache-type-k/v, KTransformers
     * --cache_q4), NULL for none: its bytes per element set the KV's bytes (memory, copies,
     * the attention's memory side); the attention's rates stay those of kv_dtype (the
     * dequantization on load is not costed). */
    const ws_wformat *w_kv;
    int n_cpu_moe; /* > 0: only the first n_cpu_moe MoE layers keep routed experts on the CPU
                    * (gpu_experts of them on the GPU), the rest hold all on the GPU (llama.cpp
                    * --n-cpu-moe); 0: every MoE layer holds gpu_experts */
    int n_gpu_layers; /* > 0: only the last n_gpu_layers layers run on the GPU, the others
                       * wholly on the CPU (llama.cpp -ngl N): their weights and KV in host
                       * DRAM, their projections, attention and experts on the CPU's cores;
                       * 0 (or >= the model's layers): every layer on the GPU */
    int cpu_threads; /* > 0: the CPU's work runs on this many threads (KTransformers
                      * --cpu_infer, llama.cpp -t), at most one per core of the sockets used:
                      * their share of those cores' flop/s, and of the DRAM bandwidth up to
                      * threads x core_bw; 0: every core */
} ws_cost_cfg;

void ws_cost_cfg_default(ws_cost_cfg *c);

/* A model on a machine: the per-token and per-operation constants, precomputed. It owns two
 * arrays: share it by pointer (read-only, any number of threads), do not copy it. */
typedef struct ws_cost_model {
    ws_cost_hw hw;
    ws_cost_cfg cfg;
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
    double cpu_replicas;         /* copies of the CPU experts in host DRAM (cpu_sockets or 1) */
    int cpu_layers;              /* the first cpu_layers layers run wholly on the CPU */
    double *q;                   /* E pick probabilities, most popular first (owned) */
    double *log1m_q;             /* log(1 - q_i), -inf where q_i = 1 (owned) */
    double cpu_q_sum, gpu_q_sum; /* sum of q over CPU / GPU experts (a CPU-MoE layer) */
    double all_q_sum;            /* sum of q over all experts (a layer with all on the GPU) */
    double wb_gpu, wb_shared, wb_gpu_exp, wb_cpu_exp; /* B per weight of each part */
    ws_cost_roof roof_gpu, roof_shared, roof_gpu_exp, roof_cpu_exp; /* their GEMMs' rooflines */
    ws_cost_roof roof_stream_exp; /* the CPU experts' format on the GPU (streamed prefill) */
    ws_cost_roof roof_cpu_dense, roof_cpu_shared; /* a CPU layer's projections and dense MLP,
                                                   * its shared experts: the CPU's roofline
                                                   * for those parts' formats */
} ws_cost_model;

/* Builds the model's constants on hw (copied). WS_EINVAL for a model without attention or
 * a cfg out of range; WS_ENOMEM. Free with ws_cost_model_free. */
int ws_cost_model_init(const ws_cost_hw *hw, const ws_model *m, const ws_cost_cfg *cfg,
                       ws_cost_model *cm, ws_err *err);
void ws_cost_model_free(ws_cost_model *cm);

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

/* ---- single operations, one layer, as functions of tokens ---------------------------- */

double ws_cost_cpu_attn(const ws_cost_model *cm, double tokens); /* over CPU pages */
double ws_cost_gpu_attn(const ws_cost_model *cm, double tokens); /* over HBM pages */
/* Causal prefill attention of q new tokens after ctx cached ones (one sequence). */
double ws_cost_gpu_prefill_attn(const ws_cost_model *cm, double q, double ctx);
/* The memory-bound kernels of T tokens through one layer: the RMSNorm of the hidden
 * state, RoPE of the new q and k, a residual add, the gated activation of width I. */
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
/* The hand-off of T tokens' hidden states between the devices around a MoE layer's CPU
 * experts (T x hidden at the model's dtype): to_host 1, the copy to the host before the
 * router and experts run there; 0, their combined output's copy back. Each is one
 * cudaMemcpyAsync on the layer's critical path: copy_c0 (the launch and the wait) plus the
 * bytes at the link's rate. */
double ws_cost_handoff(const ws_cost_model *cm, double T, int to_host);
/* D2H of one D-window flush: window tokens of each of n_seqs sequences, one layer. */
double ws_cost_flush(const ws_cost_model *cm, int n_seqs, int window_tokens);
/* Host-side move of bytes (read + write at the DRAM rate). */
double ws_cost_host_copy(const ws_cost_model *cm, double bytes);
/* Reformatting `bytes` of a single-state KV cache into the other state (pinned GPU pages <->
 * pageable per-head runs) at kv_reformat: what migrate pays per byte it moves. */
double ws_cost_reformat(const ws_cost_model *cm, double bytes);
/* GPU GEMMs for T tokens: QKV projection, output projection, router, shared experts (0
 * when none), the dense MLP of a dense layer. */
double ws_cost_qkv_proj(const ws_cost_model *cm, double T);
double ws_cost_o_proj(const ws_cost_model *cm, double T);
double ws_cost_router(const ws_cost_model *cm, double T);
/* Where the router runs: on the CPU when routed experts run there (it picks them beside
 * them, as the live runtime does: an fp32 GEMM at act_bytes on the CPU's expert roofline),
 * else on the GPU. ws_cost_router costs it on that device. */
int ws_cost_router_on_cpu(const ws_cost_model *cm);
/* Shared experts and the dense MLP: gate-up GEMM, activation, down GEMM. */
double ws_cost_shared_experts(const ws_cost_model *cm, double T);
double ws_cost_dense_mlp(const ws_cost_model *cm, double T);
/* MoE routing: the top-k of T tokens' router logits, where the router runs; permute (tokens
 * gathered per expert) and combine (weighted sum back per token) of the (token, expert)
 * pairs of the experts on the GPU / on the CPU (host memory), where those experts run. */
double ws_cost_topk(const ws_cost_model *cm, double T);
double ws_cost_moe_permute_gpu(const ws_cost_model *cm, double T);
double ws_cost_moe_permute_cpu(const ws_cost_model *cm, double T);
/* 1 when `layer` has routed experts. */
int ws_cost_layer_is_moe(const ws_cost_model *cm, int layer);
/* Routed experts of `layer` resident on the GPU: 0 for a dense layer, n_experts for a MoE
 * layer past the first n_cpu_moe (when set), else gpu_experts. */
int ws_cost_layer_gpu_experts(const ws_cost_model *cm, int layer);
/* The layer's kind as the schedule sees it: 0 dense, 1 MoE with gpu_experts on the GPU,
 * 2 MoE with every expert on the GPU (past the first n_cpu_moe), 3 a dense layer and 4 a
 * MoE layer wholly on the CPU (n_gpu_layers). Layers of one kind build the same ops. */
#define WS_COST_LAYER_KINDS 5
int ws_cost_layer_kind(const ws_cost_model *cm, int layer);
/* 1 when `layer` runs wholly on the CPU (one of the first cpu_layers). */
int ws_cost_layer_on_cpu(const ws_cost_model *cm, int layer);
/* A layer on the CPU: its QKV and output projections, shared experts and dense MLP as CPU
 * GEMMs at those parts' formats (the CPU's roofline for each format's compute), and its
 * attention over every KV token of the layer (host memory): decode over `tokens`, prefill
 * of q tokens after ctx (causal pairs at the CPU attention's rates). Its router and routed
 * experts are the CPU's (ws_cost_router_at, ws_cost_cpu_experts_at: every expert). */
double ws_cost_cpu_qkv_proj(const ws_cost_model *cm, double T);
double ws_cost_cpu_o_proj(const ws_cost_model *cm, double T);
double ws_cost_cpu_shared_experts(const ws_cost_model *cm, double T);
double ws_cost_cpu_dense_mlp(const ws_cost_model *cm, double T);
double ws_cost_cpu_prefill_attn(const ws_cost_model *cm, double q, double ctx);
/* The routing and experts' functions above and below, for `layer` (the ones without a
 * layer are those of the first MoE layer). */
int ws_cost_router_on_cpu_at(const ws_cost_model *cm, int layer);
double ws_cost_router_at(const ws_cost_model *cm, int layer, double T);
double ws_cost_topk_at(const ws_cost_model *cm, int layer, double T);
double ws_cost_moe_permute_gpu_at(const ws_cost_model *cm, int layer, double T);
double ws_cost_moe_permute_cpu_at(const ws_cost_model *cm, int layer, double T);
double ws_cost_cpu_experts_at(const ws_cost_model *cm, int layer, double T);
double ws_cost_gpu_experts_at(const ws_cost_model *cm, int layer, double T);
/* Bytes of the model's weights on the GPU and in host DRAM (the CPU-resident routed
 * experts), each part at its format, layer by layer. */
void ws_cost_weight_bytes(const ws_cost_model *cm, double *gpu, double *host);

/* ---- routed experts -------------------------------------------------------------------- */

/* Expected distinct experts T tokens hit (all experts / the CPU's / the GPU's). */
double ws_cost_distinct_experts(const ws_cost_model *cm, double T);
double ws_cost_distinct_cpu_experts(const ws_cost_model *cm, double T);
double ws_cost_distinct_gpu_experts(const ws_cost_model *cm, double T);
/* The closed form for uniform routing: E (1 - (1 - k/E)^T). */
double ws_cost_distinct_uniform(int E, int k, double T);
/* Time of the routed experts of one MoE layer for T tokens: on the CPU, on the GPU. */
double ws_cost_cpu_experts(const ws_cost_model *cm, double T);
double ws_cost_gpu_experts(const ws_cost_model *cm, double T);

/* ---- prefill strategies: where a chunk's routed experts run ---------------------------- */

/* A prefill chunk's CPU-resident routed experts run on the CPU (as a decode step's do), or on
 * the GPU with their weights streamed H2D (llama.cpp offloads a matrix product whose weights
 * sit in host memory once the batch reaches GGML_OP_OFFLOAD_MIN_BATCH, 32 tokens; KTransformers
 * prefills on the GPU). The stream carries the distinct CPU experts the chunk hits, not the
 * layer's whole expert tensor: ggml's scheduler copies only the experts a MUL_MAT_ID uses, and
 * a chunk of a few hundred tokens hits nearly every expert anyway. It runs on an idle CPU, so
 * at the uncontended H2D rate. A layer's stream may start once the previous layer's is in and
 * the buffer of layer l-2 is free (two layers' experts in flight), so it overlaps the GPU's
 * compute of the layer before (schedule.h: WS_OP_H2D_EXP feeding WS_OP_EXP_STREAM). */
typedef enum ws_prefill_mode {
    WS_PREFILL_AUTO = 0, /* per chunk, the cheaper by ws_cost_prefill_layer_est */
    WS_PREFILL_CPU = 1,  /* routed experts on the CPU */
    WS_PREFILL_GPU = 2,  /* CPU experts' weights streamed to the GPU */
} ws_prefill_mode;
/* "auto", "cpu", "gpu"; ws_prefill_mode_parse: the mode of a name, -1 for none. */
const char *ws_prefill_mode_name(int mode);
int ws_prefill_mode_parse(const char *name);
/* Bytes of CPU-resident expert weights one MoE layer streams for a chunk of T tokens. */
double ws_cost_expert_stream_bytes(const ws_cost_model *cm, double T);
/* Their H2D copy (uncontended), s. */
double ws_cost_expert_stream(const ws_cost_model *cm, double T);
/* The GPU's grouped GEMMs over those streamed experts for T tokens (their (token, expert)
 * pairs, the weights read from HBM once more), with their activation, permute and combine. */
double ws_cost_gpu_streamed_experts(const ws_cost_model *cm, double T);
/* The router and top-k on the GPU (where they run when the experts do). */
double ws_cost_router_gpu(const ws_cost_model *cm, double T);
/* The steady-state time of one MoE layer of a prefill chunk of q tokens after ctx under a
 * strategy (gpu = 1: streamed), the estimate the choice compares. With G the layer's GPU
 * work before the MoE phase (projections, attention) and S the GPU-resident and shared
 * experts (which run beside the CPU's):
 *     CPU:  G + router_cpu + max(CPU experts + permute, S)
 *     GPU:  max(G + router_gpu + S + streamed experts, stream)
 * (the next layer's stream hides under this layer's compute, or the compute under it). */
double ws_cost_prefill_layer_est(const ws_cost_model *cm, double q, double ctx, int gpu);
/* A layer wholly on the CPU (n_gpu_layers) under the GPU strategy: llama.cpp offloads every
 * op of a batch of >= 32 tokens whose weights sit in host memory, so the layer's weights (its
 * projections and router at the GPU part's format, its shared experts, the routed experts
 * the chunk hits at the CPU experts' format, or its dense MLP) and its KV before the chunk
 * (for the attention) stream H2D, and the layer runs as a GPU layer (its new KV's copy back
 * to host memory, q x one layer's KV bytes, is left out). The bytes, the GPU's MoE phase (router,
 * shared and streamed experts) or dense MLP for q tokens, and the layer's steady-state estimate
 * under a strategy: CPU:  every op on the CPU, one after another GPU:  max(GPU front + MoE phase,
 * stream). */
double ws_cost_cpu_layer_stream_bytes(const ws_cost_model *cm, int layer, double q, double ctx);
double ws_cost_cpu_layer_streamed_moe(const ws_cost_model *cm, int layer, double q);
double ws_cost_cpu_layer_est(const ws_cost_model *cm, int layer, double q, double ctx, int gpu);
/* The strategy of a chunk: 1 to stream the CPU experts' (and the CPU layers') weights to the
 * GPU, 0 to run them on the CPU. Forced modes are honoured; auto compares the estimates summed
 * over the layers that would stream (ties: CPU). A model with nothing in host memory to
 * stream: 0. */
int ws_cost_prefill_gpu(const ws_cost_model *cm, int mode, double q, double ctx);

#ifdef __cplusplus
}
#endif
#endif
