/* test_trace_stats: the trace summary (traces/trace_stats.h) on a hand-computed sample,
 * and the importers on the real traces in ../shared/traces (or $WRITESCOPE_TRACES):
 * counts, token sums, percentiles and durations against figures computed once,
 * independently, with Python's csv/json modules (nearest-rank percentiles); each test
 * skips with one line when the trace is absent. The traces are never copied here. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers.h"
#include "trace.h"
#include "trace_stats.h"
#include "ws_util.h"

static ws_trace_stats stats_of(const char *text, int skip_bad)
{
    ws_trace *t;
    ws_err err = {0};
    ws_trace_opts o = {.skip_bad = skip_bad};
    cr_assert_eq(ws_trace_open_mem("s.csv", text, strlen(text), &o, &t, &err), 0, "%s", err.msg);
    ws_trace_stats st;
    cr_assert_eq(ws_trace_stats_compute(t, &st, &err), 0, "%s", err.msg);
    ws_trace_close(t);
    return st;
}

Test(trace_stats, golden_small_trace)
{
    /* prompts 10..100 (step 10), outputs 1..10, four sessions, 2 s long */
    ws_trace_stats st = stats_of("arrival_s,prompt_tokens,output_tokens,session_id\n"
                                 "1,50,5,7\n1.2,10,1,7\n1.4,100,10,2\n1.6,20,2,\n1.8,90,9,2\n"
                                 "2,30,3,9\n2.2,80,8,1\n2.4,40,4,9\n2.6,70,7,1\n3,60,6,7\n",
                                 0);
    cr_expect_eq(st.format, WS_TRACE_OURS);
    cr_expect_eq(st.requests, 10);
    cr_expect_eq(st.first_s, 1);
    cr_expect_eq(st.last_s, 3);
    cr_expect_eq(st.duration_s, 2);
    cr_expect_eq(st.rate, 5);
    cr_expect_eq(st.prompt.sum, 550);
    cr_expect_eq(st.prompt.mean, 55);
    cr_expect_eq(st.prompt.min, 10);
    cr_expect_eq(st.prompt.p50, 50); /* nearest rank: the 5th of 10 */
    cr_expect_eq(st.prompt.p90, 90); /* the 9th */
    cr_expect_eq(st.prompt.p99, 100);
    cr_expect_eq(st.prompt.max, 100);
    cr_expect_eq(st.output.mean, 5.5);
    cr_expect_eq(st.output.p50, 5);
    cr_expect_eq(st.sessions, 4);
    cr_expect_eq(st.counts.bad, 0);

    /* one request: every percentile is it; no duration, no rate */
    st = stats_of("arrival_s,prompt_tokens,output_tokens\n5,7,3\n", 0);
    cr_expect_eq(st.prompt.p50, 7);
    cr_expect_eq(st.prompt.p99, 7);
    cr_expect_eq(st.duration_s, 0);
    cr_expect_eq(st.rate, 0);
    cr_expect_eq(st.sessions, 0);

    /* bad rows skipped are counted in the summary */
    st = stats_of("arrival_s,prompt_tokens,output_tokens\n0,1,1\n1,0,1\n2,1,1\n", 1);
    cr_expect_eq(st.requests, 2);
    cr_expect_eq(st.counts.bad, 1);
    cr_expect_neq(strstr(st.counts.first_bad, "s.csv:3: prompt_tokens 0"), NULL, "%s",
                  st.counts.first_bad);

    /* no requests at all */
    st = stats_of("arrival_s,prompt_tokens,output_tokens\n", 0);
    cr_expect_eq(st.requests, 0);
    cr_expect_eq(st.prompt.max, 0);
}

Test(trace_stats, percentile_nearest_rank)
{
    int32_t v[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    cr_expect_eq(ws_trace_percentile(v, 20, 0.5), 10);
    cr_expect_eq(ws_trace_percentile(v, 20, 0.9), 18);
    cr_expect_eq(ws_trace_percentile(v, 20, 0.99), 20);
    cr_expect_eq(ws_trace_percentile(v, 20, 0.01), 1);
    cr_expect_eq(ws_trace_percentile(v, 1, 0.5), 1);
}

typedef struct expected {
    const char *file;
    ws_trace_format format;
    uint64_t requests;
    double prompt_sum, output_sum, duration_s;
    int prompt_p50, prompt_p90, prompt_p99, prompt_max;
    int output_p50, output_p90, output_p99, output_max;
} expected;

/* Computed once with Python (csv.DictReader / json.loads per line; arrivals as seconds
 * since the first row; percentiles by nearest rank); `wc -l` agrees on the row counts. */
static const expected k_real[] = {
    {"azure_llm_2023_code.csv", WS_TRACE_AZURE, 8819, 18059974, 245896, 3435.948056, 1469, 5194,
     7436, 7437, 13, 55, 252, 1899},
    {"azure_llm_2023_conv.csv", WS_TRACE_AZURE, 19366, 22361870, 4088665, 3501.721937, 1020, 2735,
     4142, 14050, 129, 424, 601, 1000},
    {"mooncake_conversation.jsonl", WS_TRACE_MOONCAKE, 12031, 144793823, 4122048, 3536.999, 6909,
     27367, 85401, 126195, 350, 597, 1120, 2000},
};

static void check_real(const expected *e)
{
    char path[WS_PATH_MAX * 2];
    if (!th_real_trace(e->file, path, sizeof path))
        cr_skip_test("%s absent (../shared/traces or $WRITESCOPE_TRACES): real-trace check "
                     "skipped",
                     e->file);
    ws_trace *t;
    ws_err err = {0};
    cr_assert_eq(ws_trace_open(path, NULL, &t, &err), 0, "%s", err.msg);
    clock_t c0 = clock();
    ws_trace_stats st;
    cr_assert_eq(ws_trace_stats_compute(t, &st, &err), 0, "%s", err.msg);
    double cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
    ws_trace_close(t);
    cr_expect_eq(st.format, e->format);
    cr_expect_eq(st.requests, e->requests, "%s: %llu requests", e->file,
                 (unsigned long long)st.requests);
    cr_expect_eq(st.prompt.sum, e->prompt_sum, "%s: prompt sum %.0f", e->file, st.prompt.sum);
    cr_expect_eq(st.output.sum, e->output_sum, "%s: output sum %.0f", e->file, st.output.sum);
    cr_expect(fabs(st.duration_s - e->duration_s) < 1e-6, "%s: duration %.9f", e->file,
              st.duration_s);
    cr_expect_eq(st.first_s, 0);
    cr_expect_eq(st.prompt.p50, e->prompt_p50);
    cr_expect_eq(st.prompt.p90, e->prompt_p90);
    cr_expect_eq(st.prompt.p99, e->prompt_p99);
    cr_expect_eq(st.prompt.max, e->prompt_max);
    cr_expect_eq(st.output.p50, e->output_p50);
    cr_expect_eq(st.output.p90, e->output_p90);
    cr_expect_eq(st.output.p99, e->output_p99);
    cr_expect_eq(st.output.max, e->output_max);
    cr_expect_eq(st.counts.bad, 0);
    cr_expect_eq(st.counts.failed, 0);
    cr_log_info("%s: %.3f s of CPU to read and summarize", e->file, cpu);
}

Test(trace_stats, real_azure_code)
{
    check_real(&k_real[0]);
}
Test(trace_stats, real_azure_conv)
{
    check_real(&k_real[1]);
}
Test(trace_stats, real_mooncake_conversation)
{
    check_real(&k_real[2]);
}
