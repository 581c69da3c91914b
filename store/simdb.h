/* simdb: simulation results in the database -- runs with their totals, one row per
 * request and one per batch step (schema 004_sim_results.sql) -- as typed rows, so the
 * simulator (sim/) fills and reads plain structs and never sees SQL.
 *
 * Writing a run whole or not at all: ws_simdb_store_run does it in one call (its own
 * transaction, or the caller's when one is open). A simulator that does not keep every
 * row in memory streams instead, inside its own ws_store_begin .. ws_store_commit:
 * ws_simdb_put_run (the run row, totals possibly still zero) -> ws_simdb_writer_open ->
 * ws_simdb_add_request / ws_simdb_add_step as rows are produced -> ws_simdb_writer_close
 * -> ws_simdb_finish_run (the totals) -> commit; any error -> ws_store_rollback, and the
 * database is as it was. Rows go through statements prepared once, so ~100,000 rows take
 * a fraction of a second.
 *
 * Numbers a row does not have (the TTFT of a request that never ran, r* of a policy with
 * none, an objective not given) are NAN here and NULL in the table. Every run is labelled
 * 'modeled'. Readers return heap arrays the caller frees; text longer than a field (only a
 * hand-edited database has such) is cut to the field.
 *
 * A grid (`writescope sim grid`, schema 006_sim_grids.sql) is one sim_grids row and its run
 * rows (totals only, no request or step rows), stored together by ws_simdb_store_grid in one
 * transaction; a run of a grid names it in grid_id (0 here, NULL in the table: none). */
#ifndef WS_SIMDB_H
#define WS_SIMDB_H

#include <stddef.h>

#include "steprow.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a request ended. */
typedef enum ws_simdb_outcome {
    WS_SIMDB_DONE = 0,       /* all its output tokens produced */
    WS_SIMDB_OOM = 1,        /* could not be served: a memory limit (GPU KV, pinned, host) */
    WS_SIMDB_UNFINISHED = 2, /* still running when the simulation stopped */
} ws_simdb_outcome;

/* "done", "oom", "unfinished"; NULL for anything else. */
const char *ws_simdb_outcome_name(int outcome);
/* The outcome of a name, or -1. */
int ws_simdb_outcome_parse(const char *name);

typedef struct ws_simdb_run {
    long long id;              /* set by ws_simdb_put_run; read */
    char started_at[32];       /* UTC ISO 8601; put fills it with now when empty */
    char tool_version[16];     /* put fills WS_VERSION when empty */
    char model[128];
    char gpu_profile[160], host_profile[160];
    char policy[32];
    /* the workload */
    char workload[16];         /* closed | trace | generator */
    int batch;                 /* closed: B; otherwise the continuous-batching cap */
    long long prompt_tokens;   /* closed: N (else 0, stored NULL) */
    long long output_tokens;   /* closed: M (else 0, stored NULL) */
    char trace_path[256], trace_format[24];
    char generator[256];       /* e.g. "arrivals=poisson rate=2 lengths=lognormal" */
    char detail[8];            /* step | layer */
    unsigned long long seed;
    char params[2048];         /* JSON object of every other setting ("" stored as {}) */
    /* what running it took */
    double wall_s;             /* wall clock */
    long long events;          /* engine events */
    double sim_s;              /* simulated span, first arrival to last end */
    /* totals */
    long long requests, completed, oom, tokens_out;
    double tokens_per_s;
    double ttft_p50, ttft_p90, ttft_p99; /* seconds, over completed requests */
    double tpot_p50, tpot_p90, tpot_p99;
    double slo_ttft, slo_tpot; /* objectives, seconds; NAN: none */
    long long slo_met;         /* completed within both objectives */
    double goodput;            /* slo_met per simulated second */
    char label[12];            /* always "modeled" */
    long long grid_id;         /* the sim_grids row it belongs to; 0: none */
    char origin[12];           /* sim (a run of `writescope sim`; put's default when empty)
                                * | validate (a validation's comparison run) */
    int layers;                /* read: the layers simulated (params.layers; 0: not said) */
} ws_simdb_run;

typedef struct ws_simdb_grid {
    long long id;              /* set by ws_simdb_store_grid; read */
    char started_at[32];       /* UTC ISO 8601; store fills it with now when empty */
    char tool_version[16];     /* store fills WS_VERSION when empty */
    char params[2048];         /* JSON object of the grid's settings ("" stored as {}) */
    int ranks;                 /* processes the points were evaluated by (>= 1) */
} ws_simdb_grid;

typedef struct ws_simdb_request {
    long long idx;             /* position in the workload, from 0 */
    double arrival_s;
    long long prompt, output;  /* tokens */
    double ttft_s, tpot_s, e2e_s; /* NAN where the request has none */
    int outcome;               /* ws_simdb_outcome */
} ws_simdb_request;

/* A step: the one step row (steprow.h); wall_s and verify_err are NAN for a simulation. */
typedef ws_step_row ws_simdb_step;
#define WS_SIMDB_OTHER_MAX WS_STEPROW_OTHER_MAX

/* Writing, inside the caller's transaction (ws_store_begin). */
/* Inserts the run row (totals as they are) and sets run->id; fills started_at,
 * tool_version and label when empty. Refuses a bad workload, detail or params JSON. */
int ws_simdb_put_run(ws_store *s, ws_simdb_run *run, ws_err *err);
/* Rewrites the run's wall_s, events, sim_s, totals and params (the row run->id): totals
 * known only at the end may go into params then. */
int ws_simdb_finish_run(ws_store *s, const ws_simdb_run *run, ws_err *err);

/* Prepared inserts of one run's requests and steps, held open while rows stream in. */
typedef struct ws_simdb_writer ws_simdb_writer;
int ws_simdb_writer_open(ws_store *s, long long run_id, ws_simdb_writer **out, ws_err *err);
int ws_simdb_add_request(ws_simdb_writer *w, const ws_simdb_request *r, ws_err *err);
int ws_simdb_add_step(ws_simdb_writer *w, const ws_simdb_step *st, ws_err *err);
/* Rows written so far (requests + steps). */
long long ws_simdb_writer_rows(const ws_simdb_writer *w);
/* Finalizes the statements; NULL is fine. */
void ws_simdb_writer_close(ws_simdb_writer *w);

/* The whole run in one call: run row, requests, steps, all in one transaction (the
 * caller's when one is open, else its own, with SIGINT/SIGTERM held until it ends). */
int ws_simdb_store_run(ws_store *s, ws_simdb_run *run, const ws_simdb_request *req,
                       size_t n_req, const ws_simdb_step *steps, size_t n_steps, ws_err *err);

/* A grid and its n runs in one transaction (the caller's when one is open, else its own,
 * with SIGINT/SIGTERM held until it ends): sets g->id and every runs[i].grid_id and .id;
 * on failure the database holds none of them. */
int ws_simdb_store_grid(ws_store *s, ws_simdb_grid *g, ws_simdb_run *runs, size_t n,
                        ws_err *err);

/* Test hook (fault injection): when >= 0, a writer fails with WS_EDB once it has written
 * this many rows (requests + steps), as a full disk would. */
extern long long ws_simdb_fault_after_rows;

/* Reading. All runs, oldest first (the params column is left empty: read one run for it). */
int ws_simdb_list_runs(ws_store *s, ws_simdb_run **out, size_t *n_out, ws_err *err);
/* Run run_id (0 = the newest run of `writescope sim`: a validation's runs are only read by
 * id); WS_ENOTFOUND when there is none. */
int ws_simdb_get_run(ws_store *s, long long run_id, ws_simdb_run *run, ws_err *err);
/* A run's requests by idx; *out is NULL when there are none. */
int ws_simdb_get_requests(ws_store *s, long long run_id, ws_simdb_request **out, size_t *n_out,
                          ws_err *err);
/* A run's steps by idx. */
int ws_simdb_get_steps(ws_store *s, long long run_id, ws_simdb_step **out, size_t *n_out,
                       ws_err *err);
/* Grid grid_id (0 = the newest); WS_ENOTFOUND when there is none. */
int ws_simdb_get_grid(ws_store *s, long long grid_id, ws_simdb_grid *g, ws_err *err);
/* A grid's runs in the order they were stored (params included); *out NULL when none. */
int ws_simdb_get_grid_runs(ws_store *s, long long grid_id, ws_simdb_run **out, size_t *n_out,
                           ws_err *err);

/* Reading for figures. */
/* One closed-batch point: the newest run of each (model, gpu_profile, host_profile, policy,
 * batch, prompt_tokens, output_tokens). */
typedef struct ws_simdb_point {
    long long id;
    char model[128], gpu_profile[160], host_profile[160], policy[32];
    int batch;
    long long prompt_tokens, output_tokens;
    long long requests, completed, oom;
    double decode_tokens_per_s; /* decode tokens / decode time (params); NAN: none */
} ws_simdb_point;
/* Every closed-batch point of `writescope sim` (a validation's runs are left out),
 * filtered by model and GPU profile (NULL: any), ordered by model, gpu_profile,
 * host_profile, batch, prompt_tokens, policy. */
int ws_simdb_list_points(ws_store *s, const char *model, const char *gpu, long long grid,
                         ws_simdb_point **out, size_t *n_out, ws_err *err);
/* The runs of run_id's workload (same model, profiles, workload, batch, lengths, trace,
 * generator, seed, detail and origin): the newest of each policy, oldest first, run_id's
 * own included (0: the newest run, as ws_simdb_get_run). The params column is left empty. */
int ws_simdb_list_siblings(ws_store *s, long long run_id, ws_simdb_run **out, size_t *n_out,
                           ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
