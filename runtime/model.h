/* model: a Mixture-of-Experts model described by its Hugging Face config.json, and the
 * sizes every other part derives from it (KV bytes and attention flops per token, expert,
 * shared and dense weight bytes, total and active parameters).
 *
 * The loader reads the real field names of the DeepSeek-V2/V3/V3.2, Qwen2/Qwen3-MoE and
 * Mixtral families (num_key_value_heads, kv_lora_rank, num_local_experts, num_experts,
 * n_routed_experts, first_k_dense_replace, ...) so a config.json downloaded from the hub
 * loads as it is. Used by the CLI (`model show`), the cost model, the runtime and the
 * simulator.
 *
 * A config is input from anywhere, so every field is bounded (WS_MODEL_MAX_* below, each
 * some 8x-500x above the largest public configs), duplicate keys are an error, and sizes
 * that are products of fields (shared_intermediate, attended_max) are 64-bit. */
#ifndef WS_MODEL_H
#define WS_MODEL_H

#include "attn.h"
#include "published.h" /* the formats each model is published in */
#include "ws_dtype.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Upper bounds on config fields, well above every public model so that real configs load
 * while a hostile one cannot overflow or spin: layers x mlp_only_layers, the per-layer
 * loops and every int sum stay small. Largest public values in the comments. */
#define WS_MODEL_MAX_LAYERS 1024       /* 126 Llama-3.1-405B; MoE: 94 Qwen3-235B, 61 DeepSeek-V3 */
#define WS_MODEL_MAX_HIDDEN 65536      /* 16384 Llama-3.1-405B; MoE: 7168 DeepSeek-V3, Kimi K2 */
#define WS_MODEL_MAX_HEADS 4096        /* query or KV heads: 128 DeepSeek-V3, Llama-3.1-405B */
#define WS_MODEL_MAX_DIM 65536         /* head, rope, nope, v, LoRA ranks: 1536 (V3 q_lora_rank) */
#define WS_MODEL_MAX_VOCAB (1 << 22)   /* 262144 Gemma 3; 163840 Kimi K2, 151936 Qwen3 */
#define WS_MODEL_MAX_FFN (1 << 20)     /* MLP widths: 53248 Llama-3.1-405B, 20480 Qwen2-57B shared */
#define WS_MODEL_MAX_EXPERTS 65536     /* routed or shared: 512 Qwen3-Next, 384 Kimi K2, 256 V3 */
#define WS_MODEL_MAX_TOKENS (1 << 30)  /* token counts (sliding_window, index_topk): 2048 V3.2 */
#define WS_MODEL_PUBLISHED "published" /* models/published.json (published.h): not a model */

typedef enum ws_attn_kind {
    WS_ATTN_MHA = 0,        /* one KV head per query head */
    WS_ATTN_GQA = 1,        /* grouped-query: n_q / n_kv query heads share a KV head */
    WS_ATTN_MLA = 2,        /* multi-head latent attention, absorbed weights */
    WS_ATTN_MLA_SPARSE = 3, /* MLA over an indexer's top-k tokens (DeepSeek-V3.2/V4 style) */
} ws_attn_kind;

const char *ws_attn_kind_name(ws_attn_kind k); /* "mha", "gqa", "mla", "mla-sparse" */

typedef struct ws_model {
    char name[64];          /* short name: file name without .json */
    char path[1024];        /* file it was loaded from */
    char architecture[64];  /* architectures[0] */
    char model_type[64];
    char provenance[1024];   /* "_provenance" note, empty for verbatim hub files */
    int approximate;        /* 1 when the file says its values are approximate */
    ws_dtype weight_dtype;  /* from torch_dtype (bf16 when absent) */

    int hidden, layers, vocab, tie_embeddings, attention_bias;
    int n_q_heads, n_kv_heads, head_dim, v_head_dim; /* GQA/MHA; n_kv = 1 for MLA */
    int kv_lora_rank, q_lora_rank, rope_dim, nope_dim; /* MLA (0 when not MLA) */
    int index_topk, index_n_heads, index_head_dim;   /* sparse indexer (0 when dense) */
    int sliding_window;     /* tokens, 0 = none */
    int max_ctx;            /* max_position_embeddings: the longest context, 0 = not given */

    int intermediate;       /* dense MLP width */
    int n_experts, experts_per_tok, moe_intermediate;
    int n_shared_experts;   /* DeepSeek style: count of moe_intermediate-wide experts */
    long long shared_intermediate; /* total shared-expert width (n_shared*moe_inter or Qwen2 size) */
    int shared_expert_gate; /* Qwen2-MoE sigmoid gate on the shared expert */
    int n_moe_layers, n_dense_layers;
    ws_attn_kind attn;
} ws_model;

/* Quantities derived from a model; bytes at the KV dtype asked for. */
typedef struct ws_model_stats {
    ws_dtype kv_dtype;
    double kv_bytes_tok_layer;      /* b_tok: one token, one layer */
    double kv_bytes_tok;            /* all layers */
    double index_bytes_tok_layer;   /* indexer keys (sparse only) */
    double attn_flops_tok_layer;    /* f_tok: per attended KV token, one layer, one query */
    double index_flops_tok_layer;   /* indexer scoring per context token (sparse only) */
    long long attended_max;         /* sparse: top-k + window tokens; 0 = all */
    double attn_weight_bytes_layer; /* projections of one layer */
    double expert_bytes;            /* one routed expert, one layer */
    double routed_bytes_layer, routed_bytes;
    double shared_bytes_layer, shared_bytes;
    double dense_bytes_layer, dense_bytes;
    double embed_bytes;             /* input embedding + untied lm_head */
    double total_params, active_params; /* active: per token, embeddings included */
} ws_model_stats;

/* Loads a config.json. Every failure names the file: "<path>: <problem>". */
int ws_model_load(const char *path, ws_model *m, ws_err *err);
/* Parses config.json text; `origin` names it in messages and becomes m->path. */
int ws_model_parse(const char *json_text, const char *origin, ws_model *m, ws_err *err);
/* Resolves NAME (models/NAME.json under the project root) or a path to a file. */
int ws_model_resolve(const char *name_or_path, char *path_out, size_t cap, ws_err *err);
/* Lists shipped model names into names[] (up to max); returns the count. */
int ws_model_list(char names[][64], int max, ws_err *err);
/* The path of FILE in the shipped models folder (models/FILE under the project root),
 * where NAME.json and published.json (published.h) are found. */
int ws_model_data_path(const char *file, char *out, size_t cap, ws_err *err);
void ws_model_derive(const ws_model *m, ws_dtype kv_dtype, ws_model_stats *s);
/* One layer's shape for the decode-attention kernels (kernels/attn.h): GQA/MHA n_kv_heads
 * heads of head_dim (v_head_dim for V); MLA (absorbed weights) one latent head of
 * d_k = kv_lora_rank + rope, d_v = kv_lora_rank, V sharing K's rows, every query head in
 * its group. Fills kv (all fields), *n_q_heads and *scale (1/sqrt of the q.k head dim
 * before absorption: nope + rope for MLA). WS_EINVAL when the model has no attention. */
int ws_model_attn_shape(const ws_model *m, ws_dtype kv_dtype, int page_tokens, ws_kv_layout *kv,
                        int *n_q_heads, float *scale, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
