/* cuda_attn: paged decode attention on the GPU (flash-decoding split-K with an lse
 * reduction) and the GPU merge of partial states; the contract is kernels/attn.h, the
 * chunking is kernels/attn_split.c (shared with its CPU model), the oracle ws_attn_ref.
 *
 * Pass 1 (attn_kernel): one thread block per (chunk, KV head, sub-group of query heads).
 * The block streams its chunk's K/V rows through shared memory in tiles (cp.async double
 * buffering on sm_80+, plain loads on sm_70), so every KV byte is read from HBM once per
 * block and serves all query heads of the sub-group (GQA group, or 16 MLA heads). Thread
 * (tx, ty, tz): 8 lanes tx split the head dimension in 16-byte vectors, ty picks HPT query
 * heads, tz interleaves groups of 4 tokens; each thread keeps an online softmax (log2
 * domain) and the lanes of a block are combined at the end. A sequence with one chunk is
 * written straight to the output; otherwise each chunk writes a normalised partial
 * (o, natural lse) and pass 2 (reduce_kernel) reduces a sequence's partials exactly as
 * ws_attn_reduce_row does. Compiled head shapes: d = 64, 128, 256 (GQA, separate V) and
 * 576/512 with V inside K (MLA absorbed); bf16 kernels only for sm_80+. */
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_split.h"
#include "cuda_util.h"

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define WS_CU_ASYNC_COPY 1 /* cp.async exists (device pass for sm_80+, and the host pass) */
#endif

namespace {

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

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool valid)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    int n = valid ? 16 : 0; /* 0 source bytes: the 16 bytes are zero-filled */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
#else
    *(uint4 *)smem = valid ? *(const uint4 *)gmem : make_uint4(0, 0, 0, 0);
#endif
}

__device__ __forceinline__ void cp_async_commit()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/* Eight 16-bit values to float. bf16 -> f32 is a shift, valid on every architecture; the
 * bf16 kernels are nevertheless only built for sm_80+ (see attn_kernel). */
template <bool BF16> __device__ __forceinline__ void cvt8(const uint4 &u, float *f)
{
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if constexpr (BF16) {
            f[2 * i] = __uint_as_float(w[i] << 16);
            f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        } else {
            __half2 h = *reinterpret_cast<const __half2 *>(&w[i]);
            float2 v = __half22float2(h);
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
__device__ __forceinline__ void attn_body(const attn_args &a)
{
    constexpr int DK = NK * 64, DV = NV * 64;
    constexpr int VK = DK / 8, VV = SHARE ? 0 : DV / 8; /* 16-byte vectors per row */
    constexpr int ROW = (VK + VV) * 8;                  /* elements per token in smem */
    extern __shared__ __align__(16) unsigned char smem_raw[];
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

template <bool BF16, int NK, int NV, int HPT, bool SHARE, int TILE, int GT>
__global__ void __launch_bounds__(kMaxThreads) attn_kernel(attn_args a)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    if constexpr (BF16) {
        __trap(); /* no bf16 on this architecture; the host refuses before launching */
    } else
#endif
    {
        attn_body<BF16, NK, NV, HPT, SHARE, TILE, GT>(a);
    }
}

/* Pass 2: one block per (sequence, query head) with more (or fewer) than one chunk. */
__global__ void reduce_kernel(attn_args a)
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

__global__ void merge_kernel(const float *o_a, const float *lse_a, const float *o_b,
                             const float *lse_b, float *o_out, float *lse_out, int d_v)
{
    const int r = blockIdx.x;
    const float la = lse_a[r], lb = lse_b[r], mx = fmaxf(la, lb);
    const float *pa = o_a + (size_t)r * d_v, *pb = o_b + (size_t)r * d_v;
    float *out = o_out + (size_t)r * d_v;
    if (mx == -INFINITY) {
        for (int d = threadIdx.x; d < d_v; d += blockDim.x)
            out[d] = 0.0f;
        __syncthreads();
        if (threadIdx.x == 0)
            lse_out[r] = -INFINITY;
        return;
    }
    float wa = expf(la - mx), wb = expf(lb - mx);
    const float sum = wa + wb;
    wa /= sum;
    wb /= sum;
    for (int d = threadIdx.x; d < d_v; d += blockDim.x)
        out[d] = wa * pa[d] + wb * pb[d];
    __syncthreads(); /* lse_out may alias lse_a, which every thread read above */
    if (threadIdx.x == 0)
        lse_out[r] = mx + logf(sum);
}

/* One compiled kernel variant. */
struct variant {
    int d_k, d_v, share, hpt, tile, gt, bf16;
    void (*fn)(attn_args);
};

#define WS_VARIANT(DK, DV, SH, HPT, TILE, GT)                                                \
    {DK, DV, SH, HPT, TILE, GT, 1, attn_kernel<true, DK / 64, DV / 64, HPT, SH, TILE, GT>},  \
    {                                                                                        \
        DK, DV, SH, HPT, TILE, GT, 0, attn_kernel<false, DK / 64, DV / 64, HPT, SH, TILE, GT> \
    }

const variant g_variants[] = {
    WS_VARIANT(64, 64, false, 4, 64, 4),
    WS_VARIANT(128, 128, false, 4, 64, 4),
    WS_VARIANT(256, 256, false, 2, 32, 2),
    WS_VARIANT(576, 512, true, 1, 32, 1),
};

size_t variant_smem(const variant &v)
{
    return (size_t)2 * v.tile * (v.d_k + (v.share ? 0 : v.d_v)) * 2;
}

} /* namespace */

/* The workspace: device metadata + partials, a pinned staging copy of the metadata, and
 * the event that says when the staging buffer may be rewritten. */
struct ws_gpu_attn {
    ws_gpu_attn_limits lim;
    int cc, n_sm;
    void *dev_meta, *host_meta;
    size_t meta_bytes;
    float *part_o, *part_lse;
    cudaEvent_t staged;
    ws_attn_chunk *chunks;      /* host scratch for ws_attn_split */
    int *first, *count;
};

namespace {

size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Section offsets inside the metadata block. */
struct meta_layout {
    size_t pages, chunks, page0, first, count, total;
};

meta_layout meta_sections(const ws_gpu_attn_limits &l)
{
    meta_layout m;
    m.pages = 0;
    m.chunks = align16(m.pages + sizeof(void *) * (size_t)l.max_pages);
    m.page0 = align16(m.chunks + sizeof(int4) * (size_t)l.max_chunks);
    m.first = align16(m.page0 + sizeof(int) * (size_t)l.max_seqs);
    m.count = align16(m.first + sizeof(int) * (size_t)l.max_seqs);
    m.total = align16(m.count + sizeof(int) * (size_t)l.max_seqs);
    return m;
}

} /* namespace */

int cu_current_cc(void)
{
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return 0;
    return major * 10 + minor;
}

void cu_attn_destroy(ws_gpu_attn *a)
{
    if (!a)
        return;
    if (a->staged)
        cudaEventSynchronize(a->staged);
    cudaFree(a->dev_meta);
    cudaFree(a->part_o);
    cudaFree(a->part_lse);
    cudaFreeHost(a->host_meta);
    if (a->staged)
        cudaEventDestroy(a->staged);
    free(a->chunks);
    free(a->first);
    free(a->count);
    free(a);
}

int cu_attn_create(const ws_gpu_attn_limits *lim, ws_gpu_attn **out, ws_err *err)
{
    *out = NULL;
    if (lim->max_seqs <= 0 || lim->max_pages < 0 || lim->max_q_heads <= 0 || lim->max_d_v <= 0 ||
        lim->max_chunks < 0)
        return ws_err_set(err, WS_EINVAL, "GPU attention: limits must be positive");
    ws_gpu_attn *a = (ws_gpu_attn *)calloc(1, sizeof *a);
    if (!a)
        return ws_err_set(err, WS_ENOMEM, "GPU attention: out of memory");
    a->lim = *lim;
    if (a->lim.max_chunks == 0)
        a->lim.max_chunks = 4096;
    if (a->lim.max_chunks < a->lim.max_seqs)
        a->lim.max_chunks = a->lim.max_seqs;
    a->cc = cu_current_cc();
    int dev = 0, rc = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&a->n_sm, cudaDevAttrMultiProcessorCount, dev);
    meta_layout ml = meta_sections(a->lim);
    a->meta_bytes = ml.total;
    a->chunks = (ws_attn_chunk *)malloc(sizeof(ws_attn_chunk) * (size_t)a->lim.max_chunks);
    a->first = (int *)malloc(sizeof(int) * (size_t)a->lim.max_seqs);
    a->count = (int *)malloc(sizeof(int) * (size_t)a->lim.max_seqs);
    if (!a->chunks || !a->first || !a->count) {
        cu_attn_destroy(a);
        return ws_err_set(err, WS_ENOMEM, "GPU attention: out of memory");
    }
    const size_t rows = (size_t)a->lim.max_chunks * a->lim.max_q_heads;
#define CREATE_CHECK(call)                                                                   \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            rc = ws_err_set(err, WS_EDEVICE, "%s:%d: %s: %s", __FILE__, __LINE__, #call,     \
                            cudaGetErrorString(e_));                                         \
            cu_attn_destroy(a);                                                              \
            return rc;                                                                       \
        }                                                                                    \
    } while (0)
    CREATE_CHECK(cudaMalloc(&a->dev_meta, a->meta_bytes));
    CREATE_CHECK(cudaHostAlloc(&a->host_meta, a->meta_bytes, cudaHostAllocDefault));
    CREATE_CHECK(cudaMalloc((void **)&a->part_o, sizeof(float) * rows * a->lim.max_d_v));
    CREATE_CHECK(cudaMalloc((void **)&a->part_lse, sizeof(float) * rows));
    CREATE_CHECK(cudaEventCreateWithFlags(&a->staged, cudaEventDisableTiming));
    for (const variant &v : g_variants) {
        if (v.bf16 && a->cc < 80)
            continue;
        CREATE_CHECK(cudaFuncSetAttribute(v.fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)variant_smem(v)));
    }
#undef CREATE_CHECK
    *out = a;
    return 0;
}

int cu_attn_run(ws_gpu_attn *a, const ws_attn_problem *p, const ws_gpu_attn_opts *opts,
                ws_gpu_stream *s, ws_gpu_attn_stats *stats, ws_err *err)
{
    int rc = ws_attn_validate(p, err);
    if (rc)
        return rc;
    const ws_kv_layout *kv = &p->kv;
    if (kv->dtype == WS_DT_BF16 && a->cc < 80)
        return ws_err_set(err, WS_EUNSUP,
                          "GPU attention: bf16 KV needs compute capability 8.0+ (this device is "
                          "%d.%d); use fp16",
                          a->cc / 10, a->cc % 10);
    const variant *v = NULL;
    for (const variant &c : g_variants)
        if (c.d_k == kv->d_k && c.d_v == kv->d_v && c.share == kv->v_shares_k &&
            c.bf16 == (kv->dtype == WS_DT_BF16))
            v = &c;
    if (!v)
        return ws_err_set(err, WS_EUNSUP,
                          "GPU attention: no kernel for d_k=%d d_v=%d%s (built: 64, 128, 256 with "
                          "separate V; 576/512 with V inside K)",
                          kv->d_k, kv->d_v, kv->v_shares_k ? " (shared V)" : "");
    int n_pages = 0;
    for (int i = 0; i < p->n_seqs; i++) {
        if (p->seqs[i].sel)
            return ws_err_set(err, WS_EUNSUP,
                              "GPU attention: sparse token lists (sel) are not supported on the GPU");
        n_pages += (p->seqs[i].n_tokens + kv->page_tokens - 1) / kv->page_tokens;
    }
    if (p->n_seqs > a->lim.max_seqs || n_pages > a->lim.max_pages ||
        p->n_q_heads > a->lim.max_q_heads || kv->d_v > a->lim.max_d_v)
        return ws_err_set(err, WS_EINVAL,
                          "GPU attention: problem (%d seqs, %d pages, %d heads, d_v %d) exceeds the "
                          "workspace (%d, %d, %d, %d)",
                          p->n_seqs, n_pages, p->n_q_heads, kv->d_v, a->lim.max_seqs,
                          a->lim.max_pages, a->lim.max_q_heads, a->lim.max_d_v);
    if (p->n_seqs == 0)
        return 0;

    /* Thread-block shape: bdy thread rows of HPT heads (at most 16 heads a block), bdz
     * token lanes, 8 x bdy x bdz <= 128 threads. */
    const int group = p->n_q_heads / kv->n_kv_heads;
    const int rows_needed = (group + v->hpt - 1) / v->hpt;
    const int bdy = rows_needed < 16 / v->hpt ? rows_needed : 16 / v->hpt;
    const int n_sub = (group + bdy * v->hpt - 1) / (bdy * v->hpt);
    int bdz = (kMaxThreads / kLanes) / bdy;
    if (bdz > v->tile / v->gt)
        bdz = v->tile / v->gt;
    if (bdz < 1)
        bdz = 1;

    const int blocks_per_chunk = kv->n_kv_heads * n_sub;
    int chunk_tokens;
    if (opts && opts->chunk_tokens > 0)
        chunk_tokens = (opts->chunk_tokens + v->tile - 1) / v->tile * v->tile;
    else
        chunk_tokens = ws_attn_split_chunk_tokens(p, blocks_per_chunk, 4 * a->n_sm, v->tile,
                                                  2 * v->tile);
    int n_chunks;
    while ((n_chunks = ws_attn_split(p, chunk_tokens, a->chunks, a->lim.max_chunks, a->first,
                                     a->count)) < 0) {
        if (opts && opts->chunk_tokens > 0)
            return ws_err_set(err, WS_EINVAL,
                              "GPU attention: chunks of %d tokens exceed the workspace's %d chunks",
                              chunk_tokens, a->lim.max_chunks);
        chunk_tokens *= 2;
    }
    if ((long)n_chunks * blocks_per_chunk > 0x7fffffffL)
        return ws_err_set(err, WS_EINVAL, "GPU attention: grid too large");

    /* Stage the metadata (page tables, chunks, per-sequence indices) and copy it in one
     * transfer; the staging buffer is reused only after the previous copy has finished. */
    WS_CU(err, cudaEventSynchronize(a->staged));
    meta_layout ml = meta_sections(a->lim);
    char *hm = (char *)a->host_meta;
    const void **pt = (const void **)(hm + ml.pages);
    int4 *chk = (int4 *)(hm + ml.chunks);
    int *page0 = (int *)(hm + ml.page0), *first = (int *)(hm + ml.first),
        *count = (int *)(hm + ml.count);
    int np = 0, need_pass2 = 0;
    for (int i = 0; i < p->n_seqs; i++) {
        page0[i] = np;
        const int n = (p->seqs[i].n_tokens + kv->page_tokens - 1) / kv->page_tokens;
        for (int k = 0; k < n; k++)
            pt[np++] = p->seqs[i].pages[k];
        first[i] = a->first[i];
        count[i] = a->count[i];
        need_pass2 |= a->count[i] != 1;
    }
    for (int c = 0; c < n_chunks; c++)
        chk[c] = make_int4(a->chunks[c].seq, a->chunks[c].begin, a->chunks[c].end,
                           a->count[a->chunks[c].seq] == 1);
    cudaStream_t st = cu_stream(s);
    WS_CU(err, cudaMemcpyAsync(a->dev_meta, a->host_meta, ml.total, cudaMemcpyHostToDevice, st));
    WS_CU(err, cudaEventRecord(a->staged, st));

    char *dm = (char *)a->dev_meta;
    attn_args args;
    args.pages = (const uint16_t *const *)(dm + ml.pages);
    args.chunks = (const int4 *)(dm + ml.chunks);
    args.seq_page0 = (const int *)(dm + ml.page0);
    args.seq_first = (const int *)(dm + ml.first);
    args.seq_count = (const int *)(dm + ml.count);
    args.q = p->q;
    args.o = p->o;
    args.lse = p->lse;
    args.part_o = a->part_o;
    args.part_lse = a->part_lse;
    args.n_q = p->n_q_heads;
    args.n_kvh = kv->n_kv_heads;
    args.group = group;
    args.n_sub = n_sub;
    args.bdy = bdy;
    args.bdz = bdz;
    args.page_tokens = kv->page_tokens;
    args.d_v = kv->d_v;
    args.scale_log2 = p->scale * kLog2e;
    if (n_chunks > 0) {
        dim3 block(kLanes, bdy, bdz);
        v->fn<<<(unsigned)(n_chunks * blocks_per_chunk), block, variant_smem(*v), st>>>(args);
        WS_CU_LAUNCH(err, "attention pass 1");
    }
    if (need_pass2) {
        reduce_kernel<<<p->n_seqs * p->n_q_heads, 128, 0, st>>>(args);
        WS_CU_LAUNCH(err, "attention lse reduction");
    }
    if (stats) {
        stats->chunk_tokens = chunk_tokens;
        stats->n_chunks = n_chunks;
        stats->tile_tokens = v->tile;
        stats->second_pass = need_pass2;
    }
    return 0;
}

int cu_attn_merge(const float *o_a, const float *lse_a, const float *o_b, const float *lse_b,
                  float *o_out, float *lse_out, int n_rows, int d_v, ws_gpu_stream *s,
                  ws_err *err)
{
    if (n_rows < 0 || d_v <= 0)
        return ws_err_set(err, WS_EINVAL, "GPU merge: %d rows of width %d", n_rows, d_v);
    if (n_rows == 0)
        return 0;
    merge_kernel<<<n_rows, 128, 0, cu_stream(s)>>>(o_a, lse_a, o_b, lse_b, o_out, lse_out, d_v);
    WS_CU_LAUNCH(err, "merge");
    return 0;
}
