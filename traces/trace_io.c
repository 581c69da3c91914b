/* trace_io: see trace_io.h. */
#include "trace_io.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ws_parse.h"

/* Reads more bytes into buf[end..cap-1) (one byte is kept for the NUL); sets eof. */
static int fill(trace_lines *lr, const char *name, ws_err *err)
{
    size_t room = lr->cap - 1 - lr->end;
    if (room > TRACE_CHUNK)
        room = TRACE_CHUNK;
    size_t n;
    if (lr->fd < 0) {
        n = lr->mem_len - lr->mem_pos < room ? lr->mem_len - lr->mem_pos : room;
        memcpy(lr->buf + lr->end, lr->mem + lr->mem_pos, n);
        lr->mem_pos += n;
    } else {
        ssize_t r;
        do
            r = read(lr->fd, lr->buf + lr->end, room);
        while (r < 0 && errno == EINTR);
        if (r < 0)
            return ws_err_set(err, WS_EIO, "%s: cannot read: %s", name, strerror(errno));
        n = (size_t)r;
    }
    if (n == 0)
        lr->eof = 1;
    lr->end += n;
    lr->bytes += (long long)n;
    if (lr->bytes > WS_TRACE_FILE_MAX)
        return ws_err_set(err, WS_EINVAL, "%s: more than the %lld GiB this tool reads", name,
                          WS_TRACE_FILE_MAX >> 30);
    return 0;
}

int trace_lines_next(trace_lines *lr, const char *name, char **line, size_t *len, ws_err *err)
{
    int discarding = 0;
    for (;;) {
        char *nl = lr->scan < lr->end ? memchr(lr->buf + lr->scan, '\n', lr->end - lr->scan) : NULL;
        if (nl || (lr->eof && lr->start < lr->end)) {
            size_t stop = nl ? (size_t)(nl - lr->buf) : lr->end;
            size_t l0 = lr->start, n = stop - l0;
            lr->start = lr->scan = nl ? stop + 1 : lr->end;
            lr->lineno++;
            if (discarding)
                return TRACE_LINE_LONG;
            if (n > WS_TRACE_LINE_MAX)
                return TRACE_LINE_LONG;
            if (n > 0 && lr->buf[l0 + n - 1] == '\r')
                n--;
            lr->buf[l0 + n] = '\0';
            *line = lr->buf + l0;
            *len = n;
            return TRACE_LINE_OK;
        }
        if (lr->eof)
            return discarding ? (lr->lineno++, TRACE_LINE_LONG) : TRACE_LINE_EOF;
        if (lr->end - lr->start > WS_TRACE_LINE_MAX) {
            discarding = 1; /* keep reading to the line's end, keeping nothing */
            lr->start = lr->end = lr->scan = 0;
        } else if (lr->start > 0 && lr->cap - 1 - lr->end < TRACE_CHUNK) {
            memmove(lr->buf, lr->buf + lr->start, lr->end - lr->start);
            lr->end -= lr->start;
            lr->start = 0;
        }
        lr->scan = lr->end;
        if (fill(lr, name, err))
            return TRACE_LINE_ERR;
    }
}

int trace_csv_split(char *line, char **fields, int max, ws_err *err)
{
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == max)
            return ws_err_set(err, WS_EPARSE, "more than %d fields", max), -1;
        while (*p == ' ' || *p == '\t')
            p++;
        char *w = p, *f = p;
        if (*p == '"') {
            p++;
            for (;;) {
                if (!*p)
                    return ws_err_set(err, WS_EPARSE, "unterminated quoted field"), -1;
                if (*p == '"') {
                    if (p[1] != '"')
                        break;
                    p++;
                }
                *w++ = *p++;
            }
            p++;
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p && *p != ',')
                return ws_err_set(err, WS_EPARSE, "text after a quoted field"), -1;
        } else {
            while (*p && *p != ',')
                p++;
            w = p;
            while (w > f && (w[-1] == ' ' || w[-1] == '\t'))
                w--;
        }
        fields[n++] = f;
        int last = !*p;
        *w = '\0';
        if (last)
            return n;
        p++;
    }
}

int trace_csv_columns(ws_trace *t, char *line, const char *const *names, int n, ws_err *err)
{
    char *f[TRACE_COLS_MAX];
    int nf = trace_csv_split(line, f, TRACE_COLS_MAX, err);
    if (nf < 0) {
        ws_err_prefix(err, "header");
        return -1;
    }
    for (int k = 0; k < n; k++) {
        t->col[k] = -1;
        for (int i = 0; i < nf; i++)
            if (!strcmp(f[i], names[k])) {
                if (t->col[k] >= 0)
                    return ws_err_set(err, WS_EPARSE, "header: column '%s' given twice", names[k]);
                t->col[k] = i;
            }
        if (t->col[k] < 0)
            return ws_err_set(err, WS_EPARSE, "header: no '%s' column", names[k]);
    }
    t->ncols = nf;
    return 0;
}

int trace_csv_row(ws_trace *t, char *line, char **fields, ws_err *err)
{
    int nf = trace_csv_split(line, fields, TRACE_COLS_MAX, err);
    if (nf < 0)
        return -1;
    if (nf != t->ncols)
        return ws_err_set(err, WS_EPARSE, "%d fields, the header has %d", nf, t->ncols), -1;
    return 0;
}

/* A field quoted for a message: at most 40 characters. */
#define SHOW(s) (int)(strlen(s) > 40 ? 40 : strlen(s)), (s), (strlen(s) > 40 ? "..." : "")

int trace_field_tokens(const char *s, const char *col, int32_t *out, ws_err *err)
{
    double v;
    if (!*s)
        return ws_err_set(err, WS_EPARSE, "%s is empty", col);
    const int bad = ws_parse_double(s, -DBL_MAX, DBL_MAX, &v);
    if (bad == ERANGE) /* a number, but beyond a double (1e999) */
        return ws_err_set(err, WS_EINVAL, "%s '%.*s%s': out of range (1..%d)", col, SHOW(s),
                          WS_TRACE_TOKENS_MAX);
    if (bad || v != floor(v))
        return ws_err_set(err, WS_EPARSE, "%s '%.*s%s': not an integer", col, SHOW(s));
    if (v < 1 || v > WS_TRACE_TOKENS_MAX)
        return ws_err_set(err, WS_EINVAL, "%s %.10g: outside 1..%d", col, v, WS_TRACE_TOKENS_MAX);
    *out = (int32_t)v;
    return 0;
}

int trace_field_double(const char *s, const char *col, double lo, double hi, double *out,
                       ws_err *err)
{
    double v;
    if (!*s)
        return ws_err_set(err, WS_EPARSE, "%s is empty", col);
    const int bad = ws_parse_double(s, -DBL_MAX, DBL_MAX, &v);
    if (bad == ERANGE) /* a number, but beyond a double (1e999) */
        return ws_err_set(err, WS_EINVAL, "%s '%.*s%s': out of range (%g..%g)", col, SHOW(s), lo,
                          hi);
    if (bad)
        return ws_err_set(err, WS_EPARSE, "%s '%.*s%s': not a number", col, SHOW(s));
    if (v < lo || v > hi)
        return ws_err_set(err, WS_EINVAL, "%s %g: outside %g..%g", col, v, lo, hi);
    *out = v;
    return 0;
}

double trace_shift(ws_trace *t, double v)
{
    if (!t->have_origin) {
        t->have_origin = 1;
        t->origin = v;
    }
    return v - t->origin;
}
