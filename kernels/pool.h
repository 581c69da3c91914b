/* pool: a fixed set of worker threads, created once and reused, that run a batch of
 * independent tasks with the calling thread and return when all are done. The CPU
 * attention kernels, the memory bandwidth probes and the calibrator share one pool, so no
 * thread is ever created inside a timed region.
 *
 * A pool of T threads is the caller (thread 0, its affinity left as it is) and T - 1
 * workers, worker i pinned to the i-th CPU the process may run on (modulo their number; a
 * refused pin is ignored), so the caller keeps the first. Tasks are handed out dynamically
 * (an atomic counter), so uneven tasks balance themselves. Between batches the workers,
 * and the caller at a batch's end, poll for 50 us before they sleep, so back-to-back
 * batches (a decode step's layers) start and end in under a microsecond instead of a
 * kernel wake-up each; workers still waking when the caller has run every task are not
 * waited for (scripts/pool_dispatch.c: 2 threads, empty tasks, 0.74 us a batch back to
 * back and 3.7 us after a 1 ms pause, against 15.6 and 46 us with condvars alone). One
 * batch at a time: ws_pool_run is not reentrant and must not be called from two threads
 * at once on the same pool. Callers: kernels/attn_cpu.c, kernels/membw.c,
 * calib/, cli/cmd_bench.c. */
#ifndef WS_POOL_H
#define WS_POOL_H

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
void ws_pool_destroy(ws_pool *pool);
int ws_pool_threads(const ws_pool *pool);
/* Runs fn(ctx, task, thread) for every task in [0, n_tasks) and waits for all of them. */
void ws_pool_run(ws_pool *pool, int n_tasks, ws_pool_fn fn, void *ctx);
/* How many workers were pinned to a CPU: threads - 1 at most (the caller is not pinned), 0
 * when pinning was refused or threads == 1. */
int ws_pool_pinned(const ws_pool *pool);

#ifdef __cplusplus
}
#endif
#endif
