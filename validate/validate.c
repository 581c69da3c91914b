/* validate: the live runtime against the simulator (see validate.h). */
#include "validate.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "calib.h"
#include "cost.h"
#include "measure.h"
#include "record.h"
#include "run_store.h"
#include "serve.h"
#include "ws_util.h"

#define VALIDATE_ATTN_PROBE_REPS 5 /* the attention reference's calls at each probe moment */

/* The host's probes as a run's params keep them: rates in GB/s, drifts in percent. */
#define N_PROBE_KEYS 6
static const char *const k_probe_keys[N_PROBE_KEYS] = {
    "probe_gbps",      "calib_probe_gbps",      "host_drift_pct",
    "attn_probe_gbps", "calib_attn_probe_gbps", "attn_drift_pct"};

static const char *const k_q_names[WS_VQ_COUNT] = {"step_time", "cpu_attn", "experts", "cpu_share",
                                                   "gpu_half"};

const char *ws_validate_q_name(int q)
{
    return q >= 0 && q < WS_VQ_COUNT ? k_q_names[q] : "?";
}

static int q_from_name(const char *name)
{
    for (int q = 0; q < WS_VQ_COUNT; q++)
        if (!strcmp(name, k_q_names[q]))
            return q;
    return -1;
}

int ws_validate_q_cpu_side(int q)
{
    return q == WS_VQ_STEP || q == WS_VQ_CPU_ATTN || q == WS_VQ_EXPERTS || q == WS_VQ_SHARE;
}

void ws_validate_cfg_default(ws_validate_cfg *c)
{
    memset(c, 0, sizeof *c);
    ws_engine_cfg_default(&c->eng);
    c->repeat = 1;
    c->warmup = 1;
    c->cpu_workers = 1;
}

void ws_validate_report_free(ws_validate_report *r)
{
    free(r->pt);
    free(r->term);
    free(r->rep_run_id);
    r->pt = NULL;
    r->term = NULL;
    r->rep_run_id = NULL;
    r->n_pt = r->n_term = 0;
}

/* ---- the simulator's side: its decode steps, per layer ---- */

typedef struct sim_side {
    int steps, layers, got;
    double *dt, *share, *context, *n_cpu;                          /* [steps] */
    double *cpu, *exp, *gpu;                                       /* [steps * layers] */
    int (*chain)(void *ctx, const sim_step_rec *rec, ws_err *err); /* the sink's */
    void *chain_ctx;
} sim_side;

static int sim_on_step(void *ctx, const sim_step_rec *rec, ws_err *err)
{
    sim_side *s = ctx;
    if (s->chain) {
        int rc = s->chain(s->chain_ctx, rec, err);
        if (rc)
            return rc;
    }
    if (rec->decode_tokens <= 0 || s->got >= s->steps)
        return 0;
    const int k = s->got++;
    s->dt[k] = rec->t_end - rec->t_start;
    s->share[k] = rec->r_real;
    s->context[k] = rec->context;
    s->n_cpu[k] = rec->n_cpu;
    for (int l = 0; l < s->layers && l < rec->n_lay; l++) {
        const sim_step_layer *y = &rec->lay[l];
        s->cpu[(size_t)k * s->layers + l] = y->cpu_s;
        s->exp[(size_t)k * s->layers + l] = y->exp_cpu_s;
        s->gpu[(size_t)k * s->layers + l] = y->gpu_end - y->attn_start;
    }
    return 0;
}

static void sim_side_free(sim_side *s)
{
    double *p[] = {s->dt, s->share, s->context, s->n_cpu, s->cpu, s->exp, s->gpu};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
}

/* Plays the workload in the simulator; stores it when s is non-NULL (*sim_id). */
static int run_sim(const ws_validate_cfg *c, int layers, ws_store *store, sim_side *side,
                   long long *sim_id, double *wall, ws_err *err)
{
    const ws_engine_cfg *e = &c->eng;
    const int S = e->output, L = layers;
    side->steps = S, side->layers = L;
    side->dt = calloc((size_t)S, sizeof(double));
    side->share = calloc((size_t)S, sizeof(double));
    side->context = calloc((size_t)S, sizeof(double));
    side->n_cpu = calloc((size_t)S, sizeof(double));
    side->cpu = calloc((size_t)S * L, sizeof(double));
    side->exp = calloc((size_t)S * L, sizeof(double));
    side->gpu = calloc((size_t)S * L, sizeof(double));
    if (!side->dt || !side->share || !side->context || !side->n_cpu || !side->cpu || !side->exp ||
        !side->gpu)
        return ws_err_set(err, WS_ENOMEM, "validate: out of memory (simulator records)");
    sim_cfg sc; /* the engine's serving settings, every layer played */
    sim_cfg_default(&sc);
    sc.srv = e->srv;
    sc.layers = L;
    sc.detail_layer = 1;
    sc.cpu_workers = c->cpu_workers > 0 ? c->cpu_workers : 1;
    sc.keep_steps = 0;
    sc.keep_requests = 0;
    ws_deploy_cfg cc;
    ws_engine_cost_cfg(e, &cc);
    sim_closed closed;
    sim_source src;
    /* the prefill yields the first token: output + 1 tokens give `output` decode steps */
    sim_closed_source(&closed, e->batch, e->prompt, e->output + 1, &src);
    sim_sink *sink = NULL;
    sim_record_meta meta = {.model = e->model->name,
                            .gpu = e->hw->gpu,
                            .host = e->hw->host,
                            .workload = "closed",
                            .prompt = e->prompt,
                            .output = e->output + 1,
                            .origin = "validate"};
    int rc = 0;
    if (store && (rc = sim_sink_open(store, NULL, NULL, NULL, &sink, err)))
        return rc;
    if (sink && (rc = sim_sink_begin(sink, &sc, &meta, err))) {
        sim_sink_abort(sink);
        return rc;
    }
    side->chain = sc.on_step;
    side->chain_ctx = sc.on_step_ctx;
    sc.on_step = sim_on_step;
    sc.on_step_ctx = side;
    sim_results res;
    rc = sim_run(e->model, e->hw, &cc, &sc, &src, &res, err);
    if (!rc && res.tot.oom)
        rc = ws_err_set(err, WS_ENOMEM,
                        "validate: the simulator could not fit %llu of the %d requests in the "
                        "memory limits (batch %d x %d tokens on %s): nothing to compare",
                        (unsigned long long)res.tot.oom, e->batch, e->batch,
                        e->prompt + e->output + 1, e->hw->gpu);
    if (!rc && side->got < S)
        rc = ws_err_set(err, WS_EINVAL, "validate: the simulator played %d decode steps, not %d",
                        side->got, S);
    if (sink) {
        if (!rc)
            rc = sim_sink_end(sink, &res, err);
        else
            sim_sink_fail(sink);
        if (!rc) {
            *sim_id = sim_sink_run_id(sink);
            rc = sim_sink_close(sink, err);
        } else {
            sim_sink_abort(sink);
        }
    }
    if (!rc)
        *wall = res.tot.wall_s;
    sim_results_free(&res);
    return rc;
}

/* ---- the runtime's side ---- */

typedef struct run_ctx {
    const ws_validate_cfg *c;
    int rep;
} run_ctx;

static void run_on_step(void *ctx, const ws_run_step *st, const ws_run_layer *lay, int n)
{
    (void)lay;
    (void)n;
    const run_ctx *r = ctx;
    if (r->c->progress)
        r->c->progress(r->c->progress_ctx, "run", r->rep, r->c->repeat, st->idx + 1,
                       r->c->eng.output);
}

/* ---- statistics ---- */

static int cmp_dbl(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* |p - m| / |m| in percent; NAN when m is 0 (no percentage error), both sides 0
 * included: a point where neither side measured anything (CPU attention with no token on
 * the CPU) says nothing about the error and is left out. */
static double ape(double m, double p)
{
    if (!isfinite(m) || !isfinite(p) || m == 0)
        return NAN;
    return 100 * fabs(p - m) / fabs(m);
}

/* Mean and p95 (nearest rank) of the finite values in v (sorted in place). */
static void mean_p95(double *v, size_t n, double *mean, double *p95, long long *count)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i]))
            v[k++] = v[i];
    *count = (long long)k;
    if (!k) {
        *mean = *p95 = NAN;
        return;
    }
    qsort(v, k, sizeof *v, cmp_dbl);
    double s = 0;
    for (size_t i = 0; i < k; i++)
        s += v[i];
    *mean = s / k;
    *p95 = v[(size_t)ceil(0.95 * k) - 1];
}

static const char *q_unit(int q)
{
    return q == WS_VQ_SHARE ? "1" : "s";
}

static const char *q_source(int q, int gpu_measured)
{
    switch (q) {
    case WS_VQ_STEP: return "mixed";
    case WS_VQ_GPU: return gpu_measured ? "measured" : "modeled";
    default: return "measured";
    }
}

/* Fills r->stat from r->pt (sim vs runtime) and the noise floor (repeat k vs repeat 0). */
static int compute_stats(ws_validate_report *r, int gpu_measured, int warmup, ws_err *err)
{
    const size_t n = r->n_pt;
    double *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b);
    if (!a || !b) {
        free(a), free(b);
        return ws_err_set(err, WS_ENOMEM, "validate: out of memory (statistics)");
    }
    /* points of repeat 0 in order, for the noise pairs: same (q, step, layer) */
    size_t n0 = 0;
    while (n0 < n && r->pt[n0].rep == 0)
        n0++;
    for (int q = 0; q < WS_VQ_COUNT; q++) {
        ws_validate_stat *s = &r->stat[q];
        memset(s, 0, sizeof *s);
        snprintf(s->quantity, sizeof s->quantity, "%s", k_q_names[q]);
        snprintf(s->scope, sizeof s->scope, "%s",
                 q == WS_VQ_STEP || q == WS_VQ_SHARE ? "step" : "layer");
        snprintf(s->measured_source, sizeof s->measured_source, "%s", q_source(q, gpu_measured));
        snprintf(s->unit, sizeof s->unit, "%s", q_unit(q));
        size_t na = 0, nb = 0, cnt = 0;
        double sm = 0, sp = 0;
        for (size_t i = 0; i < n; i++) {
            const ws_validate_point *p = &r->pt[i];
            if (strcmp(p->quantity, k_q_names[q]) || p->step < warmup)
                continue;
            a[na++] = ape(p->measured, p->predicted);
            sm += p->measured, sp += p->predicted, cnt++;
            if (p->rep > 0 && i - n0 * (size_t)p->rep < n0) {
                const ws_validate_point *p0 = &r->pt[i - n0 * (size_t)p->rep];
                if (!strcmp(p0->quantity, p->quantity) && p0->step == p->step &&
                    p0->layer == p->layer)
                    b[nb++] = ape(p0->measured, p->measured);
            }
        }
        s->mean_measured = cnt ? sm / cnt : NAN;
        s->mean_predicted = cnt ? sp / cnt : NAN;
        mean_p95(a, na, &s->mean_ape, &s->p95_ape, &s->n);
        long long nn;
        mean_p95(b, nb, &s->noise_mean_ape, &s->noise_p95_ape, &nn);
    }
    free(a);
    free(b);
    return 0;
}

/* ---- terms of the cost model, on the runtime's own token counts ---- */

static int add_term(ws_validate_report *r, size_t cap, const char *name, double meas, double pred,
                    const char *unit, double delta_s, double step_s, const char *fmt, ...)
    __attribute__((format(printf, 9, 10)));

static int add_term(ws_validate_report *r, size_t cap, const char *name, double meas, double pred,
                    const char *unit, double delta_s, double step_s, const char *fmt, ...)
{
    if (r->n_term >= cap)
        return 0;
    ws_validate_term *t = &r->term[r->n_term++];
    memset(t, 0, sizeof *t);
    snprintf(t->term, sizeof t->term, "%s", name);
    snprintf(t->unit, sizeof t->unit, "%s", unit);
    t->measured = meas;
    t->predicted = pred;
    t->error_pct = isfinite(meas) && isfinite(pred) && pred != 0 ? 100 * (meas - pred) / pred : NAN;
    t->step_share_pct = isfinite(delta_s) && step_s > 0 ? 100 * delta_s / step_s : NAN;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->note, sizeof t->note, fmt, ap);
    va_end(ap);
    return 1;
}

#define TERM_CAP 12

/* The runtime's sums past the warm-up steps of every repeat: per step, and per (step,
 * layer) with those of the layers with CPU tokens for the line C_cpu + A n. */
typedef struct run_sums {
    double steps, step_s, ca, ca_pred, ex, ex_pred, ro, ov, n_cpu;
    double sn, snn, st, snt, cnt, nmin, nmax; /* the line's points: n, n^2, t, n t, count */
} run_sums;

static void sum_runs(const ws_run_result *runs, int reps, int warmup, run_sums *u)
{
    *u = (run_sums){.nmin = INFINITY};
    const int L = runs[0].layers;
    for (int k = 0; k < reps; k++) {
        const ws_run_result *x = &runs[k];
        for (int s = warmup; s < x->steps; s++) {
            u->steps++;
            u->step_s += x->step[s].t_end - x->step[s].t_start;
            for (int l = 0; l < L; l++) {
                const ws_run_layer *y = &x->lay[(size_t)s * L + l];
                u->ca += y->cpu_attn_s, u->ca_pred += y->pred_cpu_s;
                u->ex += y->experts_s, u->ex_pred += y->pred_experts_s;
                u->ro += y->router_s, u->ov += y->overhead_s;
                u->n_cpu += y->n_cpu;
                if (y->n_cpu > 0) {
                    u->cnt++;
                    u->sn += y->n_cpu, u->snn += y->n_cpu * y->n_cpu;
                    u->st += y->cpu_attn_s, u->snt += y->n_cpu * y->cpu_attn_s;
                    u->nmin = fmin(u->nmin, y->n_cpu), u->nmax = fmax(u->nmax, y->n_cpu);
                }
            }
        }
    }
}

/* CPU attention, C_cpu + A n per layer: A and C fitted to the runtime's points where the CPU
 * tokens vary enough, else A with the model's C; then the CPU half per step. */
static void cpu_attn_terms(ws_validate_report *r, const ws_cost_model *cm, const ws_hw *hw,
                           const run_sums *u, double S, double step)
{
    const ws_hw_roof *ra = &hw->cpu_attn;
    const double A = cm->A, C = ra->c0.v;
    const double t_bw = ra->W.v > 0 ? cm->b_tok / ra->W.v : 0,
                 t_fl = ra->P.v > 0 ? cm->f_tok / ra->P.v : 0;
    const int bw_bound = t_bw >= t_fl;
    const double cnt = u->cnt, sn = u->sn, st = u->st, nmin = u->nmin, nmax = u->nmax;
    double A_meas = NAN, C_meas = NAN;
    const double mean_n = cnt > 0 ? sn / cnt : 0;
    if (cnt >= 3 && nmax - nmin >= 0.2 * mean_n) {
        const double den = cnt * u->snn - sn * sn;
        A_meas = (cnt * u->snt - sn * st) / den;
        C_meas = (st - A_meas * sn) / cnt;
    } else if (sn > 0) {
        A_meas = (st - C * cnt) / sn; /* the model's fixed cost taken as right */
    }
    if (cnt > 0) {
        const double rate = bw_bound ? cm->b_tok / A_meas : cm->f_tok / A_meas;
        const double prof = bw_bound ? ra->W.v : ra->P.v;
        add_term(r, TERM_CAP, "cpu_attn.per_token", A_meas, A, "s/token", (A_meas - A) * (sn / S),
                 step,
                 "A = max(b_tok/W, f_tok/P): %s-bound; achieved %.3g %s vs the profile's %.3g (%s)",
                 bw_bound ? "bandwidth" : "flop", rate / 1e9, bw_bound ? "GB/s" : "GFLOP/s",
                 prof / 1e9, bw_bound ? ra->W.from : ra->P.from);
        if (isfinite(C_meas))
            add_term(r, TERM_CAP, "cpu_attn.fixed", C_meas, C, "s/layer", (C_meas - C) * (cnt / S),
                     step,
                     "C_cpu: intercept of a line over %.0f (step, layer) points, CPU tokens "
                     "%.0f..%.0f",
                     cnt, nmin, nmax);
        else
            add_term(r, TERM_CAP, "cpu_attn.fixed", NAN, C, "s/layer", NAN, step,
                     "C_cpu (%s): the CPU tokens vary too little (%.0f..%.0f) to separate it from "
                     "A; A is measured with it taken as right",
                     ra->c0.from, nmin, nmax);
    }
    add_term(r, TERM_CAP, "cpu_attn", u->ca / S, u->ca_pred / S, "s/step", (u->ca - u->ca_pred) / S,
             step, "CPU half, measured vs the cost model on the runtime's own CPU tokens");
}

/* The experts, D c0 + max(F/P, B/W) per MoE layer (D distinct experts of the batch, the
 * played layers' mean), and the router beside them: the model's side of each is the op the
 * layer schedule builds for a decode step of the batch. */
static void expert_terms(ws_validate_report *r, const ws_cost_model *cm, const ws_engine_cfg *e,
                         const run_sums *u, int L, double S, double step)
{
    const ws_sched_in in = {.T = e->batch, .n_seqs = e->batch};
    int moe_layers = 0, router_cpu = 0;
    double D = 0, rpred = 0;
    for (int l = 0; l < L; l++) {
        const ws_deploy_layer *y = ws_cost_layer(cm, l);
        if (!y->moe)
            continue;
        moe_layers++;
        router_cpu |= y->router_on_cpu;
        D += ws_cost_distinct_cpu_experts(cm, l, e->batch);
        rpred += ws_sched_op_time(cm, &in, l, WS_OP_ROUTER);
    }
    if (moe_layers == 0)
        return;
    D /= moe_layers;
    /* one expert's call at the batch's tokens per expert: its piece's fixed cost */
    const double m_tok = D > 0 ? e->batch * (double)cm->top_k / D : 0;
    const double f1 = m_tok * (6.0 * cm->hidden * cm->moe_inter + 4.0 * cm->moe_inter);
    const double b1 = 3.0 * cm->hidden * cm->moe_inter * cm->w_elem;
    const ws_hw_roof *xr = &e->hw->cpu_expert;
    const double c0 = ws_hw_roof_c0(xr, f1, b1);
    const double fixed = D * c0 * moe_layers;
    const double pred = u->ex_pred / S, meas = u->ex / S;
    const double gemm = pred - fixed;
    const double wbytes = 3.0 * cm->hidden * cm->moe_inter *
                          (cm->cfg.cpu_expert_bytes > 0 ? cm->cfg.cpu_expert_bytes : cm->w_elem) *
                          D * moe_layers;
    const int gemm_dom = gemm >= fixed;
    char rate[96];
    if (meas > fixed)
        snprintf(rate, sizeof rate, "weights streamed at %.3g GB/s measured (GEMM part)",
                 wbytes / (meas - fixed) / 1e9);
    else
        snprintf(rate, sizeof rate, "the measured time is below the model's fixed part alone");
    add_term(r, TERM_CAP, gemm_dom ? "experts.gemm" : "experts.fixed", meas, pred, "s/step",
             meas - pred, step,
             "model: %.0f%% GEMM, %.0f%% fixed (%.1f experts x c0 %.3g ms); %s; the "
             "profile's W %.3g GB/s",
             pred > 0 ? 100 * gemm / pred : 0, pred > 0 ? 100 * fixed / pred : 0, D, 1e3 * c0, rate,
             ws_hw_roof_W(xr, f1, b1) / 1e9);
    add_term(r, TERM_CAP, "router", u->ro / S, rpred, "s/step", u->ro / S - rpred, step,
             "router GEMM and top-k beside the routed experts, on the %s: measured "
             "(runtime) against modeled",
             router_cpu ? "CPU" : "GPU");
}

static int compute_terms(const ws_validate_cfg *c, const ws_run_result *runs, int reps,
                         const sim_side *sim, ws_validate_report *r, ws_err *err)
{
    const ws_engine_cfg *e = &c->eng;
    ws_deploy_cfg cc;
    ws_engine_cost_cfg(e, &cc);
    ws_cost_model cm;
    int rc = ws_cost_model_init(e->hw, e->model, &cc, &cm, err);
    if (rc)
        return rc;
    r->term = calloc(TERM_CAP, sizeof *r->term);
    if (!r->term) {
        ws_cost_model_free(&cm);
        return ws_err_set(err, WS_ENOMEM, "validate: out of memory (terms)");
    }
    const int L = runs[0].layers;
    run_sums u;
    sum_runs(runs, reps, c->warmup, &u);
    const double S = u.steps > 0 ? u.steps : 1, step = u.step_s / S;
    double sim_step = 0, sim_n = 0;
    for (int k = c->warmup; k < sim->steps; k++)
        sim_step += sim->dt[k], sim_n += sim->n_cpu[k];
    sim_step /= sim->steps - c->warmup, sim_n /= sim->steps - c->warmup;

    add_term(r, TERM_CAP, "step", step, sim_step, "s/step", step - sim_step, step,
             "decode step: runtime timeline (CPU measured, GPU %s) vs the simulator",
             runs[0].gpu_label);
    cpu_attn_terms(r, &cm, e->hw, &u, S, step);
    expert_terms(r, &cm, e, &u, L, S, step);
    add_term(r, TERM_CAP, "engine", u.ov / S, 0, "s/step", u.ov / S, step,
             "the engine's own CPU work (KV append, views, flush bookkeeping): not in the model");
    const double run_n = u.n_cpu / (S * L);
    add_term(r, TERM_CAP, "placement", run_n, sim_n, "CPU tokens/layer", (run_n - sim_n) * cm.A * L,
             step,
             "CPU-region tokens per layer: runtime (policy fed measured times, final A %.3g "
             "s/token) vs simulator (fed modeled times, A %.3g)",
             runs[0].A_final, cm.A);
    ws_cost_model_free(&cm);
    return 0;
}

int ws_validate_within_noise(const ws_validatedb_stat *s)
{
    if (!isfinite(s->noise_mean_ape) || !isfinite(s->noise_p95_ape))
        return s->mean_ape <= WS_VALIDATE_GOAL_MEAN && s->p95_ape <= WS_VALIDATE_GOAL_P95;
    return s->mean_ape <=
               fmax(WS_VALIDATE_NOISE_MEAN_MIN, s->noise_mean_ape + WS_VALIDATE_NOISE_MEAN_PTS) &&
           s->p95_ape <= s->noise_p95_ape + WS_VALIDATE_NOISE_P95_PTS;
}

/* The term most off (largest share of the step) among those whose name starts with one of
 * the prefixes (NULL: every term but the totals). */
static const ws_validate_term *term_most_off(const ws_validate_report *r,
                                             const char *const *prefixes)
{
    const ws_validate_term *best = NULL;
    for (size_t i = 0; i < r->n_term; i++) {
        const ws_validate_term *t = &r->term[i];
        if (!isfinite(t->step_share_pct))
            continue;
        int ok = !prefixes && strcmp(t->term, "step") && strcmp(t->term, "cpu_attn");
        for (int k = 0; prefixes && prefixes[k]; k++)
            ok |=
                !strncmp(t->term, prefixes[k], strlen(prefixes[k])) && strcmp(t->term, "cpu_attn");
        if (ok && (!best || fabs(t->step_share_pct) > fabs(best->step_share_pct)))
            best = t;
    }
    return best;
}

/* Each CPU-side quantity's verdict against the noise floor (validate.h), and the run's: the
 * quantities off, each with its term. */
static void verdict(ws_validate_report *r)
{
    static const char *const attn[] = {"cpu_attn.", NULL}, *const ex[] = {"experts.", "router",
                                                                          NULL};
    char *v = r->run.verdict;
    const size_t cap = sizeof r->run.verdict;
    size_t len = 0;
    v[0] = 0;
    for (int q = 0; q < WS_VQ_COUNT; q++) {
        ws_validate_stat *s = &r->stat[q];
        if (!ws_validate_q_cpu_side(q) || !s->n)
            continue;
        const int floor = isfinite(s->noise_mean_ape) && isfinite(s->noise_p95_ape);
        if (ws_validate_within_noise(s)) {
            snprintf(s->verdict, sizeof s->verdict, "%s",
                     floor ? "within noise" : "within the goal");
            continue;
        }
        const ws_validate_term *t = term_most_off(r, q == WS_VQ_CPU_ATTN  ? attn
                                                     : q == WS_VQ_EXPERTS ? ex
                                                                          : NULL);
        char bound[64];
        if (floor)
            snprintf(
                bound, sizeof bound, "mean > %.1f%% or p95 > %.1f%%",
                fmax(WS_VALIDATE_NOISE_MEAN_MIN, s->noise_mean_ape + WS_VALIDATE_NOISE_MEAN_PTS),
                s->noise_p95_ape + WS_VALIDATE_NOISE_P95_PTS);
        else
            snprintf(bound, sizeof bound, "no noise floor; goal %.0f%% / %.0f%%",
                     WS_VALIDATE_GOAL_MEAN, WS_VALIDATE_GOAL_P95);
        if (t)
            snprintf(s->verdict, sizeof s->verdict, "off (%s): %s %+.1f%% of the step%s", bound,
                     t->term, t->step_share_pct,
                     isfinite(t->error_pct) ? "" : ", not in the model");
        else
            snprintf(s->verdict, sizeof s->verdict, "off (%s)", bound);
        len += (size_t)snprintf(v + len, len < cap ? cap - len : 0,
                                "%s%s off (mean %.1f%%, p95 %.1f%%; %s)%s%s", len ? "; " : "",
                                s->quantity, s->mean_ape, s->p95_ape, bound, t ? ": " : "",
                                t ? t->term : "");
        if (len >= cap)
            return;
    }
    if (!len)
        len = (size_t)snprintf(v, cap,
                               "every CPU-side quantity within the runtime's noise floor (mean <= "
                               "max(%.0f%%, noise + %.0f), p95 <= noise + %.0f)",
                               WS_VALIDATE_NOISE_MEAN_MIN, WS_VALIDATE_NOISE_MEAN_PTS,
                               WS_VALIDATE_NOISE_P95_PTS);
    const int moved_read = fabs(r->host_drift_pct) > WS_CALIB_DRIFT_PCT;
    const int moved_attn = fabs(r->attn_drift_pct) > WS_CALIB_DRIFT_PCT;
    if (!moved_read && !moved_attn)
        return;
    if (len < cap)
        len += (size_t)snprintf(
            v + len, cap - len,
            "; the host moved since its calibration (bound %.0f%%):", WS_CALIB_DRIFT_PCT);
    if (len < cap && moved_read)
        len += (size_t)snprintf(
            v + len, cap - len, " reference read %.1f GB/s now, %.1f then (%+.0f%%)%s",
            r->probe_bw / 1e9, r->calib_probe_bw / 1e9, r->host_drift_pct, moved_attn ? ";" : "");
    if (len < cap && moved_attn)
        len += (size_t)snprintf(v + len, cap - len,
                                " attention reference (%d x %d tokens) %.1f GB/s now, %.1f then "
                                "(%+.0f%%)",
                                WS_CALIB_ATTN_REF_BATCH, WS_CALIB_ATTN_REF_CTX,
                                r->attn_probe_bw / 1e9, r->calib_attn_bw / 1e9, r->attn_drift_pct);
    if (len < cap)
        snprintf(v + len, cap - len, ": recalibrate (--calibrate) or rerun when the host is back");
}

/* ---- the whole comparison ---- */

static int add_points(ws_validate_report *r, size_t *cap, int rep, const ws_run_result *x,
                      const sim_side *sim, ws_err *err)
{
    const int L = x->layers, S = x->steps;
    const size_t need = r->n_pt + (size_t)S * (2 + 3 * (size_t)L);
    if (need > *cap) {
        void *p = realloc(r->pt, need * sizeof *r->pt);
        if (!p)
            return ws_err_set(err, WS_ENOMEM, "validate: out of memory (points)");
        r->pt = p;
        *cap = need;
    }
#define PT(q, s, l, m, p)                                                                          \
    do {                                                                                           \
        ws_validate_point *t_ = &r->pt[r->n_pt++];                                                 \
        memset(t_, 0, sizeof *t_);                                                                 \
        t_->rep = rep, t_->step = (s), t_->layer = (l), t_->measured = (m), t_->predicted = (p);   \
        snprintf(t_->quantity, sizeof t_->quantity, "%s", k_q_names[q]);                           \
    } while (0)
    /* ordered by quantity, then step and layer, the same for every repeat */
    for (int s = 0; s < S; s++)
        PT(WS_VQ_STEP, s, -1, x->step[s].t_end - x->step[s].t_start, sim->dt[s]);
    for (int s = 0; s < S; s++)
        for (int l = 0; l < L; l++)
            PT(WS_VQ_CPU_ATTN, s, l, x->lay[(size_t)s * L + l].cpu_attn_s,
               sim->cpu[(size_t)s * L + l]);
    for (int s = 0; s < S; s++)
        for (int l = 0; l < L; l++) {
            const double m = x->lay[(size_t)s * L + l].experts_s, p = sim->exp[(size_t)s * L + l];
            if (m > 0 || p > 0) /* dense layers have no routed experts */
                PT(WS_VQ_EXPERTS, s, l, m, p);
        }
    for (int s = 0; s < S; s++)
        PT(WS_VQ_SHARE, s, -1, x->step[s].r_real, sim->share[s]);
    for (int s = 0; s < S; s++)
        for (int l = 0; l < L; l++)
            PT(WS_VQ_GPU, s, l, x->lay[(size_t)s * L + l].gpu_s, sim->gpu[(size_t)s * L + l]);
#undef PT
    return 0;
}

/* The comparison's row: the workload, its labels, the links and the params. */
static void fill_run(const ws_validate_cfg *c, const ws_run_result *runs, const sim_side *sim,
                     long long sim_id, ws_validate_report *r)
{
    const ws_engine_cfg *e = &c->eng;
    const int reps = c->repeat;
    ws_validate_run *v = &r->run;
    snprintf(v->model, sizeof v->model, "%s", e->model->name);
    snprintf(v->gpu, sizeof v->gpu, "%s", runs[0].gpu_label);
    snprintf(v->gpu_source, sizeof v->gpu_source, "%s",
             strncmp(runs[0].gpu_label, "cuda:", 5) ? "modeled" : "measured");
    snprintf(v->host_profile, sizeof v->host_profile, "%s", e->hw->host);
    snprintf(v->policy, sizeof v->policy, "%s", ws_policy_name(e->policy));
    snprintf(r->layers_note, sizeof r->layers_note, "%s", runs[0].layers_note);
    v->batch = e->batch, v->prompt_tokens = e->prompt, v->output_tokens = e->output;
    v->layers = runs[0].layers, v->repeats = reps, v->warmup = c->warmup;
    v->run_id = r->rep_run_id[0];
    v->sim_run_id = sim_id;
    v->calib_run_id = c->calib_run_id;
    double ctx_off = 0;
    for (int s = 0; s < e->output; s++)
        ctx_off = fmax(ctx_off, fabs(runs[0].step[s].context - sim->context[s]));
    size_t len = (size_t)snprintf(v->params, sizeof v->params,
                                  "{\"sim_output_tokens\": %d, \"context_mismatch_max\": %g, "
                                  "\"sim_wall_s\": %.6g, \"run_wall_s\": %.6g, "
                                  "\"expert_backend\": \"%s\", \"run_ids\": [",
                                  e->output + 1, ctx_off, r->sim_wall_s, r->run_wall_s,
                                  runs[0].expert_backend);
    for (int k = 0; k < reps && len < sizeof v->params; k++)
        len += (size_t)snprintf(v->params + len, sizeof v->params - len, "%s%lld", k ? ", " : "",
                                r->rep_run_id[k]);
    /* the reference probe now and when calibrated, GB/s (null: not timed) */
    const double pr[N_PROBE_KEYS] = {r->probe_bw / 1e9,      r->calib_probe_bw / 1e9,
                                     r->host_drift_pct,      r->attn_probe_bw / 1e9,
                                     r->calib_attn_bw / 1e9, r->attn_drift_pct};
    if (len < sizeof v->params)
        len += (size_t)snprintf(v->params + len, sizeof v->params - len, "]");
    for (int i = 0; i < N_PROBE_KEYS && len < sizeof v->params; i++) {
        char num[32] = "null";
        if (isfinite(pr[i]))
            snprintf(num, sizeof num, "%.4g", pr[i]);
        len += (size_t)snprintf(v->params + len, sizeof v->params - len, ", \"%s\": %s",
                                k_probe_keys[i], num);
    }
    if (len < sizeof v->params)
        snprintf(v->params + len, sizeof v->params - len, "}");
}

/* The host's probes at one moment: the read probe (*bw, B/s) and, when the host profile
 * has the model's attention reference, the same attention call (*attn, B/s; else NAN). */
static int host_probes(const ws_engine_cfg *e, ws_pool *pool, double *bw, double *attn, ws_err *err)
{
    *attn = NAN;
    int rc = ws_calib_probe(pool, 1, bw, err);
    if (!rc && e->hw->cpu_attn_ref_bw.v > 0)
        rc = ws_calib_attn_probe(pool, e->model->name, VALIDATE_ATTN_PROBE_REPS, attn, err);
    return rc;
}

int ws_validate_run_all(const ws_validate_cfg *c, ws_store *store, ws_validate_report *r,
                        ws_err *err)
{
    memset(r, 0, sizeof *r);
    const ws_engine_cfg *e = &c->eng;
    if (!e->model || !e->hw)
        return ws_err_set(err, WS_EINVAL, "validate: no model or hardware profiles");
    if (c->repeat < 1 || c->repeat > 100)
        return ws_err_set(err, WS_EINVAL, "validate: --repeat must be 1..100, not %d", c->repeat);
    if (c->warmup < 0 || c->warmup >= e->output)
        return ws_err_set(err, WS_EINVAL,
                          "validate: %d output tokens leave no step past the %d warm-up step%s",
                          e->output, c->warmup, c->warmup == 1 ? "" : "s");
    const int reps = c->repeat;
    ws_run_result *runs = calloc((size_t)reps, sizeof *runs);
    r->rep_run_id = calloc((size_t)reps, sizeof *r->rep_run_id);
    if (!runs || !r->rep_run_id) {
        free(runs);
        ws_validate_report_free(r);
        return ws_err_set(err, WS_ENOMEM, "validate: out of memory");
    }
    int rc = 0, done = 0;
    double t0 = ws_now_s(), probe[101], attn[101];
    ws_pool *pool = ws_pool_create(e->threads, err);
    if (!pool)
        rc = err->code;
    if (!rc)
        rc = host_probes(e, pool, &probe[0], &attn[0], err);
    for (int k = 0; k < reps && !rc; k++) {
        ws_engine_cfg ec = *e;
        run_ctx rx = {.c = c, .rep = k};
        ec.on_step = run_on_step;
        ec.on_step_ctx = &rx;
        if ((rc = ws_engine_run(&ec, &runs[k], err)))
            break;
        done = k + 1;
        rc = host_probes(e, pool, &probe[k + 1], &attn[k + 1], err);
    }
    ws_pool_destroy(pool);
    r->run_wall_s = ws_now_s() - t0;
    for (int k = 0; k <= reps && !rc; k++) {
        probe[k] = 1.0 / probe[k]; /* s/B: the estimate takes the fastest half of times */
        attn[k] = 1.0 / attn[k];
    }
    r->probe_bw = rc ? NAN : 1.0 / ws_calib_estimate(probe, reps + 1);
    r->calib_probe_bw = e->hw->cpu_probe_bw.v > 0 ? e->hw->cpu_probe_bw.v : NAN;
    r->host_drift_pct = 100.0 * (r->probe_bw / r->calib_probe_bw - 1.0);
    r->calib_attn_bw = e->hw->cpu_attn_ref_bw.v > 0 ? e->hw->cpu_attn_ref_bw.v : NAN;
    r->attn_probe_bw =
        rc || isnan(r->calib_attn_bw) ? NAN : 1.0 / ws_calib_estimate(attn, reps + 1);
    r->attn_drift_pct = 100.0 * (r->attn_probe_bw / r->calib_attn_bw - 1.0);
    /* The runtime runs, the simulation and the comparison are stored in one transaction
     * (the caller's when one is open): a validation stopped or failing anywhere before the
     * commit leaves none of them. The lock is taken after the runtime runs, for the short
     * simulation and the writes only. */
    const int own_tx = store && !rc && !ws_store_in_transaction(store);
    if (own_tx)
        rc = ws_store_begin(store, err);
    for (int k = 0; store && k < reps && !rc; k++)
        rc = ws_run_store(store, e, &runs[k], "validate", &r->rep_run_id[k], err);
    sim_side sim = {0};
    if (!rc && c->progress)
        c->progress(c->progress_ctx, "sim", 0, 1, 0, e->output);
    long long sim_id = 0;
    if (!rc)
        rc = run_sim(c, runs[0].layers, store, &sim, &sim_id, &r->sim_wall_s, err);
    size_t cap = 0;
    for (int k = 0; k < reps && !rc; k++)
        rc = add_points(r, &cap, k, &runs[k], &sim, err);
    if (!rc)
        rc = compute_stats(r, strncmp(runs[0].gpu_label, "cuda:", 5) == 0, c->warmup, err);
    if (!rc)
        rc = compute_terms(c, runs, reps, &sim, r, err);
    if (!rc) {
        fill_run(c, runs, &sim, sim_id, r);
        verdict(r);
        if (store) {
            if (c->progress)
                c->progress(c->progress_ctx, "store", 0, 1, 0, 0);
            rc = ws_validatedb_store(store, &r->run, r->stat, WS_VQ_COUNT, r->pt, r->n_pt, r->term,
                                     r->n_term, err);
        }
    }
    if (own_tx && !rc)
        rc = ws_store_commit(store, err);
    if (own_tx && rc)
        ws_store_rollback(store);
    sim_side_free(&sim);
    for (int k = 0; k < done; k++)
        ws_run_result_free(&runs[k]);
    free(runs);
    if (rc)
        ws_validate_report_free(r);
    return rc;
}

int ws_validate_load(ws_store *s, long long id, ws_validate_report *r, ws_err *err)
{
    memset(r, 0, sizeof *r);
    ws_validatedb_stat *st = NULL;
    size_t n_st = 0;
    int rc =
        ws_validatedb_get(s, id, &r->run, &st, &n_st, &r->pt, &r->n_pt, &r->term, &r->n_term, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < n_st; i++) {
        const int q = q_from_name(st[i].quantity);
        if (q >= 0)
            r->stat[q] = st[i];
    }
    free(st);
    /* the reference probe, kept in the run's params */
    json_t *p = json_loads(r->run.params, 0, NULL);
    double *const dst[N_PROBE_KEYS] = {&r->probe_bw,      &r->calib_probe_bw, &r->host_drift_pct,
                                       &r->attn_probe_bw, &r->calib_attn_bw,  &r->attn_drift_pct};
    for (int i = 0; i < N_PROBE_KEYS; i++) {
        json_t *x = json_object_get(p, k_probe_keys[i]);
        *dst[i] = json_is_number(x) ? json_number_value(x) * (i % 3 < 2 ? 1e9 : 1) : NAN;
    }
    json_decref(p);
    return 0;
}

int ws_validate_calibrate(ws_store *s, int threads,
                          void (*progress)(void *ctx, double frac, const char *what), void *ctx,
                          char *host, size_t cap, long long *calib_id, ws_err *err)
{
    ws_err derr = {0};
    const ws_backend *cuda = ws_backend_cuda(&derr);
    const int has_gpu = cuda && cuda->device_count(&derr) > 0;
    ws_calib_opts o = {.quick = 1,
                       .do_cpu = 1,
                       .do_gpu = has_gpu,
                       .do_link = has_gpu,
                       .threads = threads,
                       .progress = progress,
                       .progress_ctx = ctx};
    ws_calib_run run;
    ws_calib_run_init(&run);
    ws_isa isa;
    int rc = ws_isa_resolve(WS_ISA_AUTO, &isa, err);
    if (!rc)
        rc = ws_host_fp_detect(ws_isa_name(isa), &run.host, err);
    if (!rc) {
        snprintf(run.mode, sizeof run.mode, "quick");
        snprintf(run.scope, sizeof run.scope, "all");
        if (!has_gpu)
            snprintf(run.note, sizeof run.note, "CPU only (validate --calibrate): %.180s",
                     derr.msg[0] ? derr.msg : "no CUDA device");
        ws_utc_now(run.started_at, sizeof run.started_at);
        rc = ws_calib_measure(&o, &run, err);
    }
    if (!rc)
        rc = ws_calib_fit_all(&run, err);
    ws_utc_now(run.finished_at, sizeof run.finished_at);
    if (!rc)
        rc = ws_calib_store(s, &run, calib_id, err);
    if (!rc && run.flagged) /* stored as a record; no profile takes it */
        rc = ws_err_set(err, WS_EDEVICE,
                        "validate: the calibration (run %lld) is flagged as noisy and refused: "
                        "its reference probe drifted %.1f%% (bound %.0f%%); rerun when the host "
                        "is quieter",
                        *calib_id, run.drift_pct, WS_CALIB_DRIFT_PCT);
    if (!rc)
        snprintf(host, cap, "host:%s", run.host.id);
    ws_calib_run_free(&run);
    return rc;
}
