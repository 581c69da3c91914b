/* steprow: the step and layer rows and their one column table (steprow.h). */
#include "steprow.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store_priv.h"
#include "ws_csv.h"
#include "ws_util.h"

#define S(f, t, u)                                                                                 \
    {                                                                                              \
#f, t, u, offsetof(ws_step_row, f), sizeof(((ws_step_row *)0)->f)                          \
    }
const ws_col ws_step_cols[] = {S(idx, WS_COL_I64, "1"),
                               S(t_start, WS_COL_REAL, "s"),
                               S(t_end, WS_COL_REAL, "s"),
                               S(batch, WS_COL_INT, "sequences"),
                               S(tokens, WS_COL_I64, "tokens"),
                               S(context, WS_COL_I64, "tokens"),
                               S(r_star, WS_COL_REAL, "1"),
                               S(r_real, WS_COL_REAL, "1"),
                               S(busy_gpu, WS_COL_REAL, "s"),
                               S(busy_h2d, WS_COL_REAL, "s"),
                               S(busy_d2h, WS_COL_REAL, "s"),
                               S(busy_cpu, WS_COL_REAL, "s"),
                               S(busy_other, WS_COL_TEXT, "json"),
                               S(cpu_attn_s, WS_COL_REAL, "s"),
                               S(experts_s, WS_COL_REAL, "s"),
                               S(overhead_s, WS_COL_REAL, "s"),
                               S(wall_s, WS_COL_REAL, "s"),
                               S(verify_err, WS_COL_REAL, "1"),
                               {NULL, 0, NULL, 0, 0}};
#undef S

#define L(f, t, u)                                                                                 \
    {                                                                                              \
#f, t, u, offsetof(ws_layer_row, f), sizeof(((ws_layer_row *)0)->f)                        \
    }
const ws_col ws_layer_cols[] = {L(step, WS_COL_INT, "1"),
                                L(layer, WS_COL_INT, "1"),
                                L(n_cpu, WS_COL_I64, "tokens"),
                                L(m_xfer, WS_COL_I64, "tokens"),
                                L(resident, WS_COL_I64, "tokens"),
                                L(cpu_attn_s, WS_COL_REAL, "s"),
                                L(router_s, WS_COL_REAL, "s"),
                                L(experts_s, WS_COL_REAL, "s"),
                                L(gpu_s, WS_COL_REAL, "s"),
                                {"gpu_source", WS_COL_SOURCE, "modeled|measured",
                                 offsetof(ws_layer_row, gpu_measured), sizeof(int)},
                                L(overhead_s, WS_COL_REAL, "s"),
                                L(r_real, WS_COL_REAL, "1"),
                                L(r_star, WS_COL_REAL, "1"),
                                L(a_est, WS_COL_REAL, "s/token"),
                                L(b_est, WS_COL_REAL, "s/token"),
                                L(pred_cpu_s, WS_COL_REAL, "s"),
                                L(pred_gpu_s, WS_COL_REAL, "s"),
                                L(pred_experts_s, WS_COL_REAL, "s"),
                                L(flush_pages, WS_COL_INT, "pages"),
                                L(flush_cpu_pages, WS_COL_INT, "pages"),
                                {NULL, 0, NULL, 0, 0}};
#undef L

size_t ws_cols_count(const ws_col *cols)
{
    size_t n = 0;
    while (cols[n].name)
        n++;
    return n;
}

#define AT(row, c, T) ((T *)((char *)(row) + (c)->off))
#define CAT(row, c, T) ((const T *)((const char *)(row) + (c)->off))

/* ---- storage ---- */

struct ws_row_writer {
    ws_store *s;
    sqlite3_stmt *st;
    const ws_col *cols;
    char what[64];
};

int ws_row_writer_open(ws_store *s, const char *table, const ws_col *cols, long long run_id,
                       ws_row_writer **out, ws_err *err)
{
    *out = NULL;
    char sql[2048];
    size_t n = ws_cols_count(cols);
    int len = snprintf(sql, sizeof sql, "INSERT INTO %s(run_id", table);
    for (size_t i = 0; i < n; i++)
        len += snprintf(sql + len, sizeof sql - (size_t)len, ", %s", cols[i].name);
    len += snprintf(sql + len, sizeof sql - (size_t)len, ") VALUES (?1");
    for (size_t i = 0; i < n; i++)
        len += snprintf(sql + len, sizeof sql - (size_t)len, ", ?%zu", i + 2);
    snprintf(sql + len, sizeof sql - (size_t)len, ")");
    ws_row_writer *w = calloc(1, sizeof *w);
    if (!w)
        return ws_err_set(err, WS_ENOMEM, "%s: out of memory", ws_store_path(s));
    int rc = ws_store_prep(s, sql, &w->st, err);
    if (rc) {
        free(w);
        return rc;
    }
    w->s = s;
    w->cols = cols;
    snprintf(w->what, sizeof w->what, "insert %s", table);
    sqlite3_bind_int64(w->st, 1, run_id);
    *out = w;
    return 0;
}

int ws_row_add(ws_row_writer *w, const void *row, ws_err *err)
{
    sqlite3_stmt *st = w->st;
    sqlite3_reset(st);
    for (int i = 0; w->cols[i].name; i++) {
        const ws_col *c = &w->cols[i];
        const int k = i + 2;
        switch (c->type) {
        case WS_COL_INT: sqlite3_bind_int(st, k, *CAT(row, c, int)); break;
        case WS_COL_I64: sqlite3_bind_int64(st, k, *CAT(row, c, long long)); break;
        case WS_COL_REAL: ws_store_bind_num(st, k, *CAT(row, c, double)); break;
        case WS_COL_TEXT: {
            const char *t = CAT(row, c, char);
            sqlite3_bind_text(st, k, t[0] ? t : "{}", -1, SQLITE_TRANSIENT);
            break;
        }
        case WS_COL_SOURCE:
            sqlite3_bind_text(st, k, *CAT(row, c, int) ? "measured" : "modeled", -1, SQLITE_STATIC);
            break;
        }
    }
    const int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
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

static void read_row(sqlite3_stmt *st, const ws_col *cols, void *row)
{
    for (int i = 0; cols[i].name; i++) {
        const ws_col *c = &cols[i];
        switch (c->type) {
        case WS_COL_INT: *AT(row, c, int) = sqlite3_column_int(st, i); break;
        case WS_COL_I64: *AT(row, c, long long) = sqlite3_column_int64(st, i); break;
        case WS_COL_REAL: *AT(row, c, double) = ws_store_col_num(st, i); break;
        case WS_COL_TEXT: ws_store_col_text(st, i, AT(row, c, char), c->cap); break;
        case WS_COL_SOURCE: {
            const unsigned char *t = sqlite3_column_text(st, i);
            *AT(row, c, int) = t && !strcmp((const char *)t, "measured");
            break;
        }
        }
    }
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
        read_row(st, cols, rows + n * size);
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

/* ---- files ---- */

void ws_row_csv_header(FILE *f, const char *prefix, const ws_col *cols)
{
    if (prefix)
        fputs(prefix, f);
    for (int i = 0; cols[i].name; i++)
        fprintf(f, "%s%s", i ? "," : "", cols[i].name);
    fputc('\n', f);
}

void ws_row_csv(FILE *f, const char *prefix, const ws_col *cols, const void *row)
{
    if (prefix)
        fputs(prefix, f);
    for (int i = 0; cols[i].name; i++) {
        const ws_col *c = &cols[i];
        if (i)
            fputc(',', f);
        switch (c->type) {
        case WS_COL_INT: fprintf(f, "%d", *CAT(row, c, int)); break;
        case WS_COL_I64: fprintf(f, "%lld", *CAT(row, c, long long)); break;
        case WS_COL_REAL: {
            const double v = *CAT(row, c, double);
            if (isfinite(v))
                fprintf(f, "%.12g", v);
            break;
        }
        case WS_COL_TEXT: {
            const char *t = CAT(row, c, char);
            ws_csv_field(f, t[0] ? t : "{}");
            break;
        }
        case WS_COL_SOURCE: fputs(*CAT(row, c, int) ? "measured" : "modeled", f); break;
        }
    }
    fputc('\n', f);
}

json_t *ws_row_json(const ws_col *cols, const void *row)
{
    json_t *o = json_object();
    for (int i = 0; o && cols[i].name; i++) {
        const ws_col *c = &cols[i];
        json_t *v = NULL;
        switch (c->type) {
        case WS_COL_INT: v = json_integer(*CAT(row, c, int)); break;
        case WS_COL_I64: v = json_integer(*CAT(row, c, long long)); break;
        case WS_COL_REAL: {
            const double x = *CAT(row, c, double);
            v = isfinite(x) ? json_real(x) : json_null();
            break;
        }
        case WS_COL_TEXT: {
            const char *t = CAT(row, c, char);
            v = t[0] ? json_loads(t, 0, NULL) : json_object();
            if (!v)
                v = json_string(t);
            break;
        }
        case WS_COL_SOURCE: v = json_string(*CAT(row, c, int) ? "measured" : "modeled"); break;
        }
        json_object_set_new(o, c->name, v);
    }
    return o;
}
