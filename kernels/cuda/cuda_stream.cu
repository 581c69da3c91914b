/* cuda_stream: the GPU's fixed KV buffers and the copies into and out of them.
 *
 *   Streaming engine (ws_gpu_xfer): two ping-pong halves of page-sized landing slots in
 *   one device allocation; a layer's pinned XFER pages are copied with one cudaMemcpyAsync
 *   per page on the engine's copy stream. Events order copy -> attend -> reuse: the copy
 *   stream waits for the compute stream's `attended` event of the half before overwriting
 *   it, and the compute stream waits for the `copied` event before attending. Layer l+1's
 *   copies therefore run while layer l is attended. No allocation after creation.
 *
 *   D-windows (ws_gpu_dwin): per (layer, sequence) a ring of W tokens stored as W/P pages of
 *   the attention page layout, so the ring is attended in place. Appends are one small
 *   kernel per step; a flush copies the oldest full pages of many rings device-to-host on
 *   the D2H stream in one batch (coalesced where sources and destinations are contiguous),
 *   and appends wait for the flush before they reuse its slots.
 *
 * The host-side bookkeeping (which half, which slot, which pages a flush takes) is
 * kernels/gpu_book.c, tested on the CPU. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_util.h"
#include "gpu_book.h"

struct ws_gpu_xfer {
    ws_gpu_xfer_config cfg;
    ws_pingpong pp;
    char *dev;                /* 2 x pages_per_half slots */
    cudaStream_t copy;        /* the H2D copy stream */
    cudaEvent_t copied[2];    /* recorded on copy after a half's pages */
    cudaEvent_t attended[2];  /* recorded on the compute stream at release */
};

void cu_xfer_destroy(ws_gpu_xfer *x)
{
    if (!x)
        return;
    if (x->copy)
        cudaStreamSynchronize(x->copy);
    for (int h = 0; h < 2; h++) {
        if (x->copied[h])
            cudaEventDestroy(x->copied[h]);
        if (x->attended[h]) {
            cudaEventSynchronize(x->attended[h]);
            cudaEventDestroy(x->attended[h]);
        }
    }
    if (x->copy)
        cudaStreamDestroy(x->copy);
    cudaFree(x->dev);
    free(x);
}

int cu_xfer_create(const ws_gpu_xfer_config *cfg, ws_gpu_xfer **out, ws_err *err)
{
    *out = NULL;
    if (cfg->page_bytes == 0 || cfg->pages_per_half <= 0)
        return ws_err_set(err, WS_EINVAL, "streaming engine: page bytes and slots must be positive");
    ws_gpu_xfer *x = (ws_gpu_xfer *)calloc(1, sizeof *x);
    if (!x)
        return ws_err_set(err, WS_ENOMEM, "streaming engine: out of memory");
    x->cfg = *cfg;
    ws_pingpong_init(&x->pp, cfg->pages_per_half);
    cudaError_t rc = cudaMalloc(&x->dev, 2 * (size_t)cfg->pages_per_half * cfg->page_bytes);
    const char *what = "cudaMalloc(ping-pong halves)";
    if (rc == cudaSuccess) {
        what = "cudaStreamCreateWithFlags(copy stream)";
        rc = cudaStreamCreateWithFlags(&x->copy, cudaStreamNonBlocking);
    }
    for (int h = 0; h < 2 && rc == cudaSuccess; h++) {
        what = "cudaEventCreateWithFlags";
        rc = cudaEventCreateWithFlags(&x->copied[h], cudaEventDisableTiming);
        if (rc == cudaSuccess)
            rc = cudaEventCreateWithFlags(&x->attended[h], cudaEventDisableTiming);
    }
    if (rc != cudaSuccess) {
        int e = ws_err_set(err, WS_EDEVICE, "%s:%d: %s: %s", __FILE__, __LINE__, what,
                           cudaGetErrorString(rc));
        cu_xfer_destroy(x);
        return e;
    }
    *out = x;
    return 0;
}

int cu_xfer_submit(ws_gpu_xfer *x, const void *const *host_pages, int n_pages, long tag,
                   const void **dev_pages, int *half, ws_err *err)
{
    int h, rc = ws_pingpong_submit(&x->pp, n_pages, tag, &h, err);
    if (rc)
        return rc;
    /* The half's previous pages may still be read by the compute stream. */
    WS_CU(err, cudaStreamWaitEvent(x->copy, x->attended[h], 0));
    for (int i = 0; i < n_pages; i++) {
        char *dst = x->dev + ws_pingpong_slot(&x->pp, h, i) * x->cfg.page_bytes;
        WS_CU(err, cudaMemcpyAsync(dst, host_pages[i], x->cfg.page_bytes, cudaMemcpyHostToDevice,
                                   x->copy));
        dev_pages[i] = dst;
    }
    WS_CU(err, cudaEventRecord(x->copied[h], x->copy));
    *half = h;
    return 0;
}

int cu_xfer_acquire(ws_gpu_xfer *x, int half, ws_gpu_stream *compute, ws_err *err)
{
    int rc = ws_pingpong_acquire(&x->pp, half, err);
    if (rc)
        return rc;
    WS_CU(err, cudaStreamWaitEvent(cu_stream(compute), x->copied[half], 0));
    return 0;
}

int cu_xfer_release(ws_gpu_xfer *x, int half, ws_gpu_stream *compute, ws_err *err)
{
    int rc = ws_pingpong_release(&x->pp, half, err);
    if (rc)
        return rc;
    WS_CU(err, cudaEventRecord(x->attended[half], cu_stream(compute)));
    return 0;
}

/* ---- D-windows ---- */

struct ws_gpu_dwin {
    ws_gpu_dwin_config cfg;
    size_t page_bytes;
    int ring_pages;          /* W / P */
    ws_ring *rings;          /* [n_layers * max_seqs] */
    char *dev;               /* ring pages, ring r's pages at r * ring_pages */
    int2 *stage_h, *stage_d; /* append targets (ring, slot), pinned / device */
    cudaEvent_t staged;      /* stage_h may be rewritten once this has passed */
    cudaStream_t d2h;        /* flush copies */
    cudaEvent_t ready;       /* the caller's stream reached the flush */
    cudaEvent_t flushed;     /* the last flush's copies are done */
    size_t *src;             /* flush scratch, one entry per ring page of all rings */
    void **dst;
    ws_copy_run *runs;
    int *pages;
};

namespace {

/* One block per appended token: copies its K (and V) rows of every KV head into the slot. */
__global__ void dwin_append_kernel(uint16_t *dev, const int2 *targets, const uint16_t *k_new,
                                   const uint16_t *v_new, int n_kvh, int P, int d_k, int d_v,
                                   int share, int ring_pages, size_t page_elems)
{
    const int i = blockIdx.x;
    const int2 t = targets[i];
    uint16_t *page = dev + ((size_t)t.x * ring_pages + t.y / P) * page_elems;
    const int tok = t.y % P;
    for (int e = threadIdx.x; e < n_kvh * d_k; e += blockDim.x) {
        const int h = e / d_k, d = e % d_k;
        page[((size_t)h * P + tok) * d_k + d] = k_new[((size_t)i * n_kvh + h) * d_k + d];
    }
    if (share)
        return;
    const size_t v_block = (size_t)n_kvh * P * d_k;
    for (int e = threadIdx.x; e < n_kvh * d_v; e += blockDim.x) {
        const int h = e / d_v, d = e % d_v;
        page[v_block + ((size_t)h * P + tok) * d_v + d] = v_new[((size_t)i * n_kvh + h) * d_v + d];
    }
}

} /* namespace */

void cu_dwin_destroy(ws_gpu_dwin *d)
{
    if (!d)
        return;
    if (d->d2h)
        cudaStreamSynchronize(d->d2h);
    if (d->staged) {
        cudaEventSynchronize(d->staged);
        cudaEventDestroy(d->staged);
    }
    if (d->ready)
        cudaEventDestroy(d->ready);
    if (d->flushed)
        cudaEventDestroy(d->flushed);
    if (d->d2h)
        cudaStreamDestroy(d->d2h);
    cudaFree(d->dev);
    cudaFree(d->stage_d);
    cudaFreeHost(d->stage_h);
    free(d->rings);
    free(d->src);
    free(d->dst);
    free(d->runs);
    free(d->pages);
    free(d);
}

int cu_dwin_create(const ws_gpu_dwin_config *cfg, ws_gpu_dwin **out, ws_err *err)
{
    *out = NULL;
    ws_ring probe;
    int rc = ws_ring_init(&probe, cfg->window, cfg->kv.page_tokens, err);
    if (rc)
        return rc;
    if (cfg->n_layers <= 0 || cfg->max_seqs <= 0 || cfg->kv.n_kv_heads <= 0 || cfg->kv.d_k <= 0 ||
        cfg->kv.d_v <= 0 || ws_dtype_size(cfg->kv.dtype) != 2 || cfg->kv.v_pairs ||
        cfg->kv.k_tiles)
        return ws_err_set(err, WS_EINVAL,
                          "D-window: layers, sequences, heads and dims must be positive and the KV "
                          "type 16-bit, K and V in rows (the GPU layout)");
    ws_gpu_dwin *d = (ws_gpu_dwin *)calloc(1, sizeof *d);
    if (!d)
        return ws_err_set(err, WS_ENOMEM, "D-window: out of memory");
    d->cfg = *cfg;
    d->page_bytes = ws_kv_page_bytes(&cfg->kv);
    d->ring_pages = probe.n_pages;
    const size_t n_rings = (size_t)cfg->n_layers * cfg->max_seqs;
    const size_t n_pages = n_rings * d->ring_pages;
    d->rings = (ws_ring *)calloc(n_rings, sizeof *d->rings);
    d->src = (size_t *)malloc(sizeof(size_t) * n_pages);
    d->dst = (void **)malloc(sizeof(void *) * n_pages);
    d->runs = (ws_copy_run *)malloc(sizeof(ws_copy_run) * n_pages);
    d->pages = (int *)malloc(sizeof(int) * (size_t)d->ring_pages);
    if (!d->rings || !d->src || !d->dst || !d->runs || !d->pages) {
        cu_dwin_destroy(d);
        return ws_err_set(err, WS_ENOMEM, "D-window: out of memory");
    }
    for (size_t r = 0; r < n_rings; r++)
        ws_ring_init(&d->rings[r], cfg->window, cfg->kv.page_tokens, NULL);
    cudaError_t e = cudaMalloc(&d->dev, n_pages * d->page_bytes);
    const char *what = "cudaMalloc(D-window rings)";
    if (e == cudaSuccess) {
        what = "cudaMalloc(append staging)";
        e = cudaMalloc(&d->stage_d, sizeof(int2) * (size_t)cfg->max_seqs);
    }
    if (e == cudaSuccess) {
        what = "cudaHostAlloc(append staging)";
        e = cudaHostAlloc(&d->stage_h, sizeof(int2) * (size_t)cfg->max_seqs, cudaHostAllocDefault);
    }
    if (e == cudaSuccess) {
        what = "cudaStreamCreateWithFlags(D2H stream)";
        e = cudaStreamCreateWithFlags(&d->d2h, cudaStreamNonBlocking);
    }
    if (e == cudaSuccess) {
        what = "cudaEventCreateWithFlags";
        e = cudaEventCreateWithFlags(&d->staged, cudaEventDisableTiming);
    }
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&d->ready, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&d->flushed, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        rc = ws_err_set(err, WS_EDEVICE, "%s:%d: %s: %s", __FILE__, __LINE__, what,
                        cudaGetErrorString(e));
        cu_dwin_destroy(d);
        return rc;
    }
    *out = d;
    return 0;
}

static int dwin_ring(ws_gpu_dwin *d, int layer, int seq, ws_ring **r, ws_err *err)
{
    if (layer < 0 || layer >= d->cfg.n_layers || seq < 0 || seq >= d->cfg.max_seqs)
        return ws_err_set(err, WS_EINVAL, "D-window: (layer %d, sequence %d) outside %d x %d", layer,
                          seq, d->cfg.n_layers, d->cfg.max_seqs);
    *r = &d->rings[(size_t)layer * d->cfg.max_seqs + seq];
    return 0;
}

int cu_dwin_append(ws_gpu_dwin *d, int layer, const int *seqs, int n, const void *k_new,
                   const void *v_new, ws_gpu_stream *s, ws_err *err)
{
    if (n < 0 || n > d->cfg.max_seqs)
        return ws_err_set(err, WS_EINVAL, "D-window: append of %d tokens (at most %d)", n,
                          d->cfg.max_seqs);
    if (n == 0)
        return 0;
    if (!k_new || (!d->cfg.kv.v_shares_k && !v_new))
        return ws_err_set(err, WS_EINVAL, "D-window: NULL new K or V");
    WS_CU(err, cudaEventSynchronize(d->staged));
    int rc = 0, done = 0;
    for (; done < n; done++) {
        ws_ring *r;
        int slot;
        if ((rc = dwin_ring(d, layer, seqs[done], &r, err)) ||
            (rc = ws_ring_append(r, &slot, err))) {
            ws_err_prefix(err, "sequence %d", seqs[done]);
            break;
        }
        d->stage_h[done] = make_int2((int)(r - d->rings), slot);
    }
    if (rc) { /* undo the reservations made so far: all or nothing */
        for (int i = 0; i < done; i++) {
            ws_ring *r = &d->rings[d->stage_h[i].x];
            r->count--;
            r->appended--;
        }
        return rc;
    }
    cudaStream_t st = cu_stream(s);
    WS_CU(err, cudaMemcpyAsync(d->stage_d, d->stage_h, sizeof(int2) * (size_t)n,
                               cudaMemcpyHostToDevice, st));
    WS_CU(err, cudaEventRecord(d->staged, st));
    /* Slots freed by a flush are rewritten only after its copies. */
    WS_CU(err, cudaStreamWaitEvent(st, d->flushed, 0));
    const ws_kv_layout *kv = &d->cfg.kv;
    dwin_append_kernel<<<n, 128, 0, st>>>((uint16_t *)d->dev, d->stage_d, (const uint16_t *)k_new,
                                          (const uint16_t *)v_new, kv->n_kv_heads, kv->page_tokens,
                                          kv->d_k, kv->d_v, kv->v_shares_k, d->ring_pages,
                                          d->page_bytes / 2);
    WS_CU_LAUNCH(err, "D-window append");
    return 0;
}

int cu_dwin_pages(ws_gpu_dwin *d, int layer, int seq, const void **pages, int *n_tokens,
                  ws_err *err)
{
    ws_ring *r;
    int rc = dwin_ring(d, layer, seq, &r, err);
    if (rc)
        return rc;
    const size_t base = (size_t)(r - d->rings) * d->ring_pages;
    int n = ws_ring_pages(r, d->pages);
    for (int i = 0; i < n; i++)
        pages[i] = d->dev + (base + (size_t)d->pages[i]) * d->page_bytes;
    *n_tokens = r->count;
    return 0;
}

int cu_dwin_flush(ws_gpu_dwin *d, const ws_gpu_dwin_flush *req, int n_req, ws_gpu_stream *s,
                  ws_err *err)
{
    /* Check every request before changing any ring. */
    for (int i = 0; i < n_req; i++) {
        ws_ring *r;
        int rc = dwin_ring(d, req[i].layer, req[i].seq, &r, err);
        if (rc)
            return rc;
        if (req[i].n_pages < 0 || req[i].n_pages > ws_ring_full_pages(r) ||
            (req[i].n_pages > 0 && !req[i].dst))
            return ws_err_set(err, WS_EINVAL,
                              "D-window flush %d: %d pages requested, %d full pages held in "
                              "(layer %d, sequence %d)",
                              i, req[i].n_pages, ws_ring_full_pages(r), req[i].layer, req[i].seq);
    }
    int n = 0;
    for (int i = 0; i < n_req; i++) {
        ws_ring *r;
        dwin_ring(d, req[i].layer, req[i].seq, &r, NULL);
        int rc = ws_ring_flush(r, req[i].n_pages, d->pages, err);
        if (rc)
            return ws_err_prefix(err, "flush %d (the same ring listed twice?)", i);
        const size_t base = (size_t)(r - d->rings) * d->ring_pages;
        for (int k = 0; k < req[i].n_pages; k++) {
            d->src[n] = base + (size_t)d->pages[k];
            d->dst[n] = req[i].dst[k];
            n++;
        }
    }
    if (n == 0)
        return 0;
    const int n_runs = ws_copy_runs(d->src, d->dst, n, d->page_bytes, d->runs);
    WS_CU(err, cudaEventRecord(d->ready, cu_stream(s)));
    WS_CU(err, cudaStreamWaitEvent(d->d2h, d->ready, 0));
    for (int i = 0; i < n_runs; i++)
        WS_CU(err, cudaMemcpyAsync(d->runs[i].dst, d->dev + d->runs[i].src * d->page_bytes,
                                   (size_t)d->runs[i].n_pages * d->page_bytes,
                                   cudaMemcpyDeviceToHost, d->d2h));
    WS_CU(err, cudaEventRecord(d->flushed, d->d2h));
    return 0;
}

int cu_dwin_flush_wait(ws_gpu_dwin *d, ws_err *err)
{
    WS_CU(err, cudaEventSynchronize(d->flushed));
    return 0;
}
