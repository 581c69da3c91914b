/* calibdb: calibration runs as typed rows (see calibdb.h). */
#include "calibdb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_priv.h"
#include "ws_util.h"

static void bind_key(sqlite3_stmt *st, int first, const ws_calibdb_key *k)
{
    sqlite3_bind_text(st, first, k->device, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, first + 1, k->op, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, first + 2, k->dtype, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, first + 3, k->attn_kind, -1, SQLITE_STATIC);
}

static void col_key(sqlite3_stmt *st, int first, ws_calibdb_key *k)
{
    ws_store_col_text(st, first, k->device, sizeof k->device);
    ws_store_col_text(st, first + 1, k->op, sizeof k->op);
    ws_store_col_text(st, first + 2, k->dtype, sizeof k->dtype);
    ws_store_col_text(st, first + 3, k->attn_kind, sizeof k->attn_kind);
}

int ws_calibdb_put_host(ws_store *s, const ws_calibdb_host *h, long long *host_id, ws_err *err)
{
    sqlite3 *db = ws_store_sqlite(s);
    sqlite3_stmt *st;
    char now[32];
    ws_utc_now(now, sizeof now);
    if (sqlite3_prepare_v2(db,
                           "INSERT OR IGNORE INTO hosts(fingerprint, cpu_model, cpu_cores, mem_bytes, "
                           "isa, gpu_name, gpu_cc, gpu_mem_bytes, gpu_driver, pcie_link, first_seen) "
                           "VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot store host");
    sqlite3_bind_text(st, 1, h->fingerprint, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, h->cpu_model, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, h->cpu_cores);
    sqlite3_bind_double(st, 4, h->mem_bytes);
    sqlite3_bind_text(st, 5, h->isa, -1, SQLITE_STATIC);
    if (h->has_gpu) {
        sqlite3_bind_text(st, 6, h->gpu_name, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 7, h->gpu_cc, -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 8, h->gpu_mem_bytes);
        sqlite3_bind_text(st, 9, h->gpu_driver, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 10, h->pcie_link, -1, SQLITE_STATIC);
    }
    sqlite3_bind_text(st, 11, now, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return WS_DB_FAIL(s, err, "cannot store host");
    long long id = -1;
    if (sqlite3_prepare_v2(db, "SELECT id FROM hosts WHERE fingerprint = ?1", -1, &st, NULL) ==
        SQLITE_OK) {
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
    sqlite3 *db = ws_store_sqlite(s);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO calib_runs(host_id, tool_version, mode, scope, started_at, "
                           "finished_at, note) VALUES (?1,?2,?3,?4,?5,?6,?7)",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot store run");
    sqlite3_bind_int64(st, 1, run->host_id);
    sqlite3_bind_text(st, 2, run->tool_version, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, run->mode, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, run->scope, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, run->started_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, run->finished_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, run->note, -1, SQLITE_STATIC);
    return ws_store_insert_id(s, st, "cannot store run", &run->id, err);
}

int ws_calibdb_put_samples(ws_store *s, long long run_id, const ws_calibdb_sample *x, int n,
                           ws_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "INSERT INTO samples(run_id, device, op, dtype, attn_kind, params, flops, "
                           "bytes, repeats, t_median, t_min, t_max) VALUES "
                           "(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot store samples");
    for (int i = 0; i < n; i++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run_id);
        bind_key(st, 2, &x[i].key);
        sqlite3_bind_text(st, 6, x[i].params[0] ? x[i].params : "{}", -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 7, x[i].flops);
        sqlite3_bind_double(st, 8, x[i].bytes);
        sqlite3_bind_int(st, 9, x[i].repeats);
        sqlite3_bind_double(st, 10, x[i].t_median);
        sqlite3_bind_double(st, 11, x[i].t_min);
        sqlite3_bind_double(st, 12, x[i].t_max);
        const int rc = ws_store_step_done(s, st, "cannot store sample", err);
        if (rc)
            return rc;
    }
    sqlite3_finalize(st);
    return 0;
}

int ws_calibdb_put_fits(ws_store *s, long long run_id, const ws_calibdb_fit *f, int n,
                        ws_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "INSERT INTO fits(run_id, device, op, dtype, attn_kind, form, c0, c0_se, "
                           "peak_flops, peak_flops_se, bandwidth, bandwidth_se, r2, "
                           "heldout_mape_pct, n_samples, good, note, p_fixed, w_fixed, "
                           "compute_bound, factor, factor_se) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,"
                           "?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22)",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot store fits");
    for (int i = 0; i < n; i++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run_id);
        bind_key(st, 2, &f[i].key);
        sqlite3_bind_text(st, 6, f[i].form, -1, SQLITE_STATIC);
        ws_store_bind_num(st, 7, f[i].c0);
        ws_store_bind_num(st, 8, f[i].c0_se);
        ws_store_bind_num(st, 9, f[i].peak_flops);
        ws_store_bind_num(st, 10, f[i].peak_flops_se);
        ws_store_bind_num(st, 11, f[i].bandwidth);
        ws_store_bind_num(st, 12, f[i].bandwidth_se);
        ws_store_bind_num(st, 13, f[i].r2);
        ws_store_bind_num(st, 14, f[i].heldout_mape_pct);
        sqlite3_bind_int(st, 15, f[i].n_samples);
        sqlite3_bind_int(st, 16, f[i].good);
        sqlite3_bind_text(st, 17, f[i].note, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 18, f[i].p_fixed);
        sqlite3_bind_int(st, 19, f[i].w_fixed);
        sqlite3_bind_int(st, 20, f[i].compute_bound);
        ws_store_bind_num(st, 21, f[i].factor);
        ws_store_bind_num(st, 22, f[i].factor_se);
        const int rc = ws_store_step_done(s, st, "cannot store fit", err);
        if (rc)
            return rc;
    }
    sqlite3_finalize(st);
    return 0;
}

int ws_calibdb_put_sources(ws_store *s, long long run_id, const ws_calibdb_source *src, int n,
                           ws_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "INSERT INTO calib_sources(run_id, path, sha256, bytes, rows, what, "
                           "measured_by, tool, gpu, dtype, licence) VALUES (?1,?2,?3,?4,?5,?6,?7,"
                           "?8,?9,?10,?11)",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot store sources");
    for (int i = 0; i < n; i++) {
        const ws_calibdb_source *x = &src[i];
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run_id);
        const char *text[] = {x->path, x->sha256};
        for (int k = 0; k < 2; k++)
            sqlite3_bind_text(st, 2 + k, text[k], -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, x->bytes);
        sqlite3_bind_int(st, 5, x->rows);
        const char *more[] = {x->what, x->measured_by, x->tool, x->gpu, x->dtype, x->licence};
        for (int k = 0; k < 6; k++)
            sqlite3_bind_text(st, 6 + k, more[k], -1, SQLITE_STATIC);
        const int rc = ws_store_step_done(s, st, "cannot store source", err);
        if (rc)
            return rc;
    }
    sqlite3_finalize(st);
    return 0;
}

static void row_source(sqlite3_stmt *st, void *elem)
{
    ws_calibdb_source *x = elem;
    memset(x, 0, sizeof *x);
    ws_store_col_text(st, 0, x->path, sizeof x->path);
    ws_store_col_text(st, 1, x->sha256, sizeof x->sha256);
    x->bytes = sqlite3_column_int64(st, 2);
    x->rows = sqlite3_column_int(st, 3);
    ws_store_col_text(st, 4, x->what, sizeof x->what);
    ws_store_col_text(st, 5, x->measured_by, sizeof x->measured_by);
    ws_store_col_text(st, 6, x->tool, sizeof x->tool);
    ws_store_col_text(st, 7, x->gpu, sizeof x->gpu);
    ws_store_col_text(st, 8, x->dtype, sizeof x->dtype);
    ws_store_col_text(st, 9, x->licence, sizeof x->licence);
}

int ws_calibdb_get_sources(ws_store *s, long long run_id, ws_calibdb_source **out, int *n_out,
                           ws_err *err)
{
    *out = NULL;
    *n_out = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "SELECT path, sha256, bytes, rows, what, measured_by, tool, gpu, dtype, "
                           "licence FROM calib_sources WHERE run_id = ?1 ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read sources");
    sqlite3_bind_int64(st, 1, run_id);
    size_t n = 0;
    int rc = ws_store_read_rows(s, st, sizeof **out, row_source, "cannot read sources",
                                (void **)out, &n, err);
    sqlite3_finalize(st);
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

#define FIT_COLS                                                                                \
    "f.id, f.run_id, f.device, f.op, f.dtype, f.attn_kind, f.form, f.c0, f.c0_se, "             \
    "f.peak_flops, f.peak_flops_se, f.bandwidth, f.bandwidth_se, f.factor, f.factor_se, f.r2, " \
    "f.heldout_mape_pct, f.n_samples, f.good, f.p_fixed, f.w_fixed, f.compute_bound, f.note"

static void col_fit(sqlite3_stmt *st, ws_calibdb_fit *f)
{
    memset(f, 0, sizeof *f);
    f->id = sqlite3_column_int64(st, 0);
    f->run_id = sqlite3_column_int64(st, 1);
    col_key(st, 2, &f->key);
    ws_store_col_text(st, 6, f->form, sizeof f->form);
    double *num[] = {&f->c0,           &f->c0_se,  &f->peak_flops, &f->peak_flops_se,
                     &f->bandwidth,    &f->bandwidth_se, &f->factor, &f->factor_se,
                     &f->r2,           &f->heldout_mape_pct};
    for (int i = 0; i < 10; i++)
        *num[i] = ws_store_col_num(st, 7 + i);
    f->n_samples = sqlite3_column_int(st, 17);
    f->good = sqlite3_column_int(st, 18);
    f->p_fixed = sqlite3_column_int(st, 19);
    f->w_fixed = sqlite3_column_int(st, 20);
    f->compute_bound = sqlite3_column_int(st, 21);
    ws_store_col_text(st, 22, f->note, sizeof f->note);
}

static void row_fit(sqlite3_stmt *st, void *elem)
{
    col_fit(st, elem);
}

/* Steps a prepared query of FIT_COLS into a heap array. */
static int read_fits(ws_store *s, sqlite3_stmt *st, ws_calibdb_fit **out, int *n_out, ws_err *err)
{
    size_t n = 0;
    int rc = ws_store_read_rows(s, st, sizeof **out, row_fit, "cannot read fits", (void **)out,
                                &n, err);
    *n_out = (int)n;
    return rc;
}

static void row_sample(sqlite3_stmt *st, void *elem)
{
    ws_calibdb_sample *x = elem;
    col_key(st, 0, &x->key);
    ws_store_col_text(st, 4, x->params, sizeof x->params);
    x->flops = sqlite3_column_double(st, 5);
    x->bytes = sqlite3_column_double(st, 6);
    x->repeats = sqlite3_column_int(st, 7);
    x->t_median = sqlite3_column_double(st, 8);
    x->t_min = ws_store_col_num(st, 9);
    x->t_max = ws_store_col_num(st, 10);
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
    char sql[1536];
    snprintf(sql, sizeof sql,
             "SELECT " FIT_COLS " FROM fits f JOIN calib_runs r ON r.id = f.run_id WHERE "
             "r.host_id = ?1 AND f.good = 1 AND f.device IN (%s) AND f.id = (SELECT max(g.id) "
             "FROM fits g JOIN calib_runs q ON q.id = g.run_id WHERE q.host_id = ?1 AND "
             "g.good = 1 AND g.device = f.device AND g.op = f.op AND g.dtype = f.dtype AND "
             "g.attn_kind = f.attn_kind) ORDER BY f.device, f.op, f.attn_kind, f.dtype",
             in);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read fits");
    sqlite3_bind_int64(st, 1, host_id);
    for (int i = 0; i < n_devices; i++)
        sqlite3_bind_text(st, i + 2, devices[i], -1, SQLITE_STATIC);
    int rc = read_fits(s, st, out, n_out, err);
    sqlite3_finalize(st);
    return rc;
}

int ws_calibdb_get_run(ws_store *s, long long run_id, ws_calibdb_run *run, ws_calibdb_host *host,
                       ws_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "SELECT r.id, r.host_id, r.tool_version, r.mode, r.scope, r.started_at, "
                           "r.finished_at, r.note, (SELECT count(*) FROM samples WHERE run_id = "
                           "r.id), h.fingerprint, h.cpu_model, h.cpu_cores, h.mem_bytes, h.isa, "
                           "h.gpu_name, h.gpu_cc, h.gpu_mem_bytes, h.gpu_driver, h.pcie_link FROM "
                           "calib_runs r JOIN hosts h ON h.id = r.host_id WHERE ?1 = 0 OR r.id = ?1 "
                           "ORDER BY r.id DESC LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read runs");
    sqlite3_bind_int64(st, 1, run_id);
    int rc = ws_store_run_row(s, st, run_id, "cannot read runs", "calibration run",
                              "run 'writescope calib'", err);
    if (rc)
        return rc;
    memset(run, 0, sizeof *run);
    memset(host, 0, sizeof *host);
    run->id = sqlite3_column_int64(st, 0);
    run->host_id = sqlite3_column_int64(st, 1);
    ws_store_col_text(st, 2, run->tool_version, sizeof run->tool_version);
    ws_store_col_text(st, 3, run->mode, sizeof run->mode);
    ws_store_col_text(st, 4, run->scope, sizeof run->scope);
    ws_store_col_text(st, 5, run->started_at, sizeof run->started_at);
    ws_store_col_text(st, 6, run->finished_at, sizeof run->finished_at);
    ws_store_col_text(st, 7, run->note, sizeof run->note);
    run->n_samples = sqlite3_column_int(st, 8);
    ws_store_col_text(st, 9, host->fingerprint, sizeof host->fingerprint);
    ws_store_col_text(st, 10, host->cpu_model, sizeof host->cpu_model);
    host->cpu_cores = sqlite3_column_int(st, 11);
    host->mem_bytes = sqlite3_column_double(st, 12);
    ws_store_col_text(st, 13, host->isa, sizeof host->isa);
    host->has_gpu = sqlite3_column_type(st, 14) != SQLITE_NULL;
    ws_store_col_text(st, 14, host->gpu_name, sizeof host->gpu_name);
    ws_store_col_text(st, 15, host->gpu_cc, sizeof host->gpu_cc);
    host->gpu_mem_bytes = sqlite3_column_double(st, 16);
    ws_store_col_text(st, 17, host->gpu_driver, sizeof host->gpu_driver);
    ws_store_col_text(st, 18, host->pcie_link, sizeof host->pcie_link);
    sqlite3_finalize(st);
    return 0;
}

int ws_calibdb_get_fits(ws_store *s, long long run_id, ws_calibdb_fit **out, int *n_out,
                        ws_err *err)
{
    *out = NULL;
    *n_out = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "SELECT " FIT_COLS " FROM fits f WHERE f.run_id = ?1 ORDER BY f.id", -1,
                           &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read fits");
    sqlite3_bind_int64(st, 1, run_id);
    int rc = read_fits(s, st, out, n_out, err);
    sqlite3_finalize(st);
    return rc;
}

int ws_calibdb_get_samples(ws_store *s, long long run_id, const ws_calibdb_key *key,
                           ws_calibdb_sample **out, int *n_out, ws_err *err)
{
    *out = NULL;
    *n_out = 0;
    sqlite3_stmt *st;
    const char *sql =
        key ? "SELECT device, op, dtype, attn_kind, params, flops, bytes, repeats, t_median, "
              "t_min, t_max FROM samples WHERE run_id = ?1 AND device = ?2 AND op = ?3 AND "
              "dtype = ?4 AND attn_kind = ?5 ORDER BY bytes, id"
            : "SELECT device, op, dtype, attn_kind, params, flops, bytes, repeats, t_median, "
              "t_min, t_max FROM samples WHERE run_id = ?1 ORDER BY id";
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read samples");
    sqlite3_bind_int64(st, 1, run_id);
    if (key)
        bind_key(st, 2, key);
    size_t n = 0;
    int rc = ws_store_read_rows(s, st, sizeof **out, row_sample, "cannot read samples",
                                (void **)out, &n, err);
    sqlite3_finalize(st);
    *n_out = (int)n;
    return rc;
}
