/* ws_gnuplot: runs one of the project's gnuplot scripts (plots/NAME.gp) on data files the
 * caller wrote into a private temporary folder, for every `writescope plot` figure.
 *
 * Values reach gnuplot only as `gnuplot -c SCRIPT ARG1 ARG2 ...` strings and data files,
 * never as code (no -e, no shell), so nothing read from a database or a path can become
 * gnuplot commands; scripts must use their ARGn as strings and data. The terminal follows the
 * output's extension: .png pngcairo, .svg svg, .pdf pdfcairo; any other name is refused.
 *
 * A figure (ws_gnuplot_figure) is a data writer and a script: the writer fills the folder,
 * then `gnuplot -c plots/NAME.gp DIR OUT TERM N` draws it (OUT a file in DIR, moved over
 * the output only once gnuplot has finished it: ws_gnuplot_draw), N being the writer's count of
 * panels or series. gnuplot's own messages go to a log in DIR; the last one of a failed run
 * ends the error, so a failure is one line. Data files are TAB-separated; text in them (titles,
 * policy names, read from the database) goes through ws_gnuplot_text, so a script reads it back as
 * one string with strcol() or columnheader() and prints it `noenhanced`. ws_plot_req is what every
 * figure of `writescope plot` is asked for, so the command holds them in one table. */
#ifndef WS_GNUPLOT_H
#define WS_GNUPLOT_H

#include <stddef.h>
#include <stdio.h>

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates a private folder /tmp/writescope-plot-XXXXXX into dir (cap >= 32), listed for
 * ws_atomic_cleanup so that a signal does not leave it behind. */
int ws_gnuplot_tmpdir(char *dir, size_t cap, ws_err *err);
/* Removes the plain files in dir (the data files) and dir itself; errors are ignored. */
void ws_gnuplot_rmdir(const char *dir);
/* The terminal for an output named *.png (pngcairo), *.svg (svg) or *.pdf (pdfcairo);
 * NULL for any other name. */
const char *ws_gnuplot_term(const char *out);
/* Before drawing: out names a figure type and can be written (ws_atomic_check). */
int ws_gnuplot_check_out(const char *out, ws_err *err);
/* Path of plots/<name>.gp under the project root into buf. */
int ws_gnuplot_script(const char *name, char *buf, size_t cap, ws_err *err);
/* Runs `gnuplot -c script args[0..nargs-1]` and waits, its stderr into the file log (NULL:
 * ours); WS_EIO with gnuplot's status and its last message (or "gnuplot not found") when it
 * fails. The child is listed for ws_atomic_cleanup while it runs. */
int ws_gnuplot_run(const char *script, const char *const *args, int nargs, const char *log,
                   ws_err *err);

/* Draws into `out` safely: args[out_arg] names the output; gnuplot writes the figure into
 * dir (the caller's private folder) instead, and only a figure that gnuplot finished (exit
 * 0, the file whole: its format's first and last bytes) replaces `out` whole
 * (common/ws_atomic.h). A target that is not a regular file (a symbolic link, a FIFO, a
 * device, a folder) is refused before gnuplot runs; a failed run, a truncated figure or a
 * full disk leaves `out` as it was. */
int ws_gnuplot_draw(const char *script, const char *const *args, int nargs, int out_arg,
                    const char *dir, ws_err *err);

/* What a `writescope plot` figure is asked to draw. */
typedef struct ws_plot_req {
    long long run;     /* the figure's run (calibration or simulation id); 0: the newest */
    long long live;    /* figures of a live run (`writescope run`): its id; 0: the newest */
    const char *model; /* figures over many simulation runs: only this model; NULL: any */
    const char *gpu;   /* ... only this GPU profile; NULL: any */
    long long grid;    /* ... only the runs of this `sim grid` (sim_grids id); 0: any */
    const char *out;   /* output file: .png, .svg or .pdf */
} ws_plot_req;

/* Fills dir with a figure's data files; *n: the script's N (panels or series). */
typedef int (*ws_gnuplot_writer)(void *ctx, const char *dir, int *n, ws_err *err);

/* Draws figure `name`: out checked (ws_gnuplot_check_out), private folder, w(ctx, dir, &n),
 * `gnuplot -c plots/<name>.gp DIR OUT TERM N`, folder removed; *n_out (may be NULL) gets N. */
int ws_gnuplot_figure(const char *name, const char *out, ws_gnuplot_writer w, void *ctx,
                      int *n_out, ws_err *err);
/* Opens dir/name for writing (WS_EIO naming it on failure). */
FILE *ws_gnuplot_open(const char *dir, const char *name, ws_err *err);
/* Closes f; WS_EIO naming `name` when a write failed. */
int ws_gnuplot_close(FILE *f, const char *name, ws_err *err);
/* Writes dir/name with one text per line (through ws_gnuplot_text): a script's labels. */
int ws_gnuplot_lines(const char *dir, const char *name, const char *const *lines, int n,
                     ws_err *err);
/* Writes text as one data field: TAB, newline and other control bytes become blanks, '"'
 * becomes '\'', a leading '#' (a comment to gnuplot) becomes '_', and "" becomes "-". */
void ws_gnuplot_text(FILE *f, const char *text);

#ifdef __cplusplus
}
#endif

#endif
