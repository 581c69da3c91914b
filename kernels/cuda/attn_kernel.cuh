/* attn_kernel: the device code of the GPU decode attention (pass 1: split-K chunks;
 * pass 2: lse reduction) and the host-side plan of a launch (block shape, chunk list,
 * metadata), kept apart from the CUDA API so that the same source compiles twice:
 *
 *   - with nvcc in kernels/cuda/cuda_attn.cu, which launches it on the GPU;
 *   - with a C++ compiler in tests/gpu/attn_emu.cpp, which runs every thread block on the
 *     CPU (one std::thread per CUDA thread, real barriers and lane exchanges) and compares
 *     the result with ws_attn_ref in the ordinary test suite, so the kernel's indexing,
 *     chunking, masking and reductions are checked on machines without a GPU.
 *
 * The includer defines first: WS_DEV (function qualifiers), WS_DYN_SMEM(name) (the dynamic
 * shared-memory array), cp_async16 / cp_async_commit / cp_async_wait<N>, ws_h2f2 (two fp16
 * in a 32-bit word to float2), __shfl_xor_sync, __syncthreads, threadIdx / blockIdx /
 * blockDim, min, and the CUDA vector types uint4, int4, float2 with make_int4/make_uint4.
 * A kernel variant is (d_k, d_v, V inside K, heads per thread, tile tokens, tokens per
 * softmax update): WS_ATTN_VARIANTS lists the compiled ones. */
#ifndef WS_ATTN_KERNEL_CUH
#define WS_ATTN_KERNEL_CUH

#include <math.h>
#include <stdint.h>
#include <stddef.h>

#include "attn_split.h"

#define WS_ATTN_VARIANTS(X)                                                                  \
    X(64, 64, false, 4, 64, 4)                                                               \
    X(128, 128, false, 4, 64, 4)                                                             \
    X(256, 256, false, 2, 32, 2)                                                             \
    X(576, 512, true, 1, 32, 1)

namespace ws_attn_k {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr int kLanes = 8;       /* lanes splitting one head row (16 bytes each) */
constexpr int kMaxThreads = 128;


/* Per-call arguments of pass 1 and pass 2 (device pointers). */
struct attn_args {
    const uint16_t *const *pages; /* flattened page tables */
    const int4 *chunks;           /* (seq, begin, end, single) per chunk */
    const int *seq_page0;         /* first page-table entry of each sequence */
    const int *seq_first, *seq_count;
    const float *q;
    float *o, *lse;
    float *part_o, *part_lse;     /* [chunk][n_q][d_v], [chunk][n_q] */
    int n_q, n_kvh, group, n_sub, bdy, bdz, page_tokens, d_v;
    float scale_log2;             /* softmax scale * log2(e) */
};

/* Eight 16-bit values to float. bf16 -> f32 is a shift, valid on every architecture; the
 * bf16 kernels are nevertheless only built for sm_80+ (see attn_kernel). */
template <bool BF16> WS_DEV void cvt8(const uint4 &u, float *f)
{
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if constexpr (BF16) {
            f[2 * i] = __uint_as_float(w[i] << 16);
            f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        } else {
            const float2 v = ws_h2f2(w[i]);
            f[2 * i] = v.x;
            f[2 * i + 1] = v.y;
        }
    }
}

/* NK, NV: 16-byte vectors per lane of a K / V row (d_k = 64 NK, d_v = 64 NV); HPT: query
 * heads per thread; SHARE: V is the first d_v elements of the K row; TILE: tokens per
 * shared-memory stage; GT: tokens a thread scores before one softmax update (fewer for
 * wide rows, to stay in registers). */
template <bool BF16, int NK, int NV, int HPT, bool SHARE, int TILE, int GT>
WS_DEV void attn_body(const attn_args &a)
{
    constexpr int DK = NK * 64, DV = NV * 64;
    constexpr int VK = DK / 8, VV = SHARE ? 0 : DV / 8; /* 16-byte vectors per row */
    constexpr int ROW = (VK + VV) * 8;                  /* elements per token in smem */
    WS_DYN_SMEM(smem_raw);
    uint16_t *tiles = reinterpret_cast<uint16_t *>(smem_raw); /* [2][TILE][ROW] */
    __shared__ const uint16_t *rows[2][2][TILE];             /* [stage][k|v][row] */

    const int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
    const int bdy = a.bdy, bdz = a.bdz;
    const int tid = (tz * bdy + ty) * kLanes + tx, nthr = kLanes * bdy * bdz;
    /* The 8 lanes of one (ty, tz) row: lanes of other rows in the warp may run a different
     * number of token groups, so shuffles name only this row's lanes. */
    const unsigned row_mask = 0xffu << ((tid & 31) & ~(kLanes - 1));
    const int sub = blockIdx.x % a.n_sub;
    const int kvh = (blockIdx.x / a.n_sub) % a.n_kvh;
    const int chunk = blockIdx.x / (a.n_sub * a.n_kvh);
    const int4 ch = a.chunks[chunk];
    const int seq = ch.x, begin = ch.y, end = ch.z;
    const int P = a.page_tokens;
    const uint16_t *const *ptab = a.pages + a.seq_page0[seq];

    /* Query slices in registers, pre-scaled into the log2 domain; heads past the group
     * compute with q = 0 and are not written. */
    float q[HPT][NK * 8];
#pragma unroll
    for (int h = 0; h < HPT; h++) {
        const int g = (sub * bdy + ty) * HPT + h;
        const float *qp = a.q + ((size_t)seq * a.n_q + (size_t)kvh * a.group + g) * DK;
#pragma unroll
        for (int c = 0; c < NK; c++)
#pragma unroll
            for (int e = 0; e < 8; e++)
                q[h][c * 8 + e] = g < a.group ? qp[c * 64 + tx * 8 + e] * a.scale_log2 : 0.0f;
    }
    float m[HPT], l[HPT], acc[HPT][NV * 8];
#pragma unroll
    for (int h = 0; h < HPT; h++) {
        m[h] = -INFINITY;
        l[h] = 0.0f;
#pragma unroll
        for (int e = 0; e < NV * 8; e++)
            acc[h][e] = 0.0f;
    }

    const size_t v_block = (size_t)a.n_kvh * P * DK;
    auto set_rows = [&](int st, int tile_begin) {
        for (int j = tid; j < TILE; j += nthr) {
            const int t = tile_begin + j;
            const uint16_t *k = nullptr, *v = nullptr;
            if (t < end) {
                const uint16_t *pg = ptab[t / P];
                const int off = t % P;
                k = pg + ((size_t)kvh * P + off) * DK;
                v = SHARE ? k : pg + v_block + ((size_t)kvh * P + off) * DV;
            }
            rows[st][0][j] = k;
            rows[st][1][j] = v;
        }
    };
    auto issue = [&](int st) {
        uint16_t *dst = tiles + (size_t)st * TILE * ROW;
        for (int i = tid; i < TILE * (VK + VV); i += nthr) {
            const int j = i / (VK + VV), vec = i % (VK + VV);
            const bool is_k = vec < VK;
            const uint16_t *src = rows[st][is_k ? 0 : 1][j];
            const bool ok = src != nullptr;
            const uint16_t *from = ok ? src + (is_k ? vec : vec - VK) * 8 : (const uint16_t *)a.q;
            cp_async16(dst + (size_t)j * ROW + vec * 8, from, ok);
        }
        cp_async_commit();
    };

    const int n_tiles = (end - begin + TILE - 1) / TILE;
    set_rows(0, begin);
    __syncthreads();
    issue(0);
    for (int it = 0; it < n_tiles; it++) {
        const int st = it & 1;
        if (it + 1 < n_tiles) {
            set_rows(st ^ 1, begin + (it + 1) * TILE);
            __syncthreads();
            issue(st ^ 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const uint16_t *tile = tiles + (size_t)st * TILE * ROW;
        const int n_valid = min(TILE, end - (begin + it * TILE));
        for (int j0 = tz * GT; j0 < n_valid; j0 += bdz * GT) {
            float s[GT][HPT];
#pragma unroll
            for (int u = 0; u < GT; u++) {
#pragma unroll
                for (int h = 0; h < HPT; h++)
                    s[u][h] = 0.0f;
                const uint16_t *krow = tile + (size_t)(j0 + u) * ROW;
#pragma unroll
                for (int c = 0; c < NK; c++) {
                    float kf[8];
                    cvt8<BF16>(*reinterpret_cast<const uint4 *>(krow + c * 64 + tx * 8), kf);
#pragma unroll
                    for (int h = 0; h < HPT; h++)
#pragma unroll
                        for (int e = 0; e < 8; e++)
                            s[u][h] = fmaf(q[h][c * 8 + e], kf[e], s[u][h]);
                }
            }
#pragma unroll
            for (int u = 0; u < GT; u++)
#pragma unroll
                for (int h = 0; h < HPT; h++) {
                    float v = s[u][h];
                    v += __shfl_xor_sync(row_mask, v, 4, kLanes);
                    v += __shfl_xor_sync(row_mask, v, 2, kLanes);
                    v += __shfl_xor_sync(row_mask, v, 1, kLanes);
                    s[u][h] = j0 + u < n_valid ? v : -INFINITY;
                }
#pragma unroll
            for (int h = 0; h < HPT; h++) {
                float mn = m[h];
#pragma unroll
                for (int u = 0; u < GT; u++)
                    mn = fmaxf(mn, s[u][h]);
                /* mn is finite: j0 < n_valid, so token j0 is valid. */
                const float alpha = exp2f(m[h] - mn);
                m[h] = mn;
                l[h] *= alpha;
#pragma unroll
                for (int e = 0; e < NV * 8; e++)
                    acc[h][e] *= alpha;
#pragma unroll
                for (int u = 0; u < GT; u++) {
                    s[u][h] = exp2f(s[u][h] - mn);
                    l[h] += s[u][h];
                }
            }
#pragma unroll
            for (int u = 0; u < GT; u++) {
                const uint16_t *vrow = tile + (size_t)(j0 + u) * ROW + (SHARE ? 0 : DK);
#pragma unroll
                for (int c = 0; c < NV; c++) {
                    float vf[8];
                    cvt8<BF16>(*reinterpret_cast<const uint4 *>(vrow + c * 64 + tx * 8), vf);
#pragma unroll
                    for (int h = 0; h < HPT; h++)
#pragma unroll
                        for (int e = 0; e < 8; e++)
                            acc[h][c * 8 + e] = fmaf(s[u][h], vf[e], acc[h][c * 8 + e]);
                }
            }
        }
        __syncthreads(); /* the stage is overwritten two iterations later */
    }

    /* Combine the bdz token lanes of each (ty, head) through shared memory (the tiles are
     * free now): red_o [bdz][bdy][HPT][DV], red_m / red_l [bdz][bdy][HPT]. */
    float *red_o = reinterpret_cast<float *>(smem_raw);
    float *red_m = red_o + (size_t)bdz * bdy * HPT * DV;
    float *red_l = red_m + bdz * bdy * HPT;
#pragma unroll
    for (int h = 0; h < HPT; h++) {
        const int r = (tz * bdy + ty) * HPT + h;
        if (tx == 0) {
            red_m[r] = m[h];
            red_l[r] = l[h];
        }
#pragma unroll
        for (int c = 0; c < NV; c++)
#pragma unroll
            for (int e = 0; e < 8; e++)
                red_o[(size_t)r * DV + c * 64 + tx * 8 + e] = acc[h][c * 8 + e];
    }
    __syncthreads();
    if (tz != 0)
        return;
    const bool single = ch.w != 0;
#pragma unroll
    for (int h = 0; h < HPT; h++) {
        const int g = (sub * bdy + ty) * HPT + h;
        if (g >= a.group)
            continue;
        float mx = -INFINITY;
        for (int z = 0; z < bdz; z++)
            mx = fmaxf(mx, red_m[(z * bdy + ty) * HPT + h]);
        float sum = 0.0f;
        for (int z = 0; z < bdz; z++) {
            const int r = (z * bdy + ty) * HPT + h;
            sum += (red_m[r] == -INFINITY ? 0.0f : exp2f(red_m[r] - mx)) * red_l[r];
        }
        const int qh = kvh * a.group + g;
        float *out_o;
        float *out_l;
        if (single) {
            out_o = a.o + ((size_t)seq * a.n_q + qh) * DV;
            out_l = a.lse + (size_t)seq * a.n_q + qh;
        } else {
            out_o = a.part_o + ((size_t)chunk * a.n_q + qh) * DV;
            out_l = a.part_lse + (size_t)chunk * a.n_q + qh;
        }
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
        for (int c = 0; c < NV; c++)
#pragma unroll
            for (int e = 0; e < 8; e++) {
                const int d = c * 64 + tx * 8 + e;
                float o = 0.0f;
                for (int z = 0; z < bdz; z++) {
                    const int r = (z * bdy + ty) * HPT + h;
                    const float wz = red_m[r] == -INFINITY ? 0.0f : exp2f(red_m[r] - mx);
                    o += wz * red_o[(size_t)r * DV + d];
                }
                out_o[d] = o * inv;
            }
        if (tx == 0)
            *out_l = sum > 0.0f ? (mx + log2f(sum)) * kLn2 : -INFINITY;
    }
}

/* Pass 2: one block per (sequence, query head) with more (or fewer) than one chunk. */
WS_DEV void reduce_body(const attn_args &a)
{
    const int row = blockIdx.x, seq = row / a.n_q, qh = row % a.n_q;
    const int n = a.seq_count[seq], first = a.seq_first[seq];
    if (n == 1)
        return; /* pass 1 wrote it */
    float mx = -INFINITY;
    for (int i = 0; i < n; i++)
        mx = fmaxf(mx, a.part_lse[(size_t)(first + i) * a.n_q + qh]);
    float *o = a.o + (size_t)row * a.d_v;
    if (mx == -INFINITY) {
        for (int d = threadIdx.x; d < a.d_v; d += blockDim.x)
            o[d] = 0.0f;
        if (threadIdx.x == 0)
            a.lse[row] = -INFINITY;
        return;
    }
    float sum = 0.0f;
    for (int i = 0; i < n; i++)
        sum += expf(a.part_lse[(size_t)(first + i) * a.n_q + qh] - mx);
    for (int d = threadIdx.x; d < a.d_v; d += blockDim.x) {
        float acc = 0.0f;
        for (int i = 0; i < n; i++) {
            const size_t c = (size_t)(first + i) * a.n_q + qh;
            acc += expf(a.part_lse[c] - mx) * a.part_o[c * a.d_v + d];
        }
        o[d] = acc / sum;
    }
    if (threadIdx.x == 0)
        a.lse[row] = mx + logf(sum);
}

/* Dynamic shared memory of a variant: two stages of tile tokens. */
inline size_t smem_bytes(int d_k, int d_v, int share, int tile)
{
    return (size_t)2 * tile * (d_k + (share ? 0 : d_v)) * 2;
}

/* The launch of one call, decided on the host. */
struct plan {
    int bdy, bdz, n_sub;     /* block (8, bdy, bdz); sub-groups of query heads per KV head */
    int blocks_per_chunk;    /* n_kv_heads x n_sub */
    int chunk_tokens, n_chunks;
    int need_pass2;          /* some sequence has != 1 chunk */
};

/* Block shape: bdy thread rows of hpt heads (at most 16 heads a block), bdz token lanes,
 * 8 x bdy x bdz <= 128 threads; then the chunk list (ws_attn_split). forced_chunk > 0 is
 * rounded up to the tile; otherwise the length aims at 4 blocks per SM. Returns 0, or -1
 * when a forced chunk length needs more than max_chunks chunks. */
inline int make_plan(const ws_attn_problem *p, int hpt, int tile, int gt, int n_sm,
                     int forced_chunk, ws_attn_chunk *chunks, int max_chunks, int *first,
                     int *count, plan *out)
{
    const int group = p->n_q_heads / p->kv.n_kv_heads;
    const int rows_needed = (group + hpt - 1) / hpt;
    out->bdy = rows_needed < 16 / hpt ? rows_needed : 16 / hpt;
    out->n_sub = (group + out->bdy * hpt - 1) / (out->bdy * hpt);
    out->bdz = (kMaxThreads / kLanes) / out->bdy;
    if (out->bdz > tile / gt)
        out->bdz = tile / gt;
    if (out->bdz < 1)
        out->bdz = 1;
    out->blocks_per_chunk = p->kv.n_kv_heads * out->n_sub;
    int ct = forced_chunk > 0 ? (forced_chunk + tile - 1) / tile * tile
                              : ws_attn_split_chunk_tokens(p, out->blocks_per_chunk, 4 * n_sm,
                                                           tile, 2 * tile);
    int n;
    while ((n = ws_attn_split(p, ct, chunks, max_chunks, first, count)) < 0) {
        if (forced_chunk > 0)
            return -1;
        ct *= 2;
    }
    out->chunk_tokens = ct;
    out->n_chunks = n;
    out->need_pass2 = 0;
    for (int s = 0; s < p->n_seqs; s++)
        out->need_pass2 |= count[s] != 1;
    return 0;
}

/* The metadata pass 1 and 2 read: flattened page tables, chunks (seq, begin, end, single),
 * each sequence's first page entry, first chunk and chunk count. */
inline void fill_meta(const ws_attn_problem *p, const ws_attn_chunk *chunks, int n_chunks,
                      const int *first, const int *count, const void **pt, int4 *chk,
                      int *page0, int *first_out, int *count_out)
{
    int np = 0;
    for (int i = 0; i < p->n_seqs; i++) {
        page0[i] = np;
        const int n = (p->seqs[i].n_tokens + p->kv.page_tokens - 1) / p->kv.page_tokens;
        for (int k = 0; k < n; k++)
            pt[np++] = p->seqs[i].pages[k];
        first_out[i] = first[i];
        count_out[i] = count[i];
    }
    for (int c = 0; c < n_chunks; c++)
        chk[c] = make_int4(chunks[c].seq, chunks[c].begin, chunks[c].end,
                           count[chunks[c].seq] == 1);
}

} /* namespace ws_attn_k */
#endif
