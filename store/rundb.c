/* rundb: runtime results as typed rows (see rundb.h). */
#include "rundb.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "steprow.h"
#include "rows.h"
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

#define C(f, t) WS_COL_OF(ws_rundb_run, f, t)
static const ws_col k_run_cols[] = {C(started_at, WS_COL_STR),
                                    C(tool_version, WS_COL_STR),
                                    C(model, WS_COL_STR),
                                    C(gpu, WS_COL_STR),
                                    C(gpu_source, WS_COL_STR),
                                    C(gpu_profile, WS_COL_STR),
                                    C(host_profile, WS_COL_STR),
                                    C(policy, WS_COL_STR),
                                    C(batch, WS_COL_INT),
                                    C(prompt_tokens, WS_COL_INT),
                                    C(output_tokens, WS_COL_INT),
                                    C(layers, WS_COL_INT),
                                    C(model_layers, WS_COL_INT),
                                    C(seed, WS_COL_I64),
                                    C(params, WS_COL_TEXT),
                                    C(wall_s, WS_COL_REAL),
                                    C(decode_s, WS_COL_REAL),
                                    C(prefill_modeled_s, WS_COL_REAL),
                                    C(tokens_out, WS_COL_I64),
                                    C(tokens_per_s, WS_COL_REAL),
                                    C(step_p50, WS_COL_REAL),
                                    C(step_p99, WS_COL_REAL),
                                    C(share_cpu_attn, WS_COL_REAL),
                                    C(share_experts, WS_COL_REAL),
                                    C(share_overhead, WS_COL_REAL),
                                    C(share_gpu_wait, WS_COL_REAL),
                                    C(verify_max_err, WS_COL_REAL),
                                    C(bytes_moved, WS_COL_I64),
                                    C(origin, WS_COL_STR),
                                    {0}};
#undef C

typedef struct run_rows {
    ws_rundb_run *run;
    const ws_rundb_step *steps;
    size_t n_steps;
    const ws_rundb_layer *lay;
    size_t n_lay;
} run_rows;

/* The run, its steps and layers, inside the transaction. */
static int store_in_tx(ws_store *s, void *ctx, ws_err *err)
{
    const run_rows *r = ctx;
    ws_rundb_run *run = r->run;
    ws_store_stamp(run->started_at, sizeof run->started_at, run->tool_version,
                   sizeof run->tool_version);
    ws_rundb_run row = *run;
    if (!row.origin[0])
        snprintf(row.origin, sizeof row.origin, "run");
    sqlite3_stmt *st = NULL;
    int rc = ws_rows_prep_insert(s, "INSERT INTO run_runs", NULL, k_run_cols, NULL, &st, err);
    if (rc)
        return rc;
    ws_row_bind(st, 1, k_run_cols, &row);
    if ((rc = ws_store_insert_id(s, st, "insert run_runs", &run->id, err)))
        return rc;
    if ((rc = ws_rows_put(s, "run_steps", "run_id", run->id, ws_step_cols, r->steps,
                          sizeof *r->steps, r->n_steps, NULL, NULL, err)))
        return rc;
    return ws_rows_put(s, "run_layers", "run_id", run->id, ws_layer_cols, r->lay, sizeof *r->lay,
                       r->n_lay, NULL, NULL, err);
}

int ws_rundb_store_run(ws_store *s, ws_rundb_run *run, const ws_rundb_step *steps, size_t n_steps,
                       const ws_rundb_layer *lay, size_t n_lay, ws_err *err)
{
    int rc = check_run(s, run, err);
    if (rc)
        return rc;
    run_rows r = {run, steps, n_steps, lay, n_lay};
    return ws_store_in_tx_id(s, store_in_tx, &r, &run->id, err);
}

int ws_rundb_get_run(ws_store *s, long long run_id, ws_rundb_run *run, ws_err *err)
{
    char names[1024], sql[1536];
    ws_cols_names(names, sizeof names, "", k_run_cols, NULL);
    snprintf(sql, sizeof sql,
             "SELECT id, %s FROM run_runs WHERE (?1 = 0 AND origin = 'run') OR id = ?1 ORDER BY "
             "id DESC LIMIT 1",
             names);
    sqlite3_stmt *st;
    int rc = ws_store_prep(s, sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    rc = ws_store_run_row(s, st, run_id, "cannot read runtime runs", "runtime run",
                          "run 'writescope run ... --db PATH'", err);
    if (rc)
        return rc;
    memset(run, 0, sizeof *run);
    run->id = sqlite3_column_int64(st, 0);
    ws_row_read(st, 1, k_run_cols, run);
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
