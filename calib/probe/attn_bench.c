/* attn_bench: see attn_bench.h. */
#include "attn_bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "kv_slab.h"
#include "membw.h"
#include "numa.h"

struct ws_attn_bench {
    ws_attn_bench_cfg cfg;
    ws_attn_problem p;
    ws_attn_seq *seqs;
    const void **tables; /* [batch][pages_per_seq] */
    int32_t *sel;        /* [batch][topk] */
    int pages_per_seq;
    size_t page_bytes, n_pages;
    /* The page slots: a slice per node of the pool holding exactly the pages the placement
     * rule gives that node (filled slice after slice). */
    ws_kv_slab *slab;
    int *page_nodes; /* [batch][pages_per_seq] OS node of each page; NULL on one node */
    float *q, *o, *lse;
};

static uint64_t mix(uint64_t x) /* splitmix64 */
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

typedef struct fill_job {
    ws_attn_bench *b;
    size_t pages_per_task;
} fill_job;

static char *slot_addr(const ws_attn_bench *b, size_t slot)
{
    int k = 0;
    while (slot >= ws_kv_slab_slots(b->slab, k))
        slot -= ws_kv_slab_slots(b->slab, k++);
    return ws_kv_slab_slot(b->slab, k, slot);
}

static void fill_task(void *ctx, int task, int thread)
{
    (void)thread;
    fill_job *j = ctx;
    ws_attn_bench *b = j->b;
    size_t p0 = (size_t)task * j->pages_per_task, p1 = p0 + j->pages_per_task;
    if (p1 > b->n_pages)
        p1 = b->n_pages;
    const int bf = b->cfg.kv.dtype == WS_DT_BF16;
    for (size_t pg = p0; pg < p1; pg++) {
        uint16_t *x = (uint16_t *)slot_addr(b, pg);
        uint64_t s = mix(b->cfg.seed ^ (pg * 0x2545f4914f6cdd1dull));
        for (size_t i = 0; i < b->page_bytes / 2; i++) {
            s ^= s << 13; /* xorshift64 */
            s ^= s >> 7;
            s ^= s << 17;
            float v = (float)(s >> 40) / 8388608.0f - 1.0f; /* 24 bits -> [-1, 1) */
            x[i] = bf ? ws_f32_to_bf16(v) : ws_f32_to_fp16(v);
        }
    }
}

ws_attn_bench *ws_attn_bench_create(const ws_attn_bench_cfg *cfg, ws_pool *pool, ws_err *err)
{
    const ws_kv_layout *kv = &cfg->kv;
    if (cfg->batch <= 0 || cfg->ctx <= 0 || kv->page_tokens <= 0) {
        ws_err_set(err, WS_EINVAL, "bench: batch (%d), context (%d) and page (%d) must be positive",
                   cfg->batch, cfg->ctx, kv->page_tokens);
        return NULL;
    }
    if (cfg->sparse != WS_SPARSE_NONE && (cfg->topk <= 0 || cfg->topk > cfg->ctx)) {
        ws_err_set(err, WS_EINVAL, "bench: sparse top-k %d outside 1..%d (the context)", cfg->topk,
                   cfg->ctx);
        return NULL;
    }
    if (cfg->sparse == WS_SPARSE_PAGES && cfg->topk % kv->page_tokens) {
        ws_err_set(err, WS_EINVAL, "bench: page-granular top-k %d is not a multiple of the page "
                   "size %d", cfg->topk, kv->page_tokens);
        return NULL;
    }
    ws_attn_bench *b = calloc(1, sizeof *b);
    if (!b) {
        ws_err_set(err, WS_ENOMEM, "bench: out of memory");
        return NULL;
    }
    b->cfg = *cfg;
    b->pages_per_seq = (cfg->ctx + kv->page_tokens - 1) / kv->page_tokens;
    b->n_pages = (size_t)cfg->batch * (size_t)b->pages_per_seq;
    b->page_bytes = ws_kv_page_bytes(kv);
    /* NUMA: with the pool over several nodes, page (s, p) goes to node ws_numa_place(s, p)
     * of the pool's nodes, in a slice of slots placed there before the fill touches it, and
     * the page table says so (ws_attn_seq.page_nodes), so each task runs where its pages
     * are. On one node: one slice, as without. */
    const int n_nodes = pool ? ws_pool_nodes(pool) : 1, P = kv->page_tokens;
    size_t slice[WS_NUMA_MAX_NODES];
    ws_kv_slab_count(n_nodes, cfg->batch, b->pages_per_seq, P, slice);
    for (int k = 0; k < n_nodes; k++)
        slice[k] *= b->page_bytes;
    const size_t nq = (size_t)cfg->batch * cfg->n_q_heads;
    b->slab = ws_kv_slab_create(pool, slice, err);
    if (!b->slab) {
        ws_attn_bench_destroy(b);
        return NULL;
    }
    if (n_nodes > 1)
        b->page_nodes = malloc(sizeof(int) * b->n_pages);
    b->seqs = calloc((size_t)cfg->batch, sizeof *b->seqs);
    b->tables = malloc(sizeof(void *) * b->n_pages);
    b->q = malloc(sizeof(float) * nq * kv->d_k);
    b->o = malloc(sizeof(float) * nq * kv->d_v);
    b->lse = malloc(sizeof(float) * nq);
    if (cfg->sparse != WS_SPARSE_NONE)
        b->sel = malloc(sizeof(int32_t) * (size_t)cfg->batch * cfg->topk);
    if (!b->seqs || !b->tables || !b->q || !b->o || !b->lse ||
        (cfg->sparse != WS_SPARSE_NONE && !b->sel) || (n_nodes > 1 && !b->page_nodes)) {
        ws_err_set(err, WS_ENOMEM, "bench: cannot allocate %.2f GB of KV and buffers",
                   (double)b->n_pages * (double)b->page_bytes / 1e9);
        ws_attn_bench_destroy(b);
        return NULL;
    }
    /* The slots (each node's in a seeded shuffled order), filled in parallel, then dealt
     * to the pages that go to each node in sequence order. */
    if (ws_kv_slab_cut(b->slab, b->page_bytes, cfg->seed + 1, err)) {
        ws_attn_bench_destroy(b);
        return NULL;
    }
    fill_job fj = {b, 64};
    int tasks = (int)((b->n_pages + fj.pages_per_task - 1) / fj.pages_per_task);
    if (pool)
        ws_pool_run(pool, tasks, fill_task, &fj);
    else
        for (int t = 0; t < tasks; t++)
            fill_task(&fj, t, 0);
    if (ws_kv_slab_deal(b->slab, cfg->batch, b->pages_per_seq, P, b->tables, b->page_nodes, err)) {
        ws_attn_bench_destroy(b);
        return NULL;
    }
    for (int sq = 0; sq < cfg->batch; sq++) {
        b->seqs[sq].pages = b->tables + (size_t)sq * b->pages_per_seq;
        b->seqs[sq].n_tokens = cfg->ctx;
        if (b->page_nodes)
            b->seqs[sq].page_nodes = b->page_nodes + (size_t)sq * b->pages_per_seq;
    }
    uint64_t s = mix(cfg->seed + 2);
    for (size_t i = 0; i < nq * kv->d_k; i++) {
        s = mix(s);
        b->q[i] = (float)(s >> 40) / 8388608.0f - 1.0f;
    }
    b->p = (ws_attn_problem){.kv = *kv, .n_q_heads = cfg->n_q_heads, .scale = cfg->scale,
                             .n_seqs = cfg->batch, .seqs = b->seqs, .q = b->q, .o = b->o,
                             .lse = b->lse};
    ws_attn_bench_select(b, 0);
    return b;
}

void ws_attn_bench_select(ws_attn_bench *b, int round)
{
    const ws_attn_bench_cfg *c = &b->cfg;
    if (c->sparse == WS_SPARSE_NONE)
        return;
    const int P = c->kv.page_tokens;
    for (int sq = 0; sq < c->batch; sq++) {
        int32_t *sel = b->sel + (size_t)sq * c->topk;
        uint64_t s = mix(c->seed ^ mix((uint64_t)round * 1000003u + (uint64_t)sq + 7));
        /* Floyd's sampling of m distinct values in [0, n), then a shuffle. */
        const int n = c->sparse == WS_SPARSE_PAGES ? c->ctx / P : c->ctx;
        const int m = c->sparse == WS_SPARSE_PAGES ? c->topk / P : c->topk;
        int32_t *pick = malloc(sizeof(int32_t) * (size_t)m);
        unsigned char *used = calloc((size_t)n / 8 + 1, 1);
        if (!pick || !used) { /* keep the previous selection */
            free(pick);
            free(used);
            return;
        }
        int k = 0;
        for (int j = n - m; j < n; j++) {
            s = mix(s);
            int t = (int)(s % (uint64_t)(j + 1));
            if (used[t >> 3] & (1u << (t & 7)))
                t = j;
            used[t >> 3] |= (unsigned char)(1u << (t & 7));
            pick[k++] = t;
        }
        for (int i = m - 1; i > 0; i--) {
            s = mix(s);
            int j = (int)(s % (uint64_t)(i + 1)), t = pick[i];
            pick[i] = pick[j];
            pick[j] = t;
        }
        if (c->sparse == WS_SPARSE_PAGES) {
            for (int i = 0; i < m; i++)
                for (int t = 0; t < P; t++)
                    sel[i * P + t] = pick[i] * P + t;
        } else {
            memcpy(sel, pick, sizeof(int32_t) * (size_t)m);
        }
        free(pick);
        free(used);
        b->seqs[sq].sel = sel;
        b->seqs[sq].n_sel = c->topk;
    }
}

#define EVICT_PAGES_PER_TASK 64

static void evict_task(void *ctx, int task, int thread)
{
    (void)thread;
    const ws_attn_bench *b = ctx;
    size_t p0 = (size_t)task * EVICT_PAGES_PER_TASK, p1 = p0 + EVICT_PAGES_PER_TASK;
    for (size_t pg = p0; pg < p1 && pg < b->n_pages; pg++)
        ws_membw_evict(b->tables[pg], b->page_bytes);
}

void ws_attn_bench_evict(const ws_attn_bench *b, ws_pool *pool)
{
    const int tasks = (int)((b->n_pages + EVICT_PAGES_PER_TASK - 1) / EVICT_PAGES_PER_TASK);
    if (pool)
        ws_pool_run(pool, tasks, evict_task, (void *)b);
    else
        for (int t = 0; t < tasks; t++)
            evict_task((void *)b, t, 0);
}

const ws_attn_problem *ws_attn_bench_problem(const ws_attn_bench *b)
{
    return &b->p;
}

int ws_attn_bench_nodes(const ws_attn_bench *b)
{
    return ws_kv_slab_nodes(b->slab);
}

double ws_attn_bench_kv_alloc_bytes(const ws_attn_bench *b)
{
    return (double)b->n_pages * (double)b->page_bytes;
}

double ws_attn_bench_flops(const ws_attn_bench *b)
{
    double tokens = 0;
    for (int s = 0; s < b->p.n_seqs; s++)
        tokens += b->seqs[s].sel ? b->seqs[s].n_sel : b->seqs[s].n_tokens;
    return tokens * 2.0 * b->p.n_q_heads * (b->p.kv.d_k + b->p.kv.d_v);
}

void ws_attn_bench_destroy(ws_attn_bench *b)
{
    if (!b)
        return;
    ws_kv_slab_destroy(b->slab);
    free(b->page_nodes);
    free(b->seqs);
    free(b->tables);
    free(b->sel);
    free(b->q);
    free(b->o);
    free(b->lse);
    free(b);
}
