/* workload: the shared option groups (see workload.h). */
#include "workload.h"

#include <string.h>
#include <strings.h>

#include "policy.h"
#include "pool.h"
#include "serve.h"

#define W cli_workload

const cli_optdef cli_workload_opts[] = {
    {"model", CLI_STR(W, model), .arg = "NAME",
     .help = "the model: a shipped one (models/NAME.json, `writescope model list`) or the "
             "path of a Hugging Face config.json"},
    {"host", CLI_STR(W, host), .arg = "PROFILE",
     .help = "the host's hardware profile: a datasheet name (xeon-gold-5318y), "
             "host:<fingerprint>, or this: this machine's newest calibration"},
    {"policy", CLI_STR(W, policy), .arg = "NAME[,NAME...]|all", .def = "all",
     .help = "the KV policies, comma-separated: writescope, gpu-only, ktrans, stream, cpu-attn, "
             "static or migrate; all: each of them"},
    {"batch", CLI_INT(W, batch), .arg = "B", .lo = 1, .hi = SIM_BATCH_MAX,
     .help = "the most sequences running at once"},
    {"prompt", CLI_INT(W, prompt), .arg = "N", .lo = 1, .hi = 1 << 24,
     .help = "prompt tokens of each request of a closed batch"},
    {"output", CLI_INT(W, output), .arg = "M", .lo = 1, .hi = 1 << 24,
     .help = "output tokens (decode steps) of each request of a closed batch"},
    {"seed", CLI_LL(W, seed), .arg = "S", .lo = 0, .hi = 1LL << 62, .def = "0",
     .err = "--seed needs a non-negative integer, not '%s'",
     .help = "the random seed: the same seed gives the same figures"},
    {"db", CLI_STR(W, db), .arg = "PATH",
     .help = "the database: profiles are read from it and results stored in it (created or "
             "migrated as needed)"},
    {"json", CLI_FLAG(W, json), .help = "machine-readable output: one JSON document on stdout"},
    {0}};

const cli_optdef cli_engine_opts[] = {
    {"layers", CLI_INT(W, layers), .arg = "K", .lo = 1, .hi = 100000,
     .help = "only the model's first K layers; by default all"},
    {"r", CLI_DOUBLE(W, r), .arg = "R", .lo = 0, .hi = 1, .def = "0.5",
     .help = "the static policy's share of the KV on the CPU"},
    {0}};

const cli_optdef cli_live_opts[] = {
    {"gpu", CLI_STR(W, gpu), .arg = "cuda|modeled:<profile>", .def = "modeled:" CLI_DEFAULT_GPU,
     .help = "modeled:<profile>: the GPU's work and the transfers timed by the cost model on "
             "their own clocks; cuda[:<profile>]: the GPU half on this machine's CUDA device, "
             "the profile giving the cost model's predictions"},
    {"threads", CLI_INT(W, threads), .arg = "T", .lo = 1, .hi = WS_POOL_MAX_THREADS,
     .help = "worker threads of the CPU kernels; by default one per logical CPU"},
    {0}};

const cli_optdef cli_sim_opts[] = {
    {"trace", CLI_STR(W, trace), .arg = "FILE",
     .help = "the workload from a request trace (ours, azure, mooncake, burstgpt, vidur; "
             "detected, or --format)"},
    {"detail", CLI_ENUM(W, detail), .names = (const char *const[]){"step", "layer", NULL},
     .help = "layer plays every layer as operations; step folds the identical layers (the same "
             "results where the pipeline is periodic, much faster)"},
    {"chunk", CLI_INT(W, chunk), .arg = "T", .lo = 1, .hi = 1 << 24, .def = "2048",
     .help = "the prefill chunk size: prompt tokens per prefill step (llama.cpp's -ub/"
             "--ubatch-size, SGLang's --chunked-prefill-size)"},
    {"prefill", CLI_ENUM(W, prefill), .names = (const char *const[]){"auto", "cpu", "gpu", NULL},
     .def = "auto", .err = "--prefill must be auto, cpu or gpu",
     .help = "where a prefill chunk's CPU-resident routed experts (and the layers wholly on "
             "the CPU, --n-gpu-layers) run: cpu (as at decode), gpu (their weights, and a CPU "
             "layer's KV, streamed over PCIe, one pass per layer and chunk, pipelined with "
             "the previous layer's compute: llama.cpp offloads a matrix product to the GPU "
             "once the batch reaches GGML_OP_OFFLOAD_MIN_BATCH, 32 tokens, per -ub/"
             "--ubatch-size, unless --no-op-offload), or auto: per chunk, the cheaper by the "
             "cost model"},
    {"prefill-gpu-tokens", CLI_INT(W, prefill_gpu_tokens), .arg = "T", .lo = 1, .hi = 1 << 24,
     .help = "with --prefill auto: a step of T prompt tokens or more streams (gpu), a smaller "
             "one runs on the CPU, as an engine's threshold does (KTransformers' kt-kernel: "
             "--kt-gpu-prefill-token-threshold); by default the engine's, else the cost "
             "model's choice"},
    {"save", CLI_FLAG(W, save),
     .help = "store as --db does, in the default database ($WRITESCOPE_DB, else "
             "results/writescope.db)"},
    {0}};

const cli_optdef cli_serve_opts[] = {
    {"engine", CLI_STR(W, engine), .arg = "NAME",
     .help = "serve as this engine does (engines/NAME.json: vllm-v0, vllm-v1, sglang, "
             "llama.cpp, ik_llama.cpp, ktransformers, kt-kernel, tensorrt-llm): its scheduler, token "
             "budget, sequence cap, chunk, prefix caching, KV memory, preemption and step "
             "overhead, each from a public reference; the flags below and --batch, --chunk, "
             "--gpu-kv-gb override one value each"},
    {"scheduler", CLI_ENUM(W, sched),
     .names = (const char *const[]){"chunked", "prefill-first", "slots", "serial", NULL},
     .def = "chunked", .err = "--scheduler must be chunked, prefill-first, slots or serial",
     .help = "how a step is filled: chunked (every running decode, then prompt chunks up to "
             "--token-budget: vLLM V1, Sarathi-Serve, TensorRT-LLM), prefill-first (prompt "
             "chunks up to the budget while any prompt has tokens left, else the decodes: vLLM "
             "V0, SGLang), slots (llama.cpp's server: decodes and prompt tokens up to the "
             "budget, n_batch, run as passes of --chunk, n_ubatch), serial (one chunk of the "
             "oldest prompt, else the decodes: the live runtime's)"},
    {"token-budget", CLI_INT(W, token_budget), .arg = "T", .lo = 1, .hi = 1 << 24,
     .def = "2048",
     .help = "tokens of one step, decodes and prompt chunks together (vLLM's "
             "--max-num-batched-tokens, SGLang's --chunked-prefill-size, llama.cpp's -b)"},
    {"prefix-cache", CLI_ENUM(W, prefix), .names = (const char *const[]){"off", "on", NULL},
     .def = "off", .err = "--prefix-cache must be on or off",
     .help = "on: a prompt's leading blocks already cached (a trace's block hashes) are not "
             "prefilled again; the cache keeps unused blocks until their memory is needed "
             "(least recently used first)"},
    {"preempt", CLI_ENUM(W, preempt), .names = (const char *const[]){"none", "recompute", NULL},
     .def = "none", .err = "--preempt must be none or recompute",
     .help = "none: a request reserves its whole KV when admitted; recompute: KV grows a token "
             "at a time and, when it runs out, the newest sequences give theirs back and "
             "prefill again later (vLLM, SGLang)"},
    {0}};

const cli_optdef cli_trace_opts[] = {
    {"format", CLI_STR(W, format), .arg = "F",
     .help = "the trace's format: ours, azure, mooncake, burstgpt or vidur (default: detected "
             "from the first line)"},
    {"skip-bad", CLI_FLAG(W, skip_bad),
     .help = "count and skip malformed rows instead of stopping at the first (the first one is "
             "shown); BurstGPT's failed requests (0 response tokens) are always skipped and "
             "counted"},
    {0}};

const cli_optdef cli_gen_opts[] = {
    {"arrivals", CLI_STR(W, gen.arrivals), .arg = "poisson|gamma|closed",
     .help = "generated requests: poisson (exponential gaps of mean 1/R), gamma (gamma gaps "
             "of mean 1/R and coefficient of variation C), closed (a loop of --clients)"},
    {"rate", CLI_STR(W, gen.rate), .arg = "R", .help = "requests/s of poisson and gamma arrivals"},
    {"cv", CLI_STR(W, gen.cv), .arg = "C",
     .help = "gamma's coefficient of variation (1 is Poisson, above 1 burstier)"},
    {"requests", CLI_STR(W, gen.requests), .arg = "K", .help = "the number of requests"},
    {"prompt-dist", CLI_STR(W, gen.pdist), .arg = "SPEC",
     .help = "prompt lengths: fixed:N, uniform:LO:HI, lognormal:MEAN:SIGMA or zipf:S:MAX "
             "(tokens; drawn values rounded and clipped to 1..16777216)"},
    {"output-dist", CLI_STR(W, gen.odist), .arg = "SPEC",
     .help = "output lengths, as --prompt-dist"},
    {"shared-prefix", CLI_STR(W, gen.shared), .arg = "T",
     .help = "every prompt starts with the same T tokens (a system prompt): its whole 512-token "
             "blocks hash alike, for --prefix-cache"},
    {0}};

const cli_optdef cli_closed_opts[] = {
    {"clients", CLI_STR(W, gen.clients), .arg = "C",
     .help = "closed arrivals: C clients, each sending its next request --think T after its "
             "previous one ends"},
    {"think", CLI_STR(W, gen.think), .arg = "T",
     .help = "the think time: S or exp:S (exponential of mean S seconds), or fixed:S; "
             "by default 0"},
    {0}};

const cli_optdef cli_window_opts[] = {
    {"window", CLI_INT(W, window), .arg = "W", .lo = 1, .hi = 1 << 24, .def = "256",
     .help = "the newest tokens of each sequence kept on the GPU, a multiple of the page"},
    {0}};

static const cli_optdef k_gpu_format_opts[] = {
    {"weights", CLI_STR(W, weights), .arg = "FMT",
     .help = "the format of the weights (attention, dense MLPs, and the default of every "
             "expert's: the GPU's, the shared and the CPU's routed experts): bf16, fp16, fp8, "
             "int8, int4 (AWQ/GPTQ), mxfp4 or a GGUF type (q8_0, q6_k, q5_k_m, q4_k_m, q4_0, "
             "q3_k_m, q2_k ...); default the model's dtype. llama.cpp: the GGUF file's type; "
             "vLLM: --quantization"},
    {"gpu-expert-weights", CLI_STR(W, gpu_exp_w), .arg = "FMT",
     .help = "the GPU-resident routed experts' format (default --weights); llama.cpp: the "
             "GGUF's type of the exps tensors left on the GPU"},
    {"shared-expert-weights", CLI_STR(W, shared_w), .arg = "FMT",
     .help = "the shared experts' format (default --weights)"},
    {0}};

const cli_optdef cli_cpu_format_opts[] = {
    {"cpu-expert-weights", CLI_STR(W, cpu_exp_w), .arg = "FMT",
     .help = "the CPU-resident routed experts' format (default --weights where the command "
             "takes it, else the model's dtype); "
             "KTransformers: the CPU expert type (AMXINT8 = int8, AMXINT4 = int4, a GGUF "
             "type); llama.cpp -ot exps=CPU keeps the GGUF's type. Its compute picks the "
             "CPU's peak (int8: AMX, AVX512-VNNI; bf16: AMX, AVX512-BF16)"},
    {"kv-dtype", CLI_STR(W, kv_dtype), .arg = "bf16|fp16|fp8|q8_0|q4_0",
     .help = "the KV cache's element type (default bf16); vLLM: --kv-cache-dtype fp8; "
             "llama.cpp: --cache-type-k/--cache-type-v (q8_0, q4_0: their block bytes, "
             "attended at bf16's rates); KTransformers --cache_q4: q4_0"},
    {0}};

static const cli_optdef k_placement_opts[] = {
    {"n-cpu-moe", CLI_INT(W, n_cpu_moe), .arg = "N", .lo = 0, .hi = 1 << 20,
     .help = "the routed experts of the first N MoE layers stay on the CPU, the rest on the "
             "GPU (llama.cpp --n-cpu-moe N; 0: none, every routed expert on the GPU); the CPU "
             "layers keep --gpu-experts of theirs on the GPU"},
    {"n-gpu-layers", CLI_INT(W, n_gpu_layers), .arg = "N", .lo = 1, .hi = 1 << 20,
     .help = "only the last N layers run on the GPU, the others wholly on the CPU: their "
             "weights and KV in host DRAM, their attention, projections and experts on its "
             "cores (llama.cpp -ngl N; N >= the model's layers: all on the GPU, the default). "
             "With a policy that keeps experts on the CPU, the GPU layers follow --gpu-experts"},
    {"cpu-threads", CLI_INT(W, cpu_threads), .arg = "N", .lo = 1, .hi = 1 << 20,
     .help = "threads that run the CPU's work (KTransformers --cpu_infer, llama.cpp -t), at "
             "most one per core of the sockets used (more is refused): their share of the "
             "cores' flop/s, and DRAM bandwidth up to N x the host's one-core bandwidth "
             "(calibrated membw_read_1t, or the profile's core_bw); default every core"},
    {0}};

const cli_optdef cli_host_opts[] = {
    {"host-mem", CLI_DOUBLE(W, host_gb), .arg = "G", .lo = 0.001, .hi = 1e7,
     .help = "host DRAM in GiB for the CPU's routed experts and the spilled KV (default: the "
             "host profile's mem_bytes); experts that do not fit make every request OOM"},
    {"cpu-sockets", CLI_INT(W, cpu_sockets), .arg = "N", .lo = 0, .hi = 64, .def = "0",
     .help = "sockets whose cores and DRAM run the CPU's work, each with its own copy of the "
             "CPU experts (KTransformers' USE_NUMA=1; numactl --cpunodebind); 0: all sockets "
             "as one pooled memory with one copy"},
    {"one-node-memory", CLI_FLAG(W, one_node),
     .help = "with --cpu-sockets 0 on a host of more than one socket: the CPU's weights and KV "
             "in one socket's DRAM, read by every socket's cores at that socket's bandwidth "
             "(llama.cpp without --numa: its mmap'd page cache sits on the node that read the "
             "file)"},
    {0}};

/* The three parts in the order --help lists them; each over cli_workload, as this table. */
const cli_optdef cli_format_opts[] = {{.type = CLI_OPT_GROUP, .group = k_gpu_format_opts},
                                      {.type = CLI_OPT_GROUP, .group = cli_cpu_format_opts},
                                      {.type = CLI_OPT_GROUP, .group = k_placement_opts},
                                      {0}};

int cli_format_opt(const char *cmd, const char *opt, const char *v, const ws_wformat **out)
{
    if (!v)
        return 0;
    ws_err err = {0};
    if (ws_wformat_parse(v, out, &err))
        return cli_usage_error(cmd, "--%s: %s", opt, err.msg);
    return 0;
}

int cli_formats_apply(const char *cmd, const cli_args *a, const cli_workload *w,
                      ws_deploy_cfg *cc)
{
    int rc;
    if ((rc = cli_format_opt(cmd, "weights", w->weights, &cc->w_gpu)))
        return rc;
    /* every format a CPU can run: a GGUF file's experts are its type on either device */
    cc->w_gpu_experts = cc->w_shared = cc->w_cpu_experts = cc->w_gpu;
    if ((rc = cli_format_opt(cmd, "gpu-expert-weights", w->gpu_exp_w, &cc->w_gpu_experts)) ||
        (rc = cli_format_opt(cmd, "shared-expert-weights", w->shared_w, &cc->w_shared)) ||
        (rc = cli_format_opt(cmd, "cpu-expert-weights", w->cpu_exp_w, &cc->w_cpu_experts)))
        return rc;
    if (w->kv_dtype) {
        ws_dtype d;
        const ws_wformat *f = ws_wformat_find(w->kv_dtype);
        if (f && (!strcmp(f->name, "q8_0") || !strcmp(f->name, "q4_0"))) {
            cc->w_kv = f; /* the attention runs at bf16 over the dequantized blocks */
            cc->kv_dtype = WS_DT_BF16;
        } else if (ws_dtype_parse(w->kv_dtype, &d) || d == WS_DT_FP32) {
            return cli_usage_error(cmd, "--kv-dtype '%s': not one of bf16, fp16, fp8, q8_0, q4_0",
                                   w->kv_dtype);
        } else {
            cc->kv_dtype = d;
            cc->w_kv = NULL;
        }
    }
    if (cli_declared(a, "n-cpu-moe") && cli_given(a, "n-cpu-moe"))
        cc->n_cpu_moe = w->n_cpu_moe > 0 ? w->n_cpu_moe : WS_DEPLOY_NO_CPU_MOE;
    if (w->cpu_threads > 0)
        cc->cpu_threads = w->cpu_threads;
    if (w->n_gpu_layers > 0)
        cc->n_gpu_layers = w->n_gpu_layers;
    return 0;
}

int cli_policy_list(const char *cmd, const char *v, unsigned *mask)
{
    *mask = 0;
    if (!strcmp(v, "all")) {
        *mask = (1u << WS_POLICY_COUNT) - 1;
        return 0;
    }
    const char *p = v;
    for (;;) {
        const size_t l = strcspn(p, ",");
        char name[32];
        ws_policy_kind k;
        ws_err err = {0};
        if (l >= sizeof name)
            return cli_usage_error(cmd, "--policy: '%.*s...' is no policy", 24, p);
        memcpy(name, p, l);
        name[l] = '\0';
        if (l && ws_policy_from_name(name, &k, &err))
            return cli_usage_error(cmd, "%s", err.msg);
        if (l)
            *mask |= 1u << k;
        if (!p[l])
            break;
        p += l + 1;
    }
    if (!*mask)
        return cli_usage_error(cmd, "--policy names no policy");
    return 0;
}

/* The options only a policy that runs work on the CPU uses (one that keeps routed experts
 * there), and whether layers wholly on the CPU (--n-gpu-layers) use them under any policy. */
static const struct {
    const char *name;
    int cpu_layers;
    const char *why;
} k_cpu_opts[] = {
    {"n-cpu-moe", 0, "keeps every routed expert on the GPU"},
    {"gpu-experts", 0, "keeps every routed expert on the GPU"},
    {"cpu-expert-weights", 1, "keeps no routed expert on the CPU"},
    {"prefill", 1, "runs no expert on the CPU"},
    {"prefill-gpu-tokens", 1, "runs no expert on the CPU"},
    {"cpu-threads", 1, "runs no work on the CPU"},
    {"cpu-sockets", 1, "runs no work on the CPU"},
    {"one-node-memory", 1, "keeps no weights in host memory"},
};

int cli_policy_opts(const char *cmd, const cli_args *a, const char *policy, unsigned mask)
{
    for (int k = 0; k < WS_POLICY_COUNT; k++)
        if ((mask & 1u << k) && ws_policy_info_of((ws_policy_kind)k)->cpu_experts)
            return 0;
    const int cpu_layers = cli_declared(a, "n-gpu-layers") && cli_given(a, "n-gpu-layers");
    for (size_t i = 0; i < sizeof k_cpu_opts / sizeof k_cpu_opts[0]; i++) {
        const char *o = k_cpu_opts[i].name;
        if (cli_declared(a, o) && cli_given(a, o) && !(k_cpu_opts[i].cpu_layers && cpu_layers))
            return cli_usage_error(cmd, "--%s does not apply to --policy %s, which %s%s", o,
                                   policy, k_cpu_opts[i].why,
                                   k_cpu_opts[i].cpu_layers
                                       ? " unless --n-gpu-layers puts layers there"
                                       : "");
    }
    return 0;
}
