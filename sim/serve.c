/* serve: the serving loop (see serve.h). */
#include "serve.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control.h"
#include "decode.h"
#include "engine.h"
#include "prefix.h"
#include "quantile.h"
#include "timeline.h"
#include "trace.h"
#include "ws_util.h"

enum { K_OP = 0 }; /* the only event kind: op ends */

static int closed_next(void *ctx, sim_req *req, ws_err *err)
{
    (void)err;
    sim_closed *c = ctx;
    if (c->i >= c->n)
        return 0;
    c->i++;
    *req = (sim_req){.arrival_s = 0, .prompt = c->prompt, .output = c->output};
    return 1;
}

void sim_closed_source(sim_closed *c, int n, int prompt, int output, sim_source *src)
{
    *c = (sim_closed){.n = n, .prompt = prompt, .output = output};
    *src = (sim_source){.next = closed_next, .ctx = c};
}

static int trace_next(void *ctx, sim_req *req, ws_err *err)
{
    ws_trace_req r;
    int rc = ws_trace_next(ctx, &r, err);
    if (rc < 0)
        return -(err && err->code ? err->code : WS_EIO);
    if (rc == 0)
        return 0;
    *req = (sim_req){.arrival_s = r.arrival_s,
                     .prompt = r.prompt_tokens,
                     .output = r.output_tokens,
                     .blocks = r.blocks,
                     .n_blocks = r.n_blocks};
    return 1;
}

int sim_trace_source(struct ws_trace *t, sim_source *src, ws_err *err)
{
    (void)err;
    *src = (sim_source){.next = trace_next, .ctx = t, .clients = ws_trace_closed_clients(t)};
    return 0;
}

void sim_cfg_default(sim_cfg *c)
{
    memset(c, 0, sizeof *c);
    ws_serving_default(&c->srv);
    c->detail_layer = 1;
    c->cpu_workers = 1;
    c->keep_steps = 1;
    c->keep_requests = 1;
}

const char *sim_outcome_name(int outcome)
{
    return outcome == SIM_OUT_OOM ? "oom" : "done";
}

/* A request waiting for admission; a preempted one keeps its first token's time and the
 * tokens it has generated. */
typedef struct qent {
    sim_req rq;
    uint64_t id;
    double first_s; /* -1: none yet */
    int generated;
    int64_t *blocks; /* its own copy of rq.blocks (prefix caching), or NULL */
    int seen;        /* 1: its blocks counted in the prefix statistics */
} qent;

/* A closed loop's request waiting for its arrival time (a min-heap on t, then seq). */
typedef struct pent {
    sim_req rq; /* arrival_s: when it arrives */
    uint64_t seq;
} pent;

/* A running sequence. */
typedef struct seq {
    int live;
    uint64_t order; /* admission order */
    uint64_t id;    /* arrival order */
    double arrival_s, first_s;
    int prompt, output;
    int need; /* tokens to prefill: the prompt, or after a preemption the
               * prompt and the tokens generated before it */
    int prefilled, generated;
    double kv_tok;   /* tokens whose KV it holds: its own and shared blocks */
    int64_t *blocks; /* its prompt blocks' hashes (prefix caching), owned */
    int n_blocks;
    int held;                    /* leading blocks it holds in the prefix cache: its own
                                  * bytes cover the KV of the tokens past them */
    int hit_tok;                 /* prompt tokens found cached at admission */
    double hit_cpu;              /* of which in the CPU region */
    double r_adm;                /* the share at admission (the pinned part of the XFER KV) */
    int cpu_pages;               /* prompt pages placed in the CPU region */
    double ctx;                  /* tokens in its KV */
    double cpu, xfer, win;       /* tokens: CPU region, XFER region, D-window */
    double gpu_b, host_b, pin_b; /* bytes reserved */
} seq;

typedef struct run {
    const sim_cfg *cfg;
    ws_cost_model cm;
    ws_ctl ctl;         /* the policy's decisions (runtime/control.h) */
    ws_decode_obs *obs; /* [layers] a decode step's layers as observed */
    sim_engine eng;
    sim_step st;
    int layers, spills, nospill;
    double b_tok, b_all; /* KV bytes per token: one layer, the layers on the GPU */
    double b_host;       /* KV bytes per token of the layers wholly on the CPU (host DRAM) */
    double budget, pinned, host;
    double gpu_used, pin_used, host_used;
    int no_room; /* the GPU's weights and KV budget exceed the GPU, or the CPU's weights
                  * the host DRAM */
    seq *s;
    int n_run;
    uint64_t n_admitted, n_ended;
    ws_sched_chunk *pc; /* [batch] a step's prompt chunks */
    seq **pc_seq;       /* [batch] their sequences */
    seq **pend_pf;      /* [batch] sequences with prompt tokens left, by admission order */
    qent *q;            /* arrived, not admitted: a ring */
    size_t q_head, q_len, q_cap;
    const sim_source *src;
    int src_done; /* the source has no more */
    sim_req nxt;  /* open source: the next arrival (when !src_done) */
    pent *pend;   /* closed loop: drawn, not yet arrived */
    size_t n_pend, cap_pend;
    uint64_t pend_seq;
    uint64_t n_seen;            /* requests arrived */
    double first_arr, last_end; /* of the served requests */
    sim_quantile ttft, tpot;
    uint64_t preempted;
    int prefix;       /* prefix caching on */
    sim_prefix cache; /* its blocks */
    sim_results *res;
} run;

static int pent_less(const pent *a, const pent *b)
{
    return a->rq.arrival_s < b->rq.arrival_s ||
           (a->rq.arrival_s == b->rq.arrival_s && a->seq < b->seq);
}

/* Closed loop: a client is free at t_free; its next request (if any) arrives its think
 * time later. */
static int closed_draw(run *R, double t_free, ws_err *err)
{
    if (R->src_done)
        return 0;
    sim_req rq;
    int rc = R->src->next(R->src->ctx, &rq, err);
    if (rc < 0)
        return -rc;
    if (rc == 0) {
        R->src_done = 1;
        return 0;
    }
    if (ws_grow((void **)&R->pend, &R->cap_pend, R->n_pend, sizeof *R->pend, 16))
        return ws_err_set(err, WS_ENOMEM, "sim: out of memory (closed loop)");
    rq.arrival_s = t_free + rq.arrival_s;
    size_t i = R->n_pend++;
    R->pend[i] = (pent){rq, R->pend_seq++};
    while (i > 0 && pent_less(&R->pend[i], &R->pend[(i - 1) / 2])) {
        const pent tmp = R->pend[i];
        R->pend[i] = R->pend[(i - 1) / 2];
        R->pend[(i - 1) / 2] = tmp;
        i = (i - 1) / 2;
    }
    return 0;
}

/* The next request to arrive, or NULL when there is none (for now, in a closed loop). */
static const sim_req *arr_peek(const run *R)
{
    if (R->src->clients > 0)
        return R->n_pend ? &R->pend[0].rq : NULL;
    return R->src_done ? NULL : &R->nxt;
}

/* Moves past the request arr_peek gave. */
static int arr_pop(run *R, ws_err *err)
{
    if (R->src->clients == 0) {
        int rc = R->src->next(R->src->ctx, &R->nxt, err);
        if (rc < 0)
            return -rc;
        R->src_done = rc == 0;
        return 0;
    }
    pent *h = R->pend;
    const size_t n = --R->n_pend;
    h[0] = h[n];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && pent_less(&h[l], &h[m]))
            m = l;
        if (l + 1 < n && pent_less(&h[l + 1], &h[m]))
            m = l + 1;
        if (m == i)
            break;
        const pent tmp = h[i];
        h[i] = h[m];
        h[m] = tmp;
        i = m;
    }
    return 0;
}

/* Request id's result before anything of it ran: times unset (-1). */
static sim_req_result unserved(const sim_req *rq, uint64_t id)
{
    return (sim_req_result){.id = id,
                            .arrival_s = rq->arrival_s,
                            .first_s = -1,
                            .end_s = -1,
                            .ttft = -1,
                            .tpot = -1,
                            .e2e = -1,
                            .prompt = rq->prompt,
                            .output = rq->output};
}

/* A request has arrived: its placeholder in res->req when requests are kept. */
static int push_result(run *R, const sim_req *rq, uint64_t id, ws_err *err)
{
    sim_results *res = R->res;
    if (!R->cfg->keep_requests)
        return 0;
    if (ws_grow((void **)&res->req, &res->cap_req, res->n_req, sizeof *res->req, 64))
        return ws_err_set(err, WS_ENOMEM, "sim: out of memory (requests)");
    res->req[res->n_req++] = unserved(rq, id);
    return 0;
}

/* A request has ended: into the totals, to the caller, into res->req when kept. */
static int end_request(run *R, const sim_req_result *o, ws_err *err)
{
    sim_totals *t = &R->res->tot;
    t->prompt_tokens += (uint64_t)o->prompt;
    if (o->outcome == SIM_OUT_DONE) {
        t->served++;
        R->first_arr = fmin(R->first_arr, o->arrival_s);
        R->last_end = fmax(R->last_end, o->end_s);
        sim_quantile_add(&R->ttft, o->ttft);
        if (o->generated > 1)
            sim_quantile_add(&R->tpot, o->tpot);
        t->slo_met += (uint64_t)o->slo_ok;
        /* a first token past the TTFT SLO was counted then */
        t->missed += !o->slo_ok && !(R->cfg->slo_ttft > 0 && o->ttft > R->cfg->slo_ttft);
    } else {
        t->oom++;
        t->missed++;
    }
    R->n_ended++;
    if (R->cfg->keep_requests)
        R->res->req[o->id] = *o;
    int rc = R->src->clients > 0 ? closed_draw(R, sim_now(&R->eng), err) : 0;
    if (rc)
        return rc;
    return R->cfg->on_request ? R->cfg->on_request(R->cfg->on_request_ctx, o, err) : 0;
}

static int q_grow(run *R, ws_err *err)
{
    if (R->q_len == R->q_cap) {
        size_t cap = R->q_cap ? 2 * R->q_cap : 64;
        qent *p = malloc(cap * sizeof *p);
        if (!p)
            return ws_err_set(err, WS_ENOMEM, "sim: out of memory (queue)");
        for (size_t i = 0; i < R->q_len; i++)
            p[i] = R->q[(R->q_head + i) % R->q_cap];
        free(R->q);
        R->q = p;
        R->q_head = 0;
        R->q_cap = cap;
    }
    return 0;
}

static int q_push(run *R, const sim_req *rq, uint64_t id, ws_err *err)
{
    int rc = q_grow(R, err);
    if (rc)
        return rc;
    qent e = {*rq, id, -1, 0, NULL, 0};
    e.rq.blocks = NULL;
    e.rq.n_blocks = 0;
    const int nb = rq->n_blocks < rq->prompt / WS_TRACE_BLOCK_TOKENS
                       ? rq->n_blocks
                       : rq->prompt / WS_TRACE_BLOCK_TOKENS;
    if (R->prefix && nb > 0) {
        if (!(e.blocks = malloc((size_t)nb * sizeof *e.blocks)))
            return ws_err_set(err, WS_ENOMEM, "sim: out of memory (prompt blocks)");
        memcpy(e.blocks, rq->blocks, (size_t)nb * sizeof *e.blocks);
        e.rq.n_blocks = nb;
    }
    R->q[(R->q_head + R->q_len) % R->q_cap] = e;
    R->q_len++;
    return 0;
}

/* A preempted sequence waits at the queue's head. */
static int q_push_front(run *R, const qent *e, ws_err *err)
{
    int rc = q_grow(R, err);
    if (rc)
        return rc;
    R->q_head = (R->q_head + R->q_cap - 1) % R->q_cap;
    R->q[R->q_head] = *e;
    R->q_len++;
    return 0;
}

/* Spilled tokens (per layer) of the running batch, CPU-region tokens, D-window tokens. */
static void batch_sums(const run *R, double *spilled, double *cpu, double *win, double *left)
{
    double sp = 0, c = 0, w = 0, l = 0;
    for (int i = 0; i < R->cfg->batch; i++) {
        const seq *s = &R->s[i];
        if (!s->live)
            continue;
        sp += s->cpu + s->xfer;
        c += s->cpu;
        w += s->win;
        l += (s->need - s->prefilled) + (s->output - s->generated);
    }
    *spilled = sp, *cpu = c, *win = w;
    if (left)
        *left = l;
}

/* The share new writes follow for L spilled tokens (runtime/control.h). */
static double share(const run *R, double resident, double L)
{
    return ws_ctl_share(&R->ctl, R->n_run > 0 ? R->n_run : 1, resident, L);
}

/* Memory of tok tokens of one sequence at share r: the KV of layers on the GPU (b_all)
 * follows the policy (no-spill: in the GPU KV budget; spilling: a D-window there, the rest
 * in host and, for the XFER share, pinned memory); that of layers wholly on the CPU
 * (b_host) sits in host DRAM. */
static void need(const run *R, double tok, double r, double *g, double *h, double *p)
{
    const double kv = tok * R->b_all;
    if (R->nospill) {
        *g = kv, *p = 0;
        *h = tok * R->b_host;
    } else {
        *g = R->cfg->window * R->b_all;
        *h = kv + tok * R->b_host;
        *p = kv * (1 - r);
    }
}

static int fits(const run *R, double g, double h, double p)
{
    return R->gpu_used + g <= R->budget && R->host_used + h <= R->host &&
           R->pin_used + p <= R->pinned;
}

/* Evicts cached blocks no sequence holds, oldest release first, until g, h, p fit. */
static int make_room(run *R, double g, double h, double p)
{
    double a, b, c;
    while (!fits(R, g, h, p)) {
        if (!R->prefix || !sim_prefix_evict(&R->cache, &a, &b, &c))
            return 0;
        R->gpu_used -= a, R->host_used -= b, R->pin_used -= c;
    }
    return 1;
}

/* A sequence's own bytes for kv_tok tokens of KV: all but the blocks it holds in the cache. */
static void own_bytes(const run *R, const seq *s, double kv_tok, double *g, double *h, double *p)
{
    need(R, kv_tok - (double)s->held * WS_TRACE_BLOCK_TOKENS, s->r_adm, g, h, p);
}

/* A request whose own KV (g, h, p bytes) exceeds a tier: counted, the first one kept. */
static void kv_oom(run *R, const sim_req *rq, double g, double h, double p)
{
    sim_totals *t = &R->res->tot;
    if (!t->kv_oom++) {
        t->kv_oom_tokens = rq->prompt + rq->output;
        t->kv_oom_need[0] = g, t->kv_oom_need[1] = h, t->kv_oom_need[2] = p;
        t->kv_oom_room[0] = R->budget, t->kv_oom_room[1] = R->host, t->kv_oom_room[2] = R->pinned;
    }
}

/* Admits queued requests while the batch has room. The batch's sums are taken once: within
 * the loop only the sequences admitted change them, each by its own tokens to come (its
 * placed tokens are none yet), and a free slot is looked for past the last one taken, so
 * admitting n requests costs O(n + batch). */
static int admit(run *R, ws_err *err)
{
    double sp = 0, c = 0, w = 0, l = 0;
    int summed = 0, slot = 0;
    while (R->q_len && R->n_run < R->cfg->batch) {
        const qent *qe = &R->q[R->q_head];
        const sim_req *rq = &qe->rq;
        if (!summed)
            batch_sums(R, &sp, &c, &w, &l), summed = 1;
        const double r = share(R, w, sp + l + rq->prompt + rq->output);
        double g, h, p;
        need(R, (double)rq->prompt + rq->output, r, &g, &h, &p);
        const int never = R->no_room || g > R->budget || h > R->host || p > R->pinned;
        if (never) {
            if (!R->no_room)
                kv_oom(R, rq, g, h, p);
            sim_req_result o = unserved(rq, qe->id);
            o.outcome = SIM_OUT_OOM;
            free(qe->blocks);
            int rc = end_request(R, &o, err);
            if (rc)
                return rc;
        } else {
            /* Cached leading blocks (never the prompt's last token) are held, not prefilled;
             * the rest is reserved now: the whole request, or (preemption) the tokens to
             * prefill. */
            const int kmax = (rq->prompt - 1) / WS_TRACE_BLOCK_TOKENS;
            const int k = R->prefix
                              ? sim_prefix_match(&R->cache, qe->blocks,
                                                 qe->rq.n_blocks < kmax ? qe->rq.n_blocks : kmax)
                              : 0;
            const double hit = (double)k * WS_TRACE_BLOCK_TOKENS;
            const double tok = R->cfg->preempt == WS_PREEMPT_RECOMPUTE
                                   ? (double)rq->prompt + qe->generated
                                   : (double)rq->prompt + rq->output;
            need(R, tok - hit, r, &g, &h, &p);
            double hit_cpu = 0;
            sim_prefix_hold(&R->cache, qe->blocks, k, &hit_cpu);
            if (!make_room(R, g, h, p)) {
                sim_prefix_release(&R->cache, qe->blocks, k);
                break;
            }
            if (R->prefix && !qe->seen) {
                sim_totals *t = &R->res->tot;
                const int before = sim_prefix_see(&R->cache, qe->blocks, qe->rq.n_blocks, err);
                if (before < 0)
                    return -before;
                t->prefix_blocks += (uint64_t)qe->rq.n_blocks;
                t->prefix_hits += (uint64_t)k;
                t->prefix_repeats += (uint64_t)before;
            }
            while (R->s[slot].live)
                slot++;
            seq *s = &R->s[slot];
            *s = (seq){.live = 1,
                       .order = R->n_admitted++,
                       .id = qe->id,
                       .arrival_s = rq->arrival_s,
                       .first_s = qe->first_s,
                       .prompt = rq->prompt,
                       .output = rq->output,
                       .need = rq->prompt + qe->generated,
                       .prefilled = k * WS_TRACE_BLOCK_TOKENS,
                       .generated = qe->generated,
                       .kv_tok = tok,
                       .blocks = qe->blocks,
                       .n_blocks = qe->rq.n_blocks,
                       .held = k,
                       .hit_tok = k * WS_TRACE_BLOCK_TOKENS,
                       .hit_cpu = hit_cpu,
                       .r_adm = r,
                       .gpu_b = g,
                       .host_b = h,
                       .pin_b = p,
                       .cpu_pages = -1};
            R->gpu_used += g, R->host_used += h, R->pin_used += p;
            R->n_run++;
            l += (s->need - s->prefilled) + (s->output - s->generated);
        }
        R->q_head = (R->q_head + 1) % R->q_cap;
        R->q_len--;
    }
    return 0;
}

static int finish(run *R, seq *s, ws_err *err)
{
    const double now = sim_now(&R->eng);
    sim_req_result o = {.id = s->id,
                        .arrival_s = s->arrival_s,
                        .first_s = s->first_s,
                        .end_s = now,
                        .ttft = s->first_s - s->arrival_s,
                        .e2e = now - s->arrival_s,
                        .tpot = s->generated > 1 ? (now - s->first_s) / (s->generated - 1) : 0,
                        .prompt = s->prompt,
                        .output = s->output,
                        .generated = s->generated,
                        .outcome = SIM_OUT_DONE};
    o.slo_ok = (!(R->cfg->slo_ttft > 0) || o.ttft <= R->cfg->slo_ttft) &&
               (!(R->cfg->slo_tpot > 0) || o.tpot <= R->cfg->slo_tpot);
    R->gpu_used -= s->gpu_b, R->host_used -= s->host_b, R->pin_used -= s->pin_b;
    s->live = 0;
    sim_prefix_release(&R->cache, s->blocks, s->held);
    free(s->blocks);
    s->blocks = NULL;
    if (--R->n_run == 0) { /* no rounding residue: what is left is the cache's */
        R->gpu_used = R->cache.g;
        R->host_used = R->cache.h;
        R->pin_used = R->cache.p;
    }
    return end_request(R, &o, err);
}

static int record_step(run *R, const sim_step_out *so, const sim_step_in *in, int batch, int dec,
                       int pf, double rstar, double rreal, double spilled, double context,
                       ws_err *err)
{
    sim_totals *t = &R->res->tot;
    for (int i = 0; i < SIM_RES_COUNT; i++)
        t->busy[i] += so->busy[i];
    t->fold_inexact += so->fold_inexact;
    t->r_final = rreal;
    t->folded_layers += (uint64_t)so->folded;
    if (pf && R->cm.dep.q && R->cm.cfg.gpu_experts < R->cm.n_experts &&
        R->cm.cfg.n_cpu_moe != WS_DEPLOY_NO_CPU_MOE) {
        t->prefill_gpu_steps += in->prefill_gpu != 0;
        t->prefill_cpu_steps += in->prefill_gpu == 0;
    }
    if (dec) {
        t->rstar_last = rstar;
        t->decode_time_s += so->t1 - so->t0;
        t->decode_tokens += (uint64_t)dec;
    }
    const uint64_t idx = t->steps++;
    sim_step_rec rec = {.idx = idx,
                        .t_start = so->t0,
                        .t_end = so->t1,
                        .batch = batch,
                        .decode_tokens = dec,
                        .prefill_tokens = pf,
                        .prefill_gpu = pf ? in->prefill_gpu : 0,
                        .r_star = rstar,
                        .r_real = rreal,
                        .spilled = spilled,
                        .context = context,
                        .events = so->events,
                        .lay = R->st.lay,
                        .n_lay = R->layers};
    if (dec)
        rec.n_cpu = in->n_cpu, rec.m_xfer = in->m_xfer, rec.resident = in->resident;
    memcpy(rec.busy, so->busy, sizeof rec.busy);
    if (R->cfg->on_step) {
        int rc = R->cfg->on_step(R->cfg->on_step_ctx, &rec, err);
        if (rc)
            return rc;
    }
    rec.lay = NULL;
    rec.n_lay = 0;
    if (!R->cfg->keep_steps)
        return 0;
    sim_results *res = R->res;
    if (ws_grow((void **)&res->step, &res->cap_step, res->n_step, sizeof *res->step, 256))
        return ws_err_set(err, WS_ENOMEM, "sim: out of memory (steps)");
    res->step[res->n_step++] = rec;
    return 0;
}

/* ---- prompt chunks ----------------------------------------------------------------- */

/* A prompt whose chunk just ran: once its last token is in, its KV is placed (the CPU pages
 * decided at its first chunk, whole pages to XFER, the tail in the D-window) and it yields
 * a token. */
/* Its prompt's whole blocks past those it holds join the prefix cache (a block another
 * sequence added meanwhile is shared, this copy's bytes given back); each keeps the region
 * its pages were written in (the first cpu_pages of its own pages in the CPU region). */
static int cache_blocks(run *R, seq *s, ws_err *err)
{
    const int P = R->cfg->par.page_tokens, B = WS_TRACE_BLOCK_TOKENS, ppb = B / P;
    const int first = s->hit_tok / P, nb = s->n_blocks;
    for (int j = s->held; j < nb; j++) {
        const int lo = j * ppb > first ? j * ppb : first, hi = (j + 1) * ppb;
        const int cpu_hi = first + s->cpu_pages;
        const double cpu =
            R->spills && cpu_hi > lo ? (double)((cpu_hi < hi ? cpu_hi : hi) - lo) * P : 0;
        double g0, h0, p0, g1, h1, p1;
        own_bytes(R, s, s->kv_tok, &g0, &h0, &p0);
        s->held = j + 1;
        own_bytes(R, s, s->kv_tok, &g1, &h1, &p1);
        const int rc = sim_prefix_add(&R->cache, s->blocks[j], cpu, g0 - g1, h0 - h1, p0 - p1, err);
        if (rc < 0)
            return -rc;
        if (rc == 0) /* shared with its first writer: this copy is freed */
            R->gpu_used -= g0 - g1, R->host_used -= h0 - h1, R->pin_used -= p0 - p1;
        s->gpu_b = g1, s->host_b = h1, s->pin_b = p1;
    }
    return 0;
}

static int chunk_done(run *R, seq *s, int q, ws_err *err)
{
    const int P = R->cfg->par.page_tokens;
    s->prefilled += q;
    if (s->prefilled < s->need)
        return 0;
    const int pages = s->need / P, hit_pages = s->hit_tok / P;
    s->ctx = s->need;
    if (R->spills) {
        s->cpu = s->hit_cpu + (double)s->cpu_pages * P;
        s->xfer = (s->hit_tok - s->hit_cpu) + (double)(pages - hit_pages - s->cpu_pages) * P;
        s->win = s->need - pages * P;
    } else {
        s->win = s->need;
    }
    int rc;
    if (R->prefix && (rc = cache_blocks(R, s, err)))
        return rc;
    s->generated++;
    if (s->first_s < 0) {
        s->first_s = sim_now(&R->eng);
        R->res->tot.missed += R->cfg->slo_ttft > 0 && s->first_s - s->arrival_s > R->cfg->slo_ttft;
    }
    R->res->tot.output_tokens++;
    return s->generated >= s->output ? finish(R, s, err) : 0;
}

/* The chunks' prompts advanced after their step. */
static int chunks_done(run *R, int n, ws_err *err)
{
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        rc = chunk_done(R, R->pc_seq[i], (int)R->pc[i].q, err);
    return rc;
}

/* A step's chunks over the prompt tokens (at most `left`, at most `cap` of one prompt, of at
 * most `most` prompts) of the running sequences, in admission order; a prompt's CPU pages
 * are decided at its first chunk (control.h). Returns how many; *tokens their sum. */
static int by_order(const void *a, const void *b)
{
    const uint64_t x = (*(seq *const *)a)->order, y = (*(seq *const *)b)->order;
    return (x > y) - (x < y);
}

/* The batch's sums are the same for every prompt picked (deciding CPU pages changes none of
 * them): taken once, when a first prompt needs them. */
static int pick_chunks(run *R, int left, int cap, int most, double *tokens)
{
    int n = 0, m = 0, sorted = 1, summed = 0;
    double sp = 0, c = 0, w = 0, l = 0;
    *tokens = 0;
    for (int i = 0; i < R->cfg->batch; i++) {
        seq *s = &R->s[i];
        if (s->live && s->prefilled < s->need) {
            sorted &= m == 0 || R->pend_pf[m - 1]->order < s->order;
            R->pend_pf[m++] = s;
        }
    }
    if (!sorted) /* admission order: orders are distinct, so the order is fixed */
        qsort(R->pend_pf, (size_t)m, sizeof *R->pend_pf, by_order);
    for (int i = 0; i < m && i < most && left > 0; i++) {
        seq *s = R->pend_pf[i];
        const int want = s->need - s->prefilled < cap ? s->need - s->prefilled : cap;
        const int q = want < left ? want : left;
        if (s->cpu_pages < 0) {
            if (!summed)
                batch_sums(R, &sp, &c, &w, &l), summed = 1;
            const int P = R->cfg->par.page_tokens;
            s->cpu_pages = ws_ctl_prefill_cpu_pages(&R->ctl, R->n_run, w, sp + l,
                                                    s->need / P - s->hit_tok / P);
        }
        R->pc[n] = (ws_sched_chunk){q, s->prefilled};
        R->pc_seq[n++] = s;
        left -= q;
        *tokens += q;
    }
    return n;
}

/* The KV the step's n chunks attend: each prompt so far and its chunk. */
static double chunks_context(const run *R, int n)
{
    double t = 0;
    for (int i = 0; i < n; i++)
        t += R->pc[i].ctx + R->pc[i].q;
    return t;
}

/* The prompt part of a step's input: n chunks of `tokens` in all. */
static void add_chunks(const run *R, sim_step_in *in, int n, double tokens)
{
    in->T += tokens;
    in->prefill_q = tokens;
    in->chunks = R->pc;
    in->n_chunks = n;
    in->write_bytes = R->spills ? tokens * R->b_tok : 0;
}

/* A step of prompt chunks only. */
static int prefill_step(run *R, int n, double tokens, ws_err *err)
{
    sim_step_in in = {.nospill = R->nospill};
    add_chunks(R, &in, n, tokens);
    in.prefill_gpu = ws_ctl_prefill_gpu(&R->ctl, &in);
    sim_step_out so;
    int rc = sim_step_run(&R->st, &in, &so, err);
    const double context = chunks_context(R, n);
    if (rc)
        return rc;
    /* the share as the step found it: the chunks' own KV is placed once their prompt ends */
    double sp, c, w;
    batch_sums(R, &sp, &c, &w, NULL);
    const int batch = R->n_run;
    if ((rc = chunks_done(R, n, err)))
        return rc;
    return record_step(R, &so, &in, batch, 0, (int)tokens, 0, sp > 0 ? c / sp : 0, sp, context,
                       err);
}

/* ---- a decode step: the protocol is runtime/decode.h's, played on token counts ---- */

/* A sequence that decodes at a decode step: running, past its prefill. */
static int decoding(const seq *s)
{
    return s->live && s->prefilled >= s->need;
}

typedef struct dec_ctx {
    run *R;
    int n_dec;      /* sequences decoding */
    int n_pc;       /* prompt chunks in the step (R->pc) */
    double pc_tok;  /* their tokens */
    sim_step_in in; /* the step as played */
    sim_step_out so;
} dec_ctx;

static void dec_sums(void *ctx, ws_decode_sums *s)
{
    const dec_ctx *d = ctx;
    double sp, c, w;
    batch_sums(d->R, &sp, &c, &w, NULL);
    /* the windows as attended this step: each holds its new token */
    *s = (ws_decode_sums){.batch = d->R->n_run, .spilled = sp, .cpu = c, .resident = w + d->n_dec};
}

static int dec_full_windows(void *ctx)
{
    const run *R = ((const dec_ctx *)ctx)->R;
    int n = 0;
    for (int i = 0; i < R->cfg->batch; i++)
        n += R->spills && decoding(&R->s[i]) && R->s[i].win + 1 >= R->cfg->window;
    return n;
}

/* migrate's move: whole pages from the running sequences in slot order (the live runtime's
 * order); the step's schedule reformats their bytes in every layer. */
static int dec_migrate(void *ctx, int move, ws_err *err)
{
    (void)err;
    run *R = ((dec_ctx *)ctx)->R;
    const int P = R->cfg->par.page_tokens;
    for (int i = 0; i < R->cfg->batch && move; i++) {
        seq *s = &R->s[i];
        if (!decoding(s))
            continue;
        const int have = (int)((move > 0 ? s->xfer : s->cpu) / P);
        const int k = abs(move) < have ? abs(move) : have;
        const double d = (move > 0 ? 1.0 : -1.0) * k * P;
        s->cpu += d, s->xfer -= d;
        move -= move > 0 ? k : -k;
    }
    return 0;
}

/* What the step attends per layer, summed over the batch: the windows, the CPU pages and
 * the streamed ones; a sparse model attends at most attended_max tokens of a sequence, the
 * window's first, and pays its indexer over the whole context. */
static void dec_attended(const run *R, sim_step_in *in)
{
    const ws_cost_model *cm = &R->cm;
    const double amax = (double)cm->st.attended_max;
    for (int i = 0; i < R->cfg->batch; i++) {
        const seq *s = &R->s[i];
        if (!decoding(s))
            continue;
        const double res = s->win + 1, spill = s->cpu + s->xfer, ctx = s->ctx + 1;
        double frac = 1, res_att = res;
        if (amax > 0 && ctx > amax) {
            res_att = fmin(res, amax);
            frac = spill > 0 ? fmin(1.0, fmax(0.0, amax - res_att) / spill) : 0;
        }
        in->resident += res_att;
        in->n_cpu += s->cpu * frac;
        in->m_xfer += s->xfer * frac;
        if (amax > 0)
            in->indexer_s += ws_cost_gpu_indexer(cm, 1, ctx);
    }
}

/* The planned flush: each full window's pages, the first cpu_pages of them (in slot order)
 * to the CPU region, the rest to XFER. */
static void dec_flush(run *R, int cpu_pages)
{
    const int W = R->cfg->window, P = R->cfg->par.page_tokens, ppw = W / P;
    for (int i = 0; i < R->cfg->batch; i++) {
        seq *s = &R->s[i];
        if (!decoding(s) || s->win + 1 < W)
            continue;
        for (int k = 0; k < ppw; k++) {
            if (cpu_pages > 0) {
                s->cpu += P;
                cpu_pages--;
            } else {
                s->xfer += P;
            }
        }
        s->win -= W;
    }
}

/* The step played as events, then its flush placed; every layer's halves, as the live
 * runtime reports them. */
static int dec_play(void *ctx, const ws_decode_plan *p, ws_decode_obs *obs, ws_err *err)
{
    dec_ctx *d = ctx;
    run *R = d->R;
    sim_step_in *in = &d->in;
    *in = (sim_step_in){.nospill = R->nospill, .migrate_bytes = p->migrate_bytes};
    dec_attended(R, in);
    in->T = d->n_dec;
    in->n_seqs = d->n_dec;
    in->flush_bytes = p->flush_bytes;
    if (d->n_pc) {
        add_chunks(R, in, d->n_pc, d->pc_tok);
        in->prefill_gpu = ws_ctl_prefill_gpu(&R->ctl, in);
    }
    int rc = sim_step_run(&R->st, in, &d->so, err);
    if (rc)
        return rc;
    if (p->flush_seqs)
        dec_flush(R, p->flush_cpu_pages);
    for (int l = 0; l < R->layers; l++) {
        const sim_step_layer *y = &R->st.lay[l];
        obs[l] = (ws_decode_obs){.n_cpu = in->n_cpu,
                                 .cpu_s = y->cpu_s,
                                 .m_xfer = in->m_xfer,
                                 .gpu_s = y->gpu_end - y->attn_start,
                                 .resident = in->resident,
                                 .moe_s = y->moe_s};
    }
    return 0;
}

/* One decode step of every running sequence past its prompt, with n prompt chunks of
 * `tokens` in the same step (a mixed batch) when n > 0. */
static int decode_step(run *R, int n, double tokens, ws_err *err)
{
    static const ws_decode_ops ops = {dec_sums, dec_full_windows, dec_migrate, dec_play};
    dec_ctx d = {.R = R, .n_pc = n, .pc_tok = tokens};
    for (int i = 0; i < R->cfg->batch; i++)
        d.n_dec += decoding(&R->s[i]);
    ws_decode_plan p;
    int rc = ws_decode_step(&R->ctl, R->layers, R->cfg->window, &ops, &d, &p, R->obs, err);
    if (rc)
        return rc;
    const int batch = R->n_run;
    for (int i = 0; i < R->cfg->batch; i++) {
        seq *s = &R->s[i];
        if (!decoding(s))
            continue;
        s->ctx++;
        s->win++;
        s->generated++;
        R->res->tot.output_tokens++;
        if (s->generated >= s->output && (rc = finish(R, s, err)))
            return rc;
    }
    const double context = d.in.resident + d.in.n_cpu + d.in.m_xfer + chunks_context(R, n);
    if ((rc = chunks_done(R, n, err)))
        return rc;
    const sim_step_in *in = &d.in;
    return record_step(R, &d.so, in, batch, d.n_dec, (int)tokens, p.r_star, p.r_real,
                       p.sums.spilled, context, err);
}

/* ---- a step of the scheduler ------------------------------------------------------- */

/* Preemption by recompute: the newest running sequence gives its KV back and waits at the
 * queue's head to prefill its prompt and its generated tokens again. */
static int preempt(run *R, seq *s, ws_err *err)
{
    R->gpu_used -= s->gpu_b, R->host_used -= s->host_b, R->pin_used -= s->pin_b;
    s->live = 0;
    R->n_run--;
    R->preempted++;
    sim_prefix_release(&R->cache, s->blocks, s->held);
    const qent e = {.rq = {.arrival_s = s->arrival_s,
                           .prompt = s->prompt,
                           .output = s->output,
                           .n_blocks = s->n_blocks},
                    .id = s->id,
                    .first_s = s->first_s,
                    .generated = s->generated,
                    .blocks = s->blocks,
                    .seen = 1};
    s->blocks = NULL;
    return q_push_front(R, &e, err);
}

/* Under preemption the decoding sequences' KV grows by the step's token; while that does
 * not fit, the newest running sequence is preempted (never the last one). */
static int grow(run *R, ws_err *err)
{
    if (R->cfg->preempt != WS_PREEMPT_RECOMPUTE)
        return 0;
    for (;;) {
        double g = 0, h = 0, p = 0;
        seq *newest = NULL;
        for (int i = 0; i < R->cfg->batch; i++) {
            seq *s = &R->s[i];
            if (!s->live)
                continue;
            if (!newest || s->order > newest->order)
                newest = s;
            if (decoding(s) && s->kv_tok < s->ctx + 1) {
                double g1, h1, p1;
                own_bytes(R, s, s->ctx + 1, &g1, &h1, &p1);
                g += g1 - s->gpu_b, h += h1 - s->host_b, p += p1 - s->pin_b;
            }
        }
        if (make_room(R, g, h, p) || R->n_run <= 1)
            break;
        int rc = preempt(R, newest, err);
        if (rc)
            return rc;
    }
    for (int i = 0; i < R->cfg->batch; i++) {
        seq *s = &R->s[i];
        if (!decoding(s) || s->kv_tok >= s->ctx + 1)
            continue;
        double g1, h1, p1;
        own_bytes(R, s, s->ctx + 1, &g1, &h1, &p1);
        R->gpu_used += g1 - s->gpu_b, R->host_used += h1 - s->host_b, R->pin_used += p1 - s->pin_b;
        s->gpu_b = g1, s->host_b = h1, s->pin_b = p1;
        s->kv_tok = s->ctx + 1;
    }
    return 0;
}

/* One step as the scheduler fills it (serving.h, ws_batching): the decodes and prompt
 * chunks up to the token budget, or (prefill first) chunks alone while any prompt has
 * tokens left; llama.cpp's slots run their budget as passes of `chunk` tokens, the decodes
 * in the last. */
static int serve_step(run *R, ws_err *err)
{
    const sim_cfg *cfg = R->cfg;
    int rc = grow(R, err);
    if (rc)
        return rc;
    int n_dec = 0;
    long long pending = 0;
    for (int i = 0; i < cfg->batch; i++) {
        const seq *s = &R->s[i];
        n_dec += decoding(s);
        pending += s->live ? s->need - s->prefilled : 0;
    }
    const int first = cfg->batching == WS_BATCH_PREFILL_FIRST || cfg->batching == WS_BATCH_SERIAL;
    const int dec = n_dec > 0 && !(first && pending > 0);
    int left = cfg->token_budget - (dec ? n_dec : 0);
    double tok = 0;
    if (cfg->batching == WS_BATCH_SERIAL) {
        const int n = dec ? 0 : pick_chunks(R, cfg->chunk, cfg->chunk, 1, &tok);
        return dec ? decode_step(R, 0, 0, err) : prefill_step(R, n, tok, err);
    }
    if (cfg->batching != WS_BATCH_SLOTS) {
        const int n = pick_chunks(R, left, cfg->chunk, INT32_MAX, &tok);
        return dec ? decode_step(R, n, tok, err) : prefill_step(R, n, tok, err);
    }
    long long todo = pending < left ? pending : left;
    while (todo + (dec ? n_dec : 0) > cfg->chunk && todo > 0) {
        const int q = todo < cfg->chunk ? (int)todo : cfg->chunk;
        const int n = pick_chunks(R, q, INT32_MAX, INT32_MAX, &tok);
        if ((rc = prefill_step(R, n, tok, err)))
            return rc;
        todo -= q;
    }
    const int n = todo > 0 ? pick_chunks(R, (int)todo, INT32_MAX, INT32_MAX, &tok) : 0;
    if (!dec && !n)
        return 0; /* the passes ended every prompt's request */
    return dec ? decode_step(R, n, tok, err) : prefill_step(R, n, tok, err);
}

static void summarise(run *R)
{
    sim_totals *t = &R->res->tot;
    t->requests = R->n_seen;
    t->preempted = R->preempted;
    t->pct_exact = sim_quantile_exact(&R->ttft) && sim_quantile_exact(&R->tpot);
    /* No sample (nothing served, or no request past its first token): no percentile. */
    const int has_ttft = R->ttft.n > 0, has_tpot = R->tpot.n > 0;
    t->ttft_p50 = has_ttft ? sim_quantile_get(&R->ttft, 0.5) : NAN;
    t->ttft_p90 = has_ttft ? sim_quantile_get(&R->ttft, 0.9) : NAN;
    t->ttft_p99 = has_ttft ? sim_quantile_get(&R->ttft, 0.99) : NAN;
    t->tpot_p50 = has_tpot ? sim_quantile_get(&R->tpot, 0.5) : NAN;
    t->tpot_p90 = has_tpot ? sim_quantile_get(&R->tpot, 0.9) : NAN;
    t->tpot_p99 = has_tpot ? sim_quantile_get(&R->tpot, 0.99) : NAN;
    t->makespan_s = t->served ? R->last_end - R->first_arr : 0;
    t->tokens_per_s = t->makespan_s > 0 ? t->output_tokens / t->makespan_s : 0;
    t->decode_tps = t->decode_time_s > 0 ? t->decode_tokens / t->decode_time_s : 0;
    t->goodput_rps = t->makespan_s > 0 ? t->slo_met / t->makespan_s : 0;
    t->slo_frac = t->requests ? (double)t->slo_met / t->requests : 0;
}

/* Memory as a run has it (sim_memory_of), from the run's cost model. */
static void memory_of(const ws_cost_model *cm, const ws_model *m, const ws_hw *hw,
                      const sim_cfg *cfg, sim_memory *o)
{
    memset(o, 0, sizeof *o);
    /* memory is the whole model's, --layers or not: the GPU layers' KV, the CPU layers' */
    o->kv_gpu_token = cm->b_tok * (cm->layers - cm->dep.cpu_layers);
    o->kv_host_token = cm->b_tok * cm->dep.cpu_layers;
    const int mla = m->attn == WS_ATTN_MLA || m->attn == WS_ATTN_MLA_SPARSE;
    o->pinned = cfg->pinned_limit > 0 ? cfg->pinned_limit : 256 * 1073741824.0;
    o->host_mem = cfg->host_limit > 0  ? cfg->host_limit
                  : hw->host_mem.v > 0 ? hw->host_mem.v
                                       : WS_SIM_HOST_DEFAULT;
    /* Weights on the GPU: everything but the routed experts left on the CPU, which sit in
     * host DRAM beside the spilled KV; each part at its format. */
    ws_cost_weight_bytes(cm, &o->gpu_weights, &o->host_weights);
    /* The KV budget: given, or the engine's share of the GPU (what the weights leave of a
     * fraction of it, or a fraction of what they leave), or its context's KV. */
    const ws_server_kv *kv = &cfg->kv_mem;
    const double gmem = hw->gpu_mem.v, wgpu = o->gpu_weights;
    if (cfg->gpu_kv_budget > 0)
        o->gpu_kv = cfg->gpu_kv_budget;
    else if (kv->kind == WS_KV_MEM_TOTAL)
        o->gpu_kv = fmax(kv->frac * gmem - wgpu, 0);
    else if (kv->kind == WS_KV_MEM_FREE)
        o->gpu_kv = fmax(kv->frac * (gmem - wgpu), 0);
    else if (kv->kind == WS_KV_MEM_CONTEXT)
        o->gpu_kv = (kv->ctx > 0 ? kv->ctx : m->max_ctx > 0 ? m->max_ctx : 4096) * o->kv_gpu_token;
    else
        o->gpu_kv = (mla ? 0.3 : 2.0) * 1073741824.0;
    o->gpu_mem = gmem;
    o->gpu_fits = o->gpu_weights + o->gpu_kv <= gmem;
    o->host_fits = o->host_mem - o->host_weights > 0;
}

/* Memory: KV bytes per token, the GPU KV budget, the pinned and host limits, and whether the
 * weights the policy keeps on the GPU (and the CPU's in host DRAM) leave any room. */
static void memory_limits(run *R, const ws_model *m, const ws_hw *hw)
{
    sim_totals *t = &R->res->tot;
    sim_memory o;
    memory_of(&R->cm, m, hw, R->cfg, &o);
    R->b_tok = R->cm.b_tok;
    R->b_all = o.kv_gpu_token;
    R->b_host = o.kv_host_token;
    R->pinned = o.pinned;
    R->budget = o.gpu_kv;
    R->host = o.host_mem - o.host_weights;
    t->gpu_weight_bytes = o.gpu_weights;
    t->host_weight_bytes = o.host_weights;
    t->host_mem = o.host_mem;
    t->no_host_room = !o.host_fits;
    t->no_room = !o.gpu_fits;
    R->no_room = t->no_room || t->no_host_room;
    t->gpu_kv_budget = o.gpu_kv;
    t->gpu_mem = o.gpu_mem;
}

/* The deploy settings a policy runs with: gpu-only and the like put every routed expert on
 * the GPU. */
static ws_deploy_cfg policy_deploy(const ws_model *m, const ws_deploy_cfg *ccfg,
                                   ws_policy_kind policy)
{
    ws_deploy_cfg cc = *ccfg;
    if (!ws_policy_info_of(policy)->cpu_experts)
        cc.gpu_experts = m->n_experts;
    return cc;
}

int sim_memory_of(const ws_model *m, const ws_hw *hw, const ws_deploy_cfg *ccfg, const sim_cfg *cfg,
                  sim_memory *out, ws_err *err)
{
    ws_deploy_cfg cc = policy_deploy(m, ccfg, cfg->policy);
    ws_cost_model cm;
    int rc = ws_cost_model_init(hw, m, &cc, &cm, err);
    if (rc)
        return rc;
    memory_of(&cm, m, hw, cfg, out);
    ws_cost_model_free(&cm);
    return 0;
}

/* Arrivals up to now join the queue (and the results, in arrival order). */
static int arrive(run *R, double *last_arrival, ws_err *err)
{
    const sim_req *nx;
    while ((nx = arr_peek(R)) && nx->arrival_s <= sim_now(&R->eng)) {
        const sim_req next = *nx;
        if (next.prompt < 1 || next.output < 1 || !(next.arrival_s >= *last_arrival))
            return ws_err_set(err, WS_EINVAL,
                              "sim: request %llu: %d prompt and %d output tokens at %.9g s "
                              "(each >= 1, arrivals in order)",
                              (unsigned long long)R->n_seen, next.prompt, next.output,
                              next.arrival_s);
        *last_arrival = next.arrival_s;
        int rc = push_result(R, &next, R->n_seen, err);
        if (!rc)
            rc = q_push(R, &next, R->n_seen, err);
        if (rc)
            return rc;
        R->n_seen++;
        if ((rc = arr_pop(R, err)))
            return rc;
    }
    return 0;
}

/* The serving loop: arrivals, admission, then a step (the oldest prompt's next chunk, else
 * a decode step of the batch), until the source is done and every request has ended. */
static int serve(run *R, ws_err *err)
{
    const sim_cfg *cfg = R->cfg;
    double last_arrival = 0;
    int rc = 0;
    if (R->src->clients > 0) {
        for (int i = 0; i < R->src->clients && !R->src_done && !rc; i++)
            rc = closed_draw(R, 0, err);
    } else {
        rc = arr_pop(R, err);
    }
    while (!rc) {
        if ((rc = arrive(R, &last_arrival, err)) || (rc = admit(R, err)))
            break;
        if (R->n_run == 0) {
            const sim_req *nx;
            if (R->q_len)
                continue; /* the head was an OOM outcome; admit the rest */
            if (!(nx = arr_peek(R)))
                break;
            rc = sim_engine_run(&R->eng, nx->arrival_s, err);
            continue;
        }
        rc = serve_step(R, err);
        if (!rc && cfg->stop_misses && R->res->tot.missed >= cfg->stop_misses) {
            R->res->tot.stopped = 1;
            break;
        }
        if (!rc && cfg->progress && R->res->tot.steps % 512 == 0)
            cfg->progress(cfg->progress_ctx, sim_now(&R->eng), R->res->tot.steps, R->n_ended,
                          R->n_seen);
    }
    return rc;
}

int sim_run(const ws_model *m, const ws_hw *hw, const ws_deploy_cfg *ccfg, const sim_cfg *cfg,
            const sim_source *src, sim_results *res, ws_err *err)
{
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    memset(res, 0, sizeof *res);
    const int P = cfg->par.page_tokens;
    if (cfg->batch > SIM_BATCH_MAX)
        return ws_err_set(err, WS_EINVAL, "sim: a batch of %d sequences is more than %d",
                          cfg->batch, SIM_BATCH_MAX);
    if (cfg->batch < 1 || cfg->chunk < 1 || cfg->token_budget < 1 || P < 1 || cfg->window < P ||
        cfg->window % P || cfg->layers < 0 || cfg->cpu_workers < 1 || cfg->gpu_kv_budget < 0 ||
        cfg->pinned_limit < 0 || cfg->host_limit < 0)
        return ws_err_set(err, WS_EINVAL,
                          "sim: bad settings (batch %d, chunk %d, window %d must be a multiple "
                          "of the page %d)",
                          cfg->batch, cfg->chunk, cfg->window, P);
    const ws_policy_info *pi = ws_policy_info_of(cfg->policy);
    if (src->clients < 0)
        return ws_err_set(err, WS_EINVAL, "sim: a source of %d clients", src->clients);
    run R = {.cfg = cfg, .res = res, .first_arr = INFINITY, .src = src};
    snprintf(res->model, sizeof res->model, "%s", m->name);
    snprintf(res->gpu, sizeof res->gpu, "%s", hw->gpu);
    snprintf(res->host, sizeof res->host, "%s", hw->host);
    snprintf(res->policy, sizeof res->policy, "%s", pi->name);
    ws_deploy_cfg cc = policy_deploy(m, ccfg, cfg->policy);
    int rc = ws_cost_model_init(hw, m, &cc, &R.cm, err);
    if (rc)
        return rc;
    R.layers = cfg->layers > 0 && cfg->layers < R.cm.layers ? cfg->layers : R.cm.layers;
    R.spills = pi->spills;
    R.nospill = !pi->spills;
    memory_limits(&R, m, hw);
    if ((rc = ws_ctl_init(&R.ctl, &R.cm, cfg->policy, &cfg->par, R.layers, err)) ||
        (rc = ws_ctl_set_prefill(&R.ctl, cfg->prefill_mode, cfg->prefill_gpu_tokens, err)))
        goto out_cm;
    R.prefix = cfg->prefix_cache;
    if (R.prefix && WS_TRACE_BLOCK_TOKENS % P) {
        rc = ws_err_set(err, WS_EINVAL,
                        "sim: prefix caching needs a page that divides the "
                        "%d-token block, not %d",
                        WS_TRACE_BLOCK_TOKENS, P);
        goto out_cm;
    }
    if (R.prefix && (rc = sim_prefix_init(&R.cache, err)))
        goto out_cm;
    snprintf(res->tot.prefix_tier, sizeof res->tot.prefix_tier, "%s", R.nospill ? "gpu" : "host");
    if ((rc = sim_quantile_init(&R.ttft, err)))
        goto out_cm;
    if ((rc = sim_quantile_init(&R.tpot, err)))
        goto out_q;
    if ((rc = sim_engine_init(&R.eng, cfg->seed, err)))
        goto out_q;
    const int workers = ws_deploy_cpu_workers(hw, &cc, cfg->cpu_workers);
    if ((rc =
             sim_step_init(&R.st, &R.eng, K_OP, &R.cm, R.layers, workers, !cfg->detail_layer, err)))
        goto out_eng;
    if (cfg->timeline)
        sim_dag_record(&R.st.g, cfg->timeline);
    R.s = calloc((size_t)cfg->batch, sizeof *R.s);
    R.obs = calloc((size_t)R.layers, sizeof *R.obs);
    R.pc = calloc((size_t)cfg->batch, sizeof *R.pc);
    R.pc_seq = calloc((size_t)cfg->batch, sizeof *R.pc_seq);
    R.pend_pf = calloc((size_t)cfg->batch, sizeof *R.pend_pf);
    if (!R.s || !R.obs || !R.pc || !R.pc_seq || !R.pend_pf)
        rc = ws_err_set(err, WS_ENOMEM, "sim: out of memory");
    else
        rc = serve(&R, err);
    if (!rc) {
        res->tot.events = R.eng.n_processed;
        summarise(&R);
        clock_gettime(CLOCK_MONOTONIC, &w1);
        res->tot.wall_s = (w1.tv_sec - w0.tv_sec) + 1e-9 * (w1.tv_nsec - w0.tv_nsec);
        if (cfg->progress)
            cfg->progress(cfg->progress_ctx, sim_now(&R.eng), res->tot.steps, R.n_seen, R.n_seen);
    }
    for (int i = 0; R.s && i < cfg->batch; i++)
        free(R.s[i].blocks);
    for (size_t i = 0; i < R.q_len; i++)
        free(R.q[(R.q_head + i) % R.q_cap].blocks);
    sim_prefix_free(&R.cache);
    free(R.s);
    free(R.obs);
    free(R.pc);
    free(R.pc_seq);
    free(R.pend_pf);
    free(R.q);
    free(R.pend);
    sim_step_free(&R.st);
out_eng:
    sim_engine_free(&R.eng);
out_q:
    sim_quantile_free(&R.ttft);
    sim_quantile_free(&R.tpot);
out_cm:
    ws_cost_model_free(&R.cm);
    if (rc) {
        sim_results_free(res);
    }
    return rc;
}

void sim_results_free(sim_results *res)
{
    free(res->req);
    free(res->step);
    res->req = NULL;
    res->step = NULL;
    res->n_req = res->cap_req = res->n_step = res->cap_step = 0;
}
