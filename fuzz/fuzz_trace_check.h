/* fuzz_trace_check: what every trace importer's fuzz target does with an input (included
 * by fuzz/fuzz_trace_<format>.c, each naming its format).
 *
 * The input is read as that format strictly, then with skip_bad, then with the format
 * detected; every request yielded must keep the reader's promises (tokens in bounds,
 * arrivals finite, in range and non-decreasing, ids in sequence), and the skip_bad pass,
 * written as our CSV and read back strictly, must give the same requests bit for bit. A
 * broken promise aborts, which libFuzzer reports as a finding like a sanitizer's. */
#ifndef WS_FUZZ_TRACE_CHECK_H
#define WS_FUZZ_TRACE_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

static int fuzz_trace_ok(const ws_trace_req *r, uint64_t i, double last)
{
    return r->id == i && r->prompt_tokens >= 1 && r->prompt_tokens <= WS_TRACE_TOKENS_MAX &&
           r->output_tokens >= 1 && r->output_tokens <= WS_TRACE_TOKENS_MAX &&
           isfinite(r->arrival_s) && r->arrival_s >= 0 && r->arrival_s <= WS_TRACE_ARRIVAL_MAX &&
           r->arrival_s >= last && r->session_id >= -1 && r->session_id <= WS_TRACE_SESSION_MAX;
}

/* Reads the whole source, checking each request; returns the count. */
static uint64_t fuzz_trace_drain(ws_trace *t)
{
    ws_trace_req r;
    ws_err err = {0};
    uint64_t n = 0;
    double last = 0;
    int rc;
    while ((rc = ws_trace_next(t, &r, &err)) == 1) {
        if (!fuzz_trace_ok(&r, n, last))
            abort();
        last = r.arrival_s;
        n++;
    }
    if (rc < 0 && (!err.msg[0] || strchr(err.msg, '\n')))
        abort(); /* an error has one line of message */
    return n;
}

static void fuzz_trace_run(ws_trace_format format, const uint8_t *data, size_t size)
{
    ws_trace *t;
    ws_err err = {0};
    ws_trace_opts strict = {.format = format}, skip = {.format = format, .skip_bad = 1},
                  detect = {0};
    if (ws_trace_open_mem("fuzz", data, size, &strict, &t, &err) == 0) {
        fuzz_trace_drain(t);
        ws_trace_close(t);
    }
    if (ws_trace_open_mem("fuzz", data, size, &detect, &t, &err) == 0) {
        fuzz_trace_drain(t);
        ws_trace_close(t);
    }
    if (ws_trace_open_mem("fuzz", data, size, &skip, &t, &err) != 0)
        return;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        ws_trace_close(t);
        return;
    }
    uint64_t written;
    int rc = ws_trace_write(t, f, "mem", &written, &err);
    ws_trace_close(t);
    fclose(f);
    if (rc) { /* skip_bad gets past every malformed row: only I/O could fail */
        free(buf);
        abort();
    }
    /* read back as ours, strictly, and compare with a fresh skip_bad read */
    ws_trace *a, *b;
    ws_trace_opts ours = {.format = WS_TRACE_OURS};
    if (ws_trace_open_mem("fuzz", data, size, &skip, &a, &err) ||
        ws_trace_open_mem("back", buf, len, &ours, &b, &err))
        abort();
    ws_trace_req x, y;
    uint64_t n = 0;
    while (ws_trace_next(a, &x, &err) == 1) {
        if (ws_trace_next(b, &y, &err) != 1 || x.arrival_s != y.arrival_s ||
            x.prompt_tokens != y.prompt_tokens || x.output_tokens != y.output_tokens ||
            x.session_id != y.session_id)
            abort();
        n++;
    }
    if (ws_trace_next(b, &y, &err) != 0 || n != written)
        abort();
    ws_trace_close(a);
    ws_trace_close(b);
    free(buf);
}

#endif
