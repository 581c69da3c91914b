/* attn_split: the split-K ("flash-decoding") plan of the GPU decode attention and its CPU
 * model. A sequence's tokens are cut into chunks of chunk_tokens; each chunk is attended
 * alone (one partial o, lse per query head) and the partials of a sequence are reduced
 * with the lse rule of attn.h. The CUDA backend builds its chunk list with exactly these
 * functions, and tests compare ws_attn_splitk_ref (fp64 partials rounded to float, the
 * same reduction as the GPU's second pass) with the unsplit fp64 reference, so chunk
 * boundaries and the reduction are verified on every machine. Callers: kernels/cuda/,
 * tests. */
#ifndef WS_ATTN_SPLIT_H
#define WS_ATTN_SPLIT_H

#include "attn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ws_attn_chunk {
    int seq;        /* sequence index */
    int begin, end; /* token range [begin, end) of the sequence (dense problems) */
} ws_attn_chunk;

/* Chunk length for a problem: splits until about target_blocks thread blocks exist when
 * every chunk costs blocks_per_chunk blocks, never below min_tokens, rounded up to a
 * multiple of align (the kernel's tile). Deterministic; >= align. */
int ws_attn_split_chunk_tokens(const ws_attn_problem *p, int blocks_per_chunk,
                               int target_blocks, int align, int min_tokens);

/* Cuts every sequence (n = n_sel when sparse, else n_tokens) into chunks of chunk_tokens,
 * sequence by sequence, in token order; an empty sequence gets none. seq_first[s] and
 * seq_count[s] (may be NULL) locate sequence s's chunks. Returns the number of chunks,
 * or -1 if more than cap would be needed (out is then incomplete). */
int ws_attn_split(const ws_attn_problem *p, int chunk_tokens, ws_attn_chunk *out, int cap,
                  int *seq_first, int *seq_count);

/* The reduction of n partial states of one row (o_parts rows d_v floats apart, lse_parts
 * natural log): the GPU's second pass computes exactly this, in float. n == 0 or all
 * parts empty gives o = 0, lse = -inf. */
void ws_attn_reduce_row(const float *o_parts, const float *lse_parts, int n, int d_v,
                        float *o, float *lse);

/* CPU model of the split-K attention: partials from ws_attn_ref per chunk (rounded to
 * float, as the GPU stores them), reduced with ws_attn_reduce_row into p->o / p->lse. */
int ws_attn_splitk_ref(const ws_attn_problem *p, int chunk_tokens, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
