/* test_scheduler: how the serving loop fills its steps and keeps its KV (sim/serve.c under
 * runtime/serving.h's schedulers), and the engines' files (runtime/server.h). A mixed step
 * plays the same in the exact player and in the event graph, folded or not; each scheduler
 * keeps its rules on every step (the token budget, decodes beside chunks or not, llama.cpp's
 * passes); preemption by recompute serves everything within the budget; every shipped
 * engine file loads with a reference on every value, and the GPU-dependent defaults follow
 * the GPU. No timing assertions. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "hw.h"
#include "schedule.h"
#include "serve.h"
#include "server.h"
#include "step.h"
#include "store.h"
#include "trace.h"
#include "trace_gen.h"

#define load th_load_hw

/* A mixed step (decodes with streamed XFER pages beside prompt chunks, the chunks' CPU
 * experts streamed or not): the exact player, the graph and the folded graph agree. */
Test(scheduler, mixed_step_plays_alike_everywhere)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "v100-32gb-pcie", &m, &hw);
    ws_err err = {0};
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    ws_cost_model cm;
    cr_assert_eq(ws_cost_model_init(&hw, &m, &cc, &cm, &err), 0, "%s", err.msg);
    const ws_sched_chunk ch[2] = {{4000, 90000}, {189, 0}};
    for (int gpu = 0; gpu < 2; gpu++) {
        for (int xfer = 0; xfer < 2; xfer++) {
            sim_step_in in = {.T = 3 + 4189, .n_cpu = 30000, .m_xfer = xfer ? 60000 : 0,
                              .resident = 600, .n_seqs = 3, .prefill_q = 4189, .chunks = ch,
                              .n_chunks = 2, .write_bytes = 4189 * cm.b_tok,
                              .flush_bytes = 3 * 256 * cm.b_tok, .prefill_gpu = gpu};
            ws_cost_split sp;
            ws_cost_split_terms(&cm, in.resident, 0, 0, 0, &sp);
            const double want = ws_sched_play_step(&cm, &sp, &in, cm.layers, NULL);
            for (int fold = 0; fold < 2; fold++) {
                sim_engine e;
                sim_step st;
                sim_step_out o;
                cr_assert_eq(sim_engine_init(&e, 0, &err), 0);
                cr_assert_eq(sim_step_init(&st, &e, 0, &cm, cm.layers, 16, fold, &err), 0);
                cr_assert_eq(sim_step_run(&st, &in, &o, &err), 0, "%s", err.msg);
                cr_assert(fabs((o.t1 - o.t0) - want) <= 1e-9 * want,
                          "gpu %d xfer %d fold %d: graph %.12g, player %.12g", gpu, xfer, fold,
                          o.t1 - o.t0, want);
                cr_assert_eq(o.fold_inexact, 0);
                sim_step_free(&st);
                sim_engine_free(&e);
            }
        }
    }
    ws_cost_model_free(&cm);
}

/* Requests arriving while others decode. */
static const sim_req k_load[] = {
    {0.0, 3000, 200, NULL, 0}, {0.0, 700, 150, NULL, 0}, {0.2, 5000, 40, NULL, 0}, {0.4, 300, 90, NULL, 0}, {0.5, 2600, 120, NULL, 0},
    {0.9, 9000, 30, NULL, 0},  {1.0, 64, 8, NULL, 0},   {1.2, 1500, 60, NULL, 0}, {3.0, 800, 200, NULL, 0}, {3.1, 4100, 1, NULL, 0},
};
#define N_LOAD ((int)(sizeof k_load / sizeof k_load[0]))

static void run_load(const ws_model *m, const ws_hw *hw, sim_cfg *cfg, sim_results *r)
{
    ws_err err = {0};
    th_list_src l;
    sim_source src;
    th_list_src_init(&l, k_load, N_LOAD, &src);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    cr_assert_eq(sim_run(m, hw, &cc, cfg, &src, r, &err), 0, "%s", err.msg);
    cr_assert_eq(r->tot.served, (uint64_t)N_LOAD, "%s: %llu served, %llu OOM", r->policy,
                 (unsigned long long)r->tot.served, (unsigned long long)r->tot.oom);
    uint64_t pf = 0;
    for (size_t i = 0; i < r->n_step; i++)
        pf += (uint64_t)r->step[i].prefill_tokens;
    uint64_t want = 0;
    for (int i = 0; i < N_LOAD; i++)
        want += (uint64_t)k_load[i].prompt;
    cr_assert_geq(pf, want, "every prompt token is prefilled (again after a preemption)");
}

Test(scheduler, chunked_mixes_decodes_and_chunks_within_the_budget)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-80gb-sxm", &m, &hw);
    const ws_policy_kind pols[] = {WS_POLICY_WRITESCOPE, WS_POLICY_GPU_ONLY, WS_POLICY_KTRANS};
    for (int p = 0; p < 3; p++) {
        sim_cfg cfg;
        sim_cfg_default(&cfg);
        cfg.policy = pols[p];
        cfg.layers = 4;
        cfg.batch = 8;
        cfg.token_budget = 1024;
        cfg.chunk = 700;
        cfg.gpu_kv_budget = 8.0 * 1073741824.0;
        sim_results r;
        run_load(&m, &hw, &cfg, &r);
        int mixed = 0;
        for (size_t i = 0; i < r.n_step; i++) {
            const sim_step_rec *s = &r.step[i];
            cr_assert_leq(s->decode_tokens + s->prefill_tokens, 1024, "step %zu", i);
            mixed += s->decode_tokens > 0 && s->prefill_tokens > 0;
        }
        cr_assert_gt(mixed, 0, "%s: no decode ran beside a prompt", r.policy);
        sim_results_free(&r);
    }
}

Test(scheduler, prefill_first_never_mixes)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-40gb-pcie", &m, &hw);
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.layers = 4;
    cfg.batch = 8;
    cfg.batching = WS_BATCH_PREFILL_FIRST;
    cfg.token_budget = 4096;
    cfg.chunk = 4096;
    sim_results r;
    run_load(&m, &hw, &cfg, &r);
    int packed = 0;
    for (size_t i = 0; i < r.n_step; i++) {
        const sim_step_rec *s = &r.step[i];
        cr_assert(!(s->decode_tokens > 0 && s->prefill_tokens > 0), "step %zu mixes", i);
        cr_assert_leq(s->prefill_tokens, 4096);
        packed += s->prefill_tokens > 0 && s->context > s->prefill_tokens; /* after a prompt */
    }
    cr_assert_gt(packed, 0);
    sim_results_free(&r);
}

/* llama.cpp's slots: passes of at most n_ubatch prompt tokens; a pass with decodes is the
 * iteration's last and holds its remaining prompt tokens. */
Test(scheduler, slots_run_their_budget_in_passes)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-40gb-pcie", &m, &hw);
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.layers = 4;
    cfg.batch = 4;
    cfg.batching = WS_BATCH_SLOTS;
    cfg.token_budget = 2048;
    cfg.chunk = 512;
    sim_results r;
    run_load(&m, &hw, &cfg, &r);
    for (size_t i = 0; i < r.n_step; i++) {
        const sim_step_rec *s = &r.step[i];
        cr_assert_leq(s->decode_tokens + s->prefill_tokens, 512 > s->decode_tokens ? 512 : s->decode_tokens,
                      "step %zu: %d + %d tokens", i, s->decode_tokens, s->prefill_tokens);
    }
    sim_results_free(&r);
}

/* Eight requests of 1000 + 500 tokens in a KV budget of 6000 tokens under gpu-only:
 * recompute admits six prompts, preempts as their outputs grow and still serves every
 * request in full; none reserves whole requests (four at a time) and preempts nothing. */
Test(scheduler, recompute_preempts_and_serves_everything)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-80gb-sxm", &m, &hw);
    for (int mode = WS_PREEMPT_NONE; mode <= WS_PREEMPT_RECOMPUTE; mode++) {
        sim_cfg cfg;
        sim_cfg_default(&cfg);
        cfg.policy = WS_POLICY_GPU_ONLY;
        cfg.layers = 4;
        cfg.batch = 8;
        cfg.preempt = mode;
        cfg.gpu_kv_budget = 6000.0 * 48 * 4 * 128 * 2 * 2; /* 6000 tokens of the model's KV */
        ws_err err = {0};
        sim_closed c;
        sim_source src;
        sim_closed_source(&c, 8, 1000, 500, &src);
        ws_deploy_cfg cc;
        ws_deploy_cfg_default(&cc);
        sim_results r;
        cr_assert_eq(sim_run(&m, &hw, &cc, &cfg, &src, &r, &err), 0, "%s", err.msg);
        cr_assert_eq(r.tot.served, 8);
        if (mode == WS_PREEMPT_NONE)
            cr_assert_eq(r.tot.preempted, 0);
        else
            cr_assert_gt(r.tot.preempted, 0);
        for (size_t i = 0; i < r.n_req; i++)
            cr_assert_eq(r.req[i].generated, 500, "request %zu", i);
        sim_results_free(&r);
    }
}

/* Every shipped engine loads, each value it gives with its reference; vLLM V1's defaults
 * follow the GPU (2048 tokens on an A100, 8192 on an H100). */
Test(scheduler, engine_files_load_with_references)
{
    char names[32][64];
    const int n = ws_server_list(names, 32);
    cr_assert_geq(n, 7, "engines/ holds %d files", n);
    for (int i = 0; i < n; i++) {
        ws_server e;
        ws_err err = {0};
        cr_assert_eq(ws_server_load(names[i], "a100-40gb-pcie", 40.0 * 1073741824, 40960, &e,
                                    &err),
                     0, "%s: %s", names[i], err.msg);
        cr_assert_str_eq(e.name, names[i]);
        for (int f = 0; f < WS_SRV_FIELDS; f++)
            cr_assert_gt(strlen(e.ref[f]), 10, "%s: %s has no reference", names[i],
                         ws_server_field_name(f));
        ws_serving s;
        ws_serving_default(&s);
        ws_deploy_cfg cc;
        ws_deploy_cfg_default(&cc);
        ws_server_kv kv = {0};
        ws_server_apply(&e, &s, &cc, &kv);
        cr_assert(e.set[WS_SRV_STEP_OVERHEAD] ? cc.step_overhead >= 0 : cc.step_overhead < 0,
                  "%s: a published step overhead replaces the GPU profile's, only that",
                  names[i]);
        cr_assert_geq(s.token_budget, 1);
    }
    ws_server a, h;
    ws_err err = {0};
    cr_assert_eq(ws_server_load("vllm-v1", "a100-80gb-sxm", 80.0 * 1073741824, 0, &a, &err), 0);
    cr_assert_eq(ws_server_load("vllm-v1", "h100-sxm", 80.0 * 1073741824, 0, &h, &err), 0);
    cr_assert_eq(a.token_budget, 2048);
    cr_assert_eq(h.token_budget, 8192);
    cr_assert_eq(a.kv.kind, WS_KV_MEM_TOTAL);
    cr_assert_float_eq(a.kv.frac, 0.9, 1e-12);
    cr_assert_neq(ws_server_load("no-such-engine", "h100-sxm", 8e10, 0, &a, &err), 0);
    cr_assert(strstr(err.msg, "vllm-v1") != NULL, "the error lists the engines: %s", err.msg);
}

/* llama.cpp's file: mmap'd (pageable) host weights in one node's DRAM and a measured hand-off
 * cost, carried into the deployment; vLLM's publishes none and leaves the defaults (pinned,
 * pooled, copy c0). */
Test(scheduler, engine_host_weights_and_handoff_reach_the_deployment)
{
    ws_server e;
    ws_err err = {0};
    cr_assert_eq(ws_server_load("llama.cpp", "rtx-4090", 24.0 * 1073741824, 0, &e, &err), 0,
                 "%s", err.msg);
    cr_assert(e.set[WS_SRV_HOST_WEIGHTS] && e.host_pageable == 1);
    cr_assert(e.set[WS_SRV_HANDOFF_C0] && e.handoff_c0 > 1e-5 && e.handoff_c0 < 1e-4);
    ws_serving s;
    ws_serving_default(&s);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    ws_server_apply(&e, &s, &cc, NULL);
    cr_assert_eq(cc.host_weights_pageable, 1);
    cr_assert_eq(cc.one_node_memory, 1); /* mmap'd without --numa: one node's page cache */
    cr_assert_float_eq(cc.handoff_c0, e.handoff_c0, 1e-15);
    cr_assert(strstr(cc.handoff_from, "llama.cpp") != NULL, "%s", cc.handoff_from);
    cr_assert_eq(ws_server_load("vllm-v1", "h100-sxm", 8e10, 0, &e, &err), 0, "%s", err.msg);
    ws_deploy_cfg_default(&cc);
    ws_server_apply(&e, &s, &cc, NULL);
    cr_assert_eq(cc.host_weights_pageable, 0);
    cr_assert_eq(cc.handoff_c0, 0);
    cr_assert_eq(cc.one_node_memory, 0);
}

/* A host_weights name or a hand-off time out of range is refused, naming the key. */
Test(scheduler, engine_bad_host_weights_or_handoff_refused)
{
    const char *base = "{\"name\":\"x\",\"desc\":\"d\","
        "\"scheduler\":{\"value\":\"chunked\",\"ref\":\"r r r r r\"},"
        "\"token_budget\":{\"value\":512,\"ref\":\"r r r r r\"},"
        "\"max_seqs\":{\"value\":8,\"ref\":\"r r r r r\"},"
        "\"chunk\":{\"value\":null,\"ref\":\"r r r r r\"},"
        "\"prefix_cache\":{\"value\":false,\"ref\":\"r r r r r\"},"
        "\"kv_mem_frac\":{\"value\":0.9,\"kv_mem_kind\":\"total\",\"ref\":\"r r r r r\"},"
        "\"preempt\":{\"value\":\"none\",\"ref\":\"r r r r r\"},"
        "\"step_overhead_s\":{\"value\":null,\"ref\":\"r r r r r\"},";
    const char *tails[3][2] = {
        {"\"host_weights\":{\"value\":\"swapped\",\"ref\":\"r r r r r\"},"
         "\"handoff_c0_s\":{\"value\":null,\"ref\":\"r r r r r\"}}", "host_weights"},
        {"\"host_weights\":{\"value\":\"pinned\",\"ref\":\"r r r r r\"},"
         "\"handoff_c0_s\":{\"value\":-1e-5,\"ref\":\"r r r r r\"}}", "handoff_c0_s"},
        {"\"host_weights\":{\"value\":\"pinned\",\"ref\":\"r r r r r\"},"
         "\"handoff_c0_s\":{\"value\":1e-5,\"ref\":\"r r r r r\"},"
         "\"prefill_gpu_tokens\":{\"value\":null,\"ref\":\"r r r r r\"},"
         "\"numa\":{\"value\":null,\"ref\":\"r r r r r\"}}", NULL},
    };
    for (int i = 0; i < 3; i++) {
        char path[] = "/tmp/ws_engine_XXXXXX.json";
        int fd = mkstemps(path, 5);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, base, strlen(base)), (ssize_t)strlen(base));
        cr_assert_eq(write(fd, tails[i][0], strlen(tails[i][0])), (ssize_t)strlen(tails[i][0]));
        close(fd);
        ws_server e;
        ws_err err = {0};
        const int rc = ws_server_load(path, "h100-sxm", 8e10, 0, &e, &err);
        unlink(path);
        if (tails[i][1]) {
            cr_assert_neq(rc, 0, "case %d accepted", i);
            cr_assert(strstr(err.msg, tails[i][1]) != NULL, "%s", err.msg);
        } else {
            cr_assert_eq(rc, 0, "%s", err.msg);
            cr_assert_float_eq(e.handoff_c0, 1e-5, 1e-18);
        }
    }
}

/* An engine file that is JSON but not an object, or not JSON: one line, a line number only
 * where the parser has one. */
Test(scheduler, engine_file_not_an_object_is_one_line)
{
    const char *texts[2] = {"[1, 2]", "{\"name\": \n"};
    for (int i = 0; i < 2; i++) {
        char path[] = "/tmp/ws_engine_XXXXXX.json";
        int fd = mkstemps(path, 5);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, texts[i], strlen(texts[i])), (ssize_t)strlen(texts[i]));
        close(fd);
        ws_server e;
        ws_err err = {0};
        cr_assert_neq(ws_server_load(path, "h100-sxm", 8e10, 0, &e, &err), 0);
        unlink(path);
        cr_assert(strstr(err.msg, "-1") == NULL && strchr(err.msg, '\n') == NULL, "%s", err.msg);
        cr_assert(strstr(err.msg, i ? "not JSON" : "not a JSON object") != NULL, "%s", err.msg);
    }
}

/* kt-kernel names SGLang as its base: SGLang's values where it gives none, its own (`kt
 * run`'s defaults) where it does, each with its reference; the threshold reaches the serving
 * configuration. A base with a base of its own, or a path as a base, is refused. */
Test(scheduler, engine_base_then_its_own_values)
{
    ws_server sg, kt;
    ws_err err = {0};
    const double mem = 48.0 * 1073741824;
    cr_assert_eq(ws_server_load("sglang", "rtx-4090-48gb", mem, 0, &sg, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_server_load("kt-kernel", "rtx-4090-48gb", mem, 0, &kt, &err), 0, "%s",
                 err.msg);
    cr_assert_str_eq(kt.name, "kt-kernel");
    cr_assert_eq(kt.batching, sg.batching);
    cr_assert_eq(kt.prefix_cache, sg.prefix_cache);
    cr_assert_str_eq(kt.ref[WS_SRV_SCHEDULER], sg.ref[WS_SRV_SCHEDULER]);
    cr_assert(!sg.set[WS_SRV_PREFILL_GPU]);
    cr_assert(kt.set[WS_SRV_PREFILL_GPU] && kt.prefill_gpu_tokens == 4096);
    cr_assert(kt.set[WS_SRV_CHUNK] && kt.chunk == 4096 && kt.token_budget == 4096);
    cr_assert(strstr(kt.ref[WS_SRV_PREFILL_GPU], "run.py") != NULL);
    ws_serving s;
    ws_serving_default(&s);
    ws_server_apply(&kt, &s, NULL, NULL);
    cr_assert_eq(s.prefill_gpu_tokens, 4096);
    const char *bad[][2] = {{"{\"name\":\"x\",\"desc\":\"d\",\"base\":\"kt-kernel\"}",
                             "has no base of its own"},
                            {"{\"name\":\"x\",\"desc\":\"d\",\"base\":\"../sglang\"}",
                             "not an engine's name"},
                            {"{\"name\":\"x\",\"desc\":\"d\",\"base\":\"sglang\","
                             "\"prefill_gpu_tokens\":{\"value\":0,\"ref\":\"r r r\"}}",
                             "prefill_gpu_tokens"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char path[] = "/tmp/ws_engine_XXXXXX.json";
        int fd = mkstemps(path, 5);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, bad[i][0], strlen(bad[i][0])), (ssize_t)strlen(bad[i][0]));
        close(fd);
        cr_assert_neq(ws_server_load(path, "h100-sxm", 8e10, 0, &kt, &err), 0, "%s", bad[i][0]);
        cr_assert(strstr(err.msg, bad[i][1]) != NULL, "%s", err.msg);
        unlink(path);
    }
}

/* A value without its reference is refused. */
Test(scheduler, engine_value_without_reference_refused)
{
    char path[] = "/tmp/ws_engine_XXXXXX.json";
    int fd = mkstemps(path, 5);
    cr_assert_geq(fd, 0);
    const char *text =
        "{\"name\":\"x\",\"desc\":\"d\",\"scheduler\":{\"value\":\"chunked\"}}";
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    ws_server e;
    ws_err err = {0};
    cr_assert_neq(ws_server_load(path, "h100-sxm", 8e10, 0, &e, &err), 0);
    cr_assert(strstr(err.msg, "ref") != NULL, "%s", err.msg);
    unlink(path);
}

/* A shared system prompt: with the cache on, later requests find its blocks cached and
 * prefill only the rest (every request still served in full); the hits never exceed the
 * trace's own repeats. A tight GPU KV budget under gpu-only evicts and still serves all. */
Test(scheduler, prefix_cache_skips_cached_blocks)
{
    ws_model m;
    ws_hw hw;
    load("qwen3-30b-a3b", "a100-80gb-sxm", &m, &hw);
    const double budgets[2] = {16.0 * 1073741824.0, 12000.0 * 48 * 4 * 128 * 2 * 2};
    for (int pol = 0; pol < 2; pol++) {
        for (int bi = 0; bi < 2; bi++) {
            uint64_t pf[2] = {0, 0};
            for (int on = 0; on < 2; on++) {
                ws_err err = {0};
                ws_trace_gen g = {.arrivals = WS_ARRIVALS_POISSON, .rate = 2, .requests = 30,
                                  .shared_prefix = 2048, .seed = 3};
                cr_assert_eq(ws_trace_len_parse("uniform:2100:4000", &g.prompt, &err), 0);
                cr_assert_eq(ws_trace_len_parse("uniform:10:60", &g.output, &err), 0);
                ws_trace *t;
                cr_assert_eq(ws_trace_gen_open(&g, &t, &err), 0, "%s", err.msg);
                sim_source src;
                cr_assert_eq(sim_trace_source(t, &src, &err), 0);
                sim_cfg cfg;
                sim_cfg_default(&cfg);
                cfg.policy = pol ? WS_POLICY_GPU_ONLY : WS_POLICY_WRITESCOPE;
                cfg.layers = 4;
                cfg.batch = 8;
                cfg.prefix_cache = on;
                cfg.gpu_kv_budget = budgets[bi];
                cfg.preempt = WS_PREEMPT_RECOMPUTE;
                ws_deploy_cfg cc;
                ws_deploy_cfg_default(&cc);
                sim_results r;
                cr_assert_eq(sim_run(&m, &hw, &cc, &cfg, &src, &r, &err), 0, "%s", err.msg);
                ws_trace_close(t);
                cr_assert_eq(r.tot.served, 30, "%s on %d budget %d", r.policy, on, bi);
                for (size_t i = 0; i < r.n_req; i++)
                    cr_assert_eq(r.req[i].generated, r.req[i].output);
                for (size_t i = 0; i < r.n_step; i++)
                    pf[on] += (uint64_t)r.step[i].prefill_tokens;
                if (on) {
                    cr_assert_eq(r.tot.prefix_blocks, 30 * 4, "four shared blocks a request");
                    cr_assert_gt(r.tot.prefix_hits, 0, "%s", r.policy);
                    cr_assert_leq(r.tot.prefix_hits, r.tot.prefix_repeats);
                    cr_assert_eq(r.tot.prefix_repeats, 29 * 4);
                    cr_assert_str_eq(r.tot.prefix_tier, pol ? "gpu" : "host");
                }
                sim_results_free(&r);
            }
            cr_assert_lt(pf[1], pf[0], "the hits are not prefilled again");
        }
    }
}
