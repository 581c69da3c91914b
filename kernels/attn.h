/* attn: the contract every decode-attention implementation in the project keeps (the
 * CPU kernels, the CUDA kernels and their fp64 reference): the paged KV layout, the
 * problem description, the output (O fp32, lse fp32 natural log) and the exact merge
 * of partial results.
 *
 * Decode attention: one new query token per sequence. Each sequence's KV for one layer is
 * a list of pages (a page table) of P tokens each; the last page may be partly filled.
 * Page layout (the same bytes in the XFER region and on the GPU, so a page is one
 * contiguous DMA): a K block [n_kv_heads][P][d_k] followed, unless V shares K's storage, by
 * a V block [n_kv_heads][P][d_v], elements of the KV dtype (bf16 or fp16). The CPU region
 * may store the V block in token pairs instead ([n_kv_heads][P/2][d_v][2], kv.v_pairs)
 * and the K block in tiles of 16 tokens ([n_kv_heads][P/16][d_k/2][16][2], kv.k_tiles),
 * the orders the AMX path multiplies as stored; only CPU kernels accept them.
 *
 *   GQA/MHA: n_kv_heads >= 1, group = n_q_heads / n_kv_heads query heads read each KV head;
 *            d_k = d_v = head_dim, separate V block.
 *   MLA (absorbed weights): one latent "head": n_kv_heads = 1, d_k = kv_lora_rank + rope
 *            (576), d_v = kv_lora_rank (512), v_shares_k = 1: V of a token is the first
 *            d_v elements of its K row. Queries are the absorbed [q_nope W_uk ; q_rope].
 *   Sparse:  a sequence may list the token indices to attend (`sel`); indices are in
 *            [0, n_tokens), in any order, each at most once (duplicates are an error:
 *            attending a token twice would silently change the softmax).
 *
 * Outputs per (sequence, query head): o[d_v] = sum_t softmax_t(scale * q.k_t) v_t and
 * lse = log sum_t exp(scale * q.k_t) (natural log). A sequence with nothing to attend has
 * o = 0 and lse = -inf, which merges as a no-op. Callers: kernels (CPU, CUDA), calibrator,
 * runtime, tests. */
#ifndef WS_ATTN_H
#define WS_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "ws_dtype.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_ATTN_MAX_HEAD_DIM 1024 /* largest d_k / d_v any kernel accepts */

typedef struct ws_kv_layout {
    int page_tokens; /* P, tokens per page (> 0) */
    int n_kv_heads;  /* KV heads stored per page (1 for MLA) */
    int d_k, d_v;    /* key and value widths in elements */
    int v_shares_k;  /* 1: V is the first d_v elements of each K row (MLA) */
    ws_dtype dtype;  /* WS_DT_BF16 or WS_DT_FP16 */
    int v_pairs;     /* 1: V block in token pairs (see ws_kv_v_elem); needs even P and a
                      * separate V block. The CPU region's layout for the AMX path. */
    int k_tiles;     /* 1: K block in tiles of 16 tokens (see ws_kv_k_elem); needs P a
                      * multiple of 16, d_k even and a separate V block. The CPU region's
                      * layout for the AMX path with up to 8 query heads per KV head. */
} ws_kv_layout;

typedef struct ws_attn_seq {
    const void *const *pages; /* page table: ceil(n_tokens / P) page addresses */
    int n_tokens;             /* valid tokens in the sequence (>= 0) */
    const int32_t *sel;       /* sparse: indices of the tokens to attend; NULL = all */
    int n_sel;                /* entries in sel */
    const int *page_nodes;    /* optional: the NUMA node (OS number) each page lies on, as
                               * the CPU region placed it; NULL = unknown. The CPU kernel
                               * runs a chunk on its pages' node (GPU kernels ignore it). */
} ws_attn_seq;

typedef struct ws_attn_problem {
    ws_kv_layout kv;
    int n_q_heads;            /* multiple of kv.n_kv_heads */
    float scale;              /* softmax scale, usually 1/sqrt(qk dim) */
    int n_seqs;
    const ws_attn_seq *seqs;  /* [n_seqs] */
    const float *q;           /* [n_seqs][n_q_heads][d_k] */
    float *o;                 /* [n_seqs][n_q_heads][d_v] out */
    float *lse;               /* [n_seqs][n_q_heads] out, natural log */
} ws_attn_problem;

/* Bytes of one page for this layout. */
size_t ws_kv_page_bytes(const ws_kv_layout *kv);
/* Element offsets inside a page of K row (head h, token t; K in rows, k_tiles = 0, or, with
 * k_tiles, the start of the tile holding token t when t is a multiple of 16) and of its V
 * row (V in rows, v_pairs = 0). */
static inline size_t ws_kv_k_off(const ws_kv_layout *kv, int h, int t)
{
    return ((size_t)h * (size_t)kv->page_tokens + (size_t)t) * (size_t)kv->d_k;
}
static inline size_t ws_kv_v_off(const ws_kv_layout *kv, int h, int t)
{
    if (kv->v_shares_k)
        return ws_kv_k_off(kv, h, t);
    return (size_t)kv->n_kv_heads * (size_t)kv->page_tokens * (size_t)kv->d_k +
           ((size_t)h * (size_t)kv->page_tokens + (size_t)t) * (size_t)kv->d_v;
}
/* V in token pairs (v_pairs = 1): tokens 2u and 2u + 1 of head h share a pair row of
 * 2 d_v elements, [d_v][2]: element d of token t sits at pair row t / 2, slot 2 d + t % 2
 * (the VNNI order of a B tile, so the AMX path multiplies P by V as stored). Offset of
 * the pair row holding token t: */
static inline size_t ws_kv_v_pair_off(const ws_kv_layout *kv, int h, int t)
{
    return (size_t)kv->n_kv_heads * (size_t)kv->page_tokens * (size_t)kv->d_k +
           ((size_t)h * (size_t)kv->page_tokens + (size_t)(t & ~1)) * (size_t)kv->d_v;
}
/* K in tiles (k_tiles = 1): tokens 16b..16b + 15 of head h share a tile of 16 d_k
 * elements, d_k / 2 rows of [16 tokens][2]: element d of token t sits at row d / 2, slot
 * 2 (t % 16) + d % 2 (the VNNI order of a B tile holding K transposed, so the AMX path
 * multiplies q by K as stored and gets the scores per head, 16 tokens to a row). Offset of
 * element d of token t in either layout: */
static inline size_t ws_kv_k_elem(const ws_kv_layout *kv, int h, int t, int d)
{
    if (kv->k_tiles)
        return ws_kv_k_off(kv, h, t & ~15) + (size_t)(d >> 1) * 32 + (size_t)(t & 15) * 2 +
               (size_t)(d & 1);
    return ws_kv_k_off(kv, h, t) + (size_t)d;
}
/* How K and V are stored, for reports: K "rows" or "tiles"; V "in K" (v_shares_k), "pairs"
 * or "rows". */
static inline const char *ws_kv_k_layout_name(const ws_kv_layout *kv)
{
    return kv->k_tiles ? "tiles" : "rows";
}
static inline const char *ws_kv_v_layout_name(const ws_kv_layout *kv)
{
    return kv->v_shares_k ? "in K" : kv->v_pairs ? "pairs" : "rows";
}
/* Element offset of V element d of token t, head h, in either layout. */
static inline size_t ws_kv_v_elem(const ws_kv_layout *kv, int h, int t, int d)
{
    if (kv->v_pairs)
        return ws_kv_v_pair_off(kv, h, t) + 2 * (size_t)d + (size_t)(t & 1);
    return ws_kv_v_off(kv, h, t) + (size_t)d;
}

/* Checks shapes, dtype, pointers and sparse lists (range, duplicates); 0 or WS_EINVAL /
 * WS_EUNSUP with a message. Every kernel calls this before touching memory. */
int ws_attn_validate(const ws_attn_problem *p, ws_err *err);
/* Total KV bytes the problem reads once (dense: all tokens; sparse: selected tokens). */
double ws_attn_kv_bytes(const ws_attn_problem *p);

/* The fp64 reference: straightforward, no blocking, no SIMD; o_ref [n_seqs][n_q][d_v],
 * lse_ref [n_seqs][n_q] in double. The oracle for every CPU and CUDA kernel. */
int ws_attn_ref(const ws_attn_problem *p, double *o_ref, double *lse_ref, ws_err *err);

/* Merge of partial attention states over disjoint token sets, per row r < n_rows:
 * lse = log(exp(lse_a) + exp(lse_b)) (stable), o = e^(lse_a-lse) o_a + e^(lse_b-lse) o_b.
 * A side with lse = -inf contributes nothing; both empty gives o = 0, lse = -inf.
 * o_out/lse_out may alias the a side. Rows are d_v floats apart. */
void ws_attn_merge(const float *o_a, const float *lse_a, const float *o_b, const float *lse_b,
                   float *o_out, float *lse_out, int n_rows, int d_v);

#ifdef __cplusplus
}
#endif
#endif
