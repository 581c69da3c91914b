/* rundb: runtime results as typed rows (see rundb.h). */
#include "rundb.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "store_priv.h"
#include "ws_util.h"

static int check_run(ws_store *s, const ws_rundb_run *run, ws_err *err)
{
    if (strcmp(run->gpu_source, "modeled") && strcmp(run->gpu_source, "measured"))
        return ws_err_set(err, WS_EINVAL,
                          "%s: runtime run: gpu_source '%s' is not modeled or measured",
                          ws_store_path(s), run->gpu_source);
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
                  "share_overhead, share_gpu_wait, verify_max_err, bytes_moved) VALUES (?1, ?2, "
                  "?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, "
                  "?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28)",
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
    if ((rc = ws_store_insert_id(s, st, "insert run_runs", &run->id, err)))
        return rc;

    if ((rc = ws_store_prep(s,
                   "INSERT INTO run_steps(run_id, idx, t_start, t_end, batch, tokens, context, "
                   "r_star, r_real, busy_gpu, busy_h2d, busy_d2h, busy_cpu, busy_other, wall_s, "
                   "verify_err) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
                   "?14, ?15, ?16)",
                   &st, err)))
        return rc;
    for (size_t i = 0; i < n_steps; i++) {
        const ws_rundb_step *x = &steps[i];
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run->id);
        sqlite3_bind_int64(st, 2, x->idx);
        sqlite3_bind_double(st, 3, x->t_start);
        sqlite3_bind_double(st, 4, x->t_end);
        sqlite3_bind_int(st, 5, x->batch);
        sqlite3_bind_int64(st, 6, x->tokens);
        sqlite3_bind_int64(st, 7, x->context);
        const double v[] = {x->r_star,   x->r_real,   x->busy_gpu,
                            x->busy_h2d, x->busy_d2h, x->busy_cpu};
        for (int k = 0; k < 6; k++)
            ws_store_bind_num(st, 8 + k, v[k]);
        sqlite3_bind_text(st, 14, x->busy_other[0] ? x->busy_other : "{}", -1, SQLITE_STATIC);
        ws_store_bind_num(st, 15, x->wall_s);
        ws_store_bind_num(st, 16, x->verify_err);
        if ((rc = ws_store_step_done(s, st, "insert run_steps", err)))
            return rc;
    }
    sqlite3_finalize(st);

    if ((rc = ws_store_prep(s,
                   "INSERT INTO run_layers(run_id, step, layer, n_cpu, m_xfer, resident, "
                   "cpu_attn_s, router_s, experts_s, gpu_s, gpu_source, overhead_s, r_real, "
                   "r_star, a_est, b_est, pred_cpu_s, pred_gpu_s, pred_experts_s, flush_pages, "
                   "flush_cpu_pages) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
                   "?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)",
                   &st, err)))
        return rc;
    for (size_t i = 0; i < n_lay; i++) {
        const ws_rundb_layer *x = &lay[i];
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run->id);
        sqlite3_bind_int(st, 2, x->step);
        sqlite3_bind_int(st, 3, x->layer);
        sqlite3_bind_int64(st, 4, x->n_cpu);
        sqlite3_bind_int64(st, 5, x->m_xfer);
        sqlite3_bind_int64(st, 6, x->resident);
        const double a[] = {x->cpu_attn_s, x->router_s, x->experts_s, x->gpu_s};
        for (int k = 0; k < 4; k++)
            ws_store_bind_num(st, 7 + k, a[k]);
        sqlite3_bind_text(st, 11, run->gpu_source, -1, SQLITE_STATIC);
        const double b[] = {x->overhead_s, x->r_real,     x->r_star,     x->a_est,
                            x->b_est,      x->pred_cpu_s, x->pred_gpu_s, x->pred_experts_s};
        for (int k = 0; k < 8; k++)
            ws_store_bind_num(st, 12 + k, b[k]);
        sqlite3_bind_int(st, 20, x->flush_pages);
        sqlite3_bind_int(st, 21, x->flush_cpu_pages);
        if ((rc = ws_store_step_done(s, st, "insert run_layers", err)))
            return rc;
    }
    sqlite3_finalize(st);
    return 0;
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
                  "share_overhead, share_gpu_wait, verify_max_err, bytes_moved FROM run_runs "
                  "WHERE ?1 = 0 OR id = ?1 ORDER BY id DESC LIMIT 1",
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
    sqlite3_finalize(st);
    return 0;
}

static void row_step(sqlite3_stmt *st, void *elem)
{
    ws_rundb_step *x = elem;
    x->idx = sqlite3_column_int64(st, 0);
    x->t_start = sqlite3_column_double(st, 1);
    x->t_end = sqlite3_column_double(st, 2);
    x->batch = sqlite3_column_int(st, 3);
    x->tokens = sqlite3_column_int64(st, 4);
    x->context = sqlite3_column_int64(st, 5);
    double *num[] = {&x->r_star,   &x->r_real,   &x->busy_gpu, &x->busy_h2d,
                     &x->busy_d2h, &x->busy_cpu};
    for (int i = 0; i < 6; i++)
        *num[i] = ws_store_col_num(st, 6 + i);
    ws_store_col_text(st, 12, x->busy_other, sizeof x->busy_other);
    x->wall_s = ws_store_col_num(st, 13);
    x->verify_err = ws_store_col_num(st, 14);
}

int ws_rundb_get_steps(ws_store *s, long long run_id, ws_rundb_step **out, size_t *n_out,
                       ws_err *err)
{
    sqlite3_stmt *st;
    *out = NULL;
    *n_out = 0;
    int rc = ws_store_prep(s,
                  "SELECT idx, t_start, t_end, batch, tokens, context, r_star, r_real, busy_gpu, "
                  "busy_h2d, busy_d2h, busy_cpu, busy_other, wall_s, verify_err FROM run_steps "
                  "WHERE run_id = ?1 ORDER BY idx",
                  &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    rc = ws_store_read_rows(s, st, sizeof **out, row_step, "cannot read runtime steps",
                            (void **)out, n_out, err);
    sqlite3_finalize(st);
    return rc;
}
