/* trace_vidur: Vidur's request trace CSV, found by its column names `arrived_at`,
 * `num_prefill_tokens`, `num_decode_tokens` (other columns, such as a request id, are
 * allowed and ignored). arrived_at is seconds; shifted so the first row arrives at 0. */
#include <string.h>

#include "trace_io.h"

static const char *const k_cols[] = {"arrived_at", "num_prefill_tokens", "num_decode_tokens"};

static int detect(const char *line)
{
    return strstr(line, "arrived_at") && strstr(line, "num_prefill_tokens") &&
           strstr(line, "num_decode_tokens");
}

static int header(ws_trace *t, char *line, ws_err *err)
{
    return trace_csv_columns(t, line, k_cols, 3, err);
}

static int row(ws_trace *t, char *line, size_t len, ws_trace_req *r, ws_err *err)
{
    (void)len;
    char *f[TRACE_COLS_MAX];
    double at;
    if (trace_csv_row(t, line, f, err) ||
        trace_field_double(f[t->col[0]], "arrived_at", 0, 1e13, &at, err) ||
        trace_field_tokens(f[t->col[1]], "num_prefill_tokens", &r->prompt_tokens, err) ||
        trace_field_tokens(f[t->col[2]], "num_decode_tokens", &r->output_tokens, err))
        return TRACE_ROW_BAD;
    r->arrival_s = trace_shift(t, at);
    return TRACE_ROW_OK;
}

const trace_importer trace_importer_vidur = {WS_TRACE_VIDUR, detect, header, 1, row};
