/* test_numa: the NUMA topology reader, memory placement and placement rule
 * (platform/numa.c), the thread pool's node-affine batches, and the CPU attention kernel on
 * a pool over two nodes with the pages' nodes given. The development host has one node,
 * so the multi-node cases run on topologies read from sysfs-shaped folders written here
 * (two nodes of one CPU each): the pinning, task order and chunking they drive are the
 * real ones; only the memory distances of a real two-node machine are missing. Also the KV
 * slab (calib/probe/kv_slab.c) that the bench and the calibrator deal their pages from. */
#include <criterion/criterion.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "attn_bench.h"
#include "attn_cpu.h"
#include "attn_fixture.h"
#include "helpers.h"
#include "kv_slab.h"
#include "membw.h"
#include "numa.h"
#include "pool.h"

/* A sysfs-shaped node folder in a fresh temporary folder: node<ids[i]>/cpulist = lists[i]. */
static void fake_sysfs(char *dir, size_t cap, int n, const int *ids, const char *const *lists)
{
    th_tmpdir(dir, cap);
    for (int i = 0; i < n; i++) {
        char sub[512], path[600];
        snprintf(sub, sizeof sub, "%s/node%d", dir, ids[i]);
        cr_assert_eq(mkdir(sub, 0755), 0, "mkdir %s", sub);
        th_write(sub, "cpulist", lists[i], path, sizeof path);
    }
}

static void cpus_of(unsigned char *mask, int lo, int hi)
{
    memset(mask, 0, WS_NUMA_MAX_CPUS);
    for (int c = lo; c <= hi; c++)
        mask[c] = 1;
}

Test(numa, parses_cpu_lists)
{
    unsigned char c[WS_NUMA_MAX_CPUS];
    ws_err err = {0};
    cr_assert_eq(ws_numa_parse_cpulist(" 0-3,8,10-11\n", c, &err), 0, "%s", err.msg);
    int n = 0;
    for (int i = 0; i < WS_NUMA_MAX_CPUS; i++)
        n += c[i];
    cr_assert_eq(n, 7);
    cr_assert(c[0] && c[3] && !c[4] && c[8] && !c[9] && c[10] && c[11]);
    cr_assert_eq(ws_numa_parse_cpulist("\n", c, &err), 0); /* a memory-only node */
    const char *bad[] = {"3-1", "a", "1,,2", "1-", "0 4", "1024", "2;3"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert_eq(ws_numa_parse_cpulist(bad[i], c, &err), WS_EPARSE, "\"%s\"", bad[i]);
        cr_assert_neq(strstr(err.msg, "CPU list"), NULL, "%s", err.msg);
    }
}

Test(numa, reads_nodes_from_sysfs)
{
    char dir[256];
    unsigned char allowed[WS_NUMA_MAX_CPUS];
    ws_numa t;
    ws_err err = {0};
    /* Two sockets of four CPUs, a memory-only node, and a node outside the mask. */
    const int ids[] = {1, 0, 3, 2};
    const char *lists[] = {"4-7\n", "0-3\n", "\n", "8-9\n"};
    fake_sysfs(dir, sizeof dir, 4, ids, lists);
    cpus_of(allowed, 0, 7);
    cr_assert_eq(ws_numa_read(&t, dir, allowed, &err), 0, "%s", err.msg);
    cr_assert_eq(t.n_nodes, 2);
    cr_assert(t.node_id[0] == 0 && t.node_id[1] == 1, "ids %d %d", t.node_id[0], t.node_id[1]);
    cr_assert(t.n_cpus[0] == 4 && t.n_cpus[1] == 4);
    cr_assert(t.cpu_node[2] == 0 && t.cpu_node[5] == 1 && t.cpu_node[8] == -1);
    cr_assert_eq(ws_numa_index(&t, 1), 1);
    cr_assert_eq(ws_numa_index(&t, 3), -1);
    int order[16];
    cr_assert_eq(ws_numa_cpu_order(&t, order, 16), 8);
    const int want[] = {0, 4, 1, 5, 2, 6, 3, 7}; /* the nodes in turn */
    for (int i = 0; i < 8; i++)
        cr_assert_eq(order[i], want[i], "order[%d] = %d", i, order[i]);
    cr_assert_eq(ws_numa_cpu_order(&t, order, 3), 3);

    /* Uneven nodes: the larger one's remaining CPUs come last. */
    cpus_of(allowed, 0, 5);
    cr_assert_eq(ws_numa_read(&t, dir, allowed, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_numa_cpu_order(&t, order, 16), 6);
    const int want2[] = {0, 4, 1, 5, 2, 3};
    for (int i = 0; i < 6; i++)
        cr_assert_eq(order[i], want2[i], "uneven order[%d] = %d", i, order[i]);

    /* No such folder: one node 0 with every allowed CPU. */
    char missing[300];
    snprintf(missing, sizeof missing, "%s/none", dir);
    cr_assert_eq(ws_numa_read(&t, missing, allowed, &err), 0, "%s", err.msg);
    cr_assert(t.n_nodes == 1 && t.node_id[0] == 0 && t.n_cpus[0] == 6);

    /* A malformed list names its file. */
    const int bid[] = {0};
    const char *blist[] = {"0-x\n"};
    fake_sysfs(dir, sizeof dir, 1, bid, blist);
    cr_assert_eq(ws_numa_read(&t, dir, allowed, &err), WS_EPARSE);
    cr_assert_neq(strstr(err.msg, "node0/cpulist"), NULL, "%s", err.msg);
}

Test(numa, detects_this_machine)
{
    ws_numa t;
    ws_err err = {0};
    cr_assert_eq(ws_numa_detect(&t, &err), 0, "%s", err.msg);
    cr_assert(t.n_nodes >= 1);
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    int n = 0;
    for (int c = 0; c < WS_NUMA_MAX_CPUS && c < CPU_SETSIZE; c++) {
        cr_assert_eq(CPU_ISSET(c, &set) != 0, t.cpu_node[c] >= 0, "CPU %d", c);
        n += CPU_ISSET(c, &set) != 0;
    }
    int sum = 0;
    for (int i = 0; i < t.n_nodes; i++)
        sum += t.n_cpus[i];
    cr_assert_eq(sum, n);
}

/* Placement asked before the first touch is where the pages land (this machine's first
 * node; a kernel without NUMA skips). */
Test(numa, places_memory_on_a_node)
{
    ws_numa t;
    ws_err err = {0};
    cr_assert_eq(ws_numa_detect(&t, &err), 0, "%s", err.msg);
    const size_t len = 4u << 20;
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(m, MAP_FAILED);
    const int node = t.node_id[t.n_nodes - 1];
    int rc = ws_numa_prefer(m, len, node, &err);
    if (rc == WS_EUNSUP) {
        munmap(m, len);
        cr_skip_test("this kernel has no NUMA support: %s", err.msg);
    }
    cr_assert_eq(rc, 0, "%s", err.msg);
    memset(m, 1, len);
    for (size_t off = 0; off < len; off += 1u << 20)
        cr_assert_eq(ws_numa_node_of(m + off), node, "offset %zu", off);
    cr_assert_eq(ws_numa_prefer(m, len, -1, &err), WS_EINVAL);
    munmap(m, len);
}

Test(numa, placement_rule_spreads_runs_of_pages)
{
    for (int p = 0; p < 100; p++)
        cr_assert_eq(ws_numa_place(3, p, 256, 1), 0);
    /* 256-token pages: runs of 32 pages, the nodes in turn from seq mod n. */
    cr_assert_eq(ws_numa_place(0, 0, 256, 2), 0);
    cr_assert_eq(ws_numa_place(0, 31, 256, 2), 0);
    cr_assert_eq(ws_numa_place(0, 32, 256, 2), 1);
    cr_assert_eq(ws_numa_place(0, 64, 256, 2), 0);
    cr_assert_eq(ws_numa_place(1, 0, 256, 2), 1);
    cr_assert_eq(ws_numa_place(5, 40, 256, 4), 2);
    cr_assert_eq(ws_numa_place(0, 7, 16384, 2), 1); /* a page longer than a run: one page */
    /* One 128K-token sequence over 3 nodes: within one run's pages of even. */
    int count[3] = {0};
    for (int p = 0; p < 512; p++)
        count[ws_numa_place(0, p, 256, 3)]++;
    for (int i = 0; i < 3; i++)
        cr_assert(abs(count[i] - 512 / 3) <= 32, "node %d: %d pages", i, count[i]);
}

/* A pool over two one-CPU nodes read from a fake sysfs; skips where this machine has fewer
 * than two CPUs or refuses the pins. */
static ws_pool *two_node_pool(int threads)
{
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    int cpu[2], n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &set))
            cpu[n++] = c;
    if (n < 2)
        cr_skip_test("needs two CPUs for two NUMA nodes of one CPU each");
    char dir[256], l0[16], l1[16];
    snprintf(l0, sizeof l0, "%d\n", cpu[0]);
    snprintf(l1, sizeof l1, "%d\n", cpu[1]);
    const int ids[] = {0, 1};
    const char *lists[] = {l0, l1};
    fake_sysfs(dir, sizeof dir, 2, ids, lists);
    /* Only those two CPUs allowed: the others this process may run on would join node 0
     * (ws_numa_read) and change the pinning order on a machine of more than two. */
    unsigned char allowed[WS_NUMA_MAX_CPUS] = {0};
    allowed[cpu[0]] = allowed[cpu[1]] = 1;
    ws_numa t;
    ws_err err = {0};
    cr_assert_eq(ws_numa_read(&t, dir, allowed, &err), 0, "%s", err.msg);
    cr_assert_eq(t.n_nodes, 2);
    ws_pool *p = ws_pool_create_numa(threads, &t, &err);
    cr_assert_not_null(p, "%s", err.msg);
    if (ws_pool_pinned(p) < threads - 1) {
        ws_pool_destroy(p);
        cr_skip_test("pinning threads to CPUs was refused");
    }
    return p;
}

typedef struct aff_ctx {
    const int *node; /* [n] each task's node (-1: none) */
    int ran[400];    /* how many times each task ran */
    int seq[8][400]; /* per thread, the tasks it ran in order */
    int len[8];
} aff_ctx;

static void aff_task(void *ctx, int task, int thread)
{
    aff_ctx *c = ctx;
    __atomic_fetch_add(&c->ran[task], 1, __ATOMIC_RELAXED);
    c->seq[thread][c->len[thread]++] = task;
    const struct timespec ts = {0, 20000}; /* 20 us: every thread gets some */
    nanosleep(&ts, NULL);
}

/* Rank of a task's node in a thread's order: its own node, none, then the others. */
static int rank_of(int own, int node)
{
    if (node == own && own >= 0)
        return 0;
    return node < 0 ? 1 : 2;
}

Test(pool, affine_batches_run_their_node_first)
{
    for (int threads = 2; threads <= 4; threads += 2) {
        ws_pool *p = two_node_pool(threads);
        cr_assert_eq(ws_pool_nodes(p), 2);
        cr_assert(ws_pool_node_id(p, 0) == 0 && ws_pool_node_id(p, 1) == 1);
        cr_assert_eq(ws_pool_node_index(p, 1), 1);
        cr_assert_eq(ws_pool_node_index(p, 5), -1);
        for (int i = 1; i < threads; i++) /* worker i on order[i % 2]: node i % 2 */
            cr_assert_eq(ws_pool_thread_node(p, i), i % 2, "thread %d", i);
        srand(7);
        for (int round = 0; round < 20; round++) {
            const int n = 60 + 17 * round % 300;
            int node[400];
            for (int t = 0; t < n; t++)
                node[t] = round % 5 == 4 ? 1 : rand() % 3 - 1; /* all on one node, or mixed */
            aff_ctx *c = calloc(1, sizeof *c);
            c->node = node;
            ws_pool_run_affine(p, n, node, aff_task, c);
            for (int t = 0; t < n; t++)
                cr_assert_eq(c->ran[t], 1, "round %d task %d ran %d times", round, t, c->ran[t]);
            /* A thread moves to a lower-ranked bucket only when its own is empty, and a
             * bucket never refills: the ranks of its tasks never go back up. */
            for (int th = 0; th < threads; th++) {
                const int own = ws_pool_thread_node(p, th);
                for (int k = 1; k < c->len[th]; k++) {
                    int a = rank_of(own, node[c->seq[th][k - 1]]);
                    int b = rank_of(own, node[c->seq[th][k]]);
                    cr_assert(a <= b,
                              "round %d thread %d (node %d): task of node %d after one "
                              "of node %d",
                              round, th, own, node[c->seq[th][k]], node[c->seq[th][k - 1]]);
                }
            }
            free(c);
        }
        ws_pool_destroy(p);
    }
}

/* The kernel on a two-node pool with the pages' nodes given (runs of random length, a
 * node the pool lacks, sparse lists tagged by their first page) equals the reference on
 * every path: chunks cut where the pages change node still cover every token once. */
Test(attn_cpu, numa_pages_match_reference)
{
    ws_pool *p = two_node_pool(2);
    th_attn_seed(4242);
    const ws_kv_layout shapes[] = {
        {.page_tokens = 32,
         .n_kv_heads = 4,
         .d_k = 128,
         .d_v = 128,
         .dtype = WS_DT_BF16,
         .v_pairs = 1,
         .k_tiles = 1},
        {.page_tokens = 16, .n_kv_heads = 2, .d_k = 64, .d_v = 64, .dtype = WS_DT_FP16},
        {.page_tokens = 48,
         .n_kv_heads = 1,
         .d_k = 576,
         .d_v = 512,
         .v_shares_k = 1,
         .dtype = WS_DT_BF16},
        {.page_tokens = 17, .n_kv_heads = 2, .d_k = 64, .d_v = 64, .dtype = WS_DT_BF16},
    };
    const int n_q[] = {32, 8, 16, 4};
    const int lens[] = {0, 1, 1500, 4097, 700};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        th_attn f;
        th_attn_make(&f, shapes[si], n_q[si], 5, lens, 1.0f);
        const int P = shapes[si].page_tokens;
        int *nodes[5];
        int32_t sel[300];
        for (int s = 0; s < 5; s++) {
            const int np = (lens[s] + P - 1) / P;
            nodes[s] = malloc(sizeof(int) * (size_t)(np + 1));
            for (int k = 0, node = s % 2; k < np;) {
                for (int run = 1 + (int)(th_attn_randu() % 7); run > 0 && k < np; run--)
                    nodes[s][k++] = node;
                node = th_attn_randu() % 5 == 0 ? 7 : (node == 7 ? 0 : 1 - node);
            }
            f.seq[s].page_nodes = nodes[s];
        }
        for (int i = 0; i < 300; i++) /* a sparse list over sequence 3's pages */
            sel[i] = (int32_t)((i * 2654435761u) % (unsigned)lens[3]);
        for (int i = 0; i < 300; i++)
            for (int j = 0; j < i; j++)
                if (sel[j] == sel[i])
                    sel[i] = -1;
        int ns = 0;
        for (int i = 0; i < 300; i++)
            if (sel[i] >= 0)
                sel[ns++] = sel[i];
        for (int sparse = 0; sparse < 2; sparse++) {
            f.seq[3].sel = sparse ? sel : NULL;
            f.seq[3].n_sel = sparse ? ns : 0;
            ws_err err = {0};
            cr_assert_eq(ws_attn_ref(&f.p, f.o_ref, f.lse_ref, &err), 0, "%s", err.msg);
            const int dv = f.p.kv.d_v;
            const size_t rows = (size_t)f.p.n_seqs * f.p.n_q_heads;
            for (int isa = WS_ISA_SCALAR; isa < WS_ISA_COUNT; isa++) {
                if (!ws_isa_supported((ws_isa)isa))
                    continue;
                for (size_t i = 0; i < rows * dv; i++)
                    f.o[i] = NAN;
                /* exact: the split, not the precision, is under test (2e-5) */
                cr_assert_eq(ws_attn_cpu_prec(&f.p, p, (ws_isa)isa, WS_PREC_EXACT, &err), 0, "%s",
                             err.msg);
                for (size_t r = 0; r < rows; r++) {
                    if (isinf(f.lse_ref[r])) {
                        cr_assert(isinf(f.lse[r]) && f.lse[r] < 0);
                        continue;
                    }
                    cr_assert(fabs(f.lse[r] - f.lse_ref[r]) <= 2e-5,
                              "shape %zu [%s] row %zu: "
                              "lse %g vs %g",
                              si, ws_isa_name((ws_isa)isa), r, f.lse[r], f.lse_ref[r]);
                    for (int d = 0; d < dv; d++)
                        cr_assert(fabs(f.o[r * dv + d] - f.o_ref[r * dv + d]) <= 2e-5,
                                  "shape %zu [%s] sparse %d row %zu col %d: %g vs %g", si,
                                  ws_isa_name((ws_isa)isa), sparse, r, d, f.o[r * dv + d],
                                  f.o_ref[r * dv + d]);
                }
            }
        }
        f.seq[3].sel = NULL;
        for (int s = 0; s < 5; s++)
            free(nodes[s]);
        th_attn_free(&f);
    }
    ws_pool_destroy(p);
}

/* The bench on a two-node pool: each page sits in its node's slice (slices never share a
 * 2 MiB region, the unit the kernel places), the page tables name the node the placement
 * rule gives, and the kernel over those tables equals the reference. */
Test(numa, bench_spreads_pages_by_node)
{
    ws_pool *p = two_node_pool(2);
    ws_attn_bench_cfg cfg = {
        .kv = {.page_tokens = 256, .n_kv_heads = 2, .d_k = 64, .d_v = 64, .dtype = WS_DT_BF16},
        .n_q_heads = 8,
        .scale = 0.125f,
        .batch = 3,
        .ctx = 20000,
        .seed = 11};
    ws_err err = {0};
    ws_attn_bench *b = ws_attn_bench_create(&cfg, p, &err);
    cr_assert_not_null(b, "%s", err.msg);
    cr_assert_eq(ws_attn_bench_nodes(b), 2);
    const ws_attn_problem *pr = ws_attn_bench_problem(b);
    const size_t huge = 2u << 20, pb = ws_kv_page_bytes(&cfg.kv);
    uintptr_t lo[2] = {UINTPTR_MAX, UINTPTR_MAX}, hi[2] = {0, 0};
    int pages[2] = {0, 0};
    for (int s = 0; s < cfg.batch; s++) {
        const ws_attn_seq *sq = &pr->seqs[s];
        cr_assert_not_null(sq->page_nodes);
        for (int k = 0; k < (cfg.ctx + 255) / 256; k++) {
            const int node = ws_numa_place(s, k, 256, 2);
            cr_assert_eq(sq->page_nodes[k], ws_pool_node_id(p, node), "seq %d page %d", s, k);
            const uintptr_t a = (uintptr_t)sq->pages[k];
            lo[node] = a < lo[node] ? a : lo[node];
            hi[node] = a + pb > hi[node] ? a + pb : hi[node];
            pages[node]++;
        }
    }
    cr_assert(pages[0] > 0 && pages[1] > 0);
    for (int k = 0; k < 2; k++) /* a slice holds exactly its pages, end to end */
        cr_assert_eq(hi[k] - lo[k], (uintptr_t)pages[k] * pb, "node %d", k);
    cr_assert((hi[0] - 1) / huge < lo[1] / huge || (hi[1] - 1) / huge < lo[0] / huge,
              "the nodes' slices share a 2 MiB region");
    const size_t rows = (size_t)cfg.batch * cfg.n_q_heads;
    double *o_ref = malloc(sizeof(double) * rows * 64), *lse_ref = malloc(sizeof(double) * rows);
    cr_assert_eq(ws_attn_ref(pr, o_ref, lse_ref, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_attn_cpu_prec(pr, p, WS_ISA_AUTO, WS_PREC_EXACT, &err), 0, "%s", err.msg);
    for (size_t r = 0; r < rows; r++) {
        cr_assert(fabs(pr->lse[r] - lse_ref[r]) <= 2e-5, "row %zu", r);
        for (int d = 0; d < 64; d++)
            cr_assert(fabs(pr->o[r * 64 + d] - o_ref[r * 64 + d]) <= 2e-5, "row %zu col %d", r, d);
    }
    free(o_ref);
    free(lse_ref);
    ws_attn_bench_destroy(b);
    ws_pool_destroy(p);
}

/* The KV slab on one node: a cut orders the slice's slots (address order: slot i at
 * i page sizes from the slice's start) by a seeded shuffle; deals hand them out in that
 * order, wrapping, so `slots` pages dealt one deal after another are every slot once; a
 * deal that needs more slots than the slice has is refused and deals nothing. */
Test(kv_slab, one_node_deals_every_slot_in_turn)
{
    ws_err err = {0};
    const size_t pb = 3 * 4096 + 64, bytes = (size_t)40 * pb + 100; /* 40 slots, a tail */
    ws_kv_slab *s = ws_kv_slab_create(NULL, &bytes, &err);
    cr_assert_not_null(s, "%s", err.msg);
    cr_assert_eq(ws_kv_slab_nodes(s), 1);
    cr_assert_eq(ws_kv_slab_node_id(s, 0), 0);
    size_t got = 0;
    char *base = ws_kv_slab_slice(s, 0, &got);
    cr_assert_eq(got, bytes);
    cr_assert_eq((uintptr_t)base % (2u << 20), 0, "slice not on a 2 MiB boundary");
    memset(base, 0x5a, bytes); /* all of it is mapped (the sanitizer build checks) */
    const void *t[40];
    cr_assert_eq(ws_kv_slab_deal(s, 1, 1, 256, t, NULL, &err), WS_EINVAL, "deal before a cut");
    cr_assert_eq(ws_kv_slab_cut(s, 0, 1, &err), WS_EINVAL);
    cr_assert_eq(ws_kv_slab_slots(s, 0), 0);
    cr_assert_null(ws_kv_slab_slot(s, 0, 0), "a slot before a cut");
    cr_assert_eq(ws_kv_slab_cut(s, pb, 7, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_kv_slab_slots(s, 0), 40);
    cr_assert_eq(ws_kv_slab_slot(s, 0, 39), base + 39 * pb);
    /* five deals of 2 sequences x 4 pages = 40 pages: every slot once, in order of deals */
    int seen[40] = {0}, inorder = 1;
    const void *first[8];
    for (int d = 0; d < 5; d++) {
        cr_assert_eq(ws_kv_slab_deal(s, 2, 4, 256, t + 8 * d, NULL, &err), 0, "%s", err.msg);
        if (d == 0)
            memcpy(first, t, sizeof first);
    }
    for (int i = 0; i < 40; i++) {
        const ptrdiff_t off = (const char *)t[i] - base;
        cr_assert(off >= 0 && off % (ptrdiff_t)pb == 0 && off / (ptrdiff_t)pb < 40, "page %d", i);
        cr_assert_eq(seen[off / pb]++, 0, "slot %td dealt twice", off / (ptrdiff_t)pb);
        inorder &= off == (ptrdiff_t)(i * pb);
    }
    cr_assert(!inorder, "the slots were not shuffled");
    /* the sixth deal wraps to the first's slots */
    cr_assert_eq(ws_kv_slab_deal(s, 2, 4, 256, t, NULL, &err), 0);
    cr_assert_eq(memcmp(t, first, sizeof first), 0);
    /* too many pages: refused, the cursor unmoved (the next deal goes on as before) */
    const void *big[41] = {0};
    cr_assert_eq(ws_kv_slab_deal(s, 1, 41, 256, big, NULL, &err), WS_EINVAL);
    cr_assert(strstr(err.msg, "holds 40 pages"), "%s", err.msg);
    cr_assert_null(big[0]);
    cr_assert_eq(ws_kv_slab_deal(s, 1, 8, 256, big, NULL, &err), 0);
    cr_assert_eq(memcmp(big, t + 8, 8 * sizeof *t), 0);
    /* the same seed, the same order; another seed, another */
    cr_assert_eq(ws_kv_slab_cut(s, pb, 7, &err), 0);
    cr_assert_eq(ws_kv_slab_deal(s, 2, 4, 256, big, NULL, &err), 0);
    cr_assert_eq(memcmp(big, first, sizeof first), 0);
    cr_assert_eq(ws_kv_slab_cut(s, pb, 8, &err), 0);
    cr_assert_eq(ws_kv_slab_deal(s, 2, 4, 256, big, NULL, &err), 0);
    cr_assert_neq(memcmp(big, first, sizeof first), 0);
    ws_kv_slab_destroy(s);
    ws_kv_slab_destroy(NULL);
}

/* The KV slab on a two-node pool: a slice per node on its own 2 MiB regions; each page of
 * a deal comes from the slice of the node the placement rule gives it, the page table
 * names that node, no slot twice in a deal, and each node's slots go round on their own
 * (a node dealt fewer pages wraps later). */
Test(kv_slab, two_nodes_deal_by_the_placement_rule)
{
    ws_pool *p = two_node_pool(2);
    ws_err err = {0};
    const size_t pb = 64 * 1024, bytes[2] = {(size_t)100 * pb, (size_t)60 * pb};
    ws_kv_slab *s = ws_kv_slab_create(p, bytes, &err);
    cr_assert_not_null(s, "%s", err.msg);
    cr_assert_eq(ws_kv_slab_nodes(s), 2);
    const size_t huge = 2u << 20;
    char *base[2];
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(ws_kv_slab_node_id(s, k), ws_pool_node_id(p, k));
        base[k] = ws_kv_slab_slice(s, k, NULL);
        cr_assert_eq((uintptr_t)base[k] % huge, 0, "slice %d", k);
        memset(base[k], k + 1, bytes[k]);
    }
    cr_assert((uintptr_t)(base[0] + bytes[0] - 1) / huge < (uintptr_t)base[1] / huge,
              "the slices share a 2 MiB region");
    cr_assert_eq(ws_kv_slab_cut(s, pb, 3, &err), 0, "%s", err.msg);
    /* 3 sequences of 40 pages of 256 tokens: runs of 32 pages per node, sequence q
     * starting on node q mod 2 -> node 0 gets 32 + 8 + 32 = 72, node 1 48 */
    enum { NQ = 3, NP = 40 };
    const void *t[NQ * NP];
    int nodes[NQ * NP];
    cr_assert_eq(ws_kv_slab_deal(s, NQ, NP, 256, t, nodes, &err), 0, "%s", err.msg);
    int count[2] = {0, 0};
    unsigned char seen[100] = {0};
    for (int q = 0; q < NQ; q++)
        for (int j = 0; j < NP; j++) {
            const int i = q * NP + j, k = ws_numa_place(q, j, 256, 2);
            cr_assert_eq(nodes[i], ws_pool_node_id(p, k), "seq %d page %d", q, j);
            const ptrdiff_t off = (const char *)t[i] - base[k];
            cr_assert(off >= 0 && off % (ptrdiff_t)pb == 0 && (size_t)off < bytes[k],
                      "seq %d page %d outside its node's slice", q, j);
            cr_assert_eq(seen[off / pb] & (1 << k), 0, "a slot of node %d dealt twice", k);
            seen[off / pb] |= (unsigned char)(1 << k);
            count[k]++;
        }
    cr_assert_eq(count[0], 72);
    cr_assert_eq(count[1], 48);
    /* a second deal: node 0 (72 of 100 dealt) needs 72 more and wraps after 28; node 1
     * (48 of 60) after 12 -> the first pages of each node's wrap are its first deal's */
    const void *u[NQ * NP];
    cr_assert_eq(ws_kv_slab_deal(s, NQ, NP, 256, u, nodes, &err), 0, "%s", err.msg);
    int nth[2] = {0, 0};
    const void *first_of[2][100];
    for (int i = 0; i < NQ * NP; i++) { /* each node's pages of the first deal, in order */
        const int k = nodes[i] == ws_pool_node_id(p, 0) ? 0 : 1;
        first_of[k][nth[k]++] = t[i];
    }
    nth[0] = nth[1] = 0;
    for (int i = 0; i < NQ * NP; i++) {
        const int k = nodes[i] == ws_pool_node_id(p, 0) ? 0 : 1, n = nth[k]++;
        const int fresh = k ? 12 : 28;
        if (n >= fresh)
            cr_assert_eq(u[i], first_of[k][n - fresh], "node %d page %d of the second deal", k, n);
        else
            for (int m = 0; m < count[k]; m++)
                cr_assert_neq(u[i], first_of[k][m], "node %d reused a slot before wrapping", k);
    }
    ws_kv_slab_destroy(s);
    ws_pool_destroy(p);
}

/* The read pass on a two-node pool (a region per node, read by that node's tasks): every
 * size covers what it covers on one node, on the pool and on a one-thread pool alike, and
 * stays inside the buffer (the sanitizer build checks the bounds); so does the triad. */
Test(numa, read_pass_by_node)
{
    ws_pool *p = two_node_pool(2);
    ws_err err = {0};
    ws_pool *p1 = ws_pool_create(1, &err);
    cr_assert_not_null(p1, "%s", err.msg);
    ws_membw_reader *r = ws_membw_reader_create(p, 8u << 20, &err);
    cr_assert_not_null(r, "%s", err.msg);
    const size_t sizes[] = {8u << 20, 3u << 20, 1u << 20, 64u << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t c2 = 0, c1 = 0;
        const double t2 = ws_membw_reader_pass(r, sizes[i], &c2);
        const double t1 = ws_membw_reader_pass_on(r, p1, sizes[i], &c1);
        cr_assert(t2 > 0 && t1 > 0 && isfinite(t1) && isfinite(t2));
        cr_assert_eq(c1, c2, "size %zu", sizes[i]);
        const size_t want = sizes[i] < (8u << 20) ? sizes[i] : (8u << 20);
        cr_assert(c2 <= want && c2 > want - (2u * 16 * 4096), "size %zu: covered %zu", sizes[i],
                  c2);
    }
    double g = 0;
    cr_assert_eq(ws_membw_triad(p, 12u << 20, 3, &g, &err), 0, "%s", err.msg);
    cr_assert(isfinite(g) && g > 0.01, "triad %g GB/s", g);
    double sec = 0;
    size_t cov = 0;
    cr_assert_eq(ws_membw_reader_gather(r, NULL, 256, 1u << 20, 5, &sec, &cov, &err), 0, "%s",
                 err.msg);
    cr_assert(sec > 0 && cov > 0);
    ws_membw_reader_destroy(r);
    ws_pool_destroy(p1);
    ws_pool_destroy(p);
}
