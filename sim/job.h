/* job: one `writescope sim` in one call -- a workload (a closed batch, a trace file or a
 * generator) on a model and hardware already loaded, under one policy or each in turn, every
 * run streamed while it plays into the sinks asked for (a database, CSV files, a Chrome
 * trace: record.h) and handed to the caller when it ends (on_run). The command line parses
 * and loads, calls sim_job_run, and prints what comes back (cli/cmd_sim.c); progress comes
 * through cfg.progress (serve.h). Memory follows one run's results at a time: the caller
 * keeps what it wants of each from on_run. */
#ifndef WS_SIM_JOB_H
#define WS_SIM_JOB_H

#include <stddef.h>

#include "export.h"
#include "serve.h"
#include "store.h"
#include "trace.h"
#include "trace_gen.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sim_job_cfg {
    const ws_model *m;
    const ws_hw *hw;
    ws_deploy_cfg cc; /* the cost settings of every run */
    sim_cfg cfg;    /* the serving and simulator settings (cfg.policy is each run's); on_step,
                     * on_request and timeline are the sinks' */
    unsigned policies; /* bit k: a run under ws_policy_kind k, in that order */
    /* The workload: the trace file when set, else the generator when set, else a closed
     * batch of n requests of prompt and output tokens. */
    const char *trace;
    ws_trace_opts topts;
    const ws_trace_gen *gen;
    const char *gen_desc; /* the generator in words, for the run rows (sim_job_gen_desc) */
    int n, prompt, output;
    /* Where the runs go (each NULL: nowhere): a database open for writing, a CSV folder, a
     * Chrome trace (one run) with its caps. */
    ws_store *db;
    const char *csv, *chrome_trace;
    sim_export_trace_opts ct;
    /* 1: the GPU KV budget is the user's: one policy alone whose GPU weights leave it no room
     * is an error (WS_EINVAL) rather than a run of out-of-memory outcomes. */
    int budget_given;
    /* Called after each run with its results (valid during the call), its database id (0:
     * not stored) and its trace's counts (NULL: no trace file or generator); a non-zero
     * return stops the job with that code. */
    int (*on_run)(void *ctx, const sim_results *r, long long run_id, const ws_trace_counts *tc,
                  ws_err *err);
    void *on_run_ctx;
} sim_job_cfg;

/* What the job wrote. */
typedef struct sim_job_out {
    long long first_id, last_id; /* the runs' database ids (0: not stored) */
    long long ids[WS_POLICY_COUNT]; /* every run this job stored, in order: another writer's
                                     * runs may lie between first_id and last_id */
    int n_ids;
    size_t spans, dropped;       /* the Chrome trace's spans written and left out by its caps */
} sim_job_out;

/* Runs every run asked for; the sinks' files are replaced at the end, or left as they were
 * on failure (the database holds the runs that ended before it). */
int sim_job_run(const sim_job_cfg *c, sim_job_out *out, ws_err *err);

/* A generator in words, as the run rows keep it: "arrivals=poisson rate=2 requests=6
 * prompt=... output=..." (closed: clients and think time instead of the rate). */
void sim_job_gen_desc(const ws_trace_gen *g, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
