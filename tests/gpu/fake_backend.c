/* fake_backend: a host-memory stand-in for the CUDA backend, used ONLY to check the logic
 * of tests/test_gpu.c on a machine without a GPU (tests/gpu/check_with_fake.sh): "device"
 * memory is host memory, copies are memcpy, streams and events do nothing, attention runs
 * the real kernel source through the CPU emulation (tests/gpu/attn_emu.cpp), the ping-pong
 * and D-window bookkeeping is kernels/gpu_book.c, GEMM is a naive loop. It measures nothing
 * and is never built into the project; a pass says the test's expectations are coherent
 * and the emulated kernels meet them, not that the CUDA backend works. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backend.h"
#include "gpu_book.h"
#include "half.h"
#include "gpu/attn_emu.h"

static int dc(ws_err *e) { (void)e; return 1; }
static int di(int i, ws_device_info *o, ws_err *e) { (void)i; (void)e; memset(o, 0, sizeof *o); strcpy(o->name, "fake"); o->cc_major = 9; o->mem_bytes = 8e10; o->units = 132; return 0; }
static int sd(int i, ws_err *e) { (void)i; (void)e; return 0; }
static int da(size_t n, void **o, ws_err *e) { (void)e; *o = aligned_alloc(256, (n + 255) / 256 * 256); return 0; }
static void df(void *p) { free(p); }
static int ca(void *d, const void *s, size_t n, ws_gpu_stream *st, ws_err *e) { (void)st; (void)e; memmove(d, s, n); return 0; }
static int ms(void *d, int v, size_t n, ws_gpu_stream *st, ws_err *e) { (void)st; (void)e; memset(d, v, n); return 0; }
static int sc(ws_gpu_stream **o, ws_err *e) { (void)e; *o = malloc(1); return 0; }
static void sdes(ws_gpu_stream *s) { free(s); }
static int ss(ws_gpu_stream *s, ws_err *e) { (void)s; (void)e; return 0; }
static int ec(ws_gpu_event **o, ws_err *e) { (void)e; *o = malloc(1); return 0; }
static void edes(ws_gpu_event *s) { free(s); }
static int er(ws_gpu_event *x, ws_gpu_stream *s, ws_err *e) { (void)x; (void)s; (void)e; return 0; }
static int swe(ws_gpu_stream *s, ws_gpu_event *x, ws_err *e) { (void)x; (void)s; (void)e; return 0; }
static int es(ws_gpu_event *x, ws_err *e) { (void)x; (void)e; return 0; }
static int el(ws_gpu_event *a, ws_gpu_event *b, double *ms_, ws_err *e) { (void)a; (void)b; (void)e; *ms_ = 1; return 0; }
struct ws_gpu_attn { ws_gpu_attn_limits l; };
static int ac(const ws_gpu_attn_limits *l, ws_gpu_attn **o, ws_err *e) { (void)e; *o = malloc(sizeof **o); (*o)->l = *l; return 0; }
static void ad(ws_gpu_attn *a) { free(a); }
static int ar(ws_gpu_attn *a, const ws_attn_problem *p, const ws_gpu_attn_opts *opt, ws_gpu_stream *s, ws_gpu_attn_stats *st, ws_err *e)
{
    (void)s;
    int rc = ws_attn_validate(p, e);
    if (rc) return rc;
    int np = 0;
    for (int i = 0; i < p->n_seqs; i++) np += (p->seqs[i].n_tokens + p->kv.page_tokens - 1) / p->kv.page_tokens;
    if (p->n_seqs > a->l.max_seqs || np > a->l.max_pages || p->n_q_heads > a->l.max_q_heads || p->kv.d_v > a->l.max_d_v)
        return ws_err_set(e, WS_EINVAL, "fake: over workspace");
    return ws_attn_emu_run(p, 132, opt ? opt->chunk_tokens : 0, st, e);
}
static int am(const float *oa, const float *la, const float *ob, const float *lb, float *o, float *l, int n, int d, ws_gpu_stream *s, ws_err *e) { (void)s; (void)e; ws_attn_merge(oa, la, ob, lb, o, l, n, d); return 0; }
struct ws_gpu_xfer { ws_gpu_xfer_config c; ws_pingpong pp; char *dev; };
static int xc(const ws_gpu_xfer_config *c, ws_gpu_xfer **o, ws_err *e) { (void)e; ws_gpu_xfer *x = malloc(sizeof *x); x->c = *c; ws_pingpong_init(&x->pp, c->pages_per_half); x->dev = malloc(2 * c->pages_per_half * c->page_bytes); *o = x; return 0; }
static void xd(ws_gpu_xfer *x) { free(x->dev); free(x); }
static int xs(ws_gpu_xfer *x, const void *const *hp, int n, long tag, const void **dp, int *half, ws_err *e)
{
    int h, rc = ws_pingpong_submit(&x->pp, n, tag, &h, e);
    if (rc) return rc;
    for (int i = 0; i < n; i++) { char *d = x->dev + ws_pingpong_slot(&x->pp, h, i) * x->c.page_bytes; memcpy(d, hp[i], x->c.page_bytes); dp[i] = d; }
    *half = h;
    return 0;
}
static int xa(ws_gpu_xfer *x, int h, ws_gpu_stream *s, ws_err *e) { (void)s; return ws_pingpong_acquire(&x->pp, h, e); }
static int xr(ws_gpu_xfer *x, int h, ws_gpu_stream *s, ws_err *e) { (void)s; return ws_pingpong_release(&x->pp, h, e); }
struct ws_gpu_dwin { ws_gpu_dwin_config c; size_t pb; int rp; ws_ring *r; char *dev; };
static int wc(const ws_gpu_dwin_config *c, ws_gpu_dwin **o, ws_err *e)
{
    ws_gpu_dwin *d = calloc(1, sizeof *d); d->c = *c; d->pb = ws_kv_page_bytes(&c->kv); d->rp = c->window / c->kv.page_tokens;
    d->r = calloc((size_t)c->n_layers * c->max_seqs, sizeof(ws_ring));
    for (int i = 0; i < c->n_layers * c->max_seqs; i++) ws_ring_init(&d->r[i], c->window, c->kv.page_tokens, e);
    d->dev = calloc((size_t)c->n_layers * c->max_seqs * d->rp, d->pb); *o = d; return 0;
}
static void wd(ws_gpu_dwin *d) { free(d->r); free(d->dev); free(d); }
static int wa(ws_gpu_dwin *d, int layer, const int *seqs, int n, const void *kn, const void *vn, ws_gpu_stream *s, ws_err *e)
{
    (void)s;
    const ws_kv_layout *kv = &d->c.kv;
    for (int i = 0; i < n; i++) {
        int ri = layer * d->c.max_seqs + seqs[i], slot;
        int rc = ws_ring_append(&d->r[ri], &slot, e);
        if (rc) return rc;
        uint16_t *pg = (uint16_t *)(d->dev + ((size_t)ri * d->rp + slot / kv->page_tokens) * d->pb);
        for (int h = 0; h < kv->n_kv_heads; h++) {
            memcpy(pg + ws_kv_k_off(kv, h, slot % kv->page_tokens), (const uint16_t *)kn + ((size_t)i * kv->n_kv_heads + h) * kv->d_k, 2 * kv->d_k);
            if (!kv->v_shares_k) memcpy(pg + ws_kv_v_off(kv, h, slot % kv->page_tokens), (const uint16_t *)vn + ((size_t)i * kv->n_kv_heads + h) * kv->d_v, 2 * kv->d_v);
        }
    }
    return 0;
}
static int wp(ws_gpu_dwin *d, int layer, int seq, const void **pages, int *nt, ws_err *e)
{
    (void)e; int ri = layer * d->c.max_seqs + seq, idx[64];
    int n = ws_ring_pages(&d->r[ri], idx);
    for (int i = 0; i < n; i++) pages[i] = d->dev + ((size_t)ri * d->rp + idx[i]) * d->pb;
    *nt = d->r[ri].count; return 0;
}
static int wf(ws_gpu_dwin *d, const ws_gpu_dwin_flush *req, int nr, ws_gpu_stream *s, ws_err *e)
{
    (void)s;
    for (int i = 0; i < nr; i++) { ws_ring *r = &d->r[req[i].layer * d->c.max_seqs + req[i].seq]; if (req[i].n_pages > ws_ring_full_pages(r)) return ws_err_set(e, WS_EINVAL, "fake: over flush"); }
    for (int i = 0; i < nr; i++) {
        int ri = req[i].layer * d->c.max_seqs + req[i].seq, idx[64];
        ws_ring_flush(&d->r[ri], req[i].n_pages, idx, e);
        for (int k = 0; k < req[i].n_pages; k++) memcpy(req[i].dst[k], d->dev + ((size_t)ri * d->rp + idx[k]) * d->pb, d->pb);
    }
    return 0;
}
static int ww(ws_gpu_dwin *d, ws_err *e) { (void)d; (void)e; return 0; }
static int bc(ws_gpu_blas **o, ws_err *e) { (void)e; *o = malloc(1); return 0; }
static void bd(ws_gpu_blas *b) { free(b); }
static int gm(ws_gpu_blas *b, const ws_gemm_problem *g, ws_gpu_stream *s, ws_err *e)
{
    (void)b; (void)s;
    if (g->m <= 0 || g->n <= 0 || g->k <= 0) return ws_err_set(e, WS_EINVAL, "fake gemm dims");
    float (*cv)(uint16_t) = g->ab_dtype == WS_DT_BF16 ? ws_bf16_to_f32 : ws_fp16_to_f32;
    const uint16_t *A = g->a, *B = g->b; float *C = g->c;
    for (int i = 0; i < g->m; i++) for (int j = 0; j < g->n; j++) {
        float acc = 0; for (int k = 0; k < g->k; k++) acc += cv(A[i * g->k + k]) * cv(g->b_trans ? B[j * g->k + k] : B[k * g->n + j]);
        C[i * g->n + j] = g->alpha * acc + g->beta * C[i * g->n + j];
    }
    return 0;
}
static int cb(ws_gpu_copy_kind k, size_t n, int r, double *o, ws_err *e) { (void)k; (void)n; (void)r; (void)e; *o = 1e11; return 0; }
static ws_backend T = {.abi = WS_BACKEND_ABI, .name = "cuda", .device_count = dc, .device_info = di, .set_device = sd,
 .dev_alloc = da, .dev_free = df, .host_alloc = da, .host_free = df, .copy_async = ca, .memset_async = ms,
 .stream_create = sc, .stream_destroy = sdes, .stream_sync = ss, .event_create = ec, .event_destroy = edes,
 .event_record = er, .stream_wait_event = swe, .event_sync = es, .event_elapsed_ms = el,
 .attn_create = ac, .attn_destroy = ad, .attn_run = ar, .attn_merge = am,
 .xfer_create = xc, .xfer_destroy = xd, .xfer_submit = xs, .xfer_acquire = xa, .xfer_release = xr,
 .dwin_create = wc, .dwin_destroy = wd, .dwin_append = wa, .dwin_pages = wp, .dwin_flush = wf, .dwin_flush_wait = ww,
 .blas_create = bc, .blas_destroy = bd, .gemm = gm, .copy_bandwidth = cb};
__attribute__((visibility("default"))) const ws_backend *ws_cuda_backend_entry(void) { return &T; }
