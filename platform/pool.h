/* pool: a fixed set of worker threads, created once and reused, that run a batch of
 * independent tasks with the calling thread and return when all are done. The CPU
 * attention kernels, the memory bandwidth probes and the calibrator share one pool, so no
 * thread is ever created inside a timed region.
 *
 * A pool of T threads is the caller (thread 0, its affinity left as it is) and T - 1
 * workers, worker i pinned to the i-th CPU of ws_numa_cpu_order (modulo their number; a
 * refused pin is ignored): the CPUs the process may run on, the nodes' first CPUs in turn,
 * then their second ones, ..., so a pool of fewer threads than CPUs spreads over the NUMA
 * nodes (on one node: the i-th CPU, and the caller keeps the first). Tasks are handed out
 * dynamically (an atomic counter), so uneven tasks balance themselves; ws_pool_run_affine
 * hands each thread the tasks of its own node first (one counter per node) and lets it
 * take other nodes' tasks only when its own are gone. Between batches the workers,
 * and the caller at a batch's end, poll for 50 us before they sleep, so back-to-back
 * batches (a decode step's layers) start and end in under a microsecond instead of a
 * kernel wake-up each; workers still waking when the caller has run every task are not
 * waited for (figures in docs/notes/thread-pool.md). One batch at a time: ws_pool_run is
 * not reentrant and must not be called from two threads at once on the same pool.
 * Callers: kernels/attn_cpu.c, calib/probe/membw.c, calib/, cli/cmd_bench.c. */
#ifndef WS_POOL_H
#define WS_POOL_H

#include "numa.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_POOL_MAX_THREADS 1024 /* upper bound on the thread count */

typedef struct ws_pool ws_pool;

/* A task: `task` in [0, n_tasks), `thread` in [0, ws_pool_threads) identifies the worker
 * (for per-thread scratch). */
typedef void (*ws_pool_fn)(void *ctx, int task, int thread);

/* threads <= 0 means one per online logical CPU. NULL with a message on failure. */
ws_pool *ws_pool_create(int threads, ws_err *err);
/* The same, pinning by the topology `topo` (NULL: ws_numa_detect, as ws_pool_create does;
 * tests pass others). */
ws_pool *ws_pool_create_numa(int threads, const ws_numa *topo, ws_err *err);
void ws_pool_destroy(ws_pool *pool);
int ws_pool_threads(const ws_pool *pool);
/* Runs fn(ctx, task, thread) for every task in [0, n_tasks) and waits for all of them. */
void ws_pool_run(ws_pool *pool, int n_tasks, ws_pool_fn fn, void *ctx);
/* How many workers were pinned to a CPU: threads - 1 at most (the caller is not pinned), 0
 * when pinning was refused or threads == 1. */
int ws_pool_pinned(const ws_pool *pool);

/* NUMA nodes the pool's pinned workers run on: 1 when they are all on one node (or none
 * is pinned, e.g. one thread), and then ws_pool_run_affine is ws_pool_run. Pool node
 * indices are 0 .. ws_pool_nodes - 1, in the order of the topology's node numbers. */
int ws_pool_nodes(const ws_pool *pool);
/* The OS node number of pool node index i (0 for the only node of a one-node pool). */
int ws_pool_node_id(const ws_pool *pool, int i);
/* The pool node index of OS node number node_id, or -1 when no worker runs there. */
int ws_pool_node_index(const ws_pool *pool, int node_id);
/* The pool node index worker `thread` is pinned on; for thread 0 (the caller, not
 * pinned), the node of the CPU it ran on when the last affine batch started (before any:
 * that of the first CPU of the order, which the workers leave to it); -1 if none. */
int ws_pool_thread_node(const ws_pool *pool, int thread);
/* As ws_pool_run, with task_node[task] the pool node index whose threads should run it
 * (-1: any thread). Each thread runs its own node's tasks, then those of no node, then
 * other nodes' in turn (so all tasks run even where a node's threads are slow to wake).
 * task_node NULL, or a one-node pool, is ws_pool_run. On allocation failure it falls back
 * to ws_pool_run (the same results, without the affinity). */
void ws_pool_run_affine(ws_pool *pool, int n_tasks, const int *task_node, ws_pool_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
