/* cols: column tables and a row's CSV and JSON (see cols.h). */
#include "cols.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#include "ws_csv.h"

#define CAT(row, c, T) ((const T *)((const char *)(row) + (c)->off))

size_t ws_cols_count(const ws_col *cols)
{
    size_t n = 0;
    while (cols[n].name)
        n++;
    return n;
}

int ws_cols_index(const ws_col *cols, const char *name)
{
    for (int i = 0; cols[i].name; i++)
        if (!strcmp(cols[i].name, name))
            return i;
    return -1;
}

const char *ws_col_word(const ws_col *c, const void *row)
{
    const int v = *CAT(row, c, int);
    if (c->type == WS_COL_FLAG)
        return c->words[v ? 1 : 0];
    for (int i = 0; c->words[i]; i++)
        if (i == v)
            return c->words[i];
    return NULL;
}

size_t ws_cols_names(char *buf, size_t cap, const char *prefix, const ws_col *cols,
                     const char *blank)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; cols[i].name && len < cap; i++) {
        const int n = blank && !strcmp(cols[i].name, blank)
                          ? snprintf(buf + len, cap - len, "%s''", i ? ", " : "")
                          : snprintf(buf + len, cap - len, "%s%s%s", i ? ", " : "", prefix,
                                     cols[i].name);
        len += n > 0 ? (size_t)n : 0;
    }
    return len;
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
        case WS_COL_ID:
            if (*CAT(row, c, long long) > 0)
                fprintf(f, "%lld", *CAT(row, c, long long));
            break;
        case WS_COL_REAL:
        case WS_COL_F64: {
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
        case WS_COL_STR: ws_csv_field(f, CAT(row, c, char)); break;
        case WS_COL_FLAG:
        case WS_COL_WORD: {
            const char *w = ws_col_word(c, row);
            if (w)
                fputs(w, f);
            break;
        }
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
        case WS_COL_ID: {
            const long long x = *CAT(row, c, long long);
            v = x > 0 ? json_integer(x) : json_null();
            break;
        }
        case WS_COL_REAL:
        case WS_COL_F64: {
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
        case WS_COL_STR: v = json_string(CAT(row, c, char)); break;
        case WS_COL_FLAG:
        case WS_COL_WORD: {
            const char *w = ws_col_word(c, row);
            v = w ? json_string(w) : json_null();
            break;
        }
        }
        json_object_set_new(o, c->name, v);
    }
    return o;
}
