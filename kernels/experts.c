/* experts: the routed experts of a MoE phase over a thread pool (see experts.h). */
#include "experts.h"

#include <stdlib.h>
#include <string.h>

#include "gemm_bf16.h"
#include "gemm_int8.h"

typedef struct experts_job {
    const ws_expert_bf16 *const *ex;
    const ws_expert_int8 *const *q; /* int8 experts instead of ex */
    const float *xb;
    float *yb;
    const int *off;
    unsigned char *done;
    int rc;
    ws_err err;
} experts_job;

/* One hit expert on its rows, one pool thread each with a single-threaded GEMM: BLAS or
 * OpenMP threads of their own would keep spinning after the GEMM and take a core from the
 * next layer's CPU attention (docs/notes/runtime-engine.md). */
static void expert_task(void *ctx, int task, int thread)
{
    (void)thread;
    experts_job *j = ctx;
    if (j->done[task])
        return;
    const int off = j->off[task], m = j->off[task + 1] - off;
    const int H = j->q ? j->q[task]->hidden : j->ex[task]->hidden;
    ws_err err = {0};
    const float *x = j->xb + (size_t)off * H;
    float *y = j->yb + (size_t)off * H;
    const int rc = j->q ? ws_expert_ffn_int8(j->q[task], x, y, m, 1, &err)
                        : ws_expert_ffn_bf16(j->ex[task], x, y, m, 1, &err);
    if (rc && !__atomic_exchange_n(&j->rc, rc, __ATOMIC_ACQ_REL))
        j->err = err;
}

/* Either kind: ex (bf16) or q (int8) non-NULL. */
static int experts_run(ws_pool *pool, const ws_expert_bf16 *const *ex,
                       const ws_expert_int8 *const *q, int n, const int *off, const float *xb,
                       float *yb, ws_err *err)
{
    if (n <= 0)
        return 0;
    unsigned char done_s[256], *done = n <= 256 ? done_s : calloc((size_t)n, 1);
    if (!done)
        return ws_err_set(err, WS_ENOMEM, "experts: out of memory");
    memset(done, 0, (size_t)n);
    int rc = 0;
    /* A bf16 shape class's first call probes every backend by timing it: on this thread,
     * alone, so concurrent probes neither skew each other's timings nor race to record a
     * choice. */
    for (int i = 0; ex && i < n && !rc; i++) {
        const int m = off[i + 1] - off[i];
        if (strcmp(ws_gemm_bf16_backend_name(ex[i]->hidden, ex[i]->inter, m, 1), "unprobed"))
            continue;
        rc = ws_expert_ffn_bf16(ex[i], xb + (size_t)off[i] * ex[i]->hidden,
                                yb + (size_t)off[i] * ex[i]->hidden, m, 1, err);
        done[i] = 1;
    }
    if (!rc) {
        experts_job j = {.ex = ex, .q = q, .xb = xb, .yb = yb, .off = off, .done = done};
        ws_pool_run(pool, n, expert_task, &j);
        if ((rc = j.rc) && err)
            *err = j.err;
    }
    if (done != done_s)
        free(done);
    return rc;
}

int ws_experts_run_bf16(ws_pool *pool, const ws_expert_bf16 *const *ex, int n, const int *off,
                        const float *xb, float *yb, ws_err *err)
{
    return experts_run(pool, ex, NULL, n, off, xb, yb, err);
}

int ws_experts_run_int8(ws_pool *pool, const ws_expert_int8 *const *ex, int n, const int *off,
                        const float *xb, float *yb, ws_err *err)
{
    return experts_run(pool, NULL, ex, n, off, xb, yb, err);
}
