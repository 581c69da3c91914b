/* run_engine: the live decode engine (run_engine.h). */
#include "run_engine.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "attn_split.h"
#include "backend.h"
#include "decode.h"
#include "experts.h"
#include "gemm_bf16.h"
#include "gemm_cpu.h"
#include "gemm_int8.h"
#include "half.h"
#include "ikv.h"
#include "pool.h"
#include "schedule.h"
#include "wformat.h"
#include "ws_util.h"

static int int8_experts(const ws_engine_cfg *c)
{
    return c->cpu_expert_weights && !strcmp(c->cpu_expert_weights->name, "int8");
}

void ws_engine_cfg_default(ws_engine_cfg *c)
{
    memset(c, 0, sizeof *c);
    ws_serving_default(&c->srv);
    c->batching = WS_BATCH_SERIAL; /* the closed batch's prompts one chunk at a time */
    c->gpu = WS_ENGINE_GPU_MODELED;
    c->batch = 4; /* the closed batch: 4 x (4096 + 32) tokens */
    c->prompt = 4096;
    c->output = 32;
    c->seed = 1;
    c->mem_fraction = 0.5;
    c->isa = WS_ISA_AUTO;
}

void ws_engine_cost_cfg(const ws_engine_cfg *c, ws_deploy_cfg *cc)
{
    ws_deploy_cfg_default(cc);
    /* a modeled GPU copies nothing: no copy runs beside the engine's CPU work */
    cc->no_copies = c->gpu == WS_ENGINE_GPU_MODELED;
    if (c->pingpong_bytes > 0)
        cc->pingpong_bytes = c->pingpong_bytes;
    if (int8_experts(c)) /* the bytes the CPU experts stream */
        cc->cpu_expert_bytes = c->cpu_expert_weights->bytes;
}

/* ---- synthetic data: a counter-based generator, so any token's KV can be rebuilt ---- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* n values in [-1, 1) from the stream named by (seed, a, b, c, d). */
static void fill_uniform(float *out, size_t n, uint64_t seed, uint64_t a, uint64_t b, uint64_t c,
                         uint64_t d)
{
    uint64_t s = mix64(seed ^ mix64(a ^ mix64(b ^ mix64(c ^ mix64(d)))));
    if (!s)
        s = 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        out[i] = (float)(s >> 40) * (1.0f / 8388608.0f) - 1.0f;
    }
}

enum { GEN_K = 1, GEN_V = 2, GEN_Q = 3, GEN_X = 4, GEN_W = 5 }; /* generator streams */

/* Token-major K and V of tokens [t0, t0 + n) of (seq, layer) in bf16: k [n][row_k], v
 * [n][row_v] (v NULL when V shares K). */
static void gen_kv(uint64_t seed, int layer, int seq, int t0, int n, int row_k, int row_v,
                   uint16_t *k, uint16_t *v, float *tmp)
{
    for (int i = 0; i < n; i++) {
        const uint64_t t = (uint64_t)(t0 + i);
        fill_uniform(tmp, (size_t)row_k, seed, GEN_K, (uint64_t)layer, (uint64_t)seq, t);
        for (int e = 0; e < row_k; e++)
            k[(size_t)i * row_k + e] = ws_f32_to_bf16(tmp[e]);
        if (v) {
            fill_uniform(tmp, (size_t)row_v, seed, GEN_V, (uint64_t)layer, (uint64_t)seq, t);
            for (int e = 0; e < row_v; e++)
                v[(size_t)i * row_v + e] = ws_f32_to_bf16(tmp[e]);
        }
    }
}

/* ---- the engine's state ---- */

typedef struct expert_slot {
    ws_expert_bf16 w; /* [2I x H] gate|up then [H x I] down, in mem (bf16 experts) */
    ws_expert_int8 q; /* the same quantized, in mem (int8 experts) */
    void *mem;        /* on 2 MiB pages where the kernel grants them */
} expert_slot;

typedef struct eng {
    const ws_engine_cfg *cfg;
    const ws_model *m;
    ws_cost_model cm;
    ws_ctl ctl; /* every placement decision (control.h), as in the simulator */
    ws_ikv *kv;
    ws_pool *pool;
    ws_kv_layout gl;
    int nq, P, W, L, B, row_k, row_v, threads;
    float scale;
    int *seqs;
    /* attention buffers */
    float *q, *oc, *lc, *og, *lg, *om, *lm;
    const void **pages;
    int *nodes, page_cap;
    ws_attn_seq *views;
    uint16_t *knew, *vnew;
    float *tmp;
    /* MoE */
    int H, I, E, K, slots;
    expert_slot *ex;
    float *w_router, *x, *logits, *xb, *yb, *y;
    int *pick, *cnt, *tok;
    float *gate;
    int *hit, *hit_off, n_hit;     /* the step's experts and their rows' offsets in xb / yb */
    const ws_expert_bf16 **hit_ex; /* the hit experts' weights, in hit order */
    const ws_expert_int8 **hit_q;  /* the same, int8 experts */
    int int8;                      /* the CPU experts run in int8 */
    double expert_verify;          /* worst |y - reference| / bound (verify, int8) */
    /* CUDA: the GPU half on the device (gpu == WS_ENGINE_GPU_CUDA) */
    const ws_backend *be;
    ws_gpu_stream *cs;
    ws_gpu_event *ev0, *ev1;
    ws_gpu_attn *gattn;
    float *q_d, *o_d, *lse_d;
    const void **gpages;
    ws_attn_seq *gviews;
    /* timeline */
    int verify_full_cap;
    uint16_t *ref_pages;
    double *o_ref, *lse_ref;
} eng;

/* An expert's weights: bf16 [2I x H] + [H x I], or their int8 copies and scales. */
static double expert_weight_bytes(int H, int I, int int8)
{
    return int8 ? (double)ws_expert_int8_bytes(H, I) : 3.0 * H * I * sizeof(uint16_t);
}

/* An expert slot's allocation, in whole 2 MiB pages when it is at least one (so each can be
 * a huge page), else in 64 B lines. */
static size_t expert_slot_align(int H, int I, int int8)
{
    return expert_weight_bytes(H, I, int8) >= (double)(2 << 20) ? (size_t)2 << 20 : 64;
}

static double expert_slot_bytes(int H, int I, int int8)
{
    const double a = (double)expert_slot_align(H, I, int8);
    return ceil(expert_weight_bytes(H, I, int8) / a) * a;
}

static int expert_slot_count(const ws_model *m, int batch)
{
    if (m->n_experts <= 0)
        return 0;
    const long need = (long)batch * (m->experts_per_tok > 0 ? m->experts_per_tok : 1);
    return need < m->n_experts ? (int)need : m->n_experts;
}

/* Bytes of the buffers that do not grow with depth: expert slots, router, ping-pong. */
static double fixed_bytes(const ws_engine_cfg *c, double page_bytes, int pingpong_pages)
{
    const ws_model *m = c->model;
    return expert_slot_count(m, c->batch) *
               expert_slot_bytes(m->hidden, m->moe_intermediate, int8_experts(c)) +
           (double)m->hidden * m->n_experts * sizeof(float) + 2.0 * pingpong_pages * page_bytes;
}

static int pages_per_seq(const ws_engine_cfg *c, int P)
{
    return (c->prompt + c->output + P - 1) / P + 1;
}

static int pingpong_pages_for(const ws_engine_cfg *c, int P, double page_bytes,
                              double pingpong_bytes)
{
    /* Streaming happens for the GPU half's values (verify, CUDA): a half then holds every
     * XFER page of a layer. Modeled without verify nothing lands: the cost model's half. */
    if (c->verify || c->gpu == WS_ENGINE_GPU_CUDA)
        return c->batch * pages_per_seq(c, P);
    int n = (int)ceil(pingpong_bytes / page_bytes);
    return n < 1 ? 1 : n;
}

int ws_engine_layers_fit(const ws_engine_cfg *c, double bytes)
{
    ws_kv_layout kv;
    int nq;
    float sc;
    const int P = c->par.page_tokens;
    if (ws_model_attn_shape(c->model, WS_DT_BF16, P, &kv, &nq, &sc, NULL))
        return 0;
    const double pb = (double)ws_kv_page_bytes(&kv);
    const double per_layer =
        (double)c->batch * pages_per_seq(c, P) * pb + (double)c->batch * c->window / P * pb;
    const double left = bytes - fixed_bytes(c, pb, pingpong_pages_for(c, P, pb, 32 << 20));
    if (left < per_layer)
        return 0;
    const double n = floor(left / per_layer);
    return n > c->model->layers ? c->model->layers : (int)n;
}

static void *xcalloc(size_t n, size_t sz, int *bad)
{
    void *p = calloc(n ? n : 1, sz);
    if (!p)
        *bad = 1;
    return p;
}

static void eng_free(eng *e)
{
    if (e->be) {
        if (e->gattn)
            e->be->attn_destroy(e->gattn);
        if (e->ev0)
            e->be->event_destroy(e->ev0);
        if (e->ev1)
            e->be->event_destroy(e->ev1);
        if (e->cs)
            e->be->stream_destroy(e->cs);
        void *d[] = {e->q_d, e->o_d, e->lse_d};
        for (int i = 0; i < 3; i++)
            if (d[i])
                e->be->dev_free(d[i]);
    }
    free((void *)e->gpages);
    free(e->gviews);
    if (e->kv)
        ws_ikv_destroy(e->kv);
    if (e->pool)
        ws_pool_destroy(e->pool);
    ws_cost_model_free(&e->cm);
    if (e->ex)
        for (int i = 0; i < e->slots; i++)
            free(e->ex[i].mem);
    free(e->ex);
    free(e->hit);
    free((void *)e->hit_ex);
    free((void *)e->hit_q);
    free(e->hit_off);
    void *bufs[] = {
        e->seqs,          e->q,     e->oc,     e->lc,   e->og,   e->lg,  e->om,       e->lm,
        (void *)e->pages, e->nodes, e->views,  e->knew, e->vnew, e->tmp, e->w_router, e->x,
        e->logits,        e->xb,    e->yb,     e->y,    e->pick, e->cnt, e->tok,      e->gate,
        e->ref_pages,     e->o_ref, e->lse_ref};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
}

/* The CUDA device through the backend table: the first device, its name in the label. */
static int cuda_open(eng *e, ws_run_result *res, ws_err *err)
{
    const ws_backend *be = ws_backend_cuda(err);
    if (!be)
        return ws_err_prefix(err, "run: --gpu cuda");
    ws_err cerr = {0};
    if (be->device_count(&cerr) < 1)
        return ws_err_set(err, WS_EDEVICE, "run: --gpu cuda: no CUDA device (%s)", cerr.msg);
    ws_device_info di;
    int rc = be->device_info(0, &di, err);
    if (!rc)
        rc = be->set_device(0, err);
    if (rc)
        return rc;
    e->be = be;
    snprintf(res->gpu_label, sizeof res->gpu_label, "cuda:%s", di.name);
    return 0;
}

/* Device buffers, stream, events and the attention workspace, once the cache exists. */
static int cuda_init(eng *e, int page_cap, ws_err *err)
{
    const ws_backend *be = e->be;
    const size_t nq = (size_t)e->B * e->nq;
    int rc = be->stream_create(&e->cs, err);
    if (!rc)
        rc = be->event_create(&e->ev0, err);
    if (!rc)
        rc = be->event_create(&e->ev1, err);
    if (!rc)
        rc = be->dev_alloc(nq * e->gl.d_k * sizeof(float), (void **)&e->q_d, err);
    if (!rc)
        rc = be->dev_alloc(nq * e->gl.d_v * sizeof(float), (void **)&e->o_d, err);
    if (!rc)
        rc = be->dev_alloc(nq * sizeof(float), (void **)&e->lse_d, err);
    if (!rc) {
        ws_gpu_attn_limits lim = {
            .max_seqs = e->B, .max_pages = page_cap, .max_q_heads = e->nq, .max_d_v = e->gl.d_v};
        rc = be->attn_create(&lim, &e->gattn, err);
    }
    if (!rc) {
        e->gpages = calloc((size_t)page_cap, sizeof(void *));
        e->gviews = calloc((size_t)e->B, sizeof(ws_attn_seq));
        if (!e->gpages || !e->gviews)
            rc = ws_err_set(err, WS_ENOMEM, "run: out of memory (GPU page tables)");
    }
    return rc;
}

/* The GPU half of one layer on the device, run on its own host thread while the calling
 * thread runs the CPU half: the XFER pages streamed into a ping-pong half (the cache's
 * copies), the attention kernel between two events, o and lse back to the host. The only
 * call into the cache while the CPU half runs. */
typedef struct gpu_half {
    eng *e;
    int layer, rc;
    double stream_s, attn_s;
    ws_err err;
} gpu_half;

static void *gpu_half_run(void *arg)
{
    gpu_half *g = arg;
    eng *e = g->e;
    const ws_backend *be = e->be;
    ws_err *err = &g->err;
    const size_t nq = (size_t)e->B * e->nq;
    int half = -1;
    const double t0 = ws_now_s();
    int rc = ws_ikv_stream(e->kv, g->layer, e->seqs, e->B, e->gpages, e->page_cap, e->gviews, &half,
                           err);
    g->stream_s = ws_now_s() - t0;
    if (rc) {
        g->rc = rc;
        return NULL;
    }
    ws_attn_problem p = {.kv = e->gl,
                         .n_q_heads = e->nq,
                         .scale = e->scale,
                         .n_seqs = e->B,
                         .seqs = e->gviews,
                         .q = e->q_d,
                         .o = e->o_d,
                         .lse = e->lse_d};
    double ms = 0;
    rc = be->copy_async(e->q_d, e->q, nq * e->gl.d_k * sizeof(float), e->cs, err);
    if (!rc)
        rc = be->event_record(e->ev0, e->cs, err);
    if (!rc)
        rc = be->attn_run(e->gattn, &p, NULL, e->cs, NULL, err);
    if (!rc)
        rc = be->event_record(e->ev1, e->cs, err);
    if (!rc)
        rc = be->copy_async(e->og, e->o_d, nq * e->gl.d_v * sizeof(float), e->cs, err);
    if (!rc)
        rc = be->copy_async(e->lg, e->lse_d, nq * sizeof(float), e->cs, err);
    if (!rc)
        rc = be->stream_sync(e->cs, err);
    if (!rc)
        rc = be->event_elapsed_ms(e->ev0, e->ev1, &ms, err);
    const int rc2 = ws_ikv_stream_release(e->kv, half, rc ? NULL : err);
    g->attn_s = ms / 1e3;
    g->rc = rc ? rc : rc2;
    return NULL;
}

/* The depth: --layers when they fit in mem_fraction of the RAM, else as many as fit. */
static int eng_depth(eng *e, ws_run_result *res, ws_err *err)
{
    const ws_engine_cfg *c = e->cfg;
    const ws_model *m = c->model;
    res->model_layers = m->layers;
    if (c->layers > m->layers)
        return ws_err_set(err, WS_EINVAL, "run: --layers %d: model %s has %d layers", c->layers,
                          m->name, m->layers);
    if (c->layers > 0) {
        e->L = c->layers;
        const double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        const int fit = ws_engine_layers_fit(c, c->mem_fraction * ram);
        if (fit < e->L)
            return ws_err_set(err, WS_ENOMEM,
                              "run: %d layers of batch %d x %d tokens do not fit in %.0f%% of "
                              "%.1f GiB of RAM (%d do); lower --layers, --batch or --prompt, or "
                              "raise --mem-fraction",
                              e->L, c->batch, c->prompt + c->output, 100 * c->mem_fraction,
                              ram / 1073741824.0, fit);
        snprintf(res->layers_note, sizeof res->layers_note, "%d of %d layers (--layers)", e->L,
                 m->layers);
    } else {
        const double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        e->L = ws_engine_layers_fit(c, c->mem_fraction * ram);
        if (e->L < 1)
            return ws_err_set(err, WS_ENOMEM,
                              "run: not even one layer of batch %d x %d tokens fits in %.0f%% "
                              "of %.1f GiB of RAM; lower --batch or --prompt",
                              c->batch, c->prompt + c->output, 100 * c->mem_fraction,
                              ram / 1073741824.0);
        snprintf(res->layers_note, sizeof res->layers_note,
                 "%d of %d layers (what fits in %.0f%% of %.1f GiB RAM)", e->L, m->layers,
                 100 * c->mem_fraction, ram / 1073741824.0);
    }
    return 0;
}

/* The cache (InplaceKVCache) with its region limits, the attention buffers, the CUDA
 * device's (with a device) and one sequence per slot of the batch. */
static int eng_cache(eng *e, ws_run_result *res, ws_err *err)
{
    const ws_engine_cfg *c = e->cfg;
    const ws_model *m = c->model;
    int rc = 0;
    const double pb = (double)ws_kv_page_bytes(&e->gl);
    const int pps = pages_per_seq(c, e->P);
    const int ppp = pingpong_pages_for(c, e->P, pb, e->cm.cfg.pingpong_bytes);
    const size_t need = (size_t)((double)e->L * e->B * pps * pb);
    ws_ikv_config kc = {.kv = e->gl,
                        .n_q_heads = e->nq,
                        .isa = c->isa,
                        .n_layers = e->L,
                        .max_seqs = e->B,
                        .window = e->W,
                        .pingpong_pages = ppp,
                        .gpu_budget = (size_t)(c->hw->gpu_mem.v > 0 ? c->hw->gpu_mem.v : 1e12),
                        .pinned_limit = c->pinned_limit ? c->pinned_limit : need,
                        .host_limit = c->host_limit ? c->host_limit : need,
                        .backend = e->be,
                        .pool = e->pool};
    if (!(e->kv = ws_ikv_create(&kc, err)))
        return err ? err->code : WS_EINVAL;
    snprintf(res->note, sizeof res->note, "%s", ws_ikv_note(e->kv));

    int bad = 0;
    const int nqd = e->nq * e->gl.d_k, nqv = e->nq * e->gl.d_v;
    e->seqs = xcalloc((size_t)e->B, sizeof(int), &bad);
    e->q = xcalloc((size_t)e->B * nqd, sizeof(float), &bad);
    e->oc = xcalloc((size_t)e->B * nqv, sizeof(float), &bad);
    e->og = xcalloc((size_t)e->B * nqv, sizeof(float), &bad);
    e->om = xcalloc((size_t)e->B * nqv, sizeof(float), &bad);
    e->lc = xcalloc((size_t)e->B * e->nq, sizeof(float), &bad);
    e->lg = xcalloc((size_t)e->B * e->nq, sizeof(float), &bad);
    e->lm = xcalloc((size_t)e->B * e->nq, sizeof(float), &bad);
    e->page_cap = e->B * (pps + e->W / e->P + 1);
    e->pages = xcalloc((size_t)e->page_cap, sizeof(void *), &bad);
    e->nodes = xcalloc((size_t)e->page_cap, sizeof(int), &bad);
    e->views = xcalloc((size_t)e->B, sizeof(ws_attn_seq), &bad);
    e->knew = xcalloc((size_t)e->B * e->row_k, sizeof(uint16_t), &bad);
    e->vnew = xcalloc((size_t)e->B * (e->row_v ? e->row_v : 1), sizeof(uint16_t), &bad);
    const int wide = e->row_k > e->row_v ? e->row_k : e->row_v;
    e->tmp = xcalloc((size_t)(wide > m->hidden ? wide : m->hidden), sizeof(float), &bad);
    if (bad)
        return ws_err_set(err, WS_ENOMEM, "run: out of memory (attention buffers)");
    if (e->be && (rc = cuda_init(e, e->page_cap, err)))
        return rc;
    for (int i = 0; i < e->B; i++)
        if ((rc = ws_ikv_seq_add(e->kv, &e->seqs[i], err)))
            return rc;

    return 0;
}

/* MoE: the router and the expert slots, their weights seeded (int8: quantized at load). */
static int eng_experts(eng *e, ws_run_result *res, ws_err *err)
{
    const ws_engine_cfg *c = e->cfg;
    const ws_model *m = c->model;
    int rc = 0, bad = 0;
    e->H = m->hidden;
    e->I = m->moe_intermediate;
    e->E = m->n_experts;
    e->K = m->experts_per_tok > 0 ? m->experts_per_tok : 1;
    e->slots = expert_slot_count(m, e->B);
    res->expert_slots = e->slots;
    if (e->E > 0 && e->I > 0) {
        e->ex = xcalloc((size_t)e->slots, sizeof *e->ex, &bad);
        e->w_router = xcalloc((size_t)e->H * e->E, sizeof(float), &bad);
        e->x = xcalloc((size_t)e->B * e->H, sizeof(float), &bad);
        e->logits = xcalloc((size_t)e->B * e->E, sizeof(float), &bad);
        /* rows of every (token, expert) pair, grouped by expert */
        e->xb = xcalloc((size_t)e->B * e->K * e->H, sizeof(float), &bad);
        e->yb = xcalloc((size_t)e->B * e->K * e->H, sizeof(float), &bad);
        e->y = xcalloc((size_t)e->B * e->H, sizeof(float), &bad);
        e->hit_ex = xcalloc((size_t)e->E, sizeof *e->hit_ex, &bad);
        e->hit_q = xcalloc((size_t)e->E, sizeof *e->hit_q, &bad);
        e->hit = xcalloc((size_t)e->E, sizeof(int), &bad);
        e->hit_off = xcalloc((size_t)e->E + 1, sizeof(int), &bad);
        e->pick = xcalloc((size_t)e->B * e->K, sizeof(int), &bad);
        e->gate = xcalloc((size_t)e->B * e->K, sizeof(float), &bad);
        e->cnt = xcalloc((size_t)e->E, sizeof(int), &bad);
        e->tok = xcalloc((size_t)e->B * e->K, sizeof(int), &bad);
        if (bad)
            return ws_err_set(err, WS_ENOMEM, "run: out of memory (router)");
        const float ws = 1.0f / sqrtf((float)e->H), wd = 1.0f / sqrtf((float)e->I);
        fill_uniform(e->w_router, (size_t)e->H * e->E, c->seed, GEN_W, 0, 0, 0);
        for (size_t i = 0; i < (size_t)e->H * e->E; i++)
            e->w_router[i] *= ws;
        const size_t gu = (size_t)e->H * 2 * e->I, dn = (size_t)e->I * e->H;
        const size_t align = expert_slot_align(e->H, e->I, e->int8);
        const size_t bytes = (size_t)expert_slot_bytes(e->H, e->I, e->int8);
        const int qmax = ws_gemm_int8_qmax();
        float *tmp = malloc((gu > dn ? gu : dn) * sizeof(float));
        /* int8: each slot's bf16 weights are made here, then quantized into the slot */
        uint16_t *wb = e->int8 ? malloc((gu + dn) * sizeof(uint16_t)) : NULL;
        if (!tmp || (e->int8 && !wb)) {
            free(tmp), free(wb);
            return ws_err_set(err, WS_ENOMEM, "run: out of memory (expert weights)");
        }
        for (int s = 0; s < e->slots && !rc; s++) {
            void *mem = aligned_alloc(align, bytes);
            if (!mem) {
                free(tmp), free(wb);
                char one[32], all[32];
                return ws_err_set(err, WS_ENOMEM,
                                  "run: out of memory for expert weights (slot %d of %d, %s "
                                  "each, %s in all)",
                                  s + 1, e->slots, ws_bytes_text((double)bytes, one, sizeof one),
                                  ws_bytes_text((double)bytes * e->slots, all, sizeof all));
            }
            if (align > 64)
                madvise(mem, bytes, MADV_HUGEPAGE); /* advice: 4 KiB pages still work */
            e->ex[s].mem = mem;
            uint16_t *b = e->int8 ? wb : mem;
            /* the fp32 stream of the earlier weights, rounded: [2I x H] then [H x I] */
            fill_uniform(tmp, gu, c->seed, GEN_W, 1, (uint64_t)s, 0);
            for (size_t i = 0; i < gu; i++)
                b[i] = ws_f32_to_bf16(tmp[i] * ws);
            fill_uniform(tmp, dn, c->seed, GEN_W, 2, (uint64_t)s, 0);
            for (size_t i = 0; i < dn; i++)
                b[gu + i] = ws_f32_to_bf16(tmp[i] * wd);
            e->ex[s].w =
                (ws_expert_bf16){.hidden = e->H, .inter = e->I, .w_gate_up = b, .w_down = b + gu};
            if (e->int8) {
                rc = ws_expert_int8_from_bf16(&e->ex[s].w, qmax, mem, &e->ex[s].q, err);
                e->ex[s].w = (ws_expert_bf16){0}; /* wb is reused by the next slot */
            }
        }
        free(tmp), free(wb);
        if (rc)
            return rc;
    }
    return 0;
}

static int eng_init(eng *e, const ws_engine_cfg *c, ws_run_result *res, ws_err *err)
{
    const ws_model *m = c->model;
    e->cfg = c;
    e->m = m;
    e->P = c->par.page_tokens;
    e->W = c->window;
    e->B = c->batch;
    int rc = ws_model_attn_shape(m, WS_DT_BF16, e->P, &e->gl, &e->nq, &e->scale, err);
    if (rc)
        return rc;
    e->row_k = e->gl.n_kv_heads * e->gl.d_k;
    e->row_v = e->gl.v_shares_k ? 0 : e->gl.n_kv_heads * e->gl.d_v;
    ws_deploy_cfg cc;
    ws_engine_cost_cfg(c, &cc);
    e->int8 = int8_experts(c);
    e->expert_verify = c->verify && e->int8 ? 0 : NAN;
    if ((rc = ws_cost_model_init(c->hw, m, &cc, &e->cm, err)))
        return rc;
    if ((rc = eng_depth(e, res, err)))
        return rc;
    res->layers = e->L;
    if ((rc = ws_ctl_init(&e->ctl, &e->cm, c->policy, &c->par, e->L, err)) ||
        (rc = ws_ctl_set_prefill(&e->ctl, c->prefill_mode, c->prefill_gpu_tokens, err)))
        return rc;
    if (c->gpu == WS_ENGINE_GPU_CUDA && (rc = cuda_open(e, res, err)))
        return rc;
    ws_err perr = {0};
    e->pool = ws_pool_create(c->threads, &perr);
    if (!e->pool) /* the pool's message names it */
        return ws_err_set(err, perr.code ? perr.code : WS_ENOMEM, "run: %s", perr.msg);
    e->threads = ws_pool_threads(e->pool);
    if ((rc = eng_cache(e, res, err)) || (rc = eng_experts(e, res, err)))
        return rc;
    if (c->verify) {
        int bad = 0;
        const size_t pb = ws_kv_page_bytes(&e->gl), full = (size_t)pages_per_seq(c, e->P) * pb;
        e->ref_pages = malloc(full * (size_t)e->B);
        e->o_ref = xcalloc((size_t)e->B * e->nq * e->gl.d_v, sizeof(double), &bad);
        e->lse_ref = xcalloc((size_t)e->B * e->nq, sizeof(double), &bad);
        if (bad || !e->ref_pages)
            return ws_err_set(err, WS_ENOMEM, "run: out of memory (verify buffers)");
    }
    return 0;
}

/* ---- prefill ---- */

/* Each prompt's CPU pages as the simulator's serving loop decides them (control.h): at its
 * first chunk, prompts before it already placed, toward the share of the batch's spilled
 * tokens plus every running request's tokens still to come. */
static void prefill_pages(eng *e, int *cpu_pages)
{
    /* a request generates its first token at the prefill's end, then one per decode step */
    const int N = e->cfg->prompt, M = e->cfg->output + 1, full = N / e->P;
    for (int i = 0; i < e->B; i++) {
        const double done = i, spilled = done * full * e->P, resident = done * (N % e->P);
        const double left = done * (M - 1) + (double)(e->B - i) * (N + M);
        cpu_pages[i] = ws_ctl_prefill_cpu_pages(&e->ctl, e->B, resident, spilled + left, full);
    }
}

static int prefill(eng *e, ws_run_result *res, ws_err *err)
{
    const ws_engine_cfg *c = e->cfg;
    const int N = c->prompt;
    int *cpu_pages = calloc((size_t)e->B, sizeof(int));
    uint16_t *k = malloc((size_t)N * e->row_k * sizeof(uint16_t));
    uint16_t *v = e->row_v ? malloc((size_t)N * e->row_v * sizeof(uint16_t)) : NULL;
    if (!cpu_pages || !k || (e->row_v && !v)) {
        free(cpu_pages);
        free(k);
        free(v);
        return ws_err_set(err, WS_ENOMEM, "run: out of memory (prompt of %d tokens)", N);
    }
    prefill_pages(e, cpu_pages);
    double placed = 0;
    for (int i = 0; i < e->B; i++)
        placed += cpu_pages[i];
    res->r_prefill = N / e->P > 0 ? placed / ((double)e->B * (N / e->P)) : 0;
    const double t0 = ws_now_s();
    int rc = 0;
    for (int l = 0; l < e->L && !rc; l++) {
        for (int i = 0; i < e->B && !rc; i++) {
            gen_kv(c->seed, l, i, 0, N, e->row_k, e->row_v, k, v, e->tmp);
            rc = ws_ikv_prefill(e->kv, e->seqs[i], l, N, k, v, cpu_pages[i], err);
        }
    }
    res->prefill_wall_s = ws_now_s() - t0;
    /* The modeled compute: each prompt's chunks in the serving loop's order, each the layer
     * schedule played (its KV written D2H, its experts where the controller puts them). */
    const int chunk = c->chunk;
    double model_s = 0;
    for (int i = 0; i < e->B; i++)
        for (int done = 0; done < N;) {
            const int q = N - done < chunk ? N - done : chunk;
            ws_sched_in in = {
                .T = q, .prefill_q = q, .prefill_ctx = done, .write_bytes = q * e->cm.b_tok};
            in.prefill_gpu = ws_ctl_prefill_gpu(&e->ctl, &in);
            model_s += ws_sched_play_step(&e->cm, NULL, &in, e->L, NULL);
            res->prefill_chunks++;
            res->prefill_gpu_chunks += in.prefill_gpu != 0;
            done += q;
        }
    res->prefill_modeled_s = model_s;
    free(cpu_pages);
    free(k);
    free(v);
    return rc;
}

/* ---- one layer's attention ---- */

static int attn_views(eng *e, int layer, int gpu_half, double *tokens, ws_err *err)
{
    int used = 0;
    *tokens = 0;
    for (int i = 0; i < e->B; i++) {
        int rc = gpu_half ? ws_ikv_view_gpu(e->kv, e->seqs[i], layer, e->pages + used,
                                            e->page_cap - used, &e->views[i], err)
                          : ws_ikv_view_cpu(e->kv, e->seqs[i], layer, e->pages + used,
                                            e->nodes + used, e->page_cap - used, &e->views[i], err);
        if (rc)
            return rc;
        used += (e->views[i].n_tokens + e->P - 1) / e->P;
        *tokens += e->views[i].n_tokens;
    }
    return 0;
}

static void problem(const eng *e, const ws_kv_layout *kv, float *o, float *lse, ws_attn_problem *p)
{
    *p = (ws_attn_problem){.kv = *kv,
                           .n_q_heads = e->nq,
                           .scale = e->scale,
                           .n_seqs = e->B,
                           .seqs = e->views,
                           .q = e->q,
                           .o = o,
                           .lse = lse};
}

/* Verify (outside the timed path): the GPU half through the ping-pong halves and the
 * split-K reference, merged with the CPU half, against full attention over the KV rebuilt
 * from the generator. Returns the max abs error of o. */
static int verify_layer(eng *e, int layer, double *max_err, ws_err *err)
{
    const ws_engine_cfg *c = e->cfg;
    int rc = 0;
    if (!e->be) { /* modeled: the GPU half by the split-K reference, through ping-pong */
        int half = -1;
        rc =
            ws_ikv_stream(e->kv, layer, e->seqs, e->B, e->pages, e->page_cap, e->views, &half, err);
        if (rc)
            return rc;
        ws_attn_problem p;
        problem(e, &e->gl, e->og, e->lg, &p);
        rc = ws_attn_splitk_ref(&p, 4 * e->P, err);
        int rc2 = ws_ikv_stream_release(e->kv, half, err);
        if (rc || rc2)
            return rc ? rc : rc2;
    }
    const int nqv = e->nq * e->gl.d_v;
    ws_attn_merge(e->oc, e->lc, e->og, e->lg, e->om, e->lm, e->B * e->nq, e->gl.d_v);
    /* full attention over the rebuilt KV, row layout */
    const size_t pb = ws_kv_page_bytes(&e->gl);
    const int pps = pages_per_seq(c, e->P);
    const void **full = malloc((size_t)e->B * pps * sizeof(void *));
    ws_attn_seq *fs = calloc((size_t)e->B, sizeof *fs);
    uint16_t *k = malloc((size_t)e->P * e->row_k * sizeof(uint16_t));
    uint16_t *v = e->row_v ? malloc((size_t)e->P * e->row_v * sizeof(uint16_t)) : NULL;
    if (!full || !fs || !k || (e->row_v && !v)) {
        free(full), free(fs), free(k), free(v);
        return ws_err_set(err, WS_ENOMEM, "run: out of memory (verify)");
    }
    const ws_kv_layout *kv = &e->gl;
    for (int i = 0; i < e->B; i++) {
        const int n = ws_ikv_seq_tokens(e->kv, e->seqs[i], layer);
        for (int pg = 0; pg * e->P < n; pg++) {
            uint16_t *page = (uint16_t *)((char *)e->ref_pages + ((size_t)i * pps + pg) * pb);
            full[(size_t)i * pps + pg] = page;
            const int nt = n - pg * e->P < e->P ? n - pg * e->P : e->P;
            gen_kv(c->seed, layer, i, pg * e->P, nt, e->row_k, e->row_v, k, v, e->tmp);
            for (int t = 0; t < nt; t++)
                for (int h = 0; h < kv->n_kv_heads; h++) {
                    memcpy(page + ws_kv_k_off(kv, h, t), k + (size_t)t * e->row_k + h * kv->d_k,
                           (size_t)kv->d_k * 2);
                    if (v)
                        memcpy(page + ws_kv_v_off(kv, h, t), v + (size_t)t * e->row_v + h * kv->d_v,
                               (size_t)kv->d_v * 2);
                }
        }
        fs[i] = (ws_attn_seq){.pages = full + (size_t)i * pps, .n_tokens = n};
    }
    ws_attn_problem fp = {.kv = *kv,
                          .n_q_heads = e->nq,
                          .scale = e->scale,
                          .n_seqs = e->B,
                          .seqs = fs,
                          .q = e->q,
                          .o = e->og,
                          .lse = e->lg};
    rc = ws_attn_ref(&fp, e->o_ref, e->lse_ref, err);
    double mx = 0;
    for (int j = 0; !rc && j < e->B * nqv; j++) {
        const double d = fabs((double)e->om[j] - e->o_ref[j]);
        if (!(d <= mx))
            mx = isnan(d) ? INFINITY : d;
    }
    for (int j = 0; !rc && j < e->B * e->nq; j++) {
        const double d = fabs((double)e->lm[j] - e->lse_ref[j]);
        if (!(d <= mx))
            mx = isnan(d) ? INFINITY : d;
    }
    free(full), free(fs), free(k), free(v);
    *max_err = mx;
    return rc;
}

/* ---- the MoE phase ---- */

/* Verify: every hit int8 expert's rows against the reference (gemm_int8.h), the worst
 * |y - reference| / bound into e->expert_verify. */
static int experts_verify(eng *e, ws_err *err)
{
    const int H = e->H, rows = e->hit_off[e->n_hit];
    float *yr = malloc(sizeof(float) * (size_t)(rows ? rows : 1) * H);
    double *tol = malloc(sizeof(double) * (size_t)(rows ? rows : 1) * H);
    if (!yr || !tol) {
        free(yr), free(tol);
        return ws_err_set(err, WS_ENOMEM, "run: out of memory (expert verify)");
    }
    for (int i = 0; i < e->n_hit; i++) {
        const int o = e->hit_off[i], m = e->hit_off[i + 1] - o;
        ws_expert_ffn_int8_ref(e->hit_q[i], e->xb + (size_t)o * H, yr + (size_t)o * H,
                               tol + (size_t)o * H, m);
    }
    for (size_t k = 0; k < (size_t)rows * H; k++) {
        const double r = fabs((double)e->yb[k] - yr[k]) / tol[k];
        if (!(r <= e->expert_verify))
            e->expert_verify = isnan(r) ? INFINITY : r;
    }
    free(yr), free(tol);
    return 0;
}

void ws_engine_experts_backend(int hidden, int inter, int max_m, char *buf, size_t cap)
{
    char one[WS_GEMM_BF16_N][16];
    int n = 0, len = 0;
    buf[0] = 0;
    for (int m = 1;; m *= 2) {
        const char *b = ws_gemm_bf16_backend_name(hidden, inter, m, 1);
        if (strcmp(b, "unprobed")) {
            int seen = 0;
            for (int i = 0; i < n; i++)
                seen |= !strcmp(one[i], b);
            if (!seen && n < WS_GEMM_BF16_N)
                snprintf(one[n++], sizeof one[0], "%s", b);
            if (len < (int)cap)
                len += snprintf(buf + len, cap - (size_t)len, "%sm<=%d:%s", len ? " " : "", m, b);
        }
        if (m >= max_m)
            break;
    }
    if (n == 1)
        snprintf(buf, cap, "%s", one[0]);
    else if (n == 0)
        snprintf(buf, cap, "none");
}

static int moe(eng *e, int step, int layer, double *router_s, double *experts_s, double *verify_s,
               ws_err *err)
{
    const int T = e->B, H = e->H, E = e->E, K = e->K;
    fill_uniform(e->x, (size_t)T * H, e->cfg->seed, GEN_X, (uint64_t)step, (uint64_t)layer, 0);
    double t0 = ws_now_s();
    int rc = ws_gemm_cpu_f32(T, E, H, e->x, e->w_router, e->logits, 1, err);
    if (rc)
        return rc;
    memset(e->cnt, 0, (size_t)E * sizeof(int));
    for (int t = 0; t < T; t++) {
        const float *lg = e->logits + (size_t)t * E;
        int *pk = e->pick + (size_t)t * K;
        float *gt = e->gate + (size_t)t * K;
        for (int j = 0; j < K; j++)
            pk[j] = -1;
        for (int x = 0; x < E; x++) {
            int pos = K;
            while (pos > 0 && (pk[pos - 1] < 0 || lg[x] > lg[pk[pos - 1]]))
                pos--;
            if (pos >= K)
                continue;
            for (int j = K - 1; j > pos; j--)
                pk[j] = pk[j - 1];
            pk[pos] = x;
        }
        double z = 0;
        for (int j = 0; j < K; j++)
            z += exp((double)lg[pk[j]] - lg[pk[0]]);
        for (int j = 0; j < K; j++) {
            gt[j] = (float)(exp((double)lg[pk[j]] - lg[pk[0]]) / z);
            e->cnt[pk[j]]++;
        }
    }
    double t1 = ws_now_s();
    *router_s = t1 - t0;
    /* group the (token, expert) rows by expert */
    e->n_hit = 0;
    int off = 0;
    for (int x = 0; x < E; x++) {
        if (!e->cnt[x])
            continue;
        e->hit[e->n_hit] = x;
        e->hit_off[e->n_hit++] = off;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < K; j++)
                if (e->pick[(size_t)t * K + j] == x) {
                    e->tok[off] = t * K + j;
                    memcpy(e->xb + (size_t)off * H, e->x + (size_t)t * H,
                           (size_t)H * sizeof(float));
                    off++;
                }
    }
    e->hit_off[e->n_hit] = off;
    for (int i = 0; i < e->n_hit; i++) {
        e->hit_ex[i] = &e->ex[e->hit[i] % e->slots].w;
        e->hit_q[i] = &e->ex[e->hit[i] % e->slots].q;
    }
    rc = e->int8 ? ws_experts_run_int8(e->pool, e->hit_q, e->n_hit, e->hit_off, e->xb, e->yb, err)
                 : ws_experts_run_bf16(e->pool, e->hit_ex, e->n_hit, e->hit_off, e->xb, e->yb, err);
    if (rc)
        return rc;
    memset(e->y, 0, (size_t)T * H * sizeof(float));
    for (int i = 0; i < off; i++) {
        const int t = e->tok[i] / K;
        const float g = e->gate[e->tok[i]];
        float *y = e->y + (size_t)t * H;
        const float *yb = e->yb + (size_t)i * H;
        for (int h = 0; h < H; h++)
            y[h] += g * yb[h];
    }
    const double t2 = ws_now_s();
    *experts_s = t2 - t1;
    if (e->int8 && e->cfg->verify) {
        rc = experts_verify(e, err);
        *verify_s += ws_now_s() - t2;
    }
    return rc;
}

/* ---- one decode step ---- */

/* The new token of every sequence for layer l: its q and K/V (the GPU's QKV projection,
 * modeled), into the window. */
static int new_tokens(eng *e, int step, int l, ws_err *err)
{
    const ws_engine_cfg *c = e->cfg;
    const int nqd = e->nq * e->gl.d_k;
    for (int i = 0; i < e->B; i++) {
        const int pos = ws_ikv_seq_tokens(e->kv, e->seqs[i], l);
        gen_kv(c->seed, l, i, pos, 1, e->row_k, e->row_v, e->knew + (size_t)i * e->row_k,
               e->row_v ? e->vnew + (size_t)i * e->row_v : NULL, e->tmp);
        float *qi = e->q + (size_t)i * nqd;
        fill_uniform(qi, (size_t)nqd, c->seed, GEN_Q, (uint64_t)step, (uint64_t)l, (uint64_t)i);
        for (int x = 0; x < nqd; x++) /* a bf16 projection's output, as both halves take it */
            qi[x] = ws_bf16_to_f32(ws_f32_to_bf16(qi[x]));
    }
    return ws_ikv_append(e->kv, l, e->seqs, e->B, e->knew, e->row_v ? e->vnew : NULL, err);
}

/* Both halves of layer l's attention: the CPU half for real (*cpu_s), with CUDA the GPU
 * half meanwhile on its own thread (*gh). */
static int attention(eng *e, int l, double n_tok, gpu_half *gh, double *cpu_s, ws_err *err)
{
    pthread_t gth;
    const int on_gpu = e->be != NULL;
    *gh = (gpu_half){.e = e, .layer = l};
    if (on_gpu && pthread_create(&gth, NULL, gpu_half_run, gh))
        return ws_err_set(err, WS_ENOMEM, "run: cannot start the GPU half's thread");
    int rc = 0;
    *cpu_s = 0;
    if (n_tok > 0) {
        ws_attn_problem p;
        problem(e, ws_ikv_cpu_layout(e->kv), e->oc, e->lc, &p);
        const double a = ws_now_s();
        rc = ws_attn_cpu(&p, e->pool, e->cfg->isa, err);
        *cpu_s = ws_now_s() - a;
    } else {
        for (int j = 0; j < e->B * e->nq; j++)
            e->lc[j] = -INFINITY;
        memset(e->oc, 0, (size_t)e->B * e->nq * e->gl.d_v * sizeof(float));
    }
    if (on_gpu) {
        pthread_join(gth, NULL);
        if (!rc && gh->rc) {
            rc = gh->rc;
            if (err)
                *err = gh->err;
        }
    }
    return rc;
}

/* ---- a decode step: the protocol is decode.h's, run on the real cache ---- */

typedef struct dec_ctx {
    eng *e;
    int step, drift; /* drift: the CPU half's time scaled (cfg drift_factor) */
    double t0;       /* the step's start on the timeline */
    ws_run_step *st;
    ws_run_layer *lays; /* [L] */
    double *mig_s;      /* [L] each layer's reformat time */
} dec_ctx;

static void dec_sums(void *ctx, ws_decode_sums *s)
{
    const eng *e = ((const dec_ctx *)ctx)->e;
    double resident = 0, cpu, spilled;
    for (int i = 0; i < e->B; i++)
        resident += ws_ikv_tokens(e->kv, e->seqs[i], 0, WS_IKV_DWIN) + 1;
    ws_ikv_spilled(e->kv, 0, NULL, 0, &cpu, &spilled);
    *s = (ws_decode_sums){.batch = e->B, .spilled = spilled, .cpu = cpu, .resident = resident};
}

static int dec_full_windows(void *ctx)
{
    const eng *e = ((const dec_ctx *)ctx)->e;
    int n = 0;
    for (int i = 0; i < e->B; i++)
        n += ws_ikv_tokens(e->kv, e->seqs[i], 0, WS_IKV_DWIN) + 1 >= e->W;
    return n;
}

/* migrate's move, taken from the sequences in order (as the simulator takes them) and
 * reformatted in every layer through the format's one path for it, each layer timed. */
static int dec_migrate(void *ctx, int move, ws_err *err)
{
    dec_ctx *d = ctx;
    eng *e = d->e;
    const ws_ikv_region to = move > 0 ? WS_IKV_CPU : WS_IKV_XFER;
    for (int l = 0; l < e->L; l++) {
        const double t0 = ws_now_s();
        int left = abs(move);
        for (int i = 0; i < e->B && left; i++) {
            const int have =
                ws_ikv_tokens(e->kv, e->seqs[i], l, to == WS_IKV_CPU ? WS_IKV_XFER : WS_IKV_CPU) /
                e->P;
            const int k = left < have ? left : have;
            int rc = ws_ikv_reformat(e->kv, e->seqs[i], l, k, to, err);
            if (rc)
                return rc;
            left -= k;
        }
        d->mig_s[l] = ws_now_s() - t0;
    }
    return 0;
}

/* Layer l's flush: every full window goes, as one batch, where the step's plan places it
 * (the plan's CPU pages first, in sequence order). */
static int flush_layer(eng *e, int l, const ws_decode_plan *p, ws_err *err)
{
    if (!p->flush_seqs)
        return 0;
    ws_ikv_flush_req req[e->B > 0 ? e->B : 1];
    int n = 0, cpu = p->flush_cpu_pages;
    for (int i = 0; i < e->B; i++)
        if (ws_ikv_tokens(e->kv, e->seqs[i], l, WS_IKV_DWIN) >= e->W) {
            const int fp = ws_ikv_window_full_pages(e->kv, e->seqs[i], l);
            req[n] = (ws_ikv_flush_req){.seq = e->seqs[i], .layer = l, .n_pages = fp};
            req[n].n_cpu = cpu < fp ? cpu : fp;
            cpu -= req[n].n_cpu;
            n++;
        }
    return ws_ikv_flush(e->kv, req, n, err);
}

/* Layer l's schedule (schedule.h) with the durations of the work this engine ran in place of
 * the model's: measured, or under cpu_time_modeled the model's own (host work 0). */
static void layer_schedule(const eng *e, int l, const ws_run_layer *y, const ws_cost_split *sp,
                           double flush_bytes, double migrate_bytes, double migrate_s,
                           const gpu_half *gh, ws_sched_layer *s)
{
    const ws_engine_cfg *c = e->cfg;
    const ws_sched_in in = {.T = e->B,
                            .n_cpu = y->n_cpu,
                            .m_xfer = y->m_xfer,
                            .resident = y->resident,
                            .n_seqs = e->B,
                            .flush_bytes = flush_bytes,
                            .migrate_bytes = migrate_bytes,
                            .host_s = c->cpu_time_modeled ? 0 : y->overhead_s};
    ws_sched_build(&e->cm, sp, &in, l, s);
    ws_sched_set(s, WS_OP_CPU_ATTN, y->cpu_attn_s);
    if (!c->cpu_time_modeled) {
        ws_sched_set(s, WS_OP_ROUTER, y->router_s);
        ws_sched_set(s, WS_OP_EXP_CPU, y->experts_s);
        ws_sched_set(s, WS_OP_MIGRATE, migrate_s);
    }
    if (e->be) { /* the GPU half as run: the stream, then the kernel, on one thread */
        ws_sched_set(s, WS_OP_H2D_PRE, 0);
        ws_sched_set(s, WS_OP_H2D_REST, 0);
        ws_sched_set(s, WS_OP_GPU_ATTN, gh->stream_s + gh->attn_s);
    }
}

/* Layer l's work for real, as the step's layer y: the new token, both attention halves,
 * verify, the MoE phase (each timed), the flush. *sp: the layer's attention terms; *gh: the
 * GPU half as run. */
static int layer_work(dec_ctx *d, int l, const ws_decode_plan *p, ws_cost_split *sp, gpu_half *gh,
                      ws_err *err)
{
    eng *e = d->e;
    const ws_engine_cfg *c = e->cfg;
    const ws_cost_model *cm = &e->cm;
    ws_run_layer *y = &d->lays[l];
    const double lw0 = ws_now_s();
    double kern = 0, verify_s = 0, n_tok = 0, tc = 0;
    int rc = new_tokens(e, d->step, l, err);
    if (rc)
        return rc;
    for (int i = 0; i < e->B; i++) {
        y->m_xfer += ws_ikv_tokens(e->kv, e->seqs[i], l, WS_IKV_XFER);
        y->resident += ws_ikv_tokens(e->kv, e->seqs[i], l, WS_IKV_DWIN);
    }
    if ((rc = attn_views(e, l, 0, &n_tok, err)) || (rc = attention(e, l, n_tok, gh, &tc, err)))
        return rc;
    y->n_cpu = n_tok;
    kern += tc;
    ws_cost_split_terms(cm, y->resident, l > 0 ? d->lays[l - 1].t.moe_s : 0, 0, 0, sp);
    y->pred_cpu_s = ws_cost_split_cpu(sp, n_tok);
    y->pred_gpu_s = ws_cost_split_gpu(sp, y->m_xfer);
    if (c->cpu_time_modeled)
        tc = y->pred_cpu_s;
    y->cpu_attn_s = d->drift ? tc * c->drift_factor : tc;
    if (c->verify) {
        const double a = ws_now_s();
        double mx = 0;
        if ((rc = verify_layer(e, l, &mx, err)))
            return rc;
        if (!(mx <= d->st->verify_err))
            d->st->verify_err = mx;
        verify_s += ws_now_s() - a;
    }
    /* the MoE phase, for real */
    if (ws_cost_layer(cm, l)->moe && e->ex) {
        const double a = ws_now_s(), v0 = verify_s;
        if ((rc = moe(e, d->step, l, &y->router_s, &y->experts_s, &verify_s, err)))
            return rc;
        kern += ws_now_s() - a - (verify_s - v0);
        /* the model's: the layer schedule's router and CPU experts (with their permute) */
        const ws_sched_in in = {.T = e->B, .n_seqs = e->B};
        y->pred_experts_s = ws_sched_op_time(cm, &in, l, WS_OP_EXP_CPU);
        if (c->cpu_time_modeled) {
            y->router_s = ws_sched_op_time(cm, &in, l, WS_OP_ROUTER);
            y->experts_s = y->pred_experts_s;
        }
    }
    if ((rc = flush_layer(e, l, p, err)))
        return rc;
    y->flush_pages = p->flush_pages, y->flush_cpu_pages = p->flush_cpu_pages;
    double lc, lsp;
    ws_ikv_spilled(e->kv, l, NULL, 0, &lc, &lsp);
    y->r_real = lsp > 0 ? lc / lsp : 0;
    y->overhead_s = fmax(0.0, ws_now_s() - lw0 - kern - verify_s);
    return 0;
}

/* The step's layers, each run and then played on the timeline with what ran measured. */
static int dec_play(void *ctx, const ws_decode_plan *p, ws_decode_obs *obs, ws_err *err)
{
    dec_ctx *d = ctx;
    eng *e = d->e;
    const ws_engine_cfg *c = e->cfg;
    ws_run_step *st = d->st;
    *st = (ws_run_step){.idx = d->step,
                        .batch = e->B,
                        .tokens = e->B,
                        .t_start = d->t0,
                        .r_star = p->r_star,
                        .r_real = p->r_real,
                        .verify_err = c->verify ? 0 : NAN};
    ws_sched_play play;
    ws_sched_play_start(&play, d->t0);
    double ctx_tok = 0;
    for (int l = 0; l < e->L; l++) {
        ws_run_layer *y = &d->lays[l];
        memset(y, 0, sizeof *y);
        y->step = d->step, y->layer = l, y->r_star = p->r_star;
        ws_cost_split sp;
        gpu_half gh;
        int rc = layer_work(d, l, p, &sp, &gh, err);
        if (rc)
            return rc;
        ws_sched_layer sl;
        layer_schedule(e, l, y, &sp, p->flush_bytes, p->migrate_bytes, d->mig_s[l], &gh, &sl);
        ws_sched_play_layer(&play, &sl, &y->t, NULL);
        y->gpu_s = y->t.gpu_end - y->t.attn_start;
        y->gpu_measured = e->be != NULL;
        if (e->be) /* the measured stream, inside the GPU half's time */
            st->busy_h2d += gh.stream_s;
        st->cpu_attn_s += y->cpu_attn_s;
        st->experts_s += y->router_s + y->experts_s;
        st->overhead_s += c->cpu_time_modeled ? 0 : y->overhead_s;
        ctx_tok += y->n_cpu + y->m_xfer + y->resident;
        obs[l] = (ws_decode_obs){.n_cpu = y->n_cpu,
                                 .cpu_s = y->cpu_attn_s,
                                 .m_xfer = y->m_xfer,
                                 .gpu_s = y->gpu_s,
                                 .resident = y->resident,
                                 .moe_s = y->t.moe_s};
    }
    st->t_end = play.t_end;
    st->busy_gpu = play.busy[WS_RES_GPU];
    st->busy_h2d += play.busy[WS_RES_H2D];
    st->busy_d2h = play.busy[WS_RES_D2H];
    st->busy_cpu = play.busy[WS_RES_CPU];
    st->context = llround(ctx_tok / e->L);
    return 0;
}

static int decode_step(eng *e, int step, double t0_step, ws_run_step *st, ws_run_layer *lays,
                       ws_err *err)
{
    static const ws_decode_ops ops = {dec_sums, dec_full_windows, dec_migrate, dec_play};
    const ws_engine_cfg *c = e->cfg;
    const double wall0 = ws_now_s();
    double mig_s[e->L > 0 ? e->L : 1];
    ws_decode_obs obs[e->L > 0 ? e->L : 1];
    for (int l = 0; l < e->L; l++)
        mig_s[l] = 0;
    dec_ctx d = {.e = e,
                 .step = step,
                 .drift = c->drift_factor > 0 && c->drift_factor != 1 && step >= c->drift_step,
                 .t0 = t0_step,
                 .st = st,
                 .lays = lays,
                 .mig_s = mig_s};
    ws_decode_plan p;
    int rc = ws_decode_step(&e->ctl, e->L, e->W, &ops, &d, &p, obs, err);
    if (rc)
        return rc;
    for (int l = 0; l < e->L; l++)
        lays[l].A = obs[l].A, lays[l].B = obs[l].B;
    st->wall_s = ws_now_s() - wall0;
    return 0;
}

static int cmp_dbl(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int ws_engine_expert_format_ok(const ws_wformat *f, ws_err *err)
{
    if (f && strcmp(f->name, "bf16") && strcmp(f->name, "int8"))
        return ws_err_set(err, WS_EUNSUP,
                          "run: CPU experts in %s: no kernel here runs them (oneDNN's matmul "
                          "takes no per-block scales and Debian 12 packages no ggml); run takes "
                          "bf16 or int8",
                          f->name);
    return 0;
}

/* The run's summary: step percentiles, throughput, the step time's shares, the cache's
 * counters, the estimates and the experts' backend. */
static void run_summary(eng *e, ws_run_result *res)
{
    const ws_engine_cfg *c = e->cfg;
    const int S = c->output;
    if (!e->be)
        snprintf(res->gpu_label, sizeof res->gpu_label, "modeled:%s", c->hw->gpu);
    snprintf(res->host, sizeof res->host, "%s", c->hw->host);
    double *d = malloc((size_t)S * sizeof(double));
    double sum = 0, ca = 0, ex = 0, ov = 0, busy = 0;
    for (int s = 0; s < S; s++) {
        const ws_run_step *st = &res->step[s];
        const double dt = st->t_end - st->t_start;
        if (d)
            d[s] = dt;
        sum += dt;
        ca += st->cpu_attn_s, ex += st->experts_s, ov += st->overhead_s, busy += st->busy_cpu;
        res->wall_s += st->wall_s;
        if (c->verify && !(st->verify_err <= res->verify_max_err))
            res->verify_max_err = isnan(res->verify_max_err)
                                      ? st->verify_err
                                      : fmax(res->verify_max_err, st->verify_err);
    }
    if (d) {
        qsort(d, (size_t)S, sizeof *d, cmp_dbl);
        res->step_p50 = d[(S - 1) / 2];
        res->step_p99 = d[(int)ceil(0.99 * S) - 1];
        free(d);
    }
    res->decode_s = sum;
    res->tokens_per_s = sum > 0 ? (double)c->batch * S / sum : 0;
    if (sum > 0) {
        res->share_cpu_attn = ca / sum;
        res->share_experts = ex / sum;
        res->share_overhead = ov / sum;
        res->share_gpu_wait = fmax(0.0, 1 - busy / sum);
    }
    ws_ikv_stats ks;
    ws_ikv_stats_get(e->kv, &ks);
    res->bytes_moved = ks.bytes_moved;
    res->bytes_reformatted = ks.bytes_reformatted;
    res->bytes_written_cpu = ks.bytes_written[WS_IKV_CPU];
    res->bytes_written_xfer = ks.bytes_written[WS_IKV_XFER];
    res->flushes = ks.flushes;
    res->cpu_pages = ks.pages_in_use[WS_IKV_CPU];
    res->xfer_pages = ks.pages_in_use[WS_IKV_XFER];
    res->A_final = ws_ctl_A(&e->ctl);
    res->B_final = ws_ctl_B(&e->ctl);
    if (e->ex && e->int8)
        ws_gemm_int8_describe(e->H, e->I, 1, res->expert_backend, sizeof res->expert_backend);
    else if (e->ex)
        ws_engine_experts_backend(e->H, e->I, e->B, res->expert_backend,
                                  sizeof res->expert_backend);
    else
        snprintf(res->expert_backend, sizeof res->expert_backend, "none");
    snprintf(res->expert_dtype, sizeof res->expert_dtype, "%s", e->int8 ? "int8" : "bf16");
    res->expert_verify = e->expert_verify;
    res->A_model = e->cm.A;
    res->B_model = e->cm.B;
}

int ws_engine_run(const ws_engine_cfg *c, ws_run_result *res, ws_err *err)
{
    memset(res, 0, sizeof *res);
    res->verify_max_err = NAN;
    res->expert_verify = NAN;
    if (!c || !c->model || !c->hw)
        return ws_err_set(err, WS_EINVAL, "run: no model or hardware profiles");
    int rc = ws_engine_expert_format_ok(c->cpu_expert_weights, err);
    if (rc)
        return rc;
    const ws_policy_info *pi = ws_policy_info_of(c->policy);
    if (!pi || !pi->spills)
        return ws_err_set(err, WS_EUNSUP,
                          "run: policy '%s' is not a runtime policy (writescope, static, "
                          "stream, cpu-attn, migrate)",
                          pi ? pi->name : "?");
    if (c->batch < 1 || c->prompt < 1 || c->output < 1 || c->chunk < 1)
        return ws_err_set(err, WS_EINVAL, "run: batch, prompt, output and chunk must be >= 1");
    if (c->batching != WS_BATCH_SERIAL || c->prefix_cache || c->preempt != WS_PREEMPT_NONE)
        return ws_err_set(err, WS_EUNSUP,
                          "run: the runtime serves its closed batch one prompt chunk at a time "
                          "(--scheduler serial), without prefix caching or preemption");
    const int P = c->par.page_tokens;
    if (P < 1 || c->window < P || c->window % P)
        return ws_err_set(err, WS_EINVAL,
                          "run: the window (%d) must be a multiple of the page (%d)", c->window, P);
    if (c->model->n_experts > 0 && c->model->moe_intermediate <= 0)
        return ws_err_set(err, WS_EINVAL, "run: model %s has experts but no expert width",
                          c->model->name);
    eng e = {0};
    rc = eng_init(&e, c, res, err);
    if (!rc)
        rc = prefill(&e, res, err);
    const int S = c->output;
    if (!rc) {
        res->step = calloc((size_t)S, sizeof *res->step);
        res->lay = calloc((size_t)S * e.L, sizeof *res->lay);
        if (!res->step || !res->lay)
            rc = ws_err_set(err, WS_ENOMEM, "run: out of memory (records)");
    }
    double t = 0;
    for (int s = 0; s < S && !rc; s++) {
        rc = decode_step(&e, s, t, &res->step[s], res->lay + (size_t)s * e.L, err);
        if (rc)
            break;
        t = res->step[s].t_end;
        res->steps = s + 1;
        if (c->on_step)
            c->on_step(c->on_step_ctx, &res->step[s], res->lay + (size_t)s * e.L, e.L);
    }
    if (!rc)
        run_summary(&e, res);
    eng_free(&e);
    if (rc)
        ws_run_result_free(res);
    return rc;
}

void ws_run_result_free(ws_run_result *res)
{
    free(res->step);
    free(res->lay);
    res->step = NULL;
    res->lay = NULL;
}
