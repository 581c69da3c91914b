/* cmd_model: `writescope model show|list` -- what a config.json implies for the KV cache,
 * attention cost and expert weights. All figures are derived from the config (no
 * measurement); the output says so. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "model.h"
#include "opts.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: writescope model show NAME|PATH [--kv-dtype bf16|fp16|fp8|fp32] [--json]\n"
            "       writescope model list [--json]\n"
            "\n"
            "NAME is a shipped model (models/NAME.json); PATH is any Hugging Face config.json of\n"
            "the DeepSeek-V2/V3/V3.2, Qwen2/Qwen3-MoE or Mixtral families.\n"
            "Prints the attention kind, KV bytes per token (one layer and all layers), attention\n"
            "flops per KV token per query, expert/shared/dense weight bytes and parameter counts.\n"
            "Every figure is derived from config.json (source: config).\n");
}

typedef struct model_opts {
    const char *kv_dtype;
    int json;
} model_opts;

static const cli_optdef k_opts[] = {
    {"kv-dtype", CLI_STR(model_opts, kv_dtype), .arg = "bf16|fp16|fp8|fp32", .def = "bf16",
     .help = "the KV cache's element type"},
    {"json", CLI_FLAG(model_opts, json), .help = "machine-readable output"},
    {0}};
static const cli_spec k_spec = {"model", k_opts, 2, usage};

static json_t *model_json(const ws_model *m, const ws_model_stats *s)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(m->name));
    json_object_set_new(o, "path", json_string(m->path));
    json_object_set_new(o, "source", json_string("config"));
    json_object_set_new(o, "approximate", json_boolean(m->approximate));
    if (m->provenance[0])
        json_object_set_new(o, "provenance", json_string(m->provenance));
    json_object_set_new(o, "architecture", json_string(m->architecture));
    json_object_set_new(o, "model_type", json_string(m->model_type));
    json_object_set_new(o, "layers", json_integer(m->layers));
    json_object_set_new(o, "moe_layers", json_integer(m->n_moe_layers));
    json_object_set_new(o, "dense_layers", json_integer(m->n_dense_layers));
    json_object_set_new(o, "hidden_size", json_integer(m->hidden));

    json_t *a = json_object();
    json_object_set_new(a, "kind", json_string(ws_attn_kind_name(m->attn)));
    json_object_set_new(a, "q_heads", json_integer(m->n_q_heads));
    if (m->attn == WS_ATTN_MHA || m->attn == WS_ATTN_GQA) {
        json_object_set_new(a, "kv_heads", json_integer(m->n_kv_heads));
        json_object_set_new(a, "group_size", json_integer(m->n_q_heads / m->n_kv_heads));
        json_object_set_new(a, "head_dim", json_integer(m->head_dim));
    } else {
        json_object_set_new(a, "kv_lora_rank", json_integer(m->kv_lora_rank));
        json_object_set_new(a, "rope_dim", json_integer(m->rope_dim));
        if (m->attn == WS_ATTN_MLA_SPARSE) {
            json_object_set_new(a, "index_topk", json_integer(m->index_topk));
            json_object_set_new(a, "index_n_heads", json_integer(m->index_n_heads));
            json_object_set_new(a, "index_head_dim", json_integer(m->index_head_dim));
        }
    }
    json_object_set_new(a, "sliding_window", json_integer(m->sliding_window));
    json_object_set_new(a, "attended_tokens_max", json_integer(s->attended_max));
    json_object_set_new(o, "attention", a);

    json_object_set_new(o, "kv_dtype", json_string(ws_dtype_name(s->kv_dtype)));
    json_object_set_new(o, "kv_bytes_per_token_per_layer", cli_num(s->kv_bytes_tok_layer));
    json_object_set_new(o, "kv_bytes_per_token", cli_num(s->kv_bytes_tok));
    if (m->attn == WS_ATTN_MLA_SPARSE) {
        json_object_set_new(o, "index_bytes_per_token_per_layer",
                            cli_num(s->index_bytes_tok_layer));
        json_object_set_new(o, "index_flops_per_token_per_layer_per_query",
                            cli_num(s->index_flops_tok_layer));
    }
    json_object_set_new(o, "attn_flops_per_token_per_layer_per_query",
                        cli_num(s->attn_flops_tok_layer));
    json_object_set_new(o, "attn_arithmetic_intensity",
                        json_real(s->attn_flops_tok_layer / s->kv_bytes_tok_layer));

    json_t *w = json_object();
    json_object_set_new(w, "dtype", json_string(ws_dtype_name(m->weight_dtype)));
    json_object_set_new(w, "routed_experts", json_integer(m->n_experts));
    json_object_set_new(w, "experts_per_token", json_integer(m->experts_per_tok));
    json_object_set_new(w, "expert_bytes", cli_num(s->expert_bytes));
    json_object_set_new(w, "routed_expert_bytes_per_layer", cli_num(s->routed_bytes_layer));
    json_object_set_new(w, "routed_expert_bytes", cli_num(s->routed_bytes));
    json_object_set_new(w, "shared_expert_bytes_per_layer", cli_num(s->shared_bytes_layer));
    json_object_set_new(w, "shared_expert_bytes", cli_num(s->shared_bytes));
    json_object_set_new(w, "dense_mlp_bytes_per_layer", cli_num(s->dense_bytes_layer));
    json_object_set_new(w, "dense_mlp_bytes", cli_num(s->dense_bytes));
    json_object_set_new(w, "attention_bytes_per_layer", cli_num(s->attn_weight_bytes_layer));
    json_object_set_new(w, "embedding_bytes", cli_num(s->embed_bytes));
    json_object_set_new(o, "weights", w);

    json_object_set_new(o, "total_params", cli_num(s->total_params));
    json_object_set_new(o, "active_params_per_token", cli_num(s->active_params));
    return o;
}

static void model_text(const ws_model *m, const ws_model_stats *s)
{
    char a[64], b[64], c[64];
    printf("model        %s  (%s)\n", m->name, m->path);
    if (m->approximate)
        printf("provenance   %s\n", m->provenance);
    printf("architecture %s (%s), %d layers: %d MoE, %d dense; hidden %d\n", m->architecture,
           m->model_type, m->layers, m->n_moe_layers, m->n_dense_layers, m->hidden);
    if (m->attn == WS_ATTN_MHA || m->attn == WS_ATTN_GQA)
        printf("attention    %s: %d query heads, %d KV heads (group %d), head dim %d\n",
               ws_attn_kind_name(m->attn), m->n_q_heads, m->n_kv_heads,
               m->n_q_heads / m->n_kv_heads, m->head_dim);
    else
        printf("attention    %s (absorbed): %d heads over one latent of %d + rope %d\n",
               ws_attn_kind_name(m->attn), m->n_q_heads, m->kv_lora_rank, m->rope_dim);
    if (m->attn == WS_ATTN_MLA_SPARSE)
        printf("             sparse: top-%d by an indexer of %d heads x %d, + window %d "
               "(at most %lld tokens attended)\n",
               m->index_topk, m->index_n_heads, m->index_head_dim, m->sliding_window,
               s->attended_max);
    printf("KV cache     %s: %s bytes/token/layer, %s bytes/token (all %d layers)\n",
           ws_dtype_name(s->kv_dtype), cli_commas(s->kv_bytes_tok_layer, a, sizeof a),
           cli_commas(s->kv_bytes_tok, b, sizeof b), m->layers);
    if (m->attn == WS_ATTN_MLA_SPARSE)
        printf("index keys   %s bytes/token/layer; scoring %s flop/token/layer per query\n",
               cli_commas(s->index_bytes_tok_layer, a, sizeof a),
               cli_commas(s->index_flops_tok_layer, b, sizeof b));
    printf("attn flops   %s flop per KV token per layer per query token (%.1f flop/byte)\n",
           cli_commas(s->attn_flops_tok_layer, a, sizeof a),
           s->attn_flops_tok_layer / s->kv_bytes_tok_layer);
    if (m->n_experts)
        printf("experts      %d routed, top-%d, %s bytes each/layer; %s bytes/layer, %s total\n",
               m->n_experts, m->experts_per_tok, cli_commas(s->expert_bytes, a, sizeof a),
               cli_commas(s->routed_bytes_layer, b, sizeof b),
               cli_commas(s->routed_bytes, c, sizeof c));
    printf("shared       %s bytes/layer, %s total\n",
           cli_commas(s->shared_bytes_layer, a, sizeof a), cli_commas(s->shared_bytes, b, sizeof b));
    printf("dense MLP    %s bytes/layer, %s total\n", cli_commas(s->dense_bytes_layer, a, sizeof a),
           cli_commas(s->dense_bytes, b, sizeof b));
    printf("attn weights %s bytes/layer; embeddings %s bytes (%s)\n",
           cli_commas(s->attn_weight_bytes_layer, a, sizeof a),
           cli_commas(s->embed_bytes, b, sizeof b), ws_dtype_name(m->weight_dtype));
    printf("parameters   %.2f B total, %.2f B active per token (embeddings included)\n",
           s->total_params / 1e9, s->active_params / 1e9);
    printf("source       derived from config.json\n");
}

static int model_list(int json)
{
    char names[64][64];
    ws_err err = {0};
    int n = ws_model_list(names, 64, &err);
    if (err.code)
        return cli_fail(&err);
    if (json) {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(arr, json_string(names[i]));
        return cli_print_json(arr);
    }
    for (int i = 0; i < n; i++)
        puts(names[i]);
    return CLI_EXIT_OK;
}

int cmd_model(int argc, char **argv)
{
    model_opts o = {0};
    cli_args a;
    int rc = cli_opts_parse(&k_spec, argc, argv, &o, &a);
    const char *kv_name = o.kv_dtype;
    const int json = o.json, nargs = a.npos;
    char **args = a.pos;
    if (rc)
        return rc == CLI_PARSE_HELP ? CLI_EXIT_OK : rc;
    ws_dtype kv;
    if (ws_dtype_parse(kv_name, &kv))
        return cli_usage_error("model", "unknown --kv-dtype '%s' (bf16, fp16, fp8, fp32)", kv_name);
    if (nargs == 0)
        return cli_usage_error("model", "missing subcommand (show or list)");
    if (!strcmp(args[0], "list")) {
        if (nargs > 1)
            return cli_usage_error("model", "list takes no argument");
        return model_list(json);
    }
    if (strcmp(args[0], "show"))
        return cli_usage_error("model", "unknown subcommand '%s'", args[0]);
    if (nargs < 2)
        return cli_usage_error("model", "show needs a model NAME or a PATH to a config.json");

    ws_err err = {0};
    char path[4096];
    ws_model m;
    ws_model_stats s;
    if (ws_model_resolve(args[1], path, sizeof path, &err) || ws_model_load(path, &m, &err))
        return cli_fail(&err);
    ws_model_derive(&m, kv, &s);
    if (json)
        return cli_print_json(model_json(&m, &s));
    model_text(&m, &s);
    return CLI_EXIT_OK;
}
