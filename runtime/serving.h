/* serving: the one serving configuration of a workload, which the simulator's serving loop
 * (sim/serve.h, sim_cfg) and the live engine (runtime/run_engine.h, ws_engine_cfg) both take:
 * the KV policy and its parameters, the most sequences running at once, the prefill chunk,
 * the D-window, where a prefill chunk's CPU experts run, and the seed, with one set of
 * defaults (ws_serving_default). Each configuration embeds it with WS_SERVING_MEMBERS, so the
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

/* The fields, declared once for ws_serving and for the structs that embed it. */
#define WS_SERVING_FIELDS                                                                          \
    ws_policy_kind policy; /* the KV policy (default writescope) */                                \
    ws_policy_params par;  /* its parameters: page_tokens P, r_static, r_max, feedback */          \
    int batch;             /* most sequences running at once (default 32) */                       \
    int chunk;             /* prefill chunk tokens (default 2048) */                               \
    int window;            /* D-window tokens W, a multiple of par.page_tokens (default 256) */    \
    int prefill_mode;      /* where a chunk's CPU experts run: ws_prefill_mode (default auto) */   \
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
