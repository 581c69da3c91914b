/* measure_gpu: GPU and link sweeps through the backend table (see measure_gpu.h). */
#include "measure_gpu.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gemm_cpu.h"
#include "gpu.h"
#include "model.h"
#include "ws_util.h"

#define REPS_MAX 9

typedef struct gctx {
    const ws_calib_opts *o;
    ws_calib_run *run;
    const ws_backend *g;
    ws_gpu_stream *s, *s2;
    ws_gpu_event *e0, *e1;
    int phase0, n_phases;
    ws_err *err;
} gctx;

static void gprogress(gctx *c, int phase, double frac, const char *what)
{
    if (c->o->progress)
        c->o->progress(c->o->progress_ctx, (c->phase0 + phase + fmin(1.0, frac)) / c->n_phases,
                       what);
}

static int gstopped(gctx *c)
{
    if (c->o->stop && *c->o->stop)
        return ws_err_set(c->err, WS_ECANCELED, "calibration interrupted; nothing was written");
    return 0;
}

/* Adds a sample to the run (see ws_calib_add_timed). */
#define gadd(c, ...) ws_calib_add_timed((c)->run, (c)->err, __VA_ARGS__)

/* Times `reps` runs of fn on stream c->s with events, after one warm-up; seconds into t. */
typedef int (*gpu_op_fn)(gctx *c, void *arg);
static int time_events(gctx *c, gpu_op_fn fn, void *arg, int reps, double *t)
{
    int rc = fn(c, arg);
    if (!rc)
        rc = c->g->stream_sync(c->s, c->err);
    for (int r = 0; r < reps && !rc; r++) {
        double ms = 0;
        if ((rc = c->g->event_record(c->e0, c->s, c->err)) || (rc = fn(c, arg)) ||
            (rc = c->g->event_record(c->e1, c->s, c->err)) ||
            (rc = c->g->event_sync(c->e1, c->err)) ||
            (rc = c->g->event_elapsed_ms(c->e0, c->e1, &ms, c->err)))
            break;
        t[r] = ms * 1e-3;
    }
    return rc;
}

/* ---- link: H2D / D2H, pinned and pageable, latency + bandwidth ------------------------ */

typedef struct copy_arg {
    void *dst;
    const void *src;
    size_t bytes;
} copy_arg;

static int op_copy(gctx *c, void *arg)
{
    copy_arg *a = arg;
    return c->g->copy_async(a->dst, a->src, a->bytes, c->s, c->err);
}

/* A CPU thread running expert GEMMs until told to stop: the contention H2D meets when the
 * CPU computes routed experts. */
typedef struct gemm_load {
    volatile int stop;
    int hidden, inter, tokens;
    long calls;
} gemm_load;

static void *gemm_loop(void *p)
{
    gemm_load *l = p;
    size_t wn = (size_t)l->hidden * l->inter * 3;
    float *w = calloc(wn, sizeof(float)), *x = calloc((size_t)l->tokens * l->hidden, sizeof(float));
    float *y = calloc((size_t)l->tokens * l->hidden, sizeof(float));
    float *s = calloc((size_t)l->tokens * 2 * l->inter, sizeof(float));
    if (w && x && y && s) {
        ws_expert_f32 e = {l->hidden, l->inter, w, w + (size_t)l->hidden * 2 * l->inter};
        while (!l->stop && ws_expert_ffn_cpu(&e, x, y, l->tokens, s, 0, NULL) == 0)
            l->calls++;
    }
    free(w), free(x), free(y), free(s);
    return NULL;
}

static int measure_link(gctx *c)
{
    const int quick = c->o->quick, reps = quick ? 3 : 5;
    const size_t max_bytes = quick ? (256u << 20) : (1u << 30);
    void *dev = NULL, *pinned = NULL, *dev2 = NULL, *pinned2 = NULL;
    char *pageable = malloc(max_bytes);
    int rc = pageable ? 0 : ws_err_set(c->err, WS_ENOMEM, "calib: out of memory");
    if (!rc && !(rc = c->g->dev_alloc(max_bytes, &dev, c->err)) &&
        !(rc = c->g->host_alloc(max_bytes, &pinned, c->err)) &&
        !(rc = c->g->dev_alloc(max_bytes, &dev2, c->err)))
        rc = c->g->host_alloc(max_bytes, &pinned2, c->err);
    if (!rc) {
        memset(pageable, 1, max_bytes);
        memset(pinned, 1, max_bytes);
        memset(pinned2, 2, max_bytes);
    }
    /* 4 KB .. max in steps of 4x (quick: 16x). */
    int step = quick ? 4 : 2, n_sizes = 0;
    for (size_t b = 4096; b <= max_bytes; b <<= step)
        n_sizes++;
    struct {
        const char *op;
        int d2h, page;
    } kinds[] = {{"h2d", 0, 0}, {"d2h", 1, 0}, {"h2d_pageable", 0, 1}, {"d2h_pageable", 1, 1}};
    int done = 0, plan = 4 * n_sizes + 6;
    for (int k = 0; k < 4 && !rc; k++) {
        for (size_t b = 4096; b <= max_bytes && !rc; b <<= step) {
            char label[80];
            snprintf(label, sizeof label, "link %s %zu bytes", kinds[k].op, b);
            gprogress(c, 1, (double)done++ / plan, label);
            void *host = kinds[k].page ? (void *)pageable : pinned;
            copy_arg a = {kinds[k].d2h ? host : dev, kinds[k].d2h ? dev : host, b};
            double t[REPS_MAX];
            if ((rc = gstopped(c)) || (rc = time_events(c, op_copy, &a, reps, t)))
                break;
            rc = gadd(c, "link", kinds[k].op, "", "", 0, (double)b, t, reps,
                      "{\"bytes\": %zu, \"host\": \"%s\"}", b, kinds[k].page ? "pageable" : "pinned");
        }
    }
    /* H2D concurrent with D2H (two streams), and H2D while the CPU runs expert GEMMs. */
    size_t big[] = {64u << 20, 128u << 20, 256u << 20};
    for (int i = 0; i < 3 && !rc; i++) {
        double t[REPS_MAX];
        gprogress(c, 1, (double)done++ / plan, "link h2d concurrent with d2h");
        for (int r = -1; r < reps && !rc; r++) {
            double t0 = ws_now_s();
            if ((rc = c->g->copy_async(pinned2, dev2, big[i], c->s2, c->err)) ||
                (rc = c->g->copy_async(dev, pinned, big[i], c->s, c->err)) ||
                (rc = c->g->stream_sync(c->s, c->err)))
                break;
            double th2d = ws_now_s() - t0;
            if ((rc = c->g->stream_sync(c->s2, c->err)))
                break;
            if (r >= 0)
                t[r] = th2d;
        }
        if (!rc)
            rc = gadd(c, "link", "h2d_concurrent", "", "", 0, (double)big[i], t, reps,
                      "{\"bytes\": %zu, \"with\": \"d2h of the same size\"}", big[i]);
    }
    gemm_load load = {.hidden = 2048, .inter = 768, .tokens = 64};
    pthread_t th;
    int started = !rc && pthread_create(&th, NULL, gemm_loop, &load) == 0;
    for (int i = 0; i < 3 && !rc && started; i++) {
        double t[REPS_MAX];
        copy_arg a = {dev, pinned, big[i]};
        gprogress(c, 1, (double)done++ / plan, "link h2d under CPU expert GEMMs");
        if (!(rc = time_events(c, op_copy, &a, reps, t)))
            rc = gadd(c, "link", "h2d_under_gemm", "", "", 0, (double)big[i], t, reps,
                      "{\"bytes\": %zu, \"cpu_load\": \"qwen3-30b-a3b expert FFN, 64 tokens, "
                      "all threads\"}",
                      big[i]);
    }
    if (started) {
        load.stop = 1;
        pthread_join(th, NULL);
    }
    c->g->dev_free(dev);
    c->g->dev_free(dev2);
    c->g->host_free(pinned);
    c->g->host_free(pinned2);
    free(pageable);
    return rc;
}

/* ---- GPU: device copy, attention, GEMM ------------------------------------------------ */

typedef struct attn_arg {
    ws_gpu_attn *w;
    ws_attn_problem *p;
} attn_arg;

static int op_attn(gctx *c, void *arg)
{
    attn_arg *a = arg;
    return c->g->attn_run(a->w, a->p, NULL, c->s, NULL, c->err);
}

typedef struct gemm_arg {
    ws_gpu_blas *b;
    ws_gemm_problem g[2];
} gemm_arg;

static int op_gemm(gctx *c, void *arg)
{
    gemm_arg *a = arg;
    int rc = c->g->gemm(a->b, &a->g[0], c->s, c->err);
    return rc ? rc : c->g->gemm(a->b, &a->g[1], c->s, c->err);
}

static int gpu_attn_sweep(gctx *c, const char *model, ws_dtype dt, void *pool, size_t pool_bytes)
{
    char path[WS_PATH_MAX];
    ws_model m;
    int rc = ws_model_resolve(model, path, sizeof path, c->err);
    if (rc || (rc = ws_model_load(path, &m, c->err)))
        return rc;
    ws_kv_layout kv;
    int n_q;
    float scale;
    if ((rc = ws_model_attn_shape(&m, dt, 256, &kv, &n_q, &scale, c->err)))
        return rc;
    const size_t page = ws_kv_page_bytes(&kv);
    const int n_pool_pages = (int)(pool_bytes / page), reps = c->o->quick ? 3 : 5;
    int ctxs[] = {1024, 4096, 16384, 65536, 262144, 1048576};
    int max_pages = 1048576 / 256;
    ws_gpu_attn_limits lim = {.max_seqs = 4, .max_pages = max_pages, .max_q_heads = m.n_q_heads,
                              .max_d_v = kv.d_v};
    ws_gpu_attn *w = NULL;
    void *q = NULL, *o = NULL, *lse = NULL;
    const void **table = malloc(sizeof(void *) * (size_t)max_pages);
    if (!table)
        return ws_err_set(c->err, WS_ENOMEM, "calib: out of memory");
    size_t qn = 4 * (size_t)m.n_q_heads;
    if ((rc = c->g->attn_create(&lim, &w, c->err)) ||
        (rc = c->g->dev_alloc(qn * (size_t)kv.d_k * 4, &q, c->err)) ||
        (rc = c->g->dev_alloc(qn * (size_t)kv.d_v * 4, &o, c->err)) ||
        (rc = c->g->dev_alloc(qn * 4, &lse, c->err)) ||
        (rc = c->g->memset_async(q, 0, qn * (size_t)kv.d_k * 4, c->s, c->err)))
        goto out;
    for (int i = 0; i < 6 && !rc; i++) {
        for (int b = 1; b <= 4 && !rc; b += 3) {
            int np = ctxs[i] / 256;
            if (np * b > max_pages || np * b > n_pool_pages)
                continue;
            ws_attn_seq seqs[4];
            for (int s = 0; s < b; s++) {
                for (int j = 0; j < np; j++)
                    table[s * np + j] = (char *)pool + page * (size_t)((s * np + j) % n_pool_pages);
                seqs[s] = (ws_attn_seq){.pages = table + s * np, .n_tokens = ctxs[i]};
            }
            ws_attn_problem p = {.kv = kv,
                                 .n_q_heads = m.n_q_heads,
                                 .scale = scale,
                                 .n_seqs = b,
                                 .seqs = seqs,
                                 .q = q,
                                 .o = o,
                                 .lse = lse};
            attn_arg a = {w, &p};
            double t[REPS_MAX];
            char label[96];
            snprintf(label, sizeof label, "gpu attn %s %s ctx %d batch %d", ws_attn_kind_name(m.attn),
                     ws_dtype_name(dt), ctxs[i], b);
            gprogress(c, 0, 0.2 + 0.5 * i / 6.0, label);
            if ((rc = gstopped(c)) || (rc = time_events(c, op_attn, &a, reps, t)))
                break;
            double bytes = ws_attn_kv_bytes(&p),
                   tokens = (double)ctxs[i] * b,
                   flops = tokens * m.n_q_heads * 2.0 * (kv.d_k + kv.d_v);
            rc = gadd(c, "gpu", "attn", ws_dtype_name(dt), ws_attn_kind_name(m.attn), flops, bytes,
                      t, reps, "{\"model\": \"%s\", \"ctx\": %d, \"batch\": %d}", model, ctxs[i], b);
        }
    }
out:
    if (w)
        c->g->attn_destroy(w);
    c->g->dev_free(q);
    c->g->dev_free(o);
    c->g->dev_free(lse);
    free(table);
    return rc;
}

static int measure_gpu(gctx *c)
{
    const int reps = c->o->quick ? 3 : 5;
    int rc = 0;
    /* Device copy bandwidth (read + write counted) over sizes: the GPU's W. */
    size_t sizes[] = {64u << 20, 256u << 20, 512u << 20, 1u << 30};
    double best = 0;
    for (int i = 0; i < 4 && !rc; i++) {
        double bps, t[1];
        gprogress(c, 0, 0.05 * i, "gpu device copy bandwidth");
        if ((rc = c->g->copy_bandwidth(WS_COPY_D2D, sizes[i], reps, &bps, c->err)))
            break;
        t[0] = 2.0 * (double)sizes[i] / bps;
        best = fmax(best, bps);
        rc = gadd(c, "gpu", "d2d", "", "", 0, 2.0 * (double)sizes[i], t, 1,
                  "{\"bytes\": %zu, \"counted\": \"read + write\", \"repeats\": %d}", sizes[i], reps);
    }
    c->run->gpu_bw = best;
    /* Attention over one device pool of pages (content: zeros are fine for timing). */
    size_t pool_bytes = (size_t)1 << 31;
    void *pool = NULL;
    if (!rc && !(rc = c->g->dev_alloc(pool_bytes, &pool, c->err)))
        rc = c->g->memset_async(pool, 0, pool_bytes, c->s, c->err);
    static const char *const models[] = {"qwen3-30b-a3b", "deepseek-v2-lite"};
    ws_device_info info;
    int has_bf16 = c->g->device_info(0, &info, c->err) == 0 && info.cc_major >= 8;
    for (int mi = 0; mi < 2 && !rc; mi++)
        rc = gpu_attn_sweep(c, models[mi], has_bf16 ? WS_DT_BF16 : WS_DT_FP16, pool, pool_bytes);
    c->g->dev_free(pool);
    /* cuBLAS GEMM on the experts' shapes: gate+up [m x H][H x 2I], down [m x I][I x H]. */
    ws_gpu_blas *blas = NULL;
    static const char *const gm[] = {"qwen3-30b-a3b", "deepseek-v2-lite", "mixtral-8x7b"};
    int toks[] = {1, 4, 16, 64, 256, 512};
    for (int mi = 0; mi < 3 && !rc; mi++) {
        char path[WS_PATH_MAX];
        ws_model m;
        if ((rc = ws_model_resolve(gm[mi], path, sizeof path, c->err)) ||
            (rc = ws_model_load(path, &m, c->err)))
            break;
        const size_t H = (size_t)m.hidden, I = (size_t)m.moe_intermediate, M = 512;
        void *wgu = NULL, *wd = NULL, *x = NULL, *h = NULL, *y = NULL;
        if (!blas && (rc = c->g->blas_create(&blas, c->err)))
            break;
        if (!(rc = c->g->dev_alloc(H * 2 * I * 2, &wgu, c->err)) &&
            !(rc = c->g->dev_alloc(I * H * 2, &wd, c->err)) &&
            !(rc = c->g->dev_alloc(M * H * 2, &x, c->err)) &&
            !(rc = c->g->dev_alloc(M * 2 * I * 2, &h, c->err)) &&
            !(rc = c->g->dev_alloc(M * H * 4, &y, c->err)) &&
            !(rc = c->g->memset_async(wgu, 0, H * 2 * I * 2, c->s, c->err)) &&
            !(rc = c->g->memset_async(wd, 0, I * H * 2, c->s, c->err)) &&
            !(rc = c->g->memset_async(x, 0, M * H * 2, c->s, c->err))) {
            ws_dtype dt = has_bf16 ? WS_DT_BF16 : WS_DT_FP16;
            for (int ti = 0; ti < 6 && !rc; ti++) {
                gemm_arg a = {blas,
                              {{(int)toks[ti], (int)(2 * I), (int)H, dt, dt, 0, 1.0f, 0.0f, x, wgu, h},
                               {(int)toks[ti], (int)H, (int)I, dt, WS_DT_FP32, 0, 1.0f, 0.0f, h, wd, y}}};
                double t[REPS_MAX], flops = 2.0 * toks[ti] * (double)H * (double)I * 3.0,
                                    bytes = 2.0 * (3.0 * H * I + toks[ti] * (2.0 * H + 4.0 * I));
                char label[96];
                snprintf(label, sizeof label, "gpu GEMM %s, %d tokens", gm[mi], toks[ti]);
                gprogress(c, 0, 0.7 + 0.1 * mi + 0.1 * ti / 6.0, label);
                if ((rc = gstopped(c)) || (rc = time_events(c, op_gemm, &a, reps, t)))
                    break;
                if (flops / t[0] > c->run->gpu_peak)
                    c->run->gpu_peak = flops / t[0];
                rc = gadd(c, "gpu", "gemm", ws_dtype_name(dt), "", flops, bytes, t, reps,
                          "{\"model\": \"%s\", \"tokens\": %d, \"shape\": \"expert FFN (2 GEMMs)\"}",
                          gm[mi], toks[ti]);
            }
        }
        c->g->dev_free(wgu);
        c->g->dev_free(wd);
        c->g->dev_free(x);
        c->g->dev_free(h);
        c->g->dev_free(y);
    }
    if (blas)
        c->g->blas_destroy(blas);
    return rc;
}

int ws_calib_measure_gpu(const ws_calib_opts *o, ws_calib_run *run, int phase0, int n_phases,
                         ws_err *err)
{
    gctx c = {.o = o, .run = run, .phase0 = phase0, .n_phases = n_phases, .err = err};
    ws_err derr = {0};
    c.g = ws_backend_cuda(&derr);
    if (!c.g || c.g->device_count(&derr) <= 0)
        return ws_err_set(err, WS_EDEVICE, "no CUDA device: %s", derr.msg);
    int rc = c.g->set_device(0, err);
    if (rc || (rc = c.g->stream_create(&c.s, err)) || (rc = c.g->stream_create(&c.s2, err)) ||
        (rc = c.g->event_create(&c.e0, err)) || (rc = c.g->event_create(&c.e1, err)))
        goto out;
    if (o->do_gpu)
        rc = measure_gpu(&c);
    if (!rc && o->do_link)
        rc = measure_link(&c);
out:
    if (c.e0)
        c.g->event_destroy(c.e0);
    if (c.e1)
        c.g->event_destroy(c.e1);
    if (c.s)
        c.g->stream_destroy(c.s);
    if (c.s2)
        c.g->stream_destroy(c.s2);
    return rc;
}
