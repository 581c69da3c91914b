/* store_priv: what the modules of the storage layer (store.c, rows.c, calibdb.c, profile.c,
 * simdb.c, rundb.c, validatedb.c, plandb.c) share and nothing outside store/ includes: the
 * SQLite handle behind a ws_store, the message format of an unexpected SQLite failure and
 * the small statement helpers. Keeping the handle here is what keeps SQL inside store/. */
#ifndef WS_STORE_PRIV_H
#define WS_STORE_PRIV_H

#include <math.h>
#include <sqlite3.h>

#include "store.h"

/* The connection of an open store. */
sqlite3 *ws_store_sqlite(ws_store *s);

/* Message for an unexpected SQLite failure: "<db>: <what>: <sqlite> (file:LINE)". */
#define WS_DB_FAIL(s, err, what)                                                                \
    ws_err_set(err, WS_EDB, "%s: %s: %s (%s:%d)", ws_store_path(s), what,                       \
               sqlite3_errmsg(ws_store_sqlite(s)), __FILE__, __LINE__)

/* Prepares sql on the store's connection; WS_EDB ("prepare") on failure. */
int ws_store_prep(ws_store *s, const char *sql, sqlite3_stmt **st, ws_err *err);

/* Steps an INSERT/UPDATE to its end; on failure finalizes st and returns WS_EDB with the
 * SQLite message under `what` (st stays the caller's on success). */
int ws_store_step_done(ws_store *s, sqlite3_stmt *st, const char *what, ws_err *err);

/* Steps a one-row INSERT to its end and finalizes st either way; on success *id is the new
 * row's id, on failure WS_EDB with the SQLite message under `what`. */
int ws_store_insert_id(ws_store *s, sqlite3_stmt *st, const char *what, long long *id,
                       ws_err *err);

/* body(s, ctx, err) in the caller's transaction when one is open, else in its own, with
 * SIGINT/SIGTERM held so that Ctrl-C during the commit cannot split it (SQLite's journal
 * covers a kill -9); rolled back on failure. */
int ws_store_in_tx(ws_store *s, int (*body)(ws_store *s, void *ctx, ws_err *err), void *ctx,
                   ws_err *err);

/* ws_store_in_tx for a body that stores a new row and sets *id to it: when the transaction
 * was its own and failed, *id is put back as it was (the row it named is gone). */
int ws_store_in_tx_id(ws_store *s, int (*body)(ws_store *s, void *ctx, ws_err *err), void *ctx,
                      long long *id, ws_err *err);

/* Steps st, a query for one run (or grid) by id, 0 for the latest: 0 on its row (st stays
 * the caller's), else finalizes st and returns WS_EDB under `what`, or WS_ENOTFOUND "<db>:
 * no <noun> <id>" or, for the latest, "<db>: no <noun> yet (<hint>)". */
int ws_store_run_row(ws_store *s, sqlite3_stmt *st, long long id, const char *what,
                     const char *noun, const char *hint, ws_err *err);

/* A row's `params` text: empty, or a JSON object; else WS_EINVAL naming `what` ("runtime
 * run") and the parser's complaint. */
int ws_store_check_params(ws_store *s, const char *what, const char *params, ws_err *err);

/* A result row's stamp: started_at (UTC now) and tool_version (WS_VERSION) where empty. */
void ws_store_stamp(char *started_at, size_t started_cap, char *tool_version, size_t tool_cap);

/* NULL for a non-finite value (SQLite has no NaN). */
static inline void ws_store_bind_num(sqlite3_stmt *st, int i, double v)
{
    if (isfinite(v))
        sqlite3_bind_double(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

/* A REAL column, NAN when NULL. */
static inline double ws_store_col_num(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

/* A TEXT column copied into buf (empty when NULL). */
static inline void ws_store_col_text(sqlite3_stmt *st, int i, char *buf, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    snprintf(buf, cap, "%s", t ? (const char *)t : "");
}

#endif
