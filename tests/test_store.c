/* test_store: the SQLite store (store/store.c): creation and seeding, migrations and
 * refusals (a schema version that claims what the file lacks included), transactions, a
 * locked database, WAL mode beside a reader, the test write, export. */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "embedded.h"
#include "store.h"
#include "ws_util.h"

static void tmp_db(char *path, size_t cap)
{
    char dir[64];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, cap, "%s/sub/ws.db", dir); /* parent folder created on first use */
}

Test(store, create_migrate_seed)
{
    char path[256];
    tmp_db(path, sizeof path);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    cr_assert(ws_store_created(s));
    cr_assert_eq(th_count_file(ws_store_path(s), "PRAGMA user_version"), WS_SCHEMA_VERSION);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM profiles WHERE source = 'datasheet'"),
                 (int)th_datasheet_profiles(NULL));
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM profile_params p JOIN profiles f ON "
                          "f.id = p.profile_id WHERE f.name = 'a100-40gb-pcie' AND "
                          "p.key = 'hbm_bw' AND p.value = 1.555e12 AND p.source = 'datasheet'"),
                 1);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM profile_params WHERE reference = ''"), 0);
    /* V100 has no bf16; its H2D is about 12 GB/s. */
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM profile_params p JOIN profiles f ON "
                          "f.id = p.profile_id WHERE f.name = 'v100-32gb-pcie' AND "
                          "((p.key = 'bf16_flops' AND p.value = 0) OR "
                          "(p.key = 'h2d_bw' AND p.value BETWEEN 11e9 AND 13e9))"),
                 2);
    ws_store_close(s);

    /* Reopening neither recreates nor duplicates. */
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    cr_assert(!ws_store_created(s));
    int n = 0;
    cr_assert_eq(ws_store_seed_datasheet(s, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, (int)th_datasheet_profiles(NULL));
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM profiles"), n);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM profile_params"),
                 th_count_file(ws_store_path(s), "SELECT count(*) FROM profile_params WHERE profile_id IN "
                          "(SELECT id FROM profiles)"));
    ws_store_close(s);
}

Test(store, profiles_json_roundtrip)
{
    char path[256];
    tmp_db(path, sizeof path);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    json_t *p = ws_store_profiles(s, "h200", &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert_eq(json_array_size(p), 1);
    json_t *h = json_array_get(p, 0);
    cr_assert_str_eq(json_string_value(json_object_get(h, "kind")), "gpu");
    int found = 0;
    size_t i;
    json_t *q;
    json_array_foreach(json_object_get(h, "params"), i, q) if (
        !strcmp(json_string_value(json_object_get(q, "key")), "hbm_bw"))
    {
        cr_assert_eq(json_number_value(json_object_get(q, "value")), 4.8e12);
        found = 1;
    }
    cr_assert(found);
    json_decref(p);
    cr_assert_null(ws_store_profiles(s, "no-such-gpu", &err));
    cr_assert_eq(err.code, WS_ENOTFOUND);
    ws_store_close(s);
}

Test(store, not_sqlite_is_refused_untouched)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    const char *junk = "this is not a database, just text\n";
    th_write(dir, "junk.db", junk, path, sizeof path);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(path, &s, &err), WS_EDB);
    cr_assert_neq(strstr(err.msg, path), NULL, "%s", err.msg);
    cr_assert_neq(strstr(err.msg, "not a SQLite database"), NULL, "%s", err.msg);
    cr_assert(th_same_file_bytes(path, junk, strlen(junk)));
    char journal[300];
    snprintf(journal, sizeof journal, "%s-journal", path);
    cr_assert(access(journal, F_OK) != 0, "no journal left behind");
}

Test(store, newer_schema_and_foreign_db_refused)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/newer.db", dir);
    sqlite3 *db;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_exec(db, "CREATE TABLE profiles(x); PRAGMA user_version = 99;", 0, 0, 0);
    sqlite3_close(db);
    size_t len;
    char *before = th_slurp(path, &len);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(path, &s, &err), WS_EDB);
    cr_assert_neq(strstr(err.msg, "schema version 99 is newer"), NULL, "%s", err.msg);
    cr_assert(th_same_file_bytes(path, before, len), "file unchanged");
    free(before);

    snprintf(path, sizeof path, "%s/foreign.db", dir);
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_exec(db, "CREATE TABLE notes(x);", 0, 0, 0);
    sqlite3_close(db);
    cr_assert_eq(ws_store_open(path, &s, &err), WS_EDB);
    cr_assert_neq(strstr(err.msg, "not a WriteScope"), NULL, "%s", err.msg);
}

Test(store, bad_profile_file_rolls_back)
{
    char path[256];
    tmp_db(path, sizeof path);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    /* First profile valid, second has an unknown source: nothing may be written. */
    const char *bad =
        "{\"profiles\":[{\"name\":\"new-gpu\",\"kind\":\"gpu\",\"description\":\"d\",\"params\":"
        "{\"hbm_bw\":{\"value\":1e12,\"unit\":\"B/s\",\"source\":\"datasheet\",\"reference\":\"r\"}}},"
        "{\"name\":\"h200\",\"kind\":\"gpu\",\"description\":\"d\",\"params\":"
        "{\"hbm_bw\":{\"value\":1,\"unit\":\"B/s\",\"source\":\"guess\",\"reference\":\"r\"}}}]}";
    cr_assert_eq(ws_store_import_profiles(s, bad, "bad.json", NULL, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "bad.json"), NULL, "%s", err.msg);
    cr_assert_neq(strstr(err.msg, "guess"), NULL, "%s", err.msg);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM profiles WHERE name = 'new-gpu'"), 0);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM profile_params p JOIN profiles f ON "
                          "f.id = p.profile_id WHERE f.name = 'h200' AND p.key = 'hbm_bw' "
                          "AND p.value = 4.8e12"),
                 1);
    cr_assert_eq(ws_store_import_profiles(s, "{\"profiles\": [", "trunc.json", NULL, &err),
                 WS_EPARSE);
    cr_assert_neq(strstr(err.msg, "trunc.json: invalid JSON"), NULL, "%s", err.msg);

    /* A valid file replaces by name and keeps the others. */
    const char *good =
        "{\"profiles\":[{\"name\":\"h200\",\"kind\":\"gpu\",\"description\":\"measured\",\"params\":"
        "{\"hbm_bw\":{\"value\":4.1e12,\"unit\":\"B/s\",\"source\":\"measured\",\"reference\":\"run 1\"}}}]}";
    int n = 0;
    cr_assert_eq(ws_store_import_profiles(s, good, "good.json", &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 1);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM profiles"),
                 (int)th_datasheet_profiles(NULL));
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM profiles WHERE name = 'h200' AND source = 'measured'"), 1);
    ws_store_close(s);
}

Test(store, locked_database_bounded_wait)
{
    char path[256];
    tmp_db(path, sizeof path);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    ws_store_close(s);
    /* Another writer holds the write lock. */
    sqlite3 *other;
    cr_assert_eq(sqlite3_open(path, &other), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(other, "BEGIN IMMEDIATE", 0, 0, 0), SQLITE_OK);
    setenv("WRITESCOPE_DB_TIMEOUT_MS", "200", 1);
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg); /* reading is fine */
    double t0 = ws_now_s();
    cr_assert_eq(ws_store_seed_datasheet(s, NULL, &err), WS_EDB);
    double waited = ws_now_s() - t0;
    cr_assert_neq(strstr(err.msg, "locked by another writer"), NULL, "%s", err.msg);
    cr_assert_neq(strstr(err.msg, "0.2 s"), NULL, "%s", err.msg);
    cr_assert(waited >= 0.15 && waited < 5.0, "waited %.3f s", waited);
    ws_store_close(s);
    sqlite3_exec(other, "ROLLBACK", 0, 0, 0);
    sqlite3_close(other);
    unsetenv("WRITESCOPE_DB_TIMEOUT_MS");
}

Test(store, export_json_and_csv)
{
    char path[256];
    tmp_db(path, sizeof path);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    json_t *all = ws_store_export(s, &err);
    cr_assert_not_null(all, "%s", err.msg);
    cr_assert_eq(json_integer_value(json_object_get(all, "schema_version")), WS_SCHEMA_VERSION);
    for (int i = 0; ws_store_tables[i]; i++)
        cr_assert(json_is_array(json_object_get(all, ws_store_tables[i])), "%s",
                  ws_store_tables[i]);
    cr_assert_eq(json_array_size(json_object_get(all, "profiles")), th_datasheet_profiles(NULL));
    json_decref(all);

    char csv[300];
    snprintf(csv, sizeof csv, "%s.csv", path);
    FILE *f = fopen(csv, "w");
    cr_assert_eq(ws_store_export_csv(s, "profiles", f, &err), 0, "%s", err.msg);
    fclose(f);
    char *text = th_slurp(csv, NULL);
    cr_assert_eq(strncmp(text, "id,name,kind,description,source", 31), 0, "%s", text);
    cr_assert_eq(th_lines(text), 1 + (int)th_datasheet_profiles(NULL)); /* header + rows */
    /* A description with a comma is quoted. */
    cr_assert_neq(strstr(text, "\"NVIDIA A100 40GB PCIe, host link"), NULL);
    free(text);
    cr_assert_eq(ws_store_export_csv(s, "sqlite_master", stdout, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "sim_runs, sim_requests, sim_steps, run_runs, run_steps, run_layers"),
                  NULL, "%s", err.msg);
    ws_store_close(s);
}

Test(store, migrates_old_schema_keeping_data)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/v1.db", dir);
    /* A version-1 database as an older writescope left it, with a user profile. */
    const ws_embedded_file *v1 = ws_embedded_find("store/schema/001_initial.sql");
    cr_assert_not_null(v1);
    sqlite3 *db;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, v1->data, 0, 0, 0), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db,
                              "INSERT INTO profiles(name, kind, description, source, created_at) "
                              "VALUES ('mine', 'gpu', 'kept', 'measured', 'then');"
                              "PRAGMA user_version = 1;",
                              0, 0, 0),
                 SQLITE_OK);
    sqlite3_close(db);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    cr_assert_eq(th_count_file(ws_store_path(s), "PRAGMA user_version"), WS_SCHEMA_VERSION);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM profiles WHERE name = 'mine'"), 1);
    /* Version-2 columns exist. */
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM pragma_table_info('fits') WHERE name = 'p_fixed'"), 1);
    /* Version 3: user profiles get no devices. */
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM profiles WHERE name = 'mine' AND devices = '[]'"), 1);
    /* Version 4: the simulation tables, empty. */
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM sim_runs"), 0);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM sim_steps"), 0);
    ws_store_close(s);
}

/* A schema-2 database seeded by an older writescope: migration 3 gives its datasheet
 * profiles the device names and calibrated keys a fresh seed has. */
Test(store, migration_3_matches_a_fresh_seed)
{
    char dir[64], old[256], fresh[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(old, sizeof old, "%s/v2.db", dir);
    snprintf(fresh, sizeof fresh, "%s/v3.db", dir);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(fresh, &s, &err), 0, "%s", err.msg);
    ws_store_close(s);
    /* The v3 database, turned back into v2: the columns dropped, the version lowered. */
    char sql[512];
    snprintf(sql, sizeof sql, "ATTACH '%s' AS f", fresh);
    char *v1 = (char *)ws_embedded_find("store/schema/001_initial.sql")->data;
    char *v2 = (char *)ws_embedded_find("store/schema/002_fit_bounds.sql")->data;
    th_exec_sql(old, v1);
    th_exec_sql(old, v2);
    /* An older writescope seeded only the profiles migration 3 names. */
    const char *old_seed = "name IN ('a100-40gb-pcie', 'a100-80gb-sxm', 'v100-32gb-pcie', "
                           "'h100-sxm', 'h200', 'xeon-gold-5318y')";
    char copy[1024];
    snprintf(copy, sizeof copy,
             "%s; INSERT INTO profiles SELECT id, name, kind, description, source, host_id, "
             "run_id, created_at FROM f.profiles WHERE %s; INSERT INTO profile_params SELECT "
             "profile_id, key, value, unit, source, reference FROM f.profile_params WHERE "
             "profile_id IN (SELECT id FROM f.profiles WHERE %s); PRAGMA user_version = 2",
             sql, old_seed, old_seed);
    th_exec_sql(old, copy);
    cr_assert_eq(ws_store_open(old, &s, &err), 0, "%s", err.msg);
    ws_store_close(s);
    char q[512];
    snprintf(q, sizeof q, "SELECT count(*) FROM profiles WHERE devices != '[]' AND %s", old_seed);
    cr_assert_eq(th_count_file(old, q), 6);
    cr_assert_eq(th_count_file(old, q), th_count_file(fresh, q));
    snprintf(q, sizeof q,
             "SELECT count(*) FROM profile_params WHERE calibrated_by != '' AND profile_id IN "
             "(SELECT id FROM profiles WHERE %s)",
             old_seed);
    cr_assert_eq(th_count_file(old, q), 10);
    cr_assert_eq(th_count_file(old, q), th_count_file(fresh, q));
    snprintf(q, sizeof q, "SELECT count(*) FROM profiles WHERE name = 'h100-sxm' AND devices = "
                          "'[\"NVIDIA H100 80GB HBM3\"]'");
    cr_assert_eq(th_count_file(old, q), 1);
    cr_assert_eq(th_count_file(fresh, q), 1);
}

Test(store, readonly_open_creates_nothing)
{
    char dir[64], path[256], sub[128];
    th_tmpdir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/sub", dir);
    snprintf(path, sizeof path, "%s/ws.db", sub);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open_readonly(path, &s, &err), WS_ENOTFOUND);
    cr_assert_str_eq(err.msg, strcat(strcpy((char[300]){0}, path), ": database does not exist"));
    cr_assert_eq(access(sub, F_OK), -1, "the folder was created");
    /* Empty file: refused, still empty. */
    char empty[256];
    th_write(dir, "empty.db", "", empty, sizeof empty);
    cr_assert_eq(ws_store_open_readonly(empty, &s, &err), WS_EDB);
    cr_assert_neq(strstr(err.msg, "empty file"), NULL, "%s", err.msg);
    cr_assert(th_same_file_bytes(empty, "", 0));
    /* An empty SQLite database (no schema): refused. */
    char bare[256];
    snprintf(bare, sizeof bare, "%s/bare.db", dir);
    th_exec_sql(bare, "PRAGMA user_version = 0; VACUUM;");
    cr_assert_eq(ws_store_open_readonly(bare, &s, &err), WS_EDB);
    cr_assert_neq(strstr(err.msg, "not a WriteScope one"), NULL, "%s", err.msg);
}

Test(store, readonly_open_refuses_older_schema_untouched)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/v1.db", dir);
    const ws_embedded_file *v1 = ws_embedded_find("store/schema/001_initial.sql");
    th_exec_sql(path, v1->data);
    th_exec_sql(path, "PRAGMA user_version = 1");
    size_t len;
    char *before = th_slurp(path, &len);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open_readonly(path, &s, &err), WS_EDB);
    cr_assert_neq(strstr(err.msg, "schema version 1 is older"), NULL, "%s", err.msg);
    cr_assert_eq(strchr(err.msg, '\n'), NULL);
    cr_assert(th_same_file_bytes(path, before, len), "the file changed");
    free(before);
    /* A current database opens read-only, reads, and refuses writes. */
    char cur[256];
    snprintf(cur, sizeof cur, "%s/cur.db", dir);
    cr_assert_eq(ws_store_open(cur, &s, &err), 0, "%s", err.msg);
    ws_store_close(s);
    cr_assert_eq(ws_store_open_readonly(cur, &s, &err), 0, "%s", err.msg);
    json_t *p = ws_store_profiles(s, NULL, &err);
    cr_assert_eq(json_array_size(p), th_datasheet_profiles(NULL));
    json_decref(p);
    cr_assert_neq(ws_store_seed_datasheet(s, NULL, &err), 0);
    ws_store_close(s);
}

Test(store, embedded_store_for_reading)
{
    char dir[64], path[256], env[300];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ws.db", dir);
    snprintf(env, sizeof env, "WRITESCOPE_DB=%s", path);
    putenv(env);
    ws_store *s;
    ws_err err = {0};
    int embedded = 0;
    cr_assert_eq(ws_store_open_for_reading(NULL, &s, &embedded, &err), 0, "%s", err.msg);
    cr_assert_eq(embedded, 1);
    cr_assert_str_eq(ws_store_path(s), WS_STORE_EMBEDDED);
    json_t *p = ws_store_profiles(s, NULL, &err);
    cr_assert_eq(json_array_size(p), th_datasheet_profiles(NULL));
    json_decref(p);
    ws_store_close(s);
    cr_assert_eq(access(path, F_OK), -1, "the default database was created");
    /* An explicit path never falls back. */
    cr_assert_eq(ws_store_open_for_reading(path, &s, &embedded, &err), WS_ENOTFOUND);
    cr_assert_eq(embedded, 0);
    /* Once the default exists, it is what is read. */
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    ws_store_close(s);
    cr_assert_eq(ws_store_open_for_reading(NULL, &s, &embedded, &err), 0, "%s", err.msg);
    cr_assert_eq(embedded, 0);
    cr_assert_str_eq(ws_store_path(s), path);
    ws_store_close(s);
}

/* A database of schema `upto` made by applying its migrations, then `damage` (SQL) and
 * user_version = upto, at dir/name (path into buf). */
static void damaged_db(const char *dir, const char *name, int upto, const char *damage, char *buf,
                       size_t cap)
{
    snprintf(buf, cap, "%s/%s", dir, name);
    for (int v = 1; v <= upto; v++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "store/schema/%03d_", v);
        const ws_embedded_file *m = NULL;
        for (const ws_embedded_file *f = ws_embedded; f->path; f++)
            if (!strncmp(f->path, prefix, strlen(prefix)))
                m = f;
        cr_assert_not_null(m, "migration %d", v);
        th_exec_sql(buf, m->data);
    }
    th_exec_sql(buf, damage);
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", upto);
    th_exec_sql(buf, sql);
}

/* A user_version that claims tables or columns the file lacks is refused with one line
 * naming what is missing, before any migration builds on it; the file keeps its version. */
Test(store, schema_version_claims_are_checked)
{
    char dir[64], v5[256], v9[256], cur[256];
    th_tmpdir(dir, sizeof dir);
    ws_store *s;
    ws_err err = {0};
    damaged_db(dir, "v5.db", 5, "DROP TABLE run_runs", v5, sizeof v5);
    cr_assert_eq(ws_store_open(v5, &s, &err), WS_EDB, "a v5 database without run_runs opened");
    cr_assert_neq(strstr(err.msg, "table run_runs is missing"), NULL, "%s", err.msg);
    cr_assert_eq(strchr(err.msg, '\n'), NULL);
    cr_assert_eq(th_count_file(v5, "PRAGMA user_version"), 5, "the version was bumped");
    cr_assert_eq(th_count_file(v5, "SELECT count(*) FROM sqlite_master WHERE name = 'validate_runs'"),
                 0, "migrations ran");
    damaged_db(dir, "v9.db", 9, "ALTER TABLE run_steps DROP COLUMN overhead_s", v9, sizeof v9);
    cr_assert_eq(ws_store_open(v9, &s, &err), WS_EDB);
    cr_assert_neq(strstr(err.msg, "column run_steps.overhead_s is missing"), NULL, "%s", err.msg);
    /* A current database missing a table: refused for reading too. */
    damaged_db(dir, "cur.db", WS_SCHEMA_VERSION, "DROP TABLE plan_fits", cur, sizeof cur);
    cr_assert_eq(ws_store_open_readonly(cur, &s, &err), WS_EDB);
    cr_assert_neq(strstr(err.msg, "table plan_fits is missing"), NULL, "%s", err.msg);
    /* Whole, the same file opens. */
    char ok[256];
    damaged_db(dir, "ok.db", 5, "SELECT 1", ok, sizeof ok);
    cr_assert_eq(ws_store_open(ok, &s, &err), 0, "%s", err.msg);
    ws_store_close(s);
    cr_assert_eq(th_count_file(ok, "PRAGMA user_version"), WS_SCHEMA_VERSION);
    th_expect_fail((const char *[]){"db", "init", "--db", v5, NULL}, 1, "run_runs is missing",
                   NULL);
}

/* A database opened for writing is in WAL mode (readers never wait for a writer), and
 * ws_store_check_writable commits a test write that leaves it as it was. */
Test(store, wal_mode_and_test_write)
{
    char path[256];
    tmp_db(path, sizeof path);
    ws_store *s;
    ws_err err = {0};
    setenv("WRITESCOPE_DB_TIMEOUT_MS", "100", 1); /* a commit that waited for a reader fails */
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    unsetenv("WRITESCOPE_DB_TIMEOUT_MS");
    cr_assert_eq(ws_store_check_writable(s, &err), 0, "%s", err.msg);
    sqlite3 *h;
    cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
    sqlite3_stmt *st;
    cr_assert_eq(sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    cr_assert_str_eq((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    /* A reader in the middle of a read is not in the writer's way, nor it in the reader's. */
    cr_assert_eq(sqlite3_exec(h, "BEGIN; SELECT count(*) FROM profiles", NULL, NULL, NULL),
                 SQLITE_OK);
    cr_assert_eq(ws_store_seed_datasheet(s, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(th_count(h, "SELECT count(*) FROM profiles"), (int)th_datasheet_profiles(NULL));
    sqlite3_exec(h, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(h);
    ws_store_close(s);
    cr_assert_eq(th_count_file(path, "PRAGMA user_version"), WS_SCHEMA_VERSION);
    ws_store *m;
    cr_assert_eq(ws_store_open_embedded(&m, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_store_check_writable(m, &err), 0, "in memory: nothing to check");
    ws_store_close(m);
}
