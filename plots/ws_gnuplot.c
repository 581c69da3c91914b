/* ws_gnuplot: see ws_gnuplot.h. */
#include "ws_gnuplot.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ws_atomic.h"
#include "ws_util.h"

#define WS_GNUPLOT_MAX_ARGS 30

int ws_gnuplot_tmpdir(char *dir, size_t cap, ws_err *err)
{
    if (cap < 32)
        return ws_err_set(err, WS_EINVAL, "temporary folder name buffer too small");
    snprintf(dir, cap, "/tmp/writescope-plot-XXXXXX");
    /* listed for the cleanup before a signal can find it unlisted */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &old);
    int rc = 0;
    if (!mkdtemp(dir))
        rc = ws_err_set(err, WS_EIO, "cannot create a temporary folder: %s", strerror(errno));
    else if (ws_atomic_live_add(dir, 1) != 0) {
        rmdir(dir);
        rc = ws_err_set(err, WS_EIO, "%s: more than %d temporary files and folders at once", dir,
                        WS_ATOMIC_LIVE_MAX);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return rc;
}

void ws_gnuplot_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[WS_PATH_MAX];
        while ((e = readdir(d)))
            if (e->d_name[0] != '.' && snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < (int)sizeof p)
                unlink(p);
        closedir(d);
    }
    rmdir(dir);
    ws_atomic_live_drop(dir);
}

/* The figure types: an output's extension, gnuplot's terminal, the file's first and last
 * bytes (a figure gnuplot could not finish, on a full disk, lacks its end). */
static const struct fig_type {
    const char *ext, *term, *head, *tail;
    size_t head_len, tail_len;
} k_types[] = {
    {".png", "pngcairo", "\x89PNG", "IEND\xae\x42\x60\x82", 4, 8},
    {".svg", "svg", "<?xml", "</svg>", 5, 6},
    {".pdf", "pdfcairo", "%PDF", "%%EOF", 4, 5},
};
#define N_TYPES (sizeof k_types / sizeof k_types[0])

static const struct fig_type *type_of(const char *out)
{
    const size_t l = strlen(out);
    for (size_t i = 0; i < N_TYPES; i++)
        if (l > 4 && !strcasecmp(out + l - 4, k_types[i].ext))
            return &k_types[i];
    return NULL;
}

const char *ws_gnuplot_term(const char *out)
{
    const struct fig_type *t = type_of(out);
    return t ? t->term : NULL;
}

int ws_gnuplot_check_out(const char *out, ws_err *err)
{
    if (!type_of(out))
        return ws_err_set(err, WS_EINVAL, "%s: a figure is a .png, .svg or .pdf file", out);
    return ws_atomic_check(out, err);
}

/* 1 when the n bytes at buf (the whole figure) start and end as its type's do; SVG may end
 * in white space. */
static int figure_whole(const struct fig_type *t, const char *buf, size_t n)
{
    if (n < t->head_len + t->tail_len || memcmp(buf, t->head, t->head_len))
        return 0;
    while (n > 0 && isspace((unsigned char)buf[n - 1]))
        n--;
    return n >= t->tail_len && !memcmp(buf + n - t->tail_len, t->tail, t->tail_len);
}

int ws_gnuplot_script(const char *name, char *buf, size_t cap, ws_err *err)
{
    char root[WS_PATH_MAX];
    if (ws_root_dir(root, sizeof root, err))
        return err->code;
    if ((size_t)snprintf(buf, cap, "%s/plots/%s.gp", root, name) >= cap)
        return ws_err_set(err, WS_EINVAL, "plot script path too long");
    if (!ws_file_exists(buf))
        return ws_err_set(err, WS_ENOTFOUND, "%s: no such plot script", buf);
    return 0;
}

/* The last non-empty line of the file at path, made printable, into buf ("" if none). */
static void last_line(const char *path, char *buf, size_t cap)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        size_t l = strcspn(line, "\r\n");
        line[l] = 0;
        if (!l)
            continue;
        size_t o = 0;
        for (size_t i = 0; i < l && o + 1 < cap; i++)
            buf[o++] = (unsigned char)line[i] < ' ' || line[i] == 127 ? ' ' : line[i];
        buf[o] = 0;
    }
    fclose(f);
}

int ws_gnuplot_run(const char *script, const char *const *args, int nargs, const char *log,
                   ws_err *err)
{
    if (nargs < 0 || nargs > WS_GNUPLOT_MAX_ARGS)
        return ws_err_set(err, WS_EINVAL, "gnuplot takes at most %d script arguments",
                          WS_GNUPLOT_MAX_ARGS);
    const char *argv[WS_GNUPLOT_MAX_ARGS + 4];
    int k = 0;
    argv[k++] = "gnuplot";
    argv[k++] = "-c";
    argv[k++] = script;
    for (int i = 0; i < nargs; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    fflush(NULL);
    /* SIGINT and SIGTERM wait until the child is listed for the cleanup; the child gets
     * back the default actions before it can take one. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &old);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        int fd = log ? open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
        if (fd >= 0)
            dup2(fd, 2); /* gnuplot's messages: the last one goes into the error */
        execvp("gnuplot", (char *const *)argv);
        _exit(127);
    }
    if (pid > 0)
        ws_atomic_live_child(pid);
    sigprocmask(SIG_SETMASK, &old, NULL);
    int st = 0;
    const int ok = pid > 0 && waitpid(pid, &st, 0) == pid;
    const int wait_errno = errno;
    ws_atomic_live_child(0);
    if (!ok)
        return ws_err_set(err, WS_EIO, "cannot run gnuplot: %s", strerror(wait_errno));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        return ws_err_set(err, WS_EIO, "gnuplot failed on %s: gnuplot not found (make deps)",
                          script);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char said[256] = "";
        if (log)
            last_line(log, said, sizeof said);
        return ws_err_set(err, WS_EIO, "gnuplot failed on %s (status %d)%s%s", script,
                          WIFEXITED(st) ? WEXITSTATUS(st) : -1, said[0] ? ": " : "", said);
    }
    return 0;
}

int ws_gnuplot_draw(const char *script, const char *const *args, int nargs, int out_arg,
                    const char *dir, ws_err *err)
{
    if (nargs > WS_GNUPLOT_MAX_ARGS || out_arg < 0 || out_arg >= nargs)
        return ws_err_set(err, WS_EINVAL, "gnuplot: bad output argument %d of %d", out_arg,
                          nargs);
    const char *out = args[out_arg];
    const struct fig_type *type = type_of(out);
    if (!type)
        return ws_gnuplot_check_out(out, err);
    ws_atomic_file af;
    int rc = ws_atomic_open(&af, out, err); /* refuses a link, FIFO, device, folder */
    if (rc)
        return rc;
    char fig[WS_PATH_MAX], log[WS_PATH_MAX];
    snprintf(fig, sizeof fig, "%s/figure%s", dir, type->ext);
    snprintf(log, sizeof log, "%s/gnuplot.log", dir);
    const char *a[WS_GNUPLOT_MAX_ARGS];
    for (int i = 0; i < nargs; i++)
        a[i] = i == out_arg ? fig : args[i];
    rc = ws_gnuplot_run(script, a, nargs, log, err);
    size_t n = 0;
    char *img = rc ? NULL : ws_read_file(fig, &n, err);
    if (!rc && !img)
        rc = ws_err_set(err, WS_EIO, "%s: gnuplot wrote no figure", out);
    if (!rc && !figure_whole(type, img, n)) /* gnuplot says nothing of a failed write */
        rc = ws_err_set(err, WS_EIO,
                        "%s: gnuplot could not finish the figure in %s (%zu bytes "
                        "written; a full disk?)",
                        out, dir, n);
    if (!rc && fwrite(img, 1, n, af.f) != n)
        rc = ws_err_set(err, WS_EIO, "%s: cannot write: %s", out, strerror(errno));
    free(img);
    if (rc)
        ws_atomic_abort(&af);
    else
        rc = ws_atomic_commit(&af, err);
    return rc;
}

int ws_gnuplot_figure(const char *name, const char *out, ws_gnuplot_writer w, void *ctx,
                      int *n_out, ws_err *err)
{
    char script[WS_PATH_MAX], dir[64], nbuf[16];
    int n = 0;
    if (n_out)
        *n_out = 0;
    if (ws_gnuplot_script(name, script, sizeof script, err) ||
        ws_gnuplot_tmpdir(dir, sizeof dir, err))
        return err->code;
    int rc = ws_gnuplot_check_out(out, err);
    if (!rc)
        rc = w(ctx, dir, &n, err);
    if (!rc) {
        snprintf(nbuf, sizeof nbuf, "%d", n);
        const char *args[] = {dir, out, ws_gnuplot_term(out), nbuf};
        rc = ws_gnuplot_draw(script, args, 4, 1, dir, err);
    }
    ws_gnuplot_rmdir(dir);
    if (n_out)
        *n_out = n;
    return rc;
}

FILE *ws_gnuplot_open(const char *dir, const char *name, ws_err *err)
{
    char path[WS_PATH_MAX];
    FILE *f = NULL;
    if (snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path)
        f = fopen(path, "w");
    if (!f)
        ws_err_set(err, WS_EIO, "%s/%s: cannot write: %s", dir, name, strerror(errno));
    return f;
}

int ws_gnuplot_close(FILE *f, const char *name, ws_err *err)
{
    int bad = ferror(f);
    errno = 0;
    bad |= fflush(f) != 0;
    int why = errno;
    bad |= fclose(f) != 0;
    if (!why)
        why = errno;
    if (bad)
        return ws_err_set(err, WS_EIO, "%s: cannot write the plot data: %s", name,
                          strerror(why ? why : EIO));
    return 0;
}

void ws_gnuplot_text(FILE *f, const char *text)
{
    if (!text || !*text) {
        fputc('-', f);
        return;
    }
    for (const char *p = text; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (p == text && c == '#')
            c = '_';
        else if (c < ' ' || c == 127)
            c = ' ';
        else if (c == '"')
            c = '\'';
        fputc(c, f);
    }
}

int ws_gnuplot_lines(const char *dir, const char *name, const char *const *lines, int n,
                     ws_err *err)
{
    FILE *f = ws_gnuplot_open(dir, name, err);
    if (!f)
        return err->code;
    for (int i = 0; i < n; i++) {
        ws_gnuplot_text(f, lines[i]);
        fputc('\n', f);
    }
    return ws_gnuplot_close(f, name, err);
}
