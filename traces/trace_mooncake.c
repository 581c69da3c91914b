/* trace_mooncake: the Mooncake trace, JSON lines (no header), one object a line with
 * `timestamp` (ms), `input_length`, `output_length` and `hash_ids` (the hashes of the
 * prompt's 512-token blocks, at most one per block of the prompt; other keys are ignored). Found by a
 * first line that opens a JSON object. Each line is parsed by jansson with duplicate keys
 * refused; the timestamp is shifted so the first row arrives at 0. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trace_io.h"

static int detect(const char *line)
{
    while (*line == ' ' || *line == '\t')
        line++;
    return *line == '{';
}

static int number(json_t *o, const char *key, double *v, ws_err *err)
{
    json_t *x = json_object_get(o, key);
    if (!x)
        return ws_err_set(err, WS_EPARSE, "no \"%s\"", key);
    if (!json_is_number(x))
        return ws_err_set(err, WS_EPARSE, "\"%s\" is not a number", key);
    *v = json_number_value(x);
    return 0;
}

static int tokens(json_t *o, const char *key, int32_t *out, ws_err *err)
{
    double v;
    if (number(o, key, &v, err))
        return -1;
    if (v != floor(v))
        return ws_err_set(err, WS_EPARSE, "\"%s\" %g: not an integer", key, v);
    if (v < 1 || v > WS_TRACE_TOKENS_MAX)
        return ws_err_set(err, WS_EINVAL, "\"%s\" %.10g: outside 1..%d", key, v,
                          WS_TRACE_TOKENS_MAX);
    *out = (int32_t)v;
    return 0;
}

/* hash_ids, when present: non-negative integers, at most one per block of the prompt. */
static int hashes(ws_trace *t, json_t *o, ws_trace_req *r, ws_err *err)
{
    json_t *h = json_object_get(o, "hash_ids");
    r->blocks = NULL;
    r->n_blocks = 0;
    if (!h)
        return 0;
    const size_t n = json_array_size(h);
    const size_t most = ((size_t)r->prompt_tokens + WS_TRACE_BLOCK_TOKENS - 1) / WS_TRACE_BLOCK_TOKENS;
    if (!json_is_array(h) || n > most)
        return ws_err_set(err, WS_EPARSE, "\"hash_ids\": not a list of at most %zu hashes (one "
                                          "per %d-token block)", most, WS_TRACE_BLOCK_TOKENS);
    if (n > t->cap_blocks) {
        int64_t *b = realloc(t->blocks, n * sizeof *b);
        if (!b)
            return ws_err_set(err, WS_ENOMEM, "out of memory (hash_ids)");
        t->blocks = b;
        t->cap_blocks = n;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(h, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return ws_err_set(err, WS_EPARSE, "\"hash_ids\"[%zu]: not a non-negative integer", i);
        t->blocks[i] = (int64_t)json_integer_value(x);
    }
    r->blocks = t->blocks;
    r->n_blocks = (int)n;
    return 0;
}

static int row(ws_trace *t, char *line, size_t len, ws_trace_req *r, ws_err *err)
{
    json_error_t je;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) {
        ws_err_set(err, WS_EPARSE, "not JSON: %s (column %d)", je.text, je.column);
        return TRACE_ROW_BAD;
    }
    int rc = TRACE_ROW_BAD;
    double ms;
    if (!json_is_object(o))
        ws_err_set(err, WS_EPARSE, "not a JSON object");
    else if (!number(o, "timestamp", &ms, err) &&
             !tokens(o, "input_length", &r->prompt_tokens, err) &&
             !tokens(o, "output_length", &r->output_tokens, err) && !hashes(t, o, r, err)) {
        if (!(ms >= 0 && ms <= 1e15))
            ws_err_set(err, WS_EINVAL, "\"timestamp\" %g: outside 0..1e15 ms", ms);
        else {
            r->arrival_s = trace_shift(t, ms) / 1000.0;
            rc = TRACE_ROW_OK;
        }
    }
    json_decref(o);
    return rc;
}

const trace_importer trace_importer_mooncake = {WS_TRACE_MOONCAKE, detect, NULL, 0, row};
