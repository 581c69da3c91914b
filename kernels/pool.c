/* pool: see pool.h. A batch starts when the generation counter moves on and ends when the
 * count of workers still in it reaches zero; both are atomics that the waiting side polls
 * for a while (SPIN_NS) before it sleeps on a condvar (start, done), and the moving side
 * signals only sleepers. Inside a batch, tasks are claimed with an atomic counter. */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How long a worker that finished a batch, and the caller that finished its share, poll
 * before they sleep: a decode step calls the kernels back to back (one batch per layer), so
 * the next batch usually comes within it, and waking a sleeping thread through the kernel
 * costs ~10-15 us on the development host. */
#define SPIN_NS 50000

typedef struct worker {
    struct ws_pool *pool;
    int id;
    pthread_t th;
} worker;

struct ws_pool {
    int threads;
    int pinned;
    worker *w;              /* workers 1 .. threads - 1 at [1 ..]; the caller is thread 0 */
    pthread_mutex_t mu;
    pthread_cond_t start;   /* a new batch (generation) or shutdown */
    pthread_cond_t done;    /* the last worker left the batch */
    atomic_ulong gen;       /* batch counter: written under mu, polled without it */
    int stop;               /* under mu */
    int sleepers;           /* workers waiting on start, under mu */
    int caller_waits;       /* the caller waits on done, under mu */
    atomic_int active;      /* workers still in the current batch */
    /* The current batch, written before gen moves on. */
    ws_pool_fn fn;
    void *ctx;
    int n_tasks;
    atomic_int next;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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

/* Polls `*x != unlike` for up to SPIN_NS; 1 if it came true. */
static int spin_ulong(atomic_ulong *x, unsigned long unlike)
{
    const uint64_t t0 = now_ns();
    for (int i = 1;; i++) {
        if (atomic_load_explicit(x, memory_order_acquire) != unlike)
            return 1;
        cpu_relax();
        if (!(i & 255) && now_ns() - t0 > SPIN_NS)
            return 0;
    }
}

static int spin_zero(atomic_int *x)
{
    const uint64_t t0 = now_ns();
    for (int i = 1;; i++) {
        if (atomic_load_explicit(x, memory_order_acquire) == 0)
            return 1;
        cpu_relax();
        if (!(i & 255) && now_ns() - t0 > SPIN_NS)
            return 0;
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    ws_pool *p = w->pool;
    unsigned long seen = 0;
    for (;;) {
        if (!spin_ulong(&p->gen, seen)) {
            pthread_mutex_lock(&p->mu);
            p->sleepers++;
            while (!p->stop && atomic_load_explicit(&p->gen, memory_order_relaxed) == seen)
                pthread_cond_wait(&p->start, &p->mu);
            p->sleepers--;
            const int stop = p->stop;
            pthread_mutex_unlock(&p->mu);
            if (stop)
                break;
        }
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (seen == (unsigned long)-1) /* shutdown while spinning */
            break;
        run_tasks(p, w->id);
        if (atomic_fetch_sub_explicit(&p->active, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            if (p->caller_waits)
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
    atomic_init(&p->gen, 0);
    atomic_init(&p->active, 0);
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
        p->stop = 1;
        atomic_store_explicit(&p->gen, (unsigned long)-1, memory_order_release);
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
    atomic_store_explicit(&p->active, p->threads - 1, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    unsigned long g = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
    if (g == (unsigned long)-1) /* that value means shutdown */
        g = 0;
    atomic_store_explicit(&p->gen, g, memory_order_release);
    if (p->sleepers)
        pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    run_tasks(p, 0); /* the caller is thread 0 */
    if (spin_zero(&p->active))
        return;
    pthread_mutex_lock(&p->mu);
    p->caller_waits = 1;
    while (atomic_load_explicit(&p->active, memory_order_acquire) > 0)
        pthread_cond_wait(&p->done, &p->mu);
    p->caller_waits = 0;
    pthread_mutex_unlock(&p->mu);
}
