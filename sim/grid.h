/* grid: the reference paper's evaluation grid run through the simulator, each (model, GPU)
 * loaded once by runtime/hw.h. The grid is DeepSeek-V2-Lite, Qwen3-30B-A3B and Mixtral-8x7B
 * on the a100-40gb-pcie and v100-32gb-pcie profiles (host: the paper's Xeon or the caller's),
 * closed batches of 4/16/32 requests with 2K/8K/32K prompts and 256 output tokens, every
 * policy; the summary is each policy's throughput and the geometric-mean speedup of
 * writescope over each baseline at prompts >= 8K, per (model, GPU) and over each GPU, over
 * the points where both were served without an out-of-memory outcome. The paper's figures
 * are kept here as constants only to be printed beside ours, labelled as the paper's.
 *
 * The points are independent: sim_grid_open .. sim_grid_eval(i) .. sim_grid_close evaluates
 * any one of them by its index (the order sim_grid_run produces), so a caller may spread
 * them over processes (cli/ does, through platform/ws_par.h) and get the same rows as one
 * process. A point is a fixed-size record holding its run row (store/simdb.h) too. */
#ifndef WS_SIM_GRID_H
#define WS_SIM_GRID_H

#include "serve.h"
#include "simdb.h"
#include "store.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SIM_GRID_MODELS 3
#define SIM_GRID_GPUS 2
#define SIM_GRID_BATCHES 3
#define SIM_GRID_PROMPTS 3

extern const char *const sim_grid_models[SIM_GRID_MODELS];
extern const char *const sim_grid_gpus[SIM_GRID_GPUS];
extern const int sim_grid_batches[SIM_GRID_BATCHES];
extern const int sim_grid_prompts[SIM_GRID_PROMPTS];
#define SIM_GRID_OUTPUT 256

/* One point of the grid under one policy. */
typedef struct sim_grid_point {
    int model, gpu, batch, prompt; /* indices into the tables above; batch, prompt: values */
    int policy;                    /* ws_policy_kind */
    double tps;                    /* output tokens / makespan */
    double decode_tps;             /* decode tokens / decode time */
    uint64_t served, oom, events;
    double r_final;
    ws_simdb_run run;              /* the run row, totals included, ready to store */
} sim_grid_point;

typedef struct sim_grid_opts {
    const char *host; /* host profile (default xeon-gold-5318y) */
    int only_model;   /* -1: all, else an index into sim_grid_models */
    int only_gpu;     /* -1: all */
    int detail_layer; /* 0: fold (default) */
    int cpu_workers;  /* default 24 */
    void (*progress)(void *ctx, int done, int total);
    void *progress_ctx;
} sim_grid_opts;

void sim_grid_opts_default(sim_grid_opts *o);

/* The grid's points one at a time: the model and profiles of a (model, GPU) pair are loaded
 * from s the first time a point needs them. s and o must outlive the handle. */
typedef struct sim_grid sim_grid;
int sim_grid_open(ws_store *s, const sim_grid_opts *o, sim_grid **out, ws_err *err);
/* Points in the grid (models x gpus x batches x prompts x WS_POLICY_COUNT, fewer with
 * only_*); the policies of one (model, gpu, batch, prompt) are consecutive. */
size_t sim_grid_count(const sim_grid *g);
/* Simulates point i (< sim_grid_count) into *out. */
int sim_grid_eval(sim_grid *g, size_t i, sim_grid_point *out, ws_err *err);
void sim_grid_close(sim_grid *g);
/* The grid's settings as a JSON object (host, models, GPUs, batches, prompts, output,
 * policies, detail, CPU workers) into buf; returns 0, or WS_EINVAL when cap is too small. */
int sim_grid_params(const sim_grid_opts *o, char *buf, size_t cap, ws_err *err);

/* Stores the grid's n points (their runs under one grid row of the settings, ranks the
 * processes that ran them) in s, open for writing, in one transaction; *gr gets the grid
 * row, *first and *last its runs' ids. */
int sim_grid_store(ws_store *s, const sim_grid_opts *o, int ranks, const sim_grid_point *p,
                   size_t n, ws_simdb_grid *gr, long long *first, long long *last, ws_err *err);

/* Runs the grid in this process; *pts (n = models x gpus x batches x prompts x WS_POLICY_COUNT, fewer with
 * only_*) allocated here (free()). */
int sim_grid_run(ws_store *s, const sim_grid_opts *o, sim_grid_point **pts, size_t *n, ws_err *err);

/* Geometric-mean speedup of writescope over `base` on the decode throughput, over points of
 * (model, gpu) (model -1: every model) with prompt >= min_prompt where both were served
 * without OOM; *n_pairs counts them (0: returns 0). */
double sim_grid_speedup(const sim_grid_point *pts, size_t n, int model, int gpu, int base,
                        int min_prompt, int *n_pairs);

/* The paper's reported ranges, for printing beside ours. */
typedef struct sim_paper_range {
    const char *what;
    double lo, hi;
} sim_paper_range;
extern const sim_paper_range sim_paper_a100, sim_paper_v100, sim_paper_static, sim_paper_single;

#ifdef __cplusplus
}
#endif
#endif
