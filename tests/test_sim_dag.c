/* test_sim_dag: the operation graph (sim/dag.c, timeline.c) on the engine and the resource
 * models: dependencies honoured (an op is ready when its last predecessor ends, starts no
 * earlier), conservation on a random graph (every op ends exactly once, no FIFO resource
 * runs two ops at once, no pool runs more than N units, busy time <= elapsed, every byte
 * moved), identical timelines for identical inputs, memory that follows the ops in flight,
 * and one clear error for each bad spec. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dag.h"
#include "engine.h"
#include "res_fifo.h"
#include "res_fluid.h"
#include "res_pool.h"
#include "timeline.h"

enum { K_OP = 0, K_FLOW = 1 }; /* event kinds: op ends, channel ends */

typedef struct world {
    sim_engine e;
    sim_res gpu, h2d, d2h, cpu;
    sim_fluid mem;
    sim_dag g;
    sim_timeline tl;
} world;

static void world_init(world *w, uint64_t seed)
{
    ws_err err = {0};
    cr_assert_eq(sim_engine_init(&w->e, seed, &err), 0);
    cr_assert_eq(sim_fifo_init(&w->gpu, &w->e, "gpu", &err), 0);
    cr_assert_eq(sim_fifo_init(&w->h2d, &w->e, "h2d", &err), 0);
    cr_assert_eq(sim_fifo_init(&w->d2h, &w->e, "d2h", &err), 0);
    cr_assert_eq(sim_pool_init(&w->cpu, &w->e, "cpu", 4, &err), 0);
    cr_assert_eq(sim_fluid_init(&w->mem, &w->e, K_FLOW, "membw", 100e9, SIM_FLUID_MAXMIN, &err), 0);
    cr_assert_eq(sim_dag_init(&w->g, &w->e, K_OP, &err), 0);
    sim_timeline_init(&w->tl);
    sim_dag_record(&w->g, &w->tl);
}

static void world_free(world *w)
{
    sim_timeline_free(&w->tl);
    sim_dag_free(&w->g);
    sim_fluid_free(&w->mem);
    sim_res_free(&w->gpu);
    sim_res_free(&w->h2d);
    sim_res_free(&w->d2h);
    sim_res_free(&w->cpu);
    sim_engine_free(&w->e);
}

static const sim_span *span_of(const sim_timeline *tl, sim_op_id id)
{
    for (size_t i = 0; i < tl->n; i++)
        if (tl->v[i].op == id)
            return &tl->v[i];
    cr_assert_fail("op %llu has no span", (unsigned long long)id);
    return NULL;
}

/* The layer shape: qkv on the GPU -> (GPU half || CPU half) -> merge on the GPU. */
Test(sim_dag, diamond_waits_for_both_halves)
{
    world w;
    ws_err err = {0};
    world_init(&w, 1);
    sim_op_spec qkv = {.hold = &w.gpu, .seconds = 1e-3, .label = "qkv"};
    sim_op_spec gh = {.hold = &w.gpu, .seconds = 2e-3, .label = "gpu-half"};
    sim_op_spec ch = {.hold = &w.cpu, .width = 4, .seconds = 5e-3, .label = "cpu-half"};
    sim_op_spec mg = {.hold = &w.gpu, .seconds = 0.5e-3, .label = "merge"};
    sim_op_id q = sim_dag_add(&w.g, &qkv, NULL, 0, &err);
    sim_op_id a = sim_dag_add(&w.g, &gh, &q, 1, &err);
    sim_op_id b = sim_dag_add(&w.g, &ch, &q, 1, &err);
    sim_op_id ab[] = {a, b, SIM_OP_NONE};
    sim_op_id m = sim_dag_add(&w.g, &mg, ab, 3, &err);
    cr_assert_neq(m, SIM_OP_NONE, "%s", err.msg);
    cr_assert_eq(sim_dag_op(&w.g, m)->n_wait, 2);
    cr_assert_eq(sim_dag_op(&w.g, m)->state, SIM_OP_WAITING);
    cr_assert_eq(sim_engine_run(&w.e, INFINITY, &err), 0, "%s", err.msg);
    const sim_span *sm = span_of(&w.tl, m), *sa = span_of(&w.tl, a), *sb = span_of(&w.tl, b);
    cr_assert_float_eq(sa->t_end, 3e-3, 1e-15);
    cr_assert_float_eq(sb->t_end, 6e-3, 1e-15);
    cr_assert_float_eq(sm->t_ready, 6e-3, 1e-15);
    cr_assert_float_eq(sm->t_start, 6e-3, 1e-15);
    cr_assert_float_eq(sm->t_end, 6.5e-3, 1e-15);
    cr_assert_str_eq(sm->label, "merge");
    cr_assert_str_eq(sm->res, "gpu");
    cr_assert_eq(sb->width, 4);
    cr_assert(sim_dag_ended(&w.g, q) && sim_dag_ended(&w.g, m));
    cr_assert_null(sim_dag_op(&w.g, m)); /* all ended: the window is empty */
    world_free(&w);
}

/* A random graph: ops on every resource, some with bytes through the channel, each with up
 * to three predecessors among the 30 before it. */
#define NOPS 3000

typedef struct rnd_graph {
    sim_op_id preds[NOPS][3];
    int n_preds[NOPS];
    int ends[NOPS];
    double t_add[NOPS];
    double bytes;
} rnd_graph;

static int count_end(void *ctx, sim_dag *g, const sim_op *op, ws_err *err)
{
    (void)g;
    (void)err;
    rnd_graph *r = ctx;
    cr_assert_lt(op->id, NOPS);
    cr_assert_eq(op->state, SIM_OP_DONE);
    r->ends[op->id]++;
    return 0;
}

static void build_random(world *w, rnd_graph *r, uint64_t seed)
{
    ws_err err = {0};
    sim_engine rng;
    sim_engine_init(&rng, seed, &err);
    memset(r, 0, sizeof *r);
    sim_dag_on_done(&w->g, count_end, r);
    sim_res *res[] = {&w->gpu, &w->h2d, &w->d2h, &w->cpu, NULL};
    static const char *labels[] = {"gpu-op", "h2d-op", "d2h-op", "cpu-op", "barrier"};
    for (int i = 0; i < NOPS; i++) {
        int k = (int)(sim_rand_u64(&rng) % 5);
        sim_op_spec s = {.hold = res[k], .label = labels[k], .tag = (uint32_t)i};
        s.seconds = (sim_rand_u64(&rng) % 3) * 1e-4 * sim_rand_unit(&rng);
        if (k == 3)
            s.width = 1 + (uint32_t)(sim_rand_u64(&rng) % 4);
        if (k == 1 || k == 2 || (k == 3 && sim_rand_u64(&rng) % 2)) {
            s.channel = &w->mem;
            s.bytes = 1e6 * (1 + sim_rand_u64(&rng) % 50);
            s.max_rate = k == 3 ? 20e9 * s.width : 25e9;
            r->bytes += s.bytes;
        }
        r->n_preds[i] = i ? (int)(sim_rand_u64(&rng) % 4) : 0;
        for (int p = 0; p < r->n_preds[i]; p++) {
            uint64_t back = 1 + sim_rand_u64(&rng) % (i < 30 ? (uint64_t)i : 30);
            r->preds[i][p] = (sim_op_id)i - back;
        }
        r->t_add[i] = sim_now(&w->e);
        sim_op_id id = sim_dag_add(&w->g, &s, r->preds[i], (size_t)r->n_preds[i], &err);
        cr_assert_eq(id, (sim_op_id)i, "%s", err.msg);
        /* Let the clock move between batches of adds, as a step model would. */
        if (i % 500 == 499)
            cr_assert_eq(sim_engine_run(&w->e, sim_now(&w->e) + 2e-3, &err), 0, "%s", err.msg);
    }
    sim_engine_free(&rng);
}

/* Sweeps the spans of one resource: the most units held at once. */
static uint32_t peak_units(const sim_timeline *tl, const char *res)
{
    uint32_t peak = 0;
    for (size_t i = 0; i < tl->n; i++) {
        const sim_span *a = &tl->v[i];
        if (!a->res || strcmp(a->res, res) || a->t_end == a->t_start)
            continue;
        uint32_t held = 0; /* units held just after a starts */
        for (size_t j = 0; j < tl->n; j++) {
            const sim_span *b = &tl->v[j];
            if (b->res && !strcmp(b->res, res) && b->t_start <= a->t_start && b->t_end > a->t_start)
                held += b->width;
        }
        if (held > peak)
            peak = held;
    }
    return peak;
}

Test(sim_dag, conservation_on_a_random_graph)
{
    static world w;
    static rnd_graph r;
    ws_err err = {0};
    world_init(&w, 1);
    build_random(&w, &r, 2024);
    cr_assert_eq(sim_engine_run(&w.e, INFINITY, &err), 0, "%s", err.msg);
    double elapsed = sim_now(&w.e);
    cr_assert_gt(elapsed, 0);
    for (int i = 0; i < NOPS; i++)
        cr_assert_eq(r.ends[i], 1, "op %d ended %d times", i, r.ends[i]);
    cr_assert_eq(w.g.n_added, NOPS);
    cr_assert_eq(w.g.n_started, NOPS);
    cr_assert_eq(w.g.n_done, NOPS);
    cr_assert_eq(sim_dag_in_flight(&w.g), 0);
    cr_assert_eq(w.tl.n, NOPS);
    for (int i = 0; i < NOPS; i++) {
        const sim_span *s = span_of(&w.tl, (sim_op_id)i);
        cr_assert(s->t_ready <= s->t_start && s->t_start <= s->t_end, "op %d", i);
        for (int p = 0; p < r.n_preds[i]; p++)
            cr_assert_geq(s->t_ready, span_of(&w.tl, r.preds[i][p])->t_end, "op %d", i);
        /* ready exactly when the last predecessor ended, or when added if later */
        double last = r.t_add[i];
        for (int p = 0; p < r.n_preds[i]; p++)
            last = fmax(last, span_of(&w.tl, r.preds[i][p])->t_end);
        cr_assert_eq(s->t_ready, last, "op %d", i);
        /* work-conserving: an op that waited got its resource the moment another op on it
         * ended; an op holding nothing never waits */
        if (s->t_start > s->t_ready) {
            cr_assert_not_null(s->res, "op %d", i);
            int freed = 0;
            for (size_t j = 0; j < w.tl.n && !freed; j++)
                freed = w.tl.v[j].res == s->res && w.tl.v[j].t_end == s->t_start;
            cr_assert(freed, "op %d waited from %g to %g with nothing ending then", i, s->t_ready,
                      s->t_start);
        }
    }
    cr_assert_eq(peak_units(&w.tl, "gpu"), 1);
    cr_assert_eq(peak_units(&w.tl, "h2d"), 1);
    cr_assert_eq(peak_units(&w.tl, "d2h"), 1);
    cr_assert_leq(peak_units(&w.tl, "cpu"), 4);
    cr_assert_eq(peak_units(&w.tl, "cpu"), 4);
    sim_res *res[] = {&w.gpu, &w.h2d, &w.d2h, &w.cpu};
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(res[k]->in_use, 0);
        cr_assert_eq(sim_res_queued(res[k]), 0);
        cr_assert_leq(sim_res_busy_seconds(res[k]), elapsed);
        cr_assert_leq(sim_res_unit_seconds(res[k]), res[k]->units * elapsed * (1 + 1e-12));
        cr_assert_gt(sim_res_busy_seconds(res[k]), 0);
    }
    cr_assert_float_eq(sim_fluid_bytes(&w.mem), r.bytes, r.bytes * 1e-9);
    cr_assert_leq(sim_fluid_bytes(&w.mem), w.mem.capacity * elapsed * (1 + 1e-9));
    cr_assert_leq(sim_fluid_busy_seconds(&w.mem), elapsed);
    cr_assert_eq(w.mem.n_done, w.mem.n_started);
    cr_assert_gt(w.mem.max_flows, 1);
    world_free(&w);
}

Test(sim_dag, identical_inputs_identical_timeline)
{
    static world a, b, c;
    static rnd_graph ra, rb, rc;
    ws_err err = {0};
    world_init(&a, 1);
    world_init(&b, 1);
    world_init(&c, 1);
    build_random(&a, &ra, 77);
    build_random(&b, &rb, 77);
    build_random(&c, &rc, 78);
    cr_assert_eq(sim_engine_run(&a.e, INFINITY, &err), 0);
    cr_assert_eq(sim_engine_run(&b.e, INFINITY, &err), 0);
    cr_assert_eq(sim_engine_run(&c.e, INFINITY, &err), 0);
    cr_assert_eq(a.tl.n, b.tl.n);
    for (size_t i = 0; i < a.tl.n; i++) {
        const sim_span *x = &a.tl.v[i], *y = &b.tl.v[i];
        cr_assert_eq(x->op, y->op, "span %zu", i);
        cr_assert_eq(x->label, y->label);
        cr_assert(!strcmp(x->res ? x->res : "", y->res ? y->res : ""));
        cr_assert(x->t_ready == y->t_ready && x->t_start == y->t_start && x->t_end == y->t_end,
                  "span %zu differs", i);
    }
    cr_assert_eq(a.e.n_processed, b.e.n_processed);
    cr_assert_eq(sim_now(&a.e), sim_now(&b.e));
    cr_assert_neq(sim_now(&a.e), sim_now(&c.e));
    world_free(&a);
    world_free(&b);
    world_free(&c);
}

/* A chain of zero-duration ops, each added when the one before ends: no recursion, every
 * end is one event, and the ring stays at its first size since only one op is in flight. */
typedef struct chain {
    uint64_t left;
} chain;

static int extend(void *ctx, sim_dag *g, const sim_op *op, ws_err *err)
{
    chain *c = ctx;
    if (!c->left)
        return 0;
    c->left--;
    sim_op_spec s = {.label = "link"};
    return sim_dag_add(g, &s, &op->id, 1, err) == SIM_OP_NONE ? WS_EINVAL : 0;
}

Test(sim_dag, memory_follows_ops_in_flight)
{
    world w;
    ws_err err = {0};
    world_init(&w, 1);
    sim_dag_record(&w.g, NULL);
    uint64_t cap0 = w.g.cap;
    chain c = {100000};
    sim_dag_on_done(&w.g, extend, &c);
    sim_op_spec s = {.label = "link"};
    cr_assert_eq(sim_dag_add(&w.g, &s, NULL, 0, &err), 0);
    cr_assert_eq(sim_engine_run(&w.e, INFINITY, &err), 0, "%s", err.msg);
    cr_assert_eq(w.g.n_done, 100001);
    cr_assert_eq(w.e.n_processed, 100001);
    cr_assert_eq(w.g.cap, cap0);
    cr_assert_eq(sim_now(&w.e), 0.0);
    /* Ids below the window count as ended predecessors. */
    sim_op_id id = sim_dag_add(&w.g, &s, (sim_op_id[]){5}, 1, &err);
    cr_assert_eq(sim_dag_op(&w.g, id)->state, SIM_OP_FIXED); /* ready at once */
    world_free(&w);
}

/* Many ops in flight at once grow the ring, keeping ids and edges intact. */
Test(sim_dag, ring_grows_with_ops_in_flight)
{
    world w;
    ws_err err = {0};
    world_init(&w, 1);
    sim_op_spec s = {.hold = &w.gpu, .seconds = 1e-6, .label = "k"};
    sim_op_id prev = SIM_OP_NONE;
    for (int i = 0; i < 5000; i++) {
        sim_op_id id = sim_dag_add(&w.g, &s, &prev, 1, &err);
        cr_assert_eq(id, (sim_op_id)i, "%s", err.msg);
        prev = i % 2 ? id : SIM_OP_NONE;
    }
    cr_assert_geq(w.g.cap, 5000);
    cr_assert_eq(sim_engine_run(&w.e, INFINITY, &err), 0, "%s", err.msg);
    cr_assert_eq(w.g.n_done, 5000);
    cr_assert_float_eq(sim_now(&w.e), 5000e-6, 1e-12);
    for (size_t i = 1; i < w.tl.n; i++)
        cr_assert_geq(w.tl.v[i].t_start, w.tl.v[i - 1].t_end);
    world_free(&w);
}

Test(sim_dag, bad_specs_refused_with_one_line)
{
    world w, other;
    ws_err err = {0};
    world_init(&w, 1);
    world_init(&other, 1);
    sim_op_spec neg = {.seconds = -1, .label = "neg"};
    cr_assert_eq(sim_dag_add(&w.g, &neg, NULL, 0, &err), SIM_OP_NONE);
    cr_assert_eq(err.code, WS_EINVAL);
    cr_assert(strstr(err.msg, "neg:"), "%s", err.msg);
    sim_op_spec nan_s = {.seconds = NAN};
    cr_assert_eq(sim_dag_add(&w.g, &nan_s, NULL, 0, &err), SIM_OP_NONE);
    sim_op_spec nochan = {.bytes = 10, .label = "copy"};
    cr_assert_eq(sim_dag_add(&w.g, &nochan, NULL, 0, &err), SIM_OP_NONE);
    cr_assert(strstr(err.msg, "no channel"), "%s", err.msg);
    sim_op_spec wide = {.hold = &w.cpu, .width = 5, .label = "wide"};
    cr_assert_eq(sim_dag_add(&w.g, &wide, NULL, 0, &err), SIM_OP_NONE);
    sim_op_spec two = {.hold = &w.gpu, .width = 2};
    cr_assert_eq(sim_dag_add(&w.g, &two, NULL, 0, &err), SIM_OP_NONE);
    sim_op_spec ok = {.hold = &w.gpu, .seconds = 1, .label = "ok"};
    cr_assert_eq(sim_dag_add(&w.g, &ok, (sim_op_id[]){0}, 1, &err), SIM_OP_NONE);
    cr_assert(strstr(err.msg, "does not exist"), "%s", err.msg);
    cr_assert_eq(w.g.n_added, 0);
    cr_assert_eq(sim_dag_add(&w.g, &ok, NULL, 0, &err), 0);
    cr_assert_eq(sim_dag_add(&other.g, &ok, NULL, 0, &err), SIM_OP_NONE);
    cr_assert(strstr(err.msg, "another graph"), "%s", err.msg);
    sim_op_spec flow = {.channel = &w.mem, .bytes = 1};
    cr_assert_eq(sim_dag_add(&w.g, &flow, NULL, 0, &err), 1);
    cr_assert_eq(sim_dag_add(&other.g, &flow, NULL, 0, &err), SIM_OP_NONE);
    world_free(&w);
    world_free(&other);
}
