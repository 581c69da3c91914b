/* pool_dispatch_cost: what one ws_pool_run costs beyond its tasks. Times batches of empty tasks
 * (2 per thread) on a pool of T threads, back to back (the workers are still polling when
 * the next batch comes, as in a decode step's layers) and with a pause of 1 ms between
 * batches (the workers have gone to sleep and are woken through the kernel); prints the
 * median and quartiles of 9 rounds of 2000 batches each, in microseconds per batch.
 * Build (after `make`) and run:
 *   gcc -O2 -Icommon -Iplatform scripts/probe/pool_dispatch_cost.c build/libwritescope.a -lm \
 *       -pthread -o build/pool_dispatch_cost && build/pool_dispatch_cost [T] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pool.h"
#include "ws_util.h"

static void nop(void *ctx, int task, int thread)
{
    (void)ctx, (void)task, (void)thread;
}

/* Microseconds per batch, excluding the pauses. */
static double round_us(ws_pool *p, int batches, int pause)
{
    const struct timespec ms = {0, 1000000};
    double busy = 0;
    for (int b = 0; b < batches; b++) {
        if (pause)
            nanosleep(&ms, NULL);
        const double t0 = ws_now_s();
        ws_pool_run(p, 2 * ws_pool_threads(p), nop, NULL);
        busy += ws_now_s() - t0;
    }
    return 1e6 * busy / batches;
}

int main(int argc, char **argv)
{
    const int T = argc > 1 ? atoi(argv[1]) : 0;
    ws_err err = {0};
    ws_pool *p = ws_pool_create(T, &err);
    if (!p) {
        fprintf(stderr, "pool_dispatch_cost: %s\n", err.msg);
        return 1;
    }
    for (int pause = 0; pause < 2; pause++) {
        double r[9];
        round_us(p, 200, pause); /* warm-up */
        for (int k = 0; k < 9; k++)
            r[k] = round_us(p, pause ? 200 : 2000, pause);
        const double med = ws_median_sort(r, 9); /* sorted: quartiles at 2 and 6 */
        printf("%d threads, %-13s %.2f us per batch (quartiles %.2f-%.2f)\n", ws_pool_threads(p),
               pause ? "after 1 ms:" : "back to back:", med, r[2], r[6]);
    }
    ws_pool_destroy(p);
    return 0;
}
