/* attn_cpu: the driver of the CPU decode-attention kernel (see attn_cpu.h): instruction
 * path selection, the (sequence, KV head, token chunk) task split, the block loop with
 * the online softmax, and the lse merge of chunk results. The arithmetic on blocks is in
 * the per-path files behind attn_cpu_isa.h. */
#include "attn_cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_cpu_amx.h"
#include "attn_cpu_fma.h"
#include "attn_cpu_isa.h"
#include "cpu_features.h"
#include "half.h"

#define MIN_CHUNK 512 /* smallest token chunk worth a task of its own */
#define TASKS_PER_THREAD 4
#define SLICE_HEADS 8 /* head slices: a multiple of the AMX loop's head group */
#define PF_DIST 16 /* sparse lists: items (tokens) prefetched ahead */

static const char *const k_isa_names[WS_ISA_COUNT] = {"auto",   "scalar",     "avx2",
                                                      "avx512", "avx512bf16", "amx"};
/* ws_isa_best's order of preference after amx, unless the probe moves avx512bf16 first
 * (DP_GAIN_MIN, attn_cpu.h). */
static const ws_isa k_preference[] = {WS_ISA_AMX, WS_ISA_AVX512, WS_ISA_AVX512_BF16, WS_ISA_AVX2};
static const char *const k_prec_names[WS_PREC_COUNT] = {"auto", "exact", "bf16"};

const char *ws_isa_name(ws_isa isa)
{
    return (unsigned)isa < WS_ISA_COUNT ? k_isa_names[isa] : "unknown";
}

int ws_isa_parse(const char *name, ws_isa *out)
{
    for (int i = 0; i < WS_ISA_COUNT; i++)
        if (name && !strcmp(name, k_isa_names[i])) {
            *out = (ws_isa)i;
            return 0;
        }
    return -1;
}

int ws_isa_supported(ws_isa isa)
{
    const ws_cpu_features *f = ws_cpu_features_get();
    const int avx512 = f->avx512f && f->avx512bw && f->avx512vl;
    switch (isa) {
    case WS_ISA_AUTO:
    case WS_ISA_SCALAR:
        return 1;
    case WS_ISA_AVX2:
        return f->avx2 && f->fma && f->f16c;
    case WS_ISA_AVX512:
        return avx512;
    case WS_ISA_AVX512_BF16:
        return avx512 && f->avx512_bf16;
    case WS_ISA_AMX:
        return avx512 && f->avx512_bf16 && ws_attn_cpu_amx_enable(); /* AMX (or emulated) */
    default:
        return 0;
    }
}

const char *ws_attn_prec_name(ws_attn_prec prec)
{
    return (unsigned)prec < WS_PREC_COUNT ? k_prec_names[prec] : "unknown";
}

int ws_attn_prec_parse(const char *name, ws_attn_prec *out)
{
    for (int i = 0; i < WS_PREC_COUNT; i++)
        if (name && !strcmp(name, k_prec_names[i])) {
            *out = (ws_attn_prec)i;
            return 0;
        }
    return -1;
}

int ws_attn_prec_resolve(ws_attn_prec want, ws_attn_prec *out, ws_err *err)
{
    if (want == WS_PREC_AUTO) {
        const char *env = getenv("WRITESCOPE_PRECISION");
        if (env && *env && ws_attn_prec_parse(env, &want))
            return ws_err_set(err, WS_EUNSUP,
                              "WRITESCOPE_PRECISION=%s: unknown precision (auto, exact, bf16)",
                              env);
        if (want == WS_PREC_AUTO)
            want = WS_PREC_DEFAULT;
    }
    if ((unsigned)want >= WS_PREC_COUNT)
        return ws_err_set(err, WS_EINVAL, "precision %d is not valid", (int)want);
    *out = want;
    return 0;
}

ws_isa ws_isa_best(void)
{
    if (ws_isa_supported(WS_ISA_AMX))
        return WS_ISA_AMX;
    /* VDPBF16PS first where the probe finds its products faster than FMA's */
    if (ws_isa_supported(WS_ISA_AVX512_BF16) && ws_attn_cpu_dp_gain() >= DP_GAIN_MIN)
        return WS_ISA_AVX512_BF16;
    for (size_t i = 0; i < sizeof k_preference / sizeof k_preference[0]; i++)
        if (ws_isa_supported(k_preference[i]))
            return k_preference[i];
    return WS_ISA_SCALAR;
}

int ws_isa_resolve(ws_isa want, ws_isa *out, ws_err *err)
{
    if (want == WS_ISA_AUTO) {
        const char *env = getenv("WRITESCOPE_ISA");
        if (env && *env) {
            if (ws_isa_parse(env, &want))
                return ws_err_set(err, WS_EUNSUP,
                                  "WRITESCOPE_ISA=%s: unknown instruction path (auto, scalar, "
                                  "avx2, avx512, avx512bf16, amx)",
                                  env);
        }
        if (want == WS_ISA_AUTO)
            want = ws_isa_best();
    }
    if ((unsigned)want >= WS_ISA_COUNT)
        return ws_err_set(err, WS_EINVAL, "instruction path %d is not valid", (int)want);
    if (!ws_isa_supported(want))
        return ws_err_set(err, WS_EUNSUP, "instruction path %s is not supported by this CPU (%s)",
                          ws_isa_name(want), ws_cpu_features_get()->model);
    *out = want;
    return 0;
}

/* prec resolved: WS_PREC_AUTO as ws_attn_prec_resolve, falling back to the default on a bad
 * $WRITESCOPE_PRECISION (the kernel call itself reports that). */
static ws_attn_prec prec_of(ws_attn_prec prec)
{
    ws_attn_prec out;
    return ws_attn_prec_resolve(prec, &out, NULL) ? WS_PREC_DEFAULT : out;
}

/* Query heads per KV head (0 for a layout without KV heads). */
static int group_of(const ws_kv_layout *kv, int n_q_heads)
{
    return kv->n_kv_heads > 0 ? n_q_heads / kv->n_kv_heads : 0;
}

ws_isa ws_attn_cpu_path(const ws_kv_layout *kv, int n_q_heads, ws_isa isa, ws_attn_prec prec)
{
    const int G = group_of(kv, n_q_heads);
    if (isa == WS_ISA_AMX && !ws_attn_cpu_amx_fits(kv, G))
        return WS_ISA_AVX512;
    /* fp16 KV has no VDPBF16PS, and the fused loop serves GQA in the exact precision with
     * FMAs (faster there than VDPBF16PS on hi + lo halves): the avx512 loops */
    const int exact = prec_of(prec) == WS_PREC_EXACT;
    if (isa == WS_ISA_AVX512_BF16 &&
        (kv->dtype != WS_DT_BF16 ||
         (ws_attn_cpu_fma_fits(kv, G) && !ws_attn_cpu_dp_fits(kv, G, exact))))
        return WS_ISA_AVX512;
    return isa;
}

/* 1 if the path serving this shape (resolved) is a vector path (AVX2 or AVX-512), whose
 * fused FMA loop reads GQA's K in tiles and V in pairs (attn_cpu_fma.h). */
static int vector_path(const ws_kv_layout *kv, int n_q_heads, ws_isa isa)
{
    const ws_isa path = ws_attn_cpu_path(kv, n_q_heads, isa, WS_PREC_EXACT);
    return path == WS_ISA_AVX2 || path == WS_ISA_AVX512 || path == WS_ISA_AVX512_BF16;
}

/* The shape without a layout: the choices below must not depend on one already set. */
static ws_kv_layout shape_only(const ws_kv_layout *kv)
{
    ws_kv_layout s = *kv;
    s.k_tiles = s.v_pairs = 0;
    return s;
}

int ws_attn_cpu_k_tiles(const ws_kv_layout *kv, int n_q_heads, ws_isa isa, int token_lists)
{
    if (token_lists || kv->v_shares_k || kv->page_tokens % 16 || kv->n_kv_heads <= 0)
        return 0;
    const ws_kv_layout s = shape_only(kv);
    const int G = n_q_heads / kv->n_kv_heads;
    if (ws_attn_cpu_path(&s, n_q_heads, isa, WS_PREC_EXACT) == WS_ISA_AMX) /* one head group */
        return G <= WS_ATTN_CPU_AMX_TILE_GROUP;
    return G <= WS_ATTN_CPU_FMA_GROUP && vector_path(&s, n_q_heads, isa);
}

int ws_attn_cpu_v_pairs(const ws_kv_layout *kv, int n_q_heads, ws_isa isa, int token_lists)
{
    /* amx: pairs, except for single-token lists, where a token's pair row also brings its
     * neighbour's values (rows measured 1.2x faster: 0.190 of the read bandwidth against
     * 0.157, medians of 6 runs alternated, Qwen3's shape, top-2048 tokens of 131072) */
    const ws_kv_layout s = shape_only(kv);
    if (ws_attn_cpu_path(&s, n_q_heads, isa, WS_PREC_EXACT) == WS_ISA_AMX)
        return !kv->v_shares_k && kv->page_tokens % 2 == 0 && !token_lists;
    /* the fused loop reads pairs only beside K tiles (the generic loop converts them in C) */
    return vector_path(&s, n_q_heads, isa) && ws_attn_cpu_k_tiles(kv, n_q_heads, isa, token_lists);
}

/* The block loop serving a problem of this shape and layout on the resolved path `isa`:
 * the AMX loop where it fits, else the fused FMA loop on any vector path (amx hands it what
 * the tiles do not serve) for a layout it reads, else the generic loop. The one place that
 * decides: ws_attn_cpu runs what this says and ws_attn_cpu_loop_name reports it. */
typedef enum { LOOP_GENERIC, LOOP_FMA, LOOP_AMX, LOOP_DP } cpu_loop;
static cpu_loop loop_for(const ws_kv_layout *kv, int n_q_heads, ws_isa isa, ws_attn_prec prec)
{
    const int G = group_of(kv, n_q_heads);
    const ws_isa path = ws_attn_cpu_path(kv, n_q_heads, isa, prec);
    if (path == WS_ISA_AMX)
        return LOOP_AMX;
    if (path == WS_ISA_AVX512_BF16 && ws_attn_cpu_dp_fits(kv, G, prec_of(prec) == WS_PREC_EXACT))
        return LOOP_DP;
    return isa != WS_ISA_SCALAR && ws_attn_cpu_fma_fits(kv, G) ? LOOP_FMA : LOOP_GENERIC;
}

const char *ws_attn_cpu_loop_name(const ws_kv_layout *kv, int n_q_heads, ws_isa isa,
                                  ws_attn_prec prec)
{
    static const char *const names[] = {"generic", "fma", "amx", "dpbf16"};
    return names[loop_for(kv, n_q_heads, isa, prec)];
}

int ws_attn_cpu_p_bf16(const ws_kv_layout *kv, int n_q_heads, ws_isa isa, ws_attn_prec prec)
{
    if (prec_of(prec) != WS_PREC_BF16)
        return 0;
    const cpu_loop loop = loop_for(kv, n_q_heads, isa, prec);
    const int G = group_of(kv, n_q_heads);
    return loop == LOOP_DP || (loop == LOOP_AMX && ws_attn_cpu_amx_p_bf16(kv, G));
}

static const ws_attn_cpu_ops *ops_for(ws_isa isa)
{
    switch (isa) {
    case WS_ISA_AVX2:
        return ws_attn_cpu_ops_avx2();
    case WS_ISA_AVX512:
    case WS_ISA_AMX: /* shapes the tiles do not serve */
        return ws_attn_cpu_ops_avx512();
    case WS_ISA_AVX512_BF16:
        return ws_attn_cpu_ops_avx512bf16();
    default:
        return ws_attn_cpu_ops_scalar();
    }
}

void ws_attn_merge_parts(const float *o_parts, const float *lse_parts, int n_parts,
                         int n_rows, int d_v, float *o_out, float *lse_out)
{
    const size_t part_stride = (size_t)n_rows * (size_t)d_v;
    for (int r = 0; r < n_rows; r++) {
        float m = -INFINITY;
        for (int k = 0; k < n_parts; k++)
            if (lse_parts[(size_t)k * n_rows + r] > m)
                m = lse_parts[(size_t)k * n_rows + r];
        float *out = o_out + (size_t)r * d_v;
        if (m == -INFINITY) {
            memset(out, 0, sizeof(float) * (size_t)d_v);
            lse_out[r] = -INFINITY;
            continue;
        }
        float sum = 0;
        for (int k = 0; k < n_parts; k++)
            sum += expf(lse_parts[(size_t)k * n_rows + r] - m);
        for (int i = 0; i < d_v; i++)
            out[i] = 0;
        for (int k = 0; k < n_parts; k++) {
            float w = expf(lse_parts[(size_t)k * n_rows + r] - m) / sum;
            if (w == 0.0f)
                continue;
            const float *a = o_parts + (size_t)k * part_stride + (size_t)r * d_v;
            for (int i = 0; i < d_v; i++)
                out[i] += w * a[i];
        }
        lse_out[r] = m + logf(sum);
    }
}

/* One task: token indices [i0, i1) of one (sequence, KV head), for query heads [h0, h0 +
 * nh) of its group, or of nkv KV heads from kvh on, whole groups (the VDPBF16PS loop's
 * page walk); part < 0 writes the final output directly. */
typedef struct task {
    int seq, kvh, nkv, h0, nh, i0, i1, part; /* nkv: KV heads kvh .. kvh + nkv - 1 */
} task;

/* One (sequence, KV head) whose chunks must be merged. */
typedef struct unit {
    int seq, kvh, first_part, n_parts;
} unit;

typedef struct job {
    const ws_attn_problem *p;
    const ws_attn_cpu_ops *ops;
    int G, dk, dv;
    const uint16_t *qhi, *qlo; /* bf16 halves of q for qk_bf16, else NULL */
    int pf_dist;               /* software prefetch distance, items */
    int amx;                   /* 1: the AMX block loop serves this problem */
    int fma;                   /* 1: the fused FMA loop serves it (attn_cpu_fma.h) */
    int dp;                    /* 1: its VDPBF16PS form serves it */
    int exact;                 /* dp, amx: q and p as bf16 hi + lo (else bf16) */
    task *tasks;
    unit *units;
    float *part_o, *part_lse;
    char *scratch;
    size_t scratch_bytes; /* per thread */
} job;

/* Software prefetch of the next dense block, a quarter at a time between the block's steps
 * (a single burst of 100+ prefetches stalls on the line-fill buffers; spread out, they keep
 * memory busy while the block computes). Region a (K rows), then b (V rows). */
typedef struct pf_cursor {
    const char *a, *b;
    size_t na, nb, off, quota;
} pf_cursor;

static inline void pf_step(pf_cursor *c)
{
    size_t end = c->off + c->quota, total = c->na + c->nb;
    if (end > total)
        end = total;
    for (; c->off < end; c->off += 64)
        __builtin_prefetch(c->off < c->na ? c->a + c->off : c->b + (c->off - c->na));
}

static size_t align64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* V in token pairs (v_pairs) to fp32 rows: dst[r*ld + i] = rows[r][2 i]. Plain C on every
 * path: the generic loop meets pairs (and tiles) only where the layout was forced or the
 * fused FMA loop does not serve the shape; it serves them correctly. */
static void cvt_pairs(float *dst, int ld, const uint16_t *const *rows, int n, int d,
                      ws_dtype dt)
{
    for (int r = 0; r < n; r++)
        for (int i = 0; i < d; i++)
            dst[(size_t)r * ld + i] = dt == WS_DT_BF16 ? ws_bf16_to_f32(rows[r][2 * i])
                                                       : ws_fp16_to_f32(rows[r][2 * i]);
}

/* K in tiles (k_tiles) to fp32 rows: rows[r] points at its token's first pair in the
 * tile, dst[r*ld + i] = rows[r][32 (i / 2) + i % 2]. Plain C, as cvt_pairs. */
static void cvt_tiles(float *dst, int ld, const uint16_t *const *rows, int n, int d, ws_dtype dt)
{
    for (int r = 0; r < n; r++)
        for (int i = 0; i < d; i++) {
            const uint16_t x = rows[r][32 * (i >> 1) + (i & 1)];
            dst[(size_t)r * ld + i] = dt == WS_DT_BF16 ? ws_bf16_to_f32(x) : ws_fp16_to_f32(x);
        }
}

/* Attends items [i0, i1) of sequence s for G query heads of KV head kvh from query head
 * qhead on; o [G][dv], lse [G]. */
static void attend(const job *jb, int s, int kvh, int qhead, int G, int i0, int i1, float *o,
                   float *lse, char *scr)
{
    const ws_attn_problem *p = jb->p;
    const ws_kv_layout *kv = &p->kv;
    const ws_attn_cpu_ops *ops = jb->ops;
    const int dk = jb->dk, dv = jb->dv, B = WS_ATTN_CPU_BLOCK, P = kv->page_tokens;
    const ws_attn_seq *sq = &p->seqs[s];
    const uint16_t **krow = (const uint16_t **)scr, **vrow = krow + B;
    float *kf = (float *)(scr + align64(sizeof(void *) * 2 * B));
    float *vf = kf + (size_t)B * dk; /* d_k, d_v are multiples of 16: stays aligned */
    float *sc = vf + (size_t)B * dv;
    float *m = sc + (size_t)G * B, *l = m + G, *alpha = l + G;
    const size_t qbase = ((size_t)s * p->n_q_heads + (size_t)qhead) * dk;
    const float *q = p->q + qbase;
    const int shared_v = kv->v_shares_k && !jb->qhi;
    const int pf = sq->sel ? jb->pf_dist : 0; /* dense blocks: pf_cursor below */

    for (int g = 0; g < G; g++) {
        m[g] = -INFINITY;
        l[g] = 0;
    }
    memset(o, 0, sizeof(float) * (size_t)G * dv);
    for (int i = i0; i < i1; i += B) {
        const int n = i1 - i < B ? i1 - i : B;
        for (int j = 0; j < n; j++) {
            const int t = sq->sel ? sq->sel[i + j] : i + j;
            const uint16_t *pg = sq->pages[t / P];
            krow[j] = pg + ws_kv_k_elem(kv, kvh, t % P, 0); /* tiles: every 32nd pair */
            vrow[j] = pg + ws_kv_v_elem(kv, kvh, t % P, 0); /* pairs: every other element */
        }
        /* Sparse lists: prefetch the rows pf items ahead, which the hardware prefetcher
         * cannot guess. */
        for (int j = 0; j < n && pf && i + j + pf < i1; j++)
            ws_attn_prefetch_row(sq, kv, kvh, sq->sel ? sq->sel[i + j + pf] : i + j + pf);
        pf_cursor pfc = {0};
        if (!sq->sel && i + 2 * B <= i1 && ((i + B) % P) + B <= P) {
            const char *pg = sq->pages[(i + B) / P];
            pfc.a = pg + 2 * ws_kv_k_off(kv, kvh, (i + B) % P);
            pfc.na = (size_t)B * dk * 2; /* tiles: B is 16, (i + B) % 16 == 0 */
            if (!kv->v_shares_k) {
                pfc.b = pg + 2 * ws_kv_v_elem(kv, kvh, (i + B) % P, 0);
                pfc.nb = (size_t)B * dv * 2;
            }
            pfc.quota = ((pfc.na + pfc.nb) / 4 + 63) & ~(size_t)63;
        }
        /* Scores s[g][j] (row pitch n). */
        if (jb->qhi) {
            ops->qk_bf16(jb->qhi + qbase, jb->qlo + qbase, G, dk, krow, n, p->scale, sc, n);
        } else {
            if (kv->k_tiles)
                cvt_tiles(kf, dk, krow, n, dk, kv->dtype);
            else
                ops->cvt(kf, dk, krow, n, dk, kv->dtype);
            pf_step(&pfc);
            ops->qk(q, G, dk, kf, dk, n, p->scale, sc, n);
        }
        pf_step(&pfc);
        /* Online softmax: new running max, rescale what was accumulated so far. */
        ops->softmax(sc, G, n, m, l, alpha);
        pf_step(&pfc);
        for (int g = 0; g < G; g++)
            if (alpha[g] != 1.0f) {
                float *og = o + (size_t)g * dv;
                for (int d = 0; d < dv; d++)
                    og[d] *= alpha[g];
            }
        if (shared_v) {
            ops->pv(o, G, dv, sc, n, kf, dk, n);
        } else {
            if (kv->v_pairs)
                cvt_pairs(vf, dv, vrow, n, dv, kv->dtype);
            else
                ops->cvt(vf, dv, vrow, n, dv, kv->dtype);
            ops->pv(o, G, dv, sc, n, vf, dv, n);
        }
        pfc.quota = pfc.na + pfc.nb;
        pf_step(&pfc);
    }
    for (int g = 0; g < G; g++) {
        float *og = o + (size_t)g * dv;
        if (l[g] == 0) { /* nothing attended */
            memset(og, 0, sizeof(float) * (size_t)dv);
            lse[g] = -INFINITY;
            continue;
        }
        const float inv = 1.0f / l[g];
        for (int d = 0; d < dv; d++)
            og[d] *= inv;
        lse[g] = m[g] + logf(l[g]);
    }
}

static void run_task(void *ctx, int ti, int thread)
{
    const job *jb = ctx;
    const task *t = &jb->tasks[ti];
    const ws_attn_problem *p = jb->p;
    float *o, *lse;
    if (t->part < 0) {
        const size_t row = (size_t)t->seq * p->n_q_heads + (size_t)t->kvh * jb->G + t->h0;
        o = p->o + row * jb->dv;
        lse = p->lse + row;
    } else {
        const size_t row = (size_t)t->part * jb->G + t->h0;
        o = jb->part_o + row * jb->dv;
        lse = jb->part_lse + row;
    }
    char *scr = jb->scratch + (size_t)thread * jb->scratch_bytes;
    const int qhead = t->kvh * jb->G + t->h0;
    if (jb->amx)
        ws_attn_cpu_amx_attend(p, !jb->exact, t->seq, t->kvh, qhead, t->i0, t->i1, t->nh, o, lse,
                               scr);
    else if (jb->dp)
        ws_attn_cpu_dp_attend(p, jb->exact, t->seq, t->kvh, t->nkv, qhead, t->i0, t->i1, t->nh, o,
                              lse, scr);
    else if (jb->fma)
        ws_attn_cpu_fma_attend(p, jb->ops->isa != WS_ISA_AVX2, t->seq, t->kvh, qhead, t->i0, t->i1,
                               t->nh, o, lse, scr);
    else
        attend(jb, t->seq, t->kvh, qhead, t->nh, t->i0, t->i1, o, lse, scr);
}

static void run_merge(void *ctx, int ui, int thread)
{
    (void)thread;
    const job *jb = ctx;
    const unit *u = &jb->units[ui];
    const ws_attn_problem *p = jb->p;
    const size_t row = (size_t)u->seq * p->n_q_heads + (size_t)u->kvh * jb->G;
    ws_attn_merge_parts(jb->part_o + (size_t)u->first_part * jb->G * jb->dv,
                        jb->part_lse + (size_t)u->first_part * jb->G, u->n_parts, jb->G, jb->dv,
                        p->o + row * jb->dv, p->lse + row);
}

static int items(const ws_attn_seq *sq)
{
    return sq->sel ? sq->n_sel : sq->n_tokens;
}

/* End of the chunk of sequence sq that starts at item i0: chunk items, or fewer at the
 * sequence's end and, when numa is set and the CPU region says where the pages lie (dense
 * sequences, pages of whole blocks), at the first page on another node than i0's, so that
 * a chunk reads one node's memory. */
static long chunk_end(const ws_attn_seq *sq, int P, long i0, long chunk, int numa)
{
    const long n = items(sq);
    long i1 = i0 + chunk < n ? i0 + chunk : n;
    if (numa && sq->page_nodes && !sq->sel && P % WS_ATTN_CPU_BLOCK == 0 && i1 > i0) {
        const long pg = i0 / P, last = (i1 - 1) / P;
        for (long q = pg + 1; q <= last; q++)
            if (sq->page_nodes[q] != sq->page_nodes[pg])
                return q * P;
    }
    return i1;
}

/* Chunks of sequence sq (at least one, for an empty sequence). */
static long count_chunks(const ws_attn_seq *sq, int P, long chunk, int numa)
{
    long c = 0;
    for (long i0 = 0;; c++) {
        long i1 = chunk_end(sq, P, i0, chunk, numa);
        if (i1 >= items(sq))
            return c + 1;
        i0 = i1;
    }
}

/* The pool node index of the page holding item i of sequence sq, -1 if unknown. */
static int item_node(const ws_attn_seq *sq, int P, long i, const ws_pool *pool)
{
    if (!sq->page_nodes || i >= items(sq))
        return -1;
    const long tok = sq->sel ? sq->sel[i] : i;
    return ws_pool_node_index(pool, sq->page_nodes[tok / P]);
}

int ws_attn_cpu(const ws_attn_problem *p, ws_pool *pool, ws_isa isa, ws_err *err)
{
    return ws_attn_cpu_prec(p, pool, isa, WS_PREC_AUTO, err);
}

int ws_attn_cpu_prec(const ws_attn_problem *p, ws_pool *pool, ws_isa isa, ws_attn_prec prec,
                     ws_err *err)
{
    int rc = ws_attn_validate(p, err);
    if (rc)
        return rc;
    const ws_kv_layout *kv = &p->kv;
    if (kv->d_k % 16 || kv->d_v % 16)
        return ws_err_set(err, WS_EUNSUP,
                          "CPU attention: head dims d_k=%d d_v=%d must be multiples of 16",
                          kv->d_k, kv->d_v);
    const int G = p->n_q_heads / kv->n_kv_heads;
    if (G > WS_ATTN_CPU_MAX_GROUP)
        return ws_err_set(err, WS_EUNSUP, "CPU attention: group of %d query heads per KV head "
                          "is more than %d", G, WS_ATTN_CPU_MAX_GROUP);
    ws_isa path;
    if ((rc = ws_isa_resolve(isa, &path, err)) || (rc = ws_attn_prec_resolve(prec, &prec, err)))
        return rc;
    if (p->n_seqs == 0)
        return 0;

    job jb = {.p = p, .ops = ops_for(path), .G = G, .dk = kv->d_k, .dv = kv->d_v,
              .pf_dist = PF_DIST};
    const int threads = pool ? ws_pool_threads(pool) : 1, nkv = kv->n_kv_heads;

    /* Chunk length: about TASKS_PER_THREAD tasks per thread over all (seq, kv head)
     * units, never below MIN_CHUNK; one chunk per unit with a single thread. */
    double total = 0;
    for (int s = 0; s < p->n_seqs; s++)
        total += items(&p->seqs[s]);
    long chunk = 1L << 30;
    if (threads > 1) {
        double want = ceil(total * nkv / ((double)threads * TASKS_PER_THREAD));
        chunk = want < MIN_CHUNK ? MIN_CHUNK : (long)want;
        chunk = (chunk + WS_ATTN_CPU_BLOCK - 1) / WS_ATTN_CPU_BLOCK * WS_ATTN_CPU_BLOCK;
    }
    /* On a pool over several NUMA nodes, chunks end where the pages change node and each
     * task runs on its chunk's node (ws_pool_run_affine). */
    const int numa = pool && ws_pool_nodes(pool) > 1, P = kv->page_tokens;
    long n_tasks = 0, n_units = 0, n_parts = 0;
    for (int s = 0; s < p->n_seqs; s++) {
        const long c = count_chunks(&p->seqs[s], P, chunk, numa);
        n_tasks += c * nkv;
        if (c > 1) {
            n_units += nkv;
            n_parts += c * nkv;
        }
    }
    /* Head slices: where the chunks leave threads idle (a short sequence or sparse list at
     * batch 1) and a KV head has many query heads (MLA's 16-128 over one latent head), the
     * group is cut into the fewest slices of a multiple of SLICE_HEADS heads that give every
     * thread a task (or of SLICE_HEADS each), each a task over the same tokens. A slice
     * reads the tokens again (from the caches, mostly) but needs no merge. Top-512 at batch
     * 1 on 2 threads, one 512-token chunk (bench, alternating builds): DeepSeek-V4-Flash's
     * 64 heads in two slices 0.50-0.73 of the time (in 256-token chunks instead 1.05: each
     * merges 64 x 512 partial outputs, 128 KB, from the other core), DeepSeek-V2-Lite's 16
     * in two 0.76-0.87. Not done where tasks suffice: on one thread four slices took 1.18
     * of the time and 16-head slices of batch 8 (top-2048 or 8192 tokens dense) 1.06-1.29. */
    int hs = 1;
    const int groups = G % SLICE_HEADS ? 1 : G / SLICE_HEADS; /* the most slices */
    while (threads > 1 && hs < groups && n_tasks * hs < threads) {
        hs++;
        while (groups % hs) /* equal slices: a divisor of groups */
            hs++;
    }
    n_tasks *= hs;
    /* GQA on the VDPBF16PS loop, every (sequence, KV head) one dense chunk and at least two
     * sequences per thread: a task per sequence walks its pages once, each page's KV heads
     * in turn (ws_attn_cpu_dp_attend), instead of once per KV head. */
    const cpu_loop loop = loop_for(kv, p->n_q_heads, path, prec);
    int group_kv = loop == LOOP_DP && !kv->v_shares_k && nkv > 1 && hs == 1 && n_units == 0 &&
                   p->n_seqs >= 2 * threads;
    for (int s = 0; s < p->n_seqs && group_kv; s++)
        group_kv = !p->seqs[s].sel;
    if (group_kv)
        n_tasks = p->n_seqs;
    if (n_tasks > (1L << 30))
        return ws_err_set(err, WS_EINVAL, "CPU attention: problem too large (%ld tasks)", n_tasks);

    /* One allocation: tasks, units, partial states, q halves, per-thread scratch. */
    const int B = WS_ATTN_CPU_BLOCK;
    jb.scratch_bytes = align64(sizeof(void *) * 2 * B) +
                       align64(sizeof(float) * ((size_t)B * (kv->d_k + kv->d_v) +
                                                (size_t)G * B + 3 * (size_t)G));
    jb.amx = loop == LOOP_AMX;
    if (jb.amx && ws_attn_cpu_amx_scratch(kv, G) > jb.scratch_bytes)
        jb.scratch_bytes = align64(ws_attn_cpu_amx_scratch(kv, G));
    jb.fma = loop == LOOP_FMA;
    jb.dp = loop == LOOP_DP;
    jb.exact = prec != WS_PREC_BF16;
    if (jb.fma && ws_attn_cpu_fma_scratch(kv, G) > jb.scratch_bytes)
        jb.scratch_bytes = align64(ws_attn_cpu_fma_scratch(kv, G));
    if (jb.dp && ws_attn_cpu_dp_scratch(kv, G, group_kv ? nkv : 1) > jb.scratch_bytes)
        jb.scratch_bytes = align64(ws_attn_cpu_dp_scratch(kv, G, group_kv ? nkv : 1));
    const int use_bf16 =
        !jb.amx && !jb.fma && !jb.dp && jb.ops->qk_bf16 && kv->dtype == WS_DT_BF16 && !kv->k_tiles;
    const size_t nq_elems = (size_t)p->n_seqs * p->n_q_heads * kv->d_k;
    size_t off_nodes = align64(sizeof(task) * (size_t)n_tasks);
    size_t off_units = off_nodes + (numa ? align64(sizeof(int) * (size_t)n_tasks) : 0);
    size_t off_po = off_units + align64(sizeof(unit) * (size_t)n_units);
    size_t off_pl = off_po + align64(sizeof(float) * (size_t)n_parts * G * kv->d_v);
    size_t off_q = off_pl + align64(sizeof(float) * (size_t)n_parts * G);
    size_t off_qr = off_q + (use_bf16 ? 2 * align64(sizeof(uint16_t) * nq_elems) : 0);
    const int round_q = prec == WS_PREC_BF16;
    size_t off_scr = off_qr + (round_q ? align64(sizeof(float) * nq_elems) : 0);
    size_t total_bytes = off_scr + jb.scratch_bytes * (size_t)threads;
    char *mem = aligned_alloc(64, align64(total_bytes));
    if (!mem)
        return ws_err_set(err, WS_ENOMEM, "CPU attention: out of memory (%zu bytes of scratch)",
                          total_bytes);
    jb.tasks = (task *)mem;
    int *task_node = numa ? (int *)(mem + off_nodes) : NULL;
    jb.units = (unit *)(mem + off_units);
    jb.part_o = (float *)(mem + off_po);
    jb.part_lse = (float *)(mem + off_pl);
    jb.scratch = mem + off_scr;
    /* The bf16 precision takes q as bf16 (the model's activations; GPU kernels take q so):
     * every loop attends the rounded q. */
    ws_attn_problem pq;
    if (round_q) {
        float *qr = (float *)(mem + off_qr);
        for (size_t i = 0; i < nq_elems; i++)
            qr[i] = ws_bf16_to_f32(ws_f32_to_bf16(p->q[i]));
        pq = *p;
        pq.q = qr;
        jb.p = p = &pq;
    }
    for (int t = 0; jb.amx && t < threads; t++) /* no packed queries yet (attn_cpu_amx.h) */
        memset(jb.scratch + (size_t)t * jb.scratch_bytes, 0, 64);
    if (use_bf16) {
        uint16_t *hi = (uint16_t *)(mem + off_q);
        uint16_t *lo = (uint16_t *)(mem + off_q + align64(sizeof(uint16_t) * nq_elems));
        for (size_t i = 0; i < nq_elems; i++) {
            hi[i] = ws_f32_to_bf16(p->q[i]);
            lo[i] = ws_f32_to_bf16(p->q[i] - ws_bf16_to_f32(hi[i]));
        }
        jb.qhi = hi;
        jb.qlo = lo;
    }

    long ti = 0, ui = 0, part = 0;
    for (int s = 0; s < p->n_seqs && group_kv; s++) {
        if (numa)
            task_node[ti] = item_node(&p->seqs[s], P, 0, pool);
        jb.tasks[ti++] = (task){.seq = s, .kvh = 0, .nkv = nkv, .nh = G, .i1 = items(&p->seqs[s]),
                                .part = -1};
    }
    for (int s = 0; s < p->n_seqs && !group_kv; s++) {
        const ws_attn_seq *sq = &p->seqs[s];
        const long c = count_chunks(sq, P, chunk, numa);
        for (int h = 0; h < nkv; h++) {
            if (c > 1)
                jb.units[ui++] = (unit){s, h, (int)part, (int)c};
            for (long k = 0, i0 = 0, i1; k < c; k++, i0 = i1) {
                i1 = chunk_end(sq, P, i0, chunk, numa);
                const int part_k = c > 1 ? (int)part : -1;
                const int node = numa ? item_node(sq, P, i0, pool) : -1;
                for (int x = 0; x < hs; x++) { /* a chunk's slices one after another */
                    if (numa)
                        task_node[ti] = node;
                    jb.tasks[ti++] = (task){.seq = s,
                                            .kvh = h,
                                            .nkv = 1,
                                            .h0 = x * (G / hs),
                                            .nh = G / hs,
                                            .i0 = (int)i0,
                                            .i1 = (int)i1,
                                            .part = part_k};
                }
                if (c > 1)
                    part++;
            }
        }
    }
    if (pool) {
        ws_pool_run_affine(pool, (int)n_tasks, task_node, run_task, &jb);
        if (n_units)
            ws_pool_run(pool, (int)n_units, run_merge, &jb);
    } else {
        for (long i = 0; i < n_tasks; i++)
            run_task(&jb, (int)i, 0);
        for (long i = 0; i < n_units; i++)
            run_merge(&jb, (int)i, 0);
    }
    free(mem);
    return 0;
}
