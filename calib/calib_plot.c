/* calib_plot: writes the data files plots/calib.gp draws -- for every roofline or transfer
 * fit of a run, the run's samples of that key (bytes, median, min, max time) beside the
 * fitted model's time for the same operation (see calib.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "calib.h"
#include "ws_util.h"

int ws_calib_plot_data(ws_store *store, long long run_id, const char *dir, int *n_out,
                       char *titles, size_t titles_cap, ws_err *err)
{
    json_t *show = ws_calib_show(store, run_id, err);
    if (!show)
        return err->code;
    long long rid = json_integer_value(json_object_get(json_object_get(show, "run"), "id"));
    sqlite3 *db = ws_store_db(store);
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(db,
                           "SELECT bytes, t_median, t_min, t_max, flops FROM samples WHERE run_id = ?1 "
                           "AND device = ?2 AND op = ?3 AND dtype = ?4 AND attn_kind = ?5 ORDER BY bytes",
                           -1, &q, NULL) != SQLITE_OK) {
        json_decref(show);
        return ws_err_set(err, WS_EDB, "%s: cannot read samples: %s", ws_store_path(store),
                          sqlite3_errmsg(db));
    }
    int n = 0, rc = 0;
    titles[0] = '\0';
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(show, "fits"), i, f)
    {
        const char *form = json_string_value(json_object_get(f, "form"));
        if (!strcmp(form, "factor") || json_integer_value(json_object_get(f, "n_samples")) < 3)
            continue;
        ws_fit_result r = {.form = strcmp(form, "transfer") ? WS_FIT_ROOFLINE : WS_FIT_TRANSFER,
                           .c0 = json_number_value(json_object_get(f, "c0")),
                           .peak_flops = json_number_value(json_object_get(f, "peak_flops")),
                           .bandwidth = json_number_value(json_object_get(f, "bandwidth"))};
        char path[WS_PATH_MAX];
        snprintf(path, sizeof path, "%s/%d.dat", dir, n + 1);
        FILE *out = fopen(path, "w");
        if (!out) {
            rc = ws_err_set(err, WS_EIO, "%s: cannot write", path);
            break;
        }
        sqlite3_reset(q);
        sqlite3_bind_int64(q, 1, rid);
        for (int c = 0; c < 4; c++)
            sqlite3_bind_text(q, 2 + c,
                              json_string_value(json_object_get(
                                  f, (const char *[]){"device", "op", "dtype", "attn_kind"}[c])),
                              -1, SQLITE_TRANSIENT);
        while (sqlite3_step(q) == SQLITE_ROW) {
            double bytes = sqlite3_column_double(q, 0), flops = sqlite3_column_double(q, 4);
            fprintf(out, "%.6g %.6g %.6g %.6g %.6g %.6g\n", bytes, sqlite3_column_double(q, 1),
                    sqlite3_column_double(q, 2), sqlite3_column_double(q, 3),
                    ws_fit_predict(&r, flops, bytes), flops);
        }
        fclose(out);
        n++;
        char t[260];
        double mape = json_number_value(json_object_get(f, "heldout_mape_pct"));
        char rates[64] = "";
        if (r.peak_flops > 0 && !json_is_true(json_object_get(f, "p_fixed")))
            snprintf(rates, sizeof rates, "_P=%.3gGflop/s", r.peak_flops / 1e9);
        if (r.bandwidth > 0 && !json_is_true(json_object_get(f, "w_fixed"))) {
            size_t rl = strlen(rates);
            snprintf(rates + rl, sizeof rates - rl, "_W=%.3gGB/s", r.bandwidth / 1e9);
        }
        snprintf(t, sizeof t, "%s%s%s_heldout_MAPE=%.1f%%%s", n > 1 ? " " : "",
                 json_string_value(json_object_get(f, "key")), rates, mape,
                 json_is_true(json_object_get(f, "good")) ? "" : "_(POOR)");
        size_t l = strlen(titles);
        snprintf(titles + l, titles_cap - l, "%s", t);
    }
    sqlite3_finalize(q);
    json_decref(show);
    if (!rc && n == 0)
        rc = ws_err_set(err, WS_ENOTFOUND, "run %lld has no fits to plot", rid);
    *n_out = n;
    return rc;
}
