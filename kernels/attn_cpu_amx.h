/* attn_cpu_amx: the AMX-BF16 block loop of the CPU attention kernel (internal to kernels/;
 * the driver attn_cpu.c calls it, membw.c times its instruction for the peak). See
 * attn_cpu_amx.c for the tiling. */
#ifndef WS_ATTN_CPU_AMX_H
#define WS_ATTN_CPU_AMX_H

#include <stddef.h>

#include "attn.h"

/* Asks Linux for the AMX tile state (once per process); 1 if granted. */
int ws_attn_cpu_amx_enable(void);
/* 1 if the AMX loop serves this shape: bf16 KV, d_k and d_v multiples of 32, group <= 8
 * or (K in rows) a multiple of 8. */
int ws_attn_cpu_amx_fits(const ws_kv_layout *kv, int G);
/* Per-thread scratch bytes the AMX loop needs. */
size_t ws_attn_cpu_amx_scratch(const ws_kv_layout *kv, int G);
/* 1 if the bf16 products (ws_attn_cpu_amx_attend's bf16) halve the products of this shape,
 * rounding p to bf16: pairs of head groups, or one group on K tiles. One group on K rows
 * keeps p's hi + lo rows (its score tiles hold heads as columns, which fewer do not speed). */
int ws_attn_cpu_amx_p_bf16(const ws_kv_layout *kv, int G);
/* Attends items [i0, i1) of sequence s for G query heads of KV head kvh, the first being
 * query head qhead of the sequence (kvh x group size for the whole group): o [G][d_v],
 * lse [G]; scratch of ws_attn_cpu_amx_scratch bytes, 64-byte aligned, whose first 64 bytes
 * are zero when a call (a set of queries) begins: they name the queries whose packed
 * tiles the scratch holds, so later chunks of the same sequence and KV head on the same
 * scratch skip the packing. Zero them again whenever the query values may change.
 * bf16: q holds bf16 values; where ws_attn_cpu_amx_p_bf16, the tiles carry q's and p's bf16
 * values only (half the products), else q's zero lo halves too and p's hi + lo. */
typedef void ws_attn_cpu_amx_attend_fn(const ws_attn_problem *p, int bf16, int s, int kvh,
                                       int qhead, int i0, int i1, int G, float *o, float *lse,
                                       void *scratch);
ws_attn_cpu_amx_attend_fn ws_attn_cpu_amx_attend;
/* For tests on CPUs without AMX: fn (the same loop on software tiles, tests/amx/tile_emu.c)
 * serves ws_attn_cpu_amx_attend and the amx path counts as supported where AVX512-BF16 is;
 * NULL: the hardware's again. Never for timing: it runs ~100x slower than the vector loops. */
void ws_attn_cpu_amx_emulate(ws_attn_cpu_amx_attend_fn *fn);
/* Runs `iters` x 4 TDPBF16PS on the calling thread; returns the useful flops done. */
double ws_attn_cpu_amx_peak_flops(int iters);

#endif
