/* hw: profiles -> rates with their sources, and the loading of a run (see hw.h). */
#include "hw.h"

#include <math.h>
#include <stdio.h>
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

static void set_val(ws_hw_val *o, double v, ws_profile_source src, const char *from)
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
                         ws_hw_val *o)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", pre, suffix);
    const ws_profile_param *q = p ? ws_profile_get(p, key) : NULL;
    if (!q || !isfinite(q->value) || !(q->value > 0 || (zero_ok && q->value == 0)))
        return 0;
    set_val(o, q->value, q->source, key);
    return 1;
}

static int calibrated(const ws_profile *p, const char *pre, const char *suffix, ws_hw_val *o)
{
    return calibrated_at(p, pre, suffix, 0, o);
}

/* *o = p[key] x p[eff] (eff absent: 1). */
static int product(const ws_profile *p, const char *key, const char *eff, ws_hw_val *o, ws_err *err)
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
                      ws_hw_val *o, ws_err *err)
{
    for (int i = 0; i < n; i++)
        if (effs[i] && positive(p, effs[i]))
            return product(p, key, effs[i], o, err);
    return product(p, key, NULL, o, err);
}

/* The fixed cost: the datasheet's c0_key when the profile has it, else none (said so). */
static void default_c0(const ws_profile *p, const char *c0_key, ws_hw_val *o)
{
    if (!c0_key || product(p, c0_key, NULL, o, NULL))
        set_val(o, 0.0, WS_SOURCE_MODELED,
                c0_key ? "no fixed cost in the profile (writescope db init adds it): 0"
                       : "uncalibrated: no fixed cost");
}

/* A roofline from the calibrated prefix `pre` where present, else the fallbacks: the fixed
 * cost c0_key, P = p_key x p_eff, W = w_key x w_eff. */
static int roof(const ws_profile *p, const char *pre, const char *c0_key, const char *p_key,
                const char *p_eff, const char *w_key, const char *w_eff, ws_hw_roof *r, ws_err *err)
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
    ws_hw_val serial;
    r->serial = pre && calibrated(p, pre, "serial", &serial) && serial.v > 0;
    /* a piecewise fit's lower pieces, in order, while their bounds rise */
    r->n_low = 0;
    for (int k = 0; pre && k < 2; k++) {
        char lp[176];
        struct ws_hw_piece *q = &r->low[k];
        snprintf(lp, sizeof lp, "%s.low%d", pre, k + 1);
        if (!calibrated(p, lp, "upto", &q->upto) || (k && !(q->upto.v > r->low[k - 1].upto.v)))
            break;
        static const char *const sfx[3] = {"c0", "peak_flops", "bandwidth"};
        ws_hw_val *o[3] = {&q->c0, &q->P, &q->W};
        for (int i = 0; i < 3; i++)
            if (!calibrated(p, lp, sfx[i], o[i]))
                set_val(o[i], 0, WS_SOURCE_MODELED, "not in the piecewise fit: left out");
        r->n_low = k + 1;
    }
    return rc;
}

/* *o = alt, labelled as standing in for the datasheet key `key`; 0 when alt has no value. */
static int stand_in(const ws_hw_val *alt, const char *key, ws_hw_val *o)
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
static int cpu_roof(const ws_profile *h, const char *pre, const ws_hw_val *p_alt,
                    const ws_hw_val *w_alt, ws_hw_roof *r, ws_err *err)
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

const char *ws_hw_elem_name(int kind)
{
    static const char *const names[WS_ELEM_KINDS] = {"rmsnorm", "rope", "act", "add", "moe_route"};
    return kind >= 0 && kind < WS_ELEM_KINDS ? names[kind] : "?";
}

/* Prefill attention: the calibrated prefix (c0, peak_flops, half_keys) where present, else
 * the datasheet: prefill_attn_c0, flops_key x prefill_attn_eff (a profile without it: x
 * tensor_eff, the GEMMs' efficiency), prefill_attn_half_keys (without: 0, a flat rate). */
static int prefill_curve(const ws_profile *p, const char *pre, const char *flops_key,
                         ws_hw_curve *c, ws_err *err)
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
static int elem_roof(const ws_profile *p, const char *pre, int kind, ws_hw_roof *r, ws_err *err)
{
    static const char *const eff[WS_ELEM_KINDS] = {"rmsnorm_eff", "rope_eff", "act_eff", "add_eff",
                                                   "add_eff"};
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
static int cpu_expert_wc(const ws_profile *h, ws_wcompute c, const ws_hw_val *p_alt,
                         const ws_hw_val *w_alt, ws_hw_roof *r, ws_err *err)
{
    static const char *const fam[WS_WC_COUNT][2] = {
        [WS_WC_BF16] = {"cpu_peak.amx_bf16", "cpu_peak.avx512_bf16"},
        [WS_WC_INT8] = {"cpu_peak.amx_int8", "cpu_peak.avx512_vnni"}};
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

int ws_hw_from_profiles(const ws_profile *gpu, const ws_profile *host, ws_attn_kind kind,
                        ws_dtype kv, ws_dtype wt, ws_hw *hw, ws_err *err)
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
    ws_hw_val xpeak = {0};
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
    /* CPU attention's share of its bandwidth beside a host-memory copy: measured, else none. */
    char copy_key[96];
    snprintf(copy_key, sizeof copy_key, "cpu.attn_copy_factor.%s.%s", ws_attn_kind_name(kind),
             ws_dtype_name(kv));
    if (!calibrated(host, copy_key, "factor", &hw->cpu_attn_copy))
        set_val(&hw->cpu_attn_copy, 1.0, WS_SOURCE_MODELED,
                "no cpu.attn_copy_factor measured for the kind: none");
    else if (hw->cpu_attn_copy.v > 1.0)
        set_val(&hw->cpu_attn_copy, 1.0, hw->cpu_attn_copy.src,
                "cpu.attn_copy_factor above 1 (no contention seen): 1");
    /* The reference probe's read rate when the host was calibrated (0: not calibrated) */
    if (!calibrated(host, "cpu.reference_read", "bandwidth", &hw->cpu_probe_bw))
        set_val(&hw->cpu_probe_bw, 0, WS_SOURCE_MODELED, "no calibration timed a reference probe");
    /* The CPU experts' share of their bandwidth while H2D copies read host memory beside
     * them: the calibrator's paired measurement, else the host profile's. */
    if (!calibrated(host, "cpu.expert_copy_factor.moe.bf16", "factor", &hw->cpu_copy_contention) &&
        product(host, "cpu_copy_contention", NULL, &hw->cpu_copy_contention, NULL))
        set_val(&hw->cpu_copy_contention, 1.0, WS_SOURCE_MODELED,
                "no cpu_copy_contention in the profile (writescope db init adds it): none");
    if (hw->cpu_copy_contention.v > 1.0)
        set_val(&hw->cpu_copy_contention, 1.0, hw->cpu_copy_contention.src,
                "cpu.expert_copy_factor above 1 (no contention seen): 1");
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
    return ws_hw_gpu_from_profile(gpu, kind, kv, wt, hw, err);
}

int ws_hw_gpu_from_profile(const ws_profile *gpu, ws_attn_kind kind, ws_dtype kv, ws_dtype wt,
                           ws_hw *hw, ws_err *err)
{
    if (!gpu)
        return ws_err_set(err, WS_EINVAL, "cost: a GPU profile is needed");
    snprintf(hw->gpu, sizeof hw->gpu, "%s", gpu->name);
    char pre[160];
    int rc;
    attn_prefix(gpu, "gpu", kind, kv, pre, sizeof pre);
    if ((rc = roof(gpu, pre, "attn_c0", gpu_flops_key(gpu, kv), "tensor_eff", "hbm_bw", "hbm_eff",
                   &hw->gpu_attn, err)))
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
        ws_hw_roof *r = &hw->gpu_gemm_wc[c];
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
        calib_prefix(gpu, "gpu", ws_hw_elem_name(k), NULL, wt, pre, sizeof pre);
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
    /* The pageable share: the calibrator's two copy fits' ratio, else the profile's. */
    ws_hw_val pw;
    if (calibrated(gpu, "link.h2d_pageable", "bandwidth", &pw) && hw->h2d.W.v > 0) {
        set_val(&hw->h2d_pageable, fmin(1.0, pw.v / hw->h2d.W.v), pw.src,
                "link.h2d_pageable.bandwidth / the H2D rate");
    } else if (product(gpu, "h2d_pageable", NULL, &hw->h2d_pageable, NULL)) {
        set_val(&hw->h2d_pageable, 1.0, WS_SOURCE_MODELED,
                "no h2d_pageable in the profile (writescope db init adds it): as pinned");
    }
    if (!(hw->h2d_pageable.v > 0 && hw->h2d_pageable.v <= 1.0))
        return ws_err_set(err, WS_EINVAL, "profile %s: h2d_pageable %g is not in (0, 1] (%s)",
                          gpu->name, hw->h2d_pageable.v, hw->h2d_pageable.from);
    hw->h2d_weights = hw->h2d;
    set_val(&hw->handoff_c0, 0.0, WS_SOURCE_MODELED, "a copy's c0 (no engine hand-off cost)");
    return 0;
}

int ws_hw_cores(const ws_hw *hw)
{
    const double v = hw->cores.v;
    return v >= 1 && v < 1e6 ? (int)v : 1;
}

int ws_hw_load(ws_store *s, const char *model, const char *gpu, const char *host, ws_dtype kv,
               ws_model *m, ws_hw *hw, int *cores, ws_err *err)
{
    char path[4096];
    int rc = ws_model_resolve(model, path, sizeof path, err);
    if (!rc)
        rc = ws_model_load(path, m, err);
    if (rc)
        return rc;
    return ws_hw_load_model(s, m, gpu, host, kv, hw, cores, err);
}

int ws_hw_load_model(ws_store *s, const ws_model *m, const char *gpu, const char *host, ws_dtype kv,
                     ws_hw *hw, int *cores, ws_err *err)
{
    int rc;
    ws_profile g = {0}, h = {0};
    if ((rc = ws_profile_load(s, gpu, &g, err)))
        return rc;
    if ((rc = ws_profile_load(s, host, &h, err))) {
        ws_profile_free(&g);
        return rc;
    }
    if (strcmp(g.kind, "gpu"))
        rc = ws_err_set(err, WS_EINVAL, "profile '%s' is a %s profile, not a GPU's", gpu, g.kind);
    else if (strcmp(h.kind, "host"))
        rc = ws_err_set(err, WS_EINVAL, "profile '%s' is a %s profile, not a host's", host, h.kind);
    else if (!(rc = ws_profile_fill(s, &h, "kv_reformat_bw", err)))
        rc = ws_hw_from_profiles(&g, &h, m->attn, kv, m->weight_dtype, hw, err);
    /* the model's attention reference when this host was calibrated (0: none) */
    char ref[160];
    snprintf(ref, sizeof ref, "cpu.reference_attn.%s.bf16", m->name);
    if (!rc && !calibrated(&h, ref, "bandwidth", &hw->cpu_attn_ref_bw))
        set_val(&hw->cpu_attn_ref_bw, 0, WS_SOURCE_MODELED,
                "no calibration timed this model's attention reference");
    if (cores)
        *cores = rc ? 1 : ws_hw_cores(hw);
    ws_profile_free(&g);
    ws_profile_free(&h);
    return rc;
}
