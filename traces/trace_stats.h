/* trace_stats: the summary `writescope trace stats` prints: requests, duration, rate,
 * prompt and output token distributions (mean, p50, p90, p99, max), distinct sessions,
 * and what the reader skipped (malformed rows, failed requests).
 *
 * Percentiles are exact (nearest rank: the smallest value with at least q of the requests
 * at or below it), so this summary keeps 4 bytes per request and side (8 more per request
 * for session ids when the trace has them); the reader itself stays constant-memory. */
#ifndef WS_TRACE_STATS_H
#define WS_TRACE_STATS_H

#include <stdint.h>

#include "trace.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ws_trace_dist {
    double sum, mean; /* tokens */
    int32_t min, p50, p90, p99, max;
} ws_trace_dist;

typedef struct ws_trace_stats {
    ws_trace_format format;
    uint64_t requests;
    double first_s, last_s; /* first and last arrival */
    double duration_s;      /* last - first */
    double rate;            /* requests / duration_s; 0 when duration_s is 0 */
    ws_trace_dist prompt, output;
    uint64_t sessions;      /* distinct session ids; 0 when the trace has none */
    ws_trace_counts counts; /* lines, bad rows skipped, failed requests skipped */
} ws_trace_stats;

/* Reads every remaining request of t into *st. A closed-loop generator is refused
 * (WS_EUNSUP: its arrivals are think times). Returns 0 or sets err. */
int ws_trace_stats_compute(ws_trace *t, ws_trace_stats *st, ws_err *err);
/* Nearest-rank percentile q in (0, 1] of v[0..n) sorted ascending; n >= 1. */
int32_t ws_trace_percentile(const int32_t *sorted, uint64_t n, double q);

#ifdef __cplusplus
}
#endif
#endif
