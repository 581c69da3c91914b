/* fidelity: the simulator against measurements others published (`writescope fidelity`).
 *
 * `validate` shows that the runtime and the simulator agree; this module says how far both
 * are from the world. Its points are data, never constants to tune to:
 *   - end-to-end points (fidelity/e2e.json, described in fidelity/README.md): a published
 *     decode tok/s, TPOT, TTFT, prefill tok/s or throughput of a MoE model on one GPU, with
 *     its source, hardware, model, weight formats, placement, batch and lengths. Each is run
 *     through the simulator (sim/serve.h) as a closed batch on the closest setup it can
 *     express: gpu-only when nothing is offloaded, ktrans (routed experts on the CPU, KV on
 *     the GPU) with the point's count of GPU experts when experts are offloaded, writescope
 *     when KV is. Where the setup needs a knob the model lacks (a quantized weight format,
 *     experts placed by layer, a missing profile or model), the point keeps `missing`
 *     naming it and no prediction;
 *   - serving points (fidelity/serving.json): a latency statistic or a throughput of an
 *     engine under a published load (all requests at once, Poisson arrivals at a rate, or a
 *     closed loop of clients), on one GPU with everything on it. Each runs gpu-only with the
 *     engine's scheduler, sequence cap and KV sizing, the metric read off the per-request
 *     results;
 *   - operator points: the rows of public operator profiles (Vidur's A100 Kineto CSVs),
 *     predicted by runtime/cost on a GPU profile (calib/import.h does the reading).
 * Every simulated point runs under its engine's file (engines/, runtime/server.h): its step
 * overhead, scheduler and token budget; ws_fidelity_engine_file maps a published engine
 * name to that file. For every point: predicted, published and their ratio; per group the
 * median and worst absolute error |ratio - 1| over the points that could be expressed. */
#ifndef WS_FIDELITY_H
#define WS_FIDELITY_H

#include <stddef.h>

#include "store.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The host profile of GPU-only points that publish none, and the output length standing in
 * for a decode rate published without one. */
#define WS_FIDELITY_HOST "xeon-gold-5318y"
#define WS_FIDELITY_OUTPUT 64
/* A decode rate published without its prompt: simulated at LO and HI tokens (the short
 * prompts of chat benchmarks); where the two differ by at most SPREAD, the rate at MID is
 * the prediction, else the prompt is missing. */
#define WS_FIDELITY_PROMPT_LO 128
#define WS_FIDELITY_PROMPT_MID 512
#define WS_FIDELITY_PROMPT_HI 2048
#define WS_FIDELITY_PROMPT_SPREAD 0.10
/* The seed of a serving point's generated arrivals (Poisson). */
#define WS_FIDELITY_SEED 1

/* A serving point's load as published. */
typedef struct ws_fid_workload {
    char arrival[16];  /* all_at_once (every request at t = 0), poisson (exponential gaps at
                        * rate_rps), closed (concurrency clients, each sending its next
                        * request when its previous one ends) */
    double rate_rps;   /* poisson; NAN when not published */
    int concurrency;   /* closed: clients; 0 when not published */
    int requests;      /* requests in all; 0 when not published */
    char lengths[16];  /* "fixed": every request has the point's prompt and output tokens */
    char dataset[96];
} ws_fid_workload;

typedef struct ws_fid_point {
    char id[96];
    char kind[8];     /* "op", "e2e" or "serving" */
    char group[48];   /* summary group: "e2e gpu-only", "e2e offload", "serving", "op GEMM", ... */
    char engine[48];  /* who measured: vllm, llama.cpp, Vidur (Kineto), ... */
    char engine_version[32]; /* as published ("" when not) */
    char engine_file[48];    /* the engines/ file it ran under, "" when none */
    char source[320]; /* repository and file, issue, or paper and table */
    char url[256];
    char gpu[64], host[64], model[64];     /* profile and model names used */
    char hw_desc[192];                     /* the hardware as published */
    char metric[24], unit[16];             /* decode_tok_s, tpot_s, ttft_s, prefill_tok_s,
                                            * throughput_tok_s; serving points: ttft_s,
                                            * tpot_s, itl_s, e2e_s (with stat),
                                            * output_throughput_tok_s,
                                            * total_throughput_tok_s, request_throughput_rps,
                                            * capacity_rps; op points: time_s */
    char stat[8];                          /* serving latencies: mean, median, p90, p99 */
    char weights_gpu[24], weights_cpu[24]; /* weight formats as published */
    char kv_dtype[16];
    char offload_what[24];                 /* none, experts, kv, experts+kv, layers */
    int quantized, offload;
    int count_prompt;    /* throughput_tok_s counts prompt + output tokens (else output) */
    int batch, prompt, output;  /* serving points: batch 0, prompt and output per request */
    ws_fid_workload load;       /* serving points */
    int prompt_lo, prompt_hi; /* prompt not published as a count but bounded by what is (the
                               * prompt's text, the chat before it): prompt_range; 0: none */
    int gpu_experts;     /* routed experts per layer on the GPU, -1: not given */
    int n_cpu_moe;       /* layers whose experts stay on the CPU, -1: not given */
    int n_gpu_layers;    /* layers on the GPU (llama.cpp -ngl), the rest wholly on the CPU;
                          * -1: not given */
    int all_experts_cpu; /* 1: every routed expert on the CPU */
    int cpu_sockets;     /* sockets the CPU's work ran on (placement.sockets_used), 0: all */
    int cpu_threads;     /* threads of the CPU's work (placement.cpu_infer_threads, else
                          * cpu_threads), 0: not given (every core) */
    int one_node;        /* 1: the CPU's weights in one socket's DRAM, every socket's cores
                          * reading them (placement.weights_one_node) */
    int prefill_mode;    /* where prefill's host-memory weights ran (placement.prefill, a
                          * ws_prefill_mode); auto when not given */
    char policy[24];     /* the simulator's policy used, "" when not run */
    double published, predicted, ratio; /* ratio = predicted / published; NAN when missing */
    char missing[192];                  /* the knob or data it lacks, "" when expressed */
    char assumed[256];                  /* what the setup took that the source does not say */
    double wall_s;                      /* host time its simulations took */
} ws_fid_point;

typedef struct ws_fid_group {
    char group[48];
    int n, expressed;
    double median_err, worst_err; /* |ratio - 1|, NAN when nothing is expressed */
    char worst_id[96];
    double wall_s; /* host time its points' simulations took */
} ws_fid_group;

typedef struct ws_fid_report {
    ws_fid_point *pt;
    size_t n, cap;
    ws_fid_group *g;
    size_t ng;
    char engine[48]; /* non-empty: every point runs under this engines/ file instead of its
                      * own (a what-if: these setups served by another engine) */
} ws_fid_report;

/* Appends the points of a JSON file (an array, or an object with "points"): end-to-end
 * points, and serving points (those whose "kind" is "serving"); WS_EPARSE / WS_EINVAL name
 * the file and the point. */
int ws_fidelity_load(const char *path, ws_fid_report *r, ws_err *err);

/* The engines/ file (runtime/server.h) of a published engine name and version (NULL or ""
 * when not published): vllm is vllm-v1, or vllm-v0 for a version before 0.8 (V1 became
 * the default there); sglang, tensorrt-llm, ktransformers, llama.cpp and ik_llama.cpp their
 * own; any other name is taken as a file's name. NULL for an empty name. */
const char *ws_fidelity_engine_file(const char *engine, const char *version);

/* Fills predicted/ratio (or missing) of every end-to-end and serving point, profiles from
 * s. progress (may be NULL) is called after each point. Errors other than a missing
 * profile, model or engine stop it. */
int ws_fidelity_predict(ws_store *s, ws_fid_report *r,
                        void (*progress)(void *ctx, size_t done, size_t n), void *ctx,
                        ws_err *err);

/* Appends the operator points: every row of the Vidur profiling files under `dir` (the
 * held-out rows only with heldout, for a GPU profile calibrated on the same files),
 * predicted on GPU profile `gpu` from s (a datasheet name gives the datasheet with its
 * newest calibration laid over it). Groups "op decode attention", "op prefill attention",
 * "op GEMM", "op elementwise"; metric time_s; source names the file and line. */
int ws_fidelity_add_ops(ws_store *s, const char *dir, const char *gpu, int heldout,
                        ws_fid_report *r, ws_err *err);

/* Appends one point (the report grows); WS_ENOMEM. */
int ws_fidelity_add(ws_fid_report *r, const ws_fid_point *p, ws_err *err);

/* Groups the points (in order of first appearance) and their error statistics. */
int ws_fidelity_summarise(ws_fid_report *r, ws_err *err);

void ws_fidelity_free(ws_fid_report *r);

#ifdef __cplusplus
}
#endif
#endif
