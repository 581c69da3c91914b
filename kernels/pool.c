/* pool: see pool.h.
 *
 * A batch is published in `entry`: its generation (high 32 bits), a closed bit and the
 * number of workers that joined it. A worker polls entry for a new generation (SPIN_S,
 * then it sleeps on `start`), joins by a compare-and-swap of the count while the batch is
 * open, claims tasks from an atomic counter, and counts itself out in `left`. The caller
 * runs tasks too, then closes the batch (which fixes how many joined) and waits only for
 * those to leave (polling, then sleeping on `done`). A worker still waking up when the
 * batch closes finds it closed and never touches it, so a batch the caller finished alone
 * costs no wait for sleeping workers. */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
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

typedef struct worker {
    struct ws_pool *pool;
    int id;
    pthread_t th;
} worker;

struct ws_pool {
    int threads;
    int pinned;
    worker *w; /* [1 .. threads - 1]; the caller is thread 0 */
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

static void run_tasks(ws_pool *p, int id)
{
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

/* Pins worker i to the i-th CPU of the process's affinity mask; 1 if it took. */
static int pin(pthread_t th, int i)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed))
        return 0;
    int n = CPU_COUNT(&allowed);
    if (n <= 0)
        return 0;
    int want = i % n, k = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &allowed))
            continue;
        if (k++ == want) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            return pthread_setaffinity_np(th, sizeof one, &one) == 0;
        }
    }
    return 0;
}

ws_pool *ws_pool_create(int threads, ws_err *err)
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
    if (!p->w) {
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
        p->pinned += pin(p->w[i].th, i);
    }
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
