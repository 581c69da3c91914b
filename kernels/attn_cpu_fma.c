/* attn_cpu_fma: the fused AVX-512 FMA block loop (see attn_cpu_fma.h) for K in tiles and V
 * in token pairs, bf16 or fp16, up to 8 query heads per KV head.
 *
 * Per sub-block of 16 tokens, the scores of each head are one vector: a K tile row holds
 * the 16 tokens' values of dims 2r and 2r + 1 as 32-bit pairs, so one load, one shift and
 * one mask give two fp32 vectors of 16 tokens that multiply q[h][2r] and q[h][2r + 1]
 * (broadcast from memory) for every head h: 16 FMAs per 64-byte row for 8 heads, into
 * two accumulators per head (the FMA latency then hides behind the other heads). The
 * generic block loop instead converts each block to fp32 rows in a buffer and sums each
 * (head, token) dot product horizontally. The online softmax runs once per super-block
 * of 4 sub-blocks (one max, one rescale per head); P.V takes a pair row of V (two tokens'
 * values of 16 columns per 64 bytes), splits it the same way and multiplies the two
 * tokens' probabilities (broadcast from memory) into 8 heads x 32 columns of O held in
 * registers over the whole super-block (64 columns for 4 heads or fewer).
 * Groups of 3, 5-7 heads run as 4 or 8 with zero queries; their extra rows stay in the
 * scratch. Sub-blocks that are not one aligned run of 16 tokens of one page (sparse lists,
 * the last partial one) are gathered into the same layouts, zero-padded. Lines of the
 * sub-block two super-blocks ahead are prefetched to L2 a line or so per K tile row. */
#include "attn_cpu_fma.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attn_cpu_isa.h"

#define SUB 16 /* tokens per sub-block: one K tile, one score vector per head */
#define NS 4   /* sub-blocks per super-block (one softmax step) */
#define HM WS_ATTN_CPU_FMA_GROUP
#define AHEAD 2 /* super-blocks prefetched ahead */

int ws_attn_cpu_fma_fits(const ws_kv_layout *kv, int G)
{
    return kv->k_tiles && kv->v_pairs && !kv->v_shares_k && G >= 1 && G <= HM &&
           kv->page_tokens % SUB == 0 && (kv->dtype == WS_DT_BF16 || kv->dtype == WS_DT_FP16);
}

static size_t a64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* Scratch pieces, in order (each 64-byte aligned). */
typedef struct fma_scratch {
    size_t qs, o, sp, kg, vg, total;
} fma_scratch;

static fma_scratch scratch_plan(const ws_kv_layout *kv)
{
    fma_scratch s;
    size_t at = 0;
    s.qs = at, at += a64((size_t)HM * kv->d_k * 4); /* scaled queries, fp32 */
    s.o = at, at += a64((size_t)HM * kv->d_v * 4);  /* O, fp32 */
    s.sp = at, at += (size_t)HM * NS * SUB * 4;     /* scores, then probabilities */
    s.kg = at, at += a64((size_t)NS * SUB * kv->d_k * 2); /* gathered K tiles */
    s.vg = at, at += a64((size_t)NS * SUB * kv->d_v * 2); /* gathered V pair rows */
    s.total = at;
    return s;
}

size_t ws_attn_cpu_fma_scratch(const ws_kv_layout *kv, int G)
{
    (void)G;
    return scratch_plan(kv).total;
}

/* A resolved sub-block: its K tile and first V pair row, n tokens. */
typedef struct sub_kv {
    const uint16_t *k, *v;
    int n;
} sub_kv;

/* 1 if items [it, it + n) are 16 tokens t0.. t0 + 15 with t0 a multiple of 16 (one tile,
 * so one page, as pages hold a multiple of 16 tokens). */
static int aligned_run(const ws_attn_seq *sq, int it, int n, int *t0)
{
    const int tf = sq->sel ? sq->sel[it] : it;
    *t0 = tf;
    if (n < SUB || tf % SUB)
        return 0;
    if (sq->sel)
        for (int j = 1; j < SUB; j++)
            if (sq->sel[it + j] != tf + j)
                return 0;
    return 1;
}

static void resolve(const ws_attn_seq *sq, const ws_kv_layout *kv, int kvh, int it, int n,
                    uint16_t *kg, uint16_t *vg, sub_kv *r)
{
    const int P = kv->page_tokens, dk = kv->d_k, dv = kv->d_v;
    int t0;
    r->n = n;
    if (aligned_run(sq, it, n, &t0)) {
        const uint16_t *pg = sq->pages[t0 / P];
        r->k = pg + ws_kv_k_off(kv, kvh, t0 % P);
        r->v = pg + ws_kv_v_pair_off(kv, kvh, t0 % P);
        return;
    }
    memset(kg, 0, (size_t)SUB * dk * 2);
    memset(vg, 0, (size_t)SUB * dv * 2);
    uint32_t *kd = (uint32_t *)kg;
    for (int x = 0; x < n; x++) {
        const int t = sq->sel ? sq->sel[it + x] : it + x, tp = t % P;
        const uint16_t *pg = sq->pages[t / P];
        const uint32_t *ks = (const uint32_t *)(pg + ws_kv_k_off(kv, kvh, tp & ~15));
        for (int r2 = 0; r2 < dk / 2; r2++) /* pair r2 of token x: slot x of row r2 */
            kd[r2 * SUB + x] = ks[r2 * SUB + (tp & 15)];
        const uint16_t *vs = pg + ws_kv_v_pair_off(kv, kvh, tp) + (tp & 1);
        uint16_t *vd = vg + (size_t)(x >> 1) * 2 * dv + (x & 1);
        for (int c = 0; c < dv; c++)
            vd[2 * c] = vs[2 * c];
    }
    r->k = kg, r->v = vg;
}

/* What to prefetch while a sub-block's scores run: the K tiles and V pair rows of a later
 * sub-block when it is one run of one page (klines and vlines 64-byte lines from k and v),
 * else its rows at once (sparse lists; nothing left for the rows). */
typedef struct pf_sub {
    const char *k, *v;
    int klines, vlines;
} pf_sub;

static void pf_plan(const ws_attn_seq *sq, const ws_kv_layout *kv, int kvh, int it, int i1,
                    pf_sub *f)
{
    f->klines = f->vlines = 0;
    if (it >= i1)
        return;
    const int P = kv->page_tokens, n = i1 - it < SUB ? i1 - it : SUB;
    const int t0 = sq->sel ? sq->sel[it] : it;
    int run = t0 % P + n <= P;
    for (int j = 1; j < n && sq->sel && run; j++)
        run = sq->sel[it + j] == t0 + j;
    if (!run) {
        for (int j = 0; j < n; j++)
            ws_attn_prefetch_row(sq, kv, kvh, sq->sel ? sq->sel[it + j] : it + j);
        return;
    }
    const int tp = t0 % P, last = tp + n - 1;
    const char *pg = (const char *)sq->pages[t0 / P];
    f->k = pg + 2 * ws_kv_k_off(kv, kvh, tp & ~15);
    f->klines = (last / SUB - tp / SUB + 1) * kv->d_k / 2; /* a tile row is one line */
    f->v = pg + 2 * ws_kv_v_pair_off(kv, kvh, tp);
    f->vlines = (last / 2 - tp / 2 + 1) * kv->d_v / 16; /* a pair row is d_v / 16 lines */
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")

#define INL static inline __attribute__((always_inline))
#include "attn_cpu_exp512.h" /* compiled for this region's target */

/* 32 16-bit values as 16 pairs -> fp32 of the even (first) and odd (second) elements. */
INL void split(__m512i x, int f16, __m512 *ev, __m512 *od)
{
    if (!f16) {
        *ev = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
        *od = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32((int)0xffff0000u)));
    } else {
        *ev = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(x));
        *od = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(x, 16)));
    }
}

/* Scores of one sub-block for heads h < H: s[h * NS * SUB + 0..15] = q_h . k_t. Prefetches
 * f's lines spread over the tile rows. */
INL void scores(const sub_kv *b, const float *qs, int dk, float *s, const pf_sub *f,
                const int H, const int f16)
{
    __m512 a[HM], c[HM];
#pragma GCC unroll 8
    for (int h = 0; h < H; h++)
        a[h] = c[h] = _mm512_setzero_ps();
    const int rows = dk / 2;
    const uint16_t *kp = b->k;
    const char *pk = f->k;
    const int kl = f->klines < rows ? f->klines : rows;
    for (int r = 0; r < rows; r++) {
        __m512 ev, od;
        split(_mm512_loadu_si512(kp + (size_t)r * 32), f16, &ev, &od);
        const float *qr = qs + (size_t)r * 2 * H; /* [row][head][2]: one base per row */
#pragma GCC unroll 8
        for (int h = 0; h < H; h++) {
            a[h] = _mm512_fmadd_ps(ev, _mm512_set1_ps(qr[2 * h]), a[h]);
            c[h] = _mm512_fmadd_ps(od, _mm512_set1_ps(qr[2 * h + 1]), c[h]);
        }
        if (r < kl) /* a line of each per row; what is left (d_v > d_k, two tiles) below */
            _mm_prefetch(pk + 64 * (size_t)r, _MM_HINT_T1);
    }
    for (int x = kl; x < f->klines; x++)
        _mm_prefetch(pk + 64 * (size_t)x, _MM_HINT_T1);
#pragma GCC unroll 8
    for (int h = 0; h < H; h++)
        _mm512_store_ps(s + (size_t)h * NS * SUB, _mm512_add_ps(a[h], c[h]));
}

INL __mmask16 tok_mask(int n)
{
    return n >= SUB ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* The online softmax over a super-block of ns sub-blocks, per head h < H: new max m[h],
 * rescale factor alpha[h] of what was accumulated, probabilities in place of the scores
 * (zero for absent tokens), l[h] updated. */
INL void softmax(float *sp, const sub_kv *b, int ns, float *m, float *l, float *alpha,
                 const int H)
{
    for (int h = 0; h < H; h++) {
        float *sh = sp + (size_t)h * NS * SUB;
        __m512 mx = _mm512_set1_ps(-INFINITY);
        for (int j = 0; j < ns; j++)
            mx = _mm512_max_ps(mx, _mm512_mask_load_ps(mx, tok_mask(b[j].n), sh + j * SUB));
        const float bm = _mm512_reduce_max_ps(mx), mn = bm > m[h] ? bm : m[h];
        alpha[h] = m[h] == -INFINITY ? 0.0f : expf(m[h] - mn); /* 1 when the max stays */
        const __m512 vm = _mm512_set1_ps(mn);
        __m512 sum = _mm512_setzero_ps();
        for (int j = 0; j < ns; j++) {
            const __m512 e = _mm512_maskz_mov_ps(
                tok_mask(b[j].n), ws_exp16_ps(_mm512_sub_ps(_mm512_load_ps(sh + j * SUB), vm)));
            _mm512_store_ps(sh + j * SUB, e);
            sum = _mm512_add_ps(sum, e);
        }
        l[h] = alpha[h] * l[h] + _mm512_reduce_add_ps(sum);
        m[h] = mn;
    }
}

/* O[h][c0 .. c0 + 16 CW) = alpha[h] O[h][..] + sum over the super-block's tokens of
 * p[h][t] v_t[..], for heads h < H. */
INL void pv_cols(float *o, int dv, int c0, const sub_kv *b, int ns, const float *sp,
                 const float *alpha, const pf_sub *f, const int H, const int CW, const int f16)
{
    __m512 acc[HM][4];
#pragma GCC unroll 8
    for (int h = 0; h < H; h++)
#pragma GCC unroll 4
        for (int w = 0; w < CW; w++)
            acc[h][w] = _mm512_mul_ps(_mm512_load_ps(o + (size_t)h * dv + c0 + 16 * w),
                                      _mm512_set1_ps(alpha[h]));
    for (int j = 0; j < ns; j++) {
        const uint16_t *v = b[j].v + 2 * (size_t)c0;
        const float *pj = sp + j * SUB;
        /* this column step's share of sub-block j's V lines to prefetch, 1/8 per pair row */
        const int l0 = f[j].vlines * c0 / dv, l1 = f[j].vlines * (c0 + 16 * CW) / dv;
        const int per = (l1 - l0 + 7) / 8;
        for (int u = 0; u < SUB / 2; u++) {
            for (int x = l0 + u * per; x < l0 + (u + 1) * per && x < l1; x++)
                _mm_prefetch(f[j].v + 64 * (size_t)x, _MM_HINT_T1);
            __m512 ev[4], od[4];
#pragma GCC unroll 4
            for (int w = 0; w < CW; w++)
                split(_mm512_loadu_si512(v + (size_t)u * 2 * dv + 32 * w), f16, &ev[w], &od[w]);
#pragma GCC unroll 8
            for (int h = 0; h < H; h++) {
                const __m512 pe = _mm512_set1_ps(pj[(size_t)h * NS * SUB + 2 * u]);
                const __m512 po = _mm512_set1_ps(pj[(size_t)h * NS * SUB + 2 * u + 1]);
#pragma GCC unroll 4
                for (int w = 0; w < CW; w++) {
                    acc[h][w] = _mm512_fmadd_ps(ev[w], pe, acc[h][w]);
                    acc[h][w] = _mm512_fmadd_ps(od[w], po, acc[h][w]);
                }
            }
        }
    }
#pragma GCC unroll 8
    for (int h = 0; h < H; h++)
#pragma GCC unroll 4
        for (int w = 0; w < CW; w++)
            _mm512_store_ps(o + (size_t)h * dv + c0 + 16 * w, acc[h][w]);
}

INL void attend(const ws_attn_problem *p, int s, int kvh, int i0, int i1, int G, float *out,
                float *lse, char *w, const int H, const int f16)
{
    const ws_kv_layout *kv = &p->kv;
    const ws_attn_seq *sq = &p->seqs[s];
    const int dk = kv->d_k, dv = kv->d_v;
    const fma_scratch sp = scratch_plan(kv);
    float *qs = (float *)(w + sp.qs), *o = (float *)(w + sp.o), *sc = (float *)(w + sp.sp);
    uint16_t *kg = (uint16_t *)(w + sp.kg), *vg = (uint16_t *)(w + sp.vg);
    const float *q = p->q + ((size_t)s * p->n_q_heads + (size_t)kvh * G) * dk;
    for (int h = 0; h < H; h++) /* [dk / 2 rows][H heads][2], as scores reads them */
        for (int d = 0; d < dk; d++)
            qs[((size_t)(d >> 1) * H + h) * 2 + (d & 1)] =
                h < G ? q[(size_t)h * dk + d] * p->scale : 0.0f;
    memset(o, 0, sizeof(float) * (size_t)H * dv);
    float m[HM], l[HM], alpha[HM];
    for (int h = 0; h < H; h++)
        m[h] = -INFINITY, l[h] = 0;
    /* 64 columns at a time for up to 4 heads, 32 for more (16 accumulators) */
    const int CW = H <= 4 ? 4 : 2;
    sub_kv b[NS];
    pf_sub f[NS];
    for (int i = i0; i < i1; i += NS * SUB) {
        const int ns = (i1 - i + SUB - 1) / SUB < NS ? (i1 - i + SUB - 1) / SUB : NS;
        for (int j = 0; j < ns; j++) {
            const int it = i + j * SUB, n = i1 - it < SUB ? i1 - it : SUB;
            resolve(sq, kv, kvh, it, n, kg + (size_t)j * SUB * dk, vg + (size_t)j * SUB * dv,
                    &b[j]);
            pf_plan(sq, kv, kvh, it + AHEAD * NS * SUB, i1, &f[j]);
            scores(&b[j], qs, dk, sc + j * SUB, &f[j], H, f16);
        }
        softmax(sc, b, ns, m, l, alpha, H);
        int c0 = 0;
        for (; c0 + 16 * CW <= dv; c0 += 16 * CW)
            pv_cols(o, dv, c0, b, ns, sc, alpha, f, H, CW, f16);
        for (; c0 < dv; c0 += 16) /* d_v is a multiple of 16 */
            pv_cols(o, dv, c0, b, ns, sc, alpha, f, H, 1, f16);
    }
    for (int h = 0; h < G; h++) {
        float *oh = out + (size_t)h * dv;
        if (l[h] == 0) { /* nothing attended */
            memset(oh, 0, sizeof(float) * (size_t)dv);
            lse[h] = -INFINITY;
            continue;
        }
        const float inv = 1.0f / l[h];
        for (int d = 0; d < dv; d++)
            oh[d] = o[(size_t)h * dv + d] * inv;
        lse[h] = m[h] + logf(l[h]);
    }
}

/* One function per (heads, dtype): each keeps its own registers (one function holding
 * all eight spilled the loaded K rows to the stack). */
typedef void attend_fn(const ws_attn_problem *, int, int, int, int, int, float *, float *,
                       char *);
#define ATTEND(H, F16)                                                                             \
    static __attribute__((noinline)) void attend_##H##_##F16(                                      \
        const ws_attn_problem *p, int s, int kvh, int i0, int i1, int G, float *o, float *lse,   \
        char *w)                                                                                   \
    {                                                                                              \
        attend(p, s, kvh, i0, i1, G, o, lse, w, H, F16);                                           \
    }
ATTEND(1, 0)
ATTEND(1, 1)
ATTEND(2, 0)
ATTEND(2, 1)
ATTEND(4, 0)
ATTEND(4, 1)
ATTEND(8, 0)
ATTEND(8, 1)
#undef ATTEND

void ws_attn_cpu_fma_attend(const ws_attn_problem *p, int s, int kvh, int i0, int i1, int G,
                            float *o, float *lse, void *scratch)
{
    static attend_fn *const fns[4][2] = {
        {attend_1_0, attend_1_1}, {attend_2_0, attend_2_1}, {attend_4_0, attend_4_1},
        {attend_8_0, attend_8_1}};
    const int hi = G <= 1 ? 0 : G <= 2 ? 1 : G <= 4 ? 2 : 3; /* heads run: 1, 2, 4 or 8 */
    fns[hi][p->kv.dtype == WS_DT_FP16](p, s, kvh, i0, i1, G, o, lse, scratch);
}

#pragma GCC pop_options
