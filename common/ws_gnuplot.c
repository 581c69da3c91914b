/* ws_gnuplot: see ws_gnuplot.h. */
#include "ws_gnuplot.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
