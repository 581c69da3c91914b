/* store: the project's SQLite database (hardware profiles, hosts, calibration runs,
 * raw samples and fits, simulation, runtime, validation and planning results).
 *
 * Opening a store for writing creates the file on first use, puts it in WAL mode (readers
 * never wait for a writer), applies the schema migrations embedded from
 * store/schema/NNN_*.sql up to WS_SCHEMA_VERSION (tracked in PRAGMA user_version), and
 * seeds a fresh database with the datasheet profiles (profiles/datasheet.json). Opening for
 * reading touches nothing: the file must exist and hold the current schema, else a one-line
 * error names it; with no database at all, the embedded store (in memory, seeded) stands
 * in. A file that is not SQLite, is some other SQLite database, has a newer schema, or
 * lacks a table or column its user_version promises is refused, and nothing is written to
 * it. Every write is one transaction (BEGIN IMMEDIATE), so an interrupted, killed or
 * out-of-space writer leaves the database as it was; a database locked by another writer
 * is waited for up to a bounded time ($WRITESCOPE_DB_TIMEOUT_MS, default
 * WS_STORE_TIMEOUT_MS: long enough for another command's run to commit) and then
 * reported. A command that will store results calls ws_store_check_writable before its
 * work, so a read-only file or folder or a failing write is said at once, not after
 * minutes of measuring. The SQL lives in store/ only: typed access per domain is in
 * calibdb.h (calibration runs), profile.h (hardware profiles), simdb.h, rundb.h,
 * validatedb.h and plandb.h. docs/database.md says what concurrent use is safe. */
#ifndef WS_STORE_H
#define WS_STORE_H

#include <jansson.h>
#include <stdio.h>

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_SCHEMA_VERSION 12 /* newest migration this build knows */
#define WS_STORE_EMBEDDED "(embedded datasheet profiles)" /* path of the in-memory store */
#define WS_STORE_TIMEOUT_MS 600000 /* default wait for another writer's lock: 10 minutes */

typedef struct ws_store ws_store;

/* $WRITESCOPE_DB if set, else <project root>/results/writescope.db. */
int ws_store_default_path(char *buf, size_t cap, ws_err *err);
/* Opens for writing (creating and seeding when missing) and migrates. */
int ws_store_open(const char *path, ws_store **out, ws_err *err);
/* Opens an existing database read-only: never creates, migrates or seeds. Missing:
 * "<path>: database does not exist" (WS_ENOTFOUND); empty, not SQLite, foreign, older
 * or newer schema: WS_EDB; the file is left as it was. */
int ws_store_open_readonly(const char *path, ws_store **out, ws_err *err);
/* A store in memory holding the embedded datasheet profiles; its path reads
 * WS_STORE_EMBEDDED. */
int ws_store_open_embedded(ws_store **out, ws_err *err);
/* For read-only commands: `path` read-only when given; else the default database
 * read-only, or -- when it does not exist yet -- the embedded store, with *embedded = 1. */
int ws_store_open_for_reading(const char *path, ws_store **out, int *embedded, ws_err *err);
void ws_store_close(ws_store *s);
const char *ws_store_path(const ws_store *s);
/* 1 if this open created the file. */
int ws_store_created(const ws_store *s);
/* Closes s, and removes its file (with its -wal, -shm and -journal files) when this open
 * created it: a command that failed leaves no new database behind (one it found stays, as
 * its last transaction left it). */
void ws_store_discard(ws_store *s);
/* 1 while a transaction (ws_store_begin) is open. */
int ws_store_in_transaction(ws_store *s);
/* Before work whose results go to s: the file and its folder are writable and a test write
 * (the header rewritten as it is, committed) succeeds; else a one-line WS_EIO naming the
 * file and why. Waits for another writer as a write does. An in-memory store passes. */
int ws_store_check_writable(ws_store *s, ws_err *err);

/* Transactions for multi-statement writes (the calibrator commits a run whole). */
int ws_store_begin(ws_store *s, ws_err *err);
int ws_store_commit(ws_store *s, ws_err *err);
void ws_store_rollback(ws_store *s);

/* Replaces the profiles named in a profile file (format of profiles/datasheet.json)
 * in one transaction (the caller's, when one is open); `origin` names the text in
 * messages. Returns 0 and the number of profiles written in *n_out. */
int ws_store_import_profiles(ws_store *s, const char *json_text, const char *origin, int *n_out,
                             ws_err *err);
/* The same with the embedded datasheet profiles. */
int ws_store_seed_datasheet(ws_store *s, int *n_out, ws_err *err);

/* Profiles with their parameters as a JSON array (all, or the one named). */
json_t *ws_store_profiles(ws_store *s, const char *name, ws_err *err);
/* Every table as {"schema_version": N, "<table>": [rows...], ...}. */
json_t *ws_store_export(ws_store *s, ws_err *err);
/* One table as {"schema_version": N, "<table>": [rows...]}; NULL and WS_EINVAL for a
 * table export does not know. */
json_t *ws_store_export_table(ws_store *s, const char *table, ws_err *err);
/* One table as CSV with a header row. */
int ws_store_export_csv(ws_store *s, const char *table, FILE *out, ws_err *err);
/* The tables export knows, NULL-terminated. */
extern const char *const ws_store_tables[];

#ifdef __cplusplus
}
#endif
#endif
