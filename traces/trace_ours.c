/* trace_ours: our CSV, `arrival_s,prompt_tokens,output_tokens[,session_id]`, header
 * required and exactly so (columns in that order). Arrivals are seconds, read as written
 * (no shift); an empty session_id is "no session". */
#include <string.h>

#include "trace_io.h"
#include "ws_parse.h"

static const char *const k_cols[] = {"arrival_s", "prompt_tokens", "output_tokens", "session_id"};

static int detect(const char *line)
{
    return !strncmp(line, "arrival_s,", 10) || !strncmp(line, "arrival_s ,", 11);
}

static int header(ws_trace *t, char *line, ws_err *err)
{
    char *f[TRACE_COLS_MAX];
    int nf = trace_csv_split(line, f, TRACE_COLS_MAX, err);
    if (nf < 0) {
        ws_err_prefix(err, "header");
        return -1;
    }
    int ok = nf == 3 || nf == 4;
    for (int i = 0; ok && i < nf; i++)
        ok = !strcmp(f[i], k_cols[i]);
    if (!ok)
        return ws_err_set(err, WS_EPARSE,
                          "header must be arrival_s,prompt_tokens,output_tokens[,session_id]");
    t->ncols = nf;
    t->has_sessions = nf == 4;
    return 0;
}

static int row(ws_trace *t, char *line, size_t len, ws_trace_req *r, ws_err *err)
{
    (void)len;
    char *f[TRACE_COLS_MAX];
    if (trace_csv_row(t, line, f, err) ||
        trace_field_double(f[0], "arrival_s", 0, WS_TRACE_ARRIVAL_MAX, &r->arrival_s, err) ||
        trace_field_tokens(f[1], "prompt_tokens", &r->prompt_tokens, err) ||
        trace_field_tokens(f[2], "output_tokens", &r->output_tokens, err))
        return TRACE_ROW_BAD;
    r->session_id = -1;
    if (t->ncols == 4 && *f[3]) {
        long long s;
        int rc = ws_parse_int64(f[3], 0, WS_TRACE_SESSION_MAX, &s);
        if (rc) {
            ws_err_set(err, WS_EPARSE, "session_id '%.40s': not an integer in 0..%lld", f[3],
                       WS_TRACE_SESSION_MAX);
            return TRACE_ROW_BAD;
        }
        r->session_id = s;
    }
    return TRACE_ROW_OK;
}

const trace_importer trace_importer_ours = {WS_TRACE_OURS, detect, header, 1, row};
