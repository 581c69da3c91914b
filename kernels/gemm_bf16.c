/* gemm_bf16: the bf16-weight expert FFN and its backends (see gemm_bf16.h). */
#include "gemm_bf16.h"

#include <cblas.h>
#include <dlfcn.h>
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dnnl_cache.h"
#include "half.h"
#include "ws_util.h"

/* ---- per-thread scratch -------------------------------------------------------------- */

/* Buffers grown on demand, one set per calling thread, 64-byte aligned, freed when the
 * thread exits (pthread key destructor: the engine's pool threads come and go). */
enum { S_XB, S_GU, S_HB, S_H, S_W, S_N }; /* x bf16, gate|up, h bf16, h fp32, panel */

typedef struct scratch {
    ws_abuf b[S_N];
} scratch;

static _Thread_local scratch *t_scr;
static pthread_key_t g_scr_key;
static pthread_once_t g_scr_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p)
{
    scratch *s = p;
    for (int i = 0; s && i < S_N; i++)
        ws_abuf_free(&s->b[i]);
    free(s);
}

static void scratch_key(void)
{
    pthread_key_create(&g_scr_key, scratch_free);
}

static void *grow(int which, size_t bytes, ws_err *err)
{
    if (!t_scr) {
        pthread_once(&g_scr_once, scratch_key);
        if ((t_scr = calloc(1, sizeof *t_scr)))
            pthread_setspecific(g_scr_key, t_scr);
    }
    if (!t_scr) {
        ws_err_set(err, WS_ENOMEM, "expert ffn: cannot allocate scratch");
        return NULL;
    }
    return ws_abuf_grow(&t_scr->b[which], bytes, "expert ffn", err);
}

static void set_threads(int threads)
{
    if (threads > 0)
        omp_set_num_threads(threads);
}

/* e^x for x in [-87, 87] (clamped), relative error ~2e-7: 2^n by the exponent bits times
 * a degree-6 polynomial on |f| <= ln2/2. No libm call, so a row's loop vectorises: with
 * glibc's scalar expf the SiLU of a decode step cost ~20% of the GEMMs' time at the
 * models' shapes, a per-token term the cost model does not carry. */
static inline float exp_fast(float x)
{
    x = __builtin_fmaxf(__builtin_fminf(x, 87.0f), -87.0f);
    /* |t| <= 125.6: floor(t + 0.5) by truncating a positive number. */
    const float t = x * 1.44269504f, n = (float)((int32_t)(t + 128.5f) - 128);
    const float f = (t - n) * 0.69314718f;
    const float p =
        1.0f +
        f * (1.0f + f * (0.5f + f * (1.0f / 6 + f * (1.0f / 24 + f * (1.0f / 120 + f / 720)))));
    union {
        int32_t i;
        float f;
    } sc = {.i = ((int32_t)n + 127) << 23};
    return p * sc.f;
}

/* One row: h[j] = silu(g[j]) * u[j], fp32 or bf16 out; the AVX-512 loop where the CPU has
 * it (exp_fast in 16 lanes), else exp_fast one element at a time. */
__attribute__((target("avx512f"))) static void silu_row_avx512(const float *g, const float *u,
                                                               int in, float *hf, uint16_t *hb)
{
    const __m512 lo = _mm512_set1_ps(-87.0f), hi = _mm512_set1_ps(87.0f);
    const __m512 one = _mm512_set1_ps(1.0f), l2e = _mm512_set1_ps(1.44269504f);
    const __m512 ln2 = _mm512_set1_ps(0.69314718f);
    int j = 0;
    for (; j + 16 <= in; j += 16) {
        __m512 gv = _mm512_loadu_ps(g + j);
        __m512 x = _mm512_min_ps(_mm512_max_ps(_mm512_sub_ps(_mm512_setzero_ps(), gv), lo), hi);
        __m512 t = _mm512_mul_ps(x, l2e);
        __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512 f = _mm512_mul_ps(_mm512_sub_ps(t, n), ln2);
        __m512 p = _mm512_set1_ps(1.0f / 720);
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 120));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 24));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 6));
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.5f));
        p = _mm512_fmadd_ps(p, f, one);
        p = _mm512_fmadd_ps(p, f, one);
        __m512i e =
            _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
        __m512 ex = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
        __m512 h = _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, ex)), _mm512_loadu_ps(u + j));
        if (hf) {
            _mm512_storeu_ps(hf + j, h);
        } else { /* round to nearest even; NaN cannot arise from finite inputs here */
            __m512i b = _mm512_castps_si512(h);
            __m512i odd = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
            b = _mm512_add_epi32(b, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
            _mm256_storeu_si256((__m256i *)(hb + j),
                                _mm512_cvtepi32_epi16(_mm512_srli_epi32(b, 16)));
        }
    }
    for (; j < in; j++) {
        float h = g[j] / (1.0f + exp_fast(-g[j])) * u[j];
        if (hf)
            hf[j] = h;
        else
            hb[j] = ws_f32_to_bf16(h);
    }
}

static void silu_row(const float *g, const float *u, int in, float *hf, uint16_t *hb)
{
    if (__builtin_cpu_supports("avx512f")) {
        silu_row_avx512(g, u, in, hf, hb);
        return;
    }
    for (int j = 0; j < in; j++) {
        float h = g[j] / (1.0f + exp_fast(-g[j])) * u[j];
        if (hf)
            hf[j] = h;
        else
            hb[j] = ws_f32_to_bf16(h);
    }
}

/* h[r][j] = silu(gu[r][j]) * gu[r][I + j] into hf (fp32) or hb (bf16), rows of stride I. */
static void silu_mul(const float *gu, int m, int in, float *hf, uint16_t *hb, int threads)
{
    const long n = (long)m * in;
#pragma omp parallel for num_threads(                                                              \
    threads > 0 ? threads : omp_get_max_threads()) if (n >= 32768) schedule(static)
    for (int r = 0; r < m; r++) {
        const float *row = gu + (size_t)r * 2 * in;
        silu_row(row, row + in, in, hf ? hf + (size_t)r * in : NULL,
                 hf ? NULL : hb + (size_t)r * in);
    }
}

void ws_expert_silu_mul(const float *gu, int m, int inter, float *h, int threads)
{
    silu_mul(gu, m, inter, h, NULL, threads);
}

static void to_bf16(const float *src, uint16_t *dst, long n, int threads)
{
#pragma omp parallel for num_threads(                                                              \
    threads > 0 ? threads : omp_get_max_threads()) if (n >= 65536) schedule(static)
    for (long i = 0; i < n; i++)
        dst[i] = ws_f32_to_bf16(src[i]);
}

/* ---- oneDNN ------------------------------------------------------------------------- */

/* A matmul [m x k] x [k x n] -> [m x n], bf16 x bf16 -> fp32; the weights stored [n x k]
 * (tag ba), each output's k inputs contiguous: oneDNN's first implementation. */
static dnnl_status_t mm_pd(dnnl_engine_t engine, dnnl_primitive_desc_t *pd, int m, int n, int k)
{
    dnnl_memory_desc_t s, w, d;
    dnnl_dims_t ds = {m, k}, dw = {k, n}, dd = {m, n};
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_status_t st;
    *pd = NULL;
    if (!(st = dnnl_memory_desc_init_by_tag(&s, 2, ds, dnnl_bf16, dnnl_ab)) &&
        !(st = dnnl_memory_desc_init_by_tag(&w, 2, dw, dnnl_bf16, dnnl_ba)) &&
        !(st = dnnl_memory_desc_init_by_tag(&d, 2, dd, dnnl_f32, dnnl_ab)) &&
        !(st = dnnl_matmul_desc_init(&md, &s, &w, NULL, &d)) &&
        !(st = dnnl_primitive_attr_create(&attr)) &&
        !(st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user)))
        st = dnnl_primitive_desc_create(pd, &md, attr, engine, NULL);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return st;
}

/* A calling thread's oneDNN state: a primitive cache with its stream. Threads get slots in
 * order of first use; past DNN_SLOTS they share them, under the slot's lock, which is
 * otherwise uncontended. */
#define DNN_SLOTS 32
typedef struct dnn_slot {
    pthread_mutex_t lock;
    ws_dnnl_cache cache;
} dnn_slot;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* slots, choices */
static dnn_slot g_slot[DNN_SLOTS];
static int g_n_slot;
static _Thread_local int t_slot = -1;

/* The calling thread's slot, locked; NULL when oneDNN is unavailable. */
static dnn_slot *slot_acquire(ws_err *err)
{
    if (!ws_dnnl_engine()) {
        ws_err_set(err, WS_EUNSUP, "oneDNN: no CPU engine");
        return NULL;
    }
    pthread_mutex_lock(&g_lock);
    if (t_slot < 0) {
        t_slot = g_n_slot % DNN_SLOTS;
        if (g_n_slot < DNN_SLOTS) {
            pthread_mutex_init(&g_slot[g_n_slot].lock, NULL);
            g_slot[g_n_slot].cache = (ws_dnnl_cache){.pd = mm_pd, .kind = "bf16"};
        }
        g_n_slot++;
    }
    dnn_slot *sl = &g_slot[t_slot];
    pthread_mutex_unlock(&g_lock);
    pthread_mutex_lock(&sl->lock);
    return sl;
}

static int ffn_onednn(const ws_expert_bf16 *e, const float *x, float *y, int m, int threads,
                      ws_err *err)
{
    const int hd = e->hidden, in = e->inter;
    uint16_t *xb = grow(S_XB, sizeof(uint16_t) * m * hd, err);
    float *gu = grow(S_GU, sizeof(float) * m * 2 * in, err);
    uint16_t *hb = grow(S_HB, sizeof(uint16_t) * m * in, err);
    if (!xb || !gu || !hb)
        return err ? err->code : WS_ENOMEM;
    set_threads(threads);
    to_bf16(x, xb, (long)m * hd, threads);
    dnn_slot *sl = slot_acquire(err);
    if (!sl)
        return err ? err->code : WS_EUNSUP;
    ws_dnnl_pair *d = ws_dnnl_cache_get(&sl->cache, m, hd, in, threads, err);
    int rc = d ? 0 : (err ? err->code : WS_EDEVICE);
    if (!rc)
        rc = ws_dnnl_mm_run(&d->gate_up, sl->cache.stream, xb, e->w_gate_up, gu, "matmul", err);
    if (!rc) {
        silu_mul(gu, m, in, NULL, hb, threads);
        rc = ws_dnnl_mm_run(&d->down, sl->cache.stream, hb, e->w_down, y, "matmul", err);
    }
    pthread_mutex_unlock(&sl->lock);
    return rc;
}

/* ---- OpenBLAS sbgemm (looked up at run time) ---------------------------------------- */

typedef void (*sbgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint,
                          blasint, blasint, float, const uint16_t *, blasint, const uint16_t *,
                          blasint, float, float *, blasint);

static sbgemm_fn g_sbgemm;
static pthread_once_t g_sbgemm_once = PTHREAD_ONCE_INIT;

static void sbgemm_look(void)
{
    void *p = dlsym(RTLD_DEFAULT, "cblas_sbgemm");
    memcpy(&g_sbgemm, &p, sizeof p);
}

static sbgemm_fn sbgemm_get(void)
{
    pthread_once(&g_sbgemm_once, sbgemm_look);
    return g_sbgemm;
}

/* The OpenBLAS backends run on the same OpenMP threads as oneDNN: each thread calls the
 * BLAS single-threaded on its share of the output columns. Two libraries' worker threads
 * on the same cores would each spin after their calls and stall the other's barriers for a
 * time slice (several ms against a 0.3 ms call: the probe then picked a 20x slower
 * backend). The BLAS's thread count is restored after the call. */
typedef void (*panel_fn)(int m, int n0, int nr, int n, int k, const void *a, const uint16_t *bt,
                         float *c, void *scratch);

static int by_panels(panel_fn fn, int m, int n, int k, const void *a, const uint16_t *bt, float *c,
                     int threads, int widen, ws_err *err)
{
    const int nt = threads > 0 ? threads : omp_get_max_threads();
    int rows = widen ? (int)(262144 / k) : (n + nt - 1) / nt;
    rows = rows < 8 ? 8 : rows > n ? n : rows;
    const int panels = (n + rows - 1) / rows, saved = openblas_get_num_threads();
    int failed = 0;
    openblas_set_num_threads(1);
#pragma omp parallel for num_threads(nt) schedule(dynamic)
    for (int p = 0; p < panels; p++) {
        float *w = widen ? grow(S_W, sizeof(float) * (size_t)rows * k, NULL) : NULL;
        if (widen && !w) {
            failed = 1;
            continue;
        }
        const int n0 = p * rows, nr = n - n0 < rows ? n - n0 : rows;
        fn(m, n0, nr, n, k, a, bt, c, w);
    }
    openblas_set_num_threads(saved);
    return failed ? ws_err_set(err, WS_ENOMEM, "expert ffn: cannot allocate a weight panel") : 0;
}

/* c[:, n0:n0+nr] = a[m x k] bt[n0:n0+nr, :]^T, bf16 x bf16 -> fp32 (sbgemm). */
static void panel_sb(int m, int n0, int nr, int n, int k, const void *a, const uint16_t *bt,
                     float *c, void *scratch)
{
    (void)scratch;
    sbgemm_get()(CblasRowMajor, CblasNoTrans, CblasTrans, m, nr, k, 1.0f, a, k, bt + (size_t)n0 * k,
                 k, 0.0f, c + n0, n);
}

/* The same with bt's rows widened to fp32 in scratch first (sgemm). */
static void panel_widen(int m, int n0, int nr, int n, int k, const void *a, const uint16_t *bt,
                        float *c, void *scratch)
{
    float *w = scratch;
    const uint16_t *src = bt + (size_t)n0 * k;
    for (long i = 0; i < (long)nr * k; i++)
        w[i] = ws_bf16_to_f32(src[i]);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, nr, k, 1.0f, a, k, w, k, 0.0f, c + n0,
                n);
}

static int ffn_sbgemm(const ws_expert_bf16 *e, const float *x, float *y, int m, int threads,
                      ws_err *err)
{
    if (!sbgemm_get())
        return ws_err_set(err, WS_EUNSUP, "the linked OpenBLAS has no cblas_sbgemm");
    const int hd = e->hidden, in = e->inter;
    uint16_t *xb = grow(S_XB, sizeof(uint16_t) * m * hd, err);
    float *gu = grow(S_GU, sizeof(float) * m * 2 * in, err);
    uint16_t *hb = grow(S_HB, sizeof(uint16_t) * m * in, err);
    if (!xb || !gu || !hb)
        return err ? err->code : WS_ENOMEM;
    to_bf16(x, xb, (long)m * hd, threads);
    int rc = by_panels(panel_sb, m, 2 * in, hd, xb, e->w_gate_up, gu, threads, 0, err);
    if (rc)
        return rc;
    silu_mul(gu, m, in, NULL, hb, threads);
    return by_panels(panel_sb, m, hd, in, hb, e->w_down, y, threads, 0, err);
}

/* Weights widened bf16 -> fp32 a panel of rows (about 1 MiB of fp32) at a time. */
static int ffn_fp32(const ws_expert_bf16 *e, const float *x, float *y, int m, int threads,
                    ws_err *err)
{
    const int hd = e->hidden, in = e->inter;
    float *gu = grow(S_GU, sizeof(float) * m * 2 * in, err);
    float *h = grow(S_H, sizeof(float) * m * in, err);
    if (!gu || !h)
        return err ? err->code : WS_ENOMEM;
    int rc = by_panels(panel_widen, m, 2 * in, hd, x, e->w_gate_up, gu, threads, 1, err);
    if (rc)
        return rc;
    silu_mul(gu, m, in, h, NULL, threads);
    return by_panels(panel_widen, m, hd, in, h, e->w_down, y, threads, 1, err);
}

/* ---- the table, the probe, the API -------------------------------------------------- */

typedef struct backend {
    const char *label;
    int (*ffn)(const ws_expert_bf16 *, const float *, float *, int, int, ws_err *);
} backend;

static const backend g_backends[WS_GEMM_BF16_N] = {
    [WS_GEMM_BF16_ONEDNN] = {"onednn", ffn_onednn},
    [WS_GEMM_BF16_SBGEMM] = {"sbgemm", ffn_sbgemm},
    [WS_GEMM_BF16_FP32] = {"fp32", ffn_fp32},
};

int ws_gemm_bf16_present(ws_gemm_bf16_backend b)
{
    switch (b) {
    case WS_GEMM_BF16_ONEDNN: return ws_dnnl_engine() != NULL;
    case WS_GEMM_BF16_SBGEMM: return sbgemm_get() != NULL;
    case WS_GEMM_BF16_FP32: return 1;
    default: return 0;
    }
}

const char *ws_gemm_bf16_label(ws_gemm_bf16_backend b)
{
    return b >= 0 && b < WS_GEMM_BF16_N ? g_backends[b].label : "auto";
}

int ws_expert_ffn_bf16_with(ws_gemm_bf16_backend b, const ws_expert_bf16 *e, const float *x,
                            float *y, int m, int threads, ws_err *err)
{
    if (!e || !x || !y || !e->w_gate_up || !e->w_down || m <= 0 || e->hidden <= 0 || e->inter <= 0)
        return ws_err_set(err, WS_EINVAL, "expert ffn: bad shape m %d H %d I %d or NULL operand", m,
                          e ? e->hidden : 0, e ? e->inter : 0);
    if (b == WS_GEMM_BF16_AUTO)
        return ws_expert_ffn_bf16(e, x, y, m, threads, err);
    if (b < 0 || b >= WS_GEMM_BF16_N)
        return ws_err_set(err, WS_EINVAL, "expert ffn: no backend %d", (int)b);
    if (b == WS_GEMM_BF16_ONEDNN && !ws_gemm_bf16_present(b))
        return ws_err_set(err, WS_EUNSUP, "oneDNN: no CPU engine");
    return g_backends[b].ffn(e, x, y, m, threads, err);
}

/* Shape classes: m rounded up to a power of two. */
typedef struct choice {
    int hidden, inter, threads, mclass;
    ws_gemm_bf16_backend b;
} choice;

#define MAX_CHOICES 256
static choice g_choice[MAX_CHOICES];
static int g_n_choice;

static int m_class(int m)
{
    int c = 0;
    while ((1 << c) < m && c < 30)
        c++;
    return c;
}

static ws_gemm_bf16_backend chosen(int hd, int in, int m, int threads)
{
    const int mc = m_class(m);
    ws_gemm_bf16_backend b = WS_GEMM_BF16_AUTO;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_n_choice; i++)
        if (g_choice[i].hidden == hd && g_choice[i].inter == in && g_choice[i].mclass == mc &&
            g_choice[i].threads == threads)
            b = g_choice[i].b;
    pthread_mutex_unlock(&g_lock);
    return b;
}

/* Writes back and drops the expert's weights from the caches, so the probe times what a
 * decode step sees: each expert it hits streamed from DRAM. Over 256 MiB the weights
 * outgrow any cache and a run evicts its own start. */
static void evict(const ws_expert_bf16 *e)
{
    const size_t n = (size_t)e->hidden * e->inter;
    if (6 * n > ((size_t)256 << 20))
        return;
    const struct {
        const char *p;
        size_t bytes;
    } parts[2] = {{(const char *)e->w_gate_up, 4 * n}, {(const char *)e->w_down, 2 * n}};
    for (int i = 0; i < 2; i++)
        for (size_t o = 0; o < parts[i].bytes; o += 64)
            _mm_clflush(parts[i].p + o);
    _mm_mfence();
}

/* Times every present backend on this call and records the fastest for the class: one
 * untimed run each, then up to seven rounds over the backends in turn (one when a run took
 * over 0.1 s), weights evicted before each run, each backend judged by its fastest run.
 * Load from elsewhere on the host only adds time, and rounds in turn keep one burst of it
 * from spoiling every run of one backend. The last run leaves a valid y. */
static int probe(const ws_expert_bf16 *e, const float *x, float *y, int m, int threads, ws_err *err)
{
    double best_t[WS_GEMM_BF16_N], slowest = 0;
    int present[WS_GEMM_BF16_N], rc = 0, last = -1;
    pthread_mutex_lock(&g_lock);
    const int first = g_n_choice == 0;
    pthread_mutex_unlock(&g_lock);
    for (int b = 0; b < WS_GEMM_BF16_N && !rc; b++) {
        best_t[b] = INFINITY;
        if (!(present[b] = ws_gemm_bf16_present((ws_gemm_bf16_backend)b)))
            continue;
        /* The first probe of a process warms each backend for 50 ms: the first calls
         * (thread start, JIT, first touch) ran up to 50x slow here for several calls. */
        double t0 = ws_now_s(), t;
        do {
            t = ws_now_s();
            rc = g_backends[b].ffn(e, x, y, m, threads, err);
        } while (!rc && first && ws_now_s() - t0 < 0.05);
        slowest = fmax(slowest, ws_now_s() - t);
    }
    const int rounds = slowest > 0.1 ? 1 : 7;
    for (int r = 0; r < rounds && !rc; r++)
        for (int b = 0; b < WS_GEMM_BF16_N && !rc; b++) {
            if (!present[b])
                continue;
            evict(e);
            double t0 = ws_now_s();
            rc = g_backends[b].ffn(e, x, y, m, threads, err);
            best_t[b] = fmin(best_t[b], ws_now_s() - t0);
            last = b;
        }
    if (rc)
        return rc;
    int best = last;
    for (int b = 0; b < WS_GEMM_BF16_N; b++)
        if (best_t[b] < best_t[best])
            best = b;
    pthread_mutex_lock(&g_lock);
    if (g_n_choice < MAX_CHOICES)
        g_choice[g_n_choice++] =
            (choice){e->hidden, e->inter, threads, m_class(m), (ws_gemm_bf16_backend)best};
    pthread_mutex_unlock(&g_lock);
    /* y must be the chosen backend's (they round differently). */
    return best == last ? 0 : g_backends[best].ffn(e, x, y, m, threads, err);
}

int ws_expert_ffn_bf16(const ws_expert_bf16 *e, const float *x, float *y, int m, int threads,
                       ws_err *err)
{
    if (!e || !x || !y || !e->w_gate_up || !e->w_down || m <= 0 || e->hidden <= 0 || e->inter <= 0)
        return ws_err_set(err, WS_EINVAL, "expert ffn: bad shape m %d H %d I %d or NULL operand", m,
                          e ? e->hidden : 0, e ? e->inter : 0);
    ws_gemm_bf16_backend b = chosen(e->hidden, e->inter, m, threads);
    if (b == WS_GEMM_BF16_AUTO)
        return probe(e, x, y, m, threads, err);
    return g_backends[b].ffn(e, x, y, m, threads, err);
}

const char *ws_gemm_bf16_backend_name(int hidden, int inter, int m, int threads)
{
    ws_gemm_bf16_backend b = chosen(hidden, inter, m, threads);
    return b == WS_GEMM_BF16_AUTO ? "unprobed" : g_backends[b].label;
}

void ws_gemm_bf16_release(void)
{
    pthread_mutex_lock(&g_lock);
    for (int k = 0; k < g_n_slot && k < DNN_SLOTS; k++) {
        dnn_slot *sl = &g_slot[k];
        pthread_mutex_lock(&sl->lock);
        ws_dnnl_cache_clear(&sl->cache);
        pthread_mutex_unlock(&sl->lock);
    }
    g_n_choice = 0;
    pthread_mutex_unlock(&g_lock);
    for (int i = 0; t_scr && i < S_N; i++)
        ws_abuf_free(&t_scr->b[i]);
}

void ws_expert_bf16_cost(int hidden, int inter, int m, double *flops, double *bytes)
{
    const double hd = hidden, in = inter, tok = m;
    *flops = 2.0 * tok * hd * in * 3.0 + 4.0 * tok * in; /* three GEMMs + silu/product */
    *bytes = 2.0 * 3.0 * hd * in + 4.0 * tok * (2.0 * hd + 4.0 * in);
}
