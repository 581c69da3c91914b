/* cmd_plan_space: `writescope plan --search`'s output (see cmd_plan_space.h). */
#include "cmd_plan_space.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "plan_run.h"
#include "policy.h"
#include "space_plot.h"
#include "ws_par.h"

static void on_progress(void *ctx, int round, long long points, int open)
{
    cli_progress_line(ctx, 0, "plan --search: round %d, %lld simulations, %d configurations open",
                      round, points, open);
}

static int par_map_all(void *par, size_t n, size_t rec_size, ws_plan_item_fn fn, void *fn_ctx,
                       void *out, ws_err *err)
{
    return ws_par_map(par, n, rec_size, fn, fn_ctx, out, WS_PAR_TO_ALL, err);
}

static int par_agree(void *par, int rc, ws_err *err)
{
    return ws_par_agree(par, rc, err);
}

ws_plan_ranks cli_plan_ranks(struct ws_par *par)
{
    return (ws_plan_ranks){ws_par_rank(par), par_map_all, par_agree, par};
}

const char *cli_plan_secs(double v, char *buf, size_t cap)
{
    if (!isfinite(v))
        snprintf(buf, cap, "-");
    else if (v < 1)
        snprintf(buf, cap, "%.1fms", 1e3 * v);
    else
        snprintf(buf, cap, "%.2fs", v);
    return buf;
}

static const char *engine_name(const ws_space_report *r, const ws_space_entry *e)
{
    const int k = r->configs[e->config].engine;
    return k >= 0 ? r->engines[k] : "(writescope)";
}

static void print_counts(const ws_space_report *r)
{
    printf("gates:");
    for (int st = WS_SPACE_STATUSES - 1; st >= 0; st--)
        printf(" %d %s%s", r->count[st], ws_space_status_name(st), st ? ";" : "");
    printf(" (of %zu configuration x policy pairs)\n", r->n_e);
}

static void print_best(const ws_plan_spec *s, const ws_space_report *r)
{
    const int users = s->load == WS_PLAN_USERS;
    char a[32], b[32], cfg[256], cmd[1024];
    printf("\nbest configuration per engine and policy (MODELED):\n");
    printf("%-14s %-10s %-16s %10s %9s %9s %9s  %s\n", "engine", "policy", "gpu",
           users ? "users" : "req/s", "goodput", "TTFT p", "TPOT p", "configuration");
    int any = 0;
    for (int k = 0; k <= r->n_engines; k++)
        for (int p = 0; p < WS_POLICY_COUNT; p++) {
            const int i = r->best[k * WS_POLICY_COUNT + p];
            if (i < 0)
                continue;
            any = 1;
            const ws_space_entry *e = &r->e[i];
            const ws_plan_config *c = &r->configs[e->config];
            printf("%-14s %-10s %-16s %10.4g %9.4g %9s %9s  %s\n", engine_name(r, e),
                   ws_policy_name(p), s->gpus[c->gpu], e->best.max_load,
                   ws_plan_goodput(s, &e->best), cli_plan_secs(e->best.at.ttft_q, a, sizeof a),
                   cli_plan_secs(e->best.at.tpot_q, b, sizeof b),
                   ws_space_config_text(r, c, cfg, sizeof cfg));
            ws_err err = {0};
            if (c->engine >= 0 && !ws_space_command(r, (size_t)i, cmd, sizeof cmd, &err))
                printf("    $ %s\n", cmd);
            else if (c->engine >= 0)
                printf("    (no command line: %s)\n", err.msg);
        }
    if (!any)
        printf("none: no configuration in the space meets the SLOs\n");
}

static void print_frontier(const ws_plan_spec *s, const ws_space_report *r)
{
    if (!r->n_frontier)
        return;
    char cfg[256];
    printf("\nPareto frontier: goodput against %s (MODELED):\n",
           r->frontier_price ? "$/h (--price)" : "the longest context one sequence's KV fits");
    for (int k = 0; k < r->n_frontier; k++) {
        const ws_space_entry *e = &r->e[r->frontier[k]];
        const ws_plan_config *c = &r->configs[e->config];
        if (r->frontier_price)
            printf("  %9.4g  $%-7.2f  %-14s %-10s %-16s %s\n", ws_plan_goodput(s, &e->best),
                   s->price[c->gpu], engine_name(r, e), ws_policy_name(e->policy), s->gpus[c->gpu],
                   ws_space_config_text(r, c, cfg, sizeof cfg));
        else
            printf("  %9.4g  %7.0fK  %-14s %-10s %-16s %s\n", ws_plan_goodput(s, &e->best),
                   e->ctx_tokens / 1024, engine_name(r, e), ws_policy_name(e->policy),
                   s->gpus[c->gpu], ws_space_config_text(r, c, cfg, sizeof cfg));
    }
}

static void print_none(const ws_plan_spec *s, const ws_space_report *r)
{
    if (r->n_frontier)
        return;
    char a[32], b[32];
    printf("\nwhy none: %s\n", r->binding);
    if (r->change.found)
        printf("smallest change: %s meets at %.4g %s (MODELED; TTFT p %s, TPOT p %s)\n",
               r->change.what, r->change.max_load, s->load == WS_PLAN_USERS ? "users" : "req/s",
               cli_plan_secs(r->change.at.ttft_q, a, sizeof a),
               cli_plan_secs(r->change.at.tpot_q, b, sizeof b));
    else
        printf("smallest change: %s\n", r->change.what);
}

static void print_report(const ws_plan_spec *s, const ws_space_report *r, const char *host,
                         const char *plot)
{
    char wl[512];
    ws_plan_workload_text(s, wl, sizeof wl);
    printf("writescope plan --search: MODELED (discrete-event simulation); model %s on host %s\n",
           r->model, host);
    printf("workload: %s\n", wl);
    printf("SLO: TTFT <= %g s, TPOT <= %g ms for >= %g%% (0: none)\n", s->slo_ttft,
           1e3 * s->slo_tpot, s->slo_pct);
    printf("space: %zu configurations over %d GPU%s; %lld simulations (%lld lone-request bounds) "
           "in %d rounds, %.2f s\n",
           r->n_configs, s->n_gpus, s->n_gpus > 1 ? "s" : "", r->sims, r->alone_sims, r->rounds,
           r->wall_s);
    printf("time: memory and flags %.2f s, bounds %.2f s, load searches %.2f s, why none %.2f "
           "s\n",
           r->wall_gate_s[0], r->wall_gate_s[1], r->wall_gate_s[2], r->wall_gate_s[3]);
    print_counts(r);
    print_best(s, r);
    print_frontier(s, r);
    print_none(s, r);
    if (plot)
        printf(r->n_frontier ? "plot: %s\n" : "plot: %s not drawn: no configuration met\n", plot);
}

json_t *cli_plan_num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *entry_json(const ws_plan_spec *s, const ws_space_report *r, int i)
{
    const ws_space_entry *e = &r->e[i];
    const ws_plan_config *c = &r->configs[e->config];
    char cfg[256], cmd[1024];
    json_t *o = json_object();
    json_object_set_new(o, "engine",
                        c->engine >= 0 ? json_string(r->engines[c->engine]) : json_null());
    json_object_set_new(o, "policy", json_string(ws_policy_name(e->policy)));
    json_object_set_new(o, "gpu", json_string(s->gpus[c->gpu]));
    json_object_set_new(o, "configuration",
                        json_string(ws_space_config_text(r, c, cfg, sizeof cfg)));
    json_object_set_new(o, "status", json_string(ws_space_status_name(e->status)));
    json_object_set_new(o, "max_load", cli_plan_num(e->best.max_load));
    json_object_set_new(o, "incumbent", cli_plan_num(e->incumbent));
    json_object_set_new(o, "simulations", json_integer(e->best.evals));
    json_object_set_new(o, "goodput", cli_plan_num(ws_plan_goodput(s, &e->best)));
    json_object_set_new(o, "ttft_s", cli_plan_num(e->best.at.ttft_q));
    json_object_set_new(o, "tpot_s", cli_plan_num(e->best.at.tpot_q));
    json_object_set_new(o, "tokens_per_s", cli_plan_num(e->best.at.tokens_per_s));
    json_object_set_new(o, "context_tokens", cli_plan_num(e->ctx_tokens));
    json_object_set_new(o, "gpu_weights_gb", cli_plan_num(e->mem.gpu_weights / 1e9));
    json_object_set_new(o, "host_weights_gb", cli_plan_num(e->mem.host_weights / 1e9));
    ws_err err = {0};
    if (c->engine >= 0 && !ws_space_command(r, (size_t)i, cmd, sizeof cmd, &err))
        json_object_set_new(o, "command", json_string(cmd));
    json_object_set_new(o, "source", json_string("modeled"));
    return o;
}

static json_t *report_json(const ws_plan_spec *s, const ws_space_report *r, const char *host,
                           const char *plot)
{
    json_t *o = json_object(), *cnt = json_object(), *best = json_array(), *fr = json_array();
    char wl[512];
    ws_plan_workload_text(s, wl, sizeof wl);
    json_object_set_new(o, "source", json_string("modeled"));
    json_object_set_new(o, "model", json_string(r->model));
    json_object_set_new(o, "host", json_string(host));
    json_object_set_new(o, "workload", json_string(wl));
    json_object_set_new(o, "slo_ttft_s", s->slo_ttft > 0 ? json_real(s->slo_ttft) : json_null());
    json_object_set_new(o, "slo_tpot_s", s->slo_tpot > 0 ? json_real(s->slo_tpot) : json_null());
    json_object_set_new(o, "slo_pct", json_real(s->slo_pct));
    json_object_set_new(o, "configurations", json_integer((json_int_t)r->n_configs));
    json_object_set_new(o, "pairs", json_integer((json_int_t)r->n_e));
    json_object_set_new(o, "simulations", json_integer(r->sims));
    json_object_set_new(o, "bound_simulations", json_integer(r->alone_sims));
    json_object_set_new(o, "rounds", json_integer(r->rounds));
    json_object_set_new(o, "wall_s", json_real(r->wall_s));
    json_object_set_new(o, "wall_gate_s",
                        json_pack("{s:f, s:f, s:f, s:f}", "memory", r->wall_gate_s[0], "bound",
                                  r->wall_gate_s[1], "search", r->wall_gate_s[2], "why_none",
                                  r->wall_gate_s[3]));
    for (int st = 0; st < WS_SPACE_STATUSES; st++)
        json_object_set_new(cnt, ws_space_status_name(st), json_integer(r->count[st]));
    json_object_set_new(o, "gates", cnt);
    for (int k = 0; k <= r->n_engines; k++)
        for (int p = 0; p < WS_POLICY_COUNT; p++)
            if (r->best[k * WS_POLICY_COUNT + p] >= 0)
                json_array_append_new(best, entry_json(s, r, r->best[k * WS_POLICY_COUNT + p]));
    json_object_set_new(o, "best", best);
    for (int k = 0; k < r->n_frontier; k++)
        json_array_append_new(fr, entry_json(s, r, r->frontier[k]));
    json_object_set_new(o, "frontier", fr);
    json_t *all = json_array();
    for (size_t i = 0; i < r->n_e; i++)
        if (r->e[i].status <= WS_SPACE_PRUNED)
            json_array_append_new(all, entry_json(s, r, (int)i));
    json_object_set_new(o, "searched", all);
    json_object_set_new(o, "frontier_against",
                        json_string(r->frontier_price ? "price_per_hour" : "context_tokens"));
    if (!r->n_frontier) {
        json_t *w = json_object();
        json_object_set_new(w, "binding", json_string(r->binding));
        json_object_set_new(w, "change", json_string(r->change.what));
        json_object_set_new(w, "change_meets", json_boolean(r->change.found));
        json_object_set_new(w, "change_max_load",
                            cli_plan_num(r->change.found ? r->change.max_load : NAN));
        json_object_set_new(o, "why_none", w);
    }
    json_object_set_new(o, "plot", plot ? json_string(plot) : json_null());
    return o;
}

/* The figure: every configuration searched to the end, the frontier marked. */
static int draw_plot(const ws_plan_spec *s, const ws_space_report *r, const char *out, ws_err *err)
{
    ws_space_plot_pt *pts = calloc(r->n_e + 1, sizeof *pts);
    if (!pts)
        return ws_err_set(err, WS_ENOMEM, "plan: out of memory");
    int n = 0;
    for (size_t i = 0; i < r->n_e; i++) {
        const ws_space_entry *e = &r->e[i];
        const double g = e->status == WS_SPACE_SEARCHED ? ws_plan_goodput(s, &e->best) : 0;
        const double x =
            r->frontier_price ? s->price[r->configs[e->config].gpu] : e->ctx_tokens / 1024;
        if (!(g > 0) || !(x > 0))
            continue;
        int front = 0;
        for (int k = 0; k < r->n_frontier; k++)
            front |= r->frontier[k] == (int)i;
        pts[n++] = (ws_space_plot_pt){x, g, front};
    }
    if (!n) { /* nothing met: no frontier to draw */
        free(pts);
        return 0;
    }
    char title[512];
    snprintf(title, sizeof title,
             "plan --search: %s, %zu configurations, %d on the frontier (MODELED)", r->model,
             r->n_configs, r->n_frontier);
    const int rc =
        ws_space_plot(pts, n, r->frontier_price, s->load == WS_PLAN_USERS, title, out, err);
    free(pts);
    return rc;
}

int cli_plan_space(struct ws_par *par, ws_plan_spec *s, const ws_plan_space *sp, const char *db,
                   int json, const char *plot_out)
{
    const int rank = ws_par_rank(par);
    ws_err err = {0};
    ws_store *st = NULL;
    int embedded = 0;
    int rc = cli_open_store_ranks(par, db, 0, &st, &embedded, &err);
    char this_host[64];
    if (!rc)
        rc = cli_host_this(st, &s->host, this_host, sizeof this_host, &err);
    cli_progress pg;
    cli_progress_start(&pg);
    const ws_plan_ranks ranks = cli_plan_ranks(par);
    const ws_plan_run_cfg cfg = {
        .spec = s, .ranks = &ranks, .progress = on_progress, .progress_ctx = &pg};
    ws_space_report rep = {0};
    if ((rc = ws_par_agree(par, rc, &err)) == 0)
        rc = ws_plan_space_run_all(st, &cfg, sp, &rep, &err);
    cli_progress_end(&pg);
    if (!rc && !rank && plot_out)
        rc = draw_plot(s, &rep, plot_out, &err);
    ws_store_close(st);
    rc = ws_par_agree(par, rc, &err);
    if (rc || rank) {
        ws_space_report_free(&rep);
        return rc ? (rank ? CLI_EXIT_FAIL : cli_fail(&err)) : CLI_EXIT_OK;
    }
    if (json)
        rc = cli_print_json(report_json(s, &rep, s->host, plot_out));
    else
        print_report(s, &rep, s->host, plot_out);
    ws_space_report_free(&rep);
    return rc;
}
