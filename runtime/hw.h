/* hw: the loading every simulation and live run starts with -- a model by name or path, a GPU
 * and a host profile by name from the database -- into what the cost model (cost.h) and the
 * callers need: the model description, the cost model's hardware for the model's attention
 * kind and weights, and the host's core count.
 *
 * It checks that the GPU profile is a GPU's and the host profile a host's, and fills the
 * host's kv_reformat_bw from a datasheet when a calibrated host lacks it (store/profile.h
 * ws_profile_fill), so a calibrated host serves every policy. The profiles are read once here;
 * everything after works on the plain structs. Callers: `writescope sim`, `run`, `validate`
 * (cli/), the simulator's grid and planner (sim/grid.c, sim/plan.c) and the tests. */
#ifndef WS_RUNTIME_HW_H
#define WS_RUNTIME_HW_H

#include "cost.h"
#include "model.h"
#include "store.h"
#include "ws_dtype.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Loads model `model` (a shipped name or a path) and the profiles `gpu` and `host` from s,
 * and the cost model's hardware for the model's attention kind and weights, KV at kv;
 * *cores (if non-NULL): the host profile's cores (1 when it has none). */
int ws_hw_load(ws_store *s, const char *model, const char *gpu, const char *host, ws_dtype kv,
               ws_model *m, ws_cost_hw *hw, int *cores, ws_err *err);
/* The same for a model already loaded (and perhaps changed: another weight dtype). */
int ws_hw_load_model(ws_store *s, const ws_model *m, const char *gpu, const char *host,
                     ws_dtype kv, ws_cost_hw *hw, int *cores, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
