/* pool: see pool.h.
 *
 * A batch is published in `entry`: its generation (high 32 bits), a closed bit and the
 * number of workers that joined it. A worker polls entry for a new generation (SPIN_S,
 * then it sleeps on `start`), joins by a compare-and-swap of the count while the batch is
 * open, claims tasks from an atomic counter, and counts itself out in `left`. The caller
 * runs tasks too, then closes the batch (which fixes how many joined) and waits only for
 * those to leave (polling, then sleeping on `done`). A worker still waking up when the
 * batch closes finds it closed and never touches it, so a batch the caller finished alone
 * costs no wait for sleeping workers.
 *
 * An affine batch (ws_pool_run_affine) sorts its task numbers by node into one array, a
 * bucket per node and one for tasks of no node (each with its own counter on its own cache
 * line); a thread drains its node's bucket, then the one of no node, then the others. */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ws_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How long a worker that left a batch, and the caller that finished its share, poll before
 * they sleep: a decode step calls the kernels back to back (one batch per layer), so the
 * next batch usually comes within it, and waking a sleeping thread through the kernel
 * costs 10-40 us on the development host. */
#define SPIN_S 50e-6

#define E_CLOSED (1ull << 31)
#define E_JOINED 0x7fffffffull
#define E_GEN(e) ((uint32_t)((e) >> 32))

/* One node's tasks in an affine batch: tasks[start .. end) of the sorted array. */
typedef struct bucket {
    atomic_int next; /* claimed so far */
    int start, end;
    char pad[64 - 3 * sizeof(int)];
} bucket;

typedef struct worker {
    struct ws_pool *pool;
    int id;
    pthread_t th;
} worker;

struct ws_pool {
    int threads;
    int pinned;
    worker *w; /* [1 .. threads - 1]; the caller is thread 0 */
    /* NUMA: the nodes pinned workers run on, each thread's node index (-1: unknown; the
     * caller's is set per affine batch) and each CPU's (-1: no worker's node). */
    int n_nodes;
    int node_id[WS_NUMA_MAX_NODES];
    int *thread_node;
    short cpu_node[WS_NUMA_MAX_CPUS];
    /* The current affine batch (aff = 0: plain). */
    int aff;
    bucket *bk;     /* [n_nodes + 1], the last for tasks of no node */
    int *aff_tasks; /* task numbers sorted by node */
    int aff_cap;    /* capacity of aff_tasks */
    pthread_mutex_t mu;
    pthread_cond_t start;    /* a new batch or shutdown */
    pthread_cond_t done;     /* a worker left the batch while the caller sleeps */
    _Atomic uint64_t entry;  /* generation << 32 | closed | workers joined */
    atomic_int left;         /* joined workers that have left the batch */
    atomic_int caller_waits; /* the caller sleeps on done */
    atomic_int stop;
    int sleepers;            /* workers waiting on start, under mu */
    uint32_t gen;            /* the caller's generation counter */
    /* The current batch, written before entry publishes it. */
    ws_pool_fn fn;
    void *ctx;
    int n_tasks;
    atomic_int next;
};

/* Called every 256 polls: 1 once SPIN_S have passed since t0 (ws_now_s). Yields the CPU meanwhile,
 * so that a poller sharing its CPU with a thread that has work (more threads than CPUs)
 * lets that thread run instead of spinning out its time slice. */
static int poll_done(double t0)
{
    sched_yield();
    return ws_now_s() - t0 > SPIN_S;
}

/* Claims from bucket b until it is empty. */
static void run_bucket(ws_pool *p, int b, int id)
{
    bucket *k = &p->bk[b];
    const int n = k->end - k->start;
    for (;;) {
        int i = atomic_fetch_add_explicit(&k->next, 1, memory_order_relaxed);
        if (i >= n)
            break;
        p->fn(p->ctx, p->aff_tasks[k->start + i], id);
    }
}

static void run_tasks(ws_pool *p, int id)
{
    if (p->aff) {
        const int own = p->thread_node[id], nn = p->n_nodes;
        if (own >= 0)
            run_bucket(p, own, id);
        run_bucket(p, nn, id);
        for (int j = 1; j <= nn; j++) { /* the other nodes, from the next one on */
            int b = own >= 0 ? (own + j) % nn : j - 1;
            if (b != own)
                run_bucket(p, b, id);
        }
        return;
    }
    for (;;) {
        int t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (t >= p->n_tasks)
            break;
        p->fn(p->ctx, t, id);
    }
}

/* Waits until the batch generation differs from `seen` or the pool stops: polls for
 * SPIN_S, then sleeps. Returns the entry seen (undefined after a stop). */
static uint64_t wait_batch(ws_pool *p, uint32_t seen)
{
    const double t0 = ws_now_s();
    for (int i = 1;; i++) {
        uint64_t e = atomic_load_explicit(&p->entry, memory_order_acquire);
        if (E_GEN(e) != seen || atomic_load_explicit(&p->stop, memory_order_relaxed))
            return e;
        cpu_relax();
        if (!(i & 255) && poll_done(t0))
            break;
    }
    pthread_mutex_lock(&p->mu);
    p->sleepers++;
    uint64_t e;
    while (E_GEN(e = atomic_load_explicit(&p->entry, memory_order_acquire)) == seen &&
           !atomic_load_explicit(&p->stop, memory_order_relaxed))
        pthread_cond_wait(&p->start, &p->mu);
    p->sleepers--;
    pthread_mutex_unlock(&p->mu);
    return e;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    ws_pool *p = w->pool;
    uint32_t seen = 0;
    for (;;) {
        uint64_t e = wait_batch(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_relaxed))
            break;
        seen = E_GEN(e);
        /* Join while the batch is open; a newer batch published meanwhile is joined
         * instead (its fields were written before its entry). */
        int joined = 0;
        while (!(e & E_CLOSED)) {
            if (atomic_compare_exchange_weak_explicit(&p->entry, &e, e + 1, memory_order_acq_rel,
                                                      memory_order_acquire)) {
                joined = 1;
                break;
            }
            seen = E_GEN(e);
        }
        if (!joined)
            continue;
        run_tasks(p, w->id);
        atomic_fetch_add_explicit(&p->left, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&p->caller_waits, memory_order_seq_cst)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

/* Pins a thread to CPU c; 1 if it took. */
static int pin(pthread_t th, int c)
{
    if (c < 0 || c >= CPU_SETSIZE)
        return 0;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    return pthread_setaffinity_np(th, sizeof one, &one) == 0;
}

/* Pins the workers by the topology's CPU order and records their nodes: the pool's nodes
 * are the topology's nodes a pinned worker runs on, and the first CPU's (left to the
 * caller, whose node is looked up per affine batch). */
static void pin_workers(ws_pool *p, const ws_numa *topo)
{
    int order[WS_NUMA_MAX_CPUS], on[WS_NUMA_MAX_NODES] = {0};
    const int n = ws_numa_cpu_order(topo, order, WS_NUMA_MAX_CPUS);
    int cpu_of[WS_POOL_MAX_THREADS];
    if (n > 0)
        on[topo->cpu_node[order[0]]] = 1;
    for (int i = 1; i < p->threads; i++) {
        cpu_of[i] = -1;
        if (n > 0 && pin(p->w[i].th, order[i % n])) {
            cpu_of[i] = order[i % n];
            on[topo->cpu_node[cpu_of[i]]] = 1;
            p->pinned++;
        }
    }
    int idx[WS_NUMA_MAX_NODES];
    p->n_nodes = 0;
    for (int k = 0; k < topo->n_nodes; k++) {
        idx[k] = on[k] ? p->n_nodes : -1;
        if (on[k])
            p->node_id[p->n_nodes++] = topo->node_id[k];
    }
    if (p->n_nodes <= 1) { /* one node (or none pinned): no affinity to keep */
        p->node_id[0] = p->n_nodes ? p->node_id[0] : topo->node_id[0];
        p->n_nodes = 1;
        return;
    }
    for (int c = 0; c < WS_NUMA_MAX_CPUS; c++)
        p->cpu_node[c] = (short)(topo->cpu_node[c] >= 0 ? idx[topo->cpu_node[c]] : -1);
    for (int i = 1; i < p->threads; i++)
        p->thread_node[i] = cpu_of[i] >= 0 ? p->cpu_node[cpu_of[i]] : -1;
    p->thread_node[0] = p->cpu_node[order[0]]; /* until an affine batch looks */
}

ws_pool *ws_pool_create(int threads, ws_err *err)
{
    return ws_pool_create_numa(threads, NULL, err);
}

ws_pool *ws_pool_create_numa(int threads, const ws_numa *topo, ws_err *err)
{
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    if (threads > WS_POOL_MAX_THREADS) {
        ws_err_set(err, WS_EINVAL, "thread pool: %d threads is more than %d", threads,
                   WS_POOL_MAX_THREADS);
        return NULL;
    }
    ws_pool *p = calloc(1, sizeof *p);
    if (!p) {
        ws_err_set(err, WS_ENOMEM, "thread pool: out of memory");
        return NULL;
    }
    p->threads = threads;
    p->n_nodes = 1;
    for (int c = 0; c < WS_NUMA_MAX_CPUS; c++)
        p->cpu_node[c] = -1;
    atomic_init(&p->next, 0);
    atomic_init(&p->entry, 0);
    atomic_init(&p->left, 0);
    atomic_init(&p->caller_waits, 0);
    atomic_init(&p->stop, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    if (threads == 1)
        return p;
    p->w = calloc((size_t)threads, sizeof *p->w);
    p->thread_node = malloc(sizeof(int) * (size_t)threads);
    ws_numa own;
    if (!topo && (ws_numa_detect(&own, NULL) == 0 || /* else one node: the affinity mask */
                  ws_numa_read(&own, "", NULL, NULL) == 0))
        topo = &own;
    if (!p->w || !p->thread_node) {
        ws_pool_destroy(p);
        ws_err_set(err, WS_ENOMEM, "thread pool: out of memory");
        return NULL;
    }
    for (int i = 1; i < threads; i++) {
        p->w[i].pool = p;
        p->w[i].id = i;
        if (pthread_create(&p->w[i].th, NULL, worker_main, &p->w[i])) {
            p->threads = i; /* destroy joins the ones that started */
            ws_pool_destroy(p);
            ws_err_set(err, WS_EINVAL, "thread pool: cannot create thread %d of %d", i, threads);
            return NULL;
        }
    }
    for (int i = 0; i < threads; i++)
        p->thread_node[i] = -1;
    if (topo)
        pin_workers(p, topo);
    return p;
}

void ws_pool_destroy(ws_pool *p)
{
    if (!p)
        return;
    if (p->w) {
        pthread_mutex_lock(&p->mu);
        atomic_store_explicit(&p->stop, 1, memory_order_relaxed);
        pthread_cond_broadcast(&p->start);
        pthread_mutex_unlock(&p->mu);
        for (int i = 1; i < p->threads; i++)
            pthread_join(p->w[i].th, NULL);
        free(p->w);
    }
    free(p->thread_node);
    free(p->bk);
    free(p->aff_tasks);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    free(p);
}

int ws_pool_threads(const ws_pool *p)
{
    return p->threads;
}

int ws_pool_pinned(const ws_pool *p)
{
    return p->pinned;
}

int ws_pool_nodes(const ws_pool *p)
{
    return p->n_nodes;
}

int ws_pool_node_id(const ws_pool *p, int i)
{
    return i >= 0 && i < p->n_nodes ? p->node_id[i] : -1;
}

int ws_pool_node_index(const ws_pool *p, int node_id)
{
    for (int i = 0; i < p->n_nodes; i++)
        if (p->node_id[i] == node_id)
            return i;
    return -1;
}

int ws_pool_thread_node(const ws_pool *p, int thread)
{
    if (thread < 0 || thread >= p->threads || !p->thread_node)
        return p->n_nodes == 1 && thread >= 0 && thread < p->threads ? 0 : -1;
    return p->n_nodes == 1 ? 0 : p->thread_node[thread];
}

void ws_pool_run_affine(ws_pool *p, int n_tasks, const int *task_node, ws_pool_fn fn, void *ctx)
{
    const int nn = p->n_nodes;
    if (!task_node || nn <= 1 || !p->w || n_tasks <= 1) {
        ws_pool_run(p, n_tasks, fn, ctx);
        return;
    }
    if (!p->bk)
        p->bk = aligned_alloc(64, sizeof(bucket) * (WS_NUMA_MAX_NODES + 1));
    if (n_tasks > p->aff_cap) {
        free(p->aff_tasks);
        p->aff_tasks = malloc(sizeof(int) * (size_t)n_tasks);
        p->aff_cap = p->aff_tasks ? n_tasks : 0;
    }
    if (!p->bk || !p->aff_tasks) {
        ws_pool_run(p, n_tasks, fn, ctx);
        return;
    }
    /* Counting sort of the task numbers by bucket (node, or nn for none). */
    int count[WS_NUMA_MAX_NODES + 1] = {0};
    for (int t = 0; t < n_tasks; t++) {
        int b = task_node[t] >= 0 && task_node[t] < nn ? task_node[t] : nn;
        count[b]++;
    }
    for (int b = 0, at = 0; b <= nn; b++) {
        p->bk[b].start = p->bk[b].end = at;
        atomic_store_explicit(&p->bk[b].next, 0, memory_order_relaxed);
        at += count[b];
    }
    for (int t = 0; t < n_tasks; t++) {
        int b = task_node[t] >= 0 && task_node[t] < nn ? task_node[t] : nn;
        p->aff_tasks[p->bk[b].end++] = t;
    }
    const int cpu = sched_getcpu();
    p->thread_node[0] = cpu >= 0 && cpu < WS_NUMA_MAX_CPUS ? p->cpu_node[cpu] : -1;
    p->aff = 1;
    ws_pool_run(p, n_tasks, fn, ctx);
    p->aff = 0;
}

void ws_pool_run(ws_pool *p, int n_tasks, ws_pool_fn fn, void *ctx)
{
    if (n_tasks <= 0)
        return;
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    if (!p->w || n_tasks == 1) { /* nothing to share: run inline */
        run_tasks(p, 0);
        return;
    }
    atomic_store_explicit(&p->left, 0, memory_order_relaxed);
    pthread_mutex_lock(&p->mu); /* a worker going to sleep checks entry under mu */
    atomic_store_explicit(&p->entry, (uint64_t)++p->gen << 32, memory_order_release);
    if (p->sleepers)
        pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, 0); /* the caller is thread 0 */
    /* Close the batch: the workers that joined are all that may touch it. */
    const int joined =
        (int)(atomic_fetch_or_explicit(&p->entry, E_CLOSED, memory_order_acq_rel) & E_JOINED);
    const double t0 = ws_now_s();
    for (int i = 1; atomic_load_explicit(&p->left, memory_order_acquire) < joined; i++) {
        cpu_relax();
        if (!(i & 255) && poll_done(t0)) {
            pthread_mutex_lock(&p->mu);
            atomic_store_explicit(&p->caller_waits, 1, memory_order_seq_cst);
            while (atomic_load_explicit(&p->left, memory_order_seq_cst) < joined)
                pthread_cond_wait(&p->done, &p->mu);
            atomic_store_explicit(&p->caller_waits, 0, memory_order_relaxed);
            pthread_mutex_unlock(&p->mu);
            break;
        }
    }
}
