/* fidelity_points: reading the published points (see fidelity_points.h). */
#include "fidelity_points.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "control.h"
#include "trace.h"
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
    free(r->op);
    free(r->g);
    memset(r, 0, sizeof *r);
}

/* ---- typed keys ------------------------------------------------------------------------ */

/* One point being read: what its messages name. */
typedef struct rd {
    const char *name; /* the document */
    const char *id;   /* the point's id once read, else NULL */
    size_t i;         /* its place in the document, from 0 */
    ws_err *err;
    int rc; /* the first refusal's code */
} rd;

/* "name: point 'id': <message>" ("point i" before the id is read); WS_EINVAL, kept in
 * c->rc. */
static int rd_fail(rd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int rd_fail(rd *c, const char *fmt, ...)
{
    char msg[WS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->id)
        return c->rc = ws_err_set(c->err, WS_EINVAL, "%s: point '%s': %s", c->name, c->id, msg);
    return c->rc = ws_err_set(c->err, WS_EINVAL, "%s: point %zu: %s", c->name, c->i, msg);
}

/* "in.key", or "key" at the point's top level (in ""). */
static const char *key_name(const char *in, const char *key, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s%s", in, *in ? "." : "", key);
    return buf;
}

/* 1 where s holds a control character: C0, DEL or C1 (U+0080..U+009F in UTF-8). */
static int has_control(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
            return 1;
    return 0;
}

/* The value at key of o (NULL where absent or null; o may be NULL). */
static json_t *rd_get(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_null(v) ? NULL : v;
}

static int rd_obj(rd *c, json_t *o, const char *in, const char *key, json_t **out)
{
    char k[64];
    *out = rd_get(o, key);
    if (*out && !json_is_object(*out)) {
        *out = NULL;
        return rd_fail(c, "%s must be an object", key_name(in, key, k, sizeof k));
    }
    return 0;
}

/* A string into dst ("" where absent): a name (of a profile, a model, a format) is refused
 * where it does not fit or holds a control character; descriptive text (text = 1) is cut
 * at a character boundary to fit, and printed escaped by the CLI. */
static int rd_str(rd *c, json_t *o, const char *in, const char *key, char *dst, size_t cap,
                  int text)
{
    char k[64];
    json_t *v = rd_get(o, key);
    dst[0] = '\0';
    if (!v)
        return 0;
    if (!json_is_string(v))
        return rd_fail(c, "%s must be a string", key_name(in, key, k, sizeof k));
    const char *s = json_string_value(v);
    size_t n = strlen(s);
    if (!text && n >= cap)
        return rd_fail(c, "%s is longer than %zu bytes", key_name(in, key, k, sizeof k), cap - 1);
    if (!text && has_control(s))
        return rd_fail(c, "%s has a control character", key_name(in, key, k, sizeof k));
    if (n >= cap) { /* cut before the character that does not fit whole */
        n = cap - 1;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(dst, s, n);
    dst[n] = '\0';
    return 0;
}

static int rd_bool(rd *c, json_t *o, const char *in, const char *key, int *out)
{
    char k[64];
    json_t *v = rd_get(o, key);
    *out = json_is_true(v);
    if (v && !json_is_boolean(v))
        return rd_fail(c, "%s must be true or false", key_name(in, key, k, sizeof k));
    return 0;
}

/* A whole number in 0..max, def where absent. */
static int rd_count(rd *c, json_t *o, const char *in, const char *key, int def, int max, int *out)
{
    char k[64];
    json_t *v = rd_get(o, key);
    *out = def;
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
        return rd_fail(c, "%s must be a whole number from 0 to %d", key_name(in, key, k, sizeof k),
                       max);
    *out = (int)json_integer_value(v);
    return 0;
}

/* A positive normal number (neither 0, negative, subnormal nor infinite) up to max; NAN
 * where absent and not required. */
static int rd_positive(rd *c, json_t *o, const char *in, const char *key, double max, int required,
                       double *out)
{
    char k[64];
    json_t *v = rd_get(o, key);
    *out = NAN;
    if (!v && !required)
        return 0;
    key_name(in, key, k, sizeof k);
    if (!json_is_number(v))
        return rd_fail(c, "%s must be a number", k);
    const double x = json_number_value(v);
    if (!isnormal(x) || x <= 0 || x > max) {
        char up[40] = "";
        if (isfinite(max))
            snprintf(up, sizeof up, " up to %g", max);
        return rd_fail(c, "%s must be a positive normal number%s, not %g", k, up, x);
    }
    *out = x;
    return 0;
}

/* ---- points ------------------------------------------------------------------------------ */

/* The version a text gives right after the engine's name ("vLLM v0.20.1", "vllm 0.6.3")
 * into out; out stays as it is when there is none. */
static void version_in_text(const char *engine, const char *text, char *out, size_t cap)
{
    if (!*engine || !text)
        return;
    for (const char *t = strcasestr(text, engine); t; t = strcasestr(t + 1, engine)) {
        const char *v = t + strlen(engine);
        while (*v == ' ')
            v++;
        v += *v == 'v' || *v == 'V';
        size_t n = strspn(v, "0123456789.");
        while (n && v[n - 1] == '.') /* "0.4.6.post1" */
            n--;
        if (n && v[0] != '.' && memchr(v, '.', n)) {
            snprintf(out, cap, "%.*s", (int)n, v);
            return;
        }
    }
}

/* The workload, stat and group of a serving point (the rest is read as for an e2e
 * point). */
static int serving_parse(rd *c, json_t *o, ws_fid_point *p)
{
    json_t *w;
    if (rd_obj(c, o, "", "workload", &w))
        return c->rc;
    if (!w)
        return rd_fail(c, "a serving point has a workload");
    ws_fid_workload *l = &p->load;
    const char *in = "workload";
    if (rd_str(c, w, in, "arrival", l->arrival, sizeof l->arrival, 0) ||
        rd_str(c, w, in, "lengths", l->lengths, sizeof l->lengths, 0) ||
        rd_str(c, w, in, "dataset", l->dataset, sizeof l->dataset, 1) ||
        rd_positive(c, w, in, "rate_rps", WS_FIDELITY_RATE_MAX, 0, &l->rate_rps) ||
        rd_count(c, w, in, "concurrency", 0, WS_FIDELITY_CLIENTS_MAX, &l->concurrency) ||
        rd_count(c, w, in, "num_requests", 0, WS_FIDELITY_TOKENS_MAX, &l->requests) ||
        rd_count(c, w, in, "prompt", -1, WS_TRACE_TOKENS_MAX, &p->prompt) ||
        rd_count(c, w, in, "output", 0, WS_TRACE_TOKENS_MAX, &p->output) ||
        rd_str(c, o, "", "stat", p->stat, sizeof p->stat, 0) ||
        rd_str(c, o, "", "group", p->group, sizeof p->group, 0))
        return c->rc;
    p->batch = 0;
    if (!*p->group)
        snprintf(p->group, sizeof p->group, "serving");
    return 0;
}

/* The tokens the point's largest simulation plays: its batch (a serving point's requests)
 * times the prompt and output it runs with, unpublished ones at what prediction puts in
 * their place (fidelity.c: the decode rate's default output, the longest prompt tried). */
static int check_tokens(rd *c, const ws_fid_point *p)
{
    const int serving = !strcmp(p->kind, "serving");
    long long n = serving ? p->load.requests : p->batch, prompt, output;
    if (serving) {
        prompt = p->prompt > 0 ? p->prompt : 0;
        output = p->output;
    } else {
        prompt = p->prompt > 0    ? p->prompt
                 : p->prompt == 0 ? 1
                 : p->prompt_hi   ? p->prompt_hi
                                  : WS_FIDELITY_PROMPT_HI;
        output = p->output > 0 ? p->output : WS_FIDELITY_OUTPUT;
    }
    const long long tokens = n * (prompt + output);
    if (tokens > WS_FIDELITY_TOKENS_MAX)
        return rd_fail(c,
                       "%lld tokens to simulate (%s %lld x (prompt %lld + output %lld)), more "
                       "than the %d of one point",
                       tokens, serving ? "workload.num_requests" : "batch", n, prompt, output,
                       WS_FIDELITY_TOKENS_MAX);
    return 0;
}

static int point_parse(rd *c, json_t *o, ws_fid_point *p)
{
    memset(p, 0, sizeof *p);
    if (!json_is_object(o))
        return ws_err_set(c->err, WS_EPARSE, "%s: point %zu is not an object", c->name, c->i);
    if (rd_str(c, o, "", "id", p->id, sizeof p->id, 0))
        return c->rc;
    if (!*p->id)
        return rd_fail(c, "no id");
    c->id = p->id;
    if (rd_str(c, o, "", "kind", p->kind, sizeof p->kind, 0))
        return c->rc;
    if (!*p->kind)
        snprintf(p->kind, sizeof p->kind, "e2e");
    const int serving = !strcmp(p->kind, "serving");
    if (!serving && strcmp(p->kind, "e2e"))
        return rd_fail(c, "kind is e2e or serving, not '%s'", p->kind);
    if (rd_str(c, o, "", "engine", p->engine, sizeof p->engine, 0))
        return c->rc;
    json_t *src = rd_get(o, "source");
    if (json_is_object(src)) {
        if (rd_str(c, src, "source", "where", p->source, sizeof p->source, 1) ||
            rd_str(c, src, "source", "url", p->url, sizeof p->url, 1))
            return c->rc;
    } else if (src && !json_is_string(src)) {
        return rd_fail(c, "source must be a string or an object");
    } else if (rd_str(c, o, "", "source", p->source, sizeof p->source, 1)) {
        return c->rc;
    }
    if (!*p->source)
        return rd_fail(c, "no source");
    json_t *notes = rd_get(o, "notes");
    if (notes && !json_is_string(notes))
        return rd_fail(c, "notes must be a string");
    if (rd_str(c, o, "", "engine_version", p->engine_version, sizeof p->engine_version, 0))
        return c->rc;
    if (!*p->engine_version)
        version_in_text(p->engine, p->source, p->engine_version, sizeof p->engine_version);
    if (!*p->engine_version)
        version_in_text(p->engine, json_string_value(notes), p->engine_version,
                        sizeof p->engine_version);
    if (rd_bool(c, o, "", "quantized", &p->quantized) || rd_bool(c, o, "", "offload", &p->offload))
        return c->rc;
    json_t *hw;
    char gd[92], hd[92];
    if (rd_obj(c, o, "", "hardware", &hw) ||
        rd_str(c, hw, "hardware", "gpu", p->gpu, sizeof p->gpu, 0) ||
        rd_str(c, hw, "hardware", "host", p->host, sizeof p->host, 0) ||
        rd_str(c, hw, "hardware", "gpu_desc", gd, sizeof gd, 1) ||
        rd_str(c, hw, "hardware", "host_desc", hd, sizeof hd, 1))
        return c->rc;
    snprintf(p->hw_desc, sizeof p->hw_desc, "%s%s%s", gd, *gd && *hd ? " + " : "", hd);
    if (!*p->host && !p->offload) {
        /* Nothing runs on the host of a GPU-only point: any host profile serves. */
        snprintf(p->host, sizeof p->host, "%s", WS_FIDELITY_HOST);
        snprintf(p->assumed, sizeof p->assumed, "host %s (not published; unused)",
                 WS_FIDELITY_HOST);
    }
    if (rd_str(c, o, "", "model", p->model, sizeof p->model, 0) ||
        rd_str(c, o, "", "metric", p->metric, sizeof p->metric, 0) ||
        rd_str(c, o, "", "unit", p->unit, sizeof p->unit, 0))
        return c->rc;
    json_t *w = rd_get(o, "weights");
    if (json_is_object(w)) {
        if (rd_str(c, w, "weights", "gpu_part", p->weights_gpu, sizeof p->weights_gpu, 0) ||
            rd_str(c, w, "weights", "cpu_experts", p->weights_cpu, sizeof p->weights_cpu, 0))
            return c->rc;
    } else if (w && !json_is_string(w)) {
        return rd_fail(c, "weights must be a string or an object");
    } else if (rd_str(c, o, "", "weights", p->weights_gpu, sizeof p->weights_gpu, 0)) {
        return c->rc;
    }
    if (!strcmp(p->weights_cpu, "none"))
        p->weights_cpu[0] = '\0';
    char counts[24];
    if (rd_str(c, o, "", "kv_dtype", p->kv_dtype, sizeof p->kv_dtype, 0) ||
        rd_str(c, o, "", "throughput_counts", counts, sizeof counts, 0) ||
        rd_str(c, o, "", "offload_what", p->offload_what, sizeof p->offload_what, 0))
        return c->rc;
    if (*counts && strcmp(counts, "output") && strcmp(counts, "prompt+output"))
        return rd_fail(c, "throughput_counts is output or prompt+output");
    p->count_prompt = !strcmp(counts, "prompt+output");
    if (!*p->offload_what)
        snprintf(p->offload_what, sizeof p->offload_what, "%s", p->offload ? "experts" : "none");
    json_t *pl, *range;
    const char *in = "placement";
    const int pmax = WS_FIDELITY_PLACEMENT_MAX;
    int infer_threads, threads;
    char pf[16];
    if (rd_obj(c, o, "", in, &pl) || rd_bool(c, pl, in, "all_experts_cpu", &p->all_experts_cpu) ||
        rd_bool(c, pl, in, "weights_one_node", &p->one_node) ||
        rd_count(c, pl, in, "gpu_experts", -1, pmax, &p->gpu_experts) ||
        rd_count(c, pl, in, "n_cpu_moe", -1, pmax, &p->n_cpu_moe) ||
        rd_count(c, pl, in, "n_gpu_layers", -1, pmax, &p->n_gpu_layers) ||
        rd_count(c, pl, in, "sockets_used", 0, pmax, &p->cpu_sockets) ||
        rd_count(c, pl, in, "cpu_infer_threads", 0, pmax, &infer_threads) ||
        rd_count(c, pl, in, "cpu_threads", 0, pmax, &threads) ||
        rd_str(c, pl, in, "prefill", pf, sizeof pf, 0) ||
        rd_count(c, pl, in, "chunk", 0, WS_TRACE_TOKENS_MAX, &p->chunk) ||
        rd_count(c, pl, in, "prefill_gpu_tokens", 0, WS_TRACE_TOKENS_MAX, &p->prefill_gpu_tokens) ||
        rd_count(c, o, "", "batch", 1, WS_FIDELITY_BATCH_MAX, &p->batch) ||
        rd_count(c, o, "", "prompt", -1, WS_TRACE_TOKENS_MAX, &p->prompt) ||
        rd_count(c, o, "", "output", 0, WS_TRACE_TOKENS_MAX, &p->output) ||
        rd_obj(c, o, "", "prompt_range", &range) ||
        rd_count(c, range, "prompt_range", "lo", 0, WS_TRACE_TOKENS_MAX, &p->prompt_lo) ||
        rd_count(c, range, "prompt_range", "hi", 0, WS_TRACE_TOKENS_MAX, &p->prompt_hi) ||
        rd_positive(c, o, "", "published", INFINITY, 1, &p->published))
        return c->rc;
    p->cpu_threads = infer_threads ? infer_threads : threads;
    if ((rd_get(pl, "chunk") && p->chunk < 1) ||
        (rd_get(pl, "prefill_gpu_tokens") && p->prefill_gpu_tokens < 1))
        return rd_fail(c, "placement.%s must be a whole number from 1 to %d",
                       p->chunk < 1 && rd_get(pl, "chunk") ? "chunk" : "prefill_gpu_tokens",
                       WS_TRACE_TOKENS_MAX);
    p->prefill_mode = *pf ? ws_prefill_mode_parse(pf) : WS_PREFILL_AUTO;
    if (p->prefill_mode < 0)
        return rd_fail(c, "placement.prefill is auto, cpu or gpu");
    if ((p->prompt_lo || p->prompt_hi) &&
        (p->prompt >= 0 || p->prompt_lo < 1 || p->prompt_hi < p->prompt_lo))
        return rd_fail(c, "prompt_range needs prompt null and 1 <= lo <= hi");
    p->predicted = p->ratio = NAN;
    if (serving) {
        if (serving_parse(c, o, p))
            return c->rc;
    } else {
        snprintf(p->group, sizeof p->group, "e2e %s",
                 p->offload && p->quantized ? "offload+quantized"
                 : p->offload               ? "offload"
                 : p->quantized             ? "quantized"
                                            : "gpu-only");
    }
    return check_tokens(c, p);
}

/* ---- documents ---------------------------------------------------------------------------- */

/* jansson's message about a document it cannot read: "name:line:column: text" where it
 * gives a place, "name: text" where it does not; control characters in the text (the
 * token near the error) shown as '?', so the message stays one line. */
static int json_fail(const char *name, const json_error_t *je, ws_err *err)
{
    char text[sizeof je->text];
    snprintf(text, sizeof text, "%s", je->text);
    for (char *t = text; *t; t++)
        if ((unsigned char)*t < 0x20 || *t == 0x7f)
            *t = '?';
    if (je->line > 0)
        return ws_err_set(err, WS_EPARSE, "%s:%d:%d: %s", name, je->line, je->column, text);
    return ws_err_set(err, WS_EPARSE, "%s: %s", name, text);
}

int ws_fidelity_parse(const char *text, size_t len, const char *name, ws_fid_report *r, ws_err *err)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return json_fail(name, &je, err);
    json_t *arr = json_is_array(root) ? root : json_object_get(root, "points");
    json_t *seen = json_object(); /* the ids so far, as keys */
    const size_t n0 = r->n;
    int rc = 0;
    if (!seen)
        rc = ws_err_set(err, WS_ENOMEM, "out of memory");
    else if (!json_is_array(arr))
        rc = ws_err_set(err, WS_EPARSE, "%s: expected an array of points or {\"points\": [...]}",
                        name);
    else if (r->n + json_array_size(arr) > WS_FIDELITY_POINTS_MAX)
        rc = ws_err_set(err, WS_EINVAL, "%s: %zu points, more than the %d of one report", name,
                        json_array_size(arr), WS_FIDELITY_POINTS_MAX);
    for (size_t k = 0; !rc && k < r->n; k++)
        if (json_object_set_new_nocheck(seen, r->pt[k].id, json_true()))
            rc = ws_err_set(err, WS_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < json_array_size(arr); i++) {
        ws_fid_point p;
        rd c = {.name = name, .i = i, .err = err};
        rc = point_parse(&c, json_array_get(arr, i), &p);
        if (!rc && json_object_get(seen, p.id))
            rc = ws_err_set(err, WS_EINVAL, "%s: two points named '%s'", name, p.id);
        if (!rc && json_object_set_new_nocheck(seen, p.id, json_true()))
            rc = ws_err_set(err, WS_ENOMEM, "out of memory");
        if (!rc)
            rc = ws_fidelity_add(r, &p, err);
    }
    json_decref(seen);
    json_decref(root);
    if (rc)
        r->n = n0;
    return rc;
}

int ws_fidelity_load(const char *path, ws_fid_report *r, ws_err *err)
{
    size_t len = 0;
    char *text = ws_read_file(path, &len, err);
    if (!text)
        return err && err->code ? err->code : WS_EIO;
    const int rc = ws_fidelity_parse(text, len, path, r, err);
    free(text);
    return rc;
}
