/* attn_cpu: the CPU decode-attention kernels (GQA/MHA, MLA with absorbed weights, sparse
 * top-k token lists) over the paged KV layout of attn.h, for bf16 and fp16 KV, with
 * run-time instruction-set dispatch and split-K work sharing over a ws_pool.
 *
 * Work is cut into (sequence, KV head, token chunk) tasks, each leaving (O, lse), merged by
 * lse, so that one long sequence at batch 1 still keeps every worker busy; MLA's head groups
 * are cut into slices too, and on a pool over several NUMA nodes a chunk ends where its
 * pages change node and runs on a thread of that node. The result equals ws_attn_ref within
 * float rounding (tests/test_attn_cpu.c).
 *
 * Instruction paths (one binary, chosen at run time from cpu_features): scalar, avx2,
 * avx512, avx512bf16 (VDPBF16PS) and amx (AMX-BF16 tiles, attn_cpu_amx.c). Precision
 * (ws_attn_prec): exact attends q as given (fp32); bf16 takes q as bf16, as GPU kernels do.
 * ws_isa_best() prefers amx, then avx512bf16 where a run-time probe finds VDPBF16PS's
 * products faster than FMA's (ws_attn_cpu_dp_gain >= DP_GAIN_MIN), then avx512,
 * avx512bf16, avx2, scalar; WS_ISA_AUTO takes it, WRITESCOPE_ISA overrides it, and a path
 * this CPU lacks is an error. The task split and each path and precision in detail:
 * docs/design.md ("CPU decode attention"); why: docs/notes/cpu-attention.md.
 *
 * Shapes served: d_k and d_v multiples of 16 up to WS_ATTN_MAX_HEAD_DIM, group sizes
 * (query heads per KV head) 1..WS_ATTN_CPU_MAX_GROUP. Anything else is WS_EUNSUP.
 * Callers: the calibrator, the runtime's CPU half, `writescope bench attn-cpu`, tests. */
#ifndef WS_ATTN_CPU_H
#define WS_ATTN_CPU_H

#include "attn.h"
#include "pool.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_ATTN_CPU_MAX_GROUP 128 /* query heads per KV head the kernels accept */
#define WS_ATTN_CPU_BLOCK 16      /* tokens per inner block (scores, softmax, p.V) */

typedef enum {
    WS_ISA_AUTO = 0,       /* the best the CPU supports (or WRITESCOPE_ISA) */
    WS_ISA_SCALAR = 1,     /* portable C */
    WS_ISA_AVX2 = 2,       /* AVX2 + FMA + F16C */
    WS_ISA_AVX512 = 3,     /* AVX-512 F + BW + VL */
    WS_ISA_AVX512_BF16 = 4,/* AVX-512 + AVX512_BF16 (VDPBF16PS) */
    WS_ISA_AMX = 5,        /* AVX-512 + AMX-BF16 tiles */
    WS_ISA_COUNT
} ws_isa;

/* Precision of the attention's inputs and products. */
typedef enum {
    WS_PREC_AUTO = 0,  /* $WRITESCOPE_PRECISION if set, else WS_PREC_DEFAULT */
    WS_PREC_EXACT = 1, /* q as given (fp32); bf16 products on hi + lo halves of q and p */
    WS_PREC_BF16 = 2,  /* q rounded to bf16 on every path; p to bf16 on the VDPBF16PS loops
                        * (o within 2^-9 max |v| of the rounded q's attention) */
    WS_PREC_COUNT
} ws_attn_prec;
/* The default: bf16, what a runtime whose GPU half takes bf16 q wants (both halves attend
 * the same q), within the 2e-3 bound on every shape tested and the faster (why:
 * docs/notes/cpu-attention.md). */
#define WS_PREC_DEFAULT WS_PREC_BF16
/* Least ws_attn_cpu_dp_gain (VDPBF16PS products per second over FMA's) at which
 * ws_isa_best prefers avx512bf16 to avx512: at 2, the exact mode's products take as long
 * as the FMA loop's (less its splits) and the bf16 mode's half of that. */
#define DP_GAIN_MIN 1.5

/* "auto", "exact", "bf16". */
const char *ws_attn_prec_name(ws_attn_prec prec);
/* 0 and *out, or -1 if unknown. */
int ws_attn_prec_parse(const char *name, ws_attn_prec *out);
/* WS_PREC_AUTO -> $WRITESCOPE_PRECISION if set, else WS_PREC_DEFAULT; unknown is WS_EUNSUP. */
int ws_attn_prec_resolve(ws_attn_prec want, ws_attn_prec *out, ws_err *err);

/* "auto", "scalar", "avx2", "avx512", "avx512bf16", "amx". */
const char *ws_isa_name(ws_isa isa);
/* Parses a name as above; 0 and *out, or -1 if unknown. */
int ws_isa_parse(const char *name, ws_isa *out);
/* 1 if this CPU (and OS) can run the path; WS_ISA_AUTO and scalar are always supported. */
int ws_isa_supported(ws_isa isa);
/* The fastest supported path, ignoring WRITESCOPE_ISA. */
ws_isa ws_isa_best(void);
/* Resolves a request: WS_ISA_AUTO -> $WRITESCOPE_ISA if set, else ws_isa_best(); an
 * unknown name or an unsupported path is WS_EUNSUP with a message. */
int ws_isa_resolve(ws_isa want, ws_isa *out, ws_err *err);

/* The path that actually serves a problem of this shape when `isa` (resolved, not AUTO) is
 * asked for in precision `prec` (AUTO: as ws_attn_prec_resolve): amx falls back to avx512
 * for fp16 KV and shapes the tiles do not serve, avx512bf16 to avx512 for fp16 KV and for
 * GQA in the exact precision (the fused FMA loop, attn_cpu_fma.h); others serve as asked.
 * For reports. */
ws_isa ws_attn_cpu_path(const ws_kv_layout *kv, int n_q_heads, ws_isa isa, ws_attn_prec prec);

/* Which block loop serves a problem of this shape and layout on path `isa` (resolved, not
 * AUTO) in precision `prec`: "amx" (attn_cpu_amx.h), "dpbf16" (the VDPBF16PS loops), "fma"
 * (the fused FMA loop, attn_cpu_fma.h) or "generic" (fp32 blocks; the scalar path always). */
const char *ws_attn_cpu_loop_name(const ws_kv_layout *kv, int n_q_heads, ws_isa isa,
                                  ws_attn_prec prec);
/* 1 if that loop also rounds p to bf16 (in the bf16 precision: the VDPBF16PS loops, and the
 * AMX loop where its tiles take bf16 products, ws_attn_cpu_amx_p_bf16); every loop rounds q
 * in the bf16 precision. For reports and tests. */
int ws_attn_cpu_p_bf16(const ws_kv_layout *kv, int n_q_heads, ws_isa isa, ws_attn_prec prec);

/* The V layout the CPU region should be written in for this shape and path (resolved):
 * 1 (token pairs, kv.v_pairs) when the amx path serves it with a separate V block and an
 * even page size (P.V then multiplies V as stored: half the tile products of rows) and
 * no single-token lists (token_lists: a token's pair row brings its neighbour's values
 * too), or when a vector path (avx2, avx512, avx512bf16) serves it with K in tiles
 * (ws_attn_cpu_k_tiles: the fused FMA loop of attn_cpu_fma.h reads both); 0 (rows)
 * otherwise. Every path reads both layouts; the generic loop converts pairs in plain C. */
int ws_attn_cpu_v_pairs(const ws_kv_layout *kv, int n_q_heads, ws_isa isa, int token_lists);

/* Largest group (query heads per KV head) whose K the amx path reads in tiles. */
#define WS_ATTN_CPU_AMX_TILE_GROUP 8
/* The K layout the CPU region should be written in for this shape and path (resolved): 1
 * (tiles of 16 tokens, kv.k_tiles) when the amx path or a vector path serves it with a
 * separate V block, a page size that is a multiple of 16 and at most
 * WS_ATTN_CPU_AMX_TILE_GROUP (amx) or WS_ATTN_CPU_FMA_GROUP (vector paths) query heads per
 * KV head: the scores then come per head, 16
 * tokens to a row, with no transpose (amx: 3-4% of the loop's time for Qwen3's shape from
 * memory) and no horizontal sums (the FMA loop); 0 (rows) otherwise, and when token_lists
 * is set (the workload attends sparse lists of single tokens: a token's K is spread over
 * its tile's 64 lines, so such lists would read whole tiles, 3x slower in bench runs).
 * Every path reads both layouts; the generic loop converts tiles in C. */
int ws_attn_cpu_k_tiles(const ws_kv_layout *kv, int n_q_heads, ws_isa isa, int token_lists);

/* Decode attention: validates p (ws_attn_validate plus the shapes above), then fills
 * p->o and p->lse. pool may be NULL (runs on the calling thread). */
int ws_attn_cpu(const ws_attn_problem *p, ws_pool *pool, ws_isa isa, ws_err *err);
/* The same with a precision (WS_PREC_AUTO resolves as ws_attn_prec_resolve); ws_attn_cpu
 * is this with WS_PREC_AUTO. */
int ws_attn_cpu_prec(const ws_attn_problem *p, ws_pool *pool, ws_isa isa, ws_attn_prec prec,
                     ws_err *err);

/* Batched merge of n_parts partial states over disjoint token sets, per row r < n_rows:
 * parts are o_parts[k][n_rows][d_v], lse_parts[k][n_rows]; empty parts (lse = -inf)
 * drop out, all empty gives o = 0, lse = -inf. Subtracts the maximum lse first, so it is
 * stable for any magnitudes. Equivalent to folding ws_attn_merge over the parts. */
void ws_attn_merge_parts(const float *o_parts, const float *lse_parts, int n_parts,
                         int n_rows, int d_v, float *o_out, float *lse_out);

#ifdef __cplusplus
}
#endif
#endif
