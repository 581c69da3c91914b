/* cost: profile -> operation times (see cost.h). */
#include "cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading the profiles ------------------------------------------------------------- */

/* The weaker of two sources: anything modeled is modeled, then datasheet, fitted, measured. */
static ws_profile_source weaker(ws_profile_source a, ws_profile_source b)
{
    static const int rank[] = {[WS_SOURCE_MEASURED] = 0,
                               [WS_SOURCE_FITTED] = 1,
                               [WS_SOURCE_DATASHEET] = 2,
                               [WS_SOURCE_MODELED] = 3};
    return rank[a] >= rank[b] ? a : b;
}

static void set_val(ws_cost_val *o, double v, ws_profile_source src, const char *from)
{
    o->v = v;
    o->src = src;
    snprintf(o->from, sizeof o->from, "%s", from);
}

/* A positive value of `key`, or NULL. */
static const ws_profile_param *positive(const ws_profile *p, const char *key)
{
    const ws_profile_param *q = p ? ws_profile_get(p, key) : NULL;
    return q && q->value > 0 && isfinite(q->value) ? q : NULL;
}

/* *o = the calibrated key `pre.suffix` when the profile has it positive (zero_ok: or 0, a
 * fixed cost the fit put at its bound); returns 1 if so. */
static int calibrated_at(const ws_profile *p, const char *pre, const char *suffix, int zero_ok,
                         ws_cost_val *o)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", pre, suffix);
    const ws_profile_param *q = p ? ws_profile_get(p, key) : NULL;
    if (!q || !isfinite(q->value) || !(q->value > 0 || (zero_ok && q->value == 0)))
        return 0;
    set_val(o, q->value, q->source, key);
    return 1;
}

static int calibrated(const ws_profile *p, const char *pre, const char *suffix, ws_cost_val *o)
{
    return calibrated_at(p, pre, suffix, 0, o);
}

/* *o = p[key] x p[eff] (eff absent: 1). */
static int product(const ws_profile *p, const char *key, const char *eff, ws_cost_val *o,
                   ws_err *err)
{
    const ws_profile_param *a = positive(p, key);
    if (!a)
        return ws_err_set(err, WS_ENOTFOUND, "profile %s has no positive parameter '%s'",
                          p ? p->name : "(none)", key);
    const ws_profile_param *e = eff ? positive(p, eff) : NULL;
    char from[192];
    snprintf(from, sizeof from, e ? "%s x %s" : "%s", key, eff);
    set_val(o, a->value * (e ? e->value : 1.0), e ? weaker(a->source, e->source) : a->source, from);
    return 0;
}

/* *o = p[key] x p[eff], the first of the efficiencies effs[0..n) the profile has (none: 1). */
static int product_of(const ws_profile *p, const char *key, const char *const *effs, int n,
                      ws_cost_val *o, ws_err *err)
{
    for (int i = 0; i < n; i++)
        if (effs[i] && positive(p, effs[i]))
            return product(p, key, effs[i], o, err);
    return product(p, key, NULL, o, err);
}

/* The fixed cost: the datasheet's c0_key when the profile has it, else none (said so). */
static void default_c0(const ws_profile *p, const char *c0_key, ws_cost_val *o)
{
    if (!c0_key || product(p, c0_key, NULL, o, NULL))
        set_val(o, 0.0, WS_SOURCE_MODELED,
                c0_key ? "no fixed cost in the profile (writescope db init adds it): 0"
                       : "uncalibrated: no fixed cost");
}

/* A roofline from the calibrated prefix `pre` where present, else the fallbacks: the fixed
 * cost c0_key, P = p_key x p_eff, W = w_key x w_eff. */
static int roof(const ws_profile *p, const char *pre, const char *c0_key, const char *p_key,
                const char *p_eff, const char *w_key, const char *w_eff, ws_cost_roof *r,
                ws_err *err)
{
    int rc = 0;
    if (!pre || !calibrated(p, pre, "c0", &r->c0))
        default_c0(p, c0_key, &r->c0);
    if (!pre || !calibrated(p, pre, "peak_flops", &r->P))
        rc = p_key ? product(p, p_key, p_eff, &r->P, err)
                   : (set_val(&r->P, 0, WS_SOURCE_MODELED, "-"), 0);
    if (!rc && (!pre || !calibrated(p, pre, "bandwidth", &r->W)))
        rc = w_key ? product(p, w_key, w_eff, &r->W, err)
                   : (set_val(&r->W, 0, WS_SOURCE_MODELED, "-"), 0);
    ws_cost_val serial;
    r->serial = pre && calibrated(p, pre, "serial", &serial) && serial.v > 0;
    return rc;
}

/* *o = alt, labelled as standing in for the datasheet key `key`; 0 when alt has no value. */
static int stand_in(const ws_cost_val *alt, const char *key, ws_cost_val *o)
{
    if (!alt || !(alt->v > 0))
        return 0;
    char from[192];
    snprintf(from, sizeof from, "no datasheet %s: %.150s", key, alt->from);
    set_val(o, alt->v, alt->src, from);
    return 1;
}

/* A CPU roofline: the calibrated prefix, else the datasheet keys, else (a host with no
 * datasheet profile) the calibrated figures p_alt and w_alt it does have. */
static int cpu_roof(const ws_profile *h, const char *pre, const ws_cost_val *p_alt,
                    const ws_cost_val *w_alt, ws_cost_roof *r, ws_err *err)
{
    const int ds_p = positive(h, "fp32_flops") != NULL, ds_w = positive(h, "dram_bw") != NULL;
    int rc = roof(h, pre, NULL, ds_p ? "fp32_flops" : NULL, "flops_eff", ds_w ? "dram_bw" : NULL,
                  "dram_eff", r, err);
    if (rc)
        return rc;
    if (!ds_p && !(r->P.v > 0))
        stand_in(p_alt, "fp32_flops", &r->P);
    if (!ds_w && !(r->W.v > 0) && !stand_in(w_alt, "dram_bw", &r->W))
        return ws_err_set(err, WS_ENOTFOUND,
                          "profile %s has no positive parameter 'dram_bw' nor a calibrated "
                          "bandwidth for %s",
                          h->name, pre);
    return 0;
}

/* The CPU experts' calibrated prefix: the bf16-weight FFN the runtime runs
 * (cpu.expert_gemm.bf16), else an older profile's fp32 sweep. */
static const char *expert_prefix(const ws_profile *p)
{
    static const char *const pre[2] = {"cpu.expert_gemm.bf16", "cpu.expert_gemm.fp32"};
    for (int i = 0; i < 2; i++) {
        char key[64];
        snprintf(key, sizeof key, "%s.bandwidth", pre[i]);
        if (positive(p, key))
            return pre[i];
        snprintf(key, sizeof key, "%s.peak_flops", pre[i]);
        if (positive(p, key))
            return pre[i];
    }
    return pre[0];
}

/* 1 when the profile has a positive `pre`.bandwidth, .peak_flops or .c0. */
static int has_prefix(const ws_profile *p, const char *pre)
{
    static const char *const sfx[] = {"bandwidth", "peak_flops", "c0"};
    for (int i = 0; i < 3; i++) {
        char key[200];
        snprintf(key, sizeof key, "%s.%s", pre, sfx[i]);
        if (positive(p, key))
            return 1;
    }
    return 0;
}

/* The other 16-bit type (one rate on the GPUs that have both), or the type itself. */
static ws_dtype alt16(ws_dtype dt)
{
    return dt == WS_DT_BF16 ? WS_DT_FP16 : dt == WS_DT_FP16 ? WS_DT_BF16 : dt;
}

/* The calibrated prefix "dev.op[.kind].dtype" with a key the profile has, trying kind and
 * then, for MHA, gqa (the calibrator's name for grouped attention), at dt and then, on a GPU,
 * at the other 16-bit type; kind NULL: no kind. None: the first, which has no keys. (A
 * CPU's bf16 and fp16 paths convert differently: each has its own calibration.) */
static void calib_prefix(const ws_profile *p, const char *dev, const char *op, const char *kind,
                         ws_dtype dt, char *buf, size_t cap)
{
    const char *kinds[2] = {kind, kind && !strcmp(kind, "mha") ? "gqa" : NULL};
    const ws_dtype dts[2] = {dt, strcmp(dev, "gpu") ? dt : alt16(dt)};
    for (int d = 0; d < (dts[1] != dt ? 2 : 1); d++)
        for (int i = 0; i < 2 && (i == 0 || kinds[i]); i++) {
            if (kinds[i])
                snprintf(buf, cap, "%s.%s.%s.%s", dev, op, kinds[i], ws_dtype_name(dts[d]));
            else
                snprintf(buf, cap, "%s.%s.%s", dev, op, ws_dtype_name(dts[d]));
            if (has_prefix(p, buf))
                return;
        }
    if (kind)
        snprintf(buf, cap, "%s.%s.%s.%s", dev, op, kind, ws_dtype_name(dt));
    else
        snprintf(buf, cap, "%s.%s.%s", dev, op, ws_dtype_name(dt));
}

static void attn_prefix(const ws_profile *p, const char *dev, ws_attn_kind kind, ws_dtype dt,
                        char *buf, size_t cap)
{
    calib_prefix(p, dev, "attn", ws_attn_kind_name(kind), dt, buf, cap);
}

/* "<dtype>_flops", falling back to fp16 where the GPU lacks the type (V100: bf16 0). */
static const char *gpu_flops_key(const ws_profile *p, ws_dtype dt)
{
    const char *k = dt == WS_DT_FP32   ? "fp32_flops"
                    : dt == WS_DT_BF16 ? "bf16_flops"
                                       : "fp16_flops";
    return positive(p, k) ? k : "fp16_flops";
}

const char *ws_cost_elem_name(int kind)
{
    static const char *const names[WS_ELEM_KINDS] = {"rmsnorm", "rope", "act", "add",
                                                     "moe_route"};
    return kind >= 0 && kind < WS_ELEM_KINDS ? names[kind] : "?";
}

/* Prefill attention: the calibrated prefix (c0, peak_flops, half_keys) where present, else
 * the datasheet: prefill_attn_c0, flops_key x prefill_attn_eff (a profile without it: x
 * tensor_eff, the GEMMs' efficiency), prefill_attn_half_keys (without: 0, a flat rate). */
static int prefill_curve(const ws_profile *p, const char *pre, const char *flops_key,
                         ws_cost_curve *c, ws_err *err)
{
    static const char *const effs[] = {"prefill_attn_eff", "tensor_eff"};
    if (!calibrated(p, pre, "c0", &c->c0))
        default_c0(p, "prefill_attn_c0", &c->c0);
    int rc;
    if (!calibrated(p, pre, "peak_flops", &c->P) &&
        (rc = product_of(p, flops_key, effs, 2, &c->P, err)))
        return rc;
    if (!calibrated(p, pre, "half_keys", &c->half) &&
        product(p, "prefill_attn_half_keys", NULL, &c->half, NULL))
        set_val(&c->half, 0.0, WS_SOURCE_MODELED,
                "no prefill_attn_half_keys in the profile (writescope db init adds it): a flat "
                "rate");
    return 0;
}

/* A memory-bound kernel: the calibrated prefix (c0, bandwidth) where present, else elem_c0
 * and hbm_bw x <op>_eff (the add's for MoE routing; a profile without it: x hbm_eff). */
static int elem_roof(const ws_profile *p, const char *pre, int kind, ws_cost_roof *r, ws_err *err)
{
    static const char *const eff[WS_ELEM_KINDS] = {"rmsnorm_eff", "rope_eff", "act_eff",
                                                   "add_eff", "add_eff"};
    const char *effs[2] = {eff[kind], "hbm_eff"};
    if (!calibrated_at(p, pre, "c0", 1, &r->c0))
        default_c0(p, "elem_c0", &r->c0);
    if (!calibrated(p, pre, "peak_flops", &r->P))
        set_val(&r->P, 0, WS_SOURCE_MODELED, "-");
    r->serial = 0;
    if (!calibrated(p, pre, "bandwidth", &r->W))
        return product_of(p, "hbm_bw", effs, 2, &r->W, err);
    return 0;
}

/* The CPU experts' roofline for weights computed in `c`: the calibrated fit
 * cpu.expert_gemm.<c>.* where the host has it; a peak it lacks from cpu_peak.<family> x
 * flops_eff, the first family the host has (int8: AMX, then AVX512-VNNI; bf16: AMX, then
 * AVX512-BF16), else fp32_flops x flops_eff (cpu_roof's fallbacks). */
static int cpu_expert_wc(const ws_profile *h, ws_wcompute c, const ws_cost_val *p_alt,
                         const ws_cost_val *w_alt, ws_cost_roof *r, ws_err *err)
{
    static const char *const fam[WS_WC_COUNT][2] = {[WS_WC_BF16] = {"cpu_peak.amx_bf16",
                                                                    "cpu_peak.avx512_bf16"},
                                                    [WS_WC_INT8] = {"cpu_peak.amx_int8",
                                                                    "cpu_peak.avx512_vnni"}};
    const ws_wcompute k = c == WS_WC_INT8 || c == WS_WC_BF16 ? c : WS_WC_FP32;
    char pre[64];
    snprintf(pre, sizeof pre, "cpu.expert_gemm.%s", ws_wcompute_name(k));
    int rc = cpu_roof(h, pre, p_alt, w_alt, r, err);
    if (rc)
        return rc;
    char key[80];
    snprintf(key, sizeof key, "%s.peak_flops", pre);
    if (positive(h, key))
        return 0;
    for (int i = 0; i < 2; i++)
        if (fam[k][i] && positive(h, fam[k][i]))
            return product(h, fam[k][i], "flops_eff", &r->P, err);
    return 0;
}

int ws_cost_hw_load(const ws_profile *gpu, const ws_profile *host, ws_attn_kind kind, ws_dtype kv,
                    ws_dtype wt, ws_cost_hw *hw, ws_err *err)
{
    memset(hw, 0, sizeof *hw);
    if (!gpu || !host)
        return ws_err_set(err, WS_EINVAL, "cost: a GPU and a host profile are needed");
    snprintf(hw->gpu, sizeof hw->gpu, "%s", gpu->name);
    snprintf(hw->host, sizeof hw->host, "%s", host->name);
    char pre[160];
    int rc;
    if (!calibrated(host, "cpu.membw_read", "bandwidth", &hw->cpu_mem_bw) &&
        (rc = product(host, "dram_bw", "dram_eff", &hw->cpu_mem_bw, err)))
        return rc;
    /* The reformat rate: the host's kv_reformat_bw; a database seeded before it existed
     * has none: a DRAM copy (read + write), said so. */
    if (product(host, "kv_reformat_bw", NULL, &hw->kv_reformat, NULL))
        set_val(&hw->kv_reformat, hw->cpu_mem_bw.v / 2, WS_SOURCE_MODELED,
                "no kv_reformat_bw in the profile (writescope db init adds it): a DRAM copy, "
                "cpu_mem_bw / 2");
    /* Without datasheet keys: attention's P from the experts' calibrated peak, the experts'
     * from attention's, W from the measured read bandwidth. */
    const char *xpre = expert_prefix(host);
    ws_cost_val xpeak = {0};
    calibrated(host, xpre, "peak_flops", &xpeak);
    attn_prefix(host, "cpu", kind, kv, pre, sizeof pre);
    if ((rc = cpu_roof(host, pre, &xpeak, &hw->cpu_mem_bw, &hw->cpu_attn, err)) ||
        (rc = cpu_roof(host, xpre, &hw->cpu_attn.P, &hw->cpu_mem_bw, &hw->cpu_expert, err)))
        return rc;
    for (int c = 0; c < WS_WC_COUNT; c++)
        if ((rc = cpu_expert_wc(host, (ws_wcompute)c, &hw->cpu_attn.P, &hw->cpu_mem_bw,
                                &hw->cpu_expert_wc[c], err)))
            return rc;
    /* The calibrator's slow-down of attention right after a MoE phase (model-level: applied
     * to the memory side of MoE models in ws_cost_model_init); none measured: 1. */
    char moe_key[96];
    snprintf(moe_key, sizeof moe_key, "cpu.attn_after_moe_factor.%s.%s", ws_attn_kind_name(kind),
             ws_dtype_name(kv));
    if (!calibrated(host, moe_key, "factor", &hw->cpu_attn_after_moe) ||
        !(hw->cpu_attn_after_moe.v >= 1.0))
        set_val(&hw->cpu_attn_after_moe, 1.0, WS_SOURCE_MODELED,
                "no cpu.attn_after_moe_factor measured for the kind (or below 1): none");
    /* Host DRAM: the profile's mem_bytes; a host profile without one is left unlimited (0),
     * and the simulator falls back to its default. */
    if (product(host, "mem_bytes", NULL, &hw->host_mem, NULL))
        set_val(&hw->host_mem, 0.0, WS_SOURCE_MODELED, "no mem_bytes in the host profile");
    if (product(host, "sockets", NULL, &hw->sockets, NULL) || hw->sockets.v < 1)
        set_val(&hw->sockets, 1.0, WS_SOURCE_MODELED, "no sockets in the host profile: one");
    if (product(host, "cores", NULL, &hw->cores, NULL) || hw->cores.v < 1)
        set_val(&hw->cores, 1.0, WS_SOURCE_MODELED, "no cores in the host profile: one");
    if (!calibrated(host, "cpu.membw_read_1t", "bandwidth", &hw->core_bw) &&
        product(host, "core_bw", NULL, &hw->core_bw, NULL))
        set_val(&hw->core_bw, 0.0, WS_SOURCE_MODELED,
                "no cpu.membw_read_1t or core_bw in the host profile: not known");
    return ws_cost_hw_load_gpu(gpu, kind, kv, wt, hw, err);
}

int ws_cost_hw_load_gpu(const ws_profile *gpu, ws_attn_kind kind, ws_dtype kv, ws_dtype wt,
                        ws_cost_hw *hw, ws_err *err)
{
    if (!gpu)
        return ws_err_set(err, WS_EINVAL, "cost: a GPU profile is needed");
    snprintf(hw->gpu, sizeof hw->gpu, "%s", gpu->name);
    char pre[160];
    int rc;
    attn_prefix(gpu, "gpu", kind, kv, pre, sizeof pre);
    if ((rc = roof(gpu, pre, "attn_c0", gpu_flops_key(gpu, kv), "tensor_eff", "hbm_bw",
                   "hbm_eff", &hw->gpu_attn, err)))
        return rc;
    calib_prefix(gpu, "gpu", "prefill_attn", ws_attn_kind_name(kind), kv, pre, sizeof pre);
    if ((rc = prefill_curve(gpu, pre, gpu_flops_key(gpu, kv), &hw->gpu_prefill, err)))
        return rc;
    calib_prefix(gpu, "gpu", "gemm", NULL, wt, pre, sizeof pre);
    if ((rc = roof(gpu, pre, "gemm_c0", gpu_flops_key(gpu, wt), "tensor_eff", "hbm_bw", "hbm_eff",
                   &hw->gpu_gemm, err)) ||
        (rc = roof(gpu, "link.h2d", "copy_c0", NULL, NULL, "h2d_bw", NULL, &hw->h2d, err)) ||
        (rc = roof(gpu, "link.d2h", "copy_c0", NULL, NULL, "d2h_bw", NULL, &hw->d2h, err)) ||
        (rc = product(gpu, "mem_bytes", NULL, &hw->gpu_mem, err)))
        return rc;
    /* Per weight format's compute: the 16-bit formats run at gpu_gemm's rate; fp8, int8 and
     * fp32 at their datasheet key x tensor_eff, a GPU without it at gpu_gemm's (said so). */
    static const char *const wc_key[WS_WC_COUNT] = {
        [WS_WC_FP32] = "fp32_flops", [WS_WC_FP8] = "fp8_flops", [WS_WC_INT8] = "int8_flops"};
    for (int c = 0; c < WS_WC_COUNT; c++) {
        ws_cost_roof *r = &hw->gpu_gemm_wc[c];
        *r = hw->gpu_gemm;
        if (!wc_key[c] || (c == WS_WC_FP32 && wt == WS_DT_FP32))
            continue;
        if (positive(gpu, wc_key[c])) {
            if ((rc = product(gpu, wc_key[c], "tensor_eff", &r->P, err)))
                return rc;
        } else {
            char from[192];
            snprintf(from, sizeof from, "no %s in the profile: %.150s", wc_key[c], r->P.from);
            snprintf(r->P.from, sizeof r->P.from, "%s", from);
            r->P.src = weaker(r->P.src, WS_SOURCE_MODELED);
        }
    }
    for (int k = 0; k < WS_ELEM_KINDS; k++) {
        calib_prefix(gpu, "gpu", ws_cost_elem_name(k), NULL, wt, pre, sizeof pre);
        if ((rc = elem_roof(gpu, pre, k, &hw->gpu_elem[k], err)))
            return rc;
    }
    if (product(gpu, "step_overhead", NULL, &hw->step, NULL))
        set_val(&hw->step, 0.0, WS_SOURCE_MODELED,
                "no step_overhead in the profile (writescope db init adds it): 0");
    /* The contention factor: the calibrator's ratio, else the profile's h2d_contention;
     * a database seeded before that parameter existed gets none (factor 1), said so. */
    if (!calibrated(gpu, "link.h2d_gemm_contention_factor", "factor", &hw->h2d_contention) &&
        product(gpu, "h2d_contention", NULL, &hw->h2d_contention, NULL))
        set_val(&hw->h2d_contention, 1.0, WS_SOURCE_MODELED,
                "no h2d_contention in the profile (writescope db init adds it): none");
    if (hw->h2d_contention.v > 1.0)
        return ws_err_set(err, WS_EINVAL, "profile %s: H2D contention factor %g is above 1 (%s)",
                          gpu->name, hw->h2d_contention.v, hw->h2d_contention.from);
    return 0;
}

/* ---- the model on the machine ---------------------------------------------------------- */

void ws_cost_cfg_default(ws_cost_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->kv_dtype = WS_DT_BF16;
    c->pingpong_bytes = 32.0 * 1024 * 1024;
    c->act_bytes = 4;
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
static void scale_cpu(ws_cost_model *cm, double fp, double fw, double wcap)
{
    ws_cost_roof *cr[2 + WS_WC_COUNT] = {&cm->hw.cpu_attn, &cm->hw.cpu_expert};
    for (int c = 0; c < WS_WC_COUNT; c++)
        cr[2 + c] = &cm->hw.cpu_expert_wc[c];
    for (int i = 0; i < 2 + WS_WC_COUNT; i++) {
        cr[i]->P.v *= fp;
        cr[i]->W.v *= fw;
        if (wcap > 0 && cr[i]->W.v > wcap)
            cr[i]->W.v = wcap;
    }
    cm->hw.cpu_mem_bw.v *= fw;
    if (wcap > 0 && cm->hw.cpu_mem_bw.v > wcap)
        cm->hw.cpu_mem_bw.v = wcap;
}

int ws_cost_model_init(const ws_cost_hw *hw, const ws_model *m, const ws_cost_cfg *cfg,
                       ws_cost_model *cm, ws_err *err)
{
    memset(cm, 0, sizeof *cm);
    if (!(cfg->pingpong_bytes >= 0) || !(cfg->routing_skew >= 0) || !isfinite(cfg->routing_skew) ||
        cfg->gpu_experts < 0 || !(cfg->cpu_expert_bytes >= 0) || !(cfg->act_bytes >= 0) ||
        cfg->n_cpu_moe < 0 || cfg->cpu_threads < 0 || cfg->n_gpu_layers < 0)
        return ws_err_set(err, WS_EINVAL, "cost: configuration out of range");
    if (m->n_experts > 0 && cfg->gpu_experts > m->n_experts)
        return ws_err_set(err, WS_EINVAL, "cost: %d GPU experts, the model has %d",
                          cfg->gpu_experts, m->n_experts);
    if (cfg->cpu_sockets < 0 || cfg->cpu_sockets > hw->sockets.v)
        return ws_err_set(err, WS_EINVAL, "cost: %d CPU sockets, host %s has %g",
                          cfg->cpu_sockets, hw->host, hw->sockets.v);
    cm->hw = *hw;
    cm->cfg = *cfg;
    /* NUMA-aware engines run the CPU's work on the sockets given, each reading its own copy
     * from its own DRAM: their share of the host's cores and bandwidth. */
    cm->cpu_replicas = cfg->cpu_sockets > 0 ? cfg->cpu_sockets : 1;
    const int part = cfg->cpu_sockets > 0 && cfg->cpu_sockets < hw->sockets.v;
    if (part)
        scale_cpu(cm, cfg->cpu_sockets / hw->sockets.v, cfg->cpu_sockets / hw->sockets.v, 0);
    /* One copy in one socket's DRAM: every core reads through that socket's memory
     * controllers, whatever socket it is on. */
    if (cfg->one_node_memory && cfg->cpu_sockets == 0 && hw->sockets.v > 1)
        scale_cpu(cm, 1, 1 / hw->sockets.v, 0);
    /* Fewer threads than the sockets' cores: their share of the flop/s; the DRAM bandwidth
     * up to what that many cores can pull (threads x core_bw, where it is known). */
    const double avail =
        fmax(1.0, cm->hw.cores.v * (part ? cfg->cpu_sockets / hw->sockets.v : 1.0));
    if (cfg->cpu_threads > 0 && cfg->cpu_threads < avail)
        scale_cpu(cm, cfg->cpu_threads / avail, 1, cfg->cpu_threads * hw->core_bw.v);
    /* MoE models: every CPU attention call follows a MoE phase (the previous layer's, or the
     * previous step's last), so the attention's memory side runs at W / factor. */
    if (m->n_experts > 0 && hw->cpu_attn_after_moe.v > 1.0 && cm->hw.cpu_attn.W.v > 0) {
        cm->hw.cpu_attn.W.v /= hw->cpu_attn_after_moe.v;
        snprintf(cm->hw.cpu_attn.W.from, sizeof cm->hw.cpu_attn.W.from, "%.90s / %.90s",
                 hw->cpu_attn.W.from, hw->cpu_attn_after_moe.from);
    }
    ws_model_derive(m, cfg->kv_dtype, &cm->st);
    if (cfg->w_kv) {
        const double f = cfg->w_kv->bytes / ws_dtype_size(cfg->kv_dtype);
        cm->st.kv_bytes_tok_layer *= f;
        cm->st.kv_bytes_tok *= f;
    }
    if (!(cm->st.kv_bytes_tok_layer > 0) || !(cm->st.attn_flops_tok_layer > 0))
        return ws_err_set(err, WS_EINVAL, "%s: model has no attention", m->name);
    cm->layers = m->layers;
    cm->n_dense_layers = m->n_dense_layers;
    cm->n_experts = m->n_experts;
    cm->top_k = m->experts_per_tok;
    cm->hidden = m->hidden;
    cm->moe_inter = m->moe_intermediate;
    cm->dense_inter = m->intermediate;
    cm->b_tok = cm->st.kv_bytes_tok_layer;
    cm->f_tok = cm->st.attn_flops_tok_layer;
    cm->w_h2d_eff = hw->h2d.W.v * hw->h2d_contention.v;
    const double b = cm->b_tok, f = cm->f_tok;
    cm->A = fmax(cm->hw.cpu_attn.P.v > 0 ? f / cm->hw.cpu_attn.P.v : 0, b / cm->hw.cpu_attn.W.v);
    cm->t_res = fmax(hw->gpu_attn.P.v > 0 ? f / hw->gpu_attn.P.v : 0, b / hw->gpu_attn.W.v);
    cm->B = fmax(b / cm->w_h2d_eff, cm->t_res);

    const double H = m->hidden, nq = m->n_q_heads,
                 vd = m->v_head_dim > 0 ? m->v_head_dim : m->head_dim;
    const double ws = ws_dtype_size(m->weight_dtype);
    cm->w_elem = ws;
    cm->o_params = nq * vd * H;
    cm->qkv_params = fmax(cm->st.attn_weight_bytes_layer / ws - cm->o_params, 0);
    cm->qkv_out = cm->qkv_params / H;
    cm->o_in = nq * vd;
    cm->router_params = m->n_experts > 0 ? H * m->n_experts : 0;
    cm->shared_params = cm->st.shared_bytes_layer / ws;
    cm->shared_inter = cm->shared_params / (3.0 * H);
    cm->dense_params = m->n_dense_layers > 0 ? 3.0 * H * m->intermediate : 0;
    cm->expert_params = 3.0 * H * m->moe_intermediate;
    /* Each part's bytes per weight and roofline: its format's, else the model's dtype at
     * gpu_gemm / cpu_expert (the CPU experts' bytes: cpu_expert_bytes where set). */
    const ws_wformat *fg = cfg->w_gpu, *fs = cfg->w_shared, *fe = cfg->w_gpu_experts,
                     *fc = cfg->w_cpu_experts;
    cm->wb_gpu = fg ? fg->bytes : ws;
    cm->wb_shared = fs ? fs->bytes : ws;
    cm->wb_gpu_exp = fe ? fe->bytes : ws;
    cm->wb_cpu_exp = fc ? fc->bytes : cfg->cpu_expert_bytes > 0 ? cfg->cpu_expert_bytes : ws;
    cm->roof_gpu = fg ? hw->gpu_gemm_wc[fg->gpu] : hw->gpu_gemm;
    cm->roof_shared = fs ? hw->gpu_gemm_wc[fs->gpu] : hw->gpu_gemm;
    cm->roof_gpu_exp = fe ? hw->gpu_gemm_wc[fe->gpu] : hw->gpu_gemm;
    cm->roof_cpu_exp = fc ? cm->hw.cpu_expert_wc[fc->cpu] : cm->hw.cpu_expert;
    cm->roof_stream_exp = fc ? hw->gpu_gemm_wc[fc->gpu] : hw->gpu_gemm;
    cm->roof_cpu_dense = fg ? cm->hw.cpu_expert_wc[fg->cpu] : cm->hw.cpu_expert;
    cm->roof_cpu_shared = fs ? cm->hw.cpu_expert_wc[fs->cpu] : cm->hw.cpu_expert;
    cm->cpu_layers = cfg->n_gpu_layers > 0 && cfg->n_gpu_layers < m->layers
                         ? m->layers - cfg->n_gpu_layers
                         : 0;
    /* RoPE rotates every query head and the keys: GQA/MHA the KV heads at head_dim, MLA the
     * one shared rope key at rope_dim. */
    const int mla = m->attn == WS_ATTN_MLA || m->attn == WS_ATTN_MLA_SPARSE;
    cm->rope_heads = nq + (mla ? 1 : m->n_kv_heads);
    cm->rope_dim = mla ? m->rope_dim : m->head_dim;
    /* The merge reads the two halves' fp32 outputs and log-sum-exps, writes one output. */
    cm->merge_bytes = nq * (3.0 * vd + 2.0) * 4.0;
    if (m->n_experts > 0 && m->experts_per_tok > 0) {
        const int E = m->n_experts;
        cm->q = malloc(sizeof(double) * (size_t)E);
        cm->log1m_q = malloc(sizeof(double) * (size_t)E);
        if (!cm->q || !cm->log1m_q) {
            ws_cost_model_free(cm);
            return ws_err_set(err, WS_ENOMEM, "cost: out of memory");
        }
        pick_probs(E, m->experts_per_tok < E ? m->experts_per_tok : E, cfg->routing_skew, cm->q);
        for (int i = 0; i < E; i++) {
            cm->log1m_q[i] = cm->q[i] >= 1.0 ? -INFINITY : log1p(-cm->q[i]);
            if (i < cfg->gpu_experts)
                cm->gpu_q_sum += cm->q[i];
            else
                cm->cpu_q_sum += cm->q[i];
            cm->all_q_sum += cm->q[i];
        }
    }
    return 0;
}

void ws_cost_model_free(ws_cost_model *cm)
{
    free(cm->q);
    free(cm->log1m_q);
    cm->q = cm->log1m_q = NULL;
}

/* ---- the attention split --------------------------------------------------------------- */

void ws_cost_split_terms(const ws_cost_model *cm, double resident_tokens, double t_moe_prev,
                         double A_obs, double B_obs, ws_cost_split *out)
{
    out->A = A_obs > 0 ? A_obs : cm->A;
    out->B = B_obs > 0 ? B_obs : cm->B;
    out->C_cpu = cm->hw.cpu_attn.c0.v;
    const double bytes = fmin(cm->cfg.pingpong_bytes, fmax(t_moe_prev, 0) * cm->w_h2d_eff);
    out->prefetch_s = bytes / cm->w_h2d_eff;
    out->xfer_s = cm->b_tok / cm->w_h2d_eff;
    out->C_gpu = cm->hw.gpu_attn.c0.v + cm->hw.h2d.c0.v + fmax(resident_tokens, 0) * cm->t_res -
                 out->prefetch_s;
}

double ws_cost_split_cpu(const ws_cost_split *s, double n)
{
    return n > 0 ? s->C_cpu + s->A * n : 0.0;
}

double ws_cost_split_gpu(const ws_cost_split *s, double m)
{
    /* The prefetch credit is at most the streamed tokens' own transfer, so the GPU half
     * never ends before its resident part. */
    double credit = fmin(s->prefetch_s, fmax(m, 0) * s->xfer_s);
    return s->C_gpu + s->prefetch_s - credit + s->B * fmax(m, 0);
}

double ws_cost_split_time(const ws_cost_split *s, double n, double m)
{
    return fmax(ws_cost_split_cpu(s, n), ws_cost_split_gpu(s, m));
}

/* ---- single operations -------------------------------------------------------------------- */

double ws_cost_cpu_attn(const ws_cost_model *cm, double tokens)
{
    return tokens > 0 ? ws_cost_roof_time(&cm->hw.cpu_attn, cm->f_tok * tokens, cm->b_tok * tokens)
                      : 0;
}

double ws_cost_gpu_attn(const ws_cost_model *cm, double tokens)
{
    return tokens > 0 ? ws_cost_roof_time(&cm->hw.gpu_attn, cm->f_tok * tokens, cm->b_tok * tokens)
                      : 0;
}

double ws_cost_gpu_prefill_attn(const ws_cost_model *cm, double q, double ctx)
{
    return ws_cost_prefill_attn_time(&cm->hw, q, ctx, cm->f_tok, cm->b_tok);
}

double ws_cost_norm(const ws_cost_model *cm, double T)
{
    return ws_cost_elem_time(&cm->hw, WS_ELEM_NORM, ws_cost_norm_bytes(T, cm->hidden, cm->w_elem),
                             T);
}

double ws_cost_rope(const ws_cost_model *cm, double T)
{
    return ws_cost_elem_time(&cm->hw, WS_ELEM_ROPE,
                             ws_cost_rope_bytes(T, cm->rope_heads, cm->rope_dim, cm->w_elem), T);
}

double ws_cost_add(const ws_cost_model *cm, double T)
{
    return ws_cost_elem_time(&cm->hw, WS_ELEM_ADD, ws_cost_add_bytes(T, cm->hidden, cm->w_elem), T);
}

double ws_cost_act(const ws_cost_model *cm, double T, double I)
{
    return ws_cost_elem_time(&cm->hw, WS_ELEM_ACT, ws_cost_act_bytes(T, I, cm->w_elem), T);
}

double ws_cost_append(const ws_cost_model *cm, double n_seqs)
{
    /* read the projected K/V, write them into the pages */
    return ws_cost_elem_time(&cm->hw, WS_ELEM_ADD, n_seqs > 0 ? 2.0 * n_seqs * cm->b_tok : 0,
                             n_seqs);
}

double ws_cost_merge(const ws_cost_model *cm, double T)
{
    return ws_cost_elem_time(&cm->hw, WS_ELEM_ADD, T > 0 ? T * cm->merge_bytes : 0, T);
}

double ws_cost_step(const ws_cost_model *cm)
{
    return cm->hw.step.v;
}

double ws_cost_gpu_indexer(const ws_cost_model *cm, double q, double ctx)
{
    if (q <= 0 || !(cm->st.index_flops_tok_layer > 0))
        return 0;
    return ws_cost_roof_time(&cm->hw.gpu_attn, cm->st.index_flops_tok_layer * q * ctx,
                             cm->st.index_bytes_tok_layer * ctx);
}

double ws_cost_h2d(const ws_cost_model *cm, double bytes, int contended)
{
    if (bytes <= 0)
        return 0;
    return cm->hw.h2d.c0.v + bytes / (contended ? cm->w_h2d_eff : cm->hw.h2d.W.v);
}

double ws_cost_d2h(const ws_cost_model *cm, double bytes)
{
    return bytes > 0 ? cm->hw.d2h.c0.v + bytes / cm->hw.d2h.W.v : 0;
}

double ws_cost_handoff(const ws_cost_model *cm, double T, int to_host)
{
    const double bytes = T * cm->hidden * cm->w_elem;
    return to_host ? ws_cost_d2h(cm, bytes) : ws_cost_h2d(cm, bytes, 0);
}

double ws_cost_flush(const ws_cost_model *cm, int n_seqs, int window_tokens)
{
    return ws_cost_d2h(cm, (double)n_seqs * window_tokens * cm->b_tok);
}

double ws_cost_host_copy(const ws_cost_model *cm, double bytes)
{
    return bytes > 0 ? 2.0 * bytes / cm->hw.cpu_mem_bw.v : 0;
}

double ws_cost_reformat(const ws_cost_model *cm, double bytes)
{
    return bytes > 0 ? bytes / cm->hw.kv_reformat.v : 0;
}

/* ---- one kernel by shape ----------------------------------------------------------------- */

double ws_cost_causal_pairs(double q, double ctx)
{
    return q > 0 ? q * fmax(ctx, 0) + q * (q + 1) / 2 : 0;
}

void ws_cost_gemm_work(double M, double K, double N, double elem, double *flops, double *bytes)
{
    *flops = 2.0 * M * K * N;
    *bytes = (M * K + K * N + M * N) * elem;
}

double ws_cost_gemm_time(const ws_cost_hw *hw, double M, double K, double N, double elem)
{
    if (M <= 0 || K <= 0 || N <= 0)
        return 0;
    double f, b;
    ws_cost_gemm_work(M, K, N, elem, &f, &b);
    return ws_cost_roof_time(&hw->gpu_gemm, f, b);
}

double ws_cost_decode_attn_time(const ws_cost_hw *hw, double kv_bytes, double flops)
{
    return kv_bytes > 0 ? ws_cost_roof_time(&hw->gpu_attn, flops, kv_bytes) : 0;
}

double ws_cost_prefill_attn_time(const ws_cost_hw *hw, double q, double ctx, double f_tok,
                                 double b_tok)
{
    if (q <= 0)
        return 0;
    /* Causal pairs at the curve's rate for k = pairs / q keys per query; K/V read once per
     * 128-query block at the decode kernel's bandwidth (the memory side of short chunks). */
    const double pairs = ws_cost_causal_pairs(q, ctx), k = pairs / q;
    const ws_cost_curve *c = &hw->gpu_prefill;
    const double tf = c->P.v > 0 ? f_tok * pairs / c->P.v * (1.0 + fmax(c->half.v, 0) / k) : 0;
    const double W = hw->gpu_attn.W.v,
                 tb = W > 0 ? b_tok * (fmax(ctx, 0) + q) * ceil(q / 128.0) / W : 0;
    return c->c0.v + fmax(tf, tb);
}

double ws_cost_norm_bytes(double T, double H, double elem)
{
    return T > 0 ? (2.0 * T * H + H) * elem : 0;
}

double ws_cost_rope_bytes(double T, double heads, double dim, double elem)
{
    return T > 0 ? 2.0 * T * heads * dim * elem : 0;
}

double ws_cost_act_bytes(double T, double I, double elem)
{
    return T > 0 ? 3.0 * T * I * elem : 0;
}

double ws_cost_add_bytes(double T, double H, double elem)
{
    return T > 0 ? 3.0 * T * H * elem : 0;
}

double ws_cost_elem_time(const ws_cost_hw *hw, int kind, double bytes, double rows)
{
    if (!(bytes > 0) || kind < 0 || kind >= WS_ELEM_KINDS)
        return 0;
    const ws_cost_roof *r = &hw->gpu_elem[kind];
    const double all = r->W.v > 0 ? bytes / r->W.v : 0,
                 row = r->P.v > 0 && rows >= 1 ? bytes / rows / r->P.v : 0;
    return r->c0.v + (row > all ? row : all);
}

/* A GEMM of T tokens, K inputs and N outputs per token, on the GPU. */
static double gpu_gemm(const ws_cost_model *cm, double T, double K, double N)
{
    if (T <= 0 || K <= 0 || N <= 0)
        return 0;
    return ws_cost_gemm_time(&cm->hw, T, K, N, cm->w_elem);
}

/* The same on roofline r with weights of wb bytes each (activations at the model's dtype). */
static double part_gemm(const ws_cost_model *cm, const ws_cost_roof *r, double wb, double T,
                        double K, double N)
{
    if (T <= 0 || K <= 0 || N <= 0)
        return 0;
    double f, b;
    ws_cost_gemm_work(T, K, N, cm->w_elem, &f, &b);
    if (wb != cm->w_elem)
        b += K * N * (wb - cm->w_elem);
    return ws_cost_roof_time(r, f, b);
}

double ws_cost_qkv_proj(const ws_cost_model *cm, double T)
{
    return part_gemm(cm, &cm->roof_gpu, cm->wb_gpu, T, cm->hidden, cm->qkv_out);
}
double ws_cost_o_proj(const ws_cost_model *cm, double T)
{
    return part_gemm(cm, &cm->roof_gpu, cm->wb_gpu, T, cm->o_in, cm->hidden);
}

double ws_cost_cpu_qkv_proj(const ws_cost_model *cm, double T)
{
    return part_gemm(cm, &cm->roof_cpu_dense, cm->wb_gpu, T, cm->hidden, cm->qkv_out);
}
double ws_cost_cpu_o_proj(const ws_cost_model *cm, double T)
{
    return part_gemm(cm, &cm->roof_cpu_dense, cm->wb_gpu, T, cm->o_in, cm->hidden);
}

/* A gated MLP of width I on a CPU roofline: gate-up and down GEMMs (the activation runs
 * inside the CPU's FFN call, as the routed experts' does). */
static double cpu_gated_mlp(const ws_cost_model *cm, const ws_cost_roof *r, double wb, double T,
                            double I)
{
    if (T <= 0 || !(I > 0))
        return 0;
    return part_gemm(cm, r, wb, T, cm->hidden, 2.0 * I) + part_gemm(cm, r, wb, T, I, cm->hidden);
}

double ws_cost_cpu_shared_experts(const ws_cost_model *cm, double T)
{
    return cpu_gated_mlp(cm, &cm->roof_cpu_shared, cm->wb_shared, T, cm->shared_inter);
}
double ws_cost_cpu_dense_mlp(const ws_cost_model *cm, double T)
{
    return cm->dense_params > 0
               ? cpu_gated_mlp(cm, &cm->roof_cpu_dense, cm->wb_gpu, T, cm->dense_inter)
               : 0;
}

double ws_cost_cpu_prefill_attn(const ws_cost_model *cm, double q, double ctx)
{
    if (q <= 0)
        return 0;
    return ws_cost_roof_time(&cm->hw.cpu_attn, ws_cost_causal_pairs(q, ctx) * cm->f_tok,
                             (q + ctx) * cm->b_tok);
}

/* The share of pick probability on the CPU's and on the GPU's experts of `layer`. */
static void layer_q(const ws_cost_model *cm, int layer, double *cpu_q, double *gpu_q)
{
    const int G = ws_cost_layer_gpu_experts(cm, layer);
    if (!ws_cost_layer_is_moe(cm, layer)) {
        *cpu_q = *gpu_q = 0;
    } else if (ws_cost_layer_on_cpu(cm, layer)) {
        *cpu_q = cm->all_q_sum;
        *gpu_q = 0;
    } else if (G == cm->cfg.gpu_experts) {
        *cpu_q = cm->cpu_q_sum;
        *gpu_q = cm->gpu_q_sum;
    } else {
        *cpu_q = 0;
        *gpu_q = cm->all_q_sum;
    }
}

/* The first MoE layer: what the functions without a layer cost. */
static int first_moe(const ws_cost_model *cm)
{
    return cm->n_dense_layers < cm->layers ? cm->n_dense_layers : 0;
}

int ws_cost_router_on_cpu(const ws_cost_model *cm)
{
    return ws_cost_router_on_cpu_at(cm, first_moe(cm));
}

int ws_cost_router_on_cpu_at(const ws_cost_model *cm, int layer)
{
    double cq, gq;
    layer_q(cm, layer, &cq, &gq);
    return cm->router_params > 0 && cq > 0;
}

double ws_cost_router(const ws_cost_model *cm, double T)
{
    return ws_cost_router_at(cm, first_moe(cm), T);
}

double ws_cost_router_at(const ws_cost_model *cm, int layer, double T)
{
    if (!ws_cost_router_on_cpu_at(cm, layer))
        return gpu_gemm(cm, T, cm->hidden, cm->n_experts);
    if (T <= 0)
        return 0;
    const double ab = cm->cfg.act_bytes;
    return ws_cost_roof_time(&cm->hw.cpu_expert, 2.0 * T * cm->router_params,
                             (cm->router_params + T * cm->hidden + T * cm->n_experts) * ab);
}

/* A gated MLP of width I on roofline r, wb bytes per weight: gate-up GEMM, activation, down
 * GEMM. */
static double gated_mlp(const ws_cost_model *cm, const ws_cost_roof *r, double wb, double T,
                        double I)
{
    if (T <= 0 || !(I > 0))
        return 0;
    return part_gemm(cm, r, wb, T, cm->hidden, 2.0 * I) + ws_cost_act(cm, T, I) +
           part_gemm(cm, r, wb, T, I, cm->hidden);
}

double ws_cost_shared_experts(const ws_cost_model *cm, double T)
{
    return gated_mlp(cm, &cm->roof_shared, cm->wb_shared, T, cm->shared_inter);
}
double ws_cost_dense_mlp(const ws_cost_model *cm, double T)
{
    return cm->dense_params > 0 ? gated_mlp(cm, &cm->roof_gpu, cm->wb_gpu, T, cm->dense_inter)
                                : 0;
}

/* Bytes of the top-k over T tokens' router logits: fp32 logits read, k ids and weights
 * written. */
static double topk_bytes(const ws_cost_model *cm, double T)
{
    return T * (4.0 * cm->n_experts + 8.0 * cm->top_k);
}

double ws_cost_topk(const ws_cost_model *cm, double T)
{
    return ws_cost_topk_at(cm, first_moe(cm), T);
}

double ws_cost_topk_at(const ws_cost_model *cm, int layer, double T)
{
    if (T <= 0 || cm->router_params <= 0)
        return 0;
    if (ws_cost_router_on_cpu_at(cm, layer))
        return ws_cost_host_copy(cm, topk_bytes(cm, T));
    return ws_cost_elem_time(&cm->hw, WS_ELEM_MOE, topk_bytes(cm, T), T);
}

/* Permute: each (token, expert) pair's hidden row gathered (read and written); combine: each
 * pair's output read, one row per token written. */
static double permute_bytes(const ws_cost_model *cm, double pairs)
{
    return 2.0 * pairs * cm->hidden * cm->w_elem;
}

static double combine_bytes(const ws_cost_model *cm, double pairs, double T)
{
    return (pairs + T) * cm->hidden * cm->w_elem;
}

double ws_cost_moe_permute_gpu(const ws_cost_model *cm, double T)
{
    return ws_cost_moe_permute_gpu_at(cm, first_moe(cm), T);
}

double ws_cost_moe_permute_gpu_at(const ws_cost_model *cm, int layer, double T)
{
    double cq, gq;
    layer_q(cm, layer, &cq, &gq);
    const double pairs = T * gq;
    if (!(pairs > 0))
        return 0;
    return ws_cost_elem_time(&cm->hw, WS_ELEM_MOE, permute_bytes(cm, pairs), pairs) +
           ws_cost_elem_time(&cm->hw, WS_ELEM_MOE, combine_bytes(cm, pairs, T), T);
}

double ws_cost_moe_permute_cpu(const ws_cost_model *cm, double T)
{
    return ws_cost_moe_permute_cpu_at(cm, first_moe(cm), T);
}

double ws_cost_moe_permute_cpu_at(const ws_cost_model *cm, int layer, double T)
{
    double cq, gq;
    layer_q(cm, layer, &cq, &gq);
    const double pairs = T * cq;
    /* host memory: ws_cost_host_copy counts a read and a write of what it is given */
    return pairs > 0 ? ws_cost_host_copy(cm, pairs * cm->hidden * cm->cfg.act_bytes) +
                           ws_cost_host_copy(cm, (pairs + T) * cm->hidden * cm->cfg.act_bytes / 2)
                     : 0;
}

int ws_cost_layer_is_moe(const ws_cost_model *cm, int layer)
{
    return cm->n_experts > 0 && layer >= cm->n_dense_layers;
}

int ws_cost_layer_on_cpu(const ws_cost_model *cm, int layer)
{
    return layer >= 0 && layer < cm->cpu_layers;
}

int ws_cost_layer_gpu_experts(const ws_cost_model *cm, int layer)
{
    if (!ws_cost_layer_is_moe(cm, layer) || ws_cost_layer_on_cpu(cm, layer))
        return 0;
    if (cm->cfg.n_cpu_moe > 0 && layer - cm->n_dense_layers >= cm->cfg.n_cpu_moe)
        return cm->n_experts;
    return cm->cfg.gpu_experts;
}

int ws_cost_layer_kind(const ws_cost_model *cm, int layer)
{
    if (ws_cost_layer_on_cpu(cm, layer))
        return ws_cost_layer_is_moe(cm, layer) ? 4 : 3;
    if (!ws_cost_layer_is_moe(cm, layer))
        return 0;
    return ws_cost_layer_gpu_experts(cm, layer) == cm->cfg.gpu_experts ? 1 : 2;
}

void ws_cost_weight_bytes(const ws_cost_model *cm, double *gpu, double *host)
{
    const double w = cm->w_elem, routed = cm->st.routed_bytes / w, shared = cm->st.shared_bytes / w,
                 rest = cm->st.total_params - routed - shared;
    double cpu_n = 0; /* routed experts (expert x layer) on the CPU */
    const int n_moe = cm->layers - cm->n_dense_layers;
    for (int l = cm->n_dense_layers; cm->n_experts > 0 && l < cm->layers; l++)
        cpu_n += cm->n_experts - ws_cost_layer_gpu_experts(cm, l);
    const double cpu_share = cm->n_experts > 0 && n_moe > 0 ? cpu_n / ((double)n_moe * cm->n_experts)
                                                           : 0;
    *host = routed * cpu_share * cm->wb_cpu_exp * cm->cpu_replicas; /* a copy per socket used */
    *gpu = rest * cm->wb_gpu + shared * cm->wb_shared + routed * (1 - cpu_share) * cm->wb_gpu_exp;
    /* Layers on the CPU hold their projections, router, shared experts or dense MLP there. */
    for (int l = 0; l < cm->cpu_layers; l++) {
        const int moe = ws_cost_layer_is_moe(cm, l);
        const double own = (cm->qkv_params + cm->o_params + (moe ? cm->router_params : 0) +
                            (moe ? 0 : cm->dense_params)) * cm->wb_gpu +
                           (moe ? cm->shared_params * cm->wb_shared : 0);
        *host += own;
        *gpu -= own;
    }
    if (*gpu < 0)
        *gpu = 0;
}

/* ---- routed experts --------------------------------------------------------------------- */

double ws_cost_distinct_uniform(int E, int k, double T)
{
    if (E <= 0 || k <= 0 || T <= 0)
        return 0;
    if (k >= E)
        return E;
    return E * -expm1(T * log1p(-(double)k / E));
}

/* Expected distinct experts among [lo, hi) hit by T tokens. */
static double distinct_range(const ws_cost_model *cm, int lo, int hi, double T)
{
    if (!cm->q || T <= 0 || hi <= lo)
        return 0;
    if (cm->cfg.routing_skew == 0)
        return (hi - lo) * -expm1(T * cm->log1m_q[0]);
    double d = 0;
    for (int i = lo; i < hi; i++)
        d += isinf(cm->log1m_q[i]) ? 1.0 : -expm1(T * cm->log1m_q[i]);
    return d;
}

double ws_cost_distinct_experts(const ws_cost_model *cm, double T)
{
    return distinct_range(cm, 0, cm->n_experts, T);
}

double ws_cost_distinct_cpu_experts(const ws_cost_model *cm, double T)
{
    return distinct_range(cm, cm->cfg.gpu_experts, cm->n_experts, T);
}

double ws_cost_distinct_gpu_experts(const ws_cost_model *cm, double T)
{
    return distinct_range(cm, 0, cm->cfg.gpu_experts, T);
}

/* D experts hit by `pairs` (token, expert) assignments in `calls` kernel calls:
 * calls c0 + max(F/P, B/W). */
static double experts_time(const ws_cost_model *cm, const ws_cost_roof *r, double D, double pairs,
                           double wbytes, double abytes, double calls)
{
    if (D <= 0 || pairs <= 0)
        return 0;
    const double H = cm->hidden, I = cm->moe_inter;
    const double flops = pairs * (6.0 * H * I + 4.0 * I);
    const double bytes = D * cm->expert_params * wbytes + pairs * (2.0 * H + 4.0 * I) * abytes;
    return ws_cost_roof_time(r, flops, bytes) + (calls - 1.0) * r->c0.v;
}

double ws_cost_cpu_experts(const ws_cost_model *cm, double T)
{
    return ws_cost_cpu_experts_at(cm, first_moe(cm), T);
}

double ws_cost_cpu_experts_at(const ws_cost_model *cm, int layer, double T)
{
    double cq, gq;
    layer_q(cm, layer, &cq, &gq);
    if (!(cq > 0))
        return 0;
    /* the CPU runs one FFN call per expert hit (the runtime's, and the calibrator's c0) */
    const double D = ws_cost_layer_on_cpu(cm, layer) ? ws_cost_distinct_experts(cm, T)
                                                     : ws_cost_distinct_cpu_experts(cm, T);
    return experts_time(cm, &cm->roof_cpu_exp, D, T * cq, cm->wb_cpu_exp, cm->cfg.act_bytes, D);
}

double ws_cost_gpu_experts(const ws_cost_model *cm, double T)
{
    return ws_cost_gpu_experts_at(cm, first_moe(cm), T);
}

double ws_cost_gpu_experts_at(const ws_cost_model *cm, int layer, double T)
{
    double cq, gq;
    layer_q(cm, layer, &cq, &gq);
    const int G = ws_cost_layer_gpu_experts(cm, layer);
    const double pairs = T * gq;
    /* a GPU runs its experts as grouped GEMMs (vLLM's and SGLang's fused_moe, llama.cpp's
     * mul_mat_id): one kernel for every expert's gate/up product and one for the down
     * product, whatever the count hit; activations at the model's dtype */
    const double t = experts_time(cm, &cm->roof_gpu_exp, distinct_range(cm, 0, G, T), pairs,
                                  cm->wb_gpu_exp, cm->w_elem, 2.0);
    /* the activation between the experts' two GEMMs, one kernel over every pair */
    return t > 0 ? t + ws_cost_act(cm, pairs, cm->moe_inter) : 0;
}

/* ---- prefill strategies ---------------------------------------------------------------- */

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

double ws_cost_expert_stream_bytes(const ws_cost_model *cm, double T)
{
    return ws_cost_distinct_cpu_experts(cm, T) * cm->expert_params * cm->wb_cpu_exp;
}

double ws_cost_expert_stream(const ws_cost_model *cm, double T)
{
    return ws_cost_h2d(cm, ws_cost_expert_stream_bytes(cm, T), 0);
}

/* The GPU's grouped GEMMs over D streamed experts and their (token, expert) pairs, with their
 * activation, permute and combine. */
static double streamed_experts(const ws_cost_model *cm, double D, double pairs, double T)
{
    const double t =
        experts_time(cm, &cm->roof_stream_exp, D, pairs, cm->wb_cpu_exp, cm->w_elem, 2.0);
    if (!(t > 0))
        return 0;
    return t + ws_cost_act(cm, pairs, cm->moe_inter) +
           ws_cost_elem_time(&cm->hw, WS_ELEM_MOE, permute_bytes(cm, pairs), pairs) +
           ws_cost_elem_time(&cm->hw, WS_ELEM_MOE, combine_bytes(cm, pairs, T), T);
}

double ws_cost_gpu_streamed_experts(const ws_cost_model *cm, double T)
{
    return streamed_experts(cm, ws_cost_distinct_cpu_experts(cm, T), T * cm->cpu_q_sum, T);
}

double ws_cost_router_gpu(const ws_cost_model *cm, double T)
{
    if (T <= 0 || cm->router_params <= 0)
        return 0;
    return gpu_gemm(cm, T, cm->hidden, cm->n_experts) +
           ws_cost_elem_time(&cm->hw, WS_ELEM_MOE, topk_bytes(cm, T), T);
}

/* The GPU work before a layer's MoE phase or MLP: projections, norms, RoPE, attention. */
static double gpu_front(const ws_cost_model *cm, double q, double ctx)
{
    const double T = q;
    return ws_cost_add(cm, T) + ws_cost_norm(cm, T) + ws_cost_qkv_proj(cm, T) +
           ws_cost_rope(cm, T) + ws_cost_gpu_prefill_attn(cm, q, ctx) +
           ws_cost_gpu_indexer(cm, q, ctx + q) + ws_cost_o_proj(cm, T) + ws_cost_add(cm, T) +
           ws_cost_norm(cm, T);
}

double ws_cost_prefill_layer_est(const ws_cost_model *cm, double q, double ctx, int gpu)
{
    const double T = q;
    double tg = ws_cost_gpu_experts(cm, T);
    tg += tg > 0 ? ws_cost_moe_permute_gpu(cm, T) : 0;
    const double side = tg + ws_cost_shared_experts(cm, T);
    const double G = gpu_front(cm, q, ctx);
    if (gpu)
        return fmax(G + ws_cost_router_gpu(cm, T) + side + ws_cost_gpu_streamed_experts(cm, T),
                    ws_cost_expert_stream(cm, T));
    double tc = ws_cost_cpu_experts(cm, T);
    tc += tc > 0 ? ws_cost_moe_permute_cpu(cm, T) : 0;
    return G + ws_cost_router(cm, T) + ws_cost_topk(cm, T) + fmax(tc, side);
}

double ws_cost_cpu_layer_stream_bytes(const ws_cost_model *cm, int layer, double q, double ctx)
{
    if (!ws_cost_layer_on_cpu(cm, layer) || !(q > 0))
        return 0;
    double b = (cm->qkv_params + cm->o_params) * cm->wb_gpu;
    if (ws_cost_layer_is_moe(cm, layer))
        b += cm->router_params * cm->wb_gpu + cm->shared_params * cm->wb_shared +
             ws_cost_distinct_experts(cm, q) * cm->expert_params * cm->wb_cpu_exp;
    else
        b += cm->dense_params * cm->wb_gpu;
    return b + fmax(ctx, 0) * cm->b_tok;
}

double ws_cost_cpu_layer_streamed_moe(const ws_cost_model *cm, int layer, double q)
{
    if (!ws_cost_layer_on_cpu(cm, layer) || !(q > 0))
        return 0;
    if (!ws_cost_layer_is_moe(cm, layer))
        return ws_cost_dense_mlp(cm, q);
    return ws_cost_router_gpu(cm, q) + ws_cost_shared_experts(cm, q) +
           streamed_experts(cm, ws_cost_distinct_experts(cm, q), q * cm->all_q_sum, q);
}

double ws_cost_cpu_layer_est(const ws_cost_model *cm, int layer, double q, double ctx, int gpu)
{
    if (!ws_cost_layer_on_cpu(cm, layer) || !(q > 0))
        return 0;
    const double T = q;
    if (gpu)
        return fmax(gpu_front(cm, q, ctx) + ws_cost_cpu_layer_streamed_moe(cm, layer, q),
                    ws_cost_h2d(cm, ws_cost_cpu_layer_stream_bytes(cm, layer, q, ctx), 0));
    double t = ws_cost_cpu_qkv_proj(cm, T) + ws_cost_cpu_prefill_attn(cm, q, ctx) +
               ws_cost_cpu_o_proj(cm, T);
    if (!ws_cost_layer_is_moe(cm, layer))
        return t + ws_cost_cpu_dense_mlp(cm, T);
    const double tc = ws_cost_cpu_experts_at(cm, layer, T);
    return t + ws_cost_router_at(cm, layer, T) + ws_cost_topk_at(cm, layer, T) + tc +
           (tc > 0 ? ws_cost_moe_permute_cpu_at(cm, layer, T) : 0) +
           ws_cost_cpu_shared_experts(cm, T);
}

int ws_cost_prefill_gpu(const ws_cost_model *cm, int mode, double q, double ctx)
{
    if ((!(cm->cpu_q_sum > 0) && cm->cpu_layers == 0) || q <= 0 || mode == WS_PREFILL_CPU)
        return 0;
    if (mode == WS_PREFILL_GPU)
        return 1;
    /* the chunk's layers that stream under the GPU strategy, each kind at its count */
    double gpu = 0, cpu = 0;
    int n_stream = 0, n_cpu[2] = {0, 0}, at[2] = {-1, -1};
    for (int l = 0; l < cm->layers; l++) {
        if (ws_cost_layer_on_cpu(cm, l)) {
            const int k = ws_cost_layer_is_moe(cm, l);
            n_cpu[k]++;
            at[k] = at[k] < 0 ? l : at[k];
        } else if (ws_cost_layer_is_moe(cm, l) && ws_cost_layer_gpu_experts(cm, l) < cm->n_experts)
            n_stream++;
    }
    if (n_stream > 0 && cm->cpu_q_sum > 0) {
        gpu += n_stream * ws_cost_prefill_layer_est(cm, q, ctx, 1);
        cpu += n_stream * ws_cost_prefill_layer_est(cm, q, ctx, 0);
    }
    for (int k = 0; k < 2; k++)
        if (n_cpu[k] > 0) {
            gpu += n_cpu[k] * ws_cost_cpu_layer_est(cm, at[k], q, ctx, 1);
            cpu += n_cpu[k] * ws_cost_cpu_layer_est(cm, at[k], q, ctx, 0);
        }
    return gpu < cpu;
}
