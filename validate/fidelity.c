/* fidelity: published measurements against the simulator (see fidelity.h). */
#include "fidelity.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "control.h"
#include "hw.h"
#include "oppoints.h"
#include "model.h"
#include "policy.h"
#include "serve.h"
#include "server.h"
#include "trace_gen.h"
#include "wformat.h"
#include "ws_dtype.h"
#include "ws_util.h"

/* ---- predicting one end-to-end point ------------------------------------------------- */

static const char *const metrics[] = {"decode_tok_s", "tpot_s", "ttft_s", "prefill_tok_s",
                                      "throughput_tok_s"};

/* The work a point's simulations have done, in step-slots (fidelity.h): each step adds
 * the batch's slots and WS_FIDELITY_STEP_SLOTS; past max (WS_FIDELITY_SLOT_STEPS_MAX, or
 * the report's own) the run stops and the point is bad. */
typedef struct fid_budget {
    long long used, max;
    int slots; /* the running simulation's batch (cfg.batch) */
    int over;  /* 1: the run stopped at max */
} fid_budget;

static fid_budget budget_of(const ws_fid_report *r)
{
    return (fid_budget){.max = r->slot_steps_max > 0 ? r->slot_steps_max
                                                     : WS_FIDELITY_SLOT_STEPS_MAX};
}

static int budget_step(fid_budget *b, const sim_step_rec *rec, ws_err *err)
{
    b->used += (long long)b->slots + WS_FIDELITY_STEP_SLOTS;
    if (b->used <= b->max)
        return 0;
    b->over = 1;
    return ws_err_set(err, WS_ECANCELED,
                      "too long to simulate: past %lld step-slots (steps x (batch %d + %d)) at "
                      "step %llu",
                      b->max, b->slots, WS_FIDELITY_STEP_SLOTS, (unsigned long long)rec->idx + 1);
}

/* 1 with the point bad where a run of `requests` into `slots` would admit past the bound. */
static int admit_over(ws_fid_point *p, long long requests, int slots)
{
    if (requests * slots <= WS_FIDELITY_ADMIT_SLOTS_MAX)
        return 0;
    snprintf(p->bad, sizeof p->bad,
             "too long to simulate: %lld requests admitted into a batch of %d (at most %lld "
             "requests x slots)",
             requests, slots, (long long)WS_FIDELITY_ADMIT_SLOTS_MAX);
    p->predicted = p->ratio = NAN;
    return 1;
}

static int budget_on_step(void *ctx, const sim_step_rec *rec, ws_err *err)
{
    return budget_step(ctx, rec, err);
}

/* Prefill time and tokens, summed over the prefill steps, and the point's budget. */
typedef struct prefill_acc {
    double s, tokens;
    fid_budget *b;
} prefill_acc;

static int on_step(void *ctx, const sim_step_rec *rec, ws_err *err)
{
    prefill_acc *a = ctx;
    if (rec->prefill_tokens > 0) {
        a->s += rec->t_end - rec->t_start;
        a->tokens += rec->prefill_tokens;
    }
    return budget_step(a->b, rec, err);
}

/* An error the point's own values caused (WS_EINVAL: a profile of the wrong kind, a value
 * the simulator or the generator refuses; WS_EPARSE, WS_EIO: the engine file it names; a
 * run stopped at the budget b, NULL for none) marks it bad and the report goes on; others
 * stop the report. */
static int point_failed(ws_fid_point *p, int rc, const fid_budget *b, const ws_err *e,
                        ws_err *err)
{
    if (rc != WS_EINVAL && rc != WS_EPARSE && rc != WS_EIO && !(b && b->over))
        return ws_err_set(err, rc, "point '%s': %s", p->id, e->msg);
    size_t n = strlen(e->msg);
    if (n >= sizeof p->bad) { /* cut before the character that does not fit whole */
        n = sizeof p->bad - 1;
        while (n > 0 && ((unsigned char)e->msg[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(p->bad, e->msg, n);
    p->bad[n] = '\0';
    p->predicted = p->ratio = NAN;
    return 0;
}

/* 1 where the point has stopped: missing a knob, or bad. */
static int stopped(const ws_fid_point *p)
{
    return *p->missing || *p->bad;
}

/* Appends one assumption to the point's list ("; "-separated). */
static void assume(ws_fid_point *p, const char *fmt, ...)
{
    char what[sizeof p->assumed];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    /* an assumption made again (a setup simulated at both ends of the prompt) is said once */
    if (strstr(p->assumed, what))
        return;
    size_t n = strlen(p->assumed);
    if (n + 2 >= sizeof p->assumed)
        return;
    if (n) {
        memcpy(p->assumed + n, "; ", 3);
        n += 2;
    }
    size_t len = strlen(what);
    if (len > sizeof p->assumed - 1 - n)
        len = sizeof p->assumed - 1 - n;
    memcpy(p->assumed + n, what, len);
    p->assumed[n + len] = '\0';
}

/* The policy standing for the point's placement (the experts of the first n_cpu_moe MoE
 * layers on the CPU where it says so), or missing names the knob. */
static int point_policy(ws_fid_point *p, const ws_model *m, ws_policy_kind *k, ws_deploy_cfg *cc)
{
    const char *w = p->offload_what;
    cc->gpu_experts = 0;
    if (!strcmp(w, "layers")) { /* llama.cpp -ngl: the GPU layers hold all their experts */
        cc->n_gpu_layers = p->n_gpu_layers > 0 ? p->n_gpu_layers : 0;
        *k = WS_POLICY_GPU_ONLY;
        snprintf(p->policy, sizeof p->policy, "%s", ws_policy_name(*k));
        return 0;
    }
    int experts = strstr(w, "experts") != NULL || p->n_cpu_moe >= 0,
        kv = strstr(w, "kv") != NULL;
    if (!experts && !kv && strcmp(w, "none")) {
        snprintf(p->missing, sizeof p->missing,
                 !strcmp(w, "unknown") ? "not published: what was offloaded (placement)"
                                       : "offload of '%s'",
                 w);
        return -1;
    }
    if (experts) {
        cc->gpu_experts = p->all_experts_cpu || p->gpu_experts < 0 ? 0 : p->gpu_experts;
        if (cc->gpu_experts > m->n_experts) {
            snprintf(p->missing, sizeof p->missing, "%d GPU experts of a %d-expert model",
                     cc->gpu_experts, m->n_experts);
            return -1;
        }
        if (p->n_cpu_moe == 0) /* llama.cpp --n-cpu-moe 0: every expert on the GPU */
            cc->gpu_experts = m->n_experts;
        else if (p->n_cpu_moe > 0)
            cc->n_cpu_moe = p->n_cpu_moe;
    }
    *k = kv ? WS_POLICY_WRITESCOPE : experts ? WS_POLICY_KTRANS : WS_POLICY_GPU_ONLY;
    snprintf(p->policy, sizeof p->policy, "%s", ws_policy_name(*k));
    return 0;
}

/* Reads the point's formats: a float dtype becomes the model's weight dtype (the CPU
 * experts' bytes where they differ), any other known format the parts' formats (the GPU
 * part's, the CPU experts' beside it); the KV dtype. Missing names what cannot be
 * expressed. */
static int point_dtypes(ws_fid_point *p, ws_model *m, ws_dtype *kv, ws_deploy_cfg *cc)
{
    ws_dtype d;
    const ws_wformat *f = NULL;
    if (*p->weights_gpu) {
        if (!ws_dtype_parse(p->weights_gpu, &d)) {
            m->weight_dtype = d;
        } else if ((f = ws_wformat_find(p->weights_gpu))) {
            cc->w_gpu = cc->w_shared = cc->w_gpu_experts = cc->w_cpu_experts = f;
        } else {
            snprintf(p->missing, sizeof p->missing, "weight format %s", p->weights_gpu);
            return -1;
        }
    }
    if (*p->weights_cpu && strcmp(p->weights_cpu, p->weights_gpu)) {
        if (!ws_dtype_parse(p->weights_cpu, &d) && !f) {
            cc->cpu_expert_bytes = ws_dtype_size(d);
        } else if ((cc->w_cpu_experts = ws_wformat_find(p->weights_cpu)) == NULL) {
            snprintf(p->missing, sizeof p->missing, "CPU expert weight format %s",
                     p->weights_cpu);
            return -1;
        }
    }
    *kv = WS_DT_BF16;
    /* block-quantized KV caches: their bytes (KTransformers' --cache_q4 read as Q4_0) */
    const char *kvf = !strcmp(p->kv_dtype, "q4") ? "q4_0" : p->kv_dtype;
    const ws_wformat *kf = *kvf ? ws_wformat_find(kvf) : NULL;
    if (kf && (!strcmp(kf->name, "q8_0") || !strcmp(kf->name, "q4_0"))) {
        cc->w_kv = kf;
        if (strcmp(kvf, p->kv_dtype))
            assume(p, "KV %s as %s", p->kv_dtype, kf->name);
    } else if (*p->kv_dtype && ws_dtype_parse(p->kv_dtype, kv)) {
        snprintf(p->missing, sizeof p->missing, "KV dtype %s", p->kv_dtype);
        return -1;
    }
    return 0;
}

static double metric_value(const ws_fid_point *p, const sim_totals *t, const prefill_acc *a)
{
    if (!strcmp(p->metric, "decode_tok_s"))
        return t->decode_tps;
    if (!strcmp(p->metric, "tpot_s"))
        return t->tpot_p50;
    if (!strcmp(p->metric, "ttft_s"))
        return t->ttft_p50;
    if (!strcmp(p->metric, "prefill_tok_s"))
        return a->s > 0 ? a->tokens / a->s : NAN;
    /* throughput_tok_s: output tokens (or prompt and output) over the makespan */
    if (p->count_prompt && t->makespan_s > 0)
        return (double)(t->prompt_tokens + t->output_tokens) / t->makespan_s;
    return t->tokens_per_s;
}

/* ---- engines --------------------------------------------------------------------------- */

/* A published engine name and the engines/ file it ran as: `file`, or `other` for a
 * version below `split` (other_below) or at or above it (!other_below), versions compared
 * as major * 100 + minor; a point without a version runs `file`.
 *   - vLLM made its V1 engine the default in 0.8.0: an older vLLM ran V0; one without a
 *     version is taken as V1, the engine of every release since.
 *   - KTransformers serves through SGLang from 0.4 (ktransformers.json holds the older
 *     balance_serve server's values); a point launched by `kt run`, whose defaults set the
 *     prefill threshold and chunk, names engine kt-kernel (engines/kt-kernel.json). */
static const struct {
    const char *engine, *file, *other;
    int split, other_below;
} k_engine_files[] = {
    {"vllm", "vllm-v1", "vllm-v0", 8, 1},
    {"ktransformers", "ktransformers", "sglang", 4, 0},
    {"kt-kernel", "kt-kernel", NULL, 0, 0},
    {"sglang", "sglang", NULL, 0, 0},
    {"tensorrt-llm", "tensorrt-llm", NULL, 0, 0},
    {"llama.cpp", "llama.cpp", NULL, 0, 0},
    {"ik_llama.cpp", "ik_llama.cpp", NULL, 0, 0},
};

const char *ws_fidelity_engine_file(const char *engine, const char *version)
{
    if (!engine || !*engine)
        return NULL;
    for (size_t i = 0; i < sizeof k_engine_files / sizeof *k_engine_files; i++) {
        if (strcasecmp(engine, k_engine_files[i].engine))
            continue;
        const char *v = version ? version : "";
        v += *v == 'v' || *v == 'V';
        int major = 0, minor = 0;
        if (k_engine_files[i].other && sscanf(v, "%d.%d", &major, &minor) == 2 &&
            (major * 100 + minor < k_engine_files[i].split) == k_engine_files[i].other_below)
            return k_engine_files[i].other;
        return k_engine_files[i].file;
    }
    return engine;
}

/* The point's engine file read for its GPU and model into e (*have = 1); *have = 0 where
 * the point names no engine (the serving defaults stay, said in assumed), names one
 * without a file (missing says so) or one whose file is refused (bad). */
static int point_engine(ws_fid_point *p, const ws_hw *hw, const ws_model *m, ws_server *e,
                        int *have, ws_err *err)
{
    *have = 0;
    const char *f = p->engine_file;
    if (!*f) {
        assume(p, "no engine: the simulator's serving defaults");
        return 0;
    }
    ws_err e2 = {0};
    int rc = ws_server_load(f, hw->gpu, hw->gpu_mem.v, m->max_ctx, e, &e2);
    if (rc == WS_ENOTFOUND) {
        snprintf(p->missing, sizeof p->missing, "engine '%s' (no engines/%s.json)", p->engine, f);
        return 0;
    }
    if (rc)
        return point_failed(p, rc, NULL, &e2, err);
    *have = 1;
    return 0;
}

static int predict_at(ws_store *s, ws_fid_point *p, int prompt, int output, fid_budget *b,
                      ws_err *err);

static int predict_one(ws_store *s, ws_fid_point *p, fid_budget b, ws_err *err)
{
    int known = 0;
    for (size_t i = 0; i < sizeof metrics / sizeof *metrics; i++)
        known |= !strcmp(p->metric, metrics[i]);
    if (!known) {
        snprintf(p->missing, sizeof p->missing, "metric '%s'", p->metric);
        return 0;
    }
    const int decode = !strcmp(p->metric, "decode_tok_s") || !strcmp(p->metric, "tpot_s");
    if (p->batch < 1 || (p->prompt < 1 && !decode)) {
        snprintf(p->missing, sizeof p->missing, "not published: the %s",
                 p->batch < 1 ? "batch" : "prompt length");
        return 0;
    }
    int output = p->output;
    if (output < 1) {
        /* TTFT and prefill rates do not depend on the output; a decode rate barely does
         * (the context grows by the output): a short output stands in, and says so. */
        if (!decode && strcmp(p->metric, "ttft_s") && strcmp(p->metric, "prefill_tok_s")) {
            snprintf(p->missing, sizeof p->missing, "not published: the output length");
            return 0;
        }
        output = decode ? WS_FIDELITY_OUTPUT : 1;
        assume(p, "output %d (not published)", output);
    }
    if (p->prompt == 0) { /* a decode rate from an empty context (llama-bench tg N) */
        assume(p, "prompt 1 for an empty context");
        return predict_at(s, p, 1, output, &b, err);
    }
    if (p->prompt > 0)
        return predict_at(s, p, p->prompt, output, &b, err);
    /* A decode rate published without its prompt: the rate at the short prompts chat
     * benchmarks use, where it barely depends on the prompt; where it does, not expressed.
     * A source that bounds the prompt (its text, the chat before it) narrows that range. */
    double at[2];
    const int ranged = p->prompt_lo > 0;
    const int lens[2] = {ranged ? p->prompt_lo : WS_FIDELITY_PROMPT_LO,
                         ranged ? p->prompt_hi : WS_FIDELITY_PROMPT_HI};
    const int mid = ranged ? (p->prompt_lo + p->prompt_hi) / 2 : WS_FIDELITY_PROMPT_MID;
    for (int i = 0; i < 2; i++) {
        int rc = predict_at(s, p, lens[i], output, &b, err);
        if (rc || stopped(p))
            return rc;
        at[i] = p->predicted;
    }
    const double spread = fabs(at[1] / at[0] - 1);
    if (!(spread <= WS_FIDELITY_PROMPT_SPREAD)) {
        snprintf(p->missing, sizeof p->missing,
                 "not published: the prompt length (the rate moves %.0f%% between %d and %d "
                 "tokens)",
                 100 * spread, lens[0], lens[1]);
        p->predicted = p->ratio = NAN;
        return 0;
    }
    assume(p, "prompt %d (not published; %d..%d tokens%s give %.4g..%.4g)", mid, lens[0], lens[1],
           ranged ? ", the source's bounds," : "", at[0], at[1]);
    return predict_at(s, p, mid, output, &b, err);
}

/* The point's model and formats: 1 with p->missing set where one cannot be expressed. */
static int point_model(ws_fid_point *p, ws_model *m, ws_dtype *kv, ws_deploy_cfg *cc)
{
    char path[4096];
    ws_err e = {0};
    if (ws_model_resolve(p->model, path, sizeof path, &e) || ws_model_load(path, m, &e)) {
        snprintf(p->missing, sizeof p->missing, "model config '%s'", p->model);
        return 1;
    }
    ws_deploy_cfg_default(cc);
    return point_dtypes(p, m, kv, cc) != 0;
}

/* The point's GPU and host profiles for model m: 0 with p->missing set where a profile is
 * missing, p->bad where one is refused (a host's profile named as the GPU, or the
 * reverse), or an error naming the point. */
static int point_hw(ws_store *s, ws_fid_point *p, const ws_model *m, ws_dtype kv, ws_hw *hw,
                    int *cores, ws_err *err)
{
    ws_err e = {0};
    const int rc = ws_hw_load_model(s, m, p->gpu, p->host, kv, hw, cores, &e);
    if (rc == WS_ENOTFOUND) {
        snprintf(p->missing, sizeof p->missing, "a profile: %.170s", e.msg);
        return 0;
    }
    return rc ? point_failed(p, rc, NULL, &e, err) : 0;
}

/* An end-to-end point's serving settings: the engine's scheduler, token budget, preemption,
 * step overhead and prefill threshold (eng NULL: the defaults); the point's own closed batch
 * and the serving default chunk stay, and so does the KV budget predict_at sets (one that
 * holds the whole batch), in place of the engine's sizing; then the run's own chunk (with a
 * step budget that holds it: SGLang's --chunked-prefill-size is both) and threshold. */
static void point_serving(const ws_fid_point *p, const ws_server *eng, sim_cfg *cfg,
                          ws_deploy_cfg *cc)
{
    sim_cfg_default(cfg);
    if (eng) {
        ws_server_kv kv_mem = cfg->kv_mem;
        const int chunk = cfg->chunk;
        ws_server_apply(eng, &cfg->srv, cc, &kv_mem);
        cfg->chunk = chunk;
    }
    if (p->chunk > 0) {
        cfg->chunk = p->chunk;
        if (cfg->token_budget < p->chunk)
            cfg->token_budget = p->chunk;
    }
    if (p->prefill_gpu_tokens > 0)
        cfg->prefill_gpu_tokens = p->prefill_gpu_tokens;
}

/* The point simulated with `prompt` and `output` tokens per request within the point's
 * budget b: predicted and ratio, or missing naming what cannot be expressed, or bad. */
static int predict_at(ws_store *s, ws_fid_point *p, int prompt, int output, fid_budget *b,
                      ws_err *err)
{
    p->predicted = p->ratio = NAN;
    ws_model m;
    ws_err e = {0};
    ws_dtype kv;
    ws_deploy_cfg cc;
    if (point_model(p, &m, &kv, &cc))
        return 0;
    ws_policy_kind k;
    if (point_policy(p, &m, &k, &cc))
        return 0;
    cc.kv_dtype = kv;
    ws_hw hw;
    int cores = 1;
    int rc = point_hw(s, p, &m, kv, &hw, &cores, err);
    if (rc || stopped(p))
        return rc;
    if (!strcmp(p->offload_what, "layers") && p->n_gpu_layers < 1) {
        /* -ngl not published: the most layers whose weights and the batch's KV fit the
         * GPU, as users choose it */
        ws_model_stats st;
        ws_model_derive(&m, kv, &st);
        const double kv_tok = st.kv_bytes_tok / m.layers * (double)p->batch *
                              (prompt + output);
        int best = 0;
        for (int n = m.layers - 1; n >= 1 && !best; n--) {
            ws_deploy_cfg c2 = cc;
            c2.n_gpu_layers = n;
            c2.gpu_experts = m.n_experts;
            ws_cost_model cm;
            if (ws_cost_model_init(&hw, &m, &c2, &cm, &e))
                return point_failed(p, e.code, NULL, &e, err);
            double g, h;
            ws_cost_weight_bytes(&cm, &g, &h);
            ws_cost_model_free(&cm);
            if (g + kv_tok * n <= hw.gpu_mem.v)
                best = n;
        }
        if (!best) {
            snprintf(p->missing, sizeof p->missing,
                     "memory: not one layer fits the GPU beside the rest");
            return 0;
        }
        cc.n_gpu_layers = best;
        assume(p, "n_gpu_layers %d: the most that fit (-ngl not published)", best);
    }
    ws_server eng;
    int have = 0;
    if ((rc = point_engine(p, &hw, &m, &eng, &have, err)) || stopped(p))
        return rc;
    sim_cfg cfg;
    point_serving(p, have ? &eng : NULL, &cfg, &cc);
    cfg.policy = k;
    cfg.prefill_mode = p->prefill_mode;
    cfg.batch = p->batch;
    cfg.cpu_workers = cores;
    if (p->cpu_sockets > 0 && ws_policy_info_of(k)->cpu_experts) {
        if (p->cpu_sockets > hw.sockets.v) {
            snprintf(p->missing, sizeof p->missing, "%d sockets on host %s (%g)",
                     p->cpu_sockets, p->host, hw.sockets.v);
            return 0;
        }
        cc.cpu_sockets = p->cpu_sockets;
    }
    if (ws_policy_info_of(k)->cpu_experts)
        cc.cpu_threads = p->cpu_threads;
    if (p->one_node)
        cc.one_node_memory = 1; /* else the engine's placement (pooled where it gives none) */
    cfg.keep_steps = cfg.keep_requests = 0;
    if (admit_over(p, p->batch, cfg.batch))
        return 0;
    prefill_acc acc = {.b = b};
    b->slots = cfg.batch;
    cfg.on_step = on_step;
    cfg.on_step_ctx = &acc;
    if (!ws_policy_info_of(k)->spills) {
        /* An engine without spilling holds the whole batch's KV on the GPU. */
        ws_model_stats st;
        ws_model_derive(&m, kv, &st);
        double need = st.kv_bytes_tok * (double)p->batch * (prompt + output + 64);
        if (need > cfg.gpu_kv_budget)
            cfg.gpu_kv_budget = need;
    }
    sim_closed cl;
    sim_source src;
    sim_closed_source(&cl, p->batch, prompt, output, &src);
    sim_results res;
    rc = sim_run(&m, &hw, &cc, &cfg, &src, &res, &e);
    if (rc)
        return point_failed(p, rc, b, &e, err);
    p->wall_s += res.tot.wall_s;
    if (res.tot.no_room || res.tot.served < res.tot.requests)
        snprintf(p->missing, sizeof p->missing, "memory: %s",
                 res.tot.no_room ? "the weights and KV exceed the GPU profile's memory"
                                 : "requests out of memory in the simulator");
    else {
        p->predicted = metric_value(p, &res.tot, &acc);
        p->ratio = p->predicted / p->published;
    }
    sim_results_free(&res);
    return 0;
}

/* ---- predicting one serving point ---------------------------------------------------- */

/* A serving point's metrics: latencies with a statistic over the served requests,
 * throughputs over the makespan. */
typedef enum srv_metric {
    SRV_TTFT, SRV_TPOT, SRV_ITL, SRV_E2E, /* with a stat */
    SRV_OUT_TPUT, SRV_TOTAL_TPUT, SRV_REQ_TPUT,
    SRV_METRICS
} srv_metric;
static const char *const srv_metrics[SRV_METRICS] = {
    "ttft_s", "tpot_s", "itl_s", "e2e_s", "output_throughput_tok_s", "total_throughput_tok_s",
    "request_throughput_rps"};

/* What the served requests add up to: the metric's per-request values, the inter-token
 * time and gaps (ITL's mean: every gap of every request), tokens. */
typedef struct srv_acc {
    srv_metric metric;
    double *v;
    size_t n, cap;
    double itl_s, itl_gaps;
    double prompt, output, served;
} srv_acc;

static int srv_on_request(void *ctx, const sim_req_result *rec, ws_err *err)
{
    srv_acc *a = ctx;
    if (rec->outcome != SIM_OUT_DONE)
        return 0;
    a->served++;
    a->prompt += rec->prompt;
    a->output += rec->generated;
    if (rec->generated > 1) {
        a->itl_s += rec->end_s - rec->first_s;
        a->itl_gaps += rec->generated - 1;
    }
    double v;
    if (a->metric == SRV_TTFT)
        v = rec->ttft;
    else if (a->metric == SRV_E2E)
        v = rec->e2e;
    else if (a->metric == SRV_TPOT && rec->generated > 1)
        v = rec->tpot; /* as benchmark clients count it: requests of more than one token */
    else
        return 0;
    if (ws_grow((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v, 1024))
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    a->v[a->n++] = v;
    return 0;
}

static int cmp_double(const void *a, const void *b);

/* mean, or the quantile of the sorted values as numpy's default (linear between the two
 * nearest ranks) computes it, which the published benchmark clients use. */
static double srv_stat(double *v, size_t n, const char *stat)
{
    if (!n)
        return NAN;
    if (!strcmp(stat, "mean")) {
        double sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += v[i];
        return sum / n;
    }
    const double q = !strcmp(stat, "median") ? 0.5 : !strcmp(stat, "p90") ? 0.9 : 0.99;
    qsort(v, n, sizeof *v, cmp_double);
    const double h = (n - 1) * q;
    const size_t lo = (size_t)h;
    return lo + 1 < n ? v[lo] + (h - lo) * (v[lo + 1] - v[lo]) : v[lo];
}

/* The point's metric and workload as the simulator runs them, or missing names what is
 * not expressed. */
static int serving_metric(ws_fid_point *p, srv_metric *mt)
{
    const ws_fid_workload *l = &p->load;
    int k = 0;
    while (k < SRV_METRICS && strcmp(p->metric, srv_metrics[k]))
        k++;
    if (!strcmp(p->metric, "capacity_rps")) {
        snprintf(p->missing, sizeof p->missing,
                 "metric capacity_rps (the highest rate within an SLO: a search over rates)");
        return -1;
    }
    if (k == SRV_METRICS) {
        snprintf(p->missing, sizeof p->missing, "metric '%s'", p->metric);
        return -1;
    }
    *mt = (srv_metric)k;
    const int latency = *mt <= SRV_E2E;
    if (latency && strcmp(p->stat, "mean") && strcmp(p->stat, "median") &&
        strcmp(p->stat, "p90") && strcmp(p->stat, "p99")) {
        snprintf(p->missing, sizeof p->missing,
                 *p->stat ? "stat '%s' (mean, median, p90, p99)"
                          : "not published: the statistic%s",
                 p->stat);
        return -1;
    }
    if (*mt == SRV_ITL && strcmp(p->stat, "mean")) {
        snprintf(p->missing, sizeof p->missing,
                 "itl_s %s (each token's gap: the simulator gives a request's first and last)",
                 p->stat);
        return -1;
    }
    if (p->offload) {
        snprintf(p->missing, sizeof p->missing, "offload '%s' (serving points run gpu-only)",
                 p->offload_what);
        return -1;
    }
    const char *why = NULL;
    if (strcmp(l->lengths, "fixed"))
        why = "lengths other than fixed";
    else if (p->prompt < 1 || p->output < 1)
        why = "not published: the prompt or output length";
    else if (l->requests < 1)
        why = "not published: the number of requests";
    else if (!strcmp(l->arrival, "poisson") && !(l->rate_rps > 0 && isfinite(l->rate_rps)))
        why = "not published: the request rate";
    else if (!strcmp(l->arrival, "closed") && l->concurrency < 1)
        why = "not published: the concurrency";
    else if (strcmp(l->arrival, "all_at_once") && strcmp(l->arrival, "poisson") &&
             strcmp(l->arrival, "closed"))
        why = "arrival";
    if (why) {
        snprintf(p->missing, sizeof p->missing, "workload: %s%s%s", why,
                 !strcmp(why, "arrival") ? " " : "", !strcmp(why, "arrival") ? l->arrival : "");
        return -1;
    }
    return 0;
}

/* The point's requests as a source: the batch at t = 0, or a generator (Poisson arrivals,
 * or a closed loop of clients with no think time) of fixed lengths; *t is the generator to
 * close (NULL for the batch). */
static int serving_source(const ws_fid_point *p, sim_closed *cl, ws_trace **t, sim_source *src,
                          ws_err *err)
{
    const ws_fid_workload *l = &p->load;
    *t = NULL;
    if (!strcmp(l->arrival, "all_at_once")) {
        sim_closed_source(cl, l->requests, p->prompt, p->output, src);
        return 0;
    }
    ws_trace_gen g;
    memset(&g, 0, sizeof g);
    g.requests = (uint64_t)l->requests;
    g.prompt = (ws_trace_len){WS_LEN_FIXED, p->prompt, 0};
    g.output = (ws_trace_len){WS_LEN_FIXED, p->output, 0};
    g.seed = WS_FIDELITY_SEED;
    g.cv = 1;
    if (!strcmp(l->arrival, "poisson")) {
        g.arrivals = WS_ARRIVALS_POISSON;
        g.rate = l->rate_rps;
    } else {
        g.arrivals = WS_ARRIVALS_CLOSED;
        g.clients = l->concurrency;
        g.think_s = 0;
        g.think_fixed = 1;
    }
    int rc = ws_trace_gen_open(&g, t, err);
    if (!rc && (rc = sim_trace_source(*t, src, err))) {
        ws_trace_close(*t);
        *t = NULL;
    }
    return rc;
}

/* A serving point: the workload under its engine (scheduler, token budget, sequence cap,
 * KV sizing, preemption, step overhead), gpu-only, layers folded. */
static int predict_serving(ws_store *s, ws_fid_point *p, fid_budget b, ws_err *err)
{
    srv_metric mt;
    if (serving_metric(p, &mt))
        return 0;
    ws_model m;
    ws_err e = {0};
    ws_dtype kv;
    ws_deploy_cfg cc;
    if (point_model(p, &m, &kv, &cc))
        return 0;
    cc.kv_dtype = kv;
    ws_hw hw;
    int cores = 1;
    int rc = point_hw(s, p, &m, kv, &hw, &cores, err);
    if (rc || stopped(p))
        return rc;
    ws_server eng;
    int have = 0;
    if ((rc = point_engine(p, &hw, &m, &eng, &have, err)) || stopped(p))
        return rc;
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    if (have)
        ws_server_apply(&eng, &cfg.srv, &cc, &cfg.kv_mem);
    cfg.policy = WS_POLICY_GPU_ONLY;
    snprintf(p->policy, sizeof p->policy, "%s", ws_policy_name(cfg.policy));
    cfg.seed = WS_FIDELITY_SEED;
    cfg.cpu_workers = cores;
    cfg.detail_layer = 0;
    cfg.keep_steps = cfg.keep_requests = 0;
    if (admit_over(p, p->load.requests, cfg.batch))
        return 0;
    srv_acc acc = {.metric = mt};
    cfg.on_request = srv_on_request;
    cfg.on_request_ctx = &acc;
    b.slots = cfg.batch;
    cfg.on_step = budget_on_step;
    cfg.on_step_ctx = &b;
    sim_closed cl;
    ws_trace *t = NULL;
    sim_source src;
    if ((rc = serving_source(p, &cl, &t, &src, &e)))
        return point_failed(p, rc, NULL, &e, err);
    sim_results res;
    rc = sim_run(&m, &hw, &cc, &cfg, &src, &res, &e);
    if (t)
        ws_trace_close(t);
    if (rc) {
        free(acc.v);
        return point_failed(p, rc, &b, &e, err);
    }
    p->wall_s += res.tot.wall_s;
    const double span = res.tot.makespan_s;
    if (res.tot.no_room)
        snprintf(p->missing, sizeof p->missing,
                 "memory: the weights and the engine's KV share exceed the GPU profile's");
    else if (res.tot.served < res.tot.requests)
        snprintf(p->missing, sizeof p->missing,
                 "memory: %llu requests do not fit the engine's KV even alone",
                 (unsigned long long)(res.tot.requests - res.tot.served));
    else {
        if (mt == SRV_ITL)
            p->predicted = acc.itl_gaps > 0 ? acc.itl_s / acc.itl_gaps : NAN;
        else if (mt == SRV_OUT_TPUT)
            p->predicted = span > 0 ? acc.output / span : NAN;
        else if (mt == SRV_TOTAL_TPUT)
            p->predicted = span > 0 ? (acc.prompt + acc.output) / span : NAN;
        else if (mt == SRV_REQ_TPUT)
            p->predicted = span > 0 ? acc.served / span : NAN;
        else
            p->predicted = srv_stat(acc.v, acc.n, p->stat);
        p->ratio = p->predicted / p->published;
        if (res.tot.preempted)
            assume(p, "%llu preemptions", (unsigned long long)res.tot.preempted);
    }
    free(acc.v);
    sim_results_free(&res);
    return 0;
}

int ws_fidelity_predict(ws_store *s, ws_fid_report *r,
                        void (*progress)(void *ctx, size_t done, size_t n), void *ctx,
                        ws_err *err)
{
    for (size_t i = 0; i < r->n; i++) {
        ws_fid_point *p = &r->pt[i];
        const int e2e = !strcmp(p->kind, "e2e");
        if (!e2e && strcmp(p->kind, "serving"))
            continue;
        p->missing[0] = p->bad[0] = p->policy[0] = '\0';
        const char *f =
            r->engine[0] ? r->engine : ws_fidelity_engine_file(p->engine, p->engine_version);
        snprintf(p->engine_file, sizeof p->engine_file, "%s", f ? f : "");
        p->predicted = p->ratio = NAN;
        p->wall_s = 0;
        int rc = e2e ? predict_one(s, p, budget_of(r), err)
                     : predict_serving(s, p, budget_of(r), err);
        if (rc)
            return rc;
        if (progress)
            progress(ctx, i + 1, r->n);
    }
    return 0;
}

/* ---- the summary ---------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Item i of r's points and then its operator points: its group, ratio and host time. */
static const char *item(const ws_fid_report *r, size_t i, char *buf, size_t cap, double *ratio,
                        double *wall)
{
    if (i < r->n) {
        *ratio = r->pt[i].ratio;
        *wall = r->pt[i].wall_s;
        return r->pt[i].group;
    }
    const ws_fid_op *o = &r->op[i - r->n];
    *ratio = o->published > 0 ? o->predicted / o->published : NAN;
    *wall = 0;
    return ws_fidelity_op_group(o, buf, cap);
}

/* The index of group `name` in r->g, added at the end when new (*cap: r->g's room); -1 when
 * out of memory. */
static long group_at(ws_fid_report *r, const char *name, size_t *cap)
{
    size_t k = 0;
    while (k < r->ng && strcmp(r->g[k].group, name))
        k++;
    if (k < r->ng)
        return (long)k;
    if (r->ng == *cap) {
        ws_fid_group *n = realloc(r->g, 2 * *cap * sizeof *n);
        if (!n)
            return -1;
        memset(n + *cap, 0, *cap * sizeof *n);
        r->g = n;
        *cap *= 2;
    }
    snprintf(r->g[r->ng].group, sizeof r->g->group, "%.47s", name);
    return (long)r->ng++;
}

/* The groups an item is summarised in: its own, and for an end-to-end offload point (either
 * offload group) "offload, all" and "offload @ENGINE" (its engine file). */
#define FID_ITEM_GROUPS 3

int ws_fidelity_summarise(ws_fid_report *r, ws_err *err)
{
    free(r->g);
    r->g = NULL;
    r->ng = 0;
    const size_t total = r->n + r->n_op;
    if (!total)
        return 0;
    /* groups in order of first appearance, and each item's groups (-1: none) */
    size_t cap_g = 16;
    r->g = calloc(cap_g, sizeof *r->g);
    long *gi = malloc(total * FID_ITEM_GROUPS * sizeof *gi);
    double *e = malloc(total * sizeof *e);
    if (!r->g || !gi || !e) {
        free(gi);
        free(e);
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    }
    char buf[48], name[FID_ITEM_GROUPS][48];
    double ratio, wall;
    /* the items' own groups first, then the offload rows */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < total; i++) {
            int m = 0;
            snprintf(name[m++], sizeof name[0], "%s", item(r, i, buf, sizeof buf, &ratio, &wall));
            if (i < r->n && !strncmp(r->pt[i].group, "e2e offload", 11)) {
                snprintf(name[m++], sizeof name[0], "offload, all");
                snprintf(name[m++], sizeof name[0], "offload @%.36s",
                         *r->pt[i].engine_file ? r->pt[i].engine_file : "none");
            }
            for (int j = pass ? 1 : 0; j < (pass ? FID_ITEM_GROUPS : 1); j++) {
                long *at = gi + i * FID_ITEM_GROUPS + j;
                *at = j < m ? group_at(r, name[j], &cap_g) : -1;
                if (j < m && *at < 0) {
                    free(gi);
                    free(e);
                    return ws_err_set(err, WS_ENOMEM, "out of memory");
                }
            }
        }
    }
    for (size_t k = 0; k < r->ng; k++) {
        ws_fid_group *g = &r->g[k];
        int n = 0;
        size_t worst = 0;
        g->worst_err = -1;
        for (size_t i = 0; i < total; i++) {
            const long *in = gi + i * FID_ITEM_GROUPS;
            if (in[0] != (long)k && in[1] != (long)k && in[2] != (long)k)
                continue;
            item(r, i, buf, sizeof buf, &ratio, &wall);
            g->n++;
            g->wall_s += wall;
            if (!isfinite(ratio))
                continue;
            double a = fabs(ratio - 1.0);
            e[n++] = a;
            if (a > g->worst_err) {
                g->worst_err = a;
                worst = i;
            }
        }
        g->expressed = n;
        if (n) {
            if (worst < r->n) {
                snprintf(g->worst_id, sizeof g->worst_id, "%s", r->pt[worst].id);
            } else {
                ws_fid_point p;
                ws_fidelity_op_point(r, worst - r->n, &p);
                snprintf(g->worst_id, sizeof g->worst_id, "%s", p.id);
            }
            qsort(e, (size_t)n, sizeof *e, cmp_double);
            g->median_err = n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]);
        } else
            g->median_err = g->worst_err = NAN;
    }
    free(gi);
    free(e);
    return 0;
}

/* ---- operator points ------------------------------------------------------------------- */

const char *ws_fidelity_op_group(const ws_fid_op *o, char *buf, size_t cap)
{
    snprintf(buf, cap, "op %s", ws_vidur_group_name(ws_vidur_op_group(o->op)));
    return buf;
}

void ws_fidelity_op_point(const ws_fid_report *r, size_t i, ws_fid_point *p)
{
    const ws_fid_op *o = &r->op[i];
    memset(p, 0, sizeof *p);
    snprintf(p->kind, sizeof p->kind, "op");
    snprintf(p->id, sizeof p->id, "op-%d-%s-line%d", o->row, ws_vidur_op_name(o->op), o->line);
    ws_fidelity_op_group(o, p->group, sizeof p->group);
    snprintf(p->engine, sizeof p->engine, "Vidur (Kineto)");
    snprintf(p->source, sizeof p->source,
             "microsoft/vidur data/profiling (MIT), %.200s: %s row at line %d", r->op_dir,
             ws_vidur_op_name(o->op), o->line);
    snprintf(p->gpu, sizeof p->gpu, "%s", r->op_gpu);
    snprintf(p->hw_desc, sizeof p->hw_desc, "NVIDIA A100 80 GB, fp16");
    snprintf(p->metric, sizeof p->metric, "time_s");
    snprintf(p->unit, sizeof p->unit, "s");
    snprintf(p->weights_gpu, sizeof p->weights_gpu, "fp16");
    snprintf(p->offload_what, sizeof p->offload_what, "none");
    p->batch = o->batch;
    p->gpu_experts = p->n_cpu_moe = -1;
    p->published = o->published;
    p->predicted = o->predicted;
    p->ratio = o->published > 0 ? o->predicted / o->published : NAN;
}

int ws_fidelity_add_ops(ws_store *s, const char *dir, const char *gpu, int heldout,
                        ws_fid_report *r, ws_err *err)
{
    ws_vidur_rows rows = {0};
    ws_hw hw;
    ws_oppoints st;
    const char *paths[] = {dir};
    int rc = ws_oppoints_check(s, paths, 1, gpu, NULL, heldout, 0, &rows, &hw, &st, err);
    snprintf(r->op_dir, sizeof r->op_dir, "%s", dir);
    snprintf(r->op_gpu, sizeof r->op_gpu, "%s", gpu);
    for (int i = 0; !rc && i < rows.n; i++) {
        const ws_vidur_row *w = &rows.v[i];
        if (heldout && !w->heldout)
            continue;
        if (ws_grow((void **)&r->op, &r->cap_op, r->n_op + 1, sizeof *r->op, 1024)) {
            rc = ws_err_set(err, WS_ENOMEM, "out of memory");
            break;
        }
        r->op[r->n_op++] = (ws_fid_op){.row = i, .op = w->op, .line = w->line,
                                       .batch = (int)w->batch, .published = w->t,
                                       .predicted = ws_oppoint_predict(w, &hw, 2.0)};
    }
    ws_vidur_rows_free(&rows);
    return rc;
}
