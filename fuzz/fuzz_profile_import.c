/* fuzz_profile_import: libFuzzer target for the hardware-profile importer
 * (store/store.c, ws_store_import_profiles).
 *
 * One seeded store is opened once, in a fresh temporary folder; each input is imported
 * inside a transaction, the profiles are read back (so what was written is read through
 * the export path too) and the transaction is rolled back, so every input starts from the
 * same datasheet database and the store never grows. Only the store's public API is used. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ws_store *g_store;
static char g_dir[4096], g_db[4200];

static void cleanup(void)
{
    ws_store_close(g_store);
    g_store = NULL;
    char side[4300];
    unlink(g_db);
    snprintf(side, sizeof side, "%s-journal", g_db);
    unlink(side);
    rmdir(g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/ws_fuzz_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("fuzz_profile_import: mkdtemp");
        abort();
    }
    snprintf(g_db, sizeof g_db, "%s/fuzz.db", g_dir);
    ws_err err = {0};
    if (ws_store_open(g_db, &g_store, &err)) {
        fprintf(stderr, "fuzz_profile_import: %s\n", err.msg);
        abort();
    }
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1); /* the importer takes NUL-terminated text */
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    ws_err err = {0};
    if (ws_store_begin(g_store, &err)) {
        fprintf(stderr, "fuzz_profile_import: %s\n", err.msg);
        abort(); /* nothing else holds the database: a failure here is a finding */
    }
    int n = 0;
    if (ws_store_import_profiles(g_store, text, "fuzz", &n, &err) == 0) {
        json_t *all = ws_store_profiles(g_store, NULL, &err);
        json_decref(all);
    }
    ws_store_rollback(g_store);
    free(text);
    return 0;
}
