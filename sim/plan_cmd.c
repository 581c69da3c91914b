/* plan_cmd: a deployment as an engine's command line, its flags read from the engine's file
 * (see plan_cmd.h). */
#include "plan_cmd.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"
#include "wformat.h"
#include "ws_util.h"

/* The knobs a command object may give a flag for, in the order a line renders them. */
enum {
    K_GPU_LAYERS = 0,  /* layers on the GPU (the last N) */
    K_CPU_MOE,         /* switch: every MoE layer's routed experts on the CPU */
    K_N_CPU_MOE,       /* the first N layers' routed experts on the CPU */
    K_GPU_EXPERTS,     /* routed experts per MoE layer on the GPU, the rest on the CPU */
    K_QUANT,           /* the GPU weights' format (weights_gpu's value) */
    K_CPU_METHOD,      /* the CPU experts' format (weights_cpu's value) */
    K_WEIGHT_PATH,     /* where the CPU experts' weights are (a template) */
    K_KV,              /* KV cache type */
    K_KV_K,            /* K cache type */
    K_KV_V,            /* V cache type */
    K_CTX,             /* context tokens */
    K_TOKEN_BUDGET,    /* tokens of one step */
    K_CHUNK,           /* tokens of one prompt in one step */
    K_CHUNKED_PREFILL, /* switch given with a chunk */
    K_MAX_SEQS,        /* sequences running at once */
    K_THREADS,         /* the CPU's threads */
    K_SOCKETS,         /* the sockets' (NUMA nodes') count */
    K_NUMA,            /* switch (with its fixed value) for more than one socket */
    K_COUNT
};

static const char *const knob_names[K_COUNT] = {"gpu_layers",   "cpu_moe",
                                                "n_cpu_moe",    "gpu_experts",
                                                "quantization", "cpu_method",
                                                "weight_path",  "kv",
                                                "kv_k",         "kv_v",
                                                "ctx",          "token_budget",
                                                "chunk",        "chunked_prefill",
                                                "max_seqs",     "threads",
                                                "sockets",      "numa"};

typedef struct knob {
    const char *flag;  /* NULL: the engine has no flag for it */
    const char *value; /* a fixed value (a switch's), or a template; NULL: none */
    const char *ref;
    int counts_layers; /* n_cpu_moe: N counts layers from 0, dense ones included */
} knob;

/* One engine's command object, its strings borrowed from the JSON it was read from. */
typedef struct eng {
    char name[64], path[WS_PATH_MAX];
    json_t *file, *base_file;                        /* owned */
    json_t *model, *args, *kv_types, *w_gpu, *w_cpu; /* borrowed; NULL where absent */
    const char *program, *program_ref, *experts, *base;
    knob k[K_COUNT];
} eng;

static void eng_free(eng *e)
{
    json_decref(e->file);
    json_decref(e->base_file);
}

static int read_json(const char *path, json_t **out, ws_err *err)
{
    size_t len = 0;
    char *text = ws_read_file(path, &len, err);
    if (!text)
        return err && err->code ? err->code : WS_EIO;
    json_error_t je;
    *out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!*out)
        return ws_err_set(err, WS_EPARSE, "%s:%d: not JSON: %s", path, je.line, je.text);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return ws_err_set(err, WS_EPARSE, "%s: not a JSON object", path);
    }
    return 0;
}

static int bad(const eng *e, const char *where, const char *what, ws_err *err)
{
    return ws_err_set(err, WS_EPARSE, "%s: command.%s: %s", e->path, where, what);
}

static const char *str_of(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* {"value": "...", "ref": "..."}: the value, or NULL when the entry is malformed. */
static const char *entry_str(json_t *x, const char **ref)
{
    const char *v = str_of(x, "value"), *r = str_of(x, "ref");
    if (!v || !r || !*r)
        return NULL;
    *ref = r;
    return v;
}

/* {"flag": ..., "value": ..., "ref": ...} into k (flag "" only where positional is allowed). */
static int parse_flag(const eng *e, json_t *x, const char *where, int positional, knob *k,
                      ws_err *err)
{
    if (!json_is_object(x))
        return bad(e, where, "not an object with \"flag\" and \"ref\"", err);
    k->flag = str_of(x, "flag");
    k->ref = str_of(x, "ref");
    json_t *v = json_object_get(x, "value"), *counts = json_object_get(x, "counts");
    if (!k->flag || (!positional && !*k->flag))
        return bad(e, where, "no \"flag\"", err);
    if (!k->ref || !*k->ref)
        return bad(e, where, "no \"ref\": every flag names where it was read", err);
    if (v && !json_is_string(v))
        return bad(e, where, "\"value\" is not a string", err);
    k->value = v ? json_string_value(v) : NULL;
    if (counts) {
        const char *c = json_is_string(counts) ? json_string_value(counts) : "";
        if (strcmp(c, "layers") && strcmp(c, "moe_layers"))
            return bad(e, where, "\"counts\" is not layers or moe_layers", err);
        k->counts_layers = !strcmp(c, "layers");
    }
    return 0;
}

/* An optional {"value": {format: string, ...}, "ref": ...} map. */
static int parse_map(const eng *e, json_t *cmd, const char *key, json_t **out, ws_err *err)
{
    json_t *x = json_object_get(cmd, key);
    *out = NULL;
    if (!x)
        return 0;
    json_t *v = json_object_get(x, "value");
    const char *ref = str_of(x, "ref");
    if (!json_is_object(v) || !ref || !*ref)
        return bad(e, key, "needs \"value\" (an object of strings) and \"ref\"", err);
    const char *name = NULL;
    json_t *s;
    json_object_foreach(v, name, s)
    {
        if (!json_is_string(s))
            return bad(e, key, "a value that is not a string", err);
    }
    *out = v;
    return 0;
}

static int parse_command(eng *e, json_t *cmd, ws_err *err)
{
    if (!json_is_object(cmd))
        return bad(e, "", "not an object", err);
    const char *ref;
    if (!(e->program = entry_str(json_object_get(cmd, "program"), &e->program_ref)) || !*e->program)
        return bad(e, "program", "needs \"value\" and \"ref\"", err);
    e->experts = entry_str(json_object_get(cmd, "experts"), &ref);
    if (!e->experts ||
        (strcmp(e->experts, "flags") && strcmp(e->experts, "cpu") && strcmp(e->experts, "gpu")))
        return bad(e, "experts", "\"value\" must be flags, cpu or gpu (with \"ref\")", err);
    e->model = json_object_get(cmd, "model");
    e->args = json_object_get(cmd, "args");
    if (!json_is_array(e->model) || !json_array_size(e->model) ||
        (e->args && !json_is_array(e->args)))
        return bad(e, "model", "\"model\" (and \"args\") must be lists of flags", err);
    size_t i;
    json_t *x;
    knob k;
    int rc;
    json_array_foreach(e->model, i, x)
    {
        memset(&k, 0, sizeof k);
        if ((rc = parse_flag(e, x, "model", 1, &k, err)))
            return rc;
        if (!k.value)
            return bad(e, "model", "a model argument needs \"value\"", err);
    }
    json_array_foreach(e->args, i, x)
    {
        memset(&k, 0, sizeof k);
        if ((rc = parse_flag(e, x, "args", 0, &k, err)))
            return rc;
    }
    json_t *flags = json_object_get(cmd, "flags");
    if (flags && !json_is_object(flags))
        return bad(e, "flags", "not an object", err);
    const char *key;
    json_object_foreach(flags, key, x)
    {
        int f = 0;
        while (f < K_COUNT && strcmp(knob_names[f], key))
            f++;
        if (f == K_COUNT) {
            char what[160];
            snprintf(what, sizeof what, "\"%.60s\" is not a knob (engines/README.md)", key);
            return bad(e, "flags", what, err);
        }
        char where[96];
        snprintf(where, sizeof where, "flags.%s", key);
        if ((rc = parse_flag(e, x, where, 0, &e->k[f], err)))
            return rc;
    }
    if ((rc = parse_map(e, cmd, "kv_types", &e->kv_types, err)) ||
        (rc = parse_map(e, cmd, "weights_gpu", &e->w_gpu, err)) ||
        (rc = parse_map(e, cmd, "weights_cpu", &e->w_cpu, err)))
        return rc;
    return 0;
}

/* Reads the engine's file and its command (its base's when it gives none). */
static int eng_open(const char *name, eng *e, ws_err *err)
{
    memset(e, 0, sizeof *e);
    int rc = ws_server_path(name, e->path, sizeof e->path, err);
    if (rc || (rc = read_json(e->path, &e->file, err)))
        return rc;
    const char *n = str_of(e->file, "name");
    snprintf(e->name, sizeof e->name, "%s", n ? n : name);
    json_t *cmd = json_object_get(e->file, "command");
    e->base = str_of(e->file, "base");
    if (!cmd && e->base && *e->base && !strchr(e->base, '/')) {
        char path[WS_PATH_MAX];
        if ((rc = ws_server_path(e->base, path, sizeof path, err)) ||
            (rc = read_json(path, &e->base_file, err)))
            return rc;
        cmd = json_object_get(e->base_file, "command");
    }
    if (!cmd)
        return ws_err_set(err, WS_EUNSUP,
                          "%s: no \"command\" object: engine %s has no flags "
                          "to render (engines/README.md)",
                          e->path, e->name);
    return parse_command(e, cmd, err);
}

/* Building one line: where it goes, and whether a failure is the engine's (a refusal). */
typedef struct bld {
    const eng *e;
    const ws_plan_cmd_cfg *c;
    ws_plan_cmd *out;
    size_t len;
    ws_err *err;
    int refused;
    const char *wg, *wc; /* canonical format names (bf16 for NULL) */
    char w[64];          /* {w}: the weights' names for file placeholders */
} bld;

static int refuse(bld *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(bld *b, const char *fmt, ...)
{
    char msg[WS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    b->refused = 1;
    return ws_err_set(b->err, WS_EINVAL, "%s", msg);
}

static int safe_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           strchr("_./=:,+@%-", ch);
}

/* s to the line after a space, in single quotes when the shell would read it otherwise. */
static int put(bld *b, const char *s)
{
    char q[2 * WS_PLAN_CMD_LINE];
    size_t n = 0;
    int plain = *s != 0;
    for (const char *p = s; *p; p++)
        plain &= safe_char(*p);
    if (plain) {
        n = (size_t)snprintf(q, sizeof q, "%s", s);
    } else {
        q[n++] = '\'';
        for (const char *p = s; *p && n + 5 < sizeof q; p++) {
            if (*p == '\'') {
                memcpy(q + n, "'\\''", 4);
                n += 4;
            } else {
                q[n++] = *p;
            }
        }
        q[n++] = '\'';
        q[n] = 0;
    }
    const size_t cap = sizeof b->out->line;
    if (b->len + 1 + n + 1 > cap)
        return ws_err_set(b->err, WS_EINVAL, "%s: the command line is longer than %zu bytes",
                          b->e->name, cap - 1);
    b->len += (size_t)snprintf(b->out->line + b->len, cap - b->len, "%s%s", b->len ? " " : "", q);
    return 0;
}

/* A flag and its value ("" or NULL: a switch; a positional argument has flag ""). */
static int emit(bld *b, const char *flag, const char *value, const char *ref)
{
    ws_plan_cmd *o = b->out;
    if (o->n_flags >= WS_PLAN_CMD_FLAGS)
        return ws_err_set(b->err, WS_EINVAL, "%s: more than %d flags", b->e->name,
                          WS_PLAN_CMD_FLAGS);
    int rc = 0;
    if ((*flag && (rc = put(b, flag))) || (value && *value && (rc = put(b, value))))
        return rc;
    ws_plan_cmd_flag *f = &o->flags[o->n_flags++];
    snprintf(f->flag, sizeof f->flag, "%s", flag);
    snprintf(f->value, sizeof f->value, "%s", value ? value : "");
    snprintf(f->ref, sizeof f->ref, "%s", ref);
    return 0;
}

static int emit_int(bld *b, int k, int v)
{
    char s[32];
    snprintf(s, sizeof s, "%d", v);
    return emit(b, b->e->k[k].flag, s, b->e->k[k].ref);
}

static void upper(char *dst, size_t cap, const char *s)
{
    size_t i = 0;
    for (; s[i] && i + 1 < cap; i++)
        dst[i] = (s[i] >= 'a' && s[i] <= 'z') ? (char)(s[i] - 'a' + 'A') : s[i];
    dst[i] = 0;
}

/* A template with {model}, {w}, {w_gpu} and {w_cpu} filled in. */
static void expand(const bld *b, const char *t, char *out, size_t cap)
{
    char wg[32], wc[32];
    upper(wg, sizeof wg, b->wg);
    upper(wc, sizeof wc, b->wc);
    const struct {
        const char *key, *val;
    } subs[] = {{"{model}", b->c->model ? b->c->model : "MODEL"},
                {"{w}", b->w},
                {"{w_gpu}", wg},
                {"{w_cpu}", wc}};
    size_t n = 0;
    while (*t && n + 1 < cap) {
        size_t i = 0;
        while (i < sizeof subs / sizeof subs[0] && strncmp(t, subs[i].key, strlen(subs[i].key)))
            i++;
        if (i < sizeof subs / sizeof subs[0]) {
            n += (size_t)snprintf(out + n, cap - n, "%s", subs[i].val);
            if (n >= cap)
                n = cap - 1;
            t += strlen(subs[i].key);
        } else {
            out[n++] = *t++;
        }
    }
    out[n] = 0;
}

/* The map's keys, comma-separated ("none" for an empty or absent map). */
static void keys(json_t *map, char *buf, size_t cap)
{
    const char *k;
    json_t *v;
    size_t n = 0;
    buf[0] = 0;
    json_object_foreach(map, k, v)
    {
        n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s", n ? ", " : "", k);
        if (n >= cap)
            break;
    }
    if (!buf[0])
        snprintf(buf, cap, "none");
}

static int canon(bld *b, const char *s, const char *what, const char **out)
{
    if (!s) {
        *out = "bf16";
        return 0;
    }
    const ws_wformat *f = ws_wformat_find(s);
    if (!f)
        return ws_err_set(b->err, WS_EINVAL,
                          "plan_cmd: %s '%s' is not a format ws_wformat "
                          "knows",
                          what, s);
    *out = f->name;
    return 0;
}

static int check_cfg(const ws_plan_cmd_cfg *c, ws_err *err)
{
    if (c->n_layers < 1 || c->n_moe_layers < 0 || c->n_moe_layers > c->n_layers ||
        c->n_experts < 0 || c->gpu_experts < 0 ||
        (c->n_experts > 0 && c->gpu_experts > c->n_experts) || c->n_cpu_moe < -1 ||
        c->n_gpu_layers < 0 || c->chunk < 0 || c->token_budget < 0 || c->max_seqs < 0 ||
        c->ctx < 0 || c->cpu_threads < 0 || c->cpu_sockets < 0)
        return ws_err_set(err, WS_EINVAL,
                          "plan_cmd: configuration out of range (layers %d, "
                          "MoE layers %d, experts %d, GPU experts %d, "
                          "n_cpu_moe %d, n_gpu_layers %d)",
                          c->n_layers, c->n_moe_layers, c->n_experts, c->gpu_experts, c->n_cpu_moe,
                          c->n_gpu_layers);
    return 0;
}

/* Where the routed experts go, as the engine's flags say it. */
static int placement(bld *b, int k)
{
    const eng *e = b->e;
    const ws_plan_cmd_cfg *c = b->c;
    const int M = c->n_moe_layers, g = c->gpu_experts;
    if (!strcmp(e->experts, "gpu")) {
        if (k > 0)
            return refuse(b,
                          "%s runs no routed expert on the CPU (n_cpu_moe %d, gpu_experts %d "
                          "of %d)",
                          e->name, c->n_cpu_moe, g, c->n_experts);
        return 0;
    }
    if (!strcmp(e->experts, "cpu")) {
        if (k == 0)
            return refuse(b,
                          "%s keeps the routed experts on the CPU (its optimize rules); every "
                          "routed expert on the GPU is not one of its flags",
                          e->name);
        if (g > 0)
            return refuse(b,
                          "%s has no flag that keeps %d routed experts per layer on the GPU "
                          "(its optimize-rule file places them)",
                          e->name, g);
        if (k > 0 && k < M)
            return refuse(b,
                          "%s has no flag that keeps the routed experts of only the first %d "
                          "MoE layers on the CPU (its optimize-rule file places them)",
                          e->name, k);
        return 0;
    }
    const knob *ge = &e->k[K_GPU_EXPERTS];
    if (k == 0) {
        if (ge->flag && !e->k[K_CPU_MOE].flag && !e->k[K_N_CPU_MOE].flag)
            return refuse(b,
                          "%s: every routed expert on the GPU leaves its CPU experts nothing "
                          "to run%s%s",
                          e->name, e->base ? "; serve it with " : "", e->base ? e->base : "");
        return 0;
    }
    if (g > 0 || ge->flag) {
        if (!ge->flag)
            return refuse(b,
                          "%s has no flag that splits one layer's routed experts between the "
                          "GPU and the CPU (gpu_experts %d of %d)",
                          e->name, g, c->n_experts);
        if (k < M)
            return refuse(b,
                          "%s gives every MoE layer the same %s; no flag keeps the routed "
                          "experts of only the first %d MoE layers on the CPU",
                          e->name, ge->flag, k);
        return emit_int(b, K_GPU_EXPERTS, g);
    }
    if (k == M && e->k[K_CPU_MOE].flag)
        return emit(b, e->k[K_CPU_MOE].flag, e->k[K_CPU_MOE].value, e->k[K_CPU_MOE].ref);
    if (e->k[K_N_CPU_MOE].flag)
        return emit_int(b, K_N_CPU_MOE, e->k[K_N_CPU_MOE].counts_layers ? c->n_layers - M + k : k);
    return refuse(b,
                  "%s has no flag that keeps the routed experts of only the first %d MoE "
                  "layers on the CPU",
                  e->name, k);
}

/* The weight formats: each part's must be one the engine loads; a non-empty value is its flag's. */
static int weights(bld *b, int cpu_exp)
{
    const eng *e = b->e;
    char list[256];
    const char *v = e->w_gpu ? str_of(e->w_gpu, b->wg) : NULL;
    if (!e->w_gpu && b->c->w_gpu)
        return refuse(b, "%s has no weight-format flag (GPU weights %s)", e->name, b->wg);
    if (e->w_gpu && !v) {
        keys(e->w_gpu, list, sizeof list);
        return refuse(b, "%s does not load GPU weights in %s (it takes: %s)", e->name, b->wg, list);
    }
    int rc;
    if (v && *v) {
        if (!e->k[K_QUANT].flag)
            return refuse(b, "%s has no flag for GPU weights in %s", e->name, b->wg);
        if ((rc = emit(b, e->k[K_QUANT].flag, v, e->k[K_QUANT].ref)))
            return rc;
    }
    if (!cpu_exp)
        return 0;
    v = e->w_cpu ? str_of(e->w_cpu, b->wc) : NULL;
    if (!v) {
        keys(e->w_cpu, list, sizeof list);
        return refuse(b, "%s does not run CPU experts in %s (it takes: %s)", e->name, b->wc, list);
    }
    if (*v && e->k[K_CPU_METHOD].flag &&
        (rc = emit(b, e->k[K_CPU_METHOD].flag, v, e->k[K_CPU_METHOD].ref)))
        return rc;
    if (e->k[K_WEIGHT_PATH].flag) {
        char path[256];
        expand(b, e->k[K_WEIGHT_PATH].value ? e->k[K_WEIGHT_PATH].value : "{model}", path,
               sizeof path);
        if ((rc = emit(b, e->k[K_WEIGHT_PATH].flag, path, e->k[K_WEIGHT_PATH].ref)))
            return rc;
    }
    return 0;
}

static int kv(bld *b)
{
    const eng *e = b->e;
    const char *name = NULL;
    int rc;
    if (!b->c->kv)
        return 0;
    if ((rc = canon(b, b->c->kv, "KV cache type", &name)))
        return rc;
    const char *v = e->kv_types ? str_of(e->kv_types, name) : NULL;
    if (!v || !*v) {
        char list[256];
        keys(e->kv_types, list, sizeof list);
        return refuse(b, "%s has no KV cache type %s among its flags' values (it takes: %s)",
                      e->name, name, list);
    }
    if (e->k[K_KV].flag)
        return emit(b, e->k[K_KV].flag, v, e->k[K_KV].ref);
    if (!e->k[K_KV_K].flag || !e->k[K_KV_V].flag)
        return refuse(b, "%s has no KV cache type flag", e->name);
    if ((rc = emit(b, e->k[K_KV_K].flag, v, e->k[K_KV_K].ref)))
        return rc;
    return emit(b, e->k[K_KV_V].flag, v, e->k[K_KV_V].ref);
}

static int count(bld *b, int k, int v, const char *what)
{
    if (v <= 0)
        return 0;
    if (!b->e->k[k].flag)
        return refuse(b, "%s has no flag for %s (%d)", b->e->name, what, v);
    return emit_int(b, k, v);
}

/* The step's shape: a budget and a chunk, which one flag may set together. */
static int step(bld *b)
{
    const eng *e = b->e;
    const int tb = b->c->token_budget, ch = b->c->chunk;
    int rc;
    if (e->k[K_TOKEN_BUDGET].flag && e->k[K_CHUNK].flag &&
        !strcmp(e->k[K_TOKEN_BUDGET].flag, e->k[K_CHUNK].flag)) {
        if (tb > 0 && ch > 0 && tb != ch)
            return refuse(b,
                          "%s sets the step's token budget and the prompt chunk with one "
                          "flag (%s): token_budget %d != chunk %d",
                          e->name, e->k[K_CHUNK].flag, tb, ch);
        if ((rc = count(b, K_TOKEN_BUDGET, tb > 0 ? tb : ch, "the token budget")))
            return rc;
    } else if ((rc = count(b, K_TOKEN_BUDGET, tb, "the step's token budget")) ||
               (rc = count(b, K_CHUNK, ch, "the prompt chunk"))) {
        return rc;
    }
    if (ch > 0 && e->k[K_CHUNKED_PREFILL].flag)
        return emit(b, e->k[K_CHUNKED_PREFILL].flag, e->k[K_CHUNKED_PREFILL].value,
                    e->k[K_CHUNKED_PREFILL].ref);
    return 0;
}

/* The CPU's threads and sockets: required where the CPU has work, else given if the engine
 * has the flag. */
static int cpu(bld *b, int cpu_work)
{
    const eng *e = b->e;
    const ws_plan_cmd_cfg *c = b->c;
    int rc;
    if (c->cpu_threads > 0) {
        if (e->k[K_THREADS].flag) {
            if ((rc = emit_int(b, K_THREADS, c->cpu_threads)))
                return rc;
        } else if (cpu_work) {
            return refuse(b, "%s has no flag for the CPU's threads (cpu_threads %d)", e->name,
                          c->cpu_threads);
        }
    }
    if (c->cpu_sockets < 1)
        return 0;
    if (e->k[K_SOCKETS].flag && (rc = emit_int(b, K_SOCKETS, c->cpu_sockets)))
        return rc;
    if (c->cpu_sockets > 1 && e->k[K_NUMA].flag &&
        (rc = emit(b, e->k[K_NUMA].flag, e->k[K_NUMA].value, e->k[K_NUMA].ref)))
        return rc;
    if (c->cpu_sockets > 1 && cpu_work && !e->k[K_SOCKETS].flag && !e->k[K_NUMA].flag)
        return refuse(b, "%s has no flag that spreads its CPU work over %d sockets", e->name,
                      c->cpu_sockets);
    return 0;
}

static int build(const eng *e, const ws_plan_cmd_cfg *c, ws_plan_cmd *out, int *refused,
                 ws_err *err)
{
    bld b = {.e = e, .c = c, .out = out, .err = err};
    int rc;
    memset(out, 0, sizeof *out);
    snprintf(out->engine, sizeof out->engine, "%s", e->name);
    snprintf(out->program_ref, sizeof out->program_ref, "%s", e->program_ref);
    if ((rc = canon(&b, c->w_gpu, "GPU weight format", &b.wg)) ||
        (rc = canon(&b, c->w_cpu_experts, "CPU experts' weight format", &b.wc)))
        return rc;
    const int M = c->n_moe_layers, moe = c->n_experts > 0 && M > 0;
    const int all_gpu = !moe || c->n_cpu_moe < 0 || c->gpu_experts >= c->n_experts;
    const int k = all_gpu ? 0 : c->n_cpu_moe == 0 || c->n_cpu_moe > M ? M : c->n_cpu_moe;
    const int cpu_layers =
        c->n_gpu_layers > 0 && c->n_gpu_layers < c->n_layers ? c->n_layers - c->n_gpu_layers : 0;
    const int cpu_exp = k > 0 || (moe && cpu_layers > c->n_layers - M);
    if (cpu_exp && strcmp(b.wg, b.wc))
        snprintf(b.w, sizeof b.w, "%s-%s", b.wg, b.wc);
    else
        snprintf(b.w, sizeof b.w, "%s", b.wg);
    upper(b.w, sizeof b.w, b.w);

    const size_t plen = strlen(e->program);
    if (plen + 1 > sizeof out->line)
        return ws_err_set(err, WS_EINVAL, "%s: program name too long", e->name);
    memcpy(out->line, e->program, plen + 1);
    b.len = plen;
    size_t i;
    json_t *x;
    json_array_foreach(e->model, i, x)
    {
        char v[256];
        expand(&b, str_of(x, "value"), v, sizeof v);
        if ((rc = emit(&b, str_of(x, "flag"), v, str_of(x, "ref"))))
            goto done;
    }
    json_array_foreach(e->args, i, x)
    {
        if ((rc = emit(&b, str_of(x, "flag"), str_of(x, "value"), str_of(x, "ref"))))
            goto done;
    }
    if (cpu_layers > 0 && !e->k[K_GPU_LAYERS].flag) {
        rc = refuse(&b, "%s has no flag that runs whole layers on the CPU (n_gpu_layers %d of %d)",
                    e->name, c->n_gpu_layers, c->n_layers);
        goto done;
    }
    if (e->k[K_GPU_LAYERS].flag &&
        (rc = emit_int(&b, K_GPU_LAYERS, cpu_layers ? c->n_gpu_layers : c->n_layers + 1)))
        goto done;
    if ((rc = placement(&b, k)) || (rc = weights(&b, cpu_exp)) || (rc = kv(&b)) ||
        (rc = count(&b, K_CTX, c->ctx, "the context")) || (rc = step(&b)) ||
        (rc = count(&b, K_MAX_SEQS, c->max_seqs, "the running sequences")) ||
        (rc = cpu(&b, k > 0 || cpu_layers > 0)))
        goto done;
done:
    *refused = b.refused;
    return rc;
}

static int build_named(const char *engine, const ws_plan_cmd_cfg *c, ws_plan_cmd *out, int *refused,
                       ws_err *err)
{
    *refused = 0;
    int rc = check_cfg(c, err);
    if (rc)
        return rc;
    eng e;
    rc = eng_open(engine, &e, err);
    if (rc == WS_EUNSUP)
        *refused = 1;
    if (!rc)
        rc = build(&e, c, out, refused, err);
    eng_free(&e);
    return rc;
}

int ws_plan_cmd_build(const char *engine, const ws_plan_cmd_cfg *c, ws_plan_cmd *out, ws_err *err)
{
    int refused;
    return build_named(engine, c, out, &refused, err);
}

int ws_plan_cmd_supports(const char *engine, const ws_plan_cmd_cfg *c, char *why, size_t cap,
                         ws_err *err)
{
    ws_plan_cmd *out = malloc(sizeof *out);
    if (!out) {
        ws_err_set(err, WS_ENOMEM, "plan_cmd: out of memory");
        if (why && cap)
            snprintf(why, cap, "plan_cmd: out of memory");
        return 0;
    }
    ws_err e = {0};
    int refused;
    const int rc = build_named(engine, c, out, &refused, &e);
    free(out);
    if (why && cap)
        snprintf(why, cap, "%s", rc ? e.msg : "");
    if (rc && !refused && err)
        *err = e;
    return rc == 0;
}

int ws_plan_cmd_render(const char *engine, const ws_plan_cmd_cfg *c, char *buf, size_t cap,
                       ws_err *err)
{
    ws_plan_cmd *out = malloc(sizeof *out);
    if (!out)
        return ws_err_set(err, WS_ENOMEM, "plan_cmd: out of memory");
    int rc = ws_plan_cmd_build(engine, c, out, err);
    if (!rc) {
        const size_t n = strlen(out->line);
        if (n + 1 > cap)
            rc = ws_err_set(err, WS_EINVAL,
                            "plan_cmd: %zu bytes of command line, buffer holds "
                            "%zu",
                            n + 1, cap);
        else
            memcpy(buf, out->line, n + 1);
    }
    free(out);
    return rc;
}
