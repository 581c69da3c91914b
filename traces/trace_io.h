/* trace_io: what the trace importers share, behind trace.h: the source object, a line
 * reader with a capped fixed buffer, a CSV splitter and strict field parsers that name
 * the column. Each importer (trace_ours.c, trace_azure.c, trace_mooncake.c,
 * trace_burstgpt.c, trace_vidur.c) is a table of two functions: one checks the header
 * line, one turns a row into a request. A row function returns TRACE_ROW_OK, a skip
 * (failed request), or TRACE_ROW_BAD with the problem in err (no file or line: trace.c
 * adds them). Only trace*.c include this header. */
#ifndef WS_TRACE_IO_H
#define WS_TRACE_IO_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"
#include "ws_err.h"

/* The line reader: a descriptor or a memory buffer, read through one buffer of at most
 * WS_TRACE_LINE_MAX + TRACE_CHUNK bytes. */
#define TRACE_CHUNK (64 << 10)
typedef struct trace_lines {
    int fd;          /* -1: memory */
    const char *mem; /* memory source */
    size_t mem_len, mem_pos;
    char *buf;
    size_t cap, start, end, scan;
    int eof;
    uint64_t lineno; /* number of the line last returned, 1-based */
    long long bytes; /* bytes read so far */
} trace_lines;

enum { TRACE_LINE_EOF = 0, TRACE_LINE_OK = 1, TRACE_LINE_LONG = 2, TRACE_LINE_ERR = -1 };
/* The next line, NUL-terminated in place without its "\n" or "\r\n": TRACE_LINE_OK, EOF,
 * LONG (a line over WS_TRACE_LINE_MAX, consumed up to its end) or ERR (I/O, err set). */
int trace_lines_next(trace_lines *lr, const char *name, char **line, size_t *len, ws_err *err);

#define TRACE_COLS_MAX 16 /* columns a CSV header may have */

/* The per-format state kept in the source. */
struct ws_trace {
    const struct trace_importer *imp; /* NULL: a generator */
    ws_trace_format format;
    char name[1024];
    ws_trace_opts opts;
    ws_trace_counts counts;
    trace_lines lr;
    int done;
    char *pending; /* the first line, when it is a row (no header), not yet parsed */
    size_t pending_len;
    /* arrival order */
    int have_last;
    double last_arrival;
    /* first row's time, the origin importers shift to 0 */
    int have_origin;
    double origin;
    int64_t origin_s, origin_ns; /* Azure: the first timestamp, exactly */
    /* CSV columns: col[k] is the index of the k-th field the importer needs, ncols the
     * header's count */
    int ncols;
    int col[8];
    int has_sessions;
    int closed_clients;
    int64_t *blocks; /* the last request's block hashes (ws_trace_req.blocks) */
    size_t cap_blocks;
    /* generator */
    void *gen;
    int (*gen_next)(ws_trace *t, ws_trace_req *req, ws_err *err);
    void (*gen_free)(void *gen);
};

enum { TRACE_ROW_OK = 0, TRACE_ROW_BAD = 1, TRACE_ROW_FAILED = 2 };

typedef struct trace_importer {
    ws_trace_format format;
    /* 1 if this header line (or first line) is this format's */
    int (*detect)(const char *line);
    /* Checks the header and fills t->col/ncols; 0 or err (no file/line prefix). Formats
     * without a header (Mooncake) set has_header = 0 and get the first row as a row. */
    int (*header)(ws_trace *t, char *line, ws_err *err);
    int has_header;
    /* One row into req (arrival_s before shifting is the importer's job: it sets it
     * final); TRACE_ROW_* */
    int (*row)(ws_trace *t, char *line, size_t len, ws_trace_req *req, ws_err *err);
} trace_importer;

extern const trace_importer trace_importer_ours;
extern const trace_importer trace_importer_azure;
extern const trace_importer trace_importer_mooncake;
extern const trace_importer trace_importer_burstgpt;
extern const trace_importer trace_importer_vidur;

/* Splits a CSV line in place into at most max fields (RFC 4180 quotes, blanks around
 * unquoted fields trimmed); returns the count, or -1 with err set (more than max fields,
 * an unterminated quote). */
int trace_csv_split(char *line, char **fields, int max, ws_err *err);
/* Finds each of the n names in the header's fields (exact, case-sensitive); fills col[]
 * and t->ncols; an absent name is an error naming it. */
int trace_csv_columns(ws_trace *t, char *line, const char *const *names, int n, ws_err *err);
/* Splits a row and checks it has t->ncols fields. */
int trace_csv_row(ws_trace *t, char *line, char **fields, ws_err *err);

/* A token count in 1..WS_TRACE_TOKENS_MAX (an integer; "12.0" is accepted). */
int trace_field_tokens(const char *s, const char *col, int32_t *out, ws_err *err);
/* A finite number in [lo, hi]. */
int trace_field_double(const char *s, const char *col, double lo, double hi, double *out,
                       ws_err *err);
/* Importers: the arrival of a row whose raw time is v: v minus the first row's. */
double trace_shift(ws_trace *t, double v);

#endif
