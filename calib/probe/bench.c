/* bench: see bench.h. */
#include "bench.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_features.h"
#include "membw.h"
#include "ws_util.h"

const size_t ws_bench_gather_seg[WS_BENCH_GATHER_N] = {64, 256, 1152, 4096};

static void note(const ws_bench_attn_cfg *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(const ws_bench_attn_cfg *c, const char *fmt, ...)
{
    if (!c->note)
        return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->note(c->note_ctx, msg);
}

/* ---- membw ---- */

/* Read, gather and triad passes, round-robin over `repeats` rounds, so that the figures
 * checked against each other come from the same minutes: medians of the read bandwidth, of
 * each gather size's (each gather reads as many bytes as the read pass covers) and of the
 * triad's. */
static int read_gather_triad(ws_pool *pool, size_t bytes, int repeats, ws_bench_membw *out,
                             ws_err *err)
{
    ws_membw_reader *r = ws_membw_reader_create(pool, bytes, err);
    ws_membw_triader *tr = r ? ws_membw_triader_create(pool, bytes, err) : NULL;
    double *t = tr ? malloc(sizeof(double) * (size_t)repeats * (2 + WS_BENCH_GATHER_N)) : NULL;
    int rc = 0;
    if (!t) {
        rc = tr ? ws_err_set(err, WS_ENOMEM, "bench: out of memory") : err->code;
        goto out;
    }
    double *tt = t + (size_t)(1 + WS_BENCH_GATHER_N) * repeats; /* triad */
    size_t covered = 0, counted = 0, gcov[WS_BENCH_GATHER_N] = {0};
    for (int k = 0; k < repeats && !rc; k++) {
        t[k] = ws_membw_reader_pass(r, bytes, &covered);
        for (int i = 0; i < WS_BENCH_GATHER_N && !rc; i++)
            rc = ws_membw_reader_gather(r, NULL, ws_bench_gather_seg[i], covered, (uint64_t)k,
                                        &t[(size_t)(1 + i) * repeats + k], &gcov[i], err);
        tt[k] = ws_membw_triader_pass(tr, &counted);
    }
    if (!rc) {
        out->triad_agrees = ws_membw_triad_check_rounds(t, (double)covered, tt, (double)counted,
                                                        repeats, &out->triad_over_read);
        out->read_gbps = (double)covered / ws_median_sort(t, repeats) / 1e9;
        for (int i = 0; i < WS_BENCH_GATHER_N; i++)
            out->gather_gbps[i] =
                (double)gcov[i] / ws_median_sort(t + (size_t)(1 + i) * repeats, repeats) / 1e9;
        out->triad_gbps = (double)counted / ws_median_sort(tt, repeats) / 1e9;
    }
out:
    free(t);
    ws_membw_triader_destroy(tr);
    ws_membw_reader_destroy(r);
    return rc;
}

int ws_bench_membw_run(ws_pool *pool, const ws_bench_membw_cfg *cfg, ws_bench_membw *out,
                       ws_err *err)
{
    *out = (ws_bench_membw){0};
    const int repeats = cfg->repeats > 0 ? cfg->repeats : 1;
    const double mem = ws_cpu_features_get()->mem_bytes;
    if (mem > 0 && 2.0 * (double)cfg->bytes > mem / 2)
        return ws_err_set(err, WS_EINVAL,
                          "bench: the read buffer and the triad's arrays (2 x %.0f MiB) would "
                          "take more than half of memory (%.0f MiB); lower --mib",
                          cfg->bytes / 1048576.0, mem / 1048576.0);
    int rc = read_gather_triad(pool, cfg->bytes, repeats, out, err);
    if (rc || (rc = ws_cpu_peak_gflops(pool, cfg->isa, &out->peak_gflops, err)))
        return rc;
    return 0;
}

/* ---- attn-cpu ---- */

int ws_bench_attn_resolve(const ws_bench_attn_cfg *a, int threads, ws_attn_bench_cfg *cfg,
                          ws_err *err)
{
    const ws_model *m = a->model;
    *cfg = (ws_attn_bench_cfg){0};
    int rc = ws_model_attn_shape(m, a->dtype, a->page, &cfg->kv, &cfg->n_q_heads, &cfg->scale, err);
    if (rc)
        return rc;
    cfg->batch = a->batch;
    cfg->ctx = a->ctx;
    cfg->seed = a->seed;
    cfg->topk = (int)a->topk;
    cfg->sparse = a->topk > 0 ? a->mode : WS_SPARSE_NONE;
    if (a->topk < 0 && m->attn == WS_ATTN_MLA_SPARSE) { /* the model's own top-k */
        cfg->topk = m->index_topk;
        cfg->sparse = a->mode;
        if (cfg->topk > cfg->ctx)
            cfg->sparse = WS_SPARSE_NONE;
    }
    /* The CPU region's layout: V in pairs and K in tiles where the path reads them as
     * stored, K in tiles unless the workload attends single tokens (a token's K is spread
     * over its whole tile). */
    const int token_lists = cfg->sparse == WS_SPARSE_TOKENS;
    cfg->kv.v_pairs = a->v_layout < 0
                          ? ws_attn_cpu_v_pairs(&cfg->kv, cfg->n_q_heads, a->isa, token_lists)
                          : a->v_layout;
    if (cfg->kv.v_pairs && (cfg->kv.v_shares_k || cfg->kv.page_tokens % 2))
        return ws_err_set(err, WS_EINVAL,
                          "bench: --v-layout pairs needs a separate V block (not %s) "
                          "and an even --page",
                          m->name);
    cfg->kv.k_tiles = a->k_layout < 0
                          ? ws_attn_cpu_k_tiles(&cfg->kv, cfg->n_q_heads, a->isa, token_lists)
                          : a->k_layout;
    if (cfg->kv.k_tiles && cfg->kv.v_shares_k)
        return ws_err_set(err, WS_EINVAL,
                          "bench: --k-layout tiles needs a separate V block (%s keeps "
                          "V inside K)",
                          m->name);
    if (cfg->kv.k_tiles && cfg->kv.page_tokens % 16)
        return ws_err_set(err, WS_EINVAL,
                          "bench: --k-layout tiles needs a --page that is a multiple "
                          "of 16 (got %d)",
                          cfg->kv.page_tokens);
    if (a->scaling && threads == 1)
        return ws_err_set(err, WS_EINVAL,
                          "bench: --scaling compares one thread with more: run with "
                          "--threads 2 or more (this host: %d)",
                          ws_cpu_features_get()->logical_cpus);
    const double per_tok =
        (double)cfg->kv.n_kv_heads * (cfg->kv.d_k + (cfg->kv.v_shares_k ? 0 : cfg->kv.d_v)) * 2.0;
    const double alloc = per_tok * (double)cfg->batch *
                         ceil((double)cfg->ctx / cfg->kv.page_tokens) * cfg->kv.page_tokens;
    const ws_cpu_features *f = ws_cpu_features_get();
    if (alloc + (double)a->read_bytes > WS_BENCH_MAX_BYTES ||
        (f->mem_bytes > 0 && alloc > WS_BENCH_MAX_MEM_FRACTION * f->mem_bytes))
        return ws_err_set(err, WS_EINVAL,
                          "bench: %.2f GB of KV (+%.2f GB read buffer) is more than this "
                          "benchmark allows (6.5 GB, 60%% of memory); lower --batch or --ctx",
                          alloc / 1e9, (double)a->read_bytes / 1e9);
    return 0;
}

ws_bench_attn_fig ws_bench_attn_figures(int threads, double *secs, double *rsecs, double *gsecs,
                                        int R, size_t covered, size_t gcovered, double kv_bytes,
                                        double flops, double pk)
{
    ws_bench_attn_fig g = {.threads = threads, .pk = pk};
    double *fr = malloc(sizeof(double) * (size_t)R); /* before the sorts below */
    if (fr) {
        for (int r = 0; r < R; r++)
            fr[r] = kv_bytes * rsecs[r] / (secs[r] * (double)covered);
        g.fr_med = ws_median_sort(fr, R);
        g.fr_q1 = fr[(R - 1) / 4], g.fr_q3 = fr[R - 1 - (R - 1) / 4];
        free(fr);
    }
    g.sec = ws_median_sort(secs, R); /* sorted: extremes at both ends */
    g.smin = secs[0], g.smax = secs[R - 1];
    g.rd = (double)covered / ws_median_sort(rsecs, R) / 1e9;
    if (gsecs)
        g.gb = (double)gcovered / ws_median_sort(gsecs, R) / 1e9;
    g.kv_gbps = kv_bytes / g.sec / 1e9, g.gflops = flops / g.sec / 1e9;
    const double mem_roof = flops / kv_bytes * g.rd;
    g.compute_bound = pk < mem_roof;
    g.roof = g.compute_bound ? pk : mem_roof;
    return g;
}

/* Evicts the KV pages (cold, as in a decode step) and times the kernel once. */
static int attn_time(ws_attn_bench *b, ws_pool *pool, ws_isa isa, ws_attn_prec prec, double *s_out,
                     ws_err *err)
{
    ws_attn_bench_evict(b, pool);
    const double s0 = ws_now_s();
    const int rc = ws_attn_cpu_prec(ws_attn_bench_problem(b), pool, isa, prec, err);
    *s_out = ws_now_s() - s0;
    return rc;
}

/* The repeat loop: in each round a read pass (and gather pass) then the kernel, on all
 * threads and, with pool1, the same again on one thread. Round -1 is an untimed warm-up
 * whose figures go to slot 0, which round 0 overwrites. */
static int attn_rounds(ws_pool *pool, ws_pool *pool1, const ws_bench_attn_cfg *a,
                       ws_attn_bench *b, ws_membw_reader *rdr, size_t gseg, double kv_bytes,
                       int *R_io, double *secs, double *rsecs, double *gsecs, double *secs1,
                       double *rsecs1, double *gsecs1, size_t *read_covered,
                       size_t *gather_covered, ws_err *err)
{
    int rc = 0, R = *R_io;
    double t_last = ws_now_s(), s = 0, s1 = 0;
    for (int r = -1; r < R && !rc; r++) {
        const int k = r < 0 ? 0 : r;
        const double t_round = ws_now_s();
        ws_attn_bench_select(b, r + 1);
        rsecs[k] = ws_membw_reader_pass(rdr, a->read_bytes, read_covered);
        if (gseg)
            rc = ws_membw_reader_gather(rdr, NULL, gseg, (size_t)kv_bytes, a->seed + (uint64_t)k,
                                        &gsecs[k], gather_covered, err);
        if (!rc)
            rc = attn_time(b, pool, a->isa, a->prec, &secs[k], err);
        s = secs[k];
        if (pool1 && !rc) { /* the same round on one thread, after its own read pass */
            rsecs1[k] = ws_membw_reader_pass_on(rdr, pool1, a->read_bytes, NULL);
            if (gseg)
                rc = ws_membw_reader_gather(rdr, pool1, gseg, (size_t)kv_bytes,
                                            a->seed + (uint64_t)k, &gsecs1[k], NULL, err);
            if (!rc)
                rc = attn_time(b, pool1, a->isa, a->prec, &secs1[k], err);
            s1 = secs1[k];
        }
        if (r < 0 && !a->repeats) {
            const double n = WS_BENCH_AUTO_S / (ws_now_s() - t_round);
            R = n < WS_BENCH_AUTO_MIN   ? WS_BENCH_AUTO_MIN
                : n > WS_BENCH_AUTO_MAX ? WS_BENCH_AUTO_MAX
                                        : (int)n;
            R |= 1; /* odd: the median is one repeat's figure */
        }
        if (ws_now_s() - t_last > 2.0) {
            if (pool1)
                note(a, "repeat %d/%d (%.3f s; 1 thread %.3f s)", r + 1, R, s, s1);
            else
                note(a, "repeat %d/%d (%.3f s)", r + 1, R, s);
            t_last = ws_now_s();
        }
    }
    *R_io = R;
    return rc;
}

int ws_bench_attn_run(ws_pool *pool, const ws_bench_attn_cfg *a_in, ws_bench_attn *out,
                      ws_err *err)
{
    *out = (ws_bench_attn){0};
    ws_bench_attn_cfg ac = *a_in; /* the precision resolved (WS_PREC_AUTO) */
    const ws_bench_attn_cfg *a = &ac;
    ws_attn_bench_cfg cfg;
    int rc = ws_attn_prec_resolve(a_in->prec, &ac.prec, err);
    if (rc || (rc = ws_bench_attn_resolve(a, ws_pool_threads(pool), &cfg, err)))
        return rc;
    out->problem = cfg;
    note(a, "%s (%s): %d q heads / %d kv heads, d_k %d, d_v %d, %s, page %d, K %s, V %s",
         a->model->name, ws_attn_kind_name(a->model->attn), cfg.n_q_heads, cfg.kv.n_kv_heads,
         cfg.kv.d_k, cfg.kv.d_v, ws_dtype_name(cfg.kv.dtype), cfg.kv.page_tokens,
         ws_kv_k_layout_name(&cfg.kv), ws_kv_v_layout_name(&cfg.kv));
    const double per_tok =
        (double)cfg.kv.n_kv_heads * (cfg.kv.d_k + (cfg.kv.v_shares_k ? 0 : cfg.kv.d_v)) * 2.0;
    note(a, "filling %.2f GB of KV (batch %d x %d tokens, scattered pages)...",
         per_tok * cfg.batch * ceil((double)cfg.ctx / cfg.kv.page_tokens) * cfg.kv.page_tokens /
             1e9,
         cfg.batch, cfg.ctx);
    const double t0 = ws_now_s();
    ws_attn_bench *b = ws_attn_bench_create(&cfg, pool, err);
    if (!b)
        return err->code;
    note(a, "filled in %.1f s; read bandwidth over %.0f MiB...", ws_now_s() - t0,
         a->read_bytes / 1048576.0);
    out->used = ws_attn_cpu_path(&cfg.kv, cfg.n_q_heads, a->isa, a->prec);
    out->loop = ws_attn_cpu_loop_name(&cfg.kv, cfg.n_q_heads, a->isa, a->prec);
    out->precision = a->prec;
    out->p_bf16 = ws_attn_cpu_p_bf16(&cfg.kv, cfg.n_q_heads, a->isa, a->prec);
    if (out->used != a->isa)
        note(a, "this shape runs on the %s path (%s does not serve it)", ws_isa_name(out->used),
             ws_isa_name(a->isa));
    double pk = 0, pk1 = 0;
    ws_pool *pool1 = NULL; /* one thread, for scaling */
    ws_membw_reader *rdr = NULL;
    double *secs = NULL;
    const ws_attn_problem *p = ws_attn_bench_problem(b);
    const double kv_bytes = ws_attn_kv_bytes(p), flops = ws_attn_bench_flops(b);
    /* Repeats as asked, or (0) chosen by time on the warm-up round. */
    const int R_max = a->repeats ? a->repeats : WS_BENCH_AUTO_MAX;
    int R = R_max;
    /* Token lists: a gather pass over random rows of a K row's size, the same bytes as the
     * kernel reads, after each read pass (what the memory gives such rows, beside what it
     * gives a stream). */
    const size_t gseg = cfg.sparse == WS_SPARSE_TOKENS ? (size_t)cfg.kv.d_k * 2 : 0;
    size_t read_covered = 0, gather_covered = 0;
    if ((a->scaling && !(pool1 = ws_pool_create(1, err))) ||
        !(rdr = ws_membw_reader_create(pool, a->read_bytes, err)) ||
        /* the roofline's peak: the fastest instruction for this KV, whatever the loop uses */
        ws_cpu_roof_peak(pool, cfg.kv.dtype, &pk, &out->peak_instr, err) ||
        (pool1 && ws_cpu_roof_peak(pool1, cfg.kv.dtype, &pk1, NULL, err))) {
        rc = err->code ? err->code : WS_ENOMEM;
        goto out;
    }
    /* secs, rsecs, gsecs: T threads; secs1, rsecs1, gsecs1: one thread (scaling) */
    if (!(secs = malloc(sizeof(double) * 6 * (size_t)R_max))) {
        rc = ws_err_set(err, WS_ENOMEM, "bench: out of memory");
        goto out;
    }
    double *rsecs = secs + R_max, *secs1 = rsecs + R_max, *rsecs1 = secs1 + R_max,
           *gsecs = rsecs1 + R_max, *gsecs1 = gsecs + R_max;
    if ((rc = attn_rounds(pool, pool1, a, b, rdr, gseg, kv_bytes, &R, secs, rsecs, gsecs, secs1,
                          rsecs1, gsecs1, &read_covered, &gather_covered, err)))
        goto out;
    out->fig = ws_bench_attn_figures(ws_pool_threads(pool), secs, rsecs, gseg ? gsecs : NULL, R,
                                     read_covered, gather_covered, kv_bytes, flops, pk);
    if (a->scaling)
        out->fig1 = ws_bench_attn_figures(1, secs1, rsecs1, gseg ? gsecs1 : NULL, R, read_covered,
                                          gather_covered, kv_bytes, flops, pk1);
    out->repeats = R;
    out->kv_bytes = kv_bytes;
    out->flops = flops;
    out->gather_seg = gseg;
    out->alloc_bytes = ws_attn_bench_kv_alloc_bytes(b);
    out->nodes = ws_attn_bench_nodes(b);
out:
    free(secs);
    ws_membw_reader_destroy(rdr);
    ws_pool_destroy(pool1);
    ws_attn_bench_destroy(b);
    return rc;
}
