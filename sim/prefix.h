/* prefix: the serving loop's prefix cache over prompt blocks (sim/serve.c). A block is
 * WS_TRACE_BLOCK_TOKENS tokens named by its hash (a trace's hash_ids, or a generator's
 * shared prefix); equal hashes mean equal prefixes up to that block, so a request reuses the
 * longest run of leading blocks already cached and prefills only the rest, as vLLM's
 * automatic prefix caching, SGLang's RadixAttention and Mooncake's store do.
 *
 * A cached block counts the sequences holding it; one that no sequence holds stays cached
 * (its memory still taken) until room is needed, then the least recently released goes
 * first. In the InplaceKVCache a block's pages never move: it keeps the region its first
 * sequence wrote it in, which it carries here (its tokens in the CPU region) so that a hit
 * attends it where it lies, and the bytes it holds in each memory, which eviction gives back.
 *
 * The cache also keeps every hash it has seen, for the trace's own bound on hits (a block
 * repeating an earlier one), so its memory grows with the distinct blocks of the run. */
#ifndef WS_SIM_PREFIX_H
#define WS_SIM_PREFIX_H

#include <stddef.h>
#include <stdint.h>

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sim_prefix_blk {
    int64_t hash;
    int ref;          /* sequences holding it */
    double cpu_tok;   /* its tokens in the CPU region */
    double g, h, p;   /* bytes it holds: GPU, host, pinned */
    int prev, next;   /* the list of blocks no sequence holds, oldest release first */
} sim_prefix_blk;

/* An open-addressed set of hashes, each with a value (the block's index, or 0). */
typedef struct sim_prefix_map {
    int64_t *key;
    int *val; /* -1: empty, -2: removed */
    size_t cap, used;
} sim_prefix_map;

typedef struct sim_prefix {
    sim_prefix_blk *b;
    size_t n, cap;
    int free_head;       /* unused slots of b, chained by next */
    int lru_head, lru_tail;
    sim_prefix_map idx;  /* hash -> block */
    sim_prefix_map seen; /* every hash seen */
    double g, h, p;      /* bytes of the cached blocks */
} sim_prefix;

int sim_prefix_init(sim_prefix *c, ws_err *err);
void sim_prefix_free(sim_prefix *c);
/* How many of the leading blocks h[0..n) are cached (held or not). */
int sim_prefix_match(const sim_prefix *c, const int64_t *h, int n);
/* Holds blocks h[0..k) (all cached): the CPU-region tokens among them into *cpu_tok. */
void sim_prefix_hold(sim_prefix *c, const int64_t *h, int k, double *cpu_tok);
/* Lets go of blocks h[0..k): one no sequence holds joins the end of the eviction list. */
void sim_prefix_release(sim_prefix *c, const int64_t *h, int k);
/* Adds block `hash` held once, with its region and bytes; 1 = added, 0 = it was cached
 * already (then held once more, and its own bytes not taken), or a negative code. */
int sim_prefix_add(sim_prefix *c, int64_t hash, double cpu_tok, double g, double h, double p,
                   ws_err *err);
/* Evicts the least recently released block no sequence holds: 1 and its bytes into
 * *g, *h, *p; 0 when there is none. */
int sim_prefix_evict(sim_prefix *c, double *g, double *h, double *p);
/* Marks h[0..n) seen: returns how many were seen before (in an earlier request), or a
 * negative code. */
int sim_prefix_see(sim_prefix *c, const int64_t *h, int n, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
