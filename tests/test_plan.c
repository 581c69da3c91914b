/* test_plan: the capacity planner (sim/plan.h). The search finds a known threshold on a
 * synthetic evaluation function (attainment flips at a known rate or user count) within its
 * tolerance, in rounds of independent points; a small real plan through the simulator has
 * the right shape (every GPU x policy searched, the answer met the SLOs and twice it did not
 * where the search says so, the frontier monotone in the batch); a plan survives the
 * database and draws. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers.h"
#include "plan.h"
#include "plan_plot.h"
#include "plan_store.h"
#include "plandb.h"
#include "policy.h"
#include "store.h"

/* A synthetic cost model: a point meets when its load is at most the threshold of its
 * policy (rate: thr[policy] requests/s; users: floor), and a frontier point fits below
 * fit_thr[batch-index] tokens. Counts the points and checks a round never repeats a search. */
typedef struct fake {
    double thr[WS_POLICY_COUNT];
    long long fit_tokens; /* batch x context that fits */
    long long calls, points;
    int max_round_size;
    double floor_attain; /* > 0: misses at every rate, requests no longer waiting (below) */
} fake;

static int fake_eval(void *ctx, const ws_plan_point *pts, int n, ws_plan_result *out, ws_err *err)
{
    (void)err;
    fake *f = ctx;
    f->calls++;
    f->points += n;
    if (n > f->max_round_size)
        f->max_round_size = n;
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        if (pts[i].kind == WS_PLAN_PT_FIT) {
            out[i].meets = (long long)pts[i].batch * pts[i].context <= f->fit_tokens;
        } else {
            /* a KV budget of 4 GiB raises the threshold by half: the tuner must find it */
            const double thr = f->thr[pts[i].policy] * (pts[i].set.gpu_kv_gb == 4 ? 1.5 : 1);
            out[i].meets = pts[i].load <= thr;
            out[i].attain = out[i].meets ? 1 : 0.5;
            out[i].goodput = out[i].meets ? pts[i].load : 0;
            out[i].tokens_per_s = 100 * pts[i].load;
            out[i].peak_batch = 4;       /* requests overlapped: a miss is not from running alone */
            out[i].ttft_q = pts[i].load; /* they queue: a lower rate waits less */
            if (f->floor_attain > 0 && !out[i].meets) /* a miss no rate removes */
                out[i].attain = f->floor_attain, out[i].ttft_q = 13.8, out[i].peak_batch = 2;
        }
    }
    return 0;
}

static void spec_two_gpus(ws_plan_spec *s)
{
    ws_plan_spec_default(s);
    s->model = "m";
    s->host = "h";
    s->gpus[0] = "g0";
    s->gpus[1] = "g1";
    s->n_gpus = 2;
    s->slo_tpot = 0.2;
}

Test(plan, search_finds_known_rate_threshold)
{
    const double thr[] = {3.7, 0.02, 250, 1e-3, 41, 0.5, 12.3};
    for (size_t t = 0; t < sizeof thr / sizeof thr[0]; t++) {
        ws_plan_spec s;
        spec_two_gpus(&s);
        s.policies = 1u << WS_POLICY_WRITESCOPE | 1u << WS_POLICY_STREAM;
        s.n_fit = 0;
        s.gen.rate = 1;
        fake f = {0};
        f.thr[WS_POLICY_WRITESCOPE] = thr[t];
        f.thr[WS_POLICY_STREAM] = thr[t] / 3;
        ws_plan_report rep;
        ws_err err = {0};
        cr_assert_eq(ws_plan_search(&s, fake_eval, &f, 0, &rep, &err), 0, "%s", err.msg);
        cr_assert_eq(rep.n_search, 4);
        for (int g = 0; g < 2; g++)
            for (int p = 0; p < 2; p++) {
                const int pol = p ? WS_POLICY_STREAM : WS_POLICY_WRITESCOPE;
                const ws_plan_best *b = ws_plan_best_of(&rep, &s, g, pol);
                cr_assert_not_null(b);
                const double want = f.thr[pol];
                /* the answer met and lies within the tolerance below the threshold */
                cr_assert(b->max_load <= want * (1 + 1e-12) &&
                              b->max_load >= want / (1 + s.tol) * (1 - 1e-12),
                          "threshold %g: found %g", want, b->max_load);
                cr_assert(b->at.meets);
                cr_assert_eq(b->capped, 0);
            }
        /* one point per open search per round, every round in one call */
        cr_assert_eq(f.calls, rep.rounds);
        cr_assert_eq(f.max_round_size, 4);
        cr_assert_eq((size_t)f.points, rep.n_evals);
        ws_plan_report_free(&rep);
    }
}

Test(plan, search_tighter_tolerance_and_edges)
{
    ws_plan_spec s;
    spec_two_gpus(&s);
    s.n_gpus = 1;
    s.policies = 1u << WS_POLICY_WRITESCOPE | 1u << WS_POLICY_GPU_ONLY | 1u << WS_POLICY_KTRANS;
    s.n_fit = 0;
    s.tol = 0.001;
    s.max_rate = 100;
    fake f = {0};
    f.thr[WS_POLICY_WRITESCOPE] = 7.77;
    f.thr[WS_POLICY_GPU_ONLY] = 0; /* nothing meets: none */
    f.thr[WS_POLICY_KTRANS] = 1e9; /* everything meets: capped at max_rate */
    ws_plan_report rep;
    ws_err err = {0};
    cr_assert_eq(ws_plan_search(&s, fake_eval, &f, 0, &rep, &err), 0, "%s", err.msg);
    const ws_plan_best *w = ws_plan_best_of(&rep, &s, 0, WS_POLICY_WRITESCOPE);
    cr_assert(w->max_load <= 7.77 && w->max_load >= 7.77 / 1.001, "%g", w->max_load);
    const ws_plan_best *n = ws_plan_best_of(&rep, &s, 0, WS_POLICY_GPU_ONLY);
    cr_assert_eq(n->max_load, 0);
    cr_assert_eq(ws_plan_goodput(&s, n), 0);
    const ws_plan_best *c = ws_plan_best_of(&rep, &s, 0, WS_POLICY_KTRANS);
    cr_assert_eq(c->max_load, 100);
    cr_assert(c->capped);
    ws_plan_report_free(&rep);
}

/* A trace whose first two requests arrive together, each too long for the TTFT SLO alone:
 * lowering the rate changes neither the attainment, the TTFT nor the two at once, so the
 * search stops after two misses (not halving towards 1e-6) and reports what failed at the
 * lowest load it tried. */
Test(plan, search_stops_where_a_lower_rate_changes_nothing)
{
    ws_plan_spec s;
    spec_two_gpus(&s);
    s.n_gpus = 1;
    s.policies = 1u << WS_POLICY_WRITESCOPE;
    s.n_fit = 0;
    s.gen.rate = 2;
    fake f = {.floor_attain = 0.96};
    ws_plan_report rep;
    ws_err err = {0};
    cr_assert_eq(ws_plan_search(&s, fake_eval, &f, 0, &rep, &err), 0, "%s", err.msg);
    const ws_plan_best *b = ws_plan_best_of(&rep, &s, 0, WS_POLICY_WRITESCOPE);
    cr_assert_eq(b->max_load, 0);
    cr_assert_eq(b->evals, 2, "%d evaluations", b->evals);
    cr_assert_float_eq(b->miss_load, 0.5, 1e-12);
    cr_assert_float_eq(b->miss.attain, 0.96, 1e-12);
    cr_assert_float_eq(b->miss.ttft_q, 13.8, 1e-12);
    ws_plan_report_free(&rep);
}

Test(plan, users_are_exact_and_tuning_finds_the_better_budget)
{
    ws_plan_spec s;
    spec_two_gpus(&s);
    s.load = WS_PLAN_USERS;
    s.prompt = 1000;
    s.output = 10;
    s.policies = 1u << WS_POLICY_WRITESCOPE | 1u << WS_POLICY_KTRANS;
    s.tune = 1;
    s.price[1] = 2.0;
    s.fit_batch[0] = 1, s.fit_batch[1] = 4, s.n_fit = 2;
    fake f = {.fit_tokens = 4000000};
    f.thr[WS_POLICY_WRITESCOPE] = 37;
    f.thr[WS_POLICY_KTRANS] = 5;
    ws_plan_report rep;
    ws_err err = {0};
    cr_assert_eq(ws_plan_search(&s, fake_eval, &f, 0, &rep, &err), 0, "%s", err.msg);
    /* writescope: default + 4 budgets + 2 pages + 2 windows; ktrans: default + 4 budgets */
    cr_assert_eq(rep.n_search, 2 * (9 + 5));
    for (int g = 0; g < 2; g++) {
        const ws_plan_best *w = ws_plan_best_of(&rep, &s, g, WS_POLICY_WRITESCOPE);
        cr_assert_eq(w->max_load, floor(37 * 1.5)); /* the 4 GiB budget wins, exactly */
        cr_assert_eq(w->set.gpu_kv_gb, 4);
        const ws_plan_best *k = ws_plan_best_of(&rep, &s, g, WS_POLICY_KTRANS);
        cr_assert_eq(k->max_load, floor(5 * 1.5));
    }
    for (size_t i = 0; i < rep.n_search; i++)
        if (rep.search[i].set.gpu_kv_gb == 0 && rep.search[i].policy == WS_POLICY_WRITESCOPE)
            cr_assert_eq(rep.search[i].max_load, 37);
    /* frontier: B x context <= 4e6, in 1024-token units */
    cr_assert_eq(rep.n_fit, 2 * 2 * 2);
    for (size_t i = 0; i < rep.n_fit; i++) {
        const long long want = 4000000 / rep.fit[i].batch / WS_PLAN_FIT_UNIT * WS_PLAN_FIT_UNIT;
        cr_assert_eq(rep.fit[i].max_context, want, "B=%d: %lld", rep.fit[i].batch,
                     rep.fit[i].max_context);
    }
    /* cost only where priced: $2/h over 100 * users tokens/s */
    const ws_plan_best *w1 = ws_plan_best_of(&rep, &s, 1, WS_POLICY_WRITESCOPE);
    cr_assert_float_eq(ws_plan_cost_per_mtok(&s, w1), 2.0 / 3600 / (100 * 55) * 1e6, 1e-9);
    cr_assert(isnan(ws_plan_cost_per_mtok(&s, ws_plan_best_of(&rep, &s, 0, WS_POLICY_WRITESCOPE))));
    ws_plan_report_free(&rep);
}

Test(plan, bad_specs_are_refused)
{
    ws_plan_spec s;
    ws_err err = {0};
    spec_two_gpus(&s);
    s.slo_tpot = 0;
    cr_assert_eq(ws_plan_spec_check(&s, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "SLO"), NULL, "%s", err.msg);
    spec_two_gpus(&s);
    s.slo_pct = 120;
    cr_assert_eq(ws_plan_spec_check(&s, &err), WS_EINVAL);
    spec_two_gpus(&s);
    s.tol = 0;
    cr_assert_eq(ws_plan_spec_check(&s, &err), WS_EINVAL);
    spec_two_gpus(&s);
    s.slo_ttft = -1;
    cr_assert_eq(ws_plan_spec_check(&s, &err), WS_EINVAL);
}

static void small_real_spec(ws_plan_spec *s)
{
    ws_plan_spec_default(s);
    s->model = "qwen3-30b-a3b";
    s->host = "xeon-gold-5318y";
    s->gpus[0] = "a100-40gb-pcie";
    s->gpus[1] = "v100-32gb-pcie";
    s->n_gpus = 2;
    s->price[0] = 3;
    s->policies = 1u << WS_POLICY_WRITESCOPE | 1u << WS_POLICY_STREAM;
    s->gen.rate = 0.05;
    s->gen.prompt = (ws_trace_len){WS_LEN_FIXED, 4096, 0};
    s->gen.output = (ws_trace_len){WS_LEN_FIXED, 32, 0};
    s->requests = 20;
    s->slo_tpot = 0.5;
    s->slo_ttft = 60;
    s->tol = 0.2;
    s->fit_batch[0] = 1, s->fit_batch[1] = 8, s->n_fit = 2;
}

Test(plan, small_real_plan_has_the_right_shape)
{
    ws_store *st;
    ws_err err = {0};
    cr_assert_eq(ws_store_open_embedded(&st, &err), 0, "%s", err.msg);
    ws_plan_spec s;
    small_real_spec(&s);
    ws_plan_report rep;
    cr_assert_eq(ws_plan_run(st, &s, &rep, &err), 0, "%s", err.msg);
    cr_assert_eq(rep.n_search, 4);
    cr_assert_eq(rep.n_fit, 8);
    cr_assert_str_eq(rep.model, "qwen3-30b-a3b");
    for (int g = 0; g < 2; g++)
        for (int k = 0; k < 2; k++) {
            const int pol = k ? WS_POLICY_STREAM : WS_POLICY_WRITESCOPE;
            const ws_plan_best *b = ws_plan_best_of(&rep, &s, g, pol);
            cr_assert_not_null(b);
            if (b->max_load > 0) {
                cr_assert(b->at.meets);
                cr_assert_geq(b->at.attain, 0.99);
                cr_assert_eq(b->at.requests, 20);
                cr_assert_leq(b->at.tpot_q, 0.5);
                cr_assert_leq(b->at.ttft_q, 60);
            }
            /* a point above the answer (the bracket's top) missed */
            int above_missed = b->capped;
            for (size_t i = 0; i < rep.n_evals; i++) {
                const ws_plan_eval_rec *e = &rep.evals[i];
                if (e->pt.kind == WS_PLAN_PT_LOAD && e->pt.gpu == g && e->pt.policy == pol &&
                    e->pt.load > b->max_load) {
                    cr_assert_eq(e->res.meets, 0, "load %g above %g met", e->pt.load, b->max_load);
                    above_missed = 1;
                }
            }
            cr_assert(above_missed || b->max_load == 0);
        }
    /* more sequences resident at once leave less context each */
    for (size_t i = 0; i < rep.n_fit; i += 2) {
        cr_assert_eq(rep.fit[i].batch, 1);
        cr_assert_eq(rep.fit[i + 1].batch, 8);
        cr_assert_geq(rep.fit[i].max_context, rep.fit[i + 1].max_context);
        cr_assert_gt(rep.fit[i].max_context, 0);
    }
    ws_plan_report_free(&rep);
    ws_store_close(st);
}

Test(plan, stored_plan_reads_back_and_draws)
{
    char dir[64], db[128], png[128];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/p.db", dir);
    snprintf(png, sizeof png, "%s/plan.png", dir);
    ws_store *st;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(db, &st, &err), 0, "%s", err.msg);
    ws_plan_spec s;
    small_real_spec(&s);
    s.n_gpus = 1;
    s.n_fit = 1;
    ws_plan_report rep;
    cr_assert_eq(ws_plan_run(st, &s, &rep, &err), 0, "%s", err.msg);
    long long id = 0;
    cr_assert_eq(ws_plan_store(st, &s, &rep, &id, &err), 0, "%s", err.msg);
    cr_assert_gt(id, 0);
    ws_plandb_run run;
    cr_assert_eq(ws_plandb_get_run(st, 0, &run, &err), 0, "%s", err.msg);
    cr_assert_eq(run.id, id);
    cr_assert_str_eq(run.load_kind, "rate");
    cr_assert_eq(run.evals, (long long)rep.n_evals);
    cr_assert(isnan(run.slo_ttft) == 0 && run.slo_tpot == 0.5);
    ws_plandb_point *pts;
    size_t n;
    cr_assert_eq(ws_plandb_get_points(st, id, &pts, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, rep.n_evals);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(pts[i].meets, rep.evals[i].res.meets);
        cr_assert_eq(pts[i].fit, rep.evals[i].pt.kind == WS_PLAN_PT_FIT);
        if (!pts[i].fit)
            cr_assert_float_eq(pts[i].load, rep.evals[i].pt.load, 1e-12);
    }
    free(pts);
    ws_plandb_result *res;
    cr_assert_eq(ws_plandb_get_results(st, id, &res, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 2);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(res[i].best, 1);
        cr_assert_float_eq(res[i].max_load, rep.search[i].max_load, 1e-12);
        cr_assert_eq(isnan(res[i].cost_per_mtok), !(rep.search[i].max_load > 0));
    }
    free(res);
    int rc = ws_plan_plot(st, id, png, &err);
    if (rc && strstr(err.msg, "gnuplot not found"))
        cr_skip_test("gnuplot is not installed");
    cr_assert_eq(rc, 0, "%s", err.msg);
    struct stat sb;
    cr_assert_eq(stat(png, &sb), 0);
    cr_assert_gt(sb.st_size, 1000);
    cr_assert_eq(ws_plandb_get_run(st, id + 1, &run, &err), WS_ENOTFOUND);
    ws_plan_report_free(&rep);
    ws_store_close(st);
}

/* A verdict point (plan --search asks only whether it meets) stops once more requests have
 * missed than the SLO allows: the same verdict as the whole run, an attainment that is an
 * upper bound of the whole run's and below the SLO; a point that meets runs to the end and
 * gives the whole run's result. */
Test(plan, a_verdict_point_stops_once_it_cannot_meet)
{
    ws_store *st;
    ws_err err = {0};
    cr_assert_eq(ws_store_open_embedded(&st, &err), 0, "%s", err.msg);
    ws_plan_spec s;
    small_real_spec(&s);
    s.requests = 40;
    s.slo_pct = 90; /* four misses allowed */
    ws_plan *P;
    cr_assert_eq(ws_plan_open(st, &s, &P, &err), 0, "%s", err.msg);
    const double loads[2] = {50, 0.001};
    for (int k = 0; k < 2; k++) {
        ws_plan_point pt = {
            .kind = WS_PLAN_PT_LOAD, .policy = WS_POLICY_WRITESCOPE, .load = loads[k]};
        ws_plan_result whole, verdict;
        cr_assert_eq(ws_plan_eval_points(P, &pt, 1, &whole, &err), 0, "%s", err.msg);
        pt.verdict = 1;
        cr_assert_eq(ws_plan_eval_points(P, &pt, 1, &verdict, &err), 0, "%s", err.msg);
        cr_assert_eq(verdict.meets, whole.meets, "load %g", loads[k]);
        cr_assert_eq(whole.stopped, 0);
        if (k == 0) {
            cr_assert_eq(whole.meets, 0, "%g requests/s should overload the GPU", loads[k]);
            cr_assert_eq(verdict.stopped, 1);
            cr_assert_geq(verdict.attain, whole.attain);
            cr_assert_lt(verdict.attain * 100, s.slo_pct);
            cr_assert_eq(verdict.attain, 35.0 / 40, "five misses of 40");
            cr_assert_lt(verdict.served, whole.served);
        } else {
            cr_assert_eq(whole.meets, 1);
            cr_assert_eq(verdict.stopped, 0);
            cr_assert_eq(verdict.attain, whole.attain);
            cr_assert_eq(verdict.served, whole.served);
        }
    }
    ws_plan_close(P);
    ws_store_close(st);
}
