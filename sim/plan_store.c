/* plan_store: a plan into the rows of store/plandb.h (see plan_store.h). */
#include "plan_store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "control.h"
#include "plandb.h"
#include "policy.h"

/* A percentile with an OOM in it is INFINITY in a report and NULL (NAN) in the table. */
static double nan_if_inf(double v)
{
    return isfinite(v) ? v : NAN;
}

int ws_plan_store(ws_store *store, const ws_plan_spec *s, const ws_plan_report *rep,
                  long long *id, ws_err *err)
{
    ws_plandb_run run = {0};
    snprintf(run.model, sizeof run.model, "%s", rep->model);
    snprintf(run.host_profile, sizeof run.host_profile, "%s", rep->host);
    snprintf(run.load_kind, sizeof run.load_kind, "%s",
             s->load == WS_PLAN_USERS ? "users" : "rate");
    ws_plan_workload_text(s, run.workload, sizeof run.workload);
    run.slo_ttft = s->slo_ttft > 0 ? s->slo_ttft : NAN;
    run.slo_tpot = s->slo_tpot > 0 ? s->slo_tpot : NAN;
    run.slo_pct = s->slo_pct;
    run.tol = s->tol;
    run.rounds = rep->rounds;
    run.evals = (long long)rep->n_evals;
    run.wall_s = rep->wall_s;
    snprintf(run.params, sizeof run.params,
             "{\"detail\": \"%s\", \"chunk\": %d, \"prefill\": \"%s\", \"seed\": %llu, "
             "\"tune\": %d, "
             "\"native_rate\": %.17g, \"max_rate\": %.17g, \"max_users\": %d, "
             "\"batch\": %d, \"requests\": %llu, \"host_limit_bytes\": %.17g, "
             "\"cpu_sockets\": %d, \"one_node_memory\": %d}",
             s->detail_layer ? "layer" : "step", s->chunk, ws_prefill_mode_name(s->prefill_mode), (unsigned long long)s->seed, s->tune,
             rep->native_rate, s->max_rate, s->max_users, s->batch,
             (unsigned long long)s->requests, s->host_limit, s->cost.cpu_sockets,
             s->cost.one_node_memory);
    ws_plandb_point *pts = calloc(rep->n_evals ? rep->n_evals : 1, sizeof *pts);
    ws_plandb_result *res = calloc(rep->n_search ? rep->n_search : 1, sizeof *res);
    ws_plandb_fit *fits = calloc(rep->n_fit ? rep->n_fit : 1, sizeof *fits);
    int rc = 0;
    if (!pts || !res || !fits) {
        rc = ws_err_set(err, WS_ENOMEM, "plan: out of memory");
        goto out;
    }
    for (size_t i = 0; i < rep->n_evals; i++) {
        const ws_plan_eval_rec *e = &rep->evals[i];
        ws_plandb_point *p = &pts[i];
        p->round = e->round;
        p->fit = e->pt.kind == WS_PLAN_PT_FIT;
        snprintf(p->gpu_profile, sizeof p->gpu_profile, "%s", s->gpus[e->pt.gpu]);
        snprintf(p->policy, sizeof p->policy, "%s", ws_policy_name(e->pt.policy));
        p->kv_gb = e->pt.set.gpu_kv_gb;
        p->page = e->pt.set.page;
        p->window = e->pt.set.window;
        p->load = p->fit ? NAN : e->pt.load;
        p->batch = e->pt.batch;
        p->context = e->pt.context;
        p->meets = e->res.meets;
        p->attain = e->res.attain;
        p->ttft_q = nan_if_inf(e->res.ttft_q);
        p->tpot_q = nan_if_inf(e->res.tpot_q);
        p->goodput = e->res.goodput;
        p->tokens_per_s = e->res.tokens_per_s;
        p->requests = (long long)e->res.requests;
        p->served = (long long)e->res.served;
        p->oom = (long long)e->res.oom;
        p->peak_batch = e->res.peak_batch;
        p->wall_s = e->res.wall_s;
    }
    for (size_t i = 0; i < rep->n_search; i++) {
        const ws_plan_best *b = &rep->search[i];
        ws_plandb_result *r = &res[i];
        snprintf(r->gpu_profile, sizeof r->gpu_profile, "%s", s->gpus[b->gpu]);
        snprintf(r->policy, sizeof r->policy, "%s", ws_policy_name(b->policy));
        r->kv_gb = b->set.gpu_kv_gb;
        r->page = b->set.page;
        r->window = b->set.window;
        r->best = ws_plan_best_of(rep, s, b->gpu, b->policy) == b;
        r->capped = b->capped;
        r->evals = b->evals;
        r->max_load = b->max_load;
        const int some = b->max_load > 0;
        r->goodput = some ? ws_plan_goodput(s, b) : NAN;
        r->tokens_per_s = some ? b->at.tokens_per_s : NAN;
        r->ttft_q = some ? nan_if_inf(b->at.ttft_q) : NAN;
        r->tpot_q = some ? nan_if_inf(b->at.tpot_q) : NAN;
        r->attain = some ? b->at.attain : NAN;
        r->price_per_h = s->price[b->gpu] > 0 ? s->price[b->gpu] : NAN;
        r->cost_per_mtok = ws_plan_cost_per_mtok(s, b);
    }
    for (size_t i = 0; i < rep->n_fit; i++) {
        const ws_plan_fit *f = &rep->fit[i];
        snprintf(fits[i].gpu_profile, sizeof fits[i].gpu_profile, "%s", s->gpus[f->gpu]);
        snprintf(fits[i].policy, sizeof fits[i].policy, "%s", ws_policy_name(f->policy));
        fits[i].batch = f->batch;
        fits[i].max_context = f->max_context;
        fits[i].capped = f->capped;
    }
    rc = ws_plandb_store(store, &run, pts, rep->n_evals, res, rep->n_search, fits, rep->n_fit,
                         err);
    if (!rc)
        *id = run.id;
out:
    free(pts);
    free(res);
    free(fits);
    return rc;
}
