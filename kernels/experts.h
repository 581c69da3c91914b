/* experts: the routed experts of one MoE phase as the engine runs them, one pool task per
 * hit expert, each a single-threaded FFN (gemm_bf16.h, gemm_int8.h). BLAS or OpenMP threads
 * of their own would keep spinning after the GEMM and take a core from the next layer's CPU
 * attention (docs/notes/runtime-engine.md), so the parallelism is across experts, never
 * inside one. The live engine's MoE phase and the calibrator's expert sweep both call it, so
 * the rates a calibration fits are those of the code the runtime runs.
 *
 * Expert i (weights ex[i]) runs on rows off[i] .. off[i+1]-1 of xb [rows x H], into the same
 * rows of yb. A bf16 shape class not yet probed (its backend is chosen by timing each one)
 * is run first on the calling thread, alone, so concurrent probes neither skew each other's
 * timings nor race to record a choice. */
#ifndef WS_EXPERTS_H
#define WS_EXPERTS_H

#include "pool.h"
#include "ws_err.h"

struct ws_expert_bf16; /* gemm_bf16.h */
struct ws_expert_int8; /* gemm_int8.h */

int ws_experts_run_bf16(ws_pool *pool, const struct ws_expert_bf16 *const *ex, int n,
                        const int *off, const float *xb, float *yb, ws_err *err);
/* The same with int8 experts (ws_expert_ffn_int8, single-threaded per task). */
int ws_experts_run_int8(ws_pool *pool, const struct ws_expert_int8 *const *ex, int n,
                        const int *off, const float *xb, float *yb, ws_err *err);

#endif
