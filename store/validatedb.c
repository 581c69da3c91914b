/* validatedb: validations as typed rows (see validatedb.h). */
#include "validatedb.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_priv.h"
#include "ws_util.h"

static int in_set(const char *v, const char *a, const char *b, const char *c)
{
    return !strcmp(v, a) || !strcmp(v, b) || (c && !strcmp(v, c));
}

static int check(ws_store *s, const ws_validatedb_run *run, const ws_validatedb_stat *st,
                 size_t n_st, ws_err *err)
{
    if (!in_set(run->gpu_source, "modeled", "measured", NULL))
        return ws_err_set(err, WS_EINVAL,
                          "%s: validation: gpu_source '%s' is not modeled or measured",
                          ws_store_path(s), run->gpu_source);
    for (size_t i = 0; i < n_st; i++)
        if (!in_set(st[i].scope, "step", "layer", NULL) ||
            !in_set(st[i].measured_source, "measured", "mixed", "modeled"))
            return ws_err_set(err, WS_EINVAL,
                              "%s: validation: quantity %s: scope '%s' or source '%s'",
                              ws_store_path(s), st[i].quantity, st[i].scope, st[i].measured_source);
    return ws_store_check_params(s, "validation", run->params, err);
}

static void bind_id(sqlite3_stmt *st, int i, long long id)
{
    if (id > 0)
        sqlite3_bind_int64(st, i, id);
    else
        sqlite3_bind_null(st, i);
}

static int store_in_tx(ws_store *s, ws_validatedb_run *run, const ws_validatedb_stat *stat,
                       size_t n_st, const ws_validatedb_point *pt, size_t n_pt,
                       const ws_validatedb_term *tm, size_t n_tm, ws_err *err)
{
    ws_store_stamp(run->started_at, sizeof run->started_at, run->tool_version,
                   sizeof run->tool_version);
    sqlite3_stmt *st = NULL;
    int rc = ws_store_prep(s,
                  "INSERT INTO validate_runs(started_at, tool_version, model, gpu, gpu_source, "
                  "host_profile, policy, batch, prompt_tokens, output_tokens, layers, repeats, "
                  "run_id, sim_run_id, calib_run_id, verdict, params, warmup) VALUES (?1, ?2, ?3, "
                  "?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
                  &st, err);
    if (rc)
        return rc;
    const char *txt[] = {run->started_at, run->tool_version, run->model, run->gpu,
                         run->gpu_source, run->host_profile, run->policy};
    for (int i = 0; i < 7; i++)
        sqlite3_bind_text(st, i + 1, txt[i], -1, SQLITE_STATIC);
    const int ints[] = {run->batch, run->prompt_tokens, run->output_tokens, run->layers,
                        run->repeats};
    for (int i = 0; i < 5; i++)
        sqlite3_bind_int(st, 8 + i, ints[i]);
    bind_id(st, 13, run->run_id);
    bind_id(st, 14, run->sim_run_id);
    bind_id(st, 15, run->calib_run_id);
    sqlite3_bind_text(st, 16, run->verdict, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 17, run->params[0] ? run->params : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 18, run->warmup);
    if ((rc = ws_store_insert_id(s, st, "insert validate_runs", &run->id, err)))
        return rc;

    if ((rc = ws_store_prep(s,
                   "INSERT INTO validate_stats(validate_id, quantity, scope, measured_source, "
                   "unit, n, mean_ape, p95_ape, noise_mean_ape, noise_p95_ape, mean_measured, "
                   "mean_predicted) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                   &st, err)))
        return rc;
    for (size_t i = 0; i < n_st; i++) {
        const ws_validatedb_stat *x = &stat[i];
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run->id);
        sqlite3_bind_text(st, 2, x->quantity, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, x->scope, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, x->measured_source, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, x->unit, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 6, x->n);
        const double v[] = {x->mean_ape,      x->p95_ape,       x->noise_mean_ape,
                            x->noise_p95_ape, x->mean_measured, x->mean_predicted};
        for (int k = 0; k < 6; k++)
            ws_store_bind_num(st, 7 + k, v[k]);
        if ((rc = ws_store_step_done(s, st, "insert validate_stats", err)))
            return rc;
    }
    sqlite3_finalize(st);

    if ((rc = ws_store_prep(s,
                   "INSERT INTO validate_points(validate_id, rep, quantity, step, layer, measured, "
                   "predicted) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                   &st, err)))
        return rc;
    for (size_t i = 0; i < n_pt; i++) {
        const ws_validatedb_point *x = &pt[i];
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run->id);
        sqlite3_bind_int(st, 2, x->rep);
        sqlite3_bind_text(st, 3, x->quantity, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 4, x->step);
        sqlite3_bind_int(st, 5, x->layer);
        ws_store_bind_num(st, 6, x->measured);
        ws_store_bind_num(st, 7, x->predicted);
        if ((rc = ws_store_step_done(s, st, "insert validate_points", err)))
            return rc;
    }
    sqlite3_finalize(st);

    if ((rc = ws_store_prep(s,
                   "INSERT INTO validate_terms(validate_id, term, measured, predicted, unit, "
                   "error_pct, step_share_pct, note) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                   &st, err)))
        return rc;
    for (size_t i = 0; i < n_tm; i++) {
        const ws_validatedb_term *x = &tm[i];
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run->id);
        sqlite3_bind_text(st, 2, x->term, -1, SQLITE_STATIC);
        ws_store_bind_num(st, 3, x->measured);
        ws_store_bind_num(st, 4, x->predicted);
        sqlite3_bind_text(st, 5, x->unit, -1, SQLITE_STATIC);
        ws_store_bind_num(st, 6, x->error_pct);
        ws_store_bind_num(st, 7, x->step_share_pct);
        sqlite3_bind_text(st, 8, x->note, -1, SQLITE_STATIC);
        if ((rc = ws_store_step_done(s, st, "insert validate_terms", err)))
            return rc;
    }
    sqlite3_finalize(st);
    return 0;
}

typedef struct val_rows {
    ws_validatedb_run *run;
    const ws_validatedb_stat *st;
    size_t n_st;
    const ws_validatedb_point *pt;
    size_t n_pt;
    const ws_validatedb_term *tm;
    size_t n_tm;
} val_rows;

static int val_body(ws_store *s, void *ctx, ws_err *err)
{
    val_rows *r = ctx;
    return store_in_tx(s, r->run, r->st, r->n_st, r->pt, r->n_pt, r->tm, r->n_tm, err);
}

int ws_validatedb_store(ws_store *s, ws_validatedb_run *run, const ws_validatedb_stat *st,
                        size_t n_st, const ws_validatedb_point *pt, size_t n_pt,
                        const ws_validatedb_term *tm, size_t n_tm, ws_err *err)
{
    int rc = check(s, run, st, n_st, err);
    if (rc)
        return rc;
    const int own = !ws_store_in_transaction(s);
    const long long id = run->id;
    val_rows r = {run, st, n_st, pt, n_pt, tm, n_tm};
    rc = ws_store_in_tx(s, val_body, &r, err);
    if (rc && own)
        run->id = id; /* the row it named is gone */
    return rc;
}

/* ---- reading ---- */

static void row_stat(sqlite3_stmt *st, void *elem)
{
    ws_validatedb_stat *x = elem;
    ws_store_col_text(st, 0, x->quantity, sizeof x->quantity);
    ws_store_col_text(st, 1, x->scope, sizeof x->scope);
    ws_store_col_text(st, 2, x->measured_source, sizeof x->measured_source);
    ws_store_col_text(st, 3, x->unit, sizeof x->unit);
    x->n = sqlite3_column_int64(st, 4);
    x->mean_ape = ws_store_col_num(st, 5);
    x->p95_ape = ws_store_col_num(st, 6);
    x->noise_mean_ape = ws_store_col_num(st, 7);
    x->noise_p95_ape = ws_store_col_num(st, 8);
    x->mean_measured = ws_store_col_num(st, 9);
    x->mean_predicted = ws_store_col_num(st, 10);
}

static void row_point(sqlite3_stmt *st, void *elem)
{
    ws_validatedb_point *x = elem;
    x->rep = sqlite3_column_int(st, 0);
    ws_store_col_text(st, 1, x->quantity, sizeof x->quantity);
    x->step = sqlite3_column_int(st, 2);
    x->layer = sqlite3_column_int(st, 3);
    x->measured = ws_store_col_num(st, 4);
    x->predicted = ws_store_col_num(st, 5);
}

static void row_term(sqlite3_stmt *st, void *elem)
{
    ws_validatedb_term *x = elem;
    ws_store_col_text(st, 0, x->term, sizeof x->term);
    x->measured = ws_store_col_num(st, 1);
    x->predicted = ws_store_col_num(st, 2);
    ws_store_col_text(st, 3, x->unit, sizeof x->unit);
    x->error_pct = ws_store_col_num(st, 4);
    x->step_share_pct = ws_store_col_num(st, 5);
    ws_store_col_text(st, 6, x->note, sizeof x->note);
}

static int read_rows(ws_store *s, const char *sql, long long id, size_t sz,
                     void (*row)(sqlite3_stmt *, void *), const char *what, void **out,
                     size_t *n_out, ws_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, what);
    sqlite3_bind_int64(st, 1, id);
    int rc = ws_store_read_rows(s, st, sz, row, what, out, n_out, err);
    sqlite3_finalize(st);
    return rc;
}

int ws_validatedb_get(ws_store *s, long long id, ws_validatedb_run *run, ws_validatedb_stat **stp,
                      size_t *n_st, ws_validatedb_point **pt, size_t *n_pt, ws_validatedb_term **tm,
                      size_t *n_tm, ws_err *err)
{
    sqlite3_stmt *st;
    const char *sql =
        id > 0
            ? "SELECT id, started_at, tool_version, model, gpu, gpu_source, host_profile, "
              "policy, batch, prompt_tokens, output_tokens, layers, repeats, run_id, "
              "sim_run_id, calib_run_id, verdict, params, warmup FROM validate_runs WHERE id = ?1"
            : "SELECT id, started_at, tool_version, model, gpu, gpu_source, host_profile, "
              "policy, batch, prompt_tokens, output_tokens, layers, repeats, run_id, "
              "sim_run_id, calib_run_id, verdict, params, warmup FROM validate_runs ORDER BY "
              "id DESC LIMIT 1";
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read validations");
    if (id > 0)
        sqlite3_bind_int64(st, 1, id);
    int rc = ws_store_run_row(s, st, id > 0 ? id : 0, "cannot read validations", "validation",
                              "writescope validate --db", err);
    if (rc)
        return rc;
    memset(run, 0, sizeof *run);
    run->id = sqlite3_column_int64(st, 0);
    ws_store_col_text(st, 1, run->started_at, sizeof run->started_at);
    ws_store_col_text(st, 2, run->tool_version, sizeof run->tool_version);
    ws_store_col_text(st, 3, run->model, sizeof run->model);
    ws_store_col_text(st, 4, run->gpu, sizeof run->gpu);
    ws_store_col_text(st, 5, run->gpu_source, sizeof run->gpu_source);
    ws_store_col_text(st, 6, run->host_profile, sizeof run->host_profile);
    ws_store_col_text(st, 7, run->policy, sizeof run->policy);
    run->batch = sqlite3_column_int(st, 8);
    run->prompt_tokens = sqlite3_column_int(st, 9);
    run->output_tokens = sqlite3_column_int(st, 10);
    run->layers = sqlite3_column_int(st, 11);
    run->repeats = sqlite3_column_int(st, 12);
    run->run_id = sqlite3_column_int64(st, 13);
    run->sim_run_id = sqlite3_column_int64(st, 14);
    run->calib_run_id = sqlite3_column_int64(st, 15);
    ws_store_col_text(st, 16, run->verdict, sizeof run->verdict);
    ws_store_col_text(st, 17, run->params, sizeof run->params);
    run->warmup = sqlite3_column_int(st, 18);
    sqlite3_finalize(st);
    if (stp)
        *stp = NULL;
    if (pt)
        *pt = NULL;
    if (tm)
        *tm = NULL;
    if (stp)
        rc = read_rows(s,
                       "SELECT quantity, scope, measured_source, unit, n, mean_ape, p95_ape, "
                       "noise_mean_ape, noise_p95_ape, mean_measured, mean_predicted FROM "
                       "validate_stats WHERE validate_id = ?1 ORDER BY rowid",
                       run->id, sizeof **stp, row_stat, "cannot read validate_stats", (void **)stp,
                       n_st, err);
    if (!rc && pt)
        rc = read_rows(s,
                       "SELECT rep, quantity, step, layer, measured, predicted FROM "
                       "validate_points WHERE validate_id = ?1 ORDER BY rep, quantity, step, layer",
                       run->id, sizeof **pt, row_point, "cannot read validate_points", (void **)pt,
                       n_pt, err);
    if (!rc && tm)
        rc = read_rows(s,
                       "SELECT term, measured, predicted, unit, error_pct, step_share_pct, note "
                       "FROM validate_terms WHERE validate_id = ?1 ORDER BY rowid",
                       run->id, sizeof **tm, row_term, "cannot read validate_terms", (void **)tm,
                       n_tm, err);
    if (rc) {
        if (stp)
            free(*stp), *stp = NULL;
        if (pt)
            free(*pt), *pt = NULL;
        if (tm)
            free(*tm), *tm = NULL;
    }
    return rc;
}
