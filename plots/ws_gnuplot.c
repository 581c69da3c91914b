/* ws_gnuplot: see ws_gnuplot.h. */
#include "ws_gnuplot.h"

#include <dirent.h>
#include <errno.h>
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
    if (!mkdtemp(dir))
        return ws_err_set(err, WS_EIO, "cannot create a temporary folder: %s", strerror(errno));
    return 0;
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
}

const char *ws_gnuplot_term(const char *out)
{
    size_t l = strlen(out);
    return l > 4 && !strcmp(out + l - 4, ".svg") ? "svg" : "pngcairo";
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

int ws_gnuplot_run(const char *script, const char *const *args, int nargs, ws_err *err)
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
    pid_t pid = fork();
    if (pid == 0) {
        execvp("gnuplot", (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0)
        return ws_err_set(err, WS_EIO, "cannot run gnuplot: %s", strerror(errno));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return ws_err_set(err, WS_EIO, "gnuplot failed on %s (status %d)%s", script,
                          WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                          WIFEXITED(st) && WEXITSTATUS(st) == 127 ? ": gnuplot not found (make deps)"
                                                                  : "");
    return 0;
}

int ws_gnuplot_draw(const char *script, const char *const *args, int nargs, int out_arg,
                    const char *dir, ws_err *err)
{
    if (nargs > WS_GNUPLOT_MAX_ARGS || out_arg < 0 || out_arg >= nargs)
        return ws_err_set(err, WS_EINVAL, "gnuplot: bad output argument %d of %d", out_arg,
                          nargs);
    const char *out = args[out_arg];
    ws_atomic_file af;
    int rc = ws_atomic_open(&af, out, err); /* refuses a link, FIFO, device, folder */
    if (rc)
        return rc;
    char fig[WS_PATH_MAX];
    snprintf(fig, sizeof fig, "%s/figure.%s", dir, strcmp(ws_gnuplot_term(out), "svg") ? "png"
                                                                                       : "svg");
    const char *a[WS_GNUPLOT_MAX_ARGS];
    for (int i = 0; i < nargs; i++)
        a[i] = i == out_arg ? fig : args[i];
    rc = ws_gnuplot_run(script, a, nargs, err);
    FILE *f = rc ? NULL : fopen(fig, "rb");
    if (!rc && !f)
        rc = ws_err_set(err, WS_EIO, "%s: gnuplot wrote no figure (%s)", out, strerror(errno));
    size_t total = 0;
    char buf[1 << 16];
    for (size_t n; f && (n = fread(buf, 1, sizeof buf, f)) > 0; total += n)
        if (fwrite(buf, 1, n, af.f) != n) {
            rc = ws_err_set(err, WS_EIO, "%s: cannot write: %s", out, strerror(errno));
            break;
        }
    if (f && !rc && ferror(f))
        rc = ws_err_set(err, WS_EIO, "%s: cannot read gnuplot's figure", out);
    if (f)
        fclose(f);
    if (!rc && total == 0)
        rc = ws_err_set(err, WS_EIO, "%s: gnuplot drew an empty figure", out);
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
    int rc = w(ctx, dir, &n, err);
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
    if (fclose(f) != 0 || bad)
        return ws_err_set(err, WS_EIO, "%s: cannot write the plot data", name);
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
