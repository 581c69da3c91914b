/* model: parsing of Hugging Face config.json files and derived sizes (see model.h). */
#include "model.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_util.h"

const char *ws_attn_kind_name(ws_attn_kind k)
{
    switch (k) {
    case WS_ATTN_MHA: return "mha";
    case WS_ATTN_GQA: return "gqa";
    case WS_ATTN_MLA: return "mla";
    case WS_ATTN_MLA_SPARSE: return "mla-sparse";
    }
    return "?";
}

/* Reads an integer field. Absent or null: *out = def, returns 0. Present but not a
 * non-negative integer (or above `max`): error naming the field. */
static int get_int(json_t *o, const char *key, int def, long max, int *out, const char *origin,
                   ws_err *err)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    double x;
    if (json_is_integer(v))
        x = (double)json_integer_value(v); /* exact for every value below 2^53 */
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)))
        x = json_real_value(v); /* some exporters write 2048.0 */
    else
        return ws_err_set(err, WS_EPARSE, "%s: field \"%s\" must be an integer", origin, key);
    if (!(x >= 0 && x <= (double)max))
        return ws_err_set(err, WS_EINVAL, "%s: field \"%s\" = %.0f is out of range [0, %ld]",
                          origin, key, x, max);
    *out = (int)x;
    return 0;
}

static int require_pos(int v, const char *key, const char *origin, ws_err *err)
{
    if (v <= 0)
        return ws_err_set(err, WS_EINVAL, "%s: field \"%s\" is missing or zero", origin, key);
    return 0;
}

static void get_str(json_t *o, const char *key, char *buf, size_t cap)
{
    json_t *v = json_object_get(o, key);
    if (json_is_string(v))
        snprintf(buf, cap, "%s", json_string_value(v));
}

/* Marks the layers listed in mlp_only_layers (Qwen-MoE: dense layers by index) in
 * dense[0..layers); each entry must be an integer layer index. */
static int get_mlp_only(json_t *c, int layers, unsigned char *dense, const char *origin,
                        ws_err *err)
{
    json_t *a = json_object_get(c, "mlp_only_layers");
    if (!a || json_is_null(a))
        return 0;
    if (!json_is_array(a))
        return ws_err_set(err, WS_EPARSE, "%s: field \"mlp_only_layers\" must be an array",
                          origin);
    size_t k;
    json_t *v;
    json_array_foreach(a, k, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= layers)
            return ws_err_set(err, WS_EINVAL,
                              "%s: field \"mlp_only_layers\"[%zu] is not a layer index in "
                              "[0, %d)",
                              origin, k, layers);
        dense[json_integer_value(v)] = 1;
    }
    return 0;
}

/* Layer i uses routed experts? (DeepSeek: first_k_dense_replace, moe_layer_freq;
 * Qwen-MoE: decoder_sparse_step, mlp_only_layers.) */
static int layer_is_moe(int i, int first_dense, int freq, int step, const unsigned char *dense)
{
    if (i < first_dense || (freq > 1 && i % freq != 0) || (step > 1 && (i + 1) % step != 0))
        return 0;
    return !dense[i];
}

/* get_int of key into dst, returning its error. */
#define GET_INT(key, def, max, dst)                                                             \
    do {                                                                                        \
        if ((rc = get_int(c, key, def, max, &(dst), origin, err)))                              \
            return rc;                                                                          \
    } while (0)

/* What the config says about itself: provenance, model type, architecture, weight dtype;
 * compressed attention is refused. */
static int parse_meta(json_t *root, json_t *c, const char *origin, ws_model *m, ws_err *err)
{
    get_str(root, "_provenance", m->provenance, sizeof m->provenance);
    json_t *approx = json_object_get(root, "_approximate");
    m->approximate = json_is_true(approx);
    get_str(c, "model_type", m->model_type, sizeof m->model_type);
    json_t *arch = json_object_get(root, "architectures");
    if (json_is_array(arch) && json_is_string(json_array_get(arch, 0)))
        snprintf(m->architecture, sizeof m->architecture, "%s",
                 json_string_value(json_array_get(arch, 0)));
    m->weight_dtype = WS_DT_BF16;
    json_t *td = json_object_get(c, "torch_dtype");
    if (!td)
        td = json_object_get(c, "dtype");
    if (json_is_string(td) && ws_dtype_parse(json_string_value(td), &m->weight_dtype))
        return ws_err_set(err, WS_EUNSUP, "%s: torch_dtype \"%s\" is not supported", origin,
                          json_string_value(td));
    if (json_object_get(c, "compress_ratios"))
        return ws_err_set(err, WS_EUNSUP,
                          "%s: compressed attention (compress_ratios, DeepSeek-V4) is not "
                          "modelled; describe it as MLA with kv_lora_rank and index_topk",
                          origin);
    return 0;
}

/* The dimensions: hidden size, layers, heads, vocabulary, attention's widths (GQA, MLA, the
 * sparse indexer), the dense MLP, and the sliding window where it is switched on. */
static int parse_dims(json_t *c, const char *origin, ws_model *m, ws_err *err)
{
    int rc;
    GET_INT("hidden_size", 0, WS_MODEL_MAX_HIDDEN, m->hidden);
    GET_INT("num_hidden_layers", 0, WS_MODEL_MAX_LAYERS, m->layers);
    GET_INT("num_attention_heads", 0, WS_MODEL_MAX_HEADS, m->n_q_heads);
    GET_INT("vocab_size", 0, WS_MODEL_MAX_VOCAB, m->vocab);
    GET_INT("max_position_embeddings", 0, 1 << 30, m->max_ctx);
    if ((rc = require_pos(m->hidden, "hidden_size", origin, err)) ||
        (rc = require_pos(m->layers, "num_hidden_layers", origin, err)) ||
        (rc = require_pos(m->n_q_heads, "num_attention_heads", origin, err)) ||
        (rc = require_pos(m->vocab, "vocab_size", origin, err)))
        return rc;
    GET_INT("num_key_value_heads", m->n_q_heads, WS_MODEL_MAX_HEADS, m->n_kv_heads);
    GET_INT("head_dim", m->hidden / m->n_q_heads, WS_MODEL_MAX_DIM, m->head_dim);
    GET_INT("intermediate_size", 0, WS_MODEL_MAX_FFN, m->intermediate);
    GET_INT("kv_lora_rank", 0, WS_MODEL_MAX_DIM, m->kv_lora_rank);
    GET_INT("q_lora_rank", 0, WS_MODEL_MAX_DIM, m->q_lora_rank);
    GET_INT("qk_rope_head_dim", 0, WS_MODEL_MAX_DIM, m->rope_dim);
    GET_INT("qk_nope_head_dim", 0, WS_MODEL_MAX_DIM, m->nope_dim);
    GET_INT("v_head_dim", m->head_dim, WS_MODEL_MAX_DIM, m->v_head_dim);
    GET_INT("index_topk", 0, WS_MODEL_MAX_TOKENS, m->index_topk);
    GET_INT("index_n_heads", 0, WS_MODEL_MAX_HEADS, m->index_n_heads);
    GET_INT("index_head_dim", 0, WS_MODEL_MAX_DIM, m->index_head_dim);
    json_t *b = json_object_get(c, "tie_word_embeddings");
    m->tie_embeddings = json_is_true(b);
    m->attention_bias = json_is_true(json_object_get(c, "attention_bias"));
    /* Qwen configs carry sliding_window with use_sliding_window=false: honour the switch. */
    json_t *usw = json_object_get(c, "use_sliding_window");
    if (!usw || json_is_true(usw))
        GET_INT("sliding_window", 0, WS_MODEL_MAX_TOKENS, m->sliding_window);
    return 0;
}

/* The experts (each family names the count differently), their shared experts, and where
 * the MoE layers are: *first_dense, *freq and *step. */
static int parse_experts(json_t *c, const char *origin, ws_model *m, int *first_dense, int *freq,
                         int *step, ws_err *err)
{
    int rc, n = 0;
    GET_INT("n_routed_experts", 0, WS_MODEL_MAX_EXPERTS, n);
    if (!n)
        GET_INT("num_experts", 0, WS_MODEL_MAX_EXPERTS, n);
    if (!n)
        GET_INT("num_local_experts", 0, WS_MODEL_MAX_EXPERTS, n);
    m->n_experts = n;
    GET_INT("num_experts_per_tok", 0, WS_MODEL_MAX_EXPERTS, m->experts_per_tok);
    GET_INT("moe_intermediate_size", m->intermediate, WS_MODEL_MAX_FFN, m->moe_intermediate);
    GET_INT("n_shared_experts", 0, WS_MODEL_MAX_EXPERTS, m->n_shared_experts);
    int qwen_shared = 0;
    GET_INT("shared_expert_intermediate_size", 0, WS_MODEL_MAX_FFN, qwen_shared);
    m->shared_intermediate =
        qwen_shared ? qwen_shared : (long long)m->n_shared_experts * m->moe_intermediate;
    m->shared_expert_gate = qwen_shared > 0;
    GET_INT("first_k_dense_replace", 0, WS_MODEL_MAX_LAYERS, *first_dense);
    GET_INT("moe_layer_freq", 1, WS_MODEL_MAX_LAYERS, *freq);
    GET_INT("decoder_sparse_step", 1, WS_MODEL_MAX_LAYERS, *step);
    return 0;
}
#undef GET_INT

/* The attention kind from the widths read, and the checks each kind and the experts need. */
static int check_kinds(const char *origin, ws_model *m, ws_err *err)
{
    int rc;
    if (m->kv_lora_rank) {
        if ((rc = require_pos(m->rope_dim, "qk_rope_head_dim", origin, err)))
            return rc;
        m->attn = m->index_topk ? WS_ATTN_MLA_SPARSE : WS_ATTN_MLA;
        if (m->index_topk && ((rc = require_pos(m->index_n_heads, "index_n_heads", origin, err)) ||
                              (rc = require_pos(m->index_head_dim, "index_head_dim", origin, err))))
            return rc;
    } else {
        if (m->index_topk)
            return ws_err_set(err, WS_EUNSUP,
                              "%s: index_topk without kv_lora_rank is not supported", origin);
        if (m->n_kv_heads == 0 || m->n_q_heads % m->n_kv_heads)
            return ws_err_set(err, WS_EINVAL,
                              "%s: num_attention_heads (%d) is not a multiple of "
                              "num_key_value_heads (%d)",
                              origin, m->n_q_heads, m->n_kv_heads);
        if ((rc = require_pos(m->head_dim, "head_dim", origin, err)))
            return rc;
        m->attn = m->n_kv_heads == m->n_q_heads ? WS_ATTN_MHA : WS_ATTN_GQA;
    }
    if (m->n_experts) {
        if (m->experts_per_tok <= 0 || m->experts_per_tok > m->n_experts)
            return ws_err_set(err, WS_EINVAL, "%s: num_experts_per_tok = %d with %d experts",
                              origin, m->experts_per_tok, m->n_experts);
        if ((rc = require_pos(m->moe_intermediate, "moe_intermediate_size", origin, err)))
            return rc;
    }
    return 0;
}

/* The MoE and dense layers' counts. */
static int count_layers(json_t *c, const char *origin, ws_model *m, int first_dense, int freq,
                        int step, ws_err *err)
{
    unsigned char dense[WS_MODEL_MAX_LAYERS] = {0};
    int rc = get_mlp_only(c, m->layers, dense, origin, err);
    if (rc)
        return rc;
    for (int i = 0; i < m->layers; i++) {
        if (m->n_experts && layer_is_moe(i, first_dense, freq, step, dense))
            m->n_moe_layers++;
        else
            m->n_dense_layers++;
    }
    if (m->n_dense_layers)
        return require_pos(m->intermediate, "intermediate_size", origin, err);
    return 0;
}

int ws_model_parse(const char *text, const char *origin, ws_model *m, ws_err *err)
{
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", origin);
    json_error_t je;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return ws_err_set(err, WS_EPARSE, "%s: invalid JSON at line %d column %d: %s", origin,
                          je.line, je.column, je.text);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = ws_err_set(err, WS_EPARSE, "%s: expected a JSON object (a config.json)", origin);
        json_decref(root);
        return rc;
    }
    json_t *c = root;
    /* Multimodal checkpoints keep the language model under text_config. */
    json_t *tc = json_object_get(root, "text_config");
    if (json_is_object(tc) && !json_object_get(root, "hidden_size"))
        c = tc;
    int first_dense = 0, freq = 1, step = 1;
    if (!(rc = parse_meta(root, c, origin, m, err)) && !(rc = parse_dims(c, origin, m, err)) &&
        !(rc = parse_experts(c, origin, m, &first_dense, &freq, &step, err)) &&
        !(rc = check_kinds(origin, m, err)))
        rc = count_layers(c, origin, m, first_dense, freq, step, err);
    json_decref(root);
    return rc;
}

int ws_model_load(const char *path, ws_model *m, ws_err *err)
{
    size_t len;
    char *text = ws_read_file(path, &len, err);
    if (!text)
        return err ? err->code : WS_EIO;
    if (len == 0) {
        free(text);
        return ws_err_set(err, WS_EPARSE, "%s: empty file", path);
    }
    int rc = ws_model_parse(text, path, m, err);
    free(text);
    if (rc)
        return rc;
    /* Name: file name without folder and .json ("config" for a bare hub download). */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(m->name, sizeof m->name, "%s", base);
    char *dot = strrchr(m->name, '.');
    if (dot && !strcmp(dot, ".json"))
        *dot = '\0';
    return 0;
}

int ws_model_data_path(const char *file, char *out, size_t cap, ws_err *err)
{
    char root[WS_PATH_MAX], rel[WS_PATH_MAX];
    if (ws_root_dir(root, sizeof root, err))
        return err ? err->code : WS_EIO;
    snprintf(rel, sizeof rel, "models/%s", file);
    if (ws_path_join(out, cap, root, rel, err))
        return err ? err->code : WS_EINVAL;
    return 0;
}

int ws_model_resolve(const char *arg, char *out, size_t cap, ws_err *err)
{
    /* A path: has a slash or names an existing file. */
    if (strchr(arg, '/') || ws_file_exists(arg)) {
        if (strlen(arg) + 1 > cap)
            return ws_err_set(err, WS_EINVAL, "path too long: %s", arg);
        strcpy(out, arg);
        return 0;
    }
    char file[WS_PATH_MAX];
    snprintf(file, sizeof file, "%s.json", arg);
    int rc = ws_model_data_path(file, out, cap, err);
    if (rc)
        return rc;
    if (strcmp(arg, WS_MODEL_PUBLISHED) && ws_file_exists(out))
        return 0;
    char names[64][64], list[1024] = "";
    int n = ws_model_list(names, 64, NULL);
    for (int i = 0; i < n; i++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", names[i]);
    }
    return ws_err_set(err, WS_ENOTFOUND,
                      "unknown model '%s' (known: %s; or give a path to a config.json)", arg,
                      n ? list : "none");
}

int ws_model_list(char names[][64], int max, ws_err *err)
{
    (void)err;
    if (max <= 0)
        return 0;
    /* One slot more, for published.json, which is not a model. */
    char(*all)[64] = malloc(((size_t)max + 1) * sizeof *all);
    if (!all)
        return 0;
    int n = ws_root_names("models", ".json", all, max + 1), k = 0;
    for (int i = 0; i < n && k < max; i++)
        if (strcmp(all[i], WS_MODEL_PUBLISHED))
            memcpy(names[k++], all[i], sizeof *all);
    free(all);
    return k;
}

void ws_model_derive(const ws_model *m, ws_dtype kv_dtype, ws_model_stats *s)
{
    memset(s, 0, sizeof *s);
    s->kv_dtype = kv_dtype;
    const double kvs = ws_dtype_size(kv_dtype), ws = ws_dtype_size(m->weight_dtype);
    const double H = m->hidden, nq = m->n_q_heads;
    double attn_params;
    if (m->attn == WS_ATTN_MLA || m->attn == WS_ATTN_MLA_SPARSE) {
        /* Absorbed MLA: the cache holds the latent c_kv and the shared rope key. */
        const double ckv = m->kv_lora_rank, rope = m->rope_dim, nope = m->nope_dim,
                     vd = m->v_head_dim;
        s->kv_bytes_tok_layer = (ckv + rope) * kvs;
        /* Scores over c_kv+rope (2 flop/MAC), then the weighted sum over c_kv. */
        s->attn_flops_tok_layer = 2.0 * nq * (2.0 * ckv + rope);
        double q = m->q_lora_rank ? H * m->q_lora_rank + m->q_lora_rank +
                                        m->q_lora_rank * nq * (nope + rope)
                                  : H * nq * (nope + rope);
        attn_params = q + H * (ckv + rope) + ckv + ckv * nq * (nope + vd) + nq * vd * H;
        if (m->attn == WS_ATTN_MLA_SPARSE) {
            const double ih = m->index_n_heads, id = m->index_head_dim;
            s->index_bytes_tok_layer = id * kvs;
            s->index_flops_tok_layer = 2.0 * ih * id;
            s->attended_max = (long long)m->index_topk + m->sliding_window;
            double qin = m->q_lora_rank ? m->q_lora_rank : H;
            attn_params += qin * ih * id + H * id + 2.0 * id + H * ih;
        }
    } else {
        const double nkv = m->n_kv_heads, d = m->head_dim, vd = m->v_head_dim;
        s->kv_bytes_tok_layer = nkv * (d + vd) * kvs;
        s->attn_flops_tok_layer = 2.0 * nq * (d + vd);
        attn_params = H * nq * d + H * nkv * (d + vd) + nq * vd * H;
        if (m->attention_bias)
            attn_params += nq * d + nkv * (d + vd);
        if (m->sliding_window)
            s->attended_max = m->sliding_window;
    }
    s->kv_bytes_tok = s->kv_bytes_tok_layer * m->layers;
    s->attn_weight_bytes_layer = attn_params * ws;

    const double expert = 3.0 * H * m->moe_intermediate; /* gate, up, down */
    const double shared = 3.0 * H * m->shared_intermediate + (m->shared_expert_gate ? H : 0.0);
    const double router = H * m->n_experts;
    const double dense = 3.0 * H * m->intermediate;
    const double embed = (double)m->vocab * H * (m->tie_embeddings ? 1.0 : 2.0);
    s->expert_bytes = expert * ws;
    s->routed_bytes_layer = expert * m->n_experts * ws;
    s->routed_bytes = s->routed_bytes_layer * m->n_moe_layers;
    s->shared_bytes_layer = m->n_moe_layers ? shared * ws : 0.0;
    s->shared_bytes = shared * m->n_moe_layers * ws;
    s->dense_bytes_layer = m->n_dense_layers ? dense * ws : 0.0;
    s->dense_bytes = dense * m->n_dense_layers * ws;
    s->embed_bytes = embed * ws;

    const double norms = 2.0 * H * m->layers + H; /* two RMSNorms per layer + final */
    const double common = embed + attn_params * m->layers + norms + dense * m->n_dense_layers;
    s->total_params = common + m->n_moe_layers * (expert * m->n_experts + shared + router);
    s->active_params = common + m->n_moe_layers * (expert * m->experts_per_tok + shared + router);
}

int ws_model_attn_shape(const ws_model *m, ws_dtype kv_dtype, int page_tokens, ws_kv_layout *kv,
                        int *n_q_heads, float *scale, ws_err *err)
{
    memset(kv, 0, sizeof *kv);
    kv->page_tokens = page_tokens;
    kv->dtype = kv_dtype;
    int qk_dim;
    if (m->attn == WS_ATTN_MLA || m->attn == WS_ATTN_MLA_SPARSE) {
        kv->n_kv_heads = 1;
        kv->d_k = m->kv_lora_rank + m->rope_dim;
        kv->d_v = m->kv_lora_rank;
        kv->v_shares_k = 1;
        qk_dim = m->nope_dim + m->rope_dim > 0 ? m->nope_dim + m->rope_dim : kv->d_k;
    } else {
        kv->n_kv_heads = m->n_kv_heads;
        kv->d_k = m->head_dim;
        kv->d_v = m->v_head_dim > 0 ? m->v_head_dim : m->head_dim;
        qk_dim = kv->d_k;
    }
    *n_q_heads = m->n_q_heads;
    *scale = qk_dim > 0 ? 1.0f / sqrtf((float)qk_dim) : 0.0f;
    if (kv->n_kv_heads <= 0 || kv->d_k <= 0 || m->n_q_heads <= 0)
        return ws_err_set(err, WS_EINVAL, "%s: no attention shape (heads %d/%d, d_k %d)", m->name,
                          m->n_q_heads, kv->n_kv_heads, kv->d_k);
    return 0;
}
