/* simdb: simulation results as typed rows (see simdb.h). */
#include "simdb.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "steprow.h"
#include "store_priv.h"
#include "ws_util.h"

long long ws_simdb_fault_after_rows = -1;

static const char *const k_outcomes[] = {"done", "oom", "unfinished"};

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

/* A count, or NULL where it does not apply (0). */
static void bind_count_or_null(sqlite3_stmt *st, int i, long long v)
{
    if (v > 0)
        sqlite3_bind_int64(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

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
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "INSERT INTO sim_runs(started_at, tool_version, model, gpu_profile, "
                           "host_profile, policy, workload, batch, prompt_tokens, output_tokens, "
                           "trace_path, trace_format, generator, detail, seed, params, label, grid_id, "
                           "origin) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,"
                           "?17,?18,?19)",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot store simulation run");
    sqlite3_bind_text(st, 1, run->started_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, run->tool_version, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, run->model, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, run->gpu_profile, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, run->host_profile, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, run->policy, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, run->workload, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 8, run->batch);
    bind_count_or_null(st, 9, run->prompt_tokens);
    bind_count_or_null(st, 10, run->output_tokens);
    sqlite3_bind_text(st, 11, run->trace_path, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 12, run->trace_format, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 13, run->generator, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 14, run->detail, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 15, (sqlite3_int64)run->seed);
    sqlite3_bind_text(st, 16, run->params[0] ? run->params : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 17, run->label, -1, SQLITE_STATIC);
    bind_count_or_null(st, 18, run->grid_id);
    sqlite3_bind_text(st, 19, run->origin, -1, SQLITE_STATIC);
    if ((rc = ws_store_insert_id(s, st, "cannot store simulation run", &run->id, err)))
        return rc;
    return ws_simdb_finish_run(s, run, err);
}

int ws_simdb_finish_run(ws_store *s, const ws_simdb_run *run, ws_err *err)
{
    int rc = check_run(s, run, err);
    if (rc)
        return rc;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "UPDATE sim_runs SET wall_s = ?2, events = ?3, sim_s = ?4, requests = ?5, "
                           "completed = ?6, oom = ?7, tokens_out = ?8, tokens_per_s = ?9, "
                           "ttft_p50 = ?10, ttft_p90 = ?11, ttft_p99 = ?12, tpot_p50 = ?13, "
                           "tpot_p90 = ?14, tpot_p99 = ?15, slo_ttft = ?16, slo_tpot = ?17, "
                           "slo_met = ?18, goodput = ?19, params = ?20 WHERE id = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot store simulation totals");
    sqlite3_bind_int64(st, 1, run->id);
    ws_store_bind_num(st, 2, run->wall_s);
    sqlite3_bind_int64(st, 3, run->events);
    ws_store_bind_num(st, 4, run->sim_s);
    sqlite3_bind_int64(st, 5, run->requests);
    sqlite3_bind_int64(st, 6, run->completed);
    sqlite3_bind_int64(st, 7, run->oom);
    sqlite3_bind_int64(st, 8, run->tokens_out);
    const double num[] = {run->tokens_per_s, run->ttft_p50, run->ttft_p90, run->ttft_p99,
                          run->tpot_p50,     run->tpot_p90, run->tpot_p99, run->slo_ttft,
                          run->slo_tpot};
    for (int i = 0; i < 9; i++)
        ws_store_bind_num(st, 9 + i, num[i]);
    sqlite3_bind_int64(st, 18, run->slo_met);
    ws_store_bind_num(st, 19, run->goodput);
    sqlite3_bind_text(st, 20, run->params[0] ? run->params : "{}", -1, SQLITE_STATIC);
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
    long long run_id;
    sqlite3_stmt *req;
    ws_row_writer *step; /* sim_steps through the step row's column table */
    long long rows;
};

int ws_simdb_writer_open(ws_store *s, long long run_id, ws_simdb_writer **out, ws_err *err)
{
    *out = NULL;
    ws_simdb_writer *w = calloc(1, sizeof *w);
    if (!w)
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    w->s = s;
    w->run_id = run_id;
    sqlite3 *db = ws_store_sqlite(s);
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO sim_requests(run_id, idx, arrival_s, prompt, output, "
                           "ttft_s, tpot_s, e2e_s, outcome) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)",
                           -1, &w->req, NULL) != SQLITE_OK) {
        WS_DB_FAIL(s, err, "cannot store simulation rows");
        ws_simdb_writer_close(w);
        return WS_EDB;
    }
    int rc = ws_row_writer_open(s, "sim_steps", ws_step_cols, run_id, &w->step, err);
    if (rc) {
        ws_simdb_writer_close(w);
        return rc;
    }
    sqlite3_bind_int64(w->req, 1, run_id);
    *out = w;
    return 0;
}

/* Steps an insert whose parameters are bound; counts the row. */
static int insert_row(ws_simdb_writer *w, sqlite3_stmt *st, const char *what, ws_err *err)
{
    if (ws_simdb_fault_after_rows >= 0 && w->rows >= ws_simdb_fault_after_rows)
        return ws_err_set(err, WS_EDB, "%s: injected fault after %lld rows", ws_store_path(w->s),
                          w->rows);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return WS_DB_FAIL(w->s, err, what);
    w->rows++;
    return 0;
}

int ws_simdb_add_request(ws_simdb_writer *w, const ws_simdb_request *r, ws_err *err)
{
    const char *oc = ws_simdb_outcome_name(r->outcome);
    if (!oc)
        return ws_err_set(err, WS_EINVAL, "simulation request %lld: unknown outcome %d", r->idx,
                          r->outcome);
    sqlite3_stmt *st = w->req;
    sqlite3_bind_int64(st, 2, r->idx);
    sqlite3_bind_double(st, 3, r->arrival_s);
    sqlite3_bind_int64(st, 4, r->prompt);
    sqlite3_bind_int64(st, 5, r->output);
    ws_store_bind_num(st, 6, r->ttft_s);
    ws_store_bind_num(st, 7, r->tpot_s);
    ws_store_bind_num(st, 8, r->e2e_s);
    sqlite3_bind_text(st, 9, oc, -1, SQLITE_STATIC);
    return insert_row(w, st, "cannot store simulation request", err);
}

int ws_simdb_add_step(ws_simdb_writer *w, const ws_simdb_step *x, ws_err *err)
{
    if (ws_simdb_fault_after_rows >= 0 && w->rows >= ws_simdb_fault_after_rows)
        return ws_err_set(err, WS_EDB, "%s: injected fault after %lld rows", ws_store_path(w->s),
                          w->rows);
    int rc = ws_row_add(w->step, x, err);
    if (!rc)
        w->rows++;
    return rc;
}

long long ws_simdb_writer_rows(const ws_simdb_writer *w) { return w->rows; }

void ws_simdb_writer_close(ws_simdb_writer *w)
{
    if (!w)
        return;
    sqlite3_finalize(w->req);
    ws_row_writer_close(w->step);
    free(w);
}

static int store_in_tx(ws_store *s, ws_simdb_run *run, const ws_simdb_request *req, size_t n_req,
                       const ws_simdb_step *steps, size_t n_steps, ws_err *err)
{
    int rc = ws_simdb_put_run(s, run, err);
    if (rc)
        return rc;
    ws_simdb_writer *w;
    if ((rc = ws_simdb_writer_open(s, run->id, &w, err)))
        return rc;
    for (size_t i = 0; !rc && i < n_req; i++)
        rc = ws_simdb_add_request(w, &req[i], err);
    for (size_t i = 0; !rc && i < n_steps; i++)
        rc = ws_simdb_add_step(w, &steps[i], err);
    ws_simdb_writer_close(w);
    return rc;
}

typedef struct run_rows {
    ws_simdb_run *run;
    const ws_simdb_request *req;
    size_t n_req;
    const ws_simdb_step *steps;
    size_t n_steps;
} run_rows;

static int run_body(ws_store *s, void *ctx, ws_err *err)
{
    run_rows *r = ctx;
    return store_in_tx(s, r->run, r->req, r->n_req, r->steps, r->n_steps, err);
}

int ws_simdb_store_run(ws_store *s, ws_simdb_run *run, const ws_simdb_request *req,
                       size_t n_req, const ws_simdb_step *steps, size_t n_steps, ws_err *err)
{
    const long long id = run->id;
    run_rows r = {run, req, n_req, steps, n_steps};
    int rc = ws_store_in_tx(s, run_body, &r, err);
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
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "INSERT INTO sim_grids(started_at, tool_version, params, ranks) "
                           "VALUES (?1, ?2, ?3, ?4)",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot store simulation grid");
    sqlite3_bind_text(st, 1, g->started_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, g->tool_version, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, g->params[0] ? g->params : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, g->ranks > 0 ? g->ranks : 1);
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

#define RUN_COLS                                                                                \
    "id, started_at, tool_version, model, gpu_profile, host_profile, policy, workload, batch, " \
    "prompt_tokens, output_tokens, trace_path, trace_format, generator, detail, seed, %s, "     \
    "wall_s, events, sim_s, requests, completed, oom, tokens_out, tokens_per_s, ttft_p50, "     \
    "ttft_p90, ttft_p99, tpot_p50, tpot_p90, tpot_p99, slo_ttft, slo_tpot, slo_met, goodput, "  \
    "label, grid_id, origin, CASE WHEN json_valid(params) THEN json_extract(params, "        \
    "'$.layers') END"

static void col_run(sqlite3_stmt *st, ws_simdb_run *r)
{
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    ws_store_col_text(st, 1, r->started_at, sizeof r->started_at);
    ws_store_col_text(st, 2, r->tool_version, sizeof r->tool_version);
    ws_store_col_text(st, 3, r->model, sizeof r->model);
    ws_store_col_text(st, 4, r->gpu_profile, sizeof r->gpu_profile);
    ws_store_col_text(st, 5, r->host_profile, sizeof r->host_profile);
    ws_store_col_text(st, 6, r->policy, sizeof r->policy);
    ws_store_col_text(st, 7, r->workload, sizeof r->workload);
    r->batch = sqlite3_column_int(st, 8);
    r->prompt_tokens = sqlite3_column_int64(st, 9);
    r->output_tokens = sqlite3_column_int64(st, 10);
    ws_store_col_text(st, 11, r->trace_path, sizeof r->trace_path);
    ws_store_col_text(st, 12, r->trace_format, sizeof r->trace_format);
    ws_store_col_text(st, 13, r->generator, sizeof r->generator);
    ws_store_col_text(st, 14, r->detail, sizeof r->detail);
    r->seed = (unsigned long long)sqlite3_column_int64(st, 15);
    ws_store_col_text(st, 16, r->params, sizeof r->params);
    r->wall_s = ws_store_col_num(st, 17);
    r->events = sqlite3_column_int64(st, 18);
    r->sim_s = ws_store_col_num(st, 19);
    r->requests = sqlite3_column_int64(st, 20);
    r->completed = sqlite3_column_int64(st, 21);
    r->oom = sqlite3_column_int64(st, 22);
    r->tokens_out = sqlite3_column_int64(st, 23);
    double *num[] = {&r->tokens_per_s, &r->ttft_p50, &r->ttft_p90, &r->ttft_p99, &r->tpot_p50,
                     &r->tpot_p90,     &r->tpot_p99, &r->slo_ttft, &r->slo_tpot};
    for (int i = 0; i < 9; i++)
        *num[i] = ws_store_col_num(st, 24 + i);
    r->slo_met = sqlite3_column_int64(st, 33);
    r->goodput = ws_store_col_num(st, 34);
    ws_store_col_text(st, 35, r->label, sizeof r->label);
    r->grid_id = sqlite3_column_int64(st, 36);
    ws_store_col_text(st, 37, r->origin, sizeof r->origin);
    r->layers = sqlite3_column_int(st, 38);
}

/* Grows *arr (element size sz) to hold n + 1 elements. */
/* Every row of `sql` (bound to run_id when >= 0) into a grown array of `sz`-byte elements,
 * each filled by row(); `what` is the failure message. */
static int read_rows(ws_store *s, const char *sql, long long run_id, size_t sz,
                     void (*row)(sqlite3_stmt *st, void *elem), const char *what, void **out,
                     size_t *n_out, ws_err *err)
{
    *out = NULL;
    *n_out = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, what);
    if (run_id >= 0)
        sqlite3_bind_int64(st, 1, run_id);
    int rc = ws_store_read_rows(s, st, sz, row, what, out, n_out, err);
    sqlite3_finalize(st);
    return rc;
}

static void row_run(sqlite3_stmt *st, void *elem)
{
    col_run(st, elem);
}

static void row_request(sqlite3_stmt *st, void *elem)
{
    ws_simdb_request *r = elem;
    r->idx = sqlite3_column_int64(st, 0);
    r->arrival_s = sqlite3_column_double(st, 1);
    r->prompt = sqlite3_column_int64(st, 2);
    r->output = sqlite3_column_int64(st, 3);
    r->ttft_s = ws_store_col_num(st, 4);
    r->tpot_s = ws_store_col_num(st, 5);
    r->e2e_s = ws_store_col_num(st, 6);
    r->outcome = ws_simdb_outcome_parse((const char *)sqlite3_column_text(st, 7));
}

int ws_simdb_list_runs(ws_store *s, ws_simdb_run **out, size_t *n_out, ws_err *err)
{
    char sql[1024];
    snprintf(sql, sizeof sql, "SELECT " RUN_COLS " FROM sim_runs ORDER BY id", "''");
    return read_rows(s, sql, -1, sizeof **out, row_run, "cannot read simulation runs", (void **)out, n_out,
                     err);
}

int ws_simdb_get_run(ws_store *s, long long run_id, ws_simdb_run *run, ws_err *err)
{
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT " RUN_COLS " FROM sim_runs WHERE (?1 = 0 AND origin = 'sim') OR id = ?1 "
             "ORDER BY id DESC LIMIT 1",
             "params");
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read simulation runs");
    sqlite3_bind_int64(st, 1, run_id);
    const int rc = ws_store_run_row(s, st, run_id, "cannot read simulation runs", "simulation run",
                                    "run 'writescope sim ... --db PATH'", err);
    if (rc)
        return rc;
    col_run(st, run);
    sqlite3_finalize(st);
    return 0;
}

int ws_simdb_get_requests(ws_store *s, long long run_id, ws_simdb_request **out, size_t *n_out,
                          ws_err *err)
{
    return read_rows(s,
                     "SELECT idx, arrival_s, prompt, output, ttft_s, tpot_s, e2e_s, outcome "
                     "FROM sim_requests WHERE run_id = ?1 ORDER BY idx",
                     run_id, sizeof **out, row_request, "cannot read simulation requests", (void **)out,
                     n_out, err);
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
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s),
                           "SELECT id, started_at, tool_version, params, ranks FROM sim_grids "
                           "WHERE ?1 = 0 OR id = ?1 ORDER BY id DESC LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "cannot read simulation grids");
    sqlite3_bind_int64(st, 1, grid_id);
    const int rc = ws_store_run_row(s, st, grid_id, "cannot read simulation grids",
                                    "simulation grid", "run 'writescope sim grid --db PATH'", err);
    if (rc)
        return rc;
    g->id = sqlite3_column_int64(st, 0);
    ws_store_col_text(st, 1, g->started_at, sizeof g->started_at);
    ws_store_col_text(st, 2, g->tool_version, sizeof g->tool_version);
    ws_store_col_text(st, 3, g->params, sizeof g->params);
    g->ranks = sqlite3_column_int(st, 4);
    sqlite3_finalize(st);
    return 0;
}

int ws_simdb_get_grid_runs(ws_store *s, long long grid_id, ws_simdb_run **out, size_t *n_out,
                           ws_err *err)
{
    char sql[1024];
    snprintf(sql, sizeof sql, "SELECT " RUN_COLS " FROM sim_runs WHERE grid_id = ?1 ORDER BY id",
             "params");
    return read_rows(s, sql, grid_id, sizeof **out, row_run, "cannot read simulation runs",
                     (void **)out, n_out, err);
}

static void row_point(sqlite3_stmt *st, void *elem)
{
    ws_simdb_point *p = elem;
    p->id = sqlite3_column_int64(st, 0);
    ws_store_col_text(st, 1, p->model, sizeof p->model);
    ws_store_col_text(st, 2, p->gpu_profile, sizeof p->gpu_profile);
    ws_store_col_text(st, 3, p->host_profile, sizeof p->host_profile);
    ws_store_col_text(st, 4, p->policy, sizeof p->policy);
    p->batch = sqlite3_column_int(st, 5);
    p->prompt_tokens = sqlite3_column_int64(st, 6);
    p->output_tokens = sqlite3_column_int64(st, 7);
    p->requests = sqlite3_column_int64(st, 8);
    p->completed = sqlite3_column_int64(st, 9);
    p->oom = sqlite3_column_int64(st, 10);
    p->decode_tokens_per_s = ws_store_col_num(st, 11);
}

int ws_simdb_list_points(ws_store *s, const char *model, const char *gpu, long long grid,
                         ws_simdb_point **out, size_t *n_out, ws_err *err)
{
    const char *what = "cannot read simulation runs";
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(
            ws_store_sqlite(s),
            "SELECT id, model, gpu_profile, host_profile, policy, batch, prompt_tokens, "
            "output_tokens, requests, completed, oom, "
            "json_extract(params, '$.decode_tokens_per_s') FROM sim_runs r "
            "WHERE workload = 'closed' AND origin = 'sim' AND (?1 IS NULL OR model = ?1) "
            "AND (?2 IS NULL OR gpu_profile = ?2) AND (?3 = 0 OR grid_id = ?3) "
            "AND id = (SELECT max(id) FROM sim_runs q "
            "WHERE q.workload = 'closed' AND q.origin = 'sim' AND (?3 = 0 OR q.grid_id = ?3) "
            "AND q.model = r.model AND q.gpu_profile = r.gpu_profile "
            "AND q.host_profile = r.host_profile AND q.policy = r.policy AND q.batch = r.batch "
            "AND q.prompt_tokens IS r.prompt_tokens AND q.output_tokens IS r.output_tokens) "
            "ORDER BY model, gpu_profile, host_profile, batch, prompt_tokens, policy",
            -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, what);
    if (model)
        sqlite3_bind_text(st, 1, model, -1, SQLITE_STATIC);
    if (gpu)
        sqlite3_bind_text(st, 2, gpu, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, grid);
    int rc = ws_store_read_rows(s, st, sizeof **out, row_point, what, (void **)out, n_out, err);
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
    char sql[2048];
    snprintf(sql, sizeof sql,
             "SELECT " RUN_COLS " FROM sim_runs r WHERE EXISTS (SELECT 1 FROM sim_runs q WHERE "
             "q.id = ?1 AND %s) AND id = (SELECT max(id) FROM sim_runs q WHERE q.policy = "
             "r.policy AND %s) ORDER BY id",
             "''", same, same);
    return read_rows(s, sql, run.id, sizeof **out, row_run, "cannot read simulation runs",
                     (void **)out, n_out, err);
}
