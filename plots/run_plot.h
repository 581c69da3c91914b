/* run_plot: the figures `writescope plot share|util --live N` draws from a run of the live
 * runtime (run_runs, run_steps; store/rundb.h), and the step files those two figures share
 * with their simulator versions (sim_plot.h): the scripts plots/share.gp and
 * plots/util.gp read the same columns whichever produced the steps, and only the labels
 * say where each number came from. In a live run the CPU's times and the realised share
 * (counted pages) are measured; the GPU's and the transfers' times are measured on a CUDA
 * device or modeled by the cost model (gpu_source), and r* is the policy's target computed
 * from the measured estimates of A and B.
 *
 * Step files (TAB-separated): steps.dat has one row per step with a target share r* (the
 * decode steps), util.dat every step, consecutive steps merged into at most
 * WS_RUN_PLOT_BINS rows, time-weighted:
 *   t_start (s), t_end (s), mean context per sequence (tokens), r*, realised r,
 *   busy % of the GPU, of H2D, of D2H, of the CPU (busy seconds / step duration), step */
#ifndef WS_RUN_PLOT_H
#define WS_RUN_PLOT_H

#include <stddef.h>

#include "steprow.h"
#include "store.h"
#include "ws_err.h"
#include "ws_gnuplot.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_RUN_PLOT_BINS 400 /* util.dat rows at most */

/* Writes dir/steps.dat and dir/util.dat from the n step rows of a run, live or simulated
 * (store/steprow.h); *n_share: the rows of steps.dat. */
int ws_run_plot_steps(const char *dir, const ws_step_row *rows, size_t n, size_t *n_share,
                      ws_err *err);

/* The figures of live run req->live (0: the newest run of `writescope run`; a validation's
 * runtime runs only by id, and the note then says so). */
int ws_run_plot_share(ws_store *s, const ws_plot_req *req, char *what, size_t cap, ws_err *err);
int ws_run_plot_util(ws_store *s, const ws_plot_req *req, char *what, size_t cap, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
