/* server: an engine's file read and applied (see server.h). */
#include "server.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_util.h"

static const char *const field_names[WS_SRV_FIELDS] = {
    "scheduler",          "token_budget", "max_seqs",        "chunk",        "prefix_cache",
    "kv_mem_frac",        "preempt",      "step_overhead_s", "host_weights", "handoff_c0_s",
    "prefill_gpu_tokens", "numa"};

const char *ws_server_field_name(int f)
{
    return f >= 0 && f < WS_SRV_FIELDS ? field_names[f] : "?";
}

/* Reading one file: its name for messages, the GPU and model it is resolved for. */
typedef struct rd {
    const char *path, *gpu;
    double gpu_gib;
    int model_ctx;
    int has_base; /* 1: a field the file leaves out keeps its base engine's value */
    ws_server *e;
    ws_err *err;
} rd;

static int bad(const rd *r, const char *key, const char *what)
{
    return ws_err_set(r->err, WS_EPARSE, "%s: \"%s\": %s", r->path, key, what);
}

/* The entry of key: an object with "value" and "ref"; its value as chosen for the GPU (the
 * first "by_gpu" rule whose min_mem_gib the GPU has, unless its name starts with the rule's
 * "except"). *v is NULL when the value is null, or when a file with a base leaves the key
 * out (its base's value and reference stay). */
static int entry(const rd *r, json_t *o, int f, json_t **v)
{
    const char *key = field_names[f];
    json_t *x = json_object_get(o, key);
    *v = NULL;
    if (!x && r->has_base)
        return 0;
    if (!json_is_object(x))
        return bad(r, key, "missing, or not an object with \"value\" and \"ref\"");
    json_t *ref = json_object_get(x, "ref");
    if (!json_is_string(ref) || !json_string_length(ref))
        return bad(r, key, "no \"ref\": every value names where it was read");
    snprintf(r->e->ref[f], sizeof r->e->ref[f], "%s", json_string_value(ref));
    *v = json_object_get(x, "value");
    if (!*v)
        return bad(r, key, "no \"value\" (null where not published)");
    json_t *rules = json_object_get(x, "by_gpu");
    if (rules && !json_is_array(rules))
        return bad(r, key, "\"by_gpu\" is not a list");
    size_t i;
    json_t *rule;
    json_array_foreach(rules, i, rule)
    {
        json_t *min = json_object_get(rule, "min_mem_gib"), *ex = json_object_get(rule, "except");
        if (!json_is_number(min) || !json_object_get(rule, "value") || (ex && !json_is_string(ex)))
            return bad(r, key, "a \"by_gpu\" rule needs min_mem_gib, value (and except a name)");
        if (r->gpu_gib + 1e-9 >= json_number_value(min) &&
            !(ex && !strncmp(r->gpu, json_string_value(ex), strlen(json_string_value(ex))))) {
            *v = json_object_get(rule, "value");
            break;
        }
    }
    if (json_is_null(*v))
        *v = NULL;
    r->e->set[f] = *v != NULL;
    return 0;
}

static int get_count(const rd *r, json_t *o, int f, int lo, int *out)
{
    json_t *v;
    int rc = entry(r, o, f, &v);
    if (rc || !v)
        return rc;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > (1 << 24))
        return bad(r, field_names[f],
                   lo ? "not a whole number from 1 to 2^24" : "not a whole number from 0 to 2^24");
    *out = (int)json_integer_value(v);
    return 0;
}

static int get_name(const rd *r, json_t *o, int f, int (*parse)(const char *), int *out)
{
    json_t *v;
    int rc = entry(r, o, f, &v);
    if (rc || !v)
        return rc;
    const int k = json_is_boolean(v)  ? json_is_true(v)
                  : json_is_string(v) ? parse(json_string_value(v))
                                      : -1;
    if (k < 0)
        return bad(r, field_names[f], "not a known name");
    *out = k;
    return 0;
}

static int parse_bool(const char *s)
{
    (void)s;
    return -1; /* a JSON true or false, not a string */
}

static int parse_kv_kind(const char *s)
{
    return !strcmp(s, "total")     ? WS_KV_MEM_TOTAL
           : !strcmp(s, "free")    ? WS_KV_MEM_FREE
           : !strcmp(s, "context") ? WS_KV_MEM_CONTEXT
                                   : -1;
}

/* kv_mem_frac: a fraction of kind total or free, or (kind context) a context of
 * ctx_default tokens. */
static int get_kv(const rd *r, json_t *o)
{
    json_t *v;
    int rc = entry(r, o, WS_SRV_KV_MEM, &v);
    if (rc || (!json_object_get(o, "kv_mem_frac") && r->has_base))
        return rc;
    json_t *x = json_object_get(o, "kv_mem_frac"), *k = json_object_get(x, "kv_mem_kind");
    const int kind = json_is_string(k) ? parse_kv_kind(json_string_value(k)) : -1;
    if (kind < 0)
        return bad(r, "kv_mem_frac", "\"kv_mem_kind\" must be total, free or context");
    ws_server_kv *kv = &r->e->kv;
    if (kind == WS_KV_MEM_CONTEXT) {
        json_t *c = json_object_get(x, "ctx_default");
        if (!json_is_integer(c) || json_integer_value(c) < 0 || json_integer_value(c) > (1 << 24))
            return bad(r, "kv_mem_frac",
                       "kind context needs \"ctx_default\" (tokens, 0: the "
                       "model's)");
        *kv = (ws_server_kv){.kind = kind, .ctx = (int)json_integer_value(c)};
        r->e->set[WS_SRV_KV_MEM] = 1;
        return 0;
    }
    if (!v)
        return 0;
    if (!json_is_number(v) || !(json_number_value(v) > 0 && json_number_value(v) <= 1))
        return bad(r, "kv_mem_frac", "not a fraction in (0, 1]");
    *kv = (ws_server_kv){.kind = kind, .frac = json_number_value(v)};
    return 0;
}

static int get_step(const rd *r, json_t *o)
{
    json_t *v;
    int rc = entry(r, o, WS_SRV_STEP_OVERHEAD, &v);
    if (rc || !v)
        return rc;
    if (!json_is_number(v) || !(json_number_value(v) >= 0 && json_number_value(v) < 1))
        return bad(r, "step_overhead_s", "not a time in [0, 1) s");
    r->e->step_s = json_number_value(v);
    return 0;
}

static int parse_host_weights(const char *s)
{
    return !strcmp(s, "pageable") ? 1 : !strcmp(s, "pinned") ? 0 : -1;
}

static int parse_numa(const char *s)
{
    return !strcmp(s, "one-node") ? 1 : !strcmp(s, "pooled") ? 0 : -1;
}

static int get_handoff(const rd *r, json_t *o)
{
    json_t *v;
    int rc = entry(r, o, WS_SRV_HANDOFF_C0, &v);
    if (rc || !v)
        return rc;
    if (!json_is_number(v) || !(json_number_value(v) > 0 && json_number_value(v) < 0.1))
        return bad(r, "handoff_c0_s", "not a time in (0, 0.1) s");
    r->e->handoff_c0 = json_number_value(v);
    return 0;
}

/* The token budget may follow the model's context (vLLM V0 without chunked prefill:
 * max(max_model_len, min)); an engine may switch scheduler above a context length (vLLM V0
 * turns chunked prefill on above 32K). */
static int model_rules(const rd *r, json_t *o)
{
    ws_server *e = r->e;
    json_t *fm = json_object_get(json_object_get(o, "token_budget"), "from_model_ctx");
    if (fm) {
        json_t *min = json_object_get(fm, "min");
        if (!json_is_integer(min) || json_integer_value(min) < 1)
            return bad(r, "token_budget", "\"from_model_ctx\" needs \"min\" (tokens)");
        const int lo = (int)json_integer_value(min);
        e->token_budget = r->model_ctx > lo ? r->model_ctx : lo;
        e->set[WS_SRV_TOKEN_BUDGET] = 1;
    }
    json_t *lc = json_object_get(o, "long_context");
    if (!lc)
        return 0;
    json_t *above = json_object_get(lc, "above_ctx"), *s = json_object_get(lc, "scheduler"),
           *tb = json_object_get(lc, "token_budget"), *ch = json_object_get(lc, "chunk");
    const int k = json_is_string(s) ? ws_batching_parse(json_string_value(s)) : -1;
    if (!json_is_integer(above) || k < 0 || !json_is_integer(tb) || json_integer_value(tb) < 1 ||
        !json_is_integer(ch) || json_integer_value(ch) < 1)
        return bad(r, "long_context", "needs above_ctx, scheduler, token_budget and chunk");
    if (r->model_ctx > json_integer_value(above)) {
        e->batching = k;
        e->token_budget = (int)json_integer_value(tb);
        e->chunk = (int)json_integer_value(ch);
        e->set[WS_SRV_SCHEDULER] = e->set[WS_SRV_TOKEN_BUDGET] = e->set[WS_SRV_CHUNK] = 1;
    }
    return 0;
}

static int parse_file(const rd *r, json_t *o)
{
    ws_server *e = r->e;
    json_t *name = json_object_get(o, "name"), *desc = json_object_get(o, "desc");
    if (!json_is_string(name) || !json_is_string(desc))
        return ws_err_set(r->err, WS_EPARSE, "%s: needs \"name\" and \"desc\"", r->path);
    snprintf(e->name, sizeof e->name, "%s", json_string_value(name));
    snprintf(e->desc, sizeof e->desc, "%s", json_string_value(desc));
    int rc;
    if ((rc = get_name(r, o, WS_SRV_SCHEDULER, ws_batching_parse, &e->batching)) ||
        (rc = get_count(r, o, WS_SRV_TOKEN_BUDGET, 1, &e->token_budget)) ||
        (rc = get_count(r, o, WS_SRV_MAX_SEQS, 1, &e->max_seqs)) ||
        (rc = get_count(r, o, WS_SRV_CHUNK, 1, &e->chunk)) ||
        (rc = get_name(r, o, WS_SRV_PREFIX_CACHE, parse_bool, &e->prefix_cache)) ||
        (rc = get_kv(r, o)) ||
        (rc = get_name(r, o, WS_SRV_PREEMPT, ws_preempt_parse, &e->preempt)) ||
        (rc = get_step(r, o)) ||
        (rc = get_name(r, o, WS_SRV_HOST_WEIGHTS, parse_host_weights, &e->host_pageable)) ||
        (rc = get_handoff(r, o)) ||
        (rc = get_count(r, o, WS_SRV_PREFILL_GPU, 1, &e->prefill_gpu_tokens)) ||
        (rc = get_name(r, o, WS_SRV_NUMA, parse_numa, &e->numa_one_node)) ||
        (rc = model_rules(r, o)))
        return rc;
    return 0;
}

static int load(const char *name, const char *gpu, double gpu_mem, int model_ctx, int depth,
                ws_server *out, ws_err *err);

/* A file's "base": absent (0), or the engine loaded into out first (1); a base that is not
 * an engine's name, or a chain of bases, is an error. */
static int load_base(const rd *r, json_t *o, int depth, int *has)
{
    json_t *b = json_object_get(o, "base");
    *has = 0;
    if (!b)
        return 0;
    if (!json_is_string(b) || !json_string_length(b) || strchr(json_string_value(b), '/'))
        return ws_err_set(r->err, WS_EPARSE, "%s: \"base\": not an engine's name", r->path);
    if (depth > 0)
        return ws_err_set(r->err, WS_EPARSE,
                          "%s: \"base\": a base engine has no base of its "
                          "own",
                          r->path);
    *has = 1;
    return load(json_string_value(b), r->gpu, r->gpu_gib * 1073741824.0, r->model_ctx, depth + 1,
                r->e, r->err);
}

int ws_server_path(const char *name, char *path, size_t cap, ws_err *err)
{
    if (strchr(name, '/')) {
        if (strlen(name) >= cap)
            return ws_err_set(err, WS_EINVAL, "engine file path too long: %.200s", name);
        snprintf(path, cap, "%s", name);
        return 0;
    }
    char root[WS_PATH_MAX], rel[WS_PATH_MAX];
    if (ws_root_dir(root, sizeof root, err))
        return err ? err->code : WS_EIO;
    snprintf(rel, sizeof rel, "engines/%.200s.json", name);
    if (ws_path_join(path, cap, root, rel, err))
        return err ? err->code : WS_EINVAL;
    if (ws_file_exists(path))
        return 0;
    char names[32][64], list[1024] = "";
    const int n = ws_server_list(names, 32);
    for (int i = 0; i < n; i++) {
        const size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", names[i]);
    }
    return ws_err_set(err, WS_ENOTFOUND,
                      "unknown engine '%s' (known: %s; or a path to an engine "
                      "file)",
                      name, n ? list : "none");
}

int ws_server_load(const char *name, const char *gpu, double gpu_mem, int model_ctx, ws_server *out,
                   ws_err *err)
{
    return load(name, gpu, gpu_mem, model_ctx, 0, out, err);
}

static int load(const char *name, const char *gpu, double gpu_mem, int model_ctx, int depth,
                ws_server *out, ws_err *err)
{
    memset(out, 0, sizeof *out);
    char path[WS_PATH_MAX];
    int rc = ws_server_path(name, path, sizeof path, err);
    if (rc)
        return rc;
    size_t len = 0;
    char *text = ws_read_file(path, &len, err);
    if (!text)
        return err && err->code ? err->code : WS_EIO;
    json_error_t je;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!o)
        return ws_err_set(err, WS_EPARSE, "%s:%d: not JSON: %s", path, je.line, je.text);
    if (!json_is_object(o)) {
        json_decref(o);
        return ws_err_set(err, WS_EPARSE, "%s: not a JSON object", path);
    }
    rd r = {.path = path,
            .gpu = gpu ? gpu : "",
            .gpu_gib = gpu_mem / 1073741824.0,
            .model_ctx = model_ctx,
            .e = out,
            .err = err};
    rc = load_base(&r, o, depth, &r.has_base);
    if (!rc)
        rc = parse_file(&r, o);
    json_decref(o);
    return rc;
}

int ws_server_list(char names[][64], int max)
{
    return ws_root_names("engines", ".json", names, max);
}

void ws_server_apply(const ws_server *e, ws_serving *s, ws_deploy_cfg *cc, ws_server_kv *kv)
{
    if (e->set[WS_SRV_SCHEDULER])
        s->batching = e->batching;
    if (e->set[WS_SRV_TOKEN_BUDGET])
        s->token_budget = e->token_budget;
    if (e->set[WS_SRV_MAX_SEQS])
        s->batch = e->max_seqs;
    if (e->set[WS_SRV_CHUNK])
        s->chunk = e->chunk;
    else if (e->set[WS_SRV_TOKEN_BUDGET])
        s->chunk = e->token_budget; /* no chunk of its own: a prompt may fill the budget */
    if (e->set[WS_SRV_PREFIX_CACHE])
        s->prefix_cache = e->prefix_cache;
    if (e->set[WS_SRV_PREEMPT])
        s->preempt = e->preempt;
    if (e->set[WS_SRV_PREFILL_GPU])
        s->prefill_gpu_tokens = e->prefill_gpu_tokens;
    if (e->set[WS_SRV_KV_MEM] && kv)
        *kv = e->kv;
    if (!cc)
        return;
    if (e->set[WS_SRV_STEP_OVERHEAD]) { /* else the GPU profile's (modeled) */
        cc->step_overhead = e->step_s;
        snprintf(cc->step_from, sizeof cc->step_from, "engine %.60s: %.90s", e->name,
                 e->ref[WS_SRV_STEP_OVERHEAD]);
    }
    if (e->set[WS_SRV_HOST_WEIGHTS])
        cc->host_weights_pageable = e->host_pageable;
    if (e->set[WS_SRV_NUMA])
        cc->one_node_memory = e->numa_one_node;
    if (e->set[WS_SRV_HANDOFF_C0]) {
        cc->handoff_c0 = e->handoff_c0;
        snprintf(cc->handoff_from, sizeof cc->handoff_from, "engine %.60s: %.90s", e->name,
                 e->ref[WS_SRV_HANDOFF_C0]);
    }
}
