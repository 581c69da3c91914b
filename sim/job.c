/* job: one `writescope sim` workload under its policies (see job.h). */
#include "job.h"

#include <stdio.h>
#include <string.h>

#include "record.h"

void sim_job_gen_desc(const ws_trace_gen *g, char *buf, size_t cap)
{
    char pd[64], od[64];
    ws_trace_len_format(&g->prompt, pd, sizeof pd);
    ws_trace_len_format(&g->output, od, sizeof od);
    if (g->arrivals == WS_ARRIVALS_CLOSED) {
        char th[64];
        ws_trace_think_format(g, th, sizeof th);
        snprintf(buf, cap, "arrivals=closed clients=%d think=%s requests=%llu prompt=%s output=%s",
                 g->clients, th, (unsigned long long)g->requests, pd, od);
        return;
    }
    char cv[32] = "";
    if (g->arrivals == WS_ARRIVALS_GAMMA)
        snprintf(cv, sizeof cv, " cv=%g", g->cv);
    snprintf(buf, cap, "arrivals=%s rate=%g%s requests=%llu prompt=%s output=%s",
             ws_trace_arrivals_name(g->arrivals), g->rate, cv, (unsigned long long)g->requests, pd,
             od);
}

/* The run row's workload and settings. */
static sim_record_meta job_meta(const sim_job_cfg *c, const ws_trace *t)
{
    const int closed = !c->trace && !c->gen;
    return (sim_record_meta){.model = c->m->name,
                             .gpu = c->hw->gpu,
                             .host = c->hw->host,
                             .workload = c->trace ? "trace"
                                         : c->gen ? "generator"
                                                  : "closed",
                             .prompt = closed ? c->prompt : 0,
                             .output = closed ? c->output : 0,
                             .trace_path = c->trace,
                             .trace_format =
                                 c->trace && t ? ws_trace_format_name(ws_trace_format_of(t)) : NULL,
                             .generator = c->gen ? c->gen_desc : NULL,
                             .gpu_experts = c->cc.gpu_experts,
                             .cc = &c->cc};
}

/* The workload's source: a trace (file or generator) opened into *t, or the closed batch. */
static int job_source(const sim_job_cfg *c, sim_closed *closed, ws_trace **t, sim_source *src,
                      ws_err *err)
{
    *t = NULL;
    int rc = 0;
    if (c->trace)
        rc = ws_trace_open(c->trace, &c->topts, t, err);
    else if (c->gen)
        rc = ws_trace_gen_open(c->gen, t, err);
    else
        sim_closed_source(closed, c->n, c->prompt, c->output, src);
    if (!rc && *t)
        rc = sim_trace_source(*t, src, err);
    return rc;
}

/* Policy k's run through the sink (if any); *r holds its results when it returns 0, *tc the
 * trace's counts (tc_buf, or NULL without a trace). */
static int job_one(const sim_job_cfg *c, sim_sink *sink, int k, sim_results *r,
                   ws_trace_counts *tc_buf, const ws_trace_counts **tc, ws_err *err)
{
    sim_cfg cfg = c->cfg;
    cfg.policy = (ws_policy_kind)k;
    sim_closed closed;
    sim_source src;
    ws_trace *t;
    *tc = NULL;
    int rc = job_source(c, &closed, &t, &src, err);
    const sim_record_meta meta = job_meta(c, t);
    if (!rc && sink)
        rc = sim_sink_begin(sink, &cfg, &meta, err);
    if (!rc) {
        rc = sim_run(c->m, c->hw, &c->cc, &cfg, &src, r, err);
        if (sink)
            rc = rc ? (sim_sink_fail(sink), rc) : sim_sink_end(sink, r, err);
        if (rc && !err->code)
            err->code = rc;
    }
    if (t) {
        *tc_buf = *ws_trace_get_counts(t);
        *tc = tc_buf;
        ws_trace_close(t);
    }
    return rc;
}

/* A budget the user gave that cannot fit beside this policy's weights. */
static int job_budget(const sim_job_cfg *c, const sim_results *r, ws_err *err)
{
    const sim_totals *t = &r->tot;
    const int alone = c->policies && !(c->policies & (c->policies - 1));
    if (!t->no_room || !c->budget_given || !alone || !(t->gpu_weight_bytes < c->hw->gpu_mem.v))
        return 0;
    const double G = 1073741824.0;
    return ws_err_set(err, WS_EINVAL,
                      "--gpu-kv-gb %.4g: %s keeps %.3g GiB of weights on the %.3g GiB GPU, so "
                      "its KV budget is at most %.4g GiB",
                      t->gpu_kv_budget / G, r->policy, t->gpu_weight_bytes / G,
                      c->hw->gpu_mem.v / G, (c->hw->gpu_mem.v - t->gpu_weight_bytes) / G);
}

/* Every run asked for, each to on_run. */
static int job_runs(const sim_job_cfg *c, sim_sink *sink, sim_job_out *out, ws_err *err)
{
    for (int k = 0; k < WS_POLICY_COUNT; k++) {
        if (!(c->policies & 1u << k))
            continue;
        sim_results r;
        ws_trace_counts tc_buf;
        const ws_trace_counts *tc;
        int rc = job_one(c, sink, k, &r, &tc_buf, &tc, err);
        if (rc)
            return rc;
        long long id = 0;
        if (sink && c->db) {
            id = out->last_id = sim_sink_run_id(sink);
            if (!out->first_id)
                out->first_id = id;
            out->ids[out->n_ids++] = id;
        }
        if (!(rc = job_budget(c, &r, err)) && c->on_run)
            rc = c->on_run(c->on_run_ctx, &r, id, tc, err);
        sim_results_free(&r);
        if (rc)
            return rc;
    }
    return 0;
}

int sim_job_run(const sim_job_cfg *c, sim_job_out *out, ws_err *err)
{
    memset(out, 0, sizeof *out);
    sim_sink *sink = NULL;
    int rc = 0;
    if ((c->db || c->csv || c->chrome_trace) &&
        (rc = sim_sink_open(c->db, c->csv, c->chrome_trace, &c->ct, &sink, err)))
        return rc;
    if ((rc = job_runs(c, sink, out, err))) {
        sim_sink_abort(sink);
        return rc;
    }
    if (sink) {
        out->spans = sim_sink_trace_written(sink);
        out->dropped = sim_sink_trace_dropped(sink);
        rc = sim_sink_close(sink, err);
    }
    return rc;
}
