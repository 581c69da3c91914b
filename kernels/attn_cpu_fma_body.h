/* attn_cpu_fma_body: the fused FMA block loop written once for any vector width; included
 * by attn_cpu_fma.c (only) inside each instruction set's target region, after it defines:
 *   FV, FL          the fp32 vector type and its lanes (16 or 8: SUB / FL vectors per
 *                   sub-block of 16 tokens),
 *   FN(x)           the name x with the region's suffix,
 *   FACC2           1: two accumulators per head in the scores (even and odd dims),
 *   f_zero() f_load(p) f_store(p, v) f_set1(x) f_fma(a, b, c) = a b + c, f_mul, f_add,
 *   f_sub, f_max, f_exp, f_hmax(v) f_hadd(v) (horizontal, to float),
 *   f_keep(v, n, fill)  v with lanes n.. replaced by fill (n may be <= 0 or >= FL),
 *   f_split(p, f16, ev, od)  FL 32-bit pairs of 16-bit values at p -> fp32 of the first
 *                   and of the second of each pair.
 * It defines FN(attend_fns)[4][2], the loop per (1, 2, 4 or 8 heads) x (bf16, fp16).
 * No include guard: it is meant to be included once per region. */

#define TG (SUB / FL) /* vectors per sub-block and head */

/* Scores of one sub-block for heads h < H: s[h * NS * SUB + 0..15] = q_h . k_t. Prefetches
 * f's K lines, one per tile row. */
INL void FN(scores)(const sub_kv *b, const float *qs, int dk, float *s, const pf_sub *f,
                    const int H, const int f16)
{
    const int rows = dk / 2;
    const int kl = f->klines < rows ? f->klines : rows, per = (kl + TG - 1) / TG;
    for (int g = 0; g < TG; g++) { /* tokens g FL .. g FL + FL - 1 */
        FV a[HM], c[HM];
#pragma GCC unroll 8
        for (int h = 0; h < H; h++)
            a[h] = c[h] = f_zero();
        const uint16_t *kp = b->k + 2 * FL * g;
        const char *pk = f->k + 64 * (size_t)(per * g);
        const int np = kl - per * g < per ? kl - per * g : per; /* this pass's lines */
        for (int r = 0; r < rows; r++) {
            FV ev, od;
            f_split(kp + (size_t)r * 32, f16, &ev, &od);
            const float *qr = qs + (size_t)r * 2 * H; /* [row][head][2]: one base per row */
#pragma GCC unroll 8
            for (int h = 0; h < H; h++) {
                if (FACC2) {
                    a[h] = f_fma(ev, f_set1(qr[2 * h]), a[h]);
                    c[h] = f_fma(od, f_set1(qr[2 * h + 1]), c[h]);
                } else {
                    a[h] = f_fma(od, f_set1(qr[2 * h + 1]), f_fma(ev, f_set1(qr[2 * h]), a[h]));
                }
            }
            if (r < np)
                _mm_prefetch(pk + 64 * (size_t)r, _MM_HINT_T1);
        }
#pragma GCC unroll 8
        for (int h = 0; h < H; h++)
            f_store(s + (size_t)h * NS * SUB + FL * g, FACC2 ? f_add(a[h], c[h]) : a[h]);
    }
    for (int x = kl; x < f->klines; x++) /* two tiles (a run not starting a tile) */
        _mm_prefetch(f->k + 64 * (size_t)x, _MM_HINT_T1);
}

/* The online softmax over a super-block of ns sub-blocks, per head h < H: new max m[h],
 * rescale factor alpha[h] of what was accumulated, probabilities in place of the scores
 * (zero for absent tokens), l[h] updated. */
INL void FN(softmax)(float *sp, const sub_kv *b, int ns, float *m, float *l, float *alpha,
                     const int H)
{
    const FV ninf = f_set1(-INFINITY);
    for (int h = 0; h < H; h++) {
        float *sh = sp + (size_t)h * NS * SUB;
        FV mx = ninf;
        for (int j = 0; j < ns; j++)
            for (int g = 0; g < TG; g++)
                mx = f_max(mx, f_keep(f_load(sh + j * SUB + FL * g), b[j].n - FL * g, ninf));
        const float bm = f_hmax(mx), mn = bm > m[h] ? bm : m[h];
        alpha[h] = m[h] == -INFINITY ? 0.0f : expf(m[h] - mn); /* 1 when the max stays */
        const FV vm = f_set1(mn), zero = f_zero();
        FV sum = zero;
        for (int j = 0; j < ns; j++)
            for (int g = 0; g < TG; g++) {
                float *x = sh + j * SUB + FL * g;
                const FV e = f_keep(f_exp(f_sub(f_load(x), vm)), b[j].n - FL * g, zero);
                f_store(x, e);
                sum = f_add(sum, e);
            }
        l[h] = alpha[h] * l[h] + f_hadd(sum);
        m[h] = mn;
    }
}

/* O[h][c0 .. c0 + FL CW) = alpha[h] O[h][..] + sum over the super-block's tokens of
 * p[h][t] v_t[..], for heads h < H; prefetches this column step's share of f's V lines. */
INL void FN(pv_cols)(float *o, int dv, int c0, const sub_kv *b, int ns, const float *sp,
                     const float *alpha, const pf_sub *f, const int H, const int CW, const int f16)
{
    FV acc[HM][4];
#pragma GCC unroll 8
    for (int h = 0; h < H; h++)
#pragma GCC unroll 4
        for (int w = 0; w < CW; w++)
            acc[h][w] = f_mul(f_load(o + (size_t)h * dv + c0 + FL * w), f_set1(alpha[h]));
    for (int j = 0; j < ns; j++) {
        const uint16_t *v = b[j].v + 2 * (size_t)c0;
        const float *pj = sp + j * SUB;
        /* this column step's share of sub-block j's V lines, 1/8 per pair row */
        const int l0 = f[j].vlines * c0 / dv, l1 = f[j].vlines * (c0 + FL * CW) / dv;
        const int per = (l1 - l0 + 7) / 8;
        for (int u = 0; u < SUB / 2; u++) {
            for (int x = l0 + u * per; x < l0 + (u + 1) * per && x < l1; x++)
                _mm_prefetch(f[j].v + 64 * (size_t)x, _MM_HINT_T1);
            FV ev[4], od[4];
#pragma GCC unroll 4
            for (int w = 0; w < CW; w++)
                f_split(v + (size_t)u * 2 * dv + 2 * FL * w, f16, &ev[w], &od[w]);
#pragma GCC unroll 8
            for (int h = 0; h < H; h++) {
                const FV pe = f_set1(pj[(size_t)h * NS * SUB + 2 * u]);
                const FV po = f_set1(pj[(size_t)h * NS * SUB + 2 * u + 1]);
#pragma GCC unroll 4
                for (int w = 0; w < CW; w++)
                    acc[h][w] = f_fma(od[w], po, f_fma(ev[w], pe, acc[h][w]));
            }
        }
    }
#pragma GCC unroll 8
    for (int h = 0; h < H; h++)
#pragma GCC unroll 4
        for (int w = 0; w < CW; w++)
            f_store(o + (size_t)h * dv + c0 + FL * w, acc[h][w]);
}

INL void FN(attend)(const ws_attn_problem *p, int s, int kvh, int i0, int i1, int G, float *out,
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
    /* columns per P.V step: 16 accumulators (of 32 zmm or 16 ymm registers) for 8 heads on
     * AVX-512, 8 on AVX2; twice the columns for 4 heads or fewer */
    const int CW = (H <= 4 ? 2 : 1) * (FL == 16 ? 2 : 1);
    sub_kv b[NS];
    pf_sub f[NS];
    for (int i = i0; i < i1; i += NS * SUB) {
        const int ns = (i1 - i + SUB - 1) / SUB < NS ? (i1 - i + SUB - 1) / SUB : NS;
        for (int j = 0; j < ns; j++) {
            const int it = i + j * SUB, n = i1 - it < SUB ? i1 - it : SUB;
            resolve(sq, kv, kvh, it, n, kg + (size_t)j * SUB * dk, vg + (size_t)j * SUB * dv,
                    &b[j]);
            pf_plan(sq, kv, kvh, it + AHEAD * NS * SUB, i1, &f[j]);
            FN(scores)(&b[j], qs, dk, sc + j * SUB, &f[j], H, f16);
        }
        FN(softmax)(sc, b, ns, m, l, alpha, H);
        int c0 = 0;
        for (; c0 + FL * CW <= dv; c0 += FL * CW)
            FN(pv_cols)(o, dv, c0, b, ns, sc, alpha, f, H, CW, f16);
        for (; c0 < dv; c0 += FL) /* d_v is a multiple of 16 */
            FN(pv_cols)(o, dv, c0, b, ns, sc, alpha, f, H, 1, f16);
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
 * all eight spilled the loaded K rows to the stack: 1.46x the time in L2). */
#define ATTEND(H, F16)                                                                             \
    static __attribute__((noinline)) void FN(attend_##H##_##F16)(const ws_attn_problem *p, int s,  \
                                                                 int kvh, int i0, int i1, int G,   \
                                                                 float *o, float *lse, char *w)    \
    {                                                                                              \
        FN(attend)(p, s, kvh, i0, i1, G, o, lse, w, H, F16);                                       \
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

static attend_fn *const FN(attend_fns)[4][2] = {
    {FN(attend_1_0), FN(attend_1_1)},
    {FN(attend_2_0), FN(attend_2_1)},
    {FN(attend_4_0), FN(attend_4_1)},
    {FN(attend_8_0), FN(attend_8_1)},
};

#undef TG
