/* test_gpu_book: the bookkeeping the CUDA backend runs on the host (kernels/gpu_book.c):
 * which ping-pong half a layer's pages land in and the submit/acquire/release protocol,
 * the D-window ring (append slots, wraparound, page table oldest first, flush order), and
 * the grouping of flush copies into runs. Pure CPU: runs everywhere. */
#include <criterion/criterion.h>
#include <string.h>

#include "gpu_book.h"

Test(pingpong, layers_alternate_halves_and_slots)
{
    ws_pingpong pp;
    ws_pingpong_init(&pp, 4);
    ws_err err = {0};
    int h0, h1, h2;
    /* Layer 0 and layer 1 are in flight together (l+1's copies overlap l's attention). */
    cr_assert_eq(ws_pingpong_submit(&pp, 4, 0, &h0, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_pingpong_submit(&pp, 3, 1, &h1, &err), 0, "%s", err.msg);
    cr_assert_eq(h0, 0);
    cr_assert_eq(h1, 1);
    cr_assert_eq(ws_pingpong_slot(&pp, h0, 3), 3u);
    cr_assert_eq(ws_pingpong_slot(&pp, h1, 0), 4u);
    /* Layer 2 may not land in half 0 before layer 0's attention released it. */
    cr_assert_eq(ws_pingpong_submit(&pp, 1, 2, &h2, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "still copying"), NULL, "%s", err.msg);
    cr_assert_eq(ws_pingpong_acquire(&pp, h0, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_pingpong_submit(&pp, 1, 2, &h2, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "still attending"), NULL, "%s", err.msg);
    cr_assert_eq(ws_pingpong_release(&pp, h0, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_pingpong_submit(&pp, 1, 2, &h2, &err), 0, "%s", err.msg);
    cr_assert_eq(h2, 0);
    cr_assert_eq(pp.tag[0], 2);
    cr_assert_eq(pp.tag[1], 1);
    cr_assert_eq(pp.submits, 3u);
    cr_assert_eq(pp.pages, 8u);
}

Test(pingpong, protocol_errors)
{
    ws_pingpong pp;
    ws_pingpong_init(&pp, 2);
    ws_err err = {0};
    int h;
    cr_assert_eq(ws_pingpong_submit(&pp, 3, 0, &h, &err), WS_EINVAL, "over capacity");
    cr_assert_eq(ws_pingpong_submit(&pp, -1, 0, &h, &err), WS_EINVAL);
    cr_assert_eq(ws_pingpong_acquire(&pp, 0, &err), WS_EINVAL, "nothing submitted");
    cr_assert_eq(ws_pingpong_release(&pp, 0, &err), WS_EINVAL);
    cr_assert_eq(ws_pingpong_acquire(&pp, 2, &err), WS_EINVAL, "no half 2");
    cr_assert_eq(ws_pingpong_submit(&pp, 0, 0, &h, &err), 0, "an empty layer is fine");
    cr_assert_eq(ws_pingpong_release(&pp, h, &err), WS_EINVAL, "release before acquire");
    cr_assert_eq(ws_pingpong_acquire(&pp, h, &err), 0);
    cr_assert_eq(ws_pingpong_acquire(&pp, h, &err), WS_EINVAL, "twice");
}

Test(ring, append_wrap_pages_and_flush)
{
    ws_ring r;
    ws_err err = {0};
    cr_assert_eq(ws_ring_init(&r, 12, 4, &err), 0, "%s", err.msg);
    int slot, pages[3], fl[3];
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(ws_ring_append(&r, &slot, &err), 0);
        cr_assert_eq(slot, i);
    }
    cr_assert_eq(ws_ring_pages(&r, pages), 3);
    cr_assert_eq(pages[0], 0);
    cr_assert_eq(pages[2], 2);
    cr_assert_eq(ws_ring_full_pages(&r), 2);
    cr_assert_eq(ws_ring_flush(&r, 3, fl, &err), WS_EINVAL, "only 2 full pages");
    cr_assert_eq(ws_ring_flush(&r, 2, fl, &err), 0, "%s", err.msg);
    cr_assert_eq(fl[0], 0);
    cr_assert_eq(fl[1], 1);
    cr_assert_eq(r.head, 8);
    cr_assert_eq(r.count, 2);
    /* Tokens 10, 11 fill page 2; the next ones wrap into page 0, then page 1. */
    int want[] = {10, 11, 0, 1, 2, 3, 4, 5, 6, 7};
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(ws_ring_append(&r, &slot, &err), 0);
        cr_assert_eq(slot, want[i], "append %d", i);
    }
    cr_assert_eq(ws_ring_append(&r, &slot, &err), WS_EINVAL, "full at W");
    cr_assert_eq(ws_ring_pages(&r, pages), 3);
    cr_assert_eq(pages[0], 2, "oldest first after wraparound");
    cr_assert_eq(pages[1], 0);
    cr_assert_eq(pages[2], 1);
    cr_assert_eq(ws_ring_flush(&r, 3, fl, &err), 0, "%s", err.msg);
    cr_assert_eq(fl[0], 2);
    cr_assert_eq(fl[1], 0);
    cr_assert_eq(fl[2], 1);
    cr_assert_eq(r.count, 0);
    cr_assert_eq(r.head, 8, "head moves by whole pages, modulo W");
    cr_assert_eq(r.appended, 20u);
    cr_assert_eq(r.flushed, 20u);
    cr_assert_eq(ws_ring_pages(&r, pages), 0);
    cr_assert_eq(ws_ring_init(&r, 10, 4, &err), WS_EINVAL, "W not a multiple of P");
}

Test(ring, long_run_keeps_invariants)
{
    /* Random appends and flushes: the page table always lists ceil(count/P) distinct ring
     * pages starting at the head page; flushed + held == appended. */
    ws_ring r;
    ws_err err = {0};
    cr_assert_eq(ws_ring_init(&r, 64, 8, &err), 0);
    unsigned rng = 1;
    int pages[8], fl[8];
    for (int step = 0; step < 5000; step++) {
        rng = rng * 1103515245u + 12345u;
        int slot;
        if ((rng >> 16) % 5 == 0 && ws_ring_full_pages(&r) > 0) {
            int n = 1 + (int)((rng >> 20) % (unsigned)ws_ring_full_pages(&r));
            int head_page = r.head / 8;
            cr_assert_eq(ws_ring_flush(&r, n, fl, &err), 0);
            for (int i = 0; i < n; i++)
                cr_assert_eq(fl[i], (head_page + i) % 8);
        } else if (r.count < 64) {
            int expect = (r.head + r.count) % 64;
            cr_assert_eq(ws_ring_append(&r, &slot, &err), 0);
            cr_assert_eq(slot, expect);
        }
        cr_assert_eq(r.head % 8, 0);
        cr_assert_eq(r.flushed + (uint64_t)r.count, r.appended);
        int n = ws_ring_pages(&r, pages);
        cr_assert_eq(n, (r.count + 7) / 8);
        unsigned seen = 0;
        for (int i = 0; i < n; i++) {
            cr_assert_eq(seen & (1u << pages[i]), 0u, "distinct pages");
            seen |= 1u << pages[i];
        }
    }
}

Test(copy_runs, merges_only_contiguous_pairs)
{
    static char host[10 * 100];
    size_t src[6] = {2, 3, 4, 0, 1, 7};
    void *dst[6] = {host + 0, host + 100, host + 500, host + 600, host + 700, host + 800};
    ws_copy_run runs[6];
    int n = ws_copy_runs(src, dst, 6, 100, runs);
    cr_assert_eq(n, 4);
    cr_assert_eq(runs[0].src, 2u);
    cr_assert_eq(runs[0].n_pages, 2, "2,3 -> host+0,+100");
    cr_assert_eq(runs[1].src, 4u);
    cr_assert_eq(runs[1].n_pages, 1, "destination jumps");
    cr_assert_eq(runs[2].src, 0u);
    cr_assert_eq(runs[2].n_pages, 2, "wrapped source 0,1 contiguous again");
    cr_assert_eq(runs[2].dst, (void *)(host + 600));
    cr_assert_eq(runs[3].src, 7u);
    cr_assert_eq(ws_copy_runs(src, dst, 0, 100, runs), 0);
}
