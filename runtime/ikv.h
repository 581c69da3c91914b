/* ikv: the InplaceKVCache, the KV-cache format of DESIGN section 2. Each page (P tokens of
 * one sequence, one layer) gets its region when it is written and keeps it:
 *   CPU       pageable host pages (ikv_pool: huge pages asked for, spread over the NUMA
 *             nodes by ws_numa_place) in the CPU kernel's layout for this ISA and shape
 *             (K in tiles, V in pairs where ws_attn_cpu_k_tiles / _v_pairs choose them);
 *             only the CPU attends them.
 *   XFER      pinned host pages (backend host_alloc, else mlock; a refused mlock is
 *             reported, ws_ikv_note) in the GPU kernel's layout (rows, attn.h): one page is
 *             one DMA; only the GPU attends them, after streaming.
 *   D-window  per (sequence, layer) a ring of W tokens (W/P pages) on the GPU holding the
 *             newest tokens; full pages leave it only by a flush, as one batch, each page
 *             to the region the caller (the policy) picks.
 *   ping-pong two fixed landing halves of pingpong_pages pages: a layer's XFER pages are
 *             copied into the next half to be attended there (ws_ikv_stream).
 * The GPU regions are device memory through the backend's dev_alloc when it has one, else
 * host buffers standing in (the CPU backend), so the format runs everywhere.
 *
 * Prefill writes a prompt's full pages straight into CPU or XFER (a CPU page count from
 * the policy) and its last partial page into the D-window; so host pages are always full
 * and a sequence's tokens are its host pages in order, then its window. A sequence may
 * start from another's leading host pages (ws_ikv_share: a cached prompt prefix), held by
 * both, counted, and never moved while shared. "Moved after
 * placement" counts bytes of a placed (CPU or XFER) page written again, to the same or
 * another place: no call does it (a flush writes pages fresh out of the window, streaming
 * only reads XFER pages), and the counter proves it. Capacities are enforced: the GPU
 * budget at create (windows + ping-pong), the host and pinned limits per page; running out
 * is WS_ENOMEM naming the region and the amounts, and a refused flush or prefill changes
 * nothing. Single writer: one thread at a time calls into a cache; views stay valid until
 * the next call that changes the cache. Callers: the decode engine, tests/test_ikv.c. */
#ifndef WS_IKV_H
#define WS_IKV_H

#include <stddef.h>
#include <stdint.h>

#include "attn.h"
#include "attn_cpu.h"
#include "backend.h"
#include "ikv_pool.h"
#include "pool.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ws_ikv_region {
    WS_IKV_CPU = 0,      /* pageable host, CPU kernel's layout */
    WS_IKV_XFER = 1,     /* pinned host, GPU page layout */
    WS_IKV_DWIN = 2,     /* D-window rings (GPU) */
    WS_IKV_PINGPONG = 3, /* landing halves (GPU) */
    WS_IKV_N_REGIONS
} ws_ikv_region;

const char *ws_ikv_region_name(ws_ikv_region r); /* "cpu", "xfer", "dwin", "pingpong" */

typedef struct ws_ikv_config {
    ws_kv_layout kv;      /* the GPU page layout (rows: v_pairs = k_tiles = 0); P = page_tokens */
    int n_q_heads;        /* with isa, picks the CPU region's layout */
    ws_isa isa;           /* CPU kernel path (WS_ISA_AUTO: resolved, WRITESCOPE_ISA first) */
    int token_lists;      /* 1: the CPU attends sparse token lists (rows then) */
    int n_layers;
    int max_seqs;         /* sequences held at once; 0: as many as the GPU budget allows */
    int window;           /* W: a multiple of P, > 0 */
    int pingpong_pages;   /* pages per landing half (0: none, no streaming) */
    size_t gpu_budget;    /* bytes of D-windows + ping-pong allowed */
    size_t pinned_limit;  /* bytes of XFER pages */
    size_t host_limit;    /* bytes of CPU pages */
    const ws_backend *backend; /* NULL: the CPU backend (host stand-ins, mlock) */
    ws_pool *pool;        /* the CPU kernel's pool: its NUMA nodes place CPU pages (NULL: one) */
    size_t chunk_bytes;   /* host pools map this much at a time (0: 64 MiB) */
    ws_ikv_lock_fn lock;  /* XFER pinning without host_alloc (NULL: mlock); for tests */
} ws_ikv_config;

typedef struct ws_ikv ws_ikv;

typedef struct ws_ikv_stats {
    uint64_t bytes_written[WS_IKV_N_REGIONS]; /* KV bytes written into each region */
    uint64_t bytes_moved;     /* bytes of placed pages written again: stays 0 */
    uint64_t bytes_reformatted, pages_reformatted; /* ws_ikv_reformat's moves (migrate) */
    uint64_t bytes_streamed;  /* XFER -> ping-pong copies (reads of placed pages) */
    int pages_in_use[WS_IKV_N_REGIONS];   /* CPU, XFER pages held; D-window pages holding
                                           * tokens; ping-pong slots of halves in use */
    int pages_capacity[WS_IKV_N_REGIONS]; /* limits in pages (ping-pong: both halves) */
    size_t gpu_bytes;         /* D-windows + ping-pong, fixed at create */
    uint64_t flushes, pages_flushed, pages_prefilled;
    int xfer_pinned;          /* 1: XFER pages are pinned; 0: the mlock fallback */
    int seqs;                 /* sequences held */
} ws_ikv_stats;

/* Creates the cache and its fixed GPU regions; WS_EINVAL on a bad config, WS_ENOMEM when
 * the windows and ping-pong exceed gpu_budget (with both amounts). */
ws_ikv *ws_ikv_create(const ws_ikv_config *cfg, ws_err *err);
void ws_ikv_destroy(ws_ikv *c);

/* The layouts of the two halves' problems: CPU pages and GPU pages (rows). */
const ws_kv_layout *ws_ikv_cpu_layout(const ws_ikv *c);
const ws_kv_layout *ws_ikv_gpu_layout(const ws_ikv *c);
int ws_ikv_max_seqs(const ws_ikv *c);
void ws_ikv_stats_get(const ws_ikv *c, ws_ikv_stats *out);
/* Fallbacks taken (XFER not pinned), "" when none. */
const char *ws_ikv_note(const ws_ikv *c);

/* ---- sequences ---- */
/* A new, empty sequence; *seq is its handle (0 .. max_seqs - 1). WS_ENOMEM when every
 * slot is held. */
int ws_ikv_seq_add(ws_ikv *c, int *seq, ws_err *err);
/* Returns every page of the sequence to its pool (a shared one when its last holder goes)
 * and empties its windows. */
int ws_ikv_seq_free(ws_ikv *c, int seq, ws_err *err);
/* Prefix caching: the empty sequence seq takes the first n_pages host pages of src, in
 * every layer, as its own first pages (the same pages: nothing is copied or moves); it may
 * then prefill the rest of its prompt. A shared page is never reformatted (WS_EINVAL names
 * it) and returns to its pool when its last holder is freed. */
int ws_ikv_share(ws_ikv *c, int seq, int src, int n_pages, ws_err *err);
/* The sequences holding page i of (seq, layer): 1 for its own alone; 0 for no such page. */
int ws_ikv_page_holders(const ws_ikv *c, int seq, int layer, int i);
/* Tokens held for (seq, layer): all, in the CPU region, in XFER, in the D-window. */
int ws_ikv_tokens(const ws_ikv *c, int seq, int layer, ws_ikv_region r);
int ws_ikv_seq_tokens(const ws_ikv *c, int seq, int layer);
/* Full pages in the window of (seq, layer), what a flush can take. */
int ws_ikv_window_full_pages(const ws_ikv *c, int seq, int layer);

/* Prefill of (seq, layer), empty or holding only full host pages (shared ones), with n
 * tokens appended after them: k [n][n_kv_heads][d_k], v
 * [n][n_kv_heads][d_v] (NULL when V shares K), KV dtype, host memory. Of the n / P full
 * pages, the first n_cpu_pages go to the CPU region and the rest to XFER; the last n % P
 * tokens go to the window. WS_ENOMEM (nothing written) when a region lacks the pages. */
int ws_ikv_prefill(ws_ikv *c, int seq, int layer, int n, const void *k, const void *v,
                   int n_cpu_pages, ws_err *err);

/* Decode: one new token for each listed sequence of one layer, into its window: k_new
 * [n][n_kv_heads][d_k], v_new [n][n_kv_heads][d_v] (NULL when V shares K), host memory.
 * A full window is WS_EINVAL (flush first); nothing is appended then. */
int ws_ikv_append(ws_ikv *c, int layer, const int *seqs, int n, const void *k_new,
                  const void *v_new, ws_err *err);

/* One flush request: the oldest n_pages full pages of (seq, layer)'s window; the first
 * n_cpu of them go to the CPU region, the others to XFER. */
typedef struct ws_ikv_flush_req {
    int seq, layer, n_pages, n_cpu;
} ws_ikv_flush_req;
/* Flushes the requests as one batch: checks all first (pages held, room in CPU and XFER),
 * then writes. WS_ENOMEM / WS_EINVAL with nothing flushed when a check fails. */
int ws_ikv_flush(ws_ikv *c, const ws_ikv_flush_req *req, int n_req, ws_err *err);

/* The one sanctioned move of placed KV, a single-state cache's reformat (the migrate
 * baseline): the newest n_pages of (seq, layer)'s host pages in the other host region are
 * re-laid into region `to` (WS_IKV_CPU or WS_IKV_XFER), each into a fresh page of that
 * region, the old page returned to its pool. Counted in bytes_reformatted and
 * pages_reformatted, apart from bytes_moved, which stays the proof that placement never
 * moves a byte. WS_EINVAL when the other region holds fewer pages, WS_ENOMEM when `to`
 * lacks room; nothing moves then. */
int ws_ikv_reformat(ws_ikv *c, int seq, int layer, int n_pages, ws_ikv_region to, ws_err *err);

/* ---- views for the kernels ---- */
/* The CPU half of (seq, layer): its CPU pages (in token order) into pages[] and their
 * nodes into nodes[] (may be NULL), and *out pointing at them (n_tokens = pages x P).
 * cap: room in the arrays; WS_EINVAL when too small. Layout: ws_ikv_cpu_layout. */
int ws_ikv_view_cpu(const ws_ikv *c, int seq, int layer, const void **pages, int *nodes,
                    int cap, ws_attn_seq *out, ws_err *err);
/* The GPU half: its XFER pages in token order (host addresses), then its window's pages
 * oldest first (GPU addresses); the last may be partly filled. Layout: gpu layout. */
int ws_ikv_view_gpu(const ws_ikv *c, int seq, int layer, const void **pages, int cap,
                    ws_attn_seq *out, ws_err *err);
/* The GPU half as the GPU attends it: copies the XFER pages of the listed sequences for
 * `layer` into the next ping-pong half, one copy per page, and fills views[i] (pages from
 * pages[], cap in all) with the landing slots, then the window pages. *half gets the half;
 * release it with ws_ikv_stream_release once its attention is done. WS_ENOMEM when the
 * layer has more XFER pages than a half holds; WS_EINVAL when the half is in use. */
int ws_ikv_stream(ws_ikv *c, int layer, const int *seqs, int n, const void **pages, int cap,
                  ws_attn_seq *views, int *half, ws_err *err);
int ws_ikv_stream_release(ws_ikv *c, int half, ws_err *err);

/* ---- what the placement rule reads ---- */
/* Sums over the listed sequences (all held ones when seqs is NULL) of one layer: tokens in
 * the CPU region, and spilled tokens (CPU + XFER). ws_policy_flush_cpu_pages takes them. */
void ws_ikv_spilled(const ws_ikv *c, int layer, const int *seqs, int n, double *cpu_tokens,
                    double *spilled_tokens);

/* Page i of (seq, layer)'s host pages (token order): its region, address and node (-1 for
 * XFER). WS_EINVAL when out of range. For tests and reports. */
int ws_ikv_page(const ws_ikv *c, int seq, int layer, int i, ws_ikv_region *region,
                const void **addr, int *node, ws_err *err);
int ws_ikv_host_pages(const ws_ikv *c, int seq, int layer);

#ifdef __cplusplus
}
#endif
#endif
