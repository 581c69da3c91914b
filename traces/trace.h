/* trace: request traces as a stream. A source yields requests (arrival time, prompt and
 * output tokens, optional session) one at a time in arrival order; the simulator pulls
 * them as its clock reaches them, so its memory grows with the requests in flight, never
 * with the trace's length. A source is a file in one of five formats (detected from the
 * header or first line, or forced), an in-memory buffer (tests, fuzzing), or a generator
 * (trace_gen.h); all are read with ws_trace_next and closed with ws_trace_close.
 *
 * Formats: ours, `arrival_s,prompt_tokens,output_tokens[,session_id]` with that header;
 * Azure LLM inference CSV, Mooncake JSONL, BurstGPT CSV and Vidur trace CSV (docs/traces.md).
 * Importers shift arrivals so that the first row arrives at 0; our CSV is read as written.
 *
 * A file is read through a fixed buffer (WS_TRACE_LINE_MAX plus one read), so reading
 * takes constant memory. Every row is checked: fields present and numeric, token counts
 * in 1..WS_TRACE_TOKENS_MAX, arrivals finite, in 0..WS_TRACE_ARRIVAL_MAX and
 * non-decreasing (a row that goes back in time is malformed: sorting would need the
 * whole trace). A malformed row is an error "FILE:LINE: problem"; with skip_bad it is
 * counted and skipped instead, and the first such message kept. BurstGPT's failed
 * requests (0 response tokens) are not requests: they are counted (`failed`) and skipped.
 * Nothing is dropped without being counted. */
#ifndef WS_TRACE_H
#define WS_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_TRACE_TOKENS_MAX (1 << 24)    /* most prompt or output tokens of one request */
#define WS_TRACE_ARRIVAL_MAX 1e9         /* latest arrival, s (about 31 years) */
#define WS_TRACE_LINE_MAX (1 << 20)      /* longest line, bytes (Mooncake hash_ids) */
#define WS_TRACE_FILE_MAX (64LL << 30)   /* largest trace file, bytes */
#define WS_TRACE_SESSION_MAX (1LL << 62) /* largest session id */
#define WS_TRACE_BLOCK_TOKENS 512         /* tokens of a prompt block (Mooncake's hash_ids) */

typedef enum ws_trace_format {
    WS_TRACE_AUTO = 0, /* detect from the header / first line */
    WS_TRACE_OURS,     /* arrival_s,prompt_tokens,output_tokens[,session_id] */
    WS_TRACE_AZURE,    /* TIMESTAMP,ContextTokens,GeneratedTokens */
    WS_TRACE_MOONCAKE, /* JSONL: timestamp (ms), input_length, output_length, hash_ids */
    WS_TRACE_BURSTGPT, /* Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type */
    WS_TRACE_VIDUR,    /* arrived_at,num_prefill_tokens,num_decode_tokens */
    WS_TRACE_GEN,      /* a generator (trace_gen.h) */
} ws_trace_format;

typedef struct ws_trace_req {
    uint64_t id;           /* 0, 1, 2, ... in the order yielded */
    double arrival_s;      /* s; non-decreasing (closed-loop generators: see trace_gen.h) */
    int32_t prompt_tokens; /* 1..WS_TRACE_TOKENS_MAX */
    int32_t output_tokens; /* 1..WS_TRACE_TOKENS_MAX */
    int64_t session_id;    /* 0..WS_TRACE_SESSION_MAX, or -1: none */
    /* The hashes of the prompt's blocks of WS_TRACE_BLOCK_TOKENS tokens, in order (equal
     * hashes: equal prefixes up to that block); the source's, valid until its next call.
     * NULL, 0: none (prefix caching sees no hit). */
    const int64_t *blocks;
    int n_blocks;
} ws_trace_req;

typedef struct ws_trace_opts {
    ws_trace_format format; /* WS_TRACE_AUTO detects */
    int skip_bad;           /* 1: count and skip malformed rows instead of failing */
} ws_trace_opts;

typedef struct ws_trace_counts {
    uint64_t requests;              /* requests yielded so far */
    uint64_t lines;                 /* lines read, header and blank lines included */
    uint64_t bad;                   /* malformed rows skipped (skip_bad) */
    uint64_t failed;                /* failed requests skipped (BurstGPT: 0 response tokens) */
    char first_bad[WS_ERR_MSG_MAX]; /* "FILE:LINE: problem" of the first skipped row, or "" */
} ws_trace_counts;

typedef struct ws_trace ws_trace;

/* Opens a trace file (a regular file of at most WS_TRACE_FILE_MAX bytes); opts may be
 * NULL (detect, strict). The header is read and checked here. Returns 0 or sets err. */
int ws_trace_open(const char *path, const ws_trace_opts *opts, ws_trace **out, ws_err *err);
/* The same over len bytes at data (not copied: they must outlive the source); `name`
 * stands for the file in messages. */
int ws_trace_open_mem(const char *name, const void *data, size_t len, const ws_trace_opts *opts,
                      ws_trace **out, ws_err *err);
/* The next request into *req: returns 1, 0 at the end, or -1 with err set (a malformed
 * row without skip_bad, or an I/O error). After 0 or -1 the source stays at its end. */
int ws_trace_next(ws_trace *t, ws_trace_req *req, ws_err *err);
void ws_trace_close(ws_trace *t);

ws_trace_format ws_trace_format_of(const ws_trace *t);
const char *ws_trace_name(const ws_trace *t); /* file name, or "generator" */
const ws_trace_counts *ws_trace_get_counts(const ws_trace *t);
/* 1 when requests carry session ids (our CSV with a session_id column; closed loops). */
int ws_trace_has_sessions(const ws_trace *t);
/* Closed-loop generator: its number of clients (see trace_gen.h); 0 for open arrivals. */
int ws_trace_closed_clients(const ws_trace *t);

/* "ours", "azure", "mooncake", "burstgpt", "vidur", "gen", "auto". */
const char *ws_trace_format_name(ws_trace_format f);
/* Name -> format; returns 0, or WS_EINVAL naming the choices. */
int ws_trace_format_parse(const char *s, ws_trace_format *out, ws_err *err);

/* Writes every remaining request of src as our CSV to `out` (out_name in messages);
 * *n_out (may be NULL) gets the number written. A closed-loop source is refused
 * (WS_EUNSUP): its arrivals depend on completions, which a file cannot hold. */
int ws_trace_write(ws_trace *src, FILE *out, const char *out_name, uint64_t *n_out, ws_err *err);
/* The same into `path`, whole or not at all (common/ws_atomic.h): a target that exists and
 * is not a regular file (a symbolic link, a FIFO, a device, a folder) is refused before
 * anything is written, and an error leaves the target and its folder as they were. */
int ws_trace_write_file(ws_trace *src, const char *path, uint64_t *n_out, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
