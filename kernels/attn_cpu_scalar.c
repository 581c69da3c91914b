/* attn_cpu_scalar: the portable instruction path of the CPU attention kernel (see
 * attn_cpu_isa.h): plain C with fp32 accumulation, the fallback on any x86-64 CPU. */
#include <math.h>

#include "attn_cpu_isa.h"
#include "half.h"

static void cvt(float *dst, int ld, const uint16_t *const *rows, int n, int d, ws_dtype dt)
{
    for (int r = 0; r < n; r++) {
        const uint16_t *src = rows[r];
        float *o = dst + (size_t)r * ld;
        if (dt == WS_DT_BF16)
            for (int i = 0; i < d; i++)
                o[i] = ws_bf16_to_f32(src[i]);
        else
            for (int i = 0; i < d; i++)
                o[i] = ws_fp16_to_f32(src[i]);
    }
}

static void qk(const float *q, int G, int dk, const float *kf, int ldk, int n, float scale,
               float *s, int lds)
{
    for (int g = 0; g < G; g++)
        for (int t = 0; t < n; t++) {
            const float *a = q + (size_t)g * dk, *b = kf + (size_t)t * ldk;
            float acc[4] = {0, 0, 0, 0}; /* four partial sums: a shorter rounding chain */
            for (int i = 0; i < dk; i += 4)
                for (int j = 0; j < 4; j++)
                    acc[j] += a[i + j] * b[i + j];
            s[g * lds + t] = scale * ((acc[0] + acc[1]) + (acc[2] + acc[3]));
        }
}

static void pv(float *o, int G, int dv, const float *p, int ldp, const float *vf, int ldv, int n)
{
    for (int g = 0; g < G; g++) {
        float *og = o + (size_t)g * dv;
        for (int t = 0; t < n; t++) {
            const float w = p[g * ldp + t], *v = vf + (size_t)t * ldv;
            for (int i = 0; i < dv; i++)
                og[i] += w * v[i];
        }
    }
}

static void expv(float *x, int n)
{
    for (int i = 0; i < n; i++)
        x[i] = expf(x[i]);
}

static void softmax(float *s, int G, int n, float *m, float *l, float *alpha)
{
    for (int g = 0; g < G; g++) {
        float *sg = s + (size_t)g * n, mx = m[g], sum = 0;
        for (int j = 0; j < n; j++)
            mx = sg[j] > mx ? sg[j] : mx;
        alpha[g] = mx == m[g] ? 1.0f : m[g] == -INFINITY ? 0.0f : expf(m[g] - mx);
        for (int j = 0; j < n; j++) {
            sg[j] = expf(sg[j] - mx);
            sum += sg[j];
        }
        l[g] = alpha[g] * l[g] + sum;
        m[g] = mx;
    }
}

static const ws_attn_cpu_ops k_ops = {WS_ISA_SCALAR, cvt, qk, NULL, pv, expv, softmax};

const ws_attn_cpu_ops *ws_attn_cpu_ops_scalar(void)
{
    return &k_ops;
}
