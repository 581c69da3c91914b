/* record: a simulation's results as the rows the database stores (store/simdb.h) and the
 * CSV files repeat (export.h), and the sink that streams a run into them while it plays.
 *
 * The mapping, in one place: outcomes are the same codes (done 0, oom 1; unfinished 2 is
 * never produced, the loop runs every request to its end); a TTFT, TPOT or end-to-end time
 * of -1 (no such time) is NAN; a step's tokens are its decode plus prefill tokens, its end
 * t_start + dt, its context the KV tokens attended, its busy_* the resources' busy seconds,
 * its r* NAN at a prefill step (no target is computed there). The run: completed = served,
 * tokens_out = output tokens, sim_s = makespan, goodput = served requests within the SLOs
 * per second, an SLO of 0 (none) is NAN, percentiles NAN when nothing was served; every
 * other setting and total (decode tokens/s, realised and target share at the end, GPU
 * weight bytes, steps, folded layers, inexact folds, whether the percentiles are exact and
 * their bound otherwise) goes into params as JSON. Every run is labelled modeled and names
 * the model and both profiles.
 *
 * The sink: sim_sink_open with any of a database, a CSV folder and a Chrome-trace file;
 * per run sim_sink_begin (opens the run's transaction and row, starts its CSV run, and
 * points cfg's on_step, on_request and timeline at the sink), sim_run, then sim_sink_end
 * (totals, commit) or sim_sink_fail (rollback: the database holds no part of the run); a
 * run begun inside the caller's transaction (a validation's) is committed or rolled back
 * with it, by the caller;
 * sim_sink_close replaces the files at the end, sim_sink_abort leaves them as they were.
 * Nothing is held in memory per request or step: rows are written as they come, and the
 * timeline is drained into the trace after every step (until its cap, then left empty). */
#ifndef WS_SIM_RECORD_H
#define WS_SIM_RECORD_H

#include <stdint.h>

#include "cost.h"
#include "export.h"
#include "serve.h"
#include "simdb.h"
#include "store.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the run row needs besides the results: the workload and the settings. */
typedef struct sim_record_meta {
    const char *model, *gpu, *host; /* names as loaded */
    const char *workload;            /* closed | trace | generator */
    int prompt, output;              /* closed batch: N, M (else 0) */
    const char *trace_path, *trace_format, *generator; /* NULL: none */
    int gpu_experts;                 /* routed experts per layer on the GPU */
    const ws_deploy_cfg *cc;           /* the run's cost settings (placement, threads, formats);
                                      * NULL: not recorded */
    const char *origin;              /* the run's origin (simdb.h); NULL: "sim" */
} sim_record_meta;

void sim_record_request(const sim_req_result *r, ws_simdb_request *out);
void sim_record_step(const sim_step_rec *s, ws_simdb_step *out);
/* The run row of cfg and meta; res (NULL before the run) adds the totals. */
int sim_record_run(const sim_cfg *cfg, const sim_record_meta *meta, const sim_results *res,
                   ws_simdb_run *out, ws_err *err);

typedef struct sim_sink sim_sink;
/* Any of db (the caller's, open for writing), csv_dir and trace_path (NULL: none); topts
 * for the trace (title filled per run when NULL there). */
int sim_sink_open(ws_store *db, const char *csv_dir, const char *trace_path,
                  const sim_export_trace_opts *topts, sim_sink **out, ws_err *err);
int sim_sink_begin(sim_sink *k, sim_cfg *cfg, const sim_record_meta *meta, ws_err *err);
int sim_sink_end(sim_sink *k, const sim_results *res, ws_err *err);
void sim_sink_fail(sim_sink *k);
/* The database id of the last run ended (0: none). */
long long sim_sink_run_id(const sim_sink *k);
/* Spans written to the trace and left out by its caps. */
size_t sim_sink_trace_written(const sim_sink *k);
size_t sim_sink_trace_dropped(const sim_sink *k);
/* Replaces the CSV files and the trace; frees k. */
int sim_sink_close(sim_sink *k, ws_err *err);
/* Leaves the files as they were; frees k (NULL is fine). */
void sim_sink_abort(sim_sink *k);

#ifdef __cplusplus
}
#endif
#endif
