/* export: a simulation's results as files -- CSV tables for spreadsheets and plots, and a
 * Chrome trace of the operation timeline that Perfetto (ui.perfetto.dev) and
 * chrome://tracing open.
 *
 * CSV (`--csv DIR`): DIR/requests.csv, DIR/steps.csv and DIR/summary.csv, written from the
 * same rows the database stores (store/simdb.h), so the two never disagree. Each row of
 * requests.csv and steps.csv starts with the policy it belongs to and summary.csv has one
 * row per run, so `--policy all` writes all its runs into one folder: sim_export_csv_begin
 * (a run's policy) -> rows -> sim_export_csv_end (its totals), once per run, then
 * sim_export_csv_close. Missing numbers (NAN) are empty fields. The three files are
 * replaced whole when the writer closes, or left as they were.
 *
 * Chrome trace (`--chrome-trace FILE`): the spans of a sim_timeline (timeline.h) as
 * complete events ("ph":"X") with ts and dur in microseconds of simulated time; one
 * process per device -- GPU (resources named gpu*), link (h2d*, d2h*, link*, pcie*), CPU
 * (cpu*, host*, mem*), other -- and one thread per resource, with a pool's overlapping
 * spans spread over lanes ("cpu #0", "cpu #1", ...) so every thread's spans are disjoint
 * and in time order. A span that held no resource goes to the thread of its channel, and
 * a barrier (no resource, channel or duration) is left out. Events are written as they
 * come (never built in memory), each timeline chunk sorted by start time; the caps
 * (max_spans, t_max) keep a million-token run from writing gigabytes: "the first N
 * steps" is t_max = the end of step N. The file names the run (title) and says that its
 * times are modeled; it is replaced whole on close. */
#ifndef WS_SIM_EXPORT_H
#define WS_SIM_EXPORT_H

#include <stddef.h>

#include "simdb.h"
#include "timeline.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CSV, streaming. */
typedef struct sim_export_csv sim_export_csv;
/* Creates DIR when missing (its parent must exist) and opens the three files. */
int sim_export_csv_open(const char *dir, sim_export_csv **out, ws_err *err);
/* Starts a run: rows added next belong to `policy`. */
int sim_export_csv_begin(sim_export_csv *c, const char *policy, ws_err *err);
int sim_export_csv_request(sim_export_csv *c, const ws_simdb_request *r, ws_err *err);
int sim_export_csv_step(sim_export_csv *c, const ws_simdb_step *st, ws_err *err);
/* Ends the run with its summary row. */
int sim_export_csv_end(sim_export_csv *c, const ws_simdb_run *run, ws_err *err);
/* Replaces the three files; on failure none is replaced. Frees c either way. */
int sim_export_csv_close(sim_export_csv *c, ws_err *err);
/* Drops the files being written and frees c (NULL is fine). */
void sim_export_csv_abort(sim_export_csv *c);
/* One run in one call. */
int sim_export_csv_write(const char *dir, const ws_simdb_run *run, const ws_simdb_request *req,
                         size_t n_req, const ws_simdb_step *steps, size_t n_steps, ws_err *err);

/* The column names of each file, NULL-terminated (tests and docs read them). */
extern const char *const sim_export_request_cols[];
extern const char *const sim_export_summary_cols[];

/* Chrome trace. */
typedef struct sim_export_trace_opts {
    size_t max_spans; /* write at most this many spans (0: no cap) */
    double t_max;     /* only spans starting before t_max seconds (<= 0: no limit) */
    const char *title; /* e.g. "qwen3-30b-a3b on a100-40gb-pcie + xeon-gold-5318y, writescope" */
} sim_export_trace_opts;

typedef struct sim_export_trace sim_export_trace;
/* Opens FILE (replaced on close); opts may be NULL (no caps, no title). */
int sim_export_trace_open(const char *path, const sim_export_trace_opts *opts,
                          sim_export_trace **out, ws_err *err);
/* Writes the spans of tl that the caps let through, in start order; tl may be cleared
 * (sim_timeline_clear) and refilled afterwards. */
int sim_export_trace_add(sim_export_trace *t, const sim_timeline *tl, ws_err *err);
/* 1 once max_spans spans are written: the caller may stop recording. */
int sim_export_trace_full(const sim_export_trace *t);
/* Counts n spans as left out by the caps without looking at them (a caller that stops
 * handing spans over once the trace is full). */
void sim_export_trace_skip(sim_export_trace *t, size_t n);
/* Spans written, and spans the caps left out, so far. */
size_t sim_export_trace_written(const sim_export_trace *t);
size_t sim_export_trace_dropped(const sim_export_trace *t);
/* Writes the process and thread names, closes the JSON and replaces the file; frees t. */
int sim_export_trace_close(sim_export_trace *t, ws_err *err);
void sim_export_trace_abort(sim_export_trace *t);
/* A whole timeline in one call; *n_written (may be NULL) gets the spans written. */
int sim_export_trace_write(const char *path, const sim_timeline *tl,
                           const sim_export_trace_opts *opts, size_t *n_written, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
