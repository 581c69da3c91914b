/* policy: placement rules and the feedback estimator (see policy.h). */
#include "policy.h"

#include <math.h>
#include <string.h>

static const ws_policy_info infos[WS_POLICY_COUNT] = {
    [WS_POLICY_WRITESCOPE] = {"writescope", 1, 1, 0, 1, "this project"},
    [WS_POLICY_STATIC] = {"static", 1, 0, 0, 1, "the paper's fixed-r ablation"},
    [WS_POLICY_STREAM] = {"stream", 1, 0, 0, 1, "FlexGen-style offload, HF OffloadedCache"},
    [WS_POLICY_CPU_ATTN] = {"cpu-attn", 1, 0, 0, 1, "FastDecode, HeadInfer-like"},
    [WS_POLICY_GPU_ONLY] = {"gpu-only", 0, 0, 0, 0, "vLLM, SGLang"},
    [WS_POLICY_KTRANS] = {"ktrans", 0, 0, 0, 1, "KTransformers"},
    [WS_POLICY_MIGRATE] = {"migrate", 1, 1, 1, 1, "HybridGen-like feedback on a monolithic cache"},
};

const ws_policy_info *ws_policy_info_of(ws_policy_kind k)
{
    return (unsigned)k < WS_POLICY_COUNT ? &infos[k] : NULL;
}

const char *ws_policy_name(ws_policy_kind k)
{
    return (unsigned)k < WS_POLICY_COUNT ? infos[k].name : "?";
}

int ws_policy_from_name(const char *name, ws_policy_kind *k, ws_err *err)
{
    for (int i = 0; i < WS_POLICY_COUNT; i++)
        if (name && !strcmp(name, infos[i].name)) {
            *k = (ws_policy_kind)i;
            return 0;
        }
    return ws_err_set(
        err, WS_ENOTFOUND,
        "unknown policy '%s' (writescope, static, stream, cpu-attn, gpu-only, ktrans, "
        "migrate)",
        name ? name : "");
}

void ws_policy_params_default(ws_policy_params *p)
{
    *p = (ws_policy_params){.r_max = 1.0,
                            .r_static = 0.5,
                            .page_tokens = 256,
                            .alpha = 0.2,
                            .window = 0,
                            .min_obs = 8,
                            .hysteresis = 0.1,
                            .confirm = 3,
                            .min_tokens = 256,
                            .min_delta = 0.05};
}

static void est_init(ws_policy_est *e, double prior)
{
    memset(e, 0, sizeof *e);
    e->prior = e->est = e->adopted = prior;
}

int ws_policy_init(ws_policy *p, ws_policy_kind kind, const ws_policy_params *par, double A_model,
                   double B_model, ws_err *err)
{
    memset(p, 0, sizeof *p);
    if ((unsigned)kind >= WS_POLICY_COUNT)
        return ws_err_set(err, WS_EINVAL, "policy: unknown kind %d", (int)kind);
    if (!(par->r_max >= 0 && par->r_max <= 1) || !(par->r_static >= 0 && par->r_static <= 1) ||
        par->page_tokens <= 0 || !(par->alpha > 0 && par->alpha <= 1) || par->window < 0 ||
        par->window > WS_POLICY_WINDOW_MAX || par->min_obs < 0 || !(par->hysteresis >= 0) ||
        par->confirm < 1 || !(par->min_tokens >= 0) || !(par->min_delta >= 0))
        return ws_err_set(err, WS_EINVAL,
                          "policy: parameter out of range (r in [0,1], alpha in (0,1], "
                          "window <= %d, confirm >= 1)",
                          WS_POLICY_WINDOW_MAX);
    if (!(A_model > 0) || !(B_model > 0) || !isfinite(A_model) || !isfinite(B_model))
        return ws_err_set(err, WS_EINVAL, "policy: the model's A and B must be positive (%g, %g)",
                          A_model, B_model);
    p->kind = kind;
    p->par = *par;
    est_init(&p->A, A_model);
    est_init(&p->B, B_model);
    return 0;
}

/* One sample into the estimate; 1 when the adopted value changed. */
static int observe(const ws_policy_params *par, ws_policy_est *e, double tokens, double seconds,
                   double fixed_s)
{
    if (!(tokens > 0) || tokens < par->min_tokens || !isfinite(seconds))
        return 0;
    const double x = (seconds - fixed_s) / tokens;
    if (!(x > 0) || !isfinite(x))
        return 0;
    if (par->window > 0) {
        if (e->win_n == par->window)
            e->win_sum -= e->win[e->win_pos];
        else
            e->win_n++;
        e->win[e->win_pos] = x;
        e->win_sum += x;
        e->win_pos = (e->win_pos + 1) % par->window;
        e->est = e->win_sum / e->win_n;
    } else {
        e->est = e->n_obs == 0 ? x : e->est + par->alpha * (x - e->est);
    }
    e->n_obs++;
    if (e->n_obs < par->min_obs)
        return 0;
    const double rel = e->est / e->adopted - 1.0;
    if (fabs(rel) <= par->hysteresis) {
        e->streak = 0;
        return 0;
    }
    const int dir = rel > 0 ? 1 : -1;
    e->streak = dir == e->streak_dir ? e->streak + 1 : 1;
    e->streak_dir = dir;
    if (e->streak < par->confirm)
        return 0;
    e->adopted = e->est;
    e->streak = 0;
    e->adoptions++;
    return 1;
}

int ws_policy_observe_cpu(ws_policy *p, double tokens, double seconds, double fixed_s)
{
    return observe(&p->par, &p->A, tokens, seconds, fixed_s);
}

int ws_policy_observe_gpu(ws_policy *p, double tokens, double seconds, double fixed_s)
{
    return observe(&p->par, &p->B, tokens, seconds, fixed_s);
}

double ws_policy_A(const ws_policy *p)
{
    return p->A.adopted;
}
double ws_policy_B(const ws_policy *p)
{
    return p->B.adopted;
}

double ws_policy_rstar(double A, double B, double C_cpu, double C_gpu, double L, double r_max)
{
    if (!(L > 0) || !(A + B > 0))
        return 0;
    double r = (B * L + C_gpu - C_cpu) / ((A + B) * L);
    if (!(r > 0))
        return 0;
    return r < r_max ? r : r_max;
}

double ws_policy_target(const ws_policy *p, const ws_cost_split *s, double L)
{
    switch (p->kind) {
    case WS_POLICY_WRITESCOPE:
    case WS_POLICY_MIGRATE:
        return ws_policy_rstar(p->A.adopted, p->B.adopted, s->C_cpu, s->C_gpu, L, p->par.r_max);
    case WS_POLICY_STATIC: return p->par.r_static;
    case WS_POLICY_CPU_ATTN: return 1.0;
    case WS_POLICY_STREAM:
    case WS_POLICY_GPU_ONLY:
    case WS_POLICY_KTRANS:
    case WS_POLICY_COUNT: break;
    }
    return 0.0;
}

int ws_policy_prefill_cpu_pages(double r, int n_pages)
{
    if (n_pages <= 0 || !(r > 0))
        return 0;
    long k = lround(r * n_pages);
    return k > n_pages ? n_pages : (int)k;
}

int ws_policy_flush_cpu_pages(double cpu_tokens, double spilled_tokens, int n_pages,
                              int page_tokens, double r)
{
    if (n_pages <= 0 || page_tokens <= 0 || !(r > 0))
        return 0;
    /* Share after k CPU pages: (cpu + k P) / (spilled + n P), linear in k; the nearest
     * integer to the exact k, ties rounded down (toward XFER). */
    const double P = page_tokens, want = (r * (spilled_tokens + n_pages * P) - cpu_tokens) / P;
    double k = ceil(want - 0.5);
    if (k < 0)
        k = 0;
    return k > n_pages ? n_pages : (int)k;
}

double ws_policy_migrate(const ws_policy *p, double r_cur, double r_target, double spilled_tokens,
                         double bytes_per_token, double *r_new)
{
    *r_new = r_cur;
    if (fabs(r_target - r_cur) < p->par.min_delta || !(fabs(r_target - r_cur) > 0))
        return 0;
    *r_new = r_target;
    return fabs(r_target - r_cur) * fmax(spilled_tokens, 0) * bytes_per_token;
}
