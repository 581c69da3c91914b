/* validatedb: validations as typed rows (see validatedb.h). */
#include "validatedb.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rows.h"
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

#define C(f, t) WS_COL_OF(ws_validatedb_run, f, t)
static const ws_col k_run_cols[] = {C(started_at, WS_COL_STR),
                                    C(tool_version, WS_COL_STR),
                                    C(model, WS_COL_STR),
                                    C(gpu, WS_COL_STR),
                                    C(gpu_source, WS_COL_STR),
                                    C(host_profile, WS_COL_STR),
                                    C(policy, WS_COL_STR),
                                    C(batch, WS_COL_INT),
                                    C(prompt_tokens, WS_COL_INT),
                                    C(output_tokens, WS_COL_INT),
                                    C(layers, WS_COL_INT),
                                    C(repeats, WS_COL_INT),
                                    C(run_id, WS_COL_ID),
                                    C(sim_run_id, WS_COL_ID),
                                    C(calib_run_id, WS_COL_ID),
                                    C(verdict, WS_COL_STR),
                                    C(params, WS_COL_TEXT),
                                    C(warmup, WS_COL_INT),
                                    {0}};
#undef C

#define C(f, t) WS_COL_OF(ws_validatedb_stat, f, t)
static const ws_col k_stat_cols[] = {C(quantity, WS_COL_STR),       C(scope, WS_COL_STR),
                                     C(measured_source, WS_COL_STR), C(unit, WS_COL_STR),
                                     C(n, WS_COL_I64),               C(mean_ape, WS_COL_REAL),
                                     C(p95_ape, WS_COL_REAL),        C(noise_mean_ape, WS_COL_REAL),
                                     C(noise_p95_ape, WS_COL_REAL),  C(mean_measured, WS_COL_REAL),
                                     C(mean_predicted, WS_COL_REAL), C(verdict, WS_COL_STR),
                                     {0}};
#undef C

#define C(f, t) WS_COL_OF(ws_validatedb_point, f, t)
static const ws_col k_point_cols[] = {C(rep, WS_COL_INT),       C(quantity, WS_COL_STR),
                                      C(step, WS_COL_INT),      C(layer, WS_COL_INT),
                                      C(measured, WS_COL_REAL), C(predicted, WS_COL_REAL),
                                      {0}};
#undef C

#define C(f, t) WS_COL_OF(ws_validatedb_term, f, t)
static const ws_col k_term_cols[] = {C(term, WS_COL_STR),      C(measured, WS_COL_REAL),
                                     C(predicted, WS_COL_REAL), C(unit, WS_COL_STR),
                                     C(error_pct, WS_COL_REAL), C(step_share_pct, WS_COL_REAL),
                                     C(note, WS_COL_STR),       {0}};
#undef C

typedef struct val_rows {
    ws_validatedb_run *run;
    const ws_validatedb_stat *st;
    size_t n_st;
    const ws_validatedb_point *pt;
    size_t n_pt;
    const ws_validatedb_term *tm;
    size_t n_tm;
} val_rows;

/* The validation and its rows, inside the transaction. */
static int store_in_tx(ws_store *s, void *ctx, ws_err *err)
{
    const val_rows *r = ctx;
    ws_validatedb_run *run = r->run;
    ws_store_stamp(run->started_at, sizeof run->started_at, run->tool_version,
                   sizeof run->tool_version);
    sqlite3_stmt *st = NULL;
    int rc = ws_rows_prep_insert(s, "INSERT INTO validate_runs", NULL, k_run_cols, NULL, &st, err);
    if (rc)
        return rc;
    ws_row_bind(st, 1, k_run_cols, run);
    if ((rc = ws_store_insert_id(s, st, "insert validate_runs", &run->id, err)))
        return rc;
    const long long id = run->id;
    if ((rc = ws_rows_put(s, "validate_stats", "validate_id", id, k_stat_cols, r->st,
                          sizeof *r->st, r->n_st, NULL, NULL, err)) ||
        (rc = ws_rows_put(s, "validate_points", "validate_id", id, k_point_cols, r->pt,
                          sizeof *r->pt, r->n_pt, NULL, NULL, err)))
        return rc;
    return ws_rows_put(s, "validate_terms", "validate_id", id, k_term_cols, r->tm, sizeof *r->tm,
                       r->n_tm, NULL, NULL, err);
}

int ws_validatedb_store(ws_store *s, ws_validatedb_run *run, const ws_validatedb_stat *st,
                        size_t n_st, const ws_validatedb_point *pt, size_t n_pt,
                        const ws_validatedb_term *tm, size_t n_tm, ws_err *err)
{
    int rc = check(s, run, st, n_st, err);
    if (rc)
        return rc;
    val_rows r = {run, st, n_st, pt, n_pt, tm, n_tm};
    return ws_store_in_tx_id(s, store_in_tx, &r, &run->id, err);
}

/* ---- reading ---- */

int ws_validatedb_get(ws_store *s, long long id, ws_validatedb_run *run, ws_validatedb_stat **stp,
                      size_t *n_st, ws_validatedb_point **pt, size_t *n_pt, ws_validatedb_term **tm,
                      size_t *n_tm, ws_err *err)
{
    char names[1024], sql[1536];
    ws_cols_names(names, sizeof names, "", k_run_cols, NULL);
    snprintf(sql, sizeof sql, "SELECT id, %s FROM validate_runs %s", names,
             id > 0 ? "WHERE id = ?1" : "ORDER BY id DESC LIMIT 1");
    sqlite3_stmt *st;
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
    ws_row_read(st, 1, k_run_cols, run);
    sqlite3_finalize(st);
    if (stp)
        *stp = NULL;
    if (pt)
        *pt = NULL;
    if (tm)
        *tm = NULL;
    if (stp)
        rc = ws_rows_of(s, "validate_stats", "validate_id", run->id, "rowid", k_stat_cols,
                        sizeof **stp, "cannot read validate_stats", (void **)stp, n_st, err);
    if (!rc && pt)
        rc = ws_rows_of(s, "validate_points", "validate_id", run->id, "rep, quantity, step, layer",
                        k_point_cols, sizeof **pt, "cannot read validate_points", (void **)pt,
                        n_pt, err);
    if (!rc && tm)
        rc = ws_rows_of(s, "validate_terms", "validate_id", run->id, "rowid", k_term_cols,
                        sizeof **tm, "cannot read validate_terms", (void **)tm, n_tm, err);
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
