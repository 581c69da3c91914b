/* Tests for validate/fidelity_points: reading points documents without running them. Every
 * key is checked against its type and range, the refusal one line naming the file, the
 * point and the key; published is a positive normal number; counts stay within sim's
 * bounds and a point's simulated tokens within WS_FIDELITY_TOKENS_MAX; ids are identifiers;
 * descriptive text is cut whole characters at a time; a file that cannot be opened and a
 * document that cannot be parsed are clean one-line errors; a refused document leaves the
 * report as it was. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "fidelity_points.h"
#include "helpers.h"

/* An end-to-end point "a" with `extra` keys after the usual ones (a later duplicate key is
 * a parse error, so extra only adds keys). */
#define E2E(extra)                                                                                 \
    "[{\"id\": \"a\", \"source\": \"s\", \"hardware\": {\"gpu\": \"h100-sxm\"},"                   \
    " \"model\": \"qwen3-30b-a3b\", \"metric\": \"ttft_s\"" extra "}]"
/* A serving point "a" with the workload's keys `w` and more keys `extra`. */
#define SRV(w, extra)                                                                              \
    "[{\"id\": \"a\", \"kind\": \"serving\", \"source\": \"s\", \"hardware\": {\"gpu\":"           \
    " \"h100-sxm\"}, \"model\": \"qwen3-14b\", \"metric\": \"ttft_s\", \"stat\": \"mean\","        \
    " \"workload\": {\"arrival\": \"all_at_once\", \"lengths\": \"fixed\"" w "}" extra "}]"

/* The document parsed from memory as "b.json" into a fresh report: its return code, the
 * report in *r (freed by the caller), the message in *err. */
static int parse(const char *text, ws_fid_report *r, ws_err *err)
{
    memset(r, 0, sizeof *r);
    *err = (ws_err){0};
    return ws_fidelity_parse(text, strlen(text), "b.json", r, err);
}

/* text is refused with one line naming b.json, point 'a' (or its place) and every needle. */
static void refused(const char *text, const char *needle, const char *needle2)
{
    ws_fid_report r;
    ws_err err;
    cr_assert_neq(parse(text, &r, &err), 0, "accepted: %s", text);
    cr_assert_eq(r.n, 0);
    cr_assert(!strncmp(err.msg, "b.json", 6) && !strchr(err.msg, '\n'), "%s", err.msg);
    cr_assert(strstr(err.msg, needle), "'%s' lacks '%s'", err.msg, needle);
    cr_assert(!needle2 || strstr(err.msg, needle2), "'%s' lacks '%s'", err.msg, needle2);
    ws_fidelity_free(&r);
}

static void accepted(const char *text, ws_fid_report *r)
{
    ws_err err;
    cr_assert_eq(parse(text, r, &err), 0, "%s: %s", text, err.msg);
    cr_assert_eq(r->n, 1);
}

/* A key of the wrong type is refused, naming the key and the type it must have, where the
 * reader used to take it as absent. */
Test(fidelity_points, wrongly_typed_keys_name_the_key_and_its_type)
{
    const struct {
        const char *text, *key, *type;
    } bad[] = {
        {E2E(", \"published\": 1, \"kv_dtype\": 8"), "kv_dtype", "must be a string"},
        {E2E(", \"published\": 1, \"weights\": 16"), "weights", "a string or an object"},
        {E2E(", \"published\": 1, \"weights\": {\"gpu_part\": 3}"), "weights.gpu_part",
         "must be a string"},
        {E2E(", \"published\": 1, \"weights\": {\"cpu_experts\": [\"bf16\"]}"),
         "weights.cpu_experts", "must be a string"},
        {E2E(", \"published\": 1, \"quantized\": \"yes\""), "quantized", "true or false"},
        {E2E(", \"published\": 1, \"placement\": [1]"), "placement", "must be an object"},
        {E2E(", \"published\": 1, \"placement\": {\"all_experts_cpu\": 1}"),
         "placement.all_experts_cpu", "true or false"},
        {E2E(", \"published\": 1, \"placement\": {\"prefill\": 1}"), "placement.prefill",
         "must be a string"},
        {E2E(", \"published\": 1, \"placement\": {\"gpu_experts\": 2.5}"), "placement.gpu_experts",
         "whole number"},
        {E2E(", \"published\": 1, \"prompt_range\": 5"), "prompt_range", "must be an object"},
        {E2E(", \"published\": 1, \"notes\": 5"), "notes", "must be a string"},
        {E2E(", \"published\": 1, \"engine\": {\"name\": \"vllm\"}"), "engine", "must be a string"},
        {"[{\"id\": \"a\", \"source\": 5, \"published\": 1}]", "source", "a string or an object"},
        {"[{\"id\": \"a\", \"source\": {\"where\": 5}, \"published\": 1}]", "source.where",
         "must be a string"},
        {"[{\"id\": \"a\", \"source\": \"s\", \"hardware\": \"h100-sxm\", \"published\": 1}]",
         "hardware", "must be an object"},
        {"[{\"id\": \"a\", \"source\": \"s\", \"hardware\": {\"gpu\": 100}, \"published\": 1}]",
         "hardware.gpu", "must be a string"},
        {SRV(", \"num_requests\": 4, \"prompt\": 8, \"output\": 8, \"rate_rps\": \"fast\"",
             ", \"published\": 1"),
         "workload.rate_rps", "must be a number"},
        {SRV(", \"num_requests\": 4, \"prompt\": 8, \"output\": 8, \"dataset\": 5",
             ", \"published\": 1"),
         "workload.dataset", "must be a string"},
        {SRV(", \"num_requests\": \"4\", \"prompt\": 8, \"output\": 8", ", \"published\": 1"),
         "workload.num_requests", "whole number"},
        {SRV(", \"num_requests\": 4, \"prompt\": 8, \"output\": 8", ", \"published\": 1, "
                                                                    "\"group\": [\"g\"]"),
         "group", "must be a string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char key[96];
        snprintf(key, sizeof key, "point 'a': %s ", bad[i].key);
        refused(bad[i].text, key, bad[i].type);
    }
    /* the same keys with their types are taken */
    ws_fid_report r;
    accepted(E2E(", \"published\": 1, \"kv_dtype\": \"fp8\", \"weights\": {\"gpu_part\": "
                 "\"bf16\", \"cpu_experts\": \"none\"}, \"quantized\": false, \"notes\": \"n\","
                 " \"placement\": {\"all_experts_cpu\": true, \"prefill\": \"cpu\"}"),
             &r);
    cr_assert_str_eq(r.pt[0].kv_dtype, "fp8");
    cr_assert_str_eq(r.pt[0].weights_gpu, "bf16");
    cr_assert_eq(r.pt[0].all_experts_cpu, 1);
    ws_fidelity_free(&r);
}

/* published is a positive normal number: zero, negative, subnormal (5e-324 gave a ratio of
 * infinity, printed null with no reason), a string or nothing are refused. */
Test(fidelity_points, published_is_a_positive_normal_number)
{
    const char *bad[] = {E2E(", \"published\": 5e-324"), E2E(", \"published\": 1e-310"),
                         E2E(", \"published\": 0"),      E2E(", \"published\": -2"),
                         E2E(", \"published\": \"3\""),  E2E("")};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        refused(bad[i], "point 'a': published must be a", NULL);
    refused(E2E(", \"published\": 5e-324"), "positive normal number, not 4.94066e-324", NULL);
    refused(SRV(", \"num_requests\": 4, \"prompt\": 8, \"output\": 8, \"rate_rps\": 5e-324",
                ", \"published\": 1"),
            "workload.rate_rps must be a positive normal number up to 1e+09", NULL);
    ws_fid_report r;
    accepted(E2E(", \"published\": 2.2250738585072014e-308"), &r); /* the least normal */
    ws_fidelity_free(&r);
}

/* A point's counts stay within what `writescope sim` takes: batch 2^20, prompt and output
 * 2^24 tokens, 10^6 clients. */
Test(fidelity_points, counts_are_bounded_as_sim_bounds_them)
{
    refused(E2E(", \"published\": 1, \"batch\": 1048577"),
            "batch must be a whole number from 0 to 1048576", NULL);
    refused(E2E(", \"published\": 1, \"prompt\": 16777217"),
            "prompt must be a whole number from 0 to 16777216", NULL);
    refused(E2E(", \"published\": 1, \"output\": 16777217"), "output must be", NULL);
    refused(SRV(", \"num_requests\": 4, \"prompt\": 8, \"output\": 8, \"concurrency\": 1000001",
                ", \"published\": 1"),
            "workload.concurrency must be a whole number from 0 to 1000000", NULL);
    refused(SRV(", \"num_requests\": 4, \"prompt\": 16777217, \"output\": 8", ", \"published\": 1"),
            "workload.prompt must be", NULL);
    ws_fid_report r;
    accepted(E2E(", \"published\": 1, \"batch\": 1048576, \"prompt\": 8, \"output\": 8"), &r);
    cr_assert_eq(r.pt[0].batch, WS_FIDELITY_BATCH_MAX);
    ws_fidelity_free(&r);
}

/* A run's own chunk and prefill threshold are read where given (0: the engine's), and
 * refused at 0 or past the tokens a prompt may have. */
Test(fidelity_points, run_chunk_and_prefill_threshold)
{
    ws_fid_report r;
    accepted(E2E(", \"published\": 1, \"placement\": {\"chunk\": 32768, "
                 "\"prefill_gpu_tokens\": 400}"),
             &r);
    cr_assert_eq(r.pt[0].chunk, 32768);
    cr_assert_eq(r.pt[0].prefill_gpu_tokens, 400);
    ws_fidelity_free(&r);
    accepted(E2E(", \"published\": 1"), &r);
    cr_assert_eq(r.pt[0].chunk, 0);
    cr_assert_eq(r.pt[0].prefill_gpu_tokens, 0);
    ws_fidelity_free(&r);
    refused(E2E(", \"published\": 1, \"placement\": {\"chunk\": 0}"),
            "placement.chunk must be a whole number from 1", NULL);
    refused(E2E(", \"published\": 1, \"placement\": {\"prefill_gpu_tokens\": 0}"),
            "placement.prefill_gpu_tokens must be a whole number from 1", NULL);
    refused(E2E(", \"published\": 1, \"placement\": {\"chunk\": 16777217}"),
            "placement.chunk must be a whole number from 0 to 16777216", NULL);
}

/* A point simulates at most 2^24 tokens: batch (a serving point's requests) times prompt and
 * output, an unpublished prompt at the longest one tried (2048, or prompt_range's hi) and
 * an unpublished output at 64. */
Test(fidelity_points, simulated_tokens_are_bounded)
{
    refused(E2E(", \"published\": 1, \"batch\": 1000000, \"prompt\": 64, \"output\": 8"),
            "72000000 tokens to simulate (batch 1000000 x (prompt 64 + output 8)), more than "
            "the 16777216 of one point",
            NULL);
    refused(
        SRV(", \"num_requests\": 100000, \"prompt\": 100, \"output\": 100", ", \"published\": 1"),
        "20000000 tokens to simulate (workload.num_requests 100000", NULL);
    refused(E2E(", \"published\": 1, \"batch\": 7944"), "(prompt 2048 + output 64)", NULL);
    refused(E2E(", \"published\": 1, \"batch\": 1000, \"prompt_range\": {\"lo\": 1, \"hi\": "
                "16777216}"),
            "(prompt 16777216 + output 64)", NULL);
    ws_fid_report r;
    accepted(E2E(", \"published\": 1, \"batch\": 7943"), &r); /* 7943 x 2112 < 2^24 */
    ws_fidelity_free(&r);
}

/* Ids are identifiers: a control character (C0, DEL, C1) or more than 95 bytes is refused,
 * the message naming the point by its place; names (a model, a kind, a metric) refuse
 * control characters too; other characters are taken. */
Test(fidelity_points, ids_and_names_refuse_control_characters)
{
    const char *bad[] = {"[{\"id\": \"a\\u001b[2Jb\", \"source\": \"s\", \"published\": 1}]",
                         "[{\"id\": \"a\\u0007\", \"source\": \"s\", \"published\": 1}]",
                         "[{\"id\": \"a\\u007f\", \"source\": \"s\", \"published\": 1}]",
                         "[{\"id\": \"a\\u009b2J\", \"source\": \"s\", \"published\": 1}]",
                         "[{\"id\": \"a\\nb\", \"source\": \"s\", \"published\": 1}]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        refused(bad[i], "b.json: point 0: id has a control character", NULL);
    char id[200], text[400];
    memset(id, 'x', 96);
    id[96] = '\0';
    snprintf(text, sizeof text, "[{\"id\": \"%s\", \"source\": \"s\", \"published\": 1}]", id);
    refused(text, "point 0: id is longer than 95 bytes", NULL);
    refused(E2E(", \"published\": 1, \"kind\": \"e2e\\u001b\""), "point 'a': kind has a control",
            NULL);
    refused("[{\"id\": \"a\", \"source\": \"s\", \"model\": \"q\\u0085\", \"published\": 1}]",
            "point 'a': model has a control character", NULL);
    ws_fid_report r;
    accepted("[{\"id\": \"caf\\u00e9-\\u4e2d\", \"source\": \"s\", \"published\": 1}]", &r);
    cr_assert_str_eq(r.pt[0].id, "caf\xc3\xa9-\xe4\xb8\xad");
    ws_fidelity_free(&r);
}

/* Descriptive text longer than its field is cut before the character that does not fit
 * whole, so it stays UTF-8 (a JSON string in --json) and ends on a whole character. */
Test(fidelity_points, descriptive_text_is_cut_at_a_character_boundary)
{
    char where[1300], text[1500];
    size_t n = 0;
    for (int i = 0; i < 200; i++) /* U+00E9, two bytes each: 400 */
        n += (size_t)snprintf(where + n, sizeof where - n, "\\u00e9");
    snprintf(text, sizeof text,
             "[{\"id\": \"a\", \"source\": {\"where\": \"%s\"}, \"published\": 1}]", where);
    ws_fid_report r;
    accepted(text, &r);
    const char *s = r.pt[0].source;
    cr_assert_eq(strlen(s), sizeof r.pt[0].source - 2, "%zu bytes", strlen(s)); /* 318: even */
    json_t *j = json_string(s);
    cr_assert_not_null(j, "not UTF-8 after the cut");
    json_decref(j);
    ws_fidelity_free(&r);
}

/* A points file that cannot be opened: "path: cannot open: reason", no line number; a
 * document jansson cannot parse: its line and column where it gives them. */
Test(fidelity_points, unreadable_documents_are_clean_one_line_errors)
{
    ws_fid_report r = {0};
    ws_err err = {0};
    cr_assert_eq(ws_fidelity_load("/nonexistent/points.json", &r, &err), WS_EIO);
    cr_assert_str_eq(err.msg, "/nonexistent/points.json: cannot open: No such file or directory");
    char dir[256];
    th_tmpdir(dir, sizeof dir);
    cr_assert_neq(ws_fidelity_load(dir, &r, &err), 0);
    cr_assert(strstr(err.msg, dir) && !strstr(err.msg, "-1") && !strchr(err.msg, '\n'), "%s",
              err.msg);
    cr_assert_eq(parse("[{\"id\": \"a\",\n \"source\": tru}]", &r, &err), WS_EPARSE);
    cr_assert(!strncmp(err.msg, "b.json:2:", 9) && !strchr(err.msg, '\n'), "%s", err.msg);
    cr_assert_eq(parse("", &r, &err), WS_EPARSE);
    cr_assert(!strncmp(err.msg, "b.json:", 7) && !strstr(err.msg, "-1"), "%s", err.msg);
    cr_assert_eq(parse("{\"nope\": 1}", &r, &err), WS_EPARSE);
    cr_assert(strstr(err.msg, "b.json: expected an array of points"), "%s", err.msg);
    ws_fidelity_free(&r);
}

/* A refused document adds none of its points, also those before the bad one; the ids of a
 * second document are checked against the first's. */
Test(fidelity_points, a_refused_document_leaves_the_report_as_it_was)
{
    ws_fid_report r = {0};
    ws_err err = {0};
    const char *one = "[{\"id\": \"a\", \"source\": \"s\", \"published\": 1}]";
    cr_assert_eq(ws_fidelity_parse(one, strlen(one), "one.json", &r, &err), 0, "%s", err.msg);
    const char *two = "[{\"id\": \"b\", \"source\": \"s\", \"published\": 1},"
                      " {\"id\": \"c\", \"source\": \"s\", \"published\": 0}]";
    cr_assert_neq(ws_fidelity_parse(two, strlen(two), "two.json", &r, &err), 0);
    cr_assert_eq(r.n, 1);
    cr_assert_str_eq(r.pt[0].id, "a");
    cr_assert_neq(ws_fidelity_parse(one, strlen(one), "again.json", &r, &err), 0);
    cr_assert(strstr(err.msg, "again.json: two points named 'a'"), "%s", err.msg);
    cr_assert_eq(r.n, 1);
    ws_fidelity_free(&r);
}
