/* gpu_book: the host-side bookkeeping of the GPU's fixed buffers, in plain C so that the
 * same code runs inside the CUDA backend and in the CPU tests.
 *
 *   ws_pingpong  which half of the ping-pong landing buffer a layer's streamed XFER pages
 *                go to, and the protocol submit -> acquire -> release that keeps a half from
 *                being overwritten before its attention is queued (the device-side order
 *                is kept by events; this catches misuse on the host).
 *   ws_ring      one D-window: a ring of W tokens in W/P pages; appends go to the next
 *                free slot, flushes take the oldest full pages (head stays page-aligned),
 *                and the page table of the held tokens is oldest first, so the attention
 *                kernel attends the ring in place (softmax does not depend on token order).
 *   ws_copy_runs merges page copies whose sources and destinations are both contiguous,
 *                so a flush is as few DMAs as the destinations allow.
 * Callers: kernels/cuda/cuda_stream.cu, tests/test_gpu_book.c. */
#ifndef WS_GPU_BOOK_H
#define WS_GPU_BOOK_H

#include <stddef.h>
#include <stdint.h>

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ws_pp_state {
    WS_PP_FREE = 0,      /* may receive the next submit */
    WS_PP_COPYING = 1,   /* pages submitted, not yet acquired by the compute stream */
    WS_PP_ATTENDING = 2, /* acquired: attention over it is being queued */
} ws_pp_state;

typedef struct ws_pingpong {
    int pages_per_half;
    int next;          /* half the next submit uses (halves alternate) */
    ws_pp_state state[2];
    long tag[2];       /* caller's tag (e.g. layer) of the pages in each half */
    int n_pages[2];
    uint64_t submits;  /* counters */
    uint64_t pages;
} ws_pingpong;

void ws_pingpong_init(ws_pingpong *pp, int pages_per_half);
/* Picks the next half for n_pages pages; fails (WS_EINVAL) if n_pages is outside
 * [0, pages_per_half] or that half has not been released. */
int ws_pingpong_submit(ws_pingpong *pp, int n_pages, long tag, int *half, ws_err *err);
int ws_pingpong_acquire(ws_pingpong *pp, int half, ws_err *err); /* COPYING -> ATTENDING */
int ws_pingpong_release(ws_pingpong *pp, int half, ws_err *err); /* ATTENDING -> FREE */
/* Index of landing slot i of a half in the whole buffer (slots are page-sized). */
static inline size_t ws_pingpong_slot(const ws_pingpong *pp, int half, int i)
{
    return (size_t)half * (size_t)pp->pages_per_half + (size_t)i;
}

typedef struct ws_ring {
    int window;      /* W: token capacity */
    int page_tokens; /* P: W is a multiple of P */
    int n_pages;     /* W / P */
    int head;        /* slot of the oldest held token; a multiple of P */
    int count;       /* tokens held, <= W */
    uint64_t appended, flushed; /* tokens appended / flushed over the ring's life */
} ws_ring;

int ws_ring_init(ws_ring *r, int window, int page_tokens, ws_err *err);
/* Reserves the slot of one new token (page = slot / P, token in page = slot % P); fails
 * with WS_EINVAL when the ring is full. */
int ws_ring_append(ws_ring *r, int *slot, ws_err *err);
/* Ring page indices of the held tokens, oldest first; returns how many (ceil(count/P)). */
int ws_ring_pages(const ws_ring *r, int *pages);
static inline int ws_ring_full_pages(const ws_ring *r) { return r->count / r->page_tokens; }
/* Releases the oldest n full pages, writing their ring page indices oldest first;
 * fails with WS_EINVAL if fewer than n full pages are held. */
int ws_ring_flush(ws_ring *r, int n, int *pages, ws_err *err);

typedef struct ws_copy_run {
    size_t src;   /* first source page index */
    void *dst;    /* destination of the first page */
    int n_pages;  /* pages in the run */
} ws_copy_run;
/* Groups page copies src[i] -> dst[i] (page_bytes each) into maximal runs where both the
 * source indices and the destination addresses are consecutive; returns the number of
 * runs written to runs (at most n). */
int ws_copy_runs(const size_t *src, void *const *dst, int n, size_t page_bytes,
                 ws_copy_run *runs);

#ifdef __cplusplus
}
#endif
#endif
