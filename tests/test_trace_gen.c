/* test_trace_gen: the generators (traces/trace_gen.h): the same seed gives the same
 * requests, arrival and length distributions have the means (and gamma the CV) asked for,
 * streams are independent, closed loops are labelled, bad specs are refused. Every run is
 * seeded, so the statistical bounds (several standard errors wide) cannot flake. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "trace_gen.h"
#include "trace_stats.h"

static ws_trace_gen spec(ws_trace_arrivals a, const char *prompt, const char *output, int n,
                         uint64_t seed)
{
    ws_trace_gen g = {.arrivals = a,
                      .rate = 10,
                      .cv = 2,
                      .clients = 8,
                      .think_s = 0.5,
                      .requests = (uint64_t)n,
                      .seed = seed};
    ws_err err = {0};
    cr_assert_eq(ws_trace_len_parse(prompt, &g.prompt, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_trace_len_parse(output, &g.output, &err), 0, "%s", err.msg);
    return g;
}

/* All requests of g into a new array (caller frees). */
static ws_trace_req *draw(const ws_trace_gen *g)
{
    ws_trace *t;
    ws_err err = {0};
    cr_assert_eq(ws_trace_gen_open(g, &t, &err), 0, "%s", err.msg);
    ws_trace_req *v = calloc(g->requests, sizeof *v);
    for (uint64_t i = 0; i < g->requests; i++) {
        cr_assert_eq(ws_trace_next(t, &v[i], &err), 1, "%s", err.msg);
        cr_assert_eq(v[i].id, i);
    }
    ws_trace_req r;
    cr_assert_eq(ws_trace_next(t, &r, &err), 0, "exactly `requests` requests");
    ws_trace_close(t);
    return v;
}

Test(trace_gen, same_seed_same_requests)
{
    ws_trace_gen g = spec(WS_ARRIVALS_GAMMA, "lognormal:2000:1", "zipf:1.1:2000", 500, 42);
    ws_trace_req *a = draw(&g), *b = draw(&g);
    cr_assert_eq(memcmp(a, b, 500 * sizeof *a), 0);
    g.seed = 43;
    ws_trace_req *c = draw(&g);
    int same = 0;
    for (int i = 1; i < 500; i++)
        same += a[i].arrival_s == c[i].arrival_s;
    cr_expect_eq(same, 0, "another seed, other arrivals");
    /* changing the output distribution leaves arrivals and prompts as they were */
    g.seed = 42;
    ws_trace_len_parse("uniform:1:9", &g.output, NULL);
    ws_trace_req *d = draw(&g);
    for (int i = 0; i < 500; i++) {
        cr_assert_eq(a[i].arrival_s, d[i].arrival_s);
        cr_assert_eq(a[i].prompt_tokens, d[i].prompt_tokens);
    }
    free(a);
    free(b);
    free(c);
    free(d);
}

/* Mean and coefficient of variation of the gaps between arrivals. */
static void gaps(const ws_trace_req *v, int n, double *mean, double *cv)
{
    double s = 0, s2 = 0;
    for (int i = 1; i < n; i++) {
        double g = v[i].arrival_s - v[i - 1].arrival_s;
        cr_assert_geq(g, 0, "arrivals non-decreasing");
        s += g;
        s2 += g * g;
    }
    *mean = s / (n - 1);
    *cv = sqrt(s2 / (n - 1) - *mean * *mean) / *mean;
}

Test(trace_gen, poisson_and_gamma_arrivals)
{
    const int n = 20000;
    ws_trace_gen g = spec(WS_ARRIVALS_POISSON, "fixed:100", "fixed:10", n, 1);
    ws_trace_req *v = draw(&g);
    double mean, cv;
    cr_expect_eq(v[0].arrival_s, 0, "the first request arrives at 0");
    gaps(v, n, &mean, &cv);
    cr_expect(fabs(mean - 0.1) < 0.005, "poisson mean gap %g, expected 0.1", mean);
    cr_expect(fabs(cv - 1) < 0.05, "poisson gap CV %g, expected 1", cv);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(v[i].prompt_tokens, 100);
        cr_assert_eq(v[i].output_tokens, 10);
        cr_assert_eq(v[i].session_id, -1);
    }
    free(v);

    g = spec(WS_ARRIVALS_GAMMA, "fixed:100", "fixed:10", n, 1);
    v = draw(&g);
    gaps(v, n, &mean, &cv);
    cr_expect(fabs(mean - 0.1) < 0.007, "gamma mean gap %g, expected 0.1", mean);
    cr_expect(fabs(cv - 2) < 0.2, "gamma gap CV %g, expected 2", cv);
    free(v);
}

static double mean_of(const ws_trace_req *v, int n, int prompt)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += prompt ? v[i].prompt_tokens : v[i].output_tokens;
    return s / n;
}

Test(trace_gen, length_distributions)
{
    const int n = 20000;
    ws_trace_gen g = spec(WS_ARRIVALS_POISSON, "uniform:100:200", "lognormal:2000:1", n, 7);
    ws_trace_req *v = draw(&g);
    int lo = 1 << 30, hi = 0;
    for (int i = 0; i < n; i++) {
        lo = v[i].prompt_tokens < lo ? v[i].prompt_tokens : lo;
        hi = v[i].prompt_tokens > hi ? v[i].prompt_tokens : hi;
    }
    cr_expect_eq(lo, 100, "uniform reaches its low end");
    cr_expect_eq(hi, 200, "uniform reaches its high end");
    cr_expect(fabs(mean_of(v, n, 1) - 150) < 2, "uniform mean %g", mean_of(v, n, 1));
    /* lognormal: mean 2000, standard error about 19 */
    cr_expect(fabs(mean_of(v, n, 0) - 2000) < 100, "lognormal mean %g", mean_of(v, n, 0));
    free(v);

    g = spec(WS_ARRIVALS_POISSON, "zipf:1.2:1000", "zipf:2:50", n, 7);
    v = draw(&g);
    double m = ws_trace_len_mean(&g.prompt);
    cr_expect(fabs(mean_of(v, n, 1) - m) < 0.06 * m, "zipf mean %g, exact %g", mean_of(v, n, 1), m);
    /* zipf:2:50: P(1) = 1 / sum_{k<=50} k^-2 = 0.6178 */
    int ones = 0, top = 0;
    for (int i = 0; i < n; i++) {
        ones += v[i].output_tokens == 1;
        top = v[i].output_tokens > top ? v[i].output_tokens : top;
    }
    cr_expect(fabs(ones / (double)n - 0.6178) < 0.02, "zipf P(1) %g", ones / (double)n);
    cr_expect_leq(top, 50);
    free(v);
}

Test(trace_gen, closed_loop_is_labelled)
{
    ws_trace_gen g = spec(WS_ARRIVALS_CLOSED, "fixed:10", "fixed:10", 8000, 3);
    ws_trace *t;
    ws_err err = {0};
    cr_assert_eq(ws_trace_gen_open(&g, &t, &err), 0);
    cr_expect_eq(ws_trace_closed_clients(t), 8);
    cr_expect(ws_trace_has_sessions(t));
    cr_expect_eq(ws_trace_format_of(t), WS_TRACE_GEN);
    ws_trace_req r;
    double think = 0;
    for (int i = 0; i < 8000; i++) {
        cr_assert_eq(ws_trace_next(t, &r, &err), 1);
        cr_assert_eq(r.session_id, i % 8);
        if (i < 8)
            cr_assert_eq(r.arrival_s, 0, "each client's first request goes at once");
        else
            think += r.arrival_s;
    }
    cr_expect(fabs(think / 7992 - 0.5) < 0.03, "mean think time %g", think / 7992);
    ws_trace_close(t);

    /* a closed loop is not a trace: neither written nor summarized */
    cr_assert_eq(ws_trace_gen_open(&g, &t, &err), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_expect_eq(ws_trace_write(t, f, "out.csv", NULL, &err), WS_EUNSUP);
    cr_expect_neq(strstr(err.msg, "closed-loop"), NULL, "%s", err.msg);
    ws_trace_stats st;
    cr_expect_eq(ws_trace_stats_compute(t, &st, &err), WS_EUNSUP);
    fclose(f);
    free(buf);
    ws_trace_close(t);
}

Test(trace_gen, bad_specs_are_refused)
{
    static const char *bad[] = {
        "",          "fixed",       "fixed:0",       "fixed:1.5",       "fixed:16777217",
        "uniform:5", "uniform:9:3", "lognormal:0:1", "lognormal:10:-1", "zipf:0:10",
        "zipf:1:0",  "gauss:1:2",   "fixed:1:2",     "uniform:1:2:3:4"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ws_trace_len l;
        ws_err err = {0};
        cr_expect_eq(ws_trace_len_parse(bad[i], &l, &err), WS_EINVAL, "'%s' accepted", bad[i]);
        cr_expect_neq(err.msg[0], '\0');
    }
    ws_trace_len l;
    char back[64];
    cr_assert_eq(ws_trace_len_parse("lognormal:2000:1.5", &l, NULL), 0);
    ws_trace_len_format(&l, back, sizeof back);
    cr_expect_str_eq(back, "lognormal:2000:1.5");

    ws_trace *t;
    ws_err err = {0};
    ws_trace_gen g = spec(WS_ARRIVALS_POISSON, "fixed:1", "fixed:1", 10, 0);
    g.rate = 0;
    cr_expect_eq(ws_trace_gen_open(&g, &t, &err), WS_EINVAL);
    cr_expect_neq(strstr(err.msg, "rate"), NULL, "%s", err.msg);
    g = spec(WS_ARRIVALS_GAMMA, "fixed:1", "fixed:1", 10, 0);
    g.cv = 0;
    cr_expect_eq(ws_trace_gen_open(&g, &t, &err), WS_EINVAL);
    g = spec(WS_ARRIVALS_POISSON, "fixed:1", "fixed:1", 0, 0);
    cr_expect_eq(ws_trace_gen_open(&g, &t, &err), WS_EINVAL);
    g = spec(WS_ARRIVALS_CLOSED, "fixed:1", "fixed:1", 10, 0);
    g.clients = 0;
    cr_expect_eq(ws_trace_gen_open(&g, &t, &err), WS_EINVAL);
    /* a spec that was never parsed is checked too, with or without a ws_err */
    g = spec(WS_ARRIVALS_POISSON, "fixed:1", "fixed:1", 10, 0);
    g.output.kind = WS_LEN_UNIFORM;
    g.output.a = 9;
    g.output.b = 3;
    cr_expect_eq(ws_trace_gen_open(&g, &t, NULL), WS_EINVAL);
    cr_expect_eq(ws_trace_gen_open(&g, &t, &err), WS_EINVAL);
    cr_expect_neq(strstr(err.msg, "output: length spec 'uniform:9:3'"), NULL, "%s", err.msg);
}
