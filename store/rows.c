/* rows: a table's rows bound, read and written through column tables (see rows.h). */
#include "rows.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "store_priv.h"
#include "ws_util.h"

#define AT(row, c, T) ((T *)((char *)(row) + (c)->off))
#define CAT(row, c, T) ((const T *)((const char *)(row) + (c)->off))

int ws_row_bind(sqlite3_stmt *st, int first, const ws_col *cols, const void *row)
{
    int k = first;
    for (const ws_col *c = cols; c->name; c++, k++) {
        switch (c->type) {
        case WS_COL_INT: sqlite3_bind_int(st, k, *CAT(row, c, int)); break;
        case WS_COL_I64: sqlite3_bind_int64(st, k, *CAT(row, c, long long)); break;
        case WS_COL_REAL: ws_store_bind_num(st, k, *CAT(row, c, double)); break;
        case WS_COL_F64: sqlite3_bind_double(st, k, *CAT(row, c, double)); break;
        case WS_COL_TEXT: {
            const char *t = CAT(row, c, char);
            sqlite3_bind_text(st, k, t[0] ? t : "{}", -1, SQLITE_TRANSIENT);
            break;
        }
        case WS_COL_STR: sqlite3_bind_text(st, k, CAT(row, c, char), -1, SQLITE_STATIC); break;
        case WS_COL_ID: {
            const long long v = *CAT(row, c, long long);
            if (v > 0)
                sqlite3_bind_int64(st, k, v);
            else
                sqlite3_bind_null(st, k);
            break;
        }
        case WS_COL_FLAG:
        case WS_COL_WORD: {
            const char *w = ws_col_word(c, row);
            if (w)
                sqlite3_bind_text(st, k, w, -1, SQLITE_STATIC);
            else
                sqlite3_bind_null(st, k);
            break;
        }
        }
    }
    return k;
}

int ws_row_read(sqlite3_stmt *st, int first, const ws_col *cols, void *row)
{
    int k = first;
    for (const ws_col *c = cols; c->name; c++, k++) {
        switch (c->type) {
        case WS_COL_INT: *AT(row, c, int) = sqlite3_column_int(st, k); break;
        case WS_COL_I64:
        case WS_COL_ID: *AT(row, c, long long) = sqlite3_column_int64(st, k); break;
        case WS_COL_REAL:
        case WS_COL_F64: *AT(row, c, double) = ws_store_col_num(st, k); break;
        case WS_COL_TEXT:
        case WS_COL_STR: ws_store_col_text(st, k, AT(row, c, char), c->cap); break;
        case WS_COL_FLAG: {
            const unsigned char *t = sqlite3_column_text(st, k);
            *AT(row, c, int) = t && !strcmp((const char *)t, c->words[1]);
            break;
        }
        case WS_COL_WORD: {
            const unsigned char *t = sqlite3_column_text(st, k);
            int v = -1;
            for (int i = 0; t && v < 0 && c->words[i]; i++)
                if (!strcmp((const char *)t, c->words[i]))
                    v = i;
            *AT(row, c, int) = v;
            break;
        }
        }
    }
    return k;
}

/* A statement being written; len past the buffer says it did not fit. */
typedef struct sql_text {
    char s[4096];
    size_t len;
} sql_text;

static void put(sql_text *q, const char *fmt, ...)
{
    if (q->len >= sizeof q->s)
        return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(q->s + q->len, sizeof q->s - q->len, fmt, ap);
    va_end(ap);
    q->len += n > 0 ? (size_t)n : 0;
}

static int prep(ws_store *s, const sql_text *q, const char *what, sqlite3_stmt **st, ws_err *err)
{
    if (q->len >= sizeof q->s)
        return ws_err_set(err, WS_EINVAL, "%s: %s: statement too long", ws_store_path(s),
                          what ? what : "prepare");
    if (sqlite3_prepare_v2(ws_store_sqlite(s), q->s, -1, st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, what ? what : "prepare");
    return 0;
}

int ws_rows_prep_insert(ws_store *s, const char *head, const char *lead, const ws_col *cols,
                        const char *what, sqlite3_stmt **st, ws_err *err)
{
    sql_text q = {.len = 0};
    char names[3072];
    int n = (int)ws_cols_count(cols);
    if (ws_cols_names(names, sizeof names, "", cols, NULL) >= sizeof names)
        q.len = sizeof q.s;
    put(&q, "%s(", head);
    if (lead) {
        put(&q, "%s, ", lead);
        for (const char *p = lead; p; p = strchr(p + 1, ','))
            n++;
    }
    put(&q, "%s) VALUES (", names);
    for (int i = 1; i <= n; i++)
        put(&q, "%s?%d", i > 1 ? ", " : "", i);
    put(&q, ")");
    return prep(s, &q, what, st, err);
}

int ws_rows_prep_update(ws_store *s, const char *table, const ws_col *cols, const char *what,
                        sqlite3_stmt **st, ws_err *err)
{
    sql_text q = {.len = 0};
    put(&q, "UPDATE %s SET ", table);
    for (int i = 0; cols[i].name; i++)
        put(&q, "%s%s = ?%d", i ? ", " : "", cols[i].name, i + 2);
    put(&q, " WHERE id = ?1");
    return prep(s, &q, what, st, err);
}

int ws_rows_read(ws_store *s, sqlite3_stmt *st, size_t sz, const ws_col *cols,
                 void (*more)(sqlite3_stmt *st, int col, void *elem), const char *what,
                 void **out, size_t *n_out, ws_err *err)
{
    *out = NULL;
    *n_out = 0;
    char *a = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            size_t c = cap ? 2 * cap : 32;
            char *p = realloc(a, sz * c);
            if (!p) {
                free(a);
                return ws_err_set(err, WS_ENOMEM, "%s: out of memory", what);
            }
            a = p;
            cap = c;
        }
        char *elem = a + sz * n++;
        memset(elem, 0, sz);
        const int next = ws_row_read(st, 0, cols, elem);
        if (more)
            more(st, next, elem);
    }
    if (rc != SQLITE_DONE) {
        free(a);
        return WS_DB_FAIL(s, err, what);
    }
    *out = a;
    *n_out = n;
    return 0;
}

int ws_rows_query(ws_store *s, const char *sql, long long id, size_t sz, const ws_col *cols,
                  void (*more)(sqlite3_stmt *st, int col, void *elem), const char *what,
                  void **out, size_t *n_out, ws_err *err)
{
    *out = NULL;
    *n_out = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, &st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, what);
    if (id >= 0)
        sqlite3_bind_int64(st, 1, id);
    int rc = ws_rows_read(s, st, sz, cols, more, what, out, n_out, err);
    sqlite3_finalize(st);
    return rc;
}

/* ---- a table's rows under one parent ---- */

struct ws_row_writer {
    ws_store *s;
    sqlite3_stmt *st;
    const ws_col *cols;
    char what[96];
};

int ws_row_writer_open(ws_store *s, const char *table, const char *lead, long long id,
                       const ws_col *cols, const char *what_open, const char *what_add,
                       ws_row_writer **out, ws_err *err)
{
    *out = NULL;
    ws_row_writer *w = calloc(1, sizeof *w);
    if (!w)
        return ws_err_set(err, WS_ENOMEM, "%s: out of memory", ws_store_path(s));
    char head[96];
    snprintf(head, sizeof head, "INSERT INTO %s", table);
    int rc = ws_rows_prep_insert(s, head, lead, cols, what_open, &w->st, err);
    if (rc) {
        free(w);
        return rc;
    }
    w->s = s;
    w->cols = cols;
    if (what_add)
        snprintf(w->what, sizeof w->what, "%s", what_add);
    else
        snprintf(w->what, sizeof w->what, "insert %s", table);
    sqlite3_bind_int64(w->st, 1, id);
    *out = w;
    return 0;
}

int ws_row_add(ws_row_writer *w, const void *row, ws_err *err)
{
    sqlite3_reset(w->st);
    ws_row_bind(w->st, 2, w->cols, row);
    if (sqlite3_step(w->st) != SQLITE_DONE)
        return WS_DB_FAIL(w->s, err, w->what);
    return 0;
}

void ws_row_writer_close(ws_row_writer *w)
{
    if (!w)
        return;
    sqlite3_finalize(w->st);
    free(w);
}

int ws_rows_put(ws_store *s, const char *table, const char *lead, long long id,
                const ws_col *cols, const void *rows, size_t sz, size_t n, const char *what_open,
                const char *what_add, ws_err *err)
{
    ws_row_writer *w;
    int rc = ws_row_writer_open(s, table, lead, id, cols, what_open, what_add, &w, err);
    for (size_t i = 0; !rc && i < n; i++)
        rc = ws_row_add(w, (const char *)rows + sz * i, err);
    ws_row_writer_close(w);
    return rc;
}

int ws_rows_of(ws_store *s, const char *table, const char *lead, long long id, const char *order,
               const ws_col *cols, size_t sz, const char *what, void **out, size_t *n_out,
               ws_err *err)
{
    char names[2048], sql[3072];
    ws_cols_names(names, sizeof names, "", cols, NULL);
    snprintf(sql, sizeof sql, "SELECT %s FROM %s WHERE %s = ?1 ORDER BY %s", names, table, lead,
             order);
    return ws_rows_query(s, sql, id, sz, cols, NULL, what, out, n_out, err);
}

int ws_rows_get(ws_store *s, const char *table, const ws_col *cols, size_t size, long long run_id,
                void **out, size_t *n_out, ws_err *err)
{
    *out = NULL;
    *n_out = 0;
    char sql[2048];
    int len = snprintf(sql, sizeof sql, "SELECT ");
    for (int i = 0; cols[i].name; i++)
        len += snprintf(sql + len, sizeof sql - (size_t)len, "%s%s", i ? ", " : "", cols[i].name);
    /* the table's key after run_id is its first columns (idx; step, layer) */
    snprintf(sql + len, sizeof sql - (size_t)len, " FROM %s WHERE run_id = ?1 ORDER BY %s%s%s",
             table, cols[0].name, cols[0].type == WS_COL_INT && cols[1].name ? ", " : "",
             cols[0].type == WS_COL_INT && cols[1].name ? cols[1].name : "");
    sqlite3_stmt *st;
    int rc = ws_store_prep(s, sql, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, run_id);
    char *rows = NULL;
    size_t n = 0, cap = 0;
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if (ws_grow((void **)&rows, &cap, n, size, 64)) {
            rc =
                ws_err_set(err, WS_ENOMEM, "%s: out of memory reading %s", ws_store_path(s), table);
            break;
        }
        memset(rows + n * size, 0, size);
        ws_row_read(st, 0, cols, rows + n * size);
        n++;
    }
    if (!rc && step != SQLITE_DONE)
        rc = WS_DB_FAIL(s, err, "cannot read rows");
    if (rc) {
        free(rows);
    } else {
        *out = rows;
        *n_out = n;
    }
    sqlite3_finalize(st);
    return rc;
}

