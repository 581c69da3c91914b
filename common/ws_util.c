/* ws_util: see ws_util.h. */
#include "ws_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int ws_open_regular(const char *path, long long max_bytes, ws_err *err)
{
    /* O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever; fstat
     * then refuses it (and devices, folders) before anything is read. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        ws_err_set(err, WS_EIO, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        ws_err_set(err, WS_EIO, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        ws_err_set(err, WS_EIO, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    if ((long long)st.st_size > max_bytes) {
        ws_err_set(err, WS_EINVAL, "%s: %lld bytes, more than the %lld MiB this tool reads", path,
                   (long long)st.st_size, max_bytes >> 20);
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        ws_err_set(err, WS_EIO, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

char *ws_read_file(const char *path, size_t *len_out, ws_err *err)
{
    int fd = ws_open_regular(path, WS_READ_FILE_MAX, err);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        ws_err_set(err, WS_EIO, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    /* Read up to one byte past the cap: a file that grew since fstat is caught too. */
    size_t cap = (size_t)st.st_size + 1, len = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        ws_err_set(err, WS_ENOMEM, "%s: out of memory for %zu bytes", path, cap);
        return NULL;
    }
    for (;;) {
        if (len == cap) {
            size_t ncap = cap * 2 > (size_t)WS_READ_FILE_MAX + 1 ? (size_t)WS_READ_FILE_MAX + 1
                                                                  : cap * 2;
            if (ncap == cap)
                break;
            char *nb = realloc(buf, ncap + 1);
            if (!nb) {
                free(buf);
                close(fd);
                ws_err_set(err, WS_ENOMEM, "%s: out of memory for %zu bytes", path, ncap);
                return NULL;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            ws_err_set(err, WS_EIO, "%s: cannot read: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return NULL;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (len > WS_READ_FILE_MAX) {
        free(buf);
        ws_err_set(err, WS_EINVAL, "%s: more than the %d MiB this tool reads", path,
                   WS_READ_FILE_MAX >> 20);
        return NULL;
    }
    buf[len] = '\0';
    if (len_out)
        *len_out = len;
    return buf;
}

int ws_exe_dir(char *buf, size_t cap, ws_err *err)
{
    char tmp[WS_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", tmp, sizeof tmp - 1);
    if (n <= 0)
        return ws_err_set(err, WS_EIO, "/proc/self/exe: cannot resolve the executable: %s",
                          strerror(errno));
    tmp[n] = '\0';
    const char *d = dirname(tmp);
    if (strlen(d) + 1 > cap)
        return ws_err_set(err, WS_EINVAL, "executable path too long");
    strcpy(buf, d);
    return 0;
}

int ws_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int ws_dir_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int ws_root_dir(char *buf, size_t cap, ws_err *err)
{
    const char *env = getenv("WRITESCOPE_HOME");
    if (env && *env) {
        if (!ws_dir_exists(env))
            return ws_err_set(err, WS_EIO, "WRITESCOPE_HOME=%s: not a folder", env);
        if (strlen(env) + 1 > cap)
            return ws_err_set(err, WS_EINVAL, "WRITESCOPE_HOME too long");
        strcpy(buf, env);
        return 0;
    }
    char dir[WS_PATH_MAX], probe[WS_PATH_MAX + 8];
    if (ws_exe_dir(dir, sizeof dir, err))
        return err ? err->code : WS_EIO;
    /* bin/writescope and build/san/bin/writescope both sit a few levels below the root. */
    for (int up = 0; up < 5; up++) {
        snprintf(probe, sizeof probe, "%s/models", dir);
        if (ws_dir_exists(probe)) {
            if (strlen(dir) + 1 > cap)
                return ws_err_set(err, WS_EINVAL, "project path too long");
            strcpy(buf, dir);
            return 0;
        }
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
            break;
        *slash = '\0';
    }
    return ws_err_set(err, WS_EIO,
                      "cannot find the project folder (models/) above the executable; "
                      "set WRITESCOPE_HOME");
}

int ws_path_join(char *buf, size_t cap, const char *a, const char *b, ws_err *err)
{
    int n = snprintf(buf, cap, "%s/%s", a, b);
    if (n < 0 || (size_t)n >= cap)
        return ws_err_set(err, WS_EINVAL, "path too long: %s/%s", a, b);
    return 0;
}

int ws_ensure_parent_dir(const char *path, ws_err *err)
{
    char tmp[WS_PATH_MAX];
    if (strlen(path) + 1 > sizeof tmp)
        return ws_err_set(err, WS_EINVAL, "path too long: %s", path);
    strcpy(tmp, path);
    const char *d = dirname(tmp);
    if (ws_dir_exists(d))
        return 0;
    if (mkdir(d, 0777) != 0 && errno != EEXIST)
        return ws_err_set(err, WS_EIO, "%s: cannot create folder: %s", d, strerror(errno));
    return 0;
}

void ws_utc_now(char *buf, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

double ws_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ws_median_sort(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int ws_grow(void **p, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap : (first ? first : 1);
    while (nc <= n)
        nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = nc;
    return 0;
}

void *ws_abuf_grow(ws_abuf *b, size_t bytes, const char *who, ws_err *err)
{
    if (b->cap >= bytes)
        return b->p;
    ws_abuf_free(b);
    bytes = (bytes + 63) & ~(size_t)63;
    if (!(b->p = aligned_alloc(64, bytes))) {
        ws_err_set(err, WS_ENOMEM, "%s: cannot allocate %zu B of scratch", who, bytes);
        return NULL;
    }
    b->cap = bytes;
    return b->p;
}

void ws_abuf_free(ws_abuf *b)
{
    free(b->p);
    b->p = NULL;
    b->cap = 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

int ws_root_names(const char *folder, const char *ext, char names[][64], int max)
{
    char root[WS_PATH_MAX], dir[WS_PATH_MAX];
    if (ws_root_dir(root, sizeof root, NULL) || ws_path_join(dir, sizeof dir, root, folder, NULL))
        return 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    const size_t le = strlen(ext);
    int n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(d))) {
        const size_t l = strlen(e->d_name);
        if (l > le && l - le < 64 && !strcmp(e->d_name + l - le, ext)) {
            memcpy(names[n], e->d_name, l - le);
            names[n++][l - le] = '\0';
        }
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_name);
    return n;
}

const char *ws_text_escape(const char *s, char *buf, size_t cap)
{
    size_t o = 0;
    int cut = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p && !cut; p++) {
        char e[8];
        const unsigned char c = *p;
        if (c == '\n' || c == '\t' || c == '\r' || c == '\\')
            snprintf(e, sizeof e, "\\%c",
                     c == '\n'   ? 'n'
                     : c == '\t' ? 't'
                     : c == '\r' ? 'r'
                                 : '\\');
        else if (c < 0x20 || c == 0x7f)
            snprintf(e, sizeof e, "\\x%02x", c);
        else if (c == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) /* U+0080..U+009F: C1 controls */
            snprintf(e, sizeof e, "\\x%02x", *++p);
        else
            e[0] = (char)c, e[1] = 0;
        const size_t l = strlen(e);
        if (o + l + 4 > cap) /* room for "..." and the NUL */
            cut = 1;
        else
            memcpy(buf + o, e, l), o += l;
    }
    if (cut && cap >= 4)
        memcpy(buf + o, "...", 3), o += 3;
    if (cap)
        buf[o < cap ? o : cap - 1] = 0;
    return buf;
}

const char *ws_bytes_text(double v, char *buf, size_t cap)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (v >= 1024.0 && i < 4)
        v /= 1024.0, i++;
    snprintf(buf, cap, "%.4g %s", v, unit[i]);
    return buf;
}
