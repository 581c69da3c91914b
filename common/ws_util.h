/* ws_util: small helpers shared by every part: reading whole files, finding the
 * project's data folders (models/, profiles/, results/) from where the binary lives,
 * path joining, and wall-clock time stamps.
 *
 * The project root is found once: $WRITESCOPE_HOME if set, else the nearest folder
 * above the running executable that holds `models/`. Nothing here prints or exits. */
#ifndef WS_UTIL_H
#define WS_UTIL_H

#include <stddef.h>

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_VERSION "0.1.0" /* tool version, stored with every calibration run */
#define WS_PATH_MAX 4096   /* longest path the tool builds */
#define WS_READ_FILE_MAX (64 << 20) /* largest file ws_read_file reads: configs, seeds */

/* Reads a whole regular file, at most WS_READ_FILE_MAX bytes, into a NUL-terminated heap
 * buffer (caller frees). FIFOs, devices and folders are refused without blocking. */
char *ws_read_file(const char *path, size_t *len_out, ws_err *err);
/* Opens a regular file of at most max_bytes for reading, for callers that stream it (trace
 * readers) rather than read it whole: the same refusals as ws_read_file (FIFOs, devices
 * and folders, without blocking; a file over the cap). Returns a blocking descriptor
 * (O_CLOEXEC; caller closes), or -1 with err set. */
int ws_open_regular(const char *path, long long max_bytes, ws_err *err);
/* Makes room for element n of the array *p (element size `elem`, room for *cap): when n >=
 * *cap the capacity doubles (from `first`) until it holds n + 1. Returns 0, or -1 when out of
 * memory with *p and *cap unchanged (the caller says what it was growing). */
int ws_grow(void **p, size_t *cap, size_t n, size_t elem, size_t first);
/* A buffer kept between calls and grown on demand, 64-byte aligned (kernels' scratch). */
typedef struct ws_abuf {
    void *p;
    size_t cap;
} ws_abuf;
/* b's buffer with room for `bytes`, reallocated (its contents lost) when smaller; NULL and
 * WS_ENOMEM "<who>: cannot allocate N B of scratch" when out of memory. */
void *ws_abuf_grow(ws_abuf *b, size_t bytes, const char *who, ws_err *err);
/* Frees b's buffer; b is empty after. */
void ws_abuf_free(ws_abuf *b);
/* Project root (see above) into buf; returns 0 or sets err. */
int ws_root_dir(char *buf, size_t cap, ws_err *err);
/* Folder of the running executable into buf. */
int ws_exe_dir(char *buf, size_t cap, ws_err *err);
/* Joins a and b with one '/', into buf; returns 0, or WS_EINVAL if it would not fit. */
int ws_path_join(char *buf, size_t cap, const char *a, const char *b, ws_err *err);
int ws_file_exists(const char *path);
/* The names, without `ext`, of the files ending in ext in the project root's `folder`
 * (models, engines), sorted, at most max of fewer than 64 characters; returns how many (0
 * when the folder is missing). */
int ws_root_names(const char *folder, const char *ext, char names[][64], int max);
int ws_dir_exists(const char *path);
/* Creates the parent folder of `path` if it is missing (one level). */
int ws_ensure_parent_dir(const char *path, ws_err *err);
/* s made safe to print and store: control characters (ESC, newlines, C1 controls, DEL)
 * become \n, \t, \r or \xNN and a backslash \\, so text read from outside can neither move
 * a terminal's cursor nor start a fake line. NULL gives "". Truncated to cap with "...".
 * Returns buf. */
const char *ws_text_escape(const char *s, char *buf, size_t cap);
/* UTC time stamp "YYYY-MM-DDTHH:MM:SSZ" into buf (at least 21 bytes). */
void ws_utc_now(char *buf, size_t cap);
/* Monotonic seconds, for timing. */
double ws_now_s(void);
/* Sorts v[0..n) ascending in place (so v[0] and v[n - 1] are the extremes) and returns its
 * median (the mean of the middle two when n is even); n >= 1. */
double ws_median_sort(double *v, int n);
/* A size in binary units, four significant digits: "12 KiB", "1.5 GiB", "512 B". Returns buf. */
const char *ws_bytes_text(double bytes, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
