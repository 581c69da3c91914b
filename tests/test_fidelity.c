/* Tests for validate/fidelity: reading published points, predicting them with the
 * simulator on the setup they name under the engine they name, the knobs named where a
 * setup cannot be expressed, and the summary's statistics; the shipped fidelity/e2e.json
 * loads and names a source for every point. Serving points: test_fidelity_serving.c. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fidelity.h"
#include "helpers.h"
#include "hw.h"
#include "serve.h"
#include "server.h"
#include "store.h"
#include "ws_util.h"

static const char *k_points =
    "{\"points\": [\n"
    " {\"id\": \"gpu\", \"source\": {\"where\": \"here\"},"
    "  \"hardware\": {\"gpu\": \"h100-sxm\", \"host\": \"xeon-gold-5318y\"},"
    "  \"model\": \"qwen3-30b-a3b\", \"weights\": {\"gpu_part\": \"bf16\"}, \"quantized\": false,"
    "  \"offload\": false, \"batch\": 2, \"prompt\": 256, \"output\": 16,"
    "  \"metric\": \"decode_tok_s\", \"published\": 100},\n"
    " {\"id\": \"kt\", \"source\": \"there\","
    "  \"hardware\": {\"gpu\": \"a100-40gb-pcie\", \"host\": \"xeon-gold-5318y\"},"
    "  \"model\": \"qwen3-30b-a3b\", \"offload\": true, \"offload_what\": \"experts\","
    "  \"placement\": {\"gpu_experts\": 8}, \"batch\": 1, \"prompt\": 256, \"output\": 8,"
    "  \"metric\": \"tpot_s\", \"published\": 0.1},\n"
    " {\"id\": \"q4\", \"source\": \"x\", \"hardware\": {\"gpu\": \"a100-40gb-pcie\","
    "  \"host\": \"xeon-gold-5318y\"}, \"model\": \"qwen3-30b-a3b\", \"weights\": \"q4_k_m\","
    "  \"quantized\": true, \"offload\": true, \"batch\": 1, \"prompt\": 64, \"output\": 8,"
    "  \"metric\": \"tpot_s\", \"published\": 0.1},\n"
    " {\"id\": \"ncpumoe\", \"source\": \"x\", \"hardware\": {\"gpu\": \"a100-40gb-pcie\","
    "  \"host\": \"xeon-gold-5318y\"}, \"model\": \"qwen3-30b-a3b\", \"offload\": true,"
    "  \"placement\": {\"n_cpu_moe\": 40}, \"batch\": 1, \"prompt\": 64, \"output\": 8,"
    "  \"metric\": \"tpot_s\", \"published\": 0.1},\n"
    " {\"id\": \"nogpu\", \"source\": \"x\", \"hardware\": {\"gpu\": \"no-such-gpu\","
    "  \"host\": \"xeon-gold-5318y\"}, \"model\": \"qwen3-30b-a3b\", \"batch\": 1,"
    "  \"prompt\": 64, \"output\": 8, \"metric\": \"ttft_s\", \"published\": 0.1},\n"
    " {\"id\": \"layers\", \"source\": \"x\", \"hardware\": {\"gpu\": \"a100-40gb-pcie\","
    "  \"host\": \"xeon-gold-5318y\"}, \"model\": \"qwen3-30b-a3b\", \"offload\": true,"
    "  \"offload_what\": \"layers\", \"batch\": 1, \"prompt\": 64, \"output\": 8,"
    "  \"metric\": \"tpot_s\", \"published\": 0.1},\n"
    " {\"id\": \"kvq4\", \"source\": \"x\", \"hardware\": {\"gpu\": \"a100-40gb-pcie\","
    "  \"host\": \"xeon-gold-5318y\"}, \"model\": \"qwen3-30b-a3b\", \"kv_dtype\": \"q5_1\","
    "  \"offload\": true, \"batch\": 1, \"prompt\": 64, \"output\": 8,"
    "  \"metric\": \"tpot_s\", \"published\": 0.1},\n"
    " {\"id\": \"noprompt\", \"source\": \"x\", \"hardware\": {\"gpu\": \"a100-40gb-pcie\","
    "  \"host\": \"xeon-gold-5318y\"}, \"model\": \"qwen3-30b-a3b\", \"offload\": true,"
    "  \"weights\": {\"gpu_part\": \"ud_q2_k_xl\"}, \"quantized\": true,"
    "  \"placement\": {\"cpu_infer_threads\": 8}, \"batch\": 1, \"prompt\": null,"
    "  \"metric\": \"decode_tok_s\", \"published\": 10},\n"
    " {\"id\": \"noprompt-prefill\", \"source\": \"x\", \"hardware\": {\"gpu\": \"a100-40gb-pcie\","
    "  \"host\": \"xeon-gold-5318y\"}, \"model\": \"qwen3-30b-a3b\", \"offload\": true,"
    "  \"batch\": 1, \"metric\": \"prefill_tok_s\", \"published\": 10},\n"
    " {\"id\": \"tg\", \"source\": \"x\", \"hardware\": {\"gpu\": \"a100-40gb-pcie\","
    "  \"host\": \"xeon-gold-5318y\"}, \"model\": \"qwen3-30b-a3b\", \"offload\": true,"
    "  \"batch\": 1, \"prompt\": 0, \"output\": 128, \"metric\": \"decode_tok_s\","
    "  \"published\": 10}\n"
    "]}\n";

/* The points of `text` (n of them) loaded, predicted and summarised. */
static ws_fid_report load_points(const char *text, size_t n)
{
    char dir[256], path[512];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "p.json", text, path, sizeof path);
    ws_fid_report r = {0};
    ws_err err = {0};
    cr_assert_eq(ws_fidelity_load(path, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.n, n);
    ws_store *s = NULL;
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_fidelity_predict(s, &r, NULL, NULL, &err), 0, "%s", err.msg);
    ws_store_close(s);
    cr_assert_eq(ws_fidelity_summarise(&r, &err), 0, "%s", err.msg);
    return r;
}

static ws_fid_report load(void)
{
    return load_points(k_points, 10);
}

Test(fidelity, gpu_only_point_is_the_simulators_decode_rate)
{
    ws_fid_report r = load();
    const ws_fid_point *p = &r.pt[0];
    cr_assert_str_empty(p->missing, "%s", p->missing);
    cr_assert_str_eq(p->policy, "gpu-only");
    cr_assert_str_eq(p->group, "e2e gpu-only");

    /* The same closed batch straight through the simulator. */
    ws_model m;
    ws_hw hw;
    ws_err err = {0};
    int cores = 1;
    ws_store *s = NULL;
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_hw_load(s, "qwen3-30b-a3b", "h100-sxm", "xeon-gold-5318y", WS_DT_BF16, &m,
                            &hw, &cores, &err),
                 0, "%s", err.msg);
    ws_store_close(s);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.policy = WS_POLICY_GPU_ONLY;
    cfg.batch = 2;
    cfg.cpu_workers = cores;
    sim_closed cl;
    sim_source src;
    sim_closed_source(&cl, 2, 256, 16, &src);
    sim_results res;
    cr_assert_eq(sim_run(&m, &hw, &cc, &cfg, &src, &res, &err), 0, "%s", err.msg);
    cr_assert_float_eq(p->predicted, res.tot.decode_tps, 1e-9 * res.tot.decode_tps);
    cr_assert_float_eq(p->ratio, p->predicted / 100.0, 1e-12);
    sim_results_free(&res);
    ws_fidelity_free(&r);
}

Test(fidelity, expert_offload_runs_ktrans_with_the_gpu_experts_given)
{
    ws_fid_report r = load();
    const ws_fid_point *p = &r.pt[1];
    cr_assert_str_empty(p->missing, "%s", p->missing);
    cr_assert_str_eq(p->policy, "ktrans");
    cr_assert(p->predicted > 0 && isfinite(p->ratio));
    ws_fidelity_free(&r);
}

/* Quantized weights (q4_k_m on every part) and experts placed by layer (--n-cpu-moe) are
 * expressed: a prediction, below the bf16 point's TPOT for q4_k_m. */
Test(fidelity, quantized_and_layer_placed_points_get_a_ratio)
{
    ws_fid_report r = load();
    for (int i = 2; i < 4; i++) {
        const ws_fid_point *p = &r.pt[i];
        cr_assert_str_empty(p->missing, "%s: %s", p->id, p->missing);
        cr_assert_str_eq(p->policy, "ktrans");
        cr_assert(p->predicted > 0 && isfinite(p->ratio), "%s", p->id);
    }
    /* the same point with bf16 weights: every expert on the CPU at 2 B a weight */
    ws_model m;
    ws_hw hw;
    ws_err err = {0};
    int cores = 1;
    ws_store *s = NULL;
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_hw_load(s, "qwen3-30b-a3b", "a100-40gb-pcie", "xeon-gold-5318y", WS_DT_BF16,
                            &m, &hw, &cores, &err),
                 0, "%s", err.msg);
    ws_store_close(s);
    ws_deploy_cfg cc;
    ws_deploy_cfg_default(&cc);
    sim_cfg cfg;
    sim_cfg_default(&cfg);
    cfg.policy = WS_POLICY_KTRANS;
    cfg.batch = 1;
    cfg.cpu_workers = cores;
    sim_closed cl;
    sim_source src;
    sim_closed_source(&cl, 1, 64, 8, &src);
    sim_results res;
    cr_assert_eq(sim_run(&m, &hw, &cc, &cfg, &src, &res, &err), 0, "%s", err.msg);
    cr_assert_lt(r.pt[2].predicted, res.tot.tpot_p50);
    sim_results_free(&res);
    ws_fidelity_free(&r);
}

Test(fidelity, inexpressible_setups_name_the_knob)
{
    ws_fid_report r = load();
    cr_assert(strstr(r.pt[4].missing, "no-such-gpu"), "%s", r.pt[4].missing);
    cr_assert(strstr(r.pt[6].missing, "KV dtype q5_1"), "%s", r.pt[6].missing);
    for (int i = 4; i < 7; i += 2)
        cr_assert(isnan(r.pt[i].ratio) && isnan(r.pt[i].predicted));
    ws_fidelity_free(&r);
}

/* Whole layers on the CPU (llama.cpp -ngl) run gpu-only with the GPU's layers; without a
 * published -ngl, the most layers that fit, said so. */
Test(fidelity, layer_offload_takes_the_layers_that_fit)
{
    ws_fid_report r = load();
    const ws_fid_point *p = &r.pt[5];
    cr_assert_str_empty(p->missing, "%s", p->missing);
    cr_assert_str_eq(p->policy, "gpu-only");
    cr_assert(strstr(p->assumed, "the most that fit (-ngl not published)"), "%s", p->assumed);
    cr_assert(p->predicted > 0 && isfinite(p->ratio));
    ws_fidelity_free(&r);
}

/* A decode rate without its prompt is predicted at 512 tokens where 128 and 2048 agree
 * within 10%, both ends in assumed; a prefill rate without one stays missing; prompt 0 (an
 * empty context) runs after one token. The thread count reaches the cost model: 8 threads
 * decode no faster than every core. */
Test(fidelity, prompts_not_published_and_threads)
{
    ws_fid_report r = load();
    const ws_fid_point *p = &r.pt[7], *pf = &r.pt[8], *tg = &r.pt[9];
    cr_assert_str_empty(p->missing, "%s", p->missing);
    cr_assert_eq(p->prompt, -1);
    cr_assert_eq(p->cpu_threads, 8);
    cr_assert(strstr(p->assumed, "prompt 512 (not published; 128..2048"), "%s", p->assumed);
    cr_assert(p->predicted > 0 && isfinite(p->ratio));
    cr_assert(strstr(pf->missing, "not published: the prompt length"), "%s", pf->missing);
    cr_assert(isnan(pf->ratio));
    cr_assert_str_empty(tg->missing, "%s", tg->missing);
    cr_assert_eq(tg->prompt, 0);
    cr_assert(strstr(tg->assumed, "prompt 1 for an empty context"), "%s", tg->assumed);
    cr_assert(tg->predicted > 0);
    ws_fidelity_free(&r);
}

Test(fidelity, summary_groups_and_statistics)
{
    ws_fid_report r = load();
    cr_assert_geq(r.ng, 5);
    cr_assert_str_eq(r.g[0].group, "e2e gpu-only");
    cr_assert_eq(r.g[0].n, 2);        /* gpu, nogpu */
    cr_assert_eq(r.g[0].expressed, 1);
    cr_assert_float_eq(r.g[0].median_err, fabs(r.pt[0].ratio - 1), 1e-12);
    cr_assert_str_eq(r.g[1].group, "e2e offload");
    cr_assert_eq(r.g[1].n, 6);        /* kt, ncpumoe, layers, kvq4, noprompt-prefill, tg */
    cr_assert_eq(r.g[1].expressed, 4);
    cr_assert_str_eq(r.g[2].group, "e2e offload+quantized");
    cr_assert_eq(r.g[2].n, 2);        /* q4, noprompt */
    cr_assert_eq(r.g[2].expressed, 2);
    const double e2 = fabs(r.pt[2].ratio - 1), e7 = fabs(r.pt[7].ratio - 1);
    cr_assert_float_eq(r.g[2].median_err, (e2 + e7) / 2, 1e-12);
    cr_assert_float_eq(r.g[2].worst_err, fmax(e2, e7), 1e-12);
    /* both offload groups again as one, and by engine file: every offload point once */
    cr_assert_str_eq(r.g[3].group, "offload, all");
    cr_assert_eq(r.g[3].n, 8);
    cr_assert_eq(r.g[3].expressed, 6);
    cr_assert_float_eq(r.g[3].worst_err, fmax(r.g[1].worst_err, r.g[2].worst_err), 1e-12);
    int by_engine = 0;
    for (size_t k = 4; k < r.ng; k++) {
        cr_assert(!strncmp(r.g[k].group, "offload @", 9), "%s", r.g[k].group);
        by_engine += r.g[k].n;
    }
    cr_assert_eq(by_engine, 8);
    ws_fidelity_free(&r);
}

Test(fidelity, bad_points_are_one_line_errors)
{
    const char *bad[] = {"[{\"id\": \"a\", \"source\": \"s\", \"published\": -1}]",
                         "[{\"id\": \"a\", \"published\": 1}]",
                         "[{\"id\": \"a\", \"source\": \"s\", \"published\": 1},"
                         " {\"id\": \"a\", \"source\": \"s\", \"published\": 1}]",
                         "{\"nope\": 1}", "[{\"id\": \"a\", \"source\": \"s\", \"published\": 1,"
                                          " \"batch\": -2}]",
                         "[{\"id\": \"a\", \"source\": \"s\", \"published\": 1,"
                         " \"placement\": {\"prefill\": \"fast\"}}]"};
    th_expect_bad_points(bad, sizeof bad / sizeof *bad);
}

Test(fidelity, shipped_points_load_with_sources)
{
    char root[WS_PATH_MAX], path[WS_PATH_MAX];
    ws_err err = {0};
    cr_assert_eq(ws_root_dir(root, sizeof root, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_path_join(path, sizeof path, root, "fidelity/e2e.json", &err), 0);
    ws_fid_report r = {0};
    cr_assert_eq(ws_fidelity_load(path, &r, &err), 0, "%s", err.msg);
    cr_assert_geq(r.n, 15);
    for (size_t i = 0; i < r.n; i++) {
        cr_assert(strlen(r.pt[i].source) > 5, "%s has no source", r.pt[i].id);
        cr_assert(*r.pt[i].gpu && *r.pt[i].model && *r.pt[i].metric, "%s", r.pt[i].id);
    }
    ws_fidelity_free(&r);
}

Test(fidelity, cli_json_has_the_points_array)
{
    char dir[256], path[512];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "p.json", k_points, path, sizeof path);
    const char *args[] = {"fidelity", "--points", path, "--no-ops", "--json", NULL};
    json_t *j = th_writescope_json(args, NULL);
    json_t *pts = json_object_get(j, "points");
    cr_assert_eq(json_array_size(pts), 10);
    json_t *q4 = json_array_get(pts, 6);
    cr_assert_str_eq(json_string_value(json_object_get(q4, "kind")), "e2e");
    cr_assert(json_is_false(json_object_get(q4, "quantized")));
    cr_assert(json_is_true(json_object_get(q4, "offload")));
    cr_assert(json_is_true(json_object_get(json_array_get(pts, 7), "quantized")));
    cr_assert(json_is_null(json_object_get(json_array_get(pts, 7), "prompt")));
    cr_assert(json_is_null(json_object_get(q4, "ratio")));
    cr_assert(json_is_null(json_object_get(q4, "predicted")));
    cr_assert(json_is_string(json_object_get(q4, "missing")));
    cr_assert(json_is_number(json_object_get(json_array_get(pts, 0), "ratio")));
    json_decref(j);
}

/* The operator points: every row of the public A100 profiles, predicted on the datasheet
 * A100 (skipped with one line where ../shared/profiling is not beside the project). */
Test(fidelity, operator_points_from_the_public_profiles)
{
    char root[WS_PATH_MAX], dir[WS_PATH_MAX];
    ws_err err = {0};
    cr_assert_eq(ws_root_dir(root, sizeof root, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_path_join(dir, sizeof dir, root, "../shared/profiling/vidur-a100", &err), 0);
    if (!ws_dir_exists(dir))
        cr_skip_test("no ../shared/profiling/vidur-a100 beside the project: operator points "
                     "not checked");
    ws_store *s = NULL;
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    ws_fid_report r = {0};
    cr_assert_eq(ws_fidelity_add_ops(s, dir, "a100-80gb-sxm", 0, &r, &err), 0, "%s", err.msg);
    ws_fid_report h = {0};
    cr_assert_eq(ws_fidelity_add_ops(s, dir, "a100-80gb-sxm", 1, &h, &err), 0, "%s", err.msg);
    ws_store_close(s);
    cr_assert_eq(r.n, 0, "operator points are records, not points");
    cr_assert_gt(r.n_op, 30);
    cr_assert_lt(h.n_op, r.n_op / 4 + 100); /* every 5th row of each operation */
    cr_assert_eq(ws_fidelity_summarise(&r, &err), 0);
    cr_assert_eq(r.ng, 4);
    for (size_t k = 0; k < r.ng; k++) {
        cr_assert(!strncmp(r.g[k].group, "op ", 3), "%s", r.g[k].group);
        cr_assert_eq(r.g[k].expressed, r.g[k].n);
        /* the datasheet A100 over every row (the imported profile's held-out target is
         * tests/test_import.c's): a guard at what it reaches, 5.7-10.3% */
        cr_assert(r.g[k].median_err <= 0.12, "%s median %.3f", r.g[k].group, r.g[k].median_err);
    }
    for (size_t i = 0; i < r.n_op; i++) {
        ws_fid_point p;
        ws_fidelity_op_point(&r, i, &p);
        cr_assert_str_eq(p.kind, "op");
        cr_assert(!strncmp(p.group, "op ", 3), "%s", p.group);
        cr_assert(strstr(p.source, "row at line") != NULL, "%s", p.source);
        cr_assert_float_eq(p.ratio, p.predicted / p.published, 1e-12 * p.ratio);
    }
    ws_fidelity_free(&r);
    ws_fidelity_free(&h);
}

/* A profiled kernel is held as a compact record, not as a point of kilobytes of text, so a
 * profile of a million rows stays tens of MB; the record expands to the point it prints. */
Test(fidelity, operator_points_are_compact_records)
{
    cr_assert_leq(sizeof(ws_fid_op), 40);
    cr_assert_gt(sizeof(ws_fid_point), 1000, "the point a record stands in for");
    ws_fid_report r = {0};
    ws_fid_op o = {.row = 7, .op = 0, .line = 9, .batch = 4, .published = 2e-5,
                   .predicted = 3e-5};
    r.op = &o;
    r.n_op = 1;
    snprintf(r.op_dir, sizeof r.op_dir, "dir");
    snprintf(r.op_gpu, sizeof r.op_gpu, "a100-80gb-sxm");
    ws_fid_point p;
    ws_fidelity_op_point(&r, 0, &p);
    cr_assert(strstr(p.id, "line9") != NULL, "%s", p.id);
    cr_assert_str_eq(p.gpu, "a100-80gb-sxm");
    cr_assert_float_eq(p.ratio, 1.5, 1e-12);
    ws_err err = {0};
    cr_assert_eq(ws_fidelity_summarise(&r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.ng, 1);
    cr_assert(!strncmp(r.g[0].group, "op ", 3), "%s", r.g[0].group);
    cr_assert_float_eq(r.g[0].median_err, 0.5, 1e-12);
    cr_assert_str_eq(r.g[0].worst_id, p.id);
    free(r.g);
}

/* A prompt the source bounds without counting it (its text, the chat before it): the rate
 * is predicted at the middle of prompt_range where both ends agree within 10%, the same as
 * a point that gives that prompt; without the range the same setup, whose rate moves more
 * than 10% between 128 and 2048 tokens, stays missing. A range needs prompt null and
 * 1 <= lo <= hi. */
Test(fidelity, prompt_range_bounds_an_unpublished_prompt)
{
#define LAYERS_PT(id, extra)                                                                       \
    " {\"id\": \"" id "\", \"source\": \"x\", \"hardware\": {\"gpu\": \"rtx-a6000\","              \
    "  \"host\": \"threadripper-pro-7965wx\"}, \"model\": \"deepseek-v3\", \"offload\": true,"     \
    "  \"quantized\": true, \"weights\": {\"gpu_part\": \"ud_q2_k_xl\", \"cpu_experts\":"          \
    " \"ud_q2_k_xl\"}, \"offload_what\": \"layers\", \"batch\": 1, " extra ","                     \
    "  \"metric\": \"decode_tok_s\", \"published\": 8}"
    const char *pts =
        "{\"points\": [\n" LAYERS_PT("open", "\"prompt\": null") ",\n" LAYERS_PT(
            "ranged", "\"prompt\": null, \"prompt_range\": {\"lo\": 8, \"hi\": 16, \"why\": "
                      "\"text\"}") ",\n" LAYERS_PT("fixed", "\"prompt\": 12") "\n]}\n";
    ws_fid_report r = load_points(pts, 3);
    cr_assert_eq(r.pt[1].prompt_lo, 8);
    cr_assert_eq(r.pt[1].prompt_hi, 16);
    cr_assert(strstr(r.pt[0].missing, "not published: the prompt length"), "%s", r.pt[0].missing);
    cr_assert_str_empty(r.pt[1].missing, "%s", r.pt[1].missing);
    cr_assert(
        strstr(r.pt[1].assumed, "prompt 12 (not published; 8..16 tokens, the source's bounds"),
        "%s", r.pt[1].assumed);
    cr_assert_str_empty(r.pt[2].missing, "%s", r.pt[2].missing);
    cr_assert(r.pt[1].predicted > 0);
    cr_assert_float_eq(r.pt[1].predicted, r.pt[2].predicted, 1e-9 * r.pt[2].predicted);
    ws_fidelity_free(&r);
    char dir[256], path[512];
    th_tmpdir(dir, sizeof dir);
    ws_err err = {0};
    const char *bad[] = {
        "[" LAYERS_PT("a", "\"prompt\": 12, \"prompt_range\": {\"lo\": 8, \"hi\": 16}") "]",
        "[" LAYERS_PT("a", "\"prompt\": null, \"prompt_range\": {\"lo\": 16, \"hi\": 8}") "]",
        "[" LAYERS_PT("a", "\"prompt\": null, \"prompt_range\": {\"lo\": 0, \"hi\": 8}") "]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        th_write(dir, "b.json", bad[i], path, sizeof path);
        ws_fid_report b = {0};
        cr_assert_neq(ws_fidelity_load(path, &b, &err), 0, "%s", bad[i]);
        cr_assert(strstr(err.msg, "prompt_range") && !strchr(err.msg, '\n'), "%s", err.msg);
        ws_fidelity_free(&b);
    }
#undef LAYERS_PT
}

/* placement.prefill forces where a chunk's host-memory weights run (a streamed -ngl prefill
 * is slower here than on the CPU), and weights_one_node reads one socket's DRAM: both reach
 * the simulator. */
Test(fidelity, prefill_placement_and_one_node_reach_the_simulator)
{
    const char *fmt =
        "[{\"id\": \"p\", \"source\": \"x\", \"hardware\": {\"gpu\": \"rtx-4090d\","
        " \"host\": \"xeon-gold-6454s-2s\"}, \"model\": \"qwen3-30b-a3b\", \"offload\": true,"
        " \"offload_what\": \"layers\", \"placement\": {\"n_gpu_layers\": 8%s},"
        " \"batch\": 1, \"prompt\": 512, \"output\": 8, \"metric\": \"%s\","
        " \"published\": 1}]";
    /* prefill under auto, cpu and gpu; decode pooled and from one node */
    const struct {
        const char *extra, *metric;
    } run[] = {{"", "prefill_tok_s"},
               {", \"prefill\": \"cpu\"", "prefill_tok_s"},
               {", \"prefill\": \"gpu\"", "prefill_tok_s"},
               {"", "decode_tok_s"},
               {", \"weights_one_node\": true", "decode_tok_s"}};
    double v[5];
    for (int i = 0; i < 5; i++) {
        char text[1024];
        snprintf(text, sizeof text, fmt, run[i].extra, run[i].metric);
        ws_fid_report r = load_points(text, 1);
        cr_assert_str_empty(r.pt[0].missing, "%s", r.pt[0].missing);
        cr_assert_eq(r.pt[0].one_node, i == 4);
        v[i] = r.pt[0].predicted;
        ws_fidelity_free(&r);
    }
    cr_assert_float_eq(v[0], fmax(v[1], v[2]), 1e-9 * v[0], "auto takes the faster");
    cr_assert_neq(v[1], v[2]);
    cr_assert_lt(v[4], v[3], "one node decodes slower: %g, %g", v[4], v[3]);
}

/* Published engine names map to engines/ files: vLLM before 0.8 ran V0, KTransformers from
 * 0.4 serves through SGLang, a name without a table row is its own file's. */
Test(fidelity, engine_names_map_to_engine_files)
{
    cr_assert_str_eq(ws_fidelity_engine_file("vllm", NULL), "vllm-v1");
    cr_assert_str_eq(ws_fidelity_engine_file("vllm", "0.6.3"), "vllm-v0");
    cr_assert_str_eq(ws_fidelity_engine_file("vLLM", "v0.5.4"), "vllm-v0");
    cr_assert_str_eq(ws_fidelity_engine_file("vllm", "0.8.0"), "vllm-v1");
    cr_assert_str_eq(ws_fidelity_engine_file("vllm", "v0.20.1"), "vllm-v1");
    cr_assert_str_eq(ws_fidelity_engine_file("ktransformers", "0.2.1"), "ktransformers");
    cr_assert_str_eq(ws_fidelity_engine_file("ktransformers", "0.5.2"), "sglang");
    cr_assert_str_eq(ws_fidelity_engine_file("ktransformers", NULL), "ktransformers");
    cr_assert_str_eq(ws_fidelity_engine_file("llama.cpp", "b5269"), "llama.cpp");
    cr_assert_str_eq(ws_fidelity_engine_file("vllm-v0", NULL), "vllm-v0");
    cr_assert_null(ws_fidelity_engine_file("", NULL));
    cr_assert_null(ws_fidelity_engine_file(NULL, NULL));
}

/* An e2e point runs under its engine's file: the version read from the source's text
 * picks vLLM V0, whose step overhead (engines/vllm-v0.json) lengthens each decode step of
 * a single stream by that much over V1's (none published); an engine without a file is the
 * knob missing. */
Test(fidelity, e2e_points_run_under_their_engine)
{
#define VLLM_PT(id, engine, where)                                                                 \
    " {\"id\": \"" id "\", \"engine\": \"" engine "\", \"source\": {\"where\": \"" where "\"},"  \
    "  \"hardware\": {\"gpu\": \"h100-sxm\"}, \"model\": \"qwen3-30b-a3b\","                      \
    "  \"weights\": {\"gpu_part\": \"bf16\"}, \"batch\": 1, \"prompt\": 256, \"output\": 16,"    \
    "  \"metric\": \"tpot_s\", \"published\": 0.01}"
    const char *pts = "{\"points\": [\n" VLLM_PT("v0", "vllm", "a table (vLLM v0.5.4)") ",\n" VLLM_PT(
        "v1", "vllm", "a table (vLLM 0.9.1)") ",\n" VLLM_PT("none", "no-such-engine", "x") "\n]}\n";
#undef VLLM_PT
    ws_fid_report r = load_points(pts, 3);
    cr_assert_str_eq(r.pt[0].engine_version, "0.5.4");
    cr_assert_str_eq(r.pt[0].engine_file, "vllm-v0");
    cr_assert_str_eq(r.pt[1].engine_file, "vllm-v1");
    for (int i = 0; i < 2; i++)
        cr_assert_str_empty(r.pt[i].missing, "%s", r.pt[i].missing);
    ws_server v0, v1;
    ws_err err = {0};
    cr_assert_eq(ws_server_load("vllm-v0", "h100-sxm", 80e9, 0, &v0, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_server_load("vllm-v1", "h100-sxm", 80e9, 0, &v1, &err), 0, "%s", err.msg);
    /* an engine that publishes no step overhead keeps the GPU profile's */
    ws_store *st;
    ws_model m;
    ws_hw hw;
    cr_assert_eq(ws_store_open_embedded(&st, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_hw_load(st, "qwen3-30b-a3b", "h100-sxm", WS_FIDELITY_HOST, WS_DT_BF16, &m, &hw,
                            NULL, &err),
                 0, "%s", err.msg);
    ws_store_close(st);
    const double s0 = v0.set[WS_SRV_STEP_OVERHEAD] ? v0.step_s : hw.step.v,
                 s1 = v1.set[WS_SRV_STEP_OVERHEAD] ? v1.step_s : hw.step.v;
    cr_assert_float_eq(r.pt[0].predicted - r.pt[1].predicted, s0 - s1, 1e-9,
                       "v0 %g, v1 %g", r.pt[0].predicted, r.pt[1].predicted);
    cr_assert(strstr(r.pt[2].missing, "engine 'no-such-engine'"), "%s", r.pt[2].missing);
    cr_assert(isnan(r.pt[2].ratio));
    ws_fidelity_free(&r);
}

/* A GPU named by a host's profile, or a host by a GPU's, is a bad point with the reason;
 * the other points still run, in the library and in the command (exit 0, BAD in the table
 * and "bad" in --json, a line on stderr counting them). */
Test(fidelity, a_profile_of_the_wrong_kind_is_a_bad_point)
{
#define HW_PT(id, hw, extra)                                                                       \
    " {\"id\": \"" id "\", \"source\": \"x\", \"hardware\": {" hw "}, \"model\": \"qwen3-30b-a3b\"," \
    " \"batch\": 1, \"prompt\": 64, \"output\": 8, \"metric\": \"ttft_s\", \"published\": 0.1" extra "}"
    const char *text =
        "[" HW_PT("hostgpu", "\"gpu\": \"xeon-gold-5318y\"", "") "," HW_PT(
            "gpuhost", "\"gpu\": \"h100-sxm\", \"host\": \"a100-40gb-pcie\"",
            ", \"offload\": true") "," HW_PT("ok", "\"gpu\": \"h100-sxm\"", "") "]";
#undef HW_PT
    ws_fid_report r = load_points(text, 3);
    cr_assert(strstr(r.pt[0].bad, "profile 'xeon-gold-5318y' is a host profile, not a GPU's"),
              "%s", r.pt[0].bad);
    cr_assert(strstr(r.pt[1].bad, "profile 'a100-40gb-pcie' is a gpu profile, not a host's"),
              "%s", r.pt[1].bad);
    for (int i = 0; i < 2; i++)
        cr_assert(isnan(r.pt[i].ratio) && !*r.pt[i].missing, "%s", r.pt[i].id);
    cr_assert_str_empty(r.pt[2].bad, "%s", r.pt[2].bad);
    cr_assert(r.pt[2].predicted > 0 && isfinite(r.pt[2].ratio));
    cr_assert_eq(r.g[0].n, 2);
    cr_assert_eq(r.g[0].expressed, 1);
    ws_fidelity_free(&r);

    char dir[256], path[512];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "p.json", text, path, sizeof path);
    const char *table[] = {"fidelity", "--points", path, "--no-ops", NULL};
    th_run run = th_writescope(table, NULL);
    cr_assert_eq(run.status, 0, "%s", run.err);
    cr_assert(strstr(run.out, "BAD profile 'xeon-gold-5318y' is a host profile, not a GPU's"),
              "%s", run.out);
    cr_assert(strstr(run.err, "fidelity: 2 bad points"), "%s", run.err);
    th_run_free(&run);
    const char *json[] = {"fidelity", "--points", path, "--no-ops", "--json", NULL};
    json_t *j = th_writescope_json(json, NULL);
    json_t *pts = json_object_get(j, "points");
    cr_assert(strstr(json_string_value(json_object_get(json_array_get(pts, 1), "bad")),
                     "not a host's"));
    cr_assert(json_is_null(json_object_get(json_array_get(pts, 2), "bad")));
    cr_assert(json_is_number(json_object_get(json_array_get(pts, 2), "ratio")));
    json_decref(j);
}

/* A point's simulations are bounded: steps x (batch + 256) past the report's bound stop
 * the run and make the point bad (end-to-end and serving alike), a run whose admissions
 * would scan more than 2^32 batch slots is bad before it starts; the same points within
 * the default bound run. */
Test(fidelity, a_point_past_its_work_bound_is_bad)
{
    const char *text =
        "[{\"id\": \"e\", \"source\": \"x\", \"hardware\": {\"gpu\": \"h100-sxm\"},"
        "  \"model\": \"qwen3-30b-a3b\", \"batch\": 2, \"prompt\": 256, \"output\": 16,"
        "  \"metric\": \"decode_tok_s\", \"published\": 100},"
        " {\"id\": \"s\", \"kind\": \"serving\", \"engine\": \"vllm\", \"source\": \"x\","
        "  \"hardware\": {\"gpu\": \"h100-sxm\"}, \"model\": \"qwen3-14b\","
        "  \"workload\": {\"arrival\": \"closed\", \"concurrency\": 1, \"num_requests\": 4,"
        "  \"prompt\": 64, \"output\": 32, \"lengths\": \"fixed\"}, \"metric\": \"tpot_s\","
        "  \"stat\": \"mean\", \"published\": 0.01},"
        " {\"id\": \"wide\", \"source\": \"x\", \"hardware\": {\"gpu\": \"h100-sxm\"},"
        "  \"model\": \"qwen3-30b-a3b\", \"batch\": 262144, \"prompt\": 32, \"output\": 32,"
        "  \"metric\": \"tpot_s\", \"published\": 1}]";
    char dir[256], path[512];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "p.json", text, path, sizeof path);
    ws_fid_report r = {0};
    ws_err err = {0};
    cr_assert_eq(ws_fidelity_load(path, &r, &err), 0, "%s", err.msg);
    ws_store *s = NULL;
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    r.slot_steps_max = 2000;
    cr_assert_eq(ws_fidelity_predict(s, &r, NULL, NULL, &err), 0, "%s", err.msg);
    for (int i = 0; i < 2; i++) {
        cr_assert(strstr(r.pt[i].bad, "too long to simulate: past 2000 step-slots"), "%s: %s",
                  r.pt[i].id, r.pt[i].bad);
        cr_assert(isnan(r.pt[i].ratio));
    }
    cr_assert(strstr(r.pt[2].bad, "too long to simulate: 262144 requests admitted into a batch "
                                  "of 262144"),
              "%s", r.pt[2].bad);
    r.slot_steps_max = 0;
    cr_assert_eq(ws_fidelity_predict(s, &r, NULL, NULL, &err), 0, "%s", err.msg);
    ws_store_close(s);
    for (int i = 0; i < 2; i++)
        cr_assert(!*r.pt[i].bad && r.pt[i].predicted > 0, "%s: %s", r.pt[i].id, r.pt[i].bad);
    ws_fidelity_free(&r);
}

/* --no-ops with an operator points' option, or those options with a group of no operator
 * point, are one-line usage errors before anything is read. */
Test(fidelity, cli_refuses_contradictory_operator_flags)
{
    const char *a[] = {"fidelity", "--no-ops", "--ops", "/tmp", NULL};
    const char *b[] = {"fidelity", "--heldout", "--no-ops", NULL};
    const char *c[] = {"fidelity", "--no-ops", "--ops-gpu", "h100-sxm", NULL};
    const char *d[] = {"fidelity", "--group", "serving", "--ops", "/tmp", NULL};
    th_expect_fail(a, 2, "--no-ops contradicts --ops, --ops-gpu and --heldout", NULL);
    th_expect_fail(b, 2, "--no-ops contradicts", NULL);
    th_expect_fail(c, 2, "--no-ops contradicts", NULL);
    th_expect_fail(d, 2, "are for operator points, not group 'serving'", NULL);
}

/* A points file that cannot be opened is one line, "path: cannot open: reason", with no
 * line number; control characters in it, and in the text of a points file the table
 * prints (a source), reach the terminal escaped. */
Test(fidelity, cli_prints_what_points_files_say_escaped)
{
    char dir[256], path[512], nope[600];
    th_tmpdir(dir, sizeof dir);
    snprintf(nope, sizeof nope, "%s/no\x1b[2Jpe.json", dir);
    const char *missing[] = {"fidelity", "--points", nope, "--no-ops", NULL};
    th_expect_fail(missing, 1, "/no\\x1b[2Jpe.json: cannot open: No such file or directory",
                   NULL);
    th_write(dir, "p.json",
             "[{\"id\": \"a\", \"source\": {\"where\": \"x\\u001b[2Jy\\u0085z\"},"
             " \"hardware\": {\"gpu\": \"h100-sxm\"}, \"model\": \"qwen3-30b-a3b\", \"batch\": 1,"
             " \"prompt\": 64, \"output\": 8, \"metric\": \"ttft_s\", \"published\": 0.1}]",
             path, sizeof path);
    const char *args[] = {"fidelity", "--points", path, "--no-ops", NULL};
    th_run r = th_writescope(args, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "x\\x1b[2Jy\\x85z"), "%s", r.out);
    cr_assert(!strchr(r.out, '\x1b') && !strstr(r.out, "\xc2\x85"), "%s", r.out);
    th_run_free(&r);
}
