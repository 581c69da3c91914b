/* wformat: the weight formats offload users run (bf16, fp8, llama.cpp's GGUF block formats,
 * AWQ/GPTQ int4, MXFP4, int8), as the cost model needs them: bytes per weight including the
 * block scales, and the arithmetic each runs on a CPU and on a GPU.
 *
 * Bytes come from the formats' block layouts (ggml's block structs: a Q8_0 block is 32
 * int8 weights and one fp16 scale, 34 B; Q4_K a 256-weight super-block of 144 B; MXFP4 32
 * 4-bit weights and one 8-bit shared exponent, 17 B); the mixed GGUF types (Q4_K_M,
 * Q5_K_M) use the bits per weight llama.cpp's tools/quantize/README.md reports for a whole
 * model (they keep some tensors at Q6_K). The compute is the instruction family the usual
 * kernels use: llama.cpp's CPU dot products quantize activations to 8 bits and run int8
 * (VNNI / AMX-INT8) over every block format; weight-only int4 on a GPU dequantizes into fp16
 * tensor cores (Marlin); fp8 runs fp8 tensor cores where the GPU has them. The cost model
 * (cost.h) picks the CPU's or GPU's peak for that compute from the profile.
 *
 * A format is named the way its users write it ("q4_k_m", "Q4_K_M", "awq", "mxfp4"). */
#ifndef WS_WFORMAT_H
#define WS_WFORMAT_H

#include <stddef.h>

#include "ws_dtype.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The arithmetic a GEMM over the weights runs in. */
typedef enum ws_wcompute {
    WS_WC_FP32 = 0,
    WS_WC_BF16 = 1,
    WS_WC_FP16 = 2,
    WS_WC_FP8 = 3,
    WS_WC_INT8 = 4,
    WS_WC_COUNT
} ws_wcompute;

typedef struct ws_wformat {
    const char *name;         /* canonical, lower case: "q4_k_m" */
    double bytes;             /* per weight, block scales included */
    ws_wcompute cpu, gpu;     /* the arithmetic on each device */
    int quantized;            /* 1: an integer or block format (not a float dtype) */
    const char *reference;    /* where `bytes` comes from */
} ws_wformat;

/* The format named s (case-insensitive, aliases included), or NULL. */
const ws_wformat *ws_wformat_find(const char *s);
/* The same, WS_EINVAL naming the known formats. */
int ws_wformat_parse(const char *s, const ws_wformat **out, ws_err *err);
/* The float format of a dtype (bf16, fp16, fp32, fp8). */
const ws_wformat *ws_wformat_of_dtype(ws_dtype t);
/* "fp32", "bf16", "fp16", "fp8", "int8". */
const char *ws_wcompute_name(ws_wcompute c);
/* The known formats' names, comma-separated, for messages and --help. */
void ws_wformat_names(char *buf, size_t cap);
/* The i-th known format (0 ...), NULL past the last. */
const ws_wformat *ws_wformat_at(int i);

#ifdef __cplusplus
}
#endif
#endif
