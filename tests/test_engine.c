/* test_engine: the live decode engine (runtime/engine.c) on tiny models, GPU modeled.
 * Split attention through the format, merged, equals full attention over many steps with
 * flushes (verify, GQA and MLA); no byte moves after placement over a long run; region
 * capacities are a clear error; the realised CPU share stays within one flush batch of
 * r* as sequences grow, and r* is the policy module's r*(L) on the cost model's terms;
 * an injected CPU slowdown half-way moves new placements toward the GPU within a bounded
 * number of flushes, and without it r stays put. The experts on the pool (bf16 and int8)
 * equal serial calls; int8 experts run, verify against the reference and shrink the fixed
 * buffers; a format no kernel runs is refused. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "experts.h"
#include "gemm_bf16.h"
#include "gemm_int8.h"
#include "half.h"
#include "helpers.h"
#include "hw.h"
#include "pool.h"
#include "run_engine.h"
#include "store.h"
#include "wformat.h"

#define BOUND 2e-3 /* DESIGN section 7: bf16 KV against the fp64 reference */

static const char *k_gqa =
    "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"model_type\": \"qwen3_moe\", "
    "\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 8, "
    "\"num_key_value_heads\": 2, \"head_dim\": 32, \"intermediate_size\": 128, "
    "\"moe_intermediate_size\": 32, \"num_experts\": 8, \"num_experts_per_tok\": 2, "
    "\"vocab_size\": 1000, \"torch_dtype\": \"bfloat16\"}";

static const char *k_mla =
    "{\"architectures\": [\"DeepseekV2ForCausalLM\"], \"model_type\": \"deepseek_v2\", "
    "\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
    "\"num_key_value_heads\": 4, \"kv_lora_rank\": 64, \"qk_rope_head_dim\": 16, "
    "\"qk_nope_head_dim\": 32, \"v_head_dim\": 32, \"q_lora_rank\": null, "
    "\"intermediate_size\": 128, \"moe_intermediate_size\": 32, \"n_routed_experts\": 8, "
    "\"num_experts_per_tok\": 2, \"n_shared_experts\": 1, \"first_k_dense_replace\": 1, "
    "\"vocab_size\": 1000, \"torch_dtype\": \"bfloat16\"}";

static ws_model g_m;
static ws_hw g_hw;

static void load(const char *json)
{
    ws_err err = {0};
    cr_assert_eq(ws_model_parse(json, "tiny.json", &g_m, &err), 0, "%s", err.msg);
    th_paper_hw(NULL, &g_m, &g_hw); /* ws_hw_load's profile half: the loader the CLI uses */
    /* The GPU's fixed costs per kernel (microseconds, profiles/README.md#attn_c0) dwarf these
     * tiny layers' work and would put every token on the CPU: the placement tests below need
     * r* inside (0, 1), so the GPU's kernels and copies here have none. */
    g_hw.gpu_attn.c0.v = g_hw.h2d.c0.v = g_hw.d2h.c0.v = g_hw.gpu_gemm.c0.v = 0;
    for (int k = 0; k < WS_ELEM_KINDS; k++)
        g_hw.gpu_elem[k].c0.v = 0;
}

static void tiny_cfg(ws_engine_cfg *c)
{
    ws_engine_cfg_default(c);
    c->model = &g_m;
    c->hw = &g_hw;
    c->par.page_tokens = 16;
    c->window = 32;
    c->batch = 3;
    c->prompt = 200;
    c->output = 100;
    c->threads = 2;
    c->pingpong_bytes = 1; /* no prefetch credit: r* stays inside (0, 1) */
}

static void check_verified_run(const char *json, ws_policy_kind pol)
{
    load(json);
    ws_engine_cfg c;
    tiny_cfg(&c);
    c.verify = 1;
    c.policy = pol;
    ws_run_result r;
    ws_err err = {0};
    cr_assert_eq(ws_engine_run(&c, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.steps, 100);
    cr_assert(r.flushes >= 2, "windows flushed (%llu)", (unsigned long long)r.flushes);
    /* (migrate's one share may have moved every page to one region by the end) */
    cr_assert(pol == WS_POLICY_MIGRATE || (r.cpu_pages > 0 && r.xfer_pages > 0),
              "both host regions used (%d, %d)", r.cpu_pages, r.xfer_pages);
    cr_assert(r.verify_max_err <= BOUND, "merged vs full: %g", r.verify_max_err);
    for (int s = 0; s < r.steps; s++)
        cr_assert(r.step[s].verify_err <= BOUND, "step %d: %g", s, r.step[s].verify_err);
    cr_assert_eq(r.bytes_moved, 0);
    /* migrate's share moved from 0 by re-laying pages; nothing else reformats */
    if (pol == WS_POLICY_MIGRATE)
        cr_assert_gt(r.bytes_reformatted, 0);
    else
        cr_assert_eq(r.bytes_reformatted, 0);
    cr_assert(strstr(r.gpu_label, "modeled:a100-40gb-pcie"), "%s", r.gpu_label);
    ws_run_result_free(&r);
}

Test(engine, split_equals_full_gqa_over_steps_with_flushes)
{
    check_verified_run(k_gqa, WS_POLICY_WRITESCOPE);
}

/* migrate's reformat re-lays placed pages between the layouts: attention stays exact */
Test(engine, split_equals_full_after_migrate_reformats_gqa)
{
    check_verified_run(k_gqa, WS_POLICY_MIGRATE);
}

Test(engine, split_equals_full_after_migrate_reformats_mla)
{
    check_verified_run(k_mla, WS_POLICY_MIGRATE);
}

Test(engine, split_equals_full_mla_over_steps_with_flushes)
{
    check_verified_run(k_mla, WS_POLICY_WRITESCOPE);
}

Test(engine, no_byte_moves_after_placement_over_a_long_run)
{
    load(k_gqa);
    ws_engine_cfg c;
    tiny_cfg(&c);
    c.output = 600;
    c.cpu_time_modeled = 1;
    ws_run_result r;
    ws_err err = {0};
    cr_assert_eq(ws_engine_run(&c, &r, &err), 0, "%s", err.msg);
    cr_assert(r.flushes >= 2 * 18, "%llu flushes", (unsigned long long)r.flushes);
    cr_assert_eq(r.bytes_moved, 0);
    cr_assert(r.bytes_written_cpu > 0 && r.bytes_written_xfer > 0);
    ws_run_result_free(&r);
}

Test(engine, capacities_are_a_clear_error)
{
    load(k_gqa);
    ws_engine_cfg c;
    tiny_cfg(&c);
    c.host_limit = 4096; /* not one page of the CPU region's share */
    ws_run_result r;
    ws_err err = {0};
    cr_assert_eq(ws_engine_run(&c, &r, &err), WS_ENOMEM);
    cr_assert(strcasestr(err.msg, "cpu region"), "%s", err.msg);
    cr_assert_null(r.step);
    tiny_cfg(&c);
    c.pinned_limit = 4096;
    c.policy = WS_POLICY_STREAM;
    cr_assert_eq(ws_engine_run(&c, &r, &err), WS_ENOMEM);
    cr_assert(strcasestr(err.msg, "xfer region"), "%s", err.msg);
}

/* A pool that cannot be made is the engine's error with the pool's own words, once. */
Test(engine, pool_error_named_once)
{
    load(k_gqa);
    ws_engine_cfg c;
    tiny_cfg(&c);
    c.threads = WS_POOL_MAX_THREADS + 1;
    ws_run_result r;
    ws_err err = {0};
    cr_assert_eq(ws_engine_run(&c, &r, &err), WS_EINVAL, "%s", err.msg);
    char want[96];
    snprintf(want, sizeof want, "run: thread pool: %d threads is more than %d",
             WS_POOL_MAX_THREADS + 1, WS_POOL_MAX_THREADS);
    cr_assert_str_eq(err.msg, want);
}

#if defined(__SANITIZE_ADDRESS__)
#define TH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TH_ASAN 1
#endif
#endif

/* Expert slots that do not fit the address space (RLIMIT_AS in a child) are an error that
 * gives the slots' sizes in units that show them: 65536 slots of 24 KiB each, not "0.0 MB". */
Test(engine, expert_oom_gives_readable_sizes)
{
#ifdef TH_ASAN
    cr_skip_test("AddressSanitizer reserves the address space an RLIMIT_AS would cut");
#else
    static const char *many =
        "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"model_type\": \"qwen3_moe\", "
        "\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 8, "
        "\"num_key_value_heads\": 2, \"head_dim\": 32, \"intermediate_size\": 128, "
        "\"moe_intermediate_size\": 64, \"num_experts\": 65536, \"num_experts_per_tok\": 64, "
        "\"vocab_size\": 1000, \"torch_dtype\": \"bfloat16\"}";
    load(many);
    ws_engine_cfg c;
    tiny_cfg(&c);
    c.batch = 1024; /* x 64 routed: a slot for each of the 65536 experts */
    c.prompt = 16;
    c.output = 1;
    c.threads = 1;
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        long pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        if (!f || fscanf(f, "%ld", &pages) != 1)
            _exit(2);
        fclose(f);
        /* 768 MiB past what the process maps now (about 300 MiB go before the slots): the
         * 1.5 GiB of slots cannot fit */
        const rlim_t cap = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)768 << 20);
        const struct rlimit rl = {cap, cap};
        if (setrlimit(RLIMIT_AS, &rl))
            _exit(3);
        ws_run_result r;
        ws_err err = {0};
        const int rc = ws_engine_run(&c, &r, &err);
        if (write(fd[1], err.msg, strlen(err.msg)) < 0)
            _exit(4);
        _exit(rc == WS_ENOMEM ? 0 : 5);
    }
    close(fd[1]);
    char msg[WS_ERR_MSG_MAX + 1] = "";
    size_t n = 0;
    ssize_t k;
    while (n < WS_ERR_MSG_MAX && (k = read(fd[0], msg + n, WS_ERR_MSG_MAX - n)) > 0)
        n += (size_t)k;
    msg[n] = '\0';
    close(fd[0]);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d: %s", status, msg);
    cr_assert_neq(strstr(msg, "run: out of memory for expert weights (slot "), NULL, "%s", msg);
    cr_assert_neq(strstr(msg, " of 65536, 24 KiB each, 1.5 GiB in all)"), NULL, "%s", msg);
#endif
}

Test(engine, unknown_runtime_policies_and_a_missing_device_are_refused)
{
    load(k_gqa);
    ws_engine_cfg c;
    tiny_cfg(&c);
    ws_run_result r;
    ws_err err = {0};
    c.policy = WS_POLICY_GPU_ONLY; /* no spill: nothing for the format to place */
    cr_assert_eq(ws_engine_run(&c, &r, &err), WS_EUNSUP);
    c.policy = WS_POLICY_KTRANS;
    cr_assert_eq(ws_engine_run(&c, &r, &err), WS_EUNSUP);
    tiny_cfg(&c);
    c.gpu = WS_ENGINE_GPU_CUDA;
    if (th_cuda_device_present()) /* a device is there: cli_run::options runs on it */
        return;
    cr_assert_neq(ws_engine_run(&c, &r, &err), 0);
    cr_assert(strcasestr(err.msg, "cuda"), "%s", err.msg);
    cr_assert_null(r.step);
}

/* r* from the policy module on the cost model's terms, as the engine should compute it. */
static double expected_rstar(const ws_engine_cfg *c, const ws_run_layer *y0, double last_moe)
{
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cc.pingpong_bytes = c->pingpong_bytes;
    ws_cost_model cm;
    ws_err err = {0};
    cr_assert_eq(ws_cost_model_init(c->hw, c->model, &cc, &cm, &err), 0, "%s", err.msg);
    ws_policy p;
    cr_assert_eq(ws_policy_init(&p, c->policy, &c->par, cm.A, cm.B, &err), 0);
    ws_cost_split sp;
    ws_cost_split_terms(&cm, y0->resident, last_moe, 0, 0, &sp);
    const double r = ws_policy_target(&p, &sp, y0->n_cpu + y0->m_xfer);
    ws_cost_model_free(&cm);
    return r;
}

Test(engine, realised_share_tracks_rstar_within_one_flush_batch)
{
    load(k_gqa);
    ws_engine_cfg c;
    tiny_cfg(&c);
    c.batch = 2;
    c.prompt = 1024;
    c.output = 400;
    c.window = 16;
    c.cpu_time_modeled = 1;
    ws_run_result r;
    ws_err err = {0};
    cr_assert_eq(ws_engine_run(&c, &r, &err), 0, "%s", err.msg);
    int checked = 0;
    for (int s = 1; s < r.steps; s++)
        for (int l = 0; l < r.layers; l++) {
            const ws_run_layer *y = &r.lay[(size_t)s * r.layers + l];
            cr_assert(y->r_star > 0.05 && y->r_star < 0.95, "r* inside: %g", y->r_star);
            if (!y->flush_pages)
                continue;
            const double spilled = y->n_cpu + y->m_xfer + y->flush_pages * c.par.page_tokens;
            const double batch_share = y->flush_pages * c.par.page_tokens / spilled;
            cr_assert(fabs(y->r_real - y->r_star) <= batch_share + 0.01,
                      "step %d layer %d: r %g vs r* %g (one flush batch %g)", s, l, y->r_real,
                      y->r_star, batch_share);
            checked++;
        }
    cr_assert(checked >= 40, "flushes checked: %d", checked);
    /* the target is the policy module's r*(L) on the cost model's terms (with no prefetch
     * credit to speak of, the MoE phase it was computed with does not matter) */
    for (int s = 0; s < r.steps; s += 37) {
        const ws_run_layer *y0 = &r.lay[(size_t)s * r.layers];
        const double want = expected_rstar(&c, y0, 0.0);
        cr_assert(fabs(y0->r_star - want) < 1e-4, "step %d: r* %g vs the policy's %g", s,
                  y0->r_star, want);
    }
    ws_run_result_free(&r);
}

/* Share of the flushed pages that went to the CPU in steps [a, b). */
static double cpu_flush_share(const ws_run_result *r, int a, int b, int *n)
{
    double cpu = 0, all = 0;
    *n = 0;
    for (int s = a; s < b; s++)
        for (int l = 0; l < r->layers; l++) {
            const ws_run_layer *y = &r->lay[(size_t)s * r->layers + l];
            if (y->flush_pages) {
                cpu += y->flush_cpu_pages;
                all += y->flush_pages;
                (*n)++;
            }
        }
    return all > 0 ? cpu / all : NAN;
}

static void drift_run(double factor, ws_run_result *r)
{
    load(k_gqa);
    ws_engine_cfg c;
    tiny_cfg(&c);
    c.batch = 2;
    c.prompt = 1024;
    c.output = 320;
    c.window = 16;
    c.cpu_time_modeled = 1;
    c.drift_step = 160;
    c.drift_factor = factor;
    ws_err err = {0};
    cr_assert_eq(ws_engine_run(&c, r, &err), 0, "%s", err.msg);
}

Test(engine, drift_moves_new_placements_toward_the_gpu)
{
    ws_run_result r;
    drift_run(4.0, &r);
    const int L = r.layers;
    const double before = r.lay[(size_t)159 * L].r_star;
    const double after = r.lay[(size_t)(r.steps - 1) * L].r_star;
    cr_assert(after < before - 0.1, "r* after the slowdown %g, before %g", after, before);
    cr_assert(r.A_final > 2 * r.A_model, "A adopted %g (model %g)", r.A_final, r.A_model);
    /* within a bounded number of flushes (adoption takes min_obs + confirm samples, a few
     * steps; one flush every 16 steps): from the second flush after the drift on, the
     * pages go to XFER */
    int nb, na;
    const double sb = cpu_flush_share(&r, 100, 160, &nb);
    const double sa = cpu_flush_share(&r, 160 + 2 * 16, r.steps, &na);
    cr_assert(nb > 0 && na > 0);
    cr_assert(sa < sb - 0.3, "CPU share of flushed pages: before %g, after %g", sb, sa);
    ws_run_result_free(&r);
}

Test(engine, without_drift_r_stays_put)
{
    ws_run_result r;
    drift_run(1.0, &r);
    const int L = r.layers;
    cr_assert_float_eq(r.A_final, r.A_model, 1e-15);
    const double r0 = r.lay[(size_t)20 * L].r_star;
    for (int s = 20; s < r.steps; s++)
        cr_assert(fabs(r.lay[(size_t)s * L].r_star - r0) < 0.02, "step %d: r* %g vs %g", s,
                  r.lay[(size_t)s * L].r_star, r0);
    int nb, na;
    const double sb = cpu_flush_share(&r, 0, 160, &nb), sa = cpu_flush_share(&r, 160, r.steps, &na);
    cr_assert(fabs(sa - sb) < 0.2, "CPU share of flushed pages: %g then %g", sb, sa);
    ws_run_result_free(&r);
}

Test(engine, layers_fit_scales_with_memory)
{
    load(k_gqa);
    ws_engine_cfg c;
    tiny_cfg(&c);
    cr_assert_eq(ws_engine_layers_fit(&c, 1e3), 0);
    cr_assert_eq(ws_engine_layers_fit(&c, 1e12), g_m.layers);
    ws_run_result r;
    ws_err err = {0};
    c.output = 4;
    cr_assert_eq(ws_engine_run(&c, &r, &err), 0, "%s", err.msg);
    cr_assert(strstr(r.layers_note, "fits in"), "%s", r.layers_note);
    ws_run_result_free(&r);
}

/* The engine's experts, one pool task each, give what serial calls of the GEMM give on the
 * same rows: every expert's output bit for bit, the probe's pre-pass included. */
Test(engine, experts_on_the_pool_equal_serial_calls)
{
    enum { H = 96, I = 48, N = 6 };
    static const int m[N] = {1, 3, 2, 1, 4, 2};
    int off[N + 1] = {0};
    for (int i = 0; i < N; i++)
        off[i + 1] = off[i] + m[i];
    const int rows = off[N];
    uint16_t *w = malloc(sizeof(uint16_t) * 3 * H * I * N);
    float *xb = malloc(sizeof(float) * rows * H), *yb = calloc((size_t)rows * H, sizeof(float));
    float *ys = calloc((size_t)rows * H, sizeof(float));
    cr_assert(w && xb && yb && ys);
    uint32_t s = 12345;
    for (int i = 0; i < 3 * H * I * N; i++) {
        s = s * 1664525u + 1013904223u;
        w[i] = ws_f32_to_bf16(((float)(s >> 8) / 16777216.0f - 0.5f) * 0.2f);
    }
    for (int i = 0; i < rows * H; i++) {
        s = s * 1664525u + 1013904223u;
        xb[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
    ws_expert_bf16 ex[N];
    const ws_expert_bf16 *ep[N];
    for (int i = 0; i < N; i++) {
        ex[i] = (ws_expert_bf16){.hidden = H,
                                 .inter = I,
                                 .w_gate_up = w + (size_t)i * 3 * H * I,
                                 .w_down = w + (size_t)i * 3 * H * I + 2 * H * I};
        ep[i] = &ex[i];
    }
    ws_err err = {0};
    ws_pool *pool = ws_pool_create(2, &err);
    cr_assert(pool, "%s", err.msg);
    cr_assert_eq(ws_experts_run_bf16(pool, ep, N, off, xb, yb, &err), 0, "%s", err.msg);
    for (int i = 0; i < N; i++)
        cr_assert_eq(ws_expert_ffn_bf16(&ex[i], xb + (size_t)off[i] * H, ys + (size_t)off[i] * H,
                                        m[i], 1, &err),
                     0, "%s", err.msg);
    for (int i = 0; i < rows * H; i++)
        cr_assert_eq(memcmp(&yb[i], &ys[i], sizeof(float)), 0, "row %d col %d: %g vs %g", i / H,
                     i % H, yb[i], ys[i]);
    /* a second run (every class probed) on the pool alone */
    memset(yb, 0, sizeof(float) * rows * H);
    cr_assert_eq(ws_experts_run_bf16(pool, ep, N, off, xb, yb, &err), 0, "%s", err.msg);
    cr_assert_eq(memcmp(yb, ys, sizeof(float) * rows * H), 0);
    char b[96];
    ws_engine_experts_backend(H, I, 4, b, sizeof b);
    cr_assert(!strstr(b, "unprobed") && strcmp(b, "none"), "%s", b);
    ws_pool_destroy(pool);
    free(w);
    free(xb);
    free(yb);
    free(ys);
}

/* The expert weights are bf16: the fixed buffers (expert slots) of a wide model take half
 * the bytes they did in fp32, and a run says which GEMM backend ran them. */
Test(engine, run_reports_the_expert_backend)
{
    load(k_gqa);
    ws_engine_cfg c;
    tiny_cfg(&c);
    c.output = 4;
    c.layers = 1;
    ws_run_result r;
    ws_err err = {0};
    cr_assert_eq(ws_engine_run(&c, &r, &err), 0, "%s", err.msg);
    cr_assert(r.expert_backend[0] && !strstr(r.expert_backend, "unprobed") &&
                  strcmp(r.expert_backend, "none"),
              "%s", r.expert_backend);
    ws_run_result_free(&r);
}

/* int8 experts on the pool give what serial calls of the int8 GEMM give, bit for bit. */
Test(engine, int8_experts_on_the_pool_equal_serial_calls)
{
    enum { H = 96, I = 48, N = 6 };
    static const int m[N] = {1, 3, 2, 1, 4, 2};
    int off[N + 1] = {0};
    for (int i = 0; i < N; i++)
        off[i + 1] = off[i] + m[i];
    const int rows = off[N];
    const size_t eb = (ws_expert_int8_bytes(H, I) + 63) & ~(size_t)63;
    uint16_t *w = malloc(sizeof(uint16_t) * 3 * H * I);
    char *mem = aligned_alloc(64, eb * N);
    float *xb = malloc(sizeof(float) * rows * H), *yb = calloc((size_t)rows * H, sizeof(float));
    float *ys = calloc((size_t)rows * H, sizeof(float));
    cr_assert(w && mem && xb && yb && ys);
    uint32_t s = 777;
    ws_expert_int8 ex[N];
    const ws_expert_int8 *ep[N];
    ws_err err = {0};
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < 3 * H * I; k++) {
            s = s * 1664525u + 1013904223u;
            w[k] = ws_f32_to_bf16(((float)(s >> 8) / 16777216.0f - 0.5f) * 0.2f);
        }
        ws_expert_bf16 b = {H, I, w, w + 2 * H * I};
        cr_assert_eq(ws_expert_int8_from_bf16(&b, ws_gemm_int8_qmax(), mem + eb * i, &ex[i], &err),
                     0, "%s", err.msg);
        ep[i] = &ex[i];
    }
    for (int i = 0; i < rows * H; i++) {
        s = s * 1664525u + 1013904223u;
        xb[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
    ws_pool *pool = ws_pool_create(2, &err);
    cr_assert(pool, "%s", err.msg);
    cr_assert_eq(ws_experts_run_int8(pool, ep, N, off, xb, yb, &err), 0, "%s", err.msg);
    for (int i = 0; i < N; i++)
        cr_assert_eq(ws_expert_ffn_int8(&ex[i], xb + (size_t)off[i] * H, ys + (size_t)off[i] * H,
                                        m[i], 1, &err),
                     0, "%s", err.msg);
    cr_assert_eq(memcmp(yb, ys, sizeof(float) * rows * H), 0);
    ws_pool_destroy(pool);
    free(w), free(mem), free(xb), free(yb), free(ys);
    ws_gemm_int8_release();
}

/* cpu_expert_weights int8: the experts are quantized at load and run through the int8 GEMM;
 * verify checks every expert's output against the reference; the slots take about half the
 * bytes of bf16 ones; a format no kernel runs is refused, naming it. */
Test(engine, int8_experts_run_and_verify)
{
    load(k_gqa);
    ws_engine_cfg c;
    tiny_cfg(&c);
    c.output = 6;
    c.verify = 1;
    c.cpu_expert_weights = ws_wformat_find("int8");
    cr_assert_not_null(c.cpu_expert_weights);
    ws_run_result r;
    ws_err err = {0};
    cr_assert_eq(ws_engine_run(&c, &r, &err), 0, "%s", err.msg);
    cr_assert_str_eq(r.expert_dtype, "int8");
    cr_assert(!strncmp(r.expert_backend, "onednn ", 7), "%s", r.expert_backend);
    cr_assert(r.expert_verify >= 0 && r.expert_verify <= 1, "int8 experts off by %g x the bound",
              r.expert_verify);
    cr_assert(r.verify_max_err <= BOUND, "%g", r.verify_max_err);
    cr_assert(r.share_experts > 0);
    ws_run_result_free(&r);
    /* bf16 experts: no int8 check */
    c.cpu_expert_weights = NULL;
    c.output = 2;
    cr_assert_eq(ws_engine_run(&c, &r, &err), 0, "%s", err.msg);
    cr_assert_str_eq(r.expert_dtype, "bf16");
    cr_assert(isnan(r.expert_verify));
    ws_run_result_free(&r);
    /* the fixed buffers: 6 expert slots of Qwen3-30B-A3B's shape take 56.6 MB in bf16 and
     * 28.3 MB in int8, so 40 MB holds layers beside int8 slots only */
    ws_model wide = g_m;
    wide.hidden = 2048, wide.moe_intermediate = 768, wide.n_experts = 128;
    ws_engine_cfg cw = c;
    cw.model = &wide;
    const int fit_bf16 = ws_engine_layers_fit(&cw, 40e6);
    cw.cpu_expert_weights = ws_wformat_find("int8");
    const int fit_int8 = ws_engine_layers_fit(&cw, 40e6);
    cr_assert(fit_bf16 == 0 && fit_int8 >= 1, "int8 %d layers, bf16 %d", fit_int8, fit_bf16);
    c.cpu_expert_weights = ws_wformat_find("q4_k_m");
    cr_assert_eq(ws_engine_run(&c, &r, &err), WS_EUNSUP);
    cr_assert(strstr(err.msg, "q4_k_m") && strstr(err.msg, "bf16 or int8"), "%s", err.msg);
}
