/* store: the project's SQLite database (hardware profiles, hosts, calibration runs,
 * raw samples and fits).
 *
 * Opening a store creates the file on first use, applies the schema migrations embedded
 * from store/schema/NNN_*.sql up to WS_SCHEMA_VERSION (tracked in PRAGMA user_version),
 * and seeds a fresh database with the datasheet profiles (profiles/datasheet.json).
 * A file that is not SQLite, is some other SQLite database, or has a newer schema is
 * refused with a one-line message naming it, and nothing is written to it. Every write
 * is one transaction (BEGIN IMMEDIATE), so an interrupted writer leaves the database as
 * it was; a database locked by another writer is waited for up to a bounded time
 * ($WRITESCOPE_DB_TIMEOUT_MS, default 5000) and then reported. Used by the CLI (db, and
 * later calib, sim), the calibrator and the profile loader. */
#ifndef WS_STORE_H
#define WS_STORE_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_SCHEMA_VERSION 2 /* newest migration this build knows */

typedef struct ws_store ws_store;

/* $WRITESCOPE_DB if set, else <project root>/results/writescope.db. */
int ws_store_default_path(char *buf, size_t cap, ws_err *err);
/* Opens (creating and seeding when missing) and migrates. */
int ws_store_open(const char *path, ws_store **out, ws_err *err);
void ws_store_close(ws_store *s);
sqlite3 *ws_store_db(ws_store *s);
const char *ws_store_path(const ws_store *s);
/* 1 if this open created the file. */
int ws_store_created(const ws_store *s);

/* Transactions for multi-statement writes (the calibrator commits a run whole). */
int ws_store_begin(ws_store *s, ws_err *err);
int ws_store_commit(ws_store *s, ws_err *err);
void ws_store_rollback(ws_store *s);

/* Replaces the profiles named in a profile file (format of profiles/datasheet.json)
 * in one transaction (the caller's, when one is open); `origin` names the text in messages. Returns 0 and the number
 * of profiles written in *n_out. */
int ws_store_import_profiles(ws_store *s, const char *json_text, const char *origin, int *n_out,
                             ws_err *err);
/* The same with the embedded datasheet profiles. */
int ws_store_seed_datasheet(ws_store *s, int *n_out, ws_err *err);

/* Profiles with their parameters as a JSON array (all, or the one named). */
json_t *ws_store_profiles(ws_store *s, const char *name, ws_err *err);
/* Every table as {"schema_version": N, "<table>": [rows...], ...}. */
json_t *ws_store_export(ws_store *s, ws_err *err);
/* One table as CSV with a header row. */
int ws_store_export_csv(ws_store *s, const char *table, FILE *out, ws_err *err);
/* The tables export knows, NULL-terminated. */
extern const char *const ws_store_tables[];

#ifdef __cplusplus
}
#endif
#endif
