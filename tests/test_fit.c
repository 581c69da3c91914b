/* test_fit: the GSL fits (calib/fit.c) recover known parameters from synthetic samples
 * with noise, report held-out errors, and flag data that is not a roofline. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "fit.h"

static unsigned g_seed = 7;
/* Deterministic noise, uniform in [-amp, amp] (relative). */
static double noise(double amp)
{
    g_seed = g_seed * 1103515245u + 12345u;
    return amp * (2.0 * ((g_seed >> 8) & 0xffffff) / 16777216.0 - 1.0);
}

static double roof(double c0, double P, double W, double F, double B)
{
    return c0 + fmax(F / P, B / W);
}

Test(fit, roofline_memory_bound_fixed_p)
{
    /* GQA-like: constant intensity 8 flop/B, W = 20 GB/s, c0 = 30 us, P fixed at 500 Gflop/s. */
    ws_fit_point pts[24];
    for (int i = 0; i < 24; i++) {
        double B = 2048.0 * 1024 * pow(1.4, i);
        pts[i] = (ws_fit_point){8 * B, B, roof(30e-6, 500e9, 20e9, 8 * B, B) * (1 + noise(0.02))};
    }
    ws_fit_result r;
    ws_err err = {0};
    cr_assert_eq(ws_fit_roofline(pts, 24, 500e9, 0, &r, &err), 0, "%s", err.msg);
    cr_assert(r.good, "%s", r.note);
    cr_assert(r.p_fixed && !r.w_fixed);
    cr_assert(!r.compute_bound);
    cr_assert_float_eq(r.bandwidth, 20e9, 0.02 * 20e9, "W %g", r.bandwidth);
    cr_assert_float_eq(r.c0, 30e-6, 6e-6, "c0 %g", r.c0);
    cr_assert_gt(r.bandwidth_se, 0);
    cr_assert_lt(r.bandwidth_se, 0.02 * 20e9);
    cr_assert_lt(r.heldout_mape_pct, 2.5);
    cr_assert_gt(r.r2, 0.99);
}

Test(fit, roofline_compute_bound_fixed_w)
{
    /* MLA-like: 30 flop/B with P = 200 Gflop/s and W = 20 GB/s -> compute bound. */
    ws_fit_point pts[16];
    for (int i = 0; i < 16; i++) {
        double B = 1e6 * pow(1.6, i);
        pts[i] = (ws_fit_point){30 * B, B, roof(50e-6, 200e9, 20e9, 30 * B, B) * (1 + noise(0.03))};
    }
    ws_fit_result r;
    cr_assert_eq(ws_fit_roofline(pts, 16, 0, 20e9, &r, NULL), 0);
    cr_assert(r.good, "%s", r.note);
    cr_assert(r.compute_bound);
    cr_assert_float_eq(r.peak_flops, 200e9, 0.03 * 200e9, "P %g", r.peak_flops);
}

Test(fit, roofline_both_free_with_varying_intensity)
{
    /* Intensity from 1 to 100 flop/B crosses the ridge (P/W = 10): both identifiable. */
    ws_fit_point pts[40];
    for (int i = 0; i < 40; i++) {
        double B = 4e6 * (1 + i % 5), ai = pow(10.0, (i % 8) / 3.5);
        pts[i] = (ws_fit_point){ai * B, B, roof(20e-6, 150e9, 15e9, ai * B, B) * (1 + noise(0.01))};
    }
    ws_fit_result r;
    cr_assert_eq(ws_fit_roofline(pts, 40, 0, 0, &r, NULL), 0);
    cr_assert(r.good, "%s", r.note);
    cr_assert_float_eq(r.peak_flops, 150e9, 0.03 * 150e9, "P %g", r.peak_flops);
    cr_assert_float_eq(r.bandwidth, 15e9, 0.03 * 15e9, "W %g", r.bandwidth);
    cr_assert_float_eq(ws_fit_predict(&r, 1e9, 1e8), roof(20e-6, 150e9, 15e9, 1e9, 1e8), 2e-4);
}

Test(fit, transfer_linear)
{
    /* PCIe-like: 10 us latency, 25 GB/s, sizes 4 KB .. 1 GB. */
    ws_fit_point pts[19];
    for (int i = 0; i < 19; i++) {
        double B = 4096.0 * pow(2, i);
        pts[i] = (ws_fit_point){0, B, (10e-6 + B / 25e9) * (1 + noise(0.02))};
    }
    ws_fit_result r;
    cr_assert_eq(ws_fit_transfer(pts, 19, &r, NULL), 0);
    cr_assert(r.good, "%s", r.note);
    cr_assert_float_eq(r.bandwidth, 25e9, 0.03 * 25e9, "W %g", r.bandwidth);
    cr_assert_float_eq(r.c0, 10e-6, 1e-6, "c0 %g", r.c0);
    cr_assert_lt(r.heldout_mape_pct, 2.0);
}

Test(fit, poor_fit_is_flagged)
{
    /* Time quadratic in size: no roofline explains it. */
    ws_fit_point pts[20];
    for (int i = 0; i < 20; i++) {
        double B = 1e6 * (i + 1);
        pts[i] = (ws_fit_point){B, B, 1e-3 * (i + 1) * (i + 1)};
    }
    ws_fit_result r;
    cr_assert_eq(ws_fit_roofline(pts, 20, 1e12, 0, &r, NULL), 0);
    cr_assert(!r.good);
    cr_assert_gt(r.heldout_mape_pct, 10.0);
    cr_assert_neq(r.note[0], '\0');
}

Test(fit, bad_input)
{
    ws_fit_point pts[3] = {{1, 1, 1}, {2, 2, 0}, {3, 3, 3}};
    ws_fit_result r;
    ws_err err = {0};
    cr_assert_eq(ws_fit_roofline(pts, 2, 0, 0, &r, &err), WS_EINVAL);
    cr_assert_eq(ws_fit_roofline(pts, 3, 0, 0, &r, &err), WS_EINVAL); /* t = 0 */
    cr_assert_eq(ws_fit_transfer(pts, 3, &r, &err), WS_EINVAL);
    pts[1].t = 2;
    cr_assert_eq(ws_fit_roofline(pts, 3, 1, 1, &r, &err), WS_EINVAL);
}

Test(fit, negative_c0_is_held_at_zero)
{
    /* Times slightly below a pure B/W line at small sizes pull a free c0 negative. */
    ws_fit_point pts[8];
    for (int i = 0; i < 8; i++) {
        double B = 1e6 * pow(3, i);
        pts[i] = (ws_fit_point){B, B, B / 10e9 * (i < 2 ? 0.8 : 1.0)};
    }
    ws_fit_result r, tr;
    cr_assert_eq(ws_fit_roofline(pts, 8, 1e15, 0, &r, NULL), 0);
    cr_assert(r.c0_at_bound);
    cr_assert_eq(r.c0, 0.0);
    cr_assert_float_eq(r.bandwidth, 10e9, 1.5e9, "W %g", r.bandwidth);
    cr_assert_eq(ws_fit_transfer(pts, 8, &tr, NULL), 0);
    cr_assert(tr.c0_at_bound);
    cr_assert_eq(tr.c0, 0.0);
    cr_assert_gt(tr.bandwidth, 9e9);
}

/* An expert GEMM that streams its weights and computes in turn: t = c0 + F/P + B/W. The
 * serial fit recovers it; the roofline's max misses the sum where the two terms are equal. */
Test(fit, serial_recovers_sum_and_beats_roofline)
{
    ws_fit_point pts[30];
    for (int i = 0; i < 30; i++) {
        double B = 1e7 * (1 + i % 3 * 16), m = pow(2, i / 3), F = 2 * m * B / 2;
        pts[i] = (ws_fit_point){F, B, (30e-6 + F / 900e9 + B / 35e9) * (1 + noise(0.01))};
    }
    ws_fit_result s, r;
    cr_assert_eq(ws_fit_serial(pts, 30, &s, NULL), 0);
    cr_assert(s.good, "%s", s.note);
    cr_assert_eq(s.form, WS_FIT_SERIAL);
    cr_assert_float_eq(s.peak_flops, 900e9, 0.03 * 900e9, "P %g", s.peak_flops);
    cr_assert_float_eq(s.bandwidth, 35e9, 0.03 * 35e9, "W %g", s.bandwidth);
    cr_assert_float_eq(s.c0, 30e-6, 10e-6, "c0 %g", s.c0);
    cr_assert_lt(s.heldout_mape_pct, 2.0);
    cr_assert_float_eq(ws_fit_predict(&s, 9e9, 1e8), s.c0 + 9e9 / s.peak_flops + 1e8 / s.bandwidth,
                       1e-12);
    cr_assert_eq(ws_fit_roofline(pts, 30, 0, 0, &r, NULL), 0);
    cr_assert_gt(r.heldout_mape_pct, 2 * s.heldout_mape_pct, "roofline %.2f%%, serial %.2f%%",
                 r.heldout_mape_pct, s.heldout_mape_pct);
}

/* A rate that rises with x (prefill attention's keys per query): t = c0 + F / (P x/(x + x_h))
 * recovers P and x_h; a flat-rate roofline cannot follow it. */
Test(fit, saturating_recovers_peak_and_half_point)
{
    ws_fit_point pts[60], flat[60];
    for (int i = 0; i < 60; i++) {
        const double x = 32.0 * (1 + i % 12) * (1 + i / 12), F = 2e7 * x * (1 + i % 5);
        const double t = (5e-6 + F / (130e12 * x / (x + 1100))) * (1 + noise(0.01));
        pts[i] = (ws_fit_point){F, x, t};
        flat[i] = (ws_fit_point){F, 0, t};
    }
    ws_fit_result s, r;
    cr_assert_eq(ws_fit_saturating(pts, 60, &s, NULL), 0);
    cr_assert(s.good, "%s", s.note);
    cr_assert_eq(s.form, WS_FIT_SATURATING);
    cr_assert_float_eq(s.peak_flops, 130e12, 0.03 * 130e12, "P %g", s.peak_flops);
    cr_assert_float_eq(s.factor, 1100, 0.05 * 1100, "x_h %g", s.factor);
    cr_assert_gt(s.factor_se, 0);
    cr_assert_float_eq(s.c0, 5e-6, 2e-6, "c0 %g", s.c0);
    cr_assert_lt(s.heldout_mape_pct, 2.0);
    cr_assert_float_eq(ws_fit_predict(&s, 1e12, 550),
                       s.c0 + 1e12 / s.peak_flops * (1 + s.factor / 550), 1e-15);
    cr_assert_eq(ws_fit_roofline(flat, 60, INFINITY, 0, &r, NULL), 0);
    cr_assert_gt(r.heldout_mape_pct, 3 * s.heldout_mape_pct);
    /* x must be positive */
    pts[3].bytes = 0;
    ws_err err = {0};
    cr_assert_eq(ws_fit_saturating(pts, 60, &s, &err), WS_EINVAL);
}

/* A kernel whose library switches kernels along the intensity axis (oneDNN's expert GEMM: a
 * GEMV at one row, a memory-bound GEMM, then a compute-bound one): the three-piece fit puts
 * its cuts in the gaps and predicts held-out samples within the noise, where one serial
 * form cannot follow; each piece's time is its own c0 + F/P + B/W. */
Test(fit, piecewise_finds_the_kernel_switches)
{
    ws_fit_point pts[50];
    int n = 0;
    for (int s = 0; s < 5; s++)
        for (int k = 0; k < 10; k++) {
            const double B = 5e6 * (1 + 4 * s), m = pow(2, k), F = 2 * m * B;
            const double t = m == 1   ? 5e-6 + B / 60e9              /* GEMV */
                             : m < 16 ? 40e-6 + B / 25e9 + F / 4e12  /* memory-bound GEMM */
                                      : 20e-6 + B / 40e9 + F / 1e12; /* compute-bound */
            pts[n++] = (ws_fit_point){F, B, t * (1 + noise(0.01))};
        }
    ws_fit_result s, p2, p3;
    cr_assert_eq(ws_fit_serial(pts, n, &s, NULL), 0);
    cr_assert_eq(ws_fit_piecewise(pts, n, 2, &p2, NULL), 0);
    cr_assert_eq(ws_fit_piecewise(pts, n, 3, &p3, NULL), 0);
    cr_assert_eq(p3.form, WS_FIT_PIECEWISE);
    cr_assert_eq(p3.n_low, 2);
    cr_assert(p3.good, "%s", p3.note);
    cr_assert_lt(p3.heldout_mape_pct, 2.0, "three pieces: %.2f%%", p3.heldout_mape_pct);
    cr_assert_gt(s.heldout_mape_pct, 3 * p3.heldout_mape_pct, "serial %.2f%%, pieces %.2f%%",
                 s.heldout_mape_pct, p3.heldout_mape_pct);
    cr_assert_gt(p2.heldout_mape_pct, p3.heldout_mape_pct);
    /* the cuts sit between the regimes' intensities (2 | 4 and 16 | 32 flop/byte) */
    cr_assert(p3.low[0].upto > 2 && p3.low[0].upto < 4, "cut %g", p3.low[0].upto);
    cr_assert(p3.low[1].upto > 16 && p3.low[1].upto < 32, "cut %g", p3.low[1].upto);
    cr_assert_float_eq(p3.peak_flops, 1e12, 0.05e12);
    cr_assert_float_eq(p3.low[0].bandwidth, 60e9, 3e9);
    /* prediction takes each point's piece */
    const double B = 5e6, g = ws_fit_predict(&p3, 2 * B, B), c = ws_fit_predict(&p3, 64 * B, B);
    cr_assert_float_eq(g,
                       p3.low[0].c0 + B / p3.low[0].bandwidth +
                           (p3.low[0].peak_flops > 0 ? 2 * B / p3.low[0].peak_flops : 0),
                       1e-12);
    cr_assert_float_eq(c, p3.c0 + 64 * B / p3.peak_flops + B / p3.bandwidth, 1e-12);
}

/* Too few samples for the pieces, or no gap between intensities: an error, not a fit. */
Test(fit, piecewise_needs_gaps_and_samples)
{
    ws_fit_point one[6], few[4];
    for (int i = 0; i < 6; i++)
        one[i] = (ws_fit_point){2e6 * (i + 1), 1e6 * (i + 1), 1e-5 * (i + 1)};
    for (int i = 0; i < 4; i++)
        few[i] = (ws_fit_point){1e6 * pow(4, i), 1e6, 1e-5 * (i + 1)};
    ws_fit_result r;
    ws_err err = {0};
    cr_assert_neq(ws_fit_piecewise(one, 6, 2, &r, &err), 0);
    cr_assert(strstr(err.msg, "pieces"), "%s", err.msg);
    cr_assert_neq(ws_fit_piecewise(few, 4, 3, &r, &err), 0);
    cr_assert_neq(ws_fit_piecewise(few, 4, 4, &r, &err), 0);
}
