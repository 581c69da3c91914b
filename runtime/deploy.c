/* deploy: a model's placement and formats on a machine, built once (see deploy.h). */
#include "deploy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ws_deploy_cfg_default(ws_deploy_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->kv_dtype = WS_DT_BF16;
    c->pingpong_bytes = 32.0 * 1024 * 1024;
    c->act_bytes = 4;
    c->step_overhead = -1;
}

const char *ws_layer_kind_name(int kind)
{
    static const char *const names[WS_LAYER_KINDS] = {"dense", "moe", "moe_gpu", "cpu_dense",
                                                      "cpu_moe"};
    return kind >= 0 && kind < WS_LAYER_KINDS ? names[kind] : "?";
}

/* Pick probabilities q_i = k p_i (p_i Zipf with exponent s, most popular first), each
 * capped at 1 with the excess spread over the uncapped in proportion. */
static void pick_probs(int E, int k, double s, double *q)
{
    double z = 0;
    for (int i = 0; i < E; i++)
        z += q[i] = pow(i + 1.0, -s);
    for (int i = 0; i < E; i++)
        q[i] = k * q[i] / z;
    for (int iter = 0; iter < E; iter++) {
        double excess = 0, free_mass = 0;
        for (int i = 0; i < E; i++) {
            if (q[i] > 1.0) {
                excess += q[i] - 1.0;
                q[i] = 1.0;
            } else if (q[i] < 1.0) {
                free_mass += q[i];
            }
        }
        if (excess <= 1e-15 || free_mass <= 0)
            break;
        for (int i = 0; i < E; i++)
            if (q[i] < 1.0)
                q[i] += excess * q[i] / free_mass;
    }
}

/* Scales the CPU's rooflines (attention, experts, each weight format's) and its DRAM
 * bandwidth: flop/s by fp, bandwidth by fw, then the bandwidth capped at wcap (0: none). */
static void scale_cpu(ws_hw *hw, double fp, double fw, double wcap)
{
    ws_hw_roof *cr[2 + WS_WC_COUNT] = {&hw->cpu_attn, &hw->cpu_expert};
    for (int c = 0; c < WS_WC_COUNT; c++)
        cr[2 + c] = &hw->cpu_expert_wc[c];
    for (int i = 0; i < 2 + WS_WC_COUNT; i++) {
        cr[i]->P.v *= fp;
        cr[i]->W.v *= fw;
        if (wcap > 0 && cr[i]->W.v > wcap)
            cr[i]->W.v = wcap;
        for (int k = 0; k < cr[i]->n_low; k++) {
            cr[i]->low[k].P.v *= fp;
            cr[i]->low[k].W.v *= fw;
            if (wcap > 0 && cr[i]->low[k].W.v > wcap)
                cr[i]->low[k].W.v = wcap;
        }
    }
    hw->cpu_mem_bw.v *= fw;
    if (wcap > 0 && hw->cpu_mem_bw.v > wcap)
        hw->cpu_mem_bw.v = wcap;
}

/* The share of the host's sockets (and so of its cores and DRAM) the CPU's work runs on. */
static double socket_share(const ws_hw *hw, const ws_deploy_cfg *cfg)
{
    return cfg->cpu_sockets > 0 && cfg->cpu_sockets < hw->sockets.v
               ? cfg->cpu_sockets / hw->sockets.v
               : 1.0;
}

int ws_deploy_check_host(const ws_hw *hw, const ws_deploy_cfg *cfg, ws_err *err)
{
    if (cfg->cpu_sockets > hw->sockets.v)
        return ws_err_set(err, WS_EINVAL, "--cpu-sockets %d: host %s has %g", cfg->cpu_sockets,
                          hw->host, hw->sockets.v);
    /* hw.c labels the cores "cores" when the profile gives them; without, it assumed one */
    if (cfg->cpu_threads <= 0 || strcmp(hw->cores.from, "cores"))
        return 0;
    const double share = socket_share(hw, cfg), cores = floor(hw->cores.v * share);
    if (cfg->cpu_threads > fmax(1, cores))
        return ws_err_set(err, WS_EINVAL,
                          "--cpu-threads %d: host %s has %g cores%s (one thread per core)",
                          cfg->cpu_threads, hw->host, fmax(1, cores),
                          share < 1 ? " on the sockets used" : "");
    return 0;
}

int ws_deploy_cpu_workers(const ws_hw *hw, const ws_deploy_cfg *cfg, int units)
{
    int workers = socket_share(hw, cfg) < 1 ? (int)fmax(1, units * socket_share(hw, cfg)) : units;
    if (cfg->cpu_threads > 0 && cfg->cpu_threads < workers)
        workers = cfg->cpu_threads;
    return workers;
}

/* The deployment's factors on the CPU's rates, each applied here once. */
static void deploy_rates(const ws_hw *hw, const ws_model *m, const ws_deploy_cfg *cfg,
                         ws_hw *out)
{
    *out = *hw;
    if (cfg->step_overhead >= 0) {
        out->step.v = cfg->step_overhead;
        out->step.src = WS_SOURCE_MODELED;
        snprintf(out->step.from, sizeof out->step.from, "%s", cfg->step_from);
    }
    /* Pageable host weights (an mmap'd model file) stream to the GPU through the driver's
     * staging buffers, at the GPU's pageable H2D rate. */
    if (cfg->host_weights_pageable) {
        out->h2d_weights.W.v = hw->h2d.W.v * hw->h2d_pageable.v;
        out->h2d_weights.W.src = hw->h2d_pageable.src;
        snprintf(out->h2d_weights.W.from, sizeof out->h2d_weights.W.from, "%.90s x %.90s",
                 hw->h2d.W.from, hw->h2d_pageable.from);
    }
    if (cfg->handoff_c0 > 0) {
        out->handoff_c0.v = cfg->handoff_c0;
        snprintf(out->handoff_c0.from, sizeof out->handoff_c0.from, "%s", cfg->handoff_from);
    }
    /* NUMA-aware engines run the CPU's work on the sockets given, each reading its own copy
     * from its own DRAM: their share of the host's cores and bandwidth. */
    const double share = socket_share(hw, cfg);
    if (share < 1)
        scale_cpu(out, share, share, 0);
    /* One copy in one socket's DRAM: every core reads through that socket's memory
     * controllers, whatever socket it is on. */
    if (cfg->one_node_memory && cfg->cpu_sockets == 0 && hw->sockets.v > 1)
        scale_cpu(out, 1, 1 / hw->sockets.v, 0);
    /* Fewer threads than the sockets' cores: their share of the flop/s; the DRAM bandwidth
     * up to what that many cores can pull (threads x core_bw, where it is known). */
    const double avail = fmax(1.0, out->cores.v * share);
    if (cfg->cpu_threads > 0 && cfg->cpu_threads < avail)
        scale_cpu(out, cfg->cpu_threads / avail, 1, cfg->cpu_threads * hw->core_bw.v);
    /* MoE models: every CPU attention call follows a MoE phase (the previous layer's, or the
     * previous step's last), so the attention's memory side runs at W / factor. */
    if (m->n_experts > 0 && hw->cpu_attn_after_moe.v > 1.0 && out->cpu_attn.W.v > 0) {
        out->cpu_attn.W.v /= hw->cpu_attn_after_moe.v;
        snprintf(out->cpu_attn.W.from, sizeof out->cpu_attn.W.from, "%.90s / %.90s",
                 hw->cpu_attn.W.from, hw->cpu_attn_after_moe.from);
    }
}

/* Each part's bytes per weight and roofline: its format's, else the model's dtype at
 * gpu_gemm / cpu_expert (the CPU experts' bytes: cpu_expert_bytes where set). */
static void deploy_parts(ws_deploy *d, const ws_model *m, const ws_deploy_cfg *cfg)
{
    const ws_hw *hw = &d->hw;
    const double ws = ws_dtype_size(m->weight_dtype);
    const ws_wformat *fg = cfg->w_gpu, *fs = cfg->w_shared, *fe = cfg->w_gpu_experts,
                     *fc = cfg->w_cpu_experts;
    ws_deploy_part *p = d->part;
    p[WS_PART_GPU] = (ws_deploy_part){fg ? fg->bytes : ws, fg ? hw->gpu_gemm_wc[fg->gpu]
                                                              : hw->gpu_gemm};
    p[WS_PART_SHARED] = (ws_deploy_part){fs ? fs->bytes : ws, fs ? hw->gpu_gemm_wc[fs->gpu]
                                                                 : hw->gpu_gemm};
    p[WS_PART_GPU_EXP] = (ws_deploy_part){fe ? fe->bytes : ws, fe ? hw->gpu_gemm_wc[fe->gpu]
                                                                  : hw->gpu_gemm};
    const double wb_cpu = fc                          ? fc->bytes
                          : cfg->cpu_expert_bytes > 0 ? cfg->cpu_expert_bytes
                                                      : ws;
    p[WS_PART_CPU_EXP] = (ws_deploy_part){wb_cpu, fc ? hw->cpu_expert_wc[fc->cpu]
                                                     : hw->cpu_expert};
    p[WS_PART_STREAM_EXP] = (ws_deploy_part){wb_cpu, fc ? hw->gpu_gemm_wc[fc->gpu]
                                                        : hw->gpu_gemm};
    p[WS_PART_CPU_DENSE] = (ws_deploy_part){p[WS_PART_GPU].wb, fg ? hw->cpu_expert_wc[fg->cpu]
                                                                  : hw->cpu_expert};
    p[WS_PART_CPU_SHARED] = (ws_deploy_part){p[WS_PART_SHARED].wb,
                                             fs ? hw->cpu_expert_wc[fs->cpu] : hw->cpu_expert};
}

/* The pick probabilities and the layers' placement and routing shares. */
static void deploy_layers(ws_deploy *d, const ws_model *m, const ws_deploy_cfg *cfg)
{
    double gpu_q = 0, cpu_q = 0, all_q = 0;
    if (d->q) {
        const int E = d->n_experts;
        pick_probs(E, d->top_k < E ? d->top_k : E, cfg->routing_skew, d->q);
        for (int i = 0; i < E; i++) {
            d->log1m_q[i] = d->q[i] >= 1.0 ? -INFINITY : log1p(-d->q[i]);
            if (i < cfg->gpu_experts)
                gpu_q += d->q[i];
            else
                cpu_q += d->q[i];
            all_q += d->q[i];
        }
    }
    for (int l = 0; l < d->layers; l++) {
        ws_deploy_layer *y = &d->layer[l];
        y->moe = m->n_experts > 0 && l >= m->n_dense_layers;
        y->on_cpu = l < d->cpu_layers;
        if (!y->moe) {
            y->kind = y->on_cpu ? WS_LAYER_CPU_DENSE : WS_LAYER_DENSE;
        } else if (y->on_cpu) {
            y->kind = WS_LAYER_CPU_MOE;
            y->cpu_q = all_q;
        } else if ((cfg->n_cpu_moe == WS_DEPLOY_NO_CPU_MOE ||
                    (cfg->n_cpu_moe > 0 && l - m->n_dense_layers >= cfg->n_cpu_moe)) &&
                   m->n_experts != cfg->gpu_experts) {
            y->kind = WS_LAYER_MOE_GPU;
            y->gpu_experts = m->n_experts;
            y->gpu_q = all_q;
        } else {
            y->kind = WS_LAYER_MOE;
            y->gpu_experts = cfg->gpu_experts;
            y->cpu_q = cpu_q;
            y->gpu_q = gpu_q;
        }
        y->router_on_cpu = y->moe && y->cpu_q > 0;
    }
}

int ws_deploy_init(const ws_hw *hw, const ws_model *m, const ws_deploy_cfg *cfg, ws_deploy *d,
                   ws_err *err)
{
    memset(d, 0, sizeof *d);
    if (!(cfg->pingpong_bytes >= 0) || !(cfg->routing_skew >= 0) || !isfinite(cfg->routing_skew) ||
        cfg->gpu_experts < 0 || !(cfg->cpu_expert_bytes >= 0) || !(cfg->act_bytes >= 0) ||
        cfg->n_cpu_moe < WS_DEPLOY_NO_CPU_MOE || cfg->cpu_threads < 0 || cfg->n_gpu_layers < 0 ||
        !(cfg->handoff_c0 >= 0 && cfg->handoff_c0 < 0.1))
        return ws_err_set(err, WS_EINVAL, "cost: configuration out of range");
    if (m->n_experts > 0 && cfg->gpu_experts > m->n_experts)
        return ws_err_set(err, WS_EINVAL, "cost: %d GPU experts, the model has %d",
                          cfg->gpu_experts, m->n_experts);
    if (cfg->cpu_sockets < 0 || cfg->cpu_sockets > hw->sockets.v)
        return ws_err_set(err, WS_EINVAL, "cost: %d CPU sockets, host %s has %g",
                          cfg->cpu_sockets, hw->host, hw->sockets.v);
    if (m->layers < 1)
        return ws_err_set(err, WS_EINVAL, "%s: model has no layers", m->name);
    deploy_rates(hw, m, cfg, &d->hw);
    d->layers = m->layers;
    d->cpu_layers = cfg->n_gpu_layers > 0 && cfg->n_gpu_layers < m->layers
                        ? m->layers - cfg->n_gpu_layers
                        : 0;
    d->n_experts = m->n_experts;
    d->top_k = m->experts_per_tok;
    d->skew = cfg->routing_skew;
    d->cpu_replicas = cfg->cpu_sockets > 0 ? cfg->cpu_sockets : 1;
    deploy_parts(d, m, cfg);
    d->layer = calloc((size_t)m->layers, sizeof *d->layer);
    if (m->n_experts > 0 && m->experts_per_tok > 0) {
        d->q = malloc(sizeof(double) * (size_t)m->n_experts);
        d->log1m_q = malloc(sizeof(double) * (size_t)m->n_experts);
    }
    if (!d->layer || (m->n_experts > 0 && m->experts_per_tok > 0 && (!d->q || !d->log1m_q))) {
        ws_deploy_free(d);
        return ws_err_set(err, WS_ENOMEM, "cost: out of memory");
    }
    deploy_layers(d, m, cfg);
    return 0;
}

void ws_deploy_free(ws_deploy *d)
{
    free(d->layer);
    free(d->q);
    free(d->log1m_q);
    d->layer = NULL;
    d->q = d->log1m_q = NULL;
}

const ws_deploy_layer *ws_deploy_at(const ws_deploy *d, int l)
{
    return &d->layer[l < 0 ? 0 : l >= d->layers ? d->layers - 1 : l];
}

double ws_deploy_distinct_uniform(int E, int k, double T)
{
    if (E <= 0 || k <= 0 || T <= 0)
        return 0;
    if (k >= E)
        return E;
    return E * -expm1(T * log1p(-(double)k / E));
}

double ws_deploy_distinct(const ws_deploy *d, int lo, int hi, double T)
{
    if (!d->q || T <= 0 || hi <= lo)
        return 0;
    if (d->skew == 0)
        return (hi - lo) * -expm1(T * d->log1m_q[0]);
    double n = 0;
    for (int i = lo; i < hi; i++)
        n += isinf(d->log1m_q[i]) ? 1.0 : -expm1(T * d->log1m_q[i]);
    return n;
}
