/* cli: shared helpers of the `writescope` command-line front end: the command table,
 * number formatting and JSON printing (error reporting and exit codes: opts.h). Only code
 * under cli/ prints to the terminal or exits; it calls the library and reports its ws_err. */
#ifndef WS_CLI_H
#define WS_CLI_H

#include <jansson.h>
#include <stdio.h>

#include "opts.h"
#include "ws_err.h"

/* Prints the JSON value indented to stdout (with a newline); steals the reference. A
 * failed write is left to cli_close_stdout. */
int cli_print_json(json_t *v);
/* Before the command: stdout becomes a stream over fd 1 that keeps the errno of its first
 * failed write, so the message of cli_close_stdout names the cause (ENOSPC, EPIPE). */
void cli_open_stdout(void);
/* After the command: flushes and closes stdout. On a write error (full disk, closed pipe)
 * prints "writescope: stdout: <reason>" and returns CLI_EXIT_FAIL if rc was CLI_EXIT_OK;
 * otherwise returns rc (a failed command has already said why). */
int cli_close_stdout(int rc);
/* Text read from a database or a file, made safe for a terminal into buf (common/ws_util.h
 * ws_text_escape). */
const char *cli_text(const char *s, char *buf, size_t cap);
/* A JSON number: an integer when v is integral and exact in a double, else a real. */
json_t *cli_num(double v);
/* 1234567 -> "1,234,567" (integer part only), into buf. */
const char *cli_commas(double v, char *buf, int cap);
/* Scaled with SI unit: 1.555e12, "B/s" -> "1555.0 GB/s". */
const char *cli_si(double v, const char *unit, char *buf, int cap);

/* Progress on stderr for long runs: on a terminal one line redrawn in place (at most four
 * updates a second, none in the first second); written to a file or a pipe, one whole line
 * per update, at most one every five seconds, so a log reads line by line. */
typedef struct cli_progress {
    double t0, last; /* start, and when a line was last written (s, ws_now_s) */
    int tty, shown;
} cli_progress;
void cli_progress_start(cli_progress *p);
/* One update; `last` = 1 for the final one, written whenever an earlier one was. */
void cli_progress_line(cli_progress *p, int last, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Ends a redrawn line with its newline. */
void cli_progress_end(cli_progress *p);

int cmd_model(int argc, char **argv);
int cmd_db(int argc, char **argv);
int cmd_device(int argc, char **argv);
int cmd_calib(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_fidelity(int argc, char **argv);

/* Opens the database at `db`, or the default one when db is NULL, for writing, and checks
 * that it can be written (ws_store_check_writable) before the command does its work. */
struct ws_store;
int cli_open_store(const char *db, struct ws_store **out, ws_err *err);
/* The same for a read-only command: nothing is created or migrated; an explicit `db`
 * must exist. Without `db`, a default database that does not exist yet gives the
 * embedded datasheet profiles (*embedded = 1; the command says so with
 * cli_note_embedded when it succeeds) -- or, for a command that reads calibration runs
 * (embedded == NULL), the error that there is no run yet. */
int cli_open_store_ro(const char *db, struct ws_store **out, int *embedded, ws_err *err);
/* The database of a command run on every rank of par (mpirun/srun; one rank otherwise):
 * with `writes`, rank 0 creates or migrates it (cli_open_store) and every rank learns its
 * outcome before the others open it read-only (cli_open_store_ro), as every rank without
 * `writes` does. Collective; the read-only opens are each rank's own outcome. */
struct ws_par;
int cli_open_store_ranks(struct ws_par *par, const char *db, int writes, struct ws_store **out,
                         int *embedded, ws_err *err);
/* --host this: *host becomes this machine's newest calibration in s ("host:<fingerprint>",
 * written into buf); WS_ENOTFOUND when s holds none. Any other name is left as it is. */
int cli_host_this(struct ws_store *s, const char **host, char *buf, size_t cap, ws_err *err);
/* The note on stderr that the embedded datasheet profiles were shown. */
void cli_note_embedded(void);

/* A generator's options as given (NULL: not given), for `trace gen` and `sim`. */
typedef struct cli_gen_args {
    const char *arrivals, *rate, *cv, *clients, *think, *requests, *pdist, *odist, *shared;
} cli_gen_args;
/* Checks and parses them into *g (its seed left as it is): poisson and gamma need --rate
 * (gamma also --cv), closed needs --clients (--think optional); all need --requests,
 * --prompt-dist and --output-dist. Returns 0, or a usage error naming `cmd`. */
struct ws_trace_gen;
int cli_gen_parse(const char *cmd, const cli_gen_args *a, struct ws_trace_gen *g);

#endif
