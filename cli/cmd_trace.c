/* cmd_trace: `writescope trace stats|gen|convert` -- summarize a request trace, generate a
 * synthetic one, or convert any supported format to our CSV. Reading, generating and
 * summarizing are the traces/ library's; this file parses options and prints. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "trace.h"
#include "trace_gen.h"
#include "trace_stats.h"
#include "workload.h"

static void help(FILE *out)
{
    fprintf(out,
            "usage: writescope trace stats FILE [--format F] [--skip-bad] [--json]\n"
            "       writescope trace gen --arrivals poisson|gamma|closed ... --requests N\n"
            "                            --prompt-dist SPEC --output-dist SPEC [--seed S] [--out "
            "FILE]\n"
            "       writescope trace convert FILE --out FILE [--format F] [--skip-bad]\n"
            "\n"
            "Request traces: our CSV (arrival_s,prompt_tokens,output_tokens[,session_id]) and the\n"
            "Azure LLM, Mooncake, BurstGPT and Vidur formats, detected from the first line.\n"
            "writescope trace SUBCOMMAND --help for each; docs/traces.md for the formats.\n");
}

static void help_stats(FILE *out)
{
    fprintf(out, "usage: writescope trace stats FILE [--format F] [--skip-bad] [--json]\n"
                 "\n"
                 "Reads a trace and prints: requests, duration (first to last arrival), rate,\n"
                 "prompt and output tokens (mean, p50, p90, p99 by nearest rank, max), distinct\n"
                 "sessions, and what was skipped.\n");
}

static void help_gen(FILE *out)
{
    fprintf(out,
            "usage: writescope trace gen --arrivals poisson|gamma|closed --requests N\n"
            "           --prompt-dist SPEC --output-dist SPEC [--rate R] [--cv C]\n"
            "           [--clients C] [--think S] [--seed S] [--out FILE]\n"
            "\n"
            "Writes a synthetic trace as our CSV (to FILE, else stdout); the same seed gives\n"
            "the same trace. A closed loop (--arrivals closed) is played by `writescope sim`:\n"
            "it cannot be written as a file.\n");
}

static void help_convert(FILE *out)
{
    fprintf(out,
            "usage: writescope trace convert FILE --out FILE [--format F] [--skip-bad]\n"
            "\n"
            "Converts a trace in any supported format to our CSV\n"
            "(arrival_s,prompt_tokens,output_tokens[,session_id]); imported arrivals start at 0.\n"
            "The output is written to a temporary file and renamed at the end, so a failed\n"
            "conversion leaves nothing behind.\n");
}

typedef struct trace_opts {
    cli_workload w; /* --format, --skip-bad; the generator's options */
    long long seed;
    const char *out;
    int json;
} trace_opts;

static const cli_optdef k_stats_opts[] = {
    {CLI_GROUP(trace_opts, w, cli_workload, cli_trace_opts)},
    {"json", CLI_FLAG(trace_opts, json), .help = "machine-readable output"},
    {0}};
static const cli_spec k_stats = {"trace stats", k_stats_opts, 1, help_stats};

static const cli_optdef k_gen_opts[] = {
    {CLI_GROUP(trace_opts, w, cli_workload, cli_gen_opts)},
    {CLI_GROUP(trace_opts, w, cli_workload, cli_closed_opts)},
    {"seed", CLI_LL(trace_opts, seed), .arg = "S", .lo = 0, .hi = 1LL << 62, .def = "0",
     .err = "--seed '%s': not an integer in 0..2^62", .help = "the random seed"},
    {"out", CLI_STR(trace_opts, out), .arg = "FILE", .help = "the trace file (default: stdout)"},
    {0}};
static const cli_spec k_gen = {"trace gen", k_gen_opts, 0, help_gen};

static const cli_optdef k_convert_opts[] = {
    {CLI_GROUP(trace_opts, w, cli_workload, cli_trace_opts)},
    {"out", CLI_STR(trace_opts, out), .arg = "FILE", .help = "the converted trace (required)"},
    {0}};
static const cli_spec k_convert = {"trace convert", k_convert_opts, 1, help_convert};

static int open_file(const char *path, const char *format, int skip_bad, ws_trace **t)
{
    ws_err err = {0};
    ws_trace_opts o = {.skip_bad = skip_bad};
    if (format && ws_trace_format_parse(format, &o.format, &err))
        return cli_usage_error("trace", "%s", err.msg);
    if (ws_trace_open(path, &o, t, &err))
        return cli_fail(&err);
    return 0;
}

static json_t *dist_json(const ws_trace_dist *d)
{
    json_t *o = json_object();
    json_object_set_new(o, "sum", cli_num(d->sum));
    json_object_set_new(o, "mean", json_real(d->mean));
    json_object_set_new(o, "min", json_integer(d->min));
    json_object_set_new(o, "p50", json_integer(d->p50));
    json_object_set_new(o, "p90", json_integer(d->p90));
    json_object_set_new(o, "p99", json_integer(d->p99));
    json_object_set_new(o, "max", json_integer(d->max));
    return o;
}

static void print_dist(const char *what, const ws_trace_dist *d)
{
    printf("%-16s mean %.1f  p50 %d  p90 %d  p99 %d  max %d\n", what, d->mean, (int)d->p50,
           (int)d->p90, (int)d->p99, (int)d->max);
}

static int stats(int argc, char **argv)
{
    trace_opts o = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_stats, argc, argv, &o, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    char **pos = a.pos;
    const int skip_bad = o.w.skip_bad;
    if (a.npos != 1)
        return cli_usage_error("trace stats", "expected one trace FILE");
    ws_trace *t;
    if ((rc = open_file(pos[0], o.w.format, skip_bad, &t)))
        return rc;
    ws_trace_stats st;
    ws_err err = {0};
    rc = ws_trace_stats_compute(t, &st, &err);
    ws_trace_close(t);
    if (rc)
        return cli_fail(&err);
    if (o.json) {
        json_t *j = json_object();
        json_object_set_new(j, "file", json_string(pos[0]));
        json_object_set_new(j, "format", json_string(ws_trace_format_name(st.format)));
        json_object_set_new(j, "requests", json_integer((json_int_t)st.requests));
        json_object_set_new(j, "first_arrival_s", json_real(st.first_s));
        json_object_set_new(j, "duration_s", json_real(st.duration_s));
        json_object_set_new(j, "rate_per_s", json_real(st.rate));
        json_object_set_new(j, "prompt_tokens", dist_json(&st.prompt));
        json_object_set_new(j, "output_tokens", dist_json(&st.output));
        json_object_set_new(j, "sessions", json_integer((json_int_t)st.sessions));
        json_object_set_new(j, "lines", json_integer((json_int_t)st.counts.lines));
        json_object_set_new(j, "bad_rows_skipped", json_integer((json_int_t)st.counts.bad));
        json_object_set_new(j, "failed_requests_skipped",
                            json_integer((json_int_t)st.counts.failed));
        if (st.counts.bad)
            json_object_set_new(j, "first_bad_row", json_string(st.counts.first_bad));
        return cli_print_json(j);
    }
    char b[64];
    printf("trace            %s (%s)\n", pos[0], ws_trace_format_name(st.format));
    printf("requests         %s\n", cli_commas((double)st.requests, b, sizeof b));
    printf("duration         %.3f s (first arrival %.3f s)\n", st.duration_s, st.first_s);
    printf("rate             %.3f requests/s\n", st.rate);
    print_dist("prompt tokens", &st.prompt);
    print_dist("output tokens", &st.output);
    if (st.sessions)
        printf("sessions         %s\n", cli_commas((double)st.sessions, b, sizeof b));
    else
        printf("sessions         none\n");
    printf("bad rows skipped %s%s\n", cli_commas((double)st.counts.bad, b, sizeof b),
           skip_bad ? "" : " (--skip-bad not given: none allowed)");
    if (st.counts.bad)
        printf("first bad row    %s\n", st.counts.first_bad);
    if (st.counts.failed || st.format == WS_TRACE_BURSTGPT)
        printf("failed requests  %s skipped (0 response tokens)\n",
               cli_commas((double)st.counts.failed, b, sizeof b));
    return CLI_EXIT_OK;
}

static int gen(int argc, char **argv)
{
    trace_opts o = {0};
    cli_args a;
    const char *cmd = "trace gen";
    int rc = cli_opts_parse(&k_gen, argc, argv, &o, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    ws_err err = {0};
    ws_trace_gen g = {0};
    if ((rc = cli_gen_parse(cmd, &o.w.gen, &g)))
        return rc;
    g.seed = (uint64_t)o.seed;
    const char *out = o.out;
    ws_trace *t;
    if (ws_trace_gen_open(&g, &t, &err))
        return cli_fail(&err);
    uint64_t written;
    rc = out ? ws_trace_write_file(t, out, &written, &err)
             : ws_trace_write(t, stdout, "stdout", &written, &err);
    ws_trace_close(t);
    if (rc)
        return cli_fail(&err);
    if (out)
        printf("wrote %llu requests to %s\n", (unsigned long long)written, out);
    return CLI_EXIT_OK;
}

static int convert(int argc, char **argv)
{
    trace_opts o = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_convert, argc, argv, &o, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    char **pos = a.pos;
    const char *out = o.out;
    if (a.npos != 1 || !out)
        return cli_usage_error("trace convert", "expected one trace FILE and --out FILE");
    ws_trace *t;
    if ((rc = open_file(pos[0], o.w.format, o.w.skip_bad, &t)))
        return rc;
    ws_err err = {0};
    uint64_t written;
    rc = ws_trace_write_file(t, out, &written, &err);
    const ws_trace_counts c = *ws_trace_get_counts(t);
    ws_trace_format f = ws_trace_format_of(t);
    ws_trace_close(t);
    if (rc)
        return cli_fail(&err);
    printf("wrote %llu requests to %s (from %s, %s); skipped %llu malformed rows, %llu failed "
           "requests\n",
           (unsigned long long)written, out, pos[0], ws_trace_format_name(f),
           (unsigned long long)c.bad, (unsigned long long)c.failed);
    if (c.bad)
        printf("first malformed row: %s\n", c.first_bad);
    return CLI_EXIT_OK;
}

int cmd_trace(int argc, char **argv)
{
    if (argc < 2) {
        help(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
        help(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(sub, "stats"))
        return stats(argc - 1, argv + 1);
    if (!strcmp(sub, "gen"))
        return gen(argc - 1, argv + 1);
    if (!strcmp(sub, "convert"))
        return convert(argc - 1, argv + 1);
    return cli_usage_error("trace", "unknown subcommand '%s' (stats, gen, convert)", sub);
}
