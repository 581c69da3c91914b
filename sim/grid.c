/* grid: the paper's grid through the simulator (see grid.h). */
#include "grid.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"

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

int sim_load(ws_store *s, const char *model, const char *gpu, const char *host, ws_dtype kv,
             ws_model *m, ws_cost_hw *hw, int *cores, ws_err *err)
{
    char path[4096];
    int rc = ws_model_resolve(model, path, sizeof path, err);
    if (!rc)
        rc = ws_model_load(path, m, err);
    if (rc)
        return rc;
    ws_profile g = {0}, h = {0};
    if ((rc = ws_profile_load(s, gpu, &g, err)))
        return rc;
    if ((rc = ws_profile_load(s, host, &h, err))) {
        ws_profile_free(&g);
        return rc;
    }
    if (strcmp(g.kind, "gpu"))
        rc = ws_err_set(err, WS_EINVAL, "profile '%s' is a %s profile, not a GPU's", gpu, g.kind);
    else if (strcmp(h.kind, "host"))
        rc = ws_err_set(err, WS_EINVAL, "profile '%s' is a %s profile, not a host's", host, h.kind);
    else if (!(rc = ws_profile_fill(s, &h, "kv_reformat_bw", err)))
        rc = ws_cost_hw_load(&g, &h, m->attn, kv, m->weight_dtype, hw, err);
    const ws_profile_param *pc = ws_profile_get(&h, "cores");
    if (cores)
        *cores = pc && pc->value >= 1 && pc->value < 1e6 ? (int)pc->value : 1;
    ws_profile_free(&g);
    ws_profile_free(&h);
    return rc;
}

void sim_grid_opts_default(sim_grid_opts *o)
{
    memset(o, 0, sizeof *o);
    o->host = "xeon-gold-5318y";
    o->only_model = -1;
    o->only_gpu = -1;
    o->cpu_workers = 24;
}

int sim_grid_run(ws_store *s, const sim_grid_opts *o, sim_grid_point **pts, size_t *n, ws_err *err)
{
    *pts = NULL;
    *n = 0;
    const size_t cap = (size_t)SIM_GRID_MODELS * SIM_GRID_GPUS * SIM_GRID_BATCHES *
                       SIM_GRID_PROMPTS * WS_POLICY_COUNT;
    sim_grid_point *v = calloc(cap, sizeof *v);
    if (!v)
        return ws_err_set(err, WS_ENOMEM, "sim grid: out of memory");
    int total = 0, done = 0;
    for (int mi = 0; mi < SIM_GRID_MODELS; mi++)
        for (int gi = 0; gi < SIM_GRID_GPUS; gi++)
            if ((o->only_model < 0 || o->only_model == mi) &&
                (o->only_gpu < 0 || o->only_gpu == gi))
                total += SIM_GRID_BATCHES * SIM_GRID_PROMPTS * WS_POLICY_COUNT;
    size_t k = 0;
    int rc = 0;
    for (int mi = 0; mi < SIM_GRID_MODELS && !rc; mi++) {
        for (int gi = 0; gi < SIM_GRID_GPUS && !rc; gi++) {
            if ((o->only_model >= 0 && o->only_model != mi) ||
                (o->only_gpu >= 0 && o->only_gpu != gi))
                continue;
            ws_model m;
            ws_cost_hw hw;
            if ((rc = sim_load(s, sim_grid_models[mi], sim_grid_gpus[gi], o->host, WS_DT_BF16, &m,
                               &hw, NULL, err)))
                break;
            ws_cost_cfg cc;
            ws_cost_cfg_default(&cc);
            for (int bi = 0; bi < SIM_GRID_BATCHES && !rc; bi++)
                for (int pi = 0; pi < SIM_GRID_PROMPTS && !rc; pi++)
                    for (int pol = 0; pol < WS_POLICY_COUNT && !rc; pol++) {
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
                        sim_closed_source(&c, cfg.batch, sim_grid_prompts[pi], SIM_GRID_OUTPUT,
                                          &src);
                        sim_results r;
                        if ((rc = sim_run(&m, &hw, &cc, &cfg, &src, &r, err)))
                            break;
                        v[k++] = (sim_grid_point){.model = mi,
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
                        sim_results_free(&r);
                        if (o->progress)
                            o->progress(o->progress_ctx, ++done, total);
                    }
        }
    }
    if (rc) {
        free(v);
        return rc;
    }
    *pts = v;
    *n = k;
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
