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
 *                   and of the second of each pair,
 *   f_reduce(x)     FL vectors -> one, lane i the sum of x[i]'s lanes,
 *   f_store_halves(a, b, v)  the low FL / 2 lanes of v to a, the high ones to b.
 *   f_rows          the region's row_gather (a K tile and V pair rows from token rows).
 * It defines FN(attend_fns)[5][2], the GQA loop per (1, 2, 4, 8 or 16 heads) x (bf16, fp16),
 * and FN(mla_fns)[2], the MLA loop per dtype.
 * No include guard: it is meant to be included once per region, and it undefines all of
 * the above at its end, so the next region defines them afresh. */

#define TG (SUB / FL) /* vectors per sub-block and head */

/* Scores of one sub-block for heads h < H: s[h * NS * SUB + 0..15] = q_h . k_t, 8 heads
 * at a time (16: two passes over the tile, from L1). Prefetches f's K lines, one per tile
 * row of the first pass. */
INL void FN(scores)(const sub_kv *b, const float *qs, int dk, float *s, const pf_sub *f,
                    const int H, const int f16)
{
    const int rows = dk / 2, HH = H < 8 ? H : 8;
    const int kl = f->klines < rows ? f->klines : rows, per = (kl + TG - 1) / TG;
    for (int g = 0; g < TG; g++)             /* tokens g FL .. g FL + FL - 1 */
        for (int h0 = 0; h0 < H; h0 += HH) { /* heads h0 .. h0 + HH - 1 */
            FV a[8], c[8];
#pragma GCC unroll 8
            for (int h = 0; h < HH; h++)
                a[h] = c[h] = f_zero();
            const uint16_t *kp = b->k + 2 * FL * g;
            const char *pk = f->k + 64 * (size_t)(per * g);
            int np = kl - per * g < per ? kl - per * g : per; /* this pass's lines */
            np = h0 ? 0 : np;
            for (int r = 0; r < rows; r++) {
                FV ev, od;
                f_split(kp + (size_t)r * 32, f16, &ev, &od);
                const float *qr = qs + ((size_t)r * H + h0) * 2; /* [row][head][2] */
#pragma GCC unroll 8
                for (int h = 0; h < HH; h++) {
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
            for (int h = 0; h < HH; h++)
                f_store(s + (size_t)(h0 + h) * NS * SUB + FL * g, FACC2 ? f_add(a[h], c[h]) : a[h]);
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
 * p[h][t] v_t[..], for heads h < H of o, sp and alpha as given (the caller offsets them
 * for a second group of 8); prefetches this column step's share of f's V lines unless f
 * is NULL. */
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
        const int vl = f ? f[j].vlines : 0;
        const int l0 = vl * c0 / dv, l1 = vl * (c0 + FL * CW) / dv;
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

INL void FN(attend)(const ws_attn_problem *p, int s, int kvh, int qhead, int i0, int i1, int G,
                    float *out, float *lse, char *w, const int H, const int f16)
{
    const ws_kv_layout *kv = &p->kv;
    const ws_attn_seq *sq = &p->seqs[s];
    const int dk = kv->d_k, dv = kv->d_v;
    const fma_scratch sp = scratch_plan(kv);
    float *qs = (float *)(w + sp.qs), *o = (float *)(w + sp.o), *sc = (float *)(w + sp.sp);
    uint16_t *kg = (uint16_t *)(w + sp.kg), *vg = (uint16_t *)(w + sp.vg);
    const float *q = p->q + ((size_t)s * p->n_q_heads + (size_t)qhead) * dk;
    for (int h = 0; h < H; h++) /* [dk / 2 rows][H heads][2], as scores reads them */
        for (int d = 0; d < dk; d++)
            qs[((size_t)(d >> 1) * H + h) * 2 + (d & 1)] =
                h < G ? q[(size_t)h * dk + d] * p->scale : 0.0f;
    memset(o, 0, sizeof(float) * (size_t)H * dv);
    float m[HM], l[HM], alpha[HM];
    for (int h = 0; h < H; h++)
        m[h] = -INFINITY, l[h] = 0;
    /* columns per P.V step: 16 accumulators (of 32 zmm or 16 ymm registers) for 8 heads on
     * AVX-512, 8 on AVX2; twice the columns for 4 heads or fewer; 16 heads in two passes */
    const int HH = H < 8 ? H : 8, CW = (HH <= 4 ? 2 : 1) * (FL == 16 ? 2 : 1);
    sub_kv b[NS];
    pf_sub f[NS];
    for (int i = i0; i < i1; i += NS * SUB) {
        const int ns = super_subs(i, i1, NS);
        for (int j = 0; j < ns; j++) {
            sub_prepare(sq, kv, kvh, i, j, i1, kg, vg, b, f, f_rows);
            FN(scores)(&b[j], qs, dk, sc + j * SUB, &f[j], H, f16);
        }
        FN(softmax)(sc, b, ns, m, l, alpha, H);
        for (int h0 = 0; h0 < H; h0 += HH) {
            float *oh = o + (size_t)h0 * dv;
            const float *sh = sc + (size_t)h0 * NS * SUB;
            const pf_sub *fp = h0 ? NULL : f;
            int c0 = 0;
            for (; c0 + FL * CW <= dv; c0 += FL * CW)
                FN(pv_cols)(oh, dv, c0, b, ns, sh, alpha + h0, fp, HH, CW, f16);
            for (; c0 < dv; c0 += FL) /* d_v is a multiple of 16 */
                FN(pv_cols)(oh, dv, c0, b, ns, sh, alpha + h0, fp, HH, 1, f16);
        }
    }
    finish(out, lse, o, m, l, G, dv, 0);
}

/* One function per (heads, dtype): each keeps its own registers (one function holding
 * all eight spilled the loaded K rows to the stack: 1.46x the time in L2). */
#define ATTEND(H, F16)                                                                             \
    static __attribute__((noinline)) void FN(attend_##H##_##F16)(                                  \
        const ws_attn_problem *p, int s, int kvh, int qhead, int i0, int i1, int G, float *o,      \
        float *lse, char *w)                                                                       \
    {                                                                                              \
        FN(attend)(p, s, kvh, qhead, i0, i1, G, o, lse, w, H, F16);                                \
    }
ATTEND(1, 0)
ATTEND(1, 1)
ATTEND(2, 0)
ATTEND(2, 1)
ATTEND(4, 0)
ATTEND(4, 1)
ATTEND(8, 0)
ATTEND(8, 1)
ATTEND(16, 0)
ATTEND(16, 1)
#undef ATTEND

static attend_fn *const FN(attend_fns)[5][2] = {
    {FN(attend_1_0), FN(attend_1_1)},   {FN(attend_2_0), FN(attend_2_1)},
    {FN(attend_4_0), FN(attend_4_1)},   {FN(attend_8_0), FN(attend_8_1)},
    {FN(attend_16_0), FN(attend_16_1)},
};

/* ---- MLA: V is the first d_v values of each K row (rows layout) ---- */
/* The scores go over dims, FL / 2 heads x 2 tokens in FL accumulators (one K row pair
 * split per 2 FL dims, each q vector serving both tokens), reduced by a transpose-and-add
 * tree into one vector of (token, head) scores; they are kept [token][head], so the softmax
 * runs across heads in vectors with no horizontal reductions. P.V goes FL / 2 heads x 2 FL
 * columns (even and odd, as the rows split) at a time over the super-block's tokens, with
 * each probability broadcast once for two FMAs. */
#define HP (FL / 2) /* heads per pass */

/* Scores of the tokens at rows k0 and k1 for one head group: lane hh token 0 with head hh,
 * lane HP + hh token 1. qh: the group's q, [step][hh][even, odd][FL]. */
INL FV FN(mla_qk2)(const uint16_t *k0, const uint16_t *k1, const float *qh, int steps,
                   const int f16)
{
    FV acc[FL];
#pragma GCC unroll 16
    for (int i = 0; i < FL; i++)
        acc[i] = f_zero();
    for (int st = 0; st < steps; st++) {
        FV e0, o0, e1, o1;
        f_split(k0 + (size_t)st * 2 * FL, f16, &e0, &o0);
        f_split(k1 + (size_t)st * 2 * FL, f16, &e1, &o1);
        const float *qs = qh + (size_t)st * HP * 2 * FL;
#pragma GCC unroll 8
        for (int hh = 0; hh < HP; hh++) {
            const FV qe = f_load(qs + hh * 2 * FL), qo = f_load(qs + hh * 2 * FL + FL);
            acc[hh] = f_fma(o0, qo, f_fma(e0, qe, acc[hh]));
            acc[HP + hh] = f_fma(o1, qo, f_fma(e1, qe, acc[HP + hh]));
        }
    }
    return f_reduce(acc);
}

/* Online softmax over n tokens' scores s[t][Gp], FL heads per vector. */
INL void FN(mla_softmax)(float *s, int n, int Gp, float *m, float *l, float *alpha)
{
    for (int c = 0; c < Gp; c += FL) {
        FV mx = f_set1(-INFINITY);
        for (int t = 0; t < n; t++)
            mx = f_max(mx, f_load(s + (size_t)t * Gp + c));
        const FV mo = f_load(m + c), mn = f_max(mo, mx);
        /* m = -inf before the first tokens: exp clamps to ~1e-38, times l = 0 and O = 0 */
        const FV al = f_exp(f_sub(mo, mn));
        FV sum = f_zero();
        for (int t = 0; t < n; t++) {
            float *x = s + (size_t)t * Gp + c;
            const FV e = f_exp(f_sub(f_load(x), mn));
            f_store(x, e);
            sum = f_add(sum, e);
        }
        f_store(alpha + c, al);
        f_store(m + c, mn);
        f_store(l + c, f_fma(al, f_load(l + c), sum));
    }
}

/* O[h] = alpha[h] O[h] + sum_t p[t][h] v_t for n tokens at rows[t], heads h < Gp; O's
 * columns in (even, odd) order per 2 FL. */
INL void FN(mla_pv)(float *o, int dv, const uint16_t *const *rows, int n, const float *s,
                    int Gp, const float *alpha, const int f16)
{
    for (int hg = 0; hg < Gp; hg += HP)
        for (int c = 0; c < dv; c += 2 * FL) {
            FV ae[HP], ao[HP];
#pragma GCC unroll 8
            for (int hh = 0; hh < HP; hh++) {
                const FV al = f_set1(alpha[hg + hh]);
                ae[hh] = f_mul(f_load(o + (size_t)(hg + hh) * dv + c), al);
                ao[hh] = f_mul(f_load(o + (size_t)(hg + hh) * dv + c + FL), al);
            }
            for (int t = 0; t < n; t++) {
                FV ev, od;
                f_split(rows[t] + c, f16, &ev, &od);
                const float *pt = s + (size_t)t * Gp + hg;
#pragma GCC unroll 8
                for (int hh = 0; hh < HP; hh++) {
                    const FV pb = f_set1(pt[hh]);
                    ae[hh] = f_fma(ev, pb, ae[hh]);
                    ao[hh] = f_fma(od, pb, ao[hh]);
                }
            }
#pragma GCC unroll 8
            for (int hh = 0; hh < HP; hh++) {
                f_store(o + (size_t)(hg + hh) * dv + c, ae[hh]);
                f_store(o + (size_t)(hg + hh) * dv + c + FL, ao[hh]);
            }
        }
}

INL void FN(mla_attend)(const ws_attn_problem *p, int s, int kvh, int qhead, int i0, int i1, int G,
                        float *out, float *lse, char *w, const int f16)
{
    const ws_kv_layout *kv = &p->kv;
    const ws_attn_seq *sq = &p->seqs[s];
    const int dk = kv->d_k, dv = kv->d_v, steps = dk / (2 * FL);
    const mla_scratch sp = mla_plan(kv, G);
    const int Gp = sp.Gp;
    float *qs = (float *)(w + sp.qs), *o = (float *)(w + sp.o), *sc = (float *)(w + sp.s);
    float *m = (float *)(w + sp.m), *l = (float *)(w + sp.l), *alpha = (float *)(w + sp.alpha);
    const uint16_t **rows = (const uint16_t **)(w + sp.rows);
    const float *q = p->q + ((size_t)s * p->n_q_heads + (size_t)qhead) * dk;
    /* q [head group][step][head][even, odd][FL]: element d of head h = hg HP + hh */
    for (int h = 0; h < Gp; h++)
        for (int d = 0; d < dk; d++) {
            const int hg = h / HP, hh = h % HP, st = d / (2 * FL), x = d % (2 * FL);
            qs[((((size_t)hg * steps + st) * HP + hh) * 2 + (x & 1)) * FL + x / 2] =
                h < G ? q[(size_t)h * dk + d] * p->scale : 0.0f;
        }
    memset(o, 0, sizeof(float) * (size_t)Gp * dv);
    for (int h = 0; h < Gp; h++)
        m[h] = -INFINITY, l[h] = 0;
    for (int i = i0; i < i1; i += MLA_NT) {
        const int n = i1 - i < MLA_NT ? i1 - i : MLA_NT;
        mla_rows(sq, kv, kvh, i, n, rows);
        /* head groups outside, so that one group's q (d_k x 32 bytes) stays in L1 while the
         * super-block's rows pass (64 heads' q is 147 KB: with token pairs outside it came
         * from L2 for every pair; this order takes 0.84 of that time for 64 heads, 0.89 for
         * 16, A/B from memory) */
        for (int hg = 0; hg < Gp / HP; hg++) {
            const float *qh = qs + (size_t)hg * steps * HP * 2 * FL;
            for (int t = 0; t < n; t += 2) {
                /* the rows AHEAD super-blocks on, to L1 (read within a few us) */
                for (int x = t; x < t + 2 && hg == 0; x++) {
                    const int it = i + AHEAD * MLA_NT + x;
                    if (it < i1)
                        ws_attn_prefetch_row(sq, kv, kvh, sq->sel ? sq->sel[it] : it);
                }
                const uint16_t *k1 = t + 1 < n ? rows[t + 1] : rows[t]; /* odd tail: twice */
                /* row t + 1 exists: n < MLA_NT when it is odd */
                f_store_halves(sc + (size_t)t * Gp + hg * HP, sc + (size_t)(t + 1) * Gp + hg * HP,
                               FN(mla_qk2)(rows[t], k1, qh, steps, f16));
            }
        }
        FN(mla_softmax)(sc, n, Gp, m, l, alpha);
        FN(mla_pv)(o, dv, rows, n, sc, Gp, alpha, f16);
    }
    finish(out, lse, o, m, l, G, dv, FL);
}

static __attribute__((noinline)) void FN(mla_0)(const ws_attn_problem *p, int s, int kvh, int qhead,
                                                int i0, int i1, int G, float *o, float *lse,
                                                char *w)
{
    FN(mla_attend)(p, s, kvh, qhead, i0, i1, G, o, lse, w, 0);
}

static __attribute__((noinline)) void FN(mla_1)(const ws_attn_problem *p, int s, int kvh, int qhead,
                                                int i0, int i1, int G, float *o, float *lse,
                                                char *w)
{
    FN(mla_attend)(p, s, kvh, qhead, i0, i1, G, o, lse, w, 1);
}

static attend_fn *const FN(mla_fns)[2] = {FN(mla_0), FN(mla_1)};

#undef HP
#undef TG
#undef FV
#undef FL
#undef FN
#undef FACC2
#undef f_zero
#undef f_load
#undef f_store
#undef f_set1
#undef f_fma
#undef f_mul
#undef f_add
#undef f_sub
#undef f_max
#undef f_exp
#undef f_hmax
#undef f_hadd
#undef f_keep
#undef f_split
#undef f_reduce
#undef f_store_halves
#undef f_rows
