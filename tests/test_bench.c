/* test_bench: the bench library (calib/probe/bench.c) called directly, and end-to-end runs
 * of `writescope bench membw|attn-cpu` on small sizes: the JSON keys the calibrator and the
 * report rely on, the byte and flop accounting, the instruction-path choice (--isa,
 * WRITESCOPE_ISA) and one-line errors. No timing thresholds: only that figures are positive
 * and consistent. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "attn_cpu.h"
#include "bench.h"
#include "helpers.h"
#include "membw.h"
#include "ws_util.h"

static double num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    cr_assert(json_is_number(v), "key %s missing or not a number", key);
    return json_number_value(v);
}

Test(bench, attn_cpu_gqa_json_keys_and_accounting)
{
    const char *args[] = {"bench", "attn-cpu", "--model", "qwen3-30b-a3b", "--ctx", "600",
                          "--batch", "2", "--read-mib", "16", "--repeats", "3", "--page", "64",
                          "--threads", "2", "--json", NULL};
    json_t *o = th_writescope_json(args, NULL);
    /* Qwen3-30B-A3B: 4 KV heads x 128 x (K + V) x 2 bytes = 2048 bytes per token. */
    cr_assert_eq(num(o, "kv_bytes"), 2.0 * 600 * 2048);
    cr_assert_eq(num(o, "flops"), 2.0 * 600 * 2 * 32 * 256);
    const char *keys[] = {"seconds", "kv_gbps", "gflops", "read_bw_gbps", "fraction_of_read_bw",
                          "peak_gflops", "roofline_fraction"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        cr_assert(num(o, keys[i]) > 0 && isfinite(num(o, keys[i])), "%s", keys[i]);
    cr_assert_float_eq(num(o, "kv_gbps"), num(o, "kv_bytes") / num(o, "seconds") / 1e9, 1e-6);
    /* each printed to 10 significant digits (cli_print_json): their ratio to ~2e-10 each */
    cr_assert_float_eq(num(o, "fraction_of_read_bw"), num(o, "kv_gbps") / num(o, "read_bw_gbps"),
                       1e-8 * num(o, "fraction_of_read_bw"));
    /* per round: the kernel's rate over the read pass's before it, quartiles over 3 rounds */
    json_t *fr = json_object_get(o, "fraction_of_read_bw_rounds");
    cr_assert(json_is_object(fr), "fraction_of_read_bw_rounds missing");
    cr_assert(num(fr, "q1") > 0 && num(fr, "q1") <= num(fr, "median") &&
              num(fr, "median") <= num(fr, "q3") && isfinite(num(fr, "q3")));
    cr_assert_eq(num(o, "threads"), 2);
    cr_assert_str_eq(json_string_value(json_object_get(o, "source")), "measured");
    /* the path asked for (the best, or WRITESCOPE_ISA: `WRITESCOPE_ISA=avx2 make test` runs
     * this too) and the one that serves Qwen3's shape */
    ws_isa best;
    cr_assert_eq(ws_isa_resolve(WS_ISA_AUTO, &best, NULL), 0);
    ws_attn_prec prec; /* the default, or WRITESCOPE_PRECISION */
    cr_assert_eq(ws_attn_prec_resolve(WS_PREC_AUTO, &prec, NULL), 0);
    const ws_kv_layout kv = {.page_tokens = 64, .n_kv_heads = 4, .d_k = 128, .d_v = 128,
                             .dtype = WS_DT_BF16, .v_pairs = 1, .k_tiles = 1};
    cr_assert_str_eq(json_string_value(json_object_get(o, "isa")),
                     ws_isa_name(ws_attn_cpu_path(&kv, 32, best, prec)));
    /* V and K as the CPU region stores them for that path: token pairs and tiles on amx and
     * the vector paths (the fused loop reads them as stored), rows on scalar. */
    cr_assert_str_eq(json_string_value(json_object_get(o, "v_layout")),
                     best == WS_ISA_SCALAR ? "rows" : "pairs");
    cr_assert_str_eq(json_string_value(json_object_get(o, "k_layout")),
                     best == WS_ISA_SCALAR ? "rows" : "tiles");
    /* in the bf16 precision (the default) avx512bf16 runs GQA on VDPBF16PS, rounding p */
    const int dp = best == WS_ISA_AVX512_BF16 && prec == WS_PREC_BF16;
    const char *loop = best == WS_ISA_AMX      ? "amx"
                       : best == WS_ISA_SCALAR ? "generic"
                       : dp                    ? "dpbf16"
                                               : "fma";
    cr_assert_str_eq(json_string_value(json_object_get(o, "loop")), loop);
    /* the precision run and the roofline's instruction: the fastest this CPU has for bf16
     * KV, whatever the loop */
    cr_assert_str_eq(json_string_value(json_object_get(o, "precision")), ws_attn_prec_name(prec));
    /* p rounded to bf16: VDPBF16PS, and AMX's bf16 products (Qwen3's one head group of 8 on K
     * tiles takes them) */
    cr_assert_eq(json_is_true(json_object_get(o, "p_bf16")),
                 dp || (best == WS_ISA_AMX && prec == WS_PREC_BF16));
    const char *instr = json_string_value(json_object_get(o, "peak_instr"));
    cr_assert(instr, "peak_instr missing");
    if (ws_isa_supported(WS_ISA_AMX))
        cr_assert_str_eq(instr, "tdpbf16ps");
    else if (!ws_isa_supported(WS_ISA_AVX512_BF16))
        cr_assert(strstr(instr, "vfmadd") || !strcmp(instr, "scalar"), "%s", instr);
    else
        cr_assert(!strcmp(instr, "vdpbf16ps") || strstr(instr, "vfmadd"), "%s", instr);
    json_decref(o);
    const char *rows[] = {"bench", "attn-cpu", "--model", "qwen3-30b-a3b", "--ctx", "64",
                          "--batch", "1", "--read-mib", "16", "--repeats", "1", "--page", "32",
                          "--v-layout", "rows", "--json", NULL};
    o = th_writescope_json(rows, NULL);
    cr_assert_str_eq(json_string_value(json_object_get(o, "v_layout")), "rows");
    /* V in rows runs the same loop: amx reads rows, the fused FMA loop gathers them into
     * pairs, scalar has only the generic one */
    cr_assert_str_eq(json_string_value(json_object_get(o, "loop")), loop);
    json_decref(o);
}

/* Without --repeats the bench takes as many rounds as fill a few seconds: an odd count
 * (the median is one round's figure) within its bounds, 11..101. */
Test(bench, attn_cpu_repeats_chosen_by_time)
{
    const char *args[] = {
        "bench", "attn-cpu", "--model", "qwen3-30b-a3b", "--ctx", "64",     "--batch",
        "1",     "--page",   "32",      "--read-mib",    "16",    "--json", NULL};
    json_t *o = th_writescope_json(args, NULL);
    const double r = num(o, "repeats");
    cr_assert(r >= 11 && r <= 101 && fmod(r, 2) == 1, "repeats %g", r);
    cr_assert(num(o, "seconds_min") <= num(o, "seconds") &&
              num(o, "seconds") <= num(o, "seconds_max"));
    json_decref(o);
}

Test(bench, attn_cpu_mla_sparse_and_forced_paths)
{
    const char *mla[] = {"bench", "attn-cpu", "--model", "deepseek-v2-lite", "--ctx", "512",
                         "--batch", "1", "--read-mib", "16", "--repeats", "3", "--page", "64",
                         "--sparse-topk", "128", "--isa", "scalar", "--json", NULL};
    json_t *o = th_writescope_json(mla, NULL);
    cr_assert_eq(num(o, "d_k"), 576);
    cr_assert_eq(num(o, "d_v"), 512);
    cr_assert_eq(num(o, "kv_bytes"), 128.0 * 576 * 2); /* the gathered bytes only */
    cr_assert_str_eq(json_string_value(json_object_get(o, "sparse")), "pages");
    cr_assert_str_eq(json_string_value(json_object_get(o, "isa")), "scalar");
    cr_assert_str_eq(json_string_value(json_object_get(o, "v_layout")), "in K");
    const char *bound = json_string_value(json_object_get(o, "bound"));
    cr_assert(!strcmp(bound, "compute") || !strcmp(bound, "memory"), "%s", bound);
    /* no gather pass for page lists */
    cr_assert_null(json_object_get(o, "gather_bw_gbps"));
    json_decref(o);
    /* Token lists: a gather pass over rows of a K row's size, in the same run. */
    const char *tok[] = {"bench",         "attn-cpu", "--model",       "deepseek-v2-lite",
                         "--ctx",         "512",      "--batch",       "2",
                         "--read-mib",    "16",       "--repeats",     "2",
                         "--page",        "64",       "--sparse-topk", "100",
                         "--sparse-mode", "tokens",   "--json",        NULL};
    o = th_writescope_json(tok, NULL);
    cr_assert_str_eq(json_string_value(json_object_get(o, "sparse")), "tokens");
    cr_assert_eq(num(o, "gather_segment_bytes"), 576 * 2);
    cr_assert(num(o, "gather_bw_gbps") > 0);
    cr_assert_float_eq(num(o, "fraction_of_gather_bw"),
                       num(o, "kv_gbps") / num(o, "gather_bw_gbps"),
                       1e-8 * num(o, "fraction_of_gather_bw"));
    json_decref(o);
    /* The environment variable forces a path too. */
    const char *gqa[] = {"bench", "attn-cpu", "--model", "mixtral-8x7b", "--ctx", "100",
                         "--batch", "1", "--read-mib", "16", "--repeats", "1", "--page", "32",
                         "--dtype", "fp16", "--json", NULL};
    const char *env[] = {"WRITESCOPE_ISA=scalar", NULL};
    o = th_writescope_json(gqa, env);
    cr_assert_str_eq(json_string_value(json_object_get(o, "isa")), "scalar");
    cr_assert_str_eq(json_string_value(json_object_get(o, "dtype")), "fp16");
    /* amx hands fp16 KV to avx512, and the report says which path ran. */
    if (ws_isa_supported(WS_ISA_AMX)) {
        const char *f16[] = {"bench", "attn-cpu", "--model", "qwen3-30b-a3b", "--ctx", "64",
                             "--batch", "1", "--read-mib", "16", "--repeats", "1", "--page",
                             "32", "--dtype", "fp16", "--isa", "amx", "--json", NULL};
        json_t *h = th_writescope_json(f16, NULL);
        cr_assert_str_eq(json_string_value(json_object_get(h, "isa")), "avx512");
        cr_assert_str_eq(json_string_value(json_object_get(h, "isa_requested")), "amx");
        cr_assert_str_eq(json_string_value(json_object_get(h, "loop")), "fma");
        json_decref(h);
    }
    json_decref(o);
}

/* Every path --isa can ask for, in each precision, as a CPU whose best it is would run
 * Qwen3's shape: the path that serves it, its block loop and the layouts the CPU region is
 * written in (avx512bf16 runs GQA on VDPBF16PS in the bf16 precision and on the fused FMA
 * loop in the exact one, where it reports avx512). A path this CPU lacks is refused in one
 * line, as on a host without it. */
Test(bench, attn_cpu_each_path_reports_what_serves)
{
    static const struct {
        const char *ask, *prec, *isa, *loop, *k_layout, *v_layout;
        ws_isa id;
    } paths[] = {
        {"scalar", "bf16", "scalar", "generic", "rows", "rows", WS_ISA_SCALAR},
        {"avx2", "bf16", "avx2", "fma", "tiles", "pairs", WS_ISA_AVX2},
        {"avx512", "exact", "avx512", "fma", "tiles", "pairs", WS_ISA_AVX512},
        {"avx512bf16", "exact", "avx512", "fma", "tiles", "pairs", WS_ISA_AVX512_BF16},
        {"avx512bf16", "bf16", "avx512bf16", "dpbf16", "tiles", "pairs", WS_ISA_AVX512_BF16},
        {"amx", "bf16", "amx", "amx", "tiles", "pairs", WS_ISA_AMX},
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        const char *args[] = {"bench",      "attn-cpu",    "--model",     "qwen3-30b-a3b",
                              "--ctx",      "128",         "--batch",     "1",
                              "--read-mib", "16",          "--page",      "64",
                              "--repeats",  "1",           "--isa",       paths[i].ask,
                              "--json",     "--precision", paths[i].prec, NULL};
        if (!ws_isa_supported(paths[i].id)) {
            th_run r = th_writescope(args, NULL);
            cr_assert_eq(r.status, 1, "%s: exit %d", paths[i].ask, r.status);
            cr_assert(strstr(r.err, "not supported by this CPU"), "%s: %s", paths[i].ask, r.err);
            th_run_free(&r);
            continue;
        }
        json_t *o = th_writescope_json(args, NULL);
        const struct {
            const char *key, *want;
        } keys[] = {{"isa_requested", paths[i].ask},
                    {"precision", paths[i].prec},
                    {"isa", paths[i].isa},
                    {"loop", paths[i].loop},
                    {"k_layout", paths[i].k_layout},
                    {"v_layout", paths[i].v_layout}};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            const char *got = json_string_value(json_object_get(o, keys[k].key));
            cr_assert(got && !strcmp(got, keys[k].want), "--isa %s --precision %s: %s is %s, not %s",
                      paths[i].ask, paths[i].prec, keys[k].key, got ? got : "(missing)",
                      keys[k].want);
        }
        json_decref(o);
    }
}

/* --precision: as asked or from WRITESCOPE_PRECISION, with p rounded where the loop does
 * (dpbf16: MLA on avx512bf16, bf16 only); anything else is a usage error. */
Test(bench, attn_cpu_precision)
{
    const ws_kv_layout kv = {.page_tokens = 64, .n_kv_heads = 1, .d_k = 576, .d_v = 512,
                             .v_shares_k = 1, .dtype = WS_DT_BF16}; /* DeepSeek-V2-Lite */
    ws_isa best;
    cr_assert_eq(ws_isa_resolve(WS_ISA_AUTO, &best, NULL), 0);
    const char *want[2] = {"exact", "bf16"};
    for (int i = 0; i < 2; i++) {
        const char *args[] = {"bench", "attn-cpu", "--model", "deepseek-v2-lite", "--ctx", "128",
                              "--batch", "1", "--read-mib", "16", "--page", "64", "--repeats",
                              "1", "--precision", want[i], "--json", NULL};
        json_t *o = th_writescope_json(args, NULL);
        cr_assert_str_eq(json_string_value(json_object_get(o, "precision")), want[i]);
        cr_assert_eq(json_is_true(json_object_get(o, "p_bf16")),
                     ws_attn_cpu_p_bf16(&kv, 16, best, i ? WS_PREC_BF16 : WS_PREC_EXACT));
        json_decref(o);
    }
    const char *env[] = {"WRITESCOPE_PRECISION=exact", NULL};
    const char *dflt[] = {"bench", "attn-cpu", "--model", "deepseek-v2-lite", "--ctx", "128",
                          "--batch", "1", "--read-mib", "16", "--page", "64", "--repeats", "1",
                          "--json", NULL};
    json_t *o = th_writescope_json(dflt, env);
    cr_assert_str_eq(json_string_value(json_object_get(o, "precision")), "exact");
    json_decref(o);
    const char *bad[] = {"bench", "attn-cpu", "--model", "deepseek-v2-lite", "--ctx", "128",
                         "--batch", "1", "--precision", "fp8", NULL};
    th_run r = th_writescope(bad, NULL);
    cr_assert_eq(r.status, 2, "exit %d", r.status);
    cr_assert(strstr(r.err, "--precision"), "%s", r.err);
    th_run_free(&r);
}

Test(bench, attn_cpu_scaling_same_run)
{
    const char *args[] = {"bench", "attn-cpu", "--model", "qwen3-30b-a3b", "--ctx", "600",
                          "--batch", "2", "--read-mib", "16", "--repeats", "2", "--page", "64",
                          "--threads", "2", "--scaling", "--json", NULL};
    json_t *o = th_writescope_json(args, NULL);
    cr_assert_eq(num(o, "threads"), 2);
    json_t *sc = json_object_get(o, "scaling");
    cr_assert(json_is_object(sc), "no scaling object");
    cr_assert_eq(num(sc, "threads"), 1);
    const char *keys[] = {"seconds", "kv_gbps", "read_bw_gbps", "fraction_of_read_bw",
                          "peak_gflops", "roofline_fraction", "speedup", "read_bw_speedup"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        cr_assert(num(sc, keys[i]) > 0 && isfinite(num(sc, keys[i])), "%s", keys[i]);
    /* the same bytes on one thread: its rate from its own time */
    cr_assert_float_eq(num(sc, "kv_gbps"), num(o, "kv_bytes") / num(sc, "seconds") / 1e9, 1e-6);
    /* The JSON carries 10 significant digits: a ratio of two printed values matches the
     * printed ratio to a few parts in 1e10 of itself (an absolute 1e-9 failed now and then). */
    const double sp = num(sc, "seconds") / num(o, "seconds");
    const double rsp = num(o, "read_bw_gbps") / num(sc, "read_bw_gbps");
    cr_assert_float_eq(num(sc, "speedup"), sp, 1e-8 * sp);
    cr_assert_float_eq(num(sc, "read_bw_speedup"), rsp, 1e-8 * rsp);
    json_decref(o);
    /* without --scaling there is no such key */
    const char *plain[] = {"bench", "attn-cpu", "--model", "qwen3-30b-a3b", "--ctx", "64",
                           "--batch", "1", "--read-mib", "16", "--repeats", "1", "--json", NULL};
    o = th_writescope_json(plain, NULL);
    cr_assert_null(json_object_get(o, "scaling"));
    json_decref(o);
}

Test(bench, membw_json)
{
    const char *args[] = {"bench", "membw", "--mib", "16", "--repeats", "3", "--json", NULL};
    json_t *o = th_writescope_json(args, NULL);
    cr_assert(num(o, "read_bw_gbps") > 0);
    cr_assert(num(o, "triad_gbps") > 0);
    cr_assert(num(o, "peak_gflops") > 0);
    /* the cross-check of the same run, and how the caches were defeated */
    /* (the median of the rounds' ratios: close to, not equal to, the medians' ratio) */
    const double q = num(o, "triad_over_read");
    cr_assert(q > 0 && isfinite(q));
    const char *check = json_string_value(json_object_get(o, "triad_read_check"));
    cr_assert(check && (!strcmp(check, "agree") || !strcmp(check, "disagree")));
    cr_assert_eq(!strcmp(check, "agree"), q >= WS_MEMBW_TRIAD_READ_LO && q <= WS_MEMBW_TRIAD_READ_HI);
    cr_assert_str_eq(json_string_value(json_object_get(o, "cache")), WS_MEMBW_METHOD);
    json_t *ga = json_object_get(o, "gather");
    cr_assert(json_is_array(ga) && json_array_size(ga) == 4, "gather: an array of 4 sizes");
    for (size_t i = 0; i < json_array_size(ga); i++) {
        json_t *e = json_array_get(ga, i);
        cr_assert(num(e, "segment_bytes") >= 64 && num(e, "gbps") > 0);
        cr_assert_float_eq(num(e, "fraction_of_read_bw"), num(e, "gbps") / num(o, "read_bw_gbps"),
                           1e-8 * num(e, "fraction_of_read_bw"));
    }
    json_decref(o);
}

Test(bench, bad_input)
{
    struct {
        const char *args[16];
        int status;
        const char *needle;
    } cases[] = {
        {{"bench", NULL}, 2, "missing"},
        {{"bench", "gemm", NULL}, 2, "unknown benchmark"},
        {{"bench", "attn-cpu", "--model", "qwen3-30b-a3b", NULL}, 2, "needs --model, --ctx"},
        {{"bench", "attn-cpu", "--model", "qwen3-30b-a3b", "--ctx", "64", "--batch", "1",
          "--dtype", "fp32", NULL}, 2, "bf16 or fp16"},
        {{"bench", "attn-cpu", "--model", "qwen3-30b-a3b", "--ctx", "64", "--batch", "1",
          "--isa", "neon", NULL}, 2, "unknown --isa"},
        {{"bench", "attn-cpu", "--model", "nosuchmodel", "--ctx", "64", "--batch", "1", NULL}, 1,
         "nosuchmodel"},
        {{"bench", "attn-cpu", "--model", "qwen3-30b-a3b", "--ctx", "1024", "--batch", "1",
          "--read-mib", "16", "--sparse-topk", "100", NULL}, 1, "multiple of the page"},
        {{"bench", "attn-cpu", "--model", "qwen3-30b-a3b", "--ctx", "100000000", "--batch", "64",
          NULL}, 1, "more than this benchmark allows"},
        {{"bench", "membw", "--ctx", "5", NULL}, 2, "no attn-cpu options"},
        {{"bench", "membw", "--scaling", NULL}, 2, "no attn-cpu options"},
        {{"bench", "attn-cpu", "--model", "qwen3-30b-a3b", "--ctx", "64", "--batch", "1",
          "--read-mib", "16", "--threads", "1", "--scaling", NULL}, 1, "--threads 2 or more"},
        {{"bench", "attn-cpu", "--model", "qwen3-30b-a3b", "--ctx", "64", "--batch", "1",
          "--v-layout", "cols", NULL}, 2, "auto, rows or pairs"},
        {{"bench", "attn-cpu", "--model", "deepseek-v2-lite", "--ctx", "64", "--batch", "1",
          "--v-layout", "pairs", NULL}, 1, "separate V block"},
        {{"bench", "attn-cpu", "--model", "qwen3-30b-a3b", "--ctx", "64", "--batch", "1",
          "--page", "33", "--v-layout", "pairs", NULL}, 1, "even --page"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        th_run r = th_writescope(cases[i].args, NULL);
        cr_assert_eq(r.status, cases[i].status, "case %zu: exit %d, stderr %s", i, r.status, r.err);
        cr_assert_neq(strstr(r.err, cases[i].needle), NULL, "case %zu: %s", i, r.err);
        th_run_free(&r);
    }
    const char *env[] = {"WRITESCOPE_ISA=bogus", NULL};
    const char *args[] = {"bench", "membw", "--mib", "16", NULL};
    th_run r = th_writescope(args, env);
    cr_assert_eq(r.status, 1);
    cr_assert_neq(strstr(r.err, "WRITESCOPE_ISA=bogus"), NULL, "%s", r.err);
    th_run_free(&r);
}

/* ---- the library, called directly ---- */

static ws_model load_model(const char *name)
{
    ws_err err = {0};
    char path[WS_PATH_MAX];
    ws_model m;
    cr_assert_eq(ws_model_resolve(name, path, sizeof path, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_model_load(path, &m, &err), 0, "%s", err.msg);
    return m;
}

Test(bench_lib, membw_figures_and_check)
{
    ws_err err = {0};
    ws_pool *p = ws_pool_create(2, &err);
    cr_assert_not_null(p, "%s", err.msg);
    ws_isa isa;
    cr_assert_eq(ws_isa_resolve(WS_ISA_AUTO, &isa, &err), 0);
    ws_bench_membw r;
    const ws_bench_membw_cfg cfg = {.bytes = 16u << 20, .repeats = 2, .isa = isa};
    const unsigned long long e0 = ws_membw_evicted_bytes();
    cr_assert_eq(ws_bench_membw_run(p, &cfg, &r, &err), 0, "%s", err.msg);
    /* read + 4 gathers, 2 rounds, and 2 triad repeats, each evicted first */
    cr_assert_geq(ws_membw_evicted_bytes() - e0, 2ull * 5 * (15u << 20));
    cr_assert(r.read_gbps > 0 && r.triad_gbps > 0 && r.peak_gflops > 0);
    for (int i = 0; i < WS_BENCH_GATHER_N; i++)
        cr_assert(r.gather_gbps[i] > 0 && isfinite(r.gather_gbps[i]));
    /* the check is of the rounds' ratios, the figures are medians of the rounds */
    cr_assert(r.triad_over_read > 0 && isfinite(r.triad_over_read));
    cr_assert_eq(r.triad_agrees, r.triad_over_read >= WS_MEMBW_TRIAD_READ_LO &&
                                     r.triad_over_read <= WS_MEMBW_TRIAD_READ_HI);
    const ws_bench_membw_cfg tiny = {.bytes = 100, .repeats = 1, .isa = isa};
    cr_assert_eq(ws_bench_membw_run(p, &tiny, &r, &err), WS_EINVAL);
    ws_pool_destroy(p);
}

/* The figures from given round times: medians, extremes, quartiles of the per-round
 * fraction, the roofline side (no clock involved). */
Test(bench_lib, attn_figures_from_rounds)
{
    double secs[5] = {0.5, 0.1, 0.2, 0.4, 0.3}, rsecs[5] = {0.1, 0.1, 0.1, 0.1, 0.1};
    double gsecs[5] = {0.2, 0.2, 0.2, 0.2, 0.2};
    /* covered 1e9 bytes per read pass: 10 GB/s; the kernel reads 1e9 bytes */
    ws_bench_attn_fig g =
        ws_bench_attn_figures(2, secs, rsecs, gsecs, 5, 1000000000, 500000000, 1e9, 4e9, 100);
    cr_assert_eq(g.threads, 2);
    cr_assert_float_eq(g.sec, 0.3, 1e-12);
    cr_assert_float_eq(g.smin, 0.1, 1e-12);
    cr_assert_float_eq(g.smax, 0.5, 1e-12);
    cr_assert_float_eq(g.rd, 10.0, 1e-9);
    cr_assert_float_eq(g.gb, 2.5, 1e-9);
    cr_assert_float_eq(g.kv_gbps, 1e9 / 0.3 / 1e9, 1e-9);
    /* per round: kernel rate over read rate = 0.1 / secs[r]: 0.2 .. 1, median 1/3 */
    cr_assert_float_eq(g.fr_med, 0.1 / 0.3, 1e-9);
    cr_assert_float_eq(g.fr_q1, 0.25, 1e-9);
    cr_assert_float_eq(g.fr_q3, 0.5, 1e-9);
    /* AI 4 flop/byte x 10 GB/s = 40 GFLOP/s < the 100 peak: memory-bound */
    cr_assert_eq(g.compute_bound, 0);
    cr_assert_float_eq(g.roof, 40.0, 1e-9);
    ws_bench_attn_fig n = ws_bench_attn_figures(1, secs, rsecs, NULL, 5, 1000000000, 0, 1e9, 4e9, 1);
    cr_assert_eq(n.gb, 0);
    cr_assert_eq(n.compute_bound, 1);
    cr_assert_float_eq(n.roof, 1.0, 1e-12);
}

Test(bench_lib, attn_run_small)
{
    ws_err err = {0};
    ws_pool *p = ws_pool_create(2, &err);
    cr_assert_not_null(p, "%s", err.msg);
    ws_isa isa;
    cr_assert_eq(ws_isa_resolve(WS_ISA_AUTO, &isa, &err), 0);
    ws_model m = load_model("qwen3-30b-a3b");
    ws_bench_attn_cfg c = {.model = &m, .dtype = WS_DT_BF16, .page = 64, .ctx = 600, .batch = 2,
                           .topk = -1, .mode = WS_SPARSE_PAGES, .seed = 1, .v_layout = -1,
                           .k_layout = -1, .isa = isa, .repeats = 3, .read_bytes = 16u << 20};
    ws_bench_attn r;
    const unsigned long long e0 = ws_membw_evicted_bytes();
    cr_assert_eq(ws_bench_attn_run(p, &c, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.repeats, 3);
    cr_assert_eq(r.kv_bytes, 2.0 * 600 * 2048);
    cr_assert_eq(r.flops, 2.0 * 600 * 2 * 32 * 256);
    cr_assert_eq(r.gather_seg, 0);
    cr_assert_eq(r.problem.sparse, WS_SPARSE_NONE);
    cr_assert_eq(r.fig.threads, 2);
    cr_assert(r.fig.sec > 0 && r.fig.rd > 0 && r.fig.fr_med > 0 && r.fig.pk > 0);
    cr_assert_eq(r.fig1.threads, 0, "no one-thread figures without scaling");
    /* 4 rounds (warm-up + 3): each evicts the read range and the KV pages */
    cr_assert_geq(ws_membw_evicted_bytes() - e0, 4 * ((15u << 20) + 2 * 10 * 64 * 2048ull));
    /* token lists of a sparse model: the model's top-k, a gather pass of K rows; scaling */
    ws_model s = load_model("deepseek-v4-flash");
    c.model = &s;
    c.ctx = 4096, c.batch = 1, c.page = 64, c.mode = WS_SPARSE_TOKENS, c.scaling = 1;
    c.repeats = 1;
    cr_assert_eq(ws_bench_attn_run(p, &c, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.problem.sparse, WS_SPARSE_TOKENS);
    cr_assert_eq(r.problem.topk, s.index_topk);
    cr_assert_eq(r.gather_seg, (size_t)r.problem.kv.d_k * 2);
    cr_assert(r.fig.gb > 0 && r.fig1.gb > 0);
    cr_assert_eq(r.fig1.threads, 1);
    ws_pool_destroy(p);
}

Test(bench_lib, attn_resolve_refuses)
{
    ws_err err = {0};
    ws_model m = load_model("qwen3-30b-a3b");
    ws_bench_attn_cfg c = {.model = &m, .dtype = WS_DT_BF16, .page = 256, .ctx = 64, .batch = 1,
                           .topk = -1, .v_layout = -1, .k_layout = -1, .isa = WS_ISA_SCALAR,
                           .read_bytes = 16u << 20, .scaling = 1};
    ws_attn_bench_cfg out;
    cr_assert_eq(ws_bench_attn_resolve(&c, 1, &out, &err), WS_EINVAL);
    cr_assert(strstr(err.msg, "--threads 2 or more"), "%s", err.msg);
    c.scaling = 0, c.ctx = 100000000, c.batch = 64;
    cr_assert_eq(ws_bench_attn_resolve(&c, 2, &out, &err), WS_EINVAL);
    cr_assert(strstr(err.msg, "more than this benchmark allows"), "%s", err.msg);
    c.ctx = 64, c.batch = 1, c.page = 40, c.k_layout = 1;
    cr_assert_eq(ws_bench_attn_resolve(&c, 2, &out, &err), WS_EINVAL);
    cr_assert(strstr(err.msg, "multiple of 16"), "%s", err.msg);
    c.page = 64, c.k_layout = -1;
    cr_assert_eq(ws_bench_attn_resolve(&c, 2, &out, &err), 0, "%s", err.msg);
    cr_assert_eq(out.ctx, 64);
    cr_assert_eq(out.kv.k_tiles, 0, "scalar stores K in rows");
}
