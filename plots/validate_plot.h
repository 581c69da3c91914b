/* validate_plot: a validation (`writescope validate --plot`, `writescope plot validate`)
 * drawn from its rows (store/validatedb.h) by plots/validate.gp as predicted against
 * measured: one panel per quantity (decode step time, CPU attention, routed experts, realised
 * CPU share, GPU half), every point of every repeat past the warm-up steps, the y = x line,
 * and the panel's mean and p95 absolute percentage error (with repeats, the noise floor) from
 * the stored statistics. The rows are those validate/validate.h's report holds and
 * ws_validatedb_get reads back, so a report just computed (cli/cmd_validate.c passes its
 * rows) and a stored one are drawn by the same code, with no validation code here.
 *
 * One data file per quantity (measured, predicted, repeat; times in ms, the share in
 * percent) and one panel spec per quantity ("title|x label|y label") as gnuplot script
 * arguments, through a private temporary folder removed after; values reach gnuplot only as
 * arguments and data files. The output is SVG when its name ends in .svg, else PNG. */
#ifndef WS_VALIDATE_PLOT_H
#define WS_VALIDATE_PLOT_H

#include <stddef.h>

#include "store.h"
#include "validatedb.h"
#include "ws_err.h"
#include "ws_gnuplot.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Draws validation run with its statistics st[0..n_st) (by quantity name; one a quantity
 * lacks reads as zeros) and points pt[0..n_pt) into out. */
int ws_validate_plot_rows(const ws_validatedb_run *run, const ws_validatedb_stat *st,
                          size_t n_st, const ws_validatedb_point *pt, size_t n_pt,
                          const char *out, ws_err *err);
/* The same for stored validation `id` (0: the newest). */
int ws_validate_plot(ws_store *s, long long id, const char *out, ws_err *err);
/* `writescope plot validate`: ws_validate_plot of req->run (0: the newest) into req->out. */
int ws_validate_plot_fig(ws_store *s, const ws_plot_req *req, char *what, size_t cap,
                         ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
