/* quantile: percentiles of a stream of values (TTFT, TPOT) in bounded memory, so the
 * serving loop's totals cost the same for a hundred requests or ten million.
 *
 * The first SIM_QUANTILE_EXACT values are kept as they are, and while no more have come a
 * percentile is exact: the nearest-rank value v[ceil(p n) - 1] of the sorted values. Every
 * value also goes into a log-bucketed histogram (bucket i holds (g^(i-1), g^i] x
 * SIM_QUANTILE_MIN, g = (1 + a) / (1 - a), a = SIM_QUANTILE_REL_ERR); past the exact cap a
 * percentile is read from it as the bucket's midpoint 2 g^i / (g + 1) x SIM_QUANTILE_MIN,
 * which is within a relative error a of the nearest-rank value (the DDSketch bound),
 * clamped to the smallest and largest value seen. Values at or below SIM_QUANTILE_MIN
 * (zero included) share one bucket read as the smallest value, values above
 * SIM_QUANTILE_MAX one read as the largest. Memory: the exact array (32 KiB) and the
 * histogram (~33 KiB), whatever the number of values. */
#ifndef WS_SIM_QUANTILE_H
#define WS_SIM_QUANTILE_H

#include <stddef.h>
#include <stdint.h>

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SIM_QUANTILE_EXACT 4096    /* values kept as they are */
#define SIM_QUANTILE_REL_ERR 0.005 /* relative error bound past the exact cap */
#define SIM_QUANTILE_MIN 1e-9      /* s: smallest value the histogram resolves */
#define SIM_QUANTILE_MAX 1e9       /* s: largest */

typedef struct sim_quantile {
    double *exact;   /* the first values, as they came (sorted when read) */
    size_t n_exact;  /* held in exact */
    int sorted;      /* exact is sorted */
    uint64_t *count; /* [n_buckets + 2]: low bucket, the histogram, high bucket */
    int n_buckets;
    double log_g;      /* ln g */
    uint64_t n;        /* values added */
    double vmin, vmax; /* smallest and largest value added */
} sim_quantile;

int sim_quantile_init(sim_quantile *q, ws_err *err);
void sim_quantile_free(sim_quantile *q);
/* Adds a value (no allocation past the first SIM_QUANTILE_EXACT). */
void sim_quantile_add(sim_quantile *q, double v);
/* The nearest-rank p-quantile (0 < p <= 1): exact while n <= SIM_QUANTILE_EXACT, else within
 * SIM_QUANTILE_REL_ERR relative; 0 when there are no values. */
double sim_quantile_get(sim_quantile *q, double p);
/* 1 while percentiles are exact. */
static inline int sim_quantile_exact(const sim_quantile *q)
{
    return q->n <= SIM_QUANTILE_EXACT;
}

#ifdef __cplusplus
}
#endif
#endif
