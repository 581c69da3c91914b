/* cli: shared helpers of the front end (see cli.h). */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib.h"
#include "store.h"
#include "trace_gen.h"
#include "ws_par.h"
#include "ws_parse.h"
#include "ws_util.h"

/* errno of the first failed write to stdout. stdio forgets it: a failed flush discards the
 * buffer, and a later fflush or fclose with nothing left to write reports success, so the
 * writes themselves go through stdout_write, which keeps it. */
static int g_stdout_errno;
static int g_cookie; /* 1: stdout is the stream cli_open_stdout made */

static ssize_t stdout_write(void *cookie, const char *buf, size_t n)
{
    (void)cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(STDOUT_FILENO, buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (!g_stdout_errno)
                g_stdout_errno = w < 0 ? errno : EIO;
            return (ssize_t)done; /* 0 on error: a cookie write must not return -1 */
        }
        done += (size_t)w;
    }
    return (ssize_t)done;
}

void cli_open_stdout(void)
{
    FILE *f = fopencookie(NULL, "w", (cookie_io_functions_t){.write = stdout_write});
    if (!f)
        return; /* the plain stream still works; only the cause of an error may be lost */
    setvbuf(f, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, BUFSIZ);
    stdout = f; /* glibc's stdout is an ordinary variable, documented as assignable */
    g_cookie = 1;
}

int cli_print_json(json_t *v)
{
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(v);
    if (!s) {
        ws_err err;
        ws_err_set(&err, WS_ENOMEM, "out of memory formatting JSON output");
        return cli_fail(&err);
    }
    fputs(s, stdout);
    putchar('\n');
    free(s);
    return CLI_EXIT_OK;
}

int cli_close_stdout(int rc)
{
    int failed = ferror(stdout), cause = g_stdout_errno;
    errno = 0;
    if (fflush(stdout) != 0) {
        failed = 1;
        cause = cause ? cause : errno;
    }
    errno = 0;
    /* Our stream is flushed, not freed: libraries keep the stdout they saw (cuBLASLt's exit
     * handler flushes it after main returns), so it stays valid, empty, over a closed fd. */
    if ((g_cookie ? close(STDOUT_FILENO) : fclose(stdout)) != 0) {
        failed = 1;
        cause = cause ? cause : errno;
    }
    if (!failed)
        return rc;
    if (rc != CLI_EXIT_OK)
        return rc;
    fprintf(stderr, "writescope: stdout: %s\n", cause ? strerror(cause) : "write error");
    return CLI_EXIT_FAIL;
}

const char *cli_text(const char *s, char *buf, size_t cap)
{
    return ws_text_escape(s, buf, cap);
}

json_t *cli_num(double v)
{
    if (isfinite(v) && v == floor(v) && fabs(v) < 9007199254740992.0)
        return json_integer((json_int_t)v);
    return json_real(v);
}

const char *cli_commas(double v, char *buf, int cap)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.0f", fabs(v));
    int len = (int)strlen(tmp), o = 0;
    if (v < 0 && o < cap - 1)
        buf[o++] = '-';
    for (int i = 0; i < len && o < cap - 1; i++) {
        buf[o++] = tmp[i];
        if ((len - i - 1) % 3 == 0 && i < len - 1 && o < cap - 1)
            buf[o++] = ',';
    }
    buf[o] = '\0';
    return buf;
}

const char *cli_si(double v, const char *unit, char *buf, int cap)
{
    static const char *pre[] = {"", "K", "M", "G", "T", "P"};
    int i = 0;
    double a = fabs(v);
    while (a >= 1000.0 && i < 5) {
        a /= 1000.0;
        v /= 1000.0;
        i++;
    }
    snprintf(buf, (size_t)cap, "%.4g %s%s", v, pre[i], unit);
    return buf;
}

int cli_open_store(const char *db, ws_store **out, ws_err *err)
{
    char path[WS_PATH_MAX];
    if (!db) {
        if (ws_store_default_path(path, sizeof path, err))
            return err->code;
        db = path;
    }
    int rc = ws_store_open(db, out, err);
    if (!rc && (rc = ws_store_check_writable(*out, err))) {
        ws_store_discard(*out);
        *out = NULL;
    }
    return rc;
}

int cli_open_store_ro(const char *db, ws_store **out, int *embedded, ws_err *err)
{
    int emb = 0;
    int rc = ws_store_open_for_reading(db, out, &emb, err);
    if (embedded)
        *embedded = emb;
    if (rc || !emb || embedded)
        return rc;
    char path[WS_PATH_MAX];
    ws_store_close(*out);
    *out = NULL;
    if (ws_store_default_path(path, sizeof path, err))
        return err->code;
    return ws_err_set(err, WS_ENOTFOUND, "%s: no calibration run yet (run 'writescope calib')",
                      path);
}

void cli_note_embedded(void)
{
    fflush(stdout); /* after what was shown, also when both go to one pipe */
    fprintf(stderr, "writescope: no database yet (run 'writescope db init' or 'writescope "
                    "calib'): showed the embedded datasheet profiles\n");
}

int cli_gen_parse(const char *cmd, const cli_gen_args *a, ws_trace_gen *g)
{
    if (!a->arrivals || !a->requests || !a->pdist || !a->odist)
        return cli_usage_error(cmd, "--arrivals, --requests, --prompt-dist and --output-dist "
                                    "are required");
    ws_err err = {0};
    if (ws_trace_arrivals_parse(a->arrivals, &g->arrivals, &err) ||
        ws_trace_len_parse(a->pdist, &g->prompt, &err) ||
        ws_trace_len_parse(a->odist, &g->output, &err))
        return cli_usage_error(cmd, "%s", err.msg);
    long long n, c;
    if (ws_parse_int64(a->requests, 1, 1LL << 40, &n))
        return cli_usage_error(cmd, "--requests '%s': not an integer in 1..2^40", a->requests);
    g->requests = (uint64_t)n;
    long long sp = 0;
    if (a->shared && ws_parse_int64(a->shared, 0, WS_TRACE_TOKENS_MAX, &sp))
        return cli_usage_error(cmd, "--shared-prefix '%s': not a token count in 0..%d",
                               a->shared, WS_TRACE_TOKENS_MAX);
    g->shared_prefix = (int)sp;
    if (g->arrivals == WS_ARRIVALS_CLOSED) {
        if (!a->clients)
            return cli_usage_error(cmd, "--arrivals closed needs --clients C");
        if (a->rate || a->cv)
            return cli_usage_error(cmd, "--rate and --cv are for poisson and gamma arrivals");
        if (ws_parse_int64(a->clients, 1, 1000000, &c))
            return cli_usage_error(cmd, "--clients '%s': not an integer in 1..1000000",
                                   a->clients);
        g->clients = (int)c;
        if (a->think && ws_trace_think_parse(a->think, g, &err))
            return cli_usage_error(cmd, "--think: %s", err.msg);
        return 0;
    }
    if (!a->rate)
        return cli_usage_error(cmd, "--arrivals %s needs --rate R (requests/s)", a->arrivals);
    if (a->clients || a->think)
        return cli_usage_error(cmd, "--clients and --think are for closed arrivals");
    if (ws_parse_double(a->rate, 1e-9, 1e9, &g->rate))
        return cli_usage_error(cmd, "--rate '%s': not a number in 1e-9..1e9", a->rate);
    if (g->arrivals == WS_ARRIVALS_GAMMA) {
        if (!a->cv)
            return cli_usage_error(cmd, "--arrivals gamma needs --cv C (1 = Poisson)");
        if (ws_parse_double(a->cv, 0.01, 100, &g->cv))
            return cli_usage_error(cmd, "--cv '%s': not a number in 0.01..100", a->cv);
    } else if (a->cv) {
        return cli_usage_error(cmd, "--cv is for gamma arrivals");
    }
    return 0;
}

int cli_host_this(ws_store *s, const char **host, char *buf, size_t cap, ws_err *err)
{
    if (!*host || strcmp(*host, "this"))
        return 0;
    if (!ws_calib_host_profile(s, buf, cap))
        return ws_err_set(err, WS_ENOTFOUND,
                          "%s: --host this: no calibration of this machine%s%s is stored there "
                          "(run 'writescope calib', with the same --db)",
                          ws_store_path(s), buf[0] ? " " : "", buf);
    *host = buf;
    return 0;
}

int cli_open_store_ranks(ws_par *par, const char *db, int writes, ws_store **out, int *embedded,
                         ws_err *err)
{
    int rc = 0;
    *out = NULL;
    if (writes) {
        rc = ws_par_rank(par) ? 0 : cli_open_store(db, out, err);
        rc = ws_par_agree(par, rc, err);
    }
    if (!rc && !*out)
        rc = cli_open_store_ro(db, out, embedded, err);
    return rc;
}

/* ---- progress ---- */

void cli_progress_start(cli_progress *p)
{
    *p = (cli_progress){.t0 = ws_now_s(), .tty = isatty(STDERR_FILENO)};
}

void cli_progress_line(cli_progress *p, int last, const char *fmt, ...)
{
    const double t = ws_now_s() - p->t0;
    if (last ? !p->shown : t < 1.0 || t - p->last < (p->tty ? 0.25 : 5.0))
        return;
    p->last = t;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (p->tty)
        fprintf(stderr, "\r%s   ", line);
    else
        fprintf(stderr, "%s\n", line);
    fflush(stderr);
    p->shown = 1;
}

void cli_progress_end(cli_progress *p)
{
    if (p->shown && p->tty)
        fputc('\n', stderr);
    p->shown = 0;
}
