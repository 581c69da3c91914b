/* attn_cpu_avx2: the AVX2 + FMA + F16C instruction path of the CPU attention kernel (see
 * attn_cpu_isa.h), for x86-64 CPUs without AVX-512. Target pragmas limit the ISA to this
 * file's functions. The AVX-512 path's register-tiled kernels (attn_cpu_gen_body.h) with
 * 8-lane vectors and smaller tiles (16 ymm registers): q.k as 2 heads x 4 tokens, p.V as
 * 2 heads x 32 columns. */
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

/* Stores scale * (sums of acc[0..TH)) at s[0..TH). */
INL void put_scores(float *s, __m256 *acc, int TH, float scale)
{
    if (TH == 4) {
        _mm_storeu_ps(s, _mm_mul_ps(hsum4(acc[0], acc[1], acc[2], acc[3]), _mm_set1_ps(scale)));
    } else {
        for (int t = 0; t < TH; t++)
            s[t] = scale * hsum1(acc[t]);
    }
}

#define GV __m256
#define GL 8
#define GH 2
#define g_zero _mm256_setzero_ps
#define g_loadu _mm256_loadu_ps
#define g_storeu _mm256_storeu_ps
#define g_set1 _mm256_set1_ps
#define g_fma _mm256_fmadd_ps
#include "attn_cpu_gen_body.h" /* qk and pv, from the definitions above */

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
