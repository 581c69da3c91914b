/* cuda_attn: paged decode attention on the GPU (flash-decoding split-K with an lse
 * reduction) and the GPU merge of partial states; the contract is kernels/attn.h, the
 * chunking is kernels/attn_split.c (shared with its CPU model), the oracle ws_attn_ref.
 *
 * Pass 1 (attn_kernel): one thread block per (chunk, KV head, sub-group of query heads).
 * The block streams its chunk's K/V rows through shared memory in tiles (cp.async double
 * buffering on sm_80+, plain loads on sm_70), so every KV byte is read from HBM once per
 * block and serves all query heads of the sub-group (GQA group, or 16 MLA heads). Thread
 * (tx, ty, tz): 8 lanes tx split the head dimension in 16-byte vectors, ty picks HPT query
 * heads, tz interleaves groups of GT tokens; each thread keeps an online softmax (log2
 * domain) and the lanes of a block are combined at the end. A sequence with one chunk is
 * written straight to the output; otherwise each chunk writes a normalised partial
 * (o, natural lse) and pass 2 (reduce_kernel) reduces a sequence's partials exactly as
 * ws_attn_reduce_row does. Compiled head shapes: d = 64, 128, 256 (GQA, separate V) and
 * 576/512 with V inside K (MLA absorbed); bf16 kernels only for sm_80+. The device code
 * and the launch plan live in attn_kernel.cuh (also run on the CPU by the tests'
 * emulation); this file holds the CUDA side: primitives, launches, workspace, merge. */
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_util.h"

/* The primitives attn_kernel.cuh is written against (see its header). */
#define WS_DEV __device__ __forceinline__
#define WS_DYN_SMEM(name) extern __shared__ __align__(16) unsigned char name[]

namespace {

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

__device__ __forceinline__ float2 ws_h2f2(uint32_t w)
{
    return __half22float2(*reinterpret_cast<const __half2 *>(&w));
}

} /* namespace */

#include "attn_kernel.cuh"

namespace {
using namespace ws_attn_k;


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

__global__ void reduce_kernel(attn_args a) { reduce_body(a); }

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
        {DK, DV, SH, HPT, TILE, GT, 0, attn_kernel<false, DK / 64, DV / 64, HPT, SH, TILE, GT>},

const variant g_variants[] = {WS_ATTN_VARIANTS(WS_VARIANT)};

size_t variant_smem(const variant &v) { return smem_bytes(v.d_k, v.d_v, v.share, v.tile); }

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
    if (kv->v_pairs || kv->k_tiles)
        return ws_err_set(err, WS_EUNSUP,
                          "GPU attention: %s is the CPU region's layout; GPU pages keep K and V "
                          "in rows",
                          kv->v_pairs ? "V in token pairs" : "K in tiles");
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

    plan pl;
    if (make_plan(p, v->hpt, v->tile, v->gt, a->n_sm, opts ? opts->chunk_tokens : 0, a->chunks,
                  a->lim.max_chunks, a->first, a->count, &pl))
        return ws_err_set(err, WS_EINVAL,
                          "GPU attention: chunks of %d tokens exceed the workspace's %d chunks",
                          opts->chunk_tokens, a->lim.max_chunks);
    if ((long)pl.n_chunks * pl.blocks_per_chunk > 0x7fffffffL)
        return ws_err_set(err, WS_EINVAL, "GPU attention: grid too large");

    /* Stage the metadata (page tables, chunks, per-sequence indices) and copy it in one
     * transfer; the staging buffer is reused only after the previous copy has finished. */
    WS_CU(err, cudaEventSynchronize(a->staged));
    meta_layout ml = meta_sections(a->lim);
    char *hm = (char *)a->host_meta;
    fill_meta(p, a->chunks, pl.n_chunks, a->first, a->count, (const void **)(hm + ml.pages),
              (int4 *)(hm + ml.chunks), (int *)(hm + ml.page0), (int *)(hm + ml.first),
              (int *)(hm + ml.count));
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
    args.group = p->n_q_heads / kv->n_kv_heads;
    args.n_sub = pl.n_sub;
    args.bdy = pl.bdy;
    args.bdz = pl.bdz;
    args.page_tokens = kv->page_tokens;
    args.d_v = kv->d_v;
    args.scale_log2 = p->scale * kLog2e;
    if (pl.n_chunks > 0) {
        dim3 block(kLanes, pl.bdy, pl.bdz);
        v->fn<<<(unsigned)(pl.n_chunks * pl.blocks_per_chunk), block, variant_smem(*v), st>>>(args);
        WS_CU_LAUNCH(err, "attention pass 1");
    }
    if (pl.need_pass2) {
        reduce_kernel<<<p->n_seqs * p->n_q_heads, 128, 0, st>>>(args);
        WS_CU_LAUNCH(err, "attention lse reduction");
    }
    if (stats) {
        stats->chunk_tokens = pl.chunk_tokens;
        stats->n_chunks = pl.n_chunks;
        stats->tile_tokens = v->tile;
        stats->second_pass = pl.need_pass2;
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
