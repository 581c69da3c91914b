/* attn_cpu_exp512: the AVX-512 exp of the AVX-512 attention paths' softmax (Cephes' expf
 * polynomial, ~1 ulp on [-87, 0], 2^n applied with VSCALEFPS). The AMX path takes its
 * exps in base 2 with its own polynomial (attn_cpu_amx.c: exp2_maskz).
 * Include it after `#pragma GCC target("avx512f,...")`: it is compiled for the including
 * file's instruction set. */
#ifndef WS_ATTN_CPU_EXP512_H
#define WS_ATTN_CPU_EXP512_H

#include <immintrin.h>

static inline __attribute__((always_inline)) __m512 ws_exp16_ps(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(y, n);
}

#endif
