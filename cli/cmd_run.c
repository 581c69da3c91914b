/* cmd_run: `writescope run`, the live decode engine (runtime/engine.h) on a closed batch:
 * parses the options, loads the model and the profiles, runs, prints a summary line every
 * N steps on stderr and the final summary (or --json), and with --db stores the run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "cli.h"
#include "convert.h"
#include "hw.h"
#include "profile.h"
#include "run_engine.h"
#include "run_store.h"
#include "store.h"
#include "workload.h"
#include "ws_util.h"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: writescope run --model NAME [--batch B] [--prompt N] [--output M] [--layers K]\n"
        "                      [--host PROFILE] [--gpu cuda|modeled:<profile>]\n"
        "                      [--policy writescope|static|stream|cpu-attn|migrate] [--r R]\n"
        "                      [--window W] [--threads T] [--seed S] [--every N]\n"
        "                      [--mem-fraction F] [--cpu-expert-weights bf16|int8]\n"
        "                      [--kv-dtype bf16] [--verify] [--db PATH] [--json]\n"
        "\n"
        "Serves a closed batch of B sequences (prompt N, M decode steps) of the model's real\n"
        "shapes, synthetic seeded bf16 KV and expert weights, through the InplaceKVCache and\n"
        "the placement policy. The CPU half of the attention, the router and the routed\n"
        "experts run for real on this machine; with --gpu modeled:<profile> (the default,\n"
        "modeled:" CLI_DEFAULT_GPU ") the GPU's work and the transfers are timed by the cost\n"
        "model on their own clocks and labelled modeled. --verify computes the GPU half\n"
        "(CPU reference, outside the timed path) and checks each merged output against full\n"
        "attention (max abs error <= 2e-3). A line every --every steps on stderr; --db stores\n"
        "the run, its steps and (step, layer) records in one transaction. Details: docs/run.md\n");
}

typedef struct run_opts {
    cli_workload w;
    int every, verify;
    double mem_fraction;
} run_opts;

static const cli_optdef k_opts[] = {
    {CLI_GROUP(run_opts, w, cli_workload, cli_workload_opts)},
    {CLI_GROUP(run_opts, w, cli_workload, cli_engine_opts)},
    {CLI_GROUP(run_opts, w, cli_workload, cli_live_opts)},
    CLI_LIVE_TUNES,
    {"output", CLI_TUNE, .lo = 1, .hi = 1 << 20, .def = "32"},
    {"layers", CLI_TUNE,
     .help = "run K of the model's layers; by default what fits in --mem-fraction of the RAM"},
    {"host", CLI_TUNE,
     .help = "the host's hardware profile (default: this machine's calibration when one is "
             "stored, else " CLI_FALLBACK_HOST " from the datasheet; this: this machine's, an "
             "error when none is stored)"},
    {"db", CLI_TUNE,
     .help = "store the run there (created when missing); the profiles are read from it too"},
    {CLI_GROUP(run_opts, w, cli_workload, cli_window_opts)},
    {"window", CLI_TUNE, .lo = 1, .hi = 1 << 20},
    {"every", CLI_INT(run_opts, every), .arg = "N", .lo = 0, .hi = 1 << 30, .def = "8",
     .help = "a progress line every N steps on stderr (0: none)"},
    {"mem-fraction", CLI_DOUBLE(run_opts, mem_fraction), .arg = "F", .lo = 0.01, .hi = 0.95,
     .def = "0.5", .help = "the share of the RAM the default --layers may fill"},
    {"verify", CLI_FLAG(run_opts, verify),
     .help = "compute the GPU half too and check every merged output against full attention; "
             "with int8 experts, every expert's output against the plain-C reference too"},
    {CLI_GROUP(run_opts, w, cli_workload, cli_cpu_format_opts)},
    {"cpu-expert-weights", CLI_TUNE, .arg = "bf16|int8", .def = "bf16",
     .help = "the CPU experts' weights: bf16, or int8 (per-channel int8 quantized at load, run "
             "through oneDNN's int8 matmul on AMX-INT8 / AVX512-VNNI / AVX2: KTransformers' "
             "AMXINT8, llama.cpp's q8_0 without its 32-weight blocks)"},
    {"kv-dtype", CLI_TUNE, .arg = "bf16", .def = "bf16",
     .help = "the KV cache's element type: bf16, the one the live engine's pages and CPU "
             "attention kernels hold (sim and plan model fp16 and fp8 too: vLLM "
             "--kv-cache-dtype fp8, llama.cpp --cache-type-k/v)"},
    {0}};
static const cli_spec k_spec = {"run", k_opts, 0, usage};

static void on_step(void *ctx, const ws_run_step *st, const ws_run_layer *lay, int n)
{
    const int every = *(const int *)ctx;
    (void)lay;
    (void)n;
    if (every <= 0 || (st->idx + 1) % every)
        return;
    fprintf(stderr,
            "run: step %lld  %.2f ms (cpu attn %.2f, experts %.2f, engine %.2f ms measured)  "
            "r*=%.3f r=%.3f%s\n",
            st->idx + 1, 1e3 * (st->t_end - st->t_start), 1e3 * st->cpu_attn_s, 1e3 * st->experts_s,
            1e3 * st->overhead_s, st->r_star, st->r_real,
            isnan(st->verify_err) ? "" : "  verified");
}

/* The host profile: this machine's calibration when stored, else the fallback. */
static const char *default_host(ws_store *s, char *buf, size_t cap, int *fallback)
{
    *fallback = !ws_calib_host_profile(s, buf, cap);
    return *fallback ? CLI_FALLBACK_HOST : buf;
}

static int store_run(const char *db, const ws_engine_cfg *c, const ws_run_result *r, ws_err *err)
{
    ws_store *s = NULL;
    long long id = 0;
    int rc = cli_open_store(db, &s, err);
    if (!rc)
        rc = ws_run_store(s, c, r, NULL, &id, err);
    if (!rc)
        fprintf(stderr, "run: stored as run %lld in %s\n", id, ws_store_path(s));
    ws_store_close(s);
    return rc;
}

static json_t *result_json(const ws_engine_cfg *c, const ws_run_result *r, const char *model,
                           const char *policy, int host_fallback)
{
    json_t *o = json_object();
    json_object_set_new(o, "gpu", json_string(r->gpu_label));
    const int cuda = !strncmp(r->gpu_label, "cuda:", 5);
    json_object_set_new(o, "gpu_source",
                        json_string(cuda ? "measured (GPU half; projections modeled)" : "modeled"));
    json_object_set_new(o, "host", json_string(r->host));
    json_object_set_new(o, "host_is_this_machine", json_boolean(!host_fallback));
    json_object_set_new(o, "model", json_string(model));
    json_object_set_new(o, "policy", json_string(policy));
    json_object_set_new(o, "batch", json_integer(c->batch));
    json_object_set_new(o, "prompt", json_integer(c->prompt));
    json_object_set_new(o, "output", json_integer(c->output));
    json_object_set_new(o, "layers", json_integer(r->layers));
    json_object_set_new(o, "model_layers", json_integer(r->model_layers));
    json_object_set_new(o, "layers_note", json_string(r->layers_note));
    json_object_set_new(o, "tokens_per_s", cli_num(r->tokens_per_s));
    json_object_set_new(o, "tokens_per_s_source",
                        json_string(cuda ? "mixed: CPU and GPU half measured, projections modeled"
                                         : "mixed: CPU measured, GPU modeled"));
    json_object_set_new(o, "step_p50_s", cli_num(r->step_p50));
    json_object_set_new(o, "step_p99_s", cli_num(r->step_p99));
    json_object_set_new(o, "decode_s", cli_num(r->decode_s));
    json_object_set_new(o, "wall_s", cli_num(r->wall_s));
    json_object_set_new(o, "prefill_modeled_s", cli_num(r->prefill_modeled_s));
    json_object_set_new(o, "prefill_wall_s", cli_num(r->prefill_wall_s));
    json_object_set_new(o, "r_prefill", cli_num(r->r_prefill));
    json_t *sh = json_object();
    json_object_set_new(sh, "cpu_attn", cli_num(r->share_cpu_attn));
    json_object_set_new(sh, "experts", cli_num(r->share_experts));
    json_object_set_new(sh, "engine", cli_num(r->share_overhead));
    json_object_set_new(sh, "gpu_wait", cli_num(r->share_gpu_wait));
    json_object_set_new(o, "share", sh);
    json_object_set_new(o, "verify_max_err",
                        isnan(r->verify_max_err) ? json_null() : cli_num(r->verify_max_err));
    json_object_set_new(o, "bytes_moved", json_integer((json_int_t)r->bytes_moved));
    json_object_set_new(o, "flushes", json_integer((json_int_t)r->flushes));
    json_object_set_new(o, "cpu_pages", json_integer(r->cpu_pages));
    json_object_set_new(o, "xfer_pages", json_integer(r->xfer_pages));
    json_object_set_new(o, "A_model", cli_num(r->A_model));
    json_object_set_new(o, "A_final", cli_num(r->A_final));
    json_object_set_new(o, "B_model", cli_num(r->B_model));
    json_object_set_new(o, "B_final", cli_num(r->B_final));
    json_object_set_new(o, "expert_slots", json_integer(r->expert_slots));
    json_object_set_new(o, "expert_dtype", json_string(r->expert_dtype));
    json_object_set_new(o, "expert_backend", json_string(r->expert_backend));
    json_object_set_new(o, "expert_verify",
                        isnan(r->expert_verify) ? json_null() : cli_num(r->expert_verify));
    json_object_set_new(o, "note", json_string(r->note));
    /* the steps and layers as the database and the CSV hold them (store/steprow.h) */
    json_t *steps = json_array(), *layers = json_array();
    for (int i = 0; i < r->steps; i++) {
        json_array_append_new(steps, ws_row_json(ws_step_cols, &r->step[i]));
    }
    for (int i = 0; i < r->steps * r->layers; i++) {
        ws_layer_row row;
        ws_run_layer_row(&r->lay[i], &row);
        json_array_append_new(layers, ws_row_json(ws_layer_cols, &row));
    }
    json_object_set_new(o, "step_layers", layers);
    json_object_set_new(o, "steps", steps);
    return o;
}

/* The options into *c; *gpu_prof: the profile of the GPU's cost model. */
static int run_config(const run_opts *o, const cli_args *a, ws_engine_cfg *c,
                      const char **gpu_prof)
{
    int rc = cli_to_engine_cfg("run", a, &o->w, c, gpu_prof);
    c->mem_fraction = o->mem_fraction;
    c->verify = o->verify;
    return rc;
}

/* The model and the profiles (the host's: this machine's calibration when none is named). */
static int run_load(const cli_workload *w, const char *gpu_prof, ws_model *m, ws_hw *hw,
                    int *embedded, int *host_fallback)
{
    ws_err err = {0};
    ws_store *s = NULL;
    /* --db: the database the run goes to, created when missing, also gives the profiles */
    if (w->db ? cli_open_store(w->db, &s, &err) : cli_open_store_ro(NULL, &s, embedded, &err))
        return cli_fail(&err);
    char hbuf[64];
    const char *host = w->host;
    *host_fallback = 0;
    if (!host)
        host = default_host(s, hbuf, sizeof hbuf, host_fallback);
    int rc = cli_host_this(s, &host, hbuf, sizeof hbuf, &err);
    if (!rc)
        rc = ws_hw_load(s, w->model, gpu_prof, host, WS_DT_BF16, m, hw, NULL, &err);
    ws_store_close(s);
    if (rc)
        return cli_fail(&err);
    if (w->layers > m->layers)
        return cli_usage_error("run", "--layers %d: model %s has %d layers", w->layers, m->name,
                               m->layers);
    if (*host_fallback)
        fprintf(stderr,
                "run: no calibration of this machine is stored; host profile %s (the cost "
                "model's CPU predictions are not this machine's)\n",
                host);
    return 0;
}

static void print_summary(const ws_engine_cfg *c, const ws_run_result *r, const char *model,
                          int host_fallback)
{
    printf("writescope run: gpu=%s host=%s%s; model %s, %s\n", r->gpu_label, r->host,
           host_fallback ? " (not this machine)" : "", model, r->layers_note);
    printf("workload: batch %d x (%d prompt + %d output) tokens, policy %s, prefill placed r = "
           "%.3f\n",
           c->batch, c->prompt, c->output, ws_policy_name(c->policy), r->r_prefill);
    const int cuda = !strncmp(r->gpu_label, "cuda:", 5);
    printf("decode: %.1f tokens/s (%s); step p50 %.2f ms, p99 %.2f ms\n", r->tokens_per_s,
           cuda ? "CPU and the GPU half measured, projections modeled"
                : "CPU measured, GPU modeled",
           1e3 * r->step_p50, 1e3 * r->step_p99);
    printf("experts: %s weights, %d slots, GEMM backend %s\n", r->expert_dtype, r->expert_slots,
           r->expert_backend);
    printf("share of step time: CPU attention %.1f%%, experts %.1f%%, engine %.1f%% "
           "(measured); CPU waiting on the GPU path %.1f%%\n",
           100 * r->share_cpu_attn, 100 * r->share_experts, 100 * r->share_overhead,
           100 * r->share_gpu_wait);
    printf("policy: A %.3g s/token (model %.3g), B %.3g (model %.3g); final r = %.3f, r* = "
           "%.3f\n",
           r->A_final, r->A_model, r->B_final, r->B_model,
           r->steps ? r->step[r->steps - 1].r_real : 0,
           r->steps ? r->step[r->steps - 1].r_star : 0);
    printf("cache: %d CPU + %d XFER pages, %llu flushes, bytes moved after placement %llu\n",
           r->cpu_pages, r->xfer_pages, (unsigned long long)r->flushes,
           (unsigned long long)r->bytes_moved);
    printf("prefill: %.2f ms modeled (GPU compute), %.2f ms measured writing the KV into "
           "its regions\n",
           1e3 * r->prefill_modeled_s, 1e3 * r->prefill_wall_s);
    if (!isnan(r->verify_max_err))
        printf("verify: max abs error of merged vs full attention %.2e (bound 2e-3): %s\n",
               r->verify_max_err, r->verify_max_err <= 2e-3 ? "ok" : "FAILED");
    if (!isnan(r->expert_verify))
        printf("verify: int8 experts vs the reference, worst |error| / bound %.3f: %s\n",
               r->expert_verify, r->expert_verify <= 1 ? "ok" : "FAILED");
    if (r->note[0])
        printf("note: %s\n", r->note);
}

int cmd_run(int argc, char **argv)
{
    run_opts o = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_spec, argc, argv, &o, &a);
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    if (!o.w.model)
        return cli_usage_error("run", "--model is required");
    ws_engine_cfg c;
    const char *gpu_prof = CLI_DEFAULT_GPU;
    if ((rc = run_config(&o, &a, &c, &gpu_prof)))
        return rc;
    ws_model m;
    ws_hw hw;
    int embedded = 0, host_fallback = 0;
    if ((rc = run_load(&o.w, gpu_prof, &m, &hw, &embedded, &host_fallback)))
        return rc;
    int every = o.every;
    c.model = &m;
    c.hw = &hw;
    c.on_step = on_step;
    c.on_step_ctx = &every;
    if (c.gpu == WS_ENGINE_GPU_CUDA)
        fprintf(stderr, "run: gpu=cuda (the cost model's predictions: profile %s) host=%s ", hw.gpu,
                hw.host);
    else
        fprintf(stderr, "run: gpu=modeled:%s host=%s ", hw.gpu, hw.host);
    fprintf(stderr, "model %s, batch %d x (%d + %d), policy %s\n", m.name, c.batch, c.prompt,
            c.output, ws_policy_name(c.policy));
    ws_err err = {0};
    ws_run_result r;
    if (ws_engine_run(&c, &r, &err))
        return cli_fail(&err);
    rc = CLI_EXIT_OK;
    if (o.w.db) {
        if (store_run(o.w.db, &c, &r, &err))
            rc = cli_fail(&err);
    }
    if (o.w.json) {
        cli_print_json(result_json(&c, &r, m.name, ws_policy_name(c.policy), host_fallback));
    } else if (rc == CLI_EXIT_OK) {
        print_summary(&c, &r, m.name, host_fallback);
    }
    if (!isnan(r.verify_max_err) && !(r.verify_max_err <= 2e-3) && rc == CLI_EXIT_OK) {
        fprintf(stderr, "writescope: run: verify failed: max abs error %.3g > 2e-3\n",
                r.verify_max_err);
        rc = CLI_EXIT_FAIL;
    }
    if (!isnan(r.expert_verify) && !(r.expert_verify <= 1) && rc == CLI_EXIT_OK) {
        fprintf(stderr, "writescope: run: verify failed: int8 experts off the reference by %.3g "
                "x their bound\n", r.expert_verify);
        rc = CLI_EXIT_FAIL;
    }
    if (embedded && rc == CLI_EXIT_OK)
        cli_note_embedded();
    ws_run_result_free(&r);
    return rc;
}
