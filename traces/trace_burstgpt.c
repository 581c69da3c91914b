/* trace_burstgpt: the BurstGPT CSV (`Timestamp,Model,Request tokens,Response tokens,
 * Total tokens,Log Type`), found by its `Timestamp`, `Request tokens` and `Response tokens`
 * columns; the others are ignored. Timestamp is seconds, shifted so the first row arrives
 * at 0. A row with 0 response tokens is a request that failed in the original service: it
 * is no request to simulate, so it is counted as failed and skipped (trace.c counts it). */
#include <string.h>

#include "trace_io.h"

static const char *const k_cols[] = {"Timestamp", "Request tokens", "Response tokens"};

static int detect(const char *line)
{
    return strstr(line, "Timestamp") && strstr(line, "Request tokens") &&
           strstr(line, "Response tokens");
}

static int header(ws_trace *t, char *line, ws_err *err)
{
    return trace_csv_columns(t, line, k_cols, 3, err);
}

static int row(ws_trace *t, char *line, size_t len, ws_trace_req *r, ws_err *err)
{
    (void)len;
    char *f[TRACE_COLS_MAX];
    double ts;
    if (trace_csv_row(t, line, f, err) ||
        trace_field_double(f[t->col[0]], "Timestamp", 0, 1e13, &ts, err) ||
        trace_field_tokens(f[t->col[1]], "Request tokens", &r->prompt_tokens, err))
        return TRACE_ROW_BAD;
    const char *resp = f[t->col[2]];
    if (!strcmp(resp, "0") || !strcmp(resp, "0.0"))
        return TRACE_ROW_FAILED;
    if (trace_field_tokens(resp, "Response tokens", &r->output_tokens, err))
        return TRACE_ROW_BAD;
    r->arrival_s = trace_shift(t, ts);
    return TRACE_ROW_OK;
}

const trace_importer trace_importer_burstgpt = {WS_TRACE_BURSTGPT, detect, header, 1, row};
