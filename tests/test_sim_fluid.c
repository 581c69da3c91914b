/* test_sim_fluid: the shared-bandwidth model (sim/res_fluid.c) against hand-computed
 * completion times: flows sharing a channel, one joining late, flows capped by their own
 * maximum, both sharing rules, simultaneous ends, stale events ignored, and the bytes
 * accounted never exceeding capacity x time. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "dag.h"
#include "engine.h"
#include "res_fifo.h"
#include "res_fluid.h"
#include "res_pool.h"

#define TOL 1e-12

typedef struct ended {
    uint64_t id[16];
    double t[16];
    int n;
} ended;

static int on_done(void *ctx, sim_fluid *ch, uint64_t id, ws_err *err)
{
    (void)err;
    ended *d = ctx;
    d->id[d->n] = id;
    d->t[d->n++] = sim_now(ch->eng);
    return 0;
}

static void channel(sim_engine *e, sim_fluid *ch, double w, sim_fluid_share share, ended *d)
{
    ws_err err = {0};
    cr_assert_eq(sim_engine_init(e, 1, &err), 0);
    cr_assert_eq(sim_fluid_init(ch, e, 3, "membw", w, share, &err), 0, "%s", err.msg);
    memset(d, 0, sizeof *d);
    ch->done = on_done;
    ch->done_ctx = d;
}

/* W = 10 B/s. f1: 100 B from 0; f2: 30 B from 4. 0-4: f1 alone at 10 (60 left). From 4 both
 * at 5: f2 ends at 4 + 30/5 = 10, f1 has 30 left, alone again at 10: ends at 13. */
Test(sim_fluid, two_flows_one_joining_late)
{
    sim_engine e;
    sim_fluid ch;
    ended d;
    ws_err err = {0};
    channel(&e, &ch, 10, SIM_FLUID_MAXMIN, &d);
    cr_assert_eq(sim_fluid_start(&ch, 1, 100, 0, &err), 0);
    cr_assert_eq(sim_engine_run(&e, 4.0, &err), 0);
    cr_assert_float_eq(sim_fluid_bytes(&ch), 40, TOL);
    cr_assert_eq(sim_fluid_start(&ch, 2, 30, 0, &err), 0);
    cr_assert_float_eq(sim_fluid_rate(&ch, 1), 5, TOL);
    cr_assert_float_eq(sim_fluid_rate(&ch, 2), 5, TOL);
    cr_assert_eq(sim_engine_run(&e, INFINITY, &err), 0, "%s", err.msg);
    cr_assert_eq(d.n, 2);
    cr_assert_eq(d.id[0], 2);
    cr_assert_float_eq(d.t[0], 10, TOL);
    cr_assert_eq(d.id[1], 1);
    cr_assert_float_eq(d.t[1], 13, TOL);
    cr_assert_float_eq(sim_fluid_bytes(&ch), 130, 1e-9);
    cr_assert_float_eq(sim_fluid_busy_seconds(&ch), 13, TOL);
    cr_assert_eq(ch.n_stale, 1); /* f1's first end (at 10) was overtaken by the join */
    cr_assert_eq(ch.n_done, 2);
    cr_assert_eq(sim_fluid_rate(&ch, 1), -1);
    sim_fluid_free(&ch);
    sim_engine_free(&e);
}

/* W = 10. f1: 100 B, at most 4 B/s; f2: 60 B uncapped; both from 0. Fair share 5 > 4:
 * f1 runs at 4, f2 takes the other 6 and ends at 10; f1 (60 left) stays at its maximum 4
 * and ends at 25. The channel is not full after 10: 160 B in 25 s < 250. */
Test(sim_fluid, maxmin_respects_each_flows_maximum)
{
    sim_engine e;
    sim_fluid ch;
    ended d;
    ws_err err = {0};
    channel(&e, &ch, 10, SIM_FLUID_MAXMIN, &d);
    sim_fluid_start(&ch, 1, 100, 4, &err);
    sim_fluid_start(&ch, 2, 60, 0, &err);
    cr_assert_float_eq(sim_fluid_rate(&ch, 1), 4, TOL);
    cr_assert_float_eq(sim_fluid_rate(&ch, 2), 6, TOL);
    cr_assert_eq(sim_engine_run(&e, INFINITY, &err), 0, "%s", err.msg);
    cr_assert_eq(d.n, 2);
    cr_assert_float_eq(d.t[0], 10, TOL);
    cr_assert_float_eq(d.t[1], 25, TOL);
    double util = sim_fluid_bytes(&ch) / (ch.capacity * sim_now(&e));
    cr_assert_float_eq(util, 160.0 / 250.0, 1e-12);
    sim_fluid_free(&ch);
    sim_engine_free(&e);
}

/* Water-filling in rounds: W = 12, maxima 2, 5 and none. Share 4: the 2 is fixed; 10 left
 * for two: 5 each, and the 5 fits exactly. */
Test(sim_fluid, maxmin_water_filling)
{
    sim_engine e;
    sim_fluid ch;
    ended d;
    ws_err err = {0};
    channel(&e, &ch, 12, SIM_FLUID_MAXMIN, &d);
    sim_fluid_start(&ch, 1, 1e3, 2, &err);
    sim_fluid_start(&ch, 2, 1e3, 5, &err);
    sim_fluid_start(&ch, 3, 1e3, 0, &err);
    cr_assert_float_eq(sim_fluid_rate(&ch, 1), 2, TOL);
    cr_assert_float_eq(sim_fluid_rate(&ch, 2), 5, TOL);
    cr_assert_float_eq(sim_fluid_rate(&ch, 3), 5, TOL);
    sim_fluid_start(&ch, 4, 1e3, 1e9, &err); /* above W: W is its maximum */
    cr_assert_float_eq(sim_fluid_rate(&ch, 1), 2, TOL);
    cr_assert_float_eq(sim_fluid_rate(&ch, 2), 10.0 / 3, TOL);
    cr_assert_float_eq(sim_fluid_rate(&ch, 4), 10.0 / 3, TOL);
    sim_fluid_free(&ch);
    sim_engine_free(&e);
}

/* Proportional: W = 6, f1 24 B at most 8, f2 16 B at most 4: demand 12, scale 1/2, rates 4
 * and 2. f1 ends at 6 (f2 has 4 left), then f2 alone at its maximum 4: ends at 7. */
Test(sim_fluid, proportional_slowdown)
{
    sim_engine e;
    sim_fluid ch;
    ended d;
    ws_err err = {0};
    channel(&e, &ch, 6, SIM_FLUID_PROPORTIONAL, &d);
    sim_fluid_start(&ch, 1, 24, 8, &err);
    sim_fluid_start(&ch, 2, 16, 4, &err);
    cr_assert_float_eq(sim_fluid_rate(&ch, 1), 4, TOL);
    cr_assert_float_eq(sim_fluid_rate(&ch, 2), 2, TOL);
    cr_assert_eq(sim_engine_run(&e, INFINITY, &err), 0, "%s", err.msg);
    cr_assert_eq(d.n, 2);
    cr_assert_float_eq(d.t[0], 6, TOL);
    cr_assert_float_eq(d.t[1], 7, TOL);
    sim_fluid_free(&ch);
    sim_engine_free(&e);
}

/* Equal flows end at one instant, reported in the order they started, by one event. */
Test(sim_fluid, simultaneous_ends_in_start_order)
{
    sim_engine e;
    sim_fluid ch;
    ended d;
    ws_err err = {0};
    channel(&e, &ch, 3, SIM_FLUID_MAXMIN, &d);
    sim_fluid_start(&ch, 7, 1, 0, &err);
    sim_fluid_start(&ch, 5, 1, 0, &err);
    sim_fluid_start(&ch, 6, 1, 0, &err);
    uint64_t before = e.n_processed;
    cr_assert_eq(sim_engine_run(&e, INFINITY, &err), 0);
    cr_assert_eq(d.n, 3);
    cr_assert_eq(d.id[0], 7);
    cr_assert_eq(d.id[1], 5);
    cr_assert_eq(d.id[2], 6);
    for (int i = 0; i < 3; i++)
        cr_assert_float_eq(d.t[i], 1, TOL);
    cr_assert_eq(e.n_processed - before - ch.n_stale, 1);
    sim_fluid_free(&ch);
    sim_engine_free(&e);
}

Test(sim_fluid, bad_arguments)
{
    sim_engine e;
    sim_fluid ch;
    ws_err err = {0};
    sim_engine_init(&e, 1, &err);
    cr_assert_eq(sim_fluid_init(&ch, &e, 0, "m", 0, SIM_FLUID_MAXMIN, &err), WS_EINVAL);
    cr_assert_eq(sim_fluid_init(&ch, &e, 0, "m", INFINITY, SIM_FLUID_MAXMIN, &err), WS_EINVAL);
    cr_assert_eq(sim_fluid_init(&ch, &e, 0, "m", 1, (sim_fluid_share)7, &err), WS_EINVAL);
    cr_assert_eq(sim_fluid_init(&ch, &e, 0, "m", 1, SIM_FLUID_MAXMIN, &err), 0);
    cr_assert_eq(sim_fluid_start(&ch, 1, 0, 0, &err), WS_EINVAL);
    cr_assert_eq(sim_fluid_start(&ch, 1, NAN, 0, &err), WS_EINVAL);
    cr_assert_eq(sim_fluid_start(&ch, 1, 1, -1, &err), WS_EINVAL);
    sim_fluid_free(&ch);
    sim_engine_free(&e);
}

/* Through the graph, the step model's shape: an H2D copy (copy engine + host memory at
 * most 25 B/s) and a CPU attention piece (fixed 1 s on 2 workers, then 60 B at most 40 B/s)
 * share host memory of 50 B/s; the copy starts at 0 with 100 B.
 * 0-1: copy alone at 25. At 1 the CPU flow joins: fair share 25 each, both at 25 (the copy
 * at its maximum). CPU: 60/25 = 2.4 s, ends at 3.4; copy: 75 left at 1 -> 60 moved by 3.4,
 * 15 left, alone at 25: ends at 4.0. */
Test(sim_fluid, copy_and_cpu_compute_contend_in_a_graph)
{
    sim_engine e;
    sim_fluid mem;
    sim_res h2d, cpu;
    sim_dag g;
    ws_err err = {0};
    sim_engine_init(&e, 1, &err);
    sim_fluid_init(&mem, &e, 1, "membw", 50, SIM_FLUID_MAXMIN, &err);
    sim_fifo_init(&h2d, &e, "h2d", &err);
    sim_pool_init(&cpu, &e, "cpu", 4, &err);
    sim_dag_init(&g, &e, 0, &err);
    sim_op_spec copy = {
        .hold = &h2d, .channel = &mem, .bytes = 100, .max_rate = 25, .label = "h2d"};
    sim_op_spec attn = {.hold = &cpu,
                        .width = 2,
                        .seconds = 1,
                        .channel = &mem,
                        .bytes = 60,
                        .max_rate = 40,
                        .label = "cpu-attn"};
    sim_op_id c = sim_dag_add(&g, &copy, NULL, 0, &err);
    sim_op_id a = sim_dag_add(&g, &attn, NULL, 0, &err);
    cr_assert_eq(sim_engine_run(&e, INFINITY, &err), 0, "%s", err.msg);
    cr_assert(sim_dag_ended(&g, c) && sim_dag_ended(&g, a));
    cr_assert_float_eq(sim_now(&e), 4.0, TOL);
    cr_assert_float_eq(sim_res_busy_seconds(&h2d), 4.0, TOL);
    cr_assert_float_eq(sim_res_unit_seconds(&cpu), 2 * 3.4, TOL);
    cr_assert_float_eq(sim_fluid_bytes(&mem), 160, 1e-9);
    sim_dag_free(&g);
    sim_res_free(&h2d);
    sim_res_free(&cpu);
    sim_fluid_free(&mem);
    sim_engine_free(&e);
}
