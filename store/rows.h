/* rows: a table's rows bound to statements, read from them and written, through the
 * column tables of cols.h, for the storage modules (calibdb.c, simdb.c, rundb.c,
 * validatedb.c, plandb.c); nothing outside store/ includes it. A module lists its table's
 * columns once and its inserts, selects and updates are built from that list, so a
 * struct's fields and a table's columns cannot drift apart; what a table does not hold (an
 * id, a computed column, a column that is NULL on some rows) stays beside the table in the
 * module, in plain SQL. */
#ifndef WS_ROWS_H
#define WS_ROWS_H

#include <sqlite3.h>
#include <stddef.h>

#include "cols.h"
#include "store.h"

/* Binds row's columns to the parameters from `first` on; returns the next parameter. */
int ws_row_bind(sqlite3_stmt *st, int first, const ws_col *cols, const void *row);
/* Reads the result columns from `first` on into row's columns; returns the next column. */
int ws_row_read(sqlite3_stmt *st, int first, const ws_col *cols, void *row);
/* Prepares "<head>(<lead>, <columns>) VALUES (?1, ...)": head is "INSERT INTO <table>" (or
 * "INSERT OR IGNORE INTO ..."), lead NULL or columns before the table's ("run_id", "plan_id,
 * idx") that the caller binds from ?1; the table's columns follow. WS_EDB under `what`
 * (NULL: "prepare") on failure. */
int ws_rows_prep_insert(ws_store *s, const char *head, const char *lead, const ws_col *cols,
                        const char *what, sqlite3_stmt **st, ws_err *err);
/* Prepares "UPDATE <table> SET <column> = ?2, ... WHERE id = ?1". */
int ws_rows_prep_update(ws_store *s, const char *table, const ws_col *cols, const char *what,
                        sqlite3_stmt **st, ws_err *err);

/* Steps a prepared, bound query to its end into a heap array of `sz`-byte elements (zeroed,
 * then the result columns read into cols from column 0, then more(st, next column, elem)
 * when more is not NULL, for values the table does not hold: ids, computed columns). The
 * caller frees *out; the statement stays the caller's to finalize. `what` is the message of
 * a failed step ("cannot read fits"). */
int ws_rows_read(ws_store *s, sqlite3_stmt *st, size_t sz, const ws_col *cols,
                 void (*more)(sqlite3_stmt *st, int col, void *elem), const char *what,
                 void **out, size_t *n_out, ws_err *err);
/* The same for sql, prepared here with id bound as ?1 (when id >= 0) and finalized. */
int ws_rows_query(ws_store *s, const char *sql, long long id, size_t sz, const ws_col *cols,
                  void (*more)(sqlite3_stmt *st, int col, void *elem), const char *what,
                  void **out, size_t *n_out, ws_err *err);

/* Prepared inserts of rows of `cols` into `table` under one parent: its id in column `lead`
 * (run_id, validate_id, plan_id). A failed prepare says `what_open` (NULL: "prepare"), a
 * failed insert `what_add` (NULL: "insert <table>"). */
typedef struct ws_row_writer ws_row_writer;
int ws_row_writer_open(ws_store *s, const char *table, const char *lead, long long id,
                       const ws_col *cols, const char *what_open, const char *what_add,
                       ws_row_writer **out, ws_err *err);
int ws_row_add(ws_row_writer *w, const void *row, ws_err *err);
/* Finalizes the statement; NULL is fine. */
void ws_row_writer_close(ws_row_writer *w);
/* The n rows at `rows` (`sz` bytes each) through a writer as above. */
int ws_rows_put(ws_store *s, const char *table, const char *lead, long long id,
                const ws_col *cols, const void *rows, size_t sz, size_t n, const char *what_open,
                const char *what_add, ws_err *err);
/* "SELECT <cols> FROM <table> WHERE <lead> = ?1 ORDER BY <order>" for id, as ws_rows_query. */
int ws_rows_of(ws_store *s, const char *table, const char *lead, long long id, const char *order,
               const ws_col *cols, size_t sz, const char *what, void **out, size_t *n_out,
               ws_err *err);
/* The run's rows of `table` (sim_steps, run_steps, run_layers) in order (steps by idx,
 * layers by step then layer) into a heap array of rows of `size` bytes (*out NULL when
 * there are none; the caller frees). */
int ws_rows_get(ws_store *s, const char *table, const ws_col *cols, size_t size, long long run_id,
                void **out, size_t *n_out, ws_err *err);

#endif
