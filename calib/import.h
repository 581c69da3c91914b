/* import: a measured GPU profile without owning the GPU (`writescope calib import`). Reads
 * operator profiles others measured on a real GPU, in Vidur's CSV format (calib/vidur_csv.h),
 * fits the cost model's GPU parameters per operation kind with the calibrator's fits
 * (calib/fit.h) and stores them as a calibration run (calib/calib.h), so the simulator, the
 * planner and the runtime use it by the GPU's datasheet name like any calibration:
 *
 *   gpu.attn.<kind>.<dtype>          decode attention, c0 + KV bytes / W        (transfer)
 *   gpu.prefill_attn.<kind>.<dtype>  prefill attention, c0 + F / (P k/(k + k_h)) over the
 *                                    causal pairs, k keys per query             (saturating)
 *   gpu.gemm.<dtype>                 the projections at their per-GPU shapes,
 *                                    c0 + max(2MKN / P, (MK + KN + MN) e / W)   (roofline)
 *   gpu.{rmsnorm,rope,act,add}.<dtype>  c0 + max(B / W, B / rows / P), B the bytes read
 *                                    and written, P one row's bytes/s           (roofline)
 *
 * with F and B from runtime/cost.h's shape functions, the same the cost model predicts with.
 * Every fifth row of each operation of a file (vidur_csv.h) is held out: the fits see the
 * rest, report their k-fold held-out MAPE as the calibrator does for its sweeps, and the
 * held-out rows' MAPE, median and worst error besides (in each fit's note). A fit is used
 * (good) when it converged with positive rates, is physical for the GPU measured (a fixed
 * cost of at most WS_IMPORT_C0_MAX_S, rates at most WS_IMPORT_RATE_MARGIN times its
 * datasheet's: a flop rate its <dtype>_flops, a bandwidth or one row's rate its hbm_bw;
 * otherwise the note says which bound it broke) and the held-out rows' median error is
 * within the calibrator's bound, WS_FIT_GOOD_MAPE_PCT: the mean, by which the calibrator
 * judges its own sweeps, is here dominated by a tail no roofline follows (Kineto's times
 * rounded to 1 us on kernels of 1-5 us, libraries switching kernels with the shape). The
 * files are read by calib/import_files.h. The run records its sources:
 * each file's path, size, SHA-256 and rows, what it measured, by whom, with which tool, on
 * which GPU, at which precision, and the licence found beside it. Its host is the GPU alone
 * (named "imported: <who>", no CPU), its profile "imported:<datasheet name>" or the name
 * given; the datasheet profile must list the device. A name given must not be a stored
 * profile of another kind, a datasheet profile or a calibration of this machine, nor
 * (without `replace`) another import. Text given for the provenance must hold no control
 * character. One transaction: a malformed file (one line naming it and the row) or a
 * failure leaves the database as it was. */
#ifndef WS_CALIB_IMPORT_H
#define WS_CALIB_IMPORT_H

#include "calib.h"
#include "import_files.h"
#include "vidur_csv.h"
#include "ws_dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_IMPORT_MAX_FITS 8
#define WS_IMPORT_C0_MAX_S 1.0     /* s: a fitted fixed cost above this is no kernel's */
#define WS_IMPORT_RATE_MARGIN 1.5  /* a fitted rate above 1.5x the datasheet's is not physical */

typedef struct ws_import_opts {
    const char *const *paths; /* files, or folders whose *.csv files are read in name order */
    int n_paths;
    const char *gpu;          /* the datasheet profile of the GPU measured (a100-80gb-sxm) */
    const char *name;         /* the profile to write (NULL: "imported:<gpu>") */
    const char *by;           /* who measured (NULL: "Vidur (microsoft/vidur)") */
    const char *tool;         /* with what (NULL: the files' profile_method, else Kineto) */
    const char *dtype;        /* the precision measured (NULL: "fp16") */
    const char *licence;      /* NULL: the LICENSE file beside the files, else "not stated" */
    int replace;              /* 1: `name` may be an earlier import's profile, replaced */
    void (*progress)(void *ctx, double frac, const char *what);
    void *progress_ctx;
} ws_import_opts;

typedef struct ws_import_fit {
    ws_calib_key key;
    ws_fit_result r;         /* fitted on the training rows (k-fold held-out MAPE inside) */
    int n_train, n_heldout;
    double ho_mape_pct, ho_median_pct, ho_worst_pct; /* over the held-out rows */
    int per_row; /* 1: an elementwise kind, r.peak_flops is one row's bytes/s */
    char why[96]; /* why the fit is not used ("" when it is): the first bound it breaks */
} ws_import_fit;

typedef struct ws_import_result {
    long long run_id;
    char profile[160];       /* the profile written */
    char gpu[160];           /* the datasheet profile it refines */
    char device[128];        /* the device name both carry */
    ws_calibdb_source files[WS_IMPORT_MAX_FILES];
    int n_files;
    ws_import_fit fits[WS_IMPORT_MAX_FITS];
    int n_fits;
    int rows, heldout;       /* operator rows read, of them held out */
} ws_import_result;

/* The precision operator times may be imported or checked at (NULL or "": fp16): fp16,
 * bf16 or fp32; WS_EINVAL "precision '<name>' ..." else. */
int ws_import_dtype(const char *name, ws_dtype *dt, ws_err *err);

/* Imports into s (a writable store) as described above. */
int ws_calib_import(ws_store *s, const ws_import_opts *o, ws_import_result *res, ws_err *err);

/* A fit's key name, "gpu.gemm.fp16" (profiles and `calib show` name it so). */
void ws_import_key_name(const ws_calib_key *k, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
