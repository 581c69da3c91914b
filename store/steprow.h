/* steprow: the one row type for a step and the one for a layer of a step, shared by the
 * simulator, the live runtime, validate and the figures, and one column table (cols.h) for
 * each (name, type, unit, where the value sits in the row) that drives everything written of
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

#include "cols.h"

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

/* The tables, NULL-name terminated. */
extern const ws_col ws_step_cols[];
extern const ws_col ws_layer_cols[];

#ifdef __cplusplus
}
#endif
#endif
