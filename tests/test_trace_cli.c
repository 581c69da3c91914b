/* test_trace_cli: `writescope trace stats|gen|convert` end to end: text and --json
 * output, --help on each, a malformed row as one line naming the file and line with exit
 * 1, --skip-bad counting, usage errors with exit 2, gen reproducible per seed, convert
 * from an importer to our CSV. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

static char g_dir[64];

static void fresh_dir(void)
{
    th_tmpdir(g_dir, sizeof g_dir);
}

TestSuite(trace_cli, .init = fresh_dir);

static th_run run(const char *const *args)
{
    return th_writescope(args, NULL);
}

static void expect_exit(const char *const *args, int status, const char *needle)
{
    th_run r = run(args);
    cr_assert_eq(r.status, status, "exit %d, stderr: %s", r.status, r.err);
    cr_assert_eq(th_lines(r.err), 1, "one line: %s", r.err);
    cr_assert_neq(strstr(r.err, needle), NULL, "stderr '%s' lacks '%s'", r.err, needle);
    th_run_free(&r);
}

Test(trace_cli, help_on_each)
{
    const char *cmds[][3] = {{"trace", "--help", NULL},
                             {"trace", "stats", "--help"},
                             {"trace", "gen", "--help"},
                             {"trace", "convert", "--help"}};
    for (size_t i = 0; i < 4; i++) {
        th_run r = run((const char *[]){cmds[i][0], cmds[i][1], cmds[i][2], NULL});
        cr_assert_eq(r.status, 0);
        cr_assert_neq(strstr(r.out, "usage: writescope trace"), NULL, "%s", r.out);
        th_run_free(&r);
    }
    th_run r = run((const char *[]){"--help", NULL});
    cr_assert_neq(strstr(r.out, "trace"), NULL, "the command table lists trace");
    th_run_free(&r);
}

Test(trace_cli, stats_text_and_json)
{
    char path[256];
    th_write(g_dir, "b.csv",
             "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
             "5,ChatGPT,100,10,110,Conversation log\n"
             "6,ChatGPT,300,0,300,Conversation log\n"
             "9,GPT-4,200,30,230,API log\n",
             path, sizeof path);
    th_run r = run((const char *[]){"trace", "stats", path, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_neq(strstr(r.out, "(burstgpt)"), NULL, "%s", r.out);
    cr_expect_neq(strstr(r.out, "requests         2\n"), NULL, "%s", r.out);
    cr_expect_neq(strstr(r.out, "duration         4.000 s"), NULL, "%s", r.out);
    cr_expect_neq(strstr(r.out, "failed requests  1 skipped (0 response tokens)"), NULL, "%s",
                  r.out);
    th_run_free(&r);

    json_t *v = th_writescope_json((const char *[]){"trace", "stats", path, "--json", NULL}, NULL);
    cr_expect_eq(json_integer_value(json_object_get(v, "requests")), 2);
    cr_expect_eq(json_integer_value(json_object_get(v, "failed_requests_skipped")), 1);
    cr_expect_eq(json_real_value(json_object_get(v, "rate_per_s")), 0.5);
    json_t *p = json_object_get(v, "prompt_tokens");
    cr_expect_eq(json_real_value(json_object_get(p, "mean")), 150);
    cr_expect_eq(json_integer_value(json_object_get(p, "max")), 200);
    cr_expect_str_eq(json_string_value(json_object_get(v, "format")), "burstgpt");
    json_decref(v);
}

Test(trace_cli, malformed_rows_and_skip_bad)
{
    char path[256];
    th_write(g_dir, "bad.csv",
             "arrival_s,prompt_tokens,output_tokens\n0,10,1\n1,ten,1\n2,10,1\n1.5,10,1\n", path,
             sizeof path);
    char want[300];
    snprintf(want, sizeof want, "%s:3: prompt_tokens 'ten': not an integer", path);
    expect_exit((const char *[]){"trace", "stats", path, NULL}, 1, want);
    char out[300];
    snprintf(out, sizeof out, "%s/out.csv", g_dir);
    expect_exit((const char *[]){"trace", "convert", path, "--out", out, NULL}, 1, want);
    cr_expect_eq(th_dir_entries(g_dir), 1, "a failed convert leaves no file");

    json_t *v = th_writescope_json(
        (const char *[]){"trace", "stats", path, "--skip-bad", "--json", NULL}, NULL);
    cr_expect_eq(json_integer_value(json_object_get(v, "requests")), 2);
    cr_expect_eq(json_integer_value(json_object_get(v, "bad_rows_skipped")), 2);
    cr_expect_neq(strstr(json_string_value(json_object_get(v, "first_bad_row")), want), NULL);
    json_decref(v);

    th_run r = run((const char *[]){"trace", "convert", path, "--out", out, "--skip-bad", NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_neq(strstr(r.out, "wrote 2 requests"), NULL, "%s", r.out);
    cr_expect_neq(strstr(r.out, "skipped 2 malformed rows"), NULL, "%s", r.out);
    th_run_free(&r);

    expect_exit((const char *[]){"trace", "stats", g_dir, NULL}, 1, "not a regular file");
    expect_exit((const char *[]){"trace", "stats", path, "--format", "csv", NULL}, 2,
                "unknown trace format 'csv'");
    expect_exit((const char *[]){"trace", "stats", NULL}, 2, "expected one trace FILE");
    expect_exit((const char *[]){"trace", "frobnicate", NULL}, 2, "unknown subcommand");
}

Test(trace_cli, gen_reproducible_and_convert)
{
    const char *gen[] = {"trace",
                         "gen",
                         "--arrivals",
                         "gamma",
                         "--rate",
                         "4",
                         "--cv",
                         "2",
                         "--requests",
                         "200",
                         "--prompt-dist",
                         "lognormal:4000:1",
                         "--output-dist",
                         "uniform:16:256",
                         "--seed",
                         "9",
                         NULL};
    th_run a = run(gen), b = run(gen);
    cr_assert_eq(a.status, 0, "%s", a.err);
    cr_expect_str_eq(a.out, b.out);
    cr_expect_eq(th_lines(a.out), 201);
    cr_expect_eq(strncmp(a.out, "arrival_s,prompt_tokens,output_tokens\n0,", 40), 0, "%s", a.out);
    th_run_free(&b);

    /* the generated CSV read back: 200 requests; to a file: the same bytes */
    char path[256], out[300], conv[300];
    th_write(g_dir, "g.csv", a.out, path, sizeof path);
    json_t *v = th_writescope_json((const char *[]){"trace", "stats", path, "--json", NULL}, NULL);
    cr_expect_eq(json_integer_value(json_object_get(v, "requests")), 200);
    json_decref(v);
    snprintf(out, sizeof out, "%s/g2.csv", g_dir);
    const char *gen2[20];
    memcpy(gen2, gen, sizeof gen);
    gen2[16] = "--out";
    gen2[17] = out;
    gen2[18] = NULL;
    th_run r = run(gen2);
    cr_assert_eq(r.status, 0, "%s", r.err);
    size_t len;
    char *text = th_slurp(out, &len);
    cr_expect_str_eq(text, a.out);
    free(text);
    th_run_free(&r);
    th_run_free(&a);

    /* convert: Azure to ours */
    th_write(g_dir, "az.csv",
             "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n"
             "2023-11-16 18:17:04.0319600,3180,8\n",
             path, sizeof path);
    snprintf(conv, sizeof conv, "%s/conv.csv", g_dir);
    r = run((const char *[]){"trace", "convert", path, "--out", conv, NULL});
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_neq(strstr(r.out, "wrote 2 requests"), NULL, "%s", r.out);
    th_run_free(&r);
    text = th_slurp(conv, &len);
    cr_expect_str_eq(text, "arrival_s,prompt_tokens,output_tokens\n0,4808,10\n0.052,3180,8\n");
    free(text);

    expect_exit((const char *[]){"trace", "gen", "--arrivals", "poisson", "--requests", "5",
                                 "--prompt-dist", "fixed:1", "--output-dist", "fixed:1", NULL},
                2, "needs --rate");
    expect_exit((const char *[]){"trace", "gen", "--arrivals", "closed", "--clients", "4",
                                 "--requests", "5", "--prompt-dist", "fixed:1", "--output-dist",
                                 "fixed:1", NULL},
                1, "closed-loop");
    expect_exit((const char *[]){"trace", "gen", "--arrivals", "poisson", "--rate", "1",
                                 "--requests", "5", "--prompt-dist", "zipf:1", "--output-dist",
                                 "fixed:1", NULL},
                2, "zipf:S:MAX");
}

/* --out never writes through a link or into a FIFO or device: refused with one line, the
 * target and what it points at untouched, no temporary file left beside it. */
Test(trace_cli, out_refuses_what_is_not_a_regular_file)
{
    char victim[256], link[300], fifo[300], dev[300];
    th_write(g_dir, "victim.txt", "keep me\n", victim, sizeof victim);
    snprintf(dev, sizeof dev, "%s/dev.csv", g_dir);
    th_device_like(dev);
    snprintf(link, sizeof link, "%s/t.csv", g_dir);
    cr_assert_eq(symlink(victim, link), 0);
    snprintf(fifo, sizeof fifo, "%s/f.csv", g_dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    const char *targets[] = {link, fifo, dev};
    for (int i = 0; i < 3; i++) {
        const char *gen[] = {"trace", "gen", "--arrivals", "poisson", "--rate", "1", "--requests",
                             "3", "--prompt-dist", "fixed:10", "--output-dist", "fixed:2",
                             "--out", targets[i], NULL};
        expect_exit(gen, 1, targets[i]);
        char src[300];
        th_write(g_dir, "s.csv", "arrival_s,prompt_tokens,output_tokens\n0,5,1\n", src,
                 sizeof src);
        const char *conv[] = {"trace", "convert", src, "--out", targets[i], NULL};
        expect_exit(conv, 1, targets[i]);
    }
    char *text = th_slurp(victim, NULL);
    cr_assert_str_eq(text, "keep me\n");
    free(text);
    struct stat st;
    cr_assert_eq(lstat(link, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "the link is still a link");
    cr_assert_eq(stat(fifo, &st), 0);
    cr_assert(S_ISFIFO(st.st_mode), "the FIFO is still a FIFO");
    cr_assert(th_is_device_like(dev), "the device-like file is as it was");
}
