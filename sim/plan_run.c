/* plan_run: a whole capacity plan, searched over the ranks and stored (see plan_run.h). */
#include "plan_run.h"

#include <stdio.h>
#include <string.h>

#include "plan_store.h"

/* One point of a round, for ws_par_map. */
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
static int round_par(void *ctx, ws_plan *plan, const ws_plan_point *pts, int n,
                     ws_plan_result *out, ws_err *err)
{
    round_work w = {plan, pts};
    return ws_par_map(ctx, (size_t)n, sizeof *out, round_point, &w, out, WS_PAR_TO_ALL, err);
}

static int agree(ws_par *par, int rc, ws_err *err)
{
    return par ? ws_par_agree(par, rc, err) : rc;
}

int ws_plan_run_all(ws_store *store, const ws_plan_run_cfg *cfg, ws_plan_run_result *out,
                    ws_err *err)
{
    memset(out, 0, sizeof *out);
    const int rank = cfg->par ? ws_par_rank(cfg->par) : 0;
    ws_plan_spec s = *cfg->spec;
    s.progress = rank ? NULL : cfg->progress;
    s.progress_ctx = rank ? NULL : cfg->progress_ctx;
    int rc = cfg->par ? ws_plan_run_rounds(store, &s, round_par, cfg->par, &out->rep, err)
                      : ws_plan_run(store, &s, &out->rep, err);
    rc = agree(cfg->par, rc, err);
    if (!rc && !rank && cfg->store) {
        snprintf(out->database, sizeof out->database, "%s", ws_store_path(store));
        rc = ws_plan_store(store, &s, &out->rep, &out->plan_id, err);
    }
    return agree(cfg->par, rc, err);
}

void ws_plan_run_result_free(ws_plan_run_result *r)
{
    ws_plan_report_free(&r->rep);
}
