/* gemm_int8: the int8-weight expert FFN through oneDNN (see gemm_int8.h). */
#include "gemm_int8.h"

#include <math.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnnl_cache.h"
#include "half.h"
#include "ws_util.h"

/* ---- quantization --------------------------------------------------------------------- */

static int8_t q_of(float v, float inv)
{
    long q = lrintf(v * inv);
    return (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
}

void ws_int8_quantize_f32(const float *w, int rows, int cols, int qmax, int8_t *q, float *scale)
{
    for (int r = 0; r < rows; r++) {
        const float *row = w + (size_t)r * cols;
        float amax = 0;
        for (int c = 0; c < cols; c++)
            amax = fmaxf(amax, fabsf(row[c]));
        const float inv = amax > 0 ? (float)qmax / amax : 0;
        scale[r] = amax / (float)qmax;
        for (int c = 0; c < cols; c++)
            q[(size_t)r * cols + c] = q_of(row[c], inv);
    }
}

void ws_int8_quantize_bf16(const uint16_t *w, int rows, int cols, int qmax, int8_t *q, float *scale)
{
    float *tmp = malloc(sizeof(float) * (size_t)(cols > 0 ? cols : 1));
    for (int r = 0; r < rows; r++) {
        float amax = 0;
        const uint16_t *row = w + (size_t)r * cols;
        for (int c = 0; c < cols; c++) {
            const float v = ws_bf16_to_f32(row[c]);
            if (tmp)
                tmp[c] = v;
            amax = fmaxf(amax, fabsf(v));
        }
        const float inv = amax > 0 ? (float)qmax / amax : 0;
        scale[r] = amax / (float)qmax;
        for (int c = 0; c < cols; c++)
            q[(size_t)r * cols + c] = q_of(tmp ? tmp[c] : ws_bf16_to_f32(row[c]), inv);
    }
    free(tmp);
}

void ws_int8_row_sums(const int8_t *q, int rows, int cols, int32_t *sum)
{
    for (int r = 0; r < rows; r++) {
        int32_t a = 0;
        for (int c = 0; c < cols; c++)
            a += q[(size_t)r * cols + c];
        sum[r] = a;
    }
}

/* Layout in mem: gate|up q [2I x H], down q [H x I], then (64-byte aligned) the scales
 * [2I | H] and the row sums [2I | H]. */
static size_t scales_at(int hidden, int inter)
{
    return ((size_t)3 * hidden * inter + 63) & ~(size_t)63;
}

size_t ws_expert_int8_bytes(int hidden, int inter)
{
    return scales_at(hidden, inter) + 8 * ((size_t)2 * inter + hidden);
}

int ws_expert_int8_from_bf16(const ws_expert_bf16 *e, int qmax, void *mem, ws_expert_int8 *out,
                             ws_err *err)
{
    if (!e || !e->w_gate_up || !e->w_down || !mem || e->hidden <= 0 || e->inter <= 0 || qmax < 1 ||
        qmax > 127)
        return ws_err_set(err, WS_EINVAL, "int8 experts: bad expert, buffer or qmax %d", qmax);
    const int H = e->hidden, I = e->inter;
    int8_t *q = mem;
    float *s = (float *)((char *)mem + scales_at(H, I));
    int32_t *sum = (int32_t *)(s + 2 * I + H);
    ws_int8_quantize_bf16(e->w_gate_up, 2 * I, H, qmax, q, s);
    ws_int8_quantize_bf16(e->w_down, H, I, qmax, q + (size_t)2 * I * H, s + 2 * I);
    ws_int8_row_sums(q, 2 * I, H, sum);
    ws_int8_row_sums(q + (size_t)2 * I * H, H, I, sum + 2 * I);
    *out = (ws_expert_int8){.hidden = H,
                            .inter = I,
                            .w_gate_up = q,
                            .s_gate_up = s,
                            .sum_gate_up = sum,
                            .w_down = q + (size_t)2 * I * H,
                            .s_down = s + 2 * I,
                            .sum_down = sum + 2 * I,
                            .qmax = qmax};
    return 0;
}

/* Each row of x [m x n] to s8 with its own scale (max |x| / 127) into s, stored shifted by
 * 128 as u8 in q: oneDNN's u8 x s8 path reads the weights once, its s8 x s8 one adds a pass
 * over them (its compensation) to every call (docs/notes/int8-experts.md). */
static void quantize_rows(const float *x, int m, int n, uint8_t *q, float *s, int threads)
{
    const long total = (long)m * n;
#pragma omp parallel for num_threads(                                                              \
    threads > 0 ? threads : omp_get_max_threads()) if (total >= 65536) schedule(static)
    for (int r = 0; r < m; r++) {
        const float *row = x + (size_t)r * n;
        float amax = 0;
        for (int c = 0; c < n; c++)
            amax = fmaxf(amax, fabsf(row[c]));
        const float inv = amax > 0 ? 127.0f / amax : 0;
        s[r] = amax / 127.0f;
        for (int c = 0; c < n; c++)
            q[(size_t)r * n + c] = (uint8_t)(q_of(row[c], inv) + 128);
    }
}

/* out[r][c] = (float)(acc[r][c] - 128 sum[c]) * ws[c] * xs[r]: the shift undone exactly in
 * int32, then the weights' and the token's scales. */
static void dequant_rows(const int32_t *acc, int m, int n, const int32_t *sum, const float *ws,
                         const float *xs, float *out, int threads)
{
    const long total = (long)m * n;
#pragma omp parallel for num_threads(                                                              \
    threads > 0 ? threads : omp_get_max_threads()) if (total >= 65536) schedule(static)
    for (int r = 0; r < m; r++) {
        const int32_t *a = acc + (size_t)r * n;
        float *o = out + (size_t)r * n;
        for (int c = 0; c < n; c++)
            o[c] = (float)(a[c] - 128 * sum[c]) * ws[c] * xs[r];
    }
}

/* ---- oneDNN --------------------------------------------------------------------------- */

/* The primitive descriptor of the matmul: of the implementations oneDNN offers in its
 * order, AMX's where there is one (the instructions the int8 format is for), else its JIT
 * gemm, else its first: with plain [n x k] weights its brgemm repacks them on every call, 1.5x
 * the gemm's time here (docs/notes/int8-experts.md); never a reference kernel. */
static dnnl_status_t mm_pd(dnnl_engine_t engine, dnnl_primitive_desc_t *pd, int m, int n, int k)
{
    dnnl_memory_desc_t s, w, d;
    dnnl_dims_t ds = {m, k}, dw = {k, n}, dd = {m, n};
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_iterator_t it = NULL;
    dnnl_status_t st;
    *pd = NULL;
    if (!engine)
        return dnnl_runtime_error;
    if ((st = dnnl_memory_desc_init_by_tag(&s, 2, ds, dnnl_u8, dnnl_ab)) ||
        (st = dnnl_memory_desc_init_by_tag(&w, 2, dw, dnnl_s8, dnnl_ba)) ||
        (st = dnnl_memory_desc_init_by_tag(&d, 2, dd, dnnl_s32, dnnl_ab)) ||
        (st = dnnl_matmul_desc_init(&md, &s, &w, NULL, &d)) ||
        (st = dnnl_primitive_attr_create(&attr)) ||
        (st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user)) ||
        (st = dnnl_primitive_desc_iterator_create(&it, &md, attr, engine, NULL))) {
        if (attr)
            dnnl_primitive_attr_destroy(attr);
        return st;
    }
    int best = -1, rank = 0; /* 3 amx, 2 gemm, 1 other, 0 reference */
    for (int i = 0; st == dnnl_success; i++, st = dnnl_primitive_desc_iterator_next(it)) {
        dnnl_primitive_desc_t cur = dnnl_primitive_desc_iterator_fetch(it); /* ours to free */
        const char *name = "";
        if (!cur)
            continue;
        int r = -1;
        if (dnnl_primitive_desc_query(cur, dnnl_query_impl_info_str, 0, &name) == dnnl_success)
            r = strstr(name, "amx")         ? 3
                : !strncmp(name, "gemm", 4) ? 2
                : !strncmp(name, "ref", 3)  ? 0
                                            : 1;
        if (r > rank) {
            if (*pd)
                dnnl_primitive_desc_destroy(*pd);
            *pd = cur;
            best = i, rank = r;
        } else {
            dnnl_primitive_desc_destroy(cur);
        }
    }
    dnnl_primitive_desc_iterator_destroy(it);
    dnnl_primitive_attr_destroy(attr);
    return best >= 0 ? dnnl_success : dnnl_unimplemented;
}

/* ---- per-thread state: stream, primitive cache, scratch ------------------------------- */

enum { S_XQ, S_SX, S_ACC, S_GU, S_H, S_HQ, S_SH, S_N };

typedef struct tstate {
    ws_dnnl_cache cache;
    ws_abuf b[S_N];
} tstate;

static _Thread_local tstate *t_st;
static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static void tstate_free(void *p)
{
    tstate *s = p;
    if (!s)
        return;
    ws_dnnl_cache_free(&s->cache);
    for (int i = 0; i < S_N; i++)
        ws_abuf_free(&s->b[i]);
    free(s);
}

static void key_init(void)
{
    pthread_key_create(&g_key, tstate_free);
}

static tstate *state(ws_err *err)
{
    if (!t_st) {
        pthread_once(&g_key_once, key_init);
        if ((t_st = calloc(1, sizeof *t_st))) {
            t_st->cache = (ws_dnnl_cache){.pd = mm_pd, .kind = "int8"};
            pthread_setspecific(g_key, t_st);
        }
    }
    if (!t_st)
        ws_err_set(err, WS_ENOMEM, "int8 expert ffn: cannot allocate its state");
    return t_st;
}

static void *grow(tstate *s, int which, size_t bytes, ws_err *err)
{
    return ws_abuf_grow(&s->b[which], bytes, "int8 expert ffn", err);
}

/* ---- the FFN -------------------------------------------------------------------------- */

static int bad_expert(const ws_expert_int8 *e)
{
    return !e || !e->w_gate_up || !e->s_gate_up || !e->sum_gate_up || !e->w_down || !e->s_down ||
           !e->sum_down || e->hidden <= 0 || e->inter <= 0;
}

int ws_expert_ffn_int8(const ws_expert_int8 *e, const float *x, float *y, int m, int threads,
                       ws_err *err)
{
    if (bad_expert(e) || !x || !y || m <= 0)
        return ws_err_set(err, WS_EINVAL,
                          "int8 expert ffn: bad shape m %d H %d I %d or NULL operand", m,
                          e ? e->hidden : 0, e ? e->inter : 0);
    if (e->qmax < 1 || e->qmax > ws_gemm_int8_qmax())
        return ws_err_set(err, WS_EUNSUP,
                          "int8 expert ffn: weights of up to +-%d overflow oneDNN's %s int8 path "
                          "(no VNNI: 16-bit pair sums); quantize them to +-%d",
                          e->qmax, ws_gemm_int8_isa(), ws_gemm_int8_qmax());
    if (!ws_dnnl_engine())
        return ws_err_set(err, WS_EUNSUP, "oneDNN: no CPU engine");
    const int hd = e->hidden, in = e->inter;
    tstate *s = state(err);
    if (!s)
        return WS_ENOMEM;
    uint8_t *xq = grow(s, S_XQ, (size_t)m * hd, err), *hq = grow(s, S_HQ, (size_t)m * in, err);
    float *sx = grow(s, S_SX, sizeof(float) * m, err), *sh = grow(s, S_SH, sizeof(float) * m, err);
    const size_t wide = (size_t)m * (2 * in > hd ? 2 * in : hd);
    int32_t *acc = grow(s, S_ACC, sizeof(int32_t) * wide, err);
    float *gu = grow(s, S_GU, sizeof(float) * m * 2 * in, err);
    float *h = grow(s, S_H, sizeof(float) * m * in, err);
    if (!xq || !hq || !sx || !sh || !acc || !gu || !h)
        return err ? err->code : WS_ENOMEM;
    if (threads > 0)
        omp_set_num_threads(threads);
    ws_dnnl_pair *d = ws_dnnl_cache_get(&s->cache, m, hd, in, threads, err);
    if (!d)
        return err ? err->code : WS_EDEVICE;
    quantize_rows(x, m, hd, xq, sx, threads);
    const char *what = "int8 matmul";
    int rc = ws_dnnl_mm_run(&d->gate_up, s->cache.stream, xq, e->w_gate_up, acc, what, err);
    if (rc)
        return rc;
    dequant_rows(acc, m, 2 * in, e->sum_gate_up, e->s_gate_up, sx, gu, threads);
    ws_expert_silu_mul(gu, m, in, h, threads);
    quantize_rows(h, m, in, hq, sh, threads);
    if ((rc = ws_dnnl_mm_run(&d->down, s->cache.stream, hq, e->w_down, acc, what, err)))
        return rc;
    dequant_rows(acc, m, hd, e->sum_down, e->s_down, sh, y, threads);
    return 0;
}

/* ---- the reference -------------------------------------------------------------------- */

/* One row to s8 as the kernel quantizes it (the same rule, written out again). */
static float ref_quant(const float *x, int n, int8_t *q)
{
    float amax = 0;
    for (int i = 0; i < n; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    const float inv = amax > 0 ? 127.0f / amax : 0;
    for (int i = 0; i < n; i++) {
        long v = lrintf(x[i] * inv);
        q[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
    return amax / 127.0f;
}

void ws_expert_ffn_int8_ref(const ws_expert_int8 *e, const float *x, float *y, double *tol, int m)
{
    const int H = e->hidden, I = e->inter;
    int8_t *xq = malloc((size_t)H), *hq = malloc((size_t)I);
    float *h = malloc(sizeof(float) * (size_t)I);
    unsigned char *tie = malloc((size_t)I);
    if (!xq || !hq || !h || !tie) {
        for (long i = 0; i < (long)m * H; i++)
            y[i] = NAN;
        goto out;
    }
    for (int r = 0; r < m; r++) {
        const float sx = ref_quant(x + (size_t)r * H, H, xq);
        for (int j = 0; j < I; j++) {
            int32_t ag = 0, au = 0;
            const int8_t *wg = e->w_gate_up + (size_t)j * H,
                         *wu = e->w_gate_up + (size_t)(I + j) * H;
            for (int k = 0; k < H; k++) {
                ag += (int32_t)xq[k] * wg[k];
                au += (int32_t)xq[k] * wu[k];
            }
            const double g = (float)ag * e->s_gate_up[j] * sx;
            const double u = (float)au * e->s_gate_up[I + j] * sx;
            h[j] = (float)(g / (1.0 + exp(-g)) * u);
        }
        const float sh = ref_quant(h, I, hq);
        const float inv = sh > 0 ? 1.0f / sh : 0;
        for (int j = 0; j < I; j++) {
            const double t = fabs((double)h[j] * inv);
            tie[j] = fabs(t - floor(t) - 0.5) < 1e-3;
        }
        for (int c = 0; c < H; c++) {
            const int8_t *wd = e->w_down + (size_t)c * I;
            int32_t acc = 0;
            double flip = 0, mag = 0;
            for (int j = 0; j < I; j++) {
                acc += (int32_t)hq[j] * wd[j];
                mag += fabs((double)hq[j] * wd[j]);
                if (tie[j])
                    flip += abs(wd[j]);
            }
            const double unit = (double)sh * e->s_down[c];
            y[(size_t)r * H + c] = (float)acc * e->s_down[c] * sh;
            if (tol)
                tol[(size_t)r * H + c] = unit * (flip + 1e-5 * mag) + 1e-30;
        }
    }
out:
    free(xq), free(hq), free(h), free(tie);
}

/* ---- what oneDNN runs ----------------------------------------------------------------- */

static dnnl_cpu_isa_t isa(void)
{
    return dnnl_get_effective_cpu_isa();
}

static int has_vnni(dnnl_cpu_isa_t i)
{
    return (i & dnnl_cpu_isa_avx512_core_vnni) == dnnl_cpu_isa_avx512_core_vnni ||
           (i & dnnl_cpu_isa_avx2_vnni) == dnnl_cpu_isa_avx2_vnni;
}

int ws_gemm_int8_qmax(void)
{
    return has_vnni(isa()) ? 127 : 63;
}

const char *ws_gemm_int8_isa(void)
{
    switch (isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "unknown";
    }
}

void ws_gemm_int8_impl(int hidden, int inter, int m, char *buf, size_t cap)
{
    const char *names[2] = {"", ""};
    char copy[2][64] = {"", ""};
    const int shape[2][3] = {{m, 2 * inter, hidden}, {m, hidden, inter}};
    for (int i = 0; i < 2; i++) {
        dnnl_primitive_desc_t pd;
        if (mm_pd(ws_dnnl_engine(), &pd, shape[i][0], shape[i][1], shape[i][2]) == dnnl_success) {
            if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &names[i]) ==
                dnnl_success)
                snprintf(copy[i], sizeof copy[i], "%s", names[i]);
            dnnl_primitive_desc_destroy(pd);
        }
    }
    if (!strcmp(copy[0], copy[1]))
        snprintf(buf, cap, "%s", copy[0]);
    else
        snprintf(buf, cap, "%s+%s", copy[0], copy[1]);
}

const char *ws_gemm_int8_family(int hidden, int inter, int m)
{
    char impl[140];
    ws_gemm_int8_impl(hidden, inter, m, impl, sizeof impl);
    const dnnl_cpu_isa_t i = isa();
    if (strstr(impl, "amx"))
        return "amx_int8";
    if (strstr(impl, "avx2_vnni"))
        return "avx2_vnni";
    if (strstr(impl, "vnni") ||
        (i & dnnl_cpu_isa_avx512_core_vnni) == dnnl_cpu_isa_avx512_core_vnni)
        return "avx512_vnni";
    if (i == dnnl_cpu_isa_avx2_vnni)
        return "avx2_vnni";
    if ((i & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core)
        return "avx512bw";
    if ((i & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2)
        return "avx2";
    return "sse41";
}

void ws_gemm_int8_describe(int hidden, int inter, int m, char *buf, size_t cap)
{
    char impl[140];
    ws_gemm_int8_impl(hidden, inter, m, impl, sizeof impl);
    snprintf(buf, cap, "onednn %s %s", impl[0] ? impl : "none",
             ws_gemm_int8_family(hidden, inter, m));
}

void ws_gemm_int8_release(void)
{
    if (!t_st)
        return;
    pthread_setspecific(g_key, NULL);
    tstate_free(t_st);
    t_st = NULL;
}

void ws_expert_int8_cost(int hidden, int inter, int m, double *flops, double *bytes)
{
    const double hd = hidden, in = inter, tok = m;
    *flops = 2.0 * tok * hd * in * 3.0 + 4.0 * tok * in; /* three GEMMs + silu/product */
    *bytes = 3.0 * hd * in + 8.0 * (2.0 * in + hd) + 4.0 * tok * (2.0 * hd + 4.0 * in) +
             tok * (hd + in) + 4.0 * tok * (2.0 * in + hd);
}
