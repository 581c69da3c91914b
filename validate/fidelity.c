/* fidelity: published measurements against the simulator (see fidelity.h). */
#include "fidelity.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "hw.h"
#include "oppoints.h"
#include "model.h"
#include "policy.h"
#include "serve.h"
#include "wformat.h"
#include "ws_dtype.h"
#include "ws_util.h"

int ws_fidelity_add(ws_fid_report *r, const ws_fid_point *p, ws_err *err)
{
    if (ws_grow((void **)&r->pt, &r->cap, r->n + 1, sizeof *r->pt, 64))
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    r->pt[r->n++] = *p;
    return 0;
}

void ws_fidelity_free(ws_fid_report *r)
{
    free(r->pt);
    free(r->g);
    memset(r, 0, sizeof *r);
}

/* ---- reading the points ------------------------------------------------------------- */

static void copy_str(char *dst, size_t cap, json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    snprintf(dst, cap, "%s", s ? s : "");
}

static int get_count(json_t *o, const char *key, int def, int *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (1 << 26))
        return -1;
    *out = (int)json_integer_value(v);
    return 0;
}

static int point_parse(json_t *o, const char *path, size_t i, ws_fid_point *p, ws_err *err)
{
    memset(p, 0, sizeof *p);
    if (!json_is_object(o))
        return ws_err_set(err, WS_EPARSE, "%s: point %zu is not an object", path, i);
    copy_str(p->id, sizeof p->id, o, "id");
    if (!*p->id)
        return ws_err_set(err, WS_EINVAL, "%s: point %zu has no id", path, i);
    snprintf(p->kind, sizeof p->kind, "e2e");
    copy_str(p->engine, sizeof p->engine, o, "engine");
    json_t *src = json_object_get(o, "source");
    if (json_is_object(src)) {
        copy_str(p->source, sizeof p->source, src, "where");
        copy_str(p->url, sizeof p->url, src, "url");
    } else
        copy_str(p->source, sizeof p->source, o, "source");
    if (!*p->source)
        return ws_err_set(err, WS_EINVAL, "%s: point '%s' has no source", path, p->id);
    p->quantized = json_is_true(json_object_get(o, "quantized"));
    p->offload = json_is_true(json_object_get(o, "offload"));
    json_t *hw = json_object_get(o, "hardware");
    copy_str(p->gpu, sizeof p->gpu, hw, "gpu");
    copy_str(p->host, sizeof p->host, hw, "host");
    char gd[92], hd[92];
    copy_str(gd, sizeof gd, hw, "gpu_desc");
    copy_str(hd, sizeof hd, hw, "host_desc");
    snprintf(p->hw_desc, sizeof p->hw_desc, "%s%s%s", gd, *gd && *hd ? " + " : "", hd);
    if (!*p->host && !p->offload) {
        /* Nothing runs on the host of a GPU-only point: any host profile serves. */
        snprintf(p->host, sizeof p->host, "%s", WS_FIDELITY_HOST);
        snprintf(p->assumed, sizeof p->assumed, "host %s (not published; unused)",
                 WS_FIDELITY_HOST);
    }
    copy_str(p->model, sizeof p->model, o, "model");
    copy_str(p->metric, sizeof p->metric, o, "metric");
    copy_str(p->unit, sizeof p->unit, o, "unit");
    json_t *w = json_object_get(o, "weights");
    if (json_is_string(w))
        copy_str(p->weights_gpu, sizeof p->weights_gpu, o, "weights");
    else {
        copy_str(p->weights_gpu, sizeof p->weights_gpu, w, "gpu_part");
        copy_str(p->weights_cpu, sizeof p->weights_cpu, w, "cpu_experts");
    }
    if (!strcmp(p->weights_cpu, "none"))
        p->weights_cpu[0] = '\0';
    copy_str(p->kv_dtype, sizeof p->kv_dtype, o, "kv_dtype");
    char counts[24];
    copy_str(counts, sizeof counts, o, "throughput_counts");
    if (*counts && strcmp(counts, "output") && strcmp(counts, "prompt+output"))
        return ws_err_set(err, WS_EINVAL,
                          "%s: point '%s': throughput_counts is output or prompt+output", path,
                          p->id);
    p->count_prompt = !strcmp(counts, "prompt+output");
    copy_str(p->offload_what, sizeof p->offload_what, o, "offload_what");
    if (!*p->offload_what)
        snprintf(p->offload_what, sizeof p->offload_what, "%s", p->offload ? "experts" : "none");
    json_t *pl = json_object_get(o, "placement");
    p->all_experts_cpu = json_is_true(json_object_get(pl, "all_experts_cpu"));
    p->one_node = json_is_true(json_object_get(pl, "weights_one_node"));
    if (get_count(o, "batch", 1, &p->batch) || get_count(o, "prompt", -1, &p->prompt) ||
        get_count(o, "output", 0, &p->output) ||
        get_count(pl, "gpu_experts", -1, &p->gpu_experts) ||
        get_count(pl, "n_cpu_moe", -1, &p->n_cpu_moe) ||
        get_count(pl, "n_gpu_layers", -1, &p->n_gpu_layers) ||
        get_count(pl, "sockets_used", 0, &p->cpu_sockets) ||
        get_count(pl, "cpu_infer_threads", 0, &p->cpu_threads) ||
        (!p->cpu_threads && get_count(pl, "cpu_threads", 0, &p->cpu_threads)) ||
        get_count(json_object_get(o, "prompt_range"), "lo", 0, &p->prompt_lo) ||
        get_count(json_object_get(o, "prompt_range"), "hi", 0, &p->prompt_hi))
        return ws_err_set(err, WS_EINVAL,
                          "%s: point '%s': batch, prompt, output and placement counts must be "
                          "whole numbers >= 0",
                          path, p->id);
    char pf[16];
    copy_str(pf, sizeof pf, pl, "prefill");
    p->prefill_mode = *pf ? ws_prefill_mode_parse(pf) : WS_PREFILL_AUTO;
    if (p->prefill_mode < 0)
        return ws_err_set(err, WS_EINVAL, "%s: point '%s': placement.prefill is auto, cpu or gpu",
                          path, p->id);
    json_t *pub = json_object_get(o, "published");
    if (!json_is_number(pub) || !(json_number_value(pub) > 0) || !isfinite(json_number_value(pub)))
        return ws_err_set(err, WS_EINVAL, "%s: point '%s': published must be a number > 0", path,
                          p->id);
    p->published = json_number_value(pub);
    if ((p->prompt_lo || p->prompt_hi) &&
        (p->prompt >= 0 || p->prompt_lo < 1 || p->prompt_hi < p->prompt_lo))
        return ws_err_set(err, WS_EINVAL,
                          "%s: point '%s': prompt_range needs prompt null and 1 <= lo <= hi", path,
                          p->id);
    p->predicted = p->ratio = NAN;
    snprintf(p->group, sizeof p->group, "e2e %s",
             p->offload && p->quantized ? "offload+quantized"
             : p->offload               ? "offload"
             : p->quantized             ? "quantized"
                                        : "gpu-only");
    return 0;
}

int ws_fidelity_load_e2e(const char *path, ws_fid_report *r, ws_err *err)
{
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return ws_err_set(err, json_error_code(&je) == json_error_cannot_open_file ? WS_EIO
                                                                                   : WS_EPARSE,
                          "%s:%d: %s", path, je.line, je.text);
    json_t *arr = json_is_array(root) ? root : json_object_get(root, "points");
    int rc = 0;
    if (!json_is_array(arr))
        rc = ws_err_set(err, WS_EPARSE, "%s: expected an array of points or {\"points\": [...]}",
                        path);
    for (size_t i = 0; !rc && i < json_array_size(arr); i++) {
        ws_fid_point p;
        rc = point_parse(json_array_get(arr, i), path, i, &p, err);
        for (size_t k = 0; !rc && k < r->n; k++)
            if (!strcmp(r->pt[k].id, p.id))
                rc = ws_err_set(err, WS_EINVAL, "%s: two points named '%s'", path, p.id);
        if (!rc)
            rc = ws_fidelity_add(r, &p, err);
    }
    json_decref(root);
    return rc;
}

/* ---- predicting one end-to-end point ------------------------------------------------- */

static const char *const metrics[] = {"decode_tok_s", "tpot_s", "ttft_s", "prefill_tok_s",
                                      "throughput_tok_s"};

/* Prefill time and tokens, summed over the prefill steps. */
typedef struct prefill_acc {
    double s, tokens;
} prefill_acc;

static int on_step(void *ctx, const sim_step_rec *rec, ws_err *err)
{
    (void)err;
    prefill_acc *a = ctx;
    if (rec->prefill_tokens > 0) {
        a->s += rec->t_end - rec->t_start;
        a->tokens += rec->prefill_tokens;
    }
    return 0;
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

static int predict_at(ws_store *s, ws_fid_point *p, int prompt, int output, ws_err *err);

static int predict_one(ws_store *s, ws_fid_point *p, ws_err *err)
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
        return predict_at(s, p, 1, output, err);
    }
    if (p->prompt > 0)
        return predict_at(s, p, p->prompt, output, err);
    /* A decode rate published without its prompt: the rate at the short prompts chat
     * benchmarks use, where it barely depends on the prompt; where it does, not expressed.
     * A source that bounds the prompt (its text, the chat before it) narrows that range. */
    double at[2];
    const int ranged = p->prompt_lo > 0;
    const int lens[2] = {ranged ? p->prompt_lo : WS_FIDELITY_PROMPT_LO,
                         ranged ? p->prompt_hi : WS_FIDELITY_PROMPT_HI};
    const int mid = ranged ? (p->prompt_lo + p->prompt_hi) / 2 : WS_FIDELITY_PROMPT_MID;
    for (int i = 0; i < 2; i++) {
        int rc = predict_at(s, p, lens[i], output, err);
        if (rc || *p->missing)
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
    return predict_at(s, p, mid, output, err);
}

/* The point simulated with `prompt` and `output` tokens per request: predicted and ratio,
 * or missing naming what cannot be expressed. */
static int predict_at(ws_store *s, ws_fid_point *p, int prompt, int output, ws_err *err)
{
    p->predicted = p->ratio = NAN;
    char path[4096];
    ws_model m;
    ws_err e = {0};
    if (ws_model_resolve(p->model, path, sizeof path, &e) || ws_model_load(path, &m, &e)) {
        snprintf(p->missing, sizeof p->missing, "model config '%s'", p->model);
        return 0;
    }
    ws_dtype kv;
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    if (point_dtypes(p, &m, &kv, &cc))
        return 0;
    ws_policy_kind k;
    if (point_policy(p, &m, &k, &cc))
        return 0;
    cc.kv_dtype = kv;
    ws_hw hw;
    int cores = 1;
    int rc = ws_hw_load_model(s, &m, p->gpu, p->host, kv, &hw, &cores, &e);
    if (rc == WS_ENOTFOUND) {
        snprintf(p->missing, sizeof p->missing, "a profile: %.170s", e.msg);
        return 0;
    }
    if (rc)
        return ws_err_set(err, rc, "point '%s': %s", p->id, e.msg);
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
                return ws_err_set(err, e.code, "point '%s': %s", p->id, e.msg);
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
    sim_cfg cfg;
    sim_cfg_default(&cfg);
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
    cc.one_node_memory = p->one_node;
    cfg.keep_steps = cfg.keep_requests = 0;
    prefill_acc acc = {0};
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
        return ws_err_set(err, rc, "point '%s': %s", p->id, e.msg);
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

int ws_fidelity_predict_e2e(ws_store *s, ws_fid_report *r,
                            void (*progress)(void *ctx, size_t done, size_t n), void *ctx,
                            ws_err *err)
{
    for (size_t i = 0; i < r->n; i++) {
        ws_fid_point *p = &r->pt[i];
        if (strcmp(p->kind, "e2e"))
            continue;
        p->missing[0] = p->policy[0] = '\0';
        p->predicted = p->ratio = NAN;
        int rc = predict_one(s, p, err);
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

int ws_fidelity_summarise(ws_fid_report *r, ws_err *err)
{
    free(r->g);
    r->g = NULL;
    r->ng = 0;
    if (!r->n)
        return 0;
    r->g = calloc(r->n, sizeof *r->g);
    double *e = malloc(r->n * sizeof *e);
    if (!r->g || !e) {
        free(e);
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < r->n; i++) {
        size_t k = 0;
        while (k < r->ng && strcmp(r->g[k].group, r->pt[i].group))
            k++;
        if (k == r->ng)
            snprintf(r->g[r->ng++].group, sizeof r->g->group, "%s", r->pt[i].group);
    }
    for (size_t k = 0; k < r->ng; k++) {
        ws_fid_group *g = &r->g[k];
        int n = 0;
        g->worst_err = -1;
        for (size_t i = 0; i < r->n; i++) {
            const ws_fid_point *p = &r->pt[i];
            if (strcmp(p->group, g->group))
                continue;
            g->n++;
            if (!isfinite(p->ratio))
                continue;
            double a = fabs(p->ratio - 1.0);
            e[n++] = a;
            if (a > g->worst_err) {
                g->worst_err = a;
                snprintf(g->worst_id, sizeof g->worst_id, "%s", p->id);
            }
        }
        g->expressed = n;
        if (n) {
            qsort(e, (size_t)n, sizeof *e, cmp_double);
            g->median_err = n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]);
        } else
            g->median_err = g->worst_err = NAN;
    }
    free(e);
    return 0;
}

/* ---- operator points ------------------------------------------------------------------- */

int ws_fidelity_add_ops(ws_store *s, const char *dir, const char *gpu, int heldout,
                        ws_fid_report *r, ws_err *err)
{
    ws_vidur_rows rows = {0};
    ws_hw hw;
    ws_oppoints st;
    const char *paths[] = {dir};
    int rc = ws_oppoints_check(s, paths, 1, gpu, NULL, heldout, 0, &rows, &hw, &st, err);
    for (int i = 0; !rc && i < rows.n; i++) {
        const ws_vidur_row *w = &rows.v[i];
        if (heldout && !w->heldout)
            continue;
        ws_fid_point p;
        memset(&p, 0, sizeof p);
        snprintf(p.kind, sizeof p.kind, "op");
        snprintf(p.id, sizeof p.id, "op-%d-%s-line%d", i, ws_vidur_op_name(w->op), w->line);
        snprintf(p.group, sizeof p.group, "op %s", ws_vidur_group_name(ws_vidur_op_group(w->op)));
        snprintf(p.engine, sizeof p.engine, "Vidur (Kineto)");
        snprintf(p.source, sizeof p.source,
                 "microsoft/vidur data/profiling (MIT), %s: %s row at line %d", dir,
                 ws_vidur_op_name(w->op), w->line);
        snprintf(p.gpu, sizeof p.gpu, "%s", gpu);
        snprintf(p.hw_desc, sizeof p.hw_desc, "NVIDIA A100 80 GB, fp16");
        snprintf(p.metric, sizeof p.metric, "time_s");
        snprintf(p.unit, sizeof p.unit, "s");
        snprintf(p.weights_gpu, sizeof p.weights_gpu, "fp16");
        snprintf(p.offload_what, sizeof p.offload_what, "none");
        p.batch = w->batch;
        p.gpu_experts = p.n_cpu_moe = -1;
        p.published = w->t;
        p.predicted = ws_oppoint_predict(w, &hw, 2.0);
        p.ratio = w->t > 0 ? p.predicted / w->t : NAN;
        rc = ws_fidelity_add(r, &p, err);
    }
    ws_vidur_rows_free(&rows);
    return rc;
}
