/* bench_gpu: the short GPU benchmark of tests/gpu/run.sh. Measures, in one run on device 0:
 *   - device memcpy (D2D) bandwidth, read + write bytes per second;
 *   - decode attention over paged KV at contexts >= 32K (GQA Qwen3-like shape, and an MLA
 *     DeepSeek-V2-Lite-like shape), as KV bytes read per second and as a fraction of D2D;
 *   - H2D streaming of XFER pages through the ping-pong engine (one DMA per page, layers
 *     alternating halves) as a fraction of one plain pinned cudaMemcpyAsync of the same
 *     total size;
 *   - D2H D-window flush of full rings to scattered pinned pages, and plain D2H;
 *   - one H2D copy from pageable (malloc'd) host memory against the same from pinned.
 * Prints one line per figure and writes them as JSON to the path given as argument.
 * Exit status: 0 measured, 77 no CUDA device (nothing measured), 1 failure.
 * Usage: ws_gpu_bench OUT.json */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"

static const ws_backend *B;
static ws_err err;

#define CHECK(call)                                                                          \
    do {                                                                                     \
        if ((call) != 0) {                                                                   \
            fprintf(stderr, "bench_gpu: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, err.msg); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static unsigned g_rng = 99;
static unsigned rnd(void)
{
    g_rng = g_rng * 1664525u + 1013904223u;
    return g_rng >> 8;
}

typedef struct attn_fig {
    const char *shape;
    int context, batch, dtype_bf16;
    double kv_bytes, seconds, bytes_per_s, frac_of_d2d;
} attn_fig;

/* Median time of one decode-attention call over batch x context tokens. */
static attn_fig bench_attn(const char *shape, ws_kv_layout kv, int n_q, int context, int batch,
                           double d2d)
{
    const size_t pb = ws_kv_page_bytes(&kv);
    const int pages_per_seq = (context + kv.page_tokens - 1) / kv.page_tokens;
    const int n_pages = pages_per_seq * batch;
    char *pool;
    CHECK(B->dev_alloc(pb * (size_t)n_pages, (void **)&pool, &err));
    CHECK(B->memset_async(pool, 0x3c, pb * (size_t)n_pages, NULL, &err)); /* finite values */
    /* Page tables in shuffled pool order, as pages land wherever they were written. */
    int *perm = malloc(sizeof(int) * (size_t)n_pages);
    for (int i = 0; i < n_pages; i++)
        perm[i] = i;
    for (int i = n_pages - 1; i > 0; i--) {
        int j = (int)(rnd() % (unsigned)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    const void **tab = malloc(sizeof(void *) * (size_t)n_pages);
    ws_attn_seq *seqs = calloc((size_t)batch, sizeof *seqs);
    for (int i = 0; i < n_pages; i++)
        tab[i] = pool + pb * (size_t)perm[i];
    for (int s = 0; s < batch; s++) {
        seqs[s].pages = tab + (size_t)s * pages_per_seq;
        seqs[s].n_tokens = context;
    }
    float *q, *o, *lse;
    const size_t rows = (size_t)batch * n_q;
    CHECK(B->dev_alloc(sizeof(float) * rows * kv.d_k, (void **)&q, &err));
    CHECK(B->dev_alloc(sizeof(float) * rows * kv.d_v, (void **)&o, &err));
    CHECK(B->dev_alloc(sizeof(float) * rows, (void **)&lse, &err));
    CHECK(B->memset_async(q, 0, sizeof(float) * rows * kv.d_k, NULL, &err));
    CHECK(B->stream_sync(NULL, &err)); /* the timed stream does not wait for the default one */
    ws_attn_problem p = {.kv = kv, .n_q_heads = n_q, .scale = 1.0f / sqrtf((float)kv.d_k),
                         .n_seqs = batch, .seqs = seqs, .q = q, .o = o, .lse = lse};
    ws_gpu_attn_limits lim = {.max_seqs = batch, .max_pages = n_pages, .max_q_heads = n_q,
                              .max_d_v = kv.d_v, .max_chunks = 0};
    ws_gpu_attn *ws;
    CHECK(B->attn_create(&lim, &ws, &err));
    ws_gpu_stream *st;
    ws_gpu_event *e0, *e1;
    CHECK(B->stream_create(&st, &err));
    CHECK(B->event_create(&e0, &err));
    CHECK(B->event_create(&e1, &err));
    enum { REPS = 20 };
    double ms[REPS];
    for (int r = -2; r < REPS; r++) {
        CHECK(B->event_record(e0, st, &err));
        CHECK(B->attn_run(ws, &p, NULL, st, NULL, &err));
        CHECK(B->event_record(e1, st, &err));
        CHECK(B->event_sync(e1, &err));
        double t;
        CHECK(B->event_elapsed_ms(e0, e1, &t, &err));
        if (r >= 0)
            ms[r] = t;
    }
    qsort(ms, REPS, sizeof ms[0], cmp_d);
    attn_fig f = {.shape = shape, .context = context, .batch = batch,
                  .dtype_bf16 = kv.dtype == WS_DT_BF16};
    f.kv_bytes = ws_attn_kv_bytes(&p);
    f.seconds = ms[REPS / 2] * 1e-3;
    f.bytes_per_s = f.kv_bytes / f.seconds;
    f.frac_of_d2d = f.bytes_per_s / d2d;
    B->attn_destroy(ws);
    B->event_destroy(e0);
    B->event_destroy(e1);
    B->stream_destroy(st);
    B->dev_free(pool);
    B->dev_free(q);
    B->dev_free(o);
    B->dev_free(lse);
    free(perm);
    free(tab);
    free(seqs);
    return f;
}

/* Streams n_layers layers of pages_per_layer pinned pages through the engine (layer l+1
 * submitted before layer l is released); best of 3 wall-clock times. */
static double bench_stream(size_t pb, int pages_per_layer, int n_layers)
{
    char *pinned;
    const size_t total_pages = (size_t)pages_per_layer * n_layers;
    CHECK(B->host_alloc(pb * total_pages, (void **)&pinned, &err));
    memset(pinned, 1, pb * total_pages);
    ws_gpu_xfer_config cfg = {.page_bytes = pb, .pages_per_half = pages_per_layer};
    ws_gpu_xfer *x;
    CHECK(B->xfer_create(&cfg, &x, &err));
    ws_gpu_stream *compute;
    CHECK(B->stream_create(&compute, &err));
    const void **host = malloc(sizeof(void *) * total_pages);
    const void **dev = malloc(sizeof(void *) * (size_t)pages_per_layer);
    for (size_t i = 0; i < total_pages; i++)
        host[i] = pinned + pb * i;
    double best = 1e30;
    for (int rep = 0; rep < 4; rep++) {
        int half[2];
        CHECK(B->stream_sync(compute, &err));
        double t0 = now_s();
        CHECK(B->xfer_submit(x, host, pages_per_layer, 0, dev, &half[0], &err));
        for (int l = 0; l < n_layers; l++) {
            if (l + 1 < n_layers)
                CHECK(B->xfer_submit(x, host + (size_t)(l + 1) * pages_per_layer, pages_per_layer,
                                     l + 1, dev, &half[(l + 1) % 2], &err));
            CHECK(B->xfer_acquire(x, half[l % 2], compute, &err));
            CHECK(B->xfer_release(x, half[l % 2], compute, &err));
        }
        CHECK(B->stream_sync(compute, &err));
        double t = now_s() - t0;
        if (rep > 0 && t < best) /* rep 0 warms up */
            best = t;
    }
    B->xfer_destroy(x);
    B->stream_destroy(compute);
    B->host_free(pinned);
    free(host);
    free(dev);
    return (double)(pb * total_pages) / best;
}

/* Fills n_layers x n_seqs one-page rings by appends, then flushes them all in one batch to
 * pinned pages in shuffled order (one DMA per page); best of 3. */
static double bench_flush(ws_kv_layout kv, int n_layers, int n_seqs, size_t *bytes_out)
{
    ws_gpu_dwin_config cfg = {.kv = kv, .window = kv.page_tokens, .n_layers = n_layers, .max_seqs = n_seqs};
    ws_gpu_dwin *dw;
    CHECK(B->dwin_create(&cfg, &dw, &err));
    const size_t pb = ws_kv_page_bytes(&kv), n_pages = (size_t)n_layers * n_seqs;
    char *dst_mem;
    CHECK(B->host_alloc(pb * n_pages, (void **)&dst_mem, &err));
    void **dst = malloc(sizeof(void *) * n_pages);
    ws_gpu_dwin_flush *req = malloc(sizeof *req * n_pages);
    int *seqs = malloc(sizeof(int) * (size_t)n_seqs);
    void *kn;
    const size_t tok = (size_t)kv.n_kv_heads * (kv.d_k + kv.d_v) * 2 * (size_t)n_seqs;
    CHECK(B->dev_alloc(tok, &kn, &err));
    CHECK(B->memset_async(kn, 0, tok, NULL, &err));
    for (int s = 0; s < n_seqs; s++)
        seqs[s] = s;
    double best = 1e30;
    for (int rep = 0; rep < 4; rep++) {
        for (int t = 0; t < kv.page_tokens; t++)
            for (int l = 0; l < n_layers; l++)
                CHECK(B->dwin_append(dw, l, seqs, n_seqs, kn, kn, NULL, &err));
        for (size_t i = 0; i < n_pages; i++)
            dst[i] = dst_mem + pb * i;
        for (size_t i = n_pages - 1; i > 0; i--) { /* scattered destinations */
            size_t j = rnd() % (i + 1);
            void *t = dst[i];
            dst[i] = dst[j];
            dst[j] = t;
        }
        for (size_t i = 0; i < n_pages; i++)
            req[i] = (ws_gpu_dwin_flush){.layer = (int)(i / n_seqs), .seq = (int)(i % n_seqs),
                                         .n_pages = 1, .dst = &dst[i]};
        CHECK(B->stream_sync(NULL, &err));
        double t0 = now_s();
        CHECK(B->dwin_flush(dw, req, (int)n_pages, NULL, &err));
        CHECK(B->dwin_flush_wait(dw, &err));
        double t = now_s() - t0;
        if (rep > 0 && t < best)
            best = t;
    }
    B->dwin_destroy(dw);
    B->host_free(dst_mem);
    B->dev_free(kn);
    free(dst);
    free(req);
    free(seqs);
    *bytes_out = pb * n_pages;
    return (double)(pb * n_pages) / best;
}

/* One H2D copy of `bytes` from pageable (malloc'd, touched) host memory, timed on the
 * host around copy + sync; best of 5 after a warm-up. */
static double bench_pageable_h2d(size_t bytes)
{
    char *host = malloc(bytes);
    if (!host) {
        fprintf(stderr, "bench_gpu: out of memory\n");
        exit(1);
    }
    memset(host, 1, bytes);
    void *dev;
    CHECK(B->dev_alloc(bytes, &dev, &err));
    double best = 1e30;
    for (int rep = 0; rep < 6; rep++) {
        CHECK(B->stream_sync(NULL, &err));
        double t0 = now_s();
        CHECK(B->copy_async(dev, host, bytes, NULL, &err));
        CHECK(B->stream_sync(NULL, &err));
        double t = now_s() - t0;
        if (rep > 0 && t < best)
            best = t;
    }
    B->dev_free(dev);
    free(host);
    return (double)bytes / best;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: ws_gpu_bench OUT.json\n");
        return 2;
    }
    B = ws_backend_cuda(&err);
    if (!B || B->device_count(&err) == 0) {
        printf("bench_gpu: no CUDA device (%s): nothing measured\n", err.msg);
        return 77;
    }
    ws_device_info info;
    CHECK(B->device_info(0, &info, &err));
    CHECK(B->set_device(0, &err));
    const int cc = info.cc_major * 10 + info.cc_minor;
    const ws_dtype kvt = cc >= 80 ? WS_DT_BF16 : WS_DT_FP16;
    printf("device: %s (cc %d.%d, %d SMs, %.0f GiB)\n", info.name, info.cc_major, info.cc_minor,
           info.units, info.mem_bytes / 1073741824.0);

    double d2d, h2d_plain, d2h_plain;
    CHECK(B->copy_bandwidth(WS_COPY_D2D, (size_t)1 << 30, 10, &d2d, &err));
    printf("measured  D2D memcpy: %.1f GB/s (read + write)\n", d2d / 1e9);

    ws_kv_layout gqa = {.page_tokens = 256, .n_kv_heads = 4, .d_k = 128, .d_v = 128, .dtype = kvt};
    ws_kv_layout mla = {.page_tokens = 256, .n_kv_heads = 1, .d_k = 576, .d_v = 512,
                        .v_shares_k = 1, .dtype = kvt};
    attn_fig figs[5];
    int nf = 0;
    figs[nf++] = bench_attn("gqa q32 kv4 d128", gqa, 32, 32768, 8, d2d);
    figs[nf++] = bench_attn("gqa q32 kv4 d128", gqa, 32, 65536, 4, d2d);
    figs[nf++] = bench_attn("gqa q32 kv4 d128", gqa, 32, 131072, 2, d2d);
    figs[nf++] = bench_attn("mla q16 576/512", mla, 16, 32768, 8, d2d);
    figs[nf++] = bench_attn("mla q16 576/512", mla, 16, 131072, 2, d2d);
    for (int i = 0; i < nf; i++)
        printf("measured  attention %-18s ctx %6d x %d %s: %.2f ms, %.1f GB/s = %.3f of D2D\n",
               figs[i].shape, figs[i].context, figs[i].batch, figs[i].dtype_bf16 ? "bf16" : "fp16",
               figs[i].seconds * 1e3, figs[i].bytes_per_s / 1e9, figs[i].frac_of_d2d);

    /* Streaming: 8 layers x 64 pages of 512 KiB = 256 MiB. */
    const size_t pb = ws_kv_page_bytes(&gqa);
    const int spl = 64, layers = 8;
    const size_t stream_total = pb * (size_t)spl * layers;
    double h2d_stream = bench_stream(pb, spl, layers);
    CHECK(B->copy_bandwidth(WS_COPY_H2D, stream_total, 5, &h2d_plain, &err));
    printf("measured  H2D streaming %.0f MiB (%d pages/layer, %d layers): %.2f GB/s = %.3f of "
           "plain pinned memcpy %.2f GB/s\n",
           stream_total / 1048576.0, spl, layers, h2d_stream / 1e9, h2d_stream / h2d_plain,
           h2d_plain / 1e9);

    const double h2d_pageable = bench_pageable_h2d(stream_total);
    printf("measured  H2D from pageable memory %.0f MiB: %.2f GB/s = %.3f of pinned %.2f GB/s\n",
           stream_total / 1048576.0, h2d_pageable / 1e9, h2d_pageable / h2d_plain,
           h2d_plain / 1e9);

    size_t flush_bytes;
    double d2h_flush = bench_flush(gqa, 8, 32, &flush_bytes);
    CHECK(B->copy_bandwidth(WS_COPY_D2H, flush_bytes, 5, &d2h_plain, &err));
    printf("measured  D2H flush %.0f MiB (256 one-page rings, scattered pinned pages): %.2f GB/s "
           "(plain pinned D2H memcpy %.2f GB/s, ratio %.3f)\n",
           flush_bytes / 1048576.0, d2h_flush / 1e9, d2h_plain / 1e9, d2h_flush / d2h_plain);

    FILE *f = fopen(argv[1], "w");
    if (!f) {
        fprintf(stderr, "bench_gpu: cannot write %s\n", argv[1]);
        return 1;
    }
    fprintf(f, "{\n  \"source\": \"measured\",\n  \"device\": \"%s\",\n  \"compute_capability\": \"%d.%d\",\n",
            info.name, info.cc_major, info.cc_minor);
    fprintf(f, "  \"d2d_memcpy_bytes_per_s\": %.6e,\n  \"attention\": [\n", d2d);
    for (int i = 0; i < nf; i++)
        fprintf(f,
                "    {\"shape\": \"%s\", \"kv_dtype\": \"%s\", \"context\": %d, \"batch\": %d, "
                "\"kv_bytes\": %.0f, \"seconds\": %.6e, \"bytes_per_s\": %.6e, "
                "\"fraction_of_d2d\": %.4f}%s\n",
                figs[i].shape, figs[i].dtype_bf16 ? "bf16" : "fp16", figs[i].context, figs[i].batch,
                figs[i].kv_bytes, figs[i].seconds, figs[i].bytes_per_s, figs[i].frac_of_d2d,
                i + 1 < nf ? "," : "");
    fprintf(f, "  ],\n  \"h2d_stream\": {\"bytes\": %zu, \"bytes_per_s\": %.6e, "
               "\"plain_pinned_bytes_per_s\": %.6e, \"fraction_of_plain\": %.4f},\n",
            stream_total, h2d_stream, h2d_plain, h2d_stream / h2d_plain);
    fprintf(f, "  \"h2d_pageable\": {\"bytes\": %zu, \"bytes_per_s\": %.6e, "
               "\"pinned_bytes_per_s\": %.6e, \"fraction_of_pinned\": %.4f},\n",
            stream_total, h2d_pageable, h2d_plain, h2d_pageable / h2d_plain);
    fprintf(f, "  \"d2h_flush\": {\"bytes\": %zu, \"bytes_per_s\": %.6e, "
               "\"plain_pinned_bytes_per_s\": %.6e}\n}\n",
            flush_bytes, d2h_flush, d2h_plain);
    fclose(f);
    printf("figures written to %s\n", argv[1]);
    return 0;
}
