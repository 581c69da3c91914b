/* fit: least-squares fits of the cost model's parameters to timed samples, with GSL.
 *
 *   roofline   t = c0 + max(F / P, B / W)   (Levenberg-Marquardt, gsl_multifit_nlinear)
 *   transfer   t = c0 + B / W               (weighted linear least squares)
 *   serial     t = c0 + F / P + B / W       (the same, two rates: a kernel that streams
 *                                            its operands and computes in turn, not at once)
 *   saturating t = c0 + F / (P x / (x + x_h)) (a rate that rises with x toward P, half of it
 *                                            at x_h: prefill attention over x keys per
 *                                            query; the serial fit of F and F / x)
 *   piecewise  two or three pieces along the intensity F/B, each the serial form (the
 *              transfer form where a piece holds one intensity): a kernel whose library
 *              switches kernels as the rows grow (oneDNN's expert GEMM: a GEMV at one token,
 *              a memory-bound GEMM, a compute-bound one); the splits are the gaps between
 *              sample intensities that fit best, every piece holds >= 3 samples, and a rate
 *              a piece cannot use (a negative coefficient) is left out (0)
 *
 * Residuals are relative ((model - t) / t), because samples span orders of magnitude and
 * the cost model is judged by its relative error; the fits minimise the sum of |relative
 * error| (least absolute deviation, by iteratively reweighted least squares), which is what
 * MAPE measures and which a few samples slowed by other load on the host do not drag;
 * standard errors come from the last weighted solve (approximate for this estimator). The
 * fixed cost is constrained to c0 >= 0: a fit that wants a negative c0 is redone with c0 = 0
 * (c0_at_bound). When every sample of a key has the same
 * arithmetic intensity F/B, only one of P and W is identifiable; the caller then fixes
 * the other (at the machine's measured peak or bandwidth) and the result says which.
 * Every fit reports standard errors, R^2 and the k-fold held-out MAPE; a fit that does not
 * converge, has non-positive rates or a held-out MAPE above WS_FIT_GOOD_MAPE_PCT is
 * returned with good = 0 and a note. Used by the calibrator (calib/calib.c). */
#ifndef WS_FIT_H
#define WS_FIT_H

#include "ws_err.h"

#define WS_FIT_GOOD_MAPE_PCT 10.0 /* held-out MAPE above this marks a fit as poor */
#define WS_FIT_KFOLD 5            /* folds for the held-out error */

typedef struct ws_fit_point {
    double flops; /* F, flop */
    double bytes; /* B, bytes */
    double t;     /* seconds (median of repeats), > 0 */
} ws_fit_point;

typedef enum ws_fit_form {
    WS_FIT_ROOFLINE = 0, /* c0 + max(F/P, B/W) */
    WS_FIT_TRANSFER = 1, /* c0 + B/W */
    WS_FIT_FACTOR = 2,   /* a ratio of two measured times (contention, pinned memory) */
    WS_FIT_SERIAL = 3,   /* c0 + F/P + B/W */
    WS_FIT_SATURATING = 4, /* c0 + F/(P x/(x + x_h)), x in the point's `bytes`, x_h in factor */
    WS_FIT_PIECEWISE = 5,  /* the top piece in c0/P/W, the pieces below it in low[] */
} ws_fit_form;

#define WS_FIT_MAX_LOW 2 /* pieces below the top one in a piecewise fit */

/* A piece of a piecewise fit below its top one: it applies to intensities F/B <= upto (and
 * above the previous piece's upto); c0 + F/P + B/W, a rate of 0 left out. */
typedef struct ws_fit_piece {
    double upto, c0, peak_flops, bandwidth;
} ws_fit_piece;

typedef struct ws_fit_result {
    ws_fit_form form;
    double c0, c0_se;                  /* seconds */
    int c0_at_bound;                   /* the free fit gave c0 < 0: refitted with c0 = 0 */
    double peak_flops, peak_flops_se;  /* flop/s; se 0 when fixed */
    double bandwidth, bandwidth_se;    /* bytes/s; se 0 when fixed */
    double factor, factor_se;          /* WS_FIT_FACTOR; WS_FIT_SATURATING: x_h */
    int p_fixed, w_fixed;              /* 1: held at the value given, not fitted */
    int n_low;                         /* WS_FIT_PIECEWISE: pieces below the top (1..2) */
    ws_fit_piece low[WS_FIT_MAX_LOW];  /* by rising upto */
    int compute_bound;                 /* samples mostly on the F/P side of the max */
    double r2;
    double train_mape_pct, heldout_mape_pct;
    int n, converged, good;
    char note[160];
} ws_fit_result;

/* Roofline fit. p_fix / w_fix > 0 hold P / W at that value (not both). Needs n >= 3. */
int ws_fit_roofline(const ws_fit_point *pts, int n, double p_fix, double w_fix, ws_fit_result *out,
                    ws_err *err);
/* Serial fit. Needs n >= 3 and samples over more than one intensity. */
int ws_fit_serial(const ws_fit_point *pts, int n, ws_fit_result *out, ws_err *err);
/* Saturating fit; each point's `bytes` holds its x (> 0). Needs n >= 3 and more than one
 * x. */
int ws_fit_saturating(const ws_fit_point *pts, int n, ws_fit_result *out, ws_err *err);
/* Piecewise fit in `pieces` pieces (2 or 3; the calibrator keeps whichever predicts held-out
 * samples better). Needs 3 points a piece and pieces - 1 gaps between intensities. */
int ws_fit_piecewise(const ws_fit_point *pts, int n, int pieces, ws_fit_result *out,
                     ws_err *err);
/* Transfer fit. Needs n >= 3. */
int ws_fit_transfer(const ws_fit_point *pts, int n, ws_fit_result *out, ws_err *err);
/* Factor = t_num / t_den from two samples given as (median, min, max) over n repeats
 * each; the standard error is estimated from the spreads (range/4 per side, propagated
 * in relative terms). */
int ws_fit_factor(const double num[3], const double den[3], int n, ws_fit_result *out,
                  ws_err *err);
/* Model time of a fitted result for one operation (saturating: bytes = x). */
double ws_fit_predict(const ws_fit_result *f, double flops, double bytes);

#endif
