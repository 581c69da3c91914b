/* ab_loop: which of two builds of a CPU attention block loop is faster on this host? Paired
 * A/B timing of the AMX loop (kernels/attn_cpu_amx.c) or, built with -DAB_LOOP_FMA, of the
 * fused FMA loop (kernels/attn_cpu_fma.c, its symbols renamed to the AMX loop's), on one
 * problem, for kernel work on a shared, noisy host; docs/notes/amx-attention.md and
 * docs/notes/fma-loop.md quote its ratios. scripts/ab/ab_loop.sh builds the two versions
 * with their exported symbols renamed A_* and B_*; this program alternates them (A B, then
 * B A, ...) and prints each one's median rate and the median of the per-pair time ratios
 * B/A, which stays stable while the host's speed swings 2-3x between minutes.
 * Each run splits every KV head's tokens in halves over the threads (pinned to CPUs 0..T-1).
 * Usage: ab_loop G N_KV D_K D_V TOKENS PAIRS THREADS (d_k != d_v means MLA: V shares K).
 * AB_REPS=N in the environment makes each run call the kernel N times over the same KV:
 * with a KV that fits in L2 (e.g. 8 1 128 128 2048) that times the loop's own work, not the
 * thread start-up that dominates one small call.
 * AB_SPARSE=N attends a list of N distinct tokens of the TOKENS stored, in random order
 * (token-level top-k, rows scattered over the pages); the rates then count the listed
 * tokens' bytes. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn.h"
#include "attn_fixture.h"
#include "half.h"

/* Both loops take a flag after the problem: the FMA loop's AVX-512 (wide) unless AB_AVX2=1,
 * the AMX loop's bf16 products with AB_BF16=1 (q must then hold bf16 values). */
typedef void attend_fn(const ws_attn_problem *, int, int, int, int, int, int, int, float *,
                       float *, void *);
#ifdef AB_LOOP_FMA
#define WIDE_ARG g_wide,
#else
#define WIDE_ARG g_bf16,
#endif
typedef size_t scratch_fn(const ws_kv_layout *, int);
extern attend_fn A_ws_attn_cpu_amx_attend, B_ws_attn_cpu_amx_attend;
extern scratch_fn A_ws_attn_cpu_amx_scratch, B_ws_attn_cpu_amx_scratch;
extern int A_ws_attn_cpu_amx_enable(void);

#define MAX_PAIRS 200
#define MAX_THREADS 64

static th_attn g_f;
static int g_G, g_nkv, g_len, g_threads, g_reps = 1, g_wide = 1, g_bf16;

typedef struct arg {
    attend_fn *fn;
    void *scratch;
    int t;
} arg;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *worker(void *p)
{
    arg *a = p;
    cpu_set_t cs;
    CPU_ZERO(&cs);
    CPU_SET(a->t, &cs);
    pthread_setaffinity_np(pthread_self(), sizeof cs, &cs);
    const int dv = g_f.p.kv.d_v;
    for (int rep = 0; rep < g_reps; rep++)
        for (int u = a->t; u < 2 * g_nkv; u += g_threads) {
            const int h = u / 2, i0 = u % 2 ? g_len / 2 : 0, i1 = u % 2 ? g_len : g_len / 2;
            a->fn(&g_f.p, WIDE_ARG 0, h, h * g_G, i0, i1, g_G, g_f.o + (size_t)h * g_G * dv,
                  g_f.lse + h * g_G, a->scratch);
        }
    return NULL;
}

static double run(attend_fn *fn, void **scratch)
{
    pthread_t th[MAX_THREADS];
    arg a[MAX_THREADS];
    for (int t = 0; t < g_threads; t++) /* each run packs its queries, as a kernel call does */
        memset(scratch[t], 0, 64);      /* (attn_cpu_amx.h: the packed-query key) */
    const double t0 = now();
    for (int t = 0; t < g_threads; t++) {
        a[t] = (arg){fn, scratch[t], t};
        pthread_create(&th[t], NULL, worker, &a[t]);
    }
    for (int t = 0; t < g_threads; t++)
        pthread_join(th[t], NULL);
    return now() - t0;
}

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: %s G N_KV D_K D_V TOKENS PAIRS THREADS\n", argv[0]);
        return 2;
    }
    g_G = atoi(argv[1]), g_nkv = atoi(argv[2]);
    const int dk = atoi(argv[3]), dv = atoi(argv[4]);
    g_len = atoi(argv[5]);
    const int pairs = atoi(argv[6]);
    g_threads = atoi(argv[7]);
    if (g_G < 1 || g_nkv < 1 || dk < 32 || dv < 32 || g_len < 2 || pairs < 1 || pairs > MAX_PAIRS ||
        g_threads < 1 || g_threads > MAX_THREADS) {
        fprintf(stderr, "ab_loop: bad arguments (PAIRS <= %d, THREADS <= %d)\n", MAX_PAIRS,
                MAX_THREADS);
        return 2;
    }
    if (getenv("AB_REPS") && (g_reps = atoi(getenv("AB_REPS"))) < 1) {
        fprintf(stderr, "ab_loop: AB_REPS must be a positive count\n");
        return 2;
    }
    ws_kv_layout kv = {.page_tokens = 256,
                       .n_kv_heads = g_nkv,
                       .d_k = dk,
                       .d_v = dv,
                       .v_shares_k = dk != dv,
                       .dtype = getenv("AB_FP16") && atoi(getenv("AB_FP16")) ? WS_DT_FP16
                                                                              : WS_DT_BF16,
                       .v_pairs = dk == dv && getenv("AB_VPAIRS") && atoi(getenv("AB_VPAIRS")),
                       .k_tiles = dk == dv && getenv("AB_KTILES") && atoi(getenv("AB_KTILES"))};
    th_attn_seed(1);
    th_attn_make(&g_f, kv, g_G * g_nkv, 1, &g_len, 1.0f);
    int32_t *sel = NULL;
    if (getenv("AB_SPARSE")) {
        const int n = atoi(getenv("AB_SPARSE"));
        if (n < 2 || n > g_len) {
            fprintf(stderr, "ab_loop: AB_SPARSE must be 2..TOKENS\n");
            return 2;
        }
        if (!(sel = malloc(sizeof(int32_t) * (size_t)g_len)))
            return 1;
        for (int t = 0; t < g_len; t++)
            sel[t] = t;
        for (int t = g_len - 1; t > 0; t--) { /* Fisher-Yates; the first n are the list */
            const int j = (int)(th_attn_randu() % (unsigned)(t + 1)), x = sel[t];
            sel[t] = sel[j], sel[j] = x;
        }
        g_f.seq[0].sel = sel, g_f.seq[0].n_sel = n;
        g_len = n;
    }
    g_wide = !(getenv("AB_AVX2") && atoi(getenv("AB_AVX2")));
    g_bf16 = getenv("AB_BF16") && atoi(getenv("AB_BF16"));
    for (size_t i = 0; g_bf16 && i < (size_t)g_G * g_nkv * dk; i++) /* q as bf16 values */
        g_f.q[i] = ws_bf16_to_f32(ws_f32_to_bf16(g_f.q[i]));
#ifndef AB_LOOP_FMA
    if (!A_ws_attn_cpu_amx_enable()) {
        fprintf(stderr, "ab_loop: this CPU or kernel does not grant AMX\n");
        return 1;
    }
#endif
    void *sa[MAX_THREADS], *sb[MAX_THREADS];
    for (int t = 0; t < g_threads; t++) {
        sa[t] = aligned_alloc(64, (A_ws_attn_cpu_amx_scratch(&kv, g_G) + 63) & ~(size_t)63);
        sb[t] = aligned_alloc(64, (B_ws_attn_cpu_amx_scratch(&kv, g_G) + 63) & ~(size_t)63);
    }
    double ta[MAX_PAIRS], tb[MAX_PAIRS], r[MAX_PAIRS];
    run(A_ws_attn_cpu_amx_attend, sa), run(B_ws_attn_cpu_amx_attend, sb); /* warm-up */
    for (int i = 0; i < pairs; i++) {
        if (i & 1) {
            tb[i] = run(B_ws_attn_cpu_amx_attend, sb);
            ta[i] = run(A_ws_attn_cpu_amx_attend, sa);
        } else {
            ta[i] = run(A_ws_attn_cpu_amx_attend, sa);
            tb[i] = run(B_ws_attn_cpu_amx_attend, sb);
        }
        r[i] = tb[i] / ta[i];
    }
    qsort(ta, pairs, sizeof(double), cmp);
    qsort(tb, pairs, sizeof(double), cmp);
    qsort(r, pairs, sizeof(double), cmp);
    const double bytes = (double)g_reps * g_len * g_nkv * (dk + (dk != dv ? 0 : dv)) * 2;
    printf("A %.2f GB/s  B %.2f GB/s (medians of %d)  time B/A: median %.3f, quartiles "
           "%.3f..%.3f\n",
           bytes / ta[pairs / 2] / 1e9, bytes / tb[pairs / 2] / 1e9, pairs, r[pairs / 2],
           r[pairs / 4], r[3 * pairs / 4]);
    free(sel);
    return 0;
}
