/* quantile: exact values up to a cap, then a log-bucketed histogram (see quantile.h). */
#include "quantile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int sim_quantile_init(sim_quantile *q, ws_err *err)
{
    memset(q, 0, sizeof *q);
    const double g = (1 + SIM_QUANTILE_REL_ERR) / (1 - SIM_QUANTILE_REL_ERR);
    q->log_g = log(g);
    q->n_buckets = (int)ceil(log(SIM_QUANTILE_MAX / SIM_QUANTILE_MIN) / q->log_g);
    q->exact = malloc(SIM_QUANTILE_EXACT * sizeof *q->exact);
    q->count = calloc((size_t)q->n_buckets + 2, sizeof *q->count);
    if (!q->exact || !q->count) {
        sim_quantile_free(q);
        return ws_err_set(err, WS_ENOMEM, "out of memory (percentiles)");
    }
    q->vmin = INFINITY;
    q->vmax = -INFINITY;
    return 0;
}

void sim_quantile_free(sim_quantile *q)
{
    free(q->exact);
    free(q->count);
    q->exact = NULL;
    q->count = NULL;
}

/* Index into count[]: 0 low, 1 .. n_buckets the histogram, n_buckets + 1 high. */
static int bucket_of(const sim_quantile *q, double v)
{
    if (!(v > SIM_QUANTILE_MIN))
        return 0;
    if (v > SIM_QUANTILE_MAX)
        return q->n_buckets + 1;
    int i = (int)ceil(log(v / SIM_QUANTILE_MIN) / q->log_g);
    /* log() rounding at a bucket edge: keep v inside (g^(i-1), g^i]. */
    if (i < 1)
        i = 1;
    if (i > q->n_buckets)
        i = q->n_buckets;
    return i;
}

void sim_quantile_add(sim_quantile *q, double v)
{
    if (q->n < SIM_QUANTILE_EXACT) {
        q->exact[q->n_exact++] = v;
        q->sorted = 0;
    }
    q->count[bucket_of(q, v)]++;
    q->n++;
    if (v < q->vmin)
        q->vmin = v;
    if (v > q->vmax)
        q->vmax = v;
}

static int cmp_dbl(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double sim_quantile_get(sim_quantile *q, double p)
{
    if (!q->n)
        return 0;
    uint64_t k = (uint64_t)ceil(p * (double)q->n);
    if (k < 1)
        k = 1;
    if (k > q->n)
        k = q->n;
    if (sim_quantile_exact(q)) {
        if (!q->sorted) {
            qsort(q->exact, q->n_exact, sizeof *q->exact, cmp_dbl);
            q->sorted = 1;
        }
        return q->exact[k - 1];
    }
    uint64_t seen = 0;
    int i = 0;
    for (; i <= q->n_buckets + 1; i++) {
        seen += q->count[i];
        if (seen >= k)
            break;
    }
    if (i == 0)
        return q->vmin;
    if (i > q->n_buckets)
        return q->vmax;
    const double g = exp(q->log_g);
    double v = SIM_QUANTILE_MIN * exp(i * q->log_g) * 2 / (g + 1);
    return v < q->vmin ? q->vmin : v > q->vmax ? q->vmax : v;
}
