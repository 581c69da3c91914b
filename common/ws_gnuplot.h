/* ws_gnuplot: runs one of the project's gnuplot scripts (plots/NAME.gp) on data files the
 * caller wrote into a private temporary folder, for every `writescope plot` figure.
 *
 * Values reach gnuplot only as `gnuplot -c SCRIPT ARG1 ARG2 ...` strings and data files,
 * never as code (no -e, no shell), so nothing read from a database or a path can become
 * gnuplot commands; scripts must use their ARGn as strings and data. The terminal follows the
 * output's extension (.svg: svg, anything else: pngcairo). */
#ifndef WS_GNUPLOT_H
#define WS_GNUPLOT_H

#include <stddef.h>

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates a private folder /tmp/writescope-plot-XXXXXX into dir (cap >= 32). */
int ws_gnuplot_tmpdir(char *dir, size_t cap, ws_err *err);
/* Removes the plain files in dir (the data files) and dir itself; errors are ignored. */
void ws_gnuplot_rmdir(const char *dir);
/* "svg" for a path ending in .svg, else "pngcairo". */
const char *ws_gnuplot_term(const char *out);
/* Path of plots/<name>.gp under the project root into buf. */
int ws_gnuplot_script(const char *name, char *buf, size_t cap, ws_err *err);
/* Runs `gnuplot -c script args[0..nargs-1]` and waits; WS_EIO with gnuplot's status (or
 * "gnuplot not found") when it fails. */
int ws_gnuplot_run(const char *script, const char *const *args, int nargs, ws_err *err);

#ifdef __cplusplus
}
#endif

#endif
