/* ikv_pool: a pool of fixed-size KV pages in host memory with an enforced capacity, the
 * backing store of the InplaceKVCache's two host regions (ikv.h): the CPU region
 * (pageable, huge pages asked for, spread over NUMA nodes) and the XFER region (pinned).
 *
 * Memory comes in chunks (64 MiB by default, 2 MiB aligned), mapped when the pages before
 * them are all taken and kept until the pool is destroyed, so a page's address never
 * changes while it is held and freeing a page is a push on a free list. Each chunk is on
 * one NUMA node (mbind, preferred: a hint), given by the caller's node list, and holds at
 * most a node's share of the capacity; a page is asked for on a node and comes from
 * another node's free pages only when that node has none left and the capacity allows no
 * new chunk there. Pinned pools pin each chunk when it
 * is mapped: through the backend's host_alloc when it has one (CUDA), else mlock. When
 * mlock is refused (RLIMIT_MEMLOCK), the chunk stays pageable and the pool says so
 * (ws_ikv_pool_pinned = 0, ws_ikv_pool_note): a reported fallback, not an error.
 *
 * The capacity is floor(limit_bytes / page_bytes) pages; asking for more is WS_ENOMEM with
 * the pool's name, its capacity and what is in use. Each page carries a state (free,
 * taken, written) so the cache can prove that no written page is written again.
 * Single-threaded: one writer at a time. Callers: runtime/ikv.c, tests/test_ikv_pool.c. */
#ifndef WS_IKV_POOL_H
#define WS_IKV_POOL_H

#include <stddef.h>

#include "backend.h"
#include "numa.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ws_ikv_pool ws_ikv_pool;

/* Locks [addr, addr + len) in memory; 0 or -1 with errno (mlock's contract). */
typedef int (*ws_ikv_lock_fn)(const void *addr, size_t len);

typedef struct ws_ikv_pool_config {
    const char *name;          /* for messages: "CPU region", "XFER region" */
    size_t page_bytes;         /* > 0 */
    size_t limit_bytes;        /* capacity: floor(limit_bytes / page_bytes) pages */
    int pinned;                /* 1: pin every chunk (host_alloc, else mlock) */
    const ws_backend *backend; /* pinned pools: host_alloc/host_free if set; NULL: mlock */
    int n_nodes;               /* NUMA nodes of the pool (0 or 1: one node) */
    const int *node_ids;       /* [n_nodes] OS node numbers (NULL: node 0) */
    size_t chunk_bytes;        /* memory mapped at a time (0: 64 MiB); at least one page */
    ws_ikv_lock_fn lock;       /* NULL: mlock (tests inject a refusal) */
} ws_ikv_pool_config;

typedef enum ws_ikv_page_state {
    WS_IKV_PAGE_FREE = 0,    /* in a free list (or not mapped yet) */
    WS_IKV_PAGE_TAKEN = 1,   /* handed out, not yet written */
    WS_IKV_PAGE_WRITTEN = 2, /* holds placed KV */
} ws_ikv_page_state;

/* Nothing is mapped until the first page is taken. WS_EINVAL on a bad config. */
ws_ikv_pool *ws_ikv_pool_create(const ws_ikv_pool_config *cfg, ws_err *err);
void ws_ikv_pool_destroy(ws_ikv_pool *p);

/* Takes a free page, preferably on node index `node` (0 .. n_nodes - 1; out of range: 0),
 * into *id; WS_ENOMEM "<name> full: ..." when none is left within the capacity, or when
 * a chunk cannot be mapped. */
int ws_ikv_pool_take(ws_ikv_pool *p, int node, int *id, ws_err *err);
/* Returns a taken or written page to its node's free list. */
void ws_ikv_pool_give(ws_ikv_pool *p, int id);
/* Marks a taken page written; returns its state before (WS_IKV_PAGE_TAKEN when all is
 * well: WS_IKV_PAGE_WRITTEN means the page was written twice). */
ws_ikv_page_state ws_ikv_pool_mark_written(ws_ikv_pool *p, int id);
ws_ikv_page_state ws_ikv_pool_state(const ws_ikv_pool *p, int id);

void *ws_ikv_pool_addr(const ws_ikv_pool *p, int id);
int ws_ikv_pool_node_id(const ws_ikv_pool *p, int id); /* OS node of the page's chunk */

size_t ws_ikv_pool_page_bytes(const ws_ikv_pool *p);
int ws_ikv_pool_capacity(const ws_ikv_pool *p); /* pages */
int ws_ikv_pool_in_use(const ws_ikv_pool *p);   /* pages taken or written */
int ws_ikv_pool_mapped(const ws_ikv_pool *p);   /* pages in mapped chunks */
/* 1 when every mapped chunk is pinned as asked (always 1 for pageable pools). */
int ws_ikv_pool_pinned(const ws_ikv_pool *p);
/* Why the pool is not as asked (pinning refused), or "" when it is. */
const char *ws_ikv_pool_note(const ws_ikv_pool *p);

#ifdef __cplusplus
}
#endif
#endif
