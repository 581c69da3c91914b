/* plan_cmd: one deployment as a ready command line in a serving engine's own flags, so a plan
 * (sim/plan.h) can be launched as it was simulated. The flags are data: the "command" object
 * of the engine's file, engines/NAME.json (schema in engines/README.md), names the program,
 * the model arguments and the flag of each knob (GPU layers, CPU experts, KV type, token
 * budget, chunk, sequences, context, threads, sockets), each with the public reference it was
 * read in. A file with a "base" and no command of its own uses its base's.
 *
 * The placement follows ws_deploy_cfg (runtime/deploy.h) exactly. Only what the engine's flags
 * express is rendered: a knob with no flag, a weight or KV format the engine does not take, or
 * a placement its flags cannot make (llama.cpp cannot split one layer's experts between the
 * GPU and the CPU; vLLM and SGLang run no routed expert on the CPU) is refused with a one-line
 * reason, never approximated. A knob that only concerns the CPU's work (threads, sockets) is
 * dropped when nothing runs on the CPU and the engine has no flag for it.
 *
 * Assumes the model's dense layers lead (DeepSeek's first_k_dense_replace), as the deployment
 * table does. Model, weight and rule-file names in the line are placeholders ({model} and the
 * formats' names). Library code: errors through ws_err, no printing. */
#ifndef WS_SIM_PLAN_CMD_H
#define WS_SIM_PLAN_CMD_H

#include <stddef.h>

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_PLAN_CMD_LINE 2048 /* longest line rendered, NUL included */
#define WS_PLAN_CMD_FLAGS 32  /* most flags in one line */

typedef struct ws_plan_cmd_cfg {
    const char *model;                     /* model name, e.g. "qwen3-30b-a3b" (NULL: "MODEL") */
    int n_layers, n_moe_layers, n_experts; /* the model's */
    /* Weight formats as ws_wformat names them ("bf16", "q4_k_m", "fp8", "int4", ...) of the
     * GPU's parts and of the routed experts on the CPU; NULL: the model's dtype, taken as bf16
     * where the engine needs a name. */
    const char *w_gpu, *w_cpu_experts;
    const char *kv;   /* KV cache type: "bf16", "fp16", "fp8", "q8_0", "q4_0"; NULL: default */
    int n_cpu_moe;    /* ws_deploy_cfg's: > 0 the first N MoE layers keep routed experts on the
                       * CPU (gpu_experts of them on the GPU), the rest all on the GPU; 0 every
                       * MoE layer holds gpu_experts on the GPU, the rest on the CPU;
                       * WS_DEPLOY_NO_CPU_MOE (-1) all on the GPU */
    int gpu_experts;  /* routed experts per MoE layer on the GPU */
    int n_gpu_layers; /* > 0 and < n_layers: only the last N layers on the GPU; 0: all */
    /* 0: the engine's default (no flag). ctx is the engine's context flag as it defines it:
     * llama.cpp's -c and KTransformers' --cache_lens the KV tokens shared by all requests,
     * vLLM's, SGLang's and TensorRT-LLM's a request's longest context. */
    int chunk, token_budget, max_seqs, ctx;
    int cpu_threads, cpu_sockets; /* 0: default */
} ws_plan_cmd_cfg;

/* One flag of a rendered line and where it was read. */
typedef struct ws_plan_cmd_flag {
    char flag[64];   /* "--n-cpu-moe"; "" for a positional argument */
    char value[256]; /* "" for a switch */
    char ref[512];
} ws_plan_cmd_flag;

typedef struct ws_plan_cmd {
    char engine[64];             /* the engine file's name */
    char line[WS_PLAN_CMD_LINE]; /* the program and its flags, shell-quoted where needed */
    char program_ref[512];
    int n_flags;
    ws_plan_cmd_flag flags[WS_PLAN_CMD_FLAGS];
} ws_plan_cmd;

/* The line for cfg on engine `engine` (a name in engines/, or a path) into out, each flag with
 * its reference. WS_EINVAL with the reason when the engine cannot express cfg (or cfg is out
 * of range), WS_ENOTFOUND for an unknown engine, WS_EPARSE for a malformed command object,
 * WS_EUNSUP for an engine file with no command. */
int ws_plan_cmd_build(const char *engine, const ws_plan_cmd_cfg *c, ws_plan_cmd *out, ws_err *err);
/* 1 when the engine can express cfg with its flags; else 0 and, when why != NULL, a one-line
 * reason ("vllm-v1 runs no routed expert on the CPU"). err is set only when the engine cannot
 * be read or cfg is out of range (then why holds the same message). */
int ws_plan_cmd_supports(const char *engine, const ws_plan_cmd_cfg *c, char *why, size_t cap,
                         ws_err *err);
/* The command line into buf (ws_plan_cmd_build's errors; WS_EINVAL when cap is too small). */
int ws_plan_cmd_render(const char *engine, const ws_plan_cmd_cfg *c, char *buf, size_t cap,
                       ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
