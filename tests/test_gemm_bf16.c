/* test_gemm_bf16: the bf16-weight expert FFN (kernels/gemm_bf16.c), every present backend
 * against an fp64 reference of the FFN on the bf16-rounded weights ([out x in]) and inputs.
 * Tolerance: the bf16-input backends round x and h to bf16 (relative 2^-9 each) and sum in
 * fp32, so |y - ref| <= 2^-7 * sum_j |h_j Wd_jc| (a few times the worst case of those two
 * roundings) plus 1e-6; a transposed or misread operand misses it by orders of magnitude. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_bf16.h"
#include "half.h"

static float rnd(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 9) & 0xffff) / 32768.0f - 1.0f;
}

typedef struct fixture {
    int H, I, M;
    uint16_t *w;
    float *x, *y;
    double *ref, *tol;
} fixture;

static void make(fixture *f, int H, int I, int M, unsigned seed)
{
    f->H = H, f->I = I, f->M = M;
    f->w = malloc(sizeof(uint16_t) * 3 * H * I);
    f->x = malloc(sizeof(float) * M * H);
    f->y = malloc(sizeof(float) * M * H);
    f->ref = malloc(sizeof(double) * M * H);
    f->tol = malloc(sizeof(double) * M * H);
    cr_assert(f->w && f->x && f->y && f->ref && f->tol);
    unsigned s = seed;
    for (int i = 0; i < 3 * H * I; i++)
        f->w[i] = ws_f32_to_bf16(rnd(&s) * 2.0f / sqrtf((float)H));
    for (int i = 0; i < M * H; i++)
        f->x[i] = rnd(&s);
    const uint16_t *wgu = f->w, *wd = f->w + (size_t)H * 2 * I;
    double *h = malloc(sizeof(double) * I);
    for (int r = 0; r < M; r++) {
        for (int j = 0; j < I; j++) {
            double g = 0, u = 0;
            for (int k = 0; k < H; k++) {
                double xk = ws_bf16_to_f32(ws_f32_to_bf16(f->x[r * H + k]));
                g += xk * ws_bf16_to_f32(wgu[(size_t)j * H + k]);
                u += xk * ws_bf16_to_f32(wgu[(size_t)(I + j) * H + k]);
            }
            h[j] = g / (1 + exp(-g)) * u;
        }
        for (int c = 0; c < H; c++) {
            double acc = 0, mag = 0;
            for (int j = 0; j < I; j++) {
                double t = h[j] * ws_bf16_to_f32(wd[(size_t)c * I + j]);
                acc += t, mag += fabs(t);
            }
            f->ref[r * H + c] = acc;
            f->tol[r * H + c] = mag / 128.0 + 1e-6;
        }
    }
    free(h);
}

static void drop(fixture *f)
{
    free(f->w), free(f->x), free(f->y), free(f->ref), free(f->tol);
}

static void check(fixture *f, const char *what)
{
    for (int i = 0; i < f->M * f->H; i++)
        cr_assert(fabs(f->y[i] - f->ref[i]) <= f->tol[i],
                  "%s H %d I %d M %d: y[%d][%d] = %g, reference %g (tolerance %g)", what, f->H,
                  f->I, f->M, i / f->H, i % f->H, f->y[i], f->ref[i], f->tol[i]);
}

Test(gemm_bf16, bf16_rounding)
{
    cr_assert_eq(ws_f32_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(ws_f32_to_bf16(1.0f + 1.0f / 256), 0x3f80);         /* tie: stays even */
    cr_assert_eq(ws_f32_to_bf16(1.0f + 3.0f / 256), 0x3f82);         /* tie: up to even */
    cr_assert_eq(ws_f32_to_bf16(1.0f + 1.0f / 256 + 1e-6f), 0x3f81); /* above the tie */
    cr_assert_eq(ws_f32_to_bf16(-2.5f), 0xc020);
    cr_assert(isnan(ws_bf16_to_f32(ws_f32_to_bf16(NAN))));
    cr_assert(isinf(ws_bf16_to_f32(ws_f32_to_bf16(INFINITY))));
    cr_assert_eq(ws_bf16_to_f32(0xc020), -2.5f);
}

Test(gemm_bf16, every_backend_matches_fp64_reference)
{
    /* Odd sizes (tails of every blocking), m across the shape classes, and one real shape
     * (DeepSeek-V2-Lite's expert, H 2048 x I 1408). */
    static const int shapes[][3] = {{64, 48, 1}, {72, 40, 3}, {128, 96, 17}, {2048, 1408, 3}};
    int ran = 0;
    for (int si = 0; si < 4; si++) {
        fixture f;
        make(&f, shapes[si][0], shapes[si][1], shapes[si][2], 11 + si);
        ws_expert_bf16 e = {f.H, f.I, f.w, f.w + (size_t)f.H * 2 * f.I};
        ws_err err = {0};
        for (int b = 0; b < WS_GEMM_BF16_N; b++) {
            if (!ws_gemm_bf16_present(b)) {
                cr_log_info("backend %s absent here: not tested", ws_gemm_bf16_label(b));
                continue;
            }
            for (int threads = 1; threads <= 2; threads++) {
                memset(f.y, 0xff, sizeof(float) * f.M * f.H); /* NaN: every output written */
                cr_assert_eq(ws_expert_ffn_bf16_with(b, &e, f.x, f.y, f.M, threads, &err), 0,
                             "%s: %s", ws_gemm_bf16_label(b), err.msg);
                check(&f, ws_gemm_bf16_label(b));
                ran++;
            }
        }
        /* The probed path gives one backend's result, and names it. */
        cr_assert_str_eq(ws_gemm_bf16_backend_name(f.H, f.I, f.M, 2), "unprobed");
        cr_assert_eq(ws_expert_ffn_bf16(&e, f.x, f.y, f.M, 2, &err), 0, "%s", err.msg);
        check(&f, "auto");
        const char *name = ws_gemm_bf16_backend_name(f.H, f.I, f.M, 2);
        cr_assert(strcmp(name, "onednn") == 0 || strcmp(name, "sbgemm") == 0 ||
                      strcmp(name, "fp32") == 0,
                  "chosen: %s", name);
        cr_assert_eq(ws_expert_ffn_bf16(&e, f.x, f.y, f.M, 2, &err), 0, "%s", err.msg);
        check(&f, name);
        drop(&f);
    }
    cr_assert(ran >= 8, "the fp32 path at least");
    cr_assert(ws_gemm_bf16_present(WS_GEMM_BF16_ONEDNN), "oneDNN is a build dependency");
    ws_gemm_bf16_release();
}

Test(gemm_bf16, shape_classes_and_errors)
{
    fixture f;
    make(&f, 32, 16, 9, 5);
    ws_expert_bf16 e = {f.H, f.I, f.w, f.w + (size_t)f.H * 2 * f.I};
    ws_err err = {0};
    cr_assert_eq(ws_expert_ffn_bf16(&e, f.x, f.y, 9, 1, &err), 0, "%s", err.msg);
    /* m 9..16 is one class; 8 and 17 are others. */
    cr_assert_str_neq(ws_gemm_bf16_backend_name(32, 16, 16, 1), "unprobed");
    cr_assert_str_eq(ws_gemm_bf16_backend_name(32, 16, 8, 1), "unprobed");
    cr_assert_str_eq(ws_gemm_bf16_backend_name(32, 16, 17, 1), "unprobed");
    cr_assert_str_eq(ws_gemm_bf16_backend_name(32, 16, 9, 2), "unprobed");
    cr_assert_eq(ws_expert_ffn_bf16(&e, f.x, f.y, 0, 1, &err), WS_EINVAL);
    ws_expert_bf16 bad = e;
    bad.w_down = NULL;
    cr_assert_eq(ws_expert_ffn_bf16(&bad, f.x, f.y, 2, 1, &err), WS_EINVAL);
    cr_assert_eq(ws_expert_ffn_bf16_with(WS_GEMM_BF16_N, &e, f.x, f.y, 2, 1, &err), WS_EINVAL);
    if (!ws_gemm_bf16_present(WS_GEMM_BF16_SBGEMM))
        cr_assert_eq(ws_expert_ffn_bf16_with(WS_GEMM_BF16_SBGEMM, &e, f.x, f.y, 2, 1, &err),
                     WS_EUNSUP);
    ws_gemm_bf16_release();
    cr_assert_str_eq(ws_gemm_bf16_backend_name(32, 16, 9, 1), "unprobed");
    drop(&f);
}

/* Concurrent callers (the runtime runs one expert per pool thread): each thread's oneDNN
 * primitives and scratchpads are its own, so results equal the reference while 4 threads
 * call the same shapes at once, many times over. */
typedef struct conc_arg {
    fixture *f;
    int rc, bad;
} conc_arg;

static void *conc_body(void *p)
{
    conc_arg *a = p;
    fixture *f = a->f;
    ws_expert_bf16 e = {f->H, f->I, f->w, f->w + (size_t)f->H * 2 * f->I};
    float *y = malloc(sizeof(float) * f->M * f->H);
    ws_err err = {0};
    for (int it = 0; it < 40 && !a->rc && y; it++) {
        const int m = 1 + it % f->M;
        a->rc = ws_expert_ffn_bf16_with(WS_GEMM_BF16_ONEDNN, &e, f->x, y, m, 1, &err);
        for (int i = 0; i < m * f->H && !a->rc; i++)
            a->bad += !(fabs(y[i] - f->ref[i]) <= f->tol[i]);
    }
    free(y);
    return NULL;
}

Test(gemm_bf16, concurrent_onednn_callers)
{
    cr_assert(ws_gemm_bf16_present(WS_GEMM_BF16_ONEDNN), "oneDNN is a build dependency");
    enum { N = 4 };
    fixture f[N];
    conc_arg a[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        make(&f[i], 256, 192, 5, 40 + i);
        a[i] = (conc_arg){.f = &f[i]};
    }
    for (int i = 0; i < N; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, conc_body, &a[i]), 0);
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(a[i].rc, 0, "caller %d failed", i);
        cr_assert_eq(a[i].bad, 0, "caller %d: %d outputs off the reference", i, a[i].bad);
        drop(&f[i]);
    }
    ws_gemm_bf16_release();
}
