/* plan_store: a capacity plan (plan.h: its spec and report) into the database as the rows of
 * store/plandb.h -- the run row with the workload, SLOs and search settings, every evaluated
 * point, the best load of every (GPU, policy, setting) search and the OOM frontier -- in one
 * transaction. One mapping for every caller that stores a plan: `writescope plan --save`
 * (sim/plan_run.c) and `--plot` (cli/cmd_plan.c; the figure, plots/plan_plot.h, reads the
 * rows back) and the tests. Percentiles with an OOM in them (INFINITY in the report), SLOs not given and
 * missing prices are stored as NULL; GPUs and policies by name. No SQL here. */
#ifndef WS_SIM_PLAN_STORE_H
#define WS_SIM_PLAN_STORE_H

#include "plan.h"
#include "store.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Stores plan rep of spec s whole (one transaction) and sets *id to its plan_runs id. */
int ws_plan_store(ws_store *store, const ws_plan_spec *s, const ws_plan_report *rep,
                  long long *id, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
