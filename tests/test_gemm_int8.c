/* test_gemm_int8: the int8-weight expert FFN (kernels/gemm_int8.c).
 *
 * - quantization: per-row scale max|w| / qmax, every weight within half a step;
 * - the oneDNN kernel against the plain-C reference (the same quantization, exact int32
 *   dot products), within the bound the reference gives (h elements at a rounding tie may
 *   land one step apart; 1e-5 of the sum of |terms| for float rounding);
 * - against the fp32 FFN on the dequantized weights, within the error bound of quantizing
 *   the activations per token: |x - x^| <= sx/2 carried through the gate/up products
 *   (sum |w|), silu (Lipschitz 1.1) and the product with up, then h's own step sh/2,
 *   through the down product -- derived from the format, not fitted to the results;
 * - every instruction path oneDNN offers on this CPU (DNNL_MAX_CPU_ISA's values, set with
 *   dnnl_set_max_cpu_isa before oneDNN's first use: Criterion runs each test in a process of
 *   its own), on saturating data (all-max inputs and weights) too; paths the CPU lacks are
 *   skipped and say so; without VNNI, 8-bit weights are refused;
 * - concurrent calls from two threads give what serial calls give, bit for bit. */
#include <criterion/criterion.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_int8.h"
#include "half.h"

static float rnd(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 9) & 0xffff) / 32768.0f - 1.0f;
}

typedef struct fixture {
    int H, I, M;
    uint16_t *wb; /* bf16 [2I x H | H x I] */
    void *mem;    /* the int8 expert */
    ws_expert_int8 e;
    float *x, *y;
} fixture;

/* Random weights (bf16, ~U(-1,1) * 2/sqrt(H)) and inputs; extreme: all inputs 1 and all
 * weights +-max (the pattern that saturates 16-bit pair sums). */
static void make(fixture *f, int H, int I, int M, unsigned seed, int qmax, int extreme)
{
    f->H = H, f->I = I, f->M = M;
    const size_t wn = (size_t)3 * H * I;
    f->wb = malloc(sizeof(uint16_t) * wn);
    f->mem = aligned_alloc(64, (ws_expert_int8_bytes(H, I) + 63) & ~(size_t)63);
    f->x = malloc(sizeof(float) * M * H);
    f->y = malloc(sizeof(float) * M * H);
    cr_assert(f->wb && f->mem && f->x && f->y);
    unsigned s = seed;
    for (size_t i = 0; i < wn; i++)
        f->wb[i] = ws_f32_to_bf16(extreme ? ((i / 7) % 2 ? 0.5f : -0.5f)
                                          : rnd(&s) * 2.0f / sqrtf((float)H));
    for (int i = 0; i < M * H; i++)
        f->x[i] = extreme ? 1.0f : rnd(&s);
    ws_expert_bf16 b = {H, I, f->wb, f->wb + (size_t)2 * I * H};
    ws_err err = {0};
    cr_assert_eq(ws_expert_int8_from_bf16(&b, qmax, f->mem, &f->e, &err), 0, "%s", err.msg);
}

static void drop(fixture *f)
{
    free(f->wb), free(f->mem), free(f->x), free(f->y);
}

/* The kernel's y against the reference's, within the reference's bound. */
static void check_ref(fixture *f, const char *what)
{
    const size_t n = (size_t)f->M * f->H;
    float *yr = malloc(sizeof(float) * n);
    double *tol = malloc(sizeof(double) * n);
    cr_assert(yr && tol);
    ws_expert_ffn_int8_ref(&f->e, f->x, yr, tol, f->M);
    for (size_t i = 0; i < n; i++)
        cr_assert(fabs((double)f->y[i] - yr[i]) <= tol[i],
                  "%s H %d I %d M %d: y[%zu][%zu] = %.9g, reference %.9g (bound %g)", what, f->H,
                  f->I, f->M, i / f->H, i % f->H, f->y[i], yr[i], tol[i]);
    free(yr), free(tol);
}

static double silu(double g)
{
    return g / (1 + exp(-g));
}

/* The fp32 FFN on the dequantized weights (in double) and, per output, the bound on what
 * quantizing the activations per token can change. */
static void check_fp32(fixture *f)
{
    const int H = f->H, I = f->I;
    const ws_expert_int8 *e = &f->e;
    double *h = malloc(sizeof(double) * I), *dh = malloc(sizeof(double) * I);
    cr_assert(h && dh);
    for (int r = 0; r < f->M; r++) {
        const float *x = f->x + (size_t)r * H;
        double amax = 0;
        for (int k = 0; k < H; k++)
            amax = fmax(amax, fabs(x[k]));
        const double dx = amax / 127 * (0.5 + 1e-4); /* half a step, and the float scale */
        double hmax = 0;
        for (int j = 0; j < I; j++) {
            double g = 0, u = 0, lg = 0, lu = 0;
            for (int k = 0; k < H; k++) {
                const double wg = e->w_gate_up[(size_t)j * H + k] * (double)e->s_gate_up[j];
                const double wu =
                    e->w_gate_up[(size_t)(I + j) * H + k] * (double)e->s_gate_up[I + j];
                g += x[k] * wg, u += x[k] * wu;
                lg += fabs(wg), lu += fabs(wu);
            }
            const double dg = dx * lg, du = dx * lu;
            h[j] = silu(g) * u;
            dh[j] = 1.1 * dg * (fabs(u) + du) + fabs(silu(g)) * du;
            hmax = fmax(hmax, fabs(h[j]) + dh[j]);
        }
        const double step = hmax / 127 * (0.5 + 1e-4);
        for (int c = 0; c < H; c++) {
            double y = 0, bound = 0, mag = 0;
            for (int j = 0; j < I; j++) {
                const double wd = e->w_down[(size_t)c * I + j] * (double)e->s_down[c];
                y += h[j] * wd;
                bound += (dh[j] + step) * fabs(wd);
                mag += fabs(h[j] * wd);
            }
            bound += 1e-4 * mag + 1e-7;
            const double got = f->y[(size_t)r * H + c];
            cr_assert(fabs(got - y) <= bound,
                      "H %d I %d M %d: y[%d][%d] = %.9g, fp32 FFN %.9g: off by %g > bound %g", H, I,
                      f->M, r, c, got, y, fabs(got - y), bound);
        }
    }
    free(h), free(dh);
}

Test(gemm_int8, quantization_is_within_half_a_step)
{
    enum { R = 5, C = 37 };
    float w[R * C];
    uint16_t wb[R * C];
    int8_t q[R * C], qb[R * C];
    float s[R], sb[R];
    unsigned st = 3;
    for (int i = 0; i < R * C; i++) {
        w[i] = rnd(&st) * (float)(1 + i / C); /* rows of different ranges */
        wb[i] = ws_f32_to_bf16(w[i]);
    }
    for (int c = 0; c < C; c++)
        w[2 * C + c] = 0; /* a zero row */
    for (int qmax = 63; qmax <= 127; qmax += 64) {
        ws_int8_quantize_f32(w, R, C, qmax, q, s);
        for (int r = 0; r < R; r++) {
            float amax = 0;
            int qm = 0;
            for (int c = 0; c < C; c++) {
                amax = fmaxf(amax, fabsf(w[r * C + c]));
                qm = abs(q[r * C + c]) > qm ? abs(q[r * C + c]) : qm;
                cr_assert(abs(q[r * C + c]) <= qmax);
                cr_assert(fabsf(q[r * C + c] * s[r] - w[r * C + c]) <= s[r] * 0.5f * (1 + 1e-5f),
                          "row %d col %d: %g -> %d x %g", r, c, w[r * C + c], q[r * C + c], s[r]);
            }
            cr_assert_float_eq(s[r], amax / qmax, 1e-12);
            cr_assert_eq(qm, amax > 0 ? qmax : 0, "the largest weight is +-qmax");
        }
        /* bf16 weights quantize as their fp32 values do */
        float wf[R * C];
        for (int i = 0; i < R * C; i++)
            wf[i] = ws_bf16_to_f32(wb[i]);
        ws_int8_quantize_f32(wf, R, C, qmax, q, s);
        ws_int8_quantize_bf16(wb, R, C, qmax, qb, sb);
        cr_assert_eq(memcmp(q, qb, sizeof q), 0);
        cr_assert_eq(memcmp(s, sb, sizeof s), 0);
        int32_t sum[R];
        ws_int8_row_sums(q, R, C, sum);
        for (int r = 0; r < R; r++) {
            int32_t a = 0;
            for (int c = 0; c < C; c++)
                a += q[r * C + c];
            cr_assert_eq(sum[r], a);
        }
    }
}

/* Odd sizes (tails of every blocking), m across 1..17, and Qwen3-30B-A3B's expert. */
static const int k_shapes[][3] = {{64, 48, 1}, {72, 40, 3}, {128, 96, 17}, {2048, 768, 4}};

Test(gemm_int8, matches_the_reference_and_the_fp32_ffn)
{
    for (int si = 0; si < 4; si++)
        for (int threads = 1; threads <= 2; threads++) {
            fixture f;
            make(&f, k_shapes[si][0], k_shapes[si][1], k_shapes[si][2], 11 + si,
                 ws_gemm_int8_qmax(), 0);
            ws_err err = {0};
            memset(f.y, 0xff, sizeof(float) * f.M * f.H); /* NaN: every output written */
            cr_assert_eq(ws_expert_ffn_int8(&f.e, f.x, f.y, f.M, threads, &err), 0, "%s", err.msg);
            check_ref(&f, "onednn");
            check_fp32(&f);
            drop(&f);
        }
    char d[200];
    ws_gemm_int8_describe(2048, 768, 4, d, sizeof d);
    cr_log_info("int8 expert FFN here: %s (oneDNN ISA %s)", d, ws_gemm_int8_isa());
    cr_assert(!strncmp(d, "onednn ", 7) && !strstr(d, "none"), "%s", d);
    ws_gemm_int8_release();
}

/* One instruction path: oneDNN capped at `isa` before its first use (this test's process is
 * its own); skipped when the CPU does not reach it. */
static void one_isa(dnnl_cpu_isa_t isa, const char *name, const char *family)
{
    cr_assert_eq(dnnl_set_max_cpu_isa(isa), dnnl_success,
                 "oneDNN was used before the test set its ISA (run the tests with fork)");
    if (dnnl_get_effective_cpu_isa() != isa)
        cr_skip_test("this CPU has no %s: oneDNN runs %s at most", name, ws_gemm_int8_isa());
    cr_assert_str_eq(ws_gemm_int8_isa(), name);
    const int qmax = ws_gemm_int8_qmax(),
              vnni = strstr(name, "vnni") || strstr(name, "bf16") || strstr(name, "amx");
    cr_assert_eq(qmax, vnni ? 127 : 63, "%s", name);
    const char *fam = ws_gemm_int8_family(2048, 768, 4);
    cr_assert(strstr(family, fam), "%s: family %s, expected one of %s", name, fam, family);
    for (int extreme = 0; extreme < 2; extreme++)
        for (int si = 0; si < 4; si++) {
            fixture f;
            make(&f, k_shapes[si][0], k_shapes[si][1], k_shapes[si][2], 5 + si, qmax, extreme);
            ws_err err = {0};
            cr_assert_eq(ws_expert_ffn_int8(&f.e, f.x, f.y, f.M, 2, &err), 0, "%s: %s", name,
                         err.msg);
            check_ref(&f, name);
            if (!extreme)
                check_fp32(&f);
            drop(&f);
        }
    if (!vnni) { /* 8-bit weights would saturate the 16-bit pair sums: refused */
        fixture f;
        make(&f, 64, 48, 1, 1, 127, 1);
        ws_err err = {0};
        cr_assert_eq(ws_expert_ffn_int8(&f.e, f.x, f.y, 1, 1, &err), WS_EUNSUP);
        cr_assert(strstr(err.msg, "VNNI"), "%s", err.msg);
        drop(&f);
    }
    char impl[140];
    ws_gemm_int8_impl(2048, 768, 4, impl, sizeof impl);
    cr_log_info("DNNL_MAX_CPU_ISA=%s: impl %s, family %s", name, impl, fam);
    ws_gemm_int8_release();
}

Test(gemm_int8, isa_avx2)
{
    one_isa(dnnl_cpu_isa_avx2, "avx2", "avx2");
}
Test(gemm_int8, isa_avx2_vnni)
{
    one_isa(dnnl_cpu_isa_avx2_vnni, "avx2_vnni", "avx2_vnni");
}
Test(gemm_int8, isa_avx512_core)
{
    one_isa(dnnl_cpu_isa_avx512_core, "avx512_core", "avx512bw");
}
Test(gemm_int8, isa_avx512_core_vnni)
{
    one_isa(dnnl_cpu_isa_avx512_core_vnni, "avx512_core_vnni", "avx512_vnni");
}
Test(gemm_int8, isa_avx512_core_bf16)
{
    one_isa(dnnl_cpu_isa_avx512_core_bf16, "avx512_core_bf16", "avx512_vnni");
}
Test(gemm_int8, isa_avx512_core_amx)
{
    /* AMX-INT8 where oneDNN's matmul takes its brgemm path, VNNI where its gemm serves */
    one_isa(dnnl_cpu_isa_avx512_core_amx, "avx512_core_amx", "amx_int8 avx512_vnni");
}

typedef struct par_job {
    fixture *f;
    float *y;
    int rc;
} par_job;

static void *par_run(void *p)
{
    par_job *j = p;
    ws_err err = {0};
    for (int it = 0; it < 20 && !j->rc; it++)
        j->rc = ws_expert_ffn_int8(&j->f->e, j->f->x, j->y, j->f->M, 1, &err);
    ws_gemm_int8_release();
    return NULL;
}

Test(gemm_int8, concurrent_calls_equal_serial_calls)
{
    fixture f[2];
    make(&f[0], 128, 96, 5, 21, ws_gemm_int8_qmax(), 0);
    make(&f[1], 72, 40, 3, 22, ws_gemm_int8_qmax(), 0);
    float *ys[2], *yp[2];
    ws_err err = {0};
    for (int i = 0; i < 2; i++) {
        ys[i] = malloc(sizeof(float) * f[i].M * f[i].H);
        yp[i] = malloc(sizeof(float) * f[i].M * f[i].H);
        cr_assert(ys[i] && yp[i]);
        cr_assert_eq(ws_expert_ffn_int8(&f[i].e, f[i].x, ys[i], f[i].M, 1, &err), 0, "%s", err.msg);
    }
    pthread_t t[2];
    par_job j[2] = {{&f[0], yp[0], 0}, {&f[1], yp[1], 0}};
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, par_run, &j[i]), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(j[i].rc, 0);
        cr_assert_eq(memcmp(ys[i], yp[i], sizeof(float) * f[i].M * f[i].H), 0,
                     "thread %d differs from the serial call", i);
        free(ys[i]), free(yp[i]);
        drop(&f[i]);
    }
    ws_gemm_int8_release();
}

Test(gemm_int8, bad_arguments_and_cost)
{
    ws_err err = {0};
    float x[4] = {0}, y[4];
    cr_assert_eq(ws_expert_ffn_int8(NULL, x, y, 1, 1, &err), WS_EINVAL);
    ws_expert_int8 e = {.hidden = 4, .inter = 2, .qmax = 127};
    int8_t q[24] = {0};
    float sc[8] = {0};
    e.w_gate_up = q, e.w_down = q + 16, e.s_gate_up = sc, e.s_down = sc + 4; /* no row sums */
    cr_assert_eq(ws_expert_ffn_int8(&e, x, y, 1, 1, &err), WS_EINVAL);
    ws_expert_bf16 b = {4, 2, NULL, NULL};
    cr_assert_eq(ws_expert_int8_from_bf16(&b, 127, x, &e, &err), WS_EINVAL);
    double fl, by, fb, bb;
    ws_expert_int8_cost(2048, 768, 4, &fl, &by);
    ws_expert_bf16_cost(2048, 768, 4, &fb, &bb);
    cr_assert_float_eq(fl, fb, 1e-9, "the same arithmetic as the bf16 FFN");
    /* one byte a weight instead of two, plus scales and row sums, the int8 copies of x and
     * h and the int32 products */
    cr_assert_float_eq(by,
                       bb - 3.0 * 2048 * 768 + 8.0 * (2 * 768 + 2048) + 4.0 * (2048 + 768) +
                           16.0 * (2 * 768 + 2048),
                       1e-6);
}
