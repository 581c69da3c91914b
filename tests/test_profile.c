/* test_profile: hardware profiles by name (store/profile.c): a datasheet profile alone, a
 * calibration laid over the datasheet profile of its device (fitted values win, the
 * datasheet fills in the rest, the newest calibration wins), and unknown names; the host
 * datasheets' CPU GEMM peaks per instruction family (cpu_peak.*). */
#include <criterion/criterion.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "calib.h"
#include "helpers.h"
#include "profile.h"

#define H100 "NVIDIA H100 80GB HBM3" /* the CUDA name datasheet.json lists for h100-sxm */

static ws_store *fresh_store(void)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/p.db", dir);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    return s;
}

/* Stores a calibration of a host with GPU `gpu` whose H2D link moves W bytes/s. */
static void calibrate(ws_store *s, const char *gpu, double W)
{
    ws_calib_run run;
    ws_calib_run_init(&run);
    strcpy(run.mode, "quick");
    strcpy(run.scope, "link");
    strcpy(run.started_at, "2026-12-01T10:00:00Z");
    strcpy(run.finished_at, "2026-12-01T10:00:10Z");
    strcpy(run.host.cpu_model, "Test CPU");
    run.host.cpu_cores = 2;
    run.host.mem_bytes = 24e9;
    strcpy(run.host.isa, "avx2; path avx2");
    run.host.has_gpu = 1;
    snprintf(run.host.gpu_name, sizeof run.host.gpu_name, "%s", gpu);
    strcpy(run.host.gpu_cc, "9.0");
    ws_host_fp_hash(&run.host);
    ws_err err = {0};
    for (int i = 0; i < 6; i++) {
        double B = 1e6 * (1 << (2 * i)), t = 8e-6 + B / W;
        ws_calib_sample x = {.key = {"link", "h2d", "", ""}, .bytes = B, .repeats = 3,
                             .t_median = t, .t_min = t, .t_max = t};
        cr_assert_eq(ws_calib_add_sample(&run, &x, &err), 0);
    }
    cr_assert_eq(ws_calib_fit_all(&run, &err), 0, "%s", err.msg);
    long long id;
    cr_assert_eq(ws_calib_store(s, &run, &id, &err), 0, "%s", err.msg);
    ws_calib_run_free(&run);
}

Test(profile, datasheet_alone)
{
    ws_store *s = fresh_store();
    ws_profile p;
    ws_err err = {0};
    cr_assert_eq(ws_profile_load(s, "h100-sxm", &p, &err), 0, "%s", err.msg);
    cr_assert_str_eq(p.kind, "gpu");
    cr_assert_str_eq(p.datasheet, "h100-sxm");
    cr_assert_str_eq(p.calibrated, "");
    cr_assert_eq(p.n_params, 25);
    const ws_profile_param *q = ws_profile_get(&p, "hbm_bw");
    cr_assert_not_null(q);
    cr_assert_eq(q->value, 3.35e12);
    cr_assert_str_eq(q->unit, "B/s");
    cr_assert_eq(q->source, WS_SOURCE_DATASHEET);
    cr_assert_neq(strstr(q->reference, "H100 datasheet"), NULL, "%s", q->reference);
    q = ws_profile_get(&p, "h2d_bw");
    cr_assert_eq(q->source, WS_SOURCE_MODELED);
    cr_assert_str_eq(ws_profile_source_name(q->source), "modeled");
    double v;
    cr_assert_eq(ws_profile_value(&p, "pcie_bw", &v, &err), 0);
    cr_assert_eq(v, 6.3e10);
    cr_assert_eq(ws_profile_value(&p, "no_such_key", &v, &err), WS_ENOTFOUND);
    cr_assert_neq(strstr(err.msg, "h100-sxm has no parameter 'no_such_key'"), NULL, "%s", err.msg);
    ws_profile_free(&p);
    ws_store_close(s);
}

/* The same merge whichever of the two names loads it. */
static void check_merged(ws_store *s, const char *name, double W)
{
    ws_profile p;
    ws_err err = {0};
    cr_assert_eq(ws_profile_load(s, name, &p, &err), 0, "%s", err.msg);
    cr_assert_str_eq(p.name, name);
    cr_assert_str_eq(p.datasheet, "h100-sxm");
    cr_assert_str_eq(p.calibrated, "gpu:" H100);
    /* The fitted value wins over the datasheet's modeled one... */
    const ws_profile_param *q = ws_profile_get(&p, "h2d_bw");
    cr_assert_not_null(q);
    cr_assert_float_eq(q->value, W, W * 1e-3, "%s: h2d_bw %g, not %g", name, q->value, W);
    cr_assert_eq(q->source, WS_SOURCE_FITTED);
    cr_assert_neq(strstr(q->reference, "gpu:" H100 " link.h2d.bandwidth: fit "), NULL, "%s",
                  q->reference);
    /* ...the datasheet fills in what the calibration did not measure... */
    q = ws_profile_get(&p, "hbm_bw");
    cr_assert_eq(q->value, 3.35e12);
    cr_assert_eq(q->source, WS_SOURCE_DATASHEET);
    q = ws_profile_get(&p, "d2h_bw");
    cr_assert_eq(q->value, 5.04e10);
    cr_assert_eq(q->source, WS_SOURCE_MODELED);
    /* ...and the calibrated parameters are there under their own keys. */
    q = ws_profile_get(&p, "link.h2d.bandwidth");
    cr_assert_not_null(q);
    cr_assert_float_eq(q->value, W, W * 1e-3);
    cr_assert_not_null(ws_profile_get(&p, "link.h2d.c0"));
    cr_assert_eq(p.n_params, 25 + 2);
    ws_profile_free(&p);
}

Test(profile, calibration_wins_over_the_datasheet)
{
    ws_store *s = fresh_store();
    calibrate(s, H100, 20e9);
    check_merged(s, "h100-sxm", 20e9);
    check_merged(s, "gpu:" H100, 20e9);
    /* The newest calibration wins. */
    calibrate(s, H100, 22e9);
    check_merged(s, "h100-sxm", 22e9);
    /* Another GPU's calibration does not touch this profile, nor the other datasheets. */
    calibrate(s, "NVIDIA A100-PCIE-40GB", 11e9);
    check_merged(s, "h100-sxm", 22e9);
    ws_profile p;
    ws_err err = {0};
    cr_assert_eq(ws_profile_load(s, "h200", &p, &err), 0, "%s", err.msg);
    cr_assert_str_eq(p.calibrated, "");
    cr_assert_eq(ws_profile_get(&p, "h2d_bw")->source, WS_SOURCE_MODELED);
    ws_profile_free(&p);
    cr_assert_eq(ws_profile_load(s, "a100-40gb-pcie", &p, &err), 0, "%s", err.msg);
    cr_assert_float_eq(ws_profile_get(&p, "h2d_bw")->value, 11e9, 11e6);
    ws_profile_free(&p);
    ws_store_close(s);
}

Test(profile, calibrated_host_without_datasheet)
{
    ws_store *s = fresh_store();
    calibrate(s, "Some Unlisted GPU", 9e9);
    ws_profile p;
    ws_err err = {0};
    cr_assert_eq(ws_profile_load(s, "gpu:Some Unlisted GPU", &p, &err), 0, "%s", err.msg);
    cr_assert_str_eq(p.datasheet, "");
    cr_assert_str_eq(p.calibrated, "gpu:Some Unlisted GPU");
    cr_assert_eq(p.n_params, 2);
    cr_assert_eq(ws_profile_get(&p, "link.h2d.bandwidth")->source, WS_SOURCE_FITTED);
    cr_assert_null(ws_profile_get(&p, "h2d_bw"));
    ws_profile_free(&p);
    ws_store_close(s);
}

/* A profile without a parameter borrows the first datasheet profile's of its kind, labelled
 * modeled and naming whose it is; one that has it, or a kind no datasheet gives it, keeps
 * what it had. */
Test(profile, fill_from_the_datasheet)
{
    ws_store *s = fresh_store();
    ws_err err = {0};
    ws_profile h = {.name = "host:abc", .kind = "host"};
    cr_assert_eq(ws_profile_fill(s, &h, "kv_reformat_bw", &err), 0, "%s", err.msg);
    cr_assert_eq(h.n_params, 1);
    const ws_profile_param *q = ws_profile_get(&h, "kv_reformat_bw");
    cr_assert_not_null(q);
    cr_assert_float_eq(q->value, 1.443e9, 1);
    cr_assert_str_eq(q->unit, "B/s");
    cr_assert_eq(q->source, WS_SOURCE_MODELED);
    cr_assert_neq(strstr(q->reference, "not in host:abc: datasheet xeon-gold-5318y's value"), NULL,
                  "%s", q->reference);
    cr_assert_eq(ws_profile_fill(s, &h, "kv_reformat_bw", &err), 0);
    cr_assert_eq(h.n_params, 1);
    ws_profile_free(&h);
    ws_profile x;
    cr_assert_eq(ws_profile_load(s, "xeon-gold-5318y", &x, &err), 0, "%s", err.msg);
    const int n = x.n_params;
    cr_assert_eq(ws_profile_fill(s, &x, "kv_reformat_bw", &err), 0);
    cr_assert_eq(x.n_params, n);
    ws_profile_free(&x);
    ws_profile g;
    cr_assert_eq(ws_profile_load(s, "a100-40gb-pcie", &g, &err), 0, "%s", err.msg);
    const int ng = g.n_params;
    cr_assert_eq(ws_profile_fill(s, &g, "kv_reformat_bw", &err), 0);
    cr_assert_eq(g.n_params, ng, "no GPU datasheet has a reformat rate");
    ws_profile_free(&g);
    ws_store_close(s);
}

Test(profile, unknown_name)
{
    ws_store *s = fresh_store();
    ws_profile p;
    ws_err err = {0};
    cr_assert_eq(ws_profile_load(s, "no-such-gpu", &p, &err), WS_ENOTFOUND);
    cr_assert_neq(strstr(err.msg, "no profile named 'no-such-gpu'"), NULL, "%s", err.msg);
    cr_assert_eq(strchr(err.msg, '\n'), NULL);
    cr_assert_eq(ws_profile_load(s, "gpu:" H100, &p, &err), WS_ENOTFOUND);
    ws_store_close(s);
}

/* Every value the datasheet ships is within its key's bounds, and the values no hardware has
 * are not: counts that are not whole or out of range, efficiencies outside (0, 1], sizes of
 * 0, denormal bandwidths, each refused by one line naming the key, the value and the bound. */
Test(profile, bounds_refuse_what_no_hardware_has)
{
    ws_store *s = fresh_store();
    ws_err err = {0};
    json_t *all = ws_store_profiles(s, NULL, &err);
    cr_assert_not_null(all, "%s", err.msg);
    size_t i, j, checked = 0;
    json_t *p, *q;
    json_array_foreach(all, i, p) json_array_foreach(json_object_get(p, "params"), j, q)
    {
        const char *key = json_string_value(json_object_get(q, "key"));
        cr_assert_eq(ws_profile_check_param(key, json_number_value(json_object_get(q, "value")),
                                            &err),
                     0, "%s", err.msg);
        checked++;
    }
    json_decref(all);
    cr_assert_gt(checked, 100);
    static const struct {
        const char *key;
        double v;
        const char *bound;
    } bad[] = {{"sockets", 1e9, "[1, 16], a whole number"},
               {"sockets", 0, "[1, 16]"},
               {"cores", 0, "[1, 4096]"},
               {"cores", 2.5, "a whole number"},
               {"threads", -4, "[1, 8192]"},
               {"hbm_eff", 5, "(0, 1]"},
               {"hbm_eff", 0, "(0, 1]"},
               {"dram_eff", -1, "(0, 1]"},
               {"h2d_contention", 1.5, "(0, 1]"},
               {"mem_bytes", 0, "[1e+06, 1e+15]"},
               {"hbm_bw", 5e-324, "[1e+09, 1e+14]"},
               {"dram_bw", 1e30, "[1e+08, 1e+14]"},
               {"bf16_flops", -1, "0 or [1e+08, 1e+17]"},
               {"cpu_peak.amx_int8", 1, "0 or [1e+08, 1e+17]"},
               {"attn_c0", -1e-6, "[0, 1]"},
               {"link.h2d.bandwidth", 5e-324, "[1000, 1e+16]"},
               {"cpu.attn.gqa.bf16.c0", 1e9, "[0, 100]"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        err = (ws_err){0};
        cr_assert_eq(ws_profile_check_param(bad[k].key, bad[k].v, &err), WS_EINVAL, "%s %g",
                     bad[k].key, bad[k].v);
        char head[160];
        snprintf(head, sizeof head, "param %s = %.17g: ", bad[k].key, bad[k].v);
        cr_assert(strstr(err.msg, head) == err.msg, "%s", err.msg);
        cr_assert_neq(strstr(err.msg, bad[k].bound), NULL, "%s", err.msg);
        cr_assert_eq(strchr(err.msg, '\n'), NULL);
    }
    /* 0: a family or a type the device lacks; a key with no bound is descriptive */
    cr_assert_eq(ws_profile_check_param("bf16_flops", 0, &err), 0);
    cr_assert_eq(ws_profile_check_param("cpu_peak.amx_bf16", 0, &err), 0);
    cr_assert_eq(ws_profile_check_param("vendor_note", -1, &err), 0);
    ws_store_close(s);
}

/* The bounds hold for every path a profile comes by: an import (db init --seed, a
 * calibration) is refused whole, and a value written into the database by other means is
 * refused when the profile is loaded. */
Test(profile, bounds_hold_on_import_and_on_load)
{
    ws_store *s = fresh_store();
    ws_err err = {0};
    int n = 0;
    const char *odd = "{\"profiles\": [{\"name\": \"odd\", \"kind\": \"host\", "
                      "\"description\": \"\", \"params\": {\"sockets\": {\"value\": 1e9, "
                      "\"unit\": \"1\", \"source\": \"datasheet\", \"reference\": \"\"}}}]}";
    cr_assert_eq(ws_store_import_profiles(s, odd, "odd.json", &n, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "odd.json: profile odd: param sockets = 1000000000: "), NULL,
                  "%s", err.msg);
    ws_profile p;
    cr_assert_eq(ws_profile_load(s, "odd", &p, &err), WS_ENOTFOUND, "nothing was written");
    th_exec_sql(ws_store_path(s),
                "UPDATE profile_params SET value = 0 WHERE key = 'hbm_eff' AND "
                "profile_id = (SELECT id FROM profiles WHERE name = 'h100-sxm')");
    cr_assert_eq(ws_profile_load(s, "h100-sxm", &p, &err), WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "profile h100-sxm: param hbm_eff = 0: an efficiency"), NULL,
                  "%s", err.msg);
    ws_store_close(s);
}

/* The host datasheet profiles give a CPU GEMM peak per instruction family (profiles/
 * README.md#cpu_peak): the paper's Xeon has all five; a host that gives any gives all five,
 * finite and >= 0 (0: the CPU lacks the family), in flop/s (fp32, bf16) or op/s (int8),
 * and where present in the ratios the instructions fix: the fp32 peak is fp32_flops,
 * AVX512-BF16 (VDPBF16PS) twice it, AVX512-VNNI (VPDPBUSD) four times it on the same two
 * FMA ports, AMX-INT8 twice AMX-BF16 (2048 vs 1024 ops per cycle per core). */
Test(profile, datasheet_hosts_give_cpu_peaks_per_family)
{
    static const struct {
        const char *key, *unit;
        double of_fp32; /* its ratio to cpu_peak.fp32 where the family is present; 0: none */
    } fam[] = {{"cpu_peak.fp32", "flop/s", 1},     {"cpu_peak.avx512_bf16", "flop/s", 2},
               {"cpu_peak.avx512_vnni", "op/s", 4}, {"cpu_peak.amx_bf16", "flop/s", 0},
               {"cpu_peak.amx_int8", "op/s", 0}};
    ws_store *s = fresh_store();
    ws_err err = {0};
    json_t *all = ws_store_profiles(s, NULL, &err);
    cr_assert_not_null(all, "%s", err.msg);
    size_t i;
    json_t *pj;
    int with = 0, paper = 0;
    json_array_foreach(all, i, pj)
    {
        const char *name = json_string_value(json_object_get(pj, "name"));
        if (strcmp(json_string_value(json_object_get(pj, "kind")), "host"))
            continue;
        ws_profile p;
        cr_assert_eq(ws_profile_load(s, name, &p, &err), 0, "%s", err.msg);
        int n = 0;
        for (int k = 0; k < 5; k++)
            n += ws_profile_get(&p, fam[k].key) != NULL;
        if (!strcmp(name, "xeon-gold-5318y"))
            paper = n == 5;
        if (n) {
            with++;
            cr_assert_eq(n, 5, "%s gives %d of the five cpu_peak keys", name, n);
            const double fp32 = ws_profile_get(&p, "cpu_peak.fp32")->value;
            const ws_profile_param *ff = ws_profile_get(&p, "fp32_flops");
            cr_assert(fp32 > 0, "%s: cpu_peak.fp32 %g", name, fp32);
            if (ff)
                cr_assert_float_eq(fp32, ff->value, 1e-6 * ff->value, "%s", name);
            for (int k = 0; k < 5; k++) {
                const ws_profile_param *q = ws_profile_get(&p, fam[k].key);
                cr_assert(isfinite(q->value) && q->value >= 0, "%s %s", name, q->key);
                cr_assert_str_eq(q->unit, fam[k].unit, "%s %s", name, q->key);
                cr_assert(strstr(q->reference, "profiles/README.md#cpu_peak"), "%s %s: %s", name,
                          q->key, q->reference);
                if (q->value > 0 && fam[k].of_fp32 > 0)
                    cr_assert_float_eq(q->value, fam[k].of_fp32 * fp32, 1e-6 * q->value, "%s %s",
                                       name, q->key);
            }
            const double ab = ws_profile_get(&p, "cpu_peak.amx_bf16")->value;
            const double ai = ws_profile_get(&p, "cpu_peak.amx_int8")->value;
            cr_assert_float_eq(ai, 2 * ab, 1e-6 * ai + 1e-9, "%s: AMX int8 %g, bf16 %g", name, ai,
                               ab);
        }
        ws_profile_free(&p);
    }
    cr_assert(paper, "xeon-gold-5318y lacks the cpu_peak keys");
    cr_assert(with >= 1);
    json_decref(all);
    ws_store_close(s);
}
