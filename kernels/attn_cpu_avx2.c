/* attn_cpu_avx2: the AVX2 + FMA + F16C instruction path of the CPU attention kernel (see
 * attn_cpu_isa.h), for x86-64 CPUs without AVX-512. Target pragmas limit the ISA to this
 * file's functions. Same structure as the AVX-512 path with 8-lane vectors and smaller
 * register tiles (16 ymm registers): q.k as 2 heads x 4 tokens, p.V as 2 heads x 32
 * columns. */
#include <immintrin.h>
#include <math.h>

#include "attn_cpu_isa.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

#define INL static inline __attribute__((always_inline))
#include "attn_cpu_exp256.h" /* compiled for this region's target */

static void cvt(float *dst, int ld, const uint16_t *const *rows, int n, int d, ws_dtype dt)
{
    for (int r = 0; r < n; r++) {
        const uint16_t *src = rows[r];
        float *o = dst + (size_t)r * ld;
        if (dt == WS_DT_BF16) {
            for (int i = 0; i < d; i += 8) {
                __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
                _mm256_storeu_ps(o + i, _mm256_castsi256_ps(
                                            _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
            }
        } else {
            for (int i = 0; i < d; i += 8)
                _mm256_storeu_ps(o + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
        }
    }
}

INL __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
{
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

INL float hsum1(__m256 a)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INL void qk_tile(const float *q, int dk, const float *kf, int ldk, float scale, float *s,
                 int lds, const int GH, const int TH)
{
    __m256 acc[2][4];
#pragma GCC unroll 4
    for (int g = 0; g < GH; g++)
#pragma GCC unroll 4
        for (int t = 0; t < TH; t++)
            acc[g][t] = _mm256_setzero_ps();
    for (int i = 0; i < dk; i += 8) {
        __m256 k[4];
#pragma GCC unroll 4
        for (int t = 0; t < TH; t++)
            k[t] = _mm256_loadu_ps(kf + (size_t)t * ldk + i);
#pragma GCC unroll 4
        for (int g = 0; g < GH; g++) {
            __m256 qv = _mm256_loadu_ps(q + (size_t)g * dk + i);
#pragma GCC unroll 4
            for (int t = 0; t < TH; t++)
                acc[g][t] = _mm256_fmadd_ps(qv, k[t], acc[g][t]);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < GH; g++) {
        float *sg = s + (size_t)g * lds;
        if (TH == 4) {
            _mm_storeu_ps(sg, _mm_mul_ps(hsum4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]),
                                         _mm_set1_ps(scale)));
        } else {
            for (int t = 0; t < TH; t++)
                sg[t] = scale * hsum1(acc[g][t]);
        }
    }
}

static void qk(const float *q, int G, int dk, const float *kf, int ldk, int n, float scale,
               float *s, int lds)
{
    int g = 0;
    for (; g + 2 <= G; g += 2) {
        const float *qg = q + (size_t)g * dk;
        int t = 0;
        for (; t + 4 <= n; t += 4)
            qk_tile(qg, dk, kf + (size_t)t * ldk, ldk, scale, s + (size_t)g * lds + t, lds, 2, 4);
        for (; t < n; t++)
            qk_tile(qg, dk, kf + (size_t)t * ldk, ldk, scale, s + (size_t)g * lds + t, lds, 2, 1);
    }
    for (; g < G; g++) {
        const float *qg = q + (size_t)g * dk;
        int t = 0;
        for (; t + 4 <= n; t += 4)
            qk_tile(qg, dk, kf + (size_t)t * ldk, ldk, scale, s + (size_t)g * lds + t, lds, 1, 4);
        for (; t < n; t++)
            qk_tile(qg, dk, kf + (size_t)t * ldk, ldk, scale, s + (size_t)g * lds + t, lds, 1, 1);
    }
}

INL void pv_tile(float *o, int dv, const float *p, int ldp, const float *vf, int ldv, int n,
                 const int GH, const int CH)
{
    __m256 acc[2][4];
#pragma GCC unroll 4
    for (int g = 0; g < GH; g++)
#pragma GCC unroll 4
        for (int c = 0; c < CH; c++)
            acc[g][c] = _mm256_loadu_ps(o + (size_t)g * dv + 8 * c);
    for (int t = 0; t < n; t++) {
        __m256 v[4];
#pragma GCC unroll 4
        for (int c = 0; c < CH; c++)
            v[c] = _mm256_loadu_ps(vf + (size_t)t * ldv + 8 * c);
#pragma GCC unroll 4
        for (int g = 0; g < GH; g++) {
            __m256 w = _mm256_broadcast_ss(p + (size_t)g * ldp + t);
#pragma GCC unroll 4
            for (int c = 0; c < CH; c++)
                acc[g][c] = _mm256_fmadd_ps(w, v[c], acc[g][c]);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < GH; g++)
#pragma GCC unroll 4
        for (int c = 0; c < CH; c++)
            _mm256_storeu_ps(o + (size_t)g * dv + 8 * c, acc[g][c]);
}

static void pv(float *o, int G, int dv, const float *p, int ldp, const float *vf, int ldv, int n)
{
    int g = 0;
    for (; g + 2 <= G; g += 2) {
        int i = 0;
        for (; i + 32 <= dv; i += 32)
            pv_tile(o + (size_t)g * dv + i, dv, p + (size_t)g * ldp, ldp, vf + i, ldv, n, 2, 4);
        for (; i < dv; i += 8)
            pv_tile(o + (size_t)g * dv + i, dv, p + (size_t)g * ldp, ldp, vf + i, ldv, n, 2, 1);
    }
    for (; g < G; g++) {
        int i = 0;
        for (; i + 32 <= dv; i += 32)
            pv_tile(o + (size_t)g * dv + i, dv, p + (size_t)g * ldp, ldp, vf + i, ldv, n, 1, 4);
        for (; i < dv; i += 8)
            pv_tile(o + (size_t)g * dv + i, dv, p + (size_t)g * ldp, ldp, vf + i, ldv, n, 1, 1);
    }
}

static void expv(float *x, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, ws_exp8_ps(_mm256_loadu_ps(x + i)));
    if (i < n) {
        float tail[8] = {0};
        for (int j = 0; i + j < n; j++)
            tail[j] = x[i + j];
        _mm256_storeu_ps(tail, ws_exp8_ps(_mm256_loadu_ps(tail)));
        for (int j = 0; i + j < n; j++)
            x[i + j] = tail[j];
    }
}

static void softmax(float *s, int G, int n, float *m, float *l, float *alpha)
{
    float buf[16];
    for (int g = 0; g < G; g++) {
        float *sg = s + (size_t)g * n;
        for (int j = 0; j < 16; j++)
            buf[j] = j < n ? sg[j] : -INFINITY;
        __m256 x0 = _mm256_loadu_ps(buf), x1 = _mm256_loadu_ps(buf + 8);
        float mx = ws_hmax8_ps(_mm256_max_ps(x0, x1));
        mx = mx > m[g] ? mx : m[g];
        alpha[g] = mx == m[g] ? 1.0f : m[g] == -INFINITY ? 0.0f : expf(m[g] - mx);
        __m256 vm = _mm256_set1_ps(mx);
        /* -inf padding would clamp to exp(-87), not 0: zero the padding after exp. */
        _mm256_storeu_ps(buf, ws_exp8_ps(_mm256_sub_ps(x0, vm)));
        _mm256_storeu_ps(buf + 8, ws_exp8_ps(_mm256_sub_ps(x1, vm)));
        float sum = 0;
        for (int j = 0; j < n; j++) {
            sg[j] = buf[j];
            sum += buf[j];
        }
        l[g] = alpha[g] * l[g] + sum;
        m[g] = mx;
    }
}

#pragma GCC pop_options

static const ws_attn_cpu_ops k_ops = {WS_ISA_AVX2, cvt, qk, NULL, pv, expv, softmax};

const ws_attn_cpu_ops *ws_attn_cpu_ops_avx2(void)
{
    return &k_ops;
}
