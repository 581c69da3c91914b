/* test_membw: the bandwidth and peak probes (calib/probe/membw.c) run on every supported
 * path and return plausible positive figures; bad arguments are errors. No timing
 * thresholds: the machine is shared. */
#include <criterion/criterion.h>
#include <math.h>

#include "membw.h"

Test(membw, read_triad_peak_positive)
{
    ws_err err = {0};
    ws_pool *p = ws_pool_create(2, &err);
    cr_assert_not_null(p, "%s", err.msg);
    double g = 0;
    cr_assert_eq(ws_membw_read(p, 8u << 20, 3, &g, &err), 0, "%s", err.msg);
    cr_assert(isfinite(g) && g > 0.01, "read %g GB/s", g);
    g = 0;
    cr_assert_eq(ws_membw_triad(p, 12u << 20, 3, &g, &err), 0, "%s", err.msg);
    cr_assert(isfinite(g) && g > 0.01, "triad %g GB/s", g);
    for (int i = WS_ISA_SCALAR; i < WS_ISA_COUNT; i++) {
        if (!ws_isa_supported((ws_isa)i)) {
            cr_assert_eq(ws_cpu_peak_gflops(p, (ws_isa)i, &g, &err), WS_EUNSUP);
            continue;
        }
        g = 0;
        cr_assert_eq(ws_cpu_peak_gflops(p, (ws_isa)i, &g, &err), 0, "%s", err.msg);
        cr_assert(isfinite(g) && g > 0.01, "%s peak %g", ws_isa_name((ws_isa)i), g);
    }
    cr_assert_eq(ws_membw_read(p, 100, 3, &g, &err), WS_EINVAL);
    cr_assert_eq(ws_membw_triad(p, 100, 3, &g, &err), WS_EINVAL);
    ws_pool_destroy(p);
}

Test(membw, reader_passes_on_either_pool)
{
    ws_err err = {0};
    ws_pool *p2 = ws_pool_create(2, &err), *p1 = ws_pool_create(1, &err);
    cr_assert(p2 && p1, "%s", err.msg);
    ws_membw_reader *r = ws_membw_reader_create(p2, 8u << 20, &err);
    cr_assert_not_null(r, "%s", err.msg);
    size_t c2 = 0, c1 = 0;
    const double t2 = ws_membw_reader_pass(r, 8u << 20, &c2);
    const double t1 = ws_membw_reader_pass_on(r, p1, 8u << 20, &c1);
    cr_assert(t2 > 0 && t1 > 0 && isfinite(t1));
    /* the same tasks on one thread: the same bytes */
    cr_assert_eq(c1, c2);
    cr_assert(c2 > (7u << 20) && c2 <= (8u << 20), "covered %zu", c2);
    /* more than the buffer holds reads the whole buffer */
    size_t cmax = 0;
    ws_membw_reader_pass_on(r, p1, 64u << 20, &cmax);
    cr_assert_eq(cmax, c2);
    ws_membw_reader_destroy(r);
    ws_pool_destroy(p1);
    ws_pool_destroy(p2);
}

Test(membw, gather_segments)
{
    ws_err err = {0};
    ws_pool *p2 = ws_pool_create(2, &err), *p1 = ws_pool_create(1, &err);
    cr_assert(p2 && p1, "%s", err.msg);
    ws_membw_reader *r = ws_membw_reader_create(p2, 8u << 20, &err);
    cr_assert_not_null(r, "%s", err.msg);
    const size_t segs[] = {64, 256, 1152, 4096};
    for (size_t i = 0; i < sizeof segs / sizeof segs[0]; i++) {
        double t2 = 0, t1 = 0;
        size_t c2 = 0, c1 = 0;
        cr_assert_eq(ws_membw_reader_gather(r, NULL, segs[i], 4u << 20, 7, &t2, &c2, &err), 0, "%s",
                     err.msg);
        cr_assert_eq(ws_membw_reader_gather(r, p1, segs[i], 4u << 20, 7, &t1, &c1, &err), 0, "%s",
                     err.msg);
        cr_assert(t2 > 0 && t1 > 0 && isfinite(t1) && isfinite(t2));
        /* whole segments, split over the same tasks on either pool */
        cr_assert_eq(c1, c2);
        cr_assert_eq(c2 % segs[i], 0);
        cr_assert(c2 <= (4u << 20) && c2 > (4u << 20) - 32 * segs[i], "covered %zu", c2);
    }
    /* tiny requests still read one segment per task */
    double t = 0;
    size_t c = 0;
    cr_assert_eq(ws_membw_reader_gather(r, NULL, 256, 1, 1, &t, &c, &err), 0, "%s", err.msg);
    cr_assert(c >= 256 && c % 256 == 0, "covered %zu", c);
    /* segments must be whole lines and fit the buffer */
    cr_assert_eq(ws_membw_reader_gather(r, NULL, 100, 4u << 20, 1, &t, NULL, &err), WS_EINVAL);
    cr_assert_eq(ws_membw_reader_gather(r, NULL, 0, 4u << 20, 1, &t, NULL, &err), WS_EINVAL);
    cr_assert_eq(ws_membw_reader_gather(r, NULL, 64u << 20, 4u << 20, 1, &t, NULL, &err),
                 WS_EINVAL);
    ws_membw_reader_destroy(r);
    ws_pool_destroy(p1);
    ws_pool_destroy(p2);
}

/* What a pass times starts in DRAM at any size: every timed pass (read, gather, triad) is
 * preceded by the eviction of what it reads and writes, so no figure depends on what the
 * machine reports of its caches. */
Test(membw, every_timed_pass_evicted_first)
{
    ws_err err = {0};
    ws_pool *p = ws_pool_create(2, &err);
    cr_assert_not_null(p, "%s", err.msg);
    ws_membw_reader *r = ws_membw_reader_create(p, 8u << 20, &err);
    cr_assert_not_null(r, "%s", err.msg);
    size_t covered = 0;
    unsigned long long e0 = ws_membw_evicted_bytes();
    ws_membw_reader_pass(r, 4u << 20, &covered);
    unsigned long long e1 = ws_membw_evicted_bytes();
    cr_assert_geq(e1 - e0, covered, "read pass: evicted %llu of %zu bytes", e1 - e0, covered);
    double t;
    cr_assert_eq(ws_membw_reader_gather(r, NULL, 256, 1u << 20, 1, &t, NULL, &err), 0, "%s",
                 err.msg);
    unsigned long long e2 = ws_membw_evicted_bytes();
    /* random rows anywhere in the buffer: the whole buffer */
    cr_assert_geq(e2 - e1, (7u << 20), "gather: evicted %llu bytes", e2 - e1);
    ws_membw_reader_destroy(r);
    double g;
    cr_assert_eq(ws_membw_triad(p, 12u << 20, 3, &g, &err), 0, "%s", err.msg);
    unsigned long long e3 = ws_membw_evicted_bytes();
    /* three repeats, each after its three arrays (a multiple of 512 elements per task) */
    cr_assert_geq(e3 - e2, 3ull * (12u << 20) * 3 / 4, "triad: evicted %llu bytes", e3 - e2);
    ws_pool_destroy(p);
}

Test(membw, triad_check_band)
{
    cr_assert_eq(ws_membw_triad_in_band(40.0 / 40), 1);
    cr_assert_eq(ws_membw_triad_in_band(30.0 / 40), 1);
    /* a triad far above the read (served from a cache) or far below disagrees */
    cr_assert_eq(ws_membw_triad_in_band(64.0 / 32), 0);
    cr_assert_eq(ws_membw_triad_in_band(20.0 / 60), 0);
    cr_assert_eq(ws_membw_triad_in_band(NAN), 0); /* no read figure */
    cr_assert_eq(ws_membw_triad_in_band(WS_MEMBW_TRIAD_READ_LO), 1);
    cr_assert_eq(ws_membw_triad_in_band(WS_MEMBW_TRIAD_READ_HI), 1);
}

/* The host's bandwidth jumps from 50 to 80 GB/s during the run; within each round the
 * triad runs at 0.98 of the read: the ratio per round, not of the two medians, is 0.98. */
Test(membw, triad_check_by_rounds)
{
    const double GB = 1e9, bytes = 1.0 * GB;
    const double read_gbps[5] = {50, 50, 80, 80, 80};
    double tr[5], tt[5], r = 0;
    for (int k = 0; k < 5; k++) {
        tr[k] = bytes / (read_gbps[k] * GB);
        tt[k] = bytes / (0.98 * read_gbps[k] * GB);
    }
    cr_assert_eq(ws_membw_triad_check_rounds(tr, bytes, tt, bytes, 5, &r), 1);
    cr_assert_float_eq(r, 0.98, 1e-9);
    /* a triad served from a cache in every round disagrees */
    for (int k = 0; k < 5; k++)
        tt[k] = tr[k] / 2.0;
    cr_assert_eq(ws_membw_triad_check_rounds(tr, bytes, tt, bytes, 5, &r), 0);
    cr_assert_float_eq(r, 2.0, 1e-9);
}

Test(membw, triader_passes_evicted_and_counted)
{
    ws_err err = {0};
    ws_pool *p = ws_pool_create(2, &err);
    cr_assert_not_null(p, "%s", err.msg);
    ws_membw_triader *t = ws_membw_triader_create(p, 12u << 20, &err);
    cr_assert_not_null(t, "%s", err.msg);
    for (int r = 0; r < 2; r++) {
        size_t counted = 0;
        const unsigned long long e0 = ws_membw_evicted_bytes();
        const double s = ws_membw_triader_pass(t, &counted);
        cr_assert(s > 0 && isfinite(s));
        /* STREAM counting: 3 arrays x 8 B, whole 512-element runs per task */
        cr_assert(counted <= (12u << 20) && counted > (11u << 20), "counted %zu", counted);
        cr_assert_geq(ws_membw_evicted_bytes() - e0, counted);
    }
    ws_membw_triader_destroy(t);
    cr_assert_null(ws_membw_triader_create(p, 100, &err));
    cr_assert_eq(err.code, WS_EINVAL);
    ws_pool_destroy(p);
}
