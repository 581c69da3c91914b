/* kv_slab: see kv_slab.h. */
#include "kv_slab.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "numa.h"

#define HUGE_BYTES ((size_t)2 << 20)

struct ws_kv_slab {
    int n;                                                   /* slices (nodes) */
    int node_id[WS_NUMA_MAX_NODES];                          /* OS node of each */
    size_t off[WS_NUMA_MAX_NODES], bytes[WS_NUMA_MAX_NODES]; /* slice k at base + off[k] */
    char *map, *base; /* the mapping, and its first 2 MiB boundary */
    size_t map_len;
    size_t page_bytes; /* the cut's slot size; 0 before a cut */
    size_t slots[WS_NUMA_MAX_NODES], next[WS_NUMA_MAX_NODES];
    size_t *order[WS_NUMA_MAX_NODES]; /* each slice's slots, shuffled */
};

static uint64_t mix(uint64_t x) /* splitmix64 */
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

ws_kv_slab *ws_kv_slab_create(ws_pool *pool, const size_t *slice_bytes, ws_err *err)
{
    ws_kv_slab *s = calloc(1, sizeof *s);
    if (!s) {
        ws_err_set(err, WS_ENOMEM, "kv_slab: out of memory");
        return NULL;
    }
    s->n = pool ? ws_pool_nodes(pool) : 1;
    size_t total = 0;
    for (int k = 0; k < s->n; k++) {
        s->node_id[k] = pool ? ws_pool_node_id(pool, k) : 0;
        s->off[k] = total;
        s->bytes[k] = slice_bytes[k];
        total += (slice_bytes[k] + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES;
    }
    /* room to start on a 2 MiB boundary */
    s->map_len = total + HUGE_BYTES;
    s->map = mmap(NULL, s->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s->map == MAP_FAILED) {
        ws_err_set(err, WS_ENOMEM, "kv_slab: cannot map %.2f GB of KV", total / 1e9);
        free(s);
        return NULL;
    }
    s->base = s->map + (HUGE_BYTES - (uintptr_t)s->map % HUGE_BYTES) % HUGE_BYTES;
    if (total)
        madvise(s->base, total, MADV_HUGEPAGE); /* a hint */
    for (int k = 0; s->n > 1 && k < s->n; k++)  /* a hint too: may be refused */
        if (s->bytes[k])
            ws_numa_prefer(s->base + s->off[k], s->bytes[k], s->node_id[k], NULL);
    return s;
}

void ws_kv_slab_destroy(ws_kv_slab *s)
{
    if (!s)
        return;
    for (int k = 0; k < s->n; k++)
        free(s->order[k]);
    munmap(s->map, s->map_len);
    free(s);
}

int ws_kv_slab_nodes(const ws_kv_slab *s)
{
    return s->n;
}

int ws_kv_slab_node_id(const ws_kv_slab *s, int k)
{
    return s->node_id[k];
}

char *ws_kv_slab_slice(const ws_kv_slab *s, int k, size_t *bytes)
{
    if (bytes)
        *bytes = s->bytes[k];
    return s->base + s->off[k];
}

int ws_kv_slab_cut(ws_kv_slab *s, size_t page_bytes, uint64_t seed, ws_err *err)
{
    if (!page_bytes)
        return ws_err_set(err, WS_EINVAL, "kv_slab: zero page size");
    size_t *order[WS_NUMA_MAX_NODES] = {0};
    for (int k = 0; k < s->n; k++) {
        const size_t n = s->bytes[k] / page_bytes;
        if (n && !(order[k] = malloc(sizeof(size_t) * n))) {
            for (int j = 0; j < k; j++)
                free(order[j]);
            return ws_err_set(err, WS_ENOMEM, "kv_slab: out of memory");
        }
    }
    uint64_t x = mix(seed);
    for (int k = 0; k < s->n; k++) {
        free(s->order[k]);
        s->order[k] = order[k];
        s->slots[k] = s->bytes[k] / page_bytes;
        s->next[k] = 0;
        size_t *o = order[k], n = s->slots[k];
        for (size_t i = 0; i < n; i++)
            o[i] = i;
        for (size_t i = n - 1; n > 1 && i > 0; i--) { /* Fisher-Yates */
            x = mix(x);
            const size_t j = (size_t)(x % (i + 1)), t = o[i];
            o[i] = o[j];
            o[j] = t;
        }
    }
    s->page_bytes = page_bytes;
    return 0;
}

size_t ws_kv_slab_slots(const ws_kv_slab *s, int k)
{
    return s->page_bytes ? s->slots[k] : 0;
}

char *ws_kv_slab_slot(const ws_kv_slab *s, int k, size_t i)
{
    return s->page_bytes ? s->base + s->off[k] + i * s->page_bytes : NULL;
}

void ws_kv_slab_count(int n_nodes, int n_seqs, int pages_per_seq, int page_tokens, size_t *need)
{
    memset(need, 0, sizeof *need * (size_t)n_nodes);
    for (int q = 0; q < n_seqs; q++)
        for (int j = 0; j < pages_per_seq; j++)
            need[ws_numa_place(q, j, page_tokens, n_nodes)]++;
}

int ws_kv_slab_deal(ws_kv_slab *s, int n_seqs, int pages_per_seq, int page_tokens,
                    const void **tables, int *page_nodes, ws_err *err)
{
    if (!s->page_bytes)
        return ws_err_set(err, WS_EINVAL, "kv_slab: deal before a cut");
    size_t need[WS_NUMA_MAX_NODES];
    ws_kv_slab_count(s->n, n_seqs, pages_per_seq, page_tokens, need);
    for (int k = 0; k < s->n; k++)
        if (need[k] > s->slots[k])
            return ws_err_set(err, WS_EINVAL,
                              "kv_slab: node %d's slice holds %zu pages of %zu bytes, the deal "
                              "needs %zu",
                              s->node_id[k], s->slots[k], s->page_bytes, need[k]);
    for (int q = 0; q < n_seqs; q++)
        for (int j = 0; j < pages_per_seq; j++) {
            const size_t i = (size_t)q * (size_t)pages_per_seq + (size_t)j;
            const int k = ws_numa_place(q, j, page_tokens, s->n);
            tables[i] = ws_kv_slab_slot(s, k, s->order[k][s->next[k]]);
            s->next[k] = (s->next[k] + 1) % s->slots[k];
            if (page_nodes)
                page_nodes[i] = s->node_id[k];
        }
    return 0;
}
