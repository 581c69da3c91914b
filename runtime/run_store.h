/* run_store: a live run (run_engine.h) into the database as the rows of store/rundb.h -- the
 * run with its settings, one row per decode step and one per (step, layer) -- in one
 * transaction. One mapping for every caller that stores a run (`writescope run --db`,
 * `writescope validate`): GPU times are labelled modeled unless the run's GPU label is
 * cuda:<device>; the CPU's phases of a step are columns of its row. */
#ifndef WS_RUN_STORE_H
#define WS_RUN_STORE_H

#include "run_engine.h"
#include "steprow.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A layer of a run as the one layer row (store/steprow.h; a step is one already): what
 * the database, the CSV and the JSON of a run hold. */
void ws_run_layer_row(const ws_run_layer *x, ws_layer_row *out);

/* Stores run r of configuration c made by `origin` ("run", the default when NULL, or
 * "validate"); *id (may be NULL) gets its run_runs id. */
int ws_run_store(ws_store *s, const ws_engine_cfg *c, const ws_run_result *r, const char *origin,
                 long long *id, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
