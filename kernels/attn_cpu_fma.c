/* attn_cpu_fma: the fused FMA block loop (see attn_cpu_fma.h) for GQA, bf16 or fp16, up to
 * 16 query heads per KV head (8 per pass), reading K in tiles and V in token pairs (other
 * layouts gathered into them), and for MLA rows (bf16). The loop itself is written once, in
 * attn_cpu_fma_body.h, and compiled here twice: for AVX-512 (16 lanes) and AVX2 (8 lanes, 16
 * registers: one score accumulator per head instead of two).
 *
 * Per sub-block of 16 tokens, the scores of each head are one vector (AVX2: two): a K tile
 * row holds the 16 tokens' values of dims 2r and 2r + 1 as 32-bit pairs, so one load, one
 * shift and one mask give two fp32 vectors of tokens that multiply q[h][2r] and
 * q[h][2r + 1] (broadcast from memory, q laid out [row][head][2] so one base serves the
 * row) for every head h, with no horizontal sums. The online softmax runs once per
 * super-block of 4 sub-blocks (one max, one rescale per head); P.V takes a pair row of V
 * (two tokens' values of a vector of columns per load), splits it the same way and
 * multiplies the two tokens' probabilities (broadcast) into 8 heads x 32 columns of O held
 * in registers over the whole super-block (AVX2: 8 columns; twice that for 4 heads or
 * fewer). Groups of 3, 5-7 heads run as 4 or 8 with zero queries; the extra rows stay in
 * the scratch. Sub-blocks that are not one aligned run of 16 tokens of one page (sparse
 * lists, the last partial one), and every sub-block of K or V in rows, are gathered into
 * the same layouts, zero-padded. The sub-block two super-blocks ahead is prefetched to L2:
 * its K lines during the scores, its V lines during P.V.
 *
 * For Qwen3's shape the loop is bound by its FMAs on a host with ~13 GB/s of memory per
 * core; MLA (~30 flop/byte) everywhere. The measurements behind these choices (fractions
 * of read bandwidth and of the FMA peak against the generic loop, the prefetch and
 * blocking variants tried): docs/notes/fma-loop.md. */
#include "attn_cpu_fma.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attn_cpu_isa.h"
#include "half.h"
#include "ws_util.h"

#define SUB 16 /* tokens per sub-block: one K tile, one score vector per head */
#define NS 4   /* sub-blocks per super-block (one softmax step) */
/* The GQA VDPBF16PS loop's: 16 sub-blocks (a 256-token page of a head's K, then of its V),
 * prefetched (PREFETCHT0) one super-block ahead along its walk (docs/notes/fma-loop.md) */
#define DNS 16
#define DAHEAD 1
#define NS_MAX (NS > DNS ? NS : DNS)
#define HM WS_ATTN_CPU_FMA_GROUP
#define AHEAD 2 /* super-blocks prefetched ahead */

/* MLA (V is the first d_v values of each K row): token-pair rows, heads padded to a
 * multiple of 16, super-blocks of MLA_NT tokens. */
#define MLA_NT 32

static int fits_gqa(const ws_kv_layout *kv, int G)
{
    return !kv->v_shares_k && G >= 1 && G <= HM && (!kv->k_tiles || kv->page_tokens % SUB == 0);
}

/* bf16 only: fp16 rows are split again for every head group (~9 operations per 32 values
 * instead of 2), so for DeepSeek-V2-Lite's shape this loop took 1.1x the generic loop's time,
 * which converts each row once (bench, alternated builds); with each super-block's rows
 * split to fp32 once into a buffer, the same as the generic loop (0.356-0.380 of the FMA
 * peak against 0.334-0.383). */
static int fits_mla(const ws_kv_layout *kv, int G)
{
    return kv->v_shares_k && !kv->k_tiles && !kv->v_pairs && kv->dtype == WS_DT_BF16 && G >= 1 &&
           G <= WS_ATTN_CPU_MAX_GROUP && kv->d_k % 32 == 0 && kv->d_v % 32 == 0 &&
           kv->d_v <= kv->d_k;
}

int ws_attn_cpu_fma_fits(const ws_kv_layout *kv, int G)
{
    return (kv->dtype == WS_DT_BF16 || kv->dtype == WS_DT_FP16) &&
           (fits_gqa(kv, G) || fits_mla(kv, G));
}

static size_t a64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* Scratch pieces, in order (each 64-byte aligned). */
typedef struct fma_scratch {
    size_t qs, o, sp, pp, kg, vg, total;
} fma_scratch;

static fma_scratch scratch_plan(const ws_kv_layout *kv)
{
    fma_scratch s;
    size_t at = 0;
    s.qs = at, at += a64((size_t)HM * kv->d_k * 4); /* scaled queries, fp32 */
    s.o = at, at += a64((size_t)HM * kv->d_v * 4);  /* O, fp32 */
    s.sp = at, at += (size_t)HM * NS_MAX * SUB * 4; /* scores, then probabilities */
    s.pp = at, at += (size_t)HM * NS_MAX * SUB * 2; /* VDPBF16PS loop: bf16 token pairs of p */
    s.kg = at, at += a64((size_t)NS_MAX * SUB * kv->d_k * 2); /* gathered K tiles */
    s.vg = at, at += a64((size_t)NS_MAX * SUB * kv->d_v * 2); /* gathered V pair rows */
    s.total = at;
    return s;
}

/* MLA scratch, heads padded to Gp (a multiple of 16): q [Gp / 8][d_k / 32][8][2][16] for
 * the AVX-512 form ([Gp / 4][d_k / 16][4][2][8] for AVX2: the same bytes, see mla_attend;
 * the VDPBF16PS form's bf16 pairs [d_k / 2][Gp], hi then lo, fill the same bytes),
 * O [Gp][d_v], scores and probabilities [MLA_NT][Gp], m, l and alpha [Gp], the
 * super-block's row pointers. */
typedef struct mla_scratch {
    size_t qs, o, s, pp, m, l, alpha, rows, total;
    int Gp;
} mla_scratch;

static mla_scratch mla_plan(const ws_kv_layout *kv, int G)
{
    mla_scratch s;
    size_t at = 0;
    s.Gp = (G + 15) / 16 * 16;
    s.qs = at, at += a64((size_t)s.Gp * kv->d_k * 4);
    s.o = at, at += a64((size_t)s.Gp * kv->d_v * 4);
    s.s = at, at += a64((size_t)MLA_NT * s.Gp * 4);
    s.pp = at, at += a64((size_t)MLA_NT * s.Gp * 4); /* VDPBF16PS loop: p pairs, hi + lo */
    s.m = at, at += a64((size_t)s.Gp * 4);
    s.l = at, at += a64((size_t)s.Gp * 4);
    s.alpha = at, at += a64((size_t)s.Gp * 4);
    s.rows = at, at += a64(MLA_NT * sizeof(void *));
    s.total = at;
    return s;
}

size_t ws_attn_cpu_fma_scratch(const ws_kv_layout *kv, int G)
{
    return kv->v_shares_k ? mla_plan(kv, G).total : scratch_plan(kv).total;
}

/* The task's results from the accumulated state of heads h < G: out[h] = O[h] / l[h] and
 * lse[h] = m[h] + log l[h], or 0 and -inf when nothing was attended. half > 0: O's columns
 * are in (even, odd) order per 2 half (the MLA form's split rows), put back in order. */
static void finish(float *out, float *lse, const float *o, const float *m, const float *l, int G,
                   int dv, int half)
{
    for (int h = 0; h < G; h++) {
        float *oh = out + (size_t)h * dv;
        const float *src = o + (size_t)h * dv;
        if (l[h] == 0) { /* nothing attended */
            memset(oh, 0, sizeof(float) * (size_t)dv);
            lse[h] = -INFINITY;
            continue;
        }
        const float inv = 1.0f / l[h];
        for (int c = 0; c < dv; c++) { /* split: column c in its chunk's even or odd half */
            const int r = c % (2 * (half ? half : 1)),
                      at = half ? c - r + (c & 1) * half + r / 2 : c;
            oh[c] = src[at] * inv;
        }
        lse[h] = m[h] + logf(l[h]);
    }
}

/* A resolved sub-block: its K tile and first V pair row, n tokens. */
typedef struct sub_kv {
    const uint16_t *k, *v;
    int n;
} sub_kv;

/* Gathers from 16 token rows (NULL: absent, zeros), per instruction set: a K tile
 * (kd [d_k / 2][16] 32-bit pairs: a transpose of the rows' pairs) and V pair rows
 * (vd [8][d_v][2]). */
typedef struct row_gather {
    void (*k)(uint32_t *kd, const uint16_t *const *rows, int dk);
    void (*v)(uint16_t *vd, const uint16_t *const *rows, int dv);
} row_gather;

/* The vector gathers' tails, an element at a time: pairs [p0, d_k / 2) of the K tile, and
 * columns [c0, d_v) of the V pair rows. */
static void gather_k_tail(uint32_t *kd, const uint16_t *const *rows, int p0, int dk)
{
    for (int x = 0; x < SUB; x++)
        for (int r2 = p0; r2 < dk / 2; r2++) {
            uint32_t w = 0;
            if (rows[x])
                memcpy(&w, rows[x] + 2 * r2, 4);
            kd[r2 * SUB + x] = w;
        }
}

static void gather_v_tail(uint16_t *vd, const uint16_t *const *rows, int c0, int dv)
{
    for (int x = 0; x < SUB; x++)
        for (int c = c0; c < dv; c++)
            vd[(size_t)(x >> 1) * 2 * dv + 2 * c + (x & 1)] = rows[x] ? rows[x][c] : 0;
}

static void resolve(const ws_attn_seq *sq, const ws_kv_layout *kv, int kvh, int it, int n,
                    uint16_t *kg, uint16_t *vg, sub_kv *r, const row_gather *rg)
{
    const int P = kv->page_tokens, dk = kv->d_k, dv = kv->d_v;
    int t0;
    r->n = n;
    if (kv->k_tiles && kv->v_pairs && ws_attn_run16(sq, it, n, &t0) && t0 % SUB == 0) {
        const uint16_t *pg = sq->pages[t0 / P]; /* one tile, so one page */
        r->k = pg + ws_kv_k_off(kv, kvh, t0 % P);
        r->v = pg + ws_kv_v_pair_off(kv, kvh, t0 % P);
        return;
    }
    /* Else gathered into a K tile and V pair rows: from the tokens' rows (the layout of
     * sparse token lists) by transposes and interleaves, from their tiles and pair rows
     * (page edges of dense runs) an element at a time. */
    const uint16_t *kr[SUB], *vr[SUB];
    uint32_t *kd = (uint32_t *)kg;
    if (n < SUB && (kv->k_tiles || kv->v_pairs)) { /* absent tokens read zeros */
        memset(kg, 0, (size_t)SUB * dk * 2);
        memset(vg, 0, (size_t)SUB * dv * 2);
    }
    for (int x = 0; x < SUB; x++) {
        kr[x] = vr[x] = NULL;
        if (x >= n)
            continue;
        const int t = sq->sel ? sq->sel[it + x] : it + x, tp = t % P;
        const uint16_t *pg = sq->pages[t / P];
        if (kv->k_tiles) {
            const uint32_t *ks = (const uint32_t *)(pg + ws_kv_k_off(kv, kvh, tp & ~15));
            for (int r2 = 0; r2 < dk / 2; r2++) /* pair r2 of token x: slot x of row r2 */
                kd[r2 * SUB + x] = ks[r2 * SUB + (tp & 15)];
        } else {
            kr[x] = pg + ws_kv_k_off(kv, kvh, tp);
        }
        if (kv->v_pairs) {
            const uint16_t *vs = pg + ws_kv_v_pair_off(kv, kvh, tp) + (tp & 1);
            uint16_t *vd = vg + (size_t)(x >> 1) * 2 * dv + (x & 1);
            for (int c = 0; c < dv; c++)
                vd[2 * c] = vs[2 * c];
        } else {
            vr[x] = pg + ws_kv_v_off(kv, kvh, tp);
        }
    }
    if (!kv->k_tiles)
        rg->k(kd, kr, dk);
    if (!kv->v_pairs)
        rg->v(vg, vr, dv);
    r->k = kg, r->v = vg;
}

/* What to prefetch while a sub-block's scores run: the K tiles and V pair rows of a later
 * sub-block when it is one run of one page (klines and vlines 64-byte lines from k and v),
 * else its rows at once (sparse lists; nothing left for the rows). */
typedef struct pf_sub {
    const char *k, *v;
    int klines, vlines;
} pf_sub;

/* f for the run of n tokens from tp of page pg, KV head kvh. */
static inline void pf_run(const ws_kv_layout *kv, int kvh, const char *pg, int tp, int n, pf_sub *f)
{
    const int last = tp + n - 1;
    /* a tile row is one line; a tile or 16 K rows are d_k / 2 lines */
    f->k = pg + 2 * ws_kv_k_off(kv, kvh, kv->k_tiles ? tp & ~15 : tp);
    f->klines = kv->k_tiles ? (last / SUB - tp / SUB + 1) * kv->d_k / 2 : n * kv->d_k / 32;
    /* a pair row is d_v / 16 lines, a V row d_v / 32 */
    f->v = pg + 2 * (kv->v_pairs ? ws_kv_v_pair_off(kv, kvh, tp) : ws_kv_v_off(kv, kvh, tp));
    f->vlines = kv->v_pairs ? (last / 2 - tp / 2 + 1) * kv->d_v / 16 : n * kv->d_v / 32;
}

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
    pf_run(kv, kvh, (const char *)sq->pages[t0 / P], t0 % P, n, f);
}

/* MLA: the K rows (V inside) of items [i, i + n) of sequence sq, KV head kvh. */
static inline void mla_rows(const ws_attn_seq *sq, const ws_kv_layout *kv, int kvh, int i, int n,
                            const uint16_t **rows)
{
    const int P = kv->page_tokens;
    for (int t = 0; t < n; t++) {
        const int tok = sq->sel ? sq->sel[i + t] : i + t;
        rows[t] = (const uint16_t *)sq->pages[tok / P] + ws_kv_k_off(kv, kvh, tok % P);
    }
}

/* Sub-blocks in the super-block of at most ns_max at item i (of i1). */
static inline int super_subs(int i, int i1, int ns_max)
{
    const int n = (i1 - i + SUB - 1) / SUB;
    return n < ns_max ? n : ns_max;
}

/* Sub-block j of the super-block at item i: resolved into b[j] (gathered into its slots of
 * kg and vg where it must be), and f[j] planned, the prefetch of the sub-block AHEAD
 * super-blocks on. */
static inline void sub_prepare(const ws_attn_seq *sq, const ws_kv_layout *kv, int kvh, int i,
                               int j, int i1, uint16_t *kg, uint16_t *vg, sub_kv *b, pf_sub *f,
                               const row_gather *rg)
{
    const int it = i + j * SUB, n = i1 - it < SUB ? i1 - it : SUB;
    resolve(sq, kv, kvh, it, n, kg + (size_t)j * SUB * kv->d_k, vg + (size_t)j * SUB * kv->d_v,
            &b[j], rg);
    pf_plan(sq, kv, kvh, it + AHEAD * NS * SUB, i1, &f[j]);
}

typedef void attend_fn(const ws_attn_problem *, int, int, int, int, int, int, float *, float *,
                       char *);
#define INL static inline __attribute__((always_inline))

/* ---- AVX-512: 16 lanes, one vector per sub-block ---- */
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")
#include "attn_cpu_exp512.h" /* compiled for this region's target */

/* 16 32-bit pairs of 16-bit values at p -> fp32 of the first and second of each pair:
 * bf16 by a shift and a mask, fp16 by narrowing and VCVTPH2PS. */
INL void split_512(const uint16_t *p, int f16, __m512 *ev, __m512 *od)
{
    const __m512i x = _mm512_loadu_si512(p);
    if (!f16) {
        *ev = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
        *od = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32((int)0xffff0000u)));
    } else {
        *ev = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(x));
        *od = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(x, 16)));
    }
}

/* r[x] lane i -> r[i] lane x (16 x 16 32-bit elements: 64 shuffles). */
INL void transpose16_512(__m512i *r)
{
    __m512i t[16], u[16];
    for (int k = 0; k < 8; k++) {
        t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 4; k++) { /* u[4k + j], 128-bit lane q: (4k + 0..3, 4q + j) */
        u[4 * k] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
        u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
        u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
        u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
    }
    for (int j = 0; j < 4; j++) { /* gather lane q of the four groups into column 4q + j */
        const __m512i a = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
        const __m512i b = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xdd);
        const __m512i c = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
        const __m512i d = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xdd);
        r[j] = _mm512_shuffle_i32x4(a, c, 0x88);
        r[8 + j] = _mm512_shuffle_i32x4(a, c, 0xdd);
        r[4 + j] = _mm512_shuffle_i32x4(b, d, 0x88);
        r[12 + j] = _mm512_shuffle_i32x4(b, d, 0xdd);
    }
}

static void gather_k_512(uint32_t *kd, const uint16_t *const *rows, int dk)
{
    for (int b = 0; b < dk / 32; b++) { /* 16 pairs (32 dims) of the 16 tokens */
        __m512i r[16];
        for (int x = 0; x < 16; x++)
            r[x] = rows[x] ? _mm512_loadu_si512(rows[x] + 32 * b) : _mm512_setzero_si512();
        transpose16_512(r);
        for (int i = 0; i < 16; i++)
            _mm512_store_si512(kd + (size_t)(16 * b + i) * 16, r[i]);
    }
    gather_k_tail(kd, rows, dk / 32 * 16, dk);
}

/* Interleave indices of VPERMT2W: (a e, b e) for e = 0..15 (lo) and 16..31 (hi). */
#define IL(e) ((e)&1 ? 32 + (e) / 2 : (e) / 2)
#define IH(e) ((e)&1 ? 48 + (e) / 2 : 16 + (e) / 2)
static const uint16_t g_il[32] __attribute__((aligned(64))) = {
    IL(0),  IL(1),  IL(2),  IL(3),  IL(4),  IL(5),  IL(6),  IL(7),  IL(8),  IL(9),  IL(10),
    IL(11), IL(12), IL(13), IL(14), IL(15), IL(16), IL(17), IL(18), IL(19), IL(20), IL(21),
    IL(22), IL(23), IL(24), IL(25), IL(26), IL(27), IL(28), IL(29), IL(30), IL(31)};
static const uint16_t g_ih[32] __attribute__((aligned(64))) = {
    IH(0),  IH(1),  IH(2),  IH(3),  IH(4),  IH(5),  IH(6),  IH(7),  IH(8),  IH(9),  IH(10),
    IH(11), IH(12), IH(13), IH(14), IH(15), IH(16), IH(17), IH(18), IH(19), IH(20), IH(21),
    IH(22), IH(23), IH(24), IH(25), IH(26), IH(27), IH(28), IH(29), IH(30), IH(31)};
#undef IL
#undef IH

static void gather_v_512(uint16_t *vd, const uint16_t *const *rows, int dv)
{
    const __m512i lo = _mm512_load_si512(g_il), hi = _mm512_load_si512(g_ih);
    for (int u = 0; u < 8; u++) { /* pair row u: tokens 2u, 2u + 1, 32 columns at a time */
        const uint16_t *a = rows[2 * u], *b = rows[2 * u + 1];
        uint16_t *d = vd + (size_t)u * 2 * dv;
        for (int c = 0; c + 32 <= dv; c += 32) {
            const __m512i va = a ? _mm512_loadu_si512(a + c) : _mm512_setzero_si512();
            const __m512i vb = b ? _mm512_loadu_si512(b + c) : _mm512_setzero_si512();
            _mm512_store_si512(d + 2 * c, _mm512_permutex2var_epi16(va, lo, vb));
            _mm512_store_si512(d + 2 * c + 32, _mm512_permutex2var_epi16(va, hi, vb));
        }
    }
    gather_v_tail(vd, rows, dv / 32 * 32, dv);
}

static const row_gather g_rows_512 = {gather_k_512, gather_v_512};

INL __m512 keep_512(__m512 v, int n, __m512 fill)
{
    const __mmask16 k = n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
    return _mm512_mask_mov_ps(fill, k, v);
}

/* x[i]'s 16 lanes summed into lane i: a transpose-and-add tree (30 shuffles, 15 adds). */
INL __m512 reduce16_512(const __m512 *x)
{
    __m512 y[8], z[4], w[2];
    for (int k = 0; k < 8; k++) /* blocks 0-1: x[2k]'s halves summed, 2-3: x[2k + 1]'s */
        y[k] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * k], x[2 * k + 1], 0x44),
                             _mm512_shuffle_f32x4(x[2 * k], x[2 * k + 1], 0xee));
    for (int k = 0; k < 4; k++) /* block q: x[4k + q], 4 partial sums */
        z[k] = _mm512_add_ps(_mm512_shuffle_f32x4(y[2 * k], y[2 * k + 1], 0x88),
                             _mm512_shuffle_f32x4(y[2 * k], y[2 * k + 1], 0xdd));
    for (int k = 0; k < 2; k++) /* block q: lanes 0-1 x[8k + q], 2-3 x[8k + 4 + q] */
        w[k] = _mm512_add_ps(_mm512_shuffle_ps(z[2 * k], z[2 * k + 1], 0x44),
                             _mm512_shuffle_ps(z[2 * k], z[2 * k + 1], 0xee));
    const __m512 v = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88),
                                   _mm512_shuffle_ps(w[0], w[1], 0xdd)); /* 4q + r: x[4r + q] */
    return _mm512_permutexvar_ps(
        _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), v);
}

INL void store_halves_512(float *a, float *b, __m512 v)
{
    _mm256_storeu_ps(a, _mm512_castps512_ps256(v));
    _mm256_storeu_ps(b, _mm512_extractf32x8_ps(v, 1));
}

#define FV __m512
#define FL 16
#define FN(x) x##_512
#define FACC2 1
#define f_zero _mm512_setzero_ps
#define f_load _mm512_load_ps
#define f_store _mm512_store_ps
#define f_set1 _mm512_set1_ps
#define f_fma _mm512_fmadd_ps
#define f_mul _mm512_mul_ps
#define f_add _mm512_add_ps
#define f_sub _mm512_sub_ps
#define f_max _mm512_max_ps
#define f_exp ws_exp16_ps
#define f_hmax _mm512_reduce_max_ps
#define f_hadd _mm512_reduce_add_ps
#define f_keep keep_512
#define f_split split_512
#define f_reduce reduce16_512
#define f_store_halves store_halves_512
#define f_rows (&g_rows_512)
#include "attn_cpu_fma_body.h" /* consumes the definitions above */
#pragma GCC pop_options

/* ---- AVX2: 8 lanes, two vectors per sub-block ---- */
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include "attn_cpu_exp256.h" /* compiled for this region's target */

/* 8 32-bit pairs of 16-bit values at p -> fp32 of the first and second of each pair: bf16
 * by a shift and a mask, fp16 by packing the halves (VPACKUSDW on values < 2^16 is
 * exact) and VCVTPH2PS. */
INL void split_256(const uint16_t *p, int f16, __m256 *ev, __m256 *od)
{
    const __m256i x = _mm256_loadu_si256((const __m256i *)p);
    if (!f16) {
        *ev = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
        *od = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32((int)0xffff0000u)));
    } else {
        /* per 128-bit lane [first 0-3, second 0-3 | first 4-7, second 4-7] -> [first | second] */
        const __m256i y = _mm256_permute4x64_epi64(
            _mm256_packus_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0xffff)),
                                _mm256_srli_epi32(x, 16)),
            _MM_SHUFFLE(3, 1, 2, 0));
        *ev = _mm256_cvtph_ps(_mm256_castsi256_si128(y));
        *od = _mm256_cvtph_ps(_mm256_extracti128_si256(y, 1));
    }
}

/* r[x] lane i -> r[i] lane x (8 x 8 32-bit elements: 24 shuffles). */
INL void transpose8_256(__m256i *r)
{
    __m256i t[8], u[8];
    for (int k = 0; k < 4; k++) {
        t[2 * k] = _mm256_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm256_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 2; k++) { /* u[4k + j], 128-bit lane q: (4k + 0..3, 4q + j) */
        u[4 * k] = _mm256_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
        u[4 * k + 1] = _mm256_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
        u[4 * k + 2] = _mm256_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
        u[4 * k + 3] = _mm256_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
    }
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
        r[4 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
    }
}

static void gather_k_256(uint32_t *kd, const uint16_t *const *rows, int dk)
{
    for (int b = 0; b < dk / 16; b++) /* 8 pairs (16 dims) */
        for (int g = 0; g < 2; g++) { /* of tokens 8g .. 8g + 7 */
            __m256i r[8];
            for (int x = 0; x < 8; x++) {
                const uint16_t *p = rows[8 * g + x];
                r[x] =
                    p ? _mm256_loadu_si256((const __m256i *)(p + 16 * b)) : _mm256_setzero_si256();
            }
            transpose8_256(r);
            for (int i = 0; i < 8; i++)
                _mm256_store_si256((__m256i *)(kd + (size_t)(8 * b + i) * 16 + 8 * g), r[i]);
        }
    gather_k_tail(kd, rows, dk / 16 * 8, dk);
}

static void gather_v_256(uint16_t *vd, const uint16_t *const *rows, int dv)
{
    for (int u = 0; u < 8; u++) { /* pair row u: tokens 2u, 2u + 1, 16 columns at a time */
        const uint16_t *a = rows[2 * u], *b = rows[2 * u + 1];
        uint16_t *d = vd + (size_t)u * 2 * dv;
        for (int c = 0; c + 16 <= dv; c += 16) {
            const __m256i va =
                a ? _mm256_loadu_si256((const __m256i *)(a + c)) : _mm256_setzero_si256();
            const __m256i vb =
                b ? _mm256_loadu_si256((const __m256i *)(b + c)) : _mm256_setzero_si256();
            /* per 128-bit lane: columns 0-3 | 8-11 (lo) and 4-7 | 12-15 (hi), interleaved */
            const __m256i lo = _mm256_unpacklo_epi16(va, vb), hi = _mm256_unpackhi_epi16(va, vb);
            _mm256_store_si256((__m256i *)(d + 2 * c), _mm256_permute2x128_si256(lo, hi, 0x20));
            _mm256_store_si256((__m256i *)(d + 2 * c + 16),
                               _mm256_permute2x128_si256(lo, hi, 0x31));
        }
    }
    gather_v_tail(vd, rows, dv / 16 * 16, dv);
}

static const row_gather g_rows_256 = {gather_k_256, gather_v_256};

INL __m256 keep_256(__m256 v, int n, __m256 fill)
{
    if (n >= 8)
        return v;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_blendv_ps(fill, v,
                            _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane)));
}

INL float hadd_256(__m256 a)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* x[i]'s 8 lanes summed into lane i (14 shuffles, 7 adds). */
INL __m256 reduce8_256(const __m256 *x)
{
    __m256 y[4], w[2];
    for (int k = 0; k < 4; k++) /* 128-bit lane 0: x[2k], lane 1: x[2k + 1] */
        y[k] = _mm256_add_ps(_mm256_permute2f128_ps(x[2 * k], x[2 * k + 1], 0x20),
                             _mm256_permute2f128_ps(x[2 * k], x[2 * k + 1], 0x31));
    for (int k = 0; k < 2; k++) /* lane q: 0-1 x[4k + q], 2-3 x[4k + 2 + q] */
        w[k] = _mm256_add_ps(_mm256_shuffle_ps(y[2 * k], y[2 * k + 1], 0x44),
                             _mm256_shuffle_ps(y[2 * k], y[2 * k + 1], 0xee));
    const __m256 v = _mm256_add_ps(_mm256_shuffle_ps(w[0], w[1], 0x88),
                                   _mm256_shuffle_ps(w[0], w[1], 0xdd)); /* 4q + r: x[2r + q] */
    return _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

INL void store_halves_256(float *a, float *b, __m256 v)
{
    _mm_storeu_ps(a, _mm256_castps256_ps128(v));
    _mm_storeu_ps(b, _mm256_extractf128_ps(v, 1));
}

#define FV __m256
#define FL 8
#define FN(x) x##_256
#define FACC2 0 /* 16 ymm registers: one accumulator per head */
#define f_zero _mm256_setzero_ps
#define f_load _mm256_load_ps
#define f_store _mm256_store_ps
#define f_set1 _mm256_set1_ps
#define f_fma _mm256_fmadd_ps
#define f_mul _mm256_mul_ps
#define f_add _mm256_add_ps
#define f_sub _mm256_sub_ps
#define f_max _mm256_max_ps
#define f_exp ws_exp8_ps
#define f_hmax ws_hmax8_ps
#define f_hadd hadd_256
#define f_keep keep_256
#define f_split split_256
#define f_reduce reduce8_256
#define f_store_halves store_halves_256
#define f_rows (&g_rows_256)
#include "attn_cpu_fma_body.h" /* consumes the definitions above */
#pragma GCC pop_options

/* ---- AVX-512 BF16: VDPBF16PS (two bf16 products summed into an fp32 lane) ---- */
/* MLA rows, both precisions: the scores broadcast a K row's bf16 pair (dims 2i, 2i + 1)
 * against the 16 heads' q pairs of those dims, so each token's scores come out as one
 * vector of heads, with no horizontal sums; V (rows) is interleaved into token pairs in
 * registers, two tokens' 32 columns by two VPERMT2W, once per 8 heads, which a broadcast
 * pair of probabilities (tokens 2u, 2u + 1) multiplies into 16 columns of O. exact = 1
 * takes q scale and p as bf16 hi + lo halves (two products each, as accurate as fp32);
 * exact = 0 (the bf16 precision) q as bf16 (the driver rounded it) and p rounded to bf16
 * (one product each; o moves by at most 2^-9 max |v|).
 * GQA in the bf16 precision: K tile rows and V pair rows, as stored, times broadcast bf16
 * pairs of q and p, the scores per head a vector of 16 tokens as in the FMA loop, with the
 * softmax's per-head scalars kept as vectors of heads. Exact GQA stays on the FMA loop
 * (hi + lo halves took 1.1-2.3x its time on the Zen 5 host: docs/notes/fma-loop.md). */
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")

/* 16 floats rounded to bf16 (nearest even), as 16-bit lanes; *lo the bf16 of what the
 * rounding left (with exact). */
INL __m256i bf16_hi_lo(__m512 x, __m256i *lo, const int exact)
{
    const __m256i h = (__m256i)_mm512_cvtneps_pbh(x);
    if (exact) {
        const __m512 hf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        *lo = (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(x, hf));
    }
    return h;
}

/* 32-bit pairs (a_i, b_i) of the bf16 of a and b (and of their remainders, with exact). */
INL void bf16_pairs(__m512 a, __m512 b, uint32_t *hi, uint32_t *lo, const int exact)
{
    __m256i al = _mm256_setzero_si256(), bl = al;
    const __m256i ah = bf16_hi_lo(a, &al, exact), bh = bf16_hi_lo(b, &bl, exact);
    _mm512_storeu_si512(hi, _mm512_or_si512(_mm512_cvtepu16_epi32(ah),
                                            _mm512_slli_epi32(_mm512_cvtepu16_epi32(bh), 16)));
    if (exact)
        _mm512_storeu_si512(lo, _mm512_or_si512(_mm512_cvtepu16_epi32(al),
                                                _mm512_slli_epi32(_mm512_cvtepu16_epi32(bl), 16)));
}

INL __m512 dp(__m512 acc, __m512i a, __m512i b)
{
    return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
}


/* MLA scores of 8 tokens (rows r[0..7]) for 16 heads, with no horizontal sums: a K row's
 * pair (dims 2i, 2i + 1) broadcast times the 16 heads' q pairs of dims 2i, 2i + 1 (qt,
 * [dk / 2][ldq] bf16 pairs; qlt the lo halves with exact) is one VDPBF16PS into the
 * token's vector of heads. Two sums per token (even and odd i): 16 independent chains.
 * out[t ldo + 0..15] = scale x the scores of token t < nt. While at it, prefetches the 8
 * rows at pf[] (NULL: none), one 64-byte line per step: a row is dk / 32 lines and there
 * are 8 x dk / 32 steps. */
INL void dp_mla_qk8(const uint16_t *const *r, int nt, const uint32_t *qt, const uint32_t *qlt,
                    int ldq, int dk, float scale, float *out, int ldo, const char *const *pf,
                    const int exact)
{
    __m512 a[8], b[8];
    const uint32_t *k[8];
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) {
        a[t] = b[t] = _mm512_setzero_ps();
        k[t] = (const uint32_t *)r[t < nt ? t : nt - 1];
    }
    const int lines = dk / 32;
    int i = 0;
    for (int pt = 0; pt < 8; pt++)
        for (int x = 0; x < lines; x++, i += 2) {
            if (pf[pt])
                _mm_prefetch(pf[pt] + 64 * x, _MM_HINT_T0);
            const __m512i q0 = _mm512_load_si512(qt + (size_t)i * ldq);
            const __m512i q1 = _mm512_load_si512(qt + (size_t)(i + 1) * ldq);
#pragma GCC unroll 8
            for (int t = 0; t < 8; t++) {
                const __m512i k0 = _mm512_set1_epi32((int)k[t][i]);
                const __m512i k1 = _mm512_set1_epi32((int)k[t][i + 1]);
                a[t] = dp(a[t], q0, k0);
                b[t] = dp(b[t], q1, k1);
                if (exact) {
                    a[t] = dp(a[t], _mm512_load_si512(qlt + (size_t)i * ldq), k0);
                    b[t] = dp(b[t], _mm512_load_si512(qlt + (size_t)(i + 1) * ldq), k1);
                }
            }
        }
    const __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++)
        if (t < nt)
            _mm512_store_ps(out + (size_t)t * ldo, _mm512_mul_ps(_mm512_add_ps(a[t], b[t]), sc));
}

/* O[h] = alpha[h] O[h] + sum_t p[t][h] v_t for n tokens at rows[t], heads h < Gp; pb, pl:
 * the probabilities of tokens 2u, 2u + 1 as bf16 pairs [u][Gp] (hi, lo). O in column
 * order. */
INL void dp_mla_pv(float *o, int dv, const uint16_t *const *rows, int n, const uint32_t *pb,
                   const uint32_t *pl, int Gp, const float *alpha, const int exact)
{
    const __m512i il = _mm512_load_si512(g_il), ih = _mm512_load_si512(g_ih);
    for (int hg = 0; hg < Gp; hg += 8)
        for (int c = 0; c < dv; c += 32) {
            __m512 ae[8], ao[8];
#pragma GCC unroll 8
            for (int hh = 0; hh < 8; hh++) {
                const __m512 al = _mm512_set1_ps(alpha[hg + hh]);
                ae[hh] = _mm512_mul_ps(_mm512_load_ps(o + (size_t)(hg + hh) * dv + c), al);
                ao[hh] = _mm512_mul_ps(_mm512_load_ps(o + (size_t)(hg + hh) * dv + c + 16), al);
            }
            for (int t = 0; t < n; t += 2) {
                const __m512i va = _mm512_loadu_si512(rows[t] + c);
                /* an odd tail pairs the last token with itself, at probability 0 */
                const __m512i vb = t + 1 < n ? _mm512_loadu_si512(rows[t + 1] + c) : va;
                const __m512i lo = _mm512_permutex2var_epi16(va, il, vb);
                const __m512i hi = _mm512_permutex2var_epi16(va, ih, vb);
                const uint32_t *pt = pb + (size_t)(t / 2) * Gp + hg;
                const uint32_t *lt = pl + (size_t)(t / 2) * Gp + hg;
#pragma GCC unroll 8
                for (int hh = 0; hh < 8; hh++) {
                    const __m512i x = _mm512_set1_epi32((int)pt[hh]);
                    ae[hh] = dp(ae[hh], lo, x);
                    ao[hh] = dp(ao[hh], hi, x);
                    if (exact) {
                        const __m512i y = _mm512_set1_epi32((int)lt[hh]);
                        ae[hh] = dp(ae[hh], lo, y);
                        ao[hh] = dp(ao[hh], hi, y);
                    }
                }
            }
#pragma GCC unroll 8
            for (int hh = 0; hh < 8; hh++) {
                _mm512_store_ps(o + (size_t)(hg + hh) * dv + c, ae[hh]);
                _mm512_store_ps(o + (size_t)(hg + hh) * dv + c + 16, ao[hh]);
            }
        }
}

INL void dp_mla_attend(const ws_attn_problem *p, int s, int kvh, int qhead, int i0, int i1, int G,
                       float *out, float *lse, char *w, const int exact)
{
    const ws_kv_layout *kv = &p->kv;
    const ws_attn_seq *sq = &p->seqs[s];
    const int dk = kv->d_k, dv = kv->d_v;
    const mla_scratch sp = mla_plan(kv, G);
    const int Gp = sp.Gp;
    /* q pairs [dk / 2][Gp]: exact, q scale as bf16 hi (qt) and lo (qlt); bf16, q as bf16
     * (the scale then multiplies the scores) */
    uint32_t *qt = (uint32_t *)(w + sp.qs), *qlt = qt + (size_t)Gp * dk / 2;
    float *o = (float *)(w + sp.o), *sc = (float *)(w + sp.s);
    uint32_t *pb = (uint32_t *)(w + sp.pp), *pl = pb + (size_t)MLA_NT / 2 * Gp;
    float *m = (float *)(w + sp.m), *l = (float *)(w + sp.l), *alpha = (float *)(w + sp.alpha);
    const uint16_t **rows = (const uint16_t **)(w + sp.rows);
    const float *q = p->q + ((size_t)s * p->n_q_heads + (size_t)qhead) * dk;
    for (int h = 0; h < Gp; h++)
        for (int d = 0; d < dk; d += 2) {
            uint32_t hi = 0, lo = 0;
            for (int e = 0; e < 2 && h < G; e++) {
                const float x = q[(size_t)h * dk + d + e] * (exact ? p->scale : 1.0f);
                const uint16_t xh = ws_f32_to_bf16(x);
                hi |= (uint32_t)xh << 16 * e;
                lo |= (uint32_t)ws_f32_to_bf16(x - ws_bf16_to_f32(xh)) << 16 * e;
            }
            qt[(size_t)d / 2 * Gp + h] = hi;
            if (exact)
                qlt[(size_t)d / 2 * Gp + h] = lo;
        }
    const float qscale = exact ? 1.0f : p->scale;
    memset(o, 0, sizeof(float) * (size_t)Gp * dv);
    for (int h = 0; h < Gp; h++)
        m[h] = -INFINITY, l[h] = 0;
    for (int i = i0; i < i1; i += MLA_NT) {
        const int n = i1 - i < MLA_NT ? i1 - i : MLA_NT;
        mla_rows(sq, kv, kvh, i, n, rows);
        /* head groups outside, so that one group's q (dk x 32 bytes) stays in L1 while the
         * super-block's rows pass; the rows AHEAD super-blocks on are prefetched to L1 during
         * the first group */
        for (int hg = 0; hg < Gp / 16; hg++)
            for (int t = 0; t < n; t += 8) {
                const char *pf[8];
                for (int x = 0; x < 8; x++) {
                    const int it = i + AHEAD * MLA_NT + t + x;
                    const uint16_t *r = NULL;
                    if (hg == 0 && it < i1)
                        mla_rows(sq, kv, kvh, it, 1, &r);
                    pf[x] = (const char *)r;
                }
                dp_mla_qk8(rows + t, n - t < 8 ? n - t : 8, qt + hg * 16, qlt + hg * 16, Gp, dk,
                           qscale, sc + (size_t)t * Gp + hg * 16, Gp, pf, exact);
            }
        mla_softmax_512(sc, n, Gp, m, l, alpha);
        for (int t = 0; t < n; t += 2) /* tokens 2u, 2u + 1 (zero past n) as bf16 pairs */
            for (int c = 0; c < Gp; c += 16) {
                const __m512 a = _mm512_load_ps(sc + (size_t)t * Gp + c);
                const __m512 b =
                    t + 1 < n ? _mm512_load_ps(sc + (size_t)(t + 1) * Gp + c) : _mm512_setzero_ps();
                bf16_pairs(a, b, pb + (size_t)(t / 2) * Gp + c, pl + (size_t)(t / 2) * Gp + c,
                           exact);
            }
        dp_mla_pv(o, dv, rows, n, pb, pl, Gp, alpha, exact);
    }
    finish(out, lse, o, m, l, G, dv, 0);
}

static __attribute__((noinline)) void dp_mla_0(const ws_attn_problem *p, int s, int kvh, int qhead,
                                               int i0, int i1, int G, float *o, float *lse, char *w)
{
    dp_mla_attend(p, s, kvh, qhead, i0, i1, G, o, lse, w, 0);
}

static __attribute__((noinline)) void dp_mla_1(const ws_attn_problem *p, int s, int kvh, int qhead,
                                               int i0, int i1, int G, float *o, float *lse, char *w)
{
    dp_mla_attend(p, s, kvh, qhead, i0, i1, G, o, lse, w, 1);
}

/* ---- GQA in the bf16 mode: q and p as bf16, one VDPBF16PS per pair of products ---- */
/* Scores of one sub-block for heads h < H: s[h * DNS * SUB + 0..15] = scale q_h . k_t. A K
 * tile row (16 tokens' dims 2r, 2r + 1 as bf16 pairs) times head h's pair (q[2r], q[2r + 1])
 * broadcast from qp [dk / 2][H] is one VDPBF16PS; U rows in flight per head keep 8 x U
 * independent sums. Prefetches f's K lines as FN(scores) does. */
INL void dpg_scores(const sub_kv *b, const uint32_t *qp, int dk, float scale, float *s,
                    const pf_sub *f, const int H)
{
    const int rows = dk / 2, HH = H < 8 ? H : 8, U = HH >= 8 ? 2 : HH >= 4 ? 4 : 8;
    const int kl = f->klines < rows ? f->klines : rows;
    for (int h0 = 0; h0 < H; h0 += HH) {
        __m512 a[8][8];
#pragma GCC unroll 8
        for (int h = 0; h < HH; h++)
#pragma GCC unroll 8
            for (int u = 0; u < U; u++)
                a[h][u] = _mm512_setzero_ps();
        for (int r = 0; r < rows; r += U) {
#pragma GCC unroll 8
            for (int u = 0; u < U; u++) {
                const __m512i k = _mm512_loadu_si512(b->k + (size_t)(r + u) * 32);
                const uint32_t *qr = qp + (size_t)(r + u) * H + h0;
#pragma GCC unroll 8
                for (int h = 0; h < HH; h++)
                    a[h][u] = dp(a[h][u], k, _mm512_set1_epi32((int)qr[h]));
                if (!h0 && r + u < kl)
                    _mm_prefetch(f->k + 64 * (size_t)(r + u), _MM_HINT_T0);
            }
        }
        const __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 8
        for (int h = 0; h < HH; h++) {
            __m512 t = a[h][0];
#pragma GCC unroll 8
            for (int u = 1; u < U; u++)
                t = _mm512_add_ps(t, a[h][u]);
            _mm512_store_ps(s + (size_t)(h0 + h) * DNS * SUB, _mm512_mul_ps(t, sc));
        }
    }
    for (int x = kl; x < f->klines; x++) /* two tiles (a run not starting a tile) */
        _mm_prefetch(f->k + 64 * (size_t)x, _MM_HINT_T0);
}

/* O[h][c0 .. c0 + 16 CW) = alpha[h] O[h][..] (alpha NULL: 1) + sum over the sub-block's
 * tokens of p[h][t] v_t[..], heads h < H: a V pair row's 16 columns of tokens 2u, 2u + 1
 * times the bf16 pair (p[2u], p[2u + 1]) broadcast from pj (head h's at h DNS SUB / 2 + u)
 * is one VDPBF16PS. Prefetches this column step's share of f's V lines unless f is NULL. */
INL void dpg_pv_cols(float *o, int dv, int c0, const sub_kv *b, const uint32_t *pj,
                     const float *alpha, const pf_sub *f, const int H, const int CW)
{
    __m512 acc[8][4];
#pragma GCC unroll 8
    for (int h = 0; h < H; h++)
#pragma GCC unroll 4
        for (int w = 0; w < CW; w++) {
            acc[h][w] = _mm512_load_ps(o + (size_t)h * dv + c0 + 16 * w);
            if (alpha)
                acc[h][w] = _mm512_mul_ps(acc[h][w], _mm512_set1_ps(alpha[h]));
        }
    const uint16_t *v = b->v + 2 * (size_t)c0;
    const int vl = f ? f->vlines : 0;
    const int l0 = vl * c0 / dv, l1 = vl * (c0 + 16 * CW) / dv;
    const int per = (l1 - l0 + 7) / 8;
    for (int u = 0; u < SUB / 2; u++) {
        for (int x = l0 + u * per; x < l0 + (u + 1) * per && x < l1; x++)
            _mm_prefetch(f->v + 64 * (size_t)x, _MM_HINT_T0);
        __m512i vv[4];
#pragma GCC unroll 4
        for (int w = 0; w < CW; w++)
            vv[w] = _mm512_loadu_si512(v + (size_t)u * 2 * dv + 32 * w);
#pragma GCC unroll 8
        for (int h = 0; h < H; h++) {
            const __m512i x = _mm512_set1_epi32((int)pj[(size_t)h * DNS * SUB / 2 + u]);
#pragma GCC unroll 4
            for (int w = 0; w < CW; w++)
                acc[h][w] = dp(acc[h][w], vv[w], x);
        }
    }
#pragma GCC unroll 8
    for (int h = 0; h < H; h++)
#pragma GCC unroll 4
        for (int w = 0; w < CW; w++)
            _mm512_store_ps(o + (size_t)h * dv + c0 + 16 * w, acc[h][w]);
}

/* The online softmax over a super-block of ns sub-blocks for heads h < H (<= 16), with
 * the per-head scalars as vectors of heads: the block maxima, then new max m, rescale
 * alpha = exp(m_old - m) (one vector exp for all heads, no scalar expf) and the running
 * sums l kept as 16-lane partial sums lv[h] (summed once, at the end). Probabilities (zero
 * for absent tokens) go to pp as bf16 pairs, head h's at h DNS SUB / 2. m and alpha have
 * 16 entries, those past H zero. */
INL void dpg_softmax(const float *sp, const sub_kv *b, int ns, float *m, float *lv, float *alpha,
                     uint32_t *pp, const int H)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY), zero = _mm512_setzero_ps();
    float bm[16] __attribute__((aligned(64)));
    _mm512_store_ps(bm, zero);
    for (int h = 0; h < H; h++) {
        const float *sh = sp + (size_t)h * DNS * SUB;
        __m512 mx = ninf;
        for (int j = 0; j < ns; j++)
            mx = _mm512_max_ps(mx, keep_512(_mm512_load_ps(sh + j * SUB), b[j].n, ninf));
        bm[h] = _mm512_reduce_max_ps(mx);
    }
    /* before the first super-block m is -inf: alpha = exp(-87) ~ 1e-38 times l = 0, O = 0 */
    const __m512 mo = _mm512_load_ps(m), mn = _mm512_max_ps(mo, _mm512_load_ps(bm));
    _mm512_store_ps(alpha, ws_exp16_ps(_mm512_sub_ps(mo, mn)));
    _mm512_store_ps(m, mn);
    for (int h = 0; h < H; h++) {
        const float *sh = sp + (size_t)h * DNS * SUB;
        const __m512 vm = _mm512_set1_ps(m[h]);
        __m512 sum = zero;
        for (int j = 0; j < ns; j++) {
            const __m512 e = keep_512(
                ws_exp16_ps(_mm512_sub_ps(_mm512_load_ps(sh + j * SUB), vm)), b[j].n, zero);
            _mm256_storeu_si256((__m256i *)(pp + (size_t)h * DNS * SUB / 2 + j * SUB / 2),
                                (__m256i)_mm512_cvtneps_pbh(e));
            sum = _mm512_add_ps(sum, e);
        }
        float *lh = lv + (size_t)h * 16;
        _mm512_store_ps(lh, _mm512_fmadd_ps(_mm512_set1_ps(alpha[h]), _mm512_load_ps(lh), sum));
    }
}

/* The items and KV heads a task of the GQA VDPBF16PS loop walks: items [i0, i1) of KV
 * heads kvh0 .. kvh0 + nk - 1, in segments: with nk > 1 page by page, each page's heads in
 * turn, so that a thread reads a page's K blocks one after another, and its V blocks
 * (scattered 64 KB runs, one head's, read 0.88-0.92 of the rate of the whole 256 KB in an
 * access-only probe, docs/notes/fma-loop.md); with nk = 1 the whole range. */
typedef struct dpg_walk {
    int i0, i1, kvh0, nk, P;
} dpg_walk;

static int seg_end(const dpg_walk *w, int a)
{
    if (w->nk == 1)
        return w->i1;
    const int e = (a / w->P + 1) * w->P;
    return e < w->i1 ? e : w->i1;
}

/* Where item `it` of head kvh's segment [a, e) falls in walk order (past e: in a later
 * segment): *kvh_at, *end_at (its segment's end) and the item, or -1 past the walk. */
static int walk_at(const dpg_walk *w, int kvh, int a, int e, int it, int *kvh_at, int *end_at)
{
    while (it >= e) {
        int nk = kvh + 1, na = a;
        if (nk >= w->kvh0 + w->nk)
            nk = w->kvh0, na = e;
        if (na >= w->i1)
            return -1;
        it = na + (it - e), kvh = nk, a = na, e = seg_end(w, na);
    }
    *kvh_at = kvh, *end_at = e;
    return it;
}

/* One KV head's state, kept in the scratch across the walk's segments. */
typedef struct dpg_head {
    uint32_t *qp;               /* q as bf16 pairs, [dk / 2][H], unscaled */
    float *o, *m, *alpha, *lv;  /* O [H][dv]; m, alpha [16]; running sums [H][16] */
} dpg_head;

/* Scratch of the loop for nk KV heads: the FMA loop's (scores, p pairs, gathers) and
 * nk dpg_heads' arrays after it. */
static size_t dpg_head_bytes(const ws_kv_layout *kv)
{
    return a64((size_t)kv->d_k / 2 * HM * 4) + a64((size_t)HM * kv->d_v * 4) + 2 * 64 +
           (size_t)HM * 16 * 4;
}

static dpg_head dpg_head_at(const ws_kv_layout *kv, char *w, int k)
{
    char *at = w + scratch_plan(kv).total + (size_t)k * dpg_head_bytes(kv);
    dpg_head h;
    h.qp = (uint32_t *)at, at += a64((size_t)kv->d_k / 2 * HM * 4);
    h.o = (float *)at, at += a64((size_t)HM * kv->d_v * 4);
    h.m = (float *)at, at += 64;
    h.alpha = (float *)at, at += 64;
    h.lv = (float *)at;
    return h;
}

/* Attends segment [a, e) of KV head kvh into its state st, prefetching along the walk. */
INL void dpg_run(const ws_attn_problem *p, int s, int kvh, int a, int e, const dpg_walk *wk,
                 const dpg_head *st, char *w, const int H)
{
    const ws_kv_layout *kv = &p->kv;
    const ws_attn_seq *sq = &p->seqs[s];
    const int dk = kv->d_k, dv = kv->d_v;
    const fma_scratch sp = scratch_plan(kv);
    uint32_t *pp = (uint32_t *)(w + sp.pp);
    float *sc = (float *)(w + sp.sp);
    uint16_t *kg = (uint16_t *)(w + sp.kg), *vg = (uint16_t *)(w + sp.vg);
    /* 16 accumulators for 8 heads (two column vectors), 16 for 4 heads or fewer (four) */
    const int HH = H < 8 ? H : 8, CW = HH <= 4 ? 4 : 2;
    sub_kv b[DNS];
    pf_sub f[DNS];
    const int P = kv->page_tokens;
    for (int i = a; i < e; i += DNS * SUB) {
        const int ns = super_subs(i, e, DNS);
        /* A super-block of whole sub-blocks in one page, and likewise the one its
         * prefetches go to: the sub-blocks' tiles and pair rows follow each other. */
        const int page = kv->k_tiles && kv->v_pairs && !sq->sel && i % SUB == 0 &&
                         i % P + ns * SUB <= P && i + ns * SUB <= e;
        int pk0 = kvh, pe0 = e;
        const int at0 = page ? walk_at(wk, kvh, a, e, i + DAHEAD * DNS * SUB, &pk0, &pe0) : -1;
        const int pf_page =
            at0 >= 0 && at0 % SUB == 0 && at0 % P + ns * SUB <= P && at0 + ns * SUB <= pe0;
        for (int j = 0; j < ns; j++) {
            const int it = i + j * SUB;
            if (page) {
                const uint16_t *pg = sq->pages[it / P];
                b[j] = (sub_kv){pg + ws_kv_k_off(kv, kvh, it % P),
                                pg + ws_kv_v_pair_off(kv, kvh, it % P), SUB};
            } else {
                resolve(sq, kv, kvh, it, e - it < SUB ? e - it : SUB, kg + (size_t)j * SUB * dk,
                        vg + (size_t)j * SUB * dv, &b[j], &g_rows_512);
            }
            if (pf_page) {
                const int t = at0 + j * SUB;
                pf_run(kv, pk0, (const char *)sq->pages[t / P], t % P, SUB, &f[j]);
            } else {
                int pk, pe;
                const int at = walk_at(wk, kvh, a, e, it + DAHEAD * DNS * SUB, &pk, &pe);
                pf_plan(sq, kv, pk, at < 0 ? pe : at, pe, &f[j]); /* at < 0: nothing */
            }
            dpg_scores(&b[j], st->qp, dk, p->scale, sc + j * SUB, &f[j], H);
        }
        dpg_softmax(sc, b, ns, st->m, st->lv, st->alpha, pp, H);
        /* a sub-block's V pair rows at a time, all column steps (4 KB for Qwen3's shape, in
         * L1 while its steps pass): 0.95-0.96 of the time of each step over the whole
         * super-block's (docs/notes/fma-loop.md) */
        for (int j = 0; j < ns; j++)
            for (int h0 = 0; h0 < H; h0 += HH) {
                const pf_sub *fp = h0 ? NULL : f + j;
                float *oh = st->o + (size_t)h0 * dv;
                const uint32_t *ph = pp + (size_t)h0 * DNS * SUB / 2 + j * SUB / 2;
                const float *al = j ? NULL : st->alpha + h0; /* rescaled once */
                int c0 = 0;
                for (; c0 + 16 * CW <= dv; c0 += 16 * CW)
                    dpg_pv_cols(oh, dv, c0, b + j, ph, al, fp, HH, CW);
                for (; c0 < dv; c0 += 16) /* d_v is a multiple of 16 */
                    dpg_pv_cols(oh, dv, c0, b + j, ph, al, fp, HH, 1);
            }
    }
}

/* Items [i0, i1) of sequence s for KV heads kvh0 .. kvh0 + nk - 1: G query heads each
 * from query head qhead on for the first (nk > 1: whole groups of gs = G heads, the next
 * head's from qhead + G), out [nk][G][dv], lse [nk][G]. */
INL void dpg_attend(const ws_attn_problem *p, int s, int kvh0, int nk, int qhead, int i0, int i1,
                    int G, float *out, float *lse, char *w, const int H)
{
    const ws_kv_layout *kv = &p->kv;
    const int dk = kv->d_k, dv = kv->d_v;
    _Static_assert(HM <= 16, "one vector of heads");
    for (int k = 0; k < nk; k++) {
        const dpg_head st = dpg_head_at(kv, w, k);
        const float *q = p->q + ((size_t)s * p->n_q_heads + (size_t)qhead + (size_t)k * G) * dk;
        for (int h = 0; h < H; h++) /* [dk / 2 rows][H heads] bf16 pairs, unscaled */
            for (int r = 0; r < dk / 2; r++)
                st.qp[(size_t)r * H + h] =
                    h < G ? (uint32_t)ws_f32_to_bf16(q[(size_t)h * dk + 2 * r]) |
                                (uint32_t)ws_f32_to_bf16(q[(size_t)h * dk + 2 * r + 1]) << 16
                          : 0;
        memset(st.o, 0, sizeof(float) * (size_t)H * dv);
        for (int h = 0; h < 16; h++)
            st.m[h] = h < H ? -INFINITY : 0.0f;
        memset(st.lv, 0, sizeof(float) * 16 * (size_t)H);
    }
    const dpg_walk wk = {i0, i1, kvh0, nk, kv->page_tokens};
    for (int a = i0, e; a < i1; a = e) {
        e = seg_end(&wk, a);
        for (int k = 0; k < nk; k++) {
            const dpg_head st = dpg_head_at(kv, w, k);
            dpg_run(p, s, kvh0 + k, a, e, &wk, &st, w, H);
        }
    }
    for (int k = 0; k < nk; k++) {
        const dpg_head st = dpg_head_at(kv, w, k);
        float l[HM];
        for (int h = 0; h < H; h++)
            l[h] = _mm512_reduce_add_ps(_mm512_load_ps(st.lv + (size_t)h * 16));
        finish(out + (size_t)k * G * dv, lse + (size_t)k * G, st.o, st.m, l, G, dv, 0);
    }
}

typedef void dpg_fn(const ws_attn_problem *, int, int, int, int, int, int, int, float *, float *,
                    char *);
#define DPG(H)                                                                                     \
    static __attribute__((noinline)) void dpg_##H(const ws_attn_problem *p, int s, int kvh0,     \
                                                  int nk, int qhead, int i0, int i1, int G,        \
                                                  float *o, float *lse, char *w)                   \
    {                                                                                              \
        dpg_attend(p, s, kvh0, nk, qhead, i0, i1, G, o, lse, w, H);                                \
    }
DPG(1)
DPG(2)
DPG(4)
DPG(8)
DPG(16)
#undef DPG
static dpg_fn *const g_dpg_fns[5] = {dpg_1, dpg_2, dpg_4, dpg_8, dpg_16};

/* Seconds of `iters` x 12 independent VDPBF16PS (dp = 1) or VFMADD231PS (zmm). */
static __attribute__((noinline)) double probe_zmm(int iters, int use_dp)
{
    __m512 acc[12];
    __m512i x = _mm512_set1_epi16(0x3f7f), y = _mm512_set1_epi16(0x3380);
    for (int k = 0; k < 12; k++)
        acc[k] = _mm512_set1_ps((float)k);
    const double t0 = ws_now_s();
    for (int i = 0; i < iters; i++) {
#pragma GCC unroll 12
        for (int k = 0; k < 12; k++)
            acc[k] = use_dp ? dp(acc[k], x, y)
                            : _mm512_fmadd_ps(acc[k], _mm512_castsi512_ps(x),
                                              _mm512_castsi512_ps(y));
        __asm__ volatile("" : "+v"(x));
    }
    const double t = ws_now_s() - t0;
    __m512 sum = acc[0];
    for (int k = 1; k < 12; k++)
        sum = _mm512_add_ps(sum, acc[k]);
    volatile float sink = _mm512_reduce_add_ps(sum);
    (void)sink;
    return t;
}
#pragma GCC pop_options

int ws_attn_cpu_dp_fits(const ws_kv_layout *kv, int G, int exact)
{
    return kv->dtype == WS_DT_BF16 && (fits_mla(kv, G) || (!exact && fits_gqa(kv, G)));
}

size_t ws_attn_cpu_dp_scratch(const ws_kv_layout *kv, int G, int n_kvh)
{
    return kv->v_shares_k ? mla_plan(kv, G).total
                          : scratch_plan(kv).total + (size_t)n_kvh * dpg_head_bytes(kv);
}

void ws_attn_cpu_dp_attend(const ws_attn_problem *p, int exact, int s, int kvh, int n_kvh,
                           int qhead, int i0, int i1, int G, float *o, float *lse, void *scratch)
{
    if (!p->kv.v_shares_k) {
        const int hi = G <= 1 ? 0 : G <= 2 ? 1 : G <= 4 ? 2 : G <= 8 ? 3 : 4; /* 1 .. 16 */
        g_dpg_fns[hi](p, s, kvh, n_kvh, qhead, i0, i1, G, o, lse, scratch);
        return;
    }
    (exact ? dp_mla_1 : dp_mla_0)(p, s, kvh, qhead, i0, i1, G, o, lse, scratch);
}

double ws_attn_cpu_dp_gain(void)
{
    static double gain = -1; /* concurrent first calls each measure; either result serves */
    double g;
    __atomic_load(&gain, &g, __ATOMIC_RELAXED);
    if (g >= 0)
        return g;
    double best[2] = {1e30, 1e30};
    for (int r = 0; r < 5; r++) /* best of 5: a preempted try only loses */
        for (int k = 0; k < 2; k++) {
            const double t = probe_zmm(20000, k);
            best[k] = t < best[k] ? t : best[k];
        }
    /* products per second: 32 per VDPBF16PS, 16 per FMA */
    g = best[1] > 0 ? (32.0 / best[1]) / (16.0 / best[0]) : 0;
    __atomic_store(&gain, &g, __ATOMIC_RELAXED);
    return g;
}

void ws_attn_cpu_fma_attend(const ws_attn_problem *p, int wide, int s, int kvh, int qhead, int i0,
                            int i1, int G, float *o, float *lse, void *scratch)
{
    const int f16 = p->kv.dtype == WS_DT_FP16;
    if (p->kv.v_shares_k) {
        (wide ? mla_fns_512 : mla_fns_256)[f16](p, s, kvh, qhead, i0, i1, G, o, lse, scratch);
        return;
    }
    const int hi = G <= 1 ? 0 : G <= 2 ? 1 : G <= 4 ? 2 : G <= 8 ? 3 : 4; /* 1, 2, 4, 8, 16 */
    (wide ? attend_fns_512 : attend_fns_256)[hi][f16](p, s, kvh, qhead, i0, i1, G, o, lse, scratch);
}
