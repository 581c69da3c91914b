/* control: the step's one controller (control.h). */
#include "control.h"

#include <math.h>
#include <string.h>

int ws_ctl_init(ws_ctl *c, const ws_cost_model *cm, ws_policy_kind kind,
                const ws_policy_params *par, int layers, ws_err *err)
{
    memset(c, 0, sizeof *c);
    c->info = ws_policy_info_of(kind);
    if (!c->info)
        return ws_err_set(err, WS_EINVAL, "control: unknown policy %d", (int)kind);
    c->cm = cm;
    c->page_tokens = par->page_tokens;
    c->layers = layers > 0 && layers <= cm->layers ? layers : cm->layers;
    for (int l = 0; l < cm->layers; l++)
        c->streams |= ws_cost_layer(cm, l)->on_cpu || ws_cost_layer(cm, l)->cpu_q > 0;
    ws_policy_params p = *par;
    if (kind == WS_POLICY_MIGRATE && p.confirm < 2 * layers)
        p.confirm = 2 * layers;
    return ws_policy_init(&c->pol, kind, &p, cm->A, cm->B, err);
}

double ws_ctl_moe_estimate(const ws_ctl *c, double batch)
{
    if (c->last_moe > 0)
        return c->last_moe;
    const double T = batch > 0 ? batch : 1;
    const ws_sched_in in = {.T = T, .n_seqs = T};
    ws_sched_layer s;
    ws_sched_build(c->cm, NULL, &in, c->layers - 1, &s);
    ws_sched_play p;
    ws_sched_times t;
    ws_sched_play_start(&p, 0);
    ws_sched_play_layer(&p, &s, &t, NULL);
    return t.moe_s;
}

double ws_ctl_play(const ws_ctl *c, const ws_sched_in *in, ws_sched_times *lay)
{
    ws_cost_split sp;
    ws_cost_split_terms(c->cm, in->resident, 0, 0, 0, &sp);
    return ws_sched_play_step(c->cm, &sp, in, c->cm->layers, lay);
}

double ws_ctl_target(const ws_ctl *c, double batch, double resident, double L)
{
    if (!c->info->spills)
        return 0;
    ws_cost_split sp;
    ws_cost_split_terms(c->cm, resident, ws_ctl_moe_estimate(c, batch), 0, 0, &sp);
    return ws_policy_target(&c->pol, &sp, L);
}

double ws_ctl_share(const ws_ctl *c, double batch, double resident, double L)
{
    if (c->info->reformats)
        return c->r_cur;
    return ws_ctl_target(c, batch, resident, L);
}

int ws_ctl_prefill_cpu_pages(const ws_ctl *c, double batch, double resident, double L, int n_pages)
{
    if (!c->info->spills)
        return 0;
    return ws_policy_prefill_cpu_pages(ws_ctl_share(c, batch, resident, L), n_pages);
}

int ws_ctl_flush_cpu_pages(const ws_ctl *c, double batch, double resident_after, double cpu_tokens,
                           double spilled_tokens, int n_pages)
{
    const double flushed = (double)n_pages * c->page_tokens;
    const double r = ws_ctl_share(c, batch, resident_after, spilled_tokens + flushed);
    return ws_policy_flush_cpu_pages(cpu_tokens, spilled_tokens, n_pages, c->page_tokens, r);
}

int ws_ctl_migrate(ws_ctl *c, double rstar, int cpu_pages, int spilled_pages, int *pages_to_cpu)
{
    *pages_to_cpu = 0;
    if (!c->info->reformats || spilled_pages <= 0)
        return 0;
    double r_new;
    ws_policy_migrate(&c->pol, c->r_cur, rstar, spilled_pages, 0, &r_new);
    if (r_new == c->r_cur)
        return 0;
    c->r_cur = r_new;
    *pages_to_cpu = ws_policy_prefill_cpu_pages(r_new, spilled_pages) - cpu_pages;
    return 1;
}

void ws_ctl_observe(ws_ctl *c, double n, double cpu_s, double m, double gpu_s, double resident,
                    double t_moe_prev)
{
    if (!c->info->spills)
        return;
    ws_cost_split s;
    ws_cost_split_terms(c->cm, resident, t_moe_prev, 0, 0, &s);
    if (n > 0)
        ws_policy_observe_cpu(&c->pol, n, cpu_s, s.C_cpu);
    /* The fixed part as the model has it for this m: the prefetch credit never exceeds the
     * streamed tokens' own transfer. */
    if (m > 0)
        ws_policy_observe_gpu(&c->pol, m, gpu_s, ws_cost_split_gpu(&s, m) - s.B * m);
}

void ws_ctl_step_end(ws_ctl *c, double t_moe)
{
    c->last_moe = t_moe;
}

int ws_ctl_set_prefill(ws_ctl *c, int mode, int gpu_tokens, ws_err *err)
{
    if (mode < WS_PREFILL_AUTO || mode > WS_PREFILL_GPU)
        return ws_err_set(err, WS_EINVAL, "control: unknown prefill mode %d", mode);
    if (gpu_tokens < 0)
        return ws_err_set(err, WS_EINVAL, "control: prefill GPU threshold %d tokens", gpu_tokens);
    c->prefill_mode = mode;
    c->prefill_gpu_tokens = gpu_tokens;
    return 0;
}

const char *ws_prefill_mode_name(int mode)
{
    return mode == WS_PREFILL_CPU ? "cpu" : mode == WS_PREFILL_GPU ? "gpu" : "auto";
}

int ws_prefill_mode_parse(const char *name)
{
    for (int m = WS_PREFILL_AUTO; m <= WS_PREFILL_GPU; m++)
        if (name && !strcmp(name, ws_prefill_mode_name(m)))
            return m;
    return -1;
}

int ws_ctl_prefill_gpu(const ws_ctl *c, const ws_sched_in *in)
{
    if (!c->streams || !(in->prefill_q > 0) || c->prefill_mode == WS_PREFILL_CPU)
        return 0;
    if (c->prefill_mode == WS_PREFILL_GPU)
        return 1;
    if (c->prefill_gpu_tokens > 0)
        return in->prefill_q >= c->prefill_gpu_tokens;
    ws_sched_in a = *in;
    a.prefill_gpu = 0;
    const double cpu = ws_ctl_play(c, &a, NULL);
    a.prefill_gpu = 1;
    return ws_ctl_play(c, &a, NULL) < cpu;
}

double ws_ctl_A(const ws_ctl *c)
{
    return ws_policy_A(&c->pol);
}

double ws_ctl_B(const ws_ctl *c)
{
    return ws_policy_B(&c->pol);
}
