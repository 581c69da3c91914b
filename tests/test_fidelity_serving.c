/* Tests for validate/fidelity's serving points: the shipped fidelity/serving.json loads
 * with every field a serving point needs, every engine a point names (there and in
 * fidelity/e2e.json) has its engines/ file, a serving point's prediction is a finite
 * positive number, the statistics of one run agree with each other, and a load the
 * simulator cannot play is named. No timing, no predicted figure written down. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fidelity.h"
#include "helpers.h"
#include "server.h"
#include "ws_util.h"

static const char *const k_latency[] = {"ttft_s", "tpot_s", "itl_s", "e2e_s"};
static const char *const k_throughput[] = {"output_throughput_tok_s", "total_throughput_tok_s",
                                           "request_throughput_rps", "capacity_rps"};

static int in(const char *s, const char *const *set, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, set[i]))
            return 1;
    return 0;
}
#define IN(s, set) in(s, set, sizeof set / sizeof *set)

/* The shipped points of fidelity/NAME. */
static ws_fid_report shipped(const char *name)
{
    char root[WS_PATH_MAX], rel[64], path[WS_PATH_MAX];
    ws_err err = {0};
    cr_assert_eq(ws_root_dir(root, sizeof root, &err), 0, "%s", err.msg);
    snprintf(rel, sizeof rel, "fidelity/%s", name);
    cr_assert_eq(ws_path_join(path, sizeof path, root, rel, &err), 0, "%s", err.msg);
    ws_fid_report r = {0};
    cr_assert_eq(ws_fidelity_load(path, &r, &err), 0, "%s", err.msg);
    return r;
}

static void predict(ws_fid_report *r)
{
    ws_store *s = NULL;
    ws_err err = {0};
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_fidelity_predict(s, r, NULL, NULL, &err), 0, "%s", err.msg);
    ws_store_close(s);
    cr_assert_eq(ws_fidelity_summarise(r, &err), 0, "%s", err.msg);
}

/* The points of `text` loaded (n of them) and predicted. */
static ws_fid_report load_points(const char *text, size_t n)
{
    char dir[256], path[512];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "s.json", text, path, sizeof path);
    ws_fid_report r = {0};
    ws_err err = {0};
    cr_assert_eq(ws_fidelity_load(path, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.n, n);
    predict(&r);
    return r;
}

Test(fidelity_serving, shipped_points_have_every_field)
{
    ws_fid_report r = shipped("serving.json");
    cr_assert_geq(r.n, 20);
    for (size_t i = 0; i < r.n; i++) {
        const ws_fid_point *p = &r.pt[i];
        const ws_fid_workload *l = &p->load;
        cr_assert_str_eq(p->kind, "serving", "%s", p->id);
        cr_assert_str_eq(p->group, "serving", "%s", p->id);
        cr_assert(strlen(p->source) > 5, "%s has no source", p->id);
        cr_assert(*p->engine && *p->model && *p->gpu && *p->host && *p->weights_gpu,
                  "%s: engine, model, gpu, host (or the default) and weights", p->id);
        cr_assert(!strcmp(l->arrival, "all_at_once") || !strcmp(l->arrival, "poisson") ||
                      !strcmp(l->arrival, "closed"),
                  "%s: arrival '%s'", p->id, l->arrival);
        if (!strcmp(l->arrival, "poisson"))
            cr_assert(l->rate_rps > 0, "%s: a Poisson load has its rate", p->id);
        if (!strcmp(l->arrival, "closed"))
            cr_assert_geq(l->concurrency, 1, "%s: a closed loop has its clients", p->id);
        cr_assert_geq(l->requests, 1, "%s", p->id);
        cr_assert(p->prompt >= 1 && p->output >= 1, "%s: prompt and output", p->id);
        cr_assert(*l->lengths, "%s: lengths", p->id);
        cr_assert(IN(p->metric, k_latency) || IN(p->metric, k_throughput), "%s: metric '%s'",
                  p->id, p->metric);
        if (IN(p->metric, k_latency))
            cr_assert(!strcmp(p->stat, "mean") || !strcmp(p->stat, "median") ||
                          !strcmp(p->stat, "p90") || !strcmp(p->stat, "p99"),
                      "%s: stat '%s'", p->id, p->stat);
        else
            cr_assert_str_empty(p->stat, "%s: a throughput has no stat", p->id);
        cr_assert(p->published > 0 && isfinite(p->published), "%s", p->id);
    }
    ws_fidelity_free(&r);
}

/* Every engine a shipped point names, e2e or serving, maps to a file engines/ holds. */
Test(fidelity_serving, every_named_engine_has_a_file)
{
    const char *files[] = {"serving.json", "e2e.json"};
    for (int f = 0; f < 2; f++) {
        ws_fid_report r = shipped(files[f]);
        for (size_t i = 0; i < r.n; i++) {
            const ws_fid_point *p = &r.pt[i];
            const char *name = ws_fidelity_engine_file(p->engine, p->engine_version);
            cr_assert_not_null(name, "%s names no engine", p->id);
            ws_server e;
            ws_err err = {0};
            cr_assert_eq(ws_server_load(name, p->gpu, 80e9, 0, &e, &err), 0, "%s: %s", p->id,
                         err.msg);
        }
        ws_fidelity_free(&r);
    }
}

/* The cheapest shipped serving point (fewest tokens in all) predicts a finite positive
 * figure under its engine, gpu-only. */
Test(fidelity_serving, a_shipped_point_predicts_a_positive_figure)
{
    ws_fid_report all = shipped("serving.json");
    size_t best = 0;
    double least = INFINITY;
    for (size_t i = 0; i < all.n; i++) {
        const ws_fid_point *p = &all.pt[i];
        const double tok = (double)p->load.requests * (p->prompt + p->output);
        if (tok < least)
            least = tok, best = i;
    }
    ws_fid_report r = {0};
    ws_err err = {0};
    cr_assert_eq(ws_fidelity_add(&r, &all.pt[best], &err), 0);
    ws_fidelity_free(&all);
    predict(&r);
    const ws_fid_point *p = &r.pt[0];
    cr_assert_str_empty(p->missing, "%s: %s", p->id, p->missing);
    cr_assert_str_eq(p->policy, "gpu-only");
    cr_assert(*p->engine_file, "%s", p->id);
    cr_assert(isfinite(p->predicted) && p->predicted > 0, "%s: %g", p->id, p->predicted);
    cr_assert_float_eq(p->ratio, p->predicted / p->published, 1e-12 * p->ratio);
    cr_assert_eq(r.ng, 1);
    cr_assert_str_eq(r.g[0].group, "serving");
    cr_assert_eq(r.g[0].expressed, 1);
    ws_fidelity_free(&r);
}

/* One workload, many metrics: the statistics of one run agree with each other (median <=
 * p90 <= p99, the mean within them; fixed lengths: output throughput = requests/s x output
 * tokens, total = output x (prompt + output) / output), under each arrival. */
#define SRV_PT(id, engine, arrival, metric, stat)                                                  \
    " {\"id\": \"" id "\", \"kind\": \"serving\", \"engine\": \"" engine "\","                     \
    "  \"source\": {\"where\": \"here\"}, \"hardware\": {\"gpu\": \"h100-sxm\", \"host\": null},"  \
    "  \"model\": \"qwen3-14b\", \"weights\": {\"gpu_part\": \"bf16\"}, \"offload\": false,"       \
    "  \"workload\": {" arrival ", \"num_requests\": 24, \"prompt\": 512, \"output\": 32,"         \
    "  \"lengths\": \"fixed\"}, \"metric\": \"" metric "\", \"stat\": " stat ","                   \
    "  \"published\": 1}"
#define ALL "\"arrival\": \"all_at_once\""
#define POI "\"arrival\": \"poisson\", \"rate_rps\": 4"
#define CLO "\"arrival\": \"closed\", \"concurrency\": 4"
#define METRICS(a, arr, eng)                                                                       \
    SRV_PT(a "-ttft-mean", eng, arr, "ttft_s", "\"mean\"") ","                                     \
    SRV_PT(a "-ttft-median", eng, arr, "ttft_s", "\"median\"") ","                                 \
    SRV_PT(a "-ttft-p90", eng, arr, "ttft_s", "\"p90\"") ","                                       \
    SRV_PT(a "-ttft-p99", eng, arr, "ttft_s", "\"p99\"") ","                                       \
    SRV_PT(a "-tpot-mean", eng, arr, "tpot_s", "\"mean\"") ","                                     \
    SRV_PT(a "-itl-mean", eng, arr, "itl_s", "\"mean\"") ","                                       \
    SRV_PT(a "-e2e-p90", eng, arr, "e2e_s", "\"p90\"") ","                                         \
    SRV_PT(a "-out", eng, arr, "output_throughput_tok_s", "null") ","                              \
    SRV_PT(a "-total", eng, arr, "total_throughput_tok_s", "null") ","                             \
    SRV_PT(a "-req", eng, arr, "request_throughput_rps", "null")

Test(fidelity_serving, one_runs_statistics_agree)
{
    const char *text = "{\"points\": [\n" METRICS("all", ALL, "vllm") ",\n" METRICS(
        "poisson", POI, "sglang") ",\n" METRICS("closed", CLO, "tensorrt-llm") "\n]}\n";
    ws_fid_report r = load_points(text, 30);
    for (int a = 0; a < 3; a++) {
        const ws_fid_point *p = &r.pt[10 * a];
        for (int k = 0; k < 10; k++) {
            cr_assert_str_empty(p[k].missing, "%s: %s", p[k].id, p[k].missing);
            cr_assert(isfinite(p[k].predicted) && p[k].predicted > 0, "%s: %g", p[k].id,
                      p[k].predicted);
        }
        const double mean = p[0].predicted, med = p[1].predicted, p90 = p[2].predicted,
                     p99 = p[3].predicted;
        cr_assert(med <= p90 && p90 <= p99, "%s: %g %g %g", p->id, med, p90, p99);
        cr_assert(mean <= p99, "%s", p->id);
        /* every request of fixed lengths: ITL's mean over gaps is TPOT's over requests */
        cr_assert_float_eq(p[5].predicted, p[4].predicted, 1e-9 * p[4].predicted, "%s", p->id);
        cr_assert(p[6].predicted > p[4].predicted, "%s: e2e > tpot", p->id);
        cr_assert_float_eq(p[7].predicted, 32 * p[9].predicted, 1e-9 * p[7].predicted);
        cr_assert_float_eq(p[8].predicted, p[7].predicted * (512 + 32) / 32.0,
                           1e-9 * p[8].predicted);
    }
    cr_assert_str_eq(r.pt[0].engine_file, "vllm-v1");
    cr_assert_eq(r.ng, 1);
    cr_assert_eq(r.g[0].expressed, 30);
    ws_fidelity_free(&r);
}

/* What a serving point cannot say is named: a capacity (a search under an SLO), lengths
 * drawn from a dataset, an offload, a latency without its statistic, a Poisson load without
 * its rate, an engine without a file. */
Test(fidelity_serving, loads_it_cannot_play_are_named)
{
    const char *text =
        "{\"points\": [\n" SRV_PT("cap", "vllm", ALL, "capacity_rps", "null") ",\n"
        " {\"id\": \"ds\", \"kind\": \"serving\", \"engine\": \"vllm\", \"source\": \"x\","
        "  \"hardware\": {\"gpu\": \"h100-sxm\"}, \"model\": \"qwen3-14b\","
        "  \"workload\": {\"arrival\": \"all_at_once\", \"num_requests\": 4, \"prompt\": 64,"
        "  \"output\": 8, \"lengths\": \"sharegpt\"}, \"metric\": \"ttft_s\", \"stat\": \"mean\","
        "  \"published\": 1},\n"
        " {\"id\": \"off\", \"kind\": \"serving\", \"engine\": \"vllm\", \"source\": \"x\","
        "  \"hardware\": {\"gpu\": \"h100-sxm\", \"host\": \"xeon-gold-5318y\"},"
        "  \"model\": \"qwen3-30b-a3b\", \"offload\": true, \"offload_what\": \"experts\","
        "  \"workload\": {\"arrival\": \"all_at_once\", \"num_requests\": 4, \"prompt\": 64,"
        "  \"output\": 8, \"lengths\": \"fixed\"}, \"metric\": \"ttft_s\", \"stat\": \"mean\","
        "  \"published\": 1},\n" SRV_PT("nostat", "vllm", ALL, "ttft_s", "null") ",\n" SRV_PT(
            "norate", "vllm", "\"arrival\": \"poisson\"", "ttft_s", "\"mean\"") ",\n"
        SRV_PT("noengine", "no-such-engine", ALL, "ttft_s", "\"mean\"") "\n]}\n";
    ws_fid_report r = load_points(text, 6);
    const char *want[] = {"capacity_rps", "lengths other than fixed", "serving points run gpu-only",
                          "the statistic", "the request rate", "engine 'no-such-engine'"};
    for (int i = 0; i < 6; i++) {
        cr_assert(strstr(r.pt[i].missing, want[i]), "%s: %s", r.pt[i].id, r.pt[i].missing);
        cr_assert(isnan(r.pt[i].ratio) && isnan(r.pt[i].predicted), "%s", r.pt[i].id);
    }
    cr_assert_eq(r.g[0].expressed, 0);
    ws_fidelity_free(&r);
}

Test(fidelity_serving, bad_serving_points_are_one_line_errors)
{
    const char *bad[] = {"[{\"id\": \"a\", \"kind\": \"serving\", \"source\": \"s\", \"published\": 1}]",
                         "[{\"id\": \"a\", \"kind\": \"bench\", \"source\": \"s\", \"published\": 1}]",
                         "[{\"id\": \"a\", \"kind\": \"serving\", \"source\": \"s\", \"published\": 1,"
                         " \"workload\": {\"num_requests\": -3}}]",
                         "[{\"id\": \"a\", \"kind\": \"serving\", \"source\": \"s\", \"published\": 1,"
                         " \"workload\": {\"rate_rps\": \"fast\"}}]"};
    th_expect_bad_points(bad, sizeof bad / sizeof *bad);
}

/* `writescope fidelity --group serving --json`: only serving points, each with group
 * "serving", its workload and engine file, and the group's summary. */
Test(fidelity_serving, cli_group_serving_json)
{
    char dir[256], path[512];
    th_tmpdir(dir, sizeof dir);
    const char *text = "{\"points\": [\n" SRV_PT("s1", "sglang", CLO, "tpot_s", "\"median\"") ",\n"
                       " {\"id\": \"e\", \"source\": \"x\", \"hardware\": {\"gpu\": \"h100-sxm\"},"
                       "  \"model\": \"qwen3-30b-a3b\", \"batch\": 1, \"prompt\": 64,"
                       "  \"output\": 8, \"metric\": \"ttft_s\", \"published\": 0.1}\n]}\n";
    th_write(dir, "s.json", text, path, sizeof path);
    const char *args[] = {"fidelity", "--points", path, "--group", "serving", "--json", NULL};
    json_t *j = th_writescope_json(args, NULL);
    json_t *pts = json_object_get(j, "points"), *gs = json_object_get(j, "groups");
    cr_assert_eq(json_array_size(pts), 1);
    json_t *p = json_array_get(pts, 0);
    cr_assert_str_eq(json_string_value(json_object_get(p, "group")), "serving");
    cr_assert_str_eq(json_string_value(json_object_get(p, "kind")), "serving");
    cr_assert_str_eq(json_string_value(json_object_get(p, "engine_file")), "sglang");
    cr_assert_str_eq(json_string_value(json_object_get(p, "stat")), "median");
    json_t *w = json_object_get(p, "workload");
    cr_assert_str_eq(json_string_value(json_object_get(w, "arrival")), "closed");
    cr_assert_eq(json_integer_value(json_object_get(w, "concurrency")), 4);
    cr_assert(json_number_value(json_object_get(p, "predicted")) > 0);
    cr_assert_eq(json_array_size(gs), 1);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(gs, 0), "group")),
                     "serving");
    const double own = json_number_value(json_object_get(p, "predicted"));
    json_decref(j);
    /* --engine runs the point under another engine's file; an unknown one is refused */
    const char *other[] = {"fidelity", "--points", path, "--group", "serving", "--engine",
                           "llama.cpp", "--json", NULL};
    j = th_writescope_json(other, NULL);
    p = json_array_get(json_object_get(j, "points"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(p, "engine_file")), "llama.cpp");
    cr_assert(json_number_value(json_object_get(p, "predicted")) > 0);
    cr_assert(json_number_value(json_object_get(p, "predicted")) != own,
              "one llama.cpp slot, not SGLang's batch, serves the four clients");
    json_decref(j);
    const char *bad[] = {"fidelity", "--points", path, "--engine", "no-such", NULL};
    th_expect_fail(bad, 2, "--engine 'no-such'", NULL);
}
