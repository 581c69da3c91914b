/* opts: the declarative option tables of the command line. A command declares each of its
 * options once, in a static table: the name, the type (flag, string, int, long long,
 * double, one of a list of names, a repeatable string), the range, the default, the help
 * line and where the value goes (an offset into the command's own options struct, checked
 * against the field's type at compile time). cli_opts_parse reads argv against the table --
 * `--name V`, `--name=V`, flags, repeated options -- applies the defaults, checks every
 * value with the usage errors of cli_opt_ll / cli_opt_double (or the option's own wording),
 * and on --help prints the command's synopsis followed by the options part generated from
 * the same table, so the help cannot drift from what is parsed.
 *
 * Options that several commands share are declared once, in groups (cli/workload.h) that a
 * table includes with a GROUP entry. Where a command takes a shared option with another
 * range, default or help line, a TUNE entry in its own table says so instead of restating
 * the option. A name declared twice, or a tune naming no option, is a programming error:
 * the parser aborts with a message (every command's --help runs in the tests).
 *
 * Values are checked as they are read, in argv order; what depends on several options
 * (one workload or another, an option that goes with another) stays the command's, which
 * asks cli_given whether an option was on the command line. The usage errors and exit codes
 * of every command are here too, so the parser stands alone (fuzz/fuzz_cli_opts.c). */
#ifndef WS_CLI_OPTS_H
#define WS_CLI_OPTS_H

#include <stddef.h>
#include <stdio.h>

#include "ws_err.h"

#define CLI_EXIT_OK 0    /* success */
#define CLI_EXIT_FAIL 1  /* the operation failed (bad input file, database, device) */
#define CLI_EXIT_USAGE 2 /* wrong command line */

/* Prints "writescope: <msg>" to stderr and returns CLI_EXIT_FAIL. */
int cli_fail(const ws_err *err);
/* Prints "writescope: <formatted>" plus a --help hint and returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Option --opt's value v as a whole integer (or number) in [lo, hi] into *out; else a usage
 * error naming the option and the range, returning CLI_EXIT_USAGE. */
int cli_opt_ll(const char *cmd, const char *opt, const char *v, long long lo, long long hi,
               long long *out);
int cli_opt_int(const char *cmd, const char *opt, const char *v, int lo, int hi, int *out);
int cli_opt_double(const char *cmd, const char *opt, const char *v, double lo, double hi,
                   double *out);

#define CLI_OPTS_MAX 64 /* options of one command, its groups included */
#define CLI_POS_MAX 4   /* positional arguments a command may take */
#define CLI_LIST_MAX 16 /* values of one repeatable option */

typedef enum cli_opt_type {
    CLI_OPT_END,    /* ends a table: {0} */
    CLI_OPT_FLAG,   /* --name: the int becomes 1 */
    CLI_OPT_STR,    /* --name V: the const char * points at V */
    CLI_OPT_INT,    /* a whole number in [lo, hi] into an int */
    CLI_OPT_LL,     /* the same into a long long */
    CLI_OPT_DOUBLE, /* a finite number in [lo, hi] into a double */
    CLI_OPT_ENUM,   /* one of names[] into an int: its index */
    CLI_OPT_LIST,   /* repeatable: every V in order into a cli_list */
    CLI_OPT_GROUP,  /* every option of the table `group`, its offsets counted from `off` */
    CLI_OPT_TUNE,   /* another range, default or help for the included option `name` */
} cli_opt_type;

/* The values of a repeatable option, in command-line order. */
typedef struct cli_list {
    const char *v[CLI_LIST_MAX];
    int n;
} cli_list;

typedef struct cli_optdef {
    const char *name; /* without the leading "--" */
    cli_opt_type type;
    size_t off;         /* where the value goes: offset in the options struct (CLI_INT etc.) */
    const char *arg;    /* the value's name in --help ("N", "PATH"); ENUM: default a|b|c */
    long double lo, hi; /* INT, LL, DOUBLE: the range (long double holds any long long);
                         * LIST: hi is the most values (0: CLI_LIST_MAX) */
    const char *def;    /* the default, as typed on the command line and parsed as a value
                         * before argv; NULL: the destination keeps what it held */
    const char *help;   /* for --help, wrapped; "\n" starts a new line */
    const char *err;    /* a bad value's usage error: a format with at most one %s, the value;
                         * NULL: cli_opt_ll's / cli_opt_double's, or "--X is A or B, not 'V'" */
    const char *const *names;       /* ENUM: the names, NULL-terminated */
    const struct cli_optdef *group; /* GROUP: the included table */
} cli_optdef;

/* Compile-time check that st.f has type T (a negative array size otherwise). */
#define CLI_TYPE_CHECK(st, f, T) (0 * sizeof(char[_Generic(((st *)0)->f, T : 1, default : -1)]))
#define CLI_AT(st, f, T) (offsetof(st, f) + CLI_TYPE_CHECK(st, f, T))

/* The type and destination of an entry: {"name", CLI_INT(opts, batch), .lo = 1, ...}. */
#define CLI_FLAG(st, f) .type = CLI_OPT_FLAG, .off = CLI_AT(st, f, int)
#define CLI_STR(st, f) .type = CLI_OPT_STR, .off = CLI_AT(st, f, const char *)
#define CLI_INT(st, f) .type = CLI_OPT_INT, .off = CLI_AT(st, f, int)
#define CLI_LL(st, f) .type = CLI_OPT_LL, .off = CLI_AT(st, f, long long)
#define CLI_DOUBLE(st, f) .type = CLI_OPT_DOUBLE, .off = CLI_AT(st, f, double)
#define CLI_ENUM(st, f) .type = CLI_OPT_ENUM, .off = CLI_AT(st, f, int)
#define CLI_LIST(st, f) .type = CLI_OPT_LIST, .off = CLI_AT(st, f, cli_list)
/* Includes `table`, whose offsets are into a T, at st.f: {CLI_GROUP(opts, w, T, table)}. */
#define CLI_GROUP(st, f, T, table) .type = CLI_OPT_GROUP, .off = CLI_AT(st, f, T), .group = (table)
/* {"batch", CLI_TUNE, .lo = 1, .hi = 4096, .def = "4"}: a range (with its err) replaces
 * the included option's where lo or hi is set; def, help and arg each where set. */
#define CLI_TUNE .type = CLI_OPT_TUNE

/* A command's options: its table, the positional arguments it takes, and its --help text
 * above the options (usage synopsis and description). */
typedef struct cli_spec {
    const char *cmd; /* "sim", "trace gen": named in messages */
    const cli_optdef *opts;
    int max_pos; /* at most CLI_POS_MAX */
    void (*usage)(FILE *out);
} cli_spec;

/* What cli_opts_parse found, besides the values it wrote. */
typedef struct cli_args {
    char *pos[CLI_POS_MAX]; /* positional arguments, in order */
    int npos;
    int n;                             /* options of the command, groups expanded */
    cli_optdef opt[CLI_OPTS_MAX];      /* each as in effect: tunes applied, off from the start */
    unsigned char given[CLI_OPTS_MAX]; /* times each was on the command line (at most 255) */
} cli_args;

#define CLI_PARSE_HELP (-1) /* cli_opts_parse printed the help: the command exits 0 */

/* Parses argv[1..argc-1] against spec into the options struct dst: defaults first, then
 * options anywhere (a value may start with "--"; a lone "--" is positional), the rest into
 * a->pos. --help or -h anywhere prints cli_help to stdout and returns CLI_PARSE_HELP.
 * Returns 0, or prints one usage error naming spec->cmd and returns CLI_EXIT_USAGE.
 * Callers: `if (rc) return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;` */
int cli_opts_parse(const cli_spec *spec, int argc, char **argv, void *dst, cli_args *a);
/* The spec's table with its groups expanded and tunes applied into a->opt (nothing parsed):
 * what cli_opts_parse and cli_help read. */
void cli_opts_expand(const cli_spec *spec, cli_args *a);
/* How many times option `name` was on the command line (0: not given; its default, if any,
 * is in place). Aborts when the command declares no such option. */
int cli_given(const cli_args *a, const char *name);
/* 1 when the command declares option `name` (given or not, its default in place), else 0:
 * for code shared by commands that declare different options. */
int cli_declared(const cli_args *a, const char *name);
/* The usage text, then "options:" and one entry per option of the table, in table order:
 * "--name ARG", its help, its range and its default. */
void cli_help(FILE *out, const cli_spec *spec);

#endif
