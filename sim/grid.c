/* grid: the paper's grid through the simulator (see grid.h). */
#include "grid.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hw.h"
#include "record.h"

const char *const sim_grid_models[SIM_GRID_MODELS] = {"deepseek-v2-lite", "qwen3-30b-a3b",
                                                      "mixtral-8x7b"};
const char *const sim_grid_gpus[SIM_GRID_GPUS] = {"a100-40gb-pcie", "v100-32gb-pcie"};
const int sim_grid_batches[SIM_GRID_BATCHES] = {4, 16, 32};
const int sim_grid_prompts[SIM_GRID_PROMPTS] = {2048, 8192, 32768};

const sim_paper_range sim_paper_a100 = {"geomean speedup over the baselines, A100, >= 8K", 1.52,
                                        2.51};
const sim_paper_range sim_paper_v100 = {"geomean speedup over the baselines, V100, >= 8K", 1.43,
                                        1.71};
const sim_paper_range sim_paper_static = {"fixed r = 0.5 / WriteScope", 0.89, 0.96};
const sim_paper_range sim_paper_single = {"single-state cache / WriteScope", 0.26, 0.79};

void sim_grid_opts_default(sim_grid_opts *o)
{
    memset(o, 0, sizeof *o);
    o->host = "xeon-gold-5318y";
    o->only_model = -1;
    o->only_gpu = -1;
    o->cpu_workers = 24;
}

struct sim_grid {
    ws_store *s;
    const sim_grid_opts *o;
    int pairs[SIM_GRID_MODELS * SIM_GRID_GPUS][2]; /* selected (model, gpu), grid order */
    int n_pairs;
    int loaded[SIM_GRID_MODELS * SIM_GRID_GPUS];
    ws_model m[SIM_GRID_MODELS * SIM_GRID_GPUS];
    ws_hw hw[SIM_GRID_MODELS * SIM_GRID_GPUS];
};

#define PER_PAIR ((size_t)SIM_GRID_BATCHES * SIM_GRID_PROMPTS * WS_POLICY_COUNT)

int sim_grid_open(ws_store *s, const sim_grid_opts *o, sim_grid **out, ws_err *err)
{
    *out = NULL;
    sim_grid *g = calloc(1, sizeof *g);
    if (!g)
        return ws_err_set(err, WS_ENOMEM, "sim grid: out of memory");
    g->s = s;
    g->o = o;
    for (int mi = 0; mi < SIM_GRID_MODELS; mi++)
        for (int gi = 0; gi < SIM_GRID_GPUS; gi++)
            if ((o->only_model < 0 || o->only_model == mi) &&
                (o->only_gpu < 0 || o->only_gpu == gi)) {
                g->pairs[g->n_pairs][0] = mi;
                g->pairs[g->n_pairs][1] = gi;
                g->n_pairs++;
            }
    *out = g;
    return 0;
}

size_t sim_grid_count(const sim_grid *g)
{
    return (size_t)g->n_pairs * PER_PAIR;
}

void sim_grid_close(sim_grid *g)
{
    free(g);
}

int sim_grid_eval(sim_grid *g, size_t i, sim_grid_point *out, ws_err *err)
{
    if (i >= sim_grid_count(g))
        return ws_err_set(err, WS_EINVAL, "sim grid: point %zu of %zu", i, sim_grid_count(g));
    const size_t pair = i / PER_PAIR, rest = i % PER_PAIR;
    const int mi = g->pairs[pair][0], gi = g->pairs[pair][1];
    const int bi = (int)(rest / (SIM_GRID_PROMPTS * WS_POLICY_COUNT));
    const int pi = (int)(rest / WS_POLICY_COUNT % SIM_GRID_PROMPTS);
    const int pol = (int)(rest % WS_POLICY_COUNT);
    const sim_grid_opts *o = g->o;
    int rc;
    if (!g->loaded[pair]) {
        if ((rc = ws_hw_load(g->s, sim_grid_models[mi], sim_grid_gpus[gi], o->host, WS_DT_BF16,
                             &g->m[pair], &g->hw[pair], NULL, err)))
            return rc;
        g->loaded[pair] = 1;
    }
    const ws_model *m = &g->m[pair];
    const ws_hw *hw = &g->hw[pair];
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.policy = (ws_policy_kind)pol;
    cfg.batch = sim_grid_batches[bi];
    cfg.detail_layer = o->detail_layer;
    cfg.cpu_workers = o->cpu_workers;
    cfg.keep_steps = 0;
    cfg.keep_requests = 0;
    sim_closed c;
    sim_source src;
    sim_closed_source(&c, cfg.batch, sim_grid_prompts[pi], SIM_GRID_OUTPUT, &src);
    sim_results r;
    if ((rc = sim_run(m, hw, &cc, &cfg, &src, &r, err)))
        return rc;
    memset(out, 0, sizeof *out);
    *out = (sim_grid_point){.model = mi,
                            .gpu = gi,
                            .batch = cfg.batch,
                            .prompt = sim_grid_prompts[pi],
                            .policy = pol,
                            .tps = r.tot.tokens_per_s,
                            .decode_tps = r.tot.decode_tps,
                            .served = r.tot.served,
                            .oom = r.tot.oom,
                            .events = r.tot.events,
                            .r_final = r.tot.r_final};
    const sim_record_meta meta = {.model = m->name,
                                  .gpu = hw->gpu,
                                  .host = hw->host,
                                  .workload = "closed",
                                  .prompt = sim_grid_prompts[pi],
                                  .output = SIM_GRID_OUTPUT,
                                  .gpu_experts = cc.gpu_experts,
                                  .cc = &cc};
    rc = sim_record_run(&cfg, &meta, &r, &out->run, err);
    sim_results_free(&r);
    return rc;
}

int sim_grid_params(const sim_grid_opts *o, char *buf, size_t cap, ws_err *err)
{
    size_t len = 0;
#define PUT(...)                                                                                \
    do {                                                                                        \
        int n_ = snprintf(buf + len, len < cap ? cap - len : 0, __VA_ARGS__);                   \
        len += n_ > 0 ? (size_t)n_ : 0;                                                         \
    } while (0)
    PUT("{\"host\":\"%s\",\"models\":[", o->host);
    for (int i = 0, k = 0; i < SIM_GRID_MODELS; i++)
        if (o->only_model < 0 || o->only_model == i)
            PUT("%s\"%s\"", k++ ? "," : "", sim_grid_models[i]);
    PUT("],\"gpus\":[");
    for (int i = 0, k = 0; i < SIM_GRID_GPUS; i++)
        if (o->only_gpu < 0 || o->only_gpu == i)
            PUT("%s\"%s\"", k++ ? "," : "", sim_grid_gpus[i]);
    PUT("],\"batches\":[");
    for (int i = 0; i < SIM_GRID_BATCHES; i++)
        PUT("%s%d", i ? "," : "", sim_grid_batches[i]);
    PUT("],\"prompts\":[");
    for (int i = 0; i < SIM_GRID_PROMPTS; i++)
        PUT("%s%d", i ? "," : "", sim_grid_prompts[i]);
    PUT("],\"output\":%d,\"policies\":[", SIM_GRID_OUTPUT);
    for (int i = 0; i < WS_POLICY_COUNT; i++)
        PUT("%s\"%s\"", i ? "," : "", ws_policy_name(i));
    PUT("],\"detail\":\"%s\",\"cpu_workers\":%d}", o->detail_layer ? "layer" : "step",
        o->cpu_workers);
#undef PUT
    if (len >= cap)
        return ws_err_set(err, WS_EINVAL, "sim grid: settings do not fit %zu bytes", cap);
    return 0;
}

int sim_grid_run(ws_store *s, const sim_grid_opts *o, sim_grid_point **pts, size_t *n, ws_err *err)
{
    *pts = NULL;
    *n = 0;
    sim_grid *g;
    int rc = sim_grid_open(s, o, &g, err);
    if (rc)
        return rc;
    const size_t total = sim_grid_count(g);
    sim_grid_point *v = calloc(total ? total : 1, sizeof *v);
    if (!v) {
        sim_grid_close(g);
        return ws_err_set(err, WS_ENOMEM, "sim grid: out of memory");
    }
    for (size_t i = 0; i < total && !rc; i++) {
        rc = sim_grid_eval(g, i, &v[i], err);
        if (!rc && o->progress)
            o->progress(o->progress_ctx, (int)i + 1, (int)total);
    }
    sim_grid_close(g);
    if (rc) {
        free(v);
        return rc;
    }
    *pts = v;
    *n = total;
    return 0;
}

static const sim_grid_point *find(const sim_grid_point *pts, size_t n, const sim_grid_point *like,
                                  int policy)
{
    for (size_t i = 0; i < n; i++)
        if (pts[i].model == like->model && pts[i].gpu == like->gpu && pts[i].batch == like->batch &&
            pts[i].prompt == like->prompt && pts[i].policy == policy)
            return &pts[i];
    return NULL;
}

double sim_grid_speedup(const sim_grid_point *pts, size_t n, int model, int gpu, int base,
                        int min_prompt, int *n_pairs)
{
    double lsum = 0;
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        const sim_grid_point *w = &pts[i];
        if (w->policy != WS_POLICY_WRITESCOPE || w->gpu != gpu ||
            (model >= 0 && w->model != model) || w->prompt < min_prompt)
            continue;
        const sim_grid_point *b = find(pts, n, w, base);
        if (!b || w->oom || b->oom || !(w->decode_tps > 0) || !(b->decode_tps > 0))
            continue;
        lsum += log(w->decode_tps / b->decode_tps);
        k++;
    }
    *n_pairs = k;
    return k ? exp(lsum / k) : 0;
}

int sim_grid_store(ws_store *s, const sim_grid_opts *o, int ranks, const sim_grid_point *p,
                   size_t n, ws_simdb_grid *gr, long long *first, long long *last, ws_err *err)
{
    memset(gr, 0, sizeof *gr);
    gr->ranks = ranks;
    int rc = sim_grid_params(o, gr->params, sizeof gr->params, err);
    if (rc)
        return rc;
    ws_simdb_run *runs = calloc(n ? n : 1, sizeof *runs);
    if (!runs)
        return ws_err_set(err, WS_ENOMEM, "sim grid: out of memory");
    for (size_t i = 0; i < n; i++)
        runs[i] = p[i].run;
    if (!(rc = ws_simdb_store_grid(s, gr, runs, n, err)) && n) {
        *first = runs[0].id;
        *last = runs[n - 1].id;
    }
    free(runs);
    return rc;
}
