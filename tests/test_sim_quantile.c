/* test_sim_quantile: the bounded percentile summary (sim/quantile.c): exact nearest-rank
 * values up to the exact cap; past it every percentile within the stated relative error of
 * the exact one, on skewed data spanning six decades; zeros and values beyond the range
 * read as the smallest and largest seen; the memory held does not depend on the count. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "quantile.h"

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double nearest_rank(const double *sorted, size_t n, double p)
{
    size_t k = (size_t)ceil(p * (double)n);
    return sorted[k ? k - 1 : 0];
}

/* xorshift64*: a reproducible stream */
static double unif(uint64_t *s)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return ((*s * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
}

static const double k_ps[] = {0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0};

Test(sim_quantile, exact_up_to_the_cap)
{
    sim_quantile q;
    ws_err err = {0};
    cr_assert_eq(sim_quantile_init(&q, &err), 0);
    double v[SIM_QUANTILE_EXACT];
    uint64_t s = 42;
    for (int i = 0; i < SIM_QUANTILE_EXACT; i++) {
        v[i] = exp(10 * unif(&s) - 5);
        sim_quantile_add(&q, v[i]);
    }
    cr_assert(sim_quantile_exact(&q));
    qsort(v, SIM_QUANTILE_EXACT, sizeof *v, cmp);
    for (size_t i = 0; i < sizeof k_ps / sizeof *k_ps; i++)
        cr_assert_eq(sim_quantile_get(&q, k_ps[i]), nearest_rank(v, SIM_QUANTILE_EXACT, k_ps[i]),
                     "p %g", k_ps[i]);
    sim_quantile_add(&q, 1.0);
    cr_assert(!sim_quantile_exact(&q));
    sim_quantile_free(&q);
}

Test(sim_quantile, within_the_bound_past_the_cap)
{
    const size_t n = 300000;
    double *v = malloc(n * sizeof *v);
    sim_quantile q;
    ws_err err = {0};
    cr_assert_eq(sim_quantile_init(&q, &err), 0);
    uint64_t s = 7;
    for (size_t i = 0; i < n; i++) {
        /* lognormal-ish body and a heavy tail: 1 ms .. 1000 s */
        double u = unif(&s);
        v[i] = u < 0.9 ? exp(-3 + 2 * unif(&s)) : exp(-6.9 + 13.8 * unif(&s));
        sim_quantile_add(&q, v[i]);
    }
    qsort(v, n, sizeof *v, cmp);
    for (int j = 1; j <= 999; j++) {
        const double p = j / 1000.0, want = nearest_rank(v, n, p), got = sim_quantile_get(&q, p);
        cr_assert_leq(fabs(got - want) / want, SIM_QUANTILE_REL_ERR * (1 + 1e-9),
                      "p %g: %.9g vs exact %.9g", p, got, want);
    }
    cr_assert_eq(sim_quantile_get(&q, 1.0), v[n - 1]);
    cr_assert_leq(q.n_exact, SIM_QUANTILE_EXACT, "the exact array stops at its cap");
    free(v);
    sim_quantile_free(&q);
}

Test(sim_quantile, zeros_and_out_of_range)
{
    sim_quantile q;
    ws_err err = {0};
    cr_assert_eq(sim_quantile_init(&q, &err), 0);
    for (int i = 0; i < SIM_QUANTILE_EXACT; i++)
        sim_quantile_add(&q, 0.0);
    for (int i = 0; i < SIM_QUANTILE_EXACT; i++)
        sim_quantile_add(&q, 5e9);
    cr_assert(!sim_quantile_exact(&q));
    cr_assert_eq(sim_quantile_get(&q, 0.5), 0.0);
    cr_assert_eq(sim_quantile_get(&q, 0.51), 5e9);
    sim_quantile_free(&q);
    cr_assert_eq(sim_quantile_init(&q, &err), 0);
    cr_assert_eq(sim_quantile_get(&q, 0.5), 0.0, "no values: 0");
    sim_quantile_free(&q);
}
