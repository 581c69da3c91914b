/* attn_cpu_amx: the AMX-BF16 block loop of the CPU attention kernel (path "amx", see
 * attn_cpu.h), for bf16 KV. Internal to kernels/: attn_cpu.c calls it per task when the
 * path is amx and the shape fits (ws_attn_cpu_amx_fits); other shapes and fp16 KV run as
 * on the avx512 path (the fused FMA loop of attn_cpu_fma.h where it serves, else the
 * generic block loop).
 *
 * Query heads go H = min(G, 8) at a time (a head group), each head twice: its bf16 hi half
 * and its lo half (q ~= hi + lo, likewise p), so scores and weights keep ~16 mantissa bits,
 * as accurate as the fp32 FMA paths, and one 16 x 64-byte tile holds both (head h's hi
 * half in slot h, its lo half in 8 + h). With bf16 products (the bf16 precision: q holds
 * bf16 values, p is rounded) only the hi halves go through the tiles, half the products:
 * pairs of head groups skip their lo tiles, one group on K tiles configures its head rows
 * (q, S, P, O) to 8; one group on K rows, whose score tiles hold heads as columns, keeps
 * both. Per super-block of 4 sub-blocks of 16 tokens:
 *   scores  S = K . q (K rows as A tiles straight from the page, or gathered) or, with K
 *           in tiles (kv.k_tiles), S = q . K^T, which gives per-head rows of 16 tokens;
 *           pairs of head groups (G > 8, MLA) use a q_hi and a q_lo tile of 16 heads;
 *   softmax elementwise down the token rows, in base 2 (scale log2(e), 2^x by a degree-6
 *           polynomial and VSCALEFPS; lse = m ln 2 + log l), one max and rescale per head
 *           and super-block;
 *   O += P.V with V in token pairs (kv.v_pairs) one P tile of 32 tokens and two V tiles per
 *           32 columns; on V rows by "zero slots" (p in the even or odd bf16 slots) or,
 *           for paired groups (MLA), V re-laid into pairs one column step ahead; with one
 *           O group and P in pairs the P tiles stay in tile registers for all column steps.
 * The loop keeps to six of the eight tile registers (with all eight in use the same work
 * took up to 1.7x the time), overlaps the next super-block's score tiles with this one's
 * softmax steps, and prefetches the super-block after next to L2 a quota of lines per
 * step, its K and V runs in turns of 256 bytes (pf_cursor): from memory the core's
 * line-fill buffers, not the products, set the pace.
 * The measurements behind each choice, what was tried and dropped, and a map of attend's
 * phases: docs/notes/amx-attention.md (probes in scripts/probe/, A/B runs with
 * scripts/ab/ab_loop.sh). */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "attn_cpu_amx.h"
#include "attn_cpu_isa.h"
#include "cpu_features.h"
#include "half.h"

/* The tile instructions. Built with WS_AMX_EMU (tests/amx/tile_emu.c, which defines them in
 * software and includes this file), the same loop runs on CPUs without AMX. */
#ifndef WS_AMX_EMU
#define tile_load(t, base, stride) _tile_loadd(t, base, stride)
#define tile_store(t, base, stride) _tile_stored(t, base, stride)
#define tile_zero(t) _tile_zero(t)
#define tile_dp(c, a, b) _tile_dpbf16ps(c, a, b)
#define tile_release() _tile_release()
/* LDTILECFG with the whole 64-byte configuration as its memory operand. GCC 12's
 * _tile_loadconfig names only the first 8 bytes, so the optimizer may drop or sink the
 * stores of rows and colsb (seen: the configuration loaded with every tile unconfigured). */
#define tile_config(cfg) __asm__ volatile("ldtilecfg %0" ::"m"(*(cfg)))
#endif

#define ARCH_REQ_XCOMP_PERM 0x1023 /* Linux: ask for permission to use a dynamic xstate */
#define XFEATURE_XTILEDATA 18      /* the AMX tile data state */

#define SUB 16 /* tokens per sub-block (rows of a tile) */
#ifndef NSUB
#define NSUB 4 /* sub-blocks per super-block */
#endif
#define HMAX 8 /* query heads per head group */
/* Rows of zero-slot P per sub-block (one head group on V rows): a zero pad, a tile of hi
 * (rows 0..7) and lo (8..15) rows and its odd-slot copy. P in token pairs (PT in attend)
 * uses the same space, 1 KB per O group, pair of sub-blocks and tile. */
#define PROWS 33

/* The shapes whose tiles take bf16 products in the bf16 precision (attn_cpu_amx.h:
 * ws_attn_cpu_amx_p_bf16): pairs of head groups, or one group on K tiles. */
static int bf16_form(const ws_kv_layout *kv, int G)
{
    return G > HMAX || kv->k_tiles;
}

#ifndef WS_AMX_EMU
static int g_amx_ok;
static pthread_once_t g_amx_once = PTHREAD_ONCE_INIT;
static ws_attn_cpu_amx_attend_fn *g_emulated; /* tests: the loop on emulated tiles */

static void amx_enable(void)
{
    g_amx_ok = ws_cpu_features_get()->amx_bf16 &&
               syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

int ws_attn_cpu_amx_enable(void)
{
    pthread_once(&g_amx_once, amx_enable);
    return g_amx_ok || g_emulated;
}

void ws_attn_cpu_amx_emulate(ws_attn_cpu_amx_attend_fn *fn)
{
    g_emulated = fn;
}

int ws_attn_cpu_amx_fits(const ws_kv_layout *kv, int G)
{
    return kv->dtype == WS_DT_BF16 && kv->d_k % 32 == 0 && kv->d_v % 32 == 0 &&
           (G <= HMAX || (G % HMAX == 0 && !kv->k_tiles));
}

int ws_attn_cpu_amx_p_bf16(const ws_kv_layout *kv, int G)
{
    return bf16_form(kv, G);
}
_Static_assert(HMAX == WS_ATTN_CPU_AMX_TILE_GROUP, "K tiles serve one head group");
#endif

static size_t a64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/* Which queries the scratch's q tiles hold (all zero: none). */
typedef struct amx_q_key {
    const float *q; /* the KV head's first query row */
    int G, dk;
} amx_q_key;

/* Scratch pieces, in order (each 64-byte aligned). */
typedef struct amx_scratch {
    size_t key, qv, o, s, sr, p, kg, vg, gv, tb, ml, total;
} amx_scratch;

static amx_scratch scratch_plan(const ws_kv_layout *kv, int G)
{
    const size_t dk = (size_t)kv->d_k, dv = (size_t)kv->d_v;
    const size_t H = G < HMAX ? (size_t)G : HMAX, n_hg = ((size_t)G + H - 1) / H;
    const size_t n_og = n_hg >= 2 ? (n_hg + 1) / 2 : 1; /* O groups (see attend) */
    /* Tiles are always 16 columns (q.k) or rows (p.V): hi of head h at h, lo at 8 + h. */
    amx_scratch s;
    size_t at = 0;
    const size_t n_qt = n_hg >= 2 ? 2 * n_og : n_hg;      /* q tiles per 32 dims */
    s.key = at, at += 64;                                 /* whose q tiles are packed */
    s.qv = at, at += a64(n_qt * (dk / 32) * 16 * 16 * 4); /* q tiles: pairs of bf16 */
    s.o = at, at += a64(n_og * 16 * dv * 4);              /* O, fp32 */
    s.s = at, at += 2 * n_hg * NSUB * SUB * 16 * 4;       /* score tiles, 2 super-blocks */
    s.sr = at, at += NSUB * 8 * 64;                       /* combined scores */
    s.p = at, at += n_og * NSUB * PROWS * 64;             /* P tiles per sub-block */
    /* Gathers for 2 super-blocks: K tiles, and V pairs or V rows beside K tiles (rows go by
     * pointer: gather_tile) */
    const int gk = kv->k_tiles, gv = !kv->v_shares_k && (kv->v_pairs || kv->k_tiles);
    s.kg = at, at += gk ? a64(2 * NSUB * SUB * dk * 2) : 0;
    s.vg = at, at += gv ? a64(2 * NSUB * SUB * dv * 2) : 0;
    /* V rows re-laid in token pairs per 32 columns (paired groups, V in rows), two column
     * steps: [step & 1][pair of sub-blocks][lo, hi][16 pair rows][64 B] */
    s.gv = at, at += n_hg >= 2 && !kv->v_pairs ? 2 * (NSUB / 2) * 2 * 1024 : 0;
    s.tb = at, at += 3 * 1024;      /* tiles gathered from rows: 2 for q.k, 1 for p.V */
    s.ml = at, at += n_hg * 2 * 64; /* m, l per head group */
    s.total = at;
    return s;
}

#ifndef WS_AMX_EMU
size_t ws_attn_cpu_amx_scratch(const ws_kv_layout *kv, int G)
{
    return scratch_plan(kv, G).total;
}
#endif

typedef struct tilecfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,amx-tile,amx-bf16")

#define INL static inline __attribute__((always_inline))

/* Tiles are 16 rows x 64 bytes. Scores: 0 S (paired: 0-1), 4 q (paired: 4-5 q hi, lo), 6 K;
 * P.V: 0-1 O, then with zero slots 4 P even, 5 P odd, 6 V; with P in token pairs 4 P (hi),
 * 5 P lo, 6-7 V; held P of one group 4-5, of a pair 4, 5, 1, 7 with O in 0 and V in 6.
 * head_rows 8 (one head group in bf16 products): tiles 0, 1, 4 and 5, whose rows are heads
 * (q and S with K in tiles, P and O), keep the 8 hi rows only. */
static void config(int head_rows)
{
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++)
        c.rows[t] = 16, c.colsb[t] = 64;
    c.rows[0] = c.rows[1] = c.rows[4] = c.rows[5] = (uint8_t)head_rows;
    tile_config(&c);
}

/* Prefetch of a later super-block, issued a quota of lines per step: up to 2 regions per
 * sub-block (its K rows, its V rows when they are a page's run) or per token of a sparse
 * list's sub-block, taken in turns of PF_TURN bytes. Eight 4 KiB streams advancing together
 * keep more of the L2 streamer at work than one region after another: 0.93-0.98 of the
 * loop's time for Qwen3's shape from memory, 0.93 with V in rows (A/B runs, 2 threads);
 * turns of 1 KiB measured 1.00, of one or two lines 1.31 and 1.11 (each 4 KiB then looks
 * random to the streamer). A list's rows were prefetched all at once per super-block
 * before; through the turns, with the per-tile gathers (gather_tile), sparse token lists
 * take 0.67-0.69 of the time for MLA's 16 heads and for GQA shapes, 0.93 for 64 heads
 * (A/B runs with AB_SPARSE, 2 threads). */
#define PF_TURN 256
typedef struct pf_cursor {
    const char *at[2 * NSUB * SUB]; /* a K and a V region per sub-block, or per listed token */
    size_t len[2 * NSUB * SUB];
    size_t off[2 * NSUB * SUB]; /* bytes issued per region */
    int n, open;          /* regions, regions not yet finished */
    int r;                /* region whose turn it is */
    size_t turn;          /* bytes of region r's turn issued */
    size_t quota;         /* bytes per step */
    int uni;              /* all regions of one length, a multiple of PF_TURN, and lean */
    size_t round;         /* uni: offset of the round of turns under way */
} pf_cursor;

/* Regions at[0..n) are set: start the turns. lean: regions of one length go through the
 * short loop of whole turns (MLA, whose loop is bound by its products: 0.95 of the time
 * from memory at 2 threads, 0.99 at 1; for Qwen3's shape, bound by the stream, the
 * general loop below measured better, 1.04-1.09, A/B runs: its prefetches come spaced
 * further apart). */
INL void pf_start(pf_cursor *c, size_t quota, int lean)
{
    c->open = c->n, c->r = 0, c->turn = 0, c->quota = quota, c->round = 0;
    c->uni = lean && c->n > 0 && c->len[0] % PF_TURN == 0;
    for (int i = 0; i < c->n; i++) {
        c->off[i] = 0;
        c->uni &= c->len[i] == c->len[0];
    }
}

/* One whole turn: PREFETCHT1 of the PF_TURN bytes at a, straight-line code. */
INL void pf_turn(const char *a)
{
#pragma GCC unroll 16
    for (int b = 0; b < PF_TURN; b += 64)
        _mm_prefetch(a + b, _MM_HINT_T1);
}

INL void pf_step(pf_cursor *c)
{
    if (c->uni) { /* dense runs: whole turns, one offset for all regions (the common case) */
        for (size_t k = (c->quota + PF_TURN - 1) / PF_TURN; k && c->round < c->len[0]; k--) {
            pf_turn(c->at[c->r] + c->round);
            if (++c->r == c->n)
                c->r = 0, c->round += PF_TURN;
        }
        return;
    }
    size_t left = c->quota;
    while (left && c->open > 0) {
        const int r = c->r;
        const size_t rest = c->len[r] - c->off[r];
        if (rest == 0) { /* finished: the next region's turn */
            c->r = r + 1 == c->n ? 0 : r + 1, c->turn = 0;
            continue;
        }
        size_t chunk = PF_TURN - c->turn;
        chunk = rest < chunk ? rest : chunk;
        chunk = left < chunk ? left : chunk;
        const char *a = c->at[r] + c->off[r];
        if (chunk == PF_TURN) { /* most turns: straight-line code (0.96-0.97 of the loop's
                                 * time for GQA and MLA from memory, 0.92 in L2; A/B runs) */
            pf_turn(a);
        } else {
            for (size_t b = 0; b < chunk; b += 64)
                _mm_prefetch(a + b, _MM_HINT_T1);
        }
        c->off[r] += chunk, c->turn += chunk, left -= chunk;
        if (c->off[r] == c->len[r])
            c->open--;
        if (c->turn == PF_TURN || c->off[r] == c->len[r])
            c->r = r + 1 == c->n ? 0 : r + 1, c->turn = 0;
    }
}

INL __m512 bf16_to_ps(__m256i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* q's 32 values at q as bf16 pairs (dims 2r, 2r + 1 in word r): hi, the rounded values,
 * and lo, what hi leaves (q ~= hi + lo to ~16 mantissa bits). */
INL void q_halves(const float *q, uint32_t *hi, uint32_t *lo)
{
    const __m512 a = _mm512_loadu_ps(q), b = _mm512_loadu_ps(q + 16);
    const __m512i hw = (__m512i)_mm512_cvtne2ps_pbh(b, a);
    const __m512 ha = bf16_to_ps(_mm512_castsi512_si256(hw));
    const __m512 hb = bf16_to_ps(_mm512_extracti64x4_epi64(hw, 1));
    _mm512_storeu_si512(hi, hw);
    _mm512_storeu_si512(lo,
                        (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(b, hb), _mm512_sub_ps(a, ha)));
}

/* One step of the [token][head] -> [head][token] network: swaps register bit k with lane
 * bit k between a (bit clear) and b (bit set). */
INL void swap_bit(__m512 *a, __m512 *b, __m512i ia, __m512i ib)
{
    const __m512 x = *a, y = *b;
    *a = _mm512_permutex2var_ps(x, ia, y);
    *b = _mm512_permutex2var_ps(x, ib, y);
}

/* Resolves sub-block [it, it + n) of the item list: K and V row bases and strides, straight
 * in the page when the n = 16 rows are one page's run; else with K in rows the rows'
 * addresses (rows = 1; V rows' too, or K's when V shares them), with K in tiles a gathered
 * zero-padded tile in kg (and V rows in vg). */
typedef struct sub_rows {
    const uint16_t *k, *v;
    size_t ks, vs; /* row strides in bytes */
    int kst;       /* elements from one K tile (32 dims) to the next */
    int n;
    int t0, direct; /* first token; 1: rows straight in its page */
    /* 1: K rows by pointer (rk; V too unless it is in pairs: rv, or rk when V shares K), a
     * tile gathered from them just before each tile load (gather_tile) */
    int rows;
    const uint16_t **rk, **rv; /* [SUB] each, in score_ctx.rowp; NULL: no token (zeros) */
} sub_rows;

static int run_start(const ws_attn_seq *sq, int P, int it, int n, int *t0)
{
    return ws_attn_run16(sq, it, n, t0) && (*t0 % P) + SUB <= P;
}

static void resolve(const ws_attn_seq *sq, const ws_kv_layout *kv, int kvh, int it, int n,
                    uint16_t *kg, uint16_t *vg, const uint16_t **rowp, sub_rows *r)
{
    const int P = kv->page_tokens, dk = kv->d_k, dv = kv->d_v;
    const size_t vrow = kv->v_shares_k ? (size_t)dk : (size_t)dv;
    int t0;
    r->n = n;
    r->direct = run_start(sq, P, it, n, &t0) && (!kv->k_tiles || t0 % SUB == 0);
    r->t0 = t0;
    /* K tiles: 16 rows of 16 tokens' dim pairs per 32 dims (1 KB); K rows: 16 rows of 32
     * dims, a K row apart. */
    r->kst = kv->k_tiles ? SUB * 32 : 32;
    const size_t ks = kv->k_tiles ? 64 : (size_t)dk * 2;
    if (kv->v_pairs)
        vg = NULL; /* V goes per pair of sub-blocks: resolve_pairs */
    r->rows = 0;
    if (!r->direct && !kv->k_tiles) { /* K rows (and V rows) by pointer */
        r->rk = rowp, r->rv = rowp + SUB;
        for (int j = 0; j < SUB; j++) {
            r->rk[j] = r->rv[j] = NULL;
            if (j < n) {
                const int t = sq->sel ? sq->sel[it + j] : it + j;
                const uint16_t *pg = sq->pages[t / P];
                r->rk[j] = pg + ws_kv_k_off(kv, kvh, t % P);
                if (kv->v_shares_k)
                    r->rv[j] = r->rk[j];
                else if (!kv->v_pairs) /* pairs: resolve_pairs */
                    r->rv[j] = pg + ws_kv_v_off(kv, kvh, t % P);
            }
        }
        r->rows = 1, r->k = r->v = NULL;
        return;
    }
    if (r->direct) {
        const uint16_t *pg = sq->pages[t0 / P];
        r->k = pg + ws_kv_k_off(kv, kvh, t0 % P);
        r->v = kv->v_pairs ? NULL : pg + ws_kv_v_off(kv, kvh, t0 % P);
        r->ks = ks, r->vs = vrow * 2;
        return;
    }
    /* K tiles: a tile of the rows' tokens, zero-padded, one 32-bit pair at a time; V rows
     * (neither pairs nor K's) gathered beside it. */
    memset(kg, 0, (size_t)SUB * dk * 2);
    for (int j = 0; j < SUB; j++) {
        uint16_t *vd = vg ? vg + (size_t)j * dv : NULL;
        if (j < n) {
            const int t = sq->sel ? sq->sel[it + j] : it + j;
            const uint16_t *pg = sq->pages[t / P];
            const uint32_t *src = (const uint32_t *)(pg + ws_kv_k_off(kv, kvh, (t % P) & ~15));
            uint32_t *dst = (uint32_t *)kg;
            for (int r2 = 0; r2 < dk / 2; r2++)
                dst[r2 * SUB + j] = src[r2 * SUB + (t & 15)];
            if (vd)
                memcpy(vd, pg + ws_kv_v_off(kv, kvh, t % P), (size_t)dv * 2);
        } else if (vd) {
            memset(vd, 0, (size_t)dv * 2);
        }
    }
    r->k = kg, r->ks = ks;
    r->v = kv->v_pairs ? NULL : vg, r->vs = (size_t)dv * 2;
}

/* Even bf16 lanes from the first operand's even slots, odd lanes from the second's even
 * slots: 2e and 32 + 2e; a token in slot 1 adds 1 (resolve_pairs). */
#define PAIR_IDX(e) ((e) & 1 ? 31 + (e) : (e))
static const uint16_t g_pair_idx_v[32] __attribute__((aligned(64))) = {
    PAIR_IDX(0),  PAIR_IDX(1),  PAIR_IDX(2),  PAIR_IDX(3),  PAIR_IDX(4),  PAIR_IDX(5),
    PAIR_IDX(6),  PAIR_IDX(7),  PAIR_IDX(8),  PAIR_IDX(9),  PAIR_IDX(10), PAIR_IDX(11),
    PAIR_IDX(12), PAIR_IDX(13), PAIR_IDX(14), PAIR_IDX(15), PAIR_IDX(16), PAIR_IDX(17),
    PAIR_IDX(18), PAIR_IDX(19), PAIR_IDX(20), PAIR_IDX(21), PAIR_IDX(22), PAIR_IDX(23),
    PAIR_IDX(24), PAIR_IDX(25), PAIR_IDX(26), PAIR_IDX(27), PAIR_IDX(28), PAIR_IDX(29),
    PAIR_IDX(30), PAIR_IDX(31)};
#undef PAIR_IDX

/* V in token pairs (v_pairs): sub-blocks 2b and 2b + 1 (32 tokens) make one V tile row
 * set, 16 pair rows of [16 columns][2 tokens]. Straight from the page when both are full
 * runs of one page starting at an even token, else gathered (zero-padded) into vg, whose
 * space for the two sub-blocks holds the 16 pair rows. Sets sub[2b].v and .vs. */
static void resolve_pairs(const ws_attn_seq *sq, const ws_kv_layout *kv, int kvh, int at,
                          int i1, int ns, uint16_t *vg, sub_rows *sub)
{
    const int P = kv->page_tokens, dv = kv->d_v;
    for (int j = 0; j < ns; j += 2) {
        sub_rows *a = &sub[j];
        if (j + 1 < ns && a->direct && sub[j + 1].direct && a->t0 % 2 == 0 &&
            sub[j + 1].t0 == a->t0 + SUB && a->t0 % P + 2 * SUB <= P) {
            a->v = (const uint16_t *)sq->pages[a->t0 / P] + ws_kv_v_pair_off(kv, kvh, a->t0 % P);
            a->vs = (size_t)dv * 4;
            continue;
        }
        /* Pair row u takes token x = 2u's slot from its pair row (a) and token 2u + 1's
         * from its (b), 16 columns per permute; absent tokens read zeros. */
        uint16_t *dst = vg + (size_t)j * SUB * dv;
        const int n_it = (ns - j) * SUB < 2 * SUB ? (ns - j) * SUB : 2 * SUB;
        for (int u = 0; u < SUB; u++) {
            const uint16_t *src[2];
            int slot[2];
            for (int y = 0; y < 2; y++) {
                const int x = 2 * u + y, it = at + j * SUB + x;
                src[y] = NULL, slot[y] = 0;
                if (x < n_it && it < i1) {
                    const int t = sq->sel ? sq->sel[it] : it;
                    src[y] = (const uint16_t *)sq->pages[t / P] + ws_kv_v_pair_off(kv, kvh, t % P);
                    slot[y] = t & 1;
                }
            }
            const __m512i idx = _mm512_add_epi16(
                _mm512_load_si512(g_pair_idx_v),
                _mm512_set1_epi32((int)((unsigned)slot[0] | (unsigned)slot[1] << 16)));
            uint16_t *d = dst + (size_t)u * 2 * dv;
            for (int e = 0; e < 2 * dv; e += 32) {
                const __m512i va = src[0] ? _mm512_loadu_si512(src[0] + e) : _mm512_setzero_si512();
                const __m512i vb = src[1] ? _mm512_loadu_si512(src[1] + e) : _mm512_setzero_si512();
                _mm512_storeu_si512(d + e, _mm512_permutex2var_epi16(va, idx, vb));
            }
        }
        a->v = dst, a->vs = (size_t)dv * 4;
    }
}

/* Paired groups with V in rows: the super-block's V values of columns [32c, 32c + 32) in
 * token pairs, as B tiles for P tiles of 32 tokens (no zero slots). Pair row u of a pair of
 * sub-blocks takes tokens 2u and 2u + 1; VPUNPCKLWD / VPUNPCKHWD interleave them per
 * 128-bit lane, so the lo tile holds columns {0-3, 8-11, 16-19, 24-27} of the 32 and the
 * hi tile the others (O columns stay in that order until the end). Absent sub-blocks read
 * zeros (their P is stale but finite). dst: [pair of sub-blocks][lo, hi][16][32 bf16]. */
static const uint16_t g_zero_row[32] __attribute__((aligned(64)));

/* Sub-block rows by pointer (sub_rows.rows): elements [off, off + 32) of each row as one
 * tile, 16 rows of 64 bytes, to dst (an L1-resident scratch tile), absent rows zero. A
 * copy of the super-block's rows into a gather buffer (147 KB for MLA's two slots, beyond
 * L1) that the tile loads then read back took 1.14-1.16x the time of these per-tile
 * gathers for sparse token lists (MLA's 16 heads, Qwen3's shape; A/B runs with
 * AB_SPARSE, 2 threads, both with the list prefetch in turns). */
INL void gather_tile(const uint16_t *const *rows, size_t off, uint16_t *dst)
{
#pragma GCC unroll 16
    for (int r = 0; r < SUB; r++)
        _mm512_store_si512(dst + 32 * r,
                           rows[r] ? _mm512_loadu_si512(rows[r] + off) : _mm512_setzero_si512());
}

/* Where a tile load finds elements [off, off + 32) of a sub-block's 16 K or V rows: at
 * base + off, rows `stride` bytes apart, or, for rows by pointer (rp), gathered into buf
 * (rows 64 bytes apart). *ld gets the stride to load with. */
INL const uint16_t *tile_rows(const uint16_t *const *rp, const uint16_t *base, size_t stride,
                              size_t off, uint16_t *buf, size_t *ld)
{
    if (rp) {
        gather_tile(rp, off, buf);
        *ld = 64;
        return buf;
    }
    *ld = stride;
    return base + off;
}

INL void gather_v_cols(const sub_rows *sub, int nsub, int c, uint16_t *dst)
{
    for (int b = 0; b < (nsub + 1) / 2; b++) {
        uint16_t *d = dst + (size_t)b * 2 * 512;
#pragma GCC unroll 16 /* 0.97-0.98 of MLA's time from memory (A/B runs) */
        for (int u = 0; u < SUB; u++) {
            const int j = 2 * b + (u >= SUB / 2), r = 2 * u % SUB;
            const uint16_t *r0 = g_zero_row, *r1 = g_zero_row;
            if (j < nsub && sub[j].rows) {
                r0 = sub[j].rv[r] ? sub[j].rv[r] + 32 * c : g_zero_row;
                r1 = sub[j].rv[r + 1] ? sub[j].rv[r + 1] + 32 * c : g_zero_row;
            } else if (j < nsub) {
                r0 = (const uint16_t *)((const char *)sub[j].v + (size_t)r * sub[j].vs) + 32 * c;
                r1 = (const uint16_t *)((const char *)r0 + sub[j].vs);
            }
            const __m512i a = _mm512_loadu_si512(r0), bb = _mm512_loadu_si512(r1);
            _mm512_store_si512(d + u * 32, _mm512_unpacklo_epi16(a, bb));
            _mm512_store_si512(d + 512 + u * 32, _mm512_unpackhi_epi16(a, bb));
        }
    }
}

/* What the score pass needs: the task, q tiles, and two slots (super-blocks b, b + 1) of
 * resolved rows, gather buffers and score tiles. */
typedef struct score_ctx {
    const ws_attn_seq *sq;
    const ws_kv_layout *kv;
    int kvh, i1, n_hg, n_og, paired, ksteps;
    int kt;    /* K in tiles: S = q . K^T, [16 (hi, lo) x 16 tok] */
    int defer; /* one head group: scores resolves rows only, attend issues the tiles */
    int bf;    /* paired: q as bf16, its hi tile only */
    const uint16_t *qv;
    float *sb;
    uint16_t *kg, *vg;
    uint16_t *tb; /* tiles gathered from rows by pointer: [J & 1] for the scores */
    sub_rows sub[2][NSUB];
    const uint16_t *rowp[2][NSUB][2 * SUB]; /* their K and V row addresses */
    int nsub[2];
} score_ctx;

/* One head group's score tile of sub-block j of slot x (rows resolved by scores): S [16 tok
 * x 16 (hi, lo)], or with K in tiles S [16 (hi, lo) x 16 tok], stored to the slot's score
 * buffer. */
INL void scores_sub(score_ctx *c, int x, int j, pf_cursor *pf)
{
    const sub_rows *su = &c->sub[x][j];
    tile_zero(0);
    for (int ks = 0; ks < c->ksteps; ks++) {
        pf_step(pf);
        size_t ld;
        const uint16_t *kt =
            tile_rows(su->rows ? su->rk : NULL, su->k, su->ks, (size_t)su->kst * ks, c->tb, &ld);
        tile_load(6, kt, ld);
        tile_load(4, c->qv + (size_t)ks * 512, 64);
        if (c->kt)
            tile_dp(0, 4, 6);
        else
            tile_dp(0, 6, 4);
    }
    tile_store(0, c->sb + ((size_t)x * c->n_hg * NSUB + j) * SUB * 16, 64);
}

/* Resolves the super-block starting at item `at` into slot x and issues its score tiles,
 * stored to the slot's score buffer: one head group (G <= 8), S [16 tok x 16 (hi, lo)]
 * per sub-block, sub-block by sub-block in address order (~6% faster than keeping q in
 * registers across four sub-blocks, A/B runs with scripts/ab/ab_loop.sh); paired groups,
 * S [16 tok x 16 heads] per pair and sub-block, the pair's q_hi and q_lo tiles held while
 * the K tiles of two sub-blocks pass (one tile load per TDPBF16PS; all four sub-blocks at
 * once, 0.75 loads per product, took tiles 0-3 for S and measured 9% slower for MLA: see
 * Tiles in docs/notes/amx-attention.md; two groups x two sub-blocks with hi/lo columns 2-4% slower). */
/* Sub-block J's K tile of step ks times the pair's q_hi (tile 4) and q_lo (5) into S tile S. */
#define QK2(S, J)                                                                                  \
    do {                                                                                           \
        const sub_rows *su_ = &c->sub[x][J];                                                       \
        size_t ld_;                                                                                \
        const uint16_t *kt_ = tile_rows(su_->rows ? su_->rk : NULL, su_->k, su_->ks,               \
                                        (size_t)32 * ks, c->tb + ((J)&1) * 512, &ld_);             \
        tile_load(6, kt_, ld_);                                                                    \
        tile_dp(S, 6, 4);                                                                          \
        if (!c->bf)                                                                                \
            tile_dp(S, 6, 5);                                                                      \
    } while (0)
static void scores(score_ctx *c, int at, int x, pf_cursor *pf)
{
    const int dk = c->kv->d_k, dv = c->kv->d_v, i1 = c->i1, ksteps = c->ksteps;
    const int ns = (i1 - at + SUB - 1) / SUB < NSUB ? (i1 - at + SUB - 1) / SUB : NSUB;
    c->nsub[x] = ns;
    for (int j = 0; j < ns; j++) {
        const int it = at + j * SUB, n = i1 - it < SUB ? i1 - it : SUB;
        resolve(
            c->sq, c->kv, c->kvh, it, n, c->kg ? c->kg + ((size_t)x * NSUB + j) * SUB * dk : NULL,
            c->vg ? c->vg + ((size_t)x * NSUB + j) * SUB * dv : NULL, c->rowp[x][j], &c->sub[x][j]);
    }
    if (c->kv->v_pairs)
        resolve_pairs(c->sq, c->kv, c->kvh, at, i1, ns, c->vg + (size_t)x * NSUB * SUB * dv,
                      c->sub[x]);
    const size_t q_hg = (size_t)ksteps * 16 * 16 * 2; /* q elements per head group */
    float *sbx = c->sb + (size_t)x * c->n_hg * NSUB * SUB * 16;
#define S_AT(hg, j) (sbx + ((size_t)(hg)*NSUB + (j)) * SUB * 16)
    if (c->paired) {
        /* Pairs of head groups: a q_hi and a q_lo tile of 16 heads into the same S tile
         * (16 tokens x 16 heads, hi and lo summed), two sub-blocks at a time (S in tiles
         * 0-1): two q loads and two K loads per four TDPBF16PS. */
        for (int pg = 0; pg < c->n_og; pg++) {
            const uint16_t *qp = c->qv + (size_t)pg * 2 * q_hg;
            for (int j = 0; j < ns; j += 2) {
                tile_zero(0);
                tile_zero(1);
                for (int ks = 0; ks < ksteps; ks++) {
                    pf_step(pf);
                    tile_load(4, qp + (size_t)ks * 1024, 64);
                    if (!c->bf)
                        tile_load(5, qp + (size_t)ks * 1024 + 512, 64);
                    QK2(0, j);
                    if (j + 1 < ns)
                        QK2(1, j + 1);
                }
                tile_store(0, S_AT(pg, j), 64);
                if (j + 1 < ns)
                    tile_store(1, S_AT(pg, j + 1), 64);
            }
        }
        return;
    }
    /* One head group: sub-block by sub-block, in address order, here or (defer) between
     * the softmax steps of the super-block before (attend). */
    for (int j = 0; j < ns && !c->defer; j++)
        scores_sub(c, x, j, pf);
#undef S_AT
}
#undef QK2

/* Reductions of eight vectors x[h] to one, lane h < 8 = op over x[h]'s 16 lanes: a 4-stage
 * shuffle tree (16 shuffles, 8 ops). */
#define REDUCE8(NAME, OP)                                                                          \
    INL __m512 NAME(const __m512 *x)                                                               \
    {                                                                                              \
        __m512 y[4], z[2];                                                                         \
        for (int k = 0; k < 4; k++) /* lanes 0-7: x[2k]'s halves combined, 8-15: x[2k + 1]'s */    \
            y[k] = OP(_mm512_shuffle_f32x4(x[2 * k], x[2 * k + 1], 0x44),                          \
                      _mm512_shuffle_f32x4(x[2 * k], x[2 * k + 1], 0xee));                         \
        for (int k = 0; k < 2; k++) /* 128-bit lane q: head 4k + q, 4 values */                    \
            z[k] = OP(_mm512_shuffle_f32x4(y[2 * k], y[2 * k + 1], 0x88),                          \
                      _mm512_shuffle_f32x4(y[2 * k], y[2 * k + 1], 0xdd));                         \
        __m512 w = OP(_mm512_shuffle_ps(z[0], z[1], 0x44), _mm512_shuffle_ps(z[0], z[1], 0xee));   \
        w = OP(w, _mm512_shuffle_ps(w, w, 0xb1)); /* lane q: head q at 0, head 4 + q at 2 */       \
        return _mm512_permutexvar_ps(                                                              \
            _mm512_set_epi32(14, 10, 6, 2, 12, 8, 4, 0, 14, 10, 6, 2, 12, 8, 4, 0), w);            \
    }
REDUCE8(reduce8_max, _mm512_max_ps)
REDUCE8(reduce8_add, _mm512_add_ps)
#undef REDUCE8

/* 2^x, masked to zero outside k: x rounded to n + r, |r| <= 1/2, 2^r by a degree-6
 * polynomial (Taylor; relative error < 2e-7 on [-1/2, 1/2]), 2^n by VSCALEFPS. */
INL __m512 exp2_maskz(__mmask16 k, __m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-126.0f));
    const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_sub_ps(x, n);
    __m512 y = _mm512_set1_ps(1.5403530393381609e-4f);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3333558146428443e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(9.6181291076284772e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.5504108664821580e-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(2.4022650695910071e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(6.9314718055994531e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps(k, y, n);
}

INL __mmask16 tok_mask(int n)
{
    return n >= SUB ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* The block loop, compiled five times: one head group (paired = 0) on K rows or (kt) on K
 * tiles, and pairs of head groups on K rows; the last two also with bf16 products (bf: q
 * and p as bf16, their hi halves only: half the products). */
INL void attend(const ws_attn_problem *p, int s, int kvh, int qhead, int i0, int i1, int G,
                float *o, float *lse, void *scratch, const int paired, const int kt, const int bf)
{
    const ws_kv_layout *kv = &p->kv;
    const ws_attn_seq *sq = &p->seqs[s];
    const int dk = kv->d_k, dv = kv->d_v, P = kv->page_tokens;
    const int H = G < HMAX ? G : HMAX, n_hg = (G + H - 1) / H, ksteps = dk / 32;
    const amx_scratch sp = scratch_plan(kv, G);
    char *w = scratch;
    uint16_t *qv = (uint16_t *)(w + sp.qv);
    float *ob = (float *)(w + sp.o), *sb = (float *)(w + sp.s), *sr = (float *)(w + sp.sr);
    /* O groups: one head group (G <= 8) keeps head h's hi part in O row h and its lo part
     * in row 8 + h, so one P tile (hi rows, lo rows) serves both. Two or more head groups
     * are taken in pairs: O row 8 * (hg & 1) + h of pair hg / 2 holds head h of group hg
     * whole, and P comes as a hi tile and a lo tile, both multiplied into the same rows:
     * the same products per token as two groups of hi/lo rows, but half the O rows to
     * load and store per super-block and each V tile loaded once for 16 heads. */
    const int n_og = paired ? (n_hg + 1) / 2 : 1;
    /* Zero-slot P (one head group on V rows) of sub-block j at pb0 + j * prows * 16 (32-bit
     * words): hi rows 0.., lo rows r_lo.., the odd-slot copies of both at r_ohi.. and
     * r_olo.. when odd_apart. */
    uint32_t *pb0 = (uint32_t *)(w + sp.p + 64);
    const int r_lo = 8, r_ohi = 16, r_olo = 24, prows = PROWS;
    uint16_t *kg = kv->k_tiles ? (uint16_t *)(w + sp.kg) : NULL;
    uint16_t *vg = !kv->v_shares_k && (kv->v_pairs || kv->k_tiles) ? (uint16_t *)(w + sp.vg) : NULL;
    uint16_t *tb = (uint16_t *)(w + sp.tb), *tbv = tb + 2 * 512;
    float *ml = (float *)(w + sp.ml); /* per head group: m[16], l[16] (halves duplicated) */
    const size_t o_hg = (size_t)16 * dv;

    /* q tiles: [group][kstep][16 pairs][16 cols][2], column h = hi of head h, 8 + h = lo
     * (columns of absent heads zero); a pair (dims 2r, 2r+1) is one 32-bit word. */
    const float *q = p->q + ((size_t)s * p->n_q_heads + (size_t)qhead) * dk;
    uint32_t *qw = (uint32_t *)qv;
    const int n_qt = paired ? 2 * n_og : n_hg; /* paired: a hi and a lo tile per pair */
    /* The tiles stay valid for the next chunk of the same sequence and KV head that this
     * thread runs in the same call (the driver zeroes the key once per call): packing
     * MLA's 16 heads costs ~10 us, a tenth of a 512-token chunk. */
    amx_q_key *key = (amx_q_key *)(w + sp.key);
    const int packed = key->q == q && key->G == G && key->dk == dk;
    if (!packed && kt) /* absent heads' rows: zero (the transposes below write whole tiles) */
        memset(qw, 0, (size_t)n_qt * ksteps * 16 * 16 * 4);
    /* The transpose network: stage k swaps register bit k with lane bit k (four stages: a
     * 16 x 16 transpose of 32-bit words, the q tiles below; three: the softmax's). */
    __m512i ia[4], ib[4];
    for (int k = 0; k < 4; k++) {
        int32_t a[16], b[16];
        for (int x = 0; x < 16; x++) {
            const int bit = 1 << k;
            a[x] = (x & bit) ? 16 + (x ^ bit) : x;
            b[x] = (x & bit) ? 16 + x : (x | bit);
        }
        ia[k] = _mm512_loadu_si512(a), ib[k] = _mm512_loadu_si512(b);
    }
    if (!packed && kt) /* K tiles: q is the A tile, rows h (hi) and 8 + h (lo) */
        for (int g = 0; g < G; g++)
            for (int ks = 0; ks < ksteps; ks++) {
                uint32_t *dst = qw + (size_t)ks * 16 * 16;
                q_halves(q + (size_t)g * dk + 32 * ks, dst + g * 16, dst + (8 + g) * 16);
            }
    /* Otherwise q is the B tile: column x of a tile is one head's hi or lo half (paired:
     * head x % 8 of group 2 pg + x / 8, the hi tile then the lo tile; else hi of head x of
     * group hg, lo of head x - 8), gathered as 16 column vectors and transposed. */
    for (int t = 0; t < n_qt * ksteps && !packed && !kt; t += 1 + paired) {
        const int ks = paired ? (t / 2) % ksteps : t % ksteps,
                  g0 = paired ? t / 2 / ksteps * 16 : t / ksteps * H;
        uint32_t c[2][16][16] __attribute__((aligned(64))); /* [hi, lo][column][pair] */
        for (int x = 0; x < 16; x++) {
            const int h = paired ? x : x % 8, g = g0 + h;
            if ((paired || (h < H && x < 8)) && g < G)
                q_halves(q + (size_t)g * dk + 32 * ks, c[0][x], c[1][x]);
            else if (paired || x < 8)
                memset(c[0][x], 0, 64), memset(c[1][x], 0, 64);
        }
        for (int k = 0; k < 1 + paired; k++) {
            __m512 v[16];
            for (int x = 0; x < 16; x++) /* one head group: lo halves in columns 8.. */
                v[x] = _mm512_load_ps((const float *)(paired || x < 8 ? c[k][x] : c[1][x - 8]));
            for (int st = 0; st < 4; st++)
                for (int r = 0; r < 16; r++)
                    if (!(r & (1 << st)))
                        swap_bit(&v[r], &v[r | (1 << st)], ia[st], ib[st]);
            for (int r = 0; r < 16; r++)
                _mm512_storeu_ps((float *)(qw + (size_t)(t + k) * 256 + r * 16), v[r]);
        }
    }
    *key = (amx_q_key){.q = q, .G = G, .dk = dk};
    memset(ob, 0, sizeof(float) * o_hg * n_og);
    memset(w + sp.p, 0, (size_t)n_og * NSUB * prows * 64);          /* pads, absent heads: zero */
    const __mmask16 hmask = (__mmask16)(((1u << H) - 1) * 0x0101u); /* lanes of real heads */
    for (int hg = 0; hg < n_hg; hg++) {
        float *m = ml + hg * 32, *l = m + 16;
        _mm512_storeu_ps(m,
                         _mm512_mask_mov_ps(_mm512_setzero_ps(), hmask, _mm512_set1_ps(-INFINITY)));
        _mm512_storeu_ps(l, _mm512_setzero_ps());
    }
    config(bf && !paired ? 8 : 16);

    /* Combining a score tile's rows r and r + 8 into [tok r, 8 heads | tok r+8, 8 heads]:
     * hi columns, then lo columns. */
    __m512i ilo, ihi;
    {
        int32_t a[16], b[16];
        for (int x = 0; x < 16; x++) {
            a[x] = x < 8 ? x : 16 + x - 8;
            b[x] = a[x] + 8;
        }
        ilo = _mm512_loadu_si512(a), ihi = _mm512_loadu_si512(b);
    }
    /* Paired: a score tile holds 16 heads (hi + lo summed); group hg & 1 takes columns
     * 8 (hg & 1).. of rows r and r + 8. */
    __m512i isel[2];
    for (int k = 0; k < 2; k++) {
        int32_t a[16];
        for (int x = 0; x < 16; x++)
            a[x] = x < 8 ? 8 * k + x : 16 + 8 * k + x - 8;
        isel[k] = _mm512_loadu_si512(a);
    }
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    /* Scores in base-2 units (the max m too; lse = m ln 2 + log l) */
    const __m512 vscale2 = _mm512_set1_ps(p->scale * (float)M_LOG2E);
    const __mmask16 hm8 = (__mmask16)((1u << H) - 1);
    const int qk_steps = ksteps, pv_steps = dv / 32;
    /* Zero slots: the odd-slot P tile is the even-slot one loaded 2 bytes earlier (rows
     * straddle cache lines), or, when P is reloaded for many column steps (d_v 512: 16), a
     * copy stored aligned beside it: 5-7% faster for MLA (measured when its paired groups
     * still used zero slots), ~1% slower for d_v = 128 (A/B runs). */
    const int odd_apart = pv_steps >= 8;
    /* pf_step calls per full super-block: the score tiles (a pair of head groups and four
     * sub-blocks per step when paired, see scores), each sub-block's probabilities (vector
     * work: the line-fill buffers are free of tile loads then; 6% faster for Qwen3's shape
     * than prefetching in the tile loops only) and P.V. */
    const int vp = kv->v_pairs;
    /* gv: paired groups on V rows take P in token pairs too, V re-laid per column step */
    const int gv = paired && !vp, pp = vp || gv;
    uint16_t *gvb = (uint16_t *)(w + sp.gv);
    const int pf_steps = (paired ? n_og * (NSUB / 2) : NSUB) * qk_steps + NSUB * n_hg +
                         pv_steps * n_og * (pp ? NSUB / 2 : NSUB);
    /* P in token pairs (pp): tiles per O group and pair of sub-blocks, [16 rows][32 tokens] bf16:
     * one (hi rows 0..7, lo rows 8..15) for one head group, a hi and a lo tile when paired. */
    const int n_pt = paired ? 2 : 1;
    uint16_t *pv0 = (uint16_t *)(w + sp.p);
#define PT(og, b, k) (pv0 + ((((size_t)(og) * (NSUB / 2) + (b)) * n_pt + (k)) * 512))

    /* Super-blocks are software-pipelined: the scores of super-block b + 1 (tile work) are
     * issued before the softmax of b (vector work), pairs of head groups all at once, one
     * head group a sub-block between each of the softmax's steps (0.92-0.94 of the time
     * from memory with the prefetch in turns, for 1 or 2 threads, V rows or pairs, groups
     * of 4 or 8; A/B runs), the first super-block's in full before the loop. */
    score_ctx sc = {.sq = sq,
                    .kv = kv,
                    .kvh = kvh,
                    .i1 = i1,
                    .n_hg = n_hg,
                    .n_og = n_og,
                    .paired = paired,
                    .ksteps = ksteps,
                    .kt = kt,
                    .qv = qv,
                    .sb = sb,
                    .kg = kg,
                    .vg = vg,
                    .tb = tb,
                    .defer = 0,
                    .bf = bf};
    int cur = 0;
    const size_t s_sb = (size_t)n_hg * NSUB * SUB * 16; /* floats of scores per super-block */
    pf_cursor pf = {.n = 0};
    scores(&sc, i0, 0, &pf);
    sc.defer = !paired;
    for (int i = i0; i < i1; i += NSUB * SUB) {
        const int nsub = sc.nsub[cur];
        const sub_rows *sub = sc.sub[cur];
        /* Super-block b + 2 is prefetched (to L2) over this iteration's steps: page runs
         * in turns (pf_cursor), scattered rows of a list at once (the hardware cannot guess
         * them). */
        pf.n = 0; /* regions below; pf_start sets the rest */
        const int ipf = i + 2 * NSUB * SUB;
        for (int j = 0; j < NSUB && ipf + j * SUB < i1; j++) {
            const int it = ipf + j * SUB, n = i1 - it < SUB ? i1 - it : SUB;
            int t0;
            if (run_start(sq, P, it, n, &t0) || (!sq->sel && (t0 % P) + n <= P)) {
                const char *pg = sq->pages[t0 / P];
                pf.at[pf.n] = pg + 2 * ws_kv_k_off(kv, kvh, t0 % P);
                pf.len[pf.n++] = (size_t)(kt ? SUB : n) * dk * 2; /* a tile holds 16 tokens */
                if (!kv->v_shares_k) {
                    pf.at[pf.n] = pg + 2 * (kv->v_pairs ? ws_kv_v_pair_off(kv, kvh, t0 % P)
                                                        : ws_kv_v_off(kv, kvh, t0 % P));
                    pf.len[pf.n++] = (size_t)n * dv * 2;
                }
            } else { /* a list's rows: a region each, in the same turns */
                for (int r = 0; r < n; r++) {
                    const char *vr;
                    size_t vn;
                    ws_attn_row_bytes(sq, kv, kvh, sq->sel ? sq->sel[it + r] : it + r, &pf.at[pf.n],
                                      &pf.len[pf.n], &vr, &vn);
                    pf.n++;
                    if (vn)
                        pf.at[pf.n] = vr, pf.len[pf.n++] = vn;
                }
            }
        }
        size_t pf_bytes = 0;
        for (int r = 0; r < pf.n; r++)
            pf_bytes += pf.len[r];
        pf_start(&pf, (pf_bytes / (size_t)pf_steps + 63) & ~(size_t)63, kv->v_shares_k);
        const int has_next = i + NSUB * SUB < i1;
        if (has_next)
            scores(&sc, i + NSUB * SUB, cur ^ 1, &pf);
        const int next_ns = has_next && sc.defer ? sc.nsub[cur ^ 1] : 0; /* left to issue */

        for (int hg = 0; hg < n_hg; hg++) {
            const int og_i = paired ? hg / 2 : 0, rh = paired ? 8 * (hg & 1) : 0;
            float *og = ob + (size_t)og_i * o_hg, *m = ml + hg * 32, *l = m + 16;
            uint32_t *pb = pb0 + (size_t)og_i * NSUB * prows * 16;
            const float *sbh = sb + cur * s_sb + (size_t)(paired ? og_i : hg) * NSUB * SUB * 16;
            /* Softmax, pass 1: hi + lo, scale, mask; the super-block's max per head. */
            __m512 mx = ninf, ls[HMAX];
            if (kt) { /* S rows per head, 16 tokens each */
                __m512 mh[HMAX];
#pragma GCC unroll 8
                for (int h = 0; h < HMAX; h++)
                    mh[h] = ninf, ls[h] = _mm512_setzero_ps();
                for (int j = 0; j < nsub; j++) {
                    const float *st = sbh + j * SUB * 16;
                    const __mmask16 tm = tok_mask(sub[j].n);
#pragma GCC unroll 8
                    for (int h = 0; h < HMAX; h++)
                        if (h < H) {
                            const __m512 hs = _mm512_loadu_ps(st + h * 16);
                            const __m512 v = _mm512_mask_mul_ps(
                                ninf, tm,
                                bf ? hs : _mm512_add_ps(hs, _mm512_loadu_ps(st + (8 + h) * 16)),
                                vscale2);
                            _mm512_storeu_ps(sr + (j * 8 + h) * 16, v);
                            mh[h] = _mm512_max_ps(mh[h], v);
                        }
                }
                mx = reduce8_max(mh); /* lane h: head h */
            }
            for (int j = 0; j < nsub && !kt; j++) {
                const float *st = sbh + j * SUB * 16;
                const int n = sub[j].n;
#pragma GCC unroll 8
                for (int r = 0; r < 8; r++) {
                    const __m512 x = _mm512_loadu_ps(st + r * 16),
                                 y = _mm512_loadu_ps(st + (r + 8) * 16);
                    __m512 v = paired ? _mm512_permutex2var_ps(x, isel[hg & 1], y)
                                      : _mm512_add_ps(_mm512_permutex2var_ps(x, ilo, y),
                                                      _mm512_permutex2var_ps(x, ihi, y));
                    const __mmask16 ok =
                        hmask & (__mmask16)((r < n ? 0x00ffu : 0) | (r + 8 < n ? 0xff00u : 0));
                    v = _mm512_mask_mul_ps(ninf, ok, v, vscale2);
                    _mm512_storeu_ps(sr + (j * 8 + r) * 16, v);
                    mx = _mm512_max_ps(mx, v);
                }
            }
            if (!kt) /* lanes h and 8 + h: head h */
                mx = _mm512_max_ps(mx, _mm512_shuffle_f32x4(mx, mx, _MM_SHUFFLE(1, 0, 3, 2)));
            /* The new max and the rescale factor per head (K tiles: the lanes of real heads
             * only, the others hold no head); pass 2 of K tiles reads m per head. */
            const __mmask16 km = kt ? hm8 : (__mmask16)0xffff;
            const __m512 mo = _mm512_loadu_ps(m), mn = _mm512_mask_max_ps(mo, km, mo, mx);
            const __mmask16 had = _mm512_cmp_ps_mask(mo, ninf, _CMP_NEQ_OQ) & km;
            const __m512 alpha = exp2_maskz(had, _mm512_sub_ps(mo, mn));
            _mm512_storeu_ps(m, mn);
            /* Pass 2: probabilities, per-head rows, P tiles: rows h and H + h hold head h's
             * hi and lo halves in the even bf16 slots; the odd-slot tile is the same bytes
             * loaded 2 bytes earlier (the zero pad covers row 0's first slot). */
            __m512 lsum = _mm512_setzero_ps();
            /* The row loops here and in pass 1 are unrolled by hand (pragmas): GCC -O2 kept
             * e[] on the stack and each exp in a loop of its own; unrolled, the softmax of
             * Qwen3's shape takes ~10% less time with KV in L2 and the whole loop ~5% less
             * from memory (A/B runs, 2 threads; MLA 2-5%). */
            for (int j = 0; j < nsub; j++) {
                if (j < next_ns)
                    scores_sub(&sc, cur ^ 1, j, &pf);
                pf_step(&pf);
                const int n = sub[j].n;
                __m512 e[8];
                if (kt) { /* per head: the probabilities are rows already */
                    const __mmask16 tm = tok_mask(n);
#pragma GCC unroll 8
                    for (int h = 0; h < HMAX; h++)
                        if (h < H) {
                            e[h] =
                                exp2_maskz(tm, _mm512_sub_ps(_mm512_loadu_ps(sr + (j * 8 + h) * 16),
                                                             _mm512_set1_ps(m[h])));
                            ls[h] = _mm512_add_ps(ls[h], e[h]);
                        } else {
                            e[h] = _mm512_setzero_ps();
                        }
                }
#pragma GCC unroll 8
                for (int r = 0; r < 8 && !kt; r++) {
                    const __mmask16 ok =
                        hmask & (__mmask16)((r < n ? 0x00ffu : 0) | (r + 8 < n ? 0xff00u : 0));
                    e[r] =
                        exp2_maskz(ok, _mm512_sub_ps(_mm512_loadu_ps(sr + (j * 8 + r) * 16), mn));
                    lsum = _mm512_add_ps(lsum, e[r]);
                }
#pragma GCC unroll 3
                for (int k = 0; k < 3 && !kt; k++)
#pragma GCC unroll 8
                    for (int r = 0; r < 8; r++)
                        if (!(r & (1 << k)))
                            swap_bit(&e[r], &e[r | (1 << k)], ia[k], ib[k]);
                if (pp) {
                    uint16_t *th = PT(og_i, j / 2, 0) + (size_t)rh * 32 + (j & 1) * 16;
                    uint16_t *tl = paired ? PT(og_i, j / 2, 1) + (size_t)rh * 32 + (j & 1) * 16
                                          : th + 8 * 32;
#pragma GCC unroll 8
                    for (int h = 0; h < H; h++) {
                        const __m256i hi = (__m256i)_mm512_cvtneps_pbh(e[h]);
                        _mm256_storeu_si256((__m256i *)(th + h * 32), hi);
                        if (bf)
                            continue;
                        const __m256i lo =
                            (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(e[h], bf16_to_ps(hi)));
                        _mm256_storeu_si256((__m256i *)(tl + h * 32), lo);
                    }
                    continue;
                }
                uint32_t *pe = pb + (size_t)j * prows * 16 + (size_t)rh * 16;
#pragma GCC unroll 8
                for (int h = 0; h < H; h++) {
                    const __m256i hi = (__m256i)_mm512_cvtneps_pbh(e[h]);
                    const __m256i lo =
                        (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(e[h], bf16_to_ps(hi)));
                    const __m512i hw = _mm512_cvtepu16_epi32(hi), lw = _mm512_cvtepu16_epi32(lo);
                    _mm512_storeu_si512(pe + h * 16, hw);
                    if (odd_apart)
                        _mm512_storeu_si512(pe + (r_ohi + h) * 16, _mm512_slli_epi32(hw, 16));
                    if (bf) /* the tiles' 8 rows: hi only */
                        continue;
                    _mm512_storeu_si512(pe + (r_lo + h) * 16, lw);
                    if (odd_apart)
                        _mm512_storeu_si512(pe + (r_olo + h) * 16, _mm512_slli_epi32(lw, 16));
                }
            }
            for (int j = nsub; j < next_ns; j++)
                scores_sub(&sc, cur ^ 1, j, &pf);
            if (kt)
                lsum = reduce8_add(ls);
            else
                lsum =
                    _mm512_add_ps(lsum, _mm512_shuffle_f32x4(lsum, lsum, _MM_SHUFFLE(1, 0, 3, 2)));
            _mm512_storeu_ps(l, _mm512_fmadd_ps(alpha, _mm512_loadu_ps(l), lsum));
            /* Rescale the O rows (hi and lo parts) of heads whose max moved. */
            __mmask16 moved = _mm512_cmp_ps_mask(alpha, _mm512_set1_ps(1.0f), _CMP_NEQ_UQ) & hm8;
            if (moved) {
                float af[16];
                _mm512_storeu_ps(af, alpha);
                for (int h = 0; h < H; h++)
                    if (moved & (1u << h)) {
                        const __m512 a = _mm512_set1_ps(af[h]);
                        float *r0 = og + (size_t)(rh + h) * dv;
                        for (int c = 0; c < dv; c += 16)
                            _mm512_storeu_ps(r0 + c, _mm512_mul_ps(_mm512_loadu_ps(r0 + c), a));
                        if (paired || bf)
                            continue;
                        float *r1 = og + (size_t)(8 + h) * dv;
                        for (int c = 0; c < dv; c += 16)
                            _mm512_storeu_ps(r1 + c, _mm512_mul_ps(_mm512_loadu_ps(r1 + c), a));
                    }
            }
        }
        /* P in token pairs: O += P.V, 32 columns (two C tiles) at a time, per pair of
         * sub-blocks one P tile (two when paired) and two V tiles, as stored (v_pairs) or
         * gathered per column step (gv), one step ahead of its use so that the vector work
         * overlaps the tile work. */
        if (gv)
            gather_v_cols(sub, nsub, 0, gvb);
        /* One O group: the P tiles of both pairs of sub-blocks stay in tile registers for
         * all column steps (paired: pair 0's hi and lo in 4 and 5, pair 1's in 1 and 7;
         * else pair b in 4 + b), so each step loads only O and V. */
        const int held = pp && n_og == 1 && NSUB == 4;
        if (held && paired) {
            tile_load(4, PT(0, 0, 0), 64);
            tile_load(1, PT(0, 1, 0), 64);
            if (!bf) {
                tile_load(5, PT(0, 0, 1), 64);
                tile_load(7, PT(0, 1, 1), 64);
            }
        } else if (held) {
            tile_load(4, PT(0, 0, 0), 64);
            tile_load(5, PT(0, 1, 0), 64);
        }
/* The V tiles of pair of sub-blocks J for column step C, as stored (V pairs) or re-laid
 * (gv): the first at V_AT, the second (columns 16-31, or the hi tile) v_half elements on,
 * rows V_ROWS(J) bytes apart. */
#define V_AT(J, C)                                                                                 \
    (vp ? sub[J].v + 64 * (C) : gvb + ((size_t)((C)&1) * (NSUB / 2) + (size_t)(J) / 2) * 1024)
#define V_ROWS(J) (vp ? sub[J].vs : 64)
        const int v_half = vp ? 32 : 512;
        /* Pairs (MLA): 16 columns at a time, one O tile (0) and one V tile (6) per pair of
         * sub-blocks (V as stored or re-laid: lo tile 32c.., hi tile 32c + 16..). */
        for (int c = 0; c < pv_steps && held && paired; c++) {
            for (int hf = 0; hf < 2; hf++) {
                float *oc = ob + 32 * c + 16 * hf;
                tile_load(0, oc, dv * 4);
                tile_load(6, V_AT(0, c) + v_half * hf, V_ROWS(0));
                pf_step(&pf);
                tile_dp(0, 4, 6);
                if (!bf)
                    tile_dp(0, 5, 6);
                if (nsub > 2) {
                    tile_load(6, V_AT(2, c) + v_half * hf, V_ROWS(2));
                    tile_dp(0, 1, 6);
                    if (!bf)
                        tile_dp(0, 7, 6);
                }
                tile_store(0, oc, dv * 4);
            }
            if (gv && c + 1 < pv_steps)
                gather_v_cols(sub, nsub, c + 1, gvb + (size_t)((c + 1) & 1) * (NSUB / 2) * 1024);
        }
/* One head group (V pairs: held implies them): the two V tiles of pair of sub-blocks J times
 * its held P tile TP into O tiles 0 and 1. The step's prefetch quota goes after the V
 * loads, which so take the line-fill buffers first: 0.974-0.997 of the time for Qwen3's
 * shape from memory (A/B runs; between the two loads 0.989, after the products 1.006, and
 * the same order in the score tiles 1.007; MLA 1.001). */
#define PV_HELD(J, TP)                                                                             \
    do {                                                                                           \
        tile_load(6, sub[J].v + 64 * c, sub[J].vs);                                                \
        tile_load(7, sub[J].v + 64 * c + 32, sub[J].vs);                                           \
        pf_step(&pf);                                                                              \
        tile_dp(0, TP, 6);                                                                         \
        tile_dp(1, TP, 7);                                                                         \
    } while (0)
        for (int c = 0; c < pv_steps && held && !paired; c++) {
            tile_load(0, ob + 32 * c, dv * 4);
            tile_load(1, ob + 32 * c + 16, dv * 4);
            PV_HELD(0, 4);
            if (nsub > 2)
                PV_HELD(2, 5);
            tile_store(0, ob + 32 * c, dv * 4);
            tile_store(1, ob + 32 * c + 16, dv * 4);
        }
#undef PV_HELD
        for (int c = 0; c < pv_steps && pp && !held; c++) {
            for (int gi = 0; gi < n_og; gi++) {
                float *og = ob + (size_t)gi * o_hg;
                tile_load(0, og + 32 * c, dv * 4);
                tile_load(1, og + 32 * c + 16, dv * 4);
                for (int j = 0; j < nsub; j += 2) {
                    pf_step(&pf);
                    tile_load(6, V_AT(j, c), V_ROWS(j));
                    tile_load(7, V_AT(j, c) + v_half, V_ROWS(j));
                    tile_load(4, PT(gi, j / 2, 0), 64);
                    tile_dp(0, 4, 6);
                    tile_dp(1, 4, 7);
                    if (!paired || bf)
                        continue;
                    tile_load(5, PT(gi, j / 2, 1), 64);
                    tile_dp(0, 5, 6);
                    tile_dp(1, 5, 7);
                }
                tile_store(0, og + 32 * c, dv * 4);
                tile_store(1, og + 32 * c + 16, dv * 4);
            }
            if (gv && c + 1 < pv_steps)
                gather_v_cols(sub, nsub, c + 1, gvb + (size_t)((c + 1) & 1) * (NSUB / 2) * 1024);
        }
        /* Zero slots (one head group on V rows, so one O group): O += P.V, 32 columns (an
         * even and an odd C tile) at a time. */
        for (int c = 0; c < pv_steps && !pp; c++) {
            tile_load(0, ob + 32 * c, dv * 4);
            tile_load(1, ob + 32 * c + 16, dv * 4);
            for (int j = 0; j < nsub; j++) {
                pf_step(&pf);
                const uint32_t *pe = pb0 + (size_t)j * prows * 16;
                size_t ld;
                const uint16_t *vt = tile_rows(sub[j].rows ? sub[j].rv : NULL, sub[j].v, sub[j].vs,
                                               (size_t)32 * c, tbv, &ld);
                tile_load(6, vt, ld);
                tile_load(4, pe, 64);
                tile_dp(0, 4, 6);
                tile_load(5, odd_apart ? (const char *)(pe + r_ohi * 16) : (const char *)pe - 2,
                          64);
                tile_dp(1, 5, 6);
            }
            tile_store(0, ob + 32 * c, dv * 4);
            tile_store(1, ob + 32 * c + 16, dv * 4);
        }
        pf.quota = (size_t)-1 / 2; /* whatever is left */
        pf_step(&pf);
        cur ^= 1;
    }
#undef PT
#undef V_AT
#undef V_ROWS
    tile_release();
    /* o = (hi part + lo part) / l, columns back in order; lse = m + log l. Per 32 columns,
     * output lane x of half k (0, 1) is lane cix[k][x] of the pair (first 16, next 16):
     * V pairs: in order; re-laid V (gv): the first 16 (lo tile) hold columns 8j + 0..3, the
     * next 16 (hi tile) 8j + 4..7; zero slots: even columns, then odd ones. */
    int32_t cix[2][16];
    for (int k = 0; k < 2; k++)
        for (int x = 0; x < 16; x++) {
            const int at = 16 * k + x, j = at / 8, u = at % 8;
            cix[k][x] = vp   ? at
                        : gv ? (u < 4 ? 4 * j + u : 16 + 4 * j + u - 4)
                             : (at & 1) * 16 + at / 2;
        }
    const __m512i ci0 = _mm512_loadu_si512(cix[0]), ci1 = _mm512_loadu_si512(cix[1]);
    for (int hg = 0; hg < n_hg; hg++) {
        const int rh = paired ? 8 * (hg & 1) : 0;
        const float *og = ob + (size_t)(paired ? hg / 2 : 0) * o_hg, *m = ml + hg * 32, *l = m + 16;
        for (int h = 0; h < H; h++) {
            const int g = hg * H + h;
            float *out = o + (size_t)g * dv;
            if (l[h] == 0) {
                memset(out, 0, sizeof(float) * (size_t)dv);
                lse[g] = -INFINITY;
                continue;
            }
            const __m512 inv = _mm512_set1_ps(1.0f / l[h]);
            /* a head's whole row (paired) or its hi row plus its lo row */
            const float *r0 = og + (size_t)(rh + h) * dv, *r1 = og + (size_t)(8 + h) * dv;
            for (int c = 0; c < dv; c += 32) {
                __m512 a = _mm512_loadu_ps(r0 + c), b = _mm512_loadu_ps(r0 + c + 16);
                if (!paired && !bf) {
                    a = _mm512_add_ps(a, _mm512_loadu_ps(r1 + c));
                    b = _mm512_add_ps(b, _mm512_loadu_ps(r1 + c + 16));
                }
                _mm512_storeu_ps(out + c, _mm512_mul_ps(_mm512_permutex2var_ps(a, ci0, b), inv));
                _mm512_storeu_ps(out + c + 16,
                                 _mm512_mul_ps(_mm512_permutex2var_ps(a, ci1, b), inv));
            }
            lse[g] = m[h] * (float)M_LN2 + logf(l[h]);
        }
    }
}

static void amx_attend(const ws_attn_problem *p, int bf16, int s, int kvh, int qhead, int i0,
                       int i1, int G, float *o, float *lse, void *scratch)
{
    const int bf = bf16 && bf16_form(&p->kv, G);
    if (G > HMAX && bf)
        attend(p, s, kvh, qhead, i0, i1, G, o, lse, scratch, 1, 0, 1);
    else if (G > HMAX)
        attend(p, s, kvh, qhead, i0, i1, G, o, lse, scratch, 1, 0, 0);
    else if (p->kv.k_tiles && bf)
        attend(p, s, kvh, qhead, i0, i1, G, o, lse, scratch, 0, 1, 1);
    else if (p->kv.k_tiles)
        attend(p, s, kvh, qhead, i0, i1, G, o, lse, scratch, 0, 1, 0);
    else
        attend(p, s, kvh, qhead, i0, i1, G, o, lse, scratch, 0, 0, 0);
}

#ifdef WS_AMX_EMU
void ws_attn_cpu_amx_emu_attend(const ws_attn_problem *p, int bf16, int s, int kvh, int qhead,
                                int i0, int i1, int G, float *o, float *lse, void *scratch)
{
    amx_attend(p, bf16, s, kvh, qhead, i0, i1, G, o, lse, scratch);
}
#else
void ws_attn_cpu_amx_attend(const ws_attn_problem *p, int bf16, int s, int kvh, int qhead, int i0,
                            int i1, int G, float *o, float *lse, void *scratch)
{
    if (g_emulated)
        g_emulated(p, bf16, s, kvh, qhead, i0, i1, G, o, lse, scratch);
    else
        amx_attend(p, bf16, s, kvh, qhead, i0, i1, G, o, lse, scratch);
}

/* Peak of TDPBF16PS on full 16x16x32 tiles, in useful flop: the kernel's tiles carry the
 * hi and lo halves of q or p side by side, so at most half of a product's multiply-adds
 * are useful: each counts 16x16x32 flop (half its multiply-adds x 2). Four tiles (two
 * accumulators, one A and one B tile): on the development host the products then take
 * 14-15 TSC cycles whatever the minute, while with all eight tiles in use they took
 * 14-17 in some minutes and 31-37 in others (scripts/probe/tile_register_count.c). */
double ws_attn_cpu_amx_peak_flops(int iters)
{
    config(16);
    static const uint16_t ones[16 * 32] = {0};
    tile_load(4, ones, 64);
    tile_load(6, ones, 64);
    tile_zero(0);
    tile_zero(1);
    for (int i = 0; i < iters; i++) {
        tile_dp(0, 4, 6);
        tile_dp(1, 4, 6);
        tile_dp(0, 4, 6);
        tile_dp(1, 4, 6);
    }
    float out[256];
    tile_store(0, out, 64);
    tile_release();
    return 4.0 * iters * 16 * 16 * 32 + out[0] * 0.0;
}
#endif

#pragma GCC pop_options
