/* measure: the calibration sweeps (see measure.h). */
#include "measure.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "attn_cpu.h"
#include "cpu_features.h"
#include "experts.h"
#include "gemm_bf16.h"
#include "gemm_int8.h"
#include "half.h"
#include "kv_slab.h"
#include "measure_gpu.h"
#include "membw.h"
#include "model.h"
#include "pool.h"
#include "ws_util.h"

#define PAGE_TOKENS 256 /* P: the format's default page */
#define ROUNDS 41       /* attention sweeps: round-robin rounds (repeats per configuration) */
#define ROUNDS_QUICK 9  /* the same with --quick */
#define MAX_REPEATS ROUNDS
#define KV_SPARE_BYTES ((size_t)256 << 20) /* KV pool beyond the largest problem */
#define PROBE_BYTES ((size_t)128 << 20)    /* the reference probe: one read of this, evicted */
#define PROBE_PASSES 7                     /* fastest of this many passes a probe, */
#define PROBE_GAP_US                                                                               \
    15000 /* this far apart: a burst of load shorter than                                          \
           * ~100 ms from elsewhere does not move it */
#define PROBE_MAX 32

typedef struct ctx {
    const ws_calib_opts *o;
    ws_calib_run *run;
    ws_pool *pool, *pool1; /* all threads, one thread */
    ws_isa isa;
    int phase, n_phases; /* progress: phases of equal weight */
    /* One KV pool shared by every attention sweep, a slice per node of the pool: each
     * repeat is dealt the next pages of its nodes' slices (cold-cache rotation). */
    ws_kv_slab *kv;
    ws_err *err;
    /* The reference probe, timed at the start and after every phase: its times. */
    ws_membw_reader *probe;
    double probe_t[PROBE_MAX];
    int n_probe;
} ctx;

static int stopped(ctx *c)
{
    if (c->o->stop && *c->o->stop)
        return ws_err_set(c->err, WS_ECANCELED, "calibration interrupted; nothing was written");
    return 0;
}

/* Reports `what` at fraction `in_phase` of the current phase. */
static void progress(ctx *c, double in_phase, const char *what)
{
    if (c->o->progress)
        c->o->progress(c->o->progress_ctx,
                       fmin(1.0, (c->phase + fmin(1.0, in_phase)) / (double)c->n_phases), what);
}

/* The reference probe's time: the fastest of PROBE_PASSES reads of PROBE_BYTES, each
 * evicted first, PROBE_GAP_US apart. */
static double probe_time(ws_membw_reader *r)
{
    double best = INFINITY;
    for (int i = 0; i < PROBE_PASSES; i++) {
        if (i)
            usleep(PROBE_GAP_US);
        best = fmin(best, ws_membw_reader_pass(r, PROBE_BYTES, NULL));
    }
    return best;
}

static void probe(ctx *c)
{
    if (c->probe && c->n_probe < PROBE_MAX)
        c->probe_t[c->n_probe++] = probe_time(c->probe);
}

int ws_calib_probe(ws_pool *pool, int n, double *bw, ws_err *err)
{
    if (n < 1 || n > PROBE_MAX)
        return ws_err_set(err, WS_EINVAL, "probe: 1..%d probes, not %d", PROBE_MAX, n);
    ws_membw_reader *r = ws_membw_reader_create(pool, PROBE_BYTES, err);
    if (!r)
        return err ? err->code : WS_ENOMEM;
    double t[PROBE_MAX];
    for (int i = 0; i < n; i++)
        t[i] = probe_time(r);
    ws_membw_reader_destroy(r);
    *bw = PROBE_BYTES / ws_calib_estimate(t, n);
    return 0;
}

/* The probe's drift over the run: the median of its second half of times over the median of
 * its first half, less 1, in percent (either way); *dips gets the share of probes more than
 * WS_CALIB_DIP_PCT slower than the run's quiet speed, the protocol's estimate over all its
 * probes (the host loaded from elsewhere at that moment); one lucky fast probe moves that
 * estimate little, where it would move the fastest. */
static double probe_drift(const ctx *c, double *dips)
{
    const int n = c->n_probe, h = n / 2;
    double a[PROBE_MAX], b[PROBE_MAX];
    int slow = 0;
    memcpy(a, c->probe_t, sizeof(double) * (size_t)n);
    const double lo = n ? ws_calib_estimate(a, n) : INFINITY;
    for (int i = 0; i < n; i++)
        slow += c->probe_t[i] > lo * (1.0 + WS_CALIB_DIP_PCT / 100.0);
    *dips = n ? (double)slow / n : 0;
    if (h < 1)
        return 0;
    for (int i = 0; i < h; i++)
        a[i] = c->probe_t[i], b[i] = c->probe_t[n - h + i];
    const double r = ws_median_sort(b, h) / ws_median_sort(a, h);
    return 100.0 * fabs(r > 1 ? r - 1.0 : 1.0 / r - 1.0);
}

/* Ends a phase: the probe timed, and one progress line with what the phase measured, the
 * median spread of its samples (from sample `first` on) and the probe's latest time
 * against its first. */
static void phase_end(ctx *c, const char *name, int first)
{
    probe(c);
    double v[512];
    int n = 0;
    for (int i = first; i < c->run->n_samples && n < 512; i++)
        if (isfinite(c->run->samples[i].spread_pct))
            v[n++] = c->run->samples[i].spread_pct;
    char what[160], spread[32] = "";
    const double last = c->n_probe ? c->probe_t[c->n_probe - 1] : NAN;
    if (n)
        snprintf(spread, sizeof spread, "spread %.1f%%, ", ws_median_sort(v, n));
    snprintf(what, sizeof what, "done: %s: %sprobe %.1f GB/s (%+.1f%% of the first)", name, spread,
             PROBE_BYTES / last / 1e9, 100.0 * (c->probe_t[0] / last - 1.0));
    progress(c, 1.0, what);
    c->phase++;
}

/* Adds a sample to the run (see ws_calib_add_timed). */
#define add(c, ...) ws_calib_add_timed((c)->run, (c)->err, __VA_ARGS__)

/* ---- host bandwidth and peak --------------------------------------------------------- */

static int measure_membw(ctx *c)
{
    const double GB = 1e9;
    const size_t mb = 1 << 20;
    /* Sizes over a 4x (quick) or 8x range up to 1 GiB (quick) or 2 GiB, one buffer, each pass
     * evicted from the caches before it is timed (membw.h): DRAM at every size, whatever the
     * machine reports of its caches. Timed in round-robin rounds: the fit t = c0 + B/W over
     * sizes whose samples share the host's moments gives W (with the sizes timed one after
     * another, drift during the sweep tilts the slope). At most a quarter of memory. */
    const ws_cpu_features *f = ws_cpu_features_get();
    const double fr_q[] = {0.25, 0.5, 1.0}, fr_d[] = {0.125, 0.25, 0.375, 0.5, 1.0};
    const double *fr = c->o->quick ? fr_q : fr_d;
    int n = c->o->quick ? 3 : 5, rounds = c->o->quick ? 7 : 11, reps = c->o->quick ? 3 : 5, rc;
    double top = (c->o->quick ? 1024.0 : 2048.0) * mb;
    if (f->mem_bytes > 0 && top > f->mem_bytes / 4)
        top = f->mem_bytes / 4;
    size_t sizes[5], covered[5];
    double t[5 * 11];
    for (int i = 0; i < n; i++)
        sizes[i] = (size_t)(fr[i] * top) / mb * mb;
    progress(c, 0.0, "read bandwidth");
    /* A triad pass after each round's reads: the triad's median shares the reads' minutes,
     * so the check of one against the other is not a check of the host's drift. */
    const size_t triad_bytes = 1536 * mb;
    double t3[11];
    size_t counted = 0;
    if ((rc = stopped(c)))
        return rc;
    ws_membw_reader *rdr = ws_membw_reader_create(c->pool, sizes[n - 1], c->err);
    ws_membw_triader *tr = rdr ? ws_membw_triader_create(c->pool, triad_bytes, c->err) : NULL;
    if (!tr) {
        ws_membw_reader_destroy(rdr);
        return c->err->code;
    }
    for (int k = 0; k < rounds && !(rc = stopped(c)); k++) { /* a Ctrl-C is seen per round */
        for (int i = 0; i < n; i++)
            t[(size_t)i * (size_t)rounds + (size_t)k] =
                ws_membw_reader_pass(rdr, sizes[i], &covered[i]);
        t3[k] = ws_membw_triader_pass(tr, &counted);
    }
    ws_membw_triader_destroy(tr);
    ws_membw_reader_destroy(rdr);
    if (rc)
        return rc;
    /* Read (the largest size) and triad of the same rounds against each other (membw.h): a
     * run where they disagree says so in its triad sample and in the run's note. */
    double ratio;
    const int agree =
        ws_membw_triad_check_rounds(t + (size_t)(n - 1) * (size_t)rounds, (double)covered[n - 1],
                                    t3, (double)counted, rounds, &ratio);
    for (int i = 0; i < n; i++) {
        double *ti = t + (size_t)i * (size_t)rounds;
        if ((rc = add(c, "cpu", "membw_read", "", "", 0, (double)covered[i], ti, rounds,
                      "{\"threads\": %d, \"repeats\": %d, \"stat\": \"median\", \"rounds\": "
                      "\"round-robin over %d sizes\", \"buffer_mib\": %zu, \"cache\": \"%s\"}",
                      ws_pool_threads(c->pool), rounds, n, sizes[n - 1] / mb, WS_MEMBW_METHOD)))
            return rc;
        double med = c->run->samples[c->run->n_samples - 1].t_median;
        if (covered[i] / med > c->run->read_bw)
            c->run->read_bw = covered[i] / med; /* the plateau, for deciding roofline sides */
    }
    progress(c, (double)n / (n + 3), "read bandwidth");
    /* Single measurements of the machine (not fitted): 1-thread read, peaks. */
    double gbps1, gf[2], one = 1.0;
    const char *instr = "";
    if ((rc = stopped(c)) || (rc = ws_membw_read(c->pool1, 1024 * mb, reps, &gbps1, c->err)) ||
        /* the roofline's peak, as `bench attn-cpu` takes it: the fastest instruction for
         * bf16 KV, whatever the kernel's loop uses */
        (rc = ws_cpu_roof_peak(c->pool, WS_DT_BF16, &gf[0], &instr, c->err)) ||
        (rc = ws_cpu_roof_peak(c->pool1, WS_DT_BF16, &gf[1], NULL, c->err)))
        return rc;
    c->run->read_bw_1t = gbps1 * GB;
    if (!agree) {
        size_t len = strlen(c->run->note);
        snprintf(c->run->note + len, sizeof c->run->note - len,
                 "%striad/read %.2f outside %.2f-%.2f: a DRAM figure is suspect", len ? "; " : "",
                 ratio, WS_MEMBW_TRIAD_READ_LO, WS_MEMBW_TRIAD_READ_HI);
    }
    double t1 = 1024.0 * mb / (gbps1 * GB);
    if ((rc = add(c, "cpu", "membw_read_1t", "", "", 0, 1024.0 * mb, &t1, 1,
                  "{\"threads\": 1, \"repeats\": %d, \"stat\": \"median\", \"buffer_mib\": "
                  "1024, \"cache\": \"%s\"}",
                  reps, WS_MEMBW_METHOD)) ||
        (rc = add(c, "cpu", "membw_triad", "", "", 0, (double)counted, t3, rounds,
                  "{\"threads\": %d, \"repeats\": %d, \"counting\": \"STREAM 3 x 8 B\", "
                  "\"buffer_mib\": 1536, \"cache\": \"%s\", \"triad_over_read\": %.3f, "
                  "\"check\": \"%s\"}",
                  ws_pool_threads(c->pool), rounds, WS_MEMBW_METHOD, ratio,
                  agree ? "agree" : "DISAGREE")))
        return rc;
    for (int k = 0; k < 2; k++) {
        c->run->peak_flops[k] = gf[k] * 1e9;
        /* Stored as the flops done in one second. */
        if ((rc = add(c, "cpu", k ? "peak_flops_1t" : "peak_flops", "bf16", "", gf[k] * 1e9, 0,
                      &one, 1, "{\"isa\": \"%s\", \"instr\": \"%s\", \"threads\": %d}",
                      ws_isa_name(c->isa), instr, k ? 1 : ws_pool_threads(c->pool))))
            return rc;
    }
    progress(c, 1.0, "triad and peak flop/s");
    return 0;
}

/* ---- CPU attention ----------------------------------------------------------------- */

/* Fills `bytes` at p with 16-bit values in +-[0.5, 1] (finite as bf16 and as fp16): random
 * words over the first 16 MB, then copies -- timing needs finite data, not fresh data. */
static void fill_kv(uint16_t *p, size_t bytes)
{
    uint64_t *w = (uint64_t *)p, x = 0x9e3779b97f4a7c15ull;
    size_t words = bytes / 8, seed = words < (2u << 20) ? words : (2u << 20);
    for (size_t i = 0; i < seed; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        w[i] = (x & 0x807f807f807f807full) | 0x3b003b003b003b00ull;
    }
    for (size_t i = seed; i < words; i += seed)
        memcpy(w + i, w, 8 * (words - i < seed ? words - i : seed));
}

/* A KV pool of about `bytes`, split evenly over the pool's NUMA nodes (a slice each, placed
 * on its node before the fill touches it), filled, and locked in memory when `pin`. */
static ws_kv_slab *alloc_kv(ctx *c, size_t bytes, int pin)
{
    const size_t align = 2u << 20;
    const int n = ws_pool_nodes(c->pool);
    size_t slice[WS_NUMA_MAX_NODES];
    for (int k = 0; k < n; k++)
        slice[k] = (bytes / (size_t)n + align - 1) / align * align;
    ws_kv_slab *kv = ws_kv_slab_create(c->pool, slice, c->err);
    for (int k = 0; kv && k < n; k++) {
        uint16_t *p = (uint16_t *)ws_kv_slab_slice(kv, k, NULL);
        fill_kv(p, slice[k]);
        if (pin && mlock(p, slice[k]) != 0) {
            ws_err_set(c->err, WS_EIO, "calib: cannot pin (mlock) %.0f MB of KV", bytes / 1e6);
            ws_kv_slab_destroy(kv); /* unmapping unlocks */
            return NULL;
        }
    }
    return kv;
}

/* Cuts the pool into pages of a layout, each node's slice in its own shuffled order, so
 * that a sequence's pages are scattered and consecutive repeats read different pages. */
static int kv_cut(ctx *c, const ws_kv_layout *kv)
{
    return ws_kv_slab_cut(c->kv, ws_kv_page_bytes(kv), 0x2545f4914f6cdd1dull, c->err);
}

typedef struct attn_shape {
    const char *model; /* shipped model the shape comes from */
    const char *kind;  /* gqa | mla | mla-sparse */
    ws_kv_layout kv;
    int n_q;
    float scale;
} attn_shape;

/* The model's attention shape as the CPU region stores it for path isa (V in token pairs
 * and K in tiles where the path multiplies them as stored, ws_attn_cpu_v_pairs and
 * ws_attn_cpu_k_tiles). */
static int shape_from_model(const char *name, ws_dtype dt, ws_isa isa, attn_shape *s, ws_err *err)
{
    char path[WS_PATH_MAX];
    ws_model m;
    int rc = ws_model_resolve(name, path, sizeof path, err);
    if (rc || (rc = ws_model_load(path, &m, err)))
        return rc;
    memset(s, 0, sizeof *s);
    s->model = name;
    s->kind = ws_attn_kind_name(m.attn);
    if ((rc = ws_model_attn_shape(&m, dt, PAGE_TOKENS, &s->kv, &s->n_q, &s->scale, err)))
        return rc;
    /* token lists are measured on MLA only, whose rows no list setting changes */
    s->kv.v_pairs = ws_attn_cpu_v_pairs(&s->kv, s->n_q, isa, 0);
    s->kv.k_tiles = ws_attn_cpu_k_tiles(&s->kv, s->n_q, isa, 0);
    return 0;
}

/* Pages to evict, one pool task each. */
typedef struct evict_job {
    const void **pages;
    size_t bytes;
} evict_job;

static void evict_task(void *ctx, int task, int thread)
{
    const evict_job *e = ctx;
    (void)thread;
    ws_membw_evict(e->pages[task], e->bytes);
}

/* Times one attention configuration: `batch` sequences of `ctx_tok` tokens (attending
 * `topk` selected tokens each when topk > 0), `reps` repeats each dealt the next pages of
 * the pool c->kv (cut for this shape; a page on the node the placement rule gives, and
 * the page tables say so), after one untimed warm-up call when `warm`; times into t[]. */
/* Work run untimed between a repeat's eviction and its timed call (NULL: none). */
typedef struct pre_step {
    void (*run)(void *ctx, ws_pool *pool);
    void *ctx;
} pre_step;

static int time_attn(ctx *c, const attn_shape *sh, ws_pool *pool, int ctx_tok, int batch, int topk,
                     int warm, int reps, const pre_step *pre, double *t, double *bytes,
                     double *flops)
{
    const int np = (ctx_tok + PAGE_TOKENS - 1) / PAGE_TOKENS, need = np * batch;
    const int multi = ws_kv_slab_nodes(c->kv) > 1;
    const void **tables = malloc(sizeof(void *) * (size_t)need);
    int *nodes = multi ? malloc(sizeof(int) * (size_t)need) : NULL;
    ws_attn_seq *seqs = calloc((size_t)batch, sizeof *seqs);
    int32_t *sel = topk ? malloc(sizeof(int32_t) * (size_t)topk * (size_t)batch) : NULL;
    size_t qn = (size_t)batch * (size_t)sh->n_q;
    float *q = malloc(sizeof(float) * qn * (size_t)sh->kv.d_k);
    float *o = malloc(sizeof(float) * qn * (size_t)sh->kv.d_v), *lse = malloc(sizeof(float) * qn);
    int rc = 0;
    if (!tables || (multi && !nodes) || !seqs || (topk && !sel) || !q || !o || !lse) {
        rc = ws_err_set(c->err, WS_ENOMEM, "calib: out of memory");
        goto out;
    }
    uint32_t x = 12345;
    for (size_t i = 0; i < qn * (size_t)sh->kv.d_k; i++) {
        x = x * 1664525u + 1013904223u;
        q[i] = (float)((x >> 9) & 0xffff) / 32768.0f - 1.0f;
    }
    /* Sparse: the newest 128 tokens (the window) and then 64-token blocks up to topk. */
    for (int s = 0; topk && s < batch; s++) {
        int32_t *ls = sel + (size_t)s * topk, n = 0;
        for (int i = 0; i < 128 && n < topk; i++)
            ls[n++] = ctx_tok - 1 - i;
        int nblocks = (ctx_tok - 128) / 64;
        for (int b = (int)(x % (uint32_t)nblocks); n < topk; b = (b + 37) % nblocks)
            for (int i = 0; i < 64 && n < topk; i++)
                ls[n++] = b * 64 + i;
        seqs[s].sel = ls;
        seqs[s].n_sel = topk;
    }
    ws_attn_problem p = {.kv = sh->kv,
                         .n_q_heads = sh->n_q,
                         .scale = sh->scale,
                         .n_seqs = batch,
                         .seqs = seqs,
                         .q = q,
                         .o = o,
                         .lse = lse};
    for (int r = warm ? -1 : 0; r < reps && !rc; r++) {
        if ((rc = ws_kv_slab_deal(c->kv, batch, np, PAGE_TOKENS, tables, nodes, c->err)))
            break;
        for (int s = 0; s < batch; s++) {
            seqs[s].pages = tables + s * np;
            seqs[s].page_nodes = nodes ? nodes + s * np : NULL;
            seqs[s].n_tokens = ctx_tok;
        }
        /* Cold cache, as in a decode step (every other layer's KV is read in between):
         * write back and evict the pages this repeat reads. The pool's threads do it, so
         * that they are busy right up to the timed call, as in a decode step: after a
         * long idle (the 1-thread sweep) a vCPU of the development host ran the next
         * call 25-30% slower, and the first configuration of each round fell off the
         * fit. */
        evict_job ej = {.pages = tables, .bytes = ws_kv_page_bytes(&sh->kv)};
        ws_pool_run(pool, need, evict_task, &ej);
        if (pre)
            pre->run(pre->ctx, pool);
        double t0 = ws_now_s();
        rc = ws_attn_cpu(&p, pool, c->isa, c->err);
        if (r >= 0)
            t[r] = ws_now_s() - t0;
    }
    *bytes = ws_attn_kv_bytes(&p);
    double attended = *bytes / ((double)sh->kv.n_kv_heads *
                                (sh->kv.d_k + (sh->kv.v_shares_k ? 0 : sh->kv.d_v)) * 2);
    /* Per attended token and query head: q.k (2 d_k) and p.v (2 d_v) flops. */
    *flops = attended * sh->n_q * 2.0 * (sh->kv.d_k + sh->kv.d_v);
out:
    free(tables);
    free(nodes);
    free(seqs);
    free(sel);
    free(q);
    free(o);
    free(lse);
    return rc;
}

int ws_calib_attn_probe(ws_pool *pool, const char *model, int reps, double *bw, ws_err *err)
{
    if (reps < 1 || reps > MAX_REPEATS)
        return ws_err_set(err, WS_EINVAL, "attention probe: 1..%d repeats, not %d", MAX_REPEATS,
                          reps);
    ctx c = {.pool = pool, .err = err};
    attn_shape sh;
    const int batch = WS_CALIB_ATTN_REF_BATCH, ctx_tok = WS_CALIB_ATTN_REF_CTX;
    int rc = ws_isa_resolve(WS_ISA_AUTO, &c.isa, err);
    if (rc || (rc = shape_from_model(model, WS_DT_BF16, c.isa, &sh, err)))
        return rc;
    if (!strcmp(sh.kind, "mla-sparse"))
        return ws_err_set(err, WS_EINVAL,
                          "attention probe: %s's attention is sparse; the sweep times no "
                          "reference shape for it",
                          model);
    /* the sweep's pool rotation, at the size of this problem */
    const size_t need = (size_t)batch * ws_kv_page_bytes(&sh.kv) *
                        (size_t)((ctx_tok + PAGE_TOKENS - 1) / PAGE_TOKENS);
    if (!(c.kv = alloc_kv(&c, need + KV_SPARE_BYTES, 0)))
        return err->code;
    double t[MAX_REPEATS], bytes, flops;
    if (!(rc = kv_cut(&c, &sh.kv)))
        rc = time_attn(&c, &sh, pool, ctx_tok, batch, 0, 1, reps, NULL, t, &bytes, &flops);
    ws_kv_slab_destroy(c.kv);
    if (!rc)
        *bw = bytes / ws_calib_estimate(t, reps);
    return rc;
}

/* One configuration of an attention sweep. */
typedef struct attn_cfg {
    const char *op; /* attn | attn_1t */
    int ctx, batch, topk;
    double t[MAX_REPEATS], bytes, flops;
} attn_cfg;

static int attn_sweep(ctx *c, const char *model, ws_dtype dt, int full)
{
    attn_shape sh;
    int rc = shape_from_model(model, dt, c->isa, &sh, c->err);
    if (rc || (rc = kv_cut(c, &sh.kv)))
        return rc;
    const int reps = c->o->quick ? ROUNDS_QUICK : ROUNDS;
    attn_cfg cfg[64];
    int n = 0;
    if (!strcmp(sh.kind, "mla-sparse")) {
        /* Sparse: the selected tokens (window + 64-token blocks) of long sequences. */
        const int sctx = c->o->quick ? 65536 : 131072;
        int batches_q[] = {1, 4, 16}, batches_d[] = {1, 2, 4, 8, 16};
        int *batches = c->o->quick ? batches_q : batches_d, nb = c->o->quick ? 3 : 5;
        int topks[] = {512, 1024, 2048};
        for (int bi = 0; bi < nb; bi++)
            for (int ki = 0; ki < 3; ki++)
                cfg[n++] =
                    (attn_cfg){.op = "attn", .ctx = sctx, .batch = batches[bi], .topk = topks[ki]};
    } else {
        /* Contexts of one layer from 1K to 1M tokens, batch 4 at every other size; the
         * shorter sweep (fp16, and quick) takes every other size. One thread at five; in
         * the full sweep batches 2 and 8 at two contexts each. */
        int ctx_d[] = {1024,  2048,   4096,   8192,   16384,  32768,
                       65536, 131072, 262144, 524288, 1048576};
        int ctx_q[] = {1024, 4096, 16384, 65536, 262144, 1048576};
        int *ctxs = !full || c->o->quick ? ctx_q : ctx_d;
        int n_ctx = !full || c->o->quick ? 6 : 11;
        for (int i = 0; i < n_ctx; i++) {
            cfg[n++] = (attn_cfg){.op = "attn", .ctx = ctxs[i], .batch = 1};
            if (i % 2 && ctxs[i] * 4 <= 1048576)
                cfg[n++] = (attn_cfg){.op = "attn", .ctx = ctxs[i], .batch = 4};
        }
        int ctx1[] = {2048, 8192, 65536, 262144, 1048576};
        for (int i = 0; full && i < 5; i++)
            cfg[n++] = (attn_cfg){.op = "attn_1t", .ctx = ctx1[i], .batch = 1};
        /* the batches the runtime runs a step's CPU half at (2, 8), at its contexts */
        const int rb[4][2] = {{2, 16384}, {2, 65536}, {8, 8192}, {8, 32768}};
        for (int i = 0; full && !c->o->quick && i < 4; i++)
            cfg[n++] = (attn_cfg){.op = "attn", .ctx = rb[i][1], .batch = rb[i][0]};
        /* the attention reference (calib.h) in every bf16 sweep; the full one has it */
        if (dt == WS_DT_BF16 && (!full || c->o->quick))
            cfg[n++] = (attn_cfg){
                .op = "attn", .ctx = WS_CALIB_ATTN_REF_CTX, .batch = WS_CALIB_ATTN_REF_BATCH};
    }
    /* Round robin: repeat r of every configuration before repeat r + 1 of any, so a burst
     * of load from elsewhere on the host lands on one repeat of many samples, and each
     * median stays clean. */
    char label[96];
    for (int r = 0; r < reps && !rc; r++)
        for (int k = 0; k < n && !rc; k++) {
            attn_cfg *f = &cfg[k];
            snprintf(label, sizeof label, "attn %s %s, round %d of %d", sh.kind, ws_dtype_name(dt),
                     r + 1, reps);
            progress(c, (r * n + k) / (double)(reps * n), label);
            if (!(rc = stopped(c)))
                rc = time_attn(c, &sh, strcmp(f->op, "attn") ? c->pool1 : c->pool, f->ctx, f->batch,
                               f->topk, r == 0, 1, NULL, &f->t[r], &f->bytes, &f->flops);
        }
    /* The path that served the shape (amx hands fp16 to avx512) and how K and V were stored. */
    const char *path = ws_isa_name(ws_attn_cpu_path(&sh.kv, sh.n_q, c->isa, WS_PREC_AUTO));
    const char *v_layout = ws_kv_v_layout_name(&sh.kv), *k_layout = ws_kv_k_layout_name(&sh.kv);
    for (int k = 0; k < n && !rc; k++) {
        attn_cfg *f = &cfg[k];
        int threads = strcmp(f->op, "attn") ? 1 : ws_pool_threads(c->pool);
        if (f->topk)
            rc = add(c, "cpu", f->op, ws_dtype_name(dt), sh.kind, f->flops, f->bytes, f->t, reps,
                     "{\"model\": \"%s\", \"ctx\": %d, \"batch\": %d, \"topk\": %d, "
                     "\"blocks\": 64, \"threads\": %d, \"isa\": \"%s\", \"path\": \"%s\", "
                     "\"k_layout\": \"%s\", \"v_layout\": \"%s\"}",
                     model, f->ctx, f->batch, f->topk, threads, ws_isa_name(c->isa), path, k_layout,
                     v_layout);
        else
            rc = add(c, "cpu", f->op, ws_dtype_name(dt), sh.kind, f->flops, f->bytes, f->t, reps,
                     "{\"model\": \"%s\", \"ctx\": %d, \"batch\": %d, \"threads\": %d, "
                     "\"isa\": \"%s\", \"path\": \"%s\", \"k_layout\": \"%s\", "
                     "\"v_layout\": \"%s\"}",
                     model, f->ctx, f->batch, threads, ws_isa_name(c->isa), path, k_layout,
                     v_layout);
    }
    return rc;
}

/* Attention over pinned (page-locked) vs pageable memory, same shape and sizes. Without a
 * CUDA device the pinning is mlock(); with one the driver would pin the same way for the
 * CPU's reads (page-locked, cached), so the comparison holds. */
static int pinned_vs_pageable(ctx *c)
{
    attn_shape sh;
    int rc = shape_from_model("qwen3-30b-a3b", WS_DT_BF16, c->isa, &sh, c->err);
    if (rc)
        return rc;
    const int ctx_tok = 65536, reps = c->o->quick ? 3 : 5;
    size_t bytes_pool = KV_SPARE_BYTES + (size_t)ctx_tok * 2048 * 2;
    for (int pin = 0; pin < 2 && !rc; pin++) {
        progress(c, pin * 0.5,
                 pin ? "attention over pinned memory" : "attention over pageable memory");
        if (!(c->kv = alloc_kv(c, bytes_pool, pin)))
            return c->err->code;
        double t[MAX_REPEATS], bytes, flops;
        if (!(rc = kv_cut(c, &sh.kv)))
            rc = time_attn(c, &sh, c->pool, ctx_tok, 1, 0, 1, reps, NULL, t, &bytes, &flops);
        if (!rc)
            rc = add(c, "cpu", "pinned_cmp", "bf16", "gqa", flops, bytes, t, reps,
                     "{\"model\": \"qwen3-30b-a3b\", \"ctx\": %d, \"memory\": \"%s\", "
                     "\"pinning\": \"mlock\"}",
                     ctx_tok, pin ? "pinned" : "pageable");
        ws_kv_slab_destroy(c->kv); /* unmapping unlocks */
        c->kv = NULL;
    }
    return rc;
}

/* Attention right after a MoE phase vs alone. A decode step runs each layer's CPU
 * attention right after the previous layer's routed experts, which stream a few hundred MB
 * of weights through the same cores and caches; on the development VM that made the next
 * attention call 25-30% slower than the same call after a plain eviction
 * (docs/notes/runtime-engine.md). This times Qwen3-30B-A3B's GQA shape over 4 x 16K tokens
 * (the CPU share of a 4 x 32K batch) both ways in alternation, the MoE phase being the
 * runtime's: one expert per pool task, 28 distinct experts (one decode step of batch 4 at
 * top-8, 264 MB of bf16 weights), one token each. The factor t(after) / t(alone) is the
 * cost model's (cpu.attn_after_moe_factor.gqa.bf16). */
#define MOE_CMP_EXPERTS 28

typedef struct moe_phase {
    ws_expert_bf16 ex[MOE_CMP_EXPERTS];
    const float *x;
    float *y; /* one row of H per pool thread */
    int threads;
} moe_phase;

static void moe_task(void *ctx, int task, int thread)
{
    moe_phase *m = ctx;
    ws_err err = {0};
    const int h = m->ex[task].hidden;
    /* a failure shows in the timing only; the expert sweep checks the GEMM itself */
    (void)ws_expert_ffn_bf16(&m->ex[task], m->x, m->y + (size_t)(thread % m->threads) * h, 1, 1,
                             &err);
}

static void moe_run(void *ctx, ws_pool *pool)
{
    ws_pool_run(pool, MOE_CMP_EXPERTS, moe_task, ctx);
}

/* The MoE phase's experts: MOE_CMP_EXPERTS bf16 experts of m's shape on huge pages (*w, to
 * free with *x and *y), a token x and one output row per thread of `threads`. */
static int moe_phase_alloc(ctx *c, const ws_model *m, int threads, moe_phase *mp, uint16_t **w,
                           float **x, float **y, size_t *w_bytes)
{
    const int H = m->hidden, I = m->moe_intermediate;
    const size_t wn = (size_t)3 * H * I, huge = (size_t)2 << 20;
    const size_t wb = (sizeof(uint16_t) * wn * MOE_CMP_EXPERTS + huge - 1) / huge * huge;
    *w = aligned_alloc(huge, wb);
    *x = malloc(sizeof(float) * (size_t)H);
    *y = malloc(sizeof(float) * (size_t)H * threads);
    if (!*w || !*x || !*y)
        return ws_err_set(c->err, WS_ENOMEM, "calib: cannot allocate the MoE phase's experts");
    madvise(*w, wb, MADV_HUGEPAGE);
    for (size_t i = 0; i < wn * MOE_CMP_EXPERTS; i++)
        (*w)[i] = ws_f32_to_bf16((float)((i * 2654435761u) % 1000) * 1e-4f - 0.05f);
    for (int i = 0; i < H; i++)
        (*x)[i] = (float)(i % 17) * 0.01f - 0.08f;
    *mp = (moe_phase){.x = *x, .y = *y, .threads = threads};
    for (int e = 0; e < MOE_CMP_EXPERTS; e++) {
        const uint16_t *we = *w + wn * (size_t)e;
        mp->ex[e] = (ws_expert_bf16){H, I, we, we + (size_t)H * 2 * I};
    }
    *w_bytes = sizeof(uint16_t) * (double)wn * MOE_CMP_EXPERTS;
    return 0;
}

static int moe_vs_alone(ctx *c)
{
    attn_shape sh;
    char path[WS_PATH_MAX];
    ws_model m;
    int rc = shape_from_model("qwen3-30b-a3b", WS_DT_BF16, c->isa, &sh, c->err);
    if (!rc && !(rc = ws_model_resolve("qwen3-30b-a3b", path, sizeof path, c->err)))
        rc = ws_model_load(path, &m, c->err);
    if (rc)
        return rc;
    const int ctx_tok = 16384, batch = 4, reps = c->o->quick ? 5 : 9;
    uint16_t *w = NULL;
    float *x = NULL, *y = NULL;
    size_t wbytes = 0;
    moe_phase mp;
    if ((rc = moe_phase_alloc(c, &m, ws_pool_threads(c->pool), &mp, &w, &x, &y, &wbytes)))
        goto out;
    const size_t bytes_pool = KV_SPARE_BYTES + (size_t)ctx_tok * batch * 2048;
    if (!(c->kv = alloc_kv(c, bytes_pool, 0))) {
        rc = c->err->code;
        goto out;
    }
    const pre_step pre = {moe_run, &mp};
    rc = kv_cut(c, &sh.kv);
    double t[2][MAX_REPEATS], bytes = 0, flops = 0;
    for (int r = 0; r < reps && !rc; r++)
        for (int k = 0; k < 2 && !rc; k++) {
            progress(c, (2 * r + k) / (double)(2 * reps),
                     k ? "attention right after a MoE phase" : "attention alone");
            if (!(rc = stopped(c)))
                rc = time_attn(c, &sh, c->pool, ctx_tok, batch, 0, r == 0, 1, k ? &pre : NULL,
                               &t[k][r], &bytes, &flops);
        }
    for (int k = 0; k < 2 && !rc; k++)
        rc = add(c, "cpu", "moe_cmp", "bf16", "gqa", flops, bytes, t[k], reps,
                 "{\"model\": \"qwen3-30b-a3b\", \"ctx\": %d, \"batch\": %d, \"phase\": \"%s\", "
                 "\"experts\": %d, \"expert_mb\": %.0f}",
                 ctx_tok, batch, k ? "after_moe" : "alone", MOE_CMP_EXPERTS, wbytes / 1e6);
    ws_kv_slab_destroy(c->kv);
    c->kv = NULL;
out:
    free(w);
    free(x);
    free(y);
    return rc;
}

/* The MoE phase with a host-memory copy running beside it. A GPU's H2D engine reads the
 * next layer's KV pages from host DRAM while the CPU's experts stream their weights from
 * it; without a GPU, one thread copying a buffer far larger than the caches stands in for
 * the DMA engine (a copy reads and writes, a DMA read only reads: the stand-in loads the
 * memory system at least as much). The experts run on every thread but one, the copy on
 * that one, in both arms, so the two arms differ only in the copy; alternated rounds. The
 * factor t(alone) / t(with copy) is the cost model's cpu.expert_copy_factor.moe.bf16. */
#define COPY_CMP_BYTES ((size_t)256 << 20)

typedef struct copy_loop {
    char *src, *dst;
    atomic_int stop;
} copy_loop;

static void *copy_thread(void *arg)
{
    copy_loop *cl = arg;
    while (!atomic_load(&cl->stop))
        memcpy(cl->dst, cl->src, COPY_CMP_BYTES);
    return NULL;
}

/* Starts the copy beside the timed arm (on: the "with copy" arm), else nothing. */
static int copy_start(ctx *c, copy_loop *cl, pthread_t *th, int on)
{
    atomic_store(&cl->stop, 0);
    if (on && pthread_create(th, NULL, copy_thread, cl))
        return ws_err_set(c->err, WS_EIO, "calib: cannot start the copy thread");
    return 0;
}

static void copy_stop(copy_loop *cl, pthread_t th, int on)
{
    if (on) {
        atomic_store(&cl->stop, 1);
        pthread_join(th, NULL);
    }
}

static int moe_vs_copy(ctx *c)
{
    const int threads = ws_pool_threads(c->pool) - 1;
    if (threads < 1) {
        progress(c, 1.0, "experts beside a copy: skipped (one thread: no core for the copy)");
        return 0;
    }
    char path[WS_PATH_MAX];
    ws_model m;
    int rc = ws_model_resolve("qwen3-30b-a3b", path, sizeof path, c->err);
    if (!rc)
        rc = ws_model_load(path, &m, c->err);
    if (rc)
        return rc;
    const int reps = c->o->quick ? 5 : 9;
    uint16_t *w = NULL;
    float *x = NULL, *y = NULL;
    size_t wbytes = 0;
    moe_phase mp;
    ws_pool *pool = NULL;
    copy_loop cl = {0};
    cl.src = aligned_alloc(4096, COPY_CMP_BYTES);
    cl.dst = aligned_alloc(4096, COPY_CMP_BYTES);
    if (!cl.src || !cl.dst) {
        rc = ws_err_set(c->err, WS_ENOMEM, "calib: cannot allocate the copy's buffers");
        goto out;
    }
    memset(cl.src, 1, COPY_CMP_BYTES);
    memset(cl.dst, 2, COPY_CMP_BYTES);
    if ((rc = moe_phase_alloc(c, &m, threads, &mp, &w, &x, &y, &wbytes)))
        goto out;
    if (!(pool = ws_pool_create(threads, c->err))) {
        rc = c->err->code;
        goto out;
    }
    moe_run(&mp, pool); /* untimed: first touch */
    double t[2][MAX_REPEATS];
    for (int r = 0; r < reps && !rc; r++)
        for (int k = 0; k < 2 && !rc; k++) {
            progress(c, (2 * r + k) / (double)(2 * reps),
                     k ? "experts beside a host-memory copy" : "experts alone");
            if ((rc = stopped(c)))
                break;
            pthread_t th;
            if ((rc = copy_start(c, &cl, &th, k)))
                break;
            const double t0 = ws_now_s();
            moe_run(&mp, pool);
            moe_run(&mp, pool);
            t[k][r] = (ws_now_s() - t0) / 2;
            copy_stop(&cl, th, k);
        }
    const double flops = 2.0 * MOE_CMP_EXPERTS * 6.0 * m.hidden * m.moe_intermediate;
    for (int k = 0; k < 2 && !rc; k++)
        rc = add(c, "cpu", "copy_cmp", "bf16", "moe", flops, (double)wbytes, t[k], reps,
                 "{\"model\": \"qwen3-30b-a3b\", \"phase\": \"%s\", \"experts\": %d, "
                 "\"expert_mb\": %.0f, \"threads\": %d, \"copy\": \"memcpy of %zu MiB on one "
                 "thread\"}",
                 k ? "with_copy" : "alone", MOE_CMP_EXPERTS, wbytes / 1e6, threads,
                 COPY_CMP_BYTES >> 20);
out:
    ws_pool_destroy(pool);
    free(cl.src);
    free(cl.dst);
    free(w);
    free(x);
    free(y);
    return rc;
}

/* CPU attention with a host-memory copy running beside it: what a decode step's CPU half
 * meets while the GPU's copy engine streams the next layer's spilled KV (the transferred
 * region) over PCIe from the same DRAM. Without a GPU, one thread copying a buffer far larger
 * than the caches stands in for the DMA engine, as in moe_vs_copy. Qwen3-30B-A3B's GQA shape
 * over 4 x 16K tokens on every thread but one, in both arms, the copy on that one;
 * alternated repeats. The factor t(alone) / t(with copy) is the cost model's
 * cpu.attn_copy_factor.gqa.bf16 (a share of the attention's bandwidth). */
static int attn_vs_copy(ctx *c)
{
    const int threads = ws_pool_threads(c->pool) - 1;
    if (threads < 1) {
        progress(c, 1.0, "attention beside a copy: skipped (one thread: no core for the copy)");
        return 0;
    }
    attn_shape sh;
    int rc = shape_from_model("qwen3-30b-a3b", WS_DT_BF16, c->isa, &sh, c->err);
    if (rc)
        return rc;
    const int ctx_tok = 16384, batch = 4, reps = c->o->quick ? 5 : 9;
    ws_pool *pool = NULL;
    copy_loop cl = {0};
    cl.src = aligned_alloc(4096, COPY_CMP_BYTES);
    cl.dst = aligned_alloc(4096, COPY_CMP_BYTES);
    if (!cl.src || !cl.dst) {
        rc = ws_err_set(c->err, WS_ENOMEM, "calib: cannot allocate the copy's buffers");
        goto out;
    }
    memset(cl.src, 1, COPY_CMP_BYTES);
    memset(cl.dst, 2, COPY_CMP_BYTES);
    if (!(pool = ws_pool_create(threads, c->err))) {
        rc = c->err->code;
        goto out;
    }
    if (!(c->kv = alloc_kv(c, KV_SPARE_BYTES + (size_t)ctx_tok * batch * 2048, 0))) {
        rc = c->err->code;
        goto out;
    }
    rc = kv_cut(c, &sh.kv);
    double t[2][MAX_REPEATS], bytes = 0, flops = 0;
    for (int r = 0; r < reps && !rc; r++)
        for (int k = 0; k < 2 && !rc; k++) {
            progress(c, (2 * r + k) / (double)(2 * reps),
                     k ? "attention beside a host-memory copy" : "attention, copy idle");
            if ((rc = stopped(c)))
                break;
            pthread_t th;
            if ((rc = copy_start(c, &cl, &th, k)))
                break;
            rc = time_attn(c, &sh, pool, ctx_tok, batch, 0, r == 0, 1, NULL, &t[k][r], &bytes,
                           &flops);
            copy_stop(&cl, th, k);
        }
    for (int k = 0; k < 2 && !rc; k++)
        rc = add(c, "cpu", "copy_cmp", "bf16", "gqa", flops, bytes, t[k], reps,
                 "{\"model\": \"qwen3-30b-a3b\", \"ctx\": %d, \"batch\": %d, \"phase\": \"%s\", "
                 "\"threads\": %d, \"copy\": \"memcpy of %zu MiB on one thread\"}",
                 ctx_tok, batch, k ? "with_copy" : "alone", threads, COPY_CMP_BYTES >> 20);
out:
    ws_kv_slab_destroy(c->kv);
    c->kv = NULL;
    ws_pool_destroy(pool);
    free(cl.src);
    free(cl.dst);
    return rc;
}

/* ---- CPU expert GEMM ---------------------------------------------------------------- */

/* The runtime's routed-expert phase at the shipped models' expert shapes, once per weight
 * format the runtime runs: bf16 (gemm_bf16.h: fp32 activations, the backend its probe picks
 * for the shape) and int8 (gemm_int8.h: oneDNN's int8 matmul on the instructions it picks).
 * Each timed call is what a decode step runs (ws_experts_run_bf16): a phase of E distinct
 * experts of the shape, one pool task each, every task a single-threaded FFN over its m
 * tokens, all E experts' weights evicted from every cache just before (a step streams them
 * from DRAM); x stays warm, as it does in a step. A sample is one expert's share of the phase
 * (its time / E) at m = 1..512 tokens, so the fit's c0 is the per-expert cost the cost
 * model charges per expert hit. E is what about 256 MB of the shape's weights hold, at least
 * two per thread and at most 16 (Qwen3-30B-A3B 16, DeepSeek-V2-Lite 14, Mixtral 4).
 * Configurations are timed in round-robin rounds (drift is shared, not tilted into the fit)
 * after one untimed round (the backend probe, oneDNN's primitive creation). The instruction
 * family each ran on goes into its samples' params (and from there into the fit's note).
 * The int8 weights are a fixed pattern within the kernel's qmax: the time does not depend on
 * the values. With --quick the int8 sweep leaves Mixtral out and takes 7 rounds. */
#define EXPERT_MODELS 3
#define EXPERT_TOKS 10
#define EXPERT_PHASE_MAX 16
#define EXPERT_PHASE_BYTES ((size_t)256 << 20)

/* The instruction family of the bf16 FFN's backend. */
static const char *bf16_family(const char *backend)
{
    if (strcmp(backend, "onednn"))
        return "fp32";                    /* OpenBLAS sgemm or sbgemm */
    const char *isa = ws_gemm_int8_isa(); /* oneDNN's, the same for every data type */
    return !strcmp(isa, "avx512_core_amx")    ? "amx_bf16"
           : !strcmp(isa, "avx512_core_bf16") ? "avx512_bf16"
                                              : "fp32";
}

/* One shape's phase: E experts' weights (one allocation, huge pages), their descriptors. */
typedef struct expert_set {
    int H, I, E;
    size_t one; /* bytes of one expert */
    void *w;
    ws_expert_bf16 bf[EXPERT_PHASE_MAX];
    ws_expert_int8 q8[EXPERT_PHASE_MAX];
    const ws_expert_bf16 *pbf[EXPERT_PHASE_MAX];
    const ws_expert_int8 *pq8[EXPERT_PHASE_MAX];
} expert_set;

static int expert_set_alloc(ctx *c, const char *model, int int8, expert_set *s)
{
    char path[WS_PATH_MAX];
    ws_model m;
    int rc = ws_model_resolve(model, path, sizeof path, c->err);
    if (rc || (rc = ws_model_load(path, &m, c->err)))
        return rc;
    const int H = s->H = m.hidden, I = s->I = m.moe_intermediate, qmax = ws_gemm_int8_qmax();
    const size_t wn = (size_t)3 * H * I, huge = (size_t)2 << 20;
    s->one = int8 ? (ws_expert_int8_bytes(H, I) + 63) / 64 * 64 : sizeof(uint16_t) * wn;
    int e = (int)(EXPERT_PHASE_BYTES / s->one), lo = 2 * ws_pool_threads(c->pool);
    s->E = e < lo ? lo : e > EXPERT_PHASE_MAX ? EXPERT_PHASE_MAX : e;
    /* Huge pages (a hint), as the runtime's weights: with 4 KiB pages a wide expert
     * (Mixtral's 352 MB) streams at the TLB's pace, not DRAM's. */
    const size_t wb = (s->one * (size_t)s->E + huge - 1) / huge * huge;
    if (!(s->w = aligned_alloc(huge, wb)))
        return ws_err_set(c->err, WS_ENOMEM, "calib: cannot allocate %d experts of %s (%.0f MB)",
                          s->E, model, wb / 1e6);
    madvise(s->w, wb, MADV_HUGEPAGE);
    /* Weights of no meaning: int8 experts quantized (as the runtime loads them) from bf16
     * ones filled the same way, through one expert's bf16 buffer */
    uint16_t *tmp = int8 ? malloc(sizeof(uint16_t) * wn) : NULL;
    if (int8 && !tmp)
        return ws_err_set(c->err, WS_ENOMEM, "calib: out of memory (int8 experts)");
    for (int x = 0; x < s->E && !rc; x++) {
        char *base = (char *)s->w + s->one * (size_t)x;
        uint16_t *b = int8 ? tmp : (uint16_t *)base;
        for (size_t i = 0; i < wn; i++)
            b[i] = ws_f32_to_bf16((float)(((i + (size_t)x) * 2654435761u) % 1000) * 1e-4f - 0.05f);
        const ws_expert_bf16 e = {H, I, b, b + (size_t)H * 2 * I};
        if (int8) {
            rc = ws_expert_int8_from_bf16(&e, qmax, base, &s->q8[x], c->err);
            s->pq8[x] = &s->q8[x];
        } else {
            s->bf[x] = e;
            s->pbf[x] = &s->bf[x];
        }
    }
    free(tmp);
    return rc;
}

static int expert_sweep(ctx *c, int int8)
{
    static const char *const models[EXPERT_MODELS] = {"qwen3-30b-a3b", "deepseek-v2-lite",
                                                      "mixtral-8x7b"};
    static const int toks[EXPERT_TOKS] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
    const int rounds = int8 ? (c->o->quick ? 7 : 15) : c->o->quick ? 9 : 15;
    const int n_models = int8 && c->o->quick ? 2 : EXPERT_MODELS, n_tok = EXPERT_TOKS;
    const int max_m = 512, threads = ws_pool_threads(c->pool), qmax = ws_gemm_int8_qmax();
    int rc = 0, off[EXPERT_PHASE_MAX + 1];
    size_t max_rows = 0;
    expert_set set[EXPERT_MODELS];
    memset(set, 0, sizeof set);
    for (int mi = 0; mi < n_models && !rc; mi++)
        if (!(rc = expert_set_alloc(c, models[mi], int8, &set[mi])) &&
            (size_t)set[mi].E * max_m * set[mi].H > max_rows)
            max_rows = (size_t)set[mi].E * max_m * set[mi].H;
    float *x = rc ? NULL : malloc(sizeof(float) * max_rows);
    float *y = rc ? NULL : malloc(sizeof(float) * max_rows);
    static double t[EXPERT_MODELS][EXPERT_TOKS][MAX_REPEATS];
    if (!rc && (!x || !y))
        rc = ws_err_set(c->err, WS_ENOMEM, "calib: cannot allocate expert activations");
    for (size_t i = 0; !rc && i < max_rows; i++)
        x[i] = (float)(i % 17) * 0.01f - 0.08f;
    const int n_cfg = n_models * n_tok;
    const char *dt = int8 ? "int8" : "bf16";
    for (int r = -1; r < rounds && !rc; r++)
        for (int k = 0; k < n_cfg && !rc; k++) {
            const int mi = k / n_tok, ti = k % n_tok, m = toks[ti];
            const expert_set *s = &set[mi];
            char label[112];
            snprintf(label, sizeof label, "expert GEMM %s %s, %d x %d tokens, round %d of %d", dt,
                     models[mi], s->E, m, r + 2, rounds + 1);
            progress(c, ((r + 1) * n_cfg + k) / (double)((rounds + 1) * n_cfg), label);
            for (int e = 0; e <= s->E; e++)
                off[e] = e * m;
            ws_membw_evict(s->w, s->one * (size_t)s->E);
            double t0 = ws_now_s();
            rc = int8 ? ws_experts_run_int8(c->pool, s->pq8, s->E, off, x, y, c->err)
                      : ws_experts_run_bf16(c->pool, s->pbf, s->E, off, x, y, c->err);
            if (r >= 0)
                t[mi][ti][r] = (ws_now_s() - t0) / s->E;
            if (!rc)
                rc = stopped(c);
        }
    for (int k = 0; k < n_cfg && !rc; k++) {
        const int mi = k / n_tok, ti = k % n_tok, m = toks[ti];
        const expert_set *s = &set[mi];
        double flops, bytes;
        if (int8) {
            char impl[140];
            ws_expert_int8_cost(s->H, s->I, m, &flops, &bytes);
            ws_gemm_int8_impl(s->H, s->I, m, impl, sizeof impl);
            rc = add(c, "cpu", "expert_gemm", dt, "", flops, bytes, t[mi][ti], rounds,
                     "{\"model\": \"%s\", \"tokens\": %d, \"experts\": %d, \"pool\": %d, "
                     "\"weights\": \"int8/%d\", \"impl\": \"%s\", \"isa\": \"%s\", "
                     "\"family\": \"%s\"}",
                     models[mi], m, s->E, threads, qmax, impl, ws_gemm_int8_isa(),
                     ws_gemm_int8_family(s->H, s->I, m));
        } else {
            const char *be = ws_gemm_bf16_backend_name(s->H, s->I, m, 1);
            ws_expert_bf16_cost(s->H, s->I, m, &flops, &bytes);
            rc = add(c, "cpu", "expert_gemm", dt, "", flops, bytes, t[mi][ti], rounds,
                     "{\"model\": \"%s\", \"tokens\": %d, \"hidden\": %d, \"inter\": %d, "
                     "\"experts\": %d, \"pool\": %d, \"backend\": \"%s\", \"family\": \"%s\"}",
                     models[mi], m, s->H, s->I, s->E, threads, be, bf16_family(be));
        }
    }
    for (int mi = 0; mi < n_models; mi++)
        free(set[mi].w);
    free(x), free(y);
    if (int8)
        ws_gemm_int8_release();
    return rc;
}

/* One pass over every sweep of the options into c->run, the probe timed between phases. */
static int measure_once(ctx *c)
{
    const ws_calib_opts *o = c->o;
    static const char *const models[] = {"qwen3-30b-a3b", "deepseek-v2-lite", "deepseek-v4-flash"};
    /* Phases: bandwidth, 3 kinds x bf16, 2 (quick) or 3 kinds x fp16, pinned, MoE, MoE
     * beside a copy, attention beside a copy, the expert GEMM in bf16 and in int8;
     * o->sweeps may keep the expert GEMMs alone. */
    const int experts_only = o->sweeps != 0;
    const int want[2] = {!experts_only || (o->sweeps & WS_CALIB_SWEEP_EXPERT_BF16),
                         !experts_only || (o->sweeps & WS_CALIB_SWEEP_EXPERT_INT8)};
    c->phase = 0;
    c->n_phases = (o->do_cpu ? (experts_only ? 0
                                : o->quick   ? 10
                                             : 11) +
                                   want[0] + want[1]
                             : 0) +
                  (o->do_gpu || o->do_link ? 2 : 0);
    int rc = 0, first = c->run->n_samples;
    probe(c);
    if (o->do_cpu && !experts_only) {
        rc = measure_membw(c);
        phase_end(c, "read bandwidth, triad, peak", first);
        /* One pool for every attention shape: the largest problem (1M tokens of GQA,
         * 2 GiB) plus spare pages to rotate through (each repeat's pages are evicted
         * before it, so no size here depends on the caches). */
        const size_t pool_bytes = (size_t)1048576 * 2048 + KV_SPARE_BYTES;
        if (!rc && !(c->kv = alloc_kv(c, pool_bytes, 0)))
            rc = c->err->code;
        for (int dt = 0; dt < 2 && !rc; dt++)
            for (int m = 0; m < 3 && !rc; m++) {
                /* fp16 (V100-era hosts) in a shorter sweep; quick skips fp16 sparse. */
                if (dt == 1 && m == 2 && o->quick)
                    continue;
                char name[96];
                snprintf(name, sizeof name, "attention %s %s", models[m], dt ? "fp16" : "bf16");
                first = c->run->n_samples;
                rc = attn_sweep(c, models[m], dt ? WS_DT_FP16 : WS_DT_BF16, dt == 0);
                phase_end(c, name, first);
            }
        ws_kv_slab_destroy(c->kv);
        c->kv = NULL;
        static const struct {
            int (*run)(ctx *);
            const char *name;
        } cmp[] = {{pinned_vs_pageable, "pinned vs pageable"},
                   {moe_vs_alone, "attention after the experts"},
                   {moe_vs_copy, "experts beside a copy"},
                   {attn_vs_copy, "attention beside a copy"}};
        for (int i = 0; i < 4 && !rc; i++) {
            first = c->run->n_samples;
            rc = cmp[i].run(c);
            phase_end(c, cmp[i].name, first);
        }
    }
    for (int int8 = 0; int8 < 2 && o->do_cpu && !rc; int8++) {
        if (!want[int8])
            continue;
        first = c->run->n_samples;
        rc = expert_sweep(c, int8);
        phase_end(c, int8 ? "expert GEMM int8" : "expert GEMM bf16", first);
    }
    if (!rc && (o->do_gpu || o->do_link))
        rc = ws_calib_measure_gpu(o, c->run, c->phase, c->n_phases, c->err);
    return rc;
}

int ws_calib_measure(const ws_calib_opts *o, ws_calib_run *run, ws_err *err)
{
    ctx c = {.o = o, .run = run, .err = err};
    int rc = ws_isa_resolve(WS_ISA_AUTO, &c.isa, err);
    if (rc)
        return rc;
    if (!(c.pool = ws_pool_create(o->threads, err)))
        return err->code;
    if (!(c.pool1 = ws_pool_create(1, err)) ||
        !(c.probe = ws_membw_reader_create(c.pool, PROBE_BYTES, err))) {
        ws_pool_destroy(c.pool1);
        ws_pool_destroy(c.pool);
        return err->code;
    }
    /* A run the probe finds drifting (or loaded from elsewhere most of the time) is measured
     * once more, from the start; if that one is too it is kept, flagged (calib.h). */
    char note[sizeof run->note], why[160] = "";
    snprintf(note, sizeof note, "%s", run->note);
    for (int attempt = 0; attempt < 2 && !rc; attempt++) {
        if (attempt) {
            char what[200];
            snprintf(what, sizeof what, "reference probe: %s; measuring again", why);
            progress(&c, 0.0, what);
            run->n_samples = 0;
            run->read_bw = run->read_bw_1t = run->gpu_bw = run->gpu_peak = 0;
            run->peak_flops[0] = run->peak_flops[1] = 0;
            snprintf(run->note, sizeof run->note, "%s", note);
            run->remeasured = 1;
        }
        c.n_probe = 0;
        rc = measure_once(&c);
        double dips;
        run->drift_pct = probe_drift(&c, &dips);
        if (c.n_probe) {
            double t[PROBE_MAX];
            memcpy(t, c.probe_t, sizeof(double) * (size_t)c.n_probe);
            run->probe_bw = PROBE_BYTES / ws_calib_estimate(t, c.n_probe);
        }
        const int drift = run->drift_pct > WS_CALIB_DRIFT_PCT, loaded = dips > WS_CALIB_DIP_SHARE;
        snprintf(why, sizeof why, "drift %.1f%%%s, %.0f%% of %d probes over %.0f%% slow%s",
                 run->drift_pct, drift ? " (> " WS_CALIB_STR(WS_CALIB_DRIFT_PCT) "%)" : "",
                 100 * dips, c.n_probe, WS_CALIB_DIP_PCT, loaded ? " (more than a quarter)" : "");
        run->flagged = !rc && (drift || loaded);
        if (!run->flagged)
            break;
    }
    if (!rc) {
        size_t len = strlen(run->note);
        snprintf(run->note + len, sizeof run->note - len, "%sreference probe: %s%s",
                 len ? "; " : "", why,
                 run->flagged ? "; FLAGGED in both attempts: no fit of this run is used" : "");
    }
    ws_membw_reader_destroy(c.probe);
    ws_pool_destroy(c.pool);
    ws_pool_destroy(c.pool1);
    if (!rc && o->progress)
        o->progress(o->progress_ctx, 1.0, "done");
    return rc;
}
