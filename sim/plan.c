/* plan: capacity planning by rounds of independent simulations (see plan.h). */
#include "plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hw.h"
#include "policy.h"
#include "serve.h"
#include "serving.h"
#include "trace.h"
#include "ws_util.h"

void ws_plan_spec_default(ws_plan_spec *s)
{
    memset(s, 0, sizeof *s);
    s->policies = (1u << WS_POLICY_COUNT) - 1;
    s->load = WS_PLAN_RATE;
    s->topts.format = WS_TRACE_AUTO;
    s->gen.arrivals = WS_ARRIVALS_POISSON;
    ws_deploy_cfg_default(&s->cost);
    s->gen.cv = 1;
    s->gen.rate = 1;
    s->requests = 200;
    s->batch = 32;
    s->slo_pct = 99;
    s->tol = 0.05;
    s->max_rate = 1e4;
    s->max_users = 1024;
    const double kv[] = {1, 2, 4, 8};
    const int page[] = {128, 256, 512}, win[] = {256, 512, 1024}, fit[] = {1, 8, 32};
    s->n_kv = 4;
    memcpy(s->kv_gb, kv, sizeof kv);
    s->n_page = 3;
    memcpy(s->page, page, sizeof page);
    s->n_window = 3;
    memcpy(s->window, win, sizeof win);
    s->n_fit = 3;
    memcpy(s->fit_batch, fit, sizeof fit);
    s->fit_max = 4LL << 20;
    ws_serving srv;
    ws_serving_default(&srv);
    s->chunk = srv.chunk;
    s->prefill_mode = srv.prefill_mode;
    s->batching = srv.batching;
    s->token_budget = srv.token_budget;
    s->prefix_cache = srv.prefix_cache;
    s->preempt = srv.preempt;
    s->seed = srv.seed;
}

int ws_plan_spec_check(const ws_plan_spec *s, ws_err *err)
{
    if (s->n_gpus < 1 || s->n_gpus > WS_PLAN_MAX_GPUS)
        return ws_err_set(err, WS_EINVAL, "plan: 1 to %d GPU profiles, not %d", WS_PLAN_MAX_GPUS,
                          s->n_gpus);
    if (!s->model || !s->host)
        return ws_err_set(err, WS_EINVAL, "plan: a model and a host profile are needed");
    if (!(s->policies & ((1u << WS_POLICY_COUNT) - 1)))
        return ws_err_set(err, WS_EINVAL, "plan: no policy to plan for");
    if (!(s->host_limit >= 0) || !isfinite(s->host_limit))
        return ws_err_set(err, WS_EINVAL, "plan: host memory is bytes >= 0, not %g", s->host_limit);
    if (!(s->slo_ttft > 0) && !(s->slo_tpot > 0))
        return ws_err_set(err, WS_EINVAL, "plan: give an SLO (TTFT or TPOT, seconds > 0)");
    if (s->slo_ttft < 0 || s->slo_tpot < 0 || !isfinite(s->slo_ttft) || !isfinite(s->slo_tpot))
        return ws_err_set(err, WS_EINVAL, "plan: SLOs are seconds >= 0");
    if (!(s->slo_pct > 0 && s->slo_pct <= 100))
        return ws_err_set(err, WS_EINVAL, "plan: the SLO percentile is in (0, 100], not %g",
                          s->slo_pct);
    if (!(s->tol > 0 && s->tol < 1))
        return ws_err_set(err, WS_EINVAL, "plan: the rate tolerance is in (0, 1), not %g", s->tol);
    if (s->load == WS_PLAN_USERS && (s->prompt < 1 || s->output < 1 || s->max_users < 1))
        return ws_err_set(err, WS_EINVAL, "plan: users need prompt and output tokens >= 1");
    if (s->load == WS_PLAN_RATE && (s->batch < 1 || !(s->max_rate > 0) || s->start < 0))
        return ws_err_set(err, WS_EINVAL, "plan: bad batch, start or highest rate");
    if (s->load == WS_PLAN_RATE && !s->trace && s->gen.arrivals == WS_ARRIVALS_CLOSED)
        return ws_err_set(err, WS_EINVAL, "plan: closed-loop arrivals have no rate to search");
    if (s->n_kv < 0 || s->n_kv > WS_PLAN_MAX_CAND || s->n_page < 0 ||
        s->n_page > WS_PLAN_MAX_CAND || s->n_window < 0 || s->n_window > WS_PLAN_MAX_CAND ||
        s->n_fit < 0 || s->n_fit > WS_PLAN_MAX_CAND)
        return ws_err_set(err, WS_EINVAL, "plan: at most %d candidates per setting",
                          WS_PLAN_MAX_CAND);
    for (int i = 0; i < s->n_kv; i++)
        if (!(s->kv_gb[i] > 0 && s->kv_gb[i] < 1e6))
            return ws_err_set(err, WS_EINVAL, "plan: a GPU KV budget is GiB > 0, not %g",
                              s->kv_gb[i]);
    /* As in sim (--window): a window is a whole number of pages. A page candidate runs with
     * the default window, so it divides it or, larger, makes a window of one page; a window
     * candidate runs with the default page. */
    sim_cfg d;
    sim_cfg_default(&d);
    const int page = d.par.page_tokens, window = d.window;
    for (int i = 0; i < s->n_page; i++) {
        const int p = s->page[i];
        if (p < 1 || p > (1 << 20))
            return ws_err_set(err, WS_EINVAL, "plan: a page is 1..2^20 tokens, not %d", p);
        if (window % p && p % window)
            return ws_err_set(err, WS_EINVAL,
                              "plan: a page of %d tokens neither divides the %d-token window "
                              "nor is a multiple of it (a window is a whole number of pages)",
                              p, window);
    }
    for (int i = 0; i < s->n_window; i++) {
        const int w = s->window[i];
        if (w < 1 || w > (1 << 20))
            return ws_err_set(err, WS_EINVAL, "plan: a window is 1..2^20 tokens, not %d", w);
        if (w % page)
            return ws_err_set(err, WS_EINVAL,
                              "plan: a window of %d tokens is not a multiple of the page (%d "
                              "tokens)",
                              w, page);
    }
    for (int i = 0; i < s->n_fit; i++)
        if (s->fit_batch[i] < 1 || s->fit_batch[i] > WS_PLAN_FIT_BATCH_MAX)
            return ws_err_set(err, WS_EINVAL, "plan: a frontier batch is 1..%d, not %d",
                              WS_PLAN_FIT_BATCH_MAX, s->fit_batch[i]);
    if (s->n_fit && s->fit_max < WS_PLAN_FIT_UNIT)
        return ws_err_set(err, WS_EINVAL, "plan: the longest context is >= %d tokens",
                          WS_PLAN_FIT_UNIT);
    return 0;
}

/* ---- the search: bracket, then bisection ------------------------------------------------ */

void ws_plan_bisect_init(ws_plan_bisect *s, double start, double min, double max, double tol,
                         int integer)
{
    memset(s, 0, sizeof *s);
    s->min = min;
    s->max = max;
    s->tol = tol;
    s->integer = integer;
    start = fmin(fmax(start, min), max);
    s->start = integer ? floor(start) : start;
}

/* The next load to try, or 0 with s->done set. */
double ws_plan_bisect_next(ws_plan_bisect *s)
{
    if (s->done)
        return 0;
    double x;
    if (s->lo > 0 && s->hi > 0) {
        if (s->integer ? s->hi - s->lo <= 1 : s->hi / s->lo - 1 <= s->tol) {
            s->done = 1;
            return 0;
        }
        x = s->integer ? floor((s->lo + s->hi) / 2) : sqrt(s->lo * s->hi);
    } else if (s->lo > 0) {
        if (s->lo >= s->max) {
            s->done = s->capped = 1;
            return 0;
        }
        x = fmin(s->integer ? s->lo * 2 : s->lo * 4, s->max);
    } else if (s->hi > 0) {
        if (s->hi <= s->min) {
            s->done = 1;
            return 0;
        }
        x = fmax(s->integer ? floor(s->hi / 2) : s->hi / 4, s->min);
    } else
        x = s->start;
    return x;
}

void ws_plan_bisect_update(ws_plan_bisect *s, double x, const ws_plan_result *r)
{
    s->evals++;
    if (r->meets) {
        s->lo = x;
        s->at_lo = *r;
    } else {
        /* Requests that ran alone missed: a lower rate only spaces them further apart. So
         * did requests that no longer wait for each other: while none met, a lower rate that
         * changed neither the share within the SLOs, nor the TTFT at the percentile, nor the
         * most sequences at once (requests that arrive together stay together at any rate). */
        const ws_plan_result *h = &s->at_hi;
        const int same_ttft =
            r->ttft_q == h->ttft_q || fabs(r->ttft_q - h->ttft_q) <= 0.01 * h->ttft_q;
        const int unchanged = !(s->lo > 0) && s->hi > 0 && r->attain <= h->attain &&
                              r->peak_batch == h->peak_batch && same_ttft;
        if (!s->integer && (r->peak_batch <= 1 || unchanged))
            s->done = 1;
        s->hi = x;
        s->at_hi = *r;
    }
}

/* The settings searched for a policy: the default, then one setting at a time. Pages and
 * windows only matter to a policy that spills; a candidate equal to the simulator's default
 * is the default setting (ws_plan_spec_check made every window a whole number of default
 * pages). */
static int settings_of(const ws_plan_spec *s, int policy, ws_plan_setting *out)
{
    int n = 0;
    out[n++] = (ws_plan_setting){0};
    if (!s->tune)
        return n;
    for (int i = 0; i < s->n_kv; i++)
        out[n++] = (ws_plan_setting){.gpu_kv_gb = s->kv_gb[i]};
    if (!ws_policy_info_of((ws_policy_kind)policy)->spills)
        return n;
    sim_cfg d; /* the defaults a setting of 0 stands for */
    sim_cfg_default(&d);
    const int page = d.par.page_tokens, window = d.window;
    for (int i = 0; i < s->n_page; i++)
        if (s->page[i] != page)
            out[n++] = (ws_plan_setting){.page = s->page[i]};
    for (int i = 0; i < s->n_window; i++)
        if (s->window[i] != window)
            out[n++] = (ws_plan_setting){.window = s->window[i]};
    return n;
}

void ws_plan_report_free(ws_plan_report *r)
{
    free(r->search);
    free(r->best);
    free(r->fit);
    free(r->evals);
    memset(r, 0, sizeof *r);
}

static int add_eval(ws_plan_report *r, const ws_plan_point *p, const ws_plan_result *res, int round,
                    ws_err *err)
{
    if (ws_grow((void **)&r->evals, &r->cap_evals, r->n_evals, sizeof *r->evals, 256))
        return ws_err_set(err, WS_ENOMEM, "plan: out of memory");
    r->evals[r->n_evals++] = (ws_plan_eval_rec){*p, *res, round};
    return 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* The load search starts from: given, the trace's rate, the generator's, or 1 user. */
double ws_plan_load_start(const ws_plan_spec *s, double native_rate)
{
    if (s->start > 0)
        return s->start;
    if (s->load == WS_PLAN_USERS)
        return 1;
    if (s->trace)
        return native_rate > 0 ? native_rate : 1;
    return s->gen.rate > 0 ? s->gen.rate : 1;
}

static double workload_context(const ws_plan_spec *s)
{
    if (s->load == WS_PLAN_USERS)
        return (double)s->prompt + s->output;
    if (!s->trace)
        return ws_trace_len_mean(&s->gen.prompt) + ws_trace_len_mean(&s->gen.output);
    return 32768;
}

/* Every search of a plan: one per (gpu, policy, setting) over load, then one per (gpu,
 * policy, frontier batch) over context; a round's points and results beside them. */
typedef struct searches {
    ws_plan_bisect *sr;
    ws_plan_point *base; /* the point each search evaluates, its load or context unset */
    ws_plan_point *pts;  /* this round's points */
    ws_plan_result *res; /* and their results */
    int *who;            /* the search each of this round's points belongs to */
    size_t n_load, n_fit, n_all;
} searches;

static void searches_free(searches *w)
{
    free(w->sr);
    free(w->base);
    free(w->pts);
    free(w->res);
    free(w->who);
}

/* Counts the searches and allocates them and the report's arrays. */
static int searches_alloc(const ws_plan_spec *s, searches *w, ws_plan_report *rep, ws_err *err)
{
    const int np = WS_POLICY_COUNT, ng = s->n_gpus;
    ws_plan_setting set[1 + 3 * WS_PLAN_MAX_CAND];
    for (int p = 0; p < np; p++)
        if (s->policies >> p & 1)
            w->n_load += (size_t)ng * settings_of(s, p, set);
    for (int p = 0; p < np; p++)
        if (s->policies >> p & 1)
            w->n_fit += (size_t)ng * s->n_fit;
    const size_t n_all = w->n_all = w->n_load + w->n_fit;
    w->sr = calloc(n_all, sizeof *w->sr);
    w->base = calloc(n_all, sizeof *w->base);
    w->pts = calloc(n_all, sizeof *w->pts);
    w->res = calloc(n_all, sizeof *w->res);
    w->who = calloc(n_all, sizeof *w->who);
    rep->search = calloc(w->n_load ? w->n_load : 1, sizeof *rep->search);
    rep->best = malloc((size_t)ng * np * sizeof *rep->best);
    rep->fit = calloc(w->n_fit ? w->n_fit : 1, sizeof *rep->fit);
    if (!w->sr || !w->base || !w->pts || !w->res || !w->who || !rep->search || !rep->best ||
        !rep->fit)
        return ws_err_set(err, WS_ENOMEM, "plan: out of memory");
    return 0;
}

/* Each search's point and its starting bracket: load searches from the start load, frontier
 * searches from the workload's context. */
static void searches_init(const ws_plan_spec *s, double native_rate, searches *w)
{
    const int np = WS_POLICY_COUNT, ng = s->n_gpus;
    ws_plan_setting set[1 + 3 * WS_PLAN_MAX_CAND];
    const int users = s->load == WS_PLAN_USERS;
    const double start = ws_plan_load_start(s, native_rate);
    size_t k = 0;
    for (int g = 0; g < ng; g++)
        for (int p = 0; p < np; p++) {
            if (!(s->policies >> p & 1))
                continue;
            const int ns = settings_of(s, p, set);
            for (int i = 0; i < ns; i++, k++) {
                w->base[k] =
                    (ws_plan_point){.kind = WS_PLAN_PT_LOAD, .gpu = g, .policy = p, .set = set[i]};
                if (users)
                    ws_plan_bisect_init(&w->sr[k], start, 1, s->max_users, 0, 1);
                else
                    ws_plan_bisect_init(&w->sr[k], start, 1e-6, s->max_rate, s->tol, 0);
            }
        }
    const double ctx_units = fmax(1, floor(workload_context(s) / WS_PLAN_FIT_UNIT));
    for (int g = 0; g < ng; g++)
        for (int p = 0; p < np; p++) {
            if (!(s->policies >> p & 1))
                continue;
            for (int i = 0; i < s->n_fit; i++, k++) {
                w->base[k] = (ws_plan_point){
                    .kind = WS_PLAN_PT_FIT, .gpu = g, .policy = p, .batch = s->fit_batch[i]};
                ws_plan_bisect_init(&w->sr[k], ctx_units, 1,
                                    (double)(s->fit_max / WS_PLAN_FIT_UNIT), 0, 1);
            }
        }
}

/* The next point of every open search into w->pts; their number (0: all have ended). */
static int round_points(searches *w)
{
    int n = 0;
    for (size_t i = 0; i < w->n_all; i++) {
        const double x = ws_plan_bisect_next(&w->sr[i]);
        if (w->sr[i].done)
            continue;
        w->pts[n] = w->base[i];
        if (w->base[i].kind == WS_PLAN_PT_LOAD)
            w->pts[n].load = x;
        else
            w->pts[n].context = (long long)x * WS_PLAN_FIT_UNIT;
        w->who[n++] = (int)i;
    }
    return n;
}

/* Rounds until every search has ended; each round's results recorded in rep. */
static int search_rounds(const ws_plan_spec *s, ws_plan_eval_fn eval, void *ctx, searches *w,
                         ws_plan_report *rep, ws_err *err)
{
    int rc;
    for (int round = 1;; round++) {
        const int n = round_points(w);
        if (!n)
            return 0;
        rep->rounds = round;
        memset(w->res, 0, (size_t)n * sizeof *w->res);
        if ((rc = eval(ctx, w->pts, n, w->res, err)))
            return rc;
        for (int j = 0; j < n; j++) {
            const ws_plan_point *pt = &w->pts[j];
            const double x =
                pt->kind == WS_PLAN_PT_LOAD ? pt->load : (double)(pt->context / WS_PLAN_FIT_UNIT);
            ws_plan_bisect_update(&w->sr[w->who[j]], x, &w->res[j]);
            if ((rc = add_eval(rep, pt, &w->res[j], round, err)))
                return rc;
        }
        if (s->progress) {
            int open = 0;
            for (size_t i = 0; i < w->n_all; i++)
                open += !w->sr[i].done;
            s->progress(s->progress_ctx, round, (long long)rep->n_evals, open);
        }
    }
}

/* The ended searches into the report: each load search's best, the best setting of every
 * (gpu, policy), and the frontier. */
static void searches_report(const ws_plan_spec *s, const searches *w, ws_plan_report *rep)
{
    const int np = WS_POLICY_COUNT, ng = s->n_gpus;
    for (size_t i = 0; i < w->n_load; i++) {
        ws_plan_best *b = &rep->search[i];
        b->gpu = w->base[i].gpu;
        b->policy = w->base[i].policy;
        b->set = w->base[i].set;
        b->max_load = w->sr[i].lo;
        b->capped = w->sr[i].capped;
        b->at = w->sr[i].at_lo;
        b->miss_load = w->sr[i].hi;
        b->miss = w->sr[i].at_hi;
        b->evals = w->sr[i].evals;
    }
    rep->n_search = w->n_load;
    for (int i = 0; i < ng * np; i++)
        rep->best[i] = -1;
    for (size_t i = 0; i < w->n_load; i++) {
        int *b = &rep->best[rep->search[i].gpu * np + rep->search[i].policy];
        if (*b < 0 || rep->search[i].max_load > rep->search[*b].max_load)
            *b = (int)i;
    }
    for (size_t i = 0; i < w->n_fit; i++) {
        const size_t j = w->n_load + i;
        rep->fit[i] = (ws_plan_fit){.gpu = w->base[j].gpu,
                                    .policy = w->base[j].policy,
                                    .batch = w->base[j].batch,
                                    .max_context = (long long)w->sr[j].lo * WS_PLAN_FIT_UNIT,
                                    .capped = w->sr[j].capped};
    }
    rep->n_fit = w->n_fit;
}

int ws_plan_search(const ws_plan_spec *s, ws_plan_eval_fn eval, void *ctx, double native_rate,
                   ws_plan_report *rep, ws_err *err)
{
    memset(rep, 0, sizeof *rep);
    int rc = ws_plan_spec_check(s, err);
    if (rc)
        return rc;
    const double t0 = now_s();
    rep->native_rate = native_rate;
    snprintf(rep->model, sizeof rep->model, "%s", s->model);
    snprintf(rep->host, sizeof rep->host, "%s", s->host);
    searches w = {0};
    if (!(rc = searches_alloc(s, &w, rep, err))) {
        searches_init(s, native_rate, &w);
        rc = search_rounds(s, eval, ctx, &w, rep, err);
    }
    if (!rc) {
        searches_report(s, &w, rep);
        rep->wall_s = now_s() - t0;
    }
    searches_free(&w);
    if (rc)
        ws_plan_report_free(rep);
    return rc;
}

const ws_plan_best *ws_plan_best_of(const ws_plan_report *r, const ws_plan_spec *s, int gpu,
                                    int policy)
{
    if (gpu < 0 || gpu >= s->n_gpus || policy < 0 || policy >= WS_POLICY_COUNT || !r->best)
        return NULL;
    const int i = r->best[gpu * WS_POLICY_COUNT + policy];
    return i < 0 ? NULL : &r->search[i];
}

double ws_plan_goodput(const ws_plan_spec *s, const ws_plan_best *b)
{
    if (!b || !(b->max_load > 0))
        return 0;
    return s->load == WS_PLAN_USERS ? b->at.tokens_per_s : b->at.goodput;
}

double ws_plan_cost_per_mtok(const ws_plan_spec *s, const ws_plan_best *b)
{
    if (!b || b->gpu < 0 || b->gpu >= s->n_gpus || !(s->price[b->gpu] > 0) || !(b->max_load > 0) ||
        !(b->at.tokens_per_s > 0))
        return NAN;
    return s->price[b->gpu] / 3600.0 / b->at.tokens_per_s * 1e6;
}

/* ---- evaluating points with the simulator ---------------------------------------------- */

struct ws_plan {
    const ws_plan_spec *spec;
    ws_model m[WS_PLAN_MAX_GPUS];
    ws_hw hw[WS_PLAN_MAX_GPUS];
    ws_server eng[WS_PLAN_MAX_GPUS]; /* spec->engine on each GPU */
    /* a configuration search: each engine on each GPU, the hardware per KV type */
    ws_server engs[WS_PLAN_MAX_ENGINES][WS_PLAN_MAX_GPUS];
    ws_hw hw_kv[WS_PLAN_MAX_GPUS][WS_DT_COUNT];
    int have_kv[WS_PLAN_MAX_GPUS][WS_DT_COUNT];
    int cores;
    double native_rate, first_arrival;
};

/* A trace's first `requests` requests (0: all), arrivals from 0 divided by `speed`. */
typedef struct scaled_src {
    sim_source in;
    double speed, first;
    uint64_t left; /* UINT64_MAX: no cap */
} scaled_src;

static int scaled_next(void *ctx, sim_req *req, ws_err *err)
{
    scaled_src *c = ctx;
    if (!c->left)
        return 0;
    int rc = c->in.next(c->in.ctx, req, err);
    if (rc == 1) {
        req->arrival_s = (req->arrival_s - c->first) / c->speed;
        c->left--;
    }
    return rc;
}

int ws_plan_open(ws_store *store, const ws_plan_spec *s, ws_plan **out, ws_err *err)
{
    *out = NULL;
    int rc = ws_plan_spec_check(s, err);
    if (rc)
        return rc;
    ws_plan *p = calloc(1, sizeof *p);
    if (!p)
        return ws_err_set(err, WS_ENOMEM, "plan: out of memory");
    p->spec = s;
    for (int g = 0; g < s->n_gpus && !rc; g++)
        rc = ws_hw_load(store, s->model, s->gpus[g], s->host, s->cost.kv_dtype, &p->m[g], &p->hw[g],
                        &p->cores, err) ||
             ws_deploy_check_host(&p->hw[g], &s->cost, err) ||
             (s->engine && ws_server_load(s->engine, p->hw[g].gpu, p->hw[g].gpu_mem.v,
                                          p->m[g].max_ctx, &p->eng[g], err));
    for (int g = 0; g < s->n_gpus && !rc; g++) {
        const int kv = s->cost.kv_dtype;
        p->hw_kv[g][kv] = p->hw[g];
        p->have_kv[g][kv] = 1;
        for (int e = 0; e < s->n_engines && !rc; e++)
            rc = ws_server_load(s->engines[e], p->hw[g].gpu, p->hw[g].gpu_mem.v, p->m[g].max_ctx,
                                &p->engs[e][g], err);
    }
    for (size_t i = 0; i < s->n_configs && !rc; i++) {
        const ws_plan_config *c = &s->configs[i];
        if (c->gpu < 0 || c->gpu >= s->n_gpus || c->engine >= s->n_engines || c->kv_dtype < 0 ||
            c->kv_dtype >= WS_DT_COUNT)
            rc = ws_err_set(err, WS_EINVAL, "plan: configuration %zu names no GPU or engine", i);
        else if (!p->have_kv[c->gpu][c->kv_dtype]) {
            ws_model m;
            rc = ws_hw_load(store, s->model, s->gpus[c->gpu], s->host, c->kv_dtype, &m,
                            &p->hw_kv[c->gpu][c->kv_dtype], NULL, err);
            p->have_kv[c->gpu][c->kv_dtype] = !rc;
        }
    }
    if (rc && err && err->code)
        rc = err->code;
    if (!rc && s->load == WS_PLAN_RATE && s->trace) {
        ws_trace *t;
        ws_trace_req q;
        uint64_t n = 0;
        double first = 0, last = 0;
        if (!(rc = ws_trace_open(s->trace, &s->topts, &t, err))) {
            while ((!s->requests || n < s->requests) && (rc = ws_trace_next(t, &q, err)) == 1) {
                if (!n)
                    first = q.arrival_s;
                last = q.arrival_s;
                n++;
            }
            ws_trace_close(t);
            rc = rc < 0 ? err->code : 0;
        }
        if (!rc && !(last > first))
            rc = ws_err_set(err, WS_EINVAL,
                            "%s: its requests arrive at one instant: no rate to scale", s->trace);
        p->native_rate = n / (last - first);
        p->first_arrival = first;
    }
    if (rc) {
        free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void ws_plan_close(ws_plan *p)
{
    free(p);
}

double ws_plan_native_rate(const ws_plan *p)
{
    return p->native_rate;
}

const char *ws_plan_gpu_name(const ws_plan *p, int gpu)
{
    return p->hw[gpu].gpu;
}

/* What one simulation's callbacks gather: TTFTs and TPOTs (users: steady decode steps). */
typedef struct tally {
    double *ttft, *tpot;
    size_t n_ttft, n_tpot, cap_ttft, cap_tpot;
    int peak, users;
} tally;

static int push(double **v, size_t *n, size_t *cap, double x, ws_err *err)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 256;
        double *w = realloc(*v, c * sizeof *w);
        if (!w)
            return ws_err_set(err, WS_ENOMEM, "plan: out of memory");
        *v = w;
        *cap = c;
    }
    (*v)[(*n)++] = x;
    return 0;
}

static int on_req(void *ctx, const sim_req_result *r, ws_err *err)
{
    tally *t = ctx;
    const int oom = r->outcome == SIM_OUT_OOM;
    if (push(&t->ttft, &t->n_ttft, &t->cap_ttft, oom ? INFINITY : r->ttft, err))
        return err->code;
    if (!t->users && push(&t->tpot, &t->n_tpot, &t->cap_tpot, oom ? INFINITY : r->tpot, err))
        return err->code;
    return 0;
}

static int on_step(void *ctx, const sim_step_rec *r, ws_err *err)
{
    tally *t = ctx;
    if (r->batch > t->peak)
        t->peak = r->batch;
    if (t->users && r->prefill_tokens == 0 && r->decode_tokens > 0 &&
        push(&t->tpot, &t->n_tpot, &t->cap_tpot, r->t_end - r->t_start, err))
        return err->code;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile pct of v[0..n) (sorted here); INFINITY when empty. */
static double pct_of(double *v, size_t n, double pct)
{
    if (!n)
        return INFINITY;
    qsort(v, n, sizeof *v, cmp_double);
    size_t k = (size_t)ceil(pct / 100 * (double)n);
    return v[k < 1 ? 0 : k > n ? n - 1 : k - 1];
}

static double share_within(const double *v, size_t n, double limit)
{
    size_t ok = 0;
    for (size_t i = 0; i < n; i++)
        ok += v[i] <= limit;
    return n ? (double)ok / n : 0;
}

/* The misses of a rate point's `requests` that prove it cannot meet: one more than the
 * most that still leaves slo_pct within the SLOs (result_of's test). */
static uint64_t stop_misses(const ws_plan_spec *s)
{
    const uint64_t n = s->requests;
    uint64_t m = 0;
    while (m < n && (double)(n - m - 1) / n * 100 >= s->slo_pct - 1e-9)
        m++;
    return m + 1;
}

/* A simulation's totals and tally as a point's result: FIT meets when every sequence was
 * resident with no OOM; users when they all ran and enough steps met the SLOs; a rate when
 * enough of its requests did. */
static ws_plan_result result_of(const ws_plan_spec *s, int fit, int users, int want,
                                const sim_totals *T, tally *t)
{
    ws_plan_result o = {.requests = T->requests,
                        .served = T->served,
                        .oom = T->oom,
                        .peak_batch = t->peak,
                        .goodput = T->goodput_rps};
    o.ttft_q = pct_of(t->ttft, t->n_ttft, s->slo_pct);
    o.tpot_q = pct_of(t->tpot, t->n_tpot, s->slo_pct);
    if (fit) {
        o.meets = T->oom == 0 && t->peak >= want;
        o.attain = o.meets;
        o.tokens_per_s = T->tokens_per_s;
    } else if (users) {
        double a = 1;
        if (s->slo_tpot > 0)
            a = fmin(a, share_within(t->tpot, t->n_tpot, s->slo_tpot));
        if (s->slo_ttft > 0)
            a = fmin(a, share_within(t->ttft, t->n_ttft, s->slo_ttft));
        o.attain = T->oom ? 0 : a;
        o.meets = T->oom == 0 && t->peak >= want && o.attain * 100 >= s->slo_pct - 1e-9;
        o.tokens_per_s = T->decode_tps;
    } else if (T->stopped) {
        o.requests = s->requests;
        o.attain = (double)(s->requests - T->missed) / s->requests;
        o.stopped = 1;
        o.tokens_per_s = T->tokens_per_s;
    } else {
        o.attain = T->slo_frac;
        o.meets = o.attain * 100 >= s->slo_pct - 1e-9;
        o.tokens_per_s = T->tokens_per_s;
    }
    return o;
}

/* An engine that sizes its KV by a context (llama.cpp -c) sized for the workload when the
 * spec says so. */
static void engine_ctx(const ws_plan_spec *s, ws_server_kv *kv)
{
    if (kv->kind == WS_KV_MEM_CONTEXT && s->engine_ctx > 0)
        kv->ctx = s->engine_ctx;
}

/* A configuration's cost settings over the spec's. */
static void config_apply(const ws_plan_config *c, ws_deploy_cfg *cc)
{
    if (c->w_gpu)
        cc->w_gpu = cc->w_shared = cc->w_gpu_experts = c->w_gpu;
    if (c->w_cpu)
        cc->w_cpu_experts = c->w_cpu;
    cc->kv_dtype = c->kv_dtype;
    cc->w_kv = c->w_kv;
    cc->n_cpu_moe = c->n_cpu_moe;
    cc->gpu_experts = c->gpu_experts;
    cc->n_gpu_layers = c->n_gpu_layers;
    cc->cpu_threads = c->cpu_threads;
    cc->cpu_sockets = c->cpu_sockets;
}

/* What a point runs on: the hardware, the engine (NULL: none) and the cost settings, the
 * spec's or its configuration's over them (pc: that configuration, NULL: none). */
typedef struct point_env {
    const ws_hw *hw;
    const ws_server *eng;
    const ws_plan_config *pc;
    ws_deploy_cfg cc;
} point_env;

static int point_env_of(const ws_plan *P, const ws_plan_point *pt, point_env *o, ws_err *err)
{
    const ws_plan_spec *s = P->spec;
    if (pt->gpu < 0 || pt->gpu >= s->n_gpus || pt->policy < 0 || pt->policy >= WS_POLICY_COUNT)
        return ws_err_set(err, WS_EINVAL, "plan: a point names no GPU or policy of the plan");
    *o = (point_env){
        .hw = &P->hw[pt->gpu], .eng = s->engine ? &P->eng[pt->gpu] : NULL, .cc = s->cost};
    if (!s->configs)
        return 0;
    if (pt->config < 0 || (size_t)pt->config >= s->n_configs ||
        s->configs[pt->config].gpu != pt->gpu)
        return ws_err_set(err, WS_EINVAL, "plan: a point names no configuration of its GPU");
    o->pc = &s->configs[pt->config];
    o->hw = &P->hw_kv[pt->gpu][o->pc->kv_dtype];
    o->eng = o->pc->engine >= 0 ? &P->engs[o->pc->engine][pt->gpu] : NULL;
    config_apply(o->pc, &o->cc);
    return 0;
}

int ws_plan_prefix_cache(const ws_plan *P, const ws_plan_point *pt)
{
    const ws_plan_spec *s = P->spec;
    point_env env;
    if (point_env_of(P, pt, &env, NULL) || !env.eng || (s->given & WS_PLAN_GIVEN_PREFIX))
        return s->prefix_cache;
    return env.eng->prefix_cache;
}

int ws_plan_memory(const ws_plan *P, const ws_plan_point *pt, sim_memory *out, ws_err *err)
{
    const ws_plan_spec *s = P->spec;
    point_env env;
    int rc = point_env_of(P, pt, &env, err);
    if (rc)
        return rc;
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.policy = (ws_policy_kind)pt->policy;
    cfg.host_limit = s->host_limit;
    cfg.gpu_kv_budget = pt->set.gpu_kv_gb * 1073741824.0;
    if (env.eng)
        ws_server_apply(env.eng, &cfg.srv, &env.cc, &cfg.kv_mem);
    engine_ctx(s, &cfg.kv_mem);
    return sim_memory_of(&P->m[pt->gpu], env.hw, &env.cc, &cfg, out, err);
}

/* A point's simulation settings: the spec's, the engine's with those the spec gives over
 * them, the configuration's chunk and prefill, the setting (page, window, KV budget). The
 * cost settings in env take the engine's too. */
static void point_cfg(const ws_plan *P, const ws_plan_point *pt, point_env *env, sim_cfg *cfg)
{
    const ws_plan_spec *s = P->spec;
    sim_cfg_default(cfg);
    cfg->policy = (ws_policy_kind)pt->policy;
    cfg->detail_layer = s->detail_layer;
    cfg->seed = s->seed;
    cfg->chunk = s->chunk;
    cfg->prefill_mode = s->prefill_mode;
    cfg->batching = s->batching;
    cfg->token_budget = s->token_budget;
    cfg->prefix_cache = s->prefix_cache;
    cfg->preempt = s->preempt;
    cfg->batch = s->batch;
    if (env->eng) {
        /* the engine's values, then the settings given over them */
        const ws_serving given = cfg->srv;
        ws_server_apply(env->eng, &cfg->srv, &env->cc, &cfg->kv_mem);
        engine_ctx(s, &cfg->kv_mem);
        if (s->given & WS_PLAN_GIVEN_BATCHING)
            cfg->batching = given.batching;
        if (s->given & WS_PLAN_GIVEN_BUDGET)
            cfg->token_budget = given.token_budget;
        if (s->given & WS_PLAN_GIVEN_PREFIX)
            cfg->prefix_cache = given.prefix_cache;
        if (s->given & WS_PLAN_GIVEN_PREEMPT)
            cfg->preempt = given.preempt;
        if (s->given & WS_PLAN_GIVEN_BATCH)
            cfg->batch = given.batch;
        if (s->given & WS_PLAN_GIVEN_CHUNK)
            cfg->chunk = given.chunk;
    }
    if (env->pc && env->pc->chunk > 0)
        cfg->chunk = env->pc->chunk;
    if (env->pc && env->pc->prefill_mode >= 0)
        cfg->prefill_mode = env->pc->prefill_mode;
    if (s->prefill_gpu_tokens > 0)
        cfg->prefill_gpu_tokens = s->prefill_gpu_tokens;
    cfg->cpu_workers = P->cores;
    cfg->keep_steps = cfg->keep_requests = 0;
    if (pt->set.page > 0)
        cfg->par.page_tokens = pt->set.page;
    const int Pg = cfg->par.page_tokens;
    const int W = pt->set.window > 0 ? pt->set.window : cfg->window;
    cfg->window = (W + Pg - 1) / Pg * Pg;
    cfg->gpu_kv_budget = pt->set.gpu_kv_gb * 1073741824.0;
    cfg->host_limit = s->host_limit;
}

/* A point's requests: a closed batch (frontier, lone request, users), a burst, or the
 * trace or generator at the point's rate. */
typedef struct point_src {
    sim_closed c;
    ws_trace *tr; /* (owned) */
    scaled_src sc;
    sim_source src;
    int want; /* sequences that must run at once (0: none) */
} point_src;

static int point_source(const ws_plan *P, const ws_plan_point *pt, int users, sim_cfg *cfg,
                        point_src *o, ws_err *err)
{
    const ws_plan_spec *s = P->spec;
    memset(o, 0, sizeof *o);
    int rc = 0;
    if (pt->kind == WS_PLAN_PT_FIT) {
        if (pt->batch < 1 || pt->context < 1 || pt->context > WS_TRACE_TOKENS_MAX * 4LL)
            return ws_err_set(err, WS_EINVAL, "plan: bad frontier point");
        o->want = cfg->batch = pt->batch;
        cfg->chunk = (int)pt->context; /* memory does not depend on the chunk */
        sim_closed_source(&o->c, pt->batch, (int)pt->context, 2, &o->src);
        return 0;
    }
    if (pt->kind == WS_PLAN_PT_ALONE) {
        if (pt->context < 1 || pt->context > WS_TRACE_TOKENS_MAX || pt->batch < 1)
            return ws_err_set(err, WS_EINVAL, "plan: bad lone request");
        o->want = 1;
        sim_closed_source(&o->c, 1, (int)pt->context, pt->batch, &o->src);
        return 0;
    }
    if (users) {
        if (!(pt->load >= 1 && pt->load <= 1 << 20))
            return ws_err_set(err, WS_EINVAL, "plan: bad number of users %g", pt->load);
        o->want = cfg->batch = (int)pt->load;
        sim_closed_source(&o->c, cfg->batch, s->prompt, s->output, &o->src);
        return 0;
    }
    o->sc.left = UINT64_MAX;
    if (pt->kind == WS_PLAN_PT_BURST) {
        if (pt->batch < 0 || pt->batch > 1 || !s->burst[pt->batch])
            return ws_err_set(err, WS_EINVAL, "plan: no burst to run");
        const ws_trace_opts opts = {.format = WS_TRACE_MOONCAKE};
        rc = ws_trace_open_mem("burst", s->burst[pt->batch], s->burst_len[pt->batch], &opts, &o->tr,
                               err);
        o->sc.speed = 1;
    } else {
        if (!(pt->load > 0) || !isfinite(pt->load))
            return ws_err_set(err, WS_EINVAL, "plan: bad rate %g", pt->load);
        if (s->trace) {
            rc = ws_trace_open(s->trace, &s->topts, &o->tr, err);
            o->sc.speed = pt->load / P->native_rate;
            o->sc.first = P->first_arrival;
            if (s->requests)
                o->sc.left = s->requests;
        } else {
            ws_trace_gen g = s->gen;
            g.rate = pt->load;
            g.requests = s->requests;
            g.seed = s->seed;
            rc = ws_trace_gen_open(&g, &o->tr, err);
            o->sc.speed = 1;
        }
    }
    if (!rc)
        rc = sim_trace_source(o->tr, &o->sc.in, err);
    o->src = (sim_source){.next = scaled_next, .ctx = &o->sc, .clients = o->sc.in.clients};
    return rc;
}

static int eval_one(ws_plan *P, const ws_plan_point *pt, ws_plan_result *out, ws_err *err)
{
    const ws_plan_spec *s = P->spec;
    point_env env;
    int rc = point_env_of(P, pt, &env, err);
    if (rc)
        return rc;
    const double t0 = now_s();
    const int fit = pt->kind == WS_PLAN_PT_FIT;
    const int users = pt->kind == WS_PLAN_PT_LOAD && s->load == WS_PLAN_USERS;
    sim_cfg cfg;
    point_cfg(P, pt, &env, &cfg);
    if (!fit) {
        cfg.slo_ttft = s->slo_ttft;
        cfg.slo_tpot = users ? 0 : s->slo_tpot;
    }
    if (pt->verdict && pt->kind == WS_PLAN_PT_LOAD && !users && s->requests > 0)
        cfg.stop_misses = stop_misses(s);
    tally t = {.users = users};
    cfg.on_request = on_req;
    cfg.on_request_ctx = &t;
    cfg.on_step = on_step;
    cfg.on_step_ctx = &t;
    point_src ps;
    sim_results r;
    rc = point_source(P, pt, users, &cfg, &ps, err);
    if (!rc)
        rc = sim_run(&P->m[pt->gpu], env.hw, &env.cc, &cfg, &ps.src, &r, err);
    ws_trace_close(ps.tr);
    if (!rc) {
        ws_plan_result o = result_of(s, fit, users, ps.want, &r.tot, &t);
        _Static_assert(SIM_RES_COUNT == 4, "ws_plan_result.busy names four resources");
        memcpy(o.busy, r.tot.busy, sizeof o.busy);
        o.wall_s = now_s() - t0;
        *out = o;
        sim_results_free(&r);
    }
    free(t.ttft);
    free(t.tpot);
    return rc;
}

int ws_plan_eval_points(void *plan, const ws_plan_point *pts, int n, ws_plan_result *out,
                        ws_err *err)
{
    for (int i = 0; i < n; i++) {
        int rc = eval_one(plan, &pts[i], &out[i], err);
        if (rc)
            return rc;
    }
    return 0;
}

typedef struct round_ctx {
    ws_plan_round_fn round;
    void *ctx;
    ws_plan *plan;
} round_ctx;

static int round_eval(void *ctx, const ws_plan_point *pts, int n, ws_plan_result *out, ws_err *err)
{
    round_ctx *r = ctx;
    return r->round(r->ctx, r->plan, pts, n, out, err);
}

int ws_plan_run_rounds(ws_store *store, const ws_plan_spec *s, ws_plan_round_fn round, void *ctx,
                       ws_plan_report *rep, ws_err *err)
{
    ws_plan *p;
    memset(rep, 0, sizeof *rep);
    int rc = ws_plan_open(store, s, &p, err);
    if (rc)
        return rc;
    round_ctx rx = {round, ctx, p};
    rc = round ? ws_plan_search(s, round_eval, &rx, p->native_rate, rep, err)
               : ws_plan_search(s, ws_plan_eval_points, p, p->native_rate, rep, err);
    if (!rc) {
        snprintf(rep->model, sizeof rep->model, "%s", p->m[0].name);
        snprintf(rep->host, sizeof rep->host, "%s", p->hw[0].host);
    }
    ws_plan_close(p);
    return rc;
}

int ws_plan_run(ws_store *store, const ws_plan_spec *s, ws_plan_report *rep, ws_err *err)
{
    return ws_plan_run_rounds(store, s, NULL, NULL, rep, err);
}

/* ---- text ---------------------------------------------------------------------------- */

const char *ws_plan_setting_text(const ws_plan_setting *set, char *buf, size_t cap)
{
    if (set->gpu_kv_gb > 0)
        snprintf(buf, cap, "kv=%gG", set->gpu_kv_gb);
    else if (set->page > 0)
        snprintf(buf, cap, "P=%d", set->page);
    else if (set->window > 0)
        snprintf(buf, cap, "W=%d", set->window);
    else
        snprintf(buf, cap, "default");
    return buf;
}

void ws_plan_workload_text(const ws_plan_spec *s, char *buf, size_t cap)
{
    if (s->load == WS_PLAN_USERS)
        snprintf(buf, cap, "closed batch of concurrent users, %d prompt + %d output tokens each",
                 s->prompt, s->output);
    else if (s->trace && s->requests)
        snprintf(buf, cap,
                 "trace %s (first %llu requests), arrivals scaled in time, at most %d "
                 "running",
                 s->trace, (unsigned long long)s->requests, s->batch);
    else if (s->trace)
        snprintf(buf, cap, "trace %s (every request), arrivals scaled in time, at most %d running",
                 s->trace, s->batch);
    else {
        char a[64], b[64];
        ws_trace_len_format(&s->gen.prompt, a, sizeof a);
        ws_trace_len_format(&s->gen.output, b, sizeof b);
        char cv[32] = "";
        if (s->gen.arrivals == WS_ARRIVALS_GAMMA)
            snprintf(cv, sizeof cv, " (cv %g)", s->gen.cv);
        snprintf(buf, cap, "%llu %s arrivals%s, prompts %s, outputs %s, at most %d running",
                 (unsigned long long)s->requests, ws_trace_arrivals_name(s->gen.arrivals), cv, a, b,
                 s->batch);
    }
}
