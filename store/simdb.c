/* simdb: simulation results as typed rows (see simdb.h). */
#include "simdb.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "steprow.h"
#include "rows.h"
#include "store_priv.h"
#include "ws_util.h"

long long ws_simdb_fault_after_rows = -1;

static const char *const k_outcomes[] = {"done", "oom", "unfinished", NULL};

const char *ws_simdb_outcome_name(int outcome)
{
    return outcome >= 0 && outcome < 3 ? k_outcomes[outcome] : NULL;
}

int ws_simdb_outcome_parse(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (name && !strcmp(name, k_outcomes[i]))
            return i;
    return -1;
}

/* sim_runs: what describes the run, then (from wall_s on) what finish_run rewrites */
#define C(f, t) WS_COL_OF(ws_simdb_run, f, t)
static const ws_col k_run_cols[] = {C(started_at, WS_COL_STR),
                                    C(tool_version, WS_COL_STR),
                                    C(model, WS_COL_STR),
                                    C(gpu_profile, WS_COL_STR),
                                    C(host_profile, WS_COL_STR),
                                    C(policy, WS_COL_STR),
                                    C(workload, WS_COL_STR),
                                    C(batch, WS_COL_INT),
                                    C(prompt_tokens, WS_COL_ID),
                                    C(output_tokens, WS_COL_ID),
                                    C(trace_path, WS_COL_STR),
                                    C(trace_format, WS_COL_STR),
                                    C(generator, WS_COL_STR),
                                    C(detail, WS_COL_STR),
                                    C(seed, WS_COL_I64),
                                    C(label, WS_COL_STR),
                                    C(grid_id, WS_COL_ID),
                                    C(origin, WS_COL_STR),
                                    C(wall_s, WS_COL_REAL),
                                    C(events, WS_COL_I64),
                                    C(sim_s, WS_COL_REAL),
                                    C(requests, WS_COL_I64),
                                    C(completed, WS_COL_I64),
                                    C(oom, WS_COL_I64),
                                    C(tokens_out, WS_COL_I64),
                                    C(tokens_per_s, WS_COL_REAL),
                                    C(ttft_p50, WS_COL_REAL),
                                    C(ttft_p90, WS_COL_REAL),
                                    C(ttft_p99, WS_COL_REAL),
                                    C(tpot_p50, WS_COL_REAL),
                                    C(tpot_p90, WS_COL_REAL),
                                    C(tpot_p99, WS_COL_REAL),
                                    C(slo_ttft, WS_COL_REAL),
                                    C(slo_tpot, WS_COL_REAL),
                                    C(slo_met, WS_COL_I64),
                                    C(goodput, WS_COL_REAL),
                                    C(params, WS_COL_TEXT),
                                    {0}};
#undef C
#define N_RUN_DESC 18 /* the columns before wall_s */

#define C(f, t) WS_COL_OF(ws_simdb_grid, f, t)
static const ws_col k_grid_cols[] = {C(started_at, WS_COL_STR), C(tool_version, WS_COL_STR),
                                     C(params, WS_COL_TEXT), C(ranks, WS_COL_INT), {0}};
#undef C

#define C(f, t) WS_COL_OF(ws_simdb_request, f, t)
static const ws_col k_request_cols[] = {C(idx, WS_COL_I64),
                                        C(arrival_s, WS_COL_F64),
                                        C(prompt, WS_COL_I64),
                                        C(output, WS_COL_I64),
                                        C(ttft_s, WS_COL_REAL),
                                        C(tpot_s, WS_COL_REAL),
                                        C(e2e_s, WS_COL_REAL),
                                        WS_COL_WORDS(ws_simdb_request, "outcome", outcome,
                                                     WS_COL_WORD, k_outcomes),
                                        {0}};
#undef C

#define C(f, t) WS_COL_OF(ws_simdb_point, f, t)
static const ws_col k_point_cols[] = {C(model, WS_COL_STR),
                                      C(gpu_profile, WS_COL_STR),
                                      C(host_profile, WS_COL_STR),
                                      C(policy, WS_COL_STR),
                                      C(batch, WS_COL_INT),
                                      C(prompt_tokens, WS_COL_I64),
                                      C(output_tokens, WS_COL_I64),
                                      C(requests, WS_COL_I64),
                                      C(completed, WS_COL_I64),
                                      C(oom, WS_COL_I64),
                                      {0}};
#undef C

static int check_run(ws_store *s, const ws_simdb_run *run, ws_err *err)
{
    if (strcmp(run->workload, "closed") && strcmp(run->workload, "trace") &&
        strcmp(run->workload, "generator"))
        return ws_err_set(err, WS_EINVAL,
                          "%s: simulation run: workload '%s' is not closed, trace or generator",
                          ws_store_path(s), run->workload);
    if (strcmp(run->detail, "step") && strcmp(run->detail, "layer"))
        return ws_err_set(err, WS_EINVAL, "%s: simulation run: detail '%s' is not step or layer",
                          ws_store_path(s), run->detail);
    if (run->origin[0] && strcmp(run->origin, "sim") && strcmp(run->origin, "validate"))
        return ws_err_set(err, WS_EINVAL, "%s: simulation run: origin '%s' is not sim or validate",
                          ws_store_path(s), run->origin);
    return ws_store_check_params(s, "simulation run", run->params, err);
}

int ws_simdb_put_run(ws_store *s, ws_simdb_run *run, ws_err *err)
{
    int rc = check_run(s, run, err);
    if (rc)
        return rc;
    ws_store_stamp(run->started_at, sizeof run->started_at, run->tool_version,
                   sizeof run->tool_version);
    snprintf(run->label, sizeof run->label, "modeled");
    if (!run->origin[0])
        snprintf(run->origin, sizeof run->origin, "sim");
    sqlite3_stmt *st;
    if ((rc = ws_rows_prep_insert(s, "INSERT INTO sim_runs", NULL, k_run_cols,
                                  "cannot store simulation run", &st, err)))
        return rc;
    ws_row_bind(st, 1, k_run_cols, run);
    return ws_store_insert_id(s, st, "cannot store simulation run", &run->id, err);
}

int ws_simdb_finish_run(ws_store *s, const ws_simdb_run *run, ws_err *err)
{
    int rc = check_run(s, run, err);
    if (rc)
        return rc;
    sqlite3_stmt *st;
    const ws_col *totals = &k_run_cols[N_RUN_DESC];
    if ((rc = ws_rows_prep_update(s, "sim_runs", totals, "cannot store simulation totals", &st,
                                  err)))
        return rc;
    sqlite3_bind_int64(st, 1, run->id);
    ws_row_bind(st, 2, totals, run);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return WS_DB_FAIL(s, err, "cannot store simulation totals");
    if (sqlite3_changes(ws_store_sqlite(s)) != 1)
        return ws_err_set(err, WS_ENOTFOUND, "%s: no simulation run %lld to finish",
                          ws_store_path(s), run->id);
    return 0;
}

struct ws_simdb_writer {
    ws_store *s;
    ws_row_writer *req, *step; /* sim_requests, sim_steps */
    long long rows;
};

int ws_simdb_writer_open(ws_store *s, long long run_id, ws_simdb_writer **out, ws_err *err)
{
    *out = NULL;
    ws_simdb_writer *w = calloc(1, sizeof *w);
    if (!w)
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    w->s = s;
    int rc = ws_row_writer_open(s, "sim_requests", "run_id", run_id, k_request_cols,
                                "cannot store simulation rows", "cannot store simulation request",
                                &w->req, err);
    if (!rc)
        rc = ws_row_writer_open(s, "sim_steps", "run_id", run_id, ws_step_cols, NULL, NULL,
                                &w->step, err);
    if (rc) {
        ws_simdb_writer_close(w);
        return rc;
    }
    *out = w;
    return 0;
}

/* Inserts one row through rw and counts it. */
static int add_row(ws_simdb_writer *w, ws_row_writer *rw, const void *row, ws_err *err)
{
    if (ws_simdb_fault_after_rows >= 0 && w->rows >= ws_simdb_fault_after_rows)
        return ws_err_set(err, WS_EDB, "%s: injected fault after %lld rows", ws_store_path(w->s),
                          w->rows);
    int rc = ws_row_add(rw, row, err);
    if (!rc)
        w->rows++;
    return rc;
}

int ws_simdb_add_request(ws_simdb_writer *w, const ws_simdb_request *r, ws_err *err)
{
    if (!ws_simdb_outcome_name(r->outcome))
        return ws_err_set(err, WS_EINVAL, "simulation request %lld: unknown outcome %d", r->idx,
                          r->outcome);
    return add_row(w, w->req, r, err);
}

int ws_simdb_add_step(ws_simdb_writer *w, const ws_simdb_step *x, ws_err *err)
{
    return add_row(w, w->step, x, err);
}

long long ws_simdb_writer_rows(const ws_simdb_writer *w) { return w->rows; }

void ws_simdb_writer_close(ws_simdb_writer *w)
{
    if (!w)
        return;
    ws_row_writer_close(w->req);
    ws_row_writer_close(w->step);
    free(w);
}

typedef struct run_rows {
    ws_simdb_run *run;
    const ws_simdb_request *req;
    size_t n_req;
    const ws_simdb_step *steps;
    size_t n_steps;
} run_rows;

/* The run row, its requests and steps, inside the transaction. */
static int store_in_tx(ws_store *s, void *ctx, ws_err *err)
{
    const run_rows *r = ctx;
    int rc = ws_simdb_put_run(s, r->run, err);
    if (rc)
        return rc;
    ws_simdb_writer *w;
    if ((rc = ws_simdb_writer_open(s, r->run->id, &w, err)))
        return rc;
    for (size_t i = 0; !rc && i < r->n_req; i++)
        rc = ws_simdb_add_request(w, &r->req[i], err);
    for (size_t i = 0; !rc && i < r->n_steps; i++)
        rc = ws_simdb_add_step(w, &r->steps[i], err);
    ws_simdb_writer_close(w);
    return rc;
}

int ws_simdb_store_run(ws_store *s, ws_simdb_run *run, const ws_simdb_request *req,
                       size_t n_req, const ws_simdb_step *steps, size_t n_steps, ws_err *err)
{
    const long long id = run->id;
    run_rows r = {run, req, n_req, steps, n_steps};
    int rc = ws_store_in_tx(s, store_in_tx, &r, err);
    if (rc)
        run->id = id; /* the row it named is gone */
    return rc;
}

typedef struct grid_rows {
    ws_simdb_grid *g;
    ws_simdb_run *runs;
    size_t n;
} grid_rows;

static int grid_body(ws_store *s, void *ctx, ws_err *err)
{
    grid_rows *x = ctx;
    ws_simdb_grid *g = x->g;
    int rc = ws_store_check_params(s, "simulation grid", g->params, err);
    if (rc)
        return rc;
    ws_store_stamp(g->started_at, sizeof g->started_at, g->tool_version,
                   sizeof g->tool_version);
    ws_simdb_grid row = *g;
    if (row.ranks < 1)
        row.ranks = 1;
    sqlite3_stmt *st;
    if ((rc = ws_rows_prep_insert(s, "INSERT INTO sim_grids", NULL, k_grid_cols,
                                  "cannot store simulation grid", &st, err)))
        return rc;
    ws_row_bind(st, 1, k_grid_cols, &row);
    if ((rc = ws_store_insert_id(s, st, "cannot store simulation grid", &g->id, err)))
        return rc;
    for (size_t i = 0; !rc && i < x->n; i++) {
        x->runs[i].grid_id = g->id;
        rc = ws_simdb_put_run(s, &x->runs[i], err);
    }
    return rc;
}

int ws_simdb_store_grid(ws_store *s, ws_simdb_grid *g, ws_simdb_run *runs, size_t n, ws_err *err)
{
    grid_rows x = {g, runs, n};
    int rc = ws_store_in_tx(s, grid_body, &x, err);
    if (rc) { /* the rows they named are gone */
        g->id = 0;
        for (size_t i = 0; i < n; i++)
            runs[i].id = runs[i].grid_id = 0;
    }
    return rc;
}

/* Reading. */

/* A run's id and layers after its columns. */
static void more_run(sqlite3_stmt *st, int col, void *elem)
{
    ws_simdb_run *r = elem;
    r->id = sqlite3_column_int64(st, col);
    r->layers = sqlite3_column_int(st, col + 1);
}

/* "SELECT <run columns>, id, <layers> FROM sim_runs <rest>" into sql; params read as '' when
 * with_params is 0. */
static void run_query(char *sql, size_t cap, int with_params, const char *rest)
{
    char names[1024];
    ws_cols_names(names, sizeof names, "", k_run_cols, with_params ? NULL : "params");
    snprintf(sql, cap,
             "SELECT %s, id, CASE WHEN json_valid(params) THEN json_extract(params, '$.layers') "
             "END FROM sim_runs %s",
             names, rest);
}

static int read_runs(ws_store *s, const char *sql, long long id, ws_simdb_run **out,
                     size_t *n_out, ws_err *err)
{
    return ws_rows_query(s, sql, id, sizeof **out, k_run_cols, more_run,
                         "cannot read simulation runs", (void **)out, n_out, err);
}

int ws_simdb_list_runs(ws_store *s, ws_simdb_run **out, size_t *n_out, ws_err *err)
{
    char sql[4096];
    run_query(sql, sizeof sql, 0, "ORDER BY id");
    return read_runs(s, sql, -1, out, n_out, err);
}

int ws_simdb_get_run(ws_store *s, long long run_id, ws_simdb_run *run, ws_err *err)
{
    char sql[4096];
    run_query(sql, sizeof sql, 1,
              "WHERE (?1 = 0 AND origin = 'sim') OR id = ?1 ORDER BY id DESC LIMIT 1");
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read simulation runs");
    sqlite3_bind_int64(st, 1, run_id);
    const int rc = ws_store_run_row(s, st, run_id, "cannot read simulation runs", "simulation run",
                                    "run 'writescope sim ... --db PATH'", err);
    if (rc)
        return rc;
    memset(run, 0, sizeof *run);
    more_run(st, ws_row_read(st, 0, k_run_cols, run), run);
    sqlite3_finalize(st);
    return 0;
}

int ws_simdb_get_requests(ws_store *s, long long run_id, ws_simdb_request **out, size_t *n_out,
                          ws_err *err)
{
    return ws_rows_of(s, "sim_requests", "run_id", run_id, "idx", k_request_cols, sizeof **out,
                      "cannot read simulation requests", (void **)out, n_out, err);
}

int ws_simdb_get_steps(ws_store *s, long long run_id, ws_simdb_step **out, size_t *n_out,
                       ws_err *err)
{
    return ws_rows_get(s, "sim_steps", ws_step_cols, sizeof **out, run_id, (void **)out, n_out,
                       err);
}

int ws_simdb_get_grid(ws_store *s, long long grid_id, ws_simdb_grid *g, ws_err *err)
{
    memset(g, 0, sizeof *g);
    char names[256], sql[512];
    ws_cols_names(names, sizeof names, "", k_grid_cols, NULL);
    snprintf(sql, sizeof sql,
             "SELECT id, %s FROM sim_grids WHERE ?1 = 0 OR id = ?1 ORDER BY id DESC LIMIT 1",
             names);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read simulation grids");
    sqlite3_bind_int64(st, 1, grid_id);
    const int rc = ws_store_run_row(s, st, grid_id, "cannot read simulation grids",
                                    "simulation grid", "run 'writescope sim grid --db PATH'", err);
    if (rc)
        return rc;
    g->id = sqlite3_column_int64(st, 0);
    ws_row_read(st, 1, k_grid_cols, g);
    sqlite3_finalize(st);
    return 0;
}

int ws_simdb_get_grid_runs(ws_store *s, long long grid_id, ws_simdb_run **out, size_t *n_out,
                           ws_err *err)
{
    char sql[4096];
    run_query(sql, sizeof sql, 1, "WHERE grid_id = ?1 ORDER BY id");
    return read_runs(s, sql, grid_id, out, n_out, err);
}

/* A point's id and decode rate after its columns. */
static void more_point(sqlite3_stmt *st, int col, void *elem)
{
    ws_simdb_point *p = elem;
    p->id = sqlite3_column_int64(st, col);
    p->decode_tokens_per_s = ws_store_col_num(st, col + 1);
}

int ws_simdb_list_points(ws_store *s, const char *model, const char *gpu, long long grid,
                         ws_simdb_point **out, size_t *n_out, ws_err *err)
{
    const char *what = "cannot read simulation runs";
    char names[512], sql[2048];
    ws_cols_names(names, sizeof names, "", k_point_cols, NULL);
    snprintf(sql, sizeof sql,
             "SELECT %s, id, json_extract(params, '$.decode_tokens_per_s') FROM sim_runs r "
             "WHERE workload = 'closed' AND origin = 'sim' AND (?1 IS NULL OR model = ?1) "
             "AND (?2 IS NULL OR gpu_profile = ?2) AND (?3 = 0 OR grid_id = ?3) "
             "AND id = (SELECT max(id) FROM sim_runs q "
             "WHERE q.workload = 'closed' AND q.origin = 'sim' AND (?3 = 0 OR q.grid_id = ?3) "
             "AND q.model = r.model AND q.gpu_profile = r.gpu_profile "
             "AND q.host_profile = r.host_profile AND q.policy = r.policy AND q.batch = r.batch "
             "AND q.prompt_tokens IS r.prompt_tokens AND q.output_tokens IS r.output_tokens) "
             "ORDER BY model, gpu_profile, host_profile, batch, prompt_tokens, policy",
             names);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, what);
    if (model)
        sqlite3_bind_text(st, 1, model, -1, SQLITE_STATIC);
    if (gpu)
        sqlite3_bind_text(st, 2, gpu, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, grid);
    int rc = ws_rows_read(s, st, sizeof **out, k_point_cols, more_point, what, (void **)out,
                          n_out, err);
    sqlite3_finalize(st);
    return rc;
}

int ws_simdb_list_siblings(ws_store *s, long long run_id, ws_simdb_run **out, size_t *n_out,
                           ws_err *err)
{
    ws_simdb_run run;
    *out = NULL;
    *n_out = 0;
    int rc = ws_simdb_get_run(s, run_id, &run, err);
    if (rc)
        return rc;
    static const char same[] =
        "q.model = r.model AND q.gpu_profile = r.gpu_profile AND q.host_profile = r.host_profile "
        "AND q.workload = r.workload AND q.batch = r.batch AND q.prompt_tokens IS r.prompt_tokens "
        "AND q.output_tokens IS r.output_tokens AND q.trace_path = r.trace_path AND "
        "q.generator = r.generator AND q.seed = r.seed AND q.detail = r.detail AND "
        "q.origin = r.origin";
    char rest[1536], sql[4096];
    snprintf(rest, sizeof rest,
             "r WHERE EXISTS (SELECT 1 FROM sim_runs q WHERE q.id = ?1 AND %s) AND id = (SELECT "
             "max(id) FROM sim_runs q WHERE q.policy = r.policy AND %s) ORDER BY id",
             same, same);
    run_query(sql, sizeof sql, 0, rest);
    return read_runs(s, sql, run.id, out, n_out, err);
}
