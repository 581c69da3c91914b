/* test_ikv: the InplaceKVCache (runtime/ikv.c). Split attention through the format (the
 * CPU half through the real CPU kernel on every path this CPU has, the GPU half through
 * the fp64 reference, directly and through the ping-pong halves) equals full attention
 * within the bf16 bound, for GQA and MLA, over many decode steps with flushes placed by
 * the policy, for batches of sequences of different lengths; no placed byte ever changes
 * (page addresses, regions and contents are re-checked, and the moved counter stays 0);
 * capacities are enforced with clear errors and refused batches change nothing; freeing
 * returns every page; CPU pages are in the CPU kernel's layout and XFER pages are
 * byte-identical to the GPU page layout; page tables stay consistent under a seeded
 * random sequence of adds, prefills, appends, flushes and frees. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn_cpu.h"
#include "half.h"
#include "helpers.h"
#include "ikv.h"
#include "policy.h"

#define BOUND 2e-3 /* DESIGN section 7: bf16 KV against the fp64 reference */

static uint64_t g_rng = 1;
static unsigned rnd(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(g_rng >> 33);
}
static float frand(void) { return (float)(rnd() & 0xffff) / 32768.0f - 1.0f; }

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* ---- a cache with the truth beside it ---- */

#define MAXS 8
#define MAXL 3
#define MAXP 4096 /* host pages recorded per (seq, layer) */

typedef struct tok_store {
    uint16_t *k, *v; /* token-major [n][n_kv][d_k] / [n][n_kv][d_v] */
    int n, cap;
} tok_store;

typedef struct page_rec {
    const void *addr;
    ws_ikv_region region;
    uint64_t hash;
} page_rec;

typedef struct harness {
    ws_ikv *c;
    ws_kv_layout kv;
    int n_q, n_layers, seq_id[MAXS], n_seqs;
    tok_store truth[MAXS][MAXL];
    page_rec *rec[MAXS][MAXL];
    int n_rec[MAXS][MAXL];
    size_t kt, vt; /* elements per token */
} harness;

static void h_init(harness *h, ws_kv_layout kv, int n_q, int n_layers, int window,
                   int pp_pages, ws_isa isa)
{
    memset(h, 0, sizeof *h);
    h->kv = kv;
    h->n_q = n_q;
    h->n_layers = n_layers;
    h->kt = (size_t)kv.n_kv_heads * kv.d_k;
    h->vt = kv.v_shares_k ? 0 : (size_t)kv.n_kv_heads * kv.d_v;
    ws_ikv_config cfg = {.kv = kv, .n_q_heads = n_q, .isa = isa, .n_layers = n_layers,
                         .max_seqs = MAXS, .window = window, .pingpong_pages = pp_pages,
                         .gpu_budget = (size_t)1 << 30, .pinned_limit = (size_t)256 << 20,
                         .host_limit = (size_t)256 << 20, .chunk_bytes = (size_t)4 << 20};
    ws_err err = {0};
    h->c = ws_ikv_create(&cfg, &err);
    cr_assert_not_null(h->c, "%s", err.msg);
}

static void h_free(harness *h)
{
    ws_ikv_destroy(h->c);
    for (int s = 0; s < MAXS; s++)
        for (int l = 0; l < MAXL; l++) {
            free(h->truth[s][l].k);
            free(h->truth[s][l].v);
            free(h->rec[s][l]);
        }
}

/* n random tokens appended to the truth of (s, l); returns a pointer to the first. */
static void truth_add(harness *h, int s, int l, int n, size_t *first)
{
    tok_store *t = &h->truth[s][l];
    if (t->n + n > t->cap) {
        t->cap = (t->n + n) * 2 + 16;
        t->k = realloc(t->k, sizeof(uint16_t) * h->kt * (size_t)t->cap);
        t->v = realloc(t->v, sizeof(uint16_t) * (h->vt + 1) * (size_t)t->cap);
        cr_assert(t->k && t->v);
    }
    for (size_t i = 0; i < (size_t)n * h->kt; i++)
        t->k[(size_t)t->n * h->kt + i] = ws_f32_to_bf16(frand());
    for (size_t i = 0; i < (size_t)n * h->vt; i++)
        t->v[(size_t)t->n * h->vt + i] = ws_f32_to_bf16(frand());
    *first = (size_t)t->n;
    t->n += n;
}

/* Records the host pages of (s, l) placed since the last call (address, region, hash). */
static void record_new_pages(harness *h, int s, int l)
{
    const int seq = h->seq_id[s], n = ws_ikv_host_pages(h->c, seq, l);
    cr_assert_leq(n, MAXP);
    if (!h->rec[s][l])
        h->rec[s][l] = calloc(MAXP, sizeof(page_rec));
    ws_err err = {0};
    const size_t pb = ws_kv_page_bytes(&h->kv);
    for (int i = h->n_rec[s][l]; i < n; i++) {
        page_rec *r = &h->rec[s][l][i];
        int node;
        cr_assert_eq(ws_ikv_page(h->c, seq, l, i, &r->region, &r->addr, &node, &err), 0, "%s",
                     err.msg);
        r->hash = fnv(r->addr, pb);
    }
    h->n_rec[s][l] = n;
}

/* Every recorded page is still where it was, in the same region, with the same bytes. */
static void check_unmoved(harness *h)
{
    const size_t pb = ws_kv_page_bytes(&h->kv);
    ws_err err = {0};
    for (int s = 0; s < h->n_seqs; s++)
        for (int l = 0; l < h->n_layers; l++)
            for (int i = 0; i < h->n_rec[s][l]; i++) {
                ws_ikv_region rg;
                const void *a;
                int node;
                cr_assert_eq(ws_ikv_page(h->c, h->seq_id[s], l, i, &rg, &a, &node, &err), 0);
                const page_rec *r = &h->rec[s][l][i];
                cr_assert_eq(a, r->addr, "seq %d layer %d page %d moved", s, l, i);
                cr_assert_eq(rg, r->region, "seq %d layer %d page %d changed region", s, l, i);
                cr_assert_eq(fnv(a, pb), r->hash, "seq %d layer %d page %d rewritten", s, l, i);
            }
    ws_ikv_stats st;
    ws_ikv_stats_get(h->c, &st);
    cr_assert_eq(st.bytes_moved, 0);
}

/* CPU pages hold the truth in the CPU layout, XFER pages are the GPU page rows byte for
 * byte. */
static void check_layouts(harness *h)
{
    const ws_kv_layout *g = ws_ikv_gpu_layout(h->c), *ck = ws_ikv_cpu_layout(h->c);
    const size_t pb = ws_kv_page_bytes(g);
    uint16_t *rows = malloc(pb);
    ws_err err = {0};
    for (int s = 0; s < h->n_seqs; s++)
        for (int l = 0; l < h->n_layers; l++) {
            const tok_store *t = &h->truth[s][l];
            for (int i = 0; i < ws_ikv_host_pages(h->c, h->seq_id[s], l); i++) {
                memset(rows, 0, pb);
                for (int j = 0; j < g->page_tokens; j++) {
                    const size_t tok = (size_t)i * g->page_tokens + (size_t)j;
                    for (int hd = 0; hd < g->n_kv_heads; hd++) {
                        memcpy(rows + ws_kv_k_off(g, hd, j), t->k + tok * h->kt + (size_t)hd * g->d_k,
                               sizeof(uint16_t) * g->d_k);
                        if (!g->v_shares_k)
                            memcpy(rows + ws_kv_v_off(g, hd, j),
                                   t->v + tok * h->vt + (size_t)hd * g->d_v,
                                   sizeof(uint16_t) * g->d_v);
                    }
                }
                ws_ikv_region rg;
                const void *a;
                int node;
                cr_assert_eq(ws_ikv_page(h->c, h->seq_id[s], l, i, &rg, &a, &node, &err), 0);
                if (rg == WS_IKV_XFER) {
                    cr_assert_eq(memcmp(a, rows, pb), 0, "XFER page %d not in GPU rows", i);
                    continue;
                }
                const uint16_t *p = a;
                for (int hd = 0; hd < g->n_kv_heads; hd++)
                    for (int j = 0; j < g->page_tokens; j++) {
                        for (int d = 0; d < g->d_k; d++)
                            cr_assert_eq(p[ws_kv_k_elem(ck, hd, j, d)],
                                         rows[ws_kv_k_off(g, hd, j) + d]);
                        for (int d = 0; d < g->d_v && !g->v_shares_k; d++)
                            cr_assert_eq(p[ws_kv_v_elem(ck, hd, j, d)],
                                         rows[ws_kv_v_off(g, hd, j) + d]);
                    }
            }
        }
    free(rows);
}

static int h_add(harness *h, int prompt, int layer_cpu_pages[])
{
    ws_err err = {0};
    const int s = h->n_seqs++;
    cr_assert_eq(ws_ikv_seq_add(h->c, &h->seq_id[s], &err), 0, "%s", err.msg);
    for (int l = 0; l < h->n_layers; l++) {
        size_t first;
        truth_add(h, s, l, prompt, &first);
        const tok_store *t = &h->truth[s][l];
        cr_assert_eq(ws_ikv_prefill(h->c, h->seq_id[s], l, prompt, t->k, h->vt ? t->v : NULL,
                                    layer_cpu_pages[l], &err),
                     0, "%s", err.msg);
        record_new_pages(h, s, l);
    }
    return s;
}

/* One decode step of every sequence at every layer; full windows are flushed first, as
 * one batch, all their pages, with the CPU page counts the policy gives for share r. */
static void h_step(harness *h, double r, int window)
{
    ws_err err = {0};
    const int P = h->kv.page_tokens;
    for (int l = 0; l < h->n_layers; l++) {
        ws_ikv_flush_req req[MAXS];
        int nr = 0;
        for (int s = 0; s < h->n_seqs; s++) {
            const int seq = h->seq_id[s];
            if (ws_ikv_tokens(h->c, seq, l, WS_IKV_DWIN) < window)
                continue;
            double cpu, spilled;
            ws_ikv_spilled(h->c, l, &seq, 1, &cpu, &spilled);
            const int np = ws_ikv_window_full_pages(h->c, seq, l);
            cr_assert_eq(np * P, window);
            req[nr++] = (ws_ikv_flush_req){
                .seq = seq, .layer = l, .n_pages = np,
                .n_cpu = ws_policy_flush_cpu_pages(cpu, spilled, np, P, r)};
        }
        if (nr) {
            cr_assert_eq(ws_ikv_flush(h->c, req, nr, &err), 0, "%s", err.msg);
            for (int s = 0; s < h->n_seqs; s++)
                record_new_pages(h, s, l);
        }
        int seqs[MAXS];
        uint16_t k[MAXS * 1024], v[MAXS * 1024];
        cr_assert_leq(h->kt, 1024);
        for (int s = 0; s < h->n_seqs; s++) {
            size_t first;
            truth_add(h, s, l, 1, &first);
            const tok_store *t = &h->truth[s][l];
            memcpy(k + (size_t)s * h->kt, t->k + first * h->kt, sizeof(uint16_t) * h->kt);
            memcpy(v + (size_t)s * h->vt, t->v + first * h->vt, sizeof(uint16_t) * h->vt);
            seqs[s] = h->seq_id[s];
        }
        cr_assert_eq(ws_ikv_append(h->c, l, seqs, h->n_seqs, k, h->vt ? v : NULL, &err), 0,
                     "%s", err.msg);
    }
}

/* Split attention of layer l through the format vs full attention over the truth. */
static void check_attention(harness *h, int l, ws_isa isa, double *worst)
{
    const ws_kv_layout *g = ws_ikv_gpu_layout(h->c), *ck = ws_ikv_cpu_layout(h->c);
    const int P = g->page_tokens, ns = h->n_seqs, nq = h->n_q, dv = g->d_v;
    const size_t pb = ws_kv_page_bytes(g), rows = (size_t)ns * nq;
    ws_err err = {0};
    float *q = malloc(sizeof(float) * rows * g->d_k);
    for (size_t i = 0; i < rows * (size_t)g->d_k; i++)
        q[i] = 2.0f * frand();
    /* the full problem, over pages built from the truth */
    ws_attn_seq full[MAXS], cpu[MAXS], gpu[MAXS], str[MAXS];
    const void **tab[MAXS];
    char *mem[MAXS];
    for (int s = 0; s < ns; s++) {
        const tok_store *t = &h->truth[s][l];
        const int np = (t->n + P - 1) / P;
        mem[s] = calloc((size_t)np + 1, pb);
        tab[s] = calloc((size_t)np + 1, sizeof(void *));
        for (int i = 0; i < np; i++)
            tab[s][i] = mem[s] + (size_t)i * pb;
        for (int j = 0; j < t->n; j++)
            for (int hd = 0; hd < g->n_kv_heads; hd++) {
                uint16_t *pg = (uint16_t *)(mem[s] + (size_t)(j / P) * pb);
                memcpy(pg + ws_kv_k_off(g, hd, j % P), t->k + (size_t)j * h->kt + (size_t)hd * g->d_k,
                       sizeof(uint16_t) * g->d_k);
                if (!g->v_shares_k)
                    memcpy(pg + ws_kv_v_off(g, hd, j % P), t->v + (size_t)j * h->vt + (size_t)hd * dv,
                           sizeof(uint16_t) * dv);
            }
        full[s] = (ws_attn_seq){.pages = tab[s], .n_tokens = t->n};
    }
    double *o_ref = malloc(sizeof(double) * rows * dv), *l_ref = malloc(sizeof(double) * rows);
    float *o = malloc(sizeof(float) * rows * dv), *lse = malloc(sizeof(float) * rows);
    ws_attn_problem pf = {.kv = *g, .n_q_heads = nq, .scale = 1.0f / sqrtf((float)g->d_k),
                          .n_seqs = ns, .seqs = full, .q = q, .o = o, .lse = lse};
    cr_assert_eq(ws_attn_ref(&pf, o_ref, l_ref, &err), 0, "%s", err.msg);

    /* the two halves through the format */
    enum { CAP = 4096 };
    const void **cp = malloc(sizeof(void *) * CAP * MAXS), **gp = malloc(sizeof(void *) * CAP * MAXS),
               **sp = malloc(sizeof(void *) * CAP * MAXS);
    int *nodes = malloc(sizeof(int) * CAP * MAXS), seqs[MAXS], cpu_tok = 0, gpu_tok = 0;
    for (int s = 0; s < ns; s++) {
        seqs[s] = h->seq_id[s];
        cr_assert_eq(ws_ikv_view_cpu(h->c, seqs[s], l, cp + s * CAP, nodes + s * CAP, CAP, &cpu[s],
                                     &err), 0, "%s", err.msg);
        cr_assert_eq(ws_ikv_view_gpu(h->c, seqs[s], l, gp + s * CAP, CAP, &gpu[s], &err), 0, "%s",
                     err.msg);
        cr_assert_eq(cpu[s].n_tokens + gpu[s].n_tokens, h->truth[s][l].n);
        cpu_tok += cpu[s].n_tokens;
        gpu_tok += gpu[s].n_tokens;
    }
    float *oc = malloc(sizeof(float) * rows * dv), *lc = malloc(sizeof(float) * rows);
    float *og = malloc(sizeof(float) * rows * dv), *lg = malloc(sizeof(float) * rows);
    ws_attn_problem pc = pf;
    pc.kv = *ck;
    pc.seqs = cpu;
    pc.o = oc;
    pc.lse = lc;
    cr_assert_eq(ws_attn_cpu(&pc, NULL, isa, &err), 0, "%s", err.msg);
    ws_attn_problem pg = pf;
    pg.seqs = gpu;
    double *og64 = malloc(sizeof(double) * rows * dv), *lg64 = malloc(sizeof(double) * rows);
    cr_assert_eq(ws_attn_ref(&pg, og64, lg64, &err), 0, "%s", err.msg);
    for (size_t i = 0; i < rows * (size_t)dv; i++)
        og[i] = (float)og64[i];
    for (size_t i = 0; i < rows; i++)
        lg[i] = (float)lg64[i];
    ws_attn_merge(oc, lc, og, lg, o, lse, (int)rows, dv);
    for (size_t r = 0; r < rows; r++) {
        cr_assert_float_eq(lse[r], l_ref[r], BOUND * fmax(1.0, fabs(l_ref[r])), "row %zu", r);
        for (int d = 0; d < dv; d++) {
            const double e = fabs(o[r * dv + d] - o_ref[r * dv + d]);
            if (e > *worst)
                *worst = e;
            cr_assert_leq(e, BOUND, "[%s] layer %d row %zu d %d: %g vs %g (cpu %d, gpu %d tokens)",
                          ws_isa_name(isa), l, r, d, o[r * dv + d], o_ref[r * dv + d], cpu_tok,
                          gpu_tok);
        }
    }
    /* the GPU half as streamed through a ping-pong half: the same numbers */
    int half;
    cr_assert_eq(ws_ikv_stream(h->c, l, seqs, ns, sp, CAP * MAXS, str, &half, &err), 0, "%s",
                 err.msg);
    pg.seqs = str;
    cr_assert_eq(ws_attn_ref(&pg, o_ref, l_ref, &err), 0, "%s", err.msg);
    for (size_t i = 0; i < rows * (size_t)dv; i++)
        cr_assert_eq(o_ref[i], og64[i], "streamed GPU half differs at %zu", i);
    cr_assert_eq(ws_ikv_stream_release(h->c, half, &err), 0, "%s", err.msg);

    for (int s = 0; s < ns; s++) {
        free(mem[s]);
        free(tab[s]);
    }
    free(q), free(o_ref), free(l_ref), free(o), free(lse), free(cp), free(gp), free(sp);
    free(nodes), free(oc), free(lc), free(og), free(lg), free(og64), free(lg64);
}

/* Prompts of different lengths, then decode steps with flushes placed by the policy at a
 * share that changes over the run; attention checked every few steps on every path. */
static void run_split(ws_kv_layout kv, int n_q, int window, int steps)
{
    for (int isa = WS_ISA_SCALAR; isa < WS_ISA_COUNT; isa++) {
        if (!ws_isa_supported((ws_isa)isa))
            continue;
        harness h;
        g_rng = 42 + (uint64_t)isa;
        h_init(&h, kv, n_q, 2, window, 256, (ws_isa)isa);
        const int P = kv.page_tokens;
        const int prompts[] = {5 * P + 3, 0, 2 * P, 7, 11 * P + P - 1};
        const double r0 = 0.4;
        for (int s = 0; s < 5; s++) {
            int cpu_pages[MAXL];
            for (int l = 0; l < 2; l++)
                cpu_pages[l] = ws_policy_prefill_cpu_pages(l ? 1.0 - r0 : r0, prompts[s] / P);
            h_add(&h, prompts[s], cpu_pages);
        }
        double worst = 0;
        for (int st = 0; st < steps; st++) {
            const double r = st < steps / 3 ? 0.25 : st < 2 * steps / 3 ? 0.8 : 0.5;
            h_step(&h, r, window);
            if (st % 7 == 0 || st == steps - 1)
                for (int l = 0; l < 2; l++)
                    check_attention(&h, l, (ws_isa)isa, &worst);
        }
        ws_ikv_stats stt;
        ws_ikv_stats_get(h.c, &stt);
        cr_assert_gt(stt.flushes, 0);
        cr_assert_gt(stt.pages_in_use[WS_IKV_CPU], 0);
        cr_assert_gt(stt.pages_in_use[WS_IKV_XFER], 0);
        check_unmoved(&h);
        check_layouts(&h);
        h_free(&h);
    }
}

Test(ikv, split_attention_equals_full_gqa)
{
    ws_kv_layout kv = {.page_tokens = 16, .n_kv_heads = 2, .d_k = 32, .d_v = 32,
                       .dtype = WS_DT_BF16};
    run_split(kv, 8, 32, 90);
}

Test(ikv, split_attention_equals_full_mla)
{
    ws_kv_layout kv = {.page_tokens = 16, .n_kv_heads = 1, .d_k = 96, .d_v = 64,
                       .v_shares_k = 1, .dtype = WS_DT_BF16};
    run_split(kv, 16, 32, 70);
}

static const ws_kv_layout small_kv = {.page_tokens = 4, .n_kv_heads = 1, .d_k = 16, .d_v = 16,
                                      .dtype = WS_DT_BF16};

Test(ikv, nothing_moves_after_placement_over_a_long_run)
{
    harness h;
    g_rng = 7;
    h_init(&h, small_kv, 2, 2, 8, 1024, WS_ISA_AUTO);
    const int prompts[] = {9, 40, 3};
    for (int s = 0; s < 3; s++) {
        int cpu_pages[MAXL] = {prompts[s] / 8, prompts[s] / 4 / 2};
        h_add(&h, prompts[s], cpu_pages);
    }
    for (int st = 0; st < 1500; st++) {
        h_step(&h, 0.5 + 0.4 * sin(st / 50.0), 8);
        if (st % 100 == 0)
            check_unmoved(&h);
    }
    check_unmoved(&h);
    check_layouts(&h);
    ws_ikv_stats s;
    ws_ikv_stats_get(h.c, &s);
    const uint64_t pb = ws_kv_page_bytes(&small_kv);
    cr_assert_eq(s.bytes_moved, 0);
    cr_assert_eq(s.bytes_written[WS_IKV_CPU] + s.bytes_written[WS_IKV_XFER],
                 (s.pages_flushed + s.pages_prefilled) * pb);
    cr_assert_eq(s.bytes_written[WS_IKV_CPU], (uint64_t)s.pages_in_use[WS_IKV_CPU] * pb);
    cr_assert_gt(s.flushes, 100);
    h_free(&h);
}

static ws_ikv *small_cache(size_t host, size_t pinned, size_t gpu, int max_seqs, int pp,
                           ws_err *err)
{
    ws_ikv_config cfg = {.kv = small_kv, .n_q_heads = 2, .n_layers = 2, .max_seqs = max_seqs,
                         .window = 8, .pingpong_pages = pp, .gpu_budget = gpu,
                         .pinned_limit = pinned, .host_limit = host};
    return ws_ikv_create(&cfg, err);
}

static uint16_t g_kv[4096];

Test(ikv, capacities_are_enforced_with_clear_errors)
{
    const size_t pb = ws_kv_page_bytes(&small_kv); /* 256 bytes */
    ws_err err = {0};
    /* GPU budget: 2 layers x 8 tokens x 4 seqs = 16 pages of windows + 2 x 2 ping-pong */
    cr_assert_null(small_cache(pb * 10, pb * 10, pb * 19, 4, 2, &err));
    cr_assert_eq(err.code, WS_ENOMEM);
    cr_assert(strstr(err.msg, "GPU budget"), "%s", err.msg);
    ws_ikv *c = small_cache(pb * 3, pb * 2, pb * 20, 4, 2, &err);
    cr_assert_not_null(c, "%s", err.msg);
    for (size_t i = 0; i < sizeof g_kv / sizeof g_kv[0]; i++)
        g_kv[i] = ws_f32_to_bf16(frand());
    int s0, s1;
    cr_assert_eq(ws_ikv_seq_add(c, &s0, &err), 0);
    /* host limit: 3 CPU pages; a prefill wanting 4 is refused and leaves nothing */
    cr_assert_eq(ws_ikv_prefill(c, s0, 0, 16, g_kv, g_kv, 4, &err), WS_ENOMEM);
    cr_assert(strstr(err.msg, "cpu region full") && strstr(err.msg, "host limit"), "%s", err.msg);
    ws_ikv_stats st;
    ws_ikv_stats_get(c, &st);
    cr_assert_eq(st.pages_in_use[WS_IKV_CPU] + st.pages_in_use[WS_IKV_XFER], 0);
    cr_assert_eq(ws_ikv_seq_tokens(c, s0, 0), 0);
    /* pinned limit: 2 XFER pages */
    cr_assert_eq(ws_ikv_prefill(c, s0, 0, 16, g_kv, g_kv, 1, &err), WS_ENOMEM);
    cr_assert(strstr(err.msg, "xfer region full") && strstr(err.msg, "pinned limit"), "%s",
              err.msg);
    cr_assert_eq(ws_ikv_prefill(c, s0, 0, 14, g_kv, g_kv, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_ikv_tokens(c, s0, 0, WS_IKV_CPU), 4);
    cr_assert_eq(ws_ikv_tokens(c, s0, 0, WS_IKV_XFER), 8);
    cr_assert_eq(ws_ikv_tokens(c, s0, 0, WS_IKV_DWIN), 2);
    /* a full window refuses appends; a flush that does not fit is refused whole */
    for (int i = 0; i < 6; i++)
        cr_assert_eq(ws_ikv_append(c, 0, &s0, 1, g_kv, g_kv, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_ikv_append(c, 0, &s0, 1, g_kv, g_kv, &err), WS_EINVAL);
    cr_assert(strstr(err.msg, "flush"), "%s", err.msg);
    cr_assert_eq(ws_ikv_seq_add(c, &s1, &err), 0);
    cr_assert_eq(ws_ikv_prefill(c, s1, 1, 8, g_kv, g_kv, 0, &err), WS_ENOMEM); /* XFER full */
    cr_assert_eq(ws_ikv_prefill(c, s1, 1, 8, g_kv, g_kv, 2, &err), 0, "%s", err.msg);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(ws_ikv_append(c, 1, &s1, 1, g_kv, g_kv, &err), 0, "%s", err.msg);
    ws_ikv_flush_req req[2] = {{.seq = s0, .layer = 0, .n_pages = 2, .n_cpu = 0},
                               {.seq = s1, .layer = 1, .n_pages = 1, .n_cpu = 1}};
    cr_assert_eq(ws_ikv_flush(c, req, 2, &err), WS_ENOMEM); /* CPU holds 3 of 3 */
    cr_assert(strstr(err.msg, "flush refused"), "%s", err.msg);
    cr_assert_eq(ws_ikv_tokens(c, s0, 0, WS_IKV_DWIN), 8);
    cr_assert_eq(ws_ikv_tokens(c, s1, 1, WS_IKV_DWIN), 8);
    ws_ikv_stats st2;
    ws_ikv_stats_get(c, &st2);
    cr_assert_eq(st2.pages_in_use[WS_IKV_XFER], 2);
    cr_assert_eq(st2.pages_in_use[WS_IKV_CPU], 3);
    cr_assert_eq(st2.flushes, 0);
    /* more pages asked than held: refused */
    req[0].n_pages = 3;
    cr_assert_eq(ws_ikv_flush(c, req, 1, &err), WS_EINVAL);
    /* ping-pong: a half holds 2 pages; a layer with 2 XFER pages streams, 3 would not */
    const void *pages[64];
    ws_attn_seq v[2];
    int half;
    cr_assert_eq(ws_ikv_stream(c, 0, &s0, 1, pages, 64, v, &half, &err), 0, "%s", err.msg);
    int other;
    cr_assert_eq(ws_ikv_stream(c, 1, &s1, 1, pages, 64, v, &other, &err), 0, "%s", err.msg);
    cr_assert_neq(half, other);
    /* both halves held: a third stream must wait for a release */
    cr_assert_neq(ws_ikv_stream(c, 0, &s0, 1, pages, 64, v, &half, &err), 0);
    ws_ikv_destroy(c);
    /* sequence slots */
    c = small_cache(pb * 8, pb * 8, pb * 20, 2, 0, &err);
    cr_assert_not_null(c, "%s", err.msg);
    cr_assert_eq(ws_ikv_seq_add(c, &s0, &err), 0);
    cr_assert_eq(ws_ikv_seq_add(c, &s1, &err), 0);
    cr_assert_eq(ws_ikv_seq_add(c, &s1, &err), WS_ENOMEM);
    cr_assert(strstr(err.msg, "sequence slots"), "%s", err.msg);
    ws_ikv_destroy(c);
    /* max_seqs 0: as many as the budget holds (16 pages of windows per 4 sequences) */
    c = small_cache(pb, pb, pb * 40, 0, 2, &err);
    cr_assert_not_null(c, "%s", err.msg);
    cr_assert_eq(ws_ikv_max_seqs(c), 9); /* (40 - 4) / 4 */
    ws_ikv_destroy(c);
}

Test(ikv, stream_refuses_a_layer_larger_than_a_half)
{
    const size_t pb = ws_kv_page_bytes(&small_kv);
    ws_err err = {0};
    ws_ikv *c = small_cache(pb * 8, pb * 8, pb * 100, 2, 1, &err);
    cr_assert_not_null(c, "%s", err.msg);
    int s;
    cr_assert_eq(ws_ikv_seq_add(c, &s, &err), 0);
    cr_assert_eq(ws_ikv_prefill(c, s, 0, 8, g_kv, g_kv, 0, &err), 0, "%s", err.msg);
    const void *pages[8];
    ws_attn_seq v;
    int half;
    cr_assert_eq(ws_ikv_stream(c, 0, &s, 1, pages, 8, &v, &half, &err), WS_ENOMEM);
    cr_assert(strstr(err.msg, "ping-pong half holds 1"), "%s", err.msg);
    ws_ikv_destroy(c);
}

static int refuse_lock(const void *addr, size_t len)
{
    (void)addr, (void)len;
    errno = EPERM;
    return -1;
}

Test(ikv, refused_mlock_is_a_reported_fallback)
{
    ws_ikv_config cfg = {.kv = small_kv, .n_q_heads = 2, .n_layers = 1, .max_seqs = 1,
                         .window = 8, .gpu_budget = 1 << 20, .pinned_limit = 1 << 20,
                         .host_limit = 1 << 20, .lock = refuse_lock};
    ws_err err = {0};
    ws_ikv *c = ws_ikv_create(&cfg, &err);
    cr_assert_not_null(c, "%s", err.msg);
    int s;
    cr_assert_eq(ws_ikv_seq_add(c, &s, &err), 0);
    cr_assert_eq(ws_ikv_prefill(c, s, 0, 8, g_kv, g_kv, 0, &err), 0, "%s", err.msg);
    ws_ikv_stats st;
    ws_ikv_stats_get(c, &st);
    cr_assert_eq(st.xfer_pinned, 0);
    cr_assert_eq(st.pages_in_use[WS_IKV_XFER], 2);
    cr_assert(strstr(ws_ikv_note(c), "not pinned") && strstr(ws_ikv_note(c), "RLIMIT_MEMLOCK"),
              "%s", ws_ikv_note(c));
    ws_ikv_destroy(c);
    /* with mlock as it is: pinned, or the same note */
    cfg.lock = NULL;
    c = ws_ikv_create(&cfg, &err);
    cr_assert_eq(ws_ikv_seq_add(c, &s, &err), 0);
    cr_assert_eq(ws_ikv_prefill(c, s, 0, 8, g_kv, g_kv, 0, &err), 0, "%s", err.msg);
    ws_ikv_stats_get(c, &st);
    cr_assert(st.xfer_pinned || strstr(ws_ikv_note(c), "not pinned"));
    ws_ikv_destroy(c);
}

/* One sequence, one layer, 8 query heads on CPU path isa; 1 MiB in each region. */
static ws_ikv *isa_cache(const ws_kv_layout *kv, ws_isa isa)
{
    ws_ikv_config cfg = {.kv = *kv, .n_q_heads = 8, .isa = isa, .n_layers = 1, .max_seqs = 1,
                         .window = 16, .gpu_budget = 1 << 20, .pinned_limit = 1 << 20,
                         .host_limit = 1 << 20};
    ws_err err = {0};
    ws_ikv *c = ws_ikv_create(&cfg, &err);
    cr_assert_not_null(c, "%s", err.msg);
    return c;
}

Test(ikv, cpu_region_layout_is_the_cpu_kernels)
{
    ws_kv_layout kv = {.page_tokens = 16, .n_kv_heads = 2, .d_k = 32, .d_v = 32,
                       .dtype = WS_DT_BF16};
    for (int isa = WS_ISA_SCALAR; isa < WS_ISA_COUNT; isa++) {
        if (!ws_isa_supported((ws_isa)isa))
            continue;
        ws_ikv *c = isa_cache(&kv, (ws_isa)isa);
        const ws_kv_layout *ck = ws_ikv_cpu_layout(c), *g = ws_ikv_gpu_layout(c);
        cr_assert_eq(ck->k_tiles, ws_attn_cpu_k_tiles(&kv, 8, (ws_isa)isa, 0));
        cr_assert_eq(ck->v_pairs, ws_attn_cpu_v_pairs(&kv, 8, (ws_isa)isa, 0));
        cr_assert_eq(g->k_tiles + g->v_pairs, 0);
        if (isa != WS_ISA_SCALAR)
            cr_assert(ck->k_tiles && ck->v_pairs, "%s", ws_isa_name((ws_isa)isa));
        ws_ikv_destroy(c);
    }
}

/* migrate's one path: pages re-laid XFER -> CPU -> XFER come back byte for byte in every
 * CPU layout this machine has, the CPU pages hold the CPU kernel's layout of the same KV,
 * and the moves are counted apart from bytes_moved. */
Test(ikv, reformat_relays_pages_both_ways_and_is_counted_apart)
{
    ws_kv_layout kv = {.page_tokens = 16, .n_kv_heads = 2, .d_k = 32, .d_v = 32,
                       .dtype = WS_DT_BF16};
    const int n = 4 * 16, row = 2 * 32;
    static uint16_t k[4 * 16 * 64], v[4 * 16 * 64];
    for (int i = 0; i < n * row; i++)
        k[i] = ws_f32_to_bf16(frand()), v[i] = ws_f32_to_bf16(frand());
    for (int isa = WS_ISA_SCALAR; isa < WS_ISA_COUNT; isa++) {
        if (!ws_isa_supported((ws_isa)isa))
            continue;
        ws_err err = {0};
        ws_ikv *c = isa_cache(&kv, (ws_isa)isa);
        int seq;
        cr_assert_eq(ws_ikv_seq_add(c, &seq, &err), 0);
        cr_assert_eq(ws_ikv_prefill(c, seq, 0, n, k, v, 1, &err), 0, "%s", err.msg);
        const size_t pb = ws_kv_page_bytes(&kv);
        uint64_t before[4];
        const void *addr;
        ws_ikv_region reg;
        int node;
        for (int p = 1; p < 4; p++) {
            cr_assert_eq(ws_ikv_page(c, seq, 0, p, &reg, &addr, &node, &err), 0);
            before[p] = fnv(addr, pb);
        }
        /* the newest two XFER pages into the CPU region */
        cr_assert_eq(ws_ikv_reformat(c, seq, 0, 2, WS_IKV_CPU, &err), 0, "%s", err.msg);
        cr_assert_eq(ws_ikv_tokens(c, seq, 0, WS_IKV_CPU), 3 * 16);
        const ws_kv_layout *ck = ws_ikv_cpu_layout(c);
        for (int p = 2; p < 4; p++) {
            cr_assert_eq(ws_ikv_page(c, seq, 0, p, &reg, &addr, &node, &err), 0);
            cr_assert_eq(reg, WS_IKV_CPU);
            const uint16_t *pg = addr;
            for (int t = 0; t < 16; t++)
                for (int h = 0; h < 2; h++)
                    for (int e = 0; e < 32; e++) {
                        const size_t src = (size_t)(p * 16 + t) * row + h * 32 + e;
                        cr_assert_eq(pg[ws_kv_k_elem(ck, h, t, e)], k[src]);
                        cr_assert_eq(pg[ws_kv_v_elem(ck, h, t, e)], v[src]);
                    }
        }
        /* more than the region holds is refused, nothing moves */
        cr_assert_eq(ws_ikv_reformat(c, seq, 0, 2, WS_IKV_CPU, &err), WS_EINVAL);
        /* and back: three CPU pages to XFER, the two reformatted ones as they were */
        cr_assert_eq(ws_ikv_reformat(c, seq, 0, 2, WS_IKV_XFER, &err), 0, "%s", err.msg);
        for (int p = 2; p < 4; p++) {
            cr_assert_eq(ws_ikv_page(c, seq, 0, p, &reg, &addr, &node, &err), 0);
            cr_assert_eq(reg, WS_IKV_XFER);
            cr_assert_eq(fnv(addr, pb), before[p], "%s page %d", ws_isa_name((ws_isa)isa), p);
        }
        ws_ikv_stats st;
        ws_ikv_stats_get(c, &st);
        cr_assert_eq(st.bytes_moved, 0);
        cr_assert_eq(st.pages_reformatted, 4);
        cr_assert_eq(st.bytes_reformatted, 4 * pb);
        cr_assert_eq(st.pages_in_use[WS_IKV_CPU], 1);
        cr_assert_eq(st.pages_in_use[WS_IKV_XFER], 3);
        ws_ikv_destroy(c);
    }
}

/* Seeded random adds, prefills, appends, flushes and frees against a model of what each
 * (sequence, layer) holds: counts, views, page ownership and pool counts agree. */
Test(ikv, page_tables_stay_consistent_under_random_operations)
{
    const size_t pb = ws_kv_page_bytes(&small_kv);
    enum { L = 2, S = 6, W = 8, P = 4 };
    ws_ikv_config cfg = {.kv = small_kv, .n_q_heads = 2, .n_layers = L, .max_seqs = S,
                         .window = W, .pingpong_pages = 64, .gpu_budget = 1 << 20,
                         .pinned_limit = pb * 30, .host_limit = pb * 25, .chunk_bytes = pb * 7};
    ws_err err = {0};
    ws_ikv *c = ws_ikv_create(&cfg, &err);
    cr_assert_not_null(c, "%s", err.msg);
    int live[S] = {0}, host[S][L] = {{0}}, ncpu[S][L] = {{0}}, win[S][L] = {{0}};
    g_rng = 12345;
    for (size_t i = 0; i < sizeof g_kv / sizeof g_kv[0]; i++)
        g_kv[i] = ws_f32_to_bf16(frand());
    int refusals = 0, ops = 0;
    for (int it = 0; it < 6000; it++) {
        const int op = (int)(rnd() % 10), s = (int)(rnd() % S), l = (int)(rnd() % L);
        if (op == 0) { /* add */
            int id;
            int rc = ws_ikv_seq_add(c, &id, &err);
            int any_free = 0;
            for (int j = 0; j < S; j++)
                any_free |= !live[j];
            cr_assert_eq(rc == 0, any_free);
            if (!rc) {
                cr_assert(!live[id]);
                live[id] = 1;
            }
        } else if (op == 1 && live[s] && rnd() % 4 == 0) { /* free */
            cr_assert_eq(ws_ikv_seq_free(c, s, &err), 0);
            live[s] = 0;
            memset(host[s], 0, sizeof host[s]);
            memset(ncpu[s], 0, sizeof ncpu[s]);
            memset(win[s], 0, sizeof win[s]);
        } else if (op == 2 && live[s] && !host[s][l] && !win[s][l]) { /* prefill */
            const int n = (int)(rnd() % 40), full = n / P, nc = full ? (int)(rnd() % (full + 1)) : 0;
            int rc = ws_ikv_prefill(c, s, l, n, g_kv, g_kv, nc, &err);
            if (rc) {
                cr_assert_eq(rc, WS_ENOMEM, "%s", err.msg);
                refusals++;
            } else {
                host[s][l] = full;
                ncpu[s][l] = nc;
                win[s][l] = n % P;
            }
        } else if (op >= 3 && op <= 6 && live[s]) { /* append (flush first when full) */
            if (win[s][l] == W) {
                const int np = 1 + (int)(rnd() % (W / P));
                ws_ikv_flush_req q = {.seq = s, .layer = l, .n_pages = np,
                                      .n_cpu = (int)(rnd() % (np + 1))};
                int rc = ws_ikv_flush(c, &q, 1, &err);
                if (rc) {
                    cr_assert_eq(rc, WS_ENOMEM, "%s", err.msg);
                    refusals++;
                    continue;
                }
                host[s][l] += np;
                ncpu[s][l] += q.n_cpu;
                win[s][l] -= np * P;
            }
            cr_assert_eq(ws_ikv_append(c, l, &s, 1, g_kv, g_kv, &err), 0, "%s", err.msg);
            win[s][l]++;
        } else {
            continue;
        }
        ops++;
        /* the model and the cache agree */
        int used_cpu = 0, used_xfer = 0;
        for (int j = 0; j < S; j++)
            for (int k = 0; k < L && live[j]; k++) {
                cr_assert_eq(ws_ikv_tokens(c, j, k, WS_IKV_CPU), ncpu[j][k] * P);
                cr_assert_eq(ws_ikv_tokens(c, j, k, WS_IKV_XFER), (host[j][k] - ncpu[j][k]) * P);
                cr_assert_eq(ws_ikv_tokens(c, j, k, WS_IKV_DWIN), win[j][k]);
                cr_assert_eq(ws_ikv_seq_tokens(c, j, k), host[j][k] * P + win[j][k]);
                used_cpu += ncpu[j][k];
                used_xfer += host[j][k] - ncpu[j][k];
            }
        ws_ikv_stats st;
        ws_ikv_stats_get(c, &st);
        cr_assert_eq(st.pages_in_use[WS_IKV_CPU], used_cpu, "it %d", it);
        cr_assert_eq(st.pages_in_use[WS_IKV_XFER], used_xfer, "it %d", it);
        cr_assert_eq(st.bytes_moved, 0);
        if (it % 50)
            continue;
        /* views cover every token; no page is in two tables */
        const void *all[200];
        int n_all = 0;
        for (int j = 0; j < S; j++)
            for (int k = 0; k < L && live[j]; k++) {
                const void *cp[64], *gp[64];
                int nodes[64];
                ws_attn_seq vc, vg;
                cr_assert_eq(ws_ikv_view_cpu(c, j, k, cp, nodes, 64, &vc, &err), 0, "%s", err.msg);
                cr_assert_eq(ws_ikv_view_gpu(c, j, k, gp, 64, &vg, &err), 0, "%s", err.msg);
                cr_assert_eq(vc.n_tokens + vg.n_tokens, ws_ikv_seq_tokens(c, j, k));
                for (int i = 0; i < host[j][k]; i++) {
                    ws_ikv_region rg;
                    const void *a;
                    int node;
                    cr_assert_eq(ws_ikv_page(c, j, k, i, &rg, &a, &node, &err), 0);
                    for (int m = 0; m < n_all; m++)
                        cr_assert_neq(all[m], a, "a page in two tables");
                    all[n_all++] = a;
                }
            }
    }
    cr_assert_gt(ops, 2000);
    cr_assert_gt(refusals, 0, "the limits were never reached");
    for (int j = 0; j < S; j++)
        if (live[j])
            cr_assert_eq(ws_ikv_seq_free(c, j, &err), 0);
    ws_ikv_stats st;
    ws_ikv_stats_get(c, &st);
    for (int r = 0; r < WS_IKV_N_REGIONS; r++)
        cr_assert_eq(st.pages_in_use[r], 0, "%s", ws_ikv_region_name((ws_ikv_region)r));
    cr_assert_eq(st.seqs, 0);
    ws_ikv_destroy(c);
}

Test(ikv, freeing_returns_every_page)
{
    harness h;
    g_rng = 99;
    h_init(&h, small_kv, 2, 2, 8, 64, WS_ISA_AUTO);
    ws_ikv_stats st0;
    ws_ikv_stats_get(h.c, &st0);
    const int prompts[] = {17, 33, 0, 6};
    for (int s = 0; s < 4; s++) {
        int cpu_pages[MAXL] = {prompts[s] / 8, prompts[s] / 4 - prompts[s] / 8};
        h_add(&h, prompts[s], cpu_pages);
    }
    for (int st = 0; st < 40; st++)
        h_step(&h, 0.5, 8);
    ws_ikv_stats st;
    ws_ikv_stats_get(h.c, &st);
    cr_assert_gt(st.pages_in_use[WS_IKV_CPU], 0);
    cr_assert_gt(st.pages_in_use[WS_IKV_XFER], 0);
    cr_assert_gt(st.pages_in_use[WS_IKV_DWIN], 0);
    ws_err err = {0};
    for (int s = 0; s < 4; s++)
        cr_assert_eq(ws_ikv_seq_free(h.c, h.seq_id[s], &err), 0);
    ws_ikv_stats_get(h.c, &st);
    for (int r = 0; r < WS_IKV_N_REGIONS; r++)
        cr_assert_eq(st.pages_in_use[r], st0.pages_in_use[r]);
    cr_assert_eq(ws_ikv_seq_free(h.c, h.seq_id[0], &err), WS_EINVAL); /* twice */
    /* the pages come back: the same capacity serves again */
    int s;
    cr_assert_eq(ws_ikv_seq_add(h.c, &s, &err), 0);
    cr_assert_eq(ws_ikv_prefill(h.c, s, 0, 33, g_kv, g_kv, 4, &err), 0, "%s", err.msg);
    h.n_seqs = 0; /* the harness's records describe freed sequences */
    h_free(&h);
}

/* A pool over two one-CPU nodes of a fake sysfs (skips where the machine cannot). */
static ws_pool *two_node_pool(void)
{
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    int cpu[2], n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &set))
            cpu[n++] = c;
    if (n < 2)
        cr_skip_test("needs two CPUs for two NUMA nodes of one CPU each");
    char dir[256], path[600];
    th_tmpdir(dir, sizeof dir);
    for (int i = 0; i < 2; i++) {
        char sub[512], list[16];
        snprintf(sub, sizeof sub, "%s/node%d", dir, i);
        cr_assert_eq(mkdir(sub, 0755), 0, "mkdir %s", sub);
        snprintf(list, sizeof list, "%d\n", cpu[i]);
        th_write(sub, "cpulist", list, path, sizeof path);
    }
    ws_numa t;
    ws_err err = {0};
    cr_assert_eq(ws_numa_read(&t, dir, NULL, &err), 0, "%s", err.msg);
    ws_pool *p = ws_pool_create_numa(2, &t, &err);
    cr_assert_not_null(p, "%s", err.msg);
    if (ws_pool_nodes(p) != 2) {
        ws_pool_destroy(p);
        cr_skip_test("pinning threads to CPUs was refused");
    }
    return p;
}

/* CPU pages follow the placement rule over the kernel pool's nodes (runs of
 * WS_NUMA_RUN_TOKENS tokens from node seq mod n), the views name them, and the CPU kernel
 * on that pool reads them to the reference's result. */
Test(ikv, cpu_pages_are_placed_on_the_pools_nodes)
{
    ws_pool *pool = two_node_pool();
    ws_kv_layout kv = {.page_tokens = 4096, .n_kv_heads = 1, .d_k = 16, .d_v = 16,
                       .dtype = WS_DT_BF16};
    ws_ikv_config cfg = {.kv = kv, .n_q_heads = 2, .n_layers = 1, .max_seqs = 2,
                         .window = 4096, .gpu_budget = 64 << 20, .pinned_limit = 16 << 20,
                         .host_limit = 64 << 20, .pool = pool};
    ws_err err = {0};
    ws_ikv *c = ws_ikv_create(&cfg, &err);
    cr_assert_not_null(c, "%s", err.msg);
    const int n = 5 * 4096;
    uint16_t *k = malloc(sizeof(uint16_t) * 2 * 16 * n); /* K then V, [n][1][16] each */
    for (int i = 0; i < 2 * 16 * n; i++)
        k[i] = ws_f32_to_bf16(frand());
    const int run = WS_NUMA_RUN_TOKENS / 4096;
    for (int q = 0; q < 2; q++) {
        int s;
        cr_assert_eq(ws_ikv_seq_add(c, &s, &err), 0);
        cr_assert_eq(ws_ikv_prefill(c, s, 0, n, k, k + 16 * n, 5, &err), 0, "%s", err.msg);
        const void *pages[8];
        int nodes[8];
        ws_attn_seq v;
        cr_assert_eq(ws_ikv_view_cpu(c, s, 0, pages, nodes, 8, &v, &err), 0, "%s", err.msg);
        cr_assert_eq(v.n_tokens, n);
        for (int i = 0; i < 5; i++)
            cr_assert_eq(nodes[i], ws_pool_node_id(pool, (s + i / run) % 2), "seq %d page %d", s,
                         i);
        float qv[2 * 16], o[2 * 16], lse[2];
        double o_ref[2 * 16], l_ref[2];
        for (int i = 0; i < 32; i++)
            qv[i] = frand();
        ws_attn_problem p = {.kv = *ws_ikv_cpu_layout(c), .n_q_heads = 2, .scale = 0.25f,
                             .n_seqs = 1, .seqs = &v, .q = qv, .o = o, .lse = lse};
        cr_assert_eq(ws_attn_cpu(&p, pool, WS_ISA_AUTO, &err), 0, "%s", err.msg);
        cr_assert_eq(ws_attn_ref(&p, o_ref, l_ref, &err), 0, "%s", err.msg);
        for (int i = 0; i < 32; i++)
            cr_assert_float_eq(o[i], o_ref[i], BOUND);
    }
    free(k);
    ws_ikv_destroy(c);
    ws_pool_destroy(pool);
}

/* Prefix caching in the format: a second sequence takes the first two host pages of the
 * first (a CPU and an XFER page) as its own, prefills the rest after them; the shared pages
 * are the same pages, never written again or reformatted, and go back to their pools only
 * when their last holder is freed. */
Test(ikv, shared_prefix_pages_stay_put_and_are_counted)
{
    const size_t pb = ws_kv_page_bytes(&small_kv);
    ws_err err = {0};
    ws_ikv *c = small_cache(pb * 64, pb * 64, pb * 64, 4, 2, &err);
    cr_assert_not_null(c, "%s", err.msg);
    for (size_t i = 0; i < sizeof g_kv / sizeof g_kv[0]; i++)
        g_kv[i] = ws_f32_to_bf16(frand());
    int a, b, nd;
    cr_assert_eq(ws_ikv_seq_add(c, &a, &err), 0);
    cr_assert_eq(ws_ikv_seq_add(c, &b, &err), 0);
    for (int l = 0; l < 2; l++) /* 3 full pages (1 CPU, 2 XFER) and 2 tokens in the window */
        cr_assert_eq(ws_ikv_prefill(c, a, l, 14, g_kv, g_kv, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_ikv_share(c, a, b, 1, &err), WS_EINVAL, "b holds nothing to share");
    cr_assert_eq(ws_ikv_share(c, b, a, 2, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_ikv_share(c, b, a, 1, &err), WS_EINVAL, "b is no longer empty");
    for (int l = 0; l < 2; l++) /* its own: one more XFER page and a token in the window */
        cr_assert_eq(ws_ikv_prefill(c, b, l, 5, g_kv + 512, g_kv + 512, 0, &err), 0, "%s",
                     err.msg);
    ws_ikv_stats st;
    ws_ikv_stats_get(c, &st);
    cr_assert_eq(st.pages_in_use[WS_IKV_CPU] + st.pages_in_use[WS_IKV_XFER], 2 * (3 + 1));
    for (int l = 0; l < 2; l++) {
        cr_assert_eq(ws_ikv_host_pages(c, b, l), 3);
        cr_assert_eq(ws_ikv_seq_tokens(c, b, l), 2 * 4 + 4 + 1);
        cr_assert_eq(ws_ikv_tokens(c, b, l, WS_IKV_CPU), 4);
        for (int i = 0; i < 3; i++) {
            ws_ikv_region ra, rb;
            const void *pa = NULL, *pbp = NULL;
            cr_assert_eq(ws_ikv_page(c, b, l, i, &rb, &pbp, &nd, &err), 0);
            if (i < 2) {
                cr_assert_eq(ws_ikv_page(c, a, l, i, &ra, &pa, &nd, &err), 0);
                cr_assert_eq(pa, pbp, "page %d is the same page", i);
                cr_assert_eq(ra, rb);
            }
            cr_assert_eq(ws_ikv_page_holders(c, b, l, i), i < 2 ? 2 : 1);
        }
    }
    /* a shared page never moves: a's XFER page 1 is shared, its page 2 is its own */
    cr_assert_eq(ws_ikv_reformat(c, a, 0, 2, WS_IKV_CPU, &err), WS_EINVAL);
    cr_assert(strstr(err.msg, "shares"), "%s", err.msg);
    cr_assert_eq(ws_ikv_reformat(c, a, 0, 1, WS_IKV_CPU, &err), 0, "%s", err.msg);
    const void *kept;
    ws_ikv_region kr;
    cr_assert_eq(ws_ikv_page(c, b, 1, 1, &kr, &kept, &nd, &err), 0);
    const uint64_t h = fnv(kept, pb);
    cr_assert_eq(ws_ikv_seq_free(c, a, &err), 0);
    ws_ikv_stats_get(c, &st);
    cr_assert_eq(st.pages_in_use[WS_IKV_CPU] + st.pages_in_use[WS_IKV_XFER], 2 * 3,
                 "b's three pages a layer remain");
    cr_assert_eq(ws_ikv_page_holders(c, b, 1, 1), 1);
    cr_assert_eq(fnv(kept, pb), h, "the shared page outlives its first holder unchanged");
    cr_assert_eq(st.bytes_moved, 0);
    cr_assert_eq(ws_ikv_seq_free(c, b, &err), 0);
    ws_ikv_stats_get(c, &st);
    cr_assert_eq(st.pages_in_use[WS_IKV_CPU] + st.pages_in_use[WS_IKV_XFER], 0);
    ws_ikv_destroy(c);
}
