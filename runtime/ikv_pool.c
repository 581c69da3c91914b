/* ikv_pool: see ikv_pool.h. */
#include "ikv_pool.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#define HUGE_BYTES ((size_t)2 << 20)
#define DEFAULT_CHUNK ((size_t)64 << 20)

typedef struct chunk {
    char *map;      /* the mapping (mmap) or host_alloc's block */
    size_t map_len;
    int host_alloc; /* 1: from the backend's host_alloc */
} chunk;

struct ws_ikv_pool {
    char name[64];
    size_t page_bytes, chunk_bytes;
    int cap, mapped, in_use;
    int pinned, pinned_ok;
    const ws_backend *backend;
    ws_ikv_lock_fn lock;
    int n_nodes;
    int node_id[WS_NUMA_MAX_NODES];
    int head[WS_NUMA_MAX_NODES]; /* free list of each node (-1: empty) */
    char **addr;                 /* [cap] page addresses (mapped pages) */
    int *next;                   /* [cap] free-list links */
    unsigned char *node;         /* [cap] node index */
    unsigned char *state;        /* [cap] ws_ikv_page_state */
    chunk *chunks;
    int n_chunks, cap_chunks;
    char note[256];
};

static int default_lock(const void *addr, size_t len)
{
    return mlock(addr, len);
}

ws_ikv_pool *ws_ikv_pool_create(const ws_ikv_pool_config *cfg, ws_err *err)
{
    const char *name = cfg->name ? cfg->name : "KV pool";
    if (!cfg->page_bytes) {
        ws_err_set(err, WS_EINVAL, "%s: zero page size", name);
        return NULL;
    }
    if (cfg->n_nodes > WS_NUMA_MAX_NODES || cfg->n_nodes > 255) {
        ws_err_set(err, WS_EINVAL, "%s: %d NUMA nodes (at most %d)", name, cfg->n_nodes,
                   WS_NUMA_MAX_NODES);
        return NULL;
    }
    const size_t cap = cfg->limit_bytes / cfg->page_bytes;
    if (cap > (size_t)INT_MAX / 2) {
        ws_err_set(err, WS_EINVAL, "%s: limit of %zu pages is too many", name, cap);
        return NULL;
    }
    ws_ikv_pool *p = calloc(1, sizeof *p);
    if (!p) {
        ws_err_set(err, WS_ENOMEM, "%s: out of memory", name);
        return NULL;
    }
    snprintf(p->name, sizeof p->name, "%s", name);
    p->page_bytes = cfg->page_bytes;
    p->chunk_bytes = cfg->chunk_bytes ? cfg->chunk_bytes : DEFAULT_CHUNK;
    p->cap = (int)cap;
    p->pinned = cfg->pinned;
    p->pinned_ok = 1;
    p->backend = cfg->backend;
    p->lock = cfg->lock ? cfg->lock : default_lock;
    p->n_nodes = cfg->n_nodes > 1 ? cfg->n_nodes : 1;
    for (int k = 0; k < p->n_nodes; k++) {
        p->node_id[k] = cfg->node_ids ? cfg->node_ids[k] : 0;
        p->head[k] = -1;
    }
    const size_t n = cap ? cap : 1;
    p->addr = calloc(n, sizeof *p->addr);
    p->next = calloc(n, sizeof *p->next);
    p->node = calloc(n, 1);
    p->state = calloc(n, 1);
    if (!p->addr || !p->next || !p->node || !p->state) {
        ws_ikv_pool_destroy(p);
        ws_err_set(err, WS_ENOMEM, "%s: out of memory for %zu page records", name, cap);
        return NULL;
    }
    return p;
}

void ws_ikv_pool_destroy(ws_ikv_pool *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n_chunks; i++) {
        chunk *c = &p->chunks[i];
        if (c->host_alloc)
            p->backend->host_free(c->map);
        else
            munmap(c->map, c->map_len);
    }
    free(p->chunks);
    free(p->addr);
    free(p->next);
    free(p->node);
    free(p->state);
    free(p);
}

/* Maps a chunk on node index k and pushes its pages on k's free list. */
static int map_chunk(ws_ikv_pool *p, int k, ws_err *err)
{
    size_t per = p->chunk_bytes / p->page_bytes;
    /* on several nodes a chunk holds at most a node's share, so that one node's first
     * chunk cannot take the capacity the others need */
    const size_t share = ((size_t)p->cap + (size_t)p->n_nodes - 1) / (size_t)p->n_nodes;
    if (per > share)
        per = share;
    if (per < 1)
        per = 1;
    const size_t left = (size_t)(p->cap - p->mapped);
    const size_t pages = per < left ? per : left;
    const size_t bytes = (pages * p->page_bytes + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES;
    if (p->n_chunks == p->cap_chunks) {
        int nc = p->cap_chunks ? 2 * p->cap_chunks : 16;
        chunk *c = realloc(p->chunks, sizeof *c * (size_t)nc);
        if (!c)
            return ws_err_set(err, WS_ENOMEM, "%s: out of memory", p->name);
        p->chunks = c;
        p->cap_chunks = nc;
    }
    chunk c = {0};
    char *base;
    if (p->pinned && p->backend && p->backend->host_alloc) {
        void *m = NULL;
        if (p->backend->host_alloc(bytes, &m, err))
            return ws_err_prefix(err, "%s: pinning %.1f MB", p->name, bytes / 1e6);
        c.map = m;
        c.map_len = bytes;
        c.host_alloc = 1;
        base = m;
    } else {
        c.map_len = bytes + HUGE_BYTES; /* room to start on a 2 MiB boundary */
        c.map = mmap(NULL, c.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (c.map == MAP_FAILED)
            return ws_err_set(err, WS_ENOMEM, "%s: cannot map %.1f MB (%s)", p->name,
                              bytes / 1e6, strerror(errno));
        base = c.map + (HUGE_BYTES - (uintptr_t)c.map % HUGE_BYTES) % HUGE_BYTES;
        madvise(base, bytes, MADV_HUGEPAGE); /* a hint: no huge pages is not an error */
        if (p->n_nodes > 1)
            ws_numa_prefer(base, bytes, p->node_id[k], NULL); /* a hint too */
        if (p->pinned && p->lock(base, bytes)) {
            const int e = errno;
            struct rlimit rl = {0};
            getrlimit(RLIMIT_MEMLOCK, &rl);
            if (p->pinned_ok) {
                char lim[32];
                if (rl.rlim_cur == RLIM_INFINITY)
                    snprintf(lim, sizeof lim, "unlimited");
                else
                    snprintf(lim, sizeof lim, "%llu bytes", (unsigned long long)rl.rlim_cur);
                snprintf(p->note, sizeof p->note,
                         "%s not pinned: mlock of %.1f MB refused (%s; RLIMIT_MEMLOCK %s): "
                         "its pages are pageable host memory",
                         p->name, bytes / 1e6, strerror(e), lim);
            }
            p->pinned_ok = 0;
        }
    }
    p->chunks[p->n_chunks++] = c;
    /* pushed in reverse so that pages are taken in address order */
    for (size_t i = pages; i-- > 0;) {
        const int id = p->mapped + (int)i;
        p->addr[id] = base + i * p->page_bytes;
        p->node[id] = (unsigned char)k;
        p->state[id] = WS_IKV_PAGE_FREE;
        p->next[id] = p->head[k];
        p->head[k] = id;
    }
    p->mapped += (int)pages;
    return 0;
}

int ws_ikv_pool_take(ws_ikv_pool *p, int node, int *id, ws_err *err)
{
    if (node < 0 || node >= p->n_nodes)
        node = 0;
    if (p->in_use >= p->cap)
        return ws_err_set(err, WS_ENOMEM,
                          "%s full: %d of %d pages of %zu bytes in use (limit %.1f MB)",
                          p->name, p->in_use, p->cap, p->page_bytes,
                          (double)p->cap * (double)p->page_bytes / 1e6);
    int k = node;
    if (p->head[k] < 0 && p->mapped < p->cap) {
        int rc = map_chunk(p, k, err);
        if (rc)
            return rc;
    }
    for (int j = 0; j < p->n_nodes && p->head[k] < 0; j++)
        k = (node + j) % p->n_nodes; /* another node's free pages */
    if (p->head[k] < 0) /* cannot happen: in_use < cap = mapped */
        return ws_err_set(err, WS_ENOMEM, "%s: no free page (%d mapped, %d in use)", p->name,
                          p->mapped, p->in_use);
    const int i = p->head[k];
    p->head[k] = p->next[i];
    p->state[i] = WS_IKV_PAGE_TAKEN;
    p->in_use++;
    *id = i;
    return 0;
}

void ws_ikv_pool_give(ws_ikv_pool *p, int id)
{
    if (id < 0 || id >= p->mapped || p->state[id] == WS_IKV_PAGE_FREE)
        return;
    p->state[id] = WS_IKV_PAGE_FREE;
    p->next[id] = p->head[p->node[id]];
    p->head[p->node[id]] = id;
    p->in_use--;
}

ws_ikv_page_state ws_ikv_pool_mark_written(ws_ikv_pool *p, int id)
{
    const ws_ikv_page_state before = (ws_ikv_page_state)p->state[id];
    if (before != WS_IKV_PAGE_FREE)
        p->state[id] = WS_IKV_PAGE_WRITTEN;
    return before;
}

ws_ikv_page_state ws_ikv_pool_state(const ws_ikv_pool *p, int id)
{
    return (ws_ikv_page_state)p->state[id];
}

void *ws_ikv_pool_addr(const ws_ikv_pool *p, int id) { return p->addr[id]; }
int ws_ikv_pool_node_id(const ws_ikv_pool *p, int id) { return p->node_id[p->node[id]]; }
size_t ws_ikv_pool_page_bytes(const ws_ikv_pool *p) { return p->page_bytes; }
int ws_ikv_pool_capacity(const ws_ikv_pool *p) { return p->cap; }
int ws_ikv_pool_in_use(const ws_ikv_pool *p) { return p->in_use; }
int ws_ikv_pool_mapped(const ws_ikv_pool *p) { return p->mapped; }
int ws_ikv_pool_pinned(const ws_ikv_pool *p) { return !p->pinned || p->pinned_ok; }
const char *ws_ikv_pool_note(const ws_ikv_pool *p) { return p->note; }
