/* test_attn_bench: the bench's synthetic problems (calib/probe/attn_bench.c) hold what they
 * say: every page of every table is its own slot, filled with the seeded values (a page
 * left unwritten would read as the kernel's zero page from the caches and inflate every
 * figure), and the same seed gives the same data. Placement by node is in test_numa.c. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_bench.h"
#include "membw.h"

static int cmp_ptr(const void *a, const void *b)
{
    const uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* Checks b's pages: distinct slots, no two with the same first 32 bytes, fewer than 1% zero
 * elements in each; returns a checksum of all of them. */
static uint64_t check_pages(const ws_attn_bench *b, const ws_attn_bench_cfg *cfg)
{
    const ws_attn_problem *p = ws_attn_bench_problem(b);
    const int np = (cfg->ctx + cfg->kv.page_tokens - 1) / cfg->kv.page_tokens;
    const size_t n = (size_t)cfg->batch * np, elems = ws_kv_page_bytes(&cfg->kv) / 2;
    uintptr_t *addr = malloc(sizeof *addr * n);
    uint64_t *head = malloc(sizeof *head * n), sum = 0;
    cr_assert(addr && head);
    for (int s = 0; s < cfg->batch; s++)
        for (int j = 0; j < np; j++) {
            const size_t i = (size_t)s * np + j;
            const uint16_t *x = p->seqs[s].pages[j];
            addr[i] = (uintptr_t)x;
            size_t zeros = 0;
            for (size_t e = 0; e < elems; e++) {
                zeros += x[e] == 0 || x[e] == 0x8000;
                sum = sum * 31 + x[e];
            }
            cr_assert(zeros * 100 < elems, "seq %d page %d: %zu of %zu elements zero", s, j, zeros,
                      elems);
            memcpy(&head[i], x, sizeof head[i]);
        }
    qsort(addr, n, sizeof *addr, cmp_ptr);
    for (size_t i = 1; i < n; i++)
        cr_assert(addr[i] - addr[i - 1] >= ws_kv_page_bytes(&cfg->kv), "two pages overlap");
    qsort(head, n, sizeof *head, cmp_ptr);
    for (size_t i = 1; i < n; i++)
        cr_assert_neq(head[i], head[i - 1], "two pages begin alike");
    free(addr);
    free(head);
    return sum;
}

Test(attn_bench, every_page_filled_and_its_own)
{
    ws_attn_bench_cfg cfg = {
        .kv = {.page_tokens = 64, .n_kv_heads = 2, .d_k = 64, .d_v = 64, .dtype = WS_DT_BF16},
        .n_q_heads = 8,
        .scale = 0.125f,
        .batch = 3,
        .ctx = 5000,
        .seed = 5};
    ws_err err = {0};
    ws_pool *pool = ws_pool_create(2, &err);
    cr_assert_not_null(pool, "%s", err.msg);
    uint64_t sum[3];
    for (int r = 0; r < 3; r++) { /* on the pool, without one, and fp16 */
        cfg.kv.dtype = r == 2 ? WS_DT_FP16 : WS_DT_BF16;
        ws_attn_bench *b = ws_attn_bench_create(&cfg, r == 1 ? NULL : pool, &err);
        cr_assert_not_null(b, "%s", err.msg);
        sum[r] = check_pages(b, &cfg);
        ws_attn_bench_destroy(b);
    }
    cr_assert_eq(sum[0], sum[1], "the same seed filled other values");
    cr_assert_neq(sum[0], sum[2]);
    ws_pool_destroy(pool);
}

/* Before each kernel repeat the bench evicts every KV page of the problem (cold, as in a
 * decode step, at any cache size), on a pool or without one, leaving the data as it was. */
Test(attn_bench, evict_every_page)
{
    ws_attn_bench_cfg cfg = {
        .kv = {.page_tokens = 64, .n_kv_heads = 2, .d_k = 64, .d_v = 64, .dtype = WS_DT_BF16},
        .n_q_heads = 8,
        .scale = 0.125f,
        .batch = 3,
        .ctx = 5000,
        .seed = 5};
    ws_err err = {0};
    ws_pool *pool = ws_pool_create(2, &err);
    cr_assert_not_null(pool, "%s", err.msg);
    ws_attn_bench *b = ws_attn_bench_create(&cfg, pool, &err);
    cr_assert_not_null(b, "%s", err.msg);
    const uint64_t before = check_pages(b, &cfg);
    const size_t pages = 3 * ((5000 + 63) / 64);
    for (int k = 0; k < 2; k++) {
        const unsigned long long e0 = ws_membw_evicted_bytes();
        ws_attn_bench_evict(b, k ? NULL : pool);
        cr_assert_eq(ws_membw_evicted_bytes() - e0, pages * ws_kv_page_bytes(&cfg.kv));
    }
    cr_assert_eq(check_pages(b, &cfg), before, "eviction changed the KV");
    ws_attn_bench_destroy(b);
    ws_pool_destroy(pool);
}
