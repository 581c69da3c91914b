/* test_plan_run: a whole plan as one call (sim/plan_run.h). In one process it finds what
 * ws_plan_run finds, calls the progress callback once a round, and stores the plan only when
 * asked, saying where; through a ranks backend that evaluates each round's points in reverse
 * order it finds the same, and agrees twice (after the search, after storing). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "plan_run.h"
#include "policy.h"
#include "store.h"

static void users_spec(ws_plan_spec *s)
{
    ws_plan_spec_default(s);
    s->model = "qwen3-30b-a3b";
    s->host = "xeon-gold-5318y";
    s->gpus[0] = "a100-40gb-pcie";
    s->n_gpus = 1;
    s->policies = 1u << WS_POLICY_WRITESCOPE;
    s->load = WS_PLAN_USERS;
    s->prompt = 4096;
    s->output = 8;
    s->max_users = 64;
    s->slo_tpot = 0.5;
    s->n_fit = 0;
}

static void count_rounds(void *ctx, int round, long long points, int open)
{
    (void)points;
    (void)open;
    int *n = ctx;
    cr_assert_eq(round, *n + 1, "rounds are reported in order");
    (*n)++;
}

Test(plan_run, one_call_searches_reports_and_stores)
{
    char dir[64], db[128];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/p.db", dir);
    ws_store *st;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(db, &st, &err), 0, "%s", err.msg);
    ws_plan_spec s;
    users_spec(&s);
    ws_plan_report ref;
    cr_assert_eq(ws_plan_run(st, &s, &ref, &err), 0, "%s", err.msg);

    int rounds = 0;
    ws_plan_run_cfg cfg = {.spec = &s, .progress = count_rounds, .progress_ctx = &rounds};
    ws_plan_run_result res;
    cr_assert_eq(ws_plan_run_all(st, &cfg, &res, &err), 0, "%s", err.msg);
    cr_assert_eq(rounds, res.rep.rounds);
    cr_assert_eq(res.rep.n_evals, ref.n_evals);
    cr_assert_eq(res.rep.search[0].max_load, ref.search[0].max_load);
    cr_assert_eq(res.plan_id, 0, "not stored unless asked");
    cr_assert_str_eq(res.database, "");
    ws_plan_run_result_free(&res);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM plan_runs"), 0);

    cfg.store = 1;
    cfg.progress = NULL;
    cr_assert_eq(ws_plan_run_all(st, &cfg, &res, &err), 0, "%s", err.msg);
    cr_assert_gt(res.plan_id, 0);
    cr_assert_str_eq(res.database, ws_store_path(st));
    ws_plan_run_result_free(&res);
    ws_plan_report_free(&ref);
    ws_store_close(st);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM plan_runs"), 1);
}

/* One rank whose map runs the items last to first. */
typedef struct fake_ranks {
    int maps, agrees;
} fake_ranks;

static int fake_map_all(void *ctx, size_t n, size_t rec_size, ws_plan_item_fn fn, void *fn_ctx,
                        void *out, ws_err *err)
{
    fake_ranks *f = ctx;
    f->maps++;
    memset(out, 0, n * rec_size);
    for (size_t i = n; i-- > 0;) {
        int rc = fn(fn_ctx, i, (char *)out + i * rec_size, err);
        if (rc)
            return rc;
    }
    return 0;
}

static int fake_agree(void *ctx, int rc, ws_err *err)
{
    (void)err;
    ((fake_ranks *)ctx)->agrees++;
    return rc;
}

Test(plan_run, rounds_through_a_ranks_backend)
{
    ws_store *st;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(":memory:", &st, &err), 0, "%s", err.msg);
    ws_plan_spec s;
    users_spec(&s);
    ws_plan_run_result one, many;
    const ws_plan_run_cfg cfg1 = {.spec = &s};
    cr_assert_eq(ws_plan_run_all(st, &cfg1, &one, &err), 0, "%s", err.msg);
    fake_ranks f = {0};
    const ws_plan_ranks ranks = {0, fake_map_all, fake_agree, &f};
    const ws_plan_run_cfg cfg = {.spec = &s, .ranks = &ranks, .store = 1};
    cr_assert_eq(ws_plan_run_all(st, &cfg, &many, &err), 0, "%s", err.msg);
    cr_assert_eq(f.maps, many.rep.rounds);
    cr_assert_eq(f.agrees, 2);
    cr_assert_gt(many.plan_id, 0);
    cr_assert_eq(many.rep.n_evals, one.rep.n_evals);
    for (size_t i = 0; i < one.rep.n_evals; i++)
        cr_assert_eq(many.rep.evals[i].res.meets, one.rep.evals[i].res.meets);
    cr_assert_eq(many.rep.search[0].max_load, one.rep.search[0].max_load);
    ws_plan_run_result_free(&one);
    ws_plan_run_result_free(&many);
    ws_store_close(st);
}

Test(plan_run, a_bad_spec_is_an_error_and_stores_nothing)
{
    ws_store *st;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(":memory:", &st, &err), 0, "%s", err.msg);
    ws_plan_spec s;
    users_spec(&s);
    s.slo_tpot = 0;
    const ws_plan_run_cfg cfg = {.spec = &s, .store = 1};
    ws_plan_run_result res;
    cr_assert_eq(ws_plan_run_all(st, &cfg, &res, &err), WS_EINVAL);
    cr_assert_eq(res.plan_id, 0);
    ws_plan_run_result_free(&res);
    ws_store_close(st);
}
