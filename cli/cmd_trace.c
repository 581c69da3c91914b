/* cmd_trace: `writescope trace stats|gen|convert` -- summarize a request trace, generate a
 * synthetic one, or convert any supported format to our CSV. Reading, generating and
 * summarizing are the traces/ library's; this file parses options and prints. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "trace.h"
#include "trace_gen.h"
#include "trace_stats.h"
#include "ws_parse.h"

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
                 "sessions, and what was skipped.\n"
                 "  --format F   ours|azure|mooncake|burstgpt|vidur (default: detected from the "
                 "first line)\n"
                 "  --skip-bad   count and skip malformed rows instead of stopping at the first\n"
                 "               (the first one is shown); BurstGPT's failed requests (0 response\n"
                 "               tokens) are always skipped and counted\n"
                 "  --json       machine-readable output\n");
}

static void help_gen(FILE *out)
{
    fprintf(out,
            "usage: writescope trace gen --arrivals poisson|gamma|closed --requests N\n"
            "           --prompt-dist SPEC --output-dist SPEC [--rate R] [--cv C]\n"
            "           [--clients C] [--think S] [--seed S] [--out FILE]\n"
            "\n"
            "Writes a synthetic trace as our CSV (to FILE, else stdout); the same seed gives\n"
            "the same trace.\n"
            "  --arrivals poisson  exponential gaps of mean 1/R (--rate R requests/s)\n"
            "             gamma    gamma gaps of mean 1/R and coefficient of variation --cv C\n"
            "                      (C = 1 is Poisson, C > 1 burstier)\n"
            "             closed   --clients C, each sending its next request --think T after\n"
            "                      the previous completes; T is S or exp:S (exponential, mean S\n"
            "                      seconds) or fixed:S (default 0); `writescope sim` plays it:\n"
            "                      it cannot be written as a file\n"
            "  --requests N        number of requests\n"
            "  SPEC                fixed:N | uniform:LO:HI | lognormal:MEAN:SIGMA | zipf:S:MAX\n"
            "                      (tokens; drawn values rounded and clipped to 1..16777216)\n"
            "  --seed S            random seed (default 0)\n");
}

static void help_convert(FILE *out)
{
    fprintf(out,
            "usage: writescope trace convert FILE --out FILE [--format F] [--skip-bad]\n"
            "\n"
            "Converts a trace in any supported format to our CSV\n"
            "(arrival_s,prompt_tokens,output_tokens[,session_id]); imported arrivals start at 0.\n"
            "The output is written to a temporary file and renamed at the end, so a failed\n"
            "conversion leaves nothing behind.\n"
            "  --format F   ours|azure|mooncake|burstgpt|vidur (default: detected)\n"
            "  --skip-bad   count and skip malformed rows (see 'trace stats --help')\n");
}

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
    const char *format = NULL;
    int skip_bad = 0, json = 0, npos = 0;
    char *pos[1];
    const cli_opt opts[] = {{"format", &format, NULL},
                            {"skip-bad", NULL, &skip_bad},
                            {"json", NULL, &json},
                            {NULL, NULL, NULL}};
    int rc = cli_parse("trace stats", argc, argv, opts, pos, 1, &npos, help_stats);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    if (npos != 1)
        return cli_usage_error("trace stats", "expected one trace FILE");
    ws_trace *t;
    if ((rc = open_file(pos[0], format, skip_bad, &t)))
        return rc;
    ws_trace_stats st;
    ws_err err = {0};
    rc = ws_trace_stats_compute(t, &st, &err);
    ws_trace_close(t);
    if (rc)
        return cli_fail(&err);
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "file", json_string(pos[0]));
        json_object_set_new(o, "format", json_string(ws_trace_format_name(st.format)));
        json_object_set_new(o, "requests", json_integer((json_int_t)st.requests));
        json_object_set_new(o, "first_arrival_s", json_real(st.first_s));
        json_object_set_new(o, "duration_s", json_real(st.duration_s));
        json_object_set_new(o, "rate_per_s", json_real(st.rate));
        json_object_set_new(o, "prompt_tokens", dist_json(&st.prompt));
        json_object_set_new(o, "output_tokens", dist_json(&st.output));
        json_object_set_new(o, "sessions", json_integer((json_int_t)st.sessions));
        json_object_set_new(o, "lines", json_integer((json_int_t)st.counts.lines));
        json_object_set_new(o, "bad_rows_skipped", json_integer((json_int_t)st.counts.bad));
        json_object_set_new(o, "failed_requests_skipped",
                            json_integer((json_int_t)st.counts.failed));
        if (st.counts.bad)
            json_object_set_new(o, "first_bad_row", json_string(st.counts.first_bad));
        return cli_print_json(o);
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
    const char *arrivals = NULL, *rate = NULL, *cv = NULL, *clients = NULL, *think = NULL,
               *requests = NULL, *pdist = NULL, *odist = NULL, *seed = NULL, *out = NULL;
    int npos = 0;
    char *pos[1];
    const cli_opt opts[] = {{"arrivals", &arrivals, NULL},
                            {"rate", &rate, NULL},
                            {"cv", &cv, NULL},
                            {"clients", &clients, NULL},
                            {"think", &think, NULL},
                            {"requests", &requests, NULL},
                            {"prompt-dist", &pdist, NULL},
                            {"output-dist", &odist, NULL},
                            {"seed", &seed, NULL},
                            {"out", &out, NULL},
                            {NULL, NULL, NULL}};
    const char *cmd = "trace gen";
    int rc = cli_parse(cmd, argc, argv, opts, pos, 0, &npos, help_gen);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    ws_err err = {0};
    ws_trace_gen g = {0};
    const cli_gen_args ga = {arrivals, rate, cv, clients, think, requests, pdist, odist};
    if ((rc = cli_gen_parse(cmd, &ga, &g)))
        return rc;
    long long s = 0;
    if (seed && ws_parse_int64(seed, 0, (1LL << 62), &s))
        return cli_usage_error(cmd, "--seed '%s': not an integer in 0..2^62", seed);
    g.seed = (uint64_t)s;
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
    const char *format = NULL, *out = NULL;
    int skip_bad = 0, npos = 0;
    char *pos[1];
    const cli_opt opts[] = {{"format", &format, NULL},
                            {"skip-bad", NULL, &skip_bad},
                            {"out", &out, NULL},
                            {NULL, NULL, NULL}};
    int rc = cli_parse("trace convert", argc, argv, opts, pos, 1, &npos, help_convert);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    if (npos != 1 || !out)
        return cli_usage_error("trace convert", "expected one trace FILE and --out FILE");
    ws_trace *t;
    if ((rc = open_file(pos[0], format, skip_bad, &t)))
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
