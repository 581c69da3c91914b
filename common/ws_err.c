/* ws_err: see ws_err.h. */
#include "ws_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int ws_err_set(ws_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        /* Messages are one line: fold any newline a library (SQLite, jansson) gave us. */
        for (char *p = err->msg; *p; p++)
            if (*p == '\n' || *p == '\r')
                *p = ' ';
        err->code = code;
    }
    return code;
}

int ws_err_prefix(ws_err *err, const char *fmt, ...)
{
    if (!err)
        return 0;
    char old[WS_ERR_MSG_MAX];
    memcpy(old, err->msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof err->msg)
        snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", old);
    return err->code;
}

void ws_err_clear(ws_err *err)
{
    if (err) {
        err->code = 0;
        err->msg[0] = '\0';
    }
}
