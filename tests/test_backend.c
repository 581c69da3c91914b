/* test_backend: the device backend table (kernels/backend.c): the CPU backend always,
 * the CUDA backend when a device exists (skipped with one line otherwise). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "cpu_features.h"

Test(backend, cpu_table)
{
    const ws_backend *b = ws_backend_cpu();
    ws_err err = {0};
    cr_assert_eq(b->abi, WS_BACKEND_ABI);
    cr_assert_str_eq(b->name, "cpu");
    cr_assert_eq(b->device_count(&err), 1);
    ws_device_info info;
    cr_assert_eq(b->device_info(0, &info, &err), 0, "%s", err.msg);
    cr_assert_gt(info.units, 0);
    cr_assert_gt(info.mem_bytes, 1e8);
    cr_assert_neq(b->device_info(1, &info, &err), 0);
}

Test(backend, cpu_features_consistent)
{
    const ws_cpu_features *f = ws_cpu_features_get();
    /* Implications that hold on every x86-64 CPU: AVX-512 subsets need the foundation. */
    if (f->avx512bw || f->avx512vl || f->avx512_bf16 || f->avx512_fp16)
        cr_assert(f->avx512f);
    cr_assert_eq(f, ws_cpu_features_get(), "detected once");
    char isa[256];
    ws_cpu_features_isa_string(f, isa, sizeof isa);
    if (f->avx2)
        cr_assert_neq(strstr(isa, "avx2"), NULL);
}

/* Cache sizes as sysfs writes them; the last-level cache read from them. */
Test(backend, cache_sizes)
{
    cr_assert_eq(ws_cpu_cache_size_parse("32768K\n"), 32768L << 10);
    cr_assert_eq(ws_cpu_cache_size_parse("1M"), 1L << 20);
    cr_assert_eq(ws_cpu_cache_size_parse("512"), 512);
    cr_assert_eq(ws_cpu_cache_size_parse("K"), 0);
    cr_assert_eq(ws_cpu_cache_size_parse("12X"), 0);
    cr_assert_eq(ws_cpu_cache_size_parse("-4K"), 0);
    cr_assert_eq(ws_cpu_cache_size_parse(NULL), 0);
    FILE *fp = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    if (!fp)
        cr_skip_test("no sysfs L3 size on this machine");
    char buf[32];
    const long l3 = fgets(buf, sizeof buf, fp) ? ws_cpu_cache_size_parse(buf) : 0;
    fclose(fp);
    cr_assert_geq(ws_cpu_features_get()->l3_bytes, l3, "the highest level's size, not a lower one");
}

Test(backend, cuda_devices)
{
    ws_err err = {0};
    const ws_backend *b = ws_backend_cuda(&err);
    if (!b)
        cr_skip_test("CUDA backend unavailable: %s", err.msg);
    cr_assert_str_eq(b->name, "cuda");
    int n = b->device_count(&err);
    if (n == 0)
        cr_skip_test("no CUDA device: %s", err.msg);
    for (int i = 0; i < n; i++) {
        ws_device_info info;
        cr_assert_eq(b->device_info(i, &info, &err), 0, "device %d: %s", i, err.msg);
        cr_assert_geq(info.cc_major, 7);
        cr_assert_gt(info.mem_bytes, 1e9);
    }
}
