/* deploy: the deployment room of the cost model -- where each layer's parts run and in what
 * format, built ONCE from a model, the hardware rates (hw.h) and a run's choices. It holds:
 *   - the rates as deployed: the CPU's flop/s and bandwidth scaled for the sockets, threads
 *     and one-node memory a run uses, and attention's slow-down after a MoE phase, each
 *     applied in one place (ws_deploy_rates), as SimGrid applies its model factors;
 *   - the parts' formats: bytes per weight and the roofline of each part's GEMMs;
 *   - expert routing: each expert's pick probability (uniform or Zipf-skewed);
 *   - a per-layer table: the layer's kind, where its attention and dense parts, its router
 *     and its routed experts run, its GPU experts and its routing shares.
 * Operation costs (cost.h) read this table for the layer they are given; nothing else
 * decides placement. docs/design.md ("Deployment") gives the rules each field follows. */
#ifndef WS_RUNTIME_DEPLOY_H
#define WS_RUNTIME_DEPLOY_H

#include "hw.h"
#include "model.h"
#include "wformat.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_DEPLOY_NO_CPU_MOE (-1) /* n_cpu_moe: no MoE layer keeps routed experts on the CPU */

/* How a run deploys the model on the machine: choices the profiles do not hold. */
typedef struct ws_deploy_cfg {
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
    int no_copies;           /* 1: no host-memory copy runs beside the CPU's work (the live
                              * runtime with a modeled GPU): the copy contention factors
                              * (ws_hw.cpu_attn_copy, cpu_copy_contention) are left out */
    /* Weight formats per part (NULL: the model's dtype, its bytes and its rates): attention
     * and the dense MLPs on the GPU, the shared experts, the routed experts on the GPU and on
     * the CPU (w_cpu_experts overrides cpu_expert_bytes). A format's bytes per weight set its
     * GEMMs' weight bytes and the memory the weights take; its compute picks the peak
     * (ws_hw.gpu_gemm_wc, cpu_expert_wc). */
    const ws_wformat *w_gpu, *w_shared, *w_gpu_experts, *w_cpu_experts;
    /* A block-quantized KV cache (q8_0, q4_0: llama.cpp --cache-type-k/v, KTransformers
     * --cache_q4), NULL for none: its bytes per element set the KV's bytes (memory, copies,
     * the attention's memory side); the attention's rates stay those of kv_dtype (the
     * dequantization on load is not costed). */
    const ws_wformat *w_kv;
    int n_cpu_moe; /* > 0: only the first n_cpu_moe MoE layers keep routed experts on the CPU
                    * (gpu_experts of them on the GPU), the rest hold all on the GPU (llama.cpp
                    * --n-cpu-moe); 0: every MoE layer holds gpu_experts; WS_DEPLOY_NO_CPU_MOE:
                    * none keeps any on the CPU, each holds all on the GPU (--n-cpu-moe 0) */
    int n_gpu_layers; /* > 0: only the last n_gpu_layers layers run on the GPU, the others
                       * wholly on the CPU (llama.cpp -ngl N): their weights and KV in host
                       * DRAM, their projections, attention and experts on the CPU's cores;
                       * 0 (or >= the model's layers): every layer on the GPU */
    double step_overhead; /* >= 0: s the serving engine leaves the GPU idle per step (its
                           * file, server.h), step_from saying where it was read; < 0 (the
                           * default): the GPU profile's step_overhead */
    char step_from[160];
    int host_weights_pageable; /* 1: the host-memory weights a prefill streams to the GPU are
                                * pageable (mmap'd: llama.cpp's default), copied at the GPU's
                                * pageable H2D rate (ws_hw.h2d_pageable); 0: pinned */
    double handoff_c0;         /* > 0: s, fixed cost of one hand-off of a layer's hidden states
                                * between the GPU and the CPU's experts, the host's
                                * synchronisation included (the engine's file); 0: a copy's c0 */
    char handoff_from[160];
    int cpu_threads; /* > 0: the CPU's work runs on this many threads (KTransformers
                      * --cpu_infer, llama.cpp -t), at most one per core of the sockets used:
                      * their share of those cores' flop/s, and of the DRAM bandwidth up to
                      * threads x core_bw; 0: every core */
} ws_deploy_cfg;

void ws_deploy_cfg_default(ws_deploy_cfg *c);

/* A layer's kind: layers of one kind build the same operations (schedule.h). */
typedef enum ws_layer_kind {
    WS_LAYER_DENSE = 0, /* dense layer on the GPU */
    WS_LAYER_MOE,       /* MoE layer, gpu_experts of its routed experts on the GPU, the rest
                         * on the CPU */
    WS_LAYER_MOE_GPU,   /* MoE layer past the first n_cpu_moe: every routed expert on the GPU */
    WS_LAYER_CPU_DENSE, /* dense layer wholly on the CPU (n_gpu_layers) */
    WS_LAYER_CPU_MOE,   /* MoE layer wholly on the CPU */
    WS_LAYER_KINDS
} ws_layer_kind;

/* The parts whose weights have a format of their own. */
typedef enum ws_part {
    WS_PART_GPU = 0,    /* attention projections, router and dense MLP on the GPU */
    WS_PART_SHARED,     /* shared experts on the GPU */
    WS_PART_GPU_EXP,    /* routed experts resident on the GPU */
    WS_PART_CPU_EXP,    /* routed experts in host memory, run on the CPU */
    WS_PART_STREAM_EXP, /* the same weights streamed to and run on the GPU (prefill) */
    WS_PART_CPU_DENSE,  /* a CPU layer's projections and dense MLP */
    WS_PART_CPU_SHARED, /* a CPU layer's shared experts */
    WS_PARTS
} ws_part;

typedef struct ws_deploy_part {
    double wb;         /* bytes per weight */
    ws_hw_roof roof; /* its GEMMs' roofline */
} ws_deploy_part;

typedef struct ws_deploy_layer {
    ws_layer_kind kind;
    int moe;           /* 1: routed experts */
    int on_cpu;        /* 1: projections, attention, shared experts, dense MLP on the CPU */
    int gpu_experts;   /* routed experts resident on the GPU */
    int router_on_cpu; /* 1: the router runs on the CPU, beside routed experts there */
    double cpu_q, gpu_q; /* routing shares: expected picks per token of its CPU / GPU experts */
} ws_deploy_layer;

typedef struct ws_deploy {
    ws_hw hw;           /* the rates as deployed (ws_deploy_init) */
    int layers, cpu_layers;  /* the first cpu_layers layers run wholly on the CPU */
    int n_experts, top_k;
    double skew;             /* Zipf exponent of the pick probabilities (0: uniform) */
    double cpu_replicas;     /* copies of the CPU experts in host DRAM (cpu_sockets or 1) */
    ws_deploy_part part[WS_PARTS];
    ws_deploy_layer *layer;  /* layers entries (owned) */
    double *q;               /* n_experts pick probabilities, most popular first (owned) */
    double *log1m_q;         /* log(1 - q_i), -inf where q_i = 1 (owned) */
} ws_deploy;

/* m deployed on hw under cfg: the rates as deployed (the CPU's scaled for cfg's sockets,
 * threads and one-node memory; CPU attention's memory side slowed by the after-MoE factor
 * for a MoE model), the parts and the placement table. WS_EINVAL for a cfg out of range,
 * WS_ENOMEM. Free with ws_deploy_free; share by pointer. */
int ws_deploy_init(const ws_hw *hw, const ws_model *m, const ws_deploy_cfg *cfg, ws_deploy *d,
                   ws_err *err);
void ws_deploy_free(ws_deploy *d);
/* cfg's sockets and threads against the host's: WS_EINVAL "--cpu-sockets N: host H has S"
 * for more sockets than it has, "--cpu-threads N: host H has C cores" (of the sockets used)
 * for more threads than those cores, where its profile gives its cores. */
int ws_deploy_check_host(const ws_hw *hw, const ws_deploy_cfg *cfg, ws_err *err);
/* The CPU pool units a run's CPU work takes of `units` (the host's cores): their share on
 * cfg->cpu_sockets of the host's sockets (at least one), at most cfg->cpu_threads; the
 * share ws_deploy_init scales the CPU's rates by. */
int ws_deploy_cpu_workers(const ws_hw *hw, const ws_deploy_cfg *cfg, int units);
/* Layer l's entry (l clamped into the model's layers). */
const ws_deploy_layer *ws_deploy_at(const ws_deploy *d, int l);
/* Expected distinct experts among the popularity ranks [lo, hi) that T tokens hit. */
double ws_deploy_distinct(const ws_deploy *d, int lo, int hi, double T);
/* The closed form for uniform routing: E (1 - (1 - k/E)^T). */
double ws_deploy_distinct_uniform(int E, int k, double T);
/* "dense", "moe", "moe_gpu", "cpu_dense", "cpu_moe". */
const char *ws_layer_kind_name(int kind);

#ifdef __cplusplus
}
#endif
#endif
