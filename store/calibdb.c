/* calibdb: calibration runs as typed rows (see calibdb.h). */
#include "calibdb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rows.h"
#include "store_priv.h"
#include "ws_util.h"

/* The key's columns in a row of type T (its field `key`). */
#define KEY_COLS(T)                                                                                \
    WS_COL_AS(T, "device", key.device, WS_COL_STR, NULL),                                          \
        WS_COL_AS(T, "op", key.op, WS_COL_STR, NULL),                                              \
        WS_COL_AS(T, "dtype", key.dtype, WS_COL_STR, NULL),                                        \
        WS_COL_AS(T, "attn_kind", key.attn_kind, WS_COL_STR, NULL)

#define C(f, t) WS_COL_OF(ws_calibdb_key, f, t)
static const ws_col k_key_cols[] = {
    C(device, WS_COL_STR), C(op, WS_COL_STR), C(dtype, WS_COL_STR), C(attn_kind, WS_COL_STR), {0}};
#undef C

/* hosts: the machine, then (from gpu_name on) its GPU, NULL when it has none */
#define C(f, t) WS_COL_OF(ws_calibdb_host, f, t)
static const ws_col k_host_cols[] = {C(fingerprint, WS_COL_STR),
                                     C(cpu_model, WS_COL_STR),
                                     C(cpu_cores, WS_COL_INT),
                                     C(mem_bytes, WS_COL_F64),
                                     C(isa, WS_COL_STR),
                                     C(gpu_name, WS_COL_STR),
                                     C(gpu_cc, WS_COL_STR),
                                     C(gpu_mem_bytes, WS_COL_F64),
                                     C(gpu_driver, WS_COL_STR),
                                     C(pcie_link, WS_COL_STR),
                                     {0}};
#undef C

#define C(f, t) WS_COL_OF(ws_calibdb_run, f, t)
static const ws_col k_run_cols[] = {
    C(host_id, WS_COL_I64), C(tool_version, WS_COL_STR), C(mode, WS_COL_STR),
    C(scope, WS_COL_STR),   C(started_at, WS_COL_STR),   C(finished_at, WS_COL_STR),
    C(note, WS_COL_STR),    C(drift_pct, WS_COL_REAL),   C(remeasured, WS_COL_INT),
    C(flagged, WS_COL_INT), C(probe_bw, WS_COL_REAL),    {0}};
#undef C

#define C(f, t) WS_COL_OF(ws_calibdb_sample, f, t)
static const ws_col k_sample_cols[] = {KEY_COLS(ws_calibdb_sample),
                                       C(params, WS_COL_TEXT),
                                       C(flops, WS_COL_F64),
                                       C(bytes, WS_COL_F64),
                                       C(repeats, WS_COL_INT),
                                       C(t_median, WS_COL_F64),
                                       C(t_min, WS_COL_F64),
                                       C(t_max, WS_COL_F64),
                                       C(t_est, WS_COL_REAL),
                                       C(spread_pct, WS_COL_REAL),
                                       {0}};
#undef C

#define C(f, t) WS_COL_OF(ws_calibdb_fit, f, t)
static const ws_col k_fit_cols[] = {KEY_COLS(ws_calibdb_fit),
                                    C(form, WS_COL_STR),
                                    C(c0, WS_COL_REAL),
                                    C(c0_se, WS_COL_REAL),
                                    C(peak_flops, WS_COL_REAL),
                                    C(peak_flops_se, WS_COL_REAL),
                                    C(bandwidth, WS_COL_REAL),
                                    C(bandwidth_se, WS_COL_REAL),
                                    C(r2, WS_COL_REAL),
                                    C(heldout_mape_pct, WS_COL_REAL),
                                    C(n_samples, WS_COL_INT),
                                    C(good, WS_COL_INT),
                                    C(note, WS_COL_STR),
                                    C(p_fixed, WS_COL_INT),
                                    C(w_fixed, WS_COL_INT),
                                    C(compute_bound, WS_COL_INT),
                                    C(factor, WS_COL_REAL),
                                    C(factor_se, WS_COL_REAL),
                                    C(spread_pct, WS_COL_REAL),
                                    C(fallback, WS_COL_STR),
                                    C(fallback_mape_pct, WS_COL_REAL),
                                    C(pieces, WS_COL_STR),
                                    {0}};
#undef C

#define C(f, t) WS_COL_OF(ws_calibdb_source, f, t)
static const ws_col k_source_cols[] = {C(path, WS_COL_STR),
                                       C(sha256, WS_COL_STR),
                                       C(bytes, WS_COL_I64),
                                       C(rows, WS_COL_INT),
                                       C(what, WS_COL_STR),
                                       C(measured_by, WS_COL_STR),
                                       C(tool, WS_COL_STR),
                                       C(gpu, WS_COL_STR),
                                       C(dtype, WS_COL_STR),
                                       C(licence, WS_COL_STR),
                                       {0}};
#undef C

int ws_calibdb_put_host(ws_store *s, const ws_calibdb_host *h, long long *host_id, ws_err *err)
{
    sqlite3_stmt *st;
    char now[32];
    ws_utc_now(now, sizeof now);
    int rc = ws_rows_prep_insert(s, "INSERT OR IGNORE INTO hosts", "first_seen", k_host_cols,
                                 "cannot store host", &st, err);
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, now, -1, SQLITE_STATIC);
    const int n = ws_row_bind(st, 2, k_host_cols, h);
    for (int i = 2 + ws_cols_index(k_host_cols, "gpu_name"); !h->has_gpu && i < n; i++)
        sqlite3_bind_null(st, i);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return WS_DB_FAIL(s, err, "cannot store host");
    long long id = -1;
    if (sqlite3_prepare_v2(ws_store_sqlite(s), "SELECT id FROM hosts WHERE fingerprint = ?1", -1,
                           &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, h->fingerprint, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW)
            id = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    if (id < 0)
        return WS_DB_FAIL(s, err, "cannot find host");
    *host_id = id;
    return 0;
}

int ws_calibdb_put_run(ws_store *s, ws_calibdb_run *run, ws_err *err)
{
    sqlite3_stmt *st;
    int rc = ws_rows_prep_insert(s, "INSERT INTO calib_runs", NULL, k_run_cols, "cannot store run",
                                 &st, err);
    if (rc)
        return rc;
    ws_row_bind(st, 1, k_run_cols, run);
    return ws_store_insert_id(s, st, "cannot store run", &run->id, err);
}

int ws_calibdb_put_samples(ws_store *s, long long run_id, const ws_calibdb_sample *x, int n,
                           ws_err *err)
{
    return ws_rows_put(s, "samples", "run_id", run_id, k_sample_cols, x, sizeof *x,
                       n > 0 ? (size_t)n : 0, "cannot store samples", "cannot store sample", err);
}

int ws_calibdb_put_fits(ws_store *s, long long run_id, const ws_calibdb_fit *f, int n, ws_err *err)
{
    return ws_rows_put(s, "fits", "run_id", run_id, k_fit_cols, f, sizeof *f, n > 0 ? (size_t)n : 0,
                       "cannot store fits", "cannot store fit", err);
}

int ws_calibdb_put_sources(ws_store *s, long long run_id, const ws_calibdb_source *src, int n,
                           ws_err *err)
{
    return ws_rows_put(s, "calib_sources", "run_id", run_id, k_source_cols, src, sizeof *src,
                       n > 0 ? (size_t)n : 0, "cannot store sources", "cannot store source", err);
}

/* Steps a prepared query of `cols` (then, with more, the values it reads) into a heap
 * array; finalizes st. */
static int read_rows(ws_store *s, sqlite3_stmt *st, size_t sz, const ws_col *cols,
                     void (*more)(sqlite3_stmt *st, int col, void *elem), const char *what,
                     void **out, int *n_out, ws_err *err)
{
    size_t n = 0;
    int rc = ws_rows_read(s, st, sz, cols, more, what, out, &n, err);
    sqlite3_finalize(st);
    *n_out = (int)n;
    return rc;
}

int ws_calibdb_get_sources(ws_store *s, long long run_id, ws_calibdb_source **out, int *n_out,
                           ws_err *err)
{
    size_t n = 0;
    int rc = ws_rows_of(s, "calib_sources", "run_id", run_id, "id", k_source_cols, sizeof **out,
                        "cannot read sources", (void **)out, &n, err);
    *n_out = (int)n;
    return rc;
}

int ws_calibdb_link_profile(ws_store *s, const char *name, long long host_id, long long run_id,
                            ws_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "UPDATE profiles SET host_id = ?1, run_id = ?2 WHERE name = ?3", -1, &st,
                           NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot link profile");
    sqlite3_bind_int64(st, 1, host_id);
    sqlite3_bind_int64(st, 2, run_id);
    sqlite3_bind_text(st, 3, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : WS_DB_FAIL(s, err, "cannot link profile");
    sqlite3_finalize(st);
    return rc;
}

/* A fit's id and run after its columns. */
static void more_fit(sqlite3_stmt *st, int col, void *elem)
{
    ws_calibdb_fit *f = elem;
    f->id = sqlite3_column_int64(st, col);
    f->run_id = sqlite3_column_int64(st, col + 1);
}

/* "SELECT <fit columns>, f.id, f.run_id FROM fits f <rest>" prepared. */
static int prep_fits(ws_store *s, const char *rest, sqlite3_stmt **st, ws_err *err)
{
    char names[1024], sql[2048];
    ws_cols_names(names, sizeof names, "f.", k_fit_cols, NULL);
    snprintf(sql, sizeof sql, "SELECT %s, f.id, f.run_id FROM fits f %s", names, rest);
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read fits");
    return 0;
}

int ws_calibdb_newest_good_fits(ws_store *s, long long host_id, const char *const *devices,
                                int n_devices, ws_calibdb_fit **out, int *n_out, ws_err *err)
{
    *out = NULL;
    *n_out = 0;
    if (n_devices < 1 || n_devices > 8)
        return ws_err_set(err, WS_EINVAL, "newest good fits: 1 to 8 devices, not %d", n_devices);
    char in[64] = "?2";
    for (int i = 1; i < n_devices; i++) {
        size_t l = strlen(in);
        snprintf(in + l, sizeof in - l, ",?%d", i + 2);
    }
    char rest[1024];
    snprintf(rest, sizeof rest,
             "JOIN calib_runs r ON r.id = f.run_id WHERE "
             "r.host_id = ?1 AND f.good = 1 AND f.device IN (%s) AND f.id = (SELECT max(g.id) "
             "FROM fits g JOIN calib_runs q ON q.id = g.run_id WHERE q.host_id = ?1 AND "
             "g.good = 1 AND g.device = f.device AND g.op = f.op AND g.dtype = f.dtype AND "
             "g.attn_kind = f.attn_kind) ORDER BY f.device, f.op, f.attn_kind, f.dtype",
             in);
    sqlite3_stmt *st;
    int rc = prep_fits(s, rest, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, host_id);
    for (int i = 0; i < n_devices; i++)
        sqlite3_bind_text(st, i + 2, devices[i], -1, SQLITE_STATIC);
    return read_rows(s, st, sizeof **out, k_fit_cols, more_fit, "cannot read fits", (void **)out,
                     n_out, err);
}

int ws_calibdb_newest_probe(ws_store *s, long long host_id, double *bw, long long *run_id,
                            ws_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "SELECT id, probe_bw FROM calib_runs WHERE host_id = ?1 AND flagged = 0 "
                           "AND probe_bw > 0 ORDER BY id DESC LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return ws_err_set(err, WS_EDB, "%s: cannot read the reference probe: %s", ws_store_path(s),
                          sqlite3_errmsg(ws_store_sqlite(s)));
    sqlite3_bind_int64(st, 1, host_id);
    const int step = sqlite3_step(st);
    int rc = 0;
    if (step == SQLITE_ROW) {
        *run_id = sqlite3_column_int64(st, 0);
        *bw = sqlite3_column_double(st, 1);
    } else if (step == SQLITE_DONE) {
        rc = ws_err_set(err, WS_ENOTFOUND, "no calibration of this host timed a reference probe");
    } else {
        rc = ws_err_set(err, WS_EDB, "%s: cannot read the reference probe: %s", ws_store_path(s),
                        sqlite3_errmsg(ws_store_sqlite(s)));
    }
    sqlite3_finalize(st);
    return rc;
}

int ws_calibdb_get_run(ws_store *s, long long run_id, ws_calibdb_run *run, ws_calibdb_host *host,
                       ws_err *err)
{
    char run_names[512], host_names[512], sql[1536];
    ws_cols_names(run_names, sizeof run_names, "r.", k_run_cols, NULL);
    ws_cols_names(host_names, sizeof host_names, "h.", k_host_cols, NULL);
    snprintf(sql, sizeof sql,
             "SELECT r.id, %s, (SELECT count(*) FROM samples WHERE run_id = r.id), %s FROM "
             "calib_runs r JOIN hosts h ON h.id = r.host_id WHERE ?1 = 0 OR r.id = ?1 "
             "ORDER BY r.id DESC LIMIT 1",
             run_names, host_names);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read runs");
    sqlite3_bind_int64(st, 1, run_id);
    int rc = ws_store_run_row(s, st, run_id, "cannot read runs", "calibration run",
                              "run 'writescope calib'", err);
    if (rc)
        return rc;
    memset(run, 0, sizeof *run);
    memset(host, 0, sizeof *host);
    run->id = sqlite3_column_int64(st, 0);
    const int n_col = ws_row_read(st, 1, k_run_cols, run);
    run->n_samples = sqlite3_column_int(st, n_col);
    ws_row_read(st, n_col + 1, k_host_cols, host);
    host->has_gpu =
        sqlite3_column_type(st, n_col + 1 + ws_cols_index(k_host_cols, "gpu_name")) != SQLITE_NULL;
    if (isnan(host->gpu_mem_bytes))
        host->gpu_mem_bytes = 0; /* NULL reads 0 here: no GPU, or its memory not known */
    sqlite3_finalize(st);
    return 0;
}

int ws_calibdb_get_fits(ws_store *s, long long run_id, ws_calibdb_fit **out, int *n_out,
                        ws_err *err)
{
    *out = NULL;
    *n_out = 0;
    sqlite3_stmt *st;
    int rc = prep_fits(s, "WHERE f.run_id = ?1 ORDER BY f.id", &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    return read_rows(s, st, sizeof **out, k_fit_cols, more_fit, "cannot read fits", (void **)out,
                     n_out, err);
}

int ws_calibdb_get_samples(ws_store *s, long long run_id, const ws_calibdb_key *key,
                           ws_calibdb_sample **out, int *n_out, ws_err *err)
{
    *out = NULL;
    *n_out = 0;
    char names[1024], sql[1536];
    ws_cols_names(names, sizeof names, "", k_sample_cols, NULL);
    snprintf(sql, sizeof sql, "SELECT %s FROM samples WHERE run_id = ?1 %s", names,
             key ? "AND device = ?2 AND op = ?3 AND dtype = ?4 AND attn_kind = ?5 ORDER BY "
                   "bytes, id"
                 : "ORDER BY id");
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read samples");
    sqlite3_bind_int64(st, 1, run_id);
    if (key)
        ws_row_bind(st, 2, k_key_cols, key);
    return read_rows(s, st, sizeof **out, k_sample_cols, NULL, "cannot read samples", (void **)out,
                     n_out, err);
}
