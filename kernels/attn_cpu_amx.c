/* attn_cpu_amx: the AMX-BF16 block loop of the CPU attention kernel (path "amx", see
 * attn_cpu.h), for bf16 KV. Internal to kernels/: attn_cpu.c calls it per task when the
 * path is amx and the shape fits (ws_attn_cpu_amx_fits); other shapes and fp16 KV run the
 * AVX-512 block loop.
 *
 * Per block of 16 tokens and group of up to 16 query heads:
 *   scores^T [16 tok x G] = K [16 tok x 32] . Q^T (VNNI pairs), 32 dims per TDPBF16PS; K
 *            rows are loaded as an A tile straight from the page (rows of one page are a
 *            fixed stride apart) or from a 16-row gather buffer (sparse lists, page edges);
 *   softmax  on the transposed scores (AVX-512), probabilities split into bf16 hi + lo;
 *   O [G x 16 cols] += P [G x 16 tok] . V (token pairs interleaved, VNNI): each 16-column
 *            slab of the fp32 accumulator is loaded as a C tile, takes the product and is
 *            stored back; rows whose running max moved are rescaled first (AVX-512).
 * The next block's K and V lines are prefetched a few per loop step: a burst of 100+
 * prefetches stalls on the line-fill buffers, spread out they overlap the tile work (this
 * doubled the streaming rate on the development host).
 * q and p enter TMUL as bf16 hi + lo halves (two TDPBF16PS each), so scores and weights
 * keep ~16 mantissa bits: the same accuracy as the fp32 FMA paths, at a fraction of the
 * instruction count (one TDPBF16PS is 16x16x32 multiply-adds). */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "attn_cpu_amx.h"
#include "attn_cpu_isa.h"
#include "half.h"

#define ARCH_REQ_XCOMP_PERM 0x1023 /* Linux: ask for permission to use a dynamic xstate */
#define XFEATURE_XTILEDATA 18      /* the AMX tile data state */

static int g_amx_ok;
static pthread_once_t g_amx_once = PTHREAD_ONCE_INIT;

static void amx_enable(void)
{
    g_amx_ok = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

int ws_attn_cpu_amx_enable(void)
{
    pthread_once(&g_amx_once, amx_enable);
    return g_amx_ok;
}

int ws_attn_cpu_amx_fits(const ws_kv_layout *kv, int G)
{
    return kv->dtype == WS_DT_BF16 && kv->d_k % 32 == 0 && kv->d_v % 32 == 0 &&
           (G <= 16 || G % 16 == 0);
}

size_t ws_attn_cpu_amx_scratch(const ws_kv_layout *kv, int G)
{
    const size_t dk = (size_t)kv->d_k, dv = (size_t)kv->d_v;
    return 2 * dk * (size_t)G * 2 /* q hi, lo in VNNI */ + 16 * dk * 2 /* K gather */ +
           dv * 32 /* V VNNI */ + 16 * 16 * 4 /* scores^T */ + 2 * 16 * 32 /* p hi, lo */ +
3 * (size_t)G * 4 /* m, l, alpha */ + 64 * 8;
}

typedef struct tilecfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,amx-tile,amx-bf16")

#define INL static inline __attribute__((always_inline))
#include "attn_cpu_exp512.h" /* compiled for this region's target */

/* Tiles: 0 scores^T, 1 K, 2 q (hi, then lo), 4 p hi, 5 p lo, 6 V, 7 and 3 slabs of O. */
static void config(int g16)
{
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    c.rows[0] = 16, c.colsb[0] = (uint16_t)(g16 * 4);
    c.rows[1] = 16, c.colsb[1] = 64;
    c.rows[2] = 16, c.colsb[2] = (uint16_t)(g16 * 4);
    c.rows[3] = (uint8_t)g16, c.colsb[3] = 64;
    c.rows[4] = c.rows[5] = (uint8_t)g16, c.colsb[4] = c.colsb[5] = 32;
    c.rows[6] = 8, c.colsb[6] = 64;
    c.rows[7] = (uint8_t)g16, c.colsb[7] = 64;
    _tile_loadconfig(&c);
}

/* Software prefetch of the next block, spread over the current block's work: a burst of
 * 100+ prefetches stalls on the line-fill buffers as long as demand misses would, while a few
 * per loop iteration keep the memory busy during the tile work. Region a, then region b. */
#ifndef PF_BLOCKS
#define PF_BLOCKS 1 /* prefetch distance in 16-token blocks */
#endif
typedef struct pf_cursor {
    const char *a, *b;
    size_t na, nb, off; /* bytes in a and b, bytes issued */
    size_t quota;       /* bytes per step */
} pf_cursor;

INL void pf_step(pf_cursor *c)
{
    size_t end = c->off + c->quota, total = c->na + c->nb;
    if (end > total)
        end = total;
    for (; c->off < end; c->off += 64)
        _mm_prefetch(c->off < c->na ? c->a + c->off : c->b + (c->off - c->na), _MM_HINT_T0);
}

/* 16x16 transpose: in rows 16 floats apart -> out[c] = column c. */
INL void transpose16(const float *in, __m512 out[16])
{
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {
        __m512 a = _mm512_loadu_ps(in + 32 * i), b = _mm512_loadu_ps(in + 32 * i + 16);
        t[2 * i] = _mm512_unpacklo_ps(a, b);
        t[2 * i + 1] = _mm512_unpackhi_ps(a, b);
    }
    for (int i = 0; i < 4; i++) {
        __m512d t0 = _mm512_castps_pd(t[4 * i]), t1 = _mm512_castps_pd(t[4 * i + 1]),
                t2 = _mm512_castps_pd(t[4 * i + 2]), t3 = _mm512_castps_pd(t[4 * i + 3]);
        u[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
        u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
        u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
        u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    }
    for (int j = 0; j < 4; j++) {
        __m512 v0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);
        __m512 v1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xdd);
        __m512 w0 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
        __m512 w1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xdd);
        out[0 + j] = _mm512_shuffle_f32x4(v0, w0, 0x88);
        out[8 + j] = _mm512_shuffle_f32x4(v0, w0, 0xdd);
        out[4 + j] = _mm512_shuffle_f32x4(v1, w1, 0x88);
        out[12 + j] = _mm512_shuffle_f32x4(v1, w1, 0xdd);
    }
}

INL __m512 bf16_to_ps(__m256i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* bf16 rounding of f (round to nearest even; inputs are finite). */
INL __m256i ps_to_bf16(__m512 f)
{
    return (__m256i)_mm512_cvtneps_pbh(f);
}

void ws_attn_cpu_amx_attend(const ws_attn_problem *p, int s, int kvh, int i0, int i1, int G,
                            float *o, float *lse, void *scratch)
{
    const ws_kv_layout *kv = &p->kv;
    const ws_attn_seq *sq = &p->seqs[s];
    const int dk = kv->d_k, dv = kv->d_v, P = kv->page_tokens, g16 = G < 16 ? G : 16;
    const int n_hg = (G + 15) / 16, ksteps = dk / 32;
    char *w = scratch;
    uint16_t *qv = (uint16_t *)w; /* [hg][hi/lo][ksteps][16 rows][g16][2] */
    w += 2 * (size_t)dk * G * 2;
    uint16_t *kbuf = (uint16_t *)w;
    w += 16 * (size_t)dk * 2;
    uint16_t *vv = (uint16_t *)w; /* [dv/16][8 rows][16 cols][2] */
    w += (size_t)dv * 32;
    float *st = (float *)w; /* scores^T, 16 x 16 */
    w += 16 * 16 * 4;
    uint16_t *ph = (uint16_t *)w, *pl = ph + 16 * 16; /* [g16][16 tokens] */
    w += 2 * 16 * 32;
    float *m = (float *)w, *l = m + G, *alpha = l + G;
    const float scale = p->scale;

    /* q as VNNI pairs, split into bf16 hi + lo. */
    const float *q = p->q + ((size_t)s * p->n_q_heads + (size_t)kvh * G) * dk;
    const size_t hl_stride = (size_t)ksteps * 16 * g16 * 2; /* elements per hi or lo block */
    for (int hg = 0; hg < n_hg; hg++)
        for (int j = 0; j < ksteps; j++)
            for (int r = 0; r < 16; r++)
                for (int g = 0; g < g16; g++)
                    for (int e = 0; e < 2; e++) {
                        float x = q[(size_t)(hg * 16 + g) * dk + 32 * j + 2 * r + e];
                        uint16_t hi = ws_f32_to_bf16(x), lo = ws_f32_to_bf16(x - ws_bf16_to_f32(hi));
                        size_t at = (((size_t)j * 16 + r) * g16 + g) * 2 + e;
                        qv[(size_t)hg * 2 * hl_stride + at] = hi;
                        qv[(size_t)hg * 2 * hl_stride + hl_stride + at] = lo;
                    }
    memset(st, 0, 16 * 16 * 4);
    for (int g = 0; g < G; g++) {
        m[g] = -INFINITY;
        l[g] = 0;
    }
    memset(o, 0, sizeof(float) * (size_t)G * dv);
    config(g16);

    const __m512i idx0 = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
    const __m512i idx1 = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
    const uint16_t *krow[16], *vrow[16];
    static const uint16_t zero_row[WS_ATTN_MAX_HEAD_DIM];
    const int pf_steps = 8 + n_hg * (ksteps + g16 + dv / 32); /* loop steps per block */
    for (int i = i0; i < i1; i += 16) {
        const int n = i1 - i < 16 ? i1 - i : 16;
        /* Row addresses. A block that is one page's run of tokens (dense, or a list that
         * picked whole pages) has consecutive rows: no division per token. */
        const int tf = sq->sel ? sq->sel[i] : i;
        int in_page = (tf % P) + n <= P;
        if (sq->sel)
            for (int j = 1; j < n && in_page; j++)
                in_page = sq->sel[i + j] == tf + j;
        if (in_page) {
            const uint16_t *pg = sq->pages[tf / P];
            const uint16_t *k0 = pg + ws_kv_k_off(kv, kvh, tf % P), *v0 = pg + ws_kv_v_off(kv, kvh, tf % P);
            const size_t vstride = kv->v_shares_k ? (size_t)dk : (size_t)dv;
            for (int j = 0; j < 16; j++) {
                krow[j] = j < n ? k0 + (size_t)j * dk : zero_row;
                vrow[j] = j < n ? v0 + (size_t)j * vstride : zero_row;
            }
        } else {
            for (int j = 0; j < 16; j++) {
                if (j < n) {
                    const int t = sq->sel ? sq->sel[i + j] : i + j;
                    const uint16_t *pg = sq->pages[t / P];
                    krow[j] = pg + ws_kv_k_off(kv, kvh, t % P);
                    vrow[j] = pg + ws_kv_v_off(kv, kvh, t % P);
                } else {
                    krow[j] = vrow[j] = zero_row;
                }
            }
        }
        /* The next block's K and V bytes when they are one page's run (dense blocks, lists
         * of whole pages), issued a few lines per loop step below; other lists per row. */
        pf_cursor pf = {0};
        int pf_rows = 0; /* 1: the next block of a list is not one run: prefetch per row */
        if (i + 16 * PF_BLOCKS < i1) {
            const int ia = i + 16 * PF_BLOCKS, na = i1 - ia < 16 ? i1 - ia : 16;
            /* First token of the next block and whether its tokens are one page's run. */
            int t0 = ia, run = (ia % P) + na <= P;
            if (sq->sel) {
                t0 = sq->sel[ia];
                run = (t0 % P) + na <= P;
                for (int j = 1; j < na && run; j++)
                    run = sq->sel[ia + j] == t0 + j;
                pf_rows = !run;
            }
            if (run) {
                const char *pg = sq->pages[t0 / P];
                pf.a = pg + 2 * ws_kv_k_off(kv, kvh, t0 % P);
                pf.na = (size_t)na * dk * 2;
                if (!kv->v_shares_k) {
                    pf.b = pg + 2 * ws_kv_v_off(kv, kvh, t0 % P);
                    pf.nb = (size_t)na * dv * 2;
                }
                pf.quota = ((pf.na + pf.nb) / pf_steps + 63) & ~(size_t)63;
            }
        }
        if (pf_rows) /* scattered rows of a list: the hardware cannot guess them */
            for (int j = 0; j < 16 && i + 16 + j < i1; j++)
                ws_attn_prefetch_row(sq, kv, kvh, sq->sel[i + 16 + j]);
        /* K rows as one strided A tile when they are one page's consecutive rows. */
        const uint16_t *ka = krow[0];
        if (n < 16 || krow[15] != krow[0] + (size_t)15 * dk) {
            for (int j = 0; j < 16; j++)
                memcpy(kbuf + (size_t)j * dk, krow[j], (size_t)dk * 2);
            ka = kbuf;
        }
        /* V with token pairs interleaved (VNNI), 16 columns per tile. */
        for (int r = 0; r < 8; r++) {
            pf_step(&pf);
            const uint16_t *a = vrow[2 * r], *b = vrow[2 * r + 1];
            for (int c = 0; c < dv; c += 32) {
                __m512i x = _mm512_loadu_si512(a + c), y = _mm512_loadu_si512(b + c);
                __m512i lo = _mm512_unpacklo_epi16(x, y), hi = _mm512_unpackhi_epi16(x, y);
                _mm512_storeu_si512(vv + (size_t)(c / 16) * 256 + r * 32,
                                    _mm512_permutex2var_epi64(lo, idx0, hi));
                _mm512_storeu_si512(vv + (size_t)(c / 16 + 1) * 256 + r * 32,
                                    _mm512_permutex2var_epi64(lo, idx1, hi));
            }
        }
        const __mmask16 valid = (__mmask16)((1u << n) - 1);
        for (int hg = 0; hg < n_hg; hg++) {
            const uint16_t *qh = qv + (size_t)hg * 2 * hl_stride, *ql = qh + hl_stride;
            _tile_zero(0);
            for (int j = 0; j < ksteps; j++) {
                pf_step(&pf);
                _tile_loadd(1, ka + 32 * j, dk * 2);
                _tile_loadd(2, qh + (size_t)j * 16 * g16 * 2, g16 * 4);
                _tile_dpbf16ps(0, 1, 2);
                _tile_loadd(2, ql + (size_t)j * 16 * g16 * 2, g16 * 4);
                _tile_dpbf16ps(0, 1, 2);
            }
            _tile_stored(0, st, 64);
            __m512 sg[16];
            transpose16(st, sg);
            float *mg = m + hg * 16, *lg = l + hg * 16, *ag = alpha + hg * 16;
            for (int g = 0; g < g16; g++) {
                pf_step(&pf);
                __m512 x = _mm512_mask_mul_ps(_mm512_set1_ps(-INFINITY), valid, sg[g],
                                              _mm512_set1_ps(scale));
                float mx = _mm512_reduce_max_ps(x);
                mx = mx > mg[g] ? mx : mg[g];
                ag[g] = mx == mg[g] ? 1.0f : mg[g] == -INFINITY ? 0.0f : expf(mg[g] - mx);
                __m512 e = _mm512_maskz_mov_ps(valid, ws_exp16_ps(_mm512_sub_ps(x, _mm512_set1_ps(mx))));
                lg[g] = ag[g] * lg[g] + _mm512_reduce_add_ps(e);
                mg[g] = mx;
                __m256i h = ps_to_bf16(e);
                __m256i lo = ps_to_bf16(_mm512_sub_ps(e, bf16_to_ps(h)));
                _mm256_storeu_si256((__m256i *)(ph + 16 * g), h);
                _mm256_storeu_si256((__m256i *)(pl + 16 * g), lo);
            }
            _tile_loadd(4, ph, 32);
            _tile_loadd(5, pl, 32);
            float *oh = o + (size_t)hg * 16 * dv;
            /* Rescale the rows whose running max moved, then accumulate P.V straight into
             * O: each 16-column slab of O is loaded as a C tile, gets both products, and is
             * stored back (two C tiles alternate so one slab's stores overlap the next). */
            for (int g = 0; g < g16; g++)
                if (ag[g] != 1.0f) {
                    float *og = oh + (size_t)g * dv;
                    const __m512 a = _mm512_set1_ps(ag[g]);
                    for (int c = 0; c < dv; c += 16)
                        _mm512_storeu_ps(og + c, _mm512_mul_ps(_mm512_loadu_ps(og + c), a));
                }
            for (int c = 0; c < dv; c += 32) {
                pf_step(&pf);
                _tile_loadd(7, oh + c, dv * 4);
                _tile_loadd(6, vv + (size_t)(c / 16) * 256, 64);
                _tile_dpbf16ps(7, 4, 6);
                _tile_dpbf16ps(7, 5, 6);
                _tile_loadd(3, oh + c + 16, dv * 4);
                _tile_stored(7, oh + c, dv * 4);
                _tile_loadd(6, vv + (size_t)(c / 16 + 1) * 256, 64);
                _tile_dpbf16ps(3, 4, 6);
                _tile_dpbf16ps(3, 5, 6);
                _tile_stored(3, oh + c + 16, dv * 4);
            }
        }
        pf.quota = pf.na + pf.nb; /* whatever is left */
        pf_step(&pf);
    }
    _tile_release();
    for (int g = 0; g < G; g++) {
        float *og = o + (size_t)g * dv;
        if (l[g] == 0) {
            memset(og, 0, sizeof(float) * (size_t)dv);
            lse[g] = -INFINITY;
            continue;
        }
        const float inv = 1.0f / l[g];
        for (int d = 0; d < dv; d++)
            og[d] *= inv;
        lse[g] = m[g] + logf(l[g]);
    }
}

/* Peak of TDPBF16PS on full 16x16x32 tiles, in useful flop: the kernel spends two of them
 * (hi, lo) per product, so each counts 16x16x32 flop (half its multiply-adds x 2). */
double ws_attn_cpu_amx_peak_flops(int iters)
{
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++)
        c.rows[t] = 16, c.colsb[t] = 64;
    _tile_loadconfig(&c);
    static const uint16_t ones[16 * 32] = {0};
    _tile_loadd(4, ones, 64);
    _tile_loadd(5, ones, 64);
    _tile_loadd(6, ones, 64);
    _tile_loadd(7, ones, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int i = 0; i < iters; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    float out[256];
    _tile_stored(0, out, 64);
    _tile_release();
    return 4.0 * iters * 16 * 16 * 32 + out[0] * 0.0;
}

#pragma GCC pop_options
