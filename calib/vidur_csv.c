/* vidur_csv: Vidur's profiling CSVs into operator rows (see vidur_csv.h). */
#include "vidur_csv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_parse.h"

static const char *const k_op_names[WS_VOP_COUNT] = {
    "attn_decode",   "attn_prefill",  "attn_pre_proj",   "attn_post_proj",
    "mlp_up_proj",   "mlp_down_proj", "input_layernorm", "post_attention_layernorm",
    "attn_rope",     "mlp_act",       "add"};

const char *ws_vidur_op_name(int op)
{
    return op >= 0 && op < WS_VOP_COUNT ? k_op_names[op] : "?";
}

ws_vidur_group ws_vidur_op_group(int op)
{
    return op == WS_VOP_ATTN_DECODE    ? WS_VIDUR_DECODE_ATTN
           : op == WS_VOP_ATTN_PREFILL ? WS_VIDUR_PREFILL_ATTN
           : op <= WS_VOP_DOWN         ? WS_VIDUR_GEMM
                                       : WS_VIDUR_ELEM;
}

const char *ws_vidur_group_name(int group)
{
    static const char *const names[WS_VIDUR_GROUPS] = {"decode attention", "prefill attention",
                                                       "GEMM", "elementwise"};
    return group >= 0 && group < WS_VIDUR_GROUPS ? names[group] : "?";
}

/* ---- lines and fields ------------------------------------------------------------------- */

typedef struct reader {
    const char *p, *end;
    const char *name;
    int line;
    char *buf; /* the current line, NUL-terminated, split in place */
    size_t cap;
} reader;

/* The next line without its "\n" / "\r\n" into r->buf (*len bytes, NULs included): 1, 0 at
 * the end, -1 out of memory. */
static int next_line(reader *r, char **line, size_t *len)
{
    if (r->p >= r->end)
        return 0;
    const char *e = memchr(r->p, '\n', (size_t)(r->end - r->p));
    size_t n = (size_t)((e ? e : r->end) - r->p);
    if (n + 1 > r->cap) {
        char *b = realloc(r->buf, n + 1);
        if (!b)
            return -1;
        r->buf = b;
        r->cap = n + 1;
    }
    memcpy(r->buf, r->p, n);
    if (n && r->buf[n - 1] == '\r')
        n--;
    r->buf[n] = '\0';
    r->p = e ? e + 1 : r->end;
    r->line++;
    *line = r->buf;
    *len = n;
    return 1;
}

/* Splits a line on commas in place (blanks around fields trimmed; Vidur's files quote
 * nothing); -1 past max fields or on a quote or a NUL byte inside the line. */
static int split(char *line, size_t len, char **f, int max, const char **why)
{
    if (strlen(line) != len) {
        *why = "a NUL byte in the line";
        return -1;
    }
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == max) {
            *why = "more fields than a profile has";
            return -1;
        }
        while (*p == ' ' || *p == '\t')
            p++;
        char *s = p;
        while (*p && *p != ',') {
            if (*p == '"') {
                *why = "a quoted field (Vidur's profiles have none)";
                return -1;
            }
            p++;
        }
        char *w = p;
        while (w > s && (w[-1] == ' ' || w[-1] == '\t'))
            w--;
        const int last = !*p;
        *w = '\0';
        f[n++] = s;
        if (last)
            return n;
        p++;
    }
}

/* ---- columns ---------------------------------------------------------------------------- */

typedef struct cols {
    int n;                   /* header fields */
    char **name;             /* header field names (owned copy) */
} cols;

static int col_find(const cols *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->name[i], name))
            return i;
    return -1;
}

static void cols_free(cols *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->name[i]);
    free(c->name);
    memset(c, 0, sizeof *c);
}

/* A field quoted for a message: at most 40 characters. */
#define SHOW(s) (int)(strlen(s) > 40 ? 40 : strlen(s)), (s), (strlen(s) > 40 ? "..." : "")

/* The model a file measures (its first row's) and the attention kind of the list. */
typedef struct model {
    int line;              /* the row that set it (0: none yet) */
    int embd, qh, kvh;
    int mha;               /* attention rows of the list: 1 MHA, 0 GQA, -1 none yet */
} model;

typedef struct rowctx {
    const reader *r;
    const cols *c;
    char **f;
    ws_err *err;
    model *m;
} rowctx;

static int bad(const rowctx *x, const char *col, const char *fmt, const char *v)
{
    return ws_err_set(x->err, WS_EPARSE, "%s:%d: %s '%.*s%s': %s", x->r->name, x->r->line, col,
                      SHOW(v), fmt);
}

/* Column `name` as a whole number in 1..WS_VIDUR_DIM_MAX (lo 0 allowed with zero_ok). */
static int get_int(const rowctx *x, int col, const char *name, int zero_ok, int *out)
{
    const char *v = x->f[col];
    double d;
    if (ws_parse_double(v, -1e300, 1e300, &d) || d != floor(d))
        return bad(x, name, "not a whole number", v);
    if (d < (zero_ok ? 0 : 1) || d > WS_VIDUR_DIM_MAX)
        return ws_err_set(x->err, WS_EPARSE, "%s:%d: %s %.0f: outside %d..%d", x->r->name,
                          x->r->line, name, d, zero_ok ? 0 : 1, WS_VIDUR_DIM_MAX);
    *out = (int)d;
    return 0;
}

/* "True" / "False" (pandas) or 1 / 0. */
static int get_bool(const rowctx *x, int col, const char *name, int *out)
{
    const char *v = x->f[col];
    if (!strcmp(v, "True") || !strcmp(v, "true") || !strcmp(v, "1"))
        *out = 1;
    else if (!strcmp(v, "False") || !strcmp(v, "false") || !strcmp(v, "0"))
        *out = 0;
    else
        return bad(x, name, "not True or False", v);
    return 0;
}

/* Columns time_stats.<op>.{median,min,max}: -1 where absent. */
typedef struct tcols {
    int median, min, max;
} tcols;

static tcols time_cols(const cols *c, const char *op)
{
    char k[160];
    tcols t;
    snprintf(k, sizeof k, "time_stats.%s.median", op);
    t.median = col_find(c, k);
    snprintf(k, sizeof k, "time_stats.%s.min", op);
    t.min = col_find(c, k);
    snprintf(k, sizeof k, "time_stats.%s.max", op);
    t.max = col_find(c, k);
    return t;
}

/* A time in ms (column `col`) in seconds; empty: *present = 0. */
static int get_ms(const rowctx *x, int col, int positive, double *s, int *present)
{
    *present = 0;
    *s = NAN;
    if (col < 0)
        return 0;
    const char *v = x->f[col];
    if (!*v)
        return 0;
    double d;
    if (ws_parse_double(v, 0, 1e9, &d))
        return bad(x, x->c->name[col], "not a time in milliseconds (0..1e9)", v);
    if (positive && !(d > 0))
        return bad(x, x->c->name[col], "a median time of 0 cannot be fitted", v);
    if (positive && d < WS_VIDUR_T_MIN_MS)
        return bad(x, x->c->name[col], "a median below 1 ns is no kernel's time", v);
    *s = d * 1e-3;
    *present = 1;
    return 0;
}

/* The row's times of op from tc into w; *has = 0 when its median is empty. */
static int get_times(const rowctx *x, tcols tc, ws_vidur_row *w, int *has)
{
    int p;
    int rc = get_ms(x, tc.median, 1, &w->t, has);
    if (!rc)
        rc = get_ms(x, tc.min, 0, &w->t_min, &p);
    if (!rc)
        rc = get_ms(x, tc.max, 0, &w->t_max, &p);
    /* min <= median <= max, up to the last digits a float printed in decimal may differ by */
    const double tol = 1e-9 * w->t;
    if (!rc && *has && (w->t_min > w->t + tol || w->t > w->t_max + tol))
        rc = ws_err_set(x->err, WS_EPARSE, "%s:%d: time_stats.%s: min %.6g, median %.6g, max "
                        "%.6g ms are not in order",
                        x->r->name, x->r->line, ws_vidur_op_name(w->op), w->t_min * 1e3,
                        w->t * 1e3, w->t_max * 1e3);
    return rc;
}

static int push(ws_vidur_rows *o, const ws_vidur_row *w, ws_err *err)
{
    if (o->n == o->cap) {
        const int cap = o->cap ? 2 * o->cap : 1024;
        ws_vidur_row *v = realloc(o->v, sizeof *v * (size_t)cap);
        if (!v)
            return ws_err_set(err, WS_ENOMEM, "out of memory");
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = *w;
    return 0;
}

/* ---- the two formats -------------------------------------------------------------------- */

enum { A_EMBD, A_QH, A_KVH, A_TP, A_BATCH, A_KV, A_CHUNK, A_PREFILL, A_N };
#define COLS_MAX 8 /* the larger of A_N and M_N */
static const char *const k_attn_cols[A_N] = {
    "n_embd",     "n_q_head",      "n_kv_head",          "num_tensor_parallel_workers",
    "batch_size", "kv_cache_size", "prefill_chunk_size", "is_prefill"};

enum { M_QH, M_KVH, M_EMBD, M_INTER, M_TOKENS, M_TP, M_N };
static const char *const k_mlp_cols[M_N] = {"n_head",          "n_kv_head",  "n_embd",
                                            "n_expanded_embd", "num_tokens", "num_tensor_parallel_workers"};

/* Heads per GPU and the head width from n_embd, q and kv heads and the workers; the model
 * must be the file's first row's (its kind and shapes would otherwise come from that row). */
static int heads(const rowctx *x, int embd, int qh, int kvh, int tp, ws_vidur_row *w)
{
    model *m = x->m;
    if (!m->line)
        *m = (model){x->r->line, embd, qh, kvh, m->mha};
    else if (embd != m->embd || qh != m->qh || kvh != m->kvh)
        return ws_err_set(x->err, WS_EPARSE,
                          "%s:%d: n_embd %d with %d q / %d kv heads, where line %d has %d with "
                          "%d / %d: one model per file",
                          x->r->name, x->r->line, embd, qh, kvh, m->line, m->embd, m->qh, m->kvh);
    if (qh % tp || kvh % tp || embd % qh || qh % kvh)
        return ws_err_set(x->err, WS_EPARSE,
                          "%s:%d: %d q and %d kv heads over n_embd %d do not split over %d "
                          "workers",
                          x->r->name, x->r->line, qh, kvh, embd, tp);
    w->q_heads = qh / tp;
    w->kv_heads = kvh / tp;
    w->head_dim = embd / qh;
    w->tp = tp;
    return 0;
}

static int attn_row(const rowctx *x, const int *col, const tcols *tc, ws_vidur_rows *o)
{
    int v[A_N];
    for (int k = 0; k < A_N; k++) {
        const int zero_ok = k == A_KV || k == A_CHUNK;
        int rc = k == A_PREFILL ? get_bool(x, col[k], k_attn_cols[k], &v[k])
                                : get_int(x, col[k], k_attn_cols[k], zero_ok, &v[k]);
        if (rc)
            return rc;
    }
    ws_vidur_row w = {.line = x->r->line, .batch = v[A_BATCH], .kv = v[A_KV], .chunk = v[A_CHUNK]};
    int rc = heads(x, v[A_EMBD], v[A_QH], v[A_KVH], v[A_TP], &w);
    if (rc)
        return rc;
    w.op = v[A_PREFILL] ? WS_VOP_ATTN_PREFILL : WS_VOP_ATTN_DECODE;
    const int mha = w.q_heads == w.kv_heads;
    if (x->m->mha < 0)
        x->m->mha = mha;
    else if (mha != x->m->mha)
        return ws_err_set(x->err, WS_EPARSE,
                          "%s:%d: %s attention (%d q / %d kv heads), where the files before "
                          "hold %s attention: one attention kind per list",
                          x->r->name, x->r->line, mha ? "MHA" : "GQA", v[A_QH], v[A_KVH],
                          mha ? "GQA" : "MHA");
    if (v[A_PREFILL] && !(w.chunk > 0))
        return ws_err_set(x->err, WS_EPARSE, "%s:%d: a prefill row with prefill_chunk_size 0",
                          x->r->name, x->r->line);
    if (!v[A_PREFILL] && !(w.kv > 0))
        return ws_err_set(x->err, WS_EPARSE, "%s:%d: a decode row with kv_cache_size 0",
                          x->r->name, x->r->line);
    int has;
    if ((rc = get_times(x, tc[w.op], &w, &has)))
        return rc;
    if (!has)
        return ws_err_set(x->err, WS_EPARSE, "%s:%d: a %s row without time_stats.%s.median",
                          x->r->name, x->r->line, v[A_PREFILL] ? "prefill" : "decode",
                          ws_vidur_op_name(w.op));
    return push(o, &w, x->err);
}

static int mlp_row(const rowctx *x, const int *col, int gated_col, const tcols *tc,
                   ws_vidur_rows *o)
{
    int v[M_N], gated = 1;
    for (int k = 0; k < M_N; k++) {
        int rc = get_int(x, col[k], k_mlp_cols[k], 0, &v[k]);
        if (rc)
            return rc;
    }
    if (gated_col >= 0 && get_bool(x, gated_col, "use_gated_mlp", &gated))
        return x->err ? x->err->code : WS_EPARSE;
    ws_vidur_row base = {.line = x->r->line};
    int rc = heads(x, v[M_EMBD], v[M_QH], v[M_KVH], v[M_TP], &base);
    if (rc)
        return rc;
    if (v[M_INTER] % v[M_TP])
        return ws_err_set(x->err, WS_EPARSE,
                          "%s:%d: n_expanded_embd %d does not split over %d workers", x->r->name,
                          x->r->line, v[M_INTER], v[M_TP]);
    const double M = v[M_TOKENS], H = v[M_EMBD], I = (double)v[M_INTER] / v[M_TP],
                 d = base.head_dim;
    const double qkv = (base.q_heads + 2.0 * base.kv_heads) * d, qd = base.q_heads * d;
    const struct {
        int op;
        double K, N;
    } shape[] = {{WS_VOP_QKV, H, qkv},
                 {WS_VOP_OPROJ, qd, H},
                 {WS_VOP_UP, H, (gated ? 2.0 : 1.0) * I},
                 {WS_VOP_DOWN, I, H},
                 {WS_VOP_NORM_IN, H, 0},
                 {WS_VOP_NORM_POST, H, 0},
                 {WS_VOP_ROPE, (double)(base.q_heads + base.kv_heads), d},
                 {WS_VOP_ACT, I, 0},
                 {WS_VOP_ADD, H, 0}};
    for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) {
        ws_vidur_row w = base;
        w.op = shape[i].op;
        w.M = M;
        w.K = shape[i].K;
        w.N = shape[i].N;
        int has;
        if ((rc = get_times(x, tc[w.op], &w, &has)))
            return rc;
        if (!has)
            return ws_err_set(x->err, WS_EPARSE, "%s:%d: time_stats.%s.median is empty",
                              x->r->name, x->r->line, ws_vidur_op_name(w.op));
        if ((rc = push(o, &w, x->err)))
            return rc;
    }
    return 0;
}

/* The text of column `col` of the first row (provenance), "" when absent. */
static void first_text(char **f, int col, char *out, size_t cap)
{
    if (col >= 0 && !out[0])
        snprintf(out, cap, "%s", f[col]);
}

/* The held-out rows of one file, rows [n0, n): a row's place among its file's rows of its
 * operation decides, whatever else is read with it. */
static void mark_heldout(ws_vidur_rows *o, int n0)
{
    int seen[WS_VOP_COUNT] = {0};
    for (int i = n0; i < o->n; i++) {
        ws_vidur_row *w = &o->v[i];
        w->heldout = seen[w->op]++ % WS_VIDUR_HOLDOUT_EVERY == WS_VIDUR_HOLDOUT_EVERY - 1;
    }
}

static int parse(reader *r, ws_vidur_rows *o, ws_err *err)
{
    char *line, *f[WS_VIDUR_FIELDS_MAX];
    const char *why = NULL;
    size_t hlen;
    int rc;
    if ((rc = next_line(r, &line, &hlen)) <= 0)
        return rc < 0 ? ws_err_set(err, WS_ENOMEM, "out of memory")
                      : ws_err_set(err, WS_EPARSE, "%s: empty file, no header", r->name);
    if (hlen >= 3 && !memcmp(line, "\xEF\xBB\xBF", 3)) { /* a byte order mark */
        line += 3;
        hlen -= 3;
    }
    const int nf = split(line, hlen, f, WS_VIDUR_FIELDS_MAX, &why);
    if (nf < 0)
        return ws_err_set(err, WS_EPARSE, "%s:%d: header: %s", r->name, r->line, why);
    cols c = {.n = 0, .name = calloc((size_t)nf, sizeof(char *))};
    if (!c.name)
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    for (int i = 0; i < nf; i++) {
        if (!(c.name[i] = strdup(f[i]))) {
            cols_free(&c);
            return ws_err_set(err, WS_ENOMEM, "out of memory");
        }
        c.n++;
        if (!*f[i] || col_find(&(cols){i, c.name}, f[i]) >= 0) {
            rc = ws_err_set(err, WS_EPARSE, "%s:%d: header: column %d %s", r->name, r->line,
                            i + 1, *f[i] ? "given twice" : "has no name");
            cols_free(&c);
            return rc;
        }
    }
    tcols tc[WS_VOP_COUNT];
    for (int k = 0; k < WS_VOP_COUNT; k++)
        tc[k] = time_cols(&c, ws_vidur_op_name(k));
    const int attn = tc[WS_VOP_ATTN_DECODE].median >= 0 || tc[WS_VOP_ATTN_PREFILL].median >= 0;
    const int mlp = tc[WS_VOP_UP].median >= 0;
    const char *const *need = attn ? k_attn_cols : k_mlp_cols;
    const int n_need = attn ? A_N : M_N;
    int col[COLS_MAX];
    if (attn == mlp) {
        rc = ws_err_set(err, WS_EPARSE,
                        "%s:%d: header: %s", r->name, r->line,
                        attn ? "both attention and MLP time columns"
                             : "neither Vidur's attention profile (time_stats.attn_decode.*) "
                               "nor its MLP profile (time_stats.mlp_up_proj.*)");
        cols_free(&c);
        return rc;
    }
    for (int k = 0; k < n_need; k++)
        if ((col[k] = col_find(&c, need[k])) < 0) {
            rc = ws_err_set(err, WS_EPARSE, "%s:%d: header: no '%s' column", r->name, r->line,
                            need[k]);
            cols_free(&c);
            return rc;
        }
    if (mlp)
        for (int k = WS_VOP_QKV; k < WS_VOP_COUNT; k++)
            if (tc[k].median < 0) {
                rc = ws_err_set(err, WS_EPARSE, "%s:%d: header: no 'time_stats.%s.median' column",
                                r->name, r->line, ws_vidur_op_name(k));
                cols_free(&c);
                return rc;
            }
    const int gated = col_find(&c, "use_gated_mlp"), backend = col_find(&c, "attention_backend"),
              method = col_find(&c, "profile_method");
    model m = {.mha = -1};
    for (int i = 0; i < o->n && m.mha < 0; i++)
        if (o->v[i].op <= WS_VOP_ATTN_PREFILL)
            m.mha = o->v[i].q_heads == o->v[i].kv_heads;
    snprintf(o->kind, sizeof o->kind, "%s", attn ? "attention" : "mlp");
    int rows = 0;
    size_t raw;
    while ((rc = next_line(r, &line, &raw)) > 0) {
        if (strspn(line, " \t") == raw) { /* a blank line: the end, when only blanks follow */
            const char *q = r->p;
            while (q < r->end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
                q++;
            if (q == r->end) {
                rc = 0;
                break;
            }
            rc = ws_err_set(err, WS_EPARSE, "%s:%d: a blank line between rows", r->name, r->line);
            break;
        }
        const int n = split(line, raw, f, WS_VIDUR_FIELDS_MAX, &why);
        if (n < 0) {
            rc = ws_err_set(err, WS_EPARSE, "%s:%d: %s", r->name, r->line, why);
            break;
        }
        if (n != c.n) {
            rc = ws_err_set(err, WS_EPARSE, "%s:%d: %d fields, the header has %d", r->name,
                            r->line, n, c.n);
            break;
        }
        const rowctx x = {r, &c, f, err, &m};
        if ((rc = attn ? attn_row(&x, col, tc, o) : mlp_row(&x, col, gated, tc, o)))
            break;
        first_text(f, backend, o->backend, sizeof o->backend);
        first_text(f, method, o->method, sizeof o->method);
        rows++;
    }
    cols_free(&c);
    if (rc < 0)
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    if (rc)
        return rc;
    if (!rows)
        return ws_err_set(err, WS_EPARSE, "%s: a header and no rows", r->name);
    return 0;
}

int ws_vidur_parse(const char *text, size_t len, const char *name, ws_vidur_rows *out,
                   ws_err *err)
{
    reader r = {.p = text, .end = text + len, .name = name ? name : "(profile)"};
    const int n0 = out->n;
    char kind[sizeof out->kind], be[sizeof out->backend], me[sizeof out->method];
    memcpy(kind, out->kind, sizeof kind);
    memcpy(be, out->backend, sizeof be);
    memcpy(me, out->method, sizeof me);
    out->backend[0] = out->method[0] = '\0';
    int rc = parse(&r, out, err);
    free(r.buf);
    if (rc) {
        out->n = n0;
        memcpy(out->kind, kind, sizeof kind);
        memcpy(out->backend, be, sizeof be);
        memcpy(out->method, me, sizeof me);
        return rc;
    }
    if (!out->backend[0])
        memcpy(out->backend, be, sizeof be);
    if (!out->method[0])
        memcpy(out->method, me, sizeof me);
    mark_heldout(out, n0);
    return 0;
}

void ws_vidur_rows_free(ws_vidur_rows *r)
{
    free(r->v);
    memset(r, 0, sizeof *r);
}
