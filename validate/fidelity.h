/* fidelity: the simulator against measurements others published (`writescope fidelity`).
 *
 * `validate` shows that the runtime and the simulator agree; this module says how far both
 * are from the world. Its points are data, never constants to tune to:
 *   - end-to-end points (fidelity/e2e.json, described in fidelity/README.md): a published
 *     decode tok/s, TPOT, TTFT, prefill tok/s or throughput of a MoE model on one GPU, with
 *     its source, hardware, model, weight formats, placement, batch and lengths. Each is run
 *     through the simulator (sim/serve.h) on the closest setup it can express: gpu-only when
 *     nothing is offloaded, ktrans (routed experts on the CPU, KV on the GPU) with the
 *     point's count of GPU experts when experts are offloaded, writescope when KV is.
 *     Where the setup needs a knob the model lacks (a quantized weight format, experts
 *     placed by layer, a missing profile or model), the point keeps `missing` naming it
 *     and no prediction;
 *   - operator points: the rows of public operator profiles (Vidur's A100 Kineto CSVs),
 *     predicted by runtime/cost on a GPU profile (calib/import.h does the reading).
 * For every point: predicted, published and their ratio; per group the median and worst
 * absolute error |ratio - 1| over the points that could be expressed. */
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

typedef struct ws_fid_point {
    char id[96];
    char kind[4];     /* "op" or "e2e" */
    char group[48];   /* summary group: "e2e gpu-only", "e2e offload", "op decode-attn", ... */
    char engine[48];  /* who measured: vLLM, llama.cpp, Vidur (Kineto), ... */
    char source[320]; /* repository and file, issue, or paper and table */
    char url[256];
    char gpu[64], host[64], model[64];     /* profile and model names used */
    char hw_desc[192];                     /* the hardware as published */
    char metric[24], unit[16];             /* decode_tok_s, tpot_s, ttft_s, prefill_tok_s,
                                            * throughput_tok_s; op points: time_s */
    char weights_gpu[24], weights_cpu[24]; /* weight formats as published */
    char kv_dtype[16];
    char offload_what[24];                 /* none, experts, kv, experts+kv, layers */
    int quantized, offload;
    int count_prompt;    /* throughput_tok_s counts prompt + output tokens (else output) */
    int batch, prompt, output;
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
} ws_fid_point;

typedef struct ws_fid_group {
    char group[48];
    int n, expressed;
    double median_err, worst_err; /* |ratio - 1|, NAN when nothing is expressed */
    char worst_id[96];
} ws_fid_group;

typedef struct ws_fid_report {
    ws_fid_point *pt;
    size_t n, cap;
    ws_fid_group *g;
    size_t ng;
} ws_fid_report;

/* Appends the end-to-end points of a JSON file (an array, or an object with "points");
 * WS_EPARSE / WS_EINVAL name the file and the point. */
int ws_fidelity_load_e2e(const char *path, ws_fid_report *r, ws_err *err);

/* Fills predicted/ratio (or missing) of every e2e point, profiles from s. progress (may be
 * NULL) is called after each point. Errors other than a missing profile or model stop it. */
int ws_fidelity_predict_e2e(ws_store *s, ws_fid_report *r,
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
