/* plan_plot: the figure of a capacity plan (`writescope plan --plot`, `writescope plot plan`),
 * drawn from the plan's stored rows (store/plandb.h: its run row and load points) by
 * plots/plan.gp: per GPU profile, goodput against load per policy at the default settings,
 * and the SLO attainment against load with the plan's slo_pct threshold. The planner
 * (sim/plan.h) never draws: cli/cmd_plan.c stores a plan (in memory when it is not to be
 * kept) and hands its id here; plots/sim_plot.c's `plot plan` does the same for --run N.
 * Every number is modeled and the title says so. */
#ifndef WS_PLAN_PLOT_H
#define WS_PLAN_PLOT_H

#include "store.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Draws plan `id` (0: the newest) with plots/plan.gp into out (.png or .svg): per GPU,
 * goodput against load per policy (default settings) and the SLO attainment against load
 * with the slo_pct threshold. */
int ws_plan_plot(ws_store *store, long long id, const char *out, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
