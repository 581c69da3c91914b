/* convert: the command line's values into the library's structs, one function per struct,
 * as llama.cpp's common_model_params_to_llama turns its common_params into llama's: the
 * serving settings (runtime/serving.h), the cost settings (runtime/cost.h), the live engine's
 * configuration (runtime/run_engine.h) and the simulator's (sim/serve.h). `sim`, `run` and
 * `validate` parse their options into one cli_workload (workload.h) and convert it here, so
 * a setting that two commands share is turned into the library's once. An option the
 * command does not declare leaves the library's default. Each returns 0, or the exit code
 * of the usage error (or failure) it printed. */
#ifndef WS_CLI_CONVERT_H
#define WS_CLI_CONVERT_H

#include "cost.h"
#include "opts.h"
#include "run_engine.h"
#include "serve.h"
#include "server.h"
#include "serving.h"
#include "workload.h"

/* The policy, its share and clip, the batch (where given), the chunk, the window (a
 * multiple of the page), the prefill mode and the seed. */
int cli_to_serving(const char *cmd, const cli_args *a, const cli_workload *w, ws_serving *s);
/* The GPU's routed experts, the sockets of the CPU's work, the weight formats and the KV
 * dtype (cli_formats_apply), over the cost model's defaults. */
int cli_to_cost_cfg(const char *cmd, const cli_args *a, const cli_workload *w, ws_deploy_cfg *cc);
/* The live engine's closed batch, depth, threads, a policy that spills, --gpu (cuda or
 * modeled:<profile>; *gpu_prof: the profile of the cost model's GPU) and the formats it
 * runs (bf16 KV; bf16 or int8 CPU experts); model, hardware and callbacks are the caller's. */
int cli_to_engine_cfg(const char *cmd, const cli_args *a, const cli_workload *w, ws_engine_cfg *c,
                      const char **gpu_prof);
/* The simulator's: serving (the policy left for the caller to set per run: cli_policy_list;
 * a closed batch runs 4 at once unless --batch says), layers, detail, the SLOs and the
 * memory limits; callbacks and keep_* are the caller's. */
int cli_to_sim_cfg(const char *cmd, const cli_args *a, const cli_workload *w, sim_cfg *c);
/* --engine NAME (where the command takes it and it was given), once the model and the
 * hardware are known: the engine's values over c's serving settings, its KV memory and cc's
 * step overhead, then the serving flags given again over them; *e the engine as read. */
int cli_serve_engine(const char *cmd, const cli_args *a, const cli_workload *w, const ws_hw *hw,
                     const ws_model *m, sim_cfg *c, ws_deploy_cfg *cc, ws_server *e);

#endif
