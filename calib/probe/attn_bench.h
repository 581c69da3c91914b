/* attn_bench: synthetic, model-shaped decode-attention problems for benchmarks: one layer's
 * KV for `batch` sequences of `ctx` tokens in the paged layout of attn.h, pages scattered in
 * a seeded shuffled order over a kv_slab (kv_slab.h: a slice per NUMA node of the pool,
 * as the calibrator's KV), filled with seeded uniform [-1, 1) values (in parallel on the
 * pool, deterministic for a seed), plus queries, outputs and, for sparse runs, per-round
 * top-k selections (whole pages, as a page-granular indexer picks them, or single tokens).
 * A model's shape comes from ws_model_attn_shape (runtime/model.h).
 * Callers: `writescope bench attn-cpu`, tests. */
#ifndef WS_ATTN_BENCH_H
#define WS_ATTN_BENCH_H

#include <stdint.h>

#include "attn.h"
#include "pool.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    WS_SPARSE_NONE = 0,   /* dense: every token */
    WS_SPARSE_PAGES = 1,  /* top-k as whole pages (k / P distinct random pages) */
    WS_SPARSE_TOKENS = 2, /* top-k single tokens, distinct, random order */
} ws_sparse_mode;

typedef struct ws_attn_bench_cfg {
    ws_kv_layout kv;    /* page_tokens, heads, dims, dtype */
    int n_q_heads;
    float scale;
    int batch, ctx;     /* sequences, tokens each */
    ws_sparse_mode sparse;
    int topk;           /* tokens attended per sequence when sparse */
    uint64_t seed;
} ws_attn_bench_cfg;

typedef struct ws_attn_bench ws_attn_bench;

/* Allocates and fills; NULL with a message (bad sizes, out of memory). pool may be NULL. */
ws_attn_bench *ws_attn_bench_create(const ws_attn_bench_cfg *cfg, ws_pool *pool, ws_err *err);
/* Draws the sparse selection for round r (a fresh random set each round, so repeats do
 * not re-read a cached set); a no-op when dense. */
void ws_attn_bench_select(ws_attn_bench *b, int round);
/* The problem (valid until destroy; its selection changes with ws_attn_bench_select). */
const ws_attn_problem *ws_attn_bench_problem(const ws_attn_bench *b);
/* NUMA nodes the KV is spread over: the pool's nodes (ws_pool_nodes), page (s, p) on its
 * node ws_numa_place(s, p), as asked of the kernel (mbind, before the fill; a refusal
 * leaves the pages where the fill touched them) and as the page tables say
 * (ws_attn_seq.page_nodes); 1 on one node. */
int ws_attn_bench_nodes(const ws_attn_bench *b);
/* Writes back and evicts every KV page from every cache level (membw.h's
 * ws_membw_evict), on the pool's threads (pool may be NULL): the next run reads cold KV,
 * as a decode step does, whatever the size of the caches. */
void ws_attn_bench_evict(const ws_attn_bench *b, ws_pool *pool);
/* Bytes allocated for KV pages. */
double ws_attn_bench_kv_alloc_bytes(const ws_attn_bench *b);
/* Attention flops of one run: 2 * n_q * (d_k + d_v) per attended token. */
double ws_attn_bench_flops(const ws_attn_bench *b);
void ws_attn_bench_destroy(ws_attn_bench *b);

#ifdef __cplusplus
}
#endif
#endif
