/* attn_cpu_avx512: the AVX-512 instruction paths of the CPU attention kernel (see
 * attn_cpu_isa.h). Compiled for AVX-512 through target pragmas on this file's functions
 * only, so the binary still runs on CPUs without it; the dispatcher calls these only when
 * cpu_features reports the ISA.
 *
 * avx512: K/V rows are converted to fp32 once per block (bf16: shift, fp16: VCVTPH2PS) and
 * consumed by register-tiled FMA kernels (attn_cpu_gen_body.h, shared with the avx2 path):
 * q.k as 4 heads x 4 tokens (16 accumulators, reduced four at a time), p.V as 4 heads x 64
 * columns.
 * avx512bf16: the same, except q.k on bf16 KV runs VDPBF16PS straight on the page rows with
 * q split into bf16 hi + lo halves (two VDPBF16PS per 32 elements), which keeps the scores
 * as accurate as fp32 FMA (a single bf16 q would cost ~5e-4 rms in the scores, too close
 * to the 2e-3 bound) and saves the K conversion. */
#include <immintrin.h>
#include <math.h>

#include "attn_cpu_isa.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")

#define INL static inline __attribute__((always_inline))
#include "attn_cpu_exp512.h" /* compiled for this region's target */

static void cvt(float *dst, int ld, const uint16_t *const *rows, int n, int d, ws_dtype dt)
{
    if (dt == WS_DT_BF16) {
        for (int r = 0; r < n; r++) {
            const uint16_t *src = rows[r];
            float *o = dst + (size_t)r * ld;
            for (int i = 0; i < d; i += 16) {
                __m256i h = _mm256_loadu_si256((const __m256i *)(src + i));
                _mm512_storeu_ps(o + i, _mm512_castsi512_ps(
                                            _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
            }
        }
    } else {
        for (int r = 0; r < n; r++) {
            const uint16_t *src = rows[r];
            float *o = dst + (size_t)r * ld;
            for (int i = 0; i < d; i += 16)
                _mm512_storeu_ps(o + i,
                                 _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
        }
    }
}

/* The four horizontal sums of a0..a3 as one 128-bit vector. */
INL __m128 hsum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3)
{
    __m512 a01 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
    __m512 a23 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
    __m512 b = _mm512_add_ps(_mm512_shuffle_ps(a01, a23, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(a01, a23, _MM_SHUFFLE(3, 2, 3, 2)));
    __m256 c = _mm256_add_ps(_mm512_castps512_ps256(b),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(b), 1)));
    return _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps(c, 1));
}

/* Stores scale * (sums of acc[0..TH)) at s[0..TH). */
INL void put_scores(float *s, __m512 *acc, int TH, float scale)
{
    if (TH == 4) {
        _mm_storeu_ps(s, _mm_mul_ps(hsum4(acc[0], acc[1], acc[2], acc[3]), _mm_set1_ps(scale)));
    } else {
        for (int t = 0; t < TH; t++)
            s[t] = scale * _mm512_reduce_add_ps(acc[t]);
    }
}

#define GV __m512
#define GL 16
#define GH 4
#define g_zero _mm512_setzero_ps
#define g_loadu _mm512_loadu_ps
#define g_storeu _mm512_storeu_ps
#define g_set1 _mm512_set1_ps
#define g_fma _mm512_fmadd_ps
#include "attn_cpu_gen_body.h" /* qk and pv, from the definitions above */

static void expv(float *x, int n)
{
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(x + i, ws_exp16_ps(_mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(x + i, m, ws_exp16_ps(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

static void softmax(float *s, int G, int n, float *m, float *l, float *alpha)
{
    const __mmask16 k = (__mmask16)((1u << n) - 1);
    for (int g = 0; g < G; g++) {
        float *sg = s + (size_t)g * n;
        __m512 x = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k, sg);
        float mx = _mm512_reduce_max_ps(x);
        mx = mx > m[g] ? mx : m[g];
        alpha[g] = mx == m[g] ? 1.0f : m[g] == -INFINITY ? 0.0f : expf(m[g] - mx);
        __m512 e = _mm512_maskz_mov_ps(k, ws_exp16_ps(_mm512_sub_ps(x, _mm512_set1_ps(mx))));
        _mm512_mask_storeu_ps(sg, k, e);
        l[g] = alpha[g] * l[g] + _mm512_reduce_add_ps(e);
        m[g] = mx;
    }
}

#pragma GCC pop_options

/* ---- avx512bf16: q.k with VDPBF16PS on bf16 rows (the helpers above inline here: this
 * region's target is a superset of theirs) ---- */
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")

INL __m512bh ld_bh(const uint16_t *p, __mmask32 m)
{
    return (__m512bh)_mm512_maskz_loadu_epi16(m, p);
}

INL void qkb_tile(const uint16_t *qhi, const uint16_t *qlo, int dk,
                  const uint16_t *const *rows, float scale, float *s, int lds, const int GH,
                  const int TH)
{
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int g = 0; g < GH; g++)
#pragma GCC unroll 4
        for (int t = 0; t < TH; t++)
            acc[g][t] = _mm512_setzero_ps();
    for (int i = 0; i < dk; i += 32) {
        /* d_k is a multiple of 16: the last step may cover only 16 elements. */
        const __mmask32 m = dk - i >= 32 ? (__mmask32)0xffffffffu : (__mmask32)0xffffu;
        __m512bh k[4];
#pragma GCC unroll 4
        for (int t = 0; t < TH; t++)
            k[t] = ld_bh(rows[t] + i, m);
#pragma GCC unroll 4
        for (int g = 0; g < GH; g++) {
            __m512bh h = ld_bh(qhi + (size_t)g * dk + i, m), l = ld_bh(qlo + (size_t)g * dk + i, m);
#pragma GCC unroll 4
            for (int t = 0; t < TH; t++) {
                acc[g][t] = _mm512_dpbf16_ps(acc[g][t], h, k[t]);
                acc[g][t] = _mm512_dpbf16_ps(acc[g][t], l, k[t]);
            }
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < GH; g++)
        put_scores(s + (size_t)g * lds, acc[g], TH, scale);
}

static void qk_bf16(const uint16_t *qhi, const uint16_t *qlo, int G, int dk,
                    const uint16_t *const *rows, int n, float scale, float *s, int lds)
{
    int g = 0;
    for (; g + 4 <= G; g += 4) {
        const size_t qo = (size_t)g * dk;
        int t = 0;
        for (; t + 4 <= n; t += 4)
            qkb_tile(qhi + qo, qlo + qo, dk, rows + t, scale, s + (size_t)g * lds + t, lds, 4, 4);
        for (; t < n; t++)
            qkb_tile(qhi + qo, qlo + qo, dk, rows + t, scale, s + (size_t)g * lds + t, lds, 4, 1);
    }
    for (; g < G; g++) {
        const size_t qo = (size_t)g * dk;
        int t = 0;
        for (; t + 4 <= n; t += 4)
            qkb_tile(qhi + qo, qlo + qo, dk, rows + t, scale, s + (size_t)g * lds + t, lds, 1, 4);
        for (; t < n; t++)
            qkb_tile(qhi + qo, qlo + qo, dk, rows + t, scale, s + (size_t)g * lds + t, lds, 1, 1);
    }
}

#pragma GCC pop_options

static const ws_attn_cpu_ops k_avx512 = {WS_ISA_AVX512, cvt, qk, NULL, pv, expv, softmax};
static const ws_attn_cpu_ops k_avx512bf16 = {WS_ISA_AVX512_BF16, cvt, qk, qk_bf16, pv, expv,
                                             softmax};

const ws_attn_cpu_ops *ws_attn_cpu_ops_avx512(void)
{
    return &k_avx512;
}

const ws_attn_cpu_ops *ws_attn_cpu_ops_avx512bf16(void)
{
    return &k_avx512bf16;
}
