/* fidelity_points: the published points of `writescope fidelity` read from their JSON
 * documents (fidelity/e2e.json, fidelity/serving.json, a user's --points file; the format is
 * fidelity/README.md), and the report they are collected in.
 *
 * Reading runs nothing: it checks every key a point gives against its type and range,
 * refusing the document with one line (the file, the point, the key and what it must be),
 * and fills the defaults prediction relies on. It is apart from the prediction
 * (validate/fidelity.h) so that the reader can be called, tested and fuzzed
 * (fuzz/fuzz_fidelity_points.c) without the simulator. What it guarantees:
 *   - an id is a non-empty identifier without control characters, unique in the report;
 *   - every string that names something (a profile, a model, a metric, a format) fits its
 *     field and is refused when it does not; descriptive text (a source, a description) is
 *     cut at a character boundary;
 *   - counts are whole numbers within the bounds below, published a positive normal number;
 *   - a point simulates at most WS_FIDELITY_TOKENS_MAX tokens per simulation. */
#ifndef WS_FIDELITY_POINTS_H
#define WS_FIDELITY_POINTS_H

#include <stddef.h>

#include "serve.h"
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

/* Bounds of a point, those of `writescope sim` where it has one. Prompt and output tokens
 * per request are bounded by WS_TRACE_TOKENS_MAX (traces/trace.h), as generated requests
 * are. */
#define WS_FIDELITY_BATCH_MAX SIM_BATCH_MAX /* batch: sim's --batch (sim/serve.h) */
#define WS_FIDELITY_CLIENTS_MAX 1000000     /* workload.concurrency: the generator's clients
                                             * (traces/trace_gen.c, sim's --clients) */
#define WS_FIDELITY_RATE_MAX 1e9            /* workload.rate_rps, requests/s: the generator's
                                             * (traces/trace_gen.c, sim's --rate) */
#define WS_FIDELITY_TOKENS_MAX (1 << 24)    /* batch (or num_requests) x (prompt + output)
                                             * of one simulation */
#define WS_FIDELITY_PLACEMENT_MAX (1 << 20) /* placement counts: experts, layers, threads */
#define WS_FIDELITY_POINTS_MAX (1 << 16)    /* points of one report */

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
    int chunk;           /* prompt tokens of one step the run used (placement.chunk: SGLang's
                          * --chunked-prefill-size, llama.cpp's -ub), 0: not given */
    int prefill_gpu_tokens; /* the run's prefill threshold (placement.prefill_gpu_tokens:
                             * kt-kernel's --kt-gpu-prefill-token-threshold), 0: the engine's */
    char policy[24];     /* the simulator's policy used, "" when not run */
    double published, predicted, ratio; /* ratio = predicted / published; NAN when missing */
    char missing[192];                  /* the knob or data it lacks, "" when expressed */
    char bad[192];                      /* why the point as written cannot run (a GPU named by
                                         * a host's profile, a simulation past its bound), ""
                                         * when it can; no ratio then */
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

/* An operator point, kept compact (a profiling file may hold a million rows): the row's
 * place among the rows read, its operation (ws_vidur_op), line and batch, the published and
 * predicted times. ws_fidelity_op_point (fidelity.h) expands one into a point. */
typedef struct ws_fid_op {
    int row, op, line, batch;
    double published, predicted;
} ws_fid_op;

typedef struct ws_fid_report {
    ws_fid_point *pt;
    size_t n, cap;
    ws_fid_op *op; /* operator points (ws_fidelity_add_ops) */
    size_t n_op, cap_op;
    char op_dir[512], op_gpu[64]; /* where they were read, the GPU profile they ran on */
    ws_fid_group *g;
    size_t ng;
    char engine[48]; /* non-empty: every point runs under this engines/ file instead of its
                      * own (a what-if: these setups served by another engine) */
    long long slot_steps_max; /* the work bound of each point's simulations (fidelity.h);
                               * 0: WS_FIDELITY_SLOT_STEPS_MAX */
} ws_fid_report;

/* Appends the points of a JSON document of len bytes (an array, or an object with
 * "points"): end-to-end points, and serving points (those whose "kind" is "serving");
 * `name` is the document's name in messages. WS_EPARSE / WS_EINVAL name it and the point;
 * on an error r keeps the points it had. */
int ws_fidelity_parse(const char *text, size_t len, const char *name, ws_fid_report *r,
                      ws_err *err);

/* The same for the file at path (WS_EIO: "path: cannot open: reason"). */
int ws_fidelity_load(const char *path, ws_fid_report *r, ws_err *err);

/* Appends one point (the report grows); WS_ENOMEM. */
int ws_fidelity_add(ws_fid_report *r, const ws_fid_point *p, ws_err *err);

void ws_fidelity_free(ws_fid_report *r);

#ifdef __cplusplus
}
#endif
#endif
