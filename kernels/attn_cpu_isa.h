/* attn_cpu_isa: the inner operations of the CPU attention kernel, one table per
 * instruction path (attn_cpu_scalar.c, attn_cpu_avx2.c, attn_cpu_avx512.c). Internal to
 * kernels/: the driver in attn_cpu.c gathers a block of at most WS_ATTN_CPU_BLOCK token
 * rows and calls these on it; calib/probe/membw.c reuses the paths' names for its probes.
 *
 * Conventions: rows are pointers to KV rows inside pages (16-bit elements); fp32 blocks
 * are row-major with a leading dimension (ld) in floats; d is a multiple of 16; G is the
 * number of query heads that share the KV head (1..WS_ATTN_CPU_MAX_GROUP). */
#ifndef WS_ATTN_CPU_ISA_H
#define WS_ATTN_CPU_ISA_H

#include <stdint.h>

#include "attn_cpu.h"
#include "ws_dtype.h"

typedef struct ws_attn_cpu_ops {
    ws_isa isa;
    /* dst[r*ld + i] = float(rows[r][i]) for r < n, i < d. */
    void (*cvt)(float *dst, int ld, const uint16_t *const *rows, int n, int d, ws_dtype dt);
    /* s[g*lds + t] = scale * dot(q[g*dk ..], kf[t*ldk ..]) for g < G, t < n. */
    void (*qk)(const float *q, int G, int dk, const float *kf, int ldk, int n, float scale,
               float *s, int lds);
    /* The same straight from bf16 rows, q given as bf16 hi/lo halves qhi[g*dk], qlo[g*dk]
     * (q ~= hi + lo); NULL on paths without VDPBF16PS. */
    void (*qk_bf16)(const uint16_t *qhi, const uint16_t *qlo, int G, int dk,
                    const uint16_t *const *rows, int n, float scale, float *s, int lds);
    /* o[g*dv + i] += sum_t p[g*ldp + t] * vf[t*ldv + i] for g < G, i < dv, t < n. */
    void (*pv)(float *o, int G, int dv, const float *p, int ldp, const float *vf, int ldv,
               int n);
    /* x[i] = exp(x[i]) for i < n; inputs are <= 0 (finite). */
    void (*expv)(float *x, int n);
    /* Online-softmax step on a block of scores s[g*n + j], g < G, j < n <= 16: with
     * mx = max(m[g], max_j s), alpha[g] = exp(m[g] - mx) (0 when m[g] = -inf, 1 when the
     * max did not move), s = exp(s - mx), l[g] = alpha l[g] + sum_j s, m[g] = mx. */
    void (*softmax)(float *s, int G, int n, float *m, float *l, float *alpha);
} ws_attn_cpu_ops;

const ws_attn_cpu_ops *ws_attn_cpu_ops_scalar(void);
const ws_attn_cpu_ops *ws_attn_cpu_ops_avx2(void);
const ws_attn_cpu_ops *ws_attn_cpu_ops_avx512(void);
const ws_attn_cpu_ops *ws_attn_cpu_ops_avx512bf16(void);

/* The bytes holding token t's K and V for KV head kvh: K's row, or with K in tiles its
 * tile of 16 tokens (the token's pairs are spread over it); V's row, or with V in pairs its
 * pair row (2 d_v elements); *v_len is 0 when V shares K's row. */
static inline void ws_attn_row_bytes(const ws_attn_seq *sq, const ws_kv_layout *kv, int kvh, int t,
                                     const char **k, size_t *k_len, const char **v, size_t *v_len)
{
    const int P = kv->page_tokens;
    const char *pg = (const char *)sq->pages[t / P];
    *k = pg + 2 * ws_kv_k_off(kv, kvh, kv->k_tiles ? t % P & ~15 : t % P);
    *k_len = (size_t)(kv->k_tiles ? 32 : 2) * (size_t)kv->d_k;
    *v = kv->v_shares_k ? NULL
                        : pg + 2 * (kv->v_pairs ? ws_kv_v_pair_off(kv, kvh, t % P)
                                                : ws_kv_v_off(kv, kvh, t % P));
    *v_len = kv->v_shares_k ? 0 : (size_t)(kv->v_pairs ? 4 : 2) * (size_t)kv->d_v;
}

/* Software prefetch of token t's K and V bytes (ws_attn_row_bytes): for sparse lists, whose
 * rows the hardware prefetcher cannot guess. */
static inline void ws_attn_prefetch_row(const ws_attn_seq *sq, const ws_kv_layout *kv, int kvh,
                                        int t)
{
    const char *k, *v;
    size_t kn, vn;
    ws_attn_row_bytes(sq, kv, kvh, t, &k, &kn, &v, &vn);
    for (size_t b = 0; b < kn; b += 64)
        __builtin_prefetch(k + b);
    for (size_t b = 0; b < vn; b += 64)
        __builtin_prefetch(v + b);
}

/* 1 if items [it, it + 16) of the sequence (n of them left, at least 16 needed) are 16
 * consecutive tokens; *t0 gets the token of item it either way. */
static inline int ws_attn_run16(const ws_attn_seq *sq, int it, int n, int *t0)
{
    const int tf = sq->sel ? sq->sel[it] : it;
    *t0 = tf;
    if (n < 16)
        return 0;
    if (sq->sel)
        for (int j = 1; j < 16; j++)
            if (sq->sel[it + j] != tf + j)
                return 0;
    return 1;
}

#endif
