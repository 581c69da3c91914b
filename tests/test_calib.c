/* test_calib: a calibration run's fitting and transactional storage (calib/calib.c) with
 * synthetic samples: the schema round-trips, the fitted profile is built from the newest
 * good fits, and a run that fails mid-write leaves no rows behind; the int8 expert GEMM's
 * fit names the instruction family it ran on, and a quick sweep of it fits. */
#include <criterion/criterion.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "gemm_int8.h"
#include "helpers.h"
#include "measure.h"
#include "profile.h"

static void synth_run(ws_calib_run *run, double W)
{
    ws_calib_run_init(run);
    strcpy(run->mode, "quick");
    strcpy(run->scope, "cpu");
    strcpy(run->started_at, "2026-11-29T10:00:00Z");
    strcpy(run->finished_at, "2026-11-29T10:00:30Z");
    memset(&run->host, 0, sizeof run->host);
    strcpy(run->host.cpu_model, "Test CPU");
    run->host.cpu_cores = 2;
    run->host.mem_bytes = 24e9;
    strcpy(run->host.isa, "avx2; path avx2");
    ws_host_fp_hash(&run->host);
    run->read_bw = W;
    run->read_bw_1t = W / 2;
    run->peak_flops[0] = 400e9;
    run->peak_flops[1] = 200e9;
    ws_err err = {0};
    /* GQA attention: 8 flop/byte, memory bound at W. */
    for (int i = 0; i < 12; i++) {
        double ctx = 1024.0 * (1 << i), B = ctx * 2048, t = 25e-6 + B / W;
        ws_calib_sample s = {.key = {"cpu", "attn", "bf16", "gqa"},
                             .flops = 8 * B,
                             .bytes = B,
                             .repeats = 3,
                             .t_median = t,
                             .t_min = t * 0.98,
                             .t_max = t * 1.05};
        snprintf(s.params, sizeof s.params, "{\"ctx\": %.0f, \"batch\": 1}", ctx);
        cr_assert_eq(ws_calib_add_sample(run, &s, &err), 0);
    }
    /* Read bandwidth over sizes. */
    for (int i = 0; i < 5; i++) {
        double B = 256e6 * (i + 1), t = 5e-6 + B / W;
        ws_calib_sample s = {.key = {"cpu", "membw_read", "", ""},
                             .bytes = B,
                             .repeats = 3,
                             .t_median = t,
                             .t_min = t,
                             .t_max = t};
        cr_assert_eq(ws_calib_add_sample(run, &s, &err), 0);
    }
    /* Attention over pinned vs pageable memory: a factor, not a fit. */
    ws_calib_sample pin = {.key = {"cpu", "pinned_cmp", "bf16", "gqa"},
                           .flops = 1,
                           .bytes = 1,
                           .repeats = 3,
                           .t_median = 1.1e-2,
                           .t_min = 1.0e-2,
                           .t_max = 1.2e-2};
    snprintf(pin.params, sizeof pin.params, "{\"memory\": \"pinned\"}");
    cr_assert_eq(ws_calib_add_sample(run, &pin, &err), 0);
    pin.t_median = 1.0e-2;
    snprintf(pin.params, sizeof pin.params, "{\"memory\": \"pageable\"}");
    cr_assert_eq(ws_calib_add_sample(run, &pin, &err), 0);
    /* Attention right after a MoE phase vs alone: a factor too. */
    ws_calib_sample moe = {.key = {"cpu", "moe_cmp", "bf16", "gqa"},
                           .flops = 1,
                           .bytes = 1,
                           .repeats = 3,
                           .t_median = 1.25e-2,
                           .t_min = 1.2e-2,
                           .t_max = 1.3e-2};
    snprintf(moe.params, sizeof moe.params, "{\"phase\": \"after_moe\"}");
    cr_assert_eq(ws_calib_add_sample(run, &moe, &err), 0);
    moe.t_median = 1.0e-2;
    snprintf(moe.params, sizeof moe.params, "{\"phase\": \"alone\"}");
    cr_assert_eq(ws_calib_add_sample(run, &moe, &err), 0);
    /* The experts beside a host-memory copy vs alone: the share of bandwidth left. */
    ws_calib_sample cp = {.key = {"cpu", "copy_cmp", "bf16", "moe"},
                          .flops = 1,
                          .bytes = 1,
                          .repeats = 3,
                          .t_median = 1.0e-2,
                          .t_min = 0.98e-2,
                          .t_max = 1.1e-2};
    snprintf(cp.params, sizeof cp.params, "{\"phase\": \"with_copy\"}");
    cr_assert_eq(ws_calib_add_sample(run, &cp, &err), 0);
    cp.t_median = 0.8e-2;
    cp.t_min = 0.78e-2;
    cp.t_max = 0.85e-2;
    snprintf(cp.params, sizeof cp.params, "{\"phase\": \"alone\"}");
    cr_assert_eq(ws_calib_add_sample(run, &cp, &err), 0);
    /* Two samples only: reported as too few, never good. */
    for (int i = 0; i < 2; i++) {
        ws_calib_sample s = {.key = {"cpu", "attn", "fp16", "mla"},
                             .flops = 30e6,
                             .bytes = 1e6,
                             .repeats = 1,
                             .t_median = 1e-3,
                             .t_min = 1e-3,
                             .t_max = 1e-3};
        cr_assert_eq(ws_calib_add_sample(run, &s, &err), 0);
    }
}

static ws_store *fresh_store(void)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/calib.db", dir);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    return s;
}

Test(calib, fit_store_show_roundtrip)
{
    ws_calib_run run;
    synth_run(&run, 12e9);
    ws_err err = {0};
    cr_assert_eq(ws_calib_fit_all(&run, &err), 0, "%s", err.msg);
    cr_assert_eq(run.n_fits, 6);
    snprintf(run.note, sizeof run.note, "triad/read 2.00: DISAGREE");
    ws_store *s = fresh_store();
    long long id = 0;
    cr_assert_eq(ws_calib_store(s, &run, &id, &err), 0, "%s", err.msg);
    cr_assert_gt(id, 0);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM samples"), run.n_samples);
    /* Every sample round-trips exactly. */
    sqlite3 *db;
    cr_assert_eq(sqlite3_open(ws_store_path(s), &db), SQLITE_OK);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db,
                       "SELECT device, op, dtype, attn_kind, params, flops, bytes, repeats, "
                       "t_median, t_min, t_max FROM samples ORDER BY id",
                       -1, &st, NULL);
    for (int i = 0; i < run.n_samples; i++) {
        const ws_calib_sample *x = &run.samples[i];
        cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
        cr_assert_str_eq((const char *)sqlite3_column_text(st, 1), x->key.op);
        cr_assert_str_eq((const char *)sqlite3_column_text(st, 3), x->key.attn_kind);
        cr_assert_str_eq((const char *)sqlite3_column_text(st, 4), x->params[0] ? x->params : "{}");
        cr_assert_eq(sqlite3_column_double(st, 5), x->flops);
        cr_assert_eq(sqlite3_column_double(st, 6), x->bytes);
        cr_assert_eq(sqlite3_column_int(st, 7), x->repeats);
        cr_assert_eq(sqlite3_column_double(st, 8), x->t_median);
        cr_assert_eq(sqlite3_column_double(st, 10), x->t_max);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);

    json_t *show = ws_calib_show(s, 0, &err);
    cr_assert_not_null(show, "%s", err.msg);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(show, "run"), "note")),
                     "triad/read 2.00: DISAGREE");
    json_t *fits = json_object_get(show, "fits");
    cr_assert_eq(json_array_size(fits), 6);
    int seen_gqa = 0, seen_bad = 0, seen_factor = 0, seen_moe = 0, seen_copy = 0;
    size_t i;
    json_t *f;
    json_array_foreach(fits, i, f)
    {
        const char *key = json_string_value(json_object_get(f, "key"));
        if (!strcmp(key, "cpu.attn.gqa.bf16")) {
            seen_gqa = 1;
            cr_assert(json_is_true(json_object_get(f, "good")));
            cr_assert(json_is_true(json_object_get(f, "p_fixed")), "memory bound: P held");
            cr_assert_float_eq(json_number_value(json_object_get(f, "bandwidth")), 12e9, 12e6);
            cr_assert_lt(json_number_value(json_object_get(f, "heldout_mape_pct")), 0.1);
            cr_assert(json_is_number(json_object_get(f, "r2")));
        }
        if (strcmp(json_string_value(json_object_get(f, "form")), "roofline"))
            cr_assert(json_is_null(json_object_get(f, "peak_flops")), "%s has no P", key);
        if (!strcmp(key, "cpu.pinned_read_factor.gqa.bf16")) {
            seen_factor = 1;
            cr_assert_str_eq(json_string_value(json_object_get(f, "form")), "factor");
            cr_assert_float_eq(json_number_value(json_object_get(f, "factor")), 1.1, 1e-9);
            cr_assert_gt(json_number_value(json_object_get(f, "factor_se")), 0);
        }
        if (!strcmp(key, "cpu.attn_after_moe_factor.gqa.bf16")) {
            seen_moe = 1;
            cr_assert_str_eq(json_string_value(json_object_get(f, "form")), "factor");
            cr_assert_float_eq(json_number_value(json_object_get(f, "factor")), 1.25, 1e-9);
        }
        if (!strcmp(key, "cpu.expert_copy_factor.moe.bf16")) {
            seen_copy = 1;
            cr_assert_float_eq(json_number_value(json_object_get(f, "factor")), 0.8, 1e-9);
        }
        if (!strcmp(key, "cpu.attn.mla.fp16")) {
            seen_bad = 1;
            cr_assert(json_is_false(json_object_get(f, "good")));
        }
    }
    cr_assert(seen_gqa && seen_bad && seen_factor && seen_moe && seen_copy);
    json_decref(show);

    /* The fitted profile holds the good fits only. */
    char name[64];
    snprintf(name, sizeof name, "host:%s", run.host.id);
    json_t *prof = ws_store_profiles(s, name, &err);
    cr_assert_not_null(prof, "%s", err.msg);
    json_t *p = json_array_get(prof, 0);
    cr_assert_str_eq(json_string_value(json_object_get(p, "source")), "fitted");
    int has_bw = 0, has_mla = 0;
    json_array_foreach(json_object_get(p, "params"), i, f)
    {
        const char *k = json_string_value(json_object_get(f, "key"));
        if (!strcmp(k, "cpu.attn.gqa.bf16.bandwidth")) {
            has_bw = 1;
            cr_assert_str_eq(json_string_value(json_object_get(f, "source")), "fitted");
        }
        if (!strcmp(k, "cpu.attn.gqa.bf16.peak_flops"))
            cr_assert_str_eq(json_string_value(json_object_get(f, "source")), "measured");
        has_mla |= strstr(k, "mla") != NULL;
    }
    cr_assert(has_bw && !has_mla);
    json_decref(prof);

    /* A second run appends; the profile follows the newest good fit. */
    ws_calib_run run2;
    synth_run(&run2, 15e9);
    cr_assert_eq(ws_calib_fit_all(&run2, &err), 0);
    long long id2;
    cr_assert_eq(ws_calib_store(s, &run2, &id2, &err), 0, "%s", err.msg);
    cr_assert_gt(id2, id);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM calib_runs"), 2);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM hosts"), 1);
    cr_assert_eq(th_count_file(ws_store_path(s),
                               "SELECT count(*) FROM profile_params WHERE key = "
                               "'cpu.attn.gqa.bf16.bandwidth' AND value BETWEEN 14.9e9 AND 15.1e9"),
                 1);
    ws_calib_run_free(&run);
    ws_calib_run_free(&run2);
    ws_store_close(s);
}

Test(calib, failed_store_leaves_no_rows)
{
    ws_calib_run run;
    synth_run(&run, 12e9);
    ws_err err = {0};
    cr_assert_eq(ws_calib_fit_all(&run, &err), 0);
    ws_store *s = fresh_store();
    int before = th_count_file(ws_store_path(s), "SELECT count(*) FROM profiles");
    ws_calib_fault_after_samples = 7;
    long long id;
    cr_assert_eq(ws_calib_store(s, &run, &id, &err), WS_EDB);
    ws_calib_fault_after_samples = -1;
    cr_assert_neq(strstr(err.msg, "injected fault"), NULL, "%s", err.msg);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM samples"), 0);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM calib_runs"), 0);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM hosts"), 0);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM fits"), 0);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM profiles"), before);
    /* The database is still usable and consistent. */
    cr_assert_eq(ws_calib_store(s, &run, &id, &err), 0, "%s", err.msg);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM samples"), run.n_samples);
    ws_calib_run_free(&run);
    ws_store_close(s);
}

Test(calib, show_without_runs)
{
    ws_store *s = fresh_store();
    ws_err err = {0};
    cr_assert_null(ws_calib_show(s, 0, &err));
    cr_assert_eq(err.code, WS_ENOTFOUND);
    cr_assert_neq(strstr(err.msg, "no calibration run yet"), NULL, "%s", err.msg);
    cr_assert_null(ws_calib_show(s, 42, &err));
    cr_assert_neq(strstr(err.msg, "no calibration run 42"), NULL, "%s", err.msg);
    ws_store_close(s);
}

Test(calib, locked_database_is_a_clear_error)
{
    ws_calib_run run;
    synth_run(&run, 12e9);
    ws_err err = {0};
    cr_assert_eq(ws_calib_fit_all(&run, &err), 0);
    ws_store *s = fresh_store();
    sqlite3 *other;
    cr_assert_eq(sqlite3_open(ws_store_path(s), &other), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(other, "BEGIN IMMEDIATE", 0, 0, 0), SQLITE_OK);
    setenv("WRITESCOPE_DB_TIMEOUT_MS", "300", 1);
    ws_store *s2;
    cr_assert_eq(ws_store_open(ws_store_path(s), &s2, &err), 0, "%s", err.msg);
    long long id;
    cr_assert_eq(ws_calib_store(s2, &run, &id, &err), WS_EDB);
    cr_assert_neq(strstr(err.msg, "locked by another writer (gave up after 0.3 s)"), NULL, "%s",
                  err.msg);
    sqlite3_exec(other, "ROLLBACK", 0, 0, 0);
    sqlite3_close(other);
    cr_assert_eq(th_count_file(ws_store_path(s2), "SELECT count(*) FROM calib_runs"), 0);
    cr_assert_eq(ws_calib_store(s2, &run, &id, &err), 0, "%s", err.msg);
    unsetenv("WRITESCOPE_DB_TIMEOUT_MS");
    ws_store_close(s2);
    ws_store_close(s);
    ws_calib_run_free(&run);
}

Test(calib, constant_intensity_without_machine_figures)
{
    /* No read bandwidth or peak measured (e.g. a partial run): constant-intensity samples
     * still fit the byte rate, and P is left out rather than invented. */
    ws_calib_run run;
    synth_run(&run, 12e9);
    run.read_bw = run.read_bw_1t = 0;
    run.peak_flops[0] = run.peak_flops[1] = 0;
    ws_err err = {0};
    cr_assert_eq(ws_calib_fit_all(&run, &err), 0, "%s", err.msg);
    const ws_calib_fit *gqa = NULL;
    for (int i = 0; i < run.n_fits; i++)
        if (!strcmp(run.fits[i].key.op, "attn") && !strcmp(run.fits[i].key.attn_kind, "gqa"))
            gqa = &run.fits[i];
    cr_assert_not_null(gqa);
    cr_assert(gqa->r.good, "%s", gqa->r.note);
    cr_assert(!gqa->r.p_fixed);
    cr_assert(isinf(gqa->r.peak_flops));
    cr_assert_float_eq(gqa->r.bandwidth, 12e9, 12e6);
    ws_store *s = fresh_store();
    long long id;
    cr_assert_eq(ws_calib_store(s, &run, &id, &err), 0, "%s", err.msg);
    cr_assert_eq(th_count_file(ws_store_path(s), "SELECT count(*) FROM fits WHERE op = 'attn' AND "
                                                 "attn_kind = 'gqa' AND peak_flops IS NULL"),
                 1);
    ws_store_close(s);
    ws_calib_run_free(&run);
}

/* The link's contention factors are the share of H2D bandwidth left: a copy under CPU GEMMs
 * measured faster than alone (a noisy host) is stored as 1 with the ratio in its note, and
 * the profile it builds drives the cost model (the lent H200 host measured 1.024). */
static const ws_calib_fit *fit_named(const ws_calib_run *run, const char *op)
{
    for (int i = 0; i < run->n_fits; i++)
        if (!strcmp(run->fits[i].key.op, op))
            return &run->fits[i];
    return NULL;
}

Test(calib, link_contention_factor_is_at_most_one)
{
    for (int faster = 0; faster <= 1; faster++) {
        ws_calib_run run;
        synth_run(&run, 12e9);
        strcpy(run.scope, "all");
        ws_err err = {0};
        const char *ops[] = {"h2d", "h2d_under_gemm", "h2d_concurrent"};
        const double W[] = {50e9, faster ? 51.2e9 : 40e9, 45e9};
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < 6; i++) {
                double B = 4096.0 * (1 << (2 * i)), t = 5e-6 + B / W[k];
                ws_calib_sample x = {.key = {"link", "", "", ""},
                                     .bytes = B,
                                     .repeats = 3,
                                     .t_median = t * (1 + 0.002 * (i % 3)),
                                     .t_min = t,
                                     .t_max = t * 1.01};
                snprintf(x.key.op, sizeof x.key.op, "%s", ops[k]);
                cr_assert_eq(ws_calib_add_sample(&run, &x, &err), 0);
            }
        cr_assert_eq(ws_calib_fit_all(&run, &err), 0, "%s", err.msg);
        const ws_calib_fit *f = fit_named(&run, "h2d_gemm_contention_factor");
        const ws_calib_fit *d = fit_named(&run, "h2d_duplex_factor");
        cr_assert(f && d);
        cr_assert_float_eq(d->r.factor, 0.9, 0.01);
        if (faster) {
            cr_assert_eq(f->r.factor, 1.0);
            cr_assert(strstr(f->r.note, "no contention seen, held at 1"), "%s", f->r.note);
            cr_assert(strstr(f->r.note, "1.02"), "the measured ratio is kept: %s", f->r.note);
        } else {
            cr_assert_float_eq(f->r.factor, 0.8, 0.01);
        }
        ws_calib_run_free(&run);
    }
}

/* The int8 expert GEMM's samples fit like the bf16 one's (t = c0 + F/P + B/W over token
 * counts), and the instruction family its samples ran on goes into the fit's note and into
 * the reference of the calibrated profile's values. */
Test(calib, expert_gemm_int8_fit_names_its_family)
{
    ws_calib_run run;
    synth_run(&run, 12e9);
    ws_err err = {0};
    const double P = 300e9, W = 20e9, c0 = 40e-6;
    /* two expert shapes (Qwen3-30B-A3B's, DeepSeek-V2-Lite's): with one, c0 and the weights'
     * bytes / W are one intercept */
    for (int i = 0; i < 20; i++) {
        double F, B;
        ws_expert_int8_cost(2048, i < 10 ? 768 : 1408, 1 << (i % 10), &F, &B);
        const double t = c0 + F / P + B / W;
        ws_calib_sample s = {.key = {"cpu", "expert_gemm", "int8", ""},
                             .flops = F,
                             .bytes = B,
                             .repeats = 5,
                             .t_median = t,
                             .t_min = t,
                             .t_max = t * 1.01};
        snprintf(s.params, sizeof s.params,
                 "{\"model\": \"%s\", \"tokens\": %d, \"threads\": 2, \"weights\": "
                 "\"int8/127, evicted\", \"impl\": \"gemm:jit\", \"isa\": \"avx512_core_bf16\", "
                 "\"family\": \"avx512_vnni\"}",
                 i < 10 ? "qwen3-30b-a3b" : "deepseek-v2-lite", 1 << (i % 10));
        cr_assert_eq(ws_calib_add_sample(&run, &s, &err), 0);
    }
    cr_assert_eq(ws_calib_fit_all(&run, &err), 0, "%s", err.msg);
    const ws_calib_fit *f = NULL;
    for (int i = 0; i < run.n_fits; i++)
        if (!strcmp(run.fits[i].key.op, "expert_gemm") && !strcmp(run.fits[i].key.dtype, "int8"))
            f = &run.fits[i];
    cr_assert_not_null(f);
    cr_assert(f->r.good, "%s", f->r.note);
    cr_assert_eq(f->r.form, WS_FIT_SERIAL);
    cr_assert_float_eq(f->r.peak_flops, P, P * 1e-3);
    cr_assert_float_eq(f->r.bandwidth, W, W * 1e-3);
    cr_assert_float_eq(f->r.c0, c0, c0 * 1e-3);
    cr_assert(isfinite(f->r.heldout_mape_pct));
    cr_assert_str_eq(f->r.note, "ran on avx512_vnni (oneDNN gemm:jit, ISA avx512_core_bf16)");
    ws_store *s = fresh_store();
    long long id;
    cr_assert_eq(ws_calib_store(s, &run, &id, &err), 0, "%s", err.msg);
    char name[160];
    snprintf(name, sizeof name, "host:%s", run.host.id);
    ws_profile p;
    cr_assert_eq(ws_profile_load(s, name, &p, &err), 0, "%s", err.msg);
    const ws_profile_param *q = ws_profile_get(&p, "cpu.expert_gemm.int8.peak_flops");
    cr_assert_not_null(q);
    cr_assert_float_eq(q->value, P, P * 1e-3);
    cr_assert_neq(strstr(q->reference, "ran on avx512_vnni"), NULL, "%s", q->reference);
    ws_profile_free(&p);
    ws_store_close(s);
    ws_calib_run_free(&run);
}

/* A quick calibration times the int8 expert GEMM for real (oneDNN on this CPU) and fits it:
 * 2 models x 10 token counts, each sample naming the implementation and the instruction
 * family, the fit's note naming the family. Whether the fit converges, and how well, depends
 * on the host's load (and a sanitizer's slowdown): logged, not asserted. */
Test(calib, quick_sweep_fits_the_int8_expert_gemm, .timeout = 300)
{
    ws_calib_opts o = {.quick = 1, .do_cpu = 1, .threads = 2, .sweeps = WS_CALIB_SWEEP_EXPERT_INT8};
    ws_calib_run run;
    ws_calib_run_init(&run);
    ws_err err = {0};
    cr_assert_eq(ws_calib_measure(&o, &run, &err), 0, "%s", err.msg);
    cr_assert_eq(run.n_samples, 20);
    char fam[80];
    snprintf(fam, sizeof fam, "\"family\": \"%s\"", ws_gemm_int8_family(2048, 768, 1));
    for (int i = 0; i < run.n_samples; i++) {
        const ws_calib_sample *x = &run.samples[i];
        cr_assert_str_eq(x->key.op, "expert_gemm");
        cr_assert_str_eq(x->key.dtype, "int8");
        cr_assert(x->t_median > 0 && x->repeats == 7 && x->flops > 0 && x->bytes > 0);
        cr_assert_neq(strstr(x->params, fam), NULL, "%s", x->params);
        cr_assert_neq(strstr(x->params, "\"impl\": \""), NULL, "%s", x->params);
        cr_assert_eq(x->params[strlen(x->params) - 1], '}', "params cut: %s", x->params);
    }
    cr_assert_eq(ws_calib_fit_all(&run, &err), 0, "%s", err.msg);
    cr_assert_eq(run.n_fits, 1);
    const ws_fit_result *r = &run.fits[0].r;
    cr_assert_str_eq(run.fits[0].key.dtype, "int8");
    cr_assert_eq(r->n, 20);
    cr_assert(r->form == WS_FIT_SERIAL || r->form == WS_FIT_ROOFLINE ||
              r->form == WS_FIT_PIECEWISE);
    char ran[80];
    snprintf(ran, sizeof ran, "ran on %s", ws_gemm_int8_family(2048, 768, 1));
    cr_assert_neq(strstr(r->note, ran), NULL, "%s", r->note);
    cr_log_info("cpu.expert_gemm.int8: c0 %.3g s, P %.3g op/s, W %.3g B/s, held-out MAPE %.1f%% "
                "(%s)",
                r->c0, r->peak_flops, r->bandwidth, r->heldout_mape_pct, r->note);
    ws_calib_run_free(&run);
    ws_gemm_int8_release();
}

/* A sample keeps its median and, for the fits, the median of its fastest half (a repeat
 * slowed by other load moves it least) and the interquartile spread over it. */
Test(calib, sample_keeps_the_fastest_half_and_its_spread)
{
    ws_calib_run run;
    ws_calib_run_init(&run);
    ws_err err = {0};
    double t[9] = {8, 100, 3, 1, 7, 2, 6, 5, 4};
    cr_assert_eq(ws_calib_add_timed(&run, &err, "cpu", "attn", "bf16", "gqa", 1, 1, t, 9, "{}"), 0);
    const ws_calib_sample *x = &run.samples[0];
    cr_assert_float_eq(x->t_median, 5, 1e-12);
    cr_assert_float_eq(x->t_est, 3, 1e-12);
    cr_assert_float_eq(x->spread_pct, 100.0 * (7 - 3) / 3, 1e-9);
    cr_assert_float_eq(x->t_min, 1, 0);
    cr_assert_float_eq(x->t_max, 100, 0);
    double two[2] = {2, 1};
    cr_assert_eq(ws_calib_add_timed(&run, &err, "cpu", "attn", "bf16", "gqa", 1, 1, two, 2, "{}"),
                 0);
    cr_assert_float_eq(run.samples[1].t_est, 1, 0);
    cr_assert(isnan(run.samples[1].spread_pct)); /* too few repeats for quartiles */
    ws_calib_run_free(&run);
}

/* Samples `key` of t = c0 + B / W with relative noise `amp` alternating in sign. */
static void add_noisy(ws_calib_run *run, const char *kind, double c0, double W, double amp)
{
    ws_err err = {0};
    for (int i = 0; i < 10; i++) {
        const double B = 4e6 * (1 << i), t = (c0 + B / W) * (1 + (i % 2 ? amp : -amp));
        ws_calib_sample s = {.key = {"cpu", "attn", "fp16", ""},
                             .flops = 2 * B,
                             .bytes = B,
                             .repeats = 5,
                             .t_median = t,
                             .t_min = t,
                             .t_max = t * 1.1};
        snprintf(s.key.attn_kind, sizeof s.key.attn_kind, "%s", kind);
        cr_assert_eq(ws_calib_add_sample(run, &s, &err), 0);
    }
}

static const ws_calib_fit *fit_kind(const ws_calib_run *run, const char *kind)
{
    for (int i = 0; i < run->n_fits; i++)
        if (!strcmp(run->fits[i].key.op, "attn") && !strcmp(run->fits[i].key.dtype, "fp16") &&
            !strcmp(run->fits[i].key.attn_kind, kind))
            return &run->fits[i];
    cr_assert_fail("no attn fit of kind %s", kind);
    return NULL;
}

/* Between a fit and the fallback the cost model would take without it (no fixed cost, the
 * run's peak and read bandwidth), the better on the samples is used, and the fit names it:
 * a fit over the 10% threshold that beats a far worse fallback is used; a fit within 10%
 * that the fallback beats is not. */
Test(calib, a_fit_is_used_only_where_it_beats_its_fallback)
{
    ws_calib_run run;
    const double W = 40e9;
    synth_run(&run, W);
    add_noisy(&run, "gqa", 30e-6, W / 3, 0.14); /* slow and noisy: the fallback far off */
    add_noisy(&run, "mla-sparse", 0, W, 0.01);  /* the fallback itself, within 1% */
    ws_err err = {0};
    cr_assert_eq(ws_calib_fit_all(&run, &err), 0, "%s", err.msg);
    const ws_calib_fit *a = fit_kind(&run, "gqa"), *b = fit_kind(&run, "mla-sparse");
    cr_assert_gt(a->r.heldout_mape_pct, WS_FIT_GOOD_MAPE_PCT, "%.2f%% %s", a->r.heldout_mape_pct,
                 a->r.note);
    cr_assert_gt(a->fallback_mape_pct, 2 * a->r.heldout_mape_pct);
    cr_assert(a->r.good, "%s", a->r.note);
    cr_assert(strstr(a->r.note, "beats the fallback"), "%s", a->r.note);
    cr_assert(strstr(a->fallback, "read 40 GB/s"), "%s", a->fallback);
    cr_assert_lt(b->r.heldout_mape_pct, WS_FIT_GOOD_MAPE_PCT);
    cr_assert_lt(b->fallback_mape_pct, b->r.heldout_mape_pct);
    cr_assert(!b->r.good, "%s", b->r.note);
    cr_assert(strstr(b->r.note, "fallback used"), "%s", b->r.note);
    /* the transfer sweep has no fallback: the threshold alone */
    for (int i = 0; i < run.n_fits; i++)
        if (!strcmp(run.fits[i].key.op, "membw_read")) {
            cr_assert_str_eq(run.fits[i].fallback, "");
            cr_assert(isnan(run.fits[i].fallback_mape_pct));
        }
    /* stored and shown: the fallback, its error and the spread beside the fit; the run's
     * reference probe, and in the profile for validate to hold the host against */
    run.probe_bw = 41e9;
    ws_store *s = fresh_store();
    long long id;
    cr_assert_eq(ws_calib_store(s, &run, &id, &err), 0, "%s", err.msg);
    json_t *show = ws_calib_show(s, id, &err);
    cr_assert_not_null(show, "%s", err.msg);
    cr_assert_float_eq(
        json_number_value(json_object_get(json_object_get(show, "run"), "probe_gbps")), 41.0, 1e-9);
    char pname[160];
    snprintf(pname, sizeof pname, "host:%s", run.host.id);
    ws_profile prof;
    cr_assert_eq(ws_profile_load(s, pname, &prof, &err), 0, "%s", err.msg);
    const ws_profile_param *pp = ws_profile_get(&prof, "cpu.reference_read.bandwidth");
    cr_assert_not_null(pp);
    cr_assert_float_eq(pp->value, 41e9, 1);
    ws_profile_free(&prof);
    size_t i;
    json_t *f;
    int seen = 0;
    json_array_foreach(json_object_get(show, "fits"), i, f)
    {
        if (strcmp(json_string_value(json_object_get(f, "key")), "cpu.attn.gqa.fp16"))
            continue;
        seen = 1;
        cr_assert(json_is_string(json_object_get(f, "fallback")));
        cr_assert_float_eq(json_number_value(json_object_get(f, "fallback_mape_pct")),
                           a->fallback_mape_pct, 1e-9);
        cr_assert(json_is_number(json_object_get(f, "spread_pct")));
    }
    cr_assert(seen);
    json_decref(show);
    ws_store_close(s);
    ws_calib_run_free(&run);
}

/* A run flagged as noisy (its reference probe drifted) is stored as a record with its drift,
 * and its host profile takes none of its fits. */
Test(calib, a_flagged_run_is_stored_and_not_used)
{
    ws_calib_run run;
    synth_run(&run, 12e9);
    run.flagged = 1;
    run.remeasured = 1;
    run.drift_pct = 31.5;
    ws_err err = {0};
    cr_assert_eq(ws_calib_fit_all(&run, &err), 0, "%s", err.msg);
    for (int i = 0; i < run.n_fits; i++) {
        cr_assert(!run.fits[i].r.good, "%s", run.fits[i].key.op);
        if (run.fits[i].r.n < 3)
            continue; /* too few samples to fit: that note stands */
        cr_assert(strstr(run.fits[i].r.note, "flagged"), "%s", run.fits[i].r.note);
    }
    ws_store *s = fresh_store();
    long long id;
    cr_assert_eq(ws_calib_store(s, &run, &id, &err), 0, "%s", err.msg);
    json_t *show = ws_calib_show(s, id, &err);
    json_t *r = json_object_get(show, "run");
    cr_assert(json_is_true(json_object_get(r, "flagged")));
    cr_assert(json_is_true(json_object_get(r, "remeasured")));
    cr_assert_float_eq(json_number_value(json_object_get(r, "drift_pct")), 31.5, 1e-12);
    json_decref(show);
    char name[160];
    snprintf(name, sizeof name, "host:%s", run.host.id);
    ws_profile p;
    cr_assert_neq(ws_profile_load(s, name, &p, NULL), 0, "no profile from a flagged run");
    ws_store_close(s);
    ws_calib_run_free(&run);
}

/* The attention reference: a run's bf16 attention sample of a model at the reference shape
 * goes into the host profile as that model's cpu.reference_attn (its KV read rate at the
 * sample's estimate); a sample at any other batch or context does not. */
Test(calib, the_attention_reference_sample_is_kept_in_the_profile)
{
    ws_calib_run run;
    synth_run(&run, 40e9);
    ws_err err = {0};
    const int batches[3] = {WS_CALIB_ATTN_REF_BATCH, 1, WS_CALIB_ATTN_REF_BATCH};
    const int ctxs[3] = {WS_CALIB_ATTN_REF_CTX, WS_CALIB_ATTN_REF_CTX, 2 * WS_CALIB_ATTN_REF_CTX};
    const char *models[3] = {"qwen3-30b-a3b", "other-a", "other-b"};
    for (int k = 0; k < 3; k++) {
        const double bytes = 64e6 * (k + 1), t = bytes / 36e9;
        ws_calib_sample s = {.key = {"cpu", "attn", "bf16", "gqa"},
                             .flops = bytes,
                             .bytes = bytes,
                             .repeats = 9,
                             .t_median = t * 1.2,
                             .t_min = t * 0.95,
                             .t_max = t * 1.5,
                             .t_est = t,
                             .spread_pct = 3};
        snprintf(s.params, sizeof s.params,
                 "{\"model\": \"%s\", \"ctx\": %d, \"batch\": %d, \"threads\": 2}", models[k],
                 ctxs[k], batches[k]);
        cr_assert_eq(ws_calib_add_sample(&run, &s, &err), 0, "%s", err.msg);
    }
    cr_assert_eq(ws_calib_fit_all(&run, &err), 0, "%s", err.msg);
    run.probe_bw = 41e9;
    ws_store *s = fresh_store();
    long long id;
    cr_assert_eq(ws_calib_store(s, &run, &id, &err), 0, "%s", err.msg);
    char pname[160];
    snprintf(pname, sizeof pname, "host:%s", run.host.id);
    ws_profile prof;
    cr_assert_eq(ws_profile_load(s, pname, &prof, &err), 0, "%s", err.msg);
    const ws_profile_param *pp =
        ws_profile_get(&prof, "cpu.reference_attn.qwen3-30b-a3b.bf16.bandwidth");
    cr_assert_not_null(pp);
    cr_assert_float_eq(pp->value, 36e9, 1e3);
    cr_assert(strstr(pp->reference, "attention sample qwen3-30b-a3b 4 x 8192"), "%s",
              pp->reference);
    cr_assert_null(ws_profile_get(&prof, "cpu.reference_attn.other-a.bf16.bandwidth"));
    cr_assert_null(ws_profile_get(&prof, "cpu.reference_attn.other-b.bf16.bandwidth"));
    ws_profile_free(&prof);
    ws_store_close(s);
    ws_calib_run_free(&run);
}

/* The attention reference timed on its own, as validate times it: a KV read rate for a
 * dense-attention model, a one-line refusal for a sparse one and for repeats out of range. */
Test(calib, the_attention_probe_times_the_reference_call)
{
    ws_err err = {0};
    ws_pool *pool = ws_pool_create(2, &err);
    cr_assert_not_null(pool, "%s", err.msg);
    double bw = 0;
    cr_assert_eq(ws_calib_attn_probe(pool, "qwen3-30b-a3b", 2, &bw, &err), 0, "%s", err.msg);
    cr_assert(bw > 1e8 && bw < 1e13, "%g B/s", bw);
    cr_assert_eq(ws_calib_attn_probe(pool, "deepseek-v4-flash", 2, &bw, &err), WS_EINVAL);
    cr_assert(strstr(err.msg, "sparse"), "%s", err.msg);
    cr_assert_eq(ws_calib_attn_probe(pool, "qwen3-30b-a3b", 0, &bw, &err), WS_EINVAL);
    ws_pool_destroy(pool);
}
