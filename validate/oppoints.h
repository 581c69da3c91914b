/* oppoints: the cost model against operator times others measured on real GPUs. Each row of
 * Vidur's profiling CSVs (calib/vidur_csv.h: decode and prefill attention, the GEMMs at their
 * per-GPU shapes, RMSNorm, RoPE, the activation, the residual add) is predicted with
 * runtime/cost's kernel functions on a GPU's cost-model hardware -- from a datasheet profile
 * alone, or one a calibration (`calib import` of the same data) refines -- and the absolute
 * percentage errors are summed up per group (decode attention, prefill attention, GEMM,
 * elementwise): median, mean, 90th and 95th percentiles and worst, with the row the worst
 * is on. A calibration fitted on
 * these rows has seen all but the held-out ones (every 5th of each operation), so it is
 * judged on those: `heldout_only`. The worst row of a group is also given over the rows
 * measured at `min_s` or longer, where Kineto's 1 us rounding is a small part of the time.
 *
 * Used by the fidelity suite (operator points), `writescope calib check` and
 * tests/test_oppoints.c (the held-out target). ws_oppoint_predict and ws_oppoints_eval are
 * pure; ws_oppoints_check reads the files and the profile first. */
#ifndef WS_OPPOINTS_H
#define WS_OPPOINTS_H

#include "cost.h"
#include "store.h"
#include "vidur_csv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Errors of the rows of one group. Percentages; NAN where the group has no row. */
typedef struct ws_oppoint_stats {
    int n;
    double median_pct, mean_pct, p90_pct, p95_pct, worst_pct; /* p90, p95: nearest rank */
    int worst_row;              /* index into the rows of the worst one (-1: none) */
    int n_long;                 /* rows measured at min_s or longer */
    double median_long_pct, worst_long_pct;
    int worst_long_row;
} ws_oppoint_stats;

typedef struct ws_oppoints {
    ws_oppoint_stats group[WS_VIDUR_GROUPS];
    double min_s;               /* the bound of the "long" rows, s */
    int heldout_only;
} ws_oppoints;

/* The model's time (s) of row w on hw, at `elem` bytes per element (the data's precision):
 * decode attention c0 + KV bytes / W, prefill attention on the prefill curve, the GEMM's
 * roofline, the elementwise kernel's c0 + bytes / W. */
double ws_oppoint_predict(const ws_vidur_row *w, const ws_hw *hw, double elem);

/* Predicts every row (heldout_only: the held-out ones) and sums up the errors per group. */
int ws_oppoints_eval(const ws_vidur_rows *rows, const ws_hw *hw, double elem,
                     int heldout_only, double min_s, ws_oppoints *out, ws_err *err);

/* The whole check: reads the profile files (calib/import_files.h ws_import_read; folders
 * expanded), loads GPU profile `gpu` from s as every command does (a datasheet name gives
 * the datasheet with its newest calibration laid over it), its kernels at precision dtype
 * (NULL: fp16; the precisions `calib import` takes) for the rows' attention kind, and
 * evaluates. The rows and the hardware come
 * back for the caller (free the rows with ws_vidur_rows_free). */
int ws_oppoints_check(ws_store *s, const char *const *paths, int n_paths, const char *gpu,
                      const char *dtype, int heldout_only, double min_s, ws_vidur_rows *rows,
                      ws_hw *hw, ws_oppoints *out, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
