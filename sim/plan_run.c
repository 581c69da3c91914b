/* plan_run: a whole capacity plan, searched over the ranks and stored (see plan_run.h). */
#include "plan_run.h"

#include <stdio.h>
#include <string.h>

#include "plan_store.h"

/* One point of a round, for the ranks' map. */
typedef struct round_work {
    ws_plan *plan;
    const ws_plan_point *pts;
} round_work;

static int round_point(void *ctx, size_t i, void *rec, ws_err *err)
{
    round_work *w = ctx;
    return ws_plan_eval_points(w->plan, &w->pts[i], 1, rec, err);
}

/* A round's points spread over the ranks; every rank gets every result. */
static int round_ranks(void *ctx, ws_plan *plan, const ws_plan_point *pts, int n,
                       ws_plan_result *out, ws_err *err)
{
    const ws_plan_ranks *r = ctx;
    round_work w = {plan, pts};
    return r->map_all(r->ctx, (size_t)n, sizeof *out, round_point, &w, out, err);
}

static int agree(const ws_plan_ranks *r, int rc, ws_err *err)
{
    return r ? r->agree(r->ctx, rc, err) : rc;
}

int ws_plan_run_all(ws_store *store, const ws_plan_run_cfg *cfg, ws_plan_run_result *out,
                    ws_err *err)
{
    memset(out, 0, sizeof *out);
    const ws_plan_ranks *r = cfg->ranks;
    const int rank = r ? r->rank : 0;
    ws_plan_spec s = *cfg->spec;
    s.progress = rank ? NULL : cfg->progress;
    s.progress_ctx = rank ? NULL : cfg->progress_ctx;
    int rc = r ? ws_plan_run_rounds(store, &s, round_ranks, (void *)r, &out->rep, err)
               : ws_plan_run(store, &s, &out->rep, err);
    rc = agree(r, rc, err);
    if (!rc && !rank && cfg->store) {
        snprintf(out->database, sizeof out->database, "%s", ws_store_path(store));
        rc = ws_plan_store(store, &s, &out->rep, &out->plan_id, err);
    }
    return agree(r, rc, err);
}

void ws_plan_run_result_free(ws_plan_run_result *r)
{
    ws_plan_report_free(&r->rep);
}

int ws_plan_space_run_all(ws_store *store, const ws_plan_run_cfg *cfg, const ws_plan_space *sp,
                          ws_space_report *out, ws_err *err)
{
    const ws_plan_ranks *r = cfg->ranks;
    const int rank = r ? r->rank : 0;
    ws_plan_spec s = *cfg->spec;
    s.progress = rank ? NULL : cfg->progress;
    s.progress_ctx = rank ? NULL : cfg->progress_ctx;
    int rc = ws_plan_space_run(store, &s, sp, r ? round_ranks : NULL, (void *)r, out, err);
    return agree(r, rc, err);
}
