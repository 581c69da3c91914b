/* plandb: capacity plans in SQLite (see plandb.h). */
#include "plandb.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_priv.h"
#include "ws_util.h"

static int put_run(ws_store *s, ws_plandb_run *run, ws_err *err)
{
    ws_store_stamp(run->started_at, sizeof run->started_at, run->tool_version,
                   sizeof run->tool_version);
    const char *params = run->params[0] ? run->params : "{}";
    int rc = ws_store_check_params(s, "plan", params, err);
    if (rc)
        return rc;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "INSERT INTO plan_runs(started_at, tool_version, model, host_profile, "
                           "load_kind, workload, slo_ttft, slo_tpot, slo_pct, tol, rounds, evals, "
                           "wall_s, params) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot store the plan");
    sqlite3_bind_text(st, 1, run->started_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, run->tool_version, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, run->model, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, run->host_profile, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, run->load_kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, run->workload, -1, SQLITE_STATIC);
    ws_store_bind_num(st, 7, run->slo_ttft);
    ws_store_bind_num(st, 8, run->slo_tpot);
    sqlite3_bind_double(st, 9, run->slo_pct);
    sqlite3_bind_double(st, 10, run->tol);
    sqlite3_bind_int(st, 11, run->rounds);
    sqlite3_bind_int64(st, 12, run->evals);
    ws_store_bind_num(st, 13, run->wall_s);
    sqlite3_bind_text(st, 14, params, -1, SQLITE_STATIC);
    return ws_store_insert_id(s, st, "cannot store the plan", &run->id, err);
}

static int put_rows(ws_store *s, long long id, const ws_plandb_point *pts, size_t n_pts,
                    const ws_plandb_result *res, size_t n_res, const ws_plandb_fit *fits,
                    size_t n_fits, ws_err *err)
{
    sqlite3 *db = ws_store_sqlite(s);
    sqlite3_stmt *st;
    int rc = 0;
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO plan_points(plan_id, idx, round, kind, gpu_profile, "
                           "policy, kv_gb, page_tokens, window_tokens, load, batch, context, "
                           "meets, attain, ttft_q, tpot_q, goodput, tokens_per_s, requests, "
                           "served, oom, peak_batch, wall_s) VALUES "
                           "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot store the plan's points");
    for (size_t i = 0; i < n_pts && !rc; i++) {
        const ws_plandb_point *p = &pts[i];
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, (long long)i);
        sqlite3_bind_int(st, 3, p->round);
        sqlite3_bind_text(st, 4, p->fit ? "fit" : "load", -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, p->gpu_profile, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 6, p->policy, -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 7, p->kv_gb);
        sqlite3_bind_int(st, 8, p->page);
        sqlite3_bind_int(st, 9, p->window);
        if (p->fit) {
            sqlite3_bind_null(st, 10);
            sqlite3_bind_int(st, 11, p->batch);
            sqlite3_bind_int64(st, 12, p->context);
        } else {
            ws_store_bind_num(st, 10, p->load);
            sqlite3_bind_null(st, 11);
            sqlite3_bind_null(st, 12);
        }
        sqlite3_bind_int(st, 13, p->meets);
        ws_store_bind_num(st, 14, p->attain);
        ws_store_bind_num(st, 15, p->ttft_q);
        ws_store_bind_num(st, 16, p->tpot_q);
        ws_store_bind_num(st, 17, p->goodput);
        ws_store_bind_num(st, 18, p->tokens_per_s);
        sqlite3_bind_int64(st, 19, p->requests);
        sqlite3_bind_int64(st, 20, p->served);
        sqlite3_bind_int64(st, 21, p->oom);
        sqlite3_bind_int(st, 22, p->peak_batch);
        ws_store_bind_num(st, 23, p->wall_s);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = WS_DB_FAIL(s, err, "cannot store the plan's points");
    }
    sqlite3_finalize(st);
    if (rc)
        return rc;
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO plan_results(plan_id, gpu_profile, policy, kv_gb, "
                           "page_tokens, window_tokens, best, max_load, capped, goodput, "
                           "tokens_per_s, ttft_q, tpot_q, attain, price_per_h, cost_per_mtok, "
                           "evals) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot store the plan's results");
    for (size_t i = 0; i < n_res && !rc; i++) {
        const ws_plandb_result *r = &res[i];
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_text(st, 2, r->gpu_profile, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, r->policy, -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 4, r->kv_gb);
        sqlite3_bind_int(st, 5, r->page);
        sqlite3_bind_int(st, 6, r->window);
        sqlite3_bind_int(st, 7, r->best);
        sqlite3_bind_double(st, 8, isfinite(r->max_load) ? r->max_load : 0);
        sqlite3_bind_int(st, 9, r->capped);
        ws_store_bind_num(st, 10, r->goodput);
        ws_store_bind_num(st, 11, r->tokens_per_s);
        ws_store_bind_num(st, 12, r->ttft_q);
        ws_store_bind_num(st, 13, r->tpot_q);
        ws_store_bind_num(st, 14, r->attain);
        ws_store_bind_num(st, 15, r->price_per_h);
        ws_store_bind_num(st, 16, r->cost_per_mtok);
        sqlite3_bind_int(st, 17, r->evals);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = WS_DB_FAIL(s, err, "cannot store the plan's results");
    }
    sqlite3_finalize(st);
    if (rc)
        return rc;
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO plan_fits(plan_id, gpu_profile, policy, batch, "
                           "max_context, capped) VALUES (?,?,?,?,?,?)",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot store the plan's frontier");
    for (size_t i = 0; i < n_fits && !rc; i++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_text(st, 2, fits[i].gpu_profile, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, fits[i].policy, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 4, fits[i].batch);
        sqlite3_bind_int64(st, 5, fits[i].max_context);
        sqlite3_bind_int(st, 6, fits[i].capped);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = WS_DB_FAIL(s, err, "cannot store the plan's frontier");
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

static int plan_body(ws_store *s, void *ctx, ws_err *err)
{
    plan_rows *r = ctx;
    int rc = put_run(s, r->run, err);
    return rc ? rc
              : put_rows(s, r->run->id, r->pts, r->n_pts, r->res, r->n_res, r->fits, r->n_fits,
                         err);
}

int ws_plandb_store(ws_store *s, ws_plandb_run *run, const ws_plandb_point *pts, size_t n_pts,
                    const ws_plandb_result *res, size_t n_res, const ws_plandb_fit *fits,
                    size_t n_fits, ws_err *err)
{
    const int own = !ws_store_in_transaction(s);
    const long long id = run->id;
    plan_rows r = {run, pts, n_pts, res, n_res, fits, n_fits};
    const int rc = ws_store_in_tx(s, plan_body, &r, err);
    if (rc && own)
        run->id = id; /* the row it named is gone */
    return rc;
}

int ws_plandb_get_run(ws_store *s, long long id, ws_plandb_run *run, ws_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "SELECT id, started_at, tool_version, model, host_profile, load_kind, "
                           "workload, slo_ttft, slo_tpot, slo_pct, tol, rounds, evals, wall_s, "
                           "params FROM plan_runs WHERE ?1 = 0 OR id = ?1 ORDER BY id DESC "
                           "LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read plans");
    sqlite3_bind_int64(st, 1, id);
    const int rc = ws_store_run_row(s, st, id, "cannot read plans", "plan",
                                    "run 'writescope plan ... --db PATH'", err);
    if (rc)
        return rc;
    memset(run, 0, sizeof *run);
    run->id = sqlite3_column_int64(st, 0);
    ws_store_col_text(st, 1, run->started_at, sizeof run->started_at);
    ws_store_col_text(st, 2, run->tool_version, sizeof run->tool_version);
    ws_store_col_text(st, 3, run->model, sizeof run->model);
    ws_store_col_text(st, 4, run->host_profile, sizeof run->host_profile);
    ws_store_col_text(st, 5, run->load_kind, sizeof run->load_kind);
    ws_store_col_text(st, 6, run->workload, sizeof run->workload);
    run->slo_ttft = ws_store_col_num(st, 7);
    run->slo_tpot = ws_store_col_num(st, 8);
    run->slo_pct = ws_store_col_num(st, 9);
    run->tol = ws_store_col_num(st, 10);
    run->rounds = sqlite3_column_int(st, 11);
    run->evals = sqlite3_column_int64(st, 12);
    run->wall_s = ws_store_col_num(st, 13);
    ws_store_col_text(st, 14, run->params, sizeof run->params);
    sqlite3_finalize(st);
    return 0;
}

static int read_rows(ws_store *s, const char *sql, long long id, size_t sz,
                     void (*row)(sqlite3_stmt *st, void *elem), const char *what, void **out,
                     size_t *n_out, ws_err *err)
{
    *out = NULL;
    *n_out = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, what);
    sqlite3_bind_int64(st, 1, id);
    int rc = ws_store_read_rows(s, st, sz, row, what, out, n_out, err);
    sqlite3_finalize(st);
    return rc;
}

static void row_point(sqlite3_stmt *st, void *elem)
{
    ws_plandb_point *p = elem;
    memset(p, 0, sizeof *p);
    p->round = sqlite3_column_int(st, 0);
    const unsigned char *k = sqlite3_column_text(st, 1);
    p->fit = k && !strcmp((const char *)k, "fit");
    ws_store_col_text(st, 2, p->gpu_profile, sizeof p->gpu_profile);
    ws_store_col_text(st, 3, p->policy, sizeof p->policy);
    p->kv_gb = sqlite3_column_double(st, 4);
    p->page = sqlite3_column_int(st, 5);
    p->window = sqlite3_column_int(st, 6);
    p->load = ws_store_col_num(st, 7);
    p->batch = sqlite3_column_int(st, 8);
    p->context = sqlite3_column_int64(st, 9);
    p->meets = sqlite3_column_int(st, 10);
    p->attain = ws_store_col_num(st, 11);
    p->ttft_q = ws_store_col_num(st, 12);
    p->tpot_q = ws_store_col_num(st, 13);
    p->goodput = ws_store_col_num(st, 14);
    p->tokens_per_s = ws_store_col_num(st, 15);
    p->requests = sqlite3_column_int64(st, 16);
    p->served = sqlite3_column_int64(st, 17);
    p->oom = sqlite3_column_int64(st, 18);
    p->peak_batch = sqlite3_column_int(st, 19);
    p->wall_s = ws_store_col_num(st, 20);
}

int ws_plandb_get_points(ws_store *s, long long id, ws_plandb_point **out, size_t *n_out,
                         ws_err *err)
{
    return read_rows(s,
                     "SELECT round, kind, gpu_profile, policy, kv_gb, page_tokens, window_tokens, "
                     "load, batch, context, meets, attain, ttft_q, tpot_q, goodput, tokens_per_s, "
                     "requests, served, oom, peak_batch, wall_s FROM plan_points "
                     "WHERE plan_id = ?1 ORDER BY idx",
                     id, sizeof **out, row_point, "cannot read the plan's points", (void **)out,
                     n_out, err);
}

static void row_result(sqlite3_stmt *st, void *elem)
{
    ws_plandb_result *r = elem;
    memset(r, 0, sizeof *r);
    ws_store_col_text(st, 0, r->gpu_profile, sizeof r->gpu_profile);
    ws_store_col_text(st, 1, r->policy, sizeof r->policy);
    r->kv_gb = sqlite3_column_double(st, 2);
    r->page = sqlite3_column_int(st, 3);
    r->window = sqlite3_column_int(st, 4);
    r->best = sqlite3_column_int(st, 5);
    r->max_load = sqlite3_column_double(st, 6);
    r->capped = sqlite3_column_int(st, 7);
    r->goodput = ws_store_col_num(st, 8);
    r->tokens_per_s = ws_store_col_num(st, 9);
    r->ttft_q = ws_store_col_num(st, 10);
    r->tpot_q = ws_store_col_num(st, 11);
    r->attain = ws_store_col_num(st, 12);
    r->price_per_h = ws_store_col_num(st, 13);
    r->cost_per_mtok = ws_store_col_num(st, 14);
    r->evals = sqlite3_column_int(st, 15);
}

int ws_plandb_get_results(ws_store *s, long long id, ws_plandb_result **out, size_t *n_out,
                          ws_err *err)
{
    return read_rows(s,
                     "SELECT gpu_profile, policy, kv_gb, page_tokens, window_tokens, best, "
                     "max_load, capped, goodput, tokens_per_s, ttft_q, tpot_q, attain, "
                     "price_per_h, cost_per_mtok, evals FROM plan_results WHERE plan_id = ?1 "
                     "ORDER BY rowid",
                     id, sizeof **out, row_result, "cannot read the plan's results", (void **)out,
                     n_out, err);
}
