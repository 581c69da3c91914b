/* test_cli_opts: the option-table parser of the command line (cli/opts.c): every type, the
 * `--name=V` form, defaults, ranges with the one-line usage errors the commands print,
 * unknown options, missing values, repeated options, groups and their tunes, cli_given,
 * and --help listing every declared option; also that the shared groups of cli/workload.c
 * fit in one table without a name declared twice.
 * (The test binary links cli/'s objects but main.) */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "opts.h"
#include "serving.h"
#include "workload.h"

typedef struct t_opts {
    int flag, n, mode;
    long long big;
    double x;
    const char *s;
    cli_list l;
    cli_workload w;
} t_opts;

static const cli_optdef k_group[] = {
    {"model", CLI_STR(cli_workload, model), .arg = "NAME", .help = "the model"},
    {"batch", CLI_INT(cli_workload, batch), .arg = "B", .lo = 1, .hi = 64, .def = "4",
     .help = "sequences"},
    {0}};

static const cli_optdef k_table[] = {
    {"flag", CLI_FLAG(t_opts, flag), .help = "a flag"},
    {"n", CLI_INT(t_opts, n), .arg = "N", .lo = 1, .hi = 10, .def = "3", .help = "a small int"},
    {"big", CLI_LL(t_opts, big), .arg = "B", .lo = 0, .hi = 1LL << 40,
     .err = "--big '%s': not a count", .help = "a large int"},
    {"x", CLI_DOUBLE(t_opts, x), .arg = "X", .lo = 0, .hi = 1, .def = "0.5", .help = "a share"},
    {"s", CLI_STR(t_opts, s), .arg = "S", .def = "dflt", .help = "a string"},
    {"mode", CLI_ENUM(t_opts, mode), .names = (const char *const[]){"a", "b", "c", NULL},
     .def = "b", .help = "a mode"},
    {"l", CLI_LIST(t_opts, l), .arg = "V", .hi = 2, .help = "repeatable"},
    {CLI_GROUP(t_opts, w, cli_workload, k_group)},
    {"batch", CLI_TUNE, .lo = 1, .hi = 8, .def = "2", .help = "tuned sequences"},
    {0}};

static const cli_spec k_spec = {"t", k_table, 2, NULL};

/* What one parse did: its return value, its stderr, the options and the arguments. */
typedef struct parsed {
    int rc;
    char err[1024];
    t_opts o;
    cli_args a;
} parsed;

static void parse_args(const cli_spec *spec, const char *const *args, parsed *p)
{
    char *argv[32] = {"t"};
    int argc = 1;
    for (; args[argc - 1]; argc++)
        argv[argc] = (char *)args[argc - 1];
    memset(p, 0, sizeof *p);
    FILE *tmp = tmpfile();
    cr_assert_not_null(tmp);
    fflush(stderr);
    const int saved = dup(2);
    dup2(fileno(tmp), 2);
    p->rc = cli_opts_parse(spec, argc, argv, &p->o, &p->a);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(p->err, 1, sizeof p->err - 1, tmp);
    p->err[n] = '\0';
    fclose(tmp);
}

#define PARSE(p, ...) parse_args(&k_spec, (const char *const[]){__VA_ARGS__, NULL}, (p))

/* A usage error: exit code 2 and exactly `msg` on one line of stderr. */
static void expect_usage(const parsed *p, const char *msg)
{
    char want[512];
    snprintf(want, sizeof want, "writescope t: %s (see 'writescope t --help')\n", msg);
    cr_assert_eq(p->rc, CLI_EXIT_USAGE, "rc %d, stderr: %s", p->rc, p->err);
    cr_assert_str_eq(p->err, want);
}

Test(cli_opts, defaults_when_nothing_is_given)
{
    parsed p;
    parse_args(&k_spec, (const char *const[]){NULL}, &p);
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_eq(p.o.flag, 0);
    cr_assert_eq(p.o.n, 3);
    cr_assert_eq(p.o.big, 0);
    cr_assert_float_eq(p.o.x, 0.5, 0);
    cr_assert_str_eq(p.o.s, "dflt");
    cr_assert_eq(p.o.mode, 1);
    cr_assert_eq(p.o.l.n, 0);
    cr_assert_eq(p.o.w.batch, 2, "the tune's default, not the group's");
    cr_assert_null(p.o.w.model);
    cr_assert_eq(p.a.npos, 0);
    cr_assert_eq(cli_given(&p.a, "n"), 0);
    cr_assert_str_eq(p.err, "");
}

Test(cli_opts, every_type_in_both_forms)
{
    parsed p;
    PARSE(&p, "--flag", "--n", "7", "--big=1099511627776", "--x", "0.25", "--s=--json", "--mode",
          "c", "--model=m", "--batch", "8");
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_eq(p.o.flag, 1);
    cr_assert_eq(p.o.n, 7);
    cr_assert_eq(p.o.big, 1LL << 40);
    cr_assert_float_eq(p.o.x, 0.25, 0);
    cr_assert_str_eq(p.o.s, "--json");
    cr_assert_eq(p.o.mode, 2);
    cr_assert_str_eq(p.o.w.model, "m");
    cr_assert_eq(p.o.w.batch, 8);
    cr_assert_eq(cli_given(&p.a, "flag"), 1);
    cr_assert_eq(cli_given(&p.a, "batch"), 1);
    cr_assert_eq(cli_given(&p.a, "l"), 0);
    /* a value is taken whole, even when it looks like an option; "--x=" is an empty value */
    PARSE(&p, "--s", "--flag", "--n=2");
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_str_eq(p.o.s, "--flag");
    cr_assert_eq(p.o.flag, 0);
    cr_assert_eq(p.o.n, 2);
    PARSE(&p, "--s=");
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_str_eq(p.o.s, "");
}

Test(cli_opts, ranges_and_bad_values_are_one_line_usage_errors)
{
    parsed p;
    PARSE(&p, "--n", "11");
    expect_usage(&p, "--n needs an integer in [1, 10], not '11'");
    PARSE(&p, "--n=5abc");
    expect_usage(&p, "--n needs an integer in [1, 10], not '5abc'");
    PARSE(&p, "--n", " 5");
    expect_usage(&p, "--n needs an integer in [1, 10], not ' 5'");
    PARSE(&p, "--x", "1.5");
    expect_usage(&p, "--x needs a number in [0, 1], not '1.5'");
    PARSE(&p, "--x", "nan");
    expect_usage(&p, "--x needs a number in [0, 1], not 'nan'");
    PARSE(&p, "--big", "-1");
    expect_usage(&p, "--big '-1': not a count");
    PARSE(&p, "--mode", "d");
    expect_usage(&p, "--mode is a, b or c, not 'd'");
    /* a tune's range replaces the group's: 8 is its top, 9 is out although the group takes it */
    PARSE(&p, "--batch", "8");
    cr_assert_eq(p.rc, 0, "%s", p.err);
    PARSE(&p, "--batch", "9");
    expect_usage(&p, "--batch needs an integer in [1, 8], not '9'");
}

Test(cli_opts, unknown_options_missing_values_and_stray_arguments)
{
    parsed p;
    PARSE(&p, "--bogus");
    expect_usage(&p, "unknown option '--bogus'");
    PARSE(&p, "--bogus=3");
    expect_usage(&p, "unknown option '--bogus=3'");
    PARSE(&p, "--fla");
    expect_usage(&p, "unknown option '--fla'");
    PARSE(&p, "--n");
    expect_usage(&p, "option '--n' needs a value");
    PARSE(&p, "--flag=1");
    expect_usage(&p, "option '--flag' takes no value");
    PARSE(&p, "a", "--", "c");
    expect_usage(&p, "unexpected argument 'c'");
    PARSE(&p, "a", "-x");
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_eq(p.a.npos, 2);
    cr_assert_str_eq(p.a.pos[0], "a");
    cr_assert_str_eq(p.a.pos[1], "-x", "a single dash is an argument");
    /* the first error wins: nothing after it is read */
    PARSE(&p, "--n", "0", "--bogus");
    expect_usage(&p, "--n needs an integer in [1, 10], not '0'");
}

Test(cli_opts, repeated_options)
{
    parsed p;
    PARSE(&p, "--l", "one", "--n", "4", "--l=two", "--n", "5");
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_eq(p.o.l.n, 2);
    cr_assert_str_eq(p.o.l.v[0], "one");
    cr_assert_str_eq(p.o.l.v[1], "two");
    cr_assert_eq(p.o.n, 5, "the last value of a plain option wins");
    cr_assert_eq(cli_given(&p.a, "n"), 2);
    cr_assert_eq(cli_given(&p.a, "l"), 2);
    PARSE(&p, "--l", "1", "--l", "2", "--l", "3");
    expect_usage(&p, "at most 2 --l");
}

Test(cli_opts, help_anywhere_lists_every_option)
{
    char *argv[] = {"t", "--n", "--help", NULL};
    t_opts o = {0};
    cli_args a;
    fflush(stdout);
    FILE *keep = stdout;
    char *text = NULL;
    size_t len = 0;
    stdout = open_memstream(&text, &len);
    const int rc = cli_opts_parse(&k_spec, 3, argv, &o, &a);
    fclose(stdout);
    stdout = keep;
    cr_assert_eq(rc, CLI_PARSE_HELP, "--help is found even as the value of --n");
    const char *lines[] = {"  --flag  ",
                           "  --n N  ",
                           "a small int (1..10; default 3)",
                           "  --big B  ",
                           "a share (0..1; default 0.5)",
                           "  --s S  ",
                           "  --mode a|b|c  ",
                           "a mode (default b)",
                           "  --l V  ",
                           "repeatable (repeatable)",
                           "  --model NAME  ",
                           "tuned sequences (1..8; default 2)"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        cr_assert_not_null(strstr(text, lines[i]), "'%s' missing in:\n%s", lines[i], text);
    cr_assert_null(strstr(text, "  --batch B  sequences"), "the tune's help replaces the group's");
    free(text);
}

/* The help lines of a spec, for counting what it lists. */
static char *help_text(const cli_spec *spec)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cli_help(f, spec);
    fclose(f);
    return text;
}

typedef struct all_opts {
    cli_workload w;
} all_opts;

static const cli_optdef k_all[] = {{CLI_GROUP(all_opts, w, cli_workload, cli_workload_opts)},
                                   {CLI_GROUP(all_opts, w, cli_workload, cli_engine_opts)},
                                   {CLI_GROUP(all_opts, w, cli_workload, cli_live_opts)},
                                   {CLI_GROUP(all_opts, w, cli_workload, cli_sim_opts)},
                                   {CLI_GROUP(all_opts, w, cli_workload, cli_trace_opts)},
                                   {CLI_GROUP(all_opts, w, cli_workload, cli_gen_opts)},
                                   {CLI_GROUP(all_opts, w, cli_workload, cli_closed_opts)},
                                   {CLI_GROUP(all_opts, w, cli_workload, cli_serve_opts)},
                                   {0}};

Test(cli_opts, shared_groups_fit_one_table_and_help_lists_them_all)
{
    const cli_spec spec = {"all", k_all, 0, NULL};
    char *text = help_text(&spec);
    cli_args a;
    cli_opts_expand(&spec, &a);
    cr_assert_eq(a.n, 35); /* with sim's --prefill and --prefill-gpu-tokens, --shared-prefix, the
                            * serving group's five */
    for (int k = 0; k < a.n; k++) {
        char want[64];
        snprintf(want, sizeof want, "\n  --%s", a.opt[k].name);
        cr_assert_not_null(strstr(text, want), "--%s missing in --help:\n%s", a.opt[k].name, text);
        cr_assert_not_null(a.opt[k].help, "--%s has no help line", a.opt[k].name);
    }
    free(text);
    /* every value lands in its own field */
    all_opts o = {0};
    char *ok[] = {"all",      "--model", "m",          "--threads", "3", "--think", "fixed:1",
                  "--detail", "layer",   "--skip-bad", "--seed",    "9", "--engine", "sglang",
                  "--scheduler", "slots", NULL};
    cr_assert_eq(cli_opts_parse(&spec, 16, ok, &o, &a), 0);
    cr_assert_str_eq(o.w.engine, "sglang");
    cr_assert_eq(o.w.sched, WS_BATCH_SLOTS);
    cr_assert_str_eq(o.w.model, "m");
    cr_assert_eq(o.w.threads, 3);
    cr_assert_str_eq(o.w.gen.think, "fixed:1");
    cr_assert_eq(o.w.detail, 1);
    cr_assert_eq(o.w.skip_bad, 1);
    cr_assert_eq(o.w.seed, 9);
    cr_assert_str_eq(o.w.policy, "all");
    cr_assert_eq(o.w.chunk, 2048);
    cr_assert_float_eq(o.w.r, 0.5, 0);
}

/* Tables that break the rules abort: a command's bug, found by its --help in the tests. */
static const cli_optdef k_twice[] = {
    {"model", CLI_STR(t_opts, s), .help = "clashes with the group's"},
    {CLI_GROUP(t_opts, w, cli_workload, k_group)},
    {0}};

/* The abort's message is expected: kept out of the test log. */
static void quiet_stderr(void)
{
    cr_assert_not_null(freopen("/dev/null", "w", stderr));
}

Test(cli_opts, a_name_declared_twice_aborts, .signal = SIGABRT, .init = quiet_stderr)
{
    const cli_spec spec = {"t", k_twice, 0, NULL};
    cli_help(stdout, &spec);
}

static const cli_optdef k_stray_tune[] = {
    {"n", CLI_INT(t_opts, n), .lo = 1, .hi = 2}, {"m", CLI_TUNE, .def = "1"}, {0}};

Test(cli_opts, a_tune_of_no_option_aborts, .signal = SIGABRT, .init = quiet_stderr)
{
    const cli_spec spec = {"t", k_stray_tune, 0, NULL};
    cli_help(stdout, &spec);
}

Test(cli_opts, given_of_an_undeclared_option_aborts, .signal = SIGABRT, .init = quiet_stderr)
{
    parsed p;
    parse_args(&k_spec, (const char *const[]){NULL}, &p);
    cli_given(&p.a, "nope");
}
