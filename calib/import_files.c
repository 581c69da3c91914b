/* import_files: the operator profiles' files, read safely (see import_files.h). */
#include "import_files.h"

#include <dirent.h>
#include <errno.h>
#include <nettle/sha2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ws_util.h"

#define PATH_KEPT (sizeof(((ws_calibdb_source *)0)->path) - 1) /* longest path stored */
#define FOLDER_NAMES_MAX (4 * WS_IMPORT_MAX_FILES) /* .csv names one folder may list */

/* ---- collecting the files ---------------------------------------------------------------- */

typedef struct file_id {
    int known;  /* stat succeeded: dev and ino say which file it is */
    dev_t dev;
    ino_t ino;
} file_id;

/* Appends path to list unless the file is already there (the same device and inode). */
static int add_file(const char *path, char **list, file_id *ids, int *n, ws_err *err)
{
    const size_t len = strlen(path);
    if (len > PATH_KEPT)
        return ws_err_set(err, WS_EINVAL, "%.60s...: a path of %zu bytes, longer than the %zu a "
                          "calibration's sources keep", path, len, PATH_KEPT);
    struct stat st;
    file_id id = {0};
    if (stat(path, &st) == 0)
        id = (file_id){1, st.st_dev, st.st_ino};
    for (int i = 0; id.known && i < *n; i++)
        if (ids[i].known && ids[i].dev == id.dev && ids[i].ino == id.ino)
            return 0;
    if (*n == WS_IMPORT_MAX_FILES)
        return ws_err_set(err, WS_EINVAL, "%s: more than %d profile files", path,
                          WS_IMPORT_MAX_FILES);
    if (!(list[*n] = strdup(path)))
        return ws_err_set(err, WS_ENOMEM, "out of memory");
    ids[(*n)++] = id;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.csv files of folder `dir`, in name order, appended to list. */
static int folder_csvs(const char *dir, char **list, file_id *ids, int *n, ws_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return ws_err_set(err, WS_EIO, "%s: %s", dir, strerror(errno));
    char *names[FOLDER_NAMES_MAX];
    int k = 0, rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        const size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".csv") || e->d_name[0] == '.')
            continue;
        if (k == FOLDER_NAMES_MAX)
            rc = ws_err_set(err, WS_EINVAL, "%s: more than %d profile files", dir,
                            WS_IMPORT_MAX_FILES);
        else if (!(names[k] = malloc(strlen(dir) + l + 2)))
            rc = ws_err_set(err, WS_ENOMEM, "out of memory");
        else
            sprintf(names[k++], "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", e->d_name);
    }
    closedir(d);
    if (!rc && !k)
        rc = ws_err_set(err, WS_ENOTFOUND, "%s: no .csv files in the folder", dir);
    qsort(names, (size_t)k, sizeof *names, cmp_str);
    for (int i = 0; i < k; i++) {
        if (!rc)
            rc = add_file(names[i], list, ids, n, err);
        free(names[i]);
    }
    return rc;
}

int ws_import_collect(const char *const *paths, int n_paths, char **list, int *n, ws_err *err)
{
    file_id ids[WS_IMPORT_MAX_FILES];
    *n = 0;
    if (n_paths < 1)
        return ws_err_set(err, WS_EINVAL, "calib import: no profile files or folders given");
    int rc = 0;
    for (int i = 0; i < n_paths && !rc; i++) {
        struct stat st;
        if (stat(paths[i], &st))
            rc = ws_err_set(err, WS_EIO, "%s: %s", paths[i], strerror(errno));
        else if (S_ISDIR(st.st_mode))
            rc = folder_csvs(paths[i], list, ids, n, err);
        else
            rc = add_file(paths[i], list, ids, n, err);
    }
    if (rc) {
        for (int i = 0; i < *n; i++)
            free(list[i]);
        *n = 0;
    }
    return rc;
}

/* ---- reading one file --------------------------------------------------------------------- */

/* The whole file into *buf (NUL-terminated), its SHA-256 in hex. */
static int slurp(const char *path, char **buf, size_t *len, char hex[65], ws_err *err)
{
    const int fd = ws_open_regular(path, WS_IMPORT_FILE_MAX_BYTES, err);
    if (fd < 0)
        return err ? err->code : WS_EIO;
    struct stat st;
    if (fstat(fd, &st)) {
        const int e = errno;
        close(fd);
        return ws_err_set(err, WS_EIO, "%s: %s", path, strerror(e));
    }
    char *b = malloc((size_t)st.st_size + 1);
    if (!b) {
        close(fd);
        return ws_err_set(err, WS_ENOMEM, "%s: out of memory", path);
    }
    /* st_size bytes, then one more read that must find the end: a file whose size stat does
     * not know (/proc, /sys: 0 bytes, yet it reads) or that grows is refused, not cut. */
    size_t n = 0;
    for (;;) {
        char extra;
        const int past = n == (size_t)st.st_size;
        const ssize_t r = past ? read(fd, &extra, 1) : read(fd, b + n, (size_t)st.st_size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || (r == 0 && !past) || (r > 0 && past)) {
            const int e = errno;
            free(b);
            close(fd);
            if (r < 0)
                return ws_err_set(err, WS_EIO, "%s: %s", path, strerror(e));
            if (r == 0)
                return ws_err_set(err, WS_EIO, "%s: file shrank while read", path);
            return st.st_size == 0
                       ? ws_err_set(err, WS_EIO, "%s: not a regular file on disk: its size is "
                                    "unknown (0 bytes by stat, yet it reads)", path)
                       : ws_err_set(err, WS_EIO, "%s: file grew while read", path);
        }
        if (past)
            break;
        n += (size_t)r;
    }
    close(fd);
    b[n] = '\0';
    struct sha256_ctx h;
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_init(&h);
    sha256_update(&h, n, (const uint8_t *)b);
    sha256_digest(&h, sizeof d, d);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    *buf = b;
    *len = n;
    return 0;
}

int ws_import_licence(const char *path, char *out, size_t cap, ws_err *err)
{
    static const char *const names[] = {"LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING"};
    if (cap)
        out[0] = '\0';
    const char *slash = strrchr(path, '/');
    const int dl = slash ? (int)(slash - path) : 1;
    const char *dir = slash ? path : ".";
    for (int i = 0; i < 4; i++) {
        char p[WS_PATH_MAX];
        if (snprintf(p, sizeof p, "%.*s/%s", dl, dir, names[i]) >= (int)sizeof p)
            return ws_err_set(err, WS_EINVAL, "%.60s...: path too long", path);
        struct stat st;
        if (stat(p, &st))
            continue; /* none of that name */
        /* a FIFO would block the open and the read: refused before either */
        const int fd = S_ISREG(st.st_mode) ? ws_open_regular(p, WS_IMPORT_FILE_MAX_BYTES, err)
                                           : -1;
        if (fd < 0)
            return S_ISREG(st.st_mode) ? (err ? err->code : WS_EIO)
                                       : ws_err_set(err, WS_EIO, "%s: not a regular file", p);
        FILE *f = fdopen(fd, "r");
        if (!f) {
            close(fd);
            return ws_err_set(err, WS_EIO, "%s: %s", p, strerror(errno));
        }
        char line[256], first[160] = "", copy[160] = "";
        for (int k = 0; k < 40 && fgets(line, sizeof line, f); k++) {
            char *s = line;
            while (*s == ' ' || *s == '\t')
                s++;
            s[strcspn(s, "\r\n")] = '\0';
            if (!*s)
                continue;
            if (!first[0])
                ws_text_escape(s, first, 104);
            else if (!copy[0] && !strncmp(s, "Copyright", 9))
                ws_text_escape(s, copy, 104);
        }
        fclose(f);
        if (first[0]) {
            snprintf(out, cap, "%.60s%s%.70s (%s)", first, copy[0] ? ", " : "", copy, names[i]);
            return 0;
        }
    }
    return 0;
}

/* What a file measured, from its rows [r0, r1). */
static void describe(const ws_vidur_rows *rows, int r0, int r1, const char *path, char *out,
                     size_t cap)
{
    int n[WS_VIDUR_GROUPS] = {0};
    for (int i = r0; i < r1; i++)
        n[ws_vidur_op_group(rows->v[i].op)]++;
    const char *base = strrchr(path, '/');
    char name[72], backend[72];
    ws_text_escape(base ? base + 1 : path, name, sizeof name);
    ws_text_escape(rows->backend[0] ? rows->backend : "backend not stated", backend,
                   sizeof backend);
    if (!strcmp(rows->kind, "attention"))
        snprintf(out, cap, "attention: %d decode and %d prefill rows (%s)",
                 n[WS_VIDUR_DECODE_ATTN], n[WS_VIDUR_PREFILL_ATTN], backend);
    else
        snprintf(out, cap, "a dense layer's operations (%s): %d GEMM and %d elementwise rows",
                 name, n[WS_VIDUR_GEMM], n[WS_VIDUR_ELEM]);
}

int ws_import_read(const char *const *paths, int n_paths, ws_vidur_rows *rows,
                   ws_calibdb_source *files, int *n_files, ws_err *err)
{
    *n_files = 0;
    char *list[WS_IMPORT_MAX_FILES];
    int n = 0;
    int rc = ws_import_collect(paths, n_paths, list, &n, err);
    for (int i = 0; i < n && !rc; i++) {
        ws_calibdb_source *f = &files[i];
        memset(f, 0, sizeof *f);
        char *text = NULL;
        size_t len = 0;
        if ((rc = slurp(list[i], &text, &len, f->sha256, err)))
            break;
        const int r0 = rows->n;
        rc = ws_vidur_parse(text, len, list[i], rows, err);
        free(text);
        if (!rc)
            rc = ws_import_licence(list[i], f->licence, sizeof f->licence, err);
        if (rc)
            break;
        snprintf(f->path, sizeof f->path, "%s", list[i]);
        f->bytes = (long long)len;
        f->rows = rows->n - r0;
        describe(rows, r0, rows->n, list[i], f->what, sizeof f->what);
        (*n_files)++;
    }
    for (int i = 0; i < n; i++)
        free(list[i]);
    return rc;
}
