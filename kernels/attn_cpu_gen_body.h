/* attn_cpu_gen_body: the generic block loop's register-tiled FMA kernels (the qk and pv
 * entries of ws_attn_cpu_ops, attn_cpu_isa.h) written once for any vector width; included
 * by attn_cpu_avx2.c and attn_cpu_avx512.c (only) inside their target regions, after each
 * defines:
 *   GV, GL          the fp32 vector type and its lanes (8 or 16),
 *   GH              query heads per register tile (q.k: GH heads x 4 tokens, p.V: GH heads
 *                   x 4 GL columns; 2 for the 16 ymm registers of AVX2, 4 for AVX-512),
 *   g_zero() g_loadu(p) g_storeu(p, v) g_set1(x) g_fma(a, b, c) = a b + c,
 *   put_scores(s, acc, TH, scale)  s[t] = scale * (sum of acc[t]'s lanes), t < TH (an INL
 *                   function of the file: 4 sums at a time when TH = 4).
 * It defines the static functions qk and pv. No include guard: it undefines the macros
 * above at its end. */

INL void qk_tile(const float *q, int dk, const float *kf, int ldk, float scale, float *s, int lds,
                 const int NH, const int TH)
{
    GV acc[GH][4];
#pragma GCC unroll 4
    for (int g = 0; g < NH; g++)
#pragma GCC unroll 4
        for (int t = 0; t < TH; t++)
            acc[g][t] = g_zero();
    for (int i = 0; i < dk; i += GL) {
        GV k[4];
#pragma GCC unroll 4
        for (int t = 0; t < TH; t++)
            k[t] = g_loadu(kf + (size_t)t * ldk + i);
#pragma GCC unroll 4
        for (int g = 0; g < NH; g++) {
            GV qv = g_loadu(q + (size_t)g * dk + i);
#pragma GCC unroll 4
            for (int t = 0; t < TH; t++)
                acc[g][t] = g_fma(qv, k[t], acc[g][t]);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < NH; g++)
        put_scores(s + (size_t)g * lds, acc[g], TH, scale);
}

static void qk(const float *q, int G, int dk, const float *kf, int ldk, int n, float scale,
               float *s, int lds)
{
    int g = 0;
    for (; g + GH <= G; g += GH) {
        const float *qg = q + (size_t)g * dk;
        int t = 0;
        for (; t + 4 <= n; t += 4)
            qk_tile(qg, dk, kf + (size_t)t * ldk, ldk, scale, s + (size_t)g * lds + t, lds, GH, 4);
        for (; t < n; t++)
            qk_tile(qg, dk, kf + (size_t)t * ldk, ldk, scale, s + (size_t)g * lds + t, lds, GH, 1);
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
                 const int NH, const int CH)
{
    GV acc[GH][4];
#pragma GCC unroll 4
    for (int g = 0; g < NH; g++)
#pragma GCC unroll 4
        for (int c = 0; c < CH; c++)
            acc[g][c] = g_loadu(o + (size_t)g * dv + GL * c);
    for (int t = 0; t < n; t++) {
        GV v[4];
#pragma GCC unroll 4
        for (int c = 0; c < CH; c++)
            v[c] = g_loadu(vf + (size_t)t * ldv + GL * c);
#pragma GCC unroll 4
        for (int g = 0; g < NH; g++) {
            GV w = g_set1(p[(size_t)g * ldp + t]);
#pragma GCC unroll 4
            for (int c = 0; c < CH; c++)
                acc[g][c] = g_fma(w, v[c], acc[g][c]);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < NH; g++)
#pragma GCC unroll 4
        for (int c = 0; c < CH; c++)
            g_storeu(o + (size_t)g * dv + GL * c, acc[g][c]);
}

static void pv(float *o, int G, int dv, const float *p, int ldp, const float *vf, int ldv, int n)
{
    int g = 0;
    for (; g + GH <= G; g += GH) {
        int i = 0;
        for (; i + 4 * GL <= dv; i += 4 * GL)
            pv_tile(o + (size_t)g * dv + i, dv, p + (size_t)g * ldp, ldp, vf + i, ldv, n, GH, 4);
        for (; i < dv; i += GL)
            pv_tile(o + (size_t)g * dv + i, dv, p + (size_t)g * ldp, ldp, vf + i, ldv, n, GH, 1);
    }
    for (; g < G; g++) {
        int i = 0;
        for (; i + 4 * GL <= dv; i += 4 * GL)
            pv_tile(o + (size_t)g * dv + i, dv, p + (size_t)g * ldp, ldp, vf + i, ldv, n, 1, 4);
        for (; i < dv; i += GL)
            pv_tile(o + (size_t)g * dv + i, dv, p + (size_t)g * ldp, ldp, vf + i, ldv, n, 1, 1);
    }
}

#undef GV
#undef GL
#undef GH
#undef g_zero
#undef g_loadu
#undef g_storeu
#undef g_set1
#undef g_fma
