/* attn_emu: the CPU emulation of the GPU attention kernels (see attn_emu.h). It provides
 * the primitives kernels/cuda/attn_kernel.cuh is written against: threadIdx/blockIdx as
 * thread-locals, __syncthreads as a barrier of all threads of the block, __shfl_xor_sync
 * as an exchange among the 8 lanes of a head row guarded by that row's barrier (and a
 * check that both lanes are in the mask), cp.async as a plain 16-byte copy (zero-filled
 * when the source is absent), shared memory as static storage reused block after block. */
#include "attn_emu.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "attn_split.h"
#include "half.h"

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
struct uint4 {
    uint32_t x, y, z, w;
};
struct int4 {
    int x, y, z, w;
};
struct float2 {
    float x, y;
};
static inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
static inline uint4 make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w)
{
    return uint4{x, y, z, w};
}
using std::min;

namespace emu {

/* A reusable barrier that aborts instead of hanging when a thread never arrives. */
class barrier {
  public:
    explicit barrier(int n) : n_(n) {}
    void wait()
    {
        std::unique_lock<std::mutex> lk(m_);
        const unsigned gen = gen_;
        if (++count_ == n_) {
            count_ = 0;
            gen_++;
            cv_.notify_all();
            return;
        }
        if (!cv_.wait_for(lk, std::chrono::seconds(60), [&] { return gen_ != gen; })) {
            fprintf(stderr, "attn_emu: barrier of %d threads timed out (%d arrived): divergent "
                            "__syncthreads or shuffle in the kernel\n",
                    n_, count_);
            abort();
        }
    }

  private:
    std::mutex m_;
    std::condition_variable cv_;
    int n_, count_ = 0;
    unsigned gen_ = 0;
};

thread_local dim3 tidx, bidx;
dim3 bdim;
barrier *block_bar;
std::vector<std::unique_ptr<barrier>> row_bars;
float xchg[1024];
alignas(16) unsigned char smem[256 * 1024];

inline int linear_tid() { return (int)(tidx.x + bdim.x * (tidx.y + bdim.y * tidx.z)); }

} /* namespace emu */

#define threadIdx emu::tidx
#define blockIdx emu::bidx
#define blockDim emu::bdim
#define WS_DEV static inline
#define WS_DYN_SMEM(name) unsigned char *name = emu::smem
#define __shared__ static

static inline void __syncthreads() { emu::block_bar->wait(); }

static inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask, int width)
{
    const int tid = emu::linear_tid(), lane = tid & 31, partner = lane ^ lane_mask;
    if (!((mask >> lane) & 1u) || !((mask >> partner) & 1u) || lane_mask >= width ||
        (lane / width) != (partner / width)) {
        fprintf(stderr, "attn_emu: lane %d shuffles with lane %d outside mask %#x / width %d\n",
                lane, partner, mask, width);
        abort();
    }
    emu::barrier &rb = *emu::row_bars[(size_t)tid / 8];
    emu::xchg[tid] = v;
    rb.wait();
    const float r = emu::xchg[(tid & ~31) + partner];
    rb.wait(); /* nobody overwrites its slot before every lane has read */
    return r;
}

static inline void cp_async16(void *smem, const void *gmem, bool valid)
{
    if (valid)
        memcpy(smem, gmem, 16);
    else
        memset(smem, 0, 16);
}
static inline void cp_async_commit() {}
template <int N> static inline void cp_async_wait() {}
static inline float2 ws_h2f2(uint32_t w)
{
    return float2{ws_fp16_to_f32((uint16_t)(w & 0xffffu)), ws_fp16_to_f32((uint16_t)(w >> 16))};
}
static inline float __uint_as_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#include "cuda/attn_kernel.cuh"

using namespace ws_attn_k;

/* Runs n_blocks blocks of (8, bdy, bdz) threads one after the other with the same
 * threads; an end-of-block barrier keeps a block's shared memory from being reused early. */
template <bool BF16, int NK, int NV, int HPT, bool SH, int TILE, int GT>
static void run_pass1(const attn_args &a, int n_blocks, int bdy, int bdz)
{
    const int nthr = 8 * bdy * bdz;
    emu::bdim = dim3{8u, (unsigned)bdy, (unsigned)bdz};
    emu::barrier block(nthr);
    emu::block_bar = &block;
    emu::row_bars.clear();
    for (int r = 0; r < nthr / 8; r++)
        emu::row_bars.emplace_back(new emu::barrier(8));
    std::vector<std::thread> th;
    for (int t = 0; t < nthr; t++)
        th.emplace_back([&, t] {
            emu::tidx = dim3{(unsigned)(t % 8), (unsigned)((t / 8) % bdy), (unsigned)(t / (8 * bdy))};
            for (int b = 0; b < n_blocks; b++) {
                emu::bidx = dim3{(unsigned)b, 0, 0};
                attn_body<BF16, NK, NV, HPT, SH, TILE, GT>(a);
                emu::block_bar->wait();
            }
        });
    for (auto &x : th)
        x.join();
    emu::row_bars.clear();
}

typedef void (*pass1_fn)(const attn_args &, int, int, int);

int ws_attn_emu_run(const ws_attn_problem *p, int n_sm, int chunk_tokens, ws_gpu_attn_stats *stats,
                    ws_err *err)
{
    int rc = ws_attn_validate(p, err);
    if (rc)
        return rc;
    const ws_kv_layout &kv = p->kv;
    pass1_fn fn = nullptr;
    int hpt = 0, tile = 0, gt = 0;
    const bool bf16 = kv.dtype == WS_DT_BF16;
#define EMU_CASE(DK, DV, SH, HPT, TILE, GT)                                                  \
    if (kv.d_k == DK && kv.d_v == DV && (kv.v_shares_k != 0) == SH) {                        \
        fn = bf16 ? run_pass1<true, DK / 64, DV / 64, HPT, SH, TILE, GT>                     \
                  : run_pass1<false, DK / 64, DV / 64, HPT, SH, TILE, GT>;                   \
        hpt = HPT;                                                                           \
        tile = TILE;                                                                         \
        gt = GT;                                                                             \
    }
    WS_ATTN_VARIANTS(EMU_CASE)
#undef EMU_CASE
    if (!fn)
        return ws_err_set(err, WS_EUNSUP, "attention emulation: no kernel for d_k=%d d_v=%d",
                          kv.d_k, kv.d_v);
    for (int s = 0; s < p->n_seqs; s++)
        if (p->seqs[s].sel)
            return ws_err_set(err, WS_EUNSUP, "attention emulation: sparse lists not supported");
    if (p->n_seqs == 0)
        return 0;
    const int max_chunks = 1 << 16;
    std::vector<ws_attn_chunk> chunks(max_chunks);
    std::vector<int> first(p->n_seqs), count(p->n_seqs);
    plan pl;
    if (make_plan(p, hpt, tile, gt, n_sm, chunk_tokens, chunks.data(), max_chunks, first.data(),
                  count.data(), &pl))
        return ws_err_set(err, WS_EINVAL, "attention emulation: too many chunks");
    int n_pages = 0;
    for (int s = 0; s < p->n_seqs; s++)
        n_pages += (p->seqs[s].n_tokens + kv.page_tokens - 1) / kv.page_tokens;
    std::vector<const void *> pt(n_pages + 1);
    std::vector<int4> chk(pl.n_chunks + 1);
    std::vector<int> page0(p->n_seqs), first_m(p->n_seqs), count_m(p->n_seqs);
    fill_meta(p, chunks.data(), pl.n_chunks, first.data(), count.data(), pt.data(), chk.data(),
              page0.data(), first_m.data(), count_m.data());
    std::vector<float> part_o((size_t)(pl.n_chunks + 1) * p->n_q_heads * kv.d_v, NAN);
    std::vector<float> part_l((size_t)(pl.n_chunks + 1) * p->n_q_heads, NAN);
    attn_args a;
    a.pages = (const uint16_t *const *)pt.data();
    a.chunks = chk.data();
    a.seq_page0 = page0.data();
    a.seq_first = first_m.data();
    a.seq_count = count_m.data();
    a.q = p->q;
    a.o = p->o;
    a.lse = p->lse;
    a.part_o = part_o.data();
    a.part_lse = part_l.data();
    a.n_q = p->n_q_heads;
    a.n_kvh = kv.n_kv_heads;
    a.group = p->n_q_heads / kv.n_kv_heads;
    a.n_sub = pl.n_sub;
    a.bdy = pl.bdy;
    a.bdz = pl.bdz;
    a.page_tokens = kv.page_tokens;
    a.d_v = kv.d_v;
    a.scale_log2 = p->scale * kLog2e;
    if (smem_bytes(kv.d_k, kv.d_v, kv.v_shares_k, tile) > sizeof emu::smem)
        return ws_err_set(err, WS_EINVAL, "attention emulation: shared memory too small");
    if (pl.n_chunks > 0)
        fn(a, pl.n_chunks * pl.blocks_per_chunk, pl.bdy, pl.bdz);
    if (pl.need_pass2) {
        emu::bdim = dim3{1, 1, 1};
        emu::tidx = dim3{0, 0, 0};
        for (int r = 0; r < p->n_seqs * p->n_q_heads; r++) {
            emu::bidx = dim3{(unsigned)r, 0, 0};
            reduce_body(a);
        }
    }
    if (stats) {
        stats->chunk_tokens = pl.chunk_tokens;
        stats->n_chunks = pl.n_chunks;
        stats->tile_tokens = tile;
        stats->second_pass = pl.need_pass2;
    }
    return 0;
}
