/* dnnl_cache: what the oneDNN expert FFNs (gemm_bf16.c, gemm_int8.c) share: the one CPU
 * engine, and a cache of an FFN's two matmul primitives (gate|up, down) per shape (m, H, I,
 * threads) with the stream they run on, the least recently used pair replaced.
 *
 * Creating a primitive costs far more than running it at decode shapes, so each shape's
 * pair is built once and kept. A kernel supplies how a matmul's primitive descriptor is
 * made (its data types, which of oneDNN's implementations it takes); the primitive's
 * scratchpad is its own (user mode), so pairs never share memory. A cache is not locked
 * here: its owner keeps one per thread (gemm_int8) or guards shared ones with a lock
 * (gemm_bf16), and frees it when done. */
#ifndef WS_DNNL_CACHE_H
#define WS_DNNL_CACHE_H

#include <oneapi/dnnl/dnnl.h>

#include "ws_err.h"

#define WS_DNNL_CACHE 64 /* primitive pairs a cache keeps */

/* One matmul [m x k] x [k x n] -> [m x n] and the memories it runs on. */
typedef struct ws_dnnl_mm {
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, dst, scratch;
} ws_dnnl_mm;

/* An FFN shape's pair: gate|up [m x H] x [H x 2I], down [m x I] x [I x H]. */
typedef struct ws_dnnl_pair {
    int m, hidden, inter, threads;
    ws_dnnl_mm gate_up, down;
    unsigned long used;
} ws_dnnl_pair;

/* Makes the primitive descriptor of an [m x k] x [k x n] matmul on `engine`. */
typedef dnnl_status_t (*ws_dnnl_pd_fn)(dnnl_engine_t engine, dnnl_primitive_desc_t *pd, int m,
                                       int n, int k);

typedef struct ws_dnnl_cache {
    ws_dnnl_pd_fn pd;  /* the kernel's descriptors */
    const char *kind;  /* "bf16", "int8": named in messages */
    dnnl_stream_t stream;
    ws_dnnl_pair e[WS_DNNL_CACHE];
    int n;
    unsigned long tick;
} ws_dnnl_cache;

/* The CPU engine, created on first use; NULL when oneDNN has none. */
dnnl_engine_t ws_dnnl_engine(void);

/* The pair for the shape, created on a miss (and the cache's stream on first use); NULL
 * and WS_EDEVICE when oneDNN refuses. */
ws_dnnl_pair *ws_dnnl_cache_get(ws_dnnl_cache *c, int m, int hidden, int inter, int threads,
                                ws_err *err);
/* Runs p: c = a b, waiting for the stream; `what` names the matmul in a failure. */
int ws_dnnl_mm_run(ws_dnnl_mm *p, dnnl_stream_t stream, const void *a, const void *b, void *c,
                   const char *what, ws_err *err);
/* Destroys the cached primitives (the stream stays). */
void ws_dnnl_cache_clear(ws_dnnl_cache *c);
/* Destroys the primitives and the stream. */
void ws_dnnl_cache_free(ws_dnnl_cache *c);

#endif
