/* record: results as database and CSV rows, and the streaming sink (see record.h). */
#include "record.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "quantile.h"
#include "timeline.h"

static double time_or_nan(double v)
{
    return v < 0 ? NAN : v;
}

void sim_record_request(const sim_req_result *r, ws_simdb_request *out)
{
    *out = (ws_simdb_request){.idx = (long long)r->id,
                              .arrival_s = r->arrival_s,
                              .prompt = r->prompt,
                              .output = r->output,
                              .ttft_s = time_or_nan(r->ttft),
                              .tpot_s = time_or_nan(r->tpot),
                              .e2e_s = time_or_nan(r->e2e),
                              .outcome = r->outcome == SIM_OUT_OOM ? WS_SIMDB_OOM : WS_SIMDB_DONE};
}

void sim_record_step(const sim_step_rec *s, ws_simdb_step *out)
{
    *out = (ws_simdb_step){.idx = (long long)s->idx,
                           .t_start = s->t_start,
                           .t_end = s->t_end,
                           .batch = s->batch,
                           .tokens = (long long)s->decode_tokens + s->prefill_tokens,
                           .context = llround(s->context),
                           .r_star = s->decode_tokens > 0 ? s->r_star : NAN,
                           .r_real = s->r_real,
                           .busy_gpu = s->busy[SIM_RES_GPU],
                           .busy_h2d = s->busy[SIM_RES_H2D],
                           .busy_d2h = s->busy[SIM_RES_D2H],
                           .busy_cpu = s->busy[SIM_RES_CPU],
                           .cpu_attn_s = NAN,
                           .experts_s = NAN,
                           .overhead_s = NAN,
                           .wall_s = NAN,
                           .verify_err = NAN};
}

static void copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

int sim_record_run(const sim_cfg *cfg, const sim_record_meta *meta, const sim_results *res,
                   ws_simdb_run *out, ws_err *err)
{
    memset(out, 0, sizeof *out);
    copy(out->model, sizeof out->model, meta->model);
    copy(out->gpu_profile, sizeof out->gpu_profile, meta->gpu);
    copy(out->origin, sizeof out->origin, meta->origin ? meta->origin : "sim");
    copy(out->host_profile, sizeof out->host_profile, meta->host);
    copy(out->policy, sizeof out->policy, ws_policy_name(cfg->policy));
    copy(out->workload, sizeof out->workload, meta->workload);
    out->batch = cfg->batch;
    out->prompt_tokens = meta->prompt;
    out->output_tokens = meta->output;
    copy(out->trace_path, sizeof out->trace_path, meta->trace_path);
    copy(out->trace_format, sizeof out->trace_format, meta->trace_format);
    copy(out->generator, sizeof out->generator, meta->generator);
    copy(out->detail, sizeof out->detail, cfg->detail_layer ? "layer" : "step");
    out->seed = cfg->seed;
    out->slo_ttft = cfg->slo_ttft > 0 ? cfg->slo_ttft : NAN;
    out->slo_tpot = cfg->slo_tpot > 0 ? cfg->slo_tpot : NAN;
    const int n = snprintf(
        out->params, sizeof out->params,
        "{\"chunk\":%d,\"window\":%d,\"page_tokens\":%d,\"layers\":%d,\"r_static\":%.17g,"
        "\"gpu_kv_budget_bytes\":%.17g,\"pinned_limit_bytes\":%.17g,\"host_limit_bytes\":%.17g,"
        "\"gpu_experts\":%d,\"cpu_workers\":%d,\"prefill\":\"%s\"",
        cfg->chunk, cfg->window, cfg->par.page_tokens, cfg->layers, cfg->par.r_static,
        cfg->gpu_kv_budget, cfg->pinned_limit, cfg->host_limit, meta->gpu_experts,
        cfg->cpu_workers, ws_prefill_mode_name(cfg->prefill_mode));
    size_t len = n > 0 ? (size_t)n : 0;
    if (meta->cc) { /* where the work and the weights sit, and in which formats */
        const ws_deploy_cfg *c = meta->cc;
        const int m = snprintf(
            out->params + len, len < sizeof out->params ? sizeof out->params - len : 0,
            ",\"n_cpu_moe\":%d,\"n_gpu_layers\":%d,\"cpu_threads\":%d,\"cpu_sockets\":%d,"
            "\"one_node_memory\":%d,\"kv_dtype\":\"%s\",\"weights\":\"%s\",\"gpu_expert_weights\":\"%s\","
            "\"shared_expert_weights\":\"%s\",\"cpu_expert_weights\":\"%s\"",
            c->n_cpu_moe, c->n_gpu_layers, c->cpu_threads, c->cpu_sockets, c->one_node_memory,
            c->w_kv ? c->w_kv->name : ws_dtype_name(c->kv_dtype),
            c->w_gpu ? c->w_gpu->name : "model", c->w_gpu_experts ? c->w_gpu_experts->name : "model",
            c->w_shared ? c->w_shared->name : "model",
            c->w_cpu_experts ? c->w_cpu_experts->name : "model");
        len += m > 0 ? (size_t)m : 0;
    }
    if (res) {
        const sim_totals *t = &res->tot;
        const int m = snprintf(
            out->params + len, len < sizeof out->params ? sizeof out->params - len : 0,
            ",\"decode_tokens_per_s\":%.17g,\"r_final\":%.17g,\"rstar_last\":%.17g,"
            "\"gpu_weight_bytes\":%.17g,\"steps\":%llu,\"folded_layers\":%llu,"
            "\"fold_inexact_steps\":%llu,\"decode_tokens\":%llu,\"prompt_tokens\":%llu,"
            "\"percentiles\":\"%s\",\"percentile_rel_err\":%g,\"prefill_cpu_steps\":%llu,"
            "\"prefill_gpu_steps\":%llu",
            t->decode_tps, t->r_final, t->rstar_last, t->gpu_weight_bytes,
            (unsigned long long)t->steps, (unsigned long long)t->folded_layers,
            (unsigned long long)t->fold_inexact, (unsigned long long)t->decode_tokens,
            (unsigned long long)t->prompt_tokens, t->pct_exact ? "exact" : "histogram",
            t->pct_exact ? 0.0 : SIM_QUANTILE_REL_ERR, (unsigned long long)t->prefill_cpu_steps,
            (unsigned long long)t->prefill_gpu_steps);
        len += m > 0 ? (size_t)m : 0;
        const int served = t->served > 0;
        out->wall_s = t->wall_s;
        out->events = (long long)t->events;
        out->sim_s = t->makespan_s;
        out->requests = (long long)t->requests;
        out->completed = (long long)t->served;
        out->oom = (long long)t->oom;
        out->tokens_out = (long long)t->output_tokens;
        out->tokens_per_s = t->tokens_per_s;
        out->ttft_p50 = served ? t->ttft_p50 : NAN;
        out->ttft_p90 = served ? t->ttft_p90 : NAN;
        out->ttft_p99 = served ? t->ttft_p99 : NAN;
        out->tpot_p50 = served ? t->tpot_p50 : NAN;
        out->tpot_p90 = served ? t->tpot_p90 : NAN;
        out->tpot_p99 = served ? t->tpot_p99 : NAN;
        out->slo_met = (long long)t->slo_met;
        out->goodput = t->goodput_rps;
    }
    if (len + 2 > sizeof out->params)
        return ws_err_set(err, WS_EINVAL, "sim: run settings do not fit the params field");
    out->params[len] = '}';
    out->params[len + 1] = '\0';
    return 0;
}

/* ---- the sink ---- */

struct sim_sink {
    ws_store *db;
    ws_simdb_writer *w;
    sim_export_csv *csv;
    char *trace_path;
    sim_export_trace_opts topts;
    sim_export_trace *trace;
    int traced; /* runs traced so far */
    sim_timeline tl;
    ws_simdb_run run; /* the run being written */
    const sim_cfg *cfg;
    sim_record_meta meta;
    long long last_id;
    int in_run, in_tx, csv_run;
    int own_tx; /* the sink began the run's transaction (else it is the caller's) */
};

/* The timeline's spans into the trace, or counted as left out once it is full. */
static int drain(sim_sink *k, ws_err *err)
{
    int rc = 0;
    if (!sim_export_trace_full(k->trace)) {
        rc = sim_export_trace_add(k->trace, &k->tl, err);
    } else {
        size_t n = 0;
        for (size_t i = 0; i < k->tl.n; i++) {
            const sim_span *s = &k->tl.v[i];
            n += s->res || s->channel || s->t_end > s->t_start; /* barriers are never written */
        }
        sim_export_trace_skip(k->trace, n);
    }
    sim_timeline_clear(&k->tl);
    return rc;
}

static int on_step(void *ctx, const sim_step_rec *rec, ws_err *err)
{
    sim_sink *k = ctx;
    ws_simdb_step row;
    sim_record_step(rec, &row);
    int rc = 0;
    if (k->w && (rc = ws_simdb_add_step(k->w, &row, err)))
        return rc;
    if (k->csv && (rc = sim_export_csv_step(k->csv, &row, err)))
        return rc;
    return k->trace ? drain(k, err) : 0;
}

static int on_request(void *ctx, const sim_req_result *rec, ws_err *err)
{
    sim_sink *k = ctx;
    ws_simdb_request row;
    sim_record_request(rec, &row);
    int rc = 0;
    if (k->w && (rc = ws_simdb_add_request(k->w, &row, err)))
        return rc;
    if (k->csv && (rc = sim_export_csv_request(k->csv, &row, err)))
        return rc;
    return 0;
}

int sim_sink_open(ws_store *db, const char *csv_dir, const char *trace_path,
                  const sim_export_trace_opts *topts, sim_sink **out, ws_err *err)
{
    *out = NULL;
    sim_sink *k = calloc(1, sizeof *k);
    if (!k)
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    k->db = db;
    if (topts)
        k->topts = *topts;
    sim_timeline_init(&k->tl);
    int rc = 0;
    if (trace_path && !(k->trace_path = strdup(trace_path)))
        rc = ws_err_set(err, WS_ENOMEM, "out of memory");
    if (!rc && csv_dir)
        rc = sim_export_csv_open(csv_dir, &k->csv, err);
    if (rc) {
        sim_sink_abort(k);
        return rc;
    }
    *out = k;
    return 0;
}

int sim_sink_begin(sim_sink *k, sim_cfg *cfg, const sim_record_meta *meta, ws_err *err)
{
    if (k->in_run)
        return ws_err_set(err, WS_EINVAL, "sim: a run was begun before the last one ended");
    if (k->trace_path && k->traced)
        return ws_err_set(err, WS_EINVAL, "%s: a Chrome trace holds one run (one --policy)",
                          k->trace_path);
    int rc = sim_record_run(cfg, meta, NULL, &k->run, err);
    if (rc)
        return rc;
    k->cfg = cfg;
    k->meta = *meta;
    if (k->trace_path) {
        char title[512];
        snprintf(title, sizeof title, "%s on %s + %s, %s (modeled)", k->run.model,
                 k->run.gpu_profile, k->run.host_profile, k->run.policy);
        sim_export_trace_opts o = k->topts;
        if (!o.title)
            o.title = title;
        if ((rc = sim_export_trace_open(k->trace_path, &o, &k->trace, err)))
            return rc;
        k->traced++;
        cfg->timeline = &k->tl;
    }
    if (k->db) {
        k->own_tx = !ws_store_in_transaction(k->db);
        if (k->own_tx && (rc = ws_store_begin(k->db, err)))
            return rc;
        k->in_tx = 1;
        if ((rc = ws_simdb_put_run(k->db, &k->run, err)) ||
            (rc = ws_simdb_writer_open(k->db, k->run.id, &k->w, err))) {
            sim_sink_fail(k);
            return rc;
        }
    }
    if (k->csv) {
        if ((rc = sim_export_csv_begin(k->csv, k->run.policy, err))) {
            sim_sink_fail(k);
            return rc;
        }
        k->csv_run = 1;
    }
    cfg->on_step = on_step;
    cfg->on_step_ctx = k;
    cfg->on_request = on_request;
    cfg->on_request_ctx = k;
    k->in_run = 1;
    return 0;
}

void sim_sink_fail(sim_sink *k)
{
    ws_simdb_writer_close(k->w);
    k->w = NULL;
    if (k->in_tx && k->own_tx) /* the caller's transaction: the caller rolls it back */
        ws_store_rollback(k->db);
    k->in_tx = 0;
    k->in_run = 0;
    k->csv_run = 0; /* the CSV files are dropped by sim_sink_abort */
}

int sim_sink_end(sim_sink *k, const sim_results *res, ws_err *err)
{
    if (!k->in_run)
        return ws_err_set(err, WS_EINVAL, "sim: no run to end");
    const long long id = k->run.id;
    int rc = sim_record_run(k->cfg, &k->meta, res, &k->run, err);
    k->run.id = id;
    /* The trace's last spans (a run that ended without a step after them). */
    if (!rc && k->trace)
        rc = drain(k, err);
    if (!rc && k->w) {
        ws_simdb_writer_close(k->w);
        k->w = NULL;
        if (!(rc = ws_simdb_finish_run(k->db, &k->run, err)) && k->own_tx)
            rc = ws_store_commit(k->db, err);
        if (!rc) {
            k->in_tx = 0;
            k->last_id = id;
        }
    }
    if (!rc && k->csv)
        rc = sim_export_csv_end(k->csv, &k->run, err);
    if (rc) {
        sim_sink_fail(k);
        return rc;
    }
    k->csv_run = 0;
    k->in_run = 0;
    return 0;
}

long long sim_sink_run_id(const sim_sink *k)
{
    return k->last_id;
}

size_t sim_sink_trace_written(const sim_sink *k)
{
    return k->trace ? sim_export_trace_written(k->trace) : 0;
}

size_t sim_sink_trace_dropped(const sim_sink *k)
{
    return k->trace ? sim_export_trace_dropped(k->trace) : 0;
}

int sim_sink_close(sim_sink *k, ws_err *err)
{
    int rc = 0;
    if (k->in_run) {
        rc = ws_err_set(err, WS_EINVAL, "sim: a run was not ended");
        sim_sink_abort(k);
        return rc;
    }
    if (k->csv) {
        rc = sim_export_csv_close(k->csv, err);
        k->csv = NULL;
    }
    if (k->trace) {
        if (!rc)
            rc = sim_export_trace_close(k->trace, err);
        else
            sim_export_trace_abort(k->trace);
        k->trace = NULL;
    }
    sim_sink_abort(k);
    return rc;
}

void sim_sink_abort(sim_sink *k)
{
    if (!k)
        return;
    if (k->in_run)
        sim_sink_fail(k);
    sim_export_csv_abort(k->csv);
    sim_export_trace_abort(k->trace);
    sim_timeline_free(&k->tl);
    free(k->trace_path);
    free(k);
}
