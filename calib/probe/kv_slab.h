/* kv_slab: host memory for KV pages spread over the NUMA nodes of a thread pool as the CPU
 * region places them (numa.h): one slice per node of the pool, each starting on a 2 MiB
 * boundary (the huge page, and the unit a node placement moves) and placed on its node
 * (mbind, preferred: a hint the kernel may refuse) before anything touches it. A cut
 * divides every slice into slots of one page size, and a deal builds page tables by the
 * placement rule: page j of sequence q from the slice of node ws_numa_place(q, j), the
 * next slot of that slice in a seeded shuffled order, so a sequence's pages scatter over
 * its node's memory, each page table names its pages' nodes (ws_attn_seq.page_nodes), and
 * deal after deal takes fresh slots until a slice wraps (cold pages for repeated timings).
 * On one node: one slice, the same. Callers: calib/probe/attn_bench.c (bench attn-cpu),
 * calib/measure.c (the calibrator's attention sweeps). */
#ifndef WS_KV_SLAB_H
#define WS_KV_SLAB_H

#include <stddef.h>
#include <stdint.h>

#include "pool.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ws_kv_slab ws_kv_slab;

/* Slices of slice_bytes[k] bytes for the pool's nodes k = 0 .. ws_pool_nodes(pool) - 1
 * (one node, number 0, when pool is NULL), each on a 2 MiB boundary, zero until written,
 * with transparent huge pages asked for (madvise). NULL with a message when the memory
 * cannot be mapped. */
ws_kv_slab *ws_kv_slab_create(ws_pool *pool, const size_t *slice_bytes, ws_err *err);
void ws_kv_slab_destroy(ws_kv_slab *s);

int ws_kv_slab_nodes(const ws_kv_slab *s);
/* The OS number of slice k's node. */
int ws_kv_slab_node_id(const ws_kv_slab *s, int k);
/* Slice k's first byte; *bytes (if not NULL) gets its size as asked. */
char *ws_kv_slab_slice(const ws_kv_slab *s, int k, size_t *bytes);

/* Cuts every slice into slots of page_bytes (what is left at a slice's end is unused) and
 * orders each slice's slots by a shuffle seeded with seed; the next deal starts at each
 * order's first slot. WS_EINVAL for a zero size, WS_ENOMEM. */
int ws_kv_slab_cut(ws_kv_slab *s, size_t page_bytes, uint64_t seed, ws_err *err);
/* Slots of slice k after the cut (0 before one). */
size_t ws_kv_slab_slots(const ws_kv_slab *s, int k);
/* Slot i of slice k, in address order (i < ws_kv_slab_slots); NULL before a cut. */
char *ws_kv_slab_slot(const ws_kv_slab *s, int k, size_t i);

/* need[k], k < n_nodes: how many of n_seqs sequences' pages_per_seq pages of page_tokens
 * tokens the placement rule puts on node k (the slots a deal takes from slice k). */
void ws_kv_slab_count(int n_nodes, int n_seqs, int pages_per_seq, int page_tokens, size_t *need);

/* Page tables for n_seqs sequences of pages_per_seq pages of page_tokens tokens:
 * tables[q * pages_per_seq + j] = the next slot, in its shuffled order (wrapping), of
 * slice ws_numa_place(q, j, page_tokens, nodes); page_nodes (if not NULL) gets that
 * slice's OS node at the same index. WS_EINVAL before a cut, or when the deal would take
 * more slots of a slice than it has (a page twice in one deal); nothing is dealt then. */
int ws_kv_slab_deal(ws_kv_slab *s, int n_seqs, int pages_per_seq, int page_tokens,
                    const void **tables, int *page_nodes, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
