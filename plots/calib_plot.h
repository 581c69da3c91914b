/* calib_plot: `writescope plot calib`, a calibration run's fits drawn from the database
 * (store/calibdb.h: the run, its fits and their samples) by plots/calib.gp. For every
 * roofline or transfer fit, one panel: the achieved rate of each measured size beside the
 * fitted model's, and the model's error in percent. Rates rather than times: on log-log
 * time axes every fit looks perfect, while a rate curve shows where the model bends away.
 * The model is evaluated from the stored fit row (form, c0, peak flop rate, bandwidth), the
 * same formula as the calibrator's (calib/fit.h), so the figure needs no calibrator code.
 * Called by cli/cmd_plot.c. */
#ifndef WS_CALIB_PLOT_H
#define WS_CALIB_PLOT_H

#include <stddef.h>

#include "store.h"
#include "ws_err.h"
#include "ws_gnuplot.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `writescope plot calib`: every roofline or transfer fit of calibration run req->run (0 =
 * newest), one panel each, drawn by plots/calib.gp into req->out: the achieved rate
 * (GB/s, or GFLOP/s for a compute-bound fit) of the measured samples against their size
 * with the fitted model's curve, and the model's error in percent below. what: a
 * one-line note of what was drawn. */
int ws_calib_plot(ws_store *store, const ws_plot_req *req, char *what, size_t cap, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
