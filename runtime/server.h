/* server: a serving engine (vLLM, SGLang, llama.cpp, KTransformers, TensorRT-LLM, ...) as
 * data. An engine's file, engines/NAME.json, says how it fills a step (its scheduler, token
 * budget, sequence cap, prefill chunk), whether it caches prompt prefixes, how much of the
 * GPU its KV cache gets, what it does when that runs out, and what it leaves the GPU idle
 * per step, each value with the public reference it was read in (the schema is in
 * engines/README.md). A value that depends on the GPU (vLLM's and SGLang's defaults do) is
 * chosen here by the GPU's name and memory; one the engine does not publish is null and
 * leaves the serving default in place.
 *
 * A file may name a "base" engine (KTransformers' kt-kernel serves through SGLang): the
 * base's values first, then each field the file gives. ws_server_load reads and resolves a
 * file once; ws_server_apply writes it over a serving
 * configuration (serving.h) and the cost settings (the step overhead, deploy.h), so a
 * command line sets an engine first and its own flags after, each flag overriding one
 * value. An engine's file may also say how to launch it (its "command" object, read by
 * sim/plan_cmd.h); this loader leaves that and any other key it does not use alone. Library
 * code: no printing. */
#ifndef WS_SERVER_H
#define WS_SERVER_H

#include "deploy.h"
#include "serving.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the engine sizes its KV cache. */
typedef enum ws_kv_mem {
    WS_KV_MEM_BUDGET = 0,  /* a budget in bytes (the simulator's default or --kv-gb) */
    WS_KV_MEM_TOTAL = 1,   /* frac of the GPU's memory for weights and KV (vLLM's
                            * gpu_memory_utilization, SGLang's mem_fraction_static) */
    WS_KV_MEM_FREE = 2,    /* frac of the memory the weights leave (TensorRT-LLM's
                            * free_gpu_memory_fraction) */
    WS_KV_MEM_CONTEXT = 3, /* ctx tokens of KV for all slots (llama.cpp's -c) */
} ws_kv_mem;

typedef struct ws_server_kv {
    int kind;    /* ws_kv_mem */
    double frac; /* TOTAL, FREE */
    int ctx;     /* CONTEXT: tokens (0: the model's longest context) */
} ws_server_kv;

/* The fields an engine's file sets, in the order ws_server_field_name names them. */
typedef enum ws_server_field {
    WS_SRV_SCHEDULER = 0,
    WS_SRV_TOKEN_BUDGET,
    WS_SRV_MAX_SEQS,
    WS_SRV_CHUNK,
    WS_SRV_PREFIX_CACHE,
    WS_SRV_KV_MEM,
    WS_SRV_PREEMPT,
    WS_SRV_STEP_OVERHEAD,
    WS_SRV_HOST_WEIGHTS,
    WS_SRV_HANDOFF_C0,
    WS_SRV_PREFILL_GPU,
    WS_SRV_NUMA,
    WS_SRV_FIELDS
} ws_server_field;
/* "scheduler", "token_budget", ... (the keys of the file). */
const char *ws_server_field_name(int f);

typedef struct ws_server {
    char name[64];
    char desc[256];
    int batching;     /* ws_batching */
    int token_budget; /* tokens */
    int max_seqs;
    int chunk; /* tokens of one prompt per step (0: the token budget) */
    int prefix_cache;
    ws_server_kv kv;
    int preempt;            /* ws_preempt */
    double step_s;          /* s the GPU idles per step */
    int host_pageable;      /* 1: its host-memory weights are pageable (mmap'd), so streamed at
                             * the GPU's pageable H2D rate; 0: pinned */
    double handoff_c0;      /* s, fixed cost of one CPU<->GPU hand-off of a layer's hidden
                             * states: the copy with the host's synchronisation around it */
    int prefill_gpu_tokens; /* a step of this many prompt tokens or more streams its host
                             * experts to the GPU, a smaller one runs them on the CPU */
    int numa_one_node;      /* where its host weights sit on a host of several sockets: 1 in one
                             * node's DRAM, read by every socket (one-node); 0 spread over all
                             * sockets' DRAM as one pool (pooled) */
    int set[WS_SRV_FIELDS]; /* 1: the file gives the value; 0: null, not published */
    char ref[WS_SRV_FIELDS][320]; /* where each value was read (or why it is null) */
} ws_server;

/* Reads engines/NAME.json (or a path) for a GPU of gpu_mem bytes named gpu (a profile name)
 * and a model whose longest context is model_ctx tokens (0: unknown). Unknown name: an error
 * listing the engines there are. */
int ws_server_load(const char *name, const char *gpu, double gpu_mem, int model_ctx, ws_server *out,
                   ws_err *err);
/* The file of engine `name` into path: engines/NAME.json under the project root, or name itself
 * when it holds a '/'. An engine with no file: WS_ENOTFOUND listing the engines there are. */
int ws_server_path(const char *name, char *path, size_t cap, ws_err *err);
/* The engines' names (sorted) into names; returns how many (at most max). */
int ws_server_list(char names[][64], int max);
/* The engine's published values over s (its prefill threshold too), cc (its step overhead,
 * host-weight memory, hand-off cost and NUMA placement) and kv; unpublished ones are left as they
 * are (an unpublished step overhead: the GPU profile's modeled one; host weights: pinned;
 * hand-offs: the copies). */
void ws_server_apply(const ws_server *e, ws_serving *s, ws_deploy_cfg *cc, ws_server_kv *kv);

#ifdef __cplusplus
}
#endif
#endif
