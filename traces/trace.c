/* trace: see trace.h. Opening, format detection, the checks every row passes (bounds,
 * arrival order, skip_bad accounting) and the CSV writer; the formats are in trace_*.c. */
#include "trace.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace_io.h"
#include "ws_atomic.h"
#include "ws_util.h"

static const trace_importer *const k_importers[] = {
    &trace_importer_ours,     &trace_importer_azure, &trace_importer_mooncake,
    &trace_importer_burstgpt, &trace_importer_vidur,
};
#define N_IMPORTERS (sizeof k_importers / sizeof k_importers[0])

static const char *const k_format_names[] = {"auto",     "ours",  "azure", "mooncake",
                                             "burstgpt", "vidur", "gen"};

const char *ws_trace_format_name(ws_trace_format f)
{
    return (unsigned)f < sizeof k_format_names / sizeof k_format_names[0] ? k_format_names[f] : "?";
}

int ws_trace_format_parse(const char *s, ws_trace_format *out, ws_err *err)
{
    for (int f = WS_TRACE_AUTO; f < WS_TRACE_GEN; f++)
        if (!strcmp(s, k_format_names[f])) {
            *out = (ws_trace_format)f;
            return 0;
        }
    return ws_err_set(err, WS_EINVAL,
                      "unknown trace format '%s' (auto, ours, azure, mooncake, burstgpt, vidur)",
                      s);
}

static const trace_importer *importer_of(ws_trace_format f)
{
    for (size_t i = 0; i < N_IMPORTERS; i++)
        if (k_importers[i]->format == f)
            return k_importers[i];
    return NULL;
}

/* The first non-blank line (its number in lr.lineno), or an error for an empty file. */
static int first_line(ws_trace *t, char **line, size_t *len, ws_err *err)
{
    for (;;) {
        int rc = trace_lines_next(&t->lr, t->name, line, len, err);
        if (rc == TRACE_LINE_ERR)
            return -1;
        if (rc == TRACE_LINE_EOF)
            return ws_err_set(err, WS_EPARSE, "%s: empty trace (no header)", t->name), -1;
        if (rc == TRACE_LINE_LONG)
            return ws_err_set(err, WS_EPARSE, "%s:%llu: first line longer than %d bytes", t->name,
                              (unsigned long long)t->lr.lineno, WS_TRACE_LINE_MAX),
                   -1;
        t->counts.lines++;
        /* A UTF-8 byte order mark is not part of the header. */
        if (*len >= 3 && !memcmp(*line, "\xEF\xBB\xBF", 3)) {
            *line += 3;
            *len -= 3;
        }
        if (*len > 0)
            return 0;
    }
}

static int start(ws_trace *t, ws_err *err)
{
    char *line;
    size_t len;
    if (first_line(t, &line, &len, err))
        return -1;
    if (memchr(line, '\0', len))
        return ws_err_set(err, WS_EPARSE, "%s:%llu: NUL byte in the first line", t->name,
                          (unsigned long long)t->lr.lineno);
    const trace_importer *imp = importer_of(t->opts.format);
    if (!imp) {
        for (size_t i = 0; i < N_IMPORTERS && !imp; i++)
            if (k_importers[i]->detect(line))
                imp = k_importers[i];
        if (!imp)
            return ws_err_set(err, WS_EPARSE,
                              "%s:%llu: unknown trace format (the first line is none of: "
                              "arrival_s,prompt_tokens,output_tokens[,session_id]; Azure "
                              "TIMESTAMP,ContextTokens,GeneratedTokens; Mooncake JSON lines; "
                              "BurstGPT Timestamp,...,Request tokens,Response tokens; Vidur "
                              "arrived_at,num_prefill_tokens,num_decode_tokens); --format "
                              "forces one",
                              t->name, (unsigned long long)t->lr.lineno);
    }
    t->imp = imp;
    t->format = imp->format;
    if (imp->has_header) {
        if (imp->header(t, line, err))
            return ws_err_prefix(err, "%s:%llu: %s", t->name, (unsigned long long)t->lr.lineno,
                                 ws_trace_format_name(imp->format)),
                   -1;
        return 0;
    }
    /* No header: the first line is the first row, handed to the first ws_trace_next
     * (the reader's buffer is untouched until then). */
    t->pending = line;
    t->pending_len = len;
    return 0;
}

static int open_common(ws_trace *t, const ws_trace_opts *opts, ws_trace **out, ws_err *err)
{
    if (opts)
        t->opts = *opts;
    if (t->opts.format == WS_TRACE_GEN) {
        ws_trace_close(t);
        return ws_err_set(err, WS_EINVAL, "format 'gen' is not a file format");
    }
    t->lr.buf = malloc(t->lr.cap);
    if (!t->lr.buf) {
        ws_trace_close(t);
        return ws_err_set(err, WS_ENOMEM, "out of memory for the trace reader");
    }
    ws_err e = {0};
    if (start(t, &e)) {
        ws_trace_close(t);
        if (err)
            *err = e;
        return e.code ? e.code : WS_EPARSE;
    }
    *out = t;
    return 0;
}

static ws_trace *new_source(const char *name)
{
    ws_trace *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->lr.fd = -1;
    return t;
}

int ws_trace_open(const char *path, const ws_trace_opts *opts, ws_trace **out, ws_err *err)
{
    *out = NULL;
    ws_trace *t = new_source(path);
    if (!t)
        return ws_err_set(err, WS_ENOMEM, "out of memory for the trace reader");
    t->lr.fd = ws_open_regular(path, WS_TRACE_FILE_MAX, err);
    if (t->lr.fd < 0) {
        free(t);
        return err ? err->code : WS_EIO;
    }
    t->lr.cap = (size_t)WS_TRACE_LINE_MAX + TRACE_CHUNK + 1;
    return open_common(t, opts, out, err);
}

int ws_trace_open_mem(const char *name, const void *data, size_t len, const ws_trace_opts *opts,
                      ws_trace **out, ws_err *err)
{
    *out = NULL;
    ws_trace *t = new_source(name);
    if (!t)
        return ws_err_set(err, WS_ENOMEM, "out of memory for the trace reader");
    t->lr.mem = data;
    t->lr.mem_len = len;
    t->lr.cap = (len < WS_TRACE_LINE_MAX ? len : WS_TRACE_LINE_MAX) + TRACE_CHUNK + 1;
    return open_common(t, opts, out, err);
}

void ws_trace_close(ws_trace *t)
{
    if (!t)
        return;
    if (t->lr.fd >= 0)
        close(t->lr.fd);
    free(t->lr.buf);
    free(t->blocks);
    if (t->gen_free)
        t->gen_free(t->gen);
    free(t);
}

/* A malformed row: an error, or counted and skipped. err holds the problem; returns -1 to
 * stop, 0 to go on. */
static int bad_row(ws_trace *t, ws_err *err)
{
    ws_err tmp = {0};
    ws_err *e = err ? err : &tmp;
    ws_err_prefix(e, "%s:%llu", t->name, (unsigned long long)t->lr.lineno);
    if (!t->opts.skip_bad) {
        t->done = 1;
        return -1;
    }
    if (!t->counts.bad)
        snprintf(t->counts.first_bad, sizeof t->counts.first_bad, "%s", e->msg);
    t->counts.bad++;
    ws_err_clear(e);
    return 0;
}

int ws_trace_next(ws_trace *t, ws_trace_req *req, ws_err *err)
{
    if (t->done)
        return 0;
    if (t->gen_next) {
        int rc = t->gen_next(t, req, err);
        if (rc == 1) {
            req->id = t->counts.requests++;
        } else {
            t->done = 1;
        }
        return rc;
    }
    for (;;) {
        char *line;
        size_t len;
        int rc;
        if (t->pending) {
            line = t->pending;
            len = t->pending_len;
            t->pending = NULL;
            rc = TRACE_LINE_OK;
        } else {
            rc = trace_lines_next(&t->lr, t->name, &line, &len, err);
            if (rc == TRACE_LINE_ERR) {
                t->done = 1;
                return -1;
            }
            if (rc == TRACE_LINE_EOF) {
                t->done = 1;
                return 0;
            }
            t->counts.lines++;
        }
        if (rc == TRACE_LINE_LONG) {
            ws_err_set(err, WS_EPARSE, "line longer than %d bytes", WS_TRACE_LINE_MAX);
            if (bad_row(t, err))
                return -1;
            continue;
        }
        if (len == 0)
            continue;
        if (memchr(line, '\0', len)) {
            ws_err_set(err, WS_EPARSE, "NUL byte in the line");
            if (bad_row(t, err))
                return -1;
            continue;
        }
        ws_trace_req r = {.session_id = -1};
        ws_err e = {0};
        int row = t->imp->row(t, line, len, &r, &e);
        if (row == TRACE_ROW_FAILED) {
            t->counts.failed++;
            continue;
        }
        if (row == TRACE_ROW_OK) {
            if (!(r.arrival_s >= 0 && r.arrival_s <= WS_TRACE_ARRIVAL_MAX)) {
                ws_err_set(&e, WS_EINVAL, "arrival %g s: outside 0..%g", r.arrival_s,
                           WS_TRACE_ARRIVAL_MAX);
                row = TRACE_ROW_BAD;
            } else if (t->have_last && r.arrival_s < t->last_arrival) {
                ws_err_set(&e, WS_EINVAL,
                           "arrival %.17g s before the previous row's %.17g s (arrivals must "
                           "be non-decreasing)",
                           r.arrival_s, t->last_arrival);
                row = TRACE_ROW_BAD;
            }
        }
        if (row != TRACE_ROW_OK) {
            if (err)
                *err = e;
            if (bad_row(t, err ? err : &e))
                return -1;
            continue;
        }
        t->have_last = 1;
        t->last_arrival = r.arrival_s;
        r.id = t->counts.requests++;
        *req = r;
        return 1;
    }
}

ws_trace_format ws_trace_format_of(const ws_trace *t)
{
    return t->format;
}
const char *ws_trace_name(const ws_trace *t)
{
    return t->name;
}
const ws_trace_counts *ws_trace_get_counts(const ws_trace *t)
{
    return &t->counts;
}
int ws_trace_has_sessions(const ws_trace *t)
{
    return t->has_sessions;
}
int ws_trace_closed_clients(const ws_trace *t)
{
    return t->closed_clients;
}

/* The shortest of %.15g, %.16g, %.17g that reads back as v. */
static void fmt_exact(char *buf, size_t cap, double v)
{
    for (int p = 15; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

int ws_trace_write(ws_trace *src, FILE *out, const char *out_name, uint64_t *n_out, ws_err *err)
{
    if (n_out)
        *n_out = 0;
    if (src->closed_clients > 0)
        return ws_err_set(err, WS_EUNSUP,
                          "%s: closed-loop arrivals depend on completions and cannot be "
                          "written as a trace (use them as a generator in the simulator)",
                          out_name);
    int sessions = src->has_sessions;
    if (fprintf(out, "arrival_s,prompt_tokens,output_tokens%s\n", sessions ? ",session_id" : "") <
        0)
        goto io;
    ws_trace_req r;
    int rc;
    uint64_t n = 0;
    while ((rc = ws_trace_next(src, &r, err)) == 1) {
        char a[40];
        fmt_exact(a, sizeof a, r.arrival_s);
        int w;
        if (!sessions)
            w = fprintf(out, "%s,%d,%d\n", a, (int)r.prompt_tokens, (int)r.output_tokens);
        else if (r.session_id < 0)
            w = fprintf(out, "%s,%d,%d,\n", a, (int)r.prompt_tokens, (int)r.output_tokens);
        else
            w = fprintf(out, "%s,%d,%d,%lld\n", a, (int)r.prompt_tokens, (int)r.output_tokens,
                        (long long)r.session_id);
        if (w < 0)
            goto io;
        n++;
    }
    if (rc < 0)
        return err ? err->code : WS_EPARSE;
    if (fflush(out) != 0 || ferror(out))
        goto io;
    if (n_out)
        *n_out = n;
    return 0;
io:
    return ws_err_set(err, WS_EIO, "%s: cannot write: %s", out_name,
                      errno ? strerror(errno) : "write error");
}

int ws_trace_write_file(ws_trace *src, const char *path, uint64_t *n_out, ws_err *err)
{
    /* whole or not at all; a target that is not a regular file (a link, a FIFO, a device,
     * a folder) is refused before anything is written */
    ws_atomic_file af;
    int rc = ws_atomic_open(&af, path, err);
    if (rc)
        return rc;
    if ((rc = ws_trace_write(src, af.f, path, n_out, err)))
        ws_atomic_abort(&af);
    else
        rc = ws_atomic_commit(&af, err);
    return rc;
}
