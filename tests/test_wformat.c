/* Tests for runtime/wformat: bytes per weight from the block layouts, names and aliases as
 * users write them, and the compute each format runs on either device. */
#include <criterion/criterion.h>
#include <string.h>

#include "wformat.h"

Test(wformat, block_layouts_give_bytes_per_weight)
{
    cr_assert_float_eq(ws_wformat_find("q8_0")->bytes, 34.0 / 32, 1e-12);
    cr_assert_float_eq(ws_wformat_find("q4_0")->bytes, 0.5625, 1e-12);
    cr_assert_float_eq(ws_wformat_find("q6_k")->bytes, 6.5625 / 8, 1e-12);
    cr_assert_float_eq(ws_wformat_find("mxfp4")->bytes, 4.25 / 8, 1e-12);
    cr_assert_float_eq(ws_wformat_find("Q4_K_M")->bytes, 4.84 / 8, 1e-12);
    cr_assert_float_eq(ws_wformat_find("bf16")->bytes, 2.0, 0);
}

Test(wformat, every_format_is_ordered_sane_and_named)
{
    char names[512];
    ws_wformat_names(names, sizeof names);
    int n = 0;
    for (const ws_wformat *f; (f = ws_wformat_at(n)); n++) {
        cr_assert(f->bytes > 0.3 && f->bytes <= 4.0, "%s", f->name);
        cr_assert(strstr(names, f->name), "%s missing from the names", f->name);
        cr_assert_eq(ws_wformat_find(f->name), f);
        cr_assert(f->reference && strlen(f->reference) > 10, "%s", f->name);
        cr_assert_eq(f->quantized, f->cpu == WS_WC_INT8, "%s", f->name);
    }
    cr_assert_geq(n, 12);
}

Test(wformat, aliases_and_dtypes)
{
    cr_assert_str_eq(ws_wformat_find("AWQ")->name, "int4");
    cr_assert_str_eq(ws_wformat_find("gptq")->name, "int4");
    cr_assert_str_eq(ws_wformat_find("bfloat16")->name, "bf16");
    cr_assert_str_eq(ws_wformat_find("AMXINT8")->name, "int8");
    for (int t = 0; t < WS_DT_COUNT; t++)
        cr_assert_float_eq(ws_wformat_of_dtype((ws_dtype)t)->bytes, ws_dtype_size((ws_dtype)t), 0);
    cr_assert_null(ws_wformat_find("q7_z"));
    const ws_wformat *f;
    ws_err err = {0};
    cr_assert_eq(ws_wformat_parse("q7_z", &f, &err), WS_EINVAL);
    cr_assert(strstr(err.msg, "q7_z") && strstr(err.msg, "q4_k_m"), "%s", err.msg);
}

Test(wformat, compute_paths)
{
    cr_assert_eq(ws_wformat_find("q4_k_m")->cpu, WS_WC_INT8);
    cr_assert_eq(ws_wformat_find("bf16")->cpu, WS_WC_BF16);
    cr_assert_eq(ws_wformat_find("fp8")->gpu, WS_WC_FP8);
    cr_assert_eq(ws_wformat_find("fp8")->cpu, WS_WC_BF16);
    cr_assert_eq(ws_wformat_find("int4")->gpu, WS_WC_FP16);
    cr_assert_str_eq(ws_wcompute_name(WS_WC_INT8), "int8");
}
