/* ws_atomic: whole-or-nothing file writes (see ws_atomic.h). */
#include "ws_atomic.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* 0 when `path` is missing or a regular file; otherwise the refusal. */
static int check_target(const char *path, ws_err *err)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0
                               : ws_err_set(err, WS_EIO, "%s: cannot write: %s", path, strerror(errno));
    if (S_ISREG(st.st_mode))
        return 0;
    const char *what = S_ISLNK(st.st_mode)   ? "a symbolic link"
                       : S_ISDIR(st.st_mode) ? "a folder"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                    : "not a regular file";
    return ws_err_set(err, WS_EIO, "%s: exists and is %s; refusing to replace it", path, what);
}

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
    int fd = mkstemp(a->tmp);
    if (fd < 0) {
        rc = ws_err_set(err, WS_EIO, "%s: cannot write: %s", path, strerror(errno));
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

int ws_atomic_commit(ws_atomic_file *a, ws_err *err)
{
    int rc = 0;
    if (!a->f)
        return ws_err_set(err, WS_EIO, "%s: not open for writing", a->path);
    if (fflush(a->f) != 0 || ferror(a->f) || fsync(fileno(a->f)) != 0)
        rc = ws_err_set(err, WS_EIO, "%s: cannot write: %s", a->path, strerror(errno ? errno : EIO));
    if (fclose(a->f) != 0 && !rc)
        rc = ws_err_set(err, WS_EIO, "%s: cannot write: %s", a->path, strerror(errno));
    a->f = NULL;
    if (!rc)
        rc = check_target(a->path, err); /* something may have appeared while we wrote */
    if (!rc && rename(a->tmp, a->path) != 0)
        rc = ws_err_set(err, WS_EIO, "%s: cannot write: %s", a->path, strerror(errno));
    if (rc) {
        ws_atomic_abort(a);
        return rc;
    }
    a->tmp[0] = '\0';
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
        a->tmp[0] = '\0';
    }
}
