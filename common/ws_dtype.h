/* ws_dtype: element types the project stores KV and weights in, with their sizes and
 * names, shared by the model descriptions, the kernels and the cost model. */
#ifndef WS_DTYPE_H
#define WS_DTYPE_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ws_dtype {
    WS_DT_BF16 = 0, /* bfloat16: 2 bytes, the default KV and weight type */
    WS_DT_FP16 = 1, /* IEEE half: 2 bytes, for hosts/GPUs without bf16 (V100) */
    WS_DT_FP32 = 2, /* IEEE single: 4 bytes */
    WS_DT_FP8 = 3,  /* fp8 e4m3: 1 byte (sizes only; no kernels yet) */
    WS_DT_COUNT
} ws_dtype;

/* Bytes per element. */
int ws_dtype_size(ws_dtype t);
/* "bf16", "fp16", "fp32", "fp8". */
const char *ws_dtype_name(ws_dtype t);
/* Parses a name (also accepts Hugging Face torch_dtype names such as "bfloat16");
 * returns 0 and sets *out, or -1 if unknown. */
int ws_dtype_parse(const char *s, ws_dtype *out);

#ifdef __cplusplus
}
#endif
#endif
