/* sim_bench: throughput of the simulator's event core and operation graph (sim/), to size
 * them against the simulator's budget (the 1M-token scenario: 48 layers x 256 decode steps
 * x ~15 ops per layer in well under 0.25 s). Two figures, each printed as one line:
 *   hold   the classic hold model on the bare engine: P events pending, each dispatch
 *          pushes one new event a random delay later; events/s for several P;
 *   steps  a decode-step-shaped op graph on the resource models (GPU stream, H2D and D2H
 *          copy engines, a CPU pool of 16 and a host-memory channel shared by copies and
 *          CPU compute), 48 layers x 16 ops, the next layer's streaming overlapping this
 *          layer's MoE, for 256 steps; ops/s and events/s, and the simulated time.
 * Durations are placeholders: only the counts and the wall time matter. No assertion, no
 * threshold: a benchmark, not a test. Usage: ws_sim_bench [events-for-hold]
 * (make bench-sim builds and runs it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dag.h"
#include "engine.h"
#include "res_fifo.h"
#include "res_fluid.h"
#include "res_pool.h"
#include "ws_util.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != 0) {                                                                         \
            fprintf(stderr, "sim_bench: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, err.msg);     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static ws_err err;

typedef struct hold {
    uint64_t left;
} hold;

static int hold_handler(sim_engine *e, const sim_event *ev, void *ctx, ws_err *er)
{
    hold *h = ctx;
    if (!h->left)
        return 0;
    h->left--;
    return sim_event_push(e, ev->t + sim_rand_unit(e), 0, NULL, 0, er);
}

static void bench_hold(size_t pending, uint64_t events)
{
    sim_engine e;
    hold h = {events - pending};
    CHECK(sim_engine_init(&e, 1, &err));
    CHECK(sim_engine_on(&e, 0, hold_handler, &h, &err));
    for (size_t i = 0; i < pending; i++)
        CHECK(sim_event_push(&e, sim_rand_unit(&e), 0, NULL, 0, &err));
    double t0 = ws_now_s();
    CHECK(sim_engine_run(&e, INFINITY, &err));
    double dt = ws_now_s() - t0;
    printf("hold   pending %-7zu events %-10llu wall %.3f s  %.1f M events/s\n", pending,
           (unsigned long long)e.n_processed, dt, e.n_processed / dt / 1e6);
    sim_engine_free(&e);
}

enum { K_OP = 0, K_FLOW = 1 };

#define PAGES 4 /* XFER page groups streamed per layer */

/* One decode step: per layer qkv, D-window append, PAGES x (H2D copy -> GPU attention),
 * CPU attention (16 workers, KV bytes through host memory), merge, output projection,
 * router, routed experts on the CPU (8 workers) and on the GPU, shared expert, combine.
 * The next layer's copies wait only for this layer's merge (its ping-pong buffers free),
 * so they overlap this layer's MoE phase. Returns the last op. */
static sim_op_id build_step(sim_dag *g, sim_res *gpu, sim_res *h2d, sim_res *d2h, sim_res *cpu,
                            sim_fluid *mem, int layers, sim_op_id prev)
{
    sim_op_spec qkv = {.hold = gpu, .seconds = 20e-6, .label = "qkv"};
    sim_op_spec app = {.hold = gpu, .seconds = 3e-6, .label = "dwin-append"};
    sim_op_spec cp = {
        .hold = h2d, .channel = mem, .bytes = 4 << 20, .max_rate = 25e9, .label = "h2d"};
    sim_op_spec ga = {.hold = gpu, .seconds = 15e-6, .label = "gpu-attn"};
    sim_op_spec ca = {.hold = cpu,
                      .width = 16,
                      .seconds = 5e-6,
                      .channel = mem,
                      .bytes = 24 << 20,
                      .max_rate = 120e9,
                      .label = "cpu-attn"};
    sim_op_spec mg = {.hold = gpu, .seconds = 4e-6, .label = "merge"};
    sim_op_spec op = {.hold = gpu, .seconds = 15e-6, .label = "o-proj"};
    sim_op_spec rt = {.hold = gpu, .seconds = 3e-6, .label = "router"};
    sim_op_spec ec = {.hold = cpu,
                      .width = 8,
                      .seconds = 30e-6,
                      .channel = mem,
                      .bytes = 12 << 20,
                      .max_rate = 60e9,
                      .label = "experts-cpu"};
    sim_op_spec eg = {.hold = gpu, .seconds = 40e-6, .label = "experts-gpu"};
    sim_op_spec sh = {.hold = gpu, .seconds = 10e-6, .label = "shared-expert"};
    sim_op_spec cb = {.seconds = 0, .label = "combine"};
    sim_op_spec fl = {
        .hold = d2h, .channel = mem, .bytes = 1 << 20, .max_rate = 25e9, .label = "dwin-flush"};
    sim_op_id buf_free = prev, x = prev;
    for (int l = 0; l < layers; l++) {
        sim_op_id q = sim_dag_add(g, &qkv, &x, 1, &err);
        sim_op_id a = sim_dag_add(g, &app, &q, 1, &err);
        sim_op_id att[PAGES + 1];
        for (int p = 0; p < PAGES; p++) {
            sim_op_id c = sim_dag_add(g, &cp, &buf_free, 1, &err);
            sim_op_id d[] = {c, q, p ? att[p - 1] : a};
            att[p] = sim_dag_add(g, &ga, d, 3, &err);
        }
        att[PAGES] = sim_dag_add(g, &ca, &q, 1, &err);
        sim_op_id m = sim_dag_add(g, &mg, att + PAGES - 1, 2, &err);
        buf_free = m;
        sim_op_id o = sim_dag_add(g, &op, &m, 1, &err);
        sim_op_id r = sim_dag_add(g, &rt, &o, 1, &err);
        sim_op_id e1 = sim_dag_add(g, &ec, &r, 1, &err);
        sim_op_id e2 = sim_dag_add(g, &eg, &r, 1, &err);
        sim_op_id e3 = sim_dag_add(g, &sh, &o, 1, &err);
        sim_op_id es[] = {e1, e2, e3};
        x = sim_dag_add(g, &cb, es, 3, &err);
        if (x == SIM_OP_NONE) {
            fprintf(stderr, "sim_bench: %s\n", err.msg);
            exit(1);
        }
    }
    sim_op_id f = sim_dag_add(g, &fl, &x, 1, &err);
    sim_op_id end[] = {x, f};
    sim_op_spec done = {.label = "step-end"};
    return sim_dag_add(g, &done, end, 2, &err);
}

static void bench_steps(int layers, int steps)
{
    sim_engine e;
    sim_res gpu, h2d, d2h, cpu;
    sim_fluid mem;
    sim_dag g;
    double t0 = ws_now_s();
    CHECK(sim_engine_init(&e, 1, &err));
    CHECK(sim_fifo_init(&gpu, &e, "gpu", &err));
    CHECK(sim_fifo_init(&h2d, &e, "h2d", &err));
    CHECK(sim_fifo_init(&d2h, &e, "d2h", &err));
    CHECK(sim_pool_init(&cpu, &e, "cpu", 32, &err));
    CHECK(sim_fluid_init(&mem, &e, K_FLOW, "membw", 150e9, SIM_FLUID_MAXMIN, &err));
    CHECK(sim_dag_init(&g, &e, K_OP, &err));
    sim_op_id last = SIM_OP_NONE;
    for (int s = 0; s < steps; s++) {
        last = build_step(&g, &gpu, &h2d, &d2h, &cpu, &mem, layers, last);
        CHECK(last == SIM_OP_NONE);
        CHECK(sim_engine_run(&e, INFINITY, &err));
    }
    double dt = ws_now_s() - t0;
    printf("steps  %d layers x %d steps: ops %llu events %llu (stale %llu) wall %.4f s  "
           "%.2f M ops/s  %.1f M events/s  simulated %.3f s  gpu busy %.0f%%  membw %.0f%%\n",
           layers, steps, (unsigned long long)g.n_done, (unsigned long long)e.n_processed,
           (unsigned long long)mem.n_stale, dt, g.n_done / dt / 1e6, e.n_processed / dt / 1e6,
           sim_now(&e), 100 * sim_res_busy_seconds(&gpu) / sim_now(&e),
           100 * sim_fluid_bytes(&mem) / (mem.capacity * sim_now(&e)));
    sim_dag_free(&g);
    sim_fluid_free(&mem);
    sim_res_free(&gpu);
    sim_res_free(&h2d);
    sim_res_free(&d2h);
    sim_res_free(&cpu);
    sim_engine_free(&e);
}

int main(int argc, char **argv)
{
    uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 20000000;
    size_t pending[] = {16, 1024, 65536};
    for (size_t i = 0; i < sizeof pending / sizeof *pending; i++)
        bench_hold(pending[i], events);
    bench_steps(48, 256);
    return 0;
}
