/* validatedb: `writescope validate` comparisons in the database (schema 007_validate.sql) as
 * typed rows: a validation with its workload and links (the runtime run, the simulation, the
 * calibration it used), its statistics per quantity, its points (measured against predicted)
 * and its cost-model terms. The validation library (validate/validate.h) fills these structs
 * and never sees SQL; the plot and `validate` read them back.
 *
 * ws_validatedb_store writes a validation whole or not at all (its own transaction, or the
 * caller's when one is open). Numbers a row does not have are NAN here and NULL in the
 * table; an id of 0 is stored NULL. */
#ifndef WS_VALIDATEDB_H
#define WS_VALIDATEDB_H

#include <stddef.h>

#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ws_validatedb_run {
    long long id;          /* set by store; read */
    char started_at[32];   /* filled with now when empty */
    char tool_version[16]; /* filled with WS_VERSION when empty */
    char model[128];
    char gpu[200];       /* "modeled:<profile>" or "cuda:<device>" */
    char gpu_source[12]; /* "modeled" | "measured" */
    char host_profile[160];
    char policy[32];
    int batch, prompt_tokens, output_tokens, layers, repeats;
    int warmup; /* first decode steps of each run left out of the statistics */
    long long run_id, sim_run_id, calib_run_id; /* 0: none */
    char verdict[512];
    char params[1024]; /* JSON object ("" stored as {}) */
} ws_validatedb_run;

typedef struct ws_validatedb_stat {
    char quantity[16];        /* step_time | cpu_attn | experts | cpu_share | gpu_half */
    char scope[8];            /* step | layer */
    char measured_source[12]; /* measured | mixed | modeled */
    char unit[8];             /* s | 1 */
    long long n;
    double mean_ape, p95_ape;             /* percent */
    double noise_mean_ape, noise_p95_ape; /* percent; NAN: one run */
    double mean_measured, mean_predicted;
    char verdict[192];                    /* against the noise floor (validate.h) */
} ws_validatedb_stat;

typedef struct ws_validatedb_point {
    int rep;
    char quantity[16];
    int step, layer; /* layer -1: a per-step quantity */
    double measured, predicted;
} ws_validatedb_point;

typedef struct ws_validatedb_term {
    char term[32];
    double measured, predicted;
    char unit[16];
    double error_pct, step_share_pct;
    char note[200];
} ws_validatedb_term;

/* Stores the validation and its rows; sets run->id. WS_EINVAL for a gpu_source other than
 * modeled/measured, a scope or measured_source out of its set, or params that are not a
 * JSON object. */
int ws_validatedb_store(ws_store *s, ws_validatedb_run *run, const ws_validatedb_stat *st,
                        size_t n_st, const ws_validatedb_point *pt, size_t n_pt,
                        const ws_validatedb_term *tm, size_t n_tm, ws_err *err);

/* Reads validation `id` (0: the newest) and its rows (heap arrays, the caller frees them;
 * any out pointer may be NULL to skip those rows). WS_ENOTFOUND when there is none. */
int ws_validatedb_get(ws_store *s, long long id, ws_validatedb_run *run, ws_validatedb_stat **st,
                      size_t *n_st, ws_validatedb_point **pt, size_t *n_pt, ws_validatedb_term **tm,
                      size_t *n_tm, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
