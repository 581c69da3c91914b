/* plan_space: a search over configurations (plan_space.h). */
#include "plan_space.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control.h"
#include "model.h"
#include "plan_cmd.h"
#include "policy.h"
#include "profile.h"
#include "ws_util.h"

static const char *const k_knob_names[WS_KNOBS] = {"engine",    "w-gpu",       "w-cpu",  "kv",
                                                   "n-cpu-moe", "gpu-experts", "ngl",    "chunk",
                                                   "prefill",   "threads",     "sockets"};

const char *ws_space_knob_name(int k)
{
    return k >= 0 && k < WS_KNOBS ? k_knob_names[k] : "?";
}

static const char *const k_status_names[WS_SPACE_STATUSES] = {"searched",
                                                              "pruned by the incumbent",
                                                              "alone misses TTFT",
                                                              "alone misses TPOT",
                                                              "a burst misses",
                                                              "alone does not fit",
                                                              "GPU memory",
                                                              "host DRAM",
                                                              "not in the engine's flags"};

const char *ws_space_status_name(int st)
{
    return st >= 0 && st < WS_SPACE_STATUSES ? k_status_names[st] : "?";
}

int ws_plan_space_add(ws_plan_space *sp, int k, const char *text, ws_err *err)
{
    if (k < 0 || k >= WS_KNOBS)
        return ws_err_set(err, WS_EINVAL, "plan: no knob %d", k);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ')
            t++;
        if (!*t)
            continue;
        if (sp->n[k] >= WS_SPACE_MAX)
            return ws_err_set(err, WS_EINVAL, "plan: --%s takes at most %d candidates",
                              k_knob_names[k], WS_SPACE_MAX);
        if (strlen(t) >= sizeof sp->cand[k][0])
            return ws_err_set(err, WS_EINVAL, "plan: --%s '%s': too long", k_knob_names[k], t);
        snprintf(sp->cand[k][sp->n[k]++], sizeof sp->cand[k][0], "%s", t);
    }
    return 0;
}

void ws_space_report_free(ws_space_report *r)
{
    free(r->configs);
    free(r->e);
    free(r->best);
    free(r->frontier);
    memset(r, 0, sizeof *r);
}

/* ---- the candidates ------------------------------------------------------------------ */

#define NCM_FIT (-2) /* n-cpu-moe "fit": resolved per configuration by the memory gate */

/* The engines `auto` stands for: those whose files say how they place experts and KV. */
static const char *const k_auto_engines[] = {
    "none", "llama.cpp", "ik_llama.cpp", "ktransformers", "kt-kernel", "vllm-v1", "sglang"};

/* One knob's resolved candidates: ints, or formats (w-gpu, w-cpu, kv) */
typedef struct knob {
    int n;
    int v[WS_SPACE_MAX];               /* ints; kv: the dtype */
    const ws_wformat *f[WS_SPACE_MAX]; /* formats; kv: the block format or NULL */
} knob;

static int push_int(knob *k, int v)
{
    for (int i = 0; i < k->n; i++)
        if (k->v[i] == v && !k->f[i])
            return 0;
    if (k->n >= WS_SPACE_MAX)
        return 0;
    k->f[k->n] = NULL;
    k->v[k->n++] = v;
    return 0;
}

static void push_fmt(knob *k, const ws_wformat *f, int v)
{
    for (int i = 0; i < k->n; i++)
        if (k->f[i] == f && k->v[i] == v)
            return;
    if (k->n < WS_SPACE_MAX) {
        k->f[k->n] = f;
        k->v[k->n++] = v;
    }
}

static int parse_int(const char *knob_name, const char *t, int lo, int hi, int *out, ws_err *err)
{
    char *end;
    const long v = strtol(t, &end, 10);
    if (*end || end == t || v < lo || v > hi)
        return ws_err_set(err, WS_EINVAL, "plan: --%s '%s': not a whole number in %d..%d",
                          knob_name, t, lo, hi);
    *out = (int)v;
    return 0;
}

/* What the plan's spec runs when a knob is not searched. */
static void spec_value(const ws_plan_spec *s, int k, knob *o)
{
    const ws_deploy_cfg *c = &s->cost;
    switch (k) {
    case WS_KNOB_ENGINE: push_int(o, -1); break;
    case WS_KNOB_W_GPU: push_fmt(o, c->w_gpu, 0); break;
    case WS_KNOB_W_CPU: push_fmt(o, c->w_cpu_experts, 0); break;
    case WS_KNOB_KV: push_fmt(o, c->w_kv, c->kv_dtype); break;
    case WS_KNOB_N_CPU_MOE: push_int(o, c->n_cpu_moe); break;
    case WS_KNOB_GPU_EXPERTS: push_int(o, c->gpu_experts); break;
    case WS_KNOB_NGL: push_int(o, c->n_gpu_layers); break;
    case WS_KNOB_CHUNK: push_int(o, 0); break;
    case WS_KNOB_PREFILL: push_int(o, -1); break;
    case WS_KNOB_THREADS: push_int(o, c->cpu_threads); break;
    case WS_KNOB_SOCKETS: push_int(o, c->cpu_sockets); break;
    }
}

/* A format knob's candidates: names, or auto for the formats the model is published in
 * (none listed: the model's own dtype). */
static int resolve_formats(const char *model, const ws_plan_space *sp, int k, knob *o, ws_err *err)
{
    for (int i = 0; i < sp->n[k]; i++) {
        const char *t = sp->cand[k][i];
        if (!strcmp(t, "auto")) {
            const ws_wformat *f[WS_SPACE_MAX];
            int n = 0, rc = ws_model_published_formats(model, f, WS_SPACE_MAX, &n, err);
            if (rc)
                return rc;
            if (!n)
                push_fmt(o, NULL, 0);
            for (int j = 0; j < n; j++)
                push_fmt(o, f[j], 0);
            continue;
        }
        const ws_wformat *f;
        int rc = ws_wformat_parse(t, &f, err);
        if (rc)
            return ws_err_prefix(err, "plan: --%s", k_knob_names[k]), rc;
        push_fmt(o, f, 0);
    }
    return 0;
}

/* The KV candidates: a dtype (bf16, fp16, fp8) or a block format (q8_0, q4_0: bf16 rates). */
static int resolve_kv(const ws_plan_space *sp, knob *o, ws_err *err)
{
    for (int i = 0; i < sp->n[WS_KNOB_KV]; i++) {
        const char *t = sp->cand[WS_KNOB_KV][i];
        if (!strcmp(t, "auto")) {
            push_fmt(o, NULL, WS_DT_BF16);
            push_fmt(o, ws_wformat_find("q8_0"), WS_DT_BF16);
            continue;
        }
        ws_dtype dt;
        if (ws_dtype_parse(t, &dt) == 0 && dt != WS_DT_FP32) {
            push_fmt(o, NULL, dt);
            continue;
        }
        const ws_wformat *f = ws_wformat_find(t);
        if (!f || !f->quantized)
            return ws_err_set(err, WS_EINVAL,
                              "plan: --kv '%s': bf16, fp16, fp8, or a block format (q8_0, q4_0)",
                              t);
        push_fmt(o, f, WS_DT_BF16);
    }
    return 0;
}

/* An integer knob's candidates; auto and the words each takes. */
static int resolve_ints(const ws_plan_spec *s, const ws_model *m, const ws_hw *hw,
                        const ws_plan_space *sp, int k, knob *o, ws_err *err)
{
    const int L = m->layers, Lm = m->n_moe_layers, E = m->n_experts;
    const int cores = ws_hw_cores(hw), sockets = (int)fmax(1, hw->sockets.v);
    for (int i = 0; i < sp->n[k]; i++) {
        const char *t = sp->cand[k][i];
        const int is_auto = !strcmp(t, "auto");
        int v, rc = 0;
        switch (k) {
        case WS_KNOB_N_CPU_MOE:
            if (is_auto || !strcmp(t, "fit"))
                push_int(o, NCM_FIT);
            if (is_auto) {
                push_int(o, WS_DEPLOY_NO_CPU_MOE);
                push_int(o, 0);
                for (int q = 1; q < 4; q++)
                    if (Lm * q / 4 > 0)
                        push_int(o, Lm * q / 4);
            } else if (!strcmp(t, "fit"))
                ;
            else if (!strcmp(t, "none"))
                push_int(o, WS_DEPLOY_NO_CPU_MOE);
            else if (!strcmp(t, "all"))
                push_int(o, 0);
            else if (!(rc = parse_int("n-cpu-moe", t, 1, Lm > 0 ? Lm : 1, &v, err)))
                push_int(o, v >= Lm ? 0 : v);
            break;
        case WS_KNOB_GPU_EXPERTS:
            if (is_auto) {
                push_int(o, 0);
                for (int d = 16; d >= 4; d /= 2)
                    if (E / d > 0)
                        push_int(o, E / d);
            } else if (!(rc = parse_int("gpu-experts", t, 0, E, &v, err)))
                push_int(o, v);
            break;
        case WS_KNOB_NGL:
            if (is_auto) {
                push_int(o, 0);
                push_int(o, L * 3 / 4);
                push_int(o, L / 2);
            } else if (!strcmp(t, "all"))
                push_int(o, 0);
            else if (!(rc = parse_int("ngl", t, 1, 1 << 20, &v, err)))
                push_int(o, v >= L ? 0 : v);
            break;
        case WS_KNOB_CHUNK:
            if (is_auto) {
                push_int(o, 512);
                push_int(o, 2048);
                push_int(o, 8192);
            } else if (!(rc = parse_int("chunk", t, 16, 1 << 20, &v, err)))
                push_int(o, v);
            break;
        case WS_KNOB_PREFILL:
            if (is_auto)
                push_int(o, WS_PREFILL_AUTO);
            else if ((v = ws_prefill_mode_parse(t)) < 0)
                rc = ws_err_set(err, WS_EINVAL, "plan: --prefill '%s': auto, cpu or gpu", t);
            else
                push_int(o, v);
            break;
        case WS_KNOB_THREADS:
            if (is_auto) {
                push_int(o, 0);
                if (cores >= 4)
                    push_int(o, cores / 2);
            } else if (!strcmp(t, "all"))
                push_int(o, 0);
            else if (!(rc = parse_int("threads", t, 1, cores, &v, err)))
                push_int(o, v == cores ? 0 : v);
            break;
        case WS_KNOB_SOCKETS:
            if (is_auto) {
                push_int(o, 0);
                for (int q = 1; sockets > 1 && q <= sockets; q++)
                    push_int(o, q);
            } else if (!(rc = parse_int("sockets", t, 0, sockets, &v, err)))
                push_int(o, v);
            break;
        }
        if (rc)
            return rc;
    }
    (void)s;
    return 0;
}

/* Every knob's candidates; engines into spec->engines. */
static int resolve(ws_plan_spec *s, const ws_model *m, const ws_hw *hw, const ws_plan_space *sp,
                   knob *k, ws_err *err)
{
    memset(k, 0, sizeof(knob) * WS_KNOBS);
    s->n_engines = 0;
    int rc = 0;
    for (int i = 0; i < sp->n[WS_KNOB_ENGINE] && !rc; i++) {
        const char *t = sp->cand[WS_KNOB_ENGINE][i];
        const int is_auto = !strcmp(t, "auto");
        const int n = is_auto ? (int)(sizeof k_auto_engines / sizeof *k_auto_engines) : 1;
        for (int j = 0; j < n; j++) {
            const char *name = is_auto ? k_auto_engines[j] : t;
            int idx = -1;
            for (int e = 0; e < s->n_engines; e++)
                if (!strcmp(s->engines[e], name))
                    idx = e;
            if (strcmp(name, "none") && idx < 0) {
                if (s->n_engines >= WS_PLAN_MAX_ENGINES)
                    return ws_err_set(err, WS_EINVAL, "plan: at most %d engines",
                                      WS_PLAN_MAX_ENGINES);
                s->engines[idx = s->n_engines++] = name;
            }
            push_int(&k[WS_KNOB_ENGINE], idx);
        }
    }
    if (!rc)
        rc = resolve_formats(m->name, sp, WS_KNOB_W_GPU, &k[WS_KNOB_W_GPU], err);
    if (!rc)
        rc = resolve_formats(m->name, sp, WS_KNOB_W_CPU, &k[WS_KNOB_W_CPU], err);
    if (!rc)
        rc = resolve_kv(sp, &k[WS_KNOB_KV], err);
    for (int q = WS_KNOB_N_CPU_MOE; q < WS_KNOBS && !rc; q++)
        rc = resolve_ints(s, m, hw, sp, q, &k[q], err);
    for (int q = 0; q < WS_KNOBS && !rc; q++)
        if (!k[q].n)
            spec_value(s, q, &k[q]);
    return rc;
}

/* The cartesian product over the GPUs and the knobs; a knob that cannot matter is kept at its
 * first candidate (GPU experts and the CPU experts' format with none on the CPU). */
static int expand(const ws_plan_spec *s, const knob *k, ws_plan_config **out, size_t *n_out,
                  ws_err *err)
{
    size_t total = (size_t)s->n_gpus;
    for (int q = 0; q < WS_KNOBS; q++)
        total *= (size_t)k[q].n;
    if (total > 1000000)
        return ws_err_set(err, WS_EINVAL, "plan: %zu configurations: at most 1,000,000", total);
    ws_plan_config *c = calloc(total ? total : 1, sizeof *c);
    if (!c)
        return ws_err_set(err, WS_ENOMEM, "plan: out of memory");
    size_t n = 0;
    int idx[WS_KNOBS];
    for (int g = 0; g < s->n_gpus; g++) {
        memset(idx, 0, sizeof idx);
        for (;;) {
            const int ncm = k[WS_KNOB_N_CPU_MOE].v[idx[WS_KNOB_N_CPU_MOE]];
            const int moot =
                ncm == WS_DEPLOY_NO_CPU_MOE && (idx[WS_KNOB_GPU_EXPERTS] || idx[WS_KNOB_W_CPU]);
            if (!moot) {
                ws_plan_config *x = &c[n++];
                x->gpu = g;
                x->engine = k[WS_KNOB_ENGINE].v[idx[WS_KNOB_ENGINE]];
                x->w_gpu = k[WS_KNOB_W_GPU].f[idx[WS_KNOB_W_GPU]];
                x->w_cpu = k[WS_KNOB_W_CPU].f[idx[WS_KNOB_W_CPU]];
                x->kv_dtype = (ws_dtype)k[WS_KNOB_KV].v[idx[WS_KNOB_KV]];
                x->w_kv = k[WS_KNOB_KV].f[idx[WS_KNOB_KV]];
                x->n_cpu_moe = ncm;
                x->gpu_experts = k[WS_KNOB_GPU_EXPERTS].v[idx[WS_KNOB_GPU_EXPERTS]];
                x->n_gpu_layers = k[WS_KNOB_NGL].v[idx[WS_KNOB_NGL]];
                x->chunk = k[WS_KNOB_CHUNK].v[idx[WS_KNOB_CHUNK]];
                x->prefill_mode = k[WS_KNOB_PREFILL].v[idx[WS_KNOB_PREFILL]];
                x->cpu_threads = k[WS_KNOB_THREADS].v[idx[WS_KNOB_THREADS]];
                x->cpu_sockets = k[WS_KNOB_SOCKETS].v[idx[WS_KNOB_SOCKETS]];
            }
            int q = 0;
            while (q < WS_KNOBS && ++idx[q] == k[q].n)
                idx[q++] = 0;
            if (q == WS_KNOBS)
                break;
        }
    }
    *out = c;
    *n_out = n;
    return 0;
}

/* ---- the gates ----------------------------------------------------------------------- */

/* The configuration as plan_cmd.h takes it. */
static void cmd_cfg_of(const ws_space_report *r, const ws_plan_config *c, ws_plan_cmd_cfg *o)
{
    memset(o, 0, sizeof *o);
    o->model = r->model;
    o->n_layers = r->n_layers;
    o->n_moe_layers = r->n_moe_layers;
    o->n_experts = r->n_experts;
    o->w_gpu = c->w_gpu ? c->w_gpu->name : NULL;
    o->w_cpu_experts = c->w_cpu ? c->w_cpu->name : NULL;
    o->kv = c->w_kv ? c->w_kv->name : ws_dtype_name(c->kv_dtype);
    o->n_cpu_moe = c->n_cpu_moe;
    o->gpu_experts = c->gpu_experts;
    o->n_gpu_layers = c->n_gpu_layers;
    o->chunk = c->chunk;
    o->cpu_threads = c->cpu_threads;
    o->cpu_sockets = c->cpu_sockets;
    o->max_seqs = r->max_seqs;
    o->ctx = r->engine_ctx;
}

int ws_space_command(const ws_space_report *r, size_t i, char *buf, size_t cap, ws_err *err)
{
    if (i >= r->n_e)
        return ws_err_set(err, WS_EINVAL, "plan: no entry %zu", i);
    const ws_plan_config *c = &r->configs[r->e[i].config];
    if (c->engine < 0)
        return ws_err_set(err, WS_EINVAL, "plan: a configuration with no engine has no command");
    ws_plan_cmd_cfg cc;
    cmd_cfg_of(r, c, &cc);
    return ws_plan_cmd_render(r->engines[c->engine], &cc, buf, cap, err);
}

/* The longest context one sequence's KV fits in the tiers (sim/serve.c's need()): no-spill
 * policies keep it in the GPU's budget, spilling ones beyond the window in host DRAM and,
 * at r = 0, all of it pinned. */
static double ctx_tokens(const sim_memory *m, int spills, double window)
{
    const double g = m->kv_gpu_token, h = m->kv_host_token;
    const double host = m->host_mem - m->host_weights;
    double t = INFINITY;
    if (!spills) {
        if (g > 0)
            t = fmin(t, m->gpu_kv / g);
        if (h > 0)
            t = fmin(t, host / h);
    } else {
        if (g * window > m->gpu_kv)
            return 0;
        if (g + h > 0)
            t = fmin(t, host / (g + h));
        if (g > 0)
            t = fmin(t, m->pinned / g);
    }
    return isfinite(t) ? fmax(0, floor(t)) : 0;
}

static int cmp_int_desc(const void *a, const void *b)
{
    const int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

/* A set of block hashes (open addressing; 0 marks an empty slot, so hash 0 is kept apart). */
typedef struct hset {
    uint64_t *v;
    size_t cap, n;
    int has_zero;
} hset;

/* 1 when x is in h, else 0 (-1: out of memory); add: then puts it in. */
static int hset_has_add(hset *h, uint64_t x, int add, ws_err *err)
{
    if (!x) {
        const int had = h->has_zero;
        h->has_zero |= add;
        return had;
    }
    if (add && 2 * (h->n + 1) > h->cap) {
        hset g = {.cap = h->cap ? 2 * h->cap : 1024, .has_zero = h->has_zero};
        if (!(g.v = calloc(g.cap, sizeof *g.v)))
            return ws_err_set(err, WS_ENOMEM, "plan: out of memory"), -1;
        for (size_t i = 0; i < h->cap; i++)
            if (h->v[i])
                hset_has_add(&g, h->v[i], 1, err);
        free(h->v);
        *h = g;
    }
    if (!h->cap)
        return 0;
    size_t i = (size_t)(x * 0x9e3779b97f4a7c15ull) & (h->cap - 1);
    while (h->v[i] && h->v[i] != x)
        i = (i + 1) & (h->cap - 1);
    if (h->v[i])
        return 1;
    if (add)
        h->v[i] = x, h->n++;
    return 0;
}

/* The tokens of a prompt no earlier request's blocks cover: prefix caching's best case
 * (blocks seen before, in order from the first, are cached); -1: out of memory. */
static int novel_tokens(hset *seen, const ws_trace_req *q, ws_err *err)
{
    int lead = 0, rc = 0;
    while (lead < q->n_blocks && (rc = hset_has_add(seen, (uint64_t)q->blocks[lead], 0, err)) == 1)
        lead++;
    for (int i = 0; i < q->n_blocks && rc >= 0; i++)
        rc = hset_has_add(seen, (uint64_t)q->blocks[i], 1, err);
    if (rc < 0)
        return -1;
    const long long cached = (long long)lead * WS_TRACE_BLOCK_TOKENS;
    return cached >= q->prompt_tokens ? 1 : (int)(q->prompt_tokens - cached);
}

/* What the bounds run, from the workload's requests. */
typedef struct bounds {
    long long prompt, novel;    /* the (a+1)-th longest prompt; of the tokens no earlier
                                 * request cached */
    int output;                 /* the median output, at most 32 */
    int longest;                /* the longest prompt + the longest output, tokens */
    int allowed;                /* a: the misses the SLO's percentile allows */
    int *sorted, *sorted_novel; /* every prompt, longest first (owned; NULL for users) */
    size_t n;
    char *burst[2]; /* the largest burst as Mooncake JSONL: prompts, novel tokens */
    size_t burst_len[2];
    int burst_requests;
    long long burst_tokens;
} bounds;

static void bounds_free(bounds *b)
{
    free(b->sorted);
    free(b->sorted_novel);
    free(b->burst[0]);
    free(b->burst[1]);
    memset(b, 0, sizeof *b);
}

/* One request of a burst as it was read. */
typedef struct breq {
    int prompt, output, novel, n_blocks;
    int64_t *blocks;
} breq;

/* The burst q[0..n) as JSONL into *out (v 0: prompts and block hashes; 1: novel tokens). */
static int burst_text(const breq *q, int n, int v, char **out, size_t *len, ws_err *err)
{
    size_t cap = 256;
    for (int i = 0; i < n; i++)
        cap += 96 + (v ? 0 : (size_t)q[i].n_blocks * 22);
    char *t = malloc(cap);
    if (!t)
        return ws_err_set(err, WS_ENOMEM, "plan: out of memory");
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        k += (size_t)snprintf(t + k, cap - k,
                              "{\"timestamp\": 0, \"input_length\": %d, \"output_length\": %d",
                              v ? q[i].novel : q[i].prompt, q[i].output);
        if (!v) {
            k += (size_t)snprintf(t + k, cap - k, ", \"hash_ids\": [");
            for (int j = 0; j < q[i].n_blocks; j++)
                k += (size_t)snprintf(t + k, cap - k, "%s%lld", j ? ", " : "",
                                      (long long)q[i].blocks[j]);
            k += (size_t)snprintf(t + k, cap - k, "]");
        }
        k += (size_t)snprintf(t + k, cap - k, "}\n");
    }
    free(*out);
    *out = t;
    *len = k;
    return 0;
}

/* The burst q[0..n) ended: kept when it has the most prompt tokens (v 0) or novel tokens
 * (v 1) of the bursts of two or more so far. */
static int burst_end(bounds *b, breq *q, int n, long long best[2], ws_err *err)
{
    long long tok[2] = {0, 0};
    for (int i = 0; i < n; i++)
        tok[0] += q[i].prompt, tok[1] += q[i].novel;
    int rc = 0;
    for (int v = 0; v < 2 && !rc && n > 1; v++)
        if (tok[v] > best[v]) {
            best[v] = tok[v];
            rc = burst_text(q, n, v, &b->burst[v], &b->burst_len[v], err);
            if (!v)
                b->burst_requests = n, b->burst_tokens = tok[0];
        }
    for (int i = 0; i < n; i++)
        free(q[i].blocks);
    return rc;
}

/* The workload's bounds (see bounds): rates read the trace's or the generator's requests;
 * users are one prompt. */
static int bounds_of(const ws_plan_spec *s, bounds *b, ws_err *err)
{
    memset(b, 0, sizeof *b);
    if (s->load == WS_PLAN_USERS) {
        b->prompt = b->novel = s->prompt;
        b->output = s->output < 32 ? s->output : 32;
        b->longest = s->prompt + s->output;
        return 0;
    }
    ws_trace *t;
    int rc;
    if (s->trace)
        rc = ws_trace_open(s->trace, &s->topts, &t, err);
    else {
        ws_trace_gen g = s->gen;
        g.requests = s->requests ? s->requests : 200;
        g.seed = s->seed;
        rc = ws_trace_gen_open(&g, &t, err);
    }
    if (rc)
        return rc;
    int *p = NULL, *o = NULL, *v = NULL, nq = 0, capq = 0;
    breq *q = NULL;
    size_t n = 0, cap = 0;
    long long best[2] = {0, 0};
    double at = -1;
    ws_trace_req r;
    hset seen = {0};
    while ((!s->requests || n < s->requests) && (rc = ws_trace_next(t, &r, err)) == 1) {
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            int *x = realloc(p, cap * sizeof *x), *y = x ? realloc(o, cap * sizeof *y) : NULL;
            int *z = y ? realloc(v, cap * sizeof *z) : NULL;
            if (x)
                p = x;
            if (y)
                o = y;
            if (!x || !y || !z) {
                rc = ws_err_set(err, WS_ENOMEM, "plan: out of memory");
                break;
            }
            v = z;
        }
        p[n] = r.prompt_tokens;
        o[n] = r.output_tokens;
        if ((v[n] = novel_tokens(&seen, &r, err)) < 0) {
            rc = -1;
            break;
        }
        if (r.arrival_s != at) {
            const int ended = nq;
            nq = 0; /* burst_end frees their blocks */
            if ((rc = burst_end(b, q, ended, best, err)))
                break;
            nq = 0, at = r.arrival_s;
            rc = 1;
        }
        if (nq == capq) {
            capq = capq ? 2 * capq : 16;
            breq *w = realloc(q, (size_t)capq * sizeof *w);
            if (!w) {
                rc = ws_err_set(err, WS_ENOMEM, "plan: out of memory");
                break;
            }
            q = w;
        }
        breq *e = &q[nq++];
        *e = (breq){r.prompt_tokens, r.output_tokens, v[n], r.n_blocks, NULL};
        if (r.n_blocks && (e->blocks = malloc(sizeof(int64_t) * (size_t)r.n_blocks)))
            memcpy(e->blocks, r.blocks, sizeof(int64_t) * (size_t)r.n_blocks);
        else
            e->n_blocks = 0;
        n++;
    }
    rc = rc < 0 ? err->code : rc == 1 ? 0 : rc;
    if (!rc)
        rc = burst_end(b, q, nq, best, err);
    else
        for (int i = 0; i < nq; i++)
            free(q[i].blocks);
    free(q);
    free(seen.v);
    ws_trace_close(t);
    if (!rc && !n)
        rc = ws_err_set(err, WS_EINVAL, "plan: the workload has no request");
    if (!rc) {
        qsort(p, n, sizeof *p, cmp_int_desc);
        qsort(o, n, sizeof *o, cmp_int_desc);
        qsort(v, n, sizeof *v, cmp_int_desc);
        const size_t a = (size_t)floor((double)n * (1 - s->slo_pct / 100) + 1e-9);
        b->allowed = (int)a;
        b->longest = p[0] + o[0];
        b->prompt = p[a < n ? a : n - 1];
        b->novel = v[a < n ? a : n - 1];
        b->output = o[n / 2] < 32 ? o[n / 2] : 32;
        if (b->output < 2)
            b->output = 2;
        b->sorted = p, b->sorted_novel = v, b->n = n;
        p = v = NULL;
    }
    free(p);
    free(o);
    free(v);
    if (rc)
        bounds_free(b);
    return rc;
}

/* ---- the driver ---------------------------------------------------------------------- */

typedef struct driver {
    ws_plan_spec *s;
    const bounds *b;
    ws_plan *P;
    ws_plan_round_fn round;
    void *ctx;
    ws_space_report *rep;
    ws_err *err;
} driver;

static int eval(driver *d, const ws_plan_point *pts, int n, ws_plan_result *out)
{
    if (!n)
        return 0;
    d->rep->rounds++;
    d->rep->sims += n;
    memset(out, 0, (size_t)n * sizeof *out);
    return d->round ? d->round(d->ctx, d->P, pts, n, out, d->err)
                    : ws_plan_eval_points(d->P, pts, n, out, d->err);
}

static ws_plan_point point_of(const ws_space_entry *e, const ws_plan_config *c)
{
    return (ws_plan_point){
        .kind = WS_PLAN_PT_LOAD, .gpu = c->gpu, .policy = e->policy, .config = e->config};
}

/* n-cpu-moe "fit": the fewest MoE layers whose experts stay on the CPU for the rest of the
 * configuration to fit the GPU (none when all fit, every layer when even that does not),
 * bisected on the memory gate's own arithmetic with a policy that runs experts on the CPU. */
static int fit_cpu_moe(driver *d, const ws_space_entry *e, ws_plan_config *c)
{
    ws_plan_point pt = point_of(e, c);
    if (!ws_policy_info_of((ws_policy_kind)pt.policy)->cpu_experts)
        pt.policy = WS_POLICY_KTRANS;
    sim_memory m;
    int lo = 1, hi = d->rep->n_moe_layers, rc;
    c->n_cpu_moe = WS_DEPLOY_NO_CPU_MOE;
    if ((rc = ws_plan_memory(d->P, &pt, &m, d->err)) || m.gpu_fits)
        return rc;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        c->n_cpu_moe = mid;
        if ((rc = ws_plan_memory(d->P, &pt, &m, d->err)))
            return rc;
        if (m.gpu_fits)
            hi = mid;
        else
            lo = mid + 1;
    }
    c->n_cpu_moe = lo >= d->rep->n_moe_layers ? 0 : lo;
    return 0;
}

/* Gate 1: the engine's flags and memory. */
static int gate_memory(driver *d)
{
    ws_space_report *r = d->rep;
    sim_cfg dflt;
    sim_cfg_default(&dflt);
    for (size_t i = 0; i < r->n_e; i++) {
        ws_space_entry *e = &r->e[i];
        ws_plan_config *c = &r->configs[e->config];
        int rc = c->n_cpu_moe == NCM_FIT ? fit_cpu_moe(d, e, c) : 0;
        if (rc)
            return rc;
        if (c->engine >= 0) {
            ws_plan_cmd_cfg cc;
            cmd_cfg_of(r, c, &cc);
            d->err->code = 0;
            const int ok =
                ws_plan_cmd_supports(d->s->engines[c->engine], &cc, e->why, sizeof e->why, d->err);
            if (!ok && d->err->code)
                return d->err->code;
            if (!ok) {
                e->status = WS_SPACE_UNEXPRESSED;
                continue;
            }
        }
        ws_plan_point pt = point_of(e, c);
        if ((rc = ws_plan_memory(d->P, &pt, &e->mem, d->err)))
            return rc;
        e->ctx_tokens = ctx_tokens(&e->mem, ws_policy_info_of(e->policy)->spills, dflt.window);
        e->status = !e->mem.gpu_fits    ? WS_SPACE_MEM_GPU
                    : !e->mem.host_fits ? WS_SPACE_MEM_HOST
                                        : WS_SPACE_SEARCHED;
    }
    return 0;
}

#define ROUND_MAX 256 /* points per round of the bound */

/* The lone request: out of memory, or over an SLO, and no load meets. */
static void alone_status(const driver *d, ws_space_entry *e, const ws_plan_point *pt,
                         const ws_plan_result *res)
{
    const ws_plan_spec *s = d->s;
    e->alone = *res;
    memcpy(e->busy, res->busy, sizeof e->busy);
    e->alone_prompt = pt->context;
    if (res->oom)
        e->status = WS_SPACE_BOUND_OOM;
    else if (s->slo_ttft > 0 && res->ttft_q > s->slo_ttft)
        e->status = WS_SPACE_BOUND_TTFT;
    else if (s->slo_tpot > 0 && res->tpot_q > s->slo_tpot)
        e->status = WS_SPACE_BOUND_TPOT;
}

/* The largest burst alone: more misses than the SLO allows, and no load meets. */
static void burst_status(const driver *d, ws_space_entry *e, const ws_plan_result *res)
{
    e->burst = *res;
    const double misses = (double)res->requests * (1 - res->attain);
    if (misses > d->b->allowed + 1e-9)
        e->status = WS_SPACE_BOUND_BURST;
}

/* Gate 2 for every entry still in: the lone request (with prefix caching, its tokens no
 * earlier request cached), then the largest burst. */
static int gate_bound(driver *d)
{
    ws_space_report *r = d->rep;
    ws_plan_point pts[ROUND_MAX];
    ws_plan_result res[ROUND_MAX];
    int who[ROUND_MAX];
    for (int pass = 0; pass < 2; pass++) {
        size_t i = 0;
        while (i < r->n_e) {
            int n = 0;
            for (; i < r->n_e && n < ROUND_MAX; i++) {
                ws_space_entry *e = &r->e[i];
                if (e->status != WS_SPACE_SEARCHED)
                    continue;
                pts[n] = point_of(e, &r->configs[e->config]);
                const int prefix = ws_plan_prefix_cache(d->P, &pts[n]);
                if (pass && !d->s->burst[prefix])
                    continue;
                pts[n].kind = pass ? WS_PLAN_PT_BURST : WS_PLAN_PT_ALONE;
                pts[n].context = prefix ? d->b->novel : d->b->prompt;
                pts[n].batch = pass ? prefix : d->b->output;
                who[n++] = (int)i;
            }
            int rc = eval(d, pts, n, res);
            if (rc)
                return rc;
            r->alone_sims += n;
            for (int j = 0; j < n; j++)
                if (pass)
                    burst_status(d, &r->e[who[j]], &res[j]);
                else
                    alone_status(d, &r->e[who[j]], &pts[j], &res[j]);
        }
    }
    return 0;
}

/* Gate 3's order within a group: (engine, policy, GPU), then the bounds' results, best
 * first, so that the incumbent rises early and prunes the rest. */
static const ws_space_report *g_sort_rep;
static int by_group(const void *a, const void *b)
{
    const ws_space_entry *x = &g_sort_rep->e[*(const int *)a], *y = &g_sort_rep->e[*(const int *)b];
    const ws_plan_config *cx = &g_sort_rep->configs[x->config],
                         *cy = &g_sort_rep->configs[y->config];
    if (cx->engine != cy->engine)
        return cx->engine - cy->engine;
    if (x->policy != y->policy)
        return x->policy - y->policy;
    if (cx->gpu != cy->gpu)
        return cx->gpu - cy->gpu;
    /* the burst alone is the workload's hardest instant: the most of it within the SLOs,
     * then its TTFT, first */
    if (x->burst.requests && y->burst.requests) {
        if (x->burst.attain != y->burst.attain)
            return x->burst.attain > y->burst.attain ? -1 : 1;
        if (x->burst.ttft_q != y->burst.ttft_q)
            return x->burst.ttft_q < y->burst.ttft_q ? -1 : 1;
    }
    if (x->alone.tpot_q != y->alone.tpot_q)
        return x->alone.tpot_q < y->alone.tpot_q ? -1 : 1;
    if (x->alone.ttft_q != y->alone.ttft_q)
        return x->alone.ttft_q < y->alone.ttft_q ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

typedef struct active {
    int entry;
    ws_plan_bisect b;
} active;

typedef struct group {
    int lo, hi, next; /* its entries: order[lo..hi) */
    active a[WS_SPACE_ACTIVE];
    int n_active;
} group;

/* The load a configuration must beat: the best of its group's ended searches whose context
 * is at least its own (a configuration holding longer contexts may sit on the frontier). */
static double incumbent(const ws_space_report *r, const int *order, const group *g,
                        const ws_space_entry *e)
{
    double best = 0;
    for (int k = g->lo; k < g->next; k++) {
        const ws_space_entry *f = &r->e[order[k]];
        int running = 0;
        for (int j = 0; j < g->n_active; j++)
            running |= g->a[j].entry == order[k];
        if (!running && f->status == WS_SPACE_SEARCHED && f->ctx_tokens >= e->ctx_tokens)
            best = fmax(best, f->best.max_load);
    }
    return best;
}

static void finish(ws_space_report *r, group *g, int j)
{
    active *a = &g->a[j];
    ws_space_entry *e = &r->e[a->entry];
    const ws_plan_config *c = &r->configs[e->config];
    e->best = (ws_plan_best){.gpu = c->gpu,
                             .policy = e->policy,
                             .max_load = a->b.lo,
                             .capped = a->b.capped,
                             .at = a->b.at_lo,
                             .miss_load = a->b.hi,
                             .miss = a->b.at_hi,
                             .evals = a->b.evals};
    g->a[j] = g->a[--g->n_active];
}

static int gate_search(driver *d)
{
    ws_space_report *r = d->rep;
    const ws_plan_spec *s = d->s;
    int n_in = 0;
    for (size_t i = 0; i < r->n_e; i++)
        n_in += r->e[i].status == WS_SPACE_SEARCHED;
    int *order = malloc(sizeof(int) * (size_t)(n_in ? n_in : 1));
    group *gs = calloc((size_t)(n_in ? n_in : 1), sizeof *gs);
    ws_plan_point *pts = malloc(sizeof *pts * (size_t)(n_in ? n_in : 1) * WS_SPACE_ACTIVE);
    ws_plan_result *res = malloc(sizeof *res * (size_t)(n_in ? n_in : 1) * WS_SPACE_ACTIVE);
    int *who = malloc(sizeof(int) * 2 * (size_t)(n_in ? n_in : 1) * WS_SPACE_ACTIVE);
    if (!order || !gs || !pts || !res || !who) {
        free(order), free(gs), free(pts), free(res), free(who);
        return ws_err_set(d->err, WS_ENOMEM, "plan: out of memory");
    }
    int n = 0, ng = 0;
    for (size_t i = 0; i < r->n_e; i++)
        if (r->e[i].status == WS_SPACE_SEARCHED)
            order[n++] = (int)i;
    g_sort_rep = r;
    qsort(order, (size_t)n, sizeof *order, by_group);
    for (int k = 0; k < n; k++) {
        const ws_space_entry *e = &r->e[order[k]];
        const ws_plan_config *c = &r->configs[e->config];
        const ws_space_entry *p = k ? &r->e[order[k - 1]] : NULL;
        const ws_plan_config *pc = p ? &r->configs[p->config] : NULL;
        if (!p || pc->engine != c->engine || p->policy != e->policy || pc->gpu != c->gpu)
            gs[ng++] = (group){.lo = k, .hi = k, .next = k};
        gs[ng - 1].hi = k + 1;
    }
    const int users = s->load == WS_PLAN_USERS;
    const double start = ws_plan_load_start(s, r->native_rate);
    int rc = 0;
    for (;;) {
        int np = 0;
        for (int gi = 0; gi < ng; gi++) {
            group *g = &gs[gi];
            for (;;) {
                while (g->n_active < WS_SPACE_ACTIVE && g->next < g->hi) {
                    ws_space_entry *e = &r->e[order[g->next]];
                    active *a = &g->a[g->n_active++];
                    a->entry = order[g->next++];
                    e->incumbent = incumbent(r, order, g, e);
                    const double x0 =
                        e->incumbent > 0 ? e->incumbent * (users ? 1 : 1 + s->tol) + (users ? 1 : 0)
                                         : start;
                    if (users)
                        ws_plan_bisect_init(&a->b, x0, 1, s->max_users, 0, 1);
                    else
                        ws_plan_bisect_init(&a->b, x0, 1e-6, s->max_rate, s->tol, 0);
                }
                int ended = 0;
                for (int j = 0; j < g->n_active; j++) {
                    const double x = ws_plan_bisect_next(&g->a[j].b);
                    if (g->a[j].b.done) {
                        finish(r, g, j);
                        ended = 1;
                        break;
                    }
                    ws_space_entry *e = &r->e[g->a[j].entry];
                    /* one point per search per round: skip those already given one */
                    int seen = 0;
                    for (int q = 0; q < np; q++)
                        seen |= who[2 * q] == gi && who[2 * q + 1] == g->a[j].entry;
                    if (seen)
                        continue;
                    pts[np] = point_of(e, &r->configs[e->config]);
                    pts[np].load = x;
                    /* Only the verdict matters when a miss ends the configuration (its first
                     * point, against the incumbent) or only lowers the bisection's upper end
                     * (a load has met). */
                    pts[np].verdict =
                        (g->a[j].b.evals == 0 && e->incumbent > 0) || g->a[j].b.lo > 0;
                    who[2 * np] = gi;
                    who[2 * np + 1] = g->a[j].entry;
                    np++;
                }
                if (!ended)
                    break;
            }
        }
        if (!np)
            break;
        if ((rc = eval(d, pts, np, res)))
            break;
        for (int q = 0; q < np; q++) {
            group *g = &gs[who[2 * q]];
            for (int j = 0; j < g->n_active; j++) {
                if (g->a[j].entry != who[2 * q + 1])
                    continue;
                ws_space_entry *e = &r->e[g->a[j].entry];
                const int first = g->a[j].b.evals == 0;
                ws_plan_bisect_update(&g->a[j].b, pts[q].load, &res[q]);
                if (first && e->incumbent > 0 && !res[q].meets) {
                    e->status = WS_SPACE_PRUNED;
                    g->a[j].b.done = 1;
                }
                break;
            }
        }
        if (s->progress) {
            int open = 0;
            for (int gi = 0; gi < ng; gi++)
                open += gs[gi].n_active + (gs[gi].hi - gs[gi].next);
            s->progress(s->progress_ctx, r->rounds, r->sims, open);
        }
    }
    free(order), free(gs), free(pts), free(res), free(who);
    return rc;
}

/* ---- the answer ---------------------------------------------------------------------- */

static double goodput_of(const ws_plan_spec *s, const ws_space_entry *e)
{
    return e->status == WS_SPACE_SEARCHED ? ws_plan_goodput(s, &e->best) : 0;
}

static double price_of(const ws_plan_spec *s, const ws_space_report *r, const ws_space_entry *e)
{
    return s->price[r->configs[e->config].gpu];
}

static const ws_plan_spec *g_front_spec;
static const ws_space_report *g_front_rep;
static int by_goodput(const void *a, const void *b)
{
    const double x = goodput_of(g_front_spec, &g_front_rep->e[*(const int *)a]);
    const double y = goodput_of(g_front_spec, &g_front_rep->e[*(const int *)b]);
    return (x < y) - (x > y);
}

/* The best per (engine, policy) and the frontier: goodput against $/h when every GPU has a
 * price, else against the context one sequence fits. */
static int answer(const ws_plan_spec *s, ws_space_report *r, ws_err *err)
{
    const int np = WS_POLICY_COUNT, ne = s->n_engines + 1;
    r->best = malloc(sizeof(int) * (size_t)(np * ne));
    r->frontier = malloc(sizeof(int) * (r->n_e ? r->n_e : 1));
    if (!r->best || !r->frontier)
        return ws_err_set(err, WS_ENOMEM, "plan: out of memory");
    for (int i = 0; i < np * ne; i++)
        r->best[i] = -1;
    r->frontier_price = 1;
    for (int g = 0; g < s->n_gpus; g++)
        r->frontier_price &= s->price[g] > 0;
    for (size_t i = 0; i < r->n_e; i++) {
        const ws_space_entry *e = &r->e[i];
        r->count[e->status]++;
        if (!(goodput_of(s, e) > 0))
            continue;
        int *b = &r->best[(r->configs[e->config].engine + 1) * np + e->policy];
        if (*b < 0 || goodput_of(s, e) > goodput_of(s, &r->e[*b]))
            *b = (int)i;
        int dominated = 0;
        for (size_t j = 0; j < r->n_e && !dominated; j++) {
            const ws_space_entry *f = &r->e[j];
            const double gi = goodput_of(s, e), gj = goodput_of(s, f);
            if (j == i || !(gj > 0))
                continue;
            const double ci = r->frontier_price ? -price_of(s, r, e) : e->ctx_tokens;
            const double cj = r->frontier_price ? -price_of(s, r, f) : f->ctx_tokens;
            dominated = gj >= gi && cj >= ci && (gj > gi || cj > ci || j < i);
        }
        if (!dominated)
            r->frontier[r->n_frontier++] = (int)i;
    }
    g_front_spec = s;
    g_front_rep = r;
    qsort(r->frontier, (size_t)r->n_frontier, sizeof(int), by_goodput);
    return 0;
}

static const char *const k_res_words[4] = {"GPU compute", "PCIe host-to-device copies",
                                           "PCIe device-to-host copies", "the CPU"};

/* The entry closest to meeting: of those with a lone request, the least over the SLOs;
 * else the least over the GPU's memory. */
static int closest(const ws_plan_spec *s, const ws_space_report *r)
{
    int best = -1;
    double bv = INFINITY;
    for (size_t i = 0; i < r->n_e; i++) {
        const ws_space_entry *e = &r->e[i];
        if (e->status >= WS_SPACE_BOUND_OOM)
            continue;
        double v = 0;
        if (s->slo_ttft > 0)
            v = fmax(v, e->alone.ttft_q / s->slo_ttft);
        if (s->slo_tpot > 0)
            v = fmax(v, e->alone.tpot_q / s->slo_tpot);
        if (v < bv)
            bv = v, best = (int)i;
    }
    if (best >= 0)
        return best;
    for (size_t i = 0; i < r->n_e; i++) {
        const ws_space_entry *e = &r->e[i];
        if (e->status != WS_SPACE_MEM_GPU && e->status != WS_SPACE_MEM_HOST &&
            e->status != WS_SPACE_BOUND_OOM)
            continue;
        const double v = e->mem.gpu_weights + e->mem.gpu_kv - e->mem.gpu_mem +
                         fmax(0, e->mem.host_weights - e->mem.host_mem);
        if (v < bv)
            bv = v, best = (int)i;
    }
    return best;
}

/* What binds when nothing met, in words, from the closest entry. */
static void binding(const ws_plan_spec *s, ws_space_report *r, int c)
{
    char *b = r->binding;
    const size_t cap = sizeof r->binding;
    if (c < 0) {
        snprintf(b, cap, "no configuration the engines' flags can express");
        return;
    }
    const ws_space_entry *e = &r->e[c];
    if (e->status == WS_SPACE_MEM_GPU) {
        snprintf(b, cap, "GPU memory: %.1f GB of weights + %.1f GB of KV budget > %.1f GB",
                 e->mem.gpu_weights / 1e9, e->mem.gpu_kv / 1e9, e->mem.gpu_mem / 1e9);
        return;
    }
    if (e->status == WS_SPACE_MEM_HOST || e->status == WS_SPACE_BOUND_OOM) {
        snprintf(b, cap, "host DRAM: %.1f GB of CPU weights in %.1f GB%s",
                 e->mem.host_weights / 1e9, e->mem.host_mem / 1e9,
                 e->status == WS_SPACE_BOUND_OOM ? ", and the longest prompts' KV" : "");
        return;
    }
    if (e->status == WS_SPACE_BOUND_BURST) {
        const ws_plan_result *q = &e->burst;
        int rb = 0;
        for (int k = 1; k < 4; k++)
            if (q->busy[k] > q->busy[rb])
                rb = k;
        snprintf(b, cap,
                 "arrivals together: the %d requests that arrive at one instant (%lld prompt "
                 "tokens; they stay together at any rate) run alone, and %.0f of them miss "
                 "(p TTFT %.2f s, TPOT %.1f ms), more than the %d the percentile allows; "
                 "busiest: %s",
                 r->burst_requests, r->burst_tokens, (double)q->requests * (1 - q->attain),
                 q->ttft_q, 1e3 * q->tpot_q, r->allowed, k_res_words[rb]);
        return;
    }
    int res = 0;
    for (int k = 1; k < 4; k++)
        if (e->busy[k] > e->busy[res])
            res = k;
    char share[120] = "";
    if (isfinite(r->alone_miss_pct)) {
        if (r->alone_ok_prompt > 0)
            snprintf(share, sizeof share,
                     "; alone, %.1f%% of the requests miss (every prompt longer than %d tokens)",
                     r->alone_miss_pct, r->alone_ok_prompt);
        else
            snprintf(share, sizeof share, "; alone, %.1f%% of the requests miss (every one)",
                     r->alone_miss_pct);
    }
    const int ttft = s->slo_ttft > 0 && e->alone.ttft_q > s->slo_ttft;
    const int tpot = s->slo_tpot > 0 && e->alone.tpot_q > s->slo_tpot;
    if (ttft || tpot)
        snprintf(b, cap,
                 "%s%s%s: a %lld-token prompt%s alone takes %.2f s to its first token (SLO "
                 "%.2f s) and %.1f ms per output token (SLO %.1f ms); busiest: %s%s",
                 ttft ? "TTFT (prefill)" : "", ttft && tpot ? " and " : "", tpot ? "TPOT" : "",
                 e->alone_prompt, r->alone_novel ? " (its tokens no earlier request cached)" : "",
                 e->alone.ttft_q, s->slo_ttft, 1e3 * e->alone.tpot_q, 1e3 * s->slo_tpot,
                 k_res_words[res], share);
    else
        snprintf(b, cap,
                 "load: the request at the percentile meets alone (TTFT %.2f s, TPOT %.1f ms), "
                 "but at the lowest rate tried %.1f%% of requests miss (p TTFT %.2f s, TPOT "
                 "%.1f ms): requests that arrive together queue behind each other's prefill",
                 e->alone.ttft_q, 1e3 * e->alone.tpot_q, 100 * (1 - e->best.miss.attain),
                 e->best.miss.ttft_q, 1e3 * e->best.miss.tpot_q);
}

/* ---- one configuration on its own (the share missing alone, the smallest change) ------- */

static int run_gates(driver *d);

/* The share of the workload's requests that miss even alone on entry ci's configuration:
 * the prompts (longest first; with prefix caching their tokens no earlier request cached)
 * bisected for the longest that meets alone; a longer one only takes longer. */
static int alone_share(ws_store *store, const ws_plan_spec *s0, ws_space_report *r, int ci,
                       const bounds *bd, ws_err *err)
{
    const ws_space_entry *e = &r->e[ci];
    ws_plan_spec s = *s0;
    ws_plan_config cfg = r->configs[e->config];
    s.configs = &cfg;
    s.n_configs = 1;
    s.progress = NULL;
    ws_plan *P;
    int rc = ws_plan_open(store, &s, &P, err);
    if (rc)
        return rc;
    const ws_plan_point probe = {.gpu = cfg.gpu, .policy = e->policy, .config = 0};
    const int *prompts = ws_plan_prefix_cache(P, &probe) ? bd->sorted_novel : bd->sorted;
    r->alone_novel = prompts == bd->sorted_novel;
    size_t lo = 0, hi = bd->n; /* every index < lo misses; every index >= hi meets */
    while (lo < hi && !rc) {
        const size_t mid = lo + (hi - lo) / 2;
        ws_plan_point pt = {.kind = WS_PLAN_PT_ALONE,
                            .gpu = cfg.gpu,
                            .policy = e->policy,
                            .config = 0,
                            .context = prompts[mid],
                            .batch = bd->output};
        ws_plan_result res;
        if ((rc = ws_plan_eval_points(P, &pt, 1, &res, err)))
            break;
        r->sims++, r->alone_sims++;
        const int ok = !res.oom && (s.slo_ttft <= 0 || res.ttft_q <= s.slo_ttft) &&
                       (s.slo_tpot <= 0 || res.tpot_q <= s.slo_tpot);
        if (ok)
            hi = mid;
        else
            lo = mid + 1;
    }
    ws_plan_close(P);
    if (!rc) {
        r->alone_miss_pct = 100.0 * (double)lo / (double)bd->n;
        r->alone_ok_prompt = lo < bd->n ? prompts[lo] : 0;
    }
    return rc;
}

/* The entry's configuration with one change (a GPU index past the spec's: gpu_name), through
 * the three gates on its own: *met and its best load. */
static int try_change(ws_store *store, const ws_plan_spec *s0, const ws_space_report *r0,
                      const ws_space_entry *e0, const ws_plan_config *c, const char *gpu_name,
                      ws_space_change *out, ws_err *err)
{
    ws_plan_spec s = *s0;
    ws_plan_config cfg = *c;
    if (gpu_name) {
        s.gpus[0] = gpu_name;
        s.price[0] = 0;
        s.n_gpus = 1;
        cfg.gpu = 0;
    }
    s.configs = &cfg;
    s.n_configs = 1;
    s.progress = NULL;
    s.policies = 1u << e0->policy;
    ws_space_entry e = {.config = 0, .policy = e0->policy};
    ws_space_report r = *r0;
    r.configs = &cfg;
    r.n_configs = 1;
    r.e = &e;
    r.n_e = 1;
    r.best = r.frontier = NULL;
    ws_plan *P;
    int rc = ws_plan_open(store, &s, &P, err);
    if (rc)
        return rc;
    bounds b;
    rc = bounds_of(&s, &b, err);
    s.engine_ctx = b.longest;
    s.burst[0] = b.burst[0], s.burst[1] = b.burst[1];
    s.burst_len[0] = b.burst_len[0], s.burst_len[1] = b.burst_len[1];
    driver d = {.s = &s, .b = &b, .P = P, .rep = &r, .err = err};
    if (!rc)
        rc = run_gates(&d);
    bounds_free(&b);
    ws_plan_close(P);
    out->found = !rc && e.status == WS_SPACE_SEARCHED && e.best.max_load > 0;
    out->max_load = e.best.max_load;
    out->at = e.best.at;
    return rc;
}

/* Nothing met: the closest configuration with one knob one step past the space: a larger
 * chunk, a format the model is published in that the space left out (larger first), a GPU
 * profile the plan did not name (smaller memory first); the first that meets. */
static int smallest_change(ws_store *store, const ws_plan_spec *s, const ws_model *m,
                           ws_space_report *r, int ci, ws_err *err)
{
    if (ci < 0)
        return 0;
    const ws_space_entry *e = &r->e[ci];
    const ws_plan_config *c0 = &r->configs[e->config];
    int rc = 0, tried = 0;
    ws_space_change *ch = &r->change;
    /* larger chunks */
    for (int f = 2; f <= 4 && !ch->found && !rc; f *= 2) {
        ws_plan_config c = *c0;
        const int base = c.chunk > 0 ? c.chunk : s->chunk;
        c.chunk = base * f;
        snprintf(ch->what, sizeof ch->what, "--chunk %d (from %d)", c.chunk, base);
        rc = try_change(store, s, r, e, &c, NULL, ch, err);
        tried++;
    }
    /* formats the model is published in, larger first */
    const ws_wformat *pub[WS_SPACE_MAX];
    int n_pub = 0;
    if (!rc && !ch->found)
        rc = ws_model_published_formats(m->name, pub, WS_SPACE_MAX, &n_pub, err);
    for (int part = 0; part < 2 && !rc && !ch->found; part++)
        for (int i = 0; i < n_pub && !rc && !ch->found; i++) {
            int in_space = 0;
            for (size_t k = 0; k < r->n_configs; k++)
                in_space |= (part ? r->configs[k].w_cpu : r->configs[k].w_gpu) == pub[i];
            if (in_space)
                continue;
            ws_plan_config c = *c0;
            *(part ? &c.w_cpu : &c.w_gpu) = pub[i];
            snprintf(ch->what, sizeof ch->what, "--%s %s", part ? "w-cpu" : "w-gpu", pub[i]->name);
            rc = try_change(store, s, r, e, &c, NULL, ch, err);
            tried++;
        }
    /* GPUs from the profiles */
    char names[64][128];
    int n_gpu = 0;
    if (!rc && !ch->found)
        rc = ws_profile_names(store, "gpu", names, 64, &n_gpu, err);
    for (int i = 0; i < n_gpu && !rc && !ch->found && tried < 40; i++) {
        int named = 0;
        for (int g = 0; g < s->n_gpus; g++)
            named |= !strcmp(s->gpus[g], names[i]);
        if (named)
            continue;
        snprintf(ch->what, sizeof ch->what, "--gpu %s", names[i]);
        ws_err e2 = {0};
        const int rc2 = try_change(store, s, r, e, c0, names[i], ch, &e2);
        if (rc2 && rc2 != WS_EINVAL && rc2 != WS_ENOTFOUND)
            rc = ws_err_set(err, rc2, "%s", e2.msg);
        tried++;
    }
    if (!ch->found)
        snprintf(ch->what, sizeof ch->what, "none of %d single changes met", tried);
    return rc;
}

/* ---- the whole search ---------------------------------------------------------------- */

static int run_gates(driver *d)
{
    double t0 = ws_now_s();
    int rc = gate_memory(d);
    d->rep->wall_gate_s[0] += ws_now_s() - t0;
    t0 = ws_now_s();
    if (!rc)
        rc = gate_bound(d);
    d->rep->wall_gate_s[1] += ws_now_s() - t0;
    t0 = ws_now_s();
    if (!rc)
        rc = gate_search(d);
    d->rep->wall_gate_s[2] += ws_now_s() - t0;
    return rc;
}

int ws_plan_space_run(ws_store *store, ws_plan_spec *s, const ws_plan_space *sp,
                      ws_plan_round_fn round, void *ctx, ws_space_report *rep, ws_err *err)
{
    memset(rep, 0, sizeof *rep);
    rep->alone_miss_pct = NAN;
    if (s->configs)
        return ws_err_set(err, WS_EINVAL, "plan: a configuration search sets its own configs");
    const double t0 = ws_now_s();
    /* the model and the first GPU's hardware, for auto */
    ws_model m;
    ws_hw hw;
    int rc = ws_hw_load(store, s->model, s->gpus[0], s->host, s->cost.kv_dtype, &m, &hw, NULL, err);
    knob k[WS_KNOBS];
    if (!rc) {
        snprintf(rep->model, sizeof rep->model, "%s", m.name);
        rep->n_layers = m.layers;
        rep->n_moe_layers = m.n_moe_layers;
        rep->n_experts = m.n_experts;
        rep->max_seqs = s->given & WS_PLAN_GIVEN_BATCH ? s->batch : 0;
        rc = resolve(s, &m, &hw, sp, k, err);
    }
    if (!rc)
        rc = expand(s, k, &rep->configs, &rep->n_configs, err);
    if (rc)
        return rc;
    /* entries: configurations x policies; a policy with every expert on the GPU takes each
     * placement once */
    int n_pol = 0;
    for (int p = 0; p < WS_POLICY_COUNT; p++)
        n_pol += s->policies >> p & 1;
    rep->e = calloc(rep->n_configs * (size_t)n_pol + 1, sizeof *rep->e);
    if (!rep->e) {
        ws_space_report_free(rep);
        return ws_err_set(err, WS_ENOMEM, "plan: out of memory");
    }
    for (int p = 0; p < WS_POLICY_COUNT; p++) {
        if (!(s->policies >> p & 1))
            continue;
        const int all_gpu = !ws_policy_info_of((ws_policy_kind)p)->cpu_experts;
        for (size_t i = 0; i < rep->n_configs; i++) {
            const ws_plan_config *c = &rep->configs[i];
            if (all_gpu && (c->n_cpu_moe != rep->configs[0].n_cpu_moe ||
                            c->gpu_experts != rep->configs[0].gpu_experts ||
                            c->w_cpu != rep->configs[0].w_cpu))
                continue;
            rep->e[rep->n_e++] = (ws_space_entry){.config = (int)i, .policy = p};
        }
    }
    s->configs = rep->configs;
    s->n_configs = rep->n_configs;
    ws_plan *P = NULL;
    rc = ws_plan_open(store, s, &P, err);
    bounds b = {0};
    if (!rc)
        rc = bounds_of(s, &b, err);
    s->burst[0] = b.burst[0], s->burst[1] = b.burst[1];
    s->burst_len[0] = b.burst_len[0], s->burst_len[1] = b.burst_len[1];
    rep->burst_requests = b.burst_requests;
    rep->burst_tokens = b.burst_tokens;
    rep->allowed = b.allowed;
    s->engine_ctx = rep->engine_ctx = b.longest;
    if (!rc) {
        rep->native_rate = ws_plan_native_rate(P);
        driver d = {.s = s, .b = &b, .P = P, .round = round, .ctx = ctx, .rep = rep, .err = err};
        rc = run_gates(&d);
    }
    if (P)
        ws_plan_close(P);
    for (int e = 0; e < s->n_engines; e++)
        snprintf(rep->engines[e], sizeof rep->engines[e], "%s", s->engines[e]);
    rep->n_engines = s->n_engines;
    if (!rc)
        rc = answer(s, rep, err);
    if (!rc && rep->n_frontier == 0) {
        const int c = closest(s, rep);
        const double t1 = ws_now_s();
        s->configs = NULL;
        s->n_configs = 0;
        if (c >= 0 && rep->e[c].status <= WS_SPACE_BOUND_BURST && b.n)
            rc = alone_share(store, s, rep, c, &b, err);
        binding(s, rep, c);
        if (!rc)
            rc = smallest_change(store, s, &m, rep, c, err);
        rep->wall_gate_s[3] = ws_now_s() - t1;
    }
    bounds_free(&b);
    s->engine_ctx = 0;
    s->burst[0] = s->burst[1] = NULL;
    s->burst_len[0] = s->burst_len[1] = 0;
    s->configs = NULL;
    s->n_configs = 0;
    rep->wall_s = ws_now_s() - t0;
    if (rc)
        ws_space_report_free(rep);
    return rc;
}

const char *ws_space_config_text(const ws_space_report *r, const ws_plan_config *c, char *buf,
                                 size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "%s", c->engine >= 0 ? r->engines[c->engine] : "-");
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (n < cap)                                                                               \
            n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__);                                  \
    } while (0)
    ADD(" w=%s/%s", c->w_gpu ? c->w_gpu->name : "model", c->w_cpu ? c->w_cpu->name : "model");
    ADD(" kv=%s", c->w_kv ? c->w_kv->name : ws_dtype_name(c->kv_dtype));
    if (c->n_cpu_moe == WS_DEPLOY_NO_CPU_MOE)
        ADD(" cpu-moe=none");
    else if (c->n_cpu_moe > 0)
        ADD(" n-cpu-moe=%d", c->n_cpu_moe);
    else
        ADD(" cpu-moe=all");
    if (c->gpu_experts && c->n_cpu_moe != WS_DEPLOY_NO_CPU_MOE)
        ADD(" gpu-exp=%d", c->gpu_experts);
    if (c->n_gpu_layers > 0)
        ADD(" ngl=%d", c->n_gpu_layers);
    if (c->chunk > 0)
        ADD(" chunk=%d", c->chunk);
    if (c->prefill_mode >= 0)
        ADD(" prefill=%s", ws_prefill_mode_name(c->prefill_mode));
    if (c->cpu_threads > 0)
        ADD(" t=%d", c->cpu_threads);
    if (c->cpu_sockets > 0)
        ADD(" sockets=%d", c->cpu_sockets);
#undef ADD
    return buf;
}
