/* ws_dtype: see ws_dtype.h. */
#include "ws_dtype.h"

#include <string.h>

static const struct {
    const char *name, *alias, *alias2;
    int size;
} g_types[WS_DT_COUNT] = {
    [WS_DT_BF16] = {"bf16", "bfloat16", "torch.bfloat16", 2},
    [WS_DT_FP16] = {"fp16", "float16", "half", 2},
    [WS_DT_FP32] = {"fp32", "float32", "float", 4},
    [WS_DT_FP8] = {"fp8", "float8_e4m3fn", "e4m3", 1},
};

int ws_dtype_size(ws_dtype t) { return (unsigned)t < WS_DT_COUNT ? g_types[t].size : 0; }

const char *ws_dtype_name(ws_dtype t)
{
    return (unsigned)t < WS_DT_COUNT ? g_types[t].name : "?";
}

int ws_dtype_parse(const char *s, ws_dtype *out)
{
    for (int i = 0; i < WS_DT_COUNT; i++)
        if (!strcmp(s, g_types[i].name) || !strcmp(s, g_types[i].alias) ||
            !strcmp(s, g_types[i].alias2)) {
            *out = (ws_dtype)i;
            return 0;
        }
    return -1;
}
