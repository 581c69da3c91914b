/* rundb: runtime results as typed rows (see rundb.h). */
#include "rundb.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "steprow.h"
#include "store_priv.h"
#include "ws_util.h"

static int check_run(ws_store *s, const ws_rundb_run *run, ws_err *err)
{
    if (strcmp(run->gpu_source, "modeled") && strcmp(run->gpu_source, "measured"))
        return ws_err_set(err, WS_EINVAL,
                          "%s: runtime run: gpu_source '%s' is not modeled or measured",
                          ws_store_path(s), run->gpu_source);
    if (run->origin[0] && strcmp(run->origin, "run") && strcmp(run->origin, "validate"))
        return ws_err_set(err, WS_EINVAL, "%s: runtime run: origin '%s' is not run or validate",
                          ws_store_path(s), run->origin);
    return ws_store_check_params(s, "runtime run", run->params, err);
}

static int store_in_tx(ws_store *s, ws_rundb_run *run, const ws_rundb_step *steps, size_t n_steps,
                       const ws_rundb_layer *lay, size_t n_lay, ws_err *err)
{
    ws_store_stamp(run->started_at, sizeof run->started_at, run->tool_version,
                   sizeof run->tool_version);
    sqlite3_stmt *st = NULL;
    int rc = ws_store_prep(s,
                  "INSERT INTO run_runs(started_at, tool_version, model, gpu, gpu_source, "
                  "gpu_profile, host_profile, policy, batch, prompt_tokens, output_tokens, "
                  "layers, model_layers, seed, params, wall_s, decode_s, prefill_modeled_s, "
                  "tokens_out, tokens_per_s, step_p50, step_p99, share_cpu_attn, share_experts, "
                  "share_overhead, share_gpu_wait, verify_max_err, bytes_moved, origin) VALUES "
                  "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
                  "?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29)",
                  &st, err);
    if (rc)
        return rc;
    const char *txt[] = {run->started_at, run->tool_version, run->model,        run->gpu,
                         run->gpu_source, run->gpu_profile,  run->host_profile, run->policy};
    for (int i = 0; i < 8; i++)
        sqlite3_bind_text(st, i + 1, txt[i], -1, SQLITE_STATIC);
    const int ints[] = {run->batch, run->prompt_tokens, run->output_tokens, run->layers,
                        run->model_layers};
    for (int i = 0; i < 5; i++)
        sqlite3_bind_int(st, 9 + i, ints[i]);
    sqlite3_bind_int64(st, 14, (sqlite3_int64)run->seed);
    sqlite3_bind_text(st, 15, run->params[0] ? run->params : "{}", -1, SQLITE_STATIC);
    ws_store_bind_num(st, 16, run->wall_s);
    ws_store_bind_num(st, 17, run->decode_s);
    ws_store_bind_num(st, 18, run->prefill_modeled_s);
    sqlite3_bind_int64(st, 19, run->tokens_out);
    const double nums[] = {run->tokens_per_s,   run->step_p50,      run->step_p99,
                           run->share_cpu_attn, run->share_experts, run->share_overhead,
                           run->share_gpu_wait, run->verify_max_err};
    for (int i = 0; i < 8; i++)
        ws_store_bind_num(st, 20 + i, nums[i]);
    sqlite3_bind_int64(st, 28, run->bytes_moved);
    sqlite3_bind_text(st, 29, run->origin[0] ? run->origin : "run", -1, SQLITE_STATIC);
    if ((rc = ws_store_insert_id(s, st, "insert run_runs", &run->id, err)))
        return rc;

    ws_row_writer *w;
    if ((rc = ws_row_writer_open(s, "run_steps", ws_step_cols, run->id, &w, err)))
        return rc;
    for (size_t i = 0; !rc && i < n_steps; i++)
        rc = ws_row_add(w, &steps[i], err);
    ws_row_writer_close(w);
    if (rc || (rc = ws_row_writer_open(s, "run_layers", ws_layer_cols, run->id, &w, err)))
        return rc;
    for (size_t i = 0; !rc && i < n_lay; i++)
        rc = ws_row_add(w, &lay[i], err);
    ws_row_writer_close(w);
    return rc;
}

typedef struct run_rows {
    ws_rundb_run *run;
    const ws_rundb_step *steps;
    size_t n_steps;
    const ws_rundb_layer *lay;
    size_t n_lay;
} run_rows;

static int run_body(ws_store *s, void *ctx, ws_err *err)
{
    run_rows *r = ctx;
    return store_in_tx(s, r->run, r->steps, r->n_steps, r->lay, r->n_lay, err);
}

int ws_rundb_store_run(ws_store *s, ws_rundb_run *run, const ws_rundb_step *steps, size_t n_steps,
                       const ws_rundb_layer *lay, size_t n_lay, ws_err *err)
{
    int rc = check_run(s, run, err);
    if (rc)
        return rc;
    const int own = !ws_store_in_transaction(s);
    const long long id = run->id;
    run_rows r = {run, steps, n_steps, lay, n_lay};
    rc = ws_store_in_tx(s, run_body, &r, err);
    if (rc && own)
        run->id = id; /* the row it named is gone */
    return rc;
}

int ws_rundb_get_run(ws_store *s, long long run_id, ws_rundb_run *run, ws_err *err)
{
    sqlite3_stmt *st;
    int rc = ws_store_prep(s,
                  "SELECT id, started_at, tool_version, model, gpu, gpu_source, gpu_profile, "
                  "host_profile, policy, batch, prompt_tokens, output_tokens, layers, "
                  "model_layers, seed, params, wall_s, decode_s, prefill_modeled_s, tokens_out, "
                  "tokens_per_s, step_p50, step_p99, share_cpu_attn, share_experts, "
                  "share_overhead, share_gpu_wait, verify_max_err, bytes_moved, origin FROM "
                  "run_runs WHERE (?1 = 0 AND origin = 'run') OR id = ?1 ORDER BY id DESC "
                  "LIMIT 1",
                  &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    rc = ws_store_run_row(s, st, run_id, "cannot read runtime runs", "runtime run",
                          "run 'writescope run ... --db PATH'", err);
    if (rc)
        return rc;
    memset(run, 0, sizeof *run);
    run->id = sqlite3_column_int64(st, 0);
    char *txt[] = {run->started_at, run->tool_version, run->model,        run->gpu,
                   run->gpu_source, run->gpu_profile,  run->host_profile, run->policy};
    const size_t cap[] = {sizeof run->started_at,   sizeof run->tool_version,
                          sizeof run->model,        sizeof run->gpu,
                          sizeof run->gpu_source,   sizeof run->gpu_profile,
                          sizeof run->host_profile, sizeof run->policy};
    for (int i = 0; i < 8; i++)
        ws_store_col_text(st, 1 + i, txt[i], cap[i]);
    int *ints[] = {&run->batch, &run->prompt_tokens, &run->output_tokens, &run->layers,
                   &run->model_layers};
    for (int i = 0; i < 5; i++)
        *ints[i] = sqlite3_column_int(st, 9 + i);
    run->seed = (unsigned long long)sqlite3_column_int64(st, 14);
    ws_store_col_text(st, 15, run->params, sizeof run->params);
    run->wall_s = ws_store_col_num(st, 16);
    run->decode_s = ws_store_col_num(st, 17);
    run->prefill_modeled_s = ws_store_col_num(st, 18);
    run->tokens_out = sqlite3_column_int64(st, 19);
    double *num[] = {&run->tokens_per_s,   &run->step_p50,      &run->step_p99,
                     &run->share_cpu_attn, &run->share_experts, &run->share_overhead,
                     &run->share_gpu_wait, &run->verify_max_err};
    for (int i = 0; i < 8; i++)
        *num[i] = ws_store_col_num(st, 20 + i);
    run->bytes_moved = sqlite3_column_int64(st, 28);
    ws_store_col_text(st, 29, run->origin, sizeof run->origin);
    sqlite3_finalize(st);
    return 0;
}

int ws_rundb_get_steps(ws_store *s, long long run_id, ws_rundb_step **out, size_t *n_out,
                       ws_err *err)
{
    return ws_rows_get(s, "run_steps", ws_step_cols, sizeof **out, run_id, (void **)out, n_out,
                       err);
}

int ws_rundb_get_layers(ws_store *s, long long run_id, ws_rundb_layer **out, size_t *n_out,
                        ws_err *err)
{
    return ws_rows_get(s, "run_layers", ws_layer_cols, sizeof **out, run_id, (void **)out, n_out,
                       err);
}
