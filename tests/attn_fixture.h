/* attn_fixture: random paged decode-attention problems for the tests of every attention
 * implementation (fp64 reference, split-K model, CPU kernels, GPU kernels). Pages come from
 * one pool in a shuffled order with unused slots between them, so no sequence's pages are
 * contiguous or in order -- what a page table over the CPU or XFER region looks like. */
#ifndef WS_ATTN_FIXTURE_H
#define WS_ATTN_FIXTURE_H

#include <stdint.h>

#include "attn.h"

typedef struct th_attn {
    ws_attn_problem p;        /* points at the arrays below */
    ws_attn_seq *seq;         /* [n_seqs] */
    const void ***tables;     /* [n_seqs] page tables */
    uint16_t *pool;           /* every page */
    float *q, *o, *lse;       /* host arrays of the problem */
    double *o_ref, *lse_ref;  /* room for ws_attn_ref's output */
} th_attn;

/* Deterministic uniform value in [-1, 1) from the fixture's generator. */
float th_attn_rand(void);
/* Deterministic uniform integer in [0, 2^24) from the same generator. */
unsigned th_attn_randu(void);
/* Reseeds the generator (each test file seeds its own stream). */
void th_attn_seed(unsigned seed);
/* Builds a problem: n_seqs sequences of lens[s] tokens, q uniform in [-qamp, qamp). */
void th_attn_make(th_attn *f, ws_kv_layout kv, int n_q, int n_seqs, const int *lens, float qamp);
void th_attn_free(th_attn *f);
/* A float as a KV element of dtype t (bf16 or fp16). */
uint16_t th_attn_to16(ws_dtype t, float x);

#endif
