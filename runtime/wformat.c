/* wformat: weight formats, their bytes per weight and compute (see wformat.h). */
#include "wformat.h"

#include <stdio.h>
#include <strings.h>

#define GGML "ggml-common.h block layout: "
#define QREADME "llama.cpp tools/quantize/README.md, Llama 2 7B bits per weight: "

static const ws_wformat k_formats[] = {
    {"bf16", 2.0, WS_WC_BF16, WS_WC_BF16, 0, "bfloat16: 16 bits"},
    {"fp16", 2.0, WS_WC_FP32, WS_WC_FP16, 0, "IEEE half: 16 bits (a CPU converts to fp32)"},
    {"fp32", 4.0, WS_WC_FP32, WS_WC_FP32, 0, "IEEE single: 32 bits"},
    {"fp8", 1.0, WS_WC_BF16, WS_WC_FP8, 0,
     "fp8 e4m3: 8 bits, per-tensor or 128x128-block fp32 scales (< 0.1%); a CPU dequantizes "
     "to bf16"},
    {"q8_0", 34.0 / 32, WS_WC_INT8, WS_WC_INT8, 1, GGML "32 int8 + one fp16 scale = 34 B"},
    {"q6_k", 210.0 / 256, WS_WC_INT8, WS_WC_INT8, 1,
     GGML "256 weights in 128 B low + 64 B high bits + 16 B scales + fp16 = 210 B (6.5625 bpw)"},
    {"q5_k_m", 5.68 / 8, WS_WC_INT8, WS_WC_INT8, 1, QREADME "Q5_K_M 5.68"},
    {"q5_k_s", 5.52 / 8, WS_WC_INT8, WS_WC_INT8, 1, QREADME "Q5_K_S 5.52"},
    {"q4_k_m", 4.84 / 8, WS_WC_INT8, WS_WC_INT8, 1, QREADME "Q4_K_M 4.84"},
    {"q4_k_s", 4.58 / 8, WS_WC_INT8, WS_WC_INT8, 1, QREADME "Q4_K_S 4.58"},
    {"q4_0", 18.0 / 32, WS_WC_INT8, WS_WC_INT8, 1, GGML "32 4-bit + one fp16 scale = 18 B"},
    {"q3_k_m", 3.91 / 8, WS_WC_INT8, WS_WC_INT8, 1, QREADME "Q3_K_M 3.91"},
    {"q2_k", 3.35 / 8, WS_WC_INT8, WS_WC_INT8, 1, QREADME "Q2_K 3.35"},
    {"ud_q2_k_xl", 2.51 / 8, WS_WC_INT8, WS_WC_INT8, 1,
     "unsloth's dynamic UD-Q2_K_XL of DeepSeek-R1: 2.51 bits per weight over the MoE weights, "
     "212 GiB (ubergarm/r1-ktransformers-guide README.md); the few tensors it keeps at more "
     "bits count at the MoE weights' rate"},
    {"int8", 1.0, WS_WC_INT8, WS_WC_INT8, 1,
     "W8A8 int8, per-channel scales (KTransformers AMXINT8, SmoothQuant)"},
    {"int4", 0.5 + 2.5 / 128, WS_WC_INT8, WS_WC_FP16, 1,
     "AWQ / GPTQ int4, group 128: 4 bits + fp16 scale + 4-bit zero per group; a GPU "
     "dequantizes into fp16 tensor cores (Marlin), a CPU runs int8"},
    {"mxfp4", 17.0 / 32, WS_WC_INT8, WS_WC_BF16, 1,
     "OCP Microscaling MXFP4: 32 e2m1 weights + one e8m0 scale = 17 B"},
};
#define N_FORMATS (sizeof k_formats / sizeof *k_formats)

static const struct {
    const char *alias, *name;
} k_alias[] = {
    {"bfloat16", "bf16"}, {"float16", "fp16"}, {"f16", "fp16"},      {"half", "fp16"},
    {"float32", "fp32"},  {"f32", "fp32"},     {"float", "fp32"},    {"e4m3", "fp8"},
    {"fp8_e4m3", "fp8"},  {"awq", "int4"},     {"gptq", "int4"}, {"awq_int4", "int4"}, {"gptq_int4", "int4"},     {"w4a16", "int4"},
    {"w8a8", "int8"},     {"amxint8", "int8"}, {"amxint4", "int4"},  {"q4_k", "q4_k_s"},
    {"q5_k", "q5_k_s"},   {"mxfp4_moe", "mxfp4"},
};

const ws_wformat *ws_wformat_find(const char *s)
{
    if (!s)
        return NULL;
    for (size_t i = 0; i < sizeof k_alias / sizeof *k_alias; i++)
        if (!strcasecmp(s, k_alias[i].alias))
            s = k_alias[i].name;
    for (size_t i = 0; i < N_FORMATS; i++)
        if (!strcasecmp(s, k_formats[i].name))
            return &k_formats[i];
    return NULL;
}

void ws_wformat_names(char *buf, size_t cap)
{
    size_t n = 0;
    if (cap)
        buf[0] = '\0';
    for (size_t i = 0; i < N_FORMATS && n < cap; i++) {
        int w = snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", k_formats[i].name);
        if (w < 0)
            break;
        n += (size_t)w;
    }
}

const ws_wformat *ws_wformat_at(int i)
{
    return i >= 0 && (size_t)i < N_FORMATS ? &k_formats[i] : NULL;
}

int ws_wformat_parse(const char *s, const ws_wformat **out, ws_err *err)
{
    *out = ws_wformat_find(s);
    if (!*out) {
        char names[256];
        ws_wformat_names(names, sizeof names);
        return ws_err_set(err, WS_EINVAL, "unknown weight format '%.40s' (%s; awq, gptq = int4)",
                          s ? s : "", names);
    }
    return 0;
}

const ws_wformat *ws_wformat_of_dtype(ws_dtype t)
{
    return ws_wformat_find(ws_dtype_name(t));
}

const char *ws_wcompute_name(ws_wcompute c)
{
    static const char *const n[WS_WC_COUNT] = {"fp32", "bf16", "fp16", "fp8", "int8"};
    return c >= 0 && c < WS_WC_COUNT ? n[c] : "?";
}
