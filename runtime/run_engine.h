/* run_engine: the live decode engine behind `writescope run`: a closed batch of B sequences
 * (prompt N, output M) of a model's real shapes, with synthetic seeded KV and expert weights,
 * served through the InplaceKVCache (ikv.h) under one placement policy with the one cost
 * model, controller and decode-step protocol the simulator uses. Prefill writes each layer's
 * prompt KV straight into its final regions (its compute is modeled); each decode step runs
 * per layer the new token's KV, the CPU half (ws_attn_cpu on the pool), the GPU half
 * (D-window + XFER pages: modeled, or on a CUDA device through the backend table), the MoE
 * phase on the CPU (router, top-k, the routed experts through the bf16 or int8 expert GEMM),
 * and the window flushes. The timeline is the layer schedule (schedule.h) played with the
 * durations this engine measured in place of the model's; cpu_time_modeled puts the model's
 * back, and the run is then the simulator's to 1e-9. Records label every time measured or
 * modeled. The full description is in docs/run.md ("Inside the engine"). */
#ifndef WS_RUN_ENGINE_H
#define WS_RUN_ENGINE_H

#include <stdint.h>

#include "attn_cpu.h"
#include "control.h"
#include "cost.h"
#include "model.h"
#include "policy.h"
#include "pool.h"
#include "schedule.h"
#include "serving.h"
#include "steprow.h"
#include "wformat.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ws_engine_gpu {
    WS_ENGINE_GPU_MODELED = 0, /* GPU work timed by the cost model, on its own clocks */
    WS_ENGINE_GPU_CUDA = 1,    /* the GPU half on a CUDA device (untested: no device yet) */
} ws_engine_gpu;

/* One (step, layer) as run. Times in seconds; *_pred from the cost model. */
typedef struct ws_run_layer {
    int step, layer;
    double n_cpu, m_xfer, resident; /* tokens attended: CPU pages, XFER pages, D-windows */
    double cpu_attn_s;              /* CPU half, measured */
    double router_s;                /* router GEMM + top-k, measured (0: dense layer) */
    double experts_s;               /* routed experts, measured (0: dense layer) */
    double gpu_s;                   /* GPU half (stream + attention), gpu_measured says how timed */
    int gpu_measured;               /* 0: modeled by the cost model */
    double overhead_s;              /* the engine's own CPU time in the layer, measured */
    double r_real;                  /* CPU tokens / spilled tokens after the layer's flush */
    double r_star;                  /* the policy's target for the step */
    double A, B;                    /* adopted estimates after observing this layer, s/token */
    double pred_cpu_s, pred_gpu_s, pred_experts_s;
    int flush_pages, flush_cpu_pages; /* flushed in this layer, of which to the CPU */
    ws_sched_times t;                 /* the layer on the step's timeline (schedule.h) */
} ws_run_layer;

/* One decode step: the one step row (store/steprow.h). Times on the engine's timeline (s
 * from the first decode step); r_star and r_real the step's first layer's; busy_gpu,
 * busy_h2d, busy_d2h modeled (measured with CUDA), busy_cpu and the CPU's phases measured;
 * wall_s the real time (verify excluded); verify_err NAN without verify. */
typedef ws_step_row ws_run_step;

typedef struct ws_engine_cfg {
    const ws_model *model;
    const ws_hw *hw; /* the GPU and host profiles, loaded (ws_hw_from_profiles) */
    ws_engine_gpu gpu;
    /* The serving settings (serving.h): a policy that spills (writescope, static, stream,
     * cpu-attn, migrate), par.page_tokens is P; batch, the closed batch's sequences (default
     * 4); window W; seed (default 1). Prefill: each prompt in chunks of at most `chunk`
     * tokens, each chunk's CPU experts where the controller puts them under prefill_mode,
     * its compute the layer schedule's, modeled. */
    WS_SERVING_MEMBERS;
    int prompt, output;
    int layers;          /* 0: what fits in mem_fraction of the RAM */
    double mem_fraction; /* default 0.5 */
    int threads;         /* CPU pool threads (0: one per CPU) */
    ws_isa isa;          /* CPU attention path (WS_ISA_AUTO) */
    int verify;          /* 1: check each layer's merged output against full attention */
    size_t host_limit, pinned_limit; /* region limits in bytes (0: what the run needs) */
    double pingpong_bytes;           /* the cost model's ping-pong half, the prefetch cap (0: its
                                      * default) */
    /* The CPU experts' weights: NULL or bf16 (gemm_bf16.h), int8 (gemm_int8.h: per-channel
     * int8, quantized from the bf16 weights at load; KTransformers' AMXINT8, llama.cpp's
     * q8_0 without its 32-weight blocks). Other formats are refused: no kernel here runs
     * them. With verify every int8 expert's output is checked against the reference. */
    const ws_wformat *cpu_expert_weights;
    /* Progress: called after each step with its record and the layer records of it. */
    void (*on_step)(void *ctx, const ws_run_step *st, const ws_run_layer *lay, int n_layers);
    void *on_step_ctx;
    /* Drift injection (tests, experiments): from decode step drift_step on, every measured
     * CPU attention time is multiplied by drift_factor (a scaled cost; 0 or 1: none). */
    int drift_step;
    double drift_factor;
    /* Tests: every duration the engine measures (CPU half, router, experts, its own work,
     * a reformat) is taken as the cost model's (the CPU half times the drift factor), so a
     * run's placements and timeline are deterministic: the simulator's. */
    int cpu_time_modeled;
} ws_engine_cfg;

void ws_engine_cfg_default(ws_engine_cfg *c);
/* The cost settings the engine's cost model is built on (defaults, the ping-pong half, the
 * CPU experts' bytes per weight): the one conversion, which validate's simulator and terms
 * take too. */
void ws_engine_cost_cfg(const ws_engine_cfg *c, ws_deploy_cfg *cc);

typedef struct ws_run_result {
    char gpu_label[200]; /* "modeled:<profile>" or "cuda:<device>" */
    char host[160];
    char layers_note[200]; /* how the depth was chosen */
    int layers, model_layers;
    int steps;                /* decode steps run (output tokens per sequence) */
    ws_run_step *step;        /* [steps] (owned) */
    ws_run_layer *lay;        /* [steps * layers] (owned) */
    double prefill_modeled_s; /* prefill compute: the chunks' schedules played, modeled */
    int prefill_gpu_chunks;   /* chunks whose CPU experts streamed to the GPU */
    int prefill_chunks;       /* prefill chunks in all */
    double prefill_wall_s;    /* writing the prompt KV into the regions, measured */
    double r_prefill;         /* the share prefill placed */
    double tokens_per_s;      /* batch x steps / decode timeline */
    double step_p50, step_p99;
    double decode_s; /* the decode timeline's span */
    double wall_s;   /* real time of the decode steps */
    /* share of the step time: CPU attention, experts (router included), the engine's own
     * work, CPU idle waiting on the GPU path */
    double share_cpu_attn, share_experts, share_overhead, share_gpu_wait;
    double verify_max_err; /* NAN without verify */
    uint64_t bytes_moved, bytes_written_cpu, bytes_written_xfer, flushes;
    uint64_t bytes_reformatted; /* migrate's reformats (ws_ikv_reformat), apart from moved */
    int cpu_pages, xfer_pages;
    int expert_slots;
    char expert_backend[96]; /* the bf16 expert GEMM's backend ("fp32", "onednn"; per m class
                              * "m<=1:fp32 m<=2:onednn" when they differ; int8: "onednn
                              * gemm:jit avx512_vnni", ws_gemm_int8_describe; "none": no MoE) */
    char expert_dtype[8];    /* "bf16" or "int8" */
    double expert_verify;    /* int8 with verify: the worst |y - reference| / bound of the
                              * experts' outputs (<= 1 passes); NAN otherwise */
    double A_final, B_final, A_model, B_model;
    char note[256]; /* region fallbacks (XFER not pinned), "" when none */
} ws_run_result;

/* 0 when the engine runs CPU experts in format f (NULL: bf16), else WS_EUNSUP saying why. */
int ws_engine_expert_format_ok(const ws_wformat *f, ws_err *err);

/* Runs the batch to the end. On failure nothing of *res is owned. */
int ws_engine_run(const ws_engine_cfg *cfg, ws_run_result *res, ws_err *err);
void ws_run_result_free(ws_run_result *res);

/* The depth that fits: layers whose KV, with the fixed buffers (experts, ping-pong),
 * takes at most `bytes`; 0 when not even one does. */
int ws_engine_layers_fit(const ws_engine_cfg *cfg, double bytes);

/* The backend the experts' GEMM chose (threads 1, m up to max_m) into buf. */
void ws_engine_experts_backend(int hidden, int inter, int max_m, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
