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
 * median and worst absolute error |ratio - 1| over the points that could be expressed.
 * Reading the points files is validate/fidelity_points.h's. */
#ifndef WS_FIDELITY_H
#define WS_FIDELITY_H

#include <stddef.h>

#include "fidelity_points.h"
#include "store.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The seed of a serving point's generated arrivals (Poisson). */
#define WS_FIDELITY_SEED 1
/* The work of one point's simulations, bounded so that none runs for minutes (about half a
 * minute each on the development machine): a step costs the simulator about the same per
 * slot of its batch (cfg.batch), plus a fixed part counted as STEP_SLOTS slots, summed over
 * every step of the point and stopped past SLOT_STEPS_MAX; before it starts, a run's
 * requests times its slots is checked against ADMIT_SLOTS_MAX, so a load that cannot pass
 * through its batch within the bound is refused without being run. */
#define WS_FIDELITY_SLOT_STEPS_MAX (1LL << 28)
#define WS_FIDELITY_STEP_SLOTS 256
#define WS_FIDELITY_ADMIT_SLOTS_MAX (1LL << 32)

/* The engines/ file (runtime/server.h) of a published engine name and version (NULL or ""
 * when not published): vllm is vllm-v1, or vllm-v0 for a version before 0.8 (V1 became
 * the default there); sglang, tensorrt-llm, ktransformers, llama.cpp and ik_llama.cpp their
 * own; any other name is taken as a file's name. NULL for an empty name. */
const char *ws_fidelity_engine_file(const char *engine, const char *version);

/* Fills predicted/ratio (or missing) of every end-to-end and serving point, profiles from
 * s. progress (may be NULL) is called after each point. A point that cannot run as written
 * is marked bad and the others still run: a profile of the wrong kind (a host's named as
 * the GPU, or the reverse) or otherwise refused for the point, a load the generator
 * refuses, a simulation past WS_FIDELITY_SLOT_STEPS_MAX or WS_FIDELITY_ADMIT_SLOTS_MAX.
 * Other errors (memory, the database) stop it. */
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

/* Operator point i of r as a point (its id, group, source and figures). */
void ws_fidelity_op_point(const ws_fid_report *r, size_t i, ws_fid_point *p);
/* Its group's name ("op GEMM", ...) into buf. */
const char *ws_fidelity_op_group(const ws_fid_op *o, char *buf, size_t cap);

/* Groups the points and then the operator points (in order of first appearance) and their
 * error statistics. */
int ws_fidelity_summarise(ws_fid_report *r, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
