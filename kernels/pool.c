/* pool: see pool.h. One mutex/condvar pair starts a batch (a generation counter) and
 * another reports its end; inside a batch, tasks are claimed with an atomic counter. */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct worker {
    struct ws_pool *pool;
    int id;
    pthread_t th;
} worker;

struct ws_pool {
    int threads;
    int pinned;
    worker *w;             /* [threads] when threads > 1 */
    pthread_mutex_t mu;
    pthread_cond_t start;  /* a new batch (generation) or shutdown */
    pthread_cond_t done;   /* the last worker left the batch */
    unsigned long gen;     /* batch counter, under mu */
    int stop;              /* under mu */
    int active;            /* workers still in the current batch, under mu */
    /* The current batch. */
    ws_pool_fn fn;
    void *ctx;
    int n_tasks;
    atomic_int next;
};

static void run_tasks(ws_pool *p, int id)
{
    for (;;) {
        int t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (t >= p->n_tasks)
            break;
        p->fn(p->ctx, t, id);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    ws_pool *p = w->pool;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->gen == seen)
            pthread_cond_wait(&p->start, &p->mu);
        if (p->stop)
            break;
        seen = p->gen;
        pthread_mutex_unlock(&p->mu);
        run_tasks(p, w->id);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
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
    for (int i = 0; i < threads; i++) {
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
        pthread_cond_broadcast(&p->start);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->threads; i++)
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
    pthread_mutex_lock(&p->mu);
    p->active = p->threads;
    p->gen++;
    pthread_cond_broadcast(&p->start);
    while (p->active > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
