/* trace_stats: see trace_stats.h. */
#include "trace_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ws_util.h"

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int32_t ws_trace_percentile(const int32_t *sorted, uint64_t n, double q)
{
    double rank = ceil(q * (double)n);
    uint64_t i = rank < 1 ? 0 : (uint64_t)rank - 1;
    return sorted[i < n ? i : n - 1];
}

static void summarize(int32_t *v, uint64_t n, ws_trace_dist *d)
{
    memset(d, 0, sizeof *d);
    if (!n)
        return;
    qsort(v, n, sizeof *v, cmp_i32);
    for (uint64_t i = 0; i < n; i++)
        d->sum += v[i];
    d->mean = d->sum / (double)n;
    d->min = v[0];
    d->max = v[n - 1];
    d->p50 = ws_trace_percentile(v, n, 0.50);
    d->p90 = ws_trace_percentile(v, n, 0.90);
    d->p99 = ws_trace_percentile(v, n, 0.99);
}

int ws_trace_stats_compute(ws_trace *t, ws_trace_stats *st, ws_err *err)
{
    memset(st, 0, sizeof *st);
    st->format = ws_trace_format_of(t);
    if (ws_trace_closed_clients(t) > 0)
        return ws_err_set(err, WS_EUNSUP,
                          "%s: closed-loop arrivals are think times, not a trace to summarize",
                          ws_trace_name(t));
    int sessions = ws_trace_has_sessions(t);
    int32_t *pr = NULL, *ou = NULL;
    int64_t *se = NULL;
    size_t cap_p = 0, cap_o = 0, cap_s = 0;
    uint64_t n = 0, ns = 0;
    ws_trace_req r;
    int rc;
    while ((rc = ws_trace_next(t, &r, err)) == 1) {
        if (ws_grow((void **)&pr, &cap_p, n, sizeof *pr, 4096) ||
            ws_grow((void **)&ou, &cap_o, n, sizeof *ou, 4096) ||
            (sessions && ws_grow((void **)&se, &cap_s, ns, sizeof *se, 4096))) {
            rc = -1;
            ws_err_set(err, WS_ENOMEM, "%s: out of memory for the statistics of %llu requests",
                       ws_trace_name(t), (unsigned long long)n);
            break;
        }
        if (n == 0)
            st->first_s = r.arrival_s;
        st->last_s = r.arrival_s;
        pr[n] = r.prompt_tokens;
        ou[n] = r.output_tokens;
        n++;
        if (sessions && r.session_id >= 0)
            se[ns++] = r.session_id;
    }
    if (rc == 0) {
        st->requests = n;
        st->duration_s = st->last_s - st->first_s;
        st->rate = st->duration_s > 0 ? (double)n / st->duration_s : 0;
        summarize(pr, n, &st->prompt);
        summarize(ou, n, &st->output);
        if (ns) {
            qsort(se, ns, sizeof *se, cmp_i64);
            st->sessions = 1;
            for (uint64_t i = 1; i < ns; i++)
                st->sessions += se[i] != se[i - 1];
        }
        st->counts = *ws_trace_get_counts(t);
    }
    free(pr);
    free(ou);
    free(se);
    return rc == 0 ? 0 : (err && err->code ? err->code : WS_EPARSE);
}
