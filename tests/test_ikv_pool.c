/* test_ikv_pool: the host page pools of the InplaceKVCache (runtime/ikv_pool.c): the
 * capacity holds exactly, running out names the pool and the amounts, pages come back on
 * free, addresses are distinct and stable, nodes fall back only when a node is empty, and
 * the page states catch a second write. */
#include <criterion/criterion.h>
#include <string.h>

#include "ikv_pool.h"

Test(ikv_pool, capacity_is_exact_and_pages_come_back)
{
    const int nodes[2] = {0, 0};
    ws_ikv_pool_config cfg = {.name = "CPU region", .page_bytes = 1000, .limit_bytes = 10999,
                              .n_nodes = 2, .node_ids = nodes, .chunk_bytes = 3000};
    ws_err err = {0};
    ws_ikv_pool *p = ws_ikv_pool_create(&cfg, &err);
    cr_assert_not_null(p, "%s", err.msg);
    cr_assert_eq(ws_ikv_pool_capacity(p), 10);
    cr_assert_eq(ws_ikv_pool_mapped(p), 0);
    int id[11];
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(ws_ikv_pool_take(p, i % 2, &id[i], &err), 0, "%s", err.msg);
        char *a = ws_ikv_pool_addr(p, id[i]);
        memset(a, i, 1000); /* the whole page is writable */
        for (int j = 0; j < i; j++)
            cr_assert_neq(id[j], id[i]);
    }
    cr_assert_eq(ws_ikv_pool_take(p, 0, &id[10], &err), WS_ENOMEM);
    cr_assert(strstr(err.msg, "CPU region full") && strstr(err.msg, "10 of 10"), "%s", err.msg);
    cr_assert_eq(ws_ikv_pool_in_use(p), 10);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(*(char *)ws_ikv_pool_addr(p, id[i]), i); /* no page overlaps another */
    cr_assert_eq(ws_ikv_pool_mark_written(p, id[3]), WS_IKV_PAGE_TAKEN);
    cr_assert_eq(ws_ikv_pool_mark_written(p, id[3]), WS_IKV_PAGE_WRITTEN); /* caught */
    void *a2 = ws_ikv_pool_addr(p, id[2]);
    ws_ikv_pool_give(p, id[3]);
    ws_ikv_pool_give(p, id[3]); /* a second give is ignored */
    ws_ikv_pool_give(p, id[2]);
    cr_assert_eq(ws_ikv_pool_in_use(p), 8);
    int again, own;
    cr_assert_eq(ws_ikv_pool_take(p, 1, &own, &err), 0, "%s", err.msg); /* node 1's own */
    cr_assert_eq(own, id[3]);
    /* node 1 has no free page left and nothing more may be mapped: node 0's */
    cr_assert_eq(ws_ikv_pool_take(p, 1, &again, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_ikv_pool_addr(p, again), a2);
    cr_assert_eq(ws_ikv_pool_state(p, again), WS_IKV_PAGE_TAKEN);
    for (int i = 0; i < 10; i++)
        ws_ikv_pool_give(p, id[i]);
    cr_assert_eq(ws_ikv_pool_in_use(p), 0);
    cr_assert_eq(ws_ikv_pool_pinned(p), 1);
    cr_assert_str_empty(ws_ikv_pool_note(p));
    ws_ikv_pool_destroy(p);
}

Test(ikv_pool, a_zero_limit_holds_nothing)
{
    ws_ikv_pool_config cfg = {.name = "XFER region", .page_bytes = 4096, .limit_bytes = 4095,
                              .pinned = 1};
    ws_err err = {0};
    ws_ikv_pool *p = ws_ikv_pool_create(&cfg, &err);
    cr_assert_not_null(p, "%s", err.msg);
    int id;
    cr_assert_eq(ws_ikv_pool_take(p, 0, &id, &err), WS_ENOMEM);
    cr_assert(strstr(err.msg, "XFER region full"), "%s", err.msg);
    ws_ikv_pool_destroy(p);
    cfg.page_bytes = 0;
    cr_assert_null(ws_ikv_pool_create(&cfg, &err));
    cr_assert_eq(err.code, WS_EINVAL);
}

Test(ikv_pool, each_node_gets_its_share_of_the_capacity)
{
    const int nodes[2] = {3, 5};
    ws_ikv_pool_config cfg = {.name = "CPU region", .page_bytes = 4096, .limit_bytes = 4096 * 10,
                              .n_nodes = 2, .node_ids = nodes};
    ws_err err = {0};
    ws_ikv_pool *p = ws_ikv_pool_create(&cfg, &err);
    cr_assert_not_null(p, "%s", err.msg);
    int id, on[2] = {0};
    for (int i = 0; i < 5; i++) { /* node 0 first: its chunk must leave node 1 its half */
        cr_assert_eq(ws_ikv_pool_take(p, 0, &id, &err), 0, "%s", err.msg);
        cr_assert_eq(ws_ikv_pool_node_id(p, id), 3);
    }
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(ws_ikv_pool_take(p, 1, &id, &err), 0, "%s", err.msg);
        on[ws_ikv_pool_node_id(p, id) == 5]++;
    }
    cr_assert_eq(on[1], 5, "node 1 got %d of its pages from node 0", on[0]);
    cr_assert_eq(ws_ikv_pool_take(p, 1, &id, &err), WS_ENOMEM);
    ws_ikv_pool_destroy(p);
}
