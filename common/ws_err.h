/* ws_err: the error value every library function fills in.
 *
 * Library code never prints or exits: a function that can fail takes a `ws_err *`,
 * returns non-zero (or NULL) on failure and leaves a one-line message in it, naming
 * the file or object and the problem. Only the CLI (cli/) prints the message and
 * chooses the exit status. Passing NULL for `err` is allowed and drops the message. */
#ifndef WS_ERR_H
#define WS_ERR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WS_ERR_MSG_MAX 512 /* longest message kept, including the NUL */

typedef struct ws_err {
    int code;                  /* 0 = no error; otherwise a WS_E* value */
    char msg[WS_ERR_MSG_MAX];  /* one line, no trailing newline */
} ws_err;

enum {
    WS_OK = 0,       /* success */
    WS_EIO = 1,      /* file missing, unreadable or unwritable */
    WS_EPARSE = 2,   /* malformed input (JSON, CSV, SQL seed) */
    WS_EINVAL = 3,   /* well-formed but invalid values or arguments */
    WS_ENOTFOUND = 4,/* a named thing (model, profile) does not exist */
    WS_EDB = 5,      /* SQLite error, wrong or newer schema, busy database */
    WS_ENOMEM = 6,   /* allocation failed */
    WS_EDEVICE = 7,  /* device or backend unavailable or failed */
    WS_EUNSUP = 8,   /* input understood but not supported by this build/machine */
    WS_ECANCELED = 9,/* stopped on request (Ctrl-C); nothing was written */
};

/* Sets err (if non-NULL) and returns `code`, so callers can `return ws_err_set(...)`. */
int ws_err_set(ws_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefixes an existing message with "<prefix>: " (e.g. a file name); returns err->code. */
int ws_err_prefix(ws_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ws_err_clear(ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
