/* test_trace: the trace reader (traces/trace.h) and its importers on small inline samples:
 * detection, each format's fields, arrival shifting, malformed rows (one error naming the
 * file and line; skip_bad counts them), bounds, the line cap, out-of-order arrivals, the
 * writer (round trip, no partial file), and constant memory over a long trace. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "trace.h"

#define MAXR 64

typedef struct got {
    int n;
    ws_trace_req r[MAXR];
    ws_trace_format format;
    ws_trace_counts counts;
    int rc;     /* last ws_trace_next: 0 end, -1 error */
    ws_err err; /* error of open or next */
} got;

/* Reads a whole inline trace; stops at the end or the first error. */
static got read_all(const char *text, ws_trace_format f, int skip_bad)
{
    got g;
    memset(&g, 0, sizeof g);
    ws_trace_opts o = {.format = f, .skip_bad = skip_bad};
    ws_trace *t;
    if (ws_trace_open_mem("t.csv", text, strlen(text), &o, &t, &g.err)) {
        g.rc = -2;
        return g;
    }
    g.format = ws_trace_format_of(t);
    ws_trace_req r;
    while ((g.rc = ws_trace_next(t, &r, &g.err)) == 1) {
        cr_assert_lt(g.n, MAXR);
        g.r[g.n++] = r;
    }
    g.counts = *ws_trace_get_counts(t);
    ws_trace_close(t);
    return g;
}

static void expect_req(const got *g, int i, double arr, int p, int o, long long s)
{
    cr_assert_lt(i, g->n);
    cr_expect(fabs(g->r[i].arrival_s - arr) < 1e-9, "row %d: arrival %.12g, expected %.12g", i,
              g->r[i].arrival_s, arr);
    cr_expect_eq(g->r[i].prompt_tokens, p, "row %d prompt", i);
    cr_expect_eq(g->r[i].output_tokens, o, "row %d output", i);
    cr_expect_eq(g->r[i].session_id, s, "row %d session", i);
    cr_expect_eq(g->r[i].id, (uint64_t)i);
}

/* A strict read that must fail at `line` with `needle` in the message. */
static void expect_bad(const char *text, ws_trace_format f, int line, const char *needle)
{
    got g = read_all(text, f, 0);
    cr_assert(g.rc < 0, "no error for:\n%s", text);
    char where[32];
    snprintf(where, sizeof where, "t.csv:%d:", line);
    cr_expect_neq(strstr(g.err.msg, where), NULL, "'%s' lacks '%s'", g.err.msg, where);
    cr_expect_neq(strstr(g.err.msg, needle), NULL, "'%s' lacks '%s'", g.err.msg, needle);
    cr_expect_null(strchr(g.err.msg, '\n'), "one line: %s", g.err.msg);
}

Test(trace, ours_with_and_without_sessions)
{
    got g = read_all("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,200,20\n2.25,300,30\n",
                     WS_TRACE_AUTO, 0);
    cr_assert_eq(g.rc, 0, "%s", g.err.msg);
    cr_assert_eq(g.format, WS_TRACE_OURS);
    cr_assert_eq(g.n, 3);
    expect_req(&g, 0, 0, 100, 10, -1);
    expect_req(&g, 2, 2.25, 300, 30, -1);

    g = read_all("arrival_s,prompt_tokens,output_tokens,session_id\r\n1.5,7,8,3\r\n1.5,9,10,\r\n"
                 "\r\n4,11,12,3",
                 WS_TRACE_AUTO, 0);
    cr_assert_eq(g.rc, 0, "%s", g.err.msg);
    cr_assert_eq(g.n, 3);
    expect_req(&g, 0, 1.5, 7, 8, 3); /* our CSV is read as written: no shift */
    expect_req(&g, 1, 1.5, 9, 10, -1);
    expect_req(&g, 2, 4, 11, 12, 3); /* last line without a newline */
    cr_expect_eq(g.counts.lines, 5);
}

Test(trace, azure_timestamps_relative_to_the_first_row)
{
    got g = read_all("\xEF\xBB\xBFTIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:17:03.9799600,4808,10\n"
                     "2023-11-16 18:17:04.0319600,3180,8\n"
                     "2023-11-16 23:59:59.9999999,1,1\n"
                     "2023-11-17 00:00:00,2,2\n",
                     WS_TRACE_AUTO, 0);
    cr_assert_eq(g.rc, 0, "%s", g.err.msg);
    cr_assert_eq(g.format, WS_TRACE_AZURE);
    cr_assert_eq(g.n, 4);
    expect_req(&g, 0, 0, 4808, 10, -1);
    expect_req(&g, 1, 0.052, 3180, 8, -1);
    /* 18:17:03.97996 -> 23:59:59.9999999 and across midnight */
    expect_req(&g, 2, 5 * 3600 + 42 * 60 + 56 + 0.0200399, 1, 1, -1);
    expect_req(&g, 3, 5 * 3600 + 42 * 60 + 56 + 0.02004, 2, 2, -1);

    expect_bad("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-02-29 00:00:00,1,1\n", WS_TRACE_AUTO,
               2, "TIMESTAMP");
    expect_bad("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,x,1\n",
               WS_TRACE_AUTO, 2, "ContextTokens 'x'");
}

/* The hash_ids come through with their request, valid until the next one is read. */
Test(trace, mooncake_hash_ids)
{
    const char *text = "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 5, "
                       "\"hash_ids\": [7, 8, 9]}\n"
                       "{\"timestamp\": 10, \"input_length\": 40, \"output_length\": 5}\n";
    ws_trace *t;
    ws_err err = {0};
    cr_assert_eq(ws_trace_open_mem("m", text, strlen(text), NULL, &t, &err), 0, "%s", err.msg);
    ws_trace_req r;
    cr_assert_eq(ws_trace_next(t, &r, &err), 1);
    cr_assert_eq(r.n_blocks, 3);
    cr_assert_eq(r.blocks[0], 7);
    cr_assert_eq(r.blocks[2], 9);
    cr_assert_eq(ws_trace_next(t, &r, &err), 1);
    cr_assert_eq(r.n_blocks, 0);
    cr_assert_null(r.blocks);
    ws_trace_close(t);
}

Test(trace, mooncake_jsonl)
{
    got g = read_all("{\"timestamp\": 1000, \"input_length\": 6758, \"output_length\": 500, "
                     "\"hash_ids\": [0, 1, 2]}\n"
                     "{\"timestamp\": 1500, \"input_length\": 7, \"output_length\": 3, "
                     "\"hash_ids\": []}\n"
                     "\n"
                     "{\"input_length\": 9, \"output_length\": 4, \"timestamp\": 4000.5}\n",
                     WS_TRACE_AUTO, 0);
    cr_assert_eq(g.rc, 0, "%s", g.err.msg);
    cr_assert_eq(g.format, WS_TRACE_MOONCAKE);
    cr_assert_eq(g.n, 3);
    expect_req(&g, 0, 0, 6758, 500, -1);
    expect_req(&g, 1, 0.5, 7, 3, -1);
    expect_req(&g, 2, 3.0005, 9, 4, -1);

    expect_bad("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n"
               "{\"timestamp\": 1, \"input_length\": 1}\n",
               WS_TRACE_AUTO, 2, "no \"output_length\"");
    expect_bad("{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 1, "
               "\"hash_ids\": [1, 2, 3]}\n",
               WS_TRACE_AUTO, 1, "at most 2 hashes");
    expect_bad("{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 1, "
               "\"hash_ids\": [1, -2]}\n",
               WS_TRACE_AUTO, 1, "non-negative integer");
    expect_bad(
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n{\"timestamp\": 1,\n",
        WS_TRACE_AUTO, 2, "not JSON");
    expect_bad(
        "{\"timestamp\": 0, \"input_length\": 1, \"input_length\": 2, \"output_length\": 1}\n",
        WS_TRACE_AUTO, 1, "not JSON");
    expect_bad("{\"timestamp\": 0, \"input_length\": 1.5, \"output_length\": 1}\n", WS_TRACE_AUTO,
               1, "not an integer");
}

Test(trace, burstgpt_failed_requests_are_counted_and_skipped)
{
    got g = read_all("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                     "5,ChatGPT,472,18,490,Conversation log\n"
                     "45,ChatGPT,1087,0,1087,Conversation log\n"
                     "118,GPT-4,417,276,693,\"API log\"\n"
                     "120,ChatGPT,20,0,20,API log\n",
                     WS_TRACE_AUTO, 0);
    cr_assert_eq(g.rc, 0, "%s", g.err.msg);
    cr_assert_eq(g.format, WS_TRACE_BURSTGPT);
    cr_assert_eq(g.n, 2);
    expect_req(&g, 0, 0, 472, 18, -1);
    expect_req(&g, 1, 113, 417, 276, -1);
    cr_expect_eq(g.counts.failed, 2);
    cr_expect_eq(g.counts.bad, 0);
    cr_expect_eq(g.counts.requests, 2);
}

Test(trace, vidur_columns_found_by_name)
{
    got g = read_all("request_id,arrived_at,num_prefill_tokens,num_decode_tokens\n"
                     "0,10.25,512,64\n1,10.75,1024,128\n",
                     WS_TRACE_AUTO, 0);
    cr_assert_eq(g.rc, 0, "%s", g.err.msg);
    cr_assert_eq(g.format, WS_TRACE_VIDUR);
    cr_assert_eq(g.n, 2);
    expect_req(&g, 0, 0, 512, 64, -1);
    expect_req(&g, 1, 0.5, 1024, 128, -1);
    expect_bad("arrived_at,num_prefill_tokens\n0,1\n", WS_TRACE_VIDUR, 1,
               "no 'num_decode_tokens' column");
}

Test(trace, format_forced_and_unknown)
{
    /* Forcing a format that does not match is an error on the header, naming it. */
    got g = read_all("arrival_s,prompt_tokens,output_tokens\n0,1,1\n", WS_TRACE_AZURE, 0);
    cr_assert_eq(g.rc, -2);
    cr_expect_neq(strstr(g.err.msg, "t.csv:1: azure: header: no 'TIMESTAMP' column"), NULL, "%s",
                  g.err.msg);
    g = read_all("a,b,c\n1,2,3\n", WS_TRACE_AUTO, 0);
    cr_assert_eq(g.rc, -2);
    cr_expect_neq(strstr(g.err.msg, "t.csv:1: unknown trace format"), NULL, "%s", g.err.msg);
    g = read_all("\n\n", WS_TRACE_AUTO, 0);
    cr_assert_eq(g.rc, -2);
    cr_expect_neq(strstr(g.err.msg, "empty trace"), NULL, "%s", g.err.msg);
    g = read_all("arrival_s,output_tokens,prompt_tokens\n", WS_TRACE_AUTO, 0);
    cr_assert_eq(g.rc, -2);
    cr_expect_neq(strstr(g.err.msg, "header must be"), NULL, "%s", g.err.msg);

    /* the same failures with no ws_err to fill: still failures */
    static const char *const bad_heads[] = {"a,b,c\n", "arrival_s,\"x\n", "\"TIMESTAMP\n",
                                            "Timestamp,Request tokens,Response tokens,\"\n"};
    for (size_t i = 0; i < sizeof bad_heads / sizeof bad_heads[0]; i++) {
        ws_trace *t = NULL;
        cr_expect_neq(ws_trace_open_mem("x", bad_heads[i], strlen(bad_heads[i]), NULL, &t, NULL),
                      0, "'%s' opened", bad_heads[i]);
        cr_expect_null(t);
    }
    ws_trace_opts vid = {.format = WS_TRACE_VIDUR};
    ws_trace *t = NULL;
    cr_expect_neq(ws_trace_open_mem("x", "arrived_at,\"\n", 12, &vid, &t, NULL), 0);

    ws_trace_format f;
    ws_err err = {0};
    cr_assert_eq(ws_trace_format_parse("mooncake", &f, &err), 0);
    cr_assert_eq(f, WS_TRACE_MOONCAKE);
    cr_assert_eq(ws_trace_format_parse("csv", &f, &err), WS_EINVAL);
    cr_expect_neq(strstr(err.msg, "burstgpt"), NULL, "%s", err.msg);
}

static const char *k_bad_rows[][3] = {
    /* row, message part */
    {"1,2", "2 fields, the header has 3", ""},
    {"1,2,3,4", "4 fields", ""},
    {"x,2,3", "arrival_s 'x': not a number", ""},
    {"-1,2,3", "arrival_s -1: outside", ""},
    {"nan,2,3", "not a number", ""},
    {"1e308,2,3", "arrival_s 1e+308: outside", ""},
    {"1e999,2,3", "arrival_s '1e999': out of range", ""},
    {"1,1e308,3", "prompt_tokens 1e+308: outside 1..16777216", ""},
    {"1,1e999,3", "prompt_tokens '1e999': out of range", ""},
    {"1,0,3", "prompt_tokens 0: outside 1..16777216", ""},
    {"1,16777217,3", "prompt_tokens 16777217: outside", ""},
    {"1,2,3.5", "output_tokens '3.5': not an integer", ""},
    {"1,2,", "output_tokens is empty", ""},
    {"1,2,3abc", "not an integer", ""},
    {"1,\"2,3", "unterminated quoted field", ""},
    {"0.5,2,3", "before the previous row's 1 s", ""},
};

Test(trace, malformed_rows_name_file_and_line)
{
    for (size_t i = 0; i < sizeof k_bad_rows / sizeof k_bad_rows[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, "arrival_s,prompt_tokens,output_tokens\n1,5,5\n%s\n2,5,5\n",
                 k_bad_rows[i][0]);
        expect_bad(text, WS_TRACE_AUTO, 3, k_bad_rows[i][1]);
        /* with skip_bad: counted, the good rows kept, the first message kept */
        got g = read_all(text, WS_TRACE_AUTO, 1);
        cr_assert_eq(g.rc, 0, "%s", g.err.msg);
        cr_expect_eq(g.n, 2, "row '%s'", k_bad_rows[i][0]);
        cr_expect_eq(g.counts.bad, 1);
        cr_expect_neq(strstr(g.counts.first_bad, "t.csv:3:"), NULL, "%s", g.counts.first_bad);
    }
    /* the session column: an integer or empty */
    expect_bad("arrival_s,prompt_tokens,output_tokens,session_id\n1,5,5,abc\n", WS_TRACE_AUTO, 2,
               "session_id 'abc'");
    /* an embedded NUL */
    static const char nul[] = "arrival_s,prompt_tokens,output_tokens\n1,5\0,5\n";
    got g;
    memset(&g, 0, sizeof g);
    ws_trace *t;
    cr_assert_eq(ws_trace_open_mem("t.csv", nul, sizeof nul - 1, NULL, &t, &g.err), 0);
    ws_trace_req r;
    cr_assert_eq(ws_trace_next(t, &r, &g.err), -1);
    cr_expect_neq(strstr(g.err.msg, "t.csv:2: NUL byte"), NULL, "%s", g.err.msg);
    cr_expect_eq(ws_trace_next(t, &r, &g.err), 0, "the source stays at its end");
    ws_trace_close(t);
}

Test(trace, skip_bad_counts_every_bad_row)
{
    got g = read_all("arrival_s,prompt_tokens,output_tokens\n1,5,5\nbad\n2,x,1\n3,1,1\n2,1,1\n"
                     "3,1,1\n",
                     WS_TRACE_AUTO, 1);
    cr_assert_eq(g.rc, 0);
    cr_expect_eq(g.n, 3);
    cr_expect_eq(g.counts.bad, 3);
    cr_expect_eq(g.counts.requests, 3);
    cr_expect_eq(g.counts.lines, 7);
    cr_expect_neq(strstr(g.counts.first_bad, "t.csv:3: 1 fields"), NULL, "%s", g.counts.first_bad);
}

Test(trace, line_cap)
{
    /* A line over WS_TRACE_LINE_MAX is one bad row: an error, or skipped as a whole. */
    size_t big = WS_TRACE_LINE_MAX + 100;
    const char *head = "arrival_s,prompt_tokens,output_tokens\n0,1,1\n";
    char *text = malloc(strlen(head) + big + 32);
    strcpy(text, head);
    size_t n = strlen(text);
    memset(text + n, '7', big);
    strcpy(text + n + big, "\n1,2,2\n");
    got g = read_all(text, WS_TRACE_AUTO, 0);
    cr_assert_eq(g.rc, -1);
    cr_expect_neq(strstr(g.err.msg, "t.csv:3: line longer than 1048576 bytes"), NULL, "%s",
                  g.err.msg);
    g = read_all(text, WS_TRACE_AUTO, 1);
    cr_assert_eq(g.rc, 0, "%s", g.err.msg);
    cr_expect_eq(g.n, 2);
    cr_expect_eq(g.counts.bad, 1);
    expect_req(&g, 1, 1, 2, 2, -1);
    free(text);
}

Test(trace, files_regular_only)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    ws_trace *t;
    ws_err err = {0};
    cr_assert_neq(ws_trace_open(dir, NULL, &t, &err), 0);
    cr_expect_neq(strstr(err.msg, "not a regular file"), NULL, "%s", err.msg);
    snprintf(path, sizeof path, "%s/missing.csv", dir);
    cr_assert_eq(ws_trace_open(path, NULL, &t, &err), WS_EIO);
    cr_expect_neq(strstr(err.msg, "missing.csv: cannot open"), NULL, "%s", err.msg);
}

Test(trace, write_round_trip_and_no_partial_file)
{
    const char *text = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                       "2023-11-16 18:17:03.9799600,4808,10\n"
                       "2023-11-16 18:17:04.0319601,3180,8\n"
                       "2023-11-16 19:17:04.0319601,3,1\n";
    char dir[64], out[256], tmpname[300];
    th_tmpdir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/out.csv", dir);
    ws_trace *t, *u;
    ws_err err = {0};
    cr_assert_eq(ws_trace_open_mem("a.csv", text, strlen(text), NULL, &t, &err), 0);
    uint64_t n;
    cr_assert_eq(ws_trace_write_file(t, out, &n, &err), 0, "%s", err.msg);
    ws_trace_close(t);
    cr_expect_eq(n, 3);
    cr_assert_eq(th_dir_entries(dir), 1, "only the output is left");

    /* read back: the same requests, bit for bit */
    cr_assert_eq(ws_trace_open_mem("a.csv", text, strlen(text), NULL, &t, &err), 0);
    cr_assert_eq(ws_trace_open(out, NULL, &u, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_trace_format_of(u), WS_TRACE_OURS);
    ws_trace_req a, b;
    int k = 0;
    while (ws_trace_next(t, &a, &err) == 1) {
        cr_assert_eq(ws_trace_next(u, &b, &err), 1);
        cr_expect_eq(a.arrival_s, b.arrival_s, "row %d: %.17g vs %.17g", k, a.arrival_s,
                     b.arrival_s);
        cr_expect_eq(a.prompt_tokens, b.prompt_tokens);
        cr_expect_eq(a.output_tokens, b.output_tokens);
        k++;
    }
    cr_expect_eq(ws_trace_next(u, &b, &err), 0);
    ws_trace_close(t);
    ws_trace_close(u);

    /* a source that fails half-way leaves no file, and the old one untouched */
    const char *broken = "arrival_s,prompt_tokens,output_tokens\n0,1,1\n1,bad,1\n";
    cr_assert_eq(ws_trace_open_mem("b.csv", broken, strlen(broken), NULL, &t, &err), 0);
    cr_assert_neq(ws_trace_write_file(t, out, &n, &err), 0);
    ws_trace_close(t);
    cr_expect_neq(strstr(err.msg, "b.csv:3: prompt_tokens 'bad'"), NULL, "%s", err.msg);
    cr_expect_eq(th_dir_entries(dir), 1);
    snprintf(tmpname, sizeof tmpname, "%s", out);
    char *kept = th_slurp(out, NULL);
    cr_expect_neq(strstr(kept, "3180"), NULL, "the earlier output is kept");
    free(kept);
}

Test(trace, sessions_are_written_back)
{
    const char *text = "arrival_s,prompt_tokens,output_tokens,session_id\n0,1,1,4\n0.1,2,2,\n";
    ws_trace *t;
    ws_err err = {0};
    cr_assert_eq(ws_trace_open_mem("s.csv", text, strlen(text), NULL, &t, &err), 0);
    cr_assert(ws_trace_has_sessions(t));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(ws_trace_write(t, f, "mem", NULL, &err), 0, "%s", err.msg);
    fclose(f);
    ws_trace_close(t);
    cr_expect_str_eq(buf, text);
    free(buf);
}

/* Resident set size of this process, kB (VmHWM: the peak). */
static long peak_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

Test(trace, memory_does_not_grow_with_the_trace)
{
    /* 2 million rows (about 30 MB) read from a file: the reader's peak memory stays near
     * its fixed buffer, far below the file's size. */
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/long.csv", dir);
    FILE *f = fopen(path, "w");
    fputs("arrival_s,prompt_tokens,output_tokens\n", f);
    for (int i = 0; i < 2000000; i++)
        fprintf(f, "%d.5,%d,%d\n", i, 1000 + i % 777, 1 + i % 300);
    fclose(f);
    long before = peak_rss_kb();
    ws_trace *t;
    ws_err err = {0};
    cr_assert_eq(ws_trace_open(path, NULL, &t, &err), 0, "%s", err.msg);
    ws_trace_req r;
    uint64_t n = 0, sum = 0;
    while (ws_trace_next(t, &r, &err) == 1) {
        n++;
        sum += (uint64_t)r.output_tokens;
    }
    ws_trace_close(t);
    long after = peak_rss_kb();
    unlink(path);
    cr_assert_eq(n, 2000000);
    cr_expect_eq(sum, 2000000ull / 300 * (300 * 301 / 2) + (2000000 % 300) * 0 +
                          /* the last 2000000 % 300 = 200 rows are 1..200 */
                          200 * 201 / 2);
    cr_expect_lt(after - before, 8 * 1024, "peak RSS grew by %ld kB reading a 30 MB trace",
                 after - before);
}
