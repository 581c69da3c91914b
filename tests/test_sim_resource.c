/* test_sim_resource: the queueing resource models (sim/resource.c, res_fifo.c, res_pool.c)
 * against hand-computed timelines: a FIFO serial resource runs one op at a time in request
 * order; a pool of N workers runs ops taking k workers, strict FIFO (no backfilling); busy
 * time is the integral of busy units and never exceeds the elapsed time. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dag.h"
#include "engine.h"
#include "res_fifo.h"
#include "res_pool.h"
#include "timeline.h"

/* The timeline as text, one span a line: label resource ready start end (ms), sorted by
 * op id, so golden strings read in the order the ops were added. */
static void timeline_text(const sim_timeline *tl, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    for (uint64_t id = 0; id < tl->n; id++)
        for (size_t i = 0; i < tl->n; i++) {
            const sim_span *s = &tl->v[i];
            if (s->op != id)
                continue;
            len += (size_t)snprintf(buf + len, cap - len, "%s %s %g %g %g\n", s->label,
                                    s->res ? s->res : "-", s->t_ready * 1e3, s->t_start * 1e3,
                                    s->t_end * 1e3);
        }
}

static sim_op_id add(sim_dag *g, sim_res *r, uint32_t width, double s, const char *label,
                     const sim_op_id *preds, size_t np)
{
    ws_err err = {0};
    sim_op_spec sp = {.hold = r, .width = width, .seconds = s, .label = label};
    sim_op_id id = sim_dag_add(g, &sp, preds, np, &err);
    cr_assert_neq(id, SIM_OP_NONE, "%s", err.msg);
    return id;
}

/* gpu: A 2 ms, B 1 ms, C 3 ms asked at 0, in that order; h2d: D 4 ms at 0; E on gpu after
 * D: ready at 4, behind C, so it starts at 6. */
Test(sim_fifo, golden_timeline)
{
    sim_engine e;
    sim_res gpu, h2d;
    sim_dag g;
    sim_timeline tl;
    ws_err err = {0};
    sim_engine_init(&e, 1, &err);
    cr_assert_eq(sim_fifo_init(&gpu, &e, "gpu", &err), 0);
    cr_assert_eq(sim_fifo_init(&h2d, &e, "h2d", &err), 0);
    cr_assert_eq(sim_dag_init(&g, &e, 0, &err), 0);
    sim_timeline_init(&tl);
    sim_dag_record(&g, &tl);
    add(&g, &gpu, 0, 2e-3, "A", NULL, 0);
    add(&g, &gpu, 0, 1e-3, "B", NULL, 0);
    add(&g, &gpu, 0, 3e-3, "C", NULL, 0);
    sim_op_id d = add(&g, &h2d, 1, 4e-3, "D", NULL, 0);
    add(&g, &gpu, 1, 1e-3, "E", &d, 1);
    cr_assert_eq(sim_res_queued(&gpu), 2);
    cr_assert_eq(sim_engine_run(&e, INFINITY, &err), 0, "%s", err.msg);
    char text[1024];
    timeline_text(&tl, text, sizeof text);
    cr_assert_str_eq(text, "A gpu 0 0 2\n"
                           "B gpu 0 2 3\n"
                           "C gpu 0 3 6\n"
                           "D h2d 0 0 4\n"
                           "E gpu 4 6 7\n");
    cr_assert_float_eq(sim_res_unit_seconds(&gpu), 7e-3, 1e-15);
    cr_assert_float_eq(sim_res_busy_seconds(&gpu), 7e-3, 1e-15);
    cr_assert_float_eq(sim_res_busy_seconds(&h2d), 4e-3, 1e-15);
    cr_assert_eq(gpu.n_granted, 4);
    cr_assert_eq(gpu.n_waited, 3);
    cr_assert_eq(gpu.max_queue, 2);
    cr_assert_eq(gpu.in_use, 0);
    sim_timeline_free(&tl);
    sim_dag_free(&g);
    sim_res_free(&gpu);
    sim_res_free(&h2d);
    sim_engine_free(&e);
}

/* A gap: the resource idles between 1 and 3, so busy time is 2 of 4 elapsed. */
Test(sim_fifo, busy_time_counts_only_held_time)
{
    sim_engine e;
    sim_res gpu;
    sim_dag g;
    ws_err err = {0};
    sim_engine_init(&e, 1, &err);
    sim_fifo_init(&gpu, &e, "gpu", &err);
    sim_dag_init(&g, &e, 0, &err);
    sim_op_id a = add(&g, &gpu, 1, 1.0, "a", NULL, 0);
    sim_op_spec wait = {.seconds = 2.0, .label = "wait"};
    sim_op_id w = sim_dag_add(&g, &wait, &a, 1, &err);
    add(&g, &gpu, 1, 1.0, "b", &w, 1);
    cr_assert_eq(sim_engine_run(&e, 2.0, &err), 0);
    cr_assert_float_eq(sim_res_busy_seconds(&gpu), 1.0, 1e-15); /* mid-run, up to the clock */
    cr_assert_eq(sim_engine_run(&e, INFINITY, &err), 0);
    cr_assert_float_eq(sim_now(&e), 4.0, 1e-15);
    cr_assert_float_eq(sim_res_busy_seconds(&gpu), 2.0, 1e-15);
    cr_assert_float_eq(sim_res_unit_seconds(&gpu), 2.0, 1e-15);
    sim_dag_free(&g);
    sim_res_free(&gpu);
    sim_engine_free(&e);
}

static uint64_t granted[16];
static int n_granted;

static int on_grant(void *ctx, sim_res *r, uint64_t id, ws_err *err)
{
    (void)ctx;
    (void)r;
    (void)err;
    granted[n_granted++] = id;
    return 0;
}

/* The models on their own, without the graph: acquire answers now or queues; release
 * grants the queue's head through the callback. */
Test(sim_fifo, acquire_release_directly)
{
    sim_engine e;
    sim_res r;
    ws_err err = {0};
    sim_engine_init(&e, 1, &err);
    sim_fifo_init(&r, &e, "d2h", &err);
    r.grant = on_grant;
    n_granted = 0;
    cr_assert_eq(sim_res_acquire(&r, 10, 1, &err), 1);
    for (uint64_t id = 11; id < 50; id++) /* past the queue's first allocation */
        cr_assert_eq(sim_res_acquire(&r, id, 1, &err), 0);
    cr_assert_eq(sim_res_acquire(&r, 99, 2, &err), -1);
    cr_assert_eq(sim_res_queued(&r), 39);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(sim_res_release(&r, 1, &err), 0);
    cr_assert_eq(n_granted, 5);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(granted[i], 11 + (uint64_t)i);
    cr_assert_str_eq(r.vt->model, "fifo");
    sim_res_free(&r);
    sim_engine_free(&e);
}

/* Pool of 4 workers, asked at 0 in this order:
 *   a k=2 3 ms, b k=2 1 ms, c k=3 2 ms, d k=1 1 ms, e k=1 5 ms;
 * and f k=1 1 ms, ready at 1.5 ms (after a 1.5 ms delay op, which holds nothing).
 * 0: a, b take all 4; c (3) waits, and d, e wait behind it (strict FIFO).
 * 1: b ends, 2 free: c still does not fit, and d does not pass it.
 * 1.5: f asks: 2 are free, but it queues behind c, d, e (no backfilling).
 * 3: a ends, 4 free: c (3) and d (1) start.  4: d ends: e starts, ends at 9.
 * 5: c ends: f starts, ends at 6.  Unit-seconds 6+2+6+1+5+1 = 21 of 4 x 9. */
Test(sim_pool, golden_timeline_strict_fifo)
{
    sim_engine e;
    sim_res cpu;
    sim_dag g;
    sim_timeline tl;
    ws_err err = {0};
    sim_engine_init(&e, 1, &err);
    cr_assert_eq(sim_pool_init(&cpu, &e, "cpu", 4, &err), 0);
    sim_dag_init(&g, &e, 0, &err);
    sim_timeline_init(&tl);
    sim_dag_record(&g, &tl);
    add(&g, &cpu, 2, 3e-3, "a", NULL, 0);
    add(&g, &cpu, 2, 1e-3, "b", NULL, 0);
    add(&g, &cpu, 3, 2e-3, "c", NULL, 0);
    add(&g, &cpu, 1, 1e-3, "d", NULL, 0);
    add(&g, &cpu, 1, 5e-3, "e", NULL, 0);
    sim_op_id w = add(&g, NULL, 0, 1.5e-3, "wait", NULL, 0);
    add(&g, &cpu, 1, 1e-3, "f", &w, 1);
    cr_assert_eq(sim_engine_run(&e, INFINITY, &err), 0, "%s", err.msg);
    char text[1024];
    timeline_text(&tl, text, sizeof text);
    cr_assert_str_eq(text, "a cpu 0 0 3\n"
                           "b cpu 0 0 1\n"
                           "c cpu 0 3 5\n"
                           "d cpu 0 3 4\n"
                           "e cpu 0 4 9\n"
                           "wait - 0 0 1.5\n"
                           "f cpu 1.5 5 6\n");
    cr_assert_float_eq(sim_res_unit_seconds(&cpu), 21e-3, 1e-15);
    cr_assert_float_eq(sim_res_busy_seconds(&cpu), 9e-3, 1e-15);
    double util = sim_res_unit_seconds(&cpu) / (cpu.units * sim_now(&e));
    cr_assert(util <= 1.0 && fabs(util - 21.0 / 36.0) < 1e-12);
    cr_assert_eq(cpu.max_queue, 4);
    sim_timeline_free(&tl);
    sim_dag_free(&g);
    sim_res_free(&cpu);
    sim_engine_free(&e);
}

/* One release can start several queued requests; a request wider than the pool is
 * refused; over-release is an error. */
Test(sim_pool, release_grants_what_fits_and_refuses_too_wide)
{
    sim_engine e;
    sim_res r;
    ws_err err = {0};
    sim_engine_init(&e, 1, &err);
    cr_assert_eq(sim_pool_init(&r, &e, "cpu", 0, &err), WS_EINVAL);
    sim_pool_init(&r, &e, "cpu", 8, &err);
    r.grant = on_grant;
    n_granted = 0;
    cr_assert_eq(sim_res_acquire(&r, 1, 8, &err), 1);
    cr_assert_eq(sim_res_acquire(&r, 2, 3, &err), 0);
    cr_assert_eq(sim_res_acquire(&r, 3, 3, &err), 0);
    cr_assert_eq(sim_res_acquire(&r, 4, 4, &err), 0);
    cr_assert_eq(sim_res_acquire(&r, 5, 9, &err), -1);
    cr_assert_eq(err.code, WS_EINVAL);
    cr_assert_eq(sim_res_release(&r, 8, &err), 0);
    cr_assert_eq(n_granted, 2); /* 3 + 3 fit, 4 does not */
    cr_assert_eq(granted[0], 2);
    cr_assert_eq(granted[1], 3);
    cr_assert_eq(r.in_use, 6);
    cr_assert_eq(sim_res_release(&r, 7, &err), WS_EINVAL);
    cr_assert_str_eq(r.vt->model, "pool");
    sim_res_free(&r);
    sim_engine_free(&e);
}
