/* test_model: config.json parsing and derived sizes (runtime/model.c). Expected values
 * are worked out by hand from the published configs, not read back from the code. Also the
 * formats each model is published in (runtime/published.c, models/published.json): the
 * shipped file covers every model, and a malformed one is refused. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers.h"
#include "model.h"
#include "published.h"

static void load_shipped(const char *name, ws_model *m)
{
    char path[4096];
    ws_err err = {0};
    cr_assert_eq(ws_model_resolve(name, path, sizeof path, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_model_load(path, m, &err), 0, "%s", err.msg);
}

static int parse(const char *json, ws_model *m, ws_err *err)
{
    return ws_model_parse(json, "test.json", m, err);
}

Test(model, qwen3_30b_a3b)
{
    ws_model m;
    ws_model_stats s;
    load_shipped("qwen3-30b-a3b", &m);
    ws_model_derive(&m, WS_DT_BF16, &s);
    cr_assert_eq(m.attn, WS_ATTN_GQA);
    cr_assert_eq(m.n_q_heads, 32);
    cr_assert_eq(m.n_kv_heads, 4);
    cr_assert_eq(m.head_dim, 128); /* from head_dim, not hidden/heads (= 64) */
    cr_assert_eq(m.n_experts, 128);
    cr_assert_eq(m.n_moe_layers, 48);
    cr_assert_eq(s.kv_bytes_tok_layer, 2048.0);   /* 2 x 4 x 128 x 2 B */
    cr_assert_eq(s.kv_bytes_tok, 98304.0);        /* x 48 layers */
    cr_assert_eq(s.attn_flops_tok_layer, 16384.0); /* 4 x 32 x 128 */
    cr_assert_eq(s.expert_bytes, 3.0 * 2048 * 768 * 2);
    /* Published: 30.5B total, 3.3B activated. */
    cr_assert(s.total_params > 30.4e9 && s.total_params < 30.6e9, "total %g", s.total_params);
    cr_assert(s.active_params > 3.3e9 && s.active_params < 3.4e9, "active %g", s.active_params);
}

/* A GQA group of 16 query heads per KV head, the largest the CPU kernels serve. */
Test(model, qwen3_235b_a22b)
{
    ws_model m;
    ws_model_stats s;
    load_shipped("qwen3-235b-a22b", &m);
    ws_model_derive(&m, WS_DT_BF16, &s);
    cr_assert_eq(m.attn, WS_ATTN_GQA);
    cr_assert_eq(m.n_q_heads, 64);
    cr_assert_eq(m.n_kv_heads, 4);
    cr_assert_eq(m.head_dim, 128);
    cr_assert_eq(m.n_moe_layers, 94);
    cr_assert_eq(s.kv_bytes_tok_layer, 2048.0);    /* 2 x 4 x 128 x 2 B */
    cr_assert_eq(s.attn_flops_tok_layer, 32768.0); /* 4 x 64 x 128 */
    cr_assert_eq(s.expert_bytes, 3.0 * 4096 * 1536 * 2);
    /* Published: 235B total, 22B activated. */
    cr_assert(s.total_params > 234.5e9 && s.total_params < 235.5e9, "total %g", s.total_params);
    cr_assert(s.active_params > 21.9e9 && s.active_params < 22.5e9, "active %g", s.active_params);
}

Test(model, deepseek_v2_lite)
{
    ws_model m;
    ws_model_stats s;
    load_shipped("deepseek-v2-lite", &m);
    ws_model_derive(&m, WS_DT_BF16, &s);
    cr_assert_eq(m.attn, WS_ATTN_MLA);
    cr_assert_eq(m.kv_lora_rank, 512);
    cr_assert_eq(m.q_lora_rank, 0); /* null in the config */
    cr_assert_eq(m.n_moe_layers, 26);
    cr_assert_eq(m.n_dense_layers, 1); /* first_k_dense_replace = 1 */
    cr_assert_eq(s.kv_bytes_tok_layer, 1152.0); /* (512 + 64) x 2 B */
    cr_assert_eq(s.kv_bytes_tok, 31104.0);
    cr_assert_eq(s.attn_flops_tok_layer, 2.0 * 16 * (2 * 512 + 64));
    cr_assert_eq(s.shared_bytes_layer, 2.0 * 3 * 2048 * 1408 * 2);
    cr_assert_eq(s.dense_bytes, 3.0 * 2048 * 10944 * 2);
    cr_assert(s.total_params > 15.6e9 && s.total_params < 15.8e9, "total %g", s.total_params);
}

Test(model, mixtral_8x7b)
{
    ws_model m;
    ws_model_stats s;
    load_shipped("mixtral-8x7b", &m);
    ws_model_derive(&m, WS_DT_BF16, &s);
    cr_assert_eq(m.attn, WS_ATTN_GQA);
    cr_assert_eq(m.n_experts, 8); /* num_local_experts */
    cr_assert_eq(m.moe_intermediate, 14336); /* falls back to intermediate_size */
    cr_assert_eq(s.kv_bytes_tok_layer, 4096.0);
    cr_assert_eq(s.kv_bytes_tok, 131072.0);
    cr_assert_eq(m.sliding_window, 0); /* null */
    /* Published: 46.7B total, 12.9B active. */
    cr_assert(s.total_params > 46.6e9 && s.total_params < 46.8e9, "total %g", s.total_params);
    cr_assert(s.active_params > 12.8e9 && s.active_params < 13.0e9, "active %g", s.active_params);
}

Test(model, deepseek_v4_flash_like)
{
    ws_model m;
    ws_model_stats s;
    load_shipped("deepseek-v4-flash", &m);
    ws_model_derive(&m, WS_DT_BF16, &s);
    cr_assert_eq(m.attn, WS_ATTN_MLA_SPARSE);
    cr_assert(m.approximate);
    cr_assert_neq(strstr(m.provenance, "APPROXIMATE"), NULL);
    cr_assert_eq(m.layers, 43);
    cr_assert_eq(m.n_q_heads, 64);
    cr_assert_eq(m.index_topk, 512);
    cr_assert_eq(m.n_experts, 256);
    cr_assert_eq(m.experts_per_tok, 6);
    cr_assert_eq(s.kv_bytes_tok_layer, 1152.0);
    cr_assert_eq(s.index_bytes_tok_layer, 256.0);
    cr_assert_eq(s.attended_max, 512 + 128);
}

Test(model, kv_dtype_scales_bytes)
{
    ws_model m;
    ws_model_stats s;
    load_shipped("qwen3-30b-a3b", &m);
    ws_model_derive(&m, WS_DT_FP8, &s);
    cr_assert_eq(s.kv_bytes_tok, 49152.0);
    ws_model_derive(&m, WS_DT_FP32, &s);
    cr_assert_eq(s.kv_bytes_tok, 196608.0);
}

Test(model, attention_kernel_shape)
{
    /* Qwen3-30B-A3B: 32 q / 4 kv heads of 128; DeepSeek-V2-Lite (absorbed MLA): one
     * latent head of 512 + 64 rope, V = the latent, softmax scale over nope 128 + rope 64. */
    ws_model m;
    ws_kv_layout kv;
    int n_q;
    float scale;
    ws_err err = {0};
    load_shipped("qwen3-30b-a3b", &m);
    cr_assert_eq(ws_model_attn_shape(&m, WS_DT_BF16, 256, &kv, &n_q, &scale, &err), 0, "%s",
                 err.msg);
    cr_assert(kv.n_kv_heads == 4 && kv.d_k == 128 && kv.d_v == 128 && !kv.v_shares_k);
    cr_assert(kv.page_tokens == 256 && kv.dtype == WS_DT_BF16 && n_q == 32);
    cr_assert_float_eq(scale, 1.0f / sqrtf(128.0f), 1e-7f);
    load_shipped("deepseek-v2-lite", &m);
    cr_assert_eq(ws_model_attn_shape(&m, WS_DT_FP16, 64, &kv, &n_q, &scale, &err), 0, "%s",
                 err.msg);
    cr_assert(kv.n_kv_heads == 1 && kv.d_k == 576 && kv.d_v == 512 && kv.v_shares_k);
    cr_assert(kv.page_tokens == 64 && kv.dtype == WS_DT_FP16 && n_q == 16);
    cr_assert_float_eq(scale, 1.0f / sqrtf(192.0f), 1e-7f);
    m.n_q_heads = 0;
    cr_assert_eq(ws_model_attn_shape(&m, WS_DT_BF16, 256, &kv, &n_q, &scale, &err), WS_EINVAL);
    cr_assert(strstr(err.msg, "no attention shape"), "%s", err.msg);
}

Test(model, hub_field_variants)
{
    ws_model m;
    ws_err err = {0};
    /* Qwen2-MoE style: num_experts, shared_expert_intermediate_size, decoder_sparse_step,
     * mlp_only_layers, integral floats, nested text_config. */
    const char *qwen2 =
        "{\"architectures\":[\"X\"],\"text_config\":{\"hidden_size\":1024.0,"
        "\"num_hidden_layers\":8,\"num_attention_heads\":8,\"num_key_value_heads\":2,"
        "\"vocab_size\":1000,\"intermediate_size\":4096,\"num_experts\":16,"
        "\"num_experts_per_tok\":4,\"moe_intermediate_size\":256,"
        "\"shared_expert_intermediate_size\":1024,\"decoder_sparse_step\":2,"
        "\"mlp_only_layers\":[1]}}";
    cr_assert_eq(parse(qwen2, &m, &err), 0, "%s", err.msg);
    cr_assert_eq(m.hidden, 1024);
    cr_assert_eq(m.head_dim, 128);
    /* MoE layers: (i+1) % 2 == 0 -> 1,3,5,7; minus mlp_only 1 -> 3 */
    cr_assert_eq(m.n_moe_layers, 3);
    cr_assert_eq(m.n_dense_layers, 5);
    cr_assert_eq(m.shared_intermediate, 1024);
    ws_model_stats s;
    ws_model_derive(&m, WS_DT_BF16, &s);
    cr_assert_eq(s.shared_bytes_layer, (3.0 * 1024 * 1024 + 1024) * 2);

    /* DeepSeek-V3 style with q_lora_rank and moe_layer_freq. */
    const char *v3 = "{\"hidden_size\":7168,\"num_hidden_layers\":61,\"num_attention_heads\":128,"
                     "\"vocab_size\":129280,\"kv_lora_rank\":512,\"q_lora_rank\":1536,"
                     "\"qk_rope_head_dim\":64,\"qk_nope_head_dim\":128,\"v_head_dim\":128,"
                     "\"n_routed_experts\":256,\"num_experts_per_tok\":8,\"n_shared_experts\":1,"
                     "\"moe_intermediate_size\":2048,\"intermediate_size\":18432,"
                     "\"first_k_dense_replace\":3,\"moe_layer_freq\":1}";
    cr_assert_eq(parse(v3, &m, &err), 0, "%s", err.msg);
    ws_model_derive(&m, WS_DT_BF16, &s);
    cr_assert_eq(m.n_moe_layers, 58);
    cr_assert_eq(s.kv_bytes_tok, 61.0 * 1152);
    /* DeepSeek-V3: 671B total, 37B activated (without the MTP module). */
    cr_assert(s.total_params > 670e9 && s.total_params < 673e9, "total %g", s.total_params);
    cr_assert(s.active_params > 36.5e9 && s.active_params < 38.5e9, "active %g", s.active_params);
}

static void expect_error(const char *json, int code, const char *needle)
{
    ws_model m;
    ws_err err = {0};
    cr_assert_eq(parse(json, &m, &err), code, "expected code %d for %s (msg: %s)", code, json,
                 err.msg);
    cr_assert_neq(strstr(err.msg, "test.json"), NULL, "message names the file: %s", err.msg);
    cr_assert_neq(strstr(err.msg, needle), NULL, "message '%s' lacks '%s'", err.msg, needle);
    cr_assert_eq(strchr(err.msg, '\n'), NULL);
}

Test(model, bad_input)
{
    expect_error("{\"hidden_size\": 2048,", WS_EPARSE, "invalid JSON");
    expect_error("[1,2]", WS_EPARSE, "expected a JSON object");
    expect_error("{\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":10}", WS_EINVAL,
                 "hidden_size");
    expect_error("{\"hidden_size\":\"big\",\"num_hidden_layers\":2}", WS_EPARSE,
                 "\"hidden_size\" must be an integer");
    expect_error("{\"hidden_size\":-4,\"num_hidden_layers\":2}", WS_EINVAL, "out of range");
    expect_error("{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":6,"
                 "\"num_key_value_heads\":4,\"vocab_size\":10,\"intermediate_size\":8}",
                 WS_EINVAL, "not a multiple");
    expect_error("{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                 "\"vocab_size\":10,\"num_local_experts\":8,\"num_experts_per_tok\":9,"
                 "\"intermediate_size\":8}",
                 WS_EINVAL, "num_experts_per_tok");
    expect_error("{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                 "\"vocab_size\":10,\"compress_ratios\":[0,4]}",
                 WS_EUNSUP, "compress_ratios");
    expect_error("{\"hidden_size\":64,\"torch_dtype\":\"int3\"}", WS_EUNSUP, "torch_dtype");
}

/* Hostile sizes: products and sums of fields that overflow an int are 64-bit, counts that
 * would make the layer loop spin are bounded, duplicate keys are an error. */
#define BASE "\"hidden_size\":64,\"num_attention_heads\":4,\"vocab_size\":10,\"intermediate_size\":8"

Test(model, hostile_sizes)
{
    ws_model m;
    ws_err err = {0};
    /* 4096 shared experts of 2^20: 2^32, past INT_MAX. */
    const char *shared = "{" BASE ",\"num_hidden_layers\":2,\"n_routed_experts\":8,"
                         "\"num_experts_per_tok\":2,\"moe_intermediate_size\":1048576,"
                         "\"n_shared_experts\":4096}";
    cr_assert_eq(parse(shared, &m, &err), 0, "%s", err.msg);
    cr_assert_eq(m.shared_intermediate, 4294967296LL);
    ws_model_stats s;
    ws_model_derive(&m, WS_DT_BF16, &s);
    cr_assert_eq(s.shared_bytes_layer, 3.0 * 64 * 4294967296.0 * 2);

    /* top-k and window of 2^30 tokens each: 2^31 attended, past INT_MAX. */
    const char *sparse = "{" BASE ",\"num_hidden_layers\":2,\"kv_lora_rank\":512,"
                         "\"qk_rope_head_dim\":64,\"index_topk\":1073741824,"
                         "\"sliding_window\":1073741824,\"index_n_heads\":4,"
                         "\"index_head_dim\":128}";
    cr_assert_eq(parse(sparse, &m, &err), 0, "%s", err.msg);
    ws_model_derive(&m, WS_DT_BF16, &s);
    cr_assert_eq(s.attended_max, 2147483648LL);

    /* Bounds that fit real models; past them, an error naming the field. */
    expect_error("{" BASE ",\"num_hidden_layers\":1073741824}", WS_EINVAL,
                 "\"num_hidden_layers\" = 1073741824 is out of range");
    expect_error("{\"hidden_size\":65537,\"num_hidden_layers\":2}", WS_EINVAL, "hidden_size");
    expect_error("{" BASE ",\"num_hidden_layers\":2,\"num_experts\":70000,"
                 "\"num_experts_per_tok\":2}",
                 WS_EINVAL, "num_experts");
    expect_error("{\"hidden_size\":1e300,\"num_hidden_layers\":2}", WS_EINVAL, "out of range");

    /* mlp_only_layers: layer indices, checked once each, not scanned per layer. */
    expect_error("{" BASE ",\"num_hidden_layers\":2,\"num_experts\":4,\"num_experts_per_tok\":2,"
                 "\"moe_intermediate_size\":8,\"mlp_only_layers\":[5]}",
                 WS_EINVAL, "mlp_only_layers");
    expect_error("{" BASE ",\"num_hidden_layers\":2,\"num_experts\":4,\"num_experts_per_tok\":2,"
                 "\"moe_intermediate_size\":8,\"mlp_only_layers\":[\"0\"]}",
                 WS_EINVAL, "mlp_only_layers");
    expect_error("{" BASE ",\"num_hidden_layers\":2,\"mlp_only_layers\":3}", WS_EPARSE,
                 "mlp_only_layers");
    /* The largest layer count with a long mlp_only_layers list parses at once. */
    size_t cap = 64 + 8 * 100000 + 256;
    char *big = malloc(cap);
    int o = snprintf(big, cap,
                     "{" BASE ",\"num_hidden_layers\":%d,\"num_experts\":4,"
                     "\"num_experts_per_tok\":2,\"moe_intermediate_size\":8,\"mlp_only_layers\":[",
                     WS_MODEL_MAX_LAYERS);
    for (int i = 0; i < 100000; i++)
        o += snprintf(big + o, cap - (size_t)o, "%s%d", i ? "," : "", (i * 7) % WS_MODEL_MAX_LAYERS);
    snprintf(big + o, cap - (size_t)o, "]}");
    cr_assert_eq(parse(big, &m, &err), 0, "%s", err.msg);
    cr_assert_eq(m.n_dense_layers, WS_MODEL_MAX_LAYERS);
    free(big);
}

Test(model, duplicate_keys_rejected)
{
    expect_error("{" BASE ",\"num_hidden_layers\":2,\"num_hidden_layers\":3}", WS_EPARSE,
                 "duplicate");
    expect_error("{\"text_config\":{" BASE ",\"num_hidden_layers\":2,\"vocab_size\":11}}",
                 WS_EPARSE, "duplicate");
}

Test(model, missing_and_empty_files)
{
    ws_model m;
    ws_err err = {0};
    cr_assert_eq(ws_model_load("/nonexistent/config.json", &m, &err), WS_EIO);
    cr_assert_neq(strstr(err.msg, "/nonexistent/config.json"), NULL, "%s", err.msg);
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "empty.json", "", path, sizeof path);
    cr_assert_eq(ws_model_load(path, &m, &err), WS_EPARSE);
    cr_assert_neq(strstr(err.msg, "empty file"), NULL, "%s", err.msg);
}

Test(model, unknown_name_lists_known)
{
    char path[4096];
    ws_err err = {0};
    cr_assert_eq(ws_model_resolve("no-such-model", path, sizeof path, &err), WS_ENOTFOUND);
    cr_assert_neq(strstr(err.msg, "unknown model 'no-such-model'"), NULL, "%s", err.msg);
    cr_assert_neq(strstr(err.msg, "qwen3-30b-a3b"), NULL, "%s", err.msg);
}

/* A llama.cpp GGUF quantization ("q4_k_m", "ud_q2_k_xl"), not a safetensors format. */
static int is_gguf(const ws_wformat *f)
{
    return f->name[0] == 'q' || !strncmp(f->name, "ud_", 3);
}

/* Every shipped model is listed in models/published.json with a reference for each format,
 * and the file itself is not taken for a model. */
Test(model, published_formats_shipped)
{
    const ws_wformat *f[16];
    int n = -1;
    ws_err err = {0};
    cr_assert_eq(ws_model_published_formats("qwen3-30b-a3b", f, 16, &n, &err), 0, "%s", err.msg);
    int bf16 = 0, gguf = 0;
    for (int i = 0; i < n; i++) {
        bf16 += f[i] == ws_wformat_find("bf16");
        gguf += is_gguf(f[i]);
    }
    cr_assert_eq(bf16, 1, "bf16 listed %d times in %d formats", bf16, n);
    cr_assert_geq(gguf, 1, "no GGUF quantization among %d formats", n);
    char where[512];
    cr_assert_eq(ws_model_published_where("qwen3-30b-a3b", "Q4_K_M", where, sizeof where, &err), 0,
                 "%s", err.msg);
    cr_assert_neq(strstr(where, "Qwen3-30B-A3B"), NULL, "where: '%s'", where);
    cr_assert_eq(ws_model_published_where("qwen3-30b-a3b", "bf16", where, sizeof where, &err), 0);
    cr_assert_neq(strstr(where, "huggingface.co/Qwen/Qwen3-30B-A3B"), NULL, "where: '%s'", where);

    /* At most max, in the file's order. */
    const ws_wformat *first[1];
    int n1 = -1;
    cr_assert_eq(ws_model_published_formats("qwen3-30b-a3b", first, 1, &n1, &err), 0);
    cr_assert_eq(n1, 1);
    cr_assert_eq(first[0], f[0]);

    char names[64][64];
    int nm = ws_model_list(names, 64, &err);
    cr_assert_geq(nm, 10, "%d models", nm);
    for (int m = 0; m < nm; m++) {
        cr_assert_neq(strcmp(names[m], WS_MODEL_PUBLISHED), 0, "published.json listed as a model");
        cr_assert_eq(ws_model_published_formats(names[m], f, 16, &n, &err), 0, "%s", err.msg);
        cr_assert_geq(n, 1, "%s: no published format", names[m]);
        for (int i = 0; i < n; i++) {
            cr_assert_eq(ws_model_published_where(names[m], f[i]->name, where, sizeof where, &err),
                         0, "%s", err.msg);
            cr_assert_gt(strlen(where), 10, "%s %s: where '%s'", names[m], f[i]->name, where);
        }
    }
    char path[4096];
    cr_assert_eq(ws_model_resolve(WS_MODEL_PUBLISHED, path, sizeof path, &err), WS_ENOTFOUND);
}

Test(model, published_unlisted)
{
    const ws_wformat *f[4] = {NULL};
    int n = -1;
    ws_err err = {0};
    cr_assert_eq(ws_model_published_formats("no-such-model", f, 4, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 0);
    cr_assert_null(f[0]);
    char where[64] = "x";
    cr_assert_eq(ws_model_published_where("no-such-model", "bf16", where, sizeof where, &err), 0);
    cr_assert_str_empty(where);
    /* A listed model, a format it is not published in. */
    strcpy(where, "x");
    cr_assert_eq(ws_model_published_where("deepseek-v4-flash", "q2_k", where, sizeof where, &err),
                 0, "%s", err.msg);
    cr_assert_str_empty(where);
    cr_assert_eq(ws_model_published_where("qwen3-30b-a3b", "q9_z", where, sizeof where, &err),
                 WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "q9_z"), NULL, "%s", err.msg);
}

/* Runs the published lookup for model "m" against a file holding `text` (NULL: no file),
 * found through WRITESCOPE_HOME as the shipped one is. */
static int published_with(const char *text, const ws_wformat **f, int *n, ws_err *err)
{
    char dir[64], models[128], path[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(models, sizeof models, "%s/models", dir);
    cr_assert_eq(mkdir(models, 0700), 0);
    if (text)
        th_write(models, "published.json", text, path, sizeof path);
    const char *old = getenv("WRITESCOPE_HOME");
    char saved[4096] = "";
    if (old)
        snprintf(saved, sizeof saved, "%s", old);
    setenv("WRITESCOPE_HOME", dir, 1);
    int rc = ws_model_published_formats("m", f, 4, n, err);
    if (old)
        setenv("WRITESCOPE_HOME", saved, 1);
    else
        unsetenv("WRITESCOPE_HOME");
    return rc;
}

Test(model, published_malformed_refused)
{
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"{\"models\": {\"m\": [", "invalid JSON"},
        {"{\"models\": []}", "\"models\" object"},
        {"{\"models\": {\"m\": {\"format\": \"bf16\"}}}", "is not a list"},
        {"{\"models\": {\"m\": [\"bf16\"]}}", "is not an object"},
        {"{\"models\": {\"m\": [{\"format\": \"q9\", \"where\": \"w\", \"by\": \"b\"}]}}",
         "unknown weight format 'q9'"},
        {"{\"models\": {\"m\": [{\"format\": \"bf16\", \"by\": \"b\"}]}}", "\"where\" is missing"},
        {"{\"models\": {\"m\": [{\"format\": \"bf16\", \"where\": \"a\\nb\", \"by\": \"b\"}]}}",
         "control character"},
        {"{\"models\": {\"m\": [{\"format\": \"bf16\", \"where\": \"w\", \"by\": \"b\"},"
         " {\"format\": \"bfloat16\", \"where\": \"w\", \"by\": \"b\"}]}}",
         "listed twice"},
        /* Another model's bad entry is refused as well. */
        {"{\"models\": {\"m\": [], \"other\": [{\"format\": \"fp7\", \"where\": \"w\", \"by\": "
         "\"b\"}]}}",
         "models.\"other\"[0]"},
        {"{\"models\": {\"m\": []}, \"models\": {}}", "invalid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const ws_wformat *f[4];
        int n = -1;
        ws_err err = {0};
        cr_assert_eq(published_with(bad[i].text, f, &n, &err), WS_EINVAL, "case %zu", i);
        cr_assert_eq(n, 0, "case %zu", i);
        cr_assert_neq(strstr(err.msg, bad[i].msg), NULL, "case %zu: %s", i, err.msg);
        cr_assert_neq(strstr(err.msg, "published.json"), NULL, "case %zu: %s", i, err.msg);
    }
    /* The same reader accepts a good file (names as users write them) and no file at all. */
    const ws_wformat *f[4];
    int n = -1;
    ws_err err = {0};
    cr_assert_eq(published_with("{\"models\": {\"m\": [{\"format\": \"Q4_K_M\", \"where\": \"w\", "
                                "\"by\": \"b\"}, {\"format\": \"awq\", \"where\": \"v\", \"by\": "
                                "\"b\"}]}}",
                                f, &n, &err),
                 0, "%s", err.msg);
    cr_assert_eq(n, 2);
    cr_assert_eq(f[0], ws_wformat_find("q4_k_m"));
    cr_assert_eq(f[1], ws_wformat_find("int4"));
    cr_assert_eq(published_with(NULL, f, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 0);
}
