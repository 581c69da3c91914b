/* sim_plot: the figures `writescope plot` draws from simulation results (sim_runs,
 * sim_requests, sim_steps): each function reads the database through store/simdb.h, writes
 * the data files of its gnuplot script (plots/NAME.gp) and runs it (ws_gnuplot.h).
 *
 *   speedup     writescope's decode tokens/s over each baseline's, per model and hardware:
 *               the geometric mean over the closed-batch points (batch, prompt, output)
 *               where both were served without running out of memory, and each point
 *   throughput  decode tokens/s against prompt length per policy, one panel per batch,
 *               for one model, GPU and host profile
 *   share       the policy's target share r* and the realised CPU share over one run, with
 *               the mean context per sequence
 *   latency     TTFT and TPOT distributions (CDFs) per policy of one workload
 *   util        busy fraction of the GPU, the copy engines and the CPU over one run
 *
 * Figures over many runs take the newest run of each point, so a rerun replaces its
 * predecessor; figures of one run take req->run (0: the newest) and, for latency, the
 * newest run of every policy on the same workload. They draw the runs of `writescope sim`:
 * a validation's simulations (often of a few layers) are left out, and drawn only when
 * asked for by id, saying which they are and how many layers they cover. Every number here
 * is modeled and the figures say so. Live-runtime figures are in run_plot.h. */
#ifndef WS_SIM_PLOT_H
#define WS_SIM_PLOT_H

#include <stddef.h>

#include "store.h"
#include "ws_err.h"
#include "ws_gnuplot.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Each draws req->out; what: a one-line note of what was drawn. WS_ENOTFOUND (with the
 * command that makes the data) when the database holds nothing to draw. */
int sim_plot_speedup(ws_store *s, const ws_plot_req *req, char *what, size_t cap, ws_err *err);
int sim_plot_throughput(ws_store *s, const ws_plot_req *req, char *what, size_t cap,
                        ws_err *err);
int sim_plot_share(ws_store *s, const ws_plot_req *req, char *what, size_t cap, ws_err *err);
int sim_plot_latency(ws_store *s, const ws_plot_req *req, char *what, size_t cap, ws_err *err);
int sim_plot_util(ws_store *s, const ws_plot_req *req, char *what, size_t cap, ws_err *err);
/* A capacity plan (`writescope plan --save`; req->run: the plan's id, 0 the newest), through
 * ws_plan_plot (plan_plot.h). */
int sim_plot_plan(ws_store *s, const ws_plot_req *req, char *what, size_t cap, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
