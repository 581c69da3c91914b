/* cols: column tables, the one way a row struct meets a database table or a file. A table
 * lists, per column, its name (the SQL column, the CSV header, the JSON key), how the value
 * is stored and where it sits in the struct; the storage modules bind, read and write their
 * rows through it (rows.h), and the step and layer rows (steprow.h) are written to CSV and
 * JSON through it too. Adding a column is one line of a table plus its migration.
 *
 * Values: NAN for "none" where the type says so, stored as NULL and read back as NAN; an id
 * of 0 stored as NULL and read back as 0; text longer than its field (only a hand-edited
 * database has such) is cut to the field. */
#ifndef WS_COLS_H
#define WS_COLS_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ws_col_type {
    WS_COL_INT = 0,  /* int */
    WS_COL_I64 = 1,  /* long long (or unsigned long long, stored as its bits) */
    WS_COL_REAL = 2, /* double, a non-finite value as NULL, NULL read as NAN */
    WS_COL_TEXT = 3, /* char[], a JSON object: "" stored as {} */
    WS_COL_FLAG = 4, /* int 0/1 stored as words[0] / words[1] */
    WS_COL_F64 = 5,  /* double bound as it is (NaN becomes NULL), NULL read as NAN */
    WS_COL_STR = 6,  /* char[], text as it is */
    WS_COL_ID = 7,   /* long long, 0 (or less) stored as NULL, NULL read as 0 */
    WS_COL_WORD = 8, /* int, the index of its word in words (unknown: -1) */
} ws_col_type;

typedef struct ws_col {
    const char *name; /* the SQL column, the CSV header, the JSON key */
    ws_col_type type;
    const char *unit; /* "s", "tokens", "1" (a share or count), "s/token", "json"; NULL */
    size_t off;       /* offset in the row */
    size_t cap;       /* the field's size */
    const char *const *words; /* FLAG, WORD: the words, NULL-terminated */
} ws_col;

/* Column `name` for field f of struct T. */
#define WS_COL_AS(T, name, f, type, unit)                                                          \
    {name, type, unit, offsetof(T, f), sizeof(((T *)0)->f), NULL}
/* Column named after field f of struct T. */
#define WS_COL_OF(T, f, type) WS_COL_AS(T, #f, f, type, NULL)
/* A FLAG or WORD column. */
#define WS_COL_WORDS(T, name, f, type, words)                                                      \
    {name, type, NULL, offsetof(T, f), sizeof(((T *)0)->f), words}

/* The length of a NULL-name terminated table. */
size_t ws_cols_count(const ws_col *cols);
/* The position of column `name` in cols, -1 when it is not there. */
int ws_cols_index(const ws_col *cols, const char *name);
/* The word of a FLAG or WORD column's value in row, NULL for a WORD out of range. */
const char *ws_col_word(const ws_col *c, const void *row);
/* The columns' names, each after `prefix` ("f." or ""), comma separated, into buf; the
 * column named `blank` (NULL: none) is selected as '' instead. Returns the length the whole
 * list needs, as snprintf does. */
size_t ws_cols_names(char *buf, size_t cap, const char *prefix, const ws_col *cols,
                     const char *blank);

/* CSV: the header (the column names, after `prefix` columns when not NULL, e.g. "policy,"),
 * and one row (after the same prefix's values). NAN is written empty. */
void ws_row_csv_header(FILE *f, const char *prefix, const ws_col *cols);
void ws_row_csv(FILE *f, const char *prefix, const ws_col *cols, const void *row);
/* JSON: an object keyed by the column names (NAN as null, a JSON TEXT parsed). */
struct json_t;
struct json_t *ws_row_json(const ws_col *cols, const void *row);

#ifdef __cplusplus
}
#endif
#endif
