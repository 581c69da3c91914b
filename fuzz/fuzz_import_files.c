/* fuzz_import_files: libFuzzer target for the file layer of `calib import`, `calib check` and
 * `fidelity --ops` (calib/import_files.c): the folder walk, the LICENSE lookup, the reading
 * of every file found.
 *
 * An input describes a small folder, entries separated by lines "--", each a header line
 * "K NAME [TARGET]" and, for a regular file, its content on the lines after:
 *
 *   R attention.csv      a regular file holding the lines that follow
 *   F LICENSE            a FIFO (no writer: opening it for reading blocks unless told not to)
 *   L dup.csv TARGET     a symbolic link to TARGET: another entry's name, /proc/self/status,
 *                        /dev/null or /nonexistent
 *   D sub.csv            an empty folder
 *
 * Names are cut to [A-Za-z0-9._-] (no "." or ".."). The folder is made under a fresh temporary
 * folder, then read as the tool reads it: collected, read whole (alone, and with its first
 * file given again beside it), and each entry's licence looked up. The promises: nothing
 * blocks (libFuzzer's timeout), an error is one line, a success reads at most the file cap,
 * each file once, with rows that add up and a licence free of control characters. Everything
 * made is removed after each input (a leftover aborts). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "import_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ENTRIES_MAX 8
#define NAME_MAX_LEN 40

typedef struct entry {
    char kind;
    char name[NAME_MAX_LEN + 1];
    char target[NAME_MAX_LEN + 1];
    const char *body;
    size_t body_len;
} entry;

static void fail(const char *what, const char *msg)
{
    fprintf(stderr, "fuzz_import_files: %s: %s\n", what, msg);
    abort();
}

/* Text from outside the tool's control: no byte below 0x20, no DEL. */
static int plain(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 0;
    return 1;
}

static void check_err(const char *what, const ws_err *err)
{
    if (!err->msg[0] || strchr(err->msg, '\n'))
        fail(what, "an error that is not one line");
}

/* The name in [p, e) cut to the allowed characters; 0 when nothing is left. */
static int clean_name(const char *p, const char *e, char *out)
{
    size_t n = 0;
    for (; p < e && n < NAME_MAX_LEN; p++)
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '.' || *p == '_' || *p == '-')
            out[n++] = *p;
    out[n] = '\0';
    return n && strcmp(out, ".") && strcmp(out, "..");
}

/* The entries of the input. */
static int parse_entries(const char *p, const char *end, entry *v)
{
    int n = 0;
    while (p < end && n < ENTRIES_MAX) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *hend = nl ? nl : end;
        entry *x = &v[n];
        memset(x, 0, sizeof *x);
        x->kind = *p;
        const char *sp = memchr(p, ' ', (size_t)(hend - p));
        const char *name = sp ? sp + 1 : hend;
        const char *sp2 = memchr(name, ' ', (size_t)(hend - name));
        const int ok = strchr("RFLD", x->kind) && x->kind &&
                       clean_name(name, sp2 ? sp2 : hend, x->name);
        static const char *const outside[] = {"/proc/self/status", "/dev/null", "/nonexistent"};
        for (int k = 0; sp2 && k < 3 && !x->target[0]; k++)
            if ((size_t)(hend - sp2 - 1) == strlen(outside[k]) &&
                !memcmp(sp2 + 1, outside[k], strlen(outside[k])))
                snprintf(x->target, sizeof x->target, "%s", outside[k]);
        if (!x->target[0] && (!sp2 || !clean_name(sp2 + 1, hend, x->target)))
            snprintf(x->target, sizeof x->target, "missing");
        /* the body: up to a line "--" */
        const char *b = nl ? nl + 1 : end, *q = b;
        while (q < end && !(q + 2 <= end && q[0] == '-' && q[1] == '-' &&
                            (q + 2 == end || q[2] == '\n'))) { /* q: a line's start */
            const char *l = memchr(q, '\n', (size_t)(end - q));
            q = l ? l + 1 : end;
        }
        x->body = b;
        x->body_len = (size_t)(q - b);
        p = q + 2 < end ? q + 3 : end;
        n += ok;
    }
    return n;
}

/* Makes entry x in dir; 1 when made (to be removed), 0 when not (a name given twice). */
static int make(const char *dir, const entry *x)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, x->name);
    switch (x->kind) {
    case 'R': {
        FILE *f = fopen(path, "wbx");
        if (!f)
            return 0;
        if (x->body_len)
            fwrite(x->body, 1, x->body_len, f);
        fclose(f);
        return 1;
    }
    case 'F': return mkfifo(path, 0600) == 0;
    case 'L': return symlink(x->target, path) == 0;
    default: return mkdir(path, 0700) == 0;
    }
}

static void read_folder(const char *const *paths, int n_paths)
{
    ws_vidur_rows rows = {0};
    ws_calibdb_source *files = calloc(WS_IMPORT_MAX_FILES, sizeof *files);
    int n = 0;
    ws_err err = {0};
    if (!files)
        abort();
    if (ws_import_read(paths, n_paths, &rows, files, &n, &err)) {
        check_err("ws_import_read", &err);
    } else {
        int sum = 0;
        if (n < 1 || n > WS_IMPORT_MAX_FILES)
            fail("ws_import_read", "a file count out of range");
        for (int i = 0; i < n; i++) {
            sum += files[i].rows;
            if (!plain(files[i].licence) || !plain(files[i].what))
                fail(files[i].path, "a control character in the stored provenance");
            if (files[i].bytes > WS_IMPORT_FILE_MAX_BYTES || strlen(files[i].sha256) != 64)
                fail(files[i].path, "size or digest");
            for (int k = 0; k < i; k++)
                if (!strcmp(files[i].path, files[k].path))
                    fail(files[i].path, "a file read twice");
        }
        if (sum != rows.n)
            fail("ws_import_read", "the files' rows do not add up");
    }
    ws_vidur_rows_free(&rows);
    free(files);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    entry v[ENTRIES_MAX];
    const int n = parse_entries((const char *)data, (const char *)data + size, v);
    char dir[] = "/tmp/fuzz_import_files.XXXXXX";
    if (!mkdtemp(dir))
        abort();
    int made[ENTRIES_MAX] = {0};
    for (int i = 0; i < n; i++)
        made[i] = make(dir, &v[i]);

    /* collected */
    char *list[WS_IMPORT_MAX_FILES];
    int nl = 0;
    ws_err err = {0};
    const char *one[] = {dir};
    if (ws_import_collect(one, 1, list, &nl, &err))
        check_err("ws_import_collect", &err);
    for (int i = 0; i < nl; i++) {
        if (strncmp(list[i], dir, strlen(dir)))
            fail(list[i], "a file outside the folder");
        free(list[i]);
    }
    /* read whole, alone and with its first entry given again */
    read_folder(one, 1);
    char first[256];
    snprintf(first, sizeof first, "%s/%s", dir, n ? v[0].name : "none.csv");
    const char *two[] = {dir, first};
    read_folder(two, 2);
    /* the licence beside each entry */
    for (int i = 0; i < n; i++) {
        char path[256], lic[160];
        snprintf(path, sizeof path, "%s/%s", dir, v[i].name);
        ws_err e = {0};
        if (ws_import_licence(path, lic, sizeof lic, &e))
            check_err("ws_import_licence", &e);
        else if (!plain(lic))
            fail("ws_import_licence", "a control character in the licence");
    }

    for (int i = n - 1; i >= 0; i--) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", dir, v[i].name);
        if (made[i] && (v[i].kind == 'D' ? rmdir(path) : unlink(path)))
            fail(path, strerror(errno));
    }
    if (rmdir(dir))
        fail(dir, "left behind (a file the input made was not removed)");
    return 0;
}
