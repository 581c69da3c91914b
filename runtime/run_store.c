/* run_store: a live run into the database (see run_store.h). */
#include "run_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rundb.h"

void ws_run_layer_row(const ws_run_layer *x, ws_layer_row *out)
{
    *out = (ws_layer_row){.step = x->step,
                          .layer = x->layer,
                          .n_cpu = (long long)x->n_cpu,
                          .m_xfer = (long long)x->m_xfer,
                          .resident = (long long)x->resident,
                          .cpu_attn_s = x->cpu_attn_s,
                          .router_s = x->router_s,
                          .experts_s = x->experts_s,
                          .gpu_s = x->gpu_s,
                          .gpu_measured = x->gpu_measured,
                          .overhead_s = x->overhead_s,
                          .r_real = x->r_real,
                          .r_star = x->r_star,
                          .a_est = x->A,
                          .b_est = x->B,
                          .pred_cpu_s = x->pred_cpu_s,
                          .pred_gpu_s = x->pred_gpu_s,
                          .pred_experts_s = x->pred_experts_s,
                          .flush_pages = x->flush_pages,
                          .flush_cpu_pages = x->flush_cpu_pages};
}

int ws_run_store(ws_store *s, const ws_engine_cfg *c, const ws_run_result *r, const char *origin,
                 long long *id, ws_err *err)
{
    ws_rundb_run run = {0};
    snprintf(run.origin, sizeof run.origin, "%s", origin ? origin : "run");
    snprintf(run.model, sizeof run.model, "%s", c->model->name);
    snprintf(run.gpu, sizeof run.gpu, "%s", r->gpu_label);
    snprintf(run.gpu_source, sizeof run.gpu_source, "%s",
             strncmp(r->gpu_label, "cuda:", 5) ? "modeled" : "measured");
    snprintf(run.gpu_profile, sizeof run.gpu_profile, "%s", c->hw->gpu);
    snprintf(run.host_profile, sizeof run.host_profile, "%s", c->hw->host);
    snprintf(run.policy, sizeof run.policy, "%s", ws_policy_name(c->policy));
    run.batch = c->batch, run.prompt_tokens = c->prompt, run.output_tokens = c->output;
    run.layers = r->layers, run.model_layers = r->model_layers;
    run.seed = c->seed;
    snprintf(run.params, sizeof run.params,
             "{\"window\": %d, \"page_tokens\": %d, \"r_static\": %g, \"threads\": %d, "
             "\"verify\": %d, \"expert_slots\": %d, \"expert_dtype\": \"%s\", "
             "\"expert_backend\": \"%s\", \"layers_note\": \"%s\"}",
             c->window, c->par.page_tokens, c->par.r_static, c->threads, c->verify, r->expert_slots,
             r->expert_dtype[0] ? r->expert_dtype : "bf16", r->expert_backend, r->layers_note);
    run.wall_s = r->wall_s, run.decode_s = r->decode_s;
    run.prefill_modeled_s = r->prefill_modeled_s;
    run.tokens_out = (long long)c->batch * r->steps;
    run.tokens_per_s = r->tokens_per_s, run.step_p50 = r->step_p50, run.step_p99 = r->step_p99;
    run.share_cpu_attn = r->share_cpu_attn, run.share_experts = r->share_experts;
    run.share_overhead = r->share_overhead, run.share_gpu_wait = r->share_gpu_wait;
    run.verify_max_err = r->verify_max_err;
    run.bytes_moved = (long long)r->bytes_moved;
    ws_rundb_step *st = calloc((size_t)r->steps + 1, sizeof *st);
    ws_rundb_layer *ly = calloc((size_t)r->steps * r->layers + 1, sizeof *ly);
    if (!st || !ly) {
        free(st);
        free(ly);
        return ws_err_set(err, WS_ENOMEM, "run: out of memory (records)");
    }
    for (int i = 0; i < r->steps; i++)
        st[i] = r->step[i];
    for (int i = 0; i < r->steps * r->layers; i++)
        ws_run_layer_row(&r->lay[i], &ly[i]);
    int rc =
        ws_rundb_store_run(s, &run, st, (size_t)r->steps, ly, (size_t)r->steps * r->layers, err);
    if (!rc && id)
        *id = run.id;
    free(st);
    free(ly);
    return rc;
}
