/* opts: the option tables' parser and help printer (see opts.h). */
#include "opts.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ws_parse.h"

#define HELP_COL 24   /* where an option's help starts */
#define HELP_WIDTH 79 /* help lines are wrapped before this column */

int cli_fail(const ws_err *err)
{
    fprintf(stderr, "writescope: %s\n", err && err->msg[0] ? err->msg : "failed");
    return CLI_EXIT_FAIL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "writescope %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see 'writescope %s --help')\n", cmd);
    return CLI_EXIT_USAGE;
}

int cli_opt_ll(const char *cmd, const char *opt, const char *v, long long lo, long long hi,
               long long *out)
{
    if (ws_parse_int64(v, lo, hi, out))
        return cli_usage_error(cmd, "--%s needs an integer in [%lld, %lld], not '%s'", opt, lo, hi,
                               v);
    return 0;
}

int cli_opt_int(const char *cmd, const char *opt, const char *v, int lo, int hi, int *out)
{
    long long x;
    int rc = cli_opt_ll(cmd, opt, v, lo, hi, &x);
    if (!rc)
        *out = (int)x;
    return rc;
}

int cli_opt_double(const char *cmd, const char *opt, const char *v, double lo, double hi,
                   double *out)
{
    if (ws_parse_double(v, lo, hi, out))
        return cli_usage_error(cmd, "--%s needs a number in [%g, %g], not '%s'", opt, lo, hi, v);
    return 0;
}

/* A table that breaks the rules of opts.h: a bug in the command, not in its input. */
static void opts_bug(const char *what, const char *name)
{
    fprintf(stderr, "writescope: internal error: option table: %s '--%s'\n", what, name);
    abort();
}

static int opts_index(const cli_args *a, const char *name, size_t len)
{
    for (int i = 0; i < a->n; i++)
        if (strlen(a->opt[i].name) == len && !strncmp(a->opt[i].name, name, len))
            return i;
    return -1;
}

/* The option as in effect: the tune of `top` that names it, if any, applied. */
static void opts_tune(cli_optdef *o, const cli_optdef *top)
{
    for (const cli_optdef *u = top; u->type != CLI_OPT_END; u++) {
        if (u->type != CLI_OPT_TUNE || strcmp(u->name, o->name))
            continue;
        if (u->lo != 0 || u->hi != 0) {
            o->lo = u->lo;
            o->hi = u->hi;
            o->err = u->err;
        } else if (u->err) {
            o->err = u->err;
        }
        if (u->def)
            o->def = u->def;
        if (u->help)
            o->help = u->help;
        if (u->arg)
            o->arg = u->arg;
    }
}

static void opts_flatten(const cli_optdef *t, size_t base, const cli_optdef *top, cli_args *a)
{
    for (; t->type != CLI_OPT_END; t++) {
        if (t->type == CLI_OPT_TUNE)
            continue;
        if (t->type == CLI_OPT_GROUP) {
            opts_flatten(t->group, base + t->off, top, a);
            continue;
        }
        if (!t->name || opts_index(a, t->name, strlen(t->name)) >= 0)
            opts_bug("declared twice", t->name ? t->name : "");
        if (a->n >= CLI_OPTS_MAX)
            opts_bug("more than CLI_OPTS_MAX options at", t->name);
        if (t->type == CLI_OPT_ENUM && !t->names)
            opts_bug("an enum without names", t->name);
        if (t->type == CLI_OPT_LIST && t->def)
            opts_bug("a default for a repeatable option", t->name);
        cli_optdef o = *t;
        o.off += base;
        opts_tune(&o, top);
        a->opt[a->n++] = o;
    }
}

/* Every option of spec's table into a (nothing parsed yet). */
void cli_opts_expand(const cli_spec *spec, cli_args *a)
{
    memset(a, 0, sizeof *a);
    opts_flatten(spec->opts, 0, spec->opts, a);
    for (const cli_optdef *u = spec->opts; u->type != CLI_OPT_END; u++)
        if (u->type == CLI_OPT_TUNE && opts_index(a, u->name, strlen(u->name)) < 0)
            opts_bug("a tune of no option", u->name);
    if (spec->max_pos > CLI_POS_MAX)
        opts_bug("more positional arguments than CLI_POS_MAX for", spec->cmd);
}

/* "a, b or c" into buf. */
static const char *enum_names(const cli_optdef *o, const char *sep, const char *last, char *buf,
                              size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; o->names[i] && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s",
                              i == 0            ? ""
                              : o->names[i + 1] ? sep
                                                : last,
                              o->names[i]);
    return buf;
}

static int set_enum(const char *cmd, const cli_optdef *o, const char *v, int *out)
{
    for (int i = 0; o->names[i]; i++)
        if (!strcmp(v, o->names[i])) {
            *out = i;
            return 0;
        }
    if (o->err)
        return cli_usage_error(cmd, o->err, v);
    char names[256];
    return cli_usage_error(cmd, "--%s is %s, not '%s'", o->name,
                           enum_names(o, ", ", " or ", names, sizeof names), v);
}

static int set_list(const char *cmd, const cli_optdef *o, const char *v, cli_list *l)
{
    const int cap = o->hi > 0 && o->hi < CLI_LIST_MAX ? (int)o->hi : CLI_LIST_MAX;
    if (l->n >= cap)
        return cli_usage_error(cmd, "at most %d --%s", cap, o->name);
    l->v[l->n++] = v;
    return 0;
}

static int set_value(const char *cmd, const cli_optdef *o, const char *v, void *dst)
{
    void *p = (char *)dst + o->off;
    long long x;
    double d;
    switch (o->type) {
    case CLI_OPT_FLAG: *(int *)p = 1; return 0;
    case CLI_OPT_STR: *(const char **)p = v; return 0;
    case CLI_OPT_ENUM: return set_enum(cmd, o, v, p);
    case CLI_OPT_LIST: return set_list(cmd, o, v, p);
    case CLI_OPT_INT:
    case CLI_OPT_LL:
        if (o->err && ws_parse_int64(v, (long long)o->lo, (long long)o->hi, &x))
            return cli_usage_error(cmd, o->err, v);
        if (!o->err && cli_opt_ll(cmd, o->name, v, (long long)o->lo, (long long)o->hi, &x))
            return CLI_EXIT_USAGE;
        if (o->type == CLI_OPT_INT)
            *(int *)p = (int)x;
        else
            *(long long *)p = x;
        return 0;
    case CLI_OPT_DOUBLE:
        if (o->err && ws_parse_double(v, (double)o->lo, (double)o->hi, &d))
            return cli_usage_error(cmd, o->err, v);
        if (!o->err && cli_opt_double(cmd, o->name, v, (double)o->lo, (double)o->hi, &d))
            return CLI_EXIT_USAGE;
        *(double *)p = d;
        return 0;
    default: opts_bug("a value for a non-option entry", o->name); return CLI_EXIT_USAGE;
    }
}

/* One "--name[=V]" at argv[*i] (taking argv[*i + 1] as its value when it needs one). */
static int parse_option(const char *cmd, int argc, char **argv, int *i, void *dst, cli_args *a)
{
    const char *arg = argv[*i], *name = arg + 2, *eq = strchr(name, '=');
    const int k = opts_index(a, name, eq ? (size_t)(eq - name) : strlen(name));
    if (k < 0)
        return cli_usage_error(cmd, "unknown option '%s'", arg);
    const cli_optdef *o = &a->opt[k];
    const char *v = NULL;
    if (o->type == CLI_OPT_FLAG) {
        if (eq)
            return cli_usage_error(cmd, "option '--%s' takes no value", o->name);
    } else if (eq) {
        v = eq + 1;
    } else if (*i + 1 < argc) {
        v = argv[++*i];
    } else {
        return cli_usage_error(cmd, "option '--%s' needs a value", o->name);
    }
    int rc = set_value(cmd, o, v, dst);
    if (!rc && a->given[k] < UCHAR_MAX)
        a->given[k]++;
    return rc;
}

int cli_opts_parse(const cli_spec *spec, int argc, char **argv, void *dst, cli_args *a)
{
    cli_opts_expand(spec, a);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            cli_help(stdout, spec);
            return CLI_PARSE_HELP;
        }
    int rc = 0;
    for (int k = 0; k < a->n && !rc; k++)
        if (a->opt[k].def)
            rc = set_value(spec->cmd, &a->opt[k], a->opt[k].def, dst);
    for (int i = 1; i < argc && !rc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) == 0 && arg[2] != '\0')
            rc = parse_option(spec->cmd, argc, argv, &i, dst, a);
        else if (a->npos >= spec->max_pos)
            rc = cli_usage_error(spec->cmd, "unexpected argument '%s'", arg);
        else
            a->pos[a->npos++] = argv[i];
    }
    return rc;
}

int cli_given(const cli_args *a, const char *name)
{
    const int k = opts_index(a, name, strlen(name));
    if (k < 0)
        opts_bug("cli_given of an undeclared option", name);
    return a->given[k];
}

int cli_declared(const cli_args *a, const char *name)
{
    return opts_index(a, name, strlen(name)) >= 0;
}

/* An integer bound as help shows it: 2^k for large powers of two. */
static void fmt_int(long long v, char *buf, size_t cap)
{
    if (v >= 65536 && (v & (v - 1)) == 0)
        snprintf(buf, cap, "2^%d", __builtin_ctzll((unsigned long long)v));
    else
        snprintf(buf, cap, "%lld", v);
}

/* " (1..4096; default 4)": what the table knows beyond the help line. */
static void help_suffix(const cli_optdef *o, char *buf, size_t cap)
{
    char range[96] = "", lo[32], hi[32];
    if (o->type == CLI_OPT_INT || o->type == CLI_OPT_LL) {
        fmt_int((long long)o->lo, lo, sizeof lo);
        fmt_int((long long)o->hi, hi, sizeof hi);
        if ((long long)o->hi == LLONG_MAX)
            snprintf(range, sizeof range, "at least %s", lo);
        else
            snprintf(range, sizeof range, "%s..%s", lo, hi);
    } else if (o->type == CLI_OPT_DOUBLE) {
        snprintf(range, sizeof range, "%g..%g", (double)o->lo, (double)o->hi);
    } else if (o->type == CLI_OPT_LIST) {
        snprintf(range, sizeof range, "repeatable");
    }
    if (range[0] && o->def)
        snprintf(buf, cap, " (%s; default %s)", range, o->def);
    else if (range[0] || o->def)
        snprintf(buf, cap, " (%s%s%s)", range, o->def ? "default " : "", o->def ? o->def : "");
    else
        buf[0] = '\0';
}

/* text from column `col` (where the cursor is), wrapped with a hanging indent. */
static void help_wrap(FILE *out, const char *text, int col)
{
    int x = col;
    const char *p = text;
    while (*p) {
        if (*p == '\n') {
            fprintf(out, "\n%*s", HELP_COL, "");
            x = HELP_COL;
            p++;
            continue;
        }
        size_t w = strcspn(p, " \n");
        if (x > HELP_COL && x + 1 + (int)w > HELP_WIDTH) {
            fprintf(out, "\n%*s", HELP_COL, "");
            x = HELP_COL;
        } else if (x > HELP_COL) {
            fputc(' ', out);
            x++;
        }
        fprintf(out, "%.*s", (int)w, p);
        x += (int)w;
        p += w;
        while (*p == ' ')
            p++;
    }
    fputc('\n', out);
}

static void help_option(FILE *out, const cli_optdef *o)
{
    char names[256], left[300], suffix[160], text[2048];
    const char *arg = o->arg;
    if (!arg && o->type == CLI_OPT_ENUM)
        arg = enum_names(o, "|", "|", names, sizeof names);
    snprintf(left, sizeof left, "  --%s%s%s", o->name, arg && o->type != CLI_OPT_FLAG ? " " : "",
             arg && o->type != CLI_OPT_FLAG ? arg : "");
    help_suffix(o, suffix, sizeof suffix);
    snprintf(text, sizeof text, "%s%s", o->help ? o->help : "", suffix);
    int col = (int)strlen(left);
    fputs(left, out);
    if (col > HELP_COL - 2) {
        fprintf(out, "\n%*s", HELP_COL, "");
    } else {
        fprintf(out, "%*s", HELP_COL - col, "");
    }
    help_wrap(out, text, HELP_COL);
}

void cli_help(FILE *out, const cli_spec *spec)
{
    cli_args a;
    cli_opts_expand(spec, &a);
    if (spec->usage)
        spec->usage(out);
    if (!a.n)
        return;
    fprintf(out, "\noptions:\n");
    for (int k = 0; k < a.n; k++)
        help_option(out, &a.opt[k]);
}
