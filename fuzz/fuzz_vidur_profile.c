/* fuzz_vidur_profile: libFuzzer target for the reader of Vidur's operator profiling CSVs
 * (calib/vidur_csv.c, ws_vidur_parse), which `writescope calib import` and `calib check`
 * feed with files from anywhere.
 *
 * Each input is parsed twice into one list (as a folder's files are): every row it accepts
 * keeps the reader's promises (a known operation, a line past the header, positive per-GPU
 * shapes within bounds, a median time finite and at least 1 ns, min <= median <= max where
 * given, every 5th row of each operation of each pass held out) and a rejected input is one
 * line naming the file, with the list left as it was. A broken promise aborts. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vidur_csv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The rows [n0, n) one parse added. */
static void check_rows(const ws_vidur_rows *r, int n0)
{
    int seen[WS_VOP_COUNT] = {0};
    for (int i = n0; i < r->n; i++) {
        const ws_vidur_row *w = &r->v[i];
        const double tol = 1e-9 * w->t;
        int ok = w->op >= 0 && w->op < WS_VOP_COUNT && w->line >= 2 &&
                 w->t >= WS_VIDUR_T_MIN_MS * 1e-3 && isfinite(w->t) &&
                 (isnan(w->t_min) || (w->t_min >= 0 && w->t_min <= w->t + tol)) &&
                 (isnan(w->t_max) || (isfinite(w->t_max) && w->t <= w->t_max + tol)) && w->tp >= 1 &&
                 w->q_heads >= 1 && w->kv_heads >= 1 && w->head_dim >= 1 &&
                 w->heldout == (seen[w->op]++ % WS_VIDUR_HOLDOUT_EVERY ==
                                WS_VIDUR_HOLDOUT_EVERY - 1);
        if (w->op <= WS_VOP_ATTN_PREFILL)
            ok = ok && w->batch >= 1 && w->batch <= WS_VIDUR_DIM_MAX && w->kv >= 0 &&
                 (w->op == WS_VOP_ATTN_PREFILL ? w->chunk >= 1 : w->kv >= 1);
        else
            ok = ok && w->M >= 1 && w->M <= WS_VIDUR_DIM_MAX && w->K >= 1 &&
                 (ws_vidur_op_group(w->op) != WS_VIDUR_GEMM || w->N >= 1);
        if (!ok) {
            fprintf(stderr, "fuzz_vidur_profile: row %d (%s, line %d) breaks a promise\n", i,
                    ws_vidur_op_name(w->op), w->line);
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ws_vidur_rows r = {0};
    for (int pass = 0; pass < 2; pass++) {
        const int n0 = r.n;
        ws_err err = {0};
        if (ws_vidur_parse((const char *)data, size, "fuzz.csv", &r, &err) == 0) {
            check_rows(&r, n0);
            continue;
        }
        if (r.n != n0 || !strstr(err.msg, "fuzz.csv") || strchr(err.msg, '\n')) {
            fprintf(stderr, "fuzz_vidur_profile: bad rejection (%d rows, was %d): %s\n", r.n, n0,
                    err.msg);
            abort();
        }
    }
    ws_vidur_rows_free(&r);
    return 0;
}
