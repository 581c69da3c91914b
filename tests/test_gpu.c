/* test_gpu: every GPU operation of the CUDA backend against its CPU reference: decode
 * attention (GQA groups 1..16, d 64/128/256, MLA 576/512 with 16..128 heads, bf16 and
 * fp16, forced and automatic split-K) against ws_attn_ref; the GPU merge against
 * ws_attn_merge; the streaming engine (pages land byte-exact in the ping-pong halves the
 * bookkeeping names, attention over them is right, protocol misuse is refused); the
 * D-window (appends, in-place attention, wraparound, batched flush bytes and order); the
 * cuBLAS GEMM against an fp64 product. One test, so that a machine without a GPU prints
 * one [SKIP] line; each comparison names itself in its failure message. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "attn_fixture.h"
#include "gpu_book.h"
#include "half.h"

static const ws_backend *B;
static int g_cc;


#define OK(call) cr_assert_eq((call), 0, "%s: %s", #call, err.msg)

static void *dev_copy_of(const void *host, size_t bytes)
{
    ws_err err = {0};
    void *d;
    OK(B->dev_alloc(bytes ? bytes : 1, &d, &err));
    if (bytes)
        OK(B->copy_async(d, host, bytes, NULL, &err));
    OK(B->stream_sync(NULL, &err));
    return d;
}

static void to_host(void *host, const void *dev, size_t bytes)
{
    ws_err err = {0};
    OK(B->copy_async(host, dev, bytes, NULL, &err));
    OK(B->stream_sync(NULL, &err));
}

/* Runs the problem `hp` (host pages, host q) on the GPU: pages are copied into one device
 * pool in reverse order (page tables are not contiguous), then compared with the fp64
 * reference. chunk = 0: automatic split. Returns the stats. */
static ws_gpu_attn_stats gpu_vs_ref(const char *name, ws_attn_problem hp, int chunk)
{
    ws_err err = {0};
    const ws_kv_layout *kv = &hp.kv;
    const size_t pb = ws_kv_page_bytes(kv), nq = (size_t)hp.n_q_heads;
    int n_pages = 0;
    for (int s = 0; s < hp.n_seqs; s++)
        n_pages += (hp.seqs[s].n_tokens + kv->page_tokens - 1) / kv->page_tokens;
    char *pool_d;
    OK(B->dev_alloc(pb * (size_t)(n_pages + 1), (void **)&pool_d, &err));
    ws_attn_seq *dseq = calloc((size_t)hp.n_seqs + 1, sizeof *dseq);
    const void **dtab = calloc((size_t)n_pages + 1, sizeof(void *));
    int k = 0;
    for (int s = 0; s < hp.n_seqs; s++) {
        dseq[s] = hp.seqs[s];
        dseq[s].pages = dtab + k;
        int np = (hp.seqs[s].n_tokens + kv->page_tokens - 1) / kv->page_tokens;
        for (int i = 0; i < np; i++, k++) {
            char *slot = pool_d + pb * (size_t)(n_pages - 1 - k);
            OK(B->copy_async(slot, hp.seqs[s].pages[i], pb, NULL, &err));
            dtab[k] = slot;
        }
    }
    const size_t rows = (size_t)hp.n_seqs * nq;
    double *o_ref = malloc(sizeof(double) * rows * kv->d_v), *l_ref = malloc(sizeof(double) * rows);
    cr_assert_eq(ws_attn_ref(&hp, o_ref, l_ref, &err), 0, "%s: %s", name, err.msg);
    ws_attn_problem dp = hp;
    dp.seqs = dseq;
    dp.q = dev_copy_of(hp.q, sizeof(float) * rows * kv->d_k);
    OK(B->dev_alloc(sizeof(float) * rows * kv->d_v + 4, (void **)&dp.o, &err));
    OK(B->dev_alloc(sizeof(float) * rows + 4, (void **)&dp.lse, &err));
    OK(B->memset_async(dp.o, 0xff, sizeof(float) * rows * kv->d_v, NULL, &err)); /* NaN */
    OK(B->memset_async(dp.lse, 0xff, sizeof(float) * rows, NULL, &err));
    ws_gpu_attn_limits lim = {.max_seqs = hp.n_seqs, .max_pages = n_pages, .max_q_heads = hp.n_q_heads,
                              .max_d_v = kv->d_v, .max_chunks = 0};
    ws_gpu_attn *ws;
    OK(B->attn_create(&lim, &ws, &err));
    ws_gpu_attn_opts opts = {.chunk_tokens = chunk};
    ws_gpu_attn_stats st = {0};
    cr_assert_eq(B->attn_run(ws, &dp, &opts, NULL, &st, &err), 0, "%s: %s", name, err.msg);
    float *o = malloc(sizeof(float) * rows * kv->d_v), *l = malloc(sizeof(float) * rows);
    to_host(o, dp.o, sizeof(float) * rows * kv->d_v);
    to_host(l, dp.lse, sizeof(float) * rows);
    double worst = 0;
    for (size_t r = 0; r < rows; r++) {
        if (isinf(l_ref[r])) {
            cr_assert(isinf(l[r]) && l[r] < 0, "%s: row %zu lse %g, expected -inf", name, r, l[r]);
        } else {
            cr_assert(fabs(l[r] - l_ref[r]) <= 2e-3, "%s: row %zu lse %.6f vs %.6f", name, r, l[r],
                      l_ref[r]);
        }
        for (int d = 0; d < kv->d_v; d++) {
            double e = fabs(o[r * kv->d_v + d] - o_ref[r * kv->d_v + d]);
            cr_assert(e <= 2e-3, "%s (chunk %d): row %zu d %d: %.6f vs %.6f", name, st.chunk_tokens,
                      r, d, o[r * kv->d_v + d], o_ref[r * kv->d_v + d]);
            if (e > worst)
                worst = e;
        }
    }
    B->attn_destroy(ws);
    B->dev_free(pool_d);
    B->dev_free((void *)dp.q);
    B->dev_free(dp.o);
    B->dev_free(dp.lse);
    free(dseq);
    free(dtab);
    free(o_ref);
    free(l_ref);
    free(o);
    free(l);
    return st;
}

typedef th_attn hprob; /* tests/attn_fixture.h */

static void check_attention(void)
{
    const ws_dtype types[2] = {WS_DT_FP16, WS_DT_BF16};
    for (int ti = 0; ti < 2; ti++) {
        ws_dtype t = types[ti];
        if (t == WS_DT_BF16 && g_cc < 80)
            continue; /* checked as an error below */
        char name[128];
        /* GQA group sizes 1..16, d = 64, pages smaller than a tile. */
        const int groups[] = {1, 2, 3, 4, 5, 8, 12, 16};
        for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
            hprob f;
            ws_kv_layout kv = {.page_tokens = 16, .n_kv_heads = 2, .d_k = 64, .d_v = 64, .dtype = t};
            int lens[3] = {333, 1, 77};
            th_attn_make(&f, kv, 2 * groups[g], 3, lens, 2.0f); /* peaky q: the softmax is not uniform */
            snprintf(name, sizeof name, "gqa d64 group %d %s", groups[g], ws_dtype_name(t));
            gpu_vs_ref(name, f.p, 0);
            th_attn_free(&f);
        }
        /* d = 128, group 8 (Qwen3-like), empty sequence, forced chunk sizes incl. one chunk. */
        {
            hprob f;
            ws_kv_layout kv = {.page_tokens = 256, .n_kv_heads = 4, .d_k = 128, .d_v = 128, .dtype = t};
            int lens[4] = {3000, 0, 257, 64};
            th_attn_make(&f, kv, 32, 4, lens, 2.0f); /* peaky q: the softmax is not uniform */
            const int chunks[] = {0, 1, 64, 500, 1 << 20};
            for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
                snprintf(name, sizeof name, "gqa d128 group 8 %s chunk %d", ws_dtype_name(t), chunks[c]);
                ws_gpu_attn_stats st = gpu_vs_ref(name, f.p, chunks[c]);
                if (chunks[c] == (1 << 20))
                    cr_assert_eq(st.second_pass, 1, "the empty sequence still needs pass 2");
                if (chunks[c] == 1)
                    cr_assert_eq(st.chunk_tokens, st.tile_tokens, "rounded up to the tile");
            }
            /* Without the empty sequence and with one chunk each: pass 1 writes directly. */
            f.p.n_seqs = 1;
            ws_gpu_attn_stats st = gpu_vs_ref("gqa d128 single chunk", f.p, 1 << 20);
            cr_assert_eq(st.n_chunks, 1);
            cr_assert_eq(st.second_pass, 0);
            f.p.n_seqs = 4;
            th_attn_free(&f);
        }
        {
            hprob f;
            ws_kv_layout kv = {.page_tokens = 64, .n_kv_heads = 2, .d_k = 256, .d_v = 256, .dtype = t};
            int lens[2] = {1000, 31};
            th_attn_make(&f, kv, 8, 2, lens, 2.0f); /* peaky q: the softmax is not uniform */
            snprintf(name, sizeof name, "gqa d256 group 4 %s", ws_dtype_name(t));
            gpu_vs_ref(name, f.p, 0);
            th_attn_free(&f);
        }
        /* MLA absorbed: one latent head, V inside K, 16 and 128 query heads. */
        const int mla_heads[] = {16, 128};
        for (int i = 0; i < 2; i++) {
            hprob f;
            ws_kv_layout kv = {.page_tokens = 64, .n_kv_heads = 1, .d_k = 576, .d_v = 512,
                               .v_shares_k = 1, .dtype = t};
            int lens[2] = {700, 5};
            th_attn_make(&f, kv, mla_heads[i], 2, lens, 2.0f); /* peaky q: the softmax is not uniform */
            f.p.scale = 1.0f / sqrtf(192.0f); /* DeepSeek's qk_nope + qk_rope */
            snprintf(name, sizeof name, "mla %d heads %s", mla_heads[i], ws_dtype_name(t));
            gpu_vs_ref(name, f.p, 0);
            snprintf(name, sizeof name, "mla %d heads %s chunk 96", mla_heads[i], ws_dtype_name(t));
            gpu_vs_ref(name, f.p, 96);
            th_attn_free(&f);
        }
    }
}

static void check_attention_errors(void)
{
    ws_err err = {0};
    hprob f;
    ws_kv_layout kv = {.page_tokens = 16, .n_kv_heads = 1, .d_k = 96, .d_v = 96, .dtype = WS_DT_FP16};
    int lens[1] = {10};
    th_attn_make(&f, kv, 1, 1, lens, 2.0f); /* peaky q: the softmax is not uniform */
    ws_gpu_attn_limits lim = {.max_seqs = 1, .max_pages = 1, .max_q_heads = 1, .max_d_v = 96};
    ws_gpu_attn *ws;
    OK(B->attn_create(&lim, &ws, &err));
    float *o, *l;
    OK(B->dev_alloc(4096, (void **)&o, &err));
    OK(B->dev_alloc(4096, (void **)&l, &err));
    f.p.o = o;
    f.p.lse = l;
    f.p.q = o; /* never read: refused before launch */
    cr_assert_eq(B->attn_run(ws, &f.p, NULL, NULL, NULL, &err), WS_EUNSUP, "d=96 not built");
    cr_assert_neq(strstr(err.msg, "no kernel"), NULL, "%s", err.msg);
    f.p.kv.d_k = f.p.kv.d_v = 64;
    int32_t sel[1] = {3};
    f.seq[0].sel = sel;
    f.seq[0].n_sel = 1;
    cr_assert_eq(B->attn_run(ws, &f.p, NULL, NULL, NULL, &err), WS_EUNSUP, "sparse on GPU");
    f.seq[0].sel = NULL;
    f.p.n_q_heads = 2;
    cr_assert_eq(B->attn_run(ws, &f.p, NULL, NULL, NULL, &err), WS_EINVAL, "over the workspace");
    if (g_cc < 80) {
        f.p.n_q_heads = 1;
        f.p.kv.dtype = WS_DT_BF16;
        cr_assert_eq(B->attn_run(ws, &f.p, NULL, NULL, NULL, &err), WS_EUNSUP, "bf16 on sm_70");
    }
    B->attn_destroy(ws);
    B->dev_free(o);
    B->dev_free(l);
    th_attn_free(&f);
}

static void check_merge(void)
{
    ws_err err = {0};
    enum { R = 37, D = 96 };
    static float oa[R * D], ob[R * D], la[R], lb[R], o_cpu[R * D], l_cpu[R], o_gpu[R * D], l_gpu[R];
    for (int i = 0; i < R * D; i++) {
        oa[i] = th_attn_rand();
        ob[i] = th_attn_rand();
    }
    for (int r = 0; r < R; r++) {
        la[r] = r % 5 == 0 ? -INFINITY : 30.0f * th_attn_rand();
        lb[r] = r % 7 == 0 ? -INFINITY : 30.0f * th_attn_rand();
    }
    la[3] = lb[3] = 1000.0f;
    ws_attn_merge(oa, la, ob, lb, o_cpu, l_cpu, R, D);
    float *d_oa = dev_copy_of(oa, sizeof oa), *d_ob = dev_copy_of(ob, sizeof ob),
          *d_la = dev_copy_of(la, sizeof la), *d_lb = dev_copy_of(lb, sizeof lb);
    /* Output aliasing the a side, as the runtime does. */
    OK(B->attn_merge(d_oa, d_la, d_ob, d_lb, d_oa, d_la, R, D, NULL, &err));
    to_host(o_gpu, d_oa, sizeof o_gpu);
    to_host(l_gpu, d_la, sizeof l_gpu);
    for (int r = 0; r < R; r++) {
        if (isinf(l_cpu[r]))
            cr_assert(isinf(l_gpu[r]) && l_gpu[r] < 0, "merge row %d", r);
        else
            cr_assert_float_eq(l_gpu[r], l_cpu[r], 1e-4 * (1 + fabsf(l_cpu[r])), "merge lse row %d", r);
        for (int d = 0; d < D; d++)
            cr_assert_float_eq(o_gpu[r * D + d], o_cpu[r * D + d], 1e-5, "merge row %d d %d", r, d);
    }
    B->dev_free(d_oa);
    B->dev_free(d_ob);
    B->dev_free(d_la);
    B->dev_free(d_lb);
}

/* Six layers streamed through a 2 x 3-slot ping-pong buffer with the overlap pattern of
 * the runtime: layer l+1 is submitted before layer l is attended. */
static void check_streaming(void)
{
    ws_err err = {0};
    ws_kv_layout kv = {.page_tokens = 32, .n_kv_heads = 2, .d_k = 128, .d_v = 128, .dtype = WS_DT_FP16};
    const size_t pb = ws_kv_page_bytes(&kv);
    enum { L = 6, NP = 3 };
    uint16_t *pinned;
    OK(B->host_alloc(pb * L * NP, (void **)&pinned, &err));
    for (size_t i = 0; i < pb * L * NP / 2; i++)
        pinned[i] = th_attn_to16(kv.dtype, th_attn_rand());
    ws_gpu_xfer_config cfg = {.page_bytes = pb, .pages_per_half = NP};
    ws_gpu_xfer *x;
    OK(B->xfer_create(&cfg, &x, &err));
    ws_gpu_stream *compute;
    OK(B->stream_create(&compute, &err));
    ws_pingpong model;
    ws_pingpong_init(&model, NP);
    const int lens[L] = {96, 70, 1, 65, 96, 33};
    const void *dev_pages[L][NP];
    int half[L];
    const void *host_tab[L][NP];
    ws_gpu_attn_limits lim = {.max_seqs = 1, .max_pages = NP, .max_q_heads = 8, .max_d_v = 128};
    ws_gpu_attn *ws;
    OK(B->attn_create(&lim, &ws, &err));
    float *q_h = malloc(sizeof(float) * 8 * 128), *q_d, *o_d, *l_d;
    for (int i = 0; i < 8 * 128; i++)
        q_h[i] = th_attn_rand();
    q_d = dev_copy_of(q_h, sizeof(float) * 8 * 128);
    OK(B->dev_alloc(sizeof(float) * 8 * 128, (void **)&o_d, &err));
    OK(B->dev_alloc(sizeof(float) * 8, (void **)&l_d, &err));
    for (int l = 0; l < L; l++)
        for (int i = 0; i < NP; i++)
            host_tab[l][i] = (const char *)pinned + pb * (size_t)(l * NP + i);
    int mh;
    for (int l = 0; l < 2; l++) {
        int np = (lens[l] + 31) / 32;
        OK(B->xfer_submit(x, host_tab[l], np, l, dev_pages[l], &half[l], &err));
        ws_pingpong_submit(&model, np, l, &mh, NULL);
        cr_assert_eq(half[l], mh, "stream: layer %d half", l);
    }
    cr_assert_eq(B->xfer_submit(x, host_tab[2], 1, 2, dev_pages[2], &half[2], &err), WS_EINVAL,
                 "stream: a third layer in flight must be refused");
    for (int l = 0; l < L; l++) {
        OK(B->xfer_acquire(x, half[l], compute, &err));
        ws_attn_seq sq = {.pages = dev_pages[l], .n_tokens = lens[l]};
        ws_attn_problem p = {.kv = kv, .n_q_heads = 8, .scale = 0.088f, .n_seqs = 1, .seqs = &sq,
                             .q = q_d, .o = o_d, .lse = l_d};
        OK(B->attn_run(ws, &p, NULL, compute, NULL, &err));
        OK(B->xfer_release(x, half[l], compute, &err));
        if (l + 2 < L) { /* the next-but-one layer reuses the half just released */
            int np = (lens[l + 2] + 31) / 32;
            OK(B->xfer_submit(x, host_tab[l + 2], np, l + 2, dev_pages[l + 2], &half[l + 2], &err));
            cr_assert_eq(half[l + 2], half[l], "stream: layer %d reuses half %d", l + 2, half[l]);
        }
        OK(B->stream_sync(compute, &err));
        /* The landed bytes equal the pinned source pages. */
        char *back = malloc(pb);
        int np = (lens[l] + 31) / 32;
        for (int i = 0; i < np; i++) {
            if (l + 2 < L)
                break; /* the half now holds layer l+2 (or is being overwritten) */
            to_host(back, dev_pages[l][i], pb);
            cr_assert_eq(memcmp(back, host_tab[l][i], pb), 0, "stream: layer %d page %d bytes", l, i);
        }
        free(back);
        float o[8 * 128], lse[8];
        to_host(o, o_d, sizeof o);
        to_host(lse, l_d, sizeof lse);
        ws_attn_seq hs = {.pages = host_tab[l], .n_tokens = lens[l]};
        ws_attn_problem hp = {.kv = kv, .n_q_heads = 8, .scale = 0.088f, .n_seqs = 1, .seqs = &hs,
                              .q = q_h, .o = o, .lse = lse};
        double oref[8 * 128], lref[8];
        OK(ws_attn_ref(&hp, oref, lref, &err));
        for (int i = 0; i < 8 * 128; i++)
            cr_assert(fabs(o[i] - oref[i]) <= 2e-3, "stream: layer %d attention elem %d", l, i);
        for (int i = 0; i < 8; i++)
            cr_assert(fabs(lse[i] - lref[i]) <= 2e-3, "stream: layer %d lse %d", l, i);
    }
    B->attn_destroy(ws);
    B->xfer_destroy(x);
    B->stream_destroy(compute);
    B->host_free(pinned);
    B->dev_free(q_d);
    B->dev_free(o_d);
    B->dev_free(l_d);
    free(q_h);
}

/* D-window: 2 layers x 3 sequences, P = 8, W = 24. Appends with a host mirror of every
 * token; in-place attention over the held tokens; flushes of the oldest pages compared
 * byte for byte with pages built from the mirror; wraparound. */
static void check_dwin(void)
{
    ws_err err = {0};
    ws_kv_layout kv = {.page_tokens = 8, .n_kv_heads = 2, .d_k = 64, .d_v = 64, .dtype = WS_DT_FP16};
    enum { NL = 2, NS = 3, W = 24, STEPS = 70, P = 8, HD = 64 };
    ws_gpu_dwin_config cfg = {.kv = kv, .window = W, .n_layers = NL, .max_seqs = NS};
    ws_gpu_dwin *dw;
    OK(B->dwin_create(&cfg, &dw, &err));
    const size_t pb = ws_kv_page_bytes(&kv), tok_elems = 2 * HD; /* per head: K row + V row */
    /* mirror[layer][seq][t][h][K|V][d] */
    uint16_t *mirror = malloc(sizeof(uint16_t) * NL * NS * STEPS * 2 * tok_elems);
#define MIR(l, s, t, h, v) (mirror + ((((size_t)(l) * NS + (s)) * STEPS + (t)) * 2 + (h)) * tok_elems + (v) * HD)
    int flushed_upto[NL][NS] = {{0}}; /* logical index of the oldest held token */
    int appended[NL][NS] = {{0}};
    uint16_t *kn = malloc(sizeof(uint16_t) * NS * 2 * HD), *vn = malloc(sizeof(uint16_t) * NS * 2 * HD);
    void *kn_d, *vn_d;
    OK(B->dev_alloc(sizeof(uint16_t) * NS * 2 * HD, &kn_d, &err));
    OK(B->dev_alloc(sizeof(uint16_t) * NS * 2 * HD, &vn_d, &err));
    char *flush_dst;
    OK(B->host_alloc(pb * NL * NS * (W / P), (void **)&flush_dst, &err));
    ws_gpu_attn_limits lim = {.max_seqs = NS, .max_pages = NS * (W / P), .max_q_heads = 4, .max_d_v = HD};
    ws_gpu_attn *ws;
    OK(B->attn_create(&lim, &ws, &err));
    float q_h[NS * 4 * HD];
    for (int i = 0; i < NS * 4 * HD; i++)
        q_h[i] = th_attn_rand();
    float *q_d = dev_copy_of(q_h, sizeof q_h), *o_d, *l_d;
    OK(B->dev_alloc(sizeof(float) * NS * 4 * HD, (void **)&o_d, &err));
    OK(B->dev_alloc(sizeof(float) * NS * 4, (void **)&l_d, &err));
    for (int step = 0; step < STEPS; step++) {
        for (int l = 0; l < NL; l++) {
            /* Sequence 2 joins late, sequence 1 skips odd steps: rings fill unevenly. */
            int seqs[NS], n = 0;
            for (int s = 0; s < NS; s++)
                if (!(s == 2 && step < 10) && !(s == 1 && step % 2))
                    seqs[n++] = s;
            for (int i = 0; i < n; i++) {
                int s = seqs[i], t = appended[l][s];
                for (int h = 0; h < 2; h++)
                    for (int d = 0; d < HD; d++) {
                        uint16_t kk = th_attn_to16(kv.dtype, th_attn_rand()), vv = th_attn_to16(kv.dtype, th_attn_rand());
                        kn[((size_t)i * 2 + h) * HD + d] = kk;
                        vn[((size_t)i * 2 + h) * HD + d] = vv;
                        MIR(l, s, t, h, 0)[d] = kk;
                        MIR(l, s, t, h, 1)[d] = vv;
                    }
            }
            OK(B->copy_async(kn_d, kn, sizeof(uint16_t) * (size_t)n * 2 * HD, NULL, &err));
            OK(B->copy_async(vn_d, vn, sizeof(uint16_t) * (size_t)n * 2 * HD, NULL, &err));
            OK(B->dwin_append(dw, l, seqs, n, kn_d, vn_d, NULL, &err));
            for (int i = 0; i < n; i++)
                appended[l][seqs[i]]++;
            /* Attend all three rings of this layer in place and compare. */
            const void *dp[NS][W / P];
            ws_attn_seq dseq[NS];
            for (int s = 0; s < NS; s++) {
                OK(B->dwin_pages(dw, l, s, dp[s], &dseq[s].n_tokens, &err));
                cr_assert_eq(dseq[s].n_tokens, appended[l][s] - flushed_upto[l][s], "dwin count");
                dseq[s].pages = dp[s];
                dseq[s].sel = NULL;
                dseq[s].n_sel = 0;
            }
            ws_attn_problem p = {.kv = kv, .n_q_heads = 4, .scale = 0.125f, .n_seqs = NS, .seqs = dseq,
                                 .q = q_d, .o = o_d, .lse = l_d};
            OK(B->attn_run(ws, &p, NULL, NULL, NULL, &err));
            float o[NS * 4 * HD], lse[NS * 4];
            to_host(o, o_d, sizeof o);
            to_host(lse, l_d, sizeof lse);
            /* Host pages built from the mirror, oldest token first. */
            uint16_t *hpages = calloc((size_t)NS * (W / P), pb);
            const void *htab[NS][W / P];
            ws_attn_seq hseq[NS];
            for (int s = 0; s < NS; s++) {
                int n_tok = dseq[s].n_tokens;
                for (int j = 0; j < n_tok; j++) {
                    uint16_t *pg = hpages + ((size_t)s * (W / P) + j / P) * (pb / 2);
                    for (int h = 0; h < 2; h++) {
                        memcpy(pg + ws_kv_k_off(&kv, h, j % P), MIR(l, s, flushed_upto[l][s] + j, h, 0), 2 * HD);
                        memcpy(pg + ws_kv_v_off(&kv, h, j % P), MIR(l, s, flushed_upto[l][s] + j, h, 1), 2 * HD);
                    }
                }
                for (int j = 0; j < W / P; j++)
                    htab[s][j] = hpages + ((size_t)s * (W / P) + j) * (pb / 2);
                hseq[s] = dseq[s];
                hseq[s].pages = htab[s];
            }
            ws_attn_problem hp = p;
            hp.seqs = hseq;
            hp.q = q_h;
            double oref[NS * 4 * HD], lref[NS * 4];
            OK(ws_attn_ref(&hp, oref, lref, &err));
            for (int i = 0; i < NS * 4 * HD; i++)
                cr_assert(fabs(o[i] - oref[i]) <= 2e-3, "dwin step %d layer %d: attention elem %d", step, l, i);
            for (int i = 0; i < NS * 4; i++)
                cr_assert(isinf(lref[i]) ? isinf(lse[i]) : fabs(lse[i] - lref[i]) <= 2e-3,
                          "dwin step %d layer %d: lse %d", step, l, i);
            /* Flush: every ring with >= 2 full pages gives its oldest full pages, all rings
             * of the layer in one batch, to consecutive host pages (coalesced copies). */
            ws_gpu_dwin_flush req[NS];
            void *dst[NS][W / P];
            int nr = 0;
            char *next = flush_dst;
            for (int s = 0; s < NS; s++) {
                int full = dseq[s].n_tokens / P;
                if (full < 2)
                    continue;
                for (int k = 0; k < full; k++, next += pb)
                    dst[s][k] = next;
                req[nr++] = (ws_gpu_dwin_flush){.layer = l, .seq = s, .n_pages = full, .dst = dst[s]};
            }
            if (nr) {
                memset(flush_dst, 0, pb * NL * NS * (W / P));
                OK(B->dwin_flush(dw, req, nr, NULL, &err));
                OK(B->dwin_flush_wait(dw, &err));
                for (int r = 0; r < nr; r++) {
                    int s = req[r].seq;
                    for (int k = 0; k < req[r].n_pages; k++)
                        cr_assert_eq(memcmp(dst[s][k], hpages + ((size_t)s * (W / P) + k) * (pb / 2), pb), 0,
                                     "dwin step %d: flushed page %d of (layer %d, seq %d)", step, k, l, s);
                    flushed_upto[l][s] += req[r].n_pages * P;
                }
            }
            free(hpages);
        }
    }
    /* Every ring wrapped around at least once. */
    cr_assert_gt(flushed_upto[0][0], 2 * W);
    /* Misuse: appending to a full ring, flushing more than is held. */
    const void *dp[W / P];
    int n_tok;
    OK(B->dwin_pages(dw, 0, 0, dp, &n_tok, &err));
    ws_gpu_dwin_flush too_much = {.layer = 0, .seq = 0, .n_pages = n_tok / P + 1, .dst = (void *const *)dp};
    cr_assert_eq(B->dwin_flush(dw, &too_much, 1, NULL, &err), WS_EINVAL, "dwin: over-flush refused");
    int one = 0;
    for (int i = n_tok; i < W; i++)
        OK(B->dwin_append(dw, 0, &one, 1, kn_d, vn_d, NULL, &err));
    cr_assert_eq(B->dwin_append(dw, 0, &one, 1, kn_d, vn_d, NULL, &err), WS_EINVAL, "dwin: full ring");
    OK(B->stream_sync(NULL, &err));
#undef MIR
    B->attn_destroy(ws);
    B->dwin_destroy(dw);
    B->host_free(flush_dst);
    B->dev_free(kn_d);
    B->dev_free(vn_d);
    B->dev_free(q_d);
    B->dev_free(o_d);
    B->dev_free(l_d);
    free(kn);
    free(vn);
    free(mirror);
}

static void check_gemm(void)
{
    ws_err err = {0};
    ws_gpu_blas *bl;
    OK(B->blas_create(&bl, &err));
    enum { M = 37, N = 64, K = 96 };
    const ws_dtype types[2] = {WS_DT_FP16, WS_DT_BF16};
    for (int ti = 0; ti < 2; ti++) {
        ws_dtype t = types[ti];
        for (int bt = 0; bt < 2; bt++) {
            static uint16_t a[M * K], b[K * N];
            static float c[M * N];
            for (int i = 0; i < M * K; i++)
                a[i] = th_attn_to16(t, th_attn_rand());
            for (int i = 0; i < K * N; i++)
                b[i] = th_attn_to16(t, th_attn_rand());
            void *a_d = dev_copy_of(a, sizeof a), *b_d = dev_copy_of(b, sizeof b), *c_d;
            OK(B->dev_alloc(sizeof c, &c_d, &err));
            ws_gemm_problem g = {.m = M, .n = N, .k = K, .ab_dtype = t, .c_dtype = WS_DT_FP32,
                                 .b_trans = bt, .alpha = 1.0f, .beta = 0.0f, .a = a_d, .b = b_d, .c = c_d};
            int rc = B->gemm(bl, &g, NULL, &err);
            if (t == WS_DT_BF16 && g_cc < 80) {
                cr_assert_eq(rc, WS_EUNSUP, "gemm: bf16 below sm_80 must be refused");
            } else {
                cr_assert_eq(rc, 0, "gemm %s trans %d: %s", ws_dtype_name(t), bt, err.msg);
                to_host(c, c_d, sizeof c);
                float (*cv)(uint16_t) = t == WS_DT_BF16 ? ws_bf16_to_f32 : ws_fp16_to_f32;
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) {
                        double ref = 0, mag = 0;
                        for (int k = 0; k < K; k++) {
                            double x = cv(a[i * K + k]), y = cv(bt ? b[j * K + k] : b[k * N + j]);
                            ref += x * y;
                            mag += fabs(x * y);
                        }
                        cr_assert(fabs(c[i * N + j] - ref) <= 1e-5 * mag + 1e-6,
                                  "gemm %s trans %d: C[%d][%d] %.6f vs %.6f", ws_dtype_name(t), bt, i, j,
                                  c[i * N + j], ref);
                    }
            }
            B->dev_free(a_d);
            B->dev_free(b_d);
            B->dev_free(c_d);
        }
    }
    ws_gemm_problem bad = {.m = 0, .n = 1, .k = 1, .ab_dtype = WS_DT_FP16, .c_dtype = WS_DT_FP32};
    cr_assert_eq(B->gemm(bl, &bad, NULL, &err), WS_EINVAL);
    B->blas_destroy(bl);
}

Test(gpu, every_kernel_vs_cpu_reference, .timeout = 600)
{
    ws_err err = {0};
    B = ws_backend_cuda(&err);
    if (!B)
        cr_skip_test("GPU tests: CUDA backend unavailable: %s", err.msg);
    if (B->device_count(&err) == 0)
        cr_skip_test("GPU tests: no CUDA device (%s); CPU references and the kernel emulation are tested in attn_split, gpu_book, attn_emu",
                     err.msg);
    ws_device_info info;
    cr_assert_eq(B->device_info(0, &info, &err), 0, "%s", err.msg);
    OK(B->set_device(0, &err));
    g_cc = info.cc_major * 10 + info.cc_minor;
    check_attention();
    check_attention_errors();
    check_merge();
    check_streaming();
    check_dwin();
    check_gemm();
    double bw;
    OK(B->copy_bandwidth(WS_COPY_D2D, 1 << 24, 3, &bw, &err));
    cr_assert_gt(bw, 1e9, "device copy bandwidth %g B/s is implausible", bw);
}

Test(gpu, cpu_backend_has_no_gpu_entries)
{
    /* The CPU table documents its GPU entries as NULL; callers test the pointer. */
    const ws_backend *c = ws_backend_cpu();
    cr_assert_null(c->attn_run);
    cr_assert_null(c->xfer_submit);
    cr_assert_null(c->dwin_append);
    cr_assert_null(c->gemm);
    cr_assert_null(c->copy_bandwidth);
}
