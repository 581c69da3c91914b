/* workload: the options that sim, plan, run and validate (and the trace subcommands, for
 * formats and generators) share, declared once as option groups (cli/opts.h) over one
 * struct, cli_workload, that each of those commands embeds in its own options struct.
 *
 * A command includes the groups it takes with {CLI_GROUP(its_opts, w, cli_workload, G)}
 * and declares only its own options beside them; where it takes a shared option with
 * another range, default or help line (run's --batch is 1..4096, sim's 1..2^20), a TUNE
 * entry in its table says so. Values that need the library to interpret them (policy and
 * profile names, trace formats, generator specs) stay strings here; the library's structs
 * are filled from this one struct by cli/convert.h, one function per struct. */
#ifndef WS_CLI_WORKLOAD_H
#define WS_CLI_WORKLOAD_H

#include "cli.h"
#include "cost.h"
#include "opts.h"

#define CLI_DEFAULT_GPU "a100-40gb-pcie"    /* run's and validate's modeled GPU */
#define CLI_FALLBACK_HOST "xeon-gold-5318y" /* their host when this one has no calibration */

typedef struct cli_workload {
    const char *model, *host, *policy, *db; /* cli_workload_opts */
    int batch, prompt, output;
    long long seed;
    int json;
    int layers; /* cli_engine_opts */
    double r;
    const char *gpu; /* cli_live_opts */
    int threads;
    const char *trace; /* cli_sim_opts */
    int detail;        /* 0 step, 1 layer */
    int chunk, save;
    int prefill;        /* ws_prefill_mode: 0 auto, 1 cpu, 2 gpu */
    int prefill_gpu_tokens; /* --prefill-gpu-tokens, 0: not given */
    const char *format; /* cli_trace_opts */
    int skip_bad;
    cli_gen_args gen; /* cli_gen_opts, cli_closed_opts */
    const char *weights, *cpu_exp_w, *gpu_exp_w, *shared_w, *kv_dtype; /* cli_format_opts */
    int n_cpu_moe, cpu_threads, n_gpu_layers;
    int window; /* cli_window_opts */
    const char *engine; /* cli_serve_opts */
    int sched, token_budget, prefix, preempt;
    double host_gb; /* cli_host_opts */
    int cpu_sockets, one_node;
    /* sim's own (cmd_sim.c declares them): the share's clip, the SLOs, the GPU KV budget
     * (GiB), the GPU's routed experts */
    double r_max, slo_ttft, slo_tpot, kv_gb;
    int gpu_experts;
} cli_workload;

/* --model --host --policy --batch --prompt --output --seed --db --json: sim, plan, run,
 * validate. --batch, --prompt and --output have no default here (each command tunes them);
 * --policy defaults to all. */
extern const cli_optdef cli_workload_opts[];
/* --layers --r: sim, run, validate. */
extern const cli_optdef cli_engine_opts[];
/* --gpu cuda|modeled:<profile> --threads: run, validate. */
extern const cli_optdef cli_live_opts[];
/* --trace --detail --chunk --prefill --save: sim, plan (--detail has no default: sim plays layers, sim
 * grid and plan fold steps). */
extern const cli_optdef cli_sim_opts[];
/* --format --skip-bad: a trace file's reading (sim, plan, trace stats, trace convert). */
extern const cli_optdef cli_trace_opts[];
/* --arrivals --rate --cv --requests --prompt-dist --output-dist: a generator (sim, plan,
 * trace gen), as strings for cli_gen_parse. */
extern const cli_optdef cli_gen_opts[];
/* --clients --think: a generator's closed loop (sim, trace gen). */
extern const cli_optdef cli_closed_opts[];
/* The live engine's closed batch and policy as run and validate tune the shared options (a
 * table's own TUNE entries: a group cannot carry them): --batch 1..4096 (default 4),
 * --prompt 4096, --seed 1, a --policy that spills (writescope). */
#define CLI_LIVE_TUNES                                                                             \
    {"batch", CLI_TUNE, .lo = 1, .hi = 4096, .def = "4"},                                          \
    {"prompt", CLI_TUNE, .def = "4096"},                                                           \
    {"seed", CLI_TUNE, .lo = 0, .hi = 1 << 30, .def = "1"},                                        \
    {"policy", CLI_TUNE, .arg = "NAME", .def = "writescope",                                       \
     .help = "the KV policy: writescope, static, stream, cpu-attn or migrate (a single-state "     \
             "cache whose reformats really move pages); gpu-only and ktrans do not spill and "     \
             "do not run live"}
/* --engine --scheduler --token-budget --prefix-cache --preempt: how a server fills its steps
 * and keeps its KV (sim, plan, fidelity); --engine sets them as that engine does, the others
 * each override one value. */
extern const cli_optdef cli_serve_opts[];
/* --window: the D-window (sim, run). */
extern const cli_optdef cli_window_opts[];
/* --weights --gpu-expert-weights --shared-expert-weights --cpu-expert-weights --kv-dtype
 * --n-cpu-moe --n-gpu-layers --cpu-threads: what the model runs in and where its layers and
 * experts sit (sim, plan). */
extern const cli_optdef cli_format_opts[];
/* --cpu-expert-weights --kv-dtype alone: the formats the live engine takes (run; part of
 * cli_format_opts). */
extern const cli_optdef cli_cpu_format_opts[];
/* --host-mem --cpu-sockets --one-node-memory: the host's memory and sockets as a run uses
 * them (sim, plan). */
extern const cli_optdef cli_host_opts[];
/* Those options into cc (kept where not given): weight formats (every expert's, GPU, shared
 * and CPU, defaults to --weights), the KV dtype, n_cpu_moe (0 given: WS_DEPLOY_NO_CPU_MOE),
 * n_gpu_layers, cpu_threads. A usage error (one line naming the known formats or dtypes)
 * for a value it cannot express. */
int cli_formats_apply(const char *cmd, const cli_args *a, const cli_workload *w,
                      ws_deploy_cfg *cc);
/* --policy's value v: "all", or names separated by commas, into a mask of ws_policy_kind
 * bits; a usage error naming an unknown policy. (sim, plan) */
int cli_policy_list(const char *cmd, const char *v, unsigned *mask);
/* The options that only work on the CPU uses (--n-cpu-moe, --gpu-experts,
 * --cpu-expert-weights, --prefill, --cpu-threads, --cpu-sockets, --one-node-memory), given
 * while none of the policies in mask runs routed experts on the CPU (gpu-only): a usage error
 * naming the option and `policy` (--policy's text), unless --n-gpu-layers puts layers on the
 * CPU, which use all but the first two. */
int cli_policy_opts(const char *cmd, const cli_args *a, const char *policy, unsigned mask);
/* --NAME's value v as a weight format into *out (v NULL: *out kept); a usage error naming
 * the known formats. */
int cli_format_opt(const char *cmd, const char *name, const char *v, const ws_wformat **out);

#endif
