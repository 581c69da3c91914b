/* calib_file: a calibration as a small text file, the way a measured profile travels into
 * the project (`writescope calib export`, `calib load`, `calib check FILE.json`).
 *
 * A database is a build output and is never committed; what a lent machine measured is
 * kept instead as the samples it took: per run, the machine (the fingerprint's fields),
 * mode, scope, times, note, and every sample (key, params, flops, bytes, repeats, median,
 * fastest and slowest time). Fits are not in the file: loading refits the samples with the
 * calibrator's own code (ws_calib_fit_all), after recomputing the machine figures the fits
 * read (device copy rate, best GEMM rate, read bandwidth, peaks) from the samples exactly as
 * the sweeps set them, so a loaded run stores the fits the calibrator would store today and
 * its profiles ("host:<fingerprint>", "gpu:<device>") are rebuilt like any calibration's.
 *
 * ws_calib_file_check holds a GPU profile against the file's GPU and link samples with the
 * cost model's own rooflines (runtime/cost.h): per operation, the errors of its
 * predictions and the profile's figure beside the one the samples fit, which says which
 * datasheet figure is off and by how much. */
#ifndef WS_CALIB_FILE_H
#define WS_CALIB_FILE_H

#include <jansson.h>

#include "calib.h"
#include "store.h"

#define WS_CALIB_FILE_FORMAT "writescope-calibration"
#define WS_CALIB_FILE_VERSION 1
#define WS_CALIB_FILE_MAX_RUNS 8

/* The runs (ids; 0: the newest) with their samples as one JSON document. */
json_t *ws_calib_file_export(ws_store *s, const long long *run_ids, int n, ws_err *err);
/* Reads a file into runs[0..*n) (samples, figures, fits; ws_calib_run_free each). */
int ws_calib_file_read(const char *path, ws_calib_run *runs, int max, int *n, ws_err *err);
/* Reads, refits and stores every run of the file (one transaction per run); ids out. */
int ws_calib_file_load(ws_store *s, const char *path, long long *ids, int max, int *n,
                       ws_err *err);

/* One operation's check: its samples predicted by the profile, and the rate that decides
 * them, the profile's against the run's fit of the same samples. */
typedef struct ws_calib_check_op {
    char key[96];            /* gpu.gemm.bf16, link.h2d, ... */
    int n;                   /* samples predicted */
    double median_pct, mean_pct, worst_pct; /* |predicted - measured| / measured */
    double bias_pct;         /* median of (predicted - measured) / measured: < 0 optimistic */
    char rate[8];            /* "W" or "P": the side most samples sit on (a second row of
                              * the same samples gives P when some are compute bound) */
    double profile_rate, fitted_rate; /* bytes/s or flop/s; fitted: NAN without a good fit */
    char profile_from[192];  /* where the profile's figure came from */
} ws_calib_check_op;

#define WS_CALIB_CHECK_MAX 16

typedef struct ws_calib_check {
    char profile[160], datasheet[160], calibrated[160];
    ws_calib_check_op op[WS_CALIB_CHECK_MAX];
    int n_op;
    int skipped; /* samples of operations the cost model has no term for (pageable copies) */
} ws_calib_check;

/* Predicts the file's GPU and link samples with GPU profile `gpu` as s loads it. */
int ws_calib_file_check(ws_store *s, const char *path, const char *gpu, ws_calib_check *out,
                        ws_err *err);

#endif
