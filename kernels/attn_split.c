/* attn_split: split-K plan and its CPU model (see attn_split.h). */
#include "attn_split.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int seq_len(const ws_attn_seq *s) { return s->sel ? s->n_sel : s->n_tokens; }

int ws_attn_split_chunk_tokens(const ws_attn_problem *p, int blocks_per_chunk,
                               int target_blocks, int align, int min_tokens)
{
    if (align < 1)
        align = 1;
    double total = 0;
    int longest = 0;
    for (int s = 0; s < p->n_seqs; s++) {
        int n = seq_len(&p->seqs[s]);
        total += n;
        if (n > longest)
            longest = n;
    }
    if (blocks_per_chunk < 1)
        blocks_per_chunk = 1;
    /* Chunks wanted over the whole batch so that chunks x blocks_per_chunk ~ target. */
    double chunks = (double)target_blocks / blocks_per_chunk;
    double len = chunks > 1 ? ceil(total / chunks) : total;
    if (len < min_tokens)
        len = min_tokens;
    if (len > longest)
        len = longest; /* one chunk for the longest sequence is the coarsest useful split */
    if (len < 1)
        len = 1;
    long t = ((long)len + align - 1) / align * align;
    return t > 0x40000000L ? 0x40000000 : (int)t;
}

int ws_attn_split(const ws_attn_problem *p, int chunk_tokens, ws_attn_chunk *out, int cap,
                  int *seq_first, int *seq_count)
{
    int n_out = 0;
    for (int s = 0; s < p->n_seqs; s++) {
        int n = seq_len(&p->seqs[s]);
        if (seq_first)
            seq_first[s] = n_out;
        int c = 0;
        for (int b = 0; b < n; b += chunk_tokens, c++) {
            if (n_out >= cap)
                return -1;
            out[n_out].seq = s;
            out[n_out].begin = b;
            out[n_out].end = n - b > chunk_tokens ? b + chunk_tokens : n;
            n_out++;
        }
        if (seq_count)
            seq_count[s] = c;
    }
    return n_out;
}

void ws_attn_reduce_row(const float *o_parts, const float *lse_parts, int n, int d_v,
                        float *o, float *lse)
{
    float m = -INFINITY;
    for (int i = 0; i < n; i++)
        if (lse_parts[i] > m)
            m = lse_parts[i];
    if (m == -INFINITY) {
        for (int d = 0; d < d_v; d++)
            o[d] = 0.0f;
        *lse = -INFINITY;
        return;
    }
    float sum = 0;
    for (int i = 0; i < n; i++)
        sum += expf(lse_parts[i] - m);
    for (int d = 0; d < d_v; d++) {
        float acc = 0;
        for (int i = 0; i < n; i++)
            acc += expf(lse_parts[i] - m) * o_parts[(size_t)i * d_v + d];
        o[d] = acc / sum;
    }
    *lse = m + logf(sum);
}

int ws_attn_splitk_ref(const ws_attn_problem *p, int chunk_tokens, ws_err *err)
{
    int rc = ws_attn_validate(p, err);
    if (rc)
        return rc;
    if (chunk_tokens < 1)
        return ws_err_set(err, WS_EINVAL, "split-K reference: chunk length %d", chunk_tokens);
    const int nq = p->n_q_heads, dv = p->kv.d_v;
    int n_chunks = 0, longest = 0;
    for (int s = 0; s < p->n_seqs; s++) {
        int n = seq_len(&p->seqs[s]);
        n_chunks += (n + chunk_tokens - 1) / chunk_tokens;
        if (n > longest)
            longest = n;
    }
    ws_attn_chunk *chunks = malloc(sizeof *chunks * (size_t)(n_chunks + 1));
    int *first = malloc(sizeof(int) * (size_t)(p->n_seqs + 1));
    int *count = malloc(sizeof(int) * (size_t)(p->n_seqs + 1));
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)(chunk_tokens < longest ? chunk_tokens : longest + 1));
    float *po = malloc(sizeof(float) * (size_t)(n_chunks + 1) * nq * dv);
    float *pl = malloc(sizeof(float) * (size_t)(n_chunks + 1) * nq);
    double *od = malloc(sizeof(double) * (size_t)nq * dv);
    double *ld = malloc(sizeof(double) * (size_t)nq);
    float *row_o = malloc(sizeof(float) * (size_t)(n_chunks + 1) * dv);
    float *row_l = malloc(sizeof(float) * (size_t)(n_chunks + 1));
    if (!chunks || !first || !count || !idx || !po || !pl || !od || !ld || !row_o || !row_l) {
        rc = ws_err_set(err, WS_ENOMEM, "split-K reference: out of memory");
        goto out;
    }
    ws_attn_split(p, chunk_tokens, chunks, n_chunks, first, count);
    /* Each chunk is a one-sequence sparse problem over its token indices. */
    for (int c = 0; c < n_chunks; c++) {
        const ws_attn_seq *sq = &p->seqs[chunks[c].seq];
        ws_attn_seq sub = *sq;
        int n = chunks[c].end - chunks[c].begin;
        for (int i = 0; i < n; i++)
            idx[i] = sq->sel ? sq->sel[chunks[c].begin + i] : chunks[c].begin + i;
        sub.sel = idx;
        sub.n_sel = n;
        ws_attn_problem one = *p;
        one.n_seqs = 1;
        one.seqs = &sub;
        one.q = p->q + (size_t)chunks[c].seq * nq * p->kv.d_k;
        rc = ws_attn_ref(&one, od, ld, err);
        if (rc)
            goto out;
        for (size_t i = 0; i < (size_t)nq * dv; i++)
            po[(size_t)c * nq * dv + i] = (float)od[i];
        for (int h = 0; h < nq; h++)
            pl[(size_t)c * nq + h] = (float)ld[h];
    }
    for (int s = 0; s < p->n_seqs; s++)
        for (int h = 0; h < nq; h++) {
            for (int i = 0; i < count[s]; i++) {
                int c = first[s] + i;
                memcpy(row_o + (size_t)i * dv, po + ((size_t)c * nq + h) * dv,
                       sizeof(float) * (size_t)dv);
                row_l[i] = pl[(size_t)c * nq + h];
            }
            ws_attn_reduce_row(row_o, row_l, count[s], dv, p->o + ((size_t)s * nq + h) * dv,
                               p->lse + (size_t)s * nq + h);
        }
out:
    free(chunks);
    free(first);
    free(count);
    free(idx);
    free(po);
    free(pl);
    free(od);
    free(ld);
    free(row_o);
    free(row_l);
    return rc;
}
