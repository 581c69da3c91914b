/* test_calib_file: calibration files (calib/calib_file.h): export then load gives the same
 * fits and machine, the shipped measured H200 loads and drives the h200 profile, the check
 * against the datasheet names the figures, and malformed files are one-line errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "calib_file.h"
#include "helpers.h"
#include "profile.h"

#define MEASURED "profiles/measured/h200.json"

static ws_store *fresh_store(char *dir, size_t cap)
{
    char path[256];
    th_tmpdir(dir, cap);
    snprintf(path, sizeof path, "%s/calib.db", dir);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    return s;
}

static const ws_calib_fit *find_fit(const ws_calib_run *r, const char *op, const char *kind)
{
    for (int i = 0; i < r->n_fits; i++)
        if (!strcmp(r->fits[i].key.op, op) && !strcmp(r->fits[i].key.attn_kind, kind))
            return &r->fits[i];
    return NULL;
}

/* The shipped file reads into runs whose refits match what `calib show` stored on the
 * device (the figures docs/notes/h200-device-check.md quotes). */
Test(calib_file, shipped_h200_reads_and_refits)
{
    ws_calib_run runs[WS_CALIB_FILE_MAX_RUNS];
    int n;
    ws_err err = {0};
    cr_assert_eq(ws_calib_file_read(MEASURED, runs, WS_CALIB_FILE_MAX_RUNS, &n, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(runs[0].host.gpu_name, "NVIDIA H200");
    cr_assert_str_eq(runs[0].host.id, "aeabd35f9440a92c", "the fingerprint is rebuilt the same");
    const ws_calib_fit *d2d = find_fit(&runs[0], "d2d", ""), *gemm = find_fit(&runs[0], "gemm", "");
    cr_assert(d2d && d2d->r.good && gemm && gemm->r.good);
    cr_assert(fabs(d2d->r.bandwidth / 4.288e12 - 1) < 0.01, "%g", d2d->r.bandwidth);
    cr_assert(fabs(gemm->r.peak_flops / 7.828e14 - 1) < 0.01, "%g", gemm->r.peak_flops);
    const ws_calib_fit *h2d = find_fit(&runs[1], "h2d", "");
    cr_assert(h2d && h2d->r.good && fabs(h2d->r.bandwidth / 5.532e10 - 1) < 0.01);
    const ws_calib_fit *cf = find_fit(&runs[1], "h2d_gemm_contention_factor", "");
    cr_assert(cf && cf->r.factor <= 1.0);
    for (int i = 0; i < n; i++)
        ws_calib_run_free(&runs[i]);
}

/* Loading stores the runs; the datasheet h200 then picks the calibration up; exporting the
 * loaded runs and loading that again gives the same fits. */
Test(calib_file, load_then_export_round_trip)
{
    char dir[64], out[256];
    ws_store *s = fresh_store(dir, sizeof dir);
    long long ids[WS_CALIB_FILE_MAX_RUNS];
    int n;
    ws_err err = {0};
    cr_assert_eq(ws_calib_file_load(s, MEASURED, ids, WS_CALIB_FILE_MAX_RUNS, &n, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(n, 2);
    ws_profile p;
    cr_assert_eq(ws_profile_load(s, "h200", &p, &err), 0, "%s", err.msg);
    cr_assert_str_eq(p.calibrated, "gpu:NVIDIA H200");
    ws_profile_free(&p);
    json_t *doc = ws_calib_file_export(s, ids, n, &err);
    cr_assert_not_null(doc, "%s", err.msg);
    snprintf(out, sizeof out, "%s/again.json", dir);
    cr_assert_eq(json_dump_file(doc, out, JSON_REAL_PRECISION(17)), 0);
    json_decref(doc);
    ws_calib_run a[WS_CALIB_FILE_MAX_RUNS], b[WS_CALIB_FILE_MAX_RUNS];
    int na, nb;
    cr_assert_eq(ws_calib_file_read(MEASURED, a, WS_CALIB_FILE_MAX_RUNS, &na, &err), 0);
    cr_assert_eq(ws_calib_file_read(out, b, WS_CALIB_FILE_MAX_RUNS, &nb, &err), 0, "%s", err.msg);
    cr_assert_eq(na, nb);
    for (int r = 0; r < na; r++) {
        cr_assert_eq(a[r].n_samples, b[r].n_samples);
        cr_assert_eq(a[r].n_fits, b[r].n_fits);
        for (int i = 0; i < a[r].n_fits; i++) {
            const ws_fit_result *x = &a[r].fits[i].r, *y = &b[r].fits[i].r;
            cr_assert_eq(x->good, y->good, "%s", a[r].fits[i].key.op);
            cr_assert(x->bandwidth == y->bandwidth || fabs(x->bandwidth / y->bandwidth - 1) < 1e-9,
                      "%s: %g vs %g", a[r].fits[i].key.op, x->bandwidth, y->bandwidth);
        }
        ws_calib_run_free(&a[r]);
        ws_calib_run_free(&b[r]);
    }
    ws_store_close(s);
}

/* The datasheet h200 against the measured samples: GEMM's P and the link's W are both
 * reported beside the samples' fits, and the errors are those of the profile's rooflines. */
Test(calib_file, check_names_the_datasheet_figures)
{
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    ws_calib_check k;
    cr_assert_eq(ws_calib_file_check(s, MEASURED, "h200", &k, &err), 0, "%s", err.msg);
    ws_store_close(s);
    cr_assert_str_eq(k.calibrated, "");
    int gemm_p = 0, h2d = 0;
    for (int i = 0; i < k.n_op; i++) {
        const ws_calib_check_op *o = &k.op[i];
        cr_assert(o->n > 0 && o->median_pct >= 0 && o->worst_pct >= o->median_pct, "%s", o->key);
        if (!strcmp(o->key, "gpu.gemm.bf16") && !strcmp(o->rate, "P")) {
            gemm_p = 1;
            cr_assert(o->profile_rate > 1e14 && isfinite(o->fitted_rate), "%g", o->fitted_rate);
        }
        if (!strcmp(o->key, "link.h2d")) {
            h2d = 1;
            cr_assert(!strcmp(o->rate, "W") && fabs(o->fitted_rate / 5.532e10 - 1) < 0.01);
        }
    }
    cr_assert(gemm_p && h2d);
    cr_assert_gt(k.skipped, 0, "the pageable copies have no term in the cost model");
}

Test(calib_file, malformed_files_are_one_line_errors)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    const char *bad[][2] = {
        {"{\"format\": \"other\", \"version\": 1, \"runs\": []}", "not a calibration file"},
        {"{\"format\": \"writescope-calibration\", \"version\": 2, \"runs\": []}", "version 1"},
        {"{\"format\": \"writescope-calibration\", \"version\": 1, \"runs\": []}", "1 to 8 runs"},
        {"{\"format\": \"writescope-calibration\", \"version\": 1, \"runs\": [{\"mode\": \"quick\"}]}",
         "run 1: needs"},
        {"{\"format\": \"writescope-calibration\", \"version\": 1, \"runs\": [{\"mode\": \"q\", "
         "\"scope\": \"gpu\", \"started_at\": \"a\", \"finished_at\": \"b\", \"host\": "
         "{\"cpu_model\": \"x\", \"cpu_cores\": 2, \"isa\": \"avx2\"}, \"samples\": [{\"device\": "
         "\"gpu\", \"op\": \"d2d\", \"dtype\": \"\", \"attn_kind\": \"\", \"flops\": 0, \"bytes\": "
         "1e6, \"repeats\": 3, \"t_median\": 1e-3, \"t_min\": 2e-3, \"t_max\": 3e-3}]}]}",
         "sample 1: needs"},
        {"{\"format\": ", "bad.json:1: "},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        th_write(dir, "bad.json", bad[i][0], path, sizeof path);
        ws_calib_run runs[WS_CALIB_FILE_MAX_RUNS];
        int n = -1;
        ws_err err = {0};
        cr_assert_neq(ws_calib_file_read(path, runs, WS_CALIB_FILE_MAX_RUNS, &n, &err), 0, "%zu", i);
        cr_assert_eq(n, 0);
        cr_assert(strstr(err.msg, bad[i][1]) && strstr(err.msg, "bad.json") && !strchr(err.msg, '\n'),
                  "%zu: %s", i, err.msg);
    }
    /* a FIFO named *.json is refused at once, never read (it would block) */
    snprintf(path, sizeof path, "%s/fifo.json", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    ws_calib_run runs[WS_CALIB_FILE_MAX_RUNS];
    int n;
    ws_err err = {0};
    cr_assert_neq(ws_calib_file_read(path, runs, WS_CALIB_FILE_MAX_RUNS, &n, &err), 0);
    cr_assert(strstr(err.msg, "a FIFO"), "%s", err.msg);
}

/* The CLI: export, load and check, with --json where a script reads them. */
Test(calib_file, cli_export_load_check)
{
    char dir[64], db[256], db2[256], out[256], env[300];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/a.db", dir);
    snprintf(db2, sizeof db2, "%s/b.db", dir);
    snprintf(out, sizeof out, "%s/h200.json", dir);
    snprintf(env, sizeof env, "WRITESCOPE_DB=%s/default.db", dir);
    const char *e[] = {env, NULL};
    th_run r = th_writescope((const char *[]){"calib", "load", MEASURED, "--db", db, NULL}, e);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "gpu.gemm.bf16") && strstr(r.out, "refitted from"), "%s", r.out);
    th_run_free(&r);
    r = th_writescope((const char *[]){"calib", "export", "1", "2", "--db", db, "--out", out, NULL}, e);
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    json_t *v = th_writescope_json(
        (const char *[]){"calib", "load", out, "--db", db2, "--json", NULL}, e);
    cr_assert_eq(json_array_size(json_object_get(v, "runs")), 2);
    json_decref(v);
    v = th_writescope_json((const char *[]){"calib", "check", out, "--gpu", "h200", "--datasheet",
                                            "--json", NULL},
                           e);
    cr_assert_str_eq(json_string_value(json_object_get(v, "calibrated")), "");
    cr_assert_gt(json_array_size(json_object_get(v, "operations")), 4);
    json_decref(v);
    /* over the calibrated h200 of db2 the link's figures are the measured ones */
    v = th_writescope_json(
        (const char *[]){"calib", "check", out, "--gpu", "h200", "--db", db2, "--json", NULL}, e);
    cr_assert_str_eq(json_string_value(json_object_get(v, "calibrated")), "gpu:NVIDIA H200");
    json_decref(v);
    th_expect_fail((const char *[]){"calib", "export", "--db", db, NULL}, 2, "--out", e);
    th_expect_fail((const char *[]){"calib", "export", "x1", "--db", db, "--out", out, NULL}, 2,
                   "run number", e);
    th_expect_fail((const char *[]){"calib", "load", "--db", db, NULL}, 2, "one calibration file", e);
    th_expect_fail((const char *[]){"calib", "check", "x.csv", "--datasheet", NULL}, 2,
                   "--datasheet", e);
    th_expect_fail((const char *[]){"calib", "check", out, "--datasheet", "--db", db, NULL}, 2,
                   "drop --db", e);
    th_expect_fail((const char *[]){"calib", "export", "--db", db, "--out", out, "--json", NULL}, 2,
                   "--json goes with", e);
}
