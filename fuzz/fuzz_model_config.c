/* fuzz_model_config: libFuzzer target for the config.json parser (runtime/model.c).
 *
 * Each input is parsed as a model config; an accepted model is then run through every
 * computation derived from it (sizes at each KV dtype, the attention shape), since the
 * parser's job is to let through only models those computations handle. The sanitizers
 * (ASan, UBSan with no recovery) turn a memory error, an integer overflow or a division by
 * zero into a finding; a parse that takes longer than the fuzzer's -timeout is one too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1); /* the parser takes NUL-terminated text */
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    ws_model m;
    ws_err err = {0};
    if (ws_model_parse(text, "fuzz", &m, &err) == 0) {
        for (int t = 0; t < WS_DT_COUNT; t++) {
            ws_model_stats s;
            ws_model_derive(&m, (ws_dtype)t, &s);
        }
        ws_kv_layout kv;
        int n_q;
        float scale;
        ws_model_attn_shape(&m, WS_DT_BF16, 16, &kv, &n_q, &scale, &err);
    }
    free(text);
    return 0;
}
