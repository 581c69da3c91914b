/* plandb: capacity plans in SQLite (see plandb.h). */
#include "plandb.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rows.h"
#include "store_priv.h"
#include "ws_util.h"

#define C(f, t) WS_COL_OF(ws_plandb_run, f, t)
static const ws_col k_run_cols[] = {C(started_at, WS_COL_STR),
                                    C(tool_version, WS_COL_STR),
                                    C(model, WS_COL_STR),
                                    C(host_profile, WS_COL_STR),
                                    C(load_kind, WS_COL_STR),
                                    C(workload, WS_COL_STR),
                                    C(slo_ttft, WS_COL_REAL),
                                    C(slo_tpot, WS_COL_REAL),
                                    C(slo_pct, WS_COL_F64),
                                    C(tol, WS_COL_F64),
                                    C(rounds, WS_COL_INT),
                                    C(evals, WS_COL_I64),
                                    C(wall_s, WS_COL_REAL),
                                    C(params, WS_COL_TEXT),
                                    {0}};
#undef C

static const char *const k_kinds[] = {"load", "fit", NULL};

/* plan_points after (plan_id, idx); load is NULL on a fit point, batch and context on a
 * load point */
#define C(f, t) WS_COL_OF(ws_plandb_point, f, t)
static const ws_col k_point_cols[] = {
    C(round, WS_COL_INT),
    WS_COL_WORDS(ws_plandb_point, "kind", fit, WS_COL_FLAG, k_kinds),
    C(gpu_profile, WS_COL_STR),
    C(policy, WS_COL_STR),
    C(kv_gb, WS_COL_F64),
    WS_COL_AS(ws_plandb_point, "page_tokens", page, WS_COL_INT, NULL),
    WS_COL_AS(ws_plandb_point, "window_tokens", window, WS_COL_INT, NULL),
    C(load, WS_COL_REAL),
    C(batch, WS_COL_INT),
    C(context, WS_COL_I64),
    C(meets, WS_COL_INT),
    C(attain, WS_COL_REAL),
    C(ttft_q, WS_COL_REAL),
    C(tpot_q, WS_COL_REAL),
    C(goodput, WS_COL_REAL),
    C(tokens_per_s, WS_COL_REAL),
    C(requests, WS_COL_I64),
    C(served, WS_COL_I64),
    C(oom, WS_COL_I64),
    C(peak_batch, WS_COL_INT),
    C(wall_s, WS_COL_REAL),
    {0}};
#undef C

#define C(f, t) WS_COL_OF(ws_plandb_result, f, t)
static const ws_col k_result_cols[] = {
    C(gpu_profile, WS_COL_STR),
    C(policy, WS_COL_STR),
    C(kv_gb, WS_COL_F64),
    WS_COL_AS(ws_plandb_result, "page_tokens", page, WS_COL_INT, NULL),
    WS_COL_AS(ws_plandb_result, "window_tokens", window, WS_COL_INT, NULL),
    C(best, WS_COL_INT),
    C(max_load, WS_COL_F64),
    C(capped, WS_COL_INT),
    C(goodput, WS_COL_REAL),
    C(tokens_per_s, WS_COL_REAL),
    C(ttft_q, WS_COL_REAL),
    C(tpot_q, WS_COL_REAL),
    C(attain, WS_COL_REAL),
    C(price_per_h, WS_COL_REAL),
    C(cost_per_mtok, WS_COL_REAL),
    C(evals, WS_COL_INT),
    {0}};
#undef C

#define C(f, t) WS_COL_OF(ws_plandb_fit, f, t)
static const ws_col k_fit_cols[] = {C(gpu_profile, WS_COL_STR), C(policy, WS_COL_STR),
                                    C(batch, WS_COL_INT),       C(max_context, WS_COL_I64),
                                    C(capped, WS_COL_INT),      {0}};
#undef C

static int put_run(ws_store *s, ws_plandb_run *run, ws_err *err)
{
    ws_store_stamp(run->started_at, sizeof run->started_at, run->tool_version,
                   sizeof run->tool_version);
    int rc = ws_store_check_params(s, "plan", run->params[0] ? run->params : "{}", err);
    if (rc)
        return rc;
    sqlite3_stmt *st;
    if ((rc = ws_rows_prep_insert(s, "INSERT INTO plan_runs", NULL, k_run_cols,
                                  "cannot store the plan", &st, err)))
        return rc;
    ws_row_bind(st, 1, k_run_cols, run);
    return ws_store_insert_id(s, st, "cannot store the plan", &run->id, err);
}

static int put_points(ws_store *s, long long id, const ws_plandb_point *pts, size_t n,
                      ws_err *err)
{
    const char *what = "cannot store the plan's points";
    sqlite3_stmt *st;
    int rc = ws_rows_prep_insert(s, "INSERT INTO plan_points", "plan_id, idx", k_point_cols, what,
                                 &st, err);
    if (rc)
        return rc;
    const int load = 3 + ws_cols_index(k_point_cols, "load");
    const int batch = 3 + ws_cols_index(k_point_cols, "batch");
    const int context = 3 + ws_cols_index(k_point_cols, "context");
    for (size_t i = 0; i < n && !rc; i++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, (long long)i);
        ws_row_bind(st, 3, k_point_cols, &pts[i]);
        if (pts[i].fit) {
            sqlite3_bind_null(st, load);
        } else {
            sqlite3_bind_null(st, batch);
            sqlite3_bind_null(st, context);
        }
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = WS_DB_FAIL(s, err, what);
    }
    sqlite3_finalize(st);
    return rc;
}

typedef struct plan_rows {
    ws_plandb_run *run;
    const ws_plandb_point *pts;
    size_t n_pts;
    const ws_plandb_result *res;
    size_t n_res;
    const ws_plandb_fit *fits;
    size_t n_fits;
} plan_rows;

/* The plan's run row, points, results and frontier, inside the transaction. */
static int store_in_tx(ws_store *s, void *ctx, ws_err *err)
{
    const plan_rows *r = ctx;
    int rc = put_run(s, r->run, err);
    const long long id = r->run->id;
    if (rc || (rc = put_points(s, id, r->pts, r->n_pts, err)))
        return rc;
    const char *what = "cannot store the plan's results";
    ws_row_writer *w;
    rc = ws_row_writer_open(s, "plan_results", "plan_id", id, k_result_cols, what, what, &w, err);
    for (size_t i = 0; i < r->n_res && !rc; i++) {
        ws_plandb_result x = r->res[i];
        if (!isfinite(x.max_load))
            x.max_load = 0; /* no load met the SLOs */
        rc = ws_row_add(w, &x, err);
    }
    ws_row_writer_close(w);
    if (rc)
        return rc;
    what = "cannot store the plan's frontier";
    return ws_rows_put(s, "plan_fits", "plan_id", id, k_fit_cols, r->fits, sizeof *r->fits,
                       r->n_fits, what, what, err);
}

int ws_plandb_store(ws_store *s, ws_plandb_run *run, const ws_plandb_point *pts, size_t n_pts,
                    const ws_plandb_result *res, size_t n_res, const ws_plandb_fit *fits,
                    size_t n_fits, ws_err *err)
{
    plan_rows r = {run, pts, n_pts, res, n_res, fits, n_fits};
    return ws_store_in_tx_id(s, store_in_tx, &r, &run->id, err);
}

int ws_plandb_get_run(ws_store *s, long long id, ws_plandb_run *run, ws_err *err)
{
    char names[1024], sql[1536];
    ws_cols_names(names, sizeof names, "", k_run_cols, NULL);
    snprintf(sql, sizeof sql,
             "SELECT id, %s FROM plan_runs WHERE ?1 = 0 OR id = ?1 ORDER BY id DESC LIMIT 1",
             names);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read plans");
    sqlite3_bind_int64(st, 1, id);
    const int rc = ws_store_run_row(s, st, id, "cannot read plans", "plan",
                                    "run 'writescope plan ... --db PATH'", err);
    if (rc)
        return rc;
    memset(run, 0, sizeof *run);
    run->id = sqlite3_column_int64(st, 0);
    ws_row_read(st, 1, k_run_cols, run);
    sqlite3_finalize(st);
    return 0;
}

int ws_plandb_get_points(ws_store *s, long long id, ws_plandb_point **out, size_t *n_out,
                         ws_err *err)
{
    return ws_rows_of(s, "plan_points", "plan_id", id, "idx", k_point_cols, sizeof **out,
                      "cannot read the plan's points", (void **)out, n_out, err);
}

int ws_plandb_get_results(ws_store *s, long long id, ws_plandb_result **out, size_t *n_out,
                          ws_err *err)
{
    return ws_rows_of(s, "plan_results", "plan_id", id, "rowid", k_result_cols, sizeof **out,
                      "cannot read the plan's results", (void **)out, n_out, err);
}
