/* plan_run: a whole capacity plan as one call -- what `writescope plan` runs between parsing
 * its options and printing. The search (plan.h) advances in rounds whose points may be
 * spread over several processes (MPI ranks under mpirun or srun): every rank receives every
 * result, so every rank runs the same search and reaches the same next round. When asked,
 * rank 0 then stores the plan (plan_store.h) in the store it was given. Every rank calls it
 * with its own store handle (rank 0's writable when storing) and every rank returns the same
 * code and message: a failure anywhere is every rank's.
 *
 * The ranks are a backend, a table of functions (ws_plan_ranks) the caller fills in: the CLI
 * wires platform/ws_par.h into it, which the simulator's folder does not use; without one,
 * this process evaluates every point itself. Progress goes through the caller's callback, on
 * rank 0 only, once a round. The figure is not drawn here (plots/plan_plot.h reads a stored
 * plan) and nothing is printed. */
#ifndef WS_SIM_PLAN_RUN_H
#define WS_SIM_PLAN_RUN_H

#include <stddef.h>

#include "plan.h"
#include "plan_space.h"
#include "store.h"
#include "ws_err.h"
#include "ws_util.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Evaluates item i into rec (zeroed); 0 or a ws_err code. */
typedef int (*ws_plan_item_fn)(void *ctx, size_t i, void *rec, ws_err *err);

/* The processes a plan runs on. */
typedef struct ws_plan_ranks {
    int rank; /* this process's (0: the one that stores and shows progress) */
    /* Collective: fn over items 0..n-1 spread over the ranks, every record (rec_size bytes,
     * in item order) into out on every rank; the same code and message on every rank. */
    int (*map_all)(void *ctx, size_t n, size_t rec_size, ws_plan_item_fn fn, void *fn_ctx,
                   void *out, ws_err *err);
    /* Collective: 0 when every rank passes rc 0, else the lowest failing rank's on all. */
    int (*agree)(void *ctx, int rc, ws_err *err);
    void *ctx;
} ws_plan_ranks;

/* After every round: the round, points evaluated so far, searches still open. */
typedef void (*ws_plan_progress_fn)(void *ctx, int round, long long points, int open);

typedef struct ws_plan_run_cfg {
    const ws_plan_spec *spec;     /* what to plan (its own progress fields are ignored) */
    const ws_plan_ranks *ranks;   /* NULL: this process alone */
    int store;                    /* 1: rank 0 stores the plan in the store */
    ws_plan_progress_fn progress; /* rank 0 only; NULL: none */
    void *progress_ctx;
} ws_plan_run_cfg;

typedef struct ws_plan_run_result {
    ws_plan_report rep;         /* every rank */
    long long plan_id;          /* rank 0 with store: its plan_runs id; else 0 */
    char database[WS_PATH_MAX]; /* rank 0 with store: the database's path; else "" */
} ws_plan_run_result;

/* Collective over cfg->ranks: the search, then the plan stored on rank 0 when cfg->store.
 * Free the result with ws_plan_run_result_free, also after an error. */
int ws_plan_run_all(ws_store *store, const ws_plan_run_cfg *cfg, ws_plan_run_result *out,
                    ws_err *err);
void ws_plan_run_result_free(ws_plan_run_result *r);

/* Collective over cfg->ranks: a configuration search (plan_space.h) of space sp, each round
 * spread over the ranks; every rank gets the same report. Not stored. Free with
 * ws_space_report_free, also after an error. */
int ws_plan_space_run_all(ws_store *store, const ws_plan_run_cfg *cfg, const ws_plan_space *sp,
                          ws_space_report *out, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
