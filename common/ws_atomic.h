/* ws_atomic: writes a file whole or not at all. The text goes to a temporary file created
 * with mkstemp in the target's own folder (same file system, a name nobody can predict or
 * pre-plant, opened without following links), is flushed and fsync'd, and is then renamed
 * over the target. A target that exists and is not a regular file -- a symbolic link, a
 * device, a FIFO, a socket, a folder -- is refused before anything is written and checked
 * again just before the rename. Every failure removes the temporary file, so a failed write
 * leaves the target and its folder as they were. Used by every command option that writes
 * a file: exports, traces, CSV, Chrome traces and figures (plots/ws_gnuplot.h).
 *
 * ws_atomic_check is the same refusal made up front, with the folder's existence, its
 * write permission and its free space, so that a command can say "cannot write" before
 * minutes of simulation or measurement rather than after.
 *
 * Temporary files live only between open and commit or abort; a signal in between must
 * not leave them behind. Each one (and each private folder a caller registers, such as
 * gnuplot's working folder, and the child process drawing into it) is kept in a small
 * fixed table that ws_atomic_cleanup empties using only async-signal-safe calls, so the
 * CLI's SIGINT/SIGTERM handler calls it and then dies of the signal. */
#ifndef WS_ATOMIC_H
#define WS_ATOMIC_H

#include <stdio.h>
#include <sys/types.h>

#include "ws_err.h"
#include "ws_util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_ATOMIC_LIVE_MAX 32 /* temporary files and folders alive at once */

typedef struct ws_atomic_file {
    FILE *f;                  /* write here between open and commit */
    char path[WS_PATH_MAX];   /* the target */
    char tmp[WS_PATH_MAX];    /* the temporary file beside it */
    int flushed;              /* ws_atomic_flush succeeded: only the rename is left */
} ws_atomic_file;

/* 0 when path can be written: it is absent or a regular file, and its folder exists, is a
 * folder, is writable and is not full. Otherwise one line naming path and why. */
int ws_atomic_check(const char *path, ws_err *err);
/* What a file of mode m is, in words ("a symbolic link", "a FIFO", ...). */
const char *ws_atomic_kind(mode_t m);

/* Checks the target and creates the temporary file (mode 0644 less the umask). */
int ws_atomic_open(ws_atomic_file *a, const char *path, ws_err *err);
/* Flushes, fsyncs and closes the temporary file, checking every step; after it only
 * ws_atomic_commit's rename is left (several files can then be replaced together). On
 * failure the temporary file is removed. */
int ws_atomic_flush(ws_atomic_file *a, ws_err *err);
/* Flushes (unless ws_atomic_flush did) and renames the temporary file over the target; on
 * any failure the temporary file is removed and the target is untouched. */
int ws_atomic_commit(ws_atomic_file *a, ws_err *err);
/* Drops the temporary file (after a failed write); safe after a failed open or commit. */
void ws_atomic_abort(ws_atomic_file *a);

/* The cleanup table. ws_atomic_live_add keeps path (a temporary file, or with folder a
 * private folder whose files go with it) for ws_atomic_cleanup: 0, or -1 when all
 * WS_ATOMIC_LIVE_MAX slots are taken; ws_atomic_live_drop forgets it. */
int ws_atomic_live_add(const char *path, int folder);
void ws_atomic_live_drop(const char *path);
/* A child process writing into a registered folder (0: none): cleanup kills it first. */
void ws_atomic_live_child(pid_t pid);
/* Kills the registered child, removes every registered temporary file and empties and
 * removes every registered folder. Async-signal-safe: for a signal handler. */
void ws_atomic_cleanup(void);

#ifdef __cplusplus
}
#endif
#endif
