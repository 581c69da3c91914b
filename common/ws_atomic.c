/* ws_atomic: whole-or-nothing file writes (see ws_atomic.h). */
#include "ws_atomic.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the cleanup table ---- */

enum { LIVE_FREE, LIVE_BUSY, LIVE_FILE, LIVE_DIR }; /* a slot's state */

static _Atomic int g_live_kind[WS_ATOMIC_LIVE_MAX];
static char g_live_path[WS_ATOMIC_LIVE_MAX][WS_PATH_MAX];
static _Atomic int g_live_pid; /* the child drawing into a registered folder (0: none) */

int ws_atomic_live_add(const char *path, int folder)
{
    if (strlen(path) + 1 > WS_PATH_MAX)
        return -1;
    for (int i = 0; i < WS_ATOMIC_LIVE_MAX; i++) {
        int expect = LIVE_FREE;
        if (!atomic_compare_exchange_strong(&g_live_kind[i], &expect, LIVE_BUSY))
            continue;
        strcpy(g_live_path[i], path); /* the path is whole before the slot is live */
        atomic_store(&g_live_kind[i], folder ? LIVE_DIR : LIVE_FILE);
        return 0;
    }
    return -1;
}

void ws_atomic_live_drop(const char *path)
{
    for (int i = 0; i < WS_ATOMIC_LIVE_MAX; i++) {
        const int k = atomic_load(&g_live_kind[i]);
        if ((k == LIVE_FILE || k == LIVE_DIR) && !strcmp(g_live_path[i], path)) {
            atomic_store(&g_live_kind[i], LIVE_FREE);
            return;
        }
    }
}

void ws_atomic_live_child(pid_t pid)
{
    atomic_store(&g_live_pid, (int)pid);
}

/* Removes the entries of folder `path` (not recursing: private folders hold plain files)
 * with open, getdents64, unlinkat and close only. */
static void empty_folder(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[4096] __attribute__((aligned(8)));
    for (;;) {
        ssize_t n = getdents64(fd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (ssize_t o = 0; o < n;) {
            const struct dirent64 *d = (const struct dirent64 *)(buf + o);
            const char *s = d->d_name;
            if (!(s[0] == '.' && (s[1] == 0 || (s[1] == '.' && s[2] == 0))))
                unlinkat(fd, s, 0);
            o += d->d_reclen;
        }
    }
    close(fd);
}

void ws_atomic_cleanup(void)
{
    const int saved = errno;
    const int pid = atomic_exchange(&g_live_pid, 0);
    if (pid > 0) { /* stop it writing into the folder before the folder goes */
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    for (int i = 0; i < WS_ATOMIC_LIVE_MAX; i++)
        if (atomic_load(&g_live_kind[i]) == LIVE_FILE)
            unlink(g_live_path[i]);
    for (int i = 0; i < WS_ATOMIC_LIVE_MAX; i++)
        if (atomic_load(&g_live_kind[i]) == LIVE_DIR) {
            empty_folder(g_live_path[i]);
            rmdir(g_live_path[i]);
        }
    errno = saved;
}

/* ---- checks ---- */

const char *ws_atomic_kind(mode_t m)
{
    return S_ISLNK(m)                 ? "a symbolic link"
           : S_ISDIR(m)               ? "a folder"
           : S_ISFIFO(m)              ? "a FIFO"
           : S_ISSOCK(m)              ? "a socket"
           : S_ISCHR(m) || S_ISBLK(m) ? "a device"
           : S_ISREG(m)               ? "a regular file"
                                      : "not a regular file";
}

/* 0 when `path` is missing or a regular file; otherwise the refusal. */
static int check_target(const char *path, ws_err *err)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0
                               : ws_err_set(err, WS_EIO, "%s: cannot write: %s", path, strerror(errno));
    if (S_ISREG(st.st_mode))
        return 0;
    return ws_err_set(err, WS_EIO, "%s: exists and is %s; refusing to replace it", path,
                      ws_atomic_kind(st.st_mode));
}

int ws_atomic_check(const char *path, ws_err *err)
{
    if (!*path)
        return ws_err_set(err, WS_EINVAL, "empty output path");
    if (strlen(path) + 16 > WS_PATH_MAX)
        return ws_err_set(err, WS_EINVAL, "%s: path too long", path);
    struct stat st;
    /* ENOTDIR: a file where the folder should be, said below */
    int rc = lstat(path, &st) != 0 && errno == ENOTDIR ? 0 : check_target(path, err);
    if (rc)
        return rc;
    char dir[WS_PATH_MAX];
    strcpy(dir, path);
    const char *d = dirname(dir);
    if (stat(d, &st) != 0)
        return ws_err_set(err, WS_EIO, "%s: cannot write: folder %s: %s", path, d, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return ws_err_set(err, WS_EIO, "%s: cannot write: %s is %s, not a folder", path, d,
                          ws_atomic_kind(st.st_mode));
    if (access(d, W_OK | X_OK) != 0)
        return ws_err_set(err, WS_EIO, "%s: cannot write in %s: %s", path, d, strerror(errno));
    struct statvfs vs;
    const int root = geteuid() == 0; /* root may use the blocks reserved for it */
    if (statvfs(d, &vs) == 0 && ((root ? vs.f_bfree : vs.f_bavail) == 0 ||
                                 (vs.f_files > 0 && (root ? vs.f_ffree : vs.f_favail) == 0)))
        return ws_err_set(err, WS_EIO, "%s: cannot write: %s", path, strerror(ENOSPC));
    return 0;
}

/* ---- writing ---- */

int ws_atomic_open(ws_atomic_file *a, const char *path, ws_err *err)
{
    memset(a, 0, sizeof *a);
    if (!*path)
        return ws_err_set(err, WS_EINVAL, "empty output path");
    if (strlen(path) + 1 > sizeof a->path || strlen(path) + 16 > sizeof a->tmp)
        return ws_err_set(err, WS_EINVAL, "%s: path too long", path);
    int rc = check_target(path, err);
    if (rc)
        return rc;
    strcpy(a->path, path);
    char dir[WS_PATH_MAX], base[WS_PATH_MAX]; /* dirname and basename may write to their input */
    strcpy(dir, path);
    strcpy(base, path);
    snprintf(a->tmp, sizeof a->tmp, "%s/.%s.XXXXXX", dirname(dir), basename(base));
    /* No SIGINT or SIGTERM between creating the file and listing it for the cleanup. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int fd = mkstemp(a->tmp);
    const int mk_errno = errno;
    if (fd >= 0 && ws_atomic_live_add(a->tmp, 0) < 0) {
        unlink(a->tmp);
        close(fd);
        fd = -2;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (fd < 0) {
        rc = fd == -2 ? ws_err_set(err, WS_EIO, "%s: more than %d files written at once", path,
                                   WS_ATOMIC_LIVE_MAX)
                      : ws_err_set(err, WS_EIO, "%s: cannot write: %s", path, strerror(mk_errno));
        a->tmp[0] = '\0';
        return rc;
    }
    mode_t um = umask(0);
    umask(um);
    fchmod(fd, 0644 & ~um); /* mkstemp makes 0600; an export is an ordinary file */
    a->f = fdopen(fd, "w");
    if (!a->f) {
        rc = ws_err_set(err, WS_EIO, "%s: cannot write: %s", path, strerror(errno));
        close(fd);
        ws_atomic_abort(a);
        return rc;
    }
    return 0;
}

int ws_atomic_flush(ws_atomic_file *a, ws_err *err)
{
    if (a->flushed)
        return 0;
    if (!a->f)
        return ws_err_set(err, WS_EIO, "%s: not open for writing", a->path);
    int rc = 0;
    errno = 0;
    if (fflush(a->f) != 0 || ferror(a->f) || fsync(fileno(a->f)) != 0)
        rc = ws_err_set(err, WS_EIO, "%s: cannot write: %s", a->path, strerror(errno ? errno : EIO));
    errno = 0;
    if (fclose(a->f) != 0 && !rc)
        rc =
            ws_err_set(err, WS_EIO, "%s: cannot write: %s", a->path, strerror(errno ? errno : EIO));
    a->f = NULL;
    if (rc) {
        ws_atomic_abort(a);
        return rc;
    }
    a->flushed = 1;
    return 0;
}

int ws_atomic_commit(ws_atomic_file *a, ws_err *err)
{
    int rc = ws_atomic_flush(a, err);
    if (rc)
        return rc;
    rc = check_target(a->path, err); /* something may have appeared while we wrote */
    if (!rc && rename(a->tmp, a->path) != 0)
        rc = ws_err_set(err, WS_EIO, "%s: cannot write: %s", a->path, strerror(errno));
    if (rc) {
        ws_atomic_abort(a);
        return rc;
    }
    ws_atomic_live_drop(a->tmp);
    a->tmp[0] = '\0';
    a->flushed = 0;
    char dir[WS_PATH_MAX];
    strcpy(dir, a->path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) { /* make the rename itself durable; best effort */
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

void ws_atomic_abort(ws_atomic_file *a)
{
    if (a->f) {
        fclose(a->f);
        a->f = NULL;
    }
    if (a->tmp[0]) {
        unlink(a->tmp);
        ws_atomic_live_drop(a->tmp);
        a->tmp[0] = '\0';
    }
    a->flushed = 0;
}
