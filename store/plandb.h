/* plandb: capacity plans in the database (schema 008_plan.sql) as typed rows, so the
 * planner's storage (sim/plan_store.c) writes plain structs, the figure (plots/plan_plot.c)
 * reads them, and neither sees SQL. A plan is written whole in one transaction -- its run
 * row, every simulated point, the best load per (GPU, policy, setting) and the OOM frontier
 * -- or not at all. Every plan is labelled 'modeled'. Numbers a row does not have (an SLO
 * not given, a percentile with an OOM in it, no price) are NAN here and NULL in the tables. */
#ifndef WS_PLANDB_H
#define WS_PLANDB_H

#include <stddef.h>

#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ws_plandb_run {
    long long id;          /* set by ws_plandb_store; read */
    char started_at[32];   /* filled with now when empty */
    char tool_version[16]; /* filled with WS_VERSION when empty */
    char model[128], host_profile[160];
    char load_kind[8];     /* rate | users */
    char workload[256];
    double slo_ttft, slo_tpot; /* s; NAN: none */
    double slo_pct, tol;
    int rounds;
    long long evals;
    double wall_s;
    char params[2048];     /* JSON object ("" stored as {}) */
} ws_plandb_run;

typedef struct ws_plandb_point {
    int round;
    int fit;               /* 0: a load point; 1: a frontier point */
    char gpu_profile[160], policy[32];
    double kv_gb;
    int page, window;      /* 0: defaults */
    double load;           /* NAN for fit points */
    int batch;
    long long context;
    int meets;
    double attain, ttft_q, tpot_q, goodput, tokens_per_s;
    long long requests, served, oom;
    int peak_batch;
    double wall_s;
} ws_plandb_point;

typedef struct ws_plandb_result {
    char gpu_profile[160], policy[32];
    double kv_gb;
    int page, window;
    int best, capped, evals;
    double max_load, goodput, tokens_per_s, ttft_q, tpot_q, attain;
    double price_per_h, cost_per_mtok; /* NAN: no price */
} ws_plandb_result;

typedef struct ws_plandb_fit {
    char gpu_profile[160], policy[32];
    int batch, capped;
    long long max_context;
} ws_plandb_fit;

/* Writes the plan whole (the caller's transaction when one is open, else its own); sets
 * run->id. */
int ws_plandb_store(ws_store *s, ws_plandb_run *run, const ws_plandb_point *pts, size_t n_pts,
                    const ws_plandb_result *res, size_t n_res, const ws_plandb_fit *fits,
                    size_t n_fits, ws_err *err);
/* Plan id (0: the newest); WS_ENOTFOUND when there is none. */
int ws_plandb_get_run(ws_store *s, long long id, ws_plandb_run *run, ws_err *err);
/* A plan's points by idx (heap array; *out NULL when none). */
int ws_plandb_get_points(ws_store *s, long long id, ws_plandb_point **out, size_t *n_out,
                         ws_err *err);
/* A plan's results, GPU and policy order as written. */
int ws_plandb_get_results(ws_store *s, long long id, ws_plandb_result **out, size_t *n_out,
                          ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
