/* validate: the live runtime against the simulator on one workload (`writescope validate`).
 *
 * One closed batch (model, batch, prompt, output, layers, policy, host and GPU profiles) is
 * served by the live engine (runtime/run_engine.h) `repeat` times and played once by the
 * simulator (sim/serve.h, every layer as ops) on the same cost model, and the two are
 * compared decode step by decode step and layer by layer: the step time, CPU attention and
 * routed experts per layer, the realised CPU share per step and the GPU half per layer
 * (ws_validate_q), each as the mean and p95 absolute percentage error over every point of
 * every repeat, beside the noise floor (later repeats against the first). The first
 * `warmup` decode steps of every run are kept as points but left out of the statistics.
 * Both sides build the step from one controller and one layer schedule (runtime/control.h,
 * runtime/schedule.h), so every difference reported is a measurement; each cost-model term
 * is also checked on the runtime's own token counts; each CPU-side quantity gets a verdict
 * against the noise floor (below), naming the term with the largest share of the step
 * where it is off. Which points count, how the terms are estimated: docs/design.md ("`validate`:
 * the comparison"); the command: docs/validate.md.
 *
 * Storage: with a store the runtime runs (rundb), the simulation (simdb) and the comparison
 * (validatedb, linked to both) are written in ONE transaction, taken once the runtime runs
 * are done: a validation interrupted, killed or out of space leaves none of them. Its runs
 * carry origin 'validate', so the figures over `sim` and `run` results leave them out. The
 * report's rows are the database's row types, so a stored validation reads back as the
 * same report, and the figure (plots/validate_plot.h) draws either from those rows. */
#ifndef WS_VALIDATE_H
#define WS_VALIDATE_H

#include <stddef.h>

#include "run_engine.h"
#include "store.h"
#include "validatedb.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ws_validate_q {
    WS_VQ_STEP = 0,     /* decode step time, per step (mixed: CPU measured, GPU modeled) */
    WS_VQ_CPU_ATTN = 1, /* CPU half of the attention, per layer, measured */
    WS_VQ_EXPERTS = 2,  /* routed experts on the CPU, per layer, measured */
    WS_VQ_SHARE = 3,    /* realised CPU share of the spilled KV at the step's start */
    WS_VQ_GPU = 4,      /* GPU half (stream + attention), per layer: modeled or measured */
    WS_VQ_COUNT
} ws_validate_q;

/* "step_time", "cpu_attn", "experts", "cpu_share", "gpu_half". */
const char *ws_validate_q_name(int q);
/* 1 for the CPU-side quantities the goal is about (step time, CPU attention, experts, share). */
int ws_validate_q_cpu_side(int q);

#define WS_VALIDATE_GOAL_MEAN 3.0 /* percent */
#define WS_VALIDATE_GOAL_P95 10.0 /* percent */

/* Against the noise floor (the runtime's repeats against its first run), per quantity: the
 * simulator is within noise when its mean error is at most max(NOISE_MEAN_MIN, noise mean +
 * NOISE_MEAN_PTS) and its p95 at most noise p95 + NOISE_P95_PTS; else the verdict names the
 * cost-model term most off for that quantity and by how much of the step. One run (no
 * floor): the goal above. */
#define WS_VALIDATE_NOISE_MEAN_MIN 5.0 /* percent */
#define WS_VALIDATE_NOISE_MEAN_PTS 2.0 /* points */
#define WS_VALIDATE_NOISE_P95_PTS 5.0  /* points */
/* 1 when stat s is within its noise floor (or, without one, the goal). */
int ws_validate_within_noise(const ws_validatedb_stat *s);

typedef ws_validatedb_run ws_validate_run;
typedef ws_validatedb_stat ws_validate_stat;
typedef ws_validatedb_point ws_validate_point;
typedef ws_validatedb_term ws_validate_term;

typedef struct ws_validate_report {
    ws_validate_run run; /* workload, labels, links (ids 0 when not stored), verdict */
    ws_validate_stat stat[WS_VQ_COUNT]; /* by ws_validate_q */
    ws_validate_point *pt;              /* every point of every repeat (owned) */
    size_t n_pt;
    ws_validate_term *term; /* (owned) */
    size_t n_term;
    long long *rep_run_id;         /* [repeats] run_runs ids (0: not stored) (owned) */
    double sim_wall_s, run_wall_s; /* real time of the simulation and of all runtime runs */
    char layers_note[200];
    int host_is_this_machine; /* set by the caller (the CLI knows how it chose --host) */
    /* The calibrator's reference probe (calib/measure.h) timed before and after every
     * runtime run: its rate now and when the host profile was calibrated (NAN: none), each
     * by the protocol's estimate (ws_calib_estimate), and the host's drift between the two, percent
     * (negative: slower now). Past WS_CALIB_DRIFT_PCT the host is not the one the calibration
     * measured, and the verdict says so. */
    double probe_bw, calib_probe_bw, host_drift_pct;
    /* The model's attention reference (calib.h) timed at the same moments when the host
     * profile has the calibration's sample of it: its KV read rate now and then (NAN: none)
     * and the drift, percent. On shared cores attention can lose to a neighbour what a read
     * does not; past WS_CALIB_DRIFT_PCT the verdict says so too. */
    double attn_probe_bw, calib_attn_bw, attn_drift_pct;
} ws_validate_report;

typedef struct ws_validate_cfg {
    ws_engine_cfg eng;      /* model, hw, gpu, policy, batch, prompt, output, layers, ...; its
                             * on_step is the validator's */
    int repeat;             /* runtime runs, >= 1 */
    int warmup;             /* first decode steps of each run left out of the statistics and the
                             * terms (default 1: the first step pays one-time costs, e.g. the expert
                             * GEMM's backend probe); their points are kept */
    int cpu_workers;        /* the simulator's CPU pool units (the host profile's cores) */
    long long calib_run_id; /* the calibration the host profile came from (0: none) */
    /* Progress (NULL: none): phase "run" (rep, step of steps), "sim", "store". */
    void (*progress)(void *ctx, const char *phase, int rep, int reps, int step, int steps);
    void *progress_ctx;
} ws_validate_cfg;

void ws_validate_cfg_default(ws_validate_cfg *c);

/* A quick calibration of this machine (what `calib --quick` runs: the CPU, plus the GPU and
 * the link when a CUDA device is present), stored in s; host gets the profile it rebuilt
 * (host:<fingerprint>), *calib_id the calibration run. progress as calib's (frac, what). */
int ws_validate_calibrate(ws_store *s, int threads,
                          void (*progress)(void *ctx, double frac, const char *what), void *ctx,
                          char *host, size_t cap, long long *calib_id, ws_err *err);

/* Runs the comparison; with s non-NULL stores the runs, the simulation and the comparison
 * (report->run.id and the links set). Free the report with ws_validate_report_free. */
int ws_validate_run_all(const ws_validate_cfg *c, ws_store *s, ws_validate_report *out,
                        ws_err *err);
void ws_validate_report_free(ws_validate_report *r);

/* Reads validation `id` (0: the newest) back as a report. */
int ws_validate_load(ws_store *s, long long id, ws_validate_report *out, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
