/* ikv: see ikv.h. */
#include "ikv.h"

#include <stdlib.h>
#include <string.h>

#include "gpu_book.h"

/* A (sequence, layer)'s host pages in token order: pool page id and region of each. */
typedef struct ptab {
    int *id;
    unsigned char *region;
    int n, cap, n_cpu;
} ptab;

typedef struct seqst {
    int live;
    ptab *pt;     /* [n_layers] */
    ws_ring *ring; /* [n_layers] */
} seqst;

struct ws_ikv {
    ws_kv_layout gkv, ckv;
    int P, W, rpages, n_layers, max_seqs, pp_pages;
    size_t page_bytes, es;
    const ws_backend *be;
    int dev;             /* GPU regions in device memory (backend dev_alloc) */
    ws_ikv_pool *cpu, *xfer;
    int n_nodes;
    char *dwin, *pp;     /* D-windows [n_layers][max_seqs][rpages] pages; ping-pong */
    size_t dwin_bytes, pp_bytes;
    ws_pingpong ppb;
    seqst *seq;
    char *stage;         /* one page of host scratch */
    int *ring_idx;       /* [rpages] scratch */
    int *take_id;        /* scratch for batches */
    unsigned char *take_reg;
    int take_cap;
    int *extra[2];       /* [pool page id] holders beyond the first (ws_ikv_share), CPU and
                          * XFER; NULL until a page is shared */
    ws_ikv_stats st;
};

/* Holders of pool page id of region beyond its first. */
static int extra_holders(const ws_ikv *c, int region, int id)
{
    const int *x = c->extra[region == WS_IKV_CPU ? 0 : 1];
    return x ? x[id] : 0;
}

const char *ws_ikv_region_name(ws_ikv_region r)
{
    static const char *const names[] = {"cpu", "xfer", "dwin", "pingpong"};
    return (unsigned)r < WS_IKV_N_REGIONS ? names[r] : "?";
}

/* ---- GPU memory: device through the backend, or host buffers standing in ---- */

static int gpu_alloc(ws_ikv *c, size_t bytes, char **out, ws_err *err)
{
    *out = NULL;
    if (!bytes)
        return 0;
    if (c->dev) {
        void *p = NULL;
        if (c->be->dev_alloc(bytes, &p, err))
            return ws_err_prefix(err, "InplaceKVCache: GPU regions");
        *out = p;
        return 0;
    }
    *out = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!*out)
        return ws_err_set(err, WS_ENOMEM, "InplaceKVCache: cannot allocate %.1f MB for the GPU "
                          "regions (host stand-in)", bytes / 1e6);
    memset(*out, 0, bytes);
    return 0;
}

static void gpu_release(ws_ikv *c, char *p)
{
    if (!p)
        return;
    if (c->dev)
        c->be->dev_free(p);
    else
        free(p);
}

/* A copy to or from GPU memory (host: memcpy); blocking. */
static int gpu_copy(ws_ikv *c, void *dst, const void *src, size_t bytes, ws_err *err)
{
    if (!c->dev) {
        memcpy(dst, src, bytes);
        return 0;
    }
    int rc = c->be->copy_async(dst, src, bytes, NULL, err);
    return rc ? rc : c->be->stream_sync(NULL, err);
}

/* ---- layouts ---- */

/* Token t's rows of a token-major input (k [.][n_kv][d_k], v [.][n_kv][d_v]) into page
 * slot s of a rows-layout page. */
static void put_token_rows(const ws_ikv *c, char *page, int s, const char *k, const char *v)
{
    const ws_kv_layout *kv = &c->gkv;
    for (int h = 0; h < kv->n_kv_heads; h++) {
        memcpy(page + ws_kv_k_off(kv, h, s) * c->es, k + (size_t)h * kv->d_k * c->es,
               (size_t)kv->d_k * c->es);
        if (!kv->v_shares_k)
            memcpy(page + ws_kv_v_off(kv, h, s) * c->es, v + (size_t)h * kv->d_v * c->es,
                   (size_t)kv->d_v * c->es);
    }
}

/* A full page between the rows layout and the CPU layout (the same bytes when that is
 * rows too): rows into CPU with to_cpu, else back. */
static void relayout(const ws_ikv *c, void *dst, const void *src, int to_cpu)
{
    const ws_kv_layout *g = &c->gkv, *k = &c->ckv;
    if (!k->k_tiles && !k->v_pairs) {
        memcpy(dst, src, c->page_bytes);
        return;
    }
    uint16_t *d = dst;
    const uint16_t *s = src;
    for (int h = 0; h < g->n_kv_heads; h++)
        for (int t = 0; t < c->P; t++) {
            for (int pass = 0; pass < (g->v_shares_k ? 1 : 2); pass++) {
                const size_t row = pass ? ws_kv_v_off(g, h, t) : ws_kv_k_off(g, h, t);
                const int n = pass ? g->d_v : g->d_k;
                for (int e = 0; e < n; e++) {
                    const size_t ce = pass ? ws_kv_v_elem(k, h, t, e) : ws_kv_k_elem(k, h, t, e);
                    if (to_cpu)
                        d[ce] = s[row + e];
                    else
                        d[row + e] = s[ce];
                }
            }
        }
}

/* ---- create / destroy ---- */

static int check_config(const ws_ikv_config *cfg, ws_err *err)
{
    const ws_kv_layout *kv = &cfg->kv;
    if (kv->page_tokens <= 0 || cfg->window <= 0 || cfg->window % kv->page_tokens)
        return ws_err_set(err, WS_EINVAL,
                          "InplaceKVCache: window %d must be a positive multiple of the page "
                          "size %d", cfg->window, kv->page_tokens);
    if (kv->n_kv_heads < 1 || kv->d_k < 1 || kv->d_v < 1 || (kv->v_shares_k && kv->d_v > kv->d_k))
        return ws_err_set(err, WS_EINVAL, "InplaceKVCache: bad KV shape (%d heads, d_k %d, d_v %d)",
                          kv->n_kv_heads, kv->d_k, kv->d_v);
    if (kv->dtype != WS_DT_BF16 && kv->dtype != WS_DT_FP16)
        return ws_err_set(err, WS_EUNSUP, "InplaceKVCache: KV dtype %s (bf16 or fp16)",
                          ws_dtype_name(kv->dtype));
    if (kv->v_pairs || kv->k_tiles)
        return ws_err_set(err, WS_EINVAL,
                          "InplaceKVCache: the config's layout is the GPU's (rows); the CPU "
                          "region's is chosen from the ISA");
    if (cfg->n_q_heads < kv->n_kv_heads || cfg->n_q_heads % kv->n_kv_heads)
        return ws_err_set(err, WS_EINVAL, "InplaceKVCache: %d query heads for %d KV heads",
                          cfg->n_q_heads, kv->n_kv_heads);
    if (cfg->n_layers < 1 || cfg->max_seqs < 0 || cfg->pingpong_pages < 0)
        return ws_err_set(err, WS_EINVAL, "InplaceKVCache: %d layers, %d sequences, %d "
                          "ping-pong pages", cfg->n_layers, cfg->max_seqs, cfg->pingpong_pages);
    return 0;
}

ws_ikv *ws_ikv_create(const ws_ikv_config *cfg, ws_err *err)
{
    if (check_config(cfg, err))
        return NULL;
    ws_isa isa;
    if (ws_isa_resolve(cfg->isa, &isa, err))
        return NULL;
    ws_ikv *c = calloc(1, sizeof *c);
    if (!c) {
        ws_err_set(err, WS_ENOMEM, "InplaceKVCache: out of memory");
        return NULL;
    }
    c->gkv = cfg->kv;
    c->ckv = cfg->kv;
    c->ckv.v_pairs = ws_attn_cpu_v_pairs(&cfg->kv, cfg->n_q_heads, isa, cfg->token_lists);
    c->ckv.k_tiles = ws_attn_cpu_k_tiles(&cfg->kv, cfg->n_q_heads, isa, cfg->token_lists);
    c->P = cfg->kv.page_tokens;
    c->W = cfg->window;
    c->rpages = c->W / c->P;
    c->n_layers = cfg->n_layers;
    c->pp_pages = cfg->pingpong_pages;
    c->page_bytes = ws_kv_page_bytes(&cfg->kv);
    c->es = (size_t)ws_dtype_size(cfg->kv.dtype);
    c->be = cfg->backend ? cfg->backend : ws_backend_cpu();
    c->dev = c->be->dev_alloc && c->be->dev_free && c->be->copy_async && c->be->stream_sync;

    /* the fixed GPU regions against the budget */
    const size_t per_seq = (size_t)c->n_layers * (size_t)c->rpages * c->page_bytes;
    c->pp_bytes = 2 * (size_t)c->pp_pages * c->page_bytes;
    c->max_seqs = cfg->max_seqs;
    if (!c->max_seqs)
        c->max_seqs = cfg->gpu_budget > c->pp_bytes ? (int)((cfg->gpu_budget - c->pp_bytes) / per_seq)
                                                    : 0;
    c->dwin_bytes = per_seq * (size_t)c->max_seqs;
    if (c->max_seqs < 1 || c->dwin_bytes + c->pp_bytes > cfg->gpu_budget) {
        ws_err_set(err, WS_ENOMEM,
                   "GPU budget of %.3f MB too small: D-windows for %d sequences x %d layers x "
                   "%d tokens need %.3f MB and the ping-pong halves %.3f MB",
                   cfg->gpu_budget / 1e6, c->max_seqs > 0 ? c->max_seqs : 1, c->n_layers, c->W,
                   (c->max_seqs > 0 ? c->dwin_bytes : per_seq) / 1e6, c->pp_bytes / 1e6);
        free(c);
        return NULL;
    }
    c->st.gpu_bytes = c->dwin_bytes + c->pp_bytes;

    int node_ids[WS_NUMA_MAX_NODES];
    c->n_nodes = cfg->pool ? ws_pool_nodes(cfg->pool) : 1;
    for (int k = 0; k < c->n_nodes; k++)
        node_ids[k] = cfg->pool ? ws_pool_node_id(cfg->pool, k) : 0;
    ws_ikv_pool_config pc = {.name = "CPU region", .page_bytes = c->page_bytes,
                             .limit_bytes = cfg->host_limit, .n_nodes = c->n_nodes,
                             .node_ids = node_ids, .chunk_bytes = cfg->chunk_bytes};
    ws_ikv_pool_config px = {.name = "XFER region", .page_bytes = c->page_bytes,
                             .limit_bytes = cfg->pinned_limit, .pinned = 1, .backend = c->be,
                             .chunk_bytes = cfg->chunk_bytes, .lock = cfg->lock};
    c->seq = calloc((size_t)c->max_seqs, sizeof *c->seq);
    c->stage = aligned_alloc(64, (c->page_bytes + 63) / 64 * 64);
    c->ring_idx = malloc(sizeof(int) * (size_t)c->rpages);
    if (!c->seq || !c->stage || !c->ring_idx) {
        ws_err_set(err, WS_ENOMEM, "InplaceKVCache: out of memory");
        goto fail;
    }
    if (!(c->cpu = ws_ikv_pool_create(&pc, err)) || !(c->xfer = ws_ikv_pool_create(&px, err)))
        goto fail;
    if (gpu_alloc(c, c->dwin_bytes, &c->dwin, err) || gpu_alloc(c, c->pp_bytes, &c->pp, err))
        goto fail;
    ws_pingpong_init(&c->ppb, c->pp_pages);
    for (int s = 0; s < c->max_seqs; s++) {
        seqst *q = &c->seq[s];
        q->pt = calloc((size_t)c->n_layers, sizeof *q->pt);
        q->ring = calloc((size_t)c->n_layers, sizeof *q->ring);
        if (!q->pt || !q->ring) {
            ws_err_set(err, WS_ENOMEM, "InplaceKVCache: out of memory");
            goto fail;
        }
        for (int l = 0; l < c->n_layers; l++)
            ws_ring_init(&q->ring[l], c->W, c->P, NULL);
    }
    c->st.pages_capacity[WS_IKV_CPU] = ws_ikv_pool_capacity(c->cpu);
    c->st.pages_capacity[WS_IKV_XFER] = ws_ikv_pool_capacity(c->xfer);
    c->st.pages_capacity[WS_IKV_DWIN] = c->max_seqs * c->n_layers * c->rpages;
    c->st.pages_capacity[WS_IKV_PINGPONG] = 2 * c->pp_pages;
    return c;
fail:
    ws_ikv_destroy(c);
    return NULL;
}

void ws_ikv_destroy(ws_ikv *c)
{
    if (!c)
        return;
    for (int s = 0; c->seq && s < c->max_seqs; s++) {
        for (int l = 0; c->seq[s].pt && l < c->n_layers; l++) {
            free(c->seq[s].pt[l].id);
            free(c->seq[s].pt[l].region);
        }
        free(c->seq[s].pt);
        free(c->seq[s].ring);
    }
    free(c->seq);
    free(c->extra[0]);
    free(c->extra[1]);
    gpu_release(c, c->dwin);
    gpu_release(c, c->pp);
    ws_ikv_pool_destroy(c->cpu);
    ws_ikv_pool_destroy(c->xfer);
    free(c->stage);
    free(c->ring_idx);
    free(c->take_id);
    free(c->take_reg);
    free(c);
}

const ws_kv_layout *ws_ikv_cpu_layout(const ws_ikv *c) { return &c->ckv; }
const ws_kv_layout *ws_ikv_gpu_layout(const ws_ikv *c) { return &c->gkv; }
int ws_ikv_max_seqs(const ws_ikv *c) { return c->max_seqs; }

const char *ws_ikv_note(const ws_ikv *c) { return ws_ikv_pool_note(c->xfer); }

void ws_ikv_stats_get(const ws_ikv *c, ws_ikv_stats *out)
{
    *out = c->st;
    out->pages_in_use[WS_IKV_CPU] = ws_ikv_pool_in_use(c->cpu);
    out->pages_in_use[WS_IKV_XFER] = ws_ikv_pool_in_use(c->xfer);
    int dw = 0, seqs = 0;
    for (int s = 0; s < c->max_seqs; s++) {
        if (!c->seq[s].live)
            continue;
        seqs++;
        for (int l = 0; l < c->n_layers; l++)
            dw += (c->seq[s].ring[l].count + c->P - 1) / c->P;
    }
    out->pages_in_use[WS_IKV_DWIN] = dw;
    int pp = 0;
    for (int h = 0; h < 2; h++)
        if (c->ppb.state[h] != WS_PP_FREE)
            pp += c->ppb.n_pages[h];
    out->pages_in_use[WS_IKV_PINGPONG] = pp;
    out->xfer_pinned = ws_ikv_pool_pinned(c->xfer);
    out->seqs = seqs;
}

/* ---- sequences ---- */

static int check_sl(const ws_ikv *c, int seq, int layer, ws_err *err)
{
    if (seq < 0 || seq >= c->max_seqs || !c->seq[seq].live)
        return ws_err_set(err, WS_EINVAL, "InplaceKVCache: no sequence %d", seq);
    if (layer < 0 || layer >= c->n_layers)
        return ws_err_set(err, WS_EINVAL, "InplaceKVCache: no layer %d (of %d)", layer,
                          c->n_layers);
    return 0;
}

int ws_ikv_seq_add(ws_ikv *c, int *seq, ws_err *err)
{
    for (int s = 0; s < c->max_seqs; s++)
        if (!c->seq[s].live) {
            c->seq[s].live = 1;
            *seq = s;
            return 0;
        }
    return ws_err_set(err, WS_ENOMEM,
                      "InplaceKVCache: all %d sequence slots held (the GPU budget sizes the "
                      "D-windows for %d sequences)", c->max_seqs, c->max_seqs);
}

int ws_ikv_seq_free(ws_ikv *c, int seq, ws_err *err)
{
    int rc0 = check_sl(c, seq, 0, err);
    if (rc0)
        return rc0;
    seqst *q = &c->seq[seq];
    for (int l = 0; l < c->n_layers; l++) {
        ptab *t = &q->pt[l];
        for (int i = 0; i < t->n; i++) {
            const int r = t->region[i] == WS_IKV_CPU ? 0 : 1;
            if (extra_holders(c, t->region[i], t->id[i]) > 0)
                c->extra[r][t->id[i]]--; /* another sequence still holds it */
            else
                ws_ikv_pool_give(r == 0 ? c->cpu : c->xfer, t->id[i]);
        }
        t->n = t->n_cpu = 0;
        ws_ring_init(&q->ring[l], c->W, c->P, NULL);
    }
    q->live = 0;
    return 0;
}

static int ptab_reserve(ptab *t, int more, ws_err *err);

int ws_ikv_share(ws_ikv *c, int seq, int src, int n_pages, ws_err *err)
{
    int rc = check_sl(c, seq, 0, err);
    if (rc || (rc = check_sl(c, src, 0, err)))
        return rc;
    if (seq == src || n_pages < 0)
        return ws_err_set(err, WS_EINVAL, "InplaceKVCache: sequence %d cannot share %d pages "
                          "of sequence %d", seq, n_pages, src);
    for (int l = 0; l < c->n_layers; l++) {
        if (c->seq[seq].pt[l].n || c->seq[seq].ring[l].count)
            return ws_err_set(err, WS_EINVAL, "InplaceKVCache: sequence %d already holds "
                              "tokens in layer %d", seq, l);
        if (c->seq[src].pt[l].n < n_pages)
            return ws_err_set(err, WS_EINVAL, "InplaceKVCache: sequence %d holds %d host pages "
                              "in layer %d, not %d", src, c->seq[src].pt[l].n, l, n_pages);
    }
    for (int r = 0; r < 2 && n_pages > 0; r++)
        if (!c->extra[r]) {
            const int cap = ws_ikv_pool_capacity(r == 0 ? c->cpu : c->xfer);
            if (!(c->extra[r] = calloc((size_t)(cap > 0 ? cap : 1), sizeof(int))))
                return ws_err_set(err, WS_ENOMEM, "InplaceKVCache: out of memory");
        }
    for (int l = 0; l < c->n_layers; l++) {
        ptab *t = &c->seq[seq].pt[l];
        const ptab *f = &c->seq[src].pt[l];
        if ((rc = ptab_reserve(t, n_pages, err)))
            return rc;
        for (int i = 0; i < n_pages; i++) {
            t->id[i] = f->id[i];
            t->region[i] = f->region[i];
            t->n_cpu += f->region[i] == WS_IKV_CPU;
            c->extra[f->region[i] == WS_IKV_CPU ? 0 : 1][f->id[i]]++;
        }
        t->n = n_pages;
    }
    return 0;
}

int ws_ikv_page_holders(const ws_ikv *c, int seq, int layer, int i)
{
    if (check_sl(c, seq, layer, NULL) || i < 0 || i >= c->seq[seq].pt[layer].n)
        return 0;
    const ptab *t = &c->seq[seq].pt[layer];
    return 1 + extra_holders(c, t->region[i], t->id[i]);
}

int ws_ikv_tokens(const ws_ikv *c, int seq, int layer, ws_ikv_region r)
{
    if (check_sl(c, seq, layer, NULL))
        return 0;
    const ptab *t = &c->seq[seq].pt[layer];
    switch (r) {
    case WS_IKV_CPU: return t->n_cpu * c->P;
    case WS_IKV_XFER: return (t->n - t->n_cpu) * c->P;
    case WS_IKV_DWIN: return c->seq[seq].ring[layer].count;
    default: return 0;
    }
}

int ws_ikv_seq_tokens(const ws_ikv *c, int seq, int layer)
{
    if (check_sl(c, seq, layer, NULL))
        return 0;
    return c->seq[seq].pt[layer].n * c->P + c->seq[seq].ring[layer].count;
}

int ws_ikv_window_full_pages(const ws_ikv *c, int seq, int layer)
{
    if (check_sl(c, seq, layer, NULL))
        return 0;
    return ws_ring_full_pages(&c->seq[seq].ring[layer]);
}

int ws_ikv_host_pages(const ws_ikv *c, int seq, int layer)
{
    return check_sl(c, seq, layer, NULL) ? 0 : c->seq[seq].pt[layer].n;
}

/* ---- placing pages ---- */

static int ptab_reserve(ptab *t, int more, ws_err *err)
{
    if (t->n + more <= t->cap)
        return 0;
    int cap = t->cap ? t->cap : 16;
    while (cap < t->n + more)
        cap *= 2;
    int *id = realloc(t->id, sizeof *id * (size_t)cap);
    if (id)
        t->id = id;
    unsigned char *rg = realloc(t->region, (size_t)cap);
    if (rg)
        t->region = rg;
    if (!id || !rg)
        return ws_err_set(err, WS_ENOMEM, "InplaceKVCache: out of memory for a page table");
    t->cap = cap;
    return 0;
}

static int scratch(ws_ikv *c, int n, ws_err *err)
{
    if (n <= c->take_cap)
        return 0;
    int *id = realloc(c->take_id, sizeof *id * (size_t)n);
    if (id)
        c->take_id = id;
    unsigned char *rg = realloc(c->take_reg, (size_t)n);
    if (rg)
        c->take_reg = rg;
    if (!id || !rg)
        return ws_err_set(err, WS_ENOMEM, "InplaceKVCache: out of memory");
    c->take_cap = n;
    return 0;
}

static ws_ikv_pool *pool_of(ws_ikv *c, int region)
{
    return region == WS_IKV_CPU ? c->cpu : c->xfer;
}

/* Refuses a batch needing more pages than a region has left, naming it and the amounts. */
static int check_room(ws_ikv *c, int n_cpu, int n_xfer, const char *what, ws_err *err)
{
    ws_ikv_pool *p[2] = {c->cpu, c->xfer};
    const int need[2] = {n_cpu, n_xfer};
    const char *lim[2] = {"host limit", "pinned limit"};
    for (int r = 0; r < 2; r++) {
        const int left = ws_ikv_pool_capacity(p[r]) - ws_ikv_pool_in_use(p[r]);
        if (need[r] > left)
            return ws_err_set(err, WS_ENOMEM,
                              "%s refused: %s region full: needs %d pages (%.1f MB), %d of %d "
                              "left (%s %.1f MB)", what, ws_ikv_region_name((ws_ikv_region)r),
                              need[r], need[r] * (double)c->page_bytes / 1e6, left,
                              ws_ikv_pool_capacity(p[r]), lim[r],
                              ws_ikv_pool_capacity(p[r]) * (double)c->page_bytes / 1e6);
    }
    return 0;
}

/* Takes pages for n slots whose regions are in c->take_reg (CPU pages on the node the
 * placement rule gives page first_page + i of `seq`), into c->take_id; all or none. */
static int take_pages(ws_ikv *c, int n, const int *seq, const int *first_page, ws_err *err)
{
    for (int i = 0; i < n; i++) {
        const int node = ws_numa_place(seq[i], first_page[i], c->P, c->n_nodes);
        int rc = ws_ikv_pool_take(pool_of(c, c->take_reg[i]), node, &c->take_id[i], err);
        if (rc) {
            while (i-- > 0)
                ws_ikv_pool_give(pool_of(c, c->take_reg[i]), c->take_id[i]);
            return rc;
        }
    }
    return 0;
}

/* Writes a full rows-layout page (host memory) into a taken page and records it. */
static void place(ws_ikv *c, ptab *t, int region, int id, const void *rows)
{
    ws_ikv_pool *p = pool_of(c, region);
    void *dst = ws_ikv_pool_addr(p, id);
    if (region == WS_IKV_CPU)
        relayout(c, dst, rows, 1);
    else
        memcpy(dst, rows, c->page_bytes);
    if (ws_ikv_pool_mark_written(p, id) != WS_IKV_PAGE_TAKEN)
        c->st.bytes_moved += c->page_bytes; /* a placed page written again */
    c->st.bytes_written[region] += c->page_bytes;
    t->id[t->n] = id;
    t->region[t->n] = (unsigned char)region;
    t->n++;
    t->n_cpu += region == WS_IKV_CPU;
}

int ws_ikv_prefill(ws_ikv *c, int seq, int layer, int n, const void *k, const void *v,
                   int n_cpu_pages, ws_err *err)
{
    int rc0 = check_sl(c, seq, layer, err);
    if (rc0)
        return rc0;
    ptab *t = &c->seq[seq].pt[layer];
    ws_ring *ring = &c->seq[seq].ring[layer];
    if (ring->count)
        return ws_err_set(err, WS_EINVAL, "InplaceKVCache: prefill of sequence %d layer %d, "
                          "whose window already holds tokens", seq, layer);
    if (n < 0 || (n > 0 && (!k || (!v && !c->gkv.v_shares_k))))
        return ws_err_set(err, WS_EINVAL, "InplaceKVCache: prefill of %d tokens without K/V", n);
    const int full = n / c->P, tail = n % c->P;
    if (n_cpu_pages < 0 || n_cpu_pages > full)
        return ws_err_set(err, WS_EINVAL, "InplaceKVCache: %d CPU pages of a %d-page prefill",
                          n_cpu_pages, full);
    int rc = check_room(c, n_cpu_pages, full - n_cpu_pages, "prefill", err);
    if (rc || (rc = scratch(c, full, err)) || (rc = ptab_reserve(t, full, err)))
        return rc;
    int *sq = calloc((size_t)(2 * full + 1), sizeof(int));
    if (!sq)
        return ws_err_set(err, WS_ENOMEM, "InplaceKVCache: out of memory");
    for (int j = 0; j < full; j++) {
        c->take_reg[j] = j < n_cpu_pages ? WS_IKV_CPU : WS_IKV_XFER;
        sq[j] = seq;
        sq[full + j] = t->n + j;
    }
    rc = take_pages(c, full, sq, sq + full, err);
    free(sq);
    if (rc)
        return rc;
    const size_t kt = (size_t)c->gkv.n_kv_heads * c->gkv.d_k * c->es;
    const size_t vt = (size_t)c->gkv.n_kv_heads * c->gkv.d_v * c->es;
    const char *kk = k, *vv = v;
    for (int j = 0; j < full; j++) {
        for (int s = 0; s < c->P; s++) {
            const size_t tok = (size_t)j * c->P + s;
            put_token_rows(c, c->stage, s, kk + tok * kt, vv ? vv + tok * vt : NULL);
        }
        place(c, t, c->take_reg[j], c->take_id[j], c->stage);
    }
    c->st.pages_prefilled += (uint64_t)full;
    if (tail) { /* the last partial page into the (empty) window: its ring page 0 */
        int slot = 0;
        for (int s = 0; s < tail; s++) {
            ws_ring_append(ring, &slot, NULL);
            const size_t tok = (size_t)full * c->P + s;
            put_token_rows(c, c->stage, slot, kk + tok * kt, vv ? vv + tok * vt : NULL);
        }
        char *dst = c->dwin + (((size_t)layer * c->max_seqs + seq) * c->rpages) * c->page_bytes;
        if ((rc = gpu_copy(c, dst, c->stage, c->page_bytes, err)))
            return rc;
        c->st.bytes_written[WS_IKV_DWIN] += (uint64_t)tail * (kt + (vv ? vt : 0));
    }
    return 0;
}

static char *ring_page(const ws_ikv *c, int seq, int layer, int page)
{
    return c->dwin + (((size_t)layer * c->max_seqs + seq) * c->rpages + page) * c->page_bytes;
}

int ws_ikv_append(ws_ikv *c, int layer, const int *seqs, int n, const void *k_new,
                  const void *v_new, ws_err *err)
{
    for (int i = 0; i < n; i++) {
        int rc = check_sl(c, seqs[i], layer, err);
        if (rc)
            return rc;
        for (int j = 0; j < i; j++)
            if (seqs[j] == seqs[i])
                return ws_err_set(err, WS_EINVAL, "InplaceKVCache: sequence %d twice in one "
                                  "append", seqs[i]);
        const ws_ring *r = &c->seq[seqs[i]].ring[layer];
        if (r->count >= r->window)
            return ws_err_set(err, WS_EINVAL, "InplaceKVCache: D-window of sequence %d layer %d "
                              "full (%d tokens); flush before appending", seqs[i], layer, c->W);
    }
    if (n > 0 && (!k_new || (!v_new && !c->gkv.v_shares_k)))
        return ws_err_set(err, WS_EINVAL, "InplaceKVCache: append without K/V");
    const ws_kv_layout *kv = &c->gkv;
    const size_t kr = (size_t)kv->d_k * c->es, vr = (size_t)kv->d_v * c->es;
    const char *kk = k_new, *vv = v_new;
    for (int i = 0; i < n; i++) {
        int slot;
        ws_ring_append(&c->seq[seqs[i]].ring[layer], &slot, NULL);
        char *page = ring_page(c, seqs[i], layer, slot / c->P);
        const int s = slot % c->P;
        for (int h = 0; h < kv->n_kv_heads; h++) {
            const size_t tk = ((size_t)i * kv->n_kv_heads + h);
            int rc = gpu_copy(c, page + ws_kv_k_off(kv, h, s) * c->es, kk + tk * kr, kr, err);
            if (!rc && !kv->v_shares_k)
                rc = gpu_copy(c, page + ws_kv_v_off(kv, h, s) * c->es, vv + tk * vr, vr, err);
            if (rc)
                return rc;
        }
        c->st.bytes_written[WS_IKV_DWIN] +=
            (uint64_t)kv->n_kv_heads * (kr + (kv->v_shares_k ? 0 : vr));
    }
    return 0;
}

int ws_ikv_flush(ws_ikv *c, const ws_ikv_flush_req *req, int n_req, ws_err *err)
{
    int n_cpu = 0, n_xfer = 0;
    for (int i = 0; i < n_req; i++) {
        const ws_ikv_flush_req *q = &req[i];
        int rc = check_sl(c, q->seq, q->layer, err);
        if (rc)
            return rc;
        for (int j = 0; j < i; j++)
            if (req[j].seq == q->seq && req[j].layer == q->layer)
                return ws_err_set(err, WS_EINVAL, "InplaceKVCache: sequence %d layer %d twice "
                                  "in one flush", q->seq, q->layer);
        const int full = ws_ring_full_pages(&c->seq[q->seq].ring[q->layer]);
        if (q->n_pages < 0 || q->n_pages > full || q->n_cpu < 0 || q->n_cpu > q->n_pages)
            return ws_err_set(err, WS_EINVAL, "InplaceKVCache: flush of %d pages (%d to the CPU) "
                              "from sequence %d layer %d, whose window holds %d full pages",
                              q->n_pages, q->n_cpu, q->seq, q->layer, full);
        n_cpu += q->n_cpu;
        n_xfer += q->n_pages - q->n_cpu;
    }
    int rc = check_room(c, n_cpu, n_xfer, "flush", err);
    const int total = n_cpu + n_xfer;
    if (rc || (rc = scratch(c, total, err)))
        return rc;
    for (int i = 0; i < n_req; i++)
        if ((rc = ptab_reserve(&c->seq[req[i].seq].pt[req[i].layer], req[i].n_pages, err)))
            return rc;
    int *sq = calloc((size_t)(2 * total + 1), sizeof(int));
    if (!sq)
        return ws_err_set(err, WS_ENOMEM, "InplaceKVCache: out of memory");
    for (int i = 0, m = 0; i < n_req; i++) {
        const ptab *t = &c->seq[req[i].seq].pt[req[i].layer];
        for (int j = 0; j < req[i].n_pages; j++, m++) {
            c->take_reg[m] = j < req[i].n_cpu ? WS_IKV_CPU : WS_IKV_XFER;
            sq[m] = req[i].seq;
            sq[total + m] = t->n + j;
        }
    }
    rc = take_pages(c, total, sq, sq + total, err);
    free(sq);
    if (rc)
        return rc;
    for (int i = 0, m = 0; i < n_req; i++) {
        const ws_ikv_flush_req *q = &req[i];
        ws_ring *ring = &c->seq[q->seq].ring[q->layer];
        ptab *t = &c->seq[q->seq].pt[q->layer];
        ws_ring_flush(ring, q->n_pages, c->ring_idx, NULL);
        for (int j = 0; j < q->n_pages; j++, m++) {
            const char *src = ring_page(c, q->seq, q->layer, c->ring_idx[j]);
            if (c->dev) { /* one D2H copy of the page, then (CPU region) its layout */
                int e = gpu_copy(c, c->stage, src, c->page_bytes, err);
                if (e && !rc)
                    rc = e;
                src = c->stage;
            }
            place(c, t, c->take_reg[m], c->take_id[m], src);
        }
        c->st.pages_flushed += (uint64_t)q->n_pages;
    }
    c->st.flushes++;
    return rc;
}

int ws_ikv_reformat(ws_ikv *c, int seq, int layer, int n_pages, ws_ikv_region to, ws_err *err)
{
    int rc = check_sl(c, seq, layer, err);
    if (rc)
        return rc;
    if (to != WS_IKV_CPU && to != WS_IKV_XFER)
        return ws_err_set(err, WS_EINVAL, "InplaceKVCache: reformat into region %s",
                          ws_ikv_region_name(to));
    const int from = to == WS_IKV_CPU ? WS_IKV_XFER : WS_IKV_CPU;
    ptab *t = &c->seq[seq].pt[layer];
    const int have = from == WS_IKV_CPU ? t->n_cpu : t->n - t->n_cpu;
    if (n_pages < 0 || n_pages > have)
        return ws_err_set(err, WS_EINVAL, "InplaceKVCache: reformat of %d pages of sequence %d "
                          "layer %d into %s, which holds %d in %s", n_pages, seq, layer,
                          ws_ikv_region_name(to), have, ws_ikv_region_name(from));
    if (n_pages == 0)
        return 0;
    if ((rc = check_room(c, to == WS_IKV_CPU ? n_pages : 0, to == WS_IKV_XFER ? n_pages : 0,
                         "reformat", err)) ||
        (rc = scratch(c, 2 * n_pages, err)))
        return rc;
    /* the newest pages of the other region: their slots, then fresh pages (all or none) */
    int *slot = c->take_id + n_pages;
    for (int j = t->n - 1, m = 0; m < n_pages; j--)
        if (t->region[j] == from)
            slot[m++] = j;
    for (int m = 0; m < n_pages; m++)
        if (extra_holders(c, from, t->id[slot[m]]) > 0)
            return ws_err_set(err, WS_EINVAL, "InplaceKVCache: reformat of sequence %d layer "
                              "%d would move page %d, which another sequence shares",
                              seq, layer, slot[m]);
    ws_ikv_pool *dst = pool_of(c, to), *src = pool_of(c, from);
    for (int m = 0; m < n_pages; m++) {
        const int node = ws_numa_place(seq, slot[m], c->P, c->n_nodes);
        if ((rc = ws_ikv_pool_take(dst, node, &c->take_id[m], err))) {
            while (m-- > 0)
                ws_ikv_pool_give(dst, c->take_id[m]);
            return rc;
        }
    }
    for (int m = 0; m < n_pages; m++) {
        const int j = slot[m], old = t->id[j];
        void *to_addr = ws_ikv_pool_addr(dst, c->take_id[m]);
        const void *from_addr = ws_ikv_pool_addr(src, old);
        relayout(c, to_addr, from_addr, to == WS_IKV_CPU);
        ws_ikv_pool_mark_written(dst, c->take_id[m]);
        ws_ikv_pool_give(src, old);
        t->id[j] = c->take_id[m];
        t->region[j] = (unsigned char)to;
        t->n_cpu += to == WS_IKV_CPU ? 1 : -1;
    }
    c->st.bytes_reformatted += (uint64_t)n_pages * c->page_bytes;
    c->st.pages_reformatted += (uint64_t)n_pages;
    return 0;
}

/* ---- views ---- */

int ws_ikv_view_cpu(const ws_ikv *c, int seq, int layer, const void **pages, int *nodes,
                    int cap, ws_attn_seq *out, ws_err *err)
{
    int rc0 = check_sl(c, seq, layer, err);
    if (rc0)
        return rc0;
    const ptab *t = &c->seq[seq].pt[layer];
    if (t->n_cpu > cap)
        return ws_err_set(err, WS_EINVAL, "InplaceKVCache: %d CPU pages, room for %d", t->n_cpu,
                          cap);
    int m = 0;
    for (int i = 0; i < t->n; i++)
        if (t->region[i] == WS_IKV_CPU) {
            pages[m] = ws_ikv_pool_addr(c->cpu, t->id[i]);
            if (nodes)
                nodes[m] = ws_ikv_pool_node_id(c->cpu, t->id[i]);
            m++;
        }
    memset(out, 0, sizeof *out);
    out->pages = pages;
    out->n_tokens = m * c->P;
    out->page_nodes = nodes;
    return 0;
}

/* The window's pages of (seq, layer) after pages[m]; returns the new m. */
static int window_pages(const ws_ikv *c, int seq, int layer, const void **pages, int m)
{
    const ws_ring *r = &c->seq[seq].ring[layer];
    const int np = ws_ring_pages(r, c->ring_idx);
    for (int j = 0; j < np; j++)
        pages[m++] = ring_page(c, seq, layer, c->ring_idx[j]);
    return m;
}

int ws_ikv_view_gpu(const ws_ikv *c, int seq, int layer, const void **pages, int cap,
                    ws_attn_seq *out, ws_err *err)
{
    int rc0 = check_sl(c, seq, layer, err);
    if (rc0)
        return rc0;
    const ptab *t = &c->seq[seq].pt[layer];
    const ws_ring *r = &c->seq[seq].ring[layer];
    const int need = t->n - t->n_cpu + (r->count + c->P - 1) / c->P;
    if (need > cap)
        return ws_err_set(err, WS_EINVAL, "InplaceKVCache: %d GPU pages, room for %d", need, cap);
    int m = 0;
    for (int i = 0; i < t->n; i++)
        if (t->region[i] == WS_IKV_XFER)
            pages[m++] = ws_ikv_pool_addr(c->xfer, t->id[i]);
    const int n_xfer = m;
    m = window_pages(c, seq, layer, pages, m);
    memset(out, 0, sizeof *out);
    out->pages = pages;
    out->n_tokens = n_xfer * c->P + r->count;
    return 0;
}

int ws_ikv_stream(ws_ikv *c, int layer, const int *seqs, int n, const void **pages, int cap,
                  ws_attn_seq *views, int *half, ws_err *err)
{
    int n_xfer = 0, need = 0;
    for (int i = 0; i < n; i++) {
        int rc = check_sl(c, seqs[i], layer, err);
        if (rc)
            return rc;
        const ptab *t = &c->seq[seqs[i]].pt[layer];
        n_xfer += t->n - t->n_cpu;
        need += t->n - t->n_cpu + (c->seq[seqs[i]].ring[layer].count + c->P - 1) / c->P;
    }
    if (n_xfer > c->pp_pages)
        return ws_err_set(err, WS_ENOMEM, "stream refused: layer %d has %d XFER pages, a "
                          "ping-pong half holds %d", layer, n_xfer, c->pp_pages);
    if (need > cap)
        return ws_err_set(err, WS_EINVAL, "InplaceKVCache: %d GPU pages, room for %d", need, cap);
    int h, rc = ws_pingpong_submit(&c->ppb, n_xfer, layer, &h, err);
    if (rc)
        return rc;
    int m = 0, slot = 0;
    for (int i = 0; i < n && !rc; i++) {
        const ptab *t = &c->seq[seqs[i]].pt[layer];
        const int first = m;
        for (int j = 0; j < t->n && !rc; j++) {
            if (t->region[j] != WS_IKV_XFER)
                continue;
            char *dst = c->pp + ws_pingpong_slot(&c->ppb, h, slot++) * c->page_bytes;
            rc = gpu_copy(c, dst, ws_ikv_pool_addr(c->xfer, t->id[j]), c->page_bytes, err);
            pages[m++] = dst;
        }
        const int nx = m - first;
        m = window_pages(c, seqs[i], layer, pages, m);
        memset(&views[i], 0, sizeof views[i]);
        views[i].pages = pages + first;
        views[i].n_tokens = nx * c->P + c->seq[seqs[i]].ring[layer].count;
    }
    if (!rc)
        rc = ws_pingpong_acquire(&c->ppb, h, err);
    if (rc) { /* give the half back */
        ws_pingpong_acquire(&c->ppb, h, NULL);
        ws_pingpong_release(&c->ppb, h, NULL);
        return rc;
    }
    c->st.bytes_streamed += (uint64_t)n_xfer * c->page_bytes;
    c->st.bytes_written[WS_IKV_PINGPONG] += (uint64_t)n_xfer * c->page_bytes;
    *half = h;
    return 0;
}

int ws_ikv_stream_release(ws_ikv *c, int half, ws_err *err)
{
    return ws_pingpong_release(&c->ppb, half, err);
}

void ws_ikv_spilled(const ws_ikv *c, int layer, const int *seqs, int n, double *cpu_tokens,
                    double *spilled_tokens)
{
    double cpu = 0, all = 0;
    const int m = seqs ? n : c->max_seqs;
    for (int i = 0; i < m; i++) {
        const int s = seqs ? seqs[i] : i;
        if (s < 0 || s >= c->max_seqs || !c->seq[s].live || layer < 0 || layer >= c->n_layers)
            continue;
        const ptab *t = &c->seq[s].pt[layer];
        cpu += (double)t->n_cpu * c->P;
        all += (double)t->n * c->P;
    }
    *cpu_tokens = cpu;
    *spilled_tokens = all;
}

int ws_ikv_page(const ws_ikv *c, int seq, int layer, int i, ws_ikv_region *region,
                const void **addr, int *node, ws_err *err)
{
    int rc0 = check_sl(c, seq, layer, err);
    if (rc0)
        return rc0;
    const ptab *t = &c->seq[seq].pt[layer];
    if (i < 0 || i >= t->n)
        return ws_err_set(err, WS_EINVAL, "InplaceKVCache: no host page %d (of %d)", i, t->n);
    *region = (ws_ikv_region)t->region[i];
    *addr = ws_ikv_pool_addr(pool_of((ws_ikv *)c, t->region[i]), t->id[i]);
    *node = *region == WS_IKV_CPU ? ws_ikv_pool_node_id(c->cpu, t->id[i]) : -1;
    return 0;
}
