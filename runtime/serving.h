/* serving: the one serving configuration of a workload, which the simulator's serving loop
 * (sim/serve.h, sim_cfg) and the live engine (runtime/run_engine.h, ws_engine_cfg) both take:
 * the KV policy and its parameters, the most sequences running at once, the prefill chunk,
 * the D-window, where a prefill chunk's CPU experts run, how steps are filled (batching,
 * token budget), prefix caching, preemption and the seed, with one set of defaults
 * (ws_serving_default); an engine's file (server.h) sets them as that engine does. Each configuration embeds it with WS_SERVING_MEMBERS, so the
 * fields read as its own (cfg.batch) and the whole set copies as one value (cfg.srv): the
 * command line fills it once (cli/workload.h, cli_to_serving) and validate hands the engine's
 * to the simulator unchanged.
 * Pure functions, no I/O. */
#ifndef WS_SERVING_H
#define WS_SERVING_H

#include <stdint.h>

#include "cost.h"
#include "control.h"
#include "policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a step is filled (the engine's scheduler). */
typedef enum ws_batching {
    WS_BATCH_CHUNKED = 0,       /* every running decode, then prompt chunks (at most `chunk`
                                 * tokens of one prompt) up to the token budget, in admission
                                 * order (vLLM V1, Sarathi-Serve, TensorRT-LLM) */
    WS_BATCH_PREFILL_FIRST = 1, /* prompt chunks up to the budget while any prompt has tokens
                                 * left, else every running decode (vLLM V0, SGLang without
                                 * --enable-mixed-chunk) */
    WS_BATCH_SLOTS = 2,         /* llama.cpp's server: decodes then prompt tokens up to the
                                 * budget (n_batch), run as passes of `chunk` tokens (n_ubatch),
                                 * the decodes' tokens out after the last pass */
    WS_BATCH_SERIAL = 3,        /* one chunk of the oldest prompt with tokens left, else every
                                 * running decode: the live runtime's closed batch */
    WS_BATCH_KINDS
} ws_batching;
/* "chunked", "prefill-first", "slots", "serial"; ws_batching_parse: the kind of a name, -1 for none. */
const char *ws_batching_name(int kind);
int ws_batching_parse(const char *name);

/* What happens when the KV of the running sequences outgrows the memory. */
typedef enum ws_preempt {
    WS_PREEMPT_NONE = 0,      /* a request reserves its whole KV (prompt and output) when it is
                               * admitted, so nothing is ever preempted */
    WS_PREEMPT_RECOMPUTE = 1, /* KV grows a token at a time; when a step's tokens do not fit,
                               * the newest sequences are preempted: their KV freed, they wait
                               * at the queue's head and prefill prompt and output again (vLLM,
                               * SGLang's retraction) */
    WS_PREEMPT_KINDS
} ws_preempt;
const char *ws_preempt_name(int kind);
int ws_preempt_parse(const char *name);

/* The fields, declared once for ws_serving and for the structs that embed it. */
#define WS_SERVING_FIELDS                                                                          \
    ws_policy_kind policy; /* the KV policy (default writescope) */                                \
    ws_policy_params par;  /* its parameters: page_tokens P, r_static, r_max, feedback */          \
    int batch;             /* most sequences running at once (default 32) */                       \
    int chunk;             /* prefill chunk tokens (default 2048) */                               \
    int window;            /* D-window tokens W, a multiple of par.page_tokens (default 256) */    \
    int prefill_mode;      /* where a chunk's CPU experts run: ws_prefill_mode (default auto) */   \
    int prefill_gpu_tokens; /* > 0, under auto: a step of this many prompt tokens or more     \
                             * streams them to the GPU, a smaller one runs them on the CPU    \
                             * (an engine's threshold); 0: the cost model picks (default) */   \
    int batching;          /* ws_batching (default chunked) */                                     \
    int token_budget;      /* tokens of one step, decodes and prompt chunks (default 2048) */      \
    int prefix_cache;      /* 1: full prompt blocks already cached are not prefilled again */      \
    int preempt;           /* ws_preempt (default none) */                                         \
    uint64_t seed;         /* the run's seed (default 0) */

typedef struct ws_serving {
    WS_SERVING_FIELDS
} ws_serving;

/* Inside a configuration struct: every field by its name, and all of them as `srv` (the
 * two name the same bytes, as Linux's struct_group does). */
#define WS_SERVING_MEMBERS                                                                         \
    union {                                                                                        \
        ws_serving srv;                                                                            \
        struct {                                                                                   \
            WS_SERVING_FIELDS                                                                      \
        };                                                                                         \
    }

/* The defaults, the only place they are written. */
void ws_serving_default(ws_serving *s);

#ifdef __cplusplus
}
#endif
#endif
