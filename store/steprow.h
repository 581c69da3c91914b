/* steprow: the one row type for a step and the one for a layer of a step, shared by the
 * simulator, the live runtime, validate and the figures, and one column table for each
 * (name, type, unit, where the value sits in the row) that drives everything written of
 * them: the SQLite insert and select (sim_steps, run_steps, run_layers), the CSV header and
 * rows, and the JSON keys. A quantity has one name everywhere; adding a column is one line
 * of the table plus its migration.
 *
 * Values: NAN for "none" (a prefill step's r*, an unverified step's error), stored as NULL
 * and read back as NAN; integers are whole numbers held in doubles where the table says
 * so. Times are seconds on the run's timeline, busy_* the resources' busy seconds in the
 * step (a pool's unit-seconds over its units). */
#ifndef WS_STEPROW_H
#define WS_STEPROW_H

#include <stddef.h>
#include <stdio.h>

#include "store.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_STEPROW_OTHER_MAX 160 /* busy_other JSON, including the NUL */

/* One step. */
typedef struct ws_step_row {
    long long idx;         /* step, from 0 */
    double t_start, t_end; /* s */
    int batch;             /* sequences in the step */
    long long tokens;      /* tokens processed: prefill chunk + one per decoding sequence */
    long long context;     /* KV tokens attended per layer, summed over the batch */
    double r_star, r_real; /* the policy's target CPU share, the realised one; NAN: none */
    double busy_gpu, busy_h2d, busy_d2h, busy_cpu; /* s */
    char busy_other[WS_STEPROW_OTHER_MAX];         /* JSON object {"name": s}, "" as {} */
    double cpu_attn_s; /* the CPU's phases summed over layers: the CPU half, */
    double experts_s;  /* router + routed experts, */
    double overhead_s; /* the runtime's own work (NAN: none), s */
    double wall_s;     /* real seconds the step took here (NAN: simulated) */
    double verify_err; /* max |merged - full| (NAN: not verified) */
} ws_step_row;

/* One (step, layer). */
typedef struct ws_layer_row {
    int step, layer;
    long long n_cpu, m_xfer, resident; /* tokens attended: CPU pages, XFER pages, D-windows */
    double cpu_attn_s, router_s, experts_s, gpu_s, overhead_s; /* s */
    int gpu_measured;                                          /* 0: the GPU half is modeled */
    double r_real, r_star, a_est, b_est; /* shares; the policy's adopted A and B, s/token */
    double pred_cpu_s, pred_gpu_s, pred_experts_s; /* the cost model's, s */
    int flush_pages, flush_cpu_pages;
} ws_layer_row;

typedef enum ws_col_type {
    WS_COL_INT = 0,    /* int */
    WS_COL_I64 = 1,    /* long long */
    WS_COL_REAL = 2,   /* double, NAN as NULL */
    WS_COL_TEXT = 3,   /* char[], the JSON object busy_other */
    WS_COL_SOURCE = 4, /* int 0/1 stored as 'modeled' / 'measured' */
} ws_col_type;

typedef struct ws_col {
    const char *name; /* the SQL column, the CSV header, the JSON key */
    ws_col_type type;
    const char *unit; /* "s", "tokens", "1" (a share or count), "s/token", "json" */
    size_t off;       /* offset in the row */
    size_t cap;       /* TEXT: the buffer's size */
} ws_col;

/* The tables, NULL-name terminated, and their lengths. */
extern const ws_col ws_step_cols[];
extern const ws_col ws_layer_cols[];
size_t ws_cols_count(const ws_col *cols);

/* ---- storage (inside the caller's transaction) ---- */
/* Prepared inserts of rows of `cols` into `table` (sim_steps, run_steps, run_layers) for
 * run_id. */
typedef struct ws_row_writer ws_row_writer;
int ws_row_writer_open(ws_store *s, const char *table, const ws_col *cols, long long run_id,
                       ws_row_writer **out, ws_err *err);
int ws_row_add(ws_row_writer *w, const void *row, ws_err *err);
void ws_row_writer_close(ws_row_writer *w);
/* The run's rows in order (steps by idx, layers by step then layer) into a heap array of
 * rows of `size` bytes (*out NULL when there are none; the caller frees). */
int ws_rows_get(ws_store *s, const char *table, const ws_col *cols, size_t size, long long run_id,
                void **out, size_t *n_out, ws_err *err);

/* ---- files ---- */
/* CSV: the header (the column names, after `prefix` columns when not NULL, e.g. "policy,"),
 * and one row (after the same prefix's values). NAN is written empty. */
void ws_row_csv_header(FILE *f, const char *prefix, const ws_col *cols);
void ws_row_csv(FILE *f, const char *prefix, const ws_col *cols, const void *row);
/* JSON: an object keyed by the column names (NAN as null, busy_other parsed). */
struct json_t;
struct json_t *ws_row_json(const ws_col *cols, const void *row);

#ifdef __cplusplus
}
#endif
#endif
