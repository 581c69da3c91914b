/* store: SQLite database access, migrations and profile seeding (see store.h). */
#include "store.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "embedded.h"
#include "profile.h"
#include "store_priv.h"
#include "ws_csv.h"
#include "ws_parse.h"
#include "ws_util.h"

struct ws_store {
    sqlite3 *db;
    char path[WS_PATH_MAX];
    int created;
    int timeout_ms;
};

const char *const ws_store_tables[] = {"hosts",    "calib_runs",     "samples",      "fits",
                                       "calib_sources", "profiles", "profile_params", "sim_grids",    "sim_runs",
                                       "sim_requests", "sim_steps", "run_runs", "run_steps",
                                       "run_layers", "validate_runs", "validate_stats",
                                       "validate_points", "validate_terms", "plan_runs",
                                       "plan_points", "plan_results", "plan_fits", NULL};

static const char *const k_sources[] = {"datasheet", "measured", "fitted", "modeled", NULL};

#define DB_FAIL WS_DB_FAIL

int ws_store_default_path(char *buf, size_t cap, ws_err *err)
{
    const char *env = getenv("WRITESCOPE_DB");
    if (env && *env) {
        if (strlen(env) + 1 > cap)
            return ws_err_set(err, WS_EINVAL, "WRITESCOPE_DB too long");
        strcpy(buf, env);
        return 0;
    }
    char root[WS_PATH_MAX];
    if (ws_root_dir(root, sizeof root, err))
        return err ? err->code : WS_EIO;
    return ws_path_join(buf, cap, root, "results/writescope.db", err);
}

sqlite3 *ws_store_sqlite(ws_store *s) { return s->db; }
const char *ws_store_path(const ws_store *s) { return s->path; }
int ws_store_created(const ws_store *s) { return s->created; }

static int exec(ws_store *s, const char *sql, ws_err *err)
{
    char *msg = NULL;
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        ws_err_set(err, WS_EDB, "%s: %s", s->path, msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return WS_EDB;
    }
    return 0;
}

int ws_store_begin(ws_store *s, ws_err *err)
{
    int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
        return ws_err_set(err, WS_EDB,
                          "%s: database is locked by another writer (gave up after %.1f s)",
                          s->path, s->timeout_ms / 1000.0);
    if (rc != SQLITE_OK)
        return DB_FAIL(s, err, "cannot begin a transaction");
    return 0;
}

int ws_store_commit(ws_store *s, ws_err *err)
{
    int rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    if (rc == SQLITE_BUSY)
        return ws_err_set(err, WS_EDB, "%s: database is locked by a reader; commit gave up after %.1f s",
                          s->path, s->timeout_ms / 1000.0);
    if (rc != SQLITE_OK)
        return DB_FAIL(s, err, "cannot commit");
    return 0;
}

void ws_store_rollback(ws_store *s)
{
    if (!sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

static int query_int(ws_store *s, const char *sql, int *out, ws_err *err)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *out = sqlite3_column_int(st, 0);
            rc = SQLITE_OK;
        }
        sqlite3_finalize(st);
    }
    if (rc == SQLITE_NOTADB)
        return ws_err_set(err, WS_EDB, "%s: not a SQLite database", s->path);
    if (rc == SQLITE_BUSY)
        return ws_err_set(err, WS_EDB, "%s: database is locked (gave up after %.1f s)", s->path,
                          s->timeout_ms / 1000.0);
    if (rc != SQLITE_OK)
        return ws_err_set(err, WS_EDB, "%s: cannot read the database: %s", s->path,
                          sqlite3_errstr(rc));
    return 0;
}

/* The embedded migration to schema version v, or NULL. */
static const ws_embedded_file *migration(int v)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "store/schema/%03d_", v);
    for (const ws_embedded_file *f = ws_embedded; f->path; f++)
        if (!strncmp(f->path, prefix, strlen(prefix)))
            return f;
    return NULL;
}

/* Applies every embedded migration newer than `from`, inside the caller's transaction. */
static int migrate(ws_store *s, int from, ws_err *err)
{
    for (int v = from + 1; v <= WS_SCHEMA_VERSION; v++) {
        const ws_embedded_file *mig = migration(v);
        if (!mig)
            return ws_err_set(err, WS_EDB, "schema migration %03d is missing from this build", v);
        if (exec(s, mig->data, err))
            return ws_err_prefix(err, "migration %s", mig->path);
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v);
        if (exec(s, sql, err))
            return WS_EDB;
    }
    return 0;
}

/* 1 when the file has `table` with `column` (column NULL: the table at all). */
static int has_column(ws_store *s, const char *table, const char *column)
{
    sqlite3_stmt *st;
    const char *sql = column ? "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2"
                             : "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                               "name = ?1";
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    if (column)
        sqlite3_bind_text(st, 2, column, -1, SQLITE_STATIC);
    const int n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    return n > 0;
}

/* The file holds every table and column that schema `version` defines -- those the
 * migrations after it build on -- as applying migrations 1..version to an empty database
 * makes them. A user_version that claims more than the file holds (a damaged or
 * hand-edited database) is refused before anything is written to it. */
static int check_schema(ws_store *s, int version, ws_err *err)
{
    sqlite3 *ref = NULL;
    if (sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        sqlite3_close(ref);
        return ws_err_set(err, WS_ENOMEM, "%s: cannot check the schema: out of memory", s->path);
    }
    int rc = 0;
    for (int v = 1; v <= version && !rc; v++) {
        const ws_embedded_file *mig = migration(v);
        if (!mig || sqlite3_exec(ref, mig->data, NULL, NULL, NULL) != SQLITE_OK)
            rc = ws_err_set(err, WS_EDB, "schema migration %03d is missing from this build", v);
    }
    sqlite3_stmt *st = NULL;
    if (!rc && sqlite3_prepare_v2(ref,
                                  "SELECT m.name, c.name FROM sqlite_master m, "
                                  "pragma_table_info(m.name) c WHERE m.type = 'table' "
                                  "ORDER BY m.rowid, c.cid",
                                  -1, &st, NULL) != SQLITE_OK)
        rc = ws_err_set(err, WS_EDB, "%s: cannot check the schema: %s", s->path,
                        sqlite3_errmsg(ref));
    while (!rc && sqlite3_step(st) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        const char *c = (const char *)sqlite3_column_text(st, 1);
        if (!has_column(s, t, NULL))
            rc = ws_err_set(err, WS_EDB,
                            "%s: schema version %d, but its table %s is missing (a damaged or "
                            "hand-edited database); nothing was changed",
                            s->path, version, t);
        else if (!has_column(s, t, c))
            rc = ws_err_set(err, WS_EDB,
                            "%s: schema version %d, but its column %s.%s is missing (a damaged "
                            "or hand-edited database); nothing was changed",
                            s->path, version, t, c);
    }
    sqlite3_finalize(st);
    sqlite3_close(ref);
    return rc;
}

/* The folder of `path` into dir ("." for a bare name, "/" for the root's files). */
static void parent_dir(const char *path, char *dir, size_t cap)
{
    snprintf(dir, cap, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, cap, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
}

/* 0 when this process may write `path` (when it exists) and create files beside it (the
 * journal, or WAL's -wal and -shm); else a one-line WS_EIO naming which cannot be written. */
static int writable_or_say(const char *path, int exists, ws_err *err)
{
    char dir[WS_PATH_MAX];
    parent_dir(path, dir, sizeof dir);
    if (exists && access(path, W_OK) != 0)
        return ws_err_set(err, WS_EIO, "%s: the file is read-only (%s): nothing can be stored there",
                          path, strerror(errno));
    if (access(dir, W_OK | X_OK) != 0)
        return ws_err_set(err, WS_EIO,
                          "%s: its folder %s is not writable (%s); SQLite writes its journal "
                          "files beside the database",
                          path, dir, strerror(errno));
    return 0;
}

/* 1 when a read-only connection cannot read `path`, a WAL database, only because its -shm
 * file neither exists nor can be made: the folder is not writable by this process and there
 * is no -wal file with frames in it. No writer can be at work there (it would need those
 * files), so the file holds the whole database and SQLite reads it with immutable=1. */
static int readonly_wal(sqlite3 *db, const char *path)
{
    sqlite3_stmt *st;
    int rc;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK) {
        rc = sqlite3_errcode(db) & 0xff;
    } else {
        rc = sqlite3_step(st) & 0xff;
        sqlite3_finalize(st);
    }
    if (rc != SQLITE_READONLY && rc != SQLITE_CANTOPEN)
        return 0;
    char dir[WS_PATH_MAX], wal[WS_PATH_MAX + 8];
    parent_dir(path, dir, sizeof dir);
    snprintf(wal, sizeof wal, "%s-wal", path);
    struct stat sb;
    return access(dir, W_OK) != 0 && (stat(wal, &sb) != 0 || sb.st_size == 0);
}

/* "file:<path, percent-encoded>?immutable=1" (sqlite3_free), or NULL when out of memory. */
static char *immutable_uri(const char *path)
{
    sqlite3_str *u = sqlite3_str_new(NULL);
    sqlite3_str_appendall(u, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~/", *p))
            sqlite3_str_appendchar(u, 1, (char)*p);
        else
            sqlite3_str_appendf(u, "%%%02X", *p);
    }
    sqlite3_str_appendall(u, "?immutable=1");
    return sqlite3_str_finish(u);
}

enum { OPEN_WRITE, OPEN_READ, OPEN_MEMORY }; /* how open_mode opens a store */

/* A store named `path`, not yet open, with the lock timeout of $WRITESCOPE_DB_TIMEOUT_MS. */
static int store_new(const char *path, ws_store **out, ws_err *err)
{
    ws_store *s = calloc(1, sizeof *s);
    if (!s)
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    if (strlen(path) + 1 > sizeof s->path) {
        free(s);
        return ws_err_set(err, WS_EINVAL, "database path too long");
    }
    if (!path[0]) { /* SQLite would open a temporary database, thrown away at close */
        free(s);
        return ws_err_set(err, WS_EINVAL, "an empty database path (--db '') names no file");
    }
    strcpy(s->path, path);
    long long tm;
    int erc = ws_env_int64("WRITESCOPE_DB_TIMEOUT_MS", WS_STORE_TIMEOUT_MS, 0, INT_MAX, &tm, err);
    if (erc) {
        free(s);
        return erc;
    }
    s->timeout_ms = (int)tm;
    *out = s;
    return 0;
}

/* 0 when the file at `path` can be opened as `mode` asks (*exists: it is there; a folder
 * made for a new one), else why not. */
static int check_file(const char *path, int mode, int *exists, ws_err *err)
{
    struct stat sb;
    *exists = mode != OPEN_MEMORY && access(path, F_OK) == 0;
    if (mode == OPEN_MEMORY)
        return 0;
    if (*exists && (stat(path, &sb) || !S_ISREG(sb.st_mode)))
        return ws_err_set(err, WS_EIO, "%s: not a regular file", path);
    if (!*exists && mode == OPEN_READ)
        return ws_err_set(err, WS_ENOTFOUND, "%s: database does not exist", path);
    if (*exists && mode == OPEN_READ && sb.st_size == 0)
        return ws_err_set(err, WS_EDB, "%s: empty file, not a WriteScope database", path);
    if (!*exists && ws_ensure_parent_dir(path, err))
        return err ? err->code : WS_EIO;
    return mode == OPEN_WRITE ? writable_or_say(path, *exists, err) : 0;
}

/* Opens s->db on `path` (":memory:" for OPEN_MEMORY); a read-only database in WAL mode
 * that nobody can be writing is read as immutable. On failure s->db is closed. */
static int open_db(ws_store *s, const char *path, int mode, int exists, ws_err *err)
{
    int flags = mode == OPEN_READ ? SQLITE_OPEN_READONLY
                                  : SQLITE_OPEN_READWRITE | (exists ? 0 : SQLITE_OPEN_CREATE);
    int rc = sqlite3_open_v2(mode == OPEN_MEMORY ? ":memory:" : path, &s->db, flags, NULL);
    if (rc == SQLITE_OK && mode == OPEN_READ && readonly_wal(s->db, path)) {
        char *uri = immutable_uri(path);
        sqlite3_close(s->db);
        s->db = NULL;
        rc = uri ? sqlite3_open_v2(uri, &s->db, flags | SQLITE_OPEN_URI, NULL) : SQLITE_NOMEM;
        sqlite3_free(uri);
    }
    if (rc != SQLITE_OK) {
        ws_err_set(err, WS_EDB, "%s: cannot open: %s", path,
                   s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        sqlite3_close(s->db);
        s->db = NULL;
        return WS_EDB;
    }
    sqlite3_busy_timeout(s->db, s->timeout_ms);
    return 0;
}

/* The open database's schema version in *version; refused when this build cannot use it
 * as `mode` asks: newer, not WriteScope's, empty or older when only reading, or lacking
 * what its version promises. */
static int check_version(ws_store *s, int mode, int *version, ws_err *err)
{
    const char *path = s->path;
    int tables = 0;
    if (query_int(s, "PRAGMA user_version", version, err))
        return WS_EDB;
    if (*version > WS_SCHEMA_VERSION)
        return ws_err_set(err, WS_EDB,
                          "%s: schema version %d is newer than this writescope supports (%d); "
                          "upgrade writescope",
                          path, *version, WS_SCHEMA_VERSION);
    if (query_int(s, "SELECT count(*) FROM sqlite_master", &tables, err))
        return WS_EDB;
    if (*version == 0 && tables > 0)
        return ws_err_set(err, WS_EDB,
                          "%s: a SQLite database, but not a WriteScope one (no schema version)",
                          path);
    if (mode == OPEN_READ && *version == 0)
        return ws_err_set(err, WS_EDB, "%s: an empty SQLite database, not a WriteScope one",
                          path);
    if (mode == OPEN_READ && *version < WS_SCHEMA_VERSION)
        return ws_err_set(err, WS_EDB,
                          "%s: schema version %d is older than this writescope's (%d); a "
                          "writing command (writescope db init --db PATH) migrates it",
                          path, *version, WS_SCHEMA_VERSION);
    if (*version > 0 && check_schema(s, *version, err))
        return WS_EDB;
    return 0;
}

/* Foreign keys on; for writing, WAL mode, and the migrations after `version` (with the
 * datasheet profiles seeded into a new database) in one transaction. */
static int set_up(ws_store *s, int mode, int version, ws_err *err)
{
    if (exec(s, "PRAGMA foreign_keys = ON", err))
        return WS_EDB;
    /* WAL: readers never wait for a writer, and a writer waits only for another writer. A
     * file system without shared memory keeps the rollback journal (still one transaction
     * per write); so does a database another connection holds in that mode right now. */
    if (mode == OPEN_WRITE)
        sqlite3_exec(s->db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL);
    if (version < WS_SCHEMA_VERSION) {
        if (ws_store_begin(s, err))
            return WS_EDB;
        /* Another process may have migrated while we waited for the lock. */
        if (query_int(s, "PRAGMA user_version", &version, err) || migrate(s, version, err) ||
            (version == 0 && ws_store_seed_datasheet(s, NULL, err)) ||
            ws_store_commit(s, err)) {
            ws_store_rollback(s);
            return WS_EDB;
        }
    }
    return 0;
}

/* Opens `path` for writing (creating, migrating and seeding it), for reading (an existing,
 * current database, touched by nothing), or as an in-memory seeded store (path is then
 * only the name messages use). */
static int open_mode(const char *path, int mode, ws_store **out, ws_err *err)
{
    *out = NULL;
    ws_store *s = NULL;
    int exists = 0, version = 0;
    int rc = store_new(path, &s, err);
    if (rc)
        return rc;
    if ((rc = check_file(path, mode, &exists, err)) || (rc = open_db(s, path, mode, exists, err))) {
        free(s);
        return rc;
    }
    s->created = !exists && mode == OPEN_WRITE;
    if (check_version(s, mode, &version, err) || set_up(s, mode, version, err)) {
        sqlite3_close(s->db);
        if (s->created)
            unlink(path); /* never leave a half-made database behind */
        free(s);
        return err ? err->code : WS_EDB;
    }
    *out = s;
    return 0;
}

int ws_store_open(const char *path, ws_store **out, ws_err *err)
{
    return open_mode(path, OPEN_WRITE, out, err);
}

int ws_store_open_readonly(const char *path, ws_store **out, ws_err *err)
{
    return open_mode(path, OPEN_READ, out, err);
}

int ws_store_open_embedded(ws_store **out, ws_err *err)
{
    return open_mode(WS_STORE_EMBEDDED, OPEN_MEMORY, out, err);
}

int ws_store_open_for_reading(const char *path, ws_store **out, int *embedded, ws_err *err)
{
    char def[WS_PATH_MAX];
    *embedded = 0;
    if (!path) {
        if (ws_store_default_path(def, sizeof def, err))
            return err ? err->code : WS_EIO;
        if (access(def, F_OK) != 0 && errno == ENOENT) {
            *embedded = 1;
            return ws_store_open_embedded(out, err);
        }
        path = def;
    }
    return ws_store_open_readonly(path, out, err);
}

int ws_store_in_transaction(ws_store *s) { return !sqlite3_get_autocommit(s->db); }

int ws_store_check_writable(ws_store *s, ws_err *err)
{
    const char *file = sqlite3_db_filename(s->db, "main");
    if (!file || !file[0]) /* in memory */
        return 0;
    int rc = writable_or_say(s->path, 1, err);
    if (rc)
        return rc;
    if (sqlite3_db_readonly(s->db, "main") == 1)
        return ws_err_set(err, WS_EIO, "%s: SQLite opened it read-only: nothing can be stored there",
                          s->path);
    /* A real write, committed: the header rewritten with the version it holds. */
    if ((rc = ws_store_begin(s, err)))
        return rc;
    int version = 0;
    if ((rc = query_int(s, "PRAGMA user_version", &version, err))) {
        ws_store_rollback(s);
        return rc;
    }
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", version);
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        rc = ws_err_set(err, WS_EIO, "%s: a test write failed: %s; nothing can be stored there",
                        s->path, sqlite3_errmsg(s->db));
        ws_store_rollback(s);
    }
    return rc;
}

void ws_store_close(ws_store *s)
{
    if (!s)
        return;
    sqlite3_close(s->db);
    free(s);
}

void ws_store_discard(ws_store *s)
{
    if (!s)
        return;
    const int created = s->created;
    char path[sizeof s->path];
    memcpy(path, s->path, sizeof path);
    ws_store_close(s);
    if (!created)
        return;
    static const char *const side[] = {"", "-wal", "-shm", "-journal"};
    for (int i = 0; i < 4; i++) {
        char p[sizeof path + 16];
        snprintf(p, sizeof p, "%s%s", path, side[i]);
        unlink(p);
    }
}

static int valid_source(const char *src)
{
    for (int i = 0; k_sources[i]; i++)
        if (!strcmp(src, k_sources[i]))
            return 1;
    return 0;
}

/* Inserts one profile object (already validated shape) inside the open transaction. */
static int insert_profile(ws_store *s, json_t *p, const char *origin, int index, ws_err *err)
{
    const char *name = json_string_value(json_object_get(p, "name"));
    const char *kind = json_string_value(json_object_get(p, "kind"));
    const char *desc = json_string_value(json_object_get(p, "description"));
    json_t *params = json_object_get(p, "params");
    if (!name || !*name || !kind || !desc || !json_is_object(params))
        return ws_err_set(err, WS_EPARSE,
                          "%s: profile %d needs string name, kind, description and object params",
                          origin, index);
    if (strcmp(kind, "gpu") && strcmp(kind, "host"))
        return ws_err_set(err, WS_EINVAL, "%s: profile %s: kind \"%s\" is not gpu or host", origin,
                          name, kind);
    json_t *devices = json_object_get(p, "devices");
    size_t di;
    json_t *dv;
    if (devices && !json_is_array(devices))
        return ws_err_set(err, WS_EPARSE, "%s: profile %s: devices must be an array of names",
                          origin, name);
    json_array_foreach(devices, di, dv) if (!json_is_string(dv))
        return ws_err_set(err, WS_EPARSE, "%s: profile %s: devices must be an array of names",
                          origin, name);
    /* The profile's own source: datasheet unless a parameter says it was measured/fitted. */
    const char *psrc = "datasheet";
    const char *key;
    json_t *v;
    json_object_foreach(params, key, v)
    {
        const char *src = json_string_value(json_object_get(v, "source"));
        json_t *val = json_object_get(v, "value");
        if (!json_is_object(v) || !json_is_number(val) || !src ||
            !json_is_string(json_object_get(v, "unit")) ||
            !json_is_string(json_object_get(v, "reference")))
            return ws_err_set(err, WS_EPARSE,
                              "%s: profile %s, param %s: needs number value and string unit, "
                              "source, reference",
                              origin, name, key);
        if (!valid_source(src))
            return ws_err_set(err, WS_EINVAL,
                              "%s: profile %s, param %s: source \"%s\" is not one of datasheet, "
                              "measured, fitted, modeled",
                              origin, name, key, src);
        if (!isfinite(json_number_value(val)))
            return ws_err_set(err, WS_EINVAL, "%s: profile %s, param %s: value is not finite",
                              origin, name, key);
        ws_err bad;
        if (ws_profile_check_param(key, json_number_value(val), &bad))
            return ws_err_set(err, WS_EINVAL, "%s: profile %s: %s", origin, name, bad.msg);
        json_t *by = json_object_get(v, "calibrated_by");
        if (by && !json_is_string(by))
            return ws_err_set(err, WS_EPARSE, "%s: profile %s, param %s: calibrated_by must be "
                              "a string", origin, name, key);
        if (!strcmp(src, "fitted") || !strcmp(src, "measured"))
            psrc = src;
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "DELETE FROM profiles WHERE name = ?1", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK)
        return DB_FAIL(s, err, "cannot replace profile");
    char now[32];
    ws_utc_now(now, sizeof now);
    char *dev_text = devices ? json_dumps(devices, JSON_COMPACT) : NULL;
    rc = sqlite3_prepare_v2(s->db,
                            "INSERT INTO profiles(name, kind, description, source, created_at, "
                            "devices) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                            -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, desc, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, psrc, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, now, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 6, dev_text ? dev_text : "[]", -1, SQLITE_STATIC);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    }
    sqlite3_finalize(st);
    free(dev_text);
    if (rc != SQLITE_OK)
        return DB_FAIL(s, err, "cannot insert profile");
    sqlite3_int64 id = sqlite3_last_insert_rowid(s->db);
    rc = sqlite3_prepare_v2(s->db,
                            "INSERT INTO profile_params(profile_id, key, value, unit, source, "
                            "reference, calibrated_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                            -1, &st, NULL);
    if (rc != SQLITE_OK)
        return DB_FAIL(s, err, "cannot prepare profile parameters");
    json_object_foreach(params, key, v)
    {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 3, json_number_value(json_object_get(v, "value")));
        sqlite3_bind_text(st, 4, json_string_value(json_object_get(v, "unit")), -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, json_string_value(json_object_get(v, "source")), -1,
                          SQLITE_STATIC);
        sqlite3_bind_text(st, 6, json_string_value(json_object_get(v, "reference")), -1,
                          SQLITE_STATIC);
        const char *by = json_string_value(json_object_get(v, "calibrated_by"));
        sqlite3_bind_text(st, 7, by ? by : "", -1, SQLITE_STATIC);
        if ((rc = ws_store_step_done(s, st, "cannot insert profile parameter", err)))
            return rc;
    }
    sqlite3_finalize(st);
    return 0;
}

/* Writes all profiles of a file; runs inside an open transaction. */
static int import_in_tx(ws_store *s, const char *text, const char *origin, int *n_out, ws_err *err)
{
    json_error_t je;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return ws_err_set(err, WS_EPARSE, "%s: invalid JSON at line %d column %d: %s", origin,
                          je.line, je.column, je.text);
    json_t *arr = json_object_get(root, "profiles");
    int rc = 0;
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        rc = ws_err_set(err, WS_EPARSE, "%s: expected {\"profiles\": [ ... ]} with at least one profile",
                        origin);
    size_t i;
    json_t *p;
    json_array_foreach(arr, i, p)
    {
        if (rc)
            break;
        rc = insert_profile(s, p, origin, (int)i, err);
    }
    if (!rc && n_out)
        *n_out = (int)json_array_size(arr);
    json_decref(root);
    return rc;
}

int ws_store_import_profiles(ws_store *s, const char *text, const char *origin, int *n_out,
                             ws_err *err)
{
    if (ws_store_in_transaction(s)) /* the caller's transaction covers it */
        return import_in_tx(s, text, origin, n_out, err);
    int rc = ws_store_begin(s, err);
    if (rc)
        return rc;
    rc = import_in_tx(s, text, origin, n_out, err);
    if (!rc)
        rc = ws_store_commit(s, err);
    if (rc)
        ws_store_rollback(s);
    return rc;
}

int ws_store_seed_datasheet(ws_store *s, int *n_out, ws_err *err)
{
    const ws_embedded_file *f = ws_embedded_find("profiles/datasheet.json");
    if (!f)
        return ws_err_set(err, WS_EDB, "the datasheet profiles are missing from this build");
    return ws_store_import_profiles(s, f->data, "profiles/datasheet.json (embedded)", n_out, err);
}

static json_t *column_json(sqlite3_stmt *st, int i)
{
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER: return json_integer(sqlite3_column_int64(st, i));
    case SQLITE_FLOAT: return json_real(sqlite3_column_double(st, i));
    case SQLITE_NULL: return json_null();
    default: return json_string((const char *)sqlite3_column_text(st, i));
    }
}

json_t *ws_store_profiles(ws_store *s, const char *name, ws_err *err)
{
    sqlite3_stmt *st = NULL, *pp = NULL;
    json_t *out = json_array();
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT id, name, kind, description, source, created_at FROM "
                                "profiles WHERE ?1 IS NULL OR name = ?1 ORDER BY kind, name",
                                -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db,
                                "SELECT key, value, unit, source, reference FROM profile_params "
                                "WHERE profile_id = ?1 ORDER BY rowid",
                                -1, &pp, NULL);
    if (rc != SQLITE_OK) {
        DB_FAIL(s, err, "cannot list profiles");
        goto fail;
    }
    if (name)
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *p = json_object();
        json_object_set_new(p, "name", column_json(st, 1));
        json_object_set_new(p, "kind", column_json(st, 2));
        json_object_set_new(p, "description", column_json(st, 3));
        json_object_set_new(p, "source", column_json(st, 4));
        json_object_set_new(p, "created_at", column_json(st, 5));
        json_t *params = json_array();
        sqlite3_reset(pp);
        sqlite3_bind_int64(pp, 1, sqlite3_column_int64(st, 0));
        while (sqlite3_step(pp) == SQLITE_ROW) {
            json_t *q = json_object();
            json_object_set_new(q, "key", column_json(pp, 0));
            json_object_set_new(q, "value", json_real(sqlite3_column_double(pp, 1)));
            json_object_set_new(q, "unit", column_json(pp, 2));
            json_object_set_new(q, "source", column_json(pp, 3));
            json_object_set_new(q, "reference", column_json(pp, 4));
            json_array_append_new(params, q);
        }
        json_object_set_new(p, "params", params);
        json_array_append_new(out, p);
    }
    if (rc != SQLITE_DONE) {
        DB_FAIL(s, err, "cannot list profiles");
        goto fail;
    }
    if (name && json_array_size(out) == 0) {
        ws_err_set(err, WS_ENOTFOUND, "%s: no profile named '%s'", s->path, name);
        goto fail;
    }
    sqlite3_finalize(st);
    sqlite3_finalize(pp);
    return out;
fail:
    sqlite3_finalize(st);
    sqlite3_finalize(pp);
    json_decref(out);
    return NULL;
}

static int known_table(const char *t)
{
    for (int i = 0; ws_store_tables[i]; i++)
        if (!strcmp(t, ws_store_tables[i]))
            return 1;
    return 0;
}

/* Rows of one table, streamed to a callback-free JSON array. */
static json_t *table_json(ws_store *s, const char *table, ws_err *err)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT * FROM %s ORDER BY rowid", table);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        DB_FAIL(s, err, "cannot export");
        return NULL;
    }
    json_t *rows = json_array();
    int rc, n = sqlite3_column_count(st);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *row = json_object();
        for (int i = 0; i < n; i++)
            json_object_set_new(row, sqlite3_column_name(st, i), column_json(st, i));
        json_array_append_new(rows, row);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        DB_FAIL(s, err, "cannot export");
        json_decref(rows);
        return NULL;
    }
    return rows;
}

json_t *ws_store_export(ws_store *s, ws_err *err)
{
    json_t *out = json_object();
    json_object_set_new(out, "schema_version", json_integer(WS_SCHEMA_VERSION));
    /* One read transaction so the tables agree with each other. */
    sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL);
    for (int i = 0; ws_store_tables[i]; i++) {
        json_t *rows = table_json(s, ws_store_tables[i], err);
        if (!rows) {
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
            json_decref(out);
            return NULL;
        }
        json_object_set_new(out, ws_store_tables[i], rows);
    }
    sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    return out;
}

/* WS_EINVAL naming the tables export knows. */
static int unknown_table(const char *table, ws_err *err)
{
    char names[256] = "";
    for (int i = 0; ws_store_tables[i]; i++) {
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", i ? ", " : "", ws_store_tables[i]);
    }
    return ws_err_set(err, WS_EINVAL, "unknown table '%s' (tables: %s)", table, names);
}

json_t *ws_store_export_table(ws_store *s, const char *table, ws_err *err)
{
    if (!known_table(table)) {
        unknown_table(table, err);
        return NULL;
    }
    json_t *rows = table_json(s, table, err);
    if (!rows)
        return NULL;
    json_t *out = json_object();
    json_object_set_new(out, "schema_version", json_integer(WS_SCHEMA_VERSION));
    json_object_set_new(out, table, rows);
    return out;
}

int ws_store_export_csv(ws_store *s, const char *table, FILE *out, ws_err *err)
{
    if (!known_table(table))
        return unknown_table(table, err);
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT * FROM %s ORDER BY rowid", table);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return DB_FAIL(s, err, "cannot export");
    int n = sqlite3_column_count(st), rc;
    for (int i = 0; i < n; i++) {
        if (i)
            fputc(',', out);
        ws_csv_field(out, sqlite3_column_name(st, i));
    }
    fputc('\n', out);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        for (int i = 0; i < n; i++) {
            if (i)
                fputc(',', out);
            if (sqlite3_column_type(st, i) == SQLITE_FLOAT) {
                fprintf(out, "%.17g", sqlite3_column_double(st, i));
            } else {
                const unsigned char *t = sqlite3_column_text(st, i);
                ws_csv_field(out, t ? (const char *)t : "");
            }
        }
        fputc('\n', out);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return DB_FAIL(s, err, "cannot export");
    return 0;
}

int ws_store_prep(ws_store *s, const char *sql, sqlite3_stmt **st, ws_err *err)
{
    if (sqlite3_prepare_v2(ws_store_sqlite(s), sql, -1, st, NULL) != SQLITE_OK)
        return WS_DB_FAIL(s, err, "prepare");
    return 0;
}

int ws_store_step_done(ws_store *s, sqlite3_stmt *st, const char *what, ws_err *err)
{
    if (sqlite3_step(st) == SQLITE_DONE)
        return 0;
    const int rc = WS_DB_FAIL(s, err, what);
    sqlite3_finalize(st);
    return rc;
}

int ws_store_insert_id(ws_store *s, sqlite3_stmt *st, const char *what, long long *id,
                       ws_err *err)
{
    const int rc = ws_store_step_done(s, st, what, err); /* finalizes st on failure */
    if (rc)
        return rc;
    sqlite3_finalize(st);
    *id = sqlite3_last_insert_rowid(ws_store_sqlite(s));
    return 0;
}

int ws_store_run_row(ws_store *s, sqlite3_stmt *st, long long id, const char *what,
                     const char *noun, const char *hint, ws_err *err)
{
    const int r = sqlite3_step(st);
    if (r == SQLITE_ROW)
        return 0;
    int rc;
    if (r != SQLITE_DONE)
        rc = WS_DB_FAIL(s, err, what);
    else if (id)
        rc = ws_err_set(err, WS_ENOTFOUND, "%s: no %s %lld", ws_store_path(s), noun, id);
    else
        rc = ws_err_set(err, WS_ENOTFOUND, "%s: no %s yet (%s)", ws_store_path(s), noun, hint);
    sqlite3_finalize(st);
    return rc;
}

int ws_store_in_tx(ws_store *s, int (*body)(ws_store *s, void *ctx, ws_err *err), void *ctx,
                   ws_err *err)
{
    if (ws_store_in_transaction(s))
        return body(s, ctx, err);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &old);
    int rc = ws_store_begin(s, err);
    if (!rc) {
        rc = body(s, ctx, err);
        if (!rc)
            rc = ws_store_commit(s, err);
        if (rc)
            ws_store_rollback(s);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int ws_store_in_tx_id(ws_store *s, int (*body)(ws_store *s, void *ctx, ws_err *err), void *ctx,
                      long long *id, ws_err *err)
{
    const int own = !ws_store_in_transaction(s);
    const long long before = *id;
    const int rc = ws_store_in_tx(s, body, ctx, err);
    if (rc && own)
        *id = before;
    return rc;
}

int ws_store_check_params(ws_store *s, const char *what, const char *params, ws_err *err)
{
    if (!params || !params[0])
        return 0;
    json_error_t je;
    json_t *p = json_loads(params, 0, &je);
    const int ok = json_is_object(p);
    json_decref(p);
    if (!ok)
        return ws_err_set(err, WS_EINVAL, "%s: %s: params is not a JSON object: %s",
                          ws_store_path(s), what, p ? "not an object" : je.text);
    return 0;
}

void ws_store_stamp(char *started_at, size_t started_cap, char *tool_version, size_t tool_cap)
{
    if (!started_at[0])
        ws_utc_now(started_at, started_cap);
    if (!tool_version[0])
        snprintf(tool_version, tool_cap, "%s", WS_VERSION);
}
