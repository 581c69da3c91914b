/* convert: the command line into the library's structs (see convert.h). */
#include "convert.h"

#include <string.h>

#include "cli.h"

#define GIB 1073741824.0

/* The serving flags given on the command line, over whatever s holds (the defaults, or an
 * engine's values): each flag overrides one value. */
static void serving_flags(const cli_args *a, const cli_workload *w, ws_serving *s)
{
#define GIVEN(name) (cli_declared(a, name) && cli_given(a, name))
    if (GIVEN("r"))
        s->par.r_static = w->r;
    if (GIVEN("r-max"))
        s->par.r_max = w->r_max;
    if (GIVEN("batch"))
        s->batch = w->batch;
    if (GIVEN("chunk"))
        s->chunk = w->chunk;
    if (GIVEN("prefill"))
        s->prefill_mode = w->prefill;
    if (GIVEN("prefill-gpu-tokens"))
        s->prefill_gpu_tokens = w->prefill_gpu_tokens;
    if (GIVEN("window"))
        s->window = w->window;
    if (GIVEN("scheduler"))
        s->batching = w->sched;
    if (GIVEN("token-budget"))
        s->token_budget = w->token_budget;
    if (GIVEN("prefix-cache"))
        s->prefix_cache = w->prefix;
    if (GIVEN("preempt"))
        s->preempt = w->preempt;
#undef GIVEN
}

/* The serving settings; with list_ok the policy stays at its default for the caller to set
 * per run (sim's --policy is a list or all: cli_policy_list). */
static int serving(const char *cmd, const cli_args *a, const cli_workload *w, int list_ok,
                   ws_serving *s)
{
    ws_serving_default(s);
    /* a command's own default batch (its TUNE entry) where no engine may set it */
    if (w->batch > 0 && !(cli_declared(a, "engine") && w->engine))
        s->batch = w->batch;
    serving_flags(a, w, s);
    s->seed = (uint64_t)w->seed;
    if (s->window % s->par.page_tokens)
        return cli_usage_error(cmd, "--window must be a multiple of the page (%d tokens)",
                               s->par.page_tokens);
    ws_err err = {0};
    if (!list_ok && ws_policy_from_name(w->policy, &s->policy, &err))
        return cli_fail(&err);
    return 0;
}

int cli_serve_engine(const char *cmd, const cli_args *a, const cli_workload *w, const ws_hw *hw,
                     const ws_model *m, sim_cfg *c, ws_deploy_cfg *cc, ws_server *e)
{
    if (!cli_declared(a, "engine") || !w->engine)
        return 0;
    ws_err err = {0};
    if (ws_server_load(w->engine, hw->gpu, hw->gpu_mem.v, m->max_ctx, e, &err))
        return cli_fail(&err);
    ws_server_apply(e, &c->srv, cc, &c->kv_mem);
    serving_flags(a, w, &c->srv);
    if (!cli_given(a, "batch") && !e->set[WS_SRV_MAX_SEQS] && w->batch > 0)
        c->batch = w->batch;
    (void)cmd;
    return 0;
}

int cli_to_serving(const char *cmd, const cli_args *a, const cli_workload *w, ws_serving *s)
{
    return serving(cmd, a, w, 0, s);
}

int cli_to_cost_cfg(const char *cmd, const cli_args *a, const cli_workload *w, ws_deploy_cfg *cc)
{
    ws_deploy_cfg_default(cc);
    cc->gpu_experts = w->gpu_experts;
    cc->cpu_sockets = w->cpu_sockets;
    cc->one_node_memory = w->one_node;
    if (w->one_node && w->cpu_sockets > 0)
        return cli_usage_error(cmd,
                               "--one-node-memory: the CPU's work on --cpu-sockets %d reads "
                               "each socket's own copy",
                               w->cpu_sockets);
    return cli_formats_apply(cmd, a, w, cc);
}

/* --gpu cuda[:<profile>] or modeled:<profile>. */
static int engine_gpu(const char *cmd, const char *gpu, ws_engine_cfg *c, const char **gpu_prof)
{
    if (!strcmp(gpu, "cuda") || !strncmp(gpu, "cuda:", 5)) {
        c->gpu = WS_ENGINE_GPU_CUDA;
        *gpu_prof = gpu[4] == ':' && gpu[5] ? gpu + 5 : CLI_DEFAULT_GPU;
        return 0;
    }
    if (strncmp(gpu, "modeled:", 8) || !gpu[8])
        return cli_usage_error(cmd, "--gpu is cuda[:<profile>] or modeled:<profile>, not '%s'",
                               gpu);
    c->gpu = WS_ENGINE_GPU_MODELED;
    *gpu_prof = gpu + 8;
    return 0;
}

/* The CPU experts' format (one the engine runs) and the KV's (bf16, the only one it holds). */
static int engine_formats(const char *cmd, const cli_workload *w, ws_engine_cfg *c)
{
    int rc = cli_format_opt(cmd, "cpu-expert-weights", w->cpu_exp_w, &c->cpu_expert_weights);
    if (rc)
        return rc;
    ws_err err = {0};
    if (ws_engine_expert_format_ok(c->cpu_expert_weights, &err))
        return cli_fail(&err);
    if (w->kv_dtype && strcmp(w->kv_dtype, "bf16"))
        return cli_usage_error(cmd,
                               "--kv-dtype %s: the live engine's KV pages and CPU attention "
                               "kernels are bf16 only (sim and plan model fp16 and fp8)",
                               w->kv_dtype);
    return 0;
}

int cli_to_engine_cfg(const char *cmd, const cli_args *a, const cli_workload *w, ws_engine_cfg *c,
                      const char **gpu_prof)
{
    ws_engine_cfg_default(c);
    int rc = cli_to_serving(cmd, a, w, &c->srv);
    if (rc)
        return rc;
    c->batching = WS_BATCH_SERIAL; /* the runtime's scheduler */
    c->prompt = w->prompt;
    c->output = w->output;
    c->layers = w->layers;
    c->threads = w->threads;
    if (!ws_policy_info_of(c->policy)->spills)
        return cli_usage_error(cmd,
                               "--policy %s is a simulator baseline; the runtime serves "
                               "writescope, static, stream, cpu-attn and migrate",
                               w->policy);
    if ((rc = engine_gpu(cmd, w->gpu, c, gpu_prof)))
        return rc;
    return engine_formats(cmd, w, c);
}

int cli_to_sim_cfg(const char *cmd, const cli_args *a, const cli_workload *w, sim_cfg *c)
{
    sim_cfg_default(c);
    int rc = serving(cmd, a, w, 1, &c->srv);
    if (rc)
        return rc;
    if (!cli_given(a, "batch") && !w->trace && !w->gen.arrivals)
        c->batch = 4; /* the closed batch's requests, all running at once */
    c->layers = w->layers;
    if (cli_given(a, "detail"))
        c->detail_layer = w->detail;
    c->slo_ttft = w->slo_ttft;
    c->slo_tpot = w->slo_tpot;
    c->gpu_kv_budget = w->kv_gb * GIB;
    c->host_limit = w->host_gb * GIB;
    return 0;
}
