/* attn_ref: validation, the fp64 reference decode attention and the merge of partial
 * states (see attn.h). Deliberately plain: this is the oracle the fast kernels are
 * tested against, so it favours obviousness over speed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "half.h"

size_t ws_kv_page_bytes(const ws_kv_layout *kv)
{
    size_t per_tok = (size_t)kv->d_k + (kv->v_shares_k ? 0 : (size_t)kv->d_v);
    return (size_t)kv->page_tokens * (size_t)kv->n_kv_heads * per_tok *
           (size_t)ws_dtype_size(kv->dtype);
}

int ws_attn_validate(const ws_attn_problem *p, ws_err *err)
{
    const ws_kv_layout *kv = &p->kv;
    if (kv->dtype != WS_DT_BF16 && kv->dtype != WS_DT_FP16)
        return ws_err_set(err, WS_EUNSUP, "attention: KV dtype %s is not supported (bf16, fp16)",
                          ws_dtype_name(kv->dtype));
    if (kv->page_tokens <= 0 || kv->n_kv_heads <= 0 || p->n_q_heads <= 0)
        return ws_err_set(err, WS_EINVAL,
                          "attention: page_tokens (%d), kv heads (%d) and query heads (%d) must "
                          "be positive",
                          kv->page_tokens, kv->n_kv_heads, p->n_q_heads);
    if (p->n_q_heads % kv->n_kv_heads)
        return ws_err_set(err, WS_EINVAL, "attention: %d query heads are not a multiple of %d KV heads",
                          p->n_q_heads, kv->n_kv_heads);
    if (kv->d_k <= 0 || kv->d_v <= 0 || kv->d_k > WS_ATTN_MAX_HEAD_DIM ||
        kv->d_v > WS_ATTN_MAX_HEAD_DIM)
        return ws_err_set(err, WS_EUNSUP, "attention: head dims d_k=%d d_v=%d outside 1..%d",
                          kv->d_k, kv->d_v, WS_ATTN_MAX_HEAD_DIM);
    if (kv->v_shares_k && kv->d_v > kv->d_k)
        return ws_err_set(err, WS_EINVAL, "attention: shared V (d_v=%d) wider than K (d_k=%d)",
                          kv->d_v, kv->d_k);
    if (kv->v_pairs && (kv->v_shares_k || kv->page_tokens % 2))
        return ws_err_set(err, WS_EINVAL,
                          "attention: V in token pairs needs a separate V block and an even "
                          "page size (page_tokens=%d%s)",
                          kv->page_tokens, kv->v_shares_k ? ", V shares K" : "");
    if (kv->k_tiles && (kv->v_shares_k || kv->page_tokens % 16 || kv->d_k % 2))
        return ws_err_set(err, WS_EINVAL,
                          "attention: K in tiles needs a separate V block, a page size that is a "
                          "multiple of 16 and an even d_k (page_tokens=%d, d_k=%d%s)",
                          kv->page_tokens, kv->d_k, kv->v_shares_k ? ", V shares K" : "");
    if (!isfinite(p->scale))
        return ws_err_set(err, WS_EINVAL, "attention: scale is not finite");
    if (p->n_seqs < 0)
        return ws_err_set(err, WS_EINVAL, "attention: negative sequence count");
    if (p->n_seqs > 0 && (!p->seqs || !p->q || !p->o || !p->lse))
        return ws_err_set(err, WS_EINVAL, "attention: NULL seqs, q, o or lse");
    int max_tokens = 0; /* longest sequence with a sparse list: the bitmap's size */
    for (int s = 0; s < p->n_seqs; s++) {
        const ws_attn_seq *sq = &p->seqs[s];
        if (sq->n_tokens < 0)
            return ws_err_set(err, WS_EINVAL, "attention: sequence %d has %d tokens", s,
                              sq->n_tokens);
        int n_pages = (sq->n_tokens + kv->page_tokens - 1) / kv->page_tokens;
        if (n_pages && !sq->pages)
            return ws_err_set(err, WS_EINVAL, "attention: sequence %d has no page table", s);
        for (int i = 0; i < n_pages; i++)
            if (!sq->pages[i])
                return ws_err_set(err, WS_EINVAL, "attention: sequence %d page %d is NULL", s, i);
        if (!sq->sel)
            continue;
        if (sq->n_sel < 0)
            return ws_err_set(err, WS_EINVAL, "attention: sequence %d: negative sparse count", s);
        if (sq->n_sel > 0 && sq->n_tokens > max_tokens)
            max_tokens = sq->n_tokens;
    }
    if (max_tokens == 0)
        return 0;
    /* Sparse lists: in range and no index twice. One bitmap for every sequence, cleared
     * after each by unsetting the bits its list set. */
    unsigned char *seen = calloc((size_t)max_tokens / 8 + 1, 1);
    if (!seen)
        return ws_err_set(err, WS_ENOMEM, "attention: out of memory");
    int rc = 0;
    for (int s = 0; s < p->n_seqs && !rc; s++) {
        const ws_attn_seq *sq = &p->seqs[s];
        if (!sq->sel || sq->n_sel <= 0)
            continue;
        int i = 0;
        for (; i < sq->n_sel; i++) {
            int32_t t = sq->sel[i];
            if (t < 0 || t >= sq->n_tokens) {
                rc = ws_err_set(err, WS_EINVAL,
                                "attention: sequence %d: sparse index %d outside [0, %d)", s,
                                (int)t, sq->n_tokens);
                break;
            }
            if (seen[t >> 3] & (1u << (t & 7))) {
                rc = ws_err_set(err, WS_EINVAL,
                                "attention: sequence %d: sparse index %d listed twice", s, (int)t);
                break;
            }
            seen[t >> 3] |= (unsigned char)(1u << (t & 7));
        }
        for (int k = 0; k < i; k++)
            seen[sq->sel[k] >> 3] = 0;
    }
    free(seen);
    return rc;
}

double ws_attn_kv_bytes(const ws_attn_problem *p)
{
    const ws_kv_layout *kv = &p->kv;
    double per_tok = (double)kv->n_kv_heads *
                     (kv->d_k + (kv->v_shares_k ? 0 : kv->d_v)) * ws_dtype_size(kv->dtype);
    double tokens = 0;
    for (int s = 0; s < p->n_seqs; s++)
        tokens += p->seqs[s].sel ? p->seqs[s].n_sel : p->seqs[s].n_tokens;
    return tokens * per_tok;
}

static double load(const void *page, size_t off, ws_dtype t)
{
    uint16_t h = ((const uint16_t *)page)[off];
    return t == WS_DT_BF16 ? ws_bf16_to_f32(h) : ws_fp16_to_f32(h);
}

int ws_attn_ref(const ws_attn_problem *p, double *o_ref, double *lse_ref, ws_err *err)
{
    int rc = ws_attn_validate(p, err);
    if (rc)
        return rc;
    const ws_kv_layout *kv = &p->kv;
    const int P = kv->page_tokens, dk = kv->d_k, dv = kv->d_v, nq = p->n_q_heads;
    const int group = nq / kv->n_kv_heads;
    int max_tok = 1;
    for (int s = 0; s < p->n_seqs; s++)
        if (p->seqs[s].n_tokens > max_tok)
            max_tok = p->seqs[s].n_tokens;
    double *score = malloc(sizeof(double) * (size_t)max_tok);
    if (!score)
        return ws_err_set(err, WS_ENOMEM, "attention reference: out of memory");
    for (int s = 0; s < p->n_seqs; s++) {
        const ws_attn_seq *sq = &p->seqs[s];
        int n = sq->sel ? sq->n_sel : sq->n_tokens;
        for (int h = 0; h < nq; h++) {
            const float *q = p->q + ((size_t)s * nq + h) * dk;
            double *o = o_ref + ((size_t)s * nq + h) * dv;
            const int kvh = h / group;
            memset(o, 0, sizeof(double) * (size_t)dv);
            if (n == 0) {
                lse_ref[(size_t)s * nq + h] = -INFINITY;
                continue;
            }
            double mx = -INFINITY;
            for (int i = 0; i < n; i++) {
                int t = sq->sel ? sq->sel[i] : i;
                const void *pg = sq->pages[t / P];
                double dot = 0;
                for (int d = 0; d < dk; d++)
                    dot += (double)q[d] * load(pg, ws_kv_k_elem(kv, kvh, t % P, d), kv->dtype);
                score[i] = dot * p->scale;
                if (score[i] > mx)
                    mx = score[i];
            }
            double sum = 0;
            for (int i = 0; i < n; i++) {
                int t = sq->sel ? sq->sel[i] : i;
                const void *pg = sq->pages[t / P];
                double w = exp(score[i] - mx);
                sum += w;
                for (int d = 0; d < dv; d++)
                    o[d] += w * load(pg, ws_kv_v_elem(kv, kvh, t % P, d), kv->dtype);
            }
            for (int d = 0; d < dv; d++)
                o[d] /= sum;
            lse_ref[(size_t)s * nq + h] = mx + log(sum);
        }
    }
    free(score);
    return 0;
}

void ws_attn_merge(const float *o_a, const float *lse_a, const float *o_b, const float *lse_b,
                   float *o_out, float *lse_out, int n_rows, int d_v)
{
    for (int r = 0; r < n_rows; r++) {
        const float la = lse_a[r], lb = lse_b[r];
        const float *a = o_a + (size_t)r * d_v, *b = o_b + (size_t)r * d_v;
        float *out = o_out + (size_t)r * d_v;
        float m = la > lb ? la : lb;
        if (m == -INFINITY) { /* both empty */
            for (int d = 0; d < d_v; d++)
                out[d] = 0.0f;
            lse_out[r] = -INFINITY;
            continue;
        }
        /* exp(-inf - m) = 0, so an empty side drops out without a branch. */
        float wa = expf(la - m), wb = expf(lb - m), sum = wa + wb;
        wa /= sum;
        wb /= sum;
        for (int d = 0; d < d_v; d++)
            out[d] = wa * a[d] + wb * b[d];
        lse_out[r] = m + logf(sum);
    }
}
