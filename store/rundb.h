/* rundb: results of the live runtime in the database -- a run with its totals, one row per
 * decode step and one per (step, layer) (schema 005_run_results.sql) -- as typed rows, so
 * the runtime's caller fills plain structs and never sees SQL. The step rows have the
 * simulator's step columns (simdb.h), so a run and a simulation of the same workload
 * compare column by column.
 *
 * ws_rundb_store_run writes a run whole or not at all (its own transaction, or the
 * caller's when one is open). Numbers a row does not have are NAN here and NULL in the
 * table. gpu_source is "modeled" or "measured" and says how every GPU time of the run was
 * obtained; nothing else is accepted. origin says which command made the run. */
#ifndef WS_RUNDB_H
#define WS_RUNDB_H

#include <stddef.h>

#include "steprow.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ws_rundb_run {
    long long id;          /* set by ws_rundb_store_run */
    char started_at[32];   /* filled with now when empty */
    char tool_version[16]; /* filled with WS_VERSION when empty */
    char model[128];
    char gpu[200];       /* "modeled:<profile>" or "cuda:<device>" */
    char gpu_source[12]; /* "modeled" | "measured" */
    char gpu_profile[160], host_profile[160];
    char policy[32];
    int batch, prompt_tokens, output_tokens, layers, model_layers;
    unsigned long long seed;
    char params[2048]; /* JSON object ("" stored as {}) */
    double wall_s, decode_s, prefill_modeled_s;
    long long tokens_out;
    double tokens_per_s, step_p50, step_p99;
    double share_cpu_attn, share_experts, share_overhead, share_gpu_wait;
    double verify_max_err; /* NAN: not verified */
    long long bytes_moved;
    char origin[12]; /* run (`writescope run`; the default when empty) | validate (a
                      * validation's runtime run) */
} ws_rundb_run;

/* A step and a (step, layer): the one step and layer rows (steprow.h). */
typedef ws_step_row ws_rundb_step;
typedef ws_layer_row ws_rundb_layer;

/* The run, its steps and layers in one transaction; sets run->id. WS_EINVAL for a
 * gpu_source other than modeled/measured or params that are not a JSON object. */
int ws_rundb_store_run(ws_store *s, ws_rundb_run *run, const ws_rundb_step *steps, size_t n_steps,
                       const ws_rundb_layer *lay, size_t n_lay, ws_err *err);

/* Reading. Run run_id (0: the newest run of `writescope run`: a validation's runs are only
 * read by id); WS_ENOTFOUND when there is none. */
int ws_rundb_get_run(ws_store *s, long long run_id, ws_rundb_run *run, ws_err *err);
/* A run's steps by idx; *out is NULL when there are none (the caller frees). */
int ws_rundb_get_steps(ws_store *s, long long run_id, ws_rundb_step **out, size_t *n_out,
                       ws_err *err);
/* Its layers by step, then layer. */
int ws_rundb_get_layers(ws_store *s, long long run_id, ws_rundb_layer **out, size_t *n_out,
                        ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
