/* attn_cpu_fma: the fused FMA block loop of the CPU attention kernel, in AVX-512 and AVX2
 * forms, for the layout the CPU region is written in for the vector paths (internal to
 * kernels/; the driver attn_cpu.c calls it per task on the avx2, avx512 and avx512bf16
 * paths, and on amx for what the tiles do not serve, e.g. fp16 KV). K in tiles of 16
 * tokens (kv.k_tiles) gives the scores per head, a vector of tokens at a time, with no
 * horizontal sums; V in token pairs (kv.v_pairs) gives two tokens' values of a vector of
 * columns per load. Both become fp32 by a shift and a mask (bf16) or a narrowing and a
 * conversion (fp16) and feed fp32 FMAs: as accurate as the generic block loop. Other GQA
 * layouts (K or V in rows: sparse token lists) are gathered into tiles and pairs a
 * sub-block at a time. */
#ifndef WS_ATTN_CPU_FMA_H
#define WS_ATTN_CPU_FMA_H

#include <stddef.h>

#include "attn.h"

/* Most query heads per KV head the GQA loop serves (8 per register pass, two passes). */
#define WS_ATTN_CPU_FMA_GROUP 16

/* 1 if the loop serves this shape: GQA (separate V block) in any layout (K in tiles needs
 * pages of a multiple of 16 tokens), bf16 or fp16, group 1..WS_ATTN_CPU_FMA_GROUP; or MLA
 * (V inside K's rows), bf16, d_k and d_v multiples of 32, any group. */
int ws_attn_cpu_fma_fits(const ws_kv_layout *kv, int G);
/* Per-thread scratch bytes the loop needs (64-byte aligned scratch). */
size_t ws_attn_cpu_fma_scratch(const ws_kv_layout *kv, int G);
/* Attends items [i0, i1) of sequence s for G query heads of KV head kvh, the first being
 * query head qhead of the sequence (kvh x group size for the whole group): o [G][d_v],
 * lse [G] (natural log; o = 0 and lse = -inf when there is nothing to attend), in the
 * AVX-512 form when wide is 1, else the AVX2 one (the CPU must run it). */
void ws_attn_cpu_fma_attend(const ws_attn_problem *p, int wide, int s, int kvh, int qhead, int i0,
                            int i1, int G, float *o, float *lse, void *scratch);

/* The VDPBF16PS loops (the avx512bf16 path, bf16 KV; the CPU must have AVX512_BF16): MLA
 * rows (the shapes ws_attn_cpu_fma_fits serves) with exact = 1, q scale and p as bf16 hi +
 * lo halves (two products each, as accurate as the FMA loop), with exact = 0 q and p as
 * bf16 (one product each; the caller passes q already rounded, and a rounding of p moves o
 * by at most 2^-9 max |v|); GQA (the layouts ws_attn_cpu_fma_fits serves) with exact = 0
 * only, K tiles and V pair rows times broadcast bf16 pairs of q and p (exact GQA stays on
 * the FMA loop, faster than hi + lo halves). */
int ws_attn_cpu_dp_fits(const ws_kv_layout *kv, int G, int exact);
/* Per-thread scratch bytes for tasks of n_kvh KV heads (GQA; 1 for MLA). */
size_t ws_attn_cpu_dp_scratch(const ws_kv_layout *kv, int G, int n_kvh);
/* Attends items [i0, i1) of sequence s for G query heads from query head qhead on, of KV
 * head kvh; GQA may take n_kvh > 1 KV heads at once, whole groups (qhead = kvh G, G the
 * group size), walking the items page by page, each page's heads in turn: o [n_kvh][G][d_v],
 * lse [n_kvh][G]. MLA takes n_kvh = 1. */
void ws_attn_cpu_dp_attend(const ws_attn_problem *p, int exact, int s, int kvh, int n_kvh,
                           int qhead, int i0, int i1, int G, float *o, float *lse, void *scratch);
/* The run-time probe: products per second of VDPBF16PS (zmm, two per lane) over those of
 * fp32 FMA (zmm) on the calling thread, best of 5 short tries, measured once per process.
 * The CPU must have AVX512_BF16. */
double ws_attn_cpu_dp_gain(void);

#endif
