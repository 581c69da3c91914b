/* ws_atomic: writes a file whole or not at all. The text goes to a temporary file created
 * with mkstemp in the target's own folder (same file system, a name nobody can predict or
 * pre-plant, opened without following links), is flushed and fsync'd, and is then renamed
 * over the target. A target that exists and is not a regular file -- a symbolic link, a
 * device, a FIFO, a folder -- is refused before anything is written and checked again
 * just before the rename. Every failure removes the temporary file, so a failed write
 * leaves the target and its folder as they were. Used by exports (cli `db export
 * --output`) and anything else that writes a result file readers may be looking at. */
#ifndef WS_ATOMIC_H
#define WS_ATOMIC_H

#include <stdio.h>

#include "ws_err.h"
#include "ws_util.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ws_atomic_file {
    FILE *f;                  /* write here between open and commit */
    char path[WS_PATH_MAX];   /* the target */
    char tmp[WS_PATH_MAX];    /* the temporary file beside it */
} ws_atomic_file;

/* Checks the target and creates the temporary file (mode 0644 less the umask). */
int ws_atomic_open(ws_atomic_file *a, const char *path, ws_err *err);
/* Flushes, fsyncs and renames the temporary file over the target; on any failure the
 * temporary file is removed and the target is untouched. */
int ws_atomic_commit(ws_atomic_file *a, ws_err *err);
/* Drops the temporary file (after a failed write); safe after a failed open or commit. */
void ws_atomic_abort(ws_atomic_file *a);

#ifdef __cplusplus
}
#endif
#endif
