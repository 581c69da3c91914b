/* membw: see membw.h. The read probe and the peak loops are compiled per instruction path
 * with target pragmas and picked at run time, like the attention kernels. */
#include "membw.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "attn_cpu_amx.h"
#include "cpu_features.h"
#include "numa.h"
#include "ws_util.h"

#define SLICES_PER_THREAD 16 /* read/triad tasks per thread: dynamic balance */
#define HUGE_ALIGN (2u << 20)

static volatile float g_sink; /* keeps the reductions' results alive */

static void *big_alloc(size_t bytes)
{
    size_t n = (bytes + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN;
    void *p = aligned_alloc(HUGE_ALIGN, n);
    if (p)
        madvise(p, n, MADV_HUGEPAGE); /* a hint; refusal is fine */
    return p;
}

/* ---- eviction: what is timed starts in DRAM, whatever the caches hold ---- */

__attribute__((target("clflushopt"))) static void evict_opt(const void *p, size_t bytes)
{
    for (size_t o = 0; o < bytes; o += 64)
        _mm_clflushopt((char *)p + o);
}

static _Atomic unsigned long long g_evicted; /* bytes evicted, for ws_membw_evicted_bytes */

unsigned long long ws_membw_evicted_bytes(void)
{
    return g_evicted;
}

void ws_membw_evict(const void *p, size_t bytes)
{
    g_evicted += bytes;
    const char *c = (const char *)((uintptr_t)p & ~(uintptr_t)63);
    bytes += (size_t)((const char *)p - c);
    if (__builtin_cpu_supports("clflushopt"))
        evict_opt(c, bytes);
    else
        for (size_t o = 0; o < bytes; o += 64)
            _mm_clflush(c + o);
    _mm_mfence(); /* the flushes are done before anything after them is timed */
}

int ws_membw_triad_in_band(double ratio)
{
    return ratio >= WS_MEMBW_TRIAD_READ_LO && ratio <= WS_MEMBW_TRIAD_READ_HI;
}

int ws_membw_triad_check_rounds(const double *t_read, double read_bytes, const double *t_triad,
                                double triad_bytes, int rounds, double *ratio)
{
    double q[64];
    int n = rounds < 64 ? rounds : 64, m = 0;
    for (int k = 0; k < n; k++)
        if (t_read[k] > 0 && t_triad[k] > 0)
            q[m++] = (triad_bytes / t_triad[k]) / (read_bytes / t_read[k]);
    const double r = m ? ws_median_sort(q, m) : NAN;
    if (ratio)
        *ratio = r;
    return ws_membw_triad_in_band(r);
}

/* ---- gather: seeded random segments, as a sparse list's rows are read ---- */

/* One task's walk: n segments of seg bytes (a multiple of 64) at 64-byte aligned offsets
 * drawn uniformly from the first `lines` lines of the buffer (so a segment may start on any
 * line that leaves room for it), each prefetched `ahead` segments before it is read (the
 * hardware prefetcher cannot guess them; this is what the kernels' list prefetch does). */
typedef struct gather_walk {
    uint64_t rng;
    size_t n, seg, lines;
    int ahead;
    size_t ring[64]; /* offsets of the segments prefetched and not yet read */
} gather_walk;

#define GATHER_AHEAD_BYTES 8192 /* ~ what hides a memory latency at one core's rate */

static size_t gather_next(gather_walk *w)
{
    w->rng += 0x9e3779b97f4a7c15ull; /* splitmix64 */
    uint64_t z = w->rng;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (size_t)(((unsigned __int128)z * w->lines) >> 64) * 64;
}

/* The walk's loop around BODY, which reads line b (a byte offset) of the segment at x. */
#define GATHER_LOOP(BODY)                                                                          \
    do {                                                                                           \
        const size_t ahead = (size_t)w->ahead;                                                     \
        for (size_t k = 0; k < ahead; k++) {                                                       \
            w->ring[k] = gather_next(w);                                                           \
            for (size_t b = 0; b < w->seg; b += 64)                                                \
                _mm_prefetch(base + w->ring[k] + b, _MM_HINT_T1);                                  \
        }                                                                                          \
        for (size_t i = 0, slot = 0; i < w->n; i++) {                                              \
            const char *x = base + w->ring[slot];                                                  \
            if (i + ahead < w->n) { /* the segment `ahead` on takes this one's slot */             \
                const size_t nx = gather_next(w);                                                  \
                for (size_t b = 0; b < w->seg; b += 64)                                            \
                    _mm_prefetch(base + nx + b, _MM_HINT_T1);                                      \
                w->ring[slot] = nx;                                                                \
            }                                                                                      \
            slot = slot + 1 == ahead ? 0 : slot + 1;                                               \
            for (size_t b = 0; b < w->seg; b += 64) {                                              \
                BODY;                                                                              \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* ---- read reduction, per instruction path ---- */

#pragma GCC push_options
#pragma GCC target("avx512f")
static float read_avx512(const float *x, size_t n)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 64 <= n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(x + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(x + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(x + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(x + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}
static void triad_avx512(double *a, const double *b, const double *c, size_t n)
{
    const __m512d s = _mm512_set1_pd(3.0);
    for (size_t i = 0; i + 8 <= n; i += 8)
        _mm512_store_pd(a + i, _mm512_fmadd_pd(s, _mm512_load_pd(c + i), _mm512_load_pd(b + i)));
}
static float gather_avx512(const char *base, gather_walk *w)
{
    __m512 a = _mm512_setzero_ps();
    GATHER_LOOP(a = _mm512_add_ps(a, _mm512_load_ps((const float *)(x + b))));
    return _mm512_reduce_add_ps(a);
}
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2")
static float read_avx2(const float *x, size_t n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 32 <= n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(x + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(x + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(x + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(x + i + 24));
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    float v[8];
    _mm256_storeu_ps(v, s);
    return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}
static void triad_avx2(double *a, const double *b, const double *c, size_t n)
{
    const __m256d s = _mm256_set1_pd(3.0);
    for (size_t i = 0; i + 4 <= n; i += 4)
        _mm256_store_pd(a + i, _mm256_add_pd(_mm256_load_pd(b + i),
                                             _mm256_mul_pd(s, _mm256_load_pd(c + i))));
}
static float gather_avx2(const char *base, gather_walk *w)
{
    __m256 a = _mm256_setzero_ps(), c = a;
    GATHER_LOOP(a = _mm256_add_ps(a, _mm256_load_ps((const float *)(x + b)));
                c = _mm256_add_ps(c, _mm256_load_ps((const float *)(x + b + 32))));
    float v[8];
    _mm256_storeu_ps(v, _mm256_add_ps(a, c));
    return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}
#pragma GCC pop_options

static float read_sse2(const float *x, size_t n)
{
    __m128 a0 = _mm_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 16 <= n; i += 16) {
        a0 = _mm_add_ps(a0, _mm_load_ps(x + i));
        a1 = _mm_add_ps(a1, _mm_load_ps(x + i + 4));
        a2 = _mm_add_ps(a2, _mm_load_ps(x + i + 8));
        a3 = _mm_add_ps(a3, _mm_load_ps(x + i + 12));
    }
    float v[4];
    _mm_storeu_ps(v, _mm_add_ps(_mm_add_ps(a0, a1), _mm_add_ps(a2, a3)));
    return v[0] + v[1] + v[2] + v[3];
}
static void triad_sse2(double *a, const double *b, const double *c, size_t n)
{
    const __m128d s = _mm_set1_pd(3.0);
    for (size_t i = 0; i + 2 <= n; i += 2)
        _mm_store_pd(a + i, _mm_add_pd(_mm_load_pd(b + i), _mm_mul_pd(s, _mm_load_pd(c + i))));
}
static float gather_sse2(const char *base, gather_walk *w)
{
    __m128 a = _mm_setzero_ps(), c = a;
    GATHER_LOOP(for (int k = 0; k < 64; k += 32) {
        a = _mm_add_ps(a, _mm_load_ps((const float *)(x + b + k)));
        c = _mm_add_ps(c, _mm_load_ps((const float *)(x + b + k + 16)));
    });
    float v[4];
    _mm_storeu_ps(v, _mm_add_ps(a, c));
    return v[0] + v[1] + v[2] + v[3];
}

enum { BW_READ, BW_INIT, BW_EVICT };

typedef struct bw_job {
    float *buf;
    double *a, *b, *c;
    size_t slice; /* elements per task */
    int mode;     /* BW_READ, BW_INIT (first touch), BW_EVICT (flush the task's slice) */
    /* NUMA (NULL on one node; see node_tasks): task i belongs to node task_node[i], whose
     * tasks start at first[i]. The read buffer is one region per node, read by that node's
     * tasks, from element first[i] * cap_slice; the triad's slices are fixed, so a node's
     * run of them is its region. */
    int *task_node, *first;
    size_t cap_slice;
    float (*read)(const float *, size_t);
    void (*triad)(double *, const double *, const double *, size_t);
    float partial[WS_POOL_MAX_THREADS]; /* per-thread results, kept alive via g_sink */
} bw_job;

static void read_task(void *ctx, int task, int thread)
{
    bw_job *j = ctx;
    float *x = j->first ? j->buf + (size_t)j->first[task] * j->cap_slice +
                              (size_t)(task - j->first[task]) * j->slice
                        : j->buf + (size_t)task * j->slice;
    if (j->mode == BW_INIT) {
        for (size_t i = 0; i < j->slice; i++)
            x[i] = (float)(i & 7);
        return;
    }
    if (j->mode == BW_EVICT) {
        ws_membw_evict(x, j->slice * sizeof(float));
        return;
    }
    j->partial[thread] += j->read(x, j->slice);
}

/* Whole 4 KiB per task: the bytes a read of `bytes` actually covers. */
static size_t read_covered(size_t bytes, int tasks)
{
    return bytes / sizeof(float) / (size_t)tasks / 1024 * 1024 * (size_t)tasks * sizeof(float);
}

struct ws_membw_reader {
    ws_pool *pool;
    int tasks;
    size_t capacity; /* bytes the buffer holds */
    bw_job job;
    float (*gather)(const char *, gather_walk *);
    float gather_sink;
};

/* One untimed pass of `mode` over the first `bytes` of the buffer on `pool`. */
static void reader_untimed(ws_membw_reader *r, ws_pool *pool, size_t bytes, int mode)
{
    r->job.slice = read_covered(bytes, r->tasks) / sizeof(float) / (size_t)r->tasks;
    r->job.mode = mode;
    ws_pool_run_affine(pool, r->tasks, pool == r->pool ? r->job.task_node : NULL, read_task,
                       &r->job);
    r->job.mode = BW_READ;
}

/* Reads the first `bytes` of the buffer once on `pool`, after evicting them from every
 * cache level (untimed): returns the seconds of the read alone. */
static double reader_run(ws_membw_reader *r, ws_pool *pool, size_t bytes)
{
    reader_untimed(r, pool, bytes, BW_EVICT);
    r->job.slice = read_covered(bytes, r->tasks) / sizeof(float) / (size_t)r->tasks;
    const int *nodes = pool == r->pool ? r->job.task_node : NULL;
    double t0 = ws_now_s();
    ws_pool_run_affine(pool, r->tasks, nodes, read_task, &r->job);
    return ws_now_s() - t0;
}

typedef struct gather_job {
    const char *base;
    size_t lines, seg, per_task;
    uint64_t seed;
    float (*gather)(const char *, gather_walk *);
    float partial[WS_POOL_MAX_THREADS];
} gather_job;

static void gather_task(void *ctx, int task, int thread)
{
    gather_job *j = ctx;
    gather_walk w = {.rng = j->seed ^ 0x632be59bd9b4e019ull * (uint64_t)(task + 1),
                     .n = j->per_task,
                     .seg = j->seg,
                     .lines = j->lines};
    size_t ahead = GATHER_AHEAD_BYTES / j->seg;
    ahead = ahead < 1 ? 1 : ahead > 64 ? 64 : ahead;
    w.ahead = (int)(ahead < w.n ? ahead : w.n);
    j->partial[thread] += j->gather(j->base, &w);
}

/* On a pool over several NUMA nodes, the read and triad tasks by node: node k's threads
 * get SLICES_PER_THREAD tasks each, in a run of task numbers (tasks of threads on no known
 * node last): task_node[i] is task i's node (-1: none), first[i] the first task of its run.
 * Both NULL on one node; 0, or -1 out of memory. */
static int node_tasks(ws_pool *pool, int **task_node, int **first)
{
    const int nn = ws_pool_nodes(pool), T = ws_pool_threads(pool);
    *task_node = *first = NULL;
    if (nn <= 1)
        return 0;
    int per[WS_NUMA_MAX_NODES + 1] = {0}; /* threads per node, the last: unknown */
    for (int t = 0; t < T; t++) {
        int k = ws_pool_thread_node(pool, t);
        per[k >= 0 && k < nn ? k : nn]++;
    }
    *task_node = malloc(sizeof(int) * (size_t)T * SLICES_PER_THREAD);
    *first = malloc(sizeof(int) * (size_t)T * SLICES_PER_THREAD);
    if (!*task_node || !*first)
        return -1;
    for (int k = 0, i = 0; k <= nn; k++)
        for (int n = 0, f = i; n < per[k] * SLICES_PER_THREAD; n++, i++) {
            (*task_node)[i] = k < nn ? k : -1;
            (*first)[i] = f;
        }
    return 0;
}

/* Asks that each node's run of tasks, task_bytes each from base (task i at i x
 * task_bytes), lie on that node: a hint, before the first touch (a refusal is ignored). */
static void place_runs(ws_pool *pool, const int *task_node, const int *first, int tasks, char *base,
                       size_t task_bytes)
{
    for (int i = 0; task_node && i < tasks; i++)
        if (task_node[i] >= 0 && (i + 1 == tasks || first[i + 1] != first[i]))
            ws_numa_prefer(base + (size_t)first[i] * task_bytes,
                           (size_t)(i + 1 - first[i]) * task_bytes,
                           ws_pool_node_id(pool, task_node[i]), NULL);
}

/* The reader's read buffer by node: a region per node run (see bw_job). */
static int numa_split(ws_membw_reader *r)
{
    if (node_tasks(r->pool, &r->job.task_node, &r->job.first))
        return -1;
    r->job.cap_slice = r->capacity / sizeof(float) / (size_t)r->tasks;
    place_runs(r->pool, r->job.task_node, r->job.first, r->tasks, (char *)r->job.buf,
               r->job.cap_slice * sizeof(float));
    return 0;
}

ws_membw_reader *ws_membw_reader_create(ws_pool *pool, size_t bytes, ws_err *err)
{
    const ws_cpu_features *f = ws_cpu_features_get();
    const int T = ws_pool_threads(pool), tasks = T * SLICES_PER_THREAD;
    if (read_covered(bytes, tasks) == 0) {
        ws_err_set(err, WS_EINVAL, "read bandwidth: %zu bytes is too small for %d threads", bytes,
                   T);
        return NULL;
    }
    ws_membw_reader *r = calloc(1, sizeof *r);
    if (r)
        r->job.buf = big_alloc(read_covered(bytes, tasks));
    if (!r || !r->job.buf) {
        free(r);
        ws_err_set(err, WS_ENOMEM, "read bandwidth: cannot allocate %zu bytes", bytes);
        return NULL;
    }
    r->pool = pool, r->tasks = tasks, r->capacity = read_covered(bytes, tasks);
    r->job.read = f->avx512f ? read_avx512 : f->avx2 ? read_avx2 : read_sse2;
    r->gather = f->avx512f ? gather_avx512 : f->avx2 ? gather_avx2 : gather_sse2;
    if (numa_split(r)) {
        ws_membw_reader_destroy(r);
        ws_err_set(err, WS_ENOMEM, "read bandwidth: out of memory");
        return NULL;
    }
    reader_untimed(r, pool, r->capacity, BW_INIT); /* first touch, by the pool's threads */
    reader_run(r, pool, r->capacity);              /* warm-up */
    return r;
}

double ws_membw_reader_pass_on(ws_membw_reader *r, ws_pool *pool, size_t bytes,
                               size_t *covered_out)
{
    if (bytes > r->capacity)
        bytes = r->capacity;
    if (covered_out)
        *covered_out = read_covered(bytes, r->tasks);
    return reader_run(r, pool, bytes);
}

double ws_membw_reader_pass(ws_membw_reader *r, size_t bytes, size_t *covered_out)
{
    return ws_membw_reader_pass_on(r, r->pool, bytes, covered_out);
}

int ws_membw_reader_gather(ws_membw_reader *r, ws_pool *pool, size_t seg_bytes, size_t bytes,
                           uint64_t seed, double *sec_out, size_t *covered_out, ws_err *err)
{
    if (!pool)
        pool = r->pool;
    if (seg_bytes < 64 || seg_bytes % 64 || seg_bytes > r->capacity)
        return ws_err_set(err, WS_EINVAL,
                          "gather bandwidth: segments of %zu bytes (need a multiple of 64 up to "
                          "the %zu-byte buffer)",
                          seg_bytes, r->capacity);
    const int tasks = r->tasks;
    size_t per_task = bytes / seg_bytes / (size_t)tasks;
    per_task = per_task ? per_task : 1; /* at least a segment per task */
    gather_job j = {.base = (const char *)r->job.buf,
                    .lines = (r->capacity - seg_bytes) / 64 + 1,
                    .seg = seg_bytes,
                    .per_task = per_task,
                    .seed = seed,
                    .gather = r->gather};
    reader_untimed(r, r->pool, r->capacity, BW_EVICT); /* the rows start in DRAM */
    const double t0 = ws_now_s();
    ws_pool_run(pool, tasks, gather_task, &j);
    *sec_out = ws_now_s() - t0;
    if (covered_out)
        *covered_out = per_task * (size_t)tasks * seg_bytes;
    r->gather_sink += j.partial[0] * 0.0f;
    return 0;
}

void ws_membw_reader_destroy(ws_membw_reader *r)
{
    if (!r)
        return;
    g_sink += r->job.partial[0] * 0.0f + r->gather_sink;
    free(r->job.buf);
    free(r->job.task_node);
    free(r->job.first);
    free(r);
}

int ws_membw_read_sweep(ws_pool *pool, const size_t *bytes, int n, int rounds, double *t_out,
                        size_t *covered_out, ws_err *err)
{
    if (n < 1 || rounds < 1)
        return ws_err_set(err, WS_EINVAL, "read bandwidth: need at least one size and round");
    const int T = ws_pool_threads(pool);
    size_t max = 0;
    for (int i = 0; i < n; i++) {
        if (read_covered(bytes[i], T * SLICES_PER_THREAD) == 0)
            return ws_err_set(err, WS_EINVAL,
                              "read bandwidth: %zu bytes is too small for %d threads", bytes[i], T);
        max = bytes[i] > max ? bytes[i] : max;
    }
    ws_membw_reader *r = ws_membw_reader_create(pool, max, err);
    if (!r)
        return WS_ENOMEM; /* the sizes were checked: allocation is what can fail */
    for (int k = 0; k < rounds; k++)
        for (int i = 0; i < n; i++)
            t_out[(size_t)i * (size_t)rounds + (size_t)k] =
                ws_membw_reader_pass(r, bytes[i], covered_out ? &covered_out[i] : NULL);
    ws_membw_reader_destroy(r);
    return 0;
}

int ws_membw_read(ws_pool *pool, size_t bytes, int repeats, double *gbps_out, ws_err *err)
{
    if (repeats < 1)
        repeats = 1;
    double *t = malloc(sizeof(double) * (size_t)repeats);
    size_t covered;
    if (!t)
        return ws_err_set(err, WS_ENOMEM, "read bandwidth: out of memory");
    int rc = ws_membw_read_sweep(pool, &bytes, 1, repeats, t, &covered, err);
    if (rc == 0)
        *gbps_out = (double)covered / ws_median_sort(t, repeats) / 1e9;
    free(t);
    return rc;
}

static void triad_task(void *ctx, int task, int thread)
{
    bw_job *j = ctx;
    (void)thread;
    size_t o = (size_t)task * j->slice;
    double *a = j->a + o, *b = j->b + o, *c = j->c + o;
    if (j->mode == BW_EVICT) {
        ws_membw_evict(a, j->slice * sizeof(double));
        ws_membw_evict(b, j->slice * sizeof(double));
        ws_membw_evict(c, j->slice * sizeof(double));
        return;
    }
    if (j->mode == BW_INIT) {
        for (size_t i = 0; i < j->slice; i++) {
            a[i] = 0;
            b[i] = 1;
            c[i] = 2;
        }
        return;
    }
    j->triad(a, b, c, j->slice);
}

struct ws_membw_triader {
    ws_pool *pool;
    int tasks;
    size_t n; /* elements per array */
    bw_job job;
};

void ws_membw_triader_destroy(ws_membw_triader *t)
{
    if (!t)
        return;
    if (t->job.a)
        g_sink += (float)t->job.a[t->n / 2] * 0.0f;
    free(t->job.a);
    free(t->job.b);
    free(t->job.c);
    free(t->job.task_node);
    free(t->job.first);
    free(t);
}

ws_membw_triader *ws_membw_triader_create(ws_pool *pool, size_t bytes, ws_err *err)
{
    const int T = ws_pool_threads(pool), tasks = T * SLICES_PER_THREAD;
    size_t slice = bytes / 3 / sizeof(double) / (size_t)tasks / 512 * 512;
    if (slice == 0) {
        ws_err_set(err, WS_EINVAL, "triad: %zu bytes is too small for %d threads", bytes, T);
        return NULL;
    }
    ws_membw_triader *t = calloc(1, sizeof *t);
    if (!t) {
        ws_err_set(err, WS_ENOMEM, "triad: out of memory");
        return NULL;
    }
    bw_job *j = &t->job;
    const ws_cpu_features *f = ws_cpu_features_get();
    t->pool = pool, t->tasks = tasks, t->n = slice * (size_t)tasks;
    j->triad = f->avx512f ? triad_avx512 : f->avx2 ? triad_avx2 : triad_sse2;
    j->slice = slice;
    j->a = big_alloc(t->n * sizeof(double));
    j->b = big_alloc(t->n * sizeof(double));
    j->c = big_alloc(t->n * sizeof(double));
    if (!j->a || !j->b || !j->c || node_tasks(pool, &j->task_node, &j->first)) {
        ws_membw_triader_destroy(t);
        ws_err_set(err, WS_ENOMEM, "triad: cannot allocate %zu bytes", bytes);
        return NULL;
    }
    /* Each node's slices on it, first touched and run by its threads. */
    place_runs(pool, j->task_node, j->first, tasks, (char *)j->a, slice * sizeof(double));
    place_runs(pool, j->task_node, j->first, tasks, (char *)j->b, slice * sizeof(double));
    place_runs(pool, j->task_node, j->first, tasks, (char *)j->c, slice * sizeof(double));
    j->mode = BW_INIT;
    ws_pool_run_affine(pool, tasks, j->task_node, triad_task, j);
    j->mode = BW_READ;
    ws_pool_run_affine(pool, tasks, j->task_node, triad_task, j); /* warm-up */
    return t;
}

double ws_membw_triader_pass(ws_membw_triader *t, size_t *counted_out)
{
    bw_job *j = &t->job;
    /* the three arrays start in DRAM (a's dirty lines written back, untimed) */
    j->mode = BW_EVICT;
    ws_pool_run_affine(t->pool, t->tasks, j->task_node, triad_task, j);
    j->mode = BW_READ;
    const double t0 = ws_now_s();
    ws_pool_run_affine(t->pool, t->tasks, j->task_node, triad_task, j);
    const double sec = ws_now_s() - t0;
    if (counted_out)
        *counted_out = 3 * t->n * sizeof(double);
    return sec;
}

int ws_membw_triad(ws_pool *pool, size_t bytes, int repeats, double *gbps_out, ws_err *err)
{
    ws_err local = {0};
    if (!err)
        err = &local;
    if (repeats < 1)
        repeats = 1;
    ws_membw_triader *tr = ws_membw_triader_create(pool, bytes, err);
    if (!tr)
        return err->code;
    double *t = malloc(sizeof(double) * (size_t)repeats);
    if (!t) {
        ws_membw_triader_destroy(tr);
        return ws_err_set(err, WS_ENOMEM, "triad: out of memory");
    }
    size_t counted = 0;
    for (int r = 0; r < repeats; r++)
        t[r] = ws_membw_triader_pass(tr, &counted);
    *gbps_out = (double)counted / ws_median_sort(t, repeats) / 1e9;
    free(t);
    ws_membw_triader_destroy(tr);
    return 0;
}

/* ---- dot-product peak, per instruction path ---- */

#define PEAK_ITERS 200000 /* inner iterations per task */
#define PEAK_ACC 12       /* independent accumulators: covers FMA latency x ports */

#pragma GCC push_options
#pragma GCC target("avx512f")
static double peak_avx512(float *sink)
{
    __m512 acc[PEAK_ACC], x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-7f);
    for (int k = 0; k < PEAK_ACC; k++)
        acc[k] = _mm512_set1_ps((float)k);
    for (int i = 0; i < PEAK_ITERS; i++) {
#pragma GCC unroll 12
        for (int k = 0; k < PEAK_ACC; k++)
            acc[k] = _mm512_fmadd_ps(acc[k], x, y);
        __asm__ volatile("" : "+v"(x)); /* x stays opaque: no hoisting */
    }
    __m512 s = acc[0];
    for (int k = 1; k < PEAK_ACC; k++)
        s = _mm512_add_ps(s, acc[k]);
    *sink += _mm512_reduce_add_ps(s);
    return 2.0 * 16 * PEAK_ACC * (double)PEAK_ITERS;
}
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512bf16")
static double peak_avx512bf16(float *sink)
{
    __m512 acc[PEAK_ACC];
    __m512bh h = (__m512bh)_mm512_set1_epi16(0x3f80), l = (__m512bh)_mm512_set1_epi16(0x3380),
             k = (__m512bh)_mm512_set1_epi16(0x3f7f);
    for (int j = 0; j < PEAK_ACC; j++)
        acc[j] = _mm512_set1_ps((float)j);
    for (int i = 0; i < PEAK_ITERS; i++) {
#pragma GCC unroll 12
        for (int j = 0; j < PEAK_ACC; j++) {
            acc[j] = _mm512_dpbf16_ps(acc[j], h, k);
            acc[j] = _mm512_dpbf16_ps(acc[j], l, k);
        }
        __asm__ volatile("" : "+v"(k));
    }
    __m512 s = acc[0];
    for (int j = 1; j < PEAK_ACC; j++)
        s = _mm512_add_ps(s, acc[j]);
    *sink += _mm512_reduce_add_ps(s);
    return 2.0 * 32 * PEAK_ACC * (double)PEAK_ITERS; /* 32 useful MACs per hi+lo pair */
}
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
static double peak_avx2(float *sink)
{
    __m256 acc[PEAK_ACC], x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(1e-7f);
    for (int k = 0; k < PEAK_ACC; k++)
        acc[k] = _mm256_set1_ps((float)k);
    for (int i = 0; i < PEAK_ITERS; i++) {
#pragma GCC unroll 12
        for (int k = 0; k < PEAK_ACC; k++)
            acc[k] = _mm256_fmadd_ps(acc[k], x, y);
        __asm__ volatile("" : "+x"(x));
    }
    __m256 s = acc[0];
    for (int k = 1; k < PEAK_ACC; k++)
        s = _mm256_add_ps(s, acc[k]);
    float v[8];
    _mm256_storeu_ps(v, s);
    *sink += v[0];
    return 2.0 * 8 * PEAK_ACC * (double)PEAK_ITERS;
}
#pragma GCC pop_options

/* The scalar path's inner loops are plain C: so is its peak (what -O2 makes of it). */
static double peak_scalar(float *sink)
{
    float acc[PEAK_ACC], x = 0.999f, y = 1e-7f;
    for (int k = 0; k < PEAK_ACC; k++)
        acc[k] = (float)k;
    for (int i = 0; i < PEAK_ITERS; i++) {
        for (int k = 0; k < PEAK_ACC; k++)
            acc[k] = acc[k] * x + y;
        __asm__ volatile("" : "+x"(x));
    }
    float s = 0;
    for (int k = 0; k < PEAK_ACC; k++)
        s += acc[k];
    *sink += s;
    return 2.0 * PEAK_ACC * (double)PEAK_ITERS;
}

static double peak_amx(float *sink)
{
    (void)sink;
    return ws_attn_cpu_amx_peak_flops(PEAK_ITERS);
}

typedef struct peak_job {
    double (*fn)(float *sink);
    double flops[WS_POOL_MAX_THREADS];
    float sink[WS_POOL_MAX_THREADS]; /* per-thread results, kept alive via g_sink */
} peak_job;

static void peak_task(void *ctx, int task, int thread)
{
    peak_job *j = ctx;
    (void)task;
    j->flops[thread] += j->fn(&j->sink[thread]);
}

/* The peak of one instruction's probe on every thread of the pool, GFLOP/s. */
static int peak_run(ws_pool *pool, double (*fn)(float *), double *gflops_out, ws_err *err)
{
    peak_job *j = calloc(1, sizeof *j);
    if (!j)
        return ws_err_set(err, WS_ENOMEM, "peak flops: out of memory");
    j->fn = fn;
    const int T = ws_pool_threads(pool), tasks = 8 * T, repeats = 5;
    double t[5], flops = 0;
    ws_pool_run(pool, tasks, peak_task, j); /* warm-up (clocks, licence levels) */
    for (int r = 0; r < repeats; r++) {
        memset(j->flops, 0, sizeof j->flops);
        double t0 = ws_now_s();
        ws_pool_run(pool, tasks, peak_task, j);
        t[r] = ws_now_s() - t0;
        flops = 0;
        for (int i = 0; i < T; i++)
            flops += j->flops[i];
    }
    *gflops_out = flops / ws_median_sort(t, repeats) / 1e9;
    g_sink += j->sink[0] * 0.0f;
    free(j);
    return 0;
}

int ws_cpu_peak_gflops(ws_pool *pool, ws_isa isa, double *gflops_out, ws_err *err)
{
    ws_isa path;
    int rc = ws_isa_resolve(isa, &path, err);
    if (rc)
        return rc;
    return peak_run(pool,
                    path == WS_ISA_AMX           ? peak_amx
                    : path == WS_ISA_AVX512_BF16 ? peak_avx512bf16
                    : path == WS_ISA_AVX512      ? peak_avx512
                    : path == WS_ISA_AVX2        ? peak_avx2
                                                 : peak_scalar,
                    gflops_out, err);
}

int ws_cpu_roof_peak(ws_pool *pool, ws_dtype kv_dtype, double *gflops_out, const char **instr_out,
                     ws_err *err)
{
    /* Candidates the CPU has, with what their probe's count is of all the instruction's
     * products: the bf16 probes count the useful products of a hi + lo pair (half). */
    static const struct {
        ws_isa isa;
        int bf16_only;
        double (*fn)(float *);
        double all_over_counted;
        const char *name;
    } cand[] = {
        {WS_ISA_AMX, 1, peak_amx, 2.0, "tdpbf16ps"},
        {WS_ISA_AVX512_BF16, 1, peak_avx512bf16, 2.0, "vdpbf16ps"},
        {WS_ISA_AVX512, 0, peak_avx512, 1.0, "vfmadd231ps zmm"},
        {WS_ISA_AVX2, 0, peak_avx2, 1.0, "vfmadd231ps ymm"},
        {WS_ISA_SCALAR, 0, peak_scalar, 1.0, "scalar"},
    };
    double best = 0;
    const char *name = "scalar";
    int fma_done = 0; /* the widest FMA only */
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
        if (!ws_isa_supported(cand[i].isa) || (cand[i].bf16_only && kv_dtype != WS_DT_BF16) ||
            (!cand[i].bf16_only && fma_done))
            continue;
        double g = 0;
        int rc = peak_run(pool, cand[i].fn, &g, err);
        if (rc)
            return rc;
        g *= cand[i].all_over_counted;
        fma_done |= !cand[i].bf16_only;
        if (g > best)
            best = g, name = cand[i].name;
    }
    *gflops_out = best;
    if (instr_out)
        *instr_out = name;
    return 0;
}
