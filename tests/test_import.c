/* test_import: `calib import` (calib/import.c) and the operator checks (validate/oppoints.c).
 * On small profiles written here in Vidur's format from known parameters, the fits recover
 * them, the run is stored with its sources (path, SHA-256, who, tool, GPU, precision, the
 * licence found beside the files) and the datasheet profile picks the calibration up by its
 * name, the cost model using the fitted keys; a malformed file writes nothing. On the public
 * A100 profiles (../shared/profiling/vidur-a100, skipped when absent): the held-out rows,
 * which the fits never saw, are predicted by the imported profile within the target
 * (median <= 10% per group) and 9 rows in 10 within 30%; the importer's held-out errors and
 * the cost model's agree, so both use one definition of each operation's work. Fits outside
 * the GPU's datasheet bounds are not used; --name never takes another profile's place
 * unasked; the files are read safely (FIFOs, /proc, a file given twice, long paths) and what
 * is stored from them is escaped. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calib.h"
#include "helpers.h"
#include "import.h"
#include "oppoints.h"
#include "profile.h"

/* The parameters the synthetic profiles are made from. */
#define DEC_C0 12e-6
#define DEC_W 1.5e12
#define PF_C0 5e-6
#define PF_P 120e12
#define PF_HALF 900.0
#define GEMM_C0 6e-6
#define GEMM_P 200e12
#define GEMM_W 1.6e12

static const struct {
    int op;
    double c0, W, P; /* P: one row's bytes/s (a kernel of few rows takes a row's latency) */
} k_elem[] = {{WS_VOP_NORM_IN, 1e-6, 7e11, 4e9},
              {WS_VOP_NORM_POST, 1e-6, 7e11, 4e9},
              {WS_VOP_ROPE, 2e-6, 9e11, 8e9},
              {WS_VOP_ACT, 1.5e-6, 1e12, 1e10},
              {WS_VOP_ADD, 0.5e-6, 1.8e12, 1.2e10}};

static void put(FILE *f, double seconds)
{
    fprintf(f, "%.17g", seconds * 1e3); /* Vidur's milliseconds */
}

/* attention.csv: decode and prefill rows of 32 q / 4 kv heads of 128 per GPU, decode times
 * dec_c0 + KV bytes / dec_w, prefill times on a peak pf_p. */
static void write_attention_as(const char *dir, double dec_c0, double dec_w, double pf_p)
{
    char path[256];
    snprintf(path, sizeof path, "%s/attention.csv", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "time_stats.attn_decode.median,time_stats.attn_prefill.median,n_embd,n_q_head,"
               "n_kv_head,num_tensor_parallel_workers,batch_size,kv_cache_size,"
               "prefill_chunk_size,is_prefill,attention_backend,profile_method\n");
    for (int b = 1; b <= 64; b *= 2)
        for (int kv = 64; kv <= 4096; kv *= 2) {
            put(f, dec_c0 + b * (double)kv * 2048 / dec_w);
            fprintf(f, ",,8192,64,8,2,%d,%d,0,False,AttentionBackend.FLASH_ATTENTION,"
                       "ProfileMethod.KINETO\n", b, kv);
        }
    for (int q = 64; q <= 2048; q *= 2)
        for (int kv = 0; kv <= 2048; kv += 512) {
            const double pairs = q * (double)kv + q * (q + 1.0) / 2, k = pairs / q;
            fprintf(f, ",");
            put(f, PF_C0 + 4.0 * 32 * 128 * pairs / (pf_p * k / (k + PF_HALF)));
            fprintf(f, ",8192,64,8,2,1,%d,%d,True,AttentionBackend.FLASH_ATTENTION,"
                       "ProfileMethod.KINETO\n", kv, q);
        }
    fclose(f);
    snprintf(path, sizeof path, "%s/LICENSE", dir);
    f = fopen(path, "w");
    fprintf(f, "  MIT License\n\n  Copyright (c) Somebody.\n\n  Permission is hereby granted\n");
    fclose(f);
}

static void write_attention(const char *dir)
{
    write_attention_as(dir, DEC_C0, DEC_W, PF_P);
}

/* mlp_tiny.csv: the nine operations of a dense layer (32 q / 8 kv heads of 128, hidden 4096,
 * MLP 14336) at 1 and 2 workers. */
static void write_mlp(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/mlp_tiny.csv", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "time_stats.input_layernorm.median,time_stats.attn_pre_proj.median,"
               "time_stats.attn_rope.median,time_stats.attn_post_proj.median,"
               "time_stats.post_attention_layernorm.median,time_stats.mlp_up_proj.median,"
               "time_stats.mlp_act.median,time_stats.mlp_down_proj.median,"
               "time_stats.add.median,n_head,n_kv_head,n_embd,n_expanded_embd,num_tokens,"
               "num_tensor_parallel_workers\n");
    for (int tp = 1; tp <= 2; tp++)
        for (int M = 1; M <= 8192; M *= 2) {
            const double H = 4096, I = 14336.0 / tp, d = 128, qh = 32.0 / tp, kvh = 8.0 / tp;
            const double gemm[4][2] = {{H, (qh + 2 * kvh) * d}, {qh * d, H}, {H, 2 * I}, {I, H}};
            double tg[4], te[5];
            for (int g = 0; g < 4; g++) {
                double F, B;
                ws_cost_gemm_work(M, gemm[g][0], gemm[g][1], 2, &F, &B);
                tg[g] = GEMM_C0 + fmax(F / GEMM_P, B / GEMM_W);
            }
            const double bytes[5] = {ws_cost_norm_bytes(M, H, 2), ws_cost_norm_bytes(M, H, 2),
                                     ws_cost_rope_bytes(M, qh + kvh, d, 2),
                                     ws_cost_act_bytes(M, I, 2), ws_cost_add_bytes(M, H, 2)};
            for (int e = 0; e < 5; e++)
                te[e] = k_elem[e].c0 + fmax(bytes[e] / k_elem[e].W, bytes[e] / M / k_elem[e].P);
            const double row[9] = {te[0], tg[0], te[2], tg[1], te[1], tg[2], te[3], tg[3], te[4]};
            for (int i = 0; i < 9; i++) {
                put(f, row[i]);
                fputc(',', f);
            }
            fprintf(f, "32,8,4096,14336,%d,%d\n", M, tp);
        }
    fclose(f);
}

static ws_store *open_store(const char *dir)
{
    char db[256];
    snprintf(db, sizeof db, "%s/ws.db", dir);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(db, &s, &err), 0, "%s", err.msg);
    return s;
}

static const ws_import_fit *fit_of(const ws_import_result *r, const char *key)
{
    for (int i = 0; i < r->n_fits; i++) {
        char k[128];
        ws_import_key_name(&r->fits[i].key, k, sizeof k);
        if (!strcmp(k, key))
            return &r->fits[i];
    }
    cr_assert_fail("no fit %s", key);
    return NULL;
}

#define REL(a, b, tol) cr_assert(fabs((a) - (b)) <= (tol) * fabs(b), "%s = %g, not %g", #a, a, b)

Test(import, fits_recover_the_parameters_and_the_profile_picks_them_up)
{
    char dir[64];
    th_tmpdir(dir, sizeof dir);
    write_attention(dir);
    write_mlp(dir);
    ws_store *s = open_store(dir);
    const char *paths[] = {dir};
    ws_import_opts o = {.paths = paths, .n_paths = 1};
    ws_import_result *r = calloc(1, sizeof *r);
    ws_err err = {0};
    cr_assert_eq(ws_calib_import(s, &o, r, &err), 0, "%s", err.msg);
    cr_assert_str_eq(r->profile, "imported:a100-80gb-sxm");
    cr_assert_str_eq(r->device, "NVIDIA A100-SXM4-80GB");
    cr_assert_eq(r->n_files, 2, "the folder's two .csv files, in name order");
    cr_assert_eq(r->n_fits, 7);
    const ws_import_fit *f = fit_of(r, "gpu.attn.gqa.fp16");
    REL(f->r.c0, DEC_C0, 1e-3);
    REL(f->r.bandwidth, DEC_W, 1e-3);
    cr_assert_eq(f->n_train + f->n_heldout, 49);
    cr_assert_eq(f->n_heldout, 9);
    cr_assert_lt(f->ho_worst_pct, 0.1);
    cr_assert(f->r.good, "%s", f->r.note);
    f = fit_of(r, "gpu.prefill_attn.gqa.fp16");
    REL(f->r.peak_flops, PF_P, 1e-3);
    REL(f->r.factor, PF_HALF, 1e-3);
    REL(f->r.c0, PF_C0, 1e-2);
    f = fit_of(r, "gpu.gemm.fp16");
    REL(f->r.peak_flops, GEMM_P, 1e-3);
    REL(f->r.bandwidth, GEMM_W, 1e-3);
    REL(f->r.c0, GEMM_C0, 1e-2);
    REL(fit_of(r, "gpu.rmsnorm.fp16")->r.bandwidth, 7e11, 1e-3);
    REL(fit_of(r, "gpu.rope.fp16")->r.bandwidth, 9e11, 1e-3);
    REL(fit_of(r, "gpu.act.fp16")->r.c0, 1.5e-6, 1e-2);
    REL(fit_of(r, "gpu.add.fp16")->r.bandwidth, 1.8e12, 1e-3);
    REL(fit_of(r, "gpu.rmsnorm.fp16")->r.peak_flops, 4e9, 1e-3);
    REL(fit_of(r, "gpu.add.fp16")->r.peak_flops, 1.2e10, 1e-3);
    /* the sources */
    const ws_calibdb_source *a = &r->files[0];
    cr_assert_neq(strstr(a->path, "attention.csv"), NULL, "%s", a->path);
    cr_assert_eq(strlen(a->sha256), 64);
    cr_assert_str_eq(a->measured_by, "Vidur (microsoft/vidur)");
    cr_assert_str_eq(a->tool, "PyTorch Kineto profiler");
    cr_assert_str_eq(a->dtype, "fp16");
    cr_assert_str_eq(a->licence, "MIT License, Copyright (c) Somebody. (LICENSE)");
    cr_assert_neq(strstr(a->gpu, "NVIDIA A100-SXM4-80GB"), NULL, "%s", a->gpu);
    cr_assert_neq(strstr(a->what, "49 decode and 30 prefill rows"), NULL, "%s", a->what);
    json_t *show = ws_calib_show(s, r->run_id, &err);
    cr_assert_not_null(show, "%s", err.msg);
    json_t *src = json_object_get(show, "sources");
    cr_assert_eq(json_array_size(src), 2);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(src, 0), "sha256")),
                     a->sha256);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(show, "run"), "mode")),
                     "import");
    json_decref(show);
    /* The datasheet name gives the datasheet with the imported calibration laid over it, and
     * the cost model takes the fitted keys (fp16 standing in for a bf16 model). */
    ws_profile p;
    cr_assert_eq(ws_profile_load(s, "a100-80gb-sxm", &p, &err), 0, "%s", err.msg);
    cr_assert_str_eq(p.calibrated, "imported:a100-80gb-sxm");
    const ws_profile_param *q = ws_profile_get(&p, "gpu.prefill_attn.gqa.fp16.half_keys");
    cr_assert_not_null(q);
    cr_assert_eq(q->source, WS_SOURCE_FITTED);
    ws_hw hw;
    cr_assert_eq(ws_hw_gpu_from_profile(&p, WS_ATTN_GQA, WS_DT_BF16, WS_DT_BF16, &hw, &err), 0, "%s",
                 err.msg);
    REL(hw.gpu_attn.c0.v, DEC_C0, 1e-3);
    REL(hw.gpu_prefill.half.v, PF_HALF, 1e-3);
    REL(hw.gpu_gemm.P.v, GEMM_P, 1e-3);
    REL(hw.gpu_elem[WS_ELEM_ADD].W.v, 1.8e12, 1e-3);
    REL(hw.gpu_elem[WS_ELEM_ACT].P.v, 1e10, 1e-3);
    cr_assert_eq(hw.gpu_elem[WS_ELEM_MOE].W.src, WS_SOURCE_MODELED, "no data: the datasheet");
    ws_profile_free(&p);
    /* The check predicts the held-out rows within rounding. */
    ws_vidur_rows rows;
    ws_oppoints op;
    cr_assert_eq(ws_oppoints_check(s, paths, 1, "a100-80gb-sxm", NULL, 1, 0, &rows, &hw, &op, &err),
                 0, "%s", err.msg);
    for (int g = 0; g < WS_VIDUR_GROUPS; g++)
        cr_assert_lt(op.group[g].worst_pct, 0.2, "%s: %g%%", ws_vidur_group_name(g),
                     op.group[g].worst_pct);
    ws_vidur_rows_free(&rows);
    free(r);
    ws_store_close(s);
}

Test(import, a_malformed_file_writes_nothing)
{
    char dir[64], path[128];
    th_tmpdir(dir, sizeof dir);
    write_attention(dir);
    snprintf(path, sizeof path, "%s/mlp_bad.csv", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "time_stats.mlp_up_proj.median,n_head\n0.1,32\n");
    fclose(f);
    ws_store *s = open_store(dir);
    const char *paths[] = {dir};
    ws_import_opts o = {.paths = paths, .n_paths = 1};
    ws_import_result *r = calloc(1, sizeof *r);
    ws_err err = {0};
    cr_assert_neq(ws_calib_import(s, &o, r, &err), 0);
    cr_assert_neq(strstr(err.msg, "mlp_bad.csv:1: header: no 'n_kv_head' column"), NULL, "%s",
                  err.msg);
    /* a GPU the datasheet has no device name for, and a host profile */
    const char *one[] = {dir};
    o = (ws_import_opts){.paths = one, .n_paths = 1, .gpu = "xeon-gold-5318y"};
    cr_assert_neq(ws_calib_import(s, &o, r, &err), 0);
    o.gpu = "no-such-gpu";
    cr_assert_eq(ws_calib_import(s, &o, r, &err), WS_ENOTFOUND, "%s", err.msg);
    free(r);
    ws_store_close(s);
    snprintf(path, sizeof path, "%s/ws.db", dir);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM calib_runs"), 0);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM samples"), 0);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM calib_sources"), 0);
}

/* The held-out target on the public A100 profiles. */
Test(import, a100_heldout_rows_within_the_target, .timeout = 300)
{
    char src[4096], dir[64];
    if (!th_vidur_profiles(src, sizeof src))
        cr_skip_test("no Vidur A100 profiles at %s (../shared/profiling/vidur-a100)", src);
    th_tmpdir(dir, sizeof dir);
    ws_store *s = open_store(dir);
    const char *paths[] = {src};
    ws_import_opts o = {.paths = paths, .n_paths = 1};
    ws_import_result *r = calloc(1, sizeof *r);
    ws_err err = {0};
    cr_assert_eq(ws_calib_import(s, &o, r, &err), 0, "%s", err.msg);
    cr_assert_eq(r->n_fits, 7);
    for (int i = 0; i < r->n_fits; i++)
        cr_assert(r->fits[i].r.good, "%s", r->fits[i].r.note);
    ws_vidur_rows rows;
    ws_hw hw;
    ws_oppoints op;
    cr_assert_eq(ws_oppoints_check(s, paths, 1, "a100-80gb-sxm", NULL, 1, 100e-6, &rows, &hw, &op,
                                   &err),
                 0, "%s", err.msg);
    for (int g = 0; g < WS_VIDUR_GROUPS; g++) {
        const ws_oppoint_stats *x = &op.group[g];
        const char *name = ws_vidur_group_name(g);
        cr_assert_gt(x->n, 500, "%s: %d held-out rows", name, x->n);
        cr_assert_leq(x->median_pct, 10.0, "%s: median %.2f%% > 10%%", name, x->median_pct);
        cr_assert_leq(x->p90_pct, 30.0, "%s: p90 %.2f%% > 30%%", name, x->p90_pct);
        cr_assert_lt(x->worst_pct, 150.0, "%s: worst %.1f%%", name, x->worst_pct);
        for (int i = 0; i < rows.n; i++)
            cr_assert(ws_vidur_op_group(rows.v[i].op) != (ws_vidur_group)g || rows.v[i].heldout ||
                          x->worst_row != i,
                      "the worst row is a held-out one");
    }
    /* No row predicted at 2x its time beyond the times' resolution: Kineto's are rounded to 1 us,
     * and two rows of one shape (a residual add of 8 x 4096 on 8 workers, in both files) read 1 and
     * 2 us. */
    for (int i = 0; i < rows.n; i++) {
        const ws_vidur_row *w = &rows.v[i];
        if (!w->heldout)
            continue;
        const double m = ws_oppoint_predict(w, &hw, 2);
        cr_assert(m > 0 && m < 2 * (w->t + 0.5e-6),
                  "%s line %d: predicted %.2f us, measured %.2f us", ws_vidur_op_name(w->op),
                  w->line, m * 1e6, w->t * 1e6);
    }
    /* One definition of the work: the importer's held-out MAPE of decode attention and the
     * prefill curve is the cost model's on the same rows. */
    REL(op.group[WS_VIDUR_DECODE_ATTN].mean_pct, fit_of(r, "gpu.attn.gqa.fp16")->ho_mape_pct, 1e-6);
    REL(op.group[WS_VIDUR_PREFILL_ATTN].mean_pct,
        fit_of(r, "gpu.prefill_attn.gqa.fp16")->ho_mape_pct, 1e-6);
    ws_vidur_rows_free(&rows);
    free(r);
    ws_store_close(s);
}

/* A fit outside what the GPU can do is not used, whatever its errors, and says which bound it
 * broke: a fixed cost of 2 s per decode kernel, a prefill peak 16x the A100's fp16 tensor
 * peak, a decode bandwidth 5x its HBM's; the profile then carries none of them. */
Test(import, unphysical_fits_are_not_used)
{
    char dir[64], two[80];
    th_tmpdir(dir, sizeof dir);
    write_attention_as(dir, 2.0, DEC_W, 5e15);
    ws_store *s = open_store(dir);
    const char *paths[] = {dir};
    ws_import_opts o = {.paths = paths, .n_paths = 1};
    ws_import_result *r = calloc(1, sizeof *r);
    ws_err err = {0};
    cr_assert_eq(ws_calib_import(s, &o, r, &err), 0, "%s", err.msg);
    const ws_import_fit *f = fit_of(r, "gpu.attn.gqa.fp16");
    cr_assert_not_null(f);
    REL(f->r.c0, 2.0, 1e-3);
    cr_assert(!f->r.good, "%s", f->r.note);
    cr_assert_str_eq(f->why, "fixed cost 2 s above 1 s");
    cr_assert_neq(strstr(f->r.note, "not used: fixed cost 2 s above 1 s"), NULL, "%s", f->r.note);
    f = fit_of(r, "gpu.prefill_attn.gqa.fp16");
    cr_assert_not_null(f);
    cr_assert(!f->r.good, "%s", f->r.note);
    cr_assert_neq(strstr(f->why, "above 1.5x the datasheet's fp16_flops 3.12e+14"), NULL, "%s",
                  f->why);
    snprintf(two, sizeof two, "%s/w", dir);
    cr_assert_eq(mkdir(two, 0700), 0);
    write_attention_as(two, DEC_C0, 1e13, PF_P);
    paths[0] = two;
    cr_assert_eq(ws_calib_import(s, &o, r, &err), 0, "%s", err.msg);
    f = fit_of(r, "gpu.attn.gqa.fp16");
    cr_assert(!f->r.good, "%s", f->r.note);
    cr_assert_neq(strstr(f->why, "bandwidth 1e+13 B/s above 1.5x the datasheet's hbm_bw 2.04e+12"),
                  NULL, "%s", f->why);
    cr_assert(fit_of(r, "gpu.prefill_attn.gqa.fp16")->r.good, "a physical fit is used");
    ws_profile p;
    cr_assert_eq(ws_profile_load(s, "a100-80gb-sxm", &p, &err), 0, "%s", err.msg);
    cr_assert_null(ws_profile_get(&p, "gpu.attn.gqa.fp16.bandwidth"), "an unphysical fit carried");
    cr_assert_null(ws_profile_get(&p, "gpu.attn.gqa.fp16.c0"), "an unphysical fit carried");
    cr_assert_not_null(ws_profile_get(&p, "gpu.prefill_attn.gqa.fp16.half_keys"));
    ws_profile_free(&p);
    free(r);
    ws_store_close(s);
}

/* --name never turns another kind of profile, a datasheet profile or an earlier import into
 * this one unless asked (replace, for an earlier import only). */
Test(import, a_taken_name_is_refused)
{
    char dir[64];
    th_tmpdir(dir, sizeof dir);
    write_attention(dir);
    ws_store *s = open_store(dir);
    const char *paths[] = {dir};
    ws_import_opts o = {.paths = paths, .n_paths = 1, .name = "xeon-gold-5318y"};
    ws_import_result *r = calloc(1, sizeof *r);
    ws_err err = {0};
    cr_assert_eq(ws_calib_import(s, &o, r, &err), WS_EINVAL);
    cr_assert_str_eq(err.msg, "calib import: profile 'xeon-gold-5318y' exists and is a host "
                              "profile, not a GPU's: choose another --name");
    o.name = "a100-80gb-sxm";
    o.replace = 1;
    cr_assert_eq(ws_calib_import(s, &o, r, &err), WS_EINVAL);
    cr_assert_str_eq(err.msg, "calib import: profile 'a100-80gb-sxm' is a datasheet profile: "
                              "choose another --name");
    o.name = "mine";
    o.replace = 0;
    cr_assert_eq(ws_calib_import(s, &o, r, &err), 0, "%s", err.msg);
    cr_assert_str_eq(r->profile, "mine");
    cr_assert_eq(ws_calib_import(s, &o, r, &err), WS_EINVAL);
    cr_assert_str_eq(err.msg, "calib import: profile 'mine' exists (an earlier import): "
                              "--replace replaces it");
    o.replace = 1;
    cr_assert_eq(ws_calib_import(s, &o, r, &err), 0, "%s", err.msg);
    o.name = NULL; /* the default name is the import's own: imported again at will */
    o.replace = 0;
    cr_assert_eq(ws_calib_import(s, &o, r, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_calib_import(s, &o, r, &err), 0, "%s", err.msg);
    ws_profile p;
    cr_assert_eq(ws_profile_load(s, "xeon-gold-5318y", &p, &err), 0, "%s", err.msg);
    cr_assert_str_eq(p.kind, "host");
    ws_profile_free(&p);
    cr_assert_eq(ws_profile_load(s, "a100-80gb-sxm", &p, &err), 0, "%s", err.msg);
    const ws_profile_param *hbm = ws_profile_get(&p, "hbm_bw");
    cr_assert(hbm && hbm->source == WS_SOURCE_DATASHEET, "the datasheet keys are kept");
    ws_profile_free(&p);
    free(r);
    ws_store_close(s);
}

/* Every file the import reads (the LICENSE beside them too) is a regular file opened without
 * blocking: a FIFO named *.csv or LICENSE is one error, not a hang (the test's timeout);
 * /proc's files are named for what they are; a file given twice is read once; a path longer
 * than the database keeps is refused, not cut. */
Test(import, files_are_read_once_and_never_block, .timeout = 60)
{
    char dir[64], fifo[128], csv[128], link[128], lic[128];
    th_tmpdir(dir, sizeof dir);
    write_attention(dir);
    snprintf(csv, sizeof csv, "%s/attention.csv", dir);
    snprintf(fifo, sizeof fifo, "%s/pipe.csv", dir);
    snprintf(link, sizeof link, "%s/link.csv", dir);
    snprintf(lic, sizeof lic, "%s/LICENSE", dir);
    ws_vidur_rows rows = {0};
    ws_calibdb_source files[WS_IMPORT_MAX_FILES];
    int n = 0;
    ws_err err = {0};
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    const char *one[] = {dir};
    cr_assert_neq(ws_import_read(one, 1, &rows, files, &n, &err), 0);
    cr_assert_neq(strstr(err.msg, "pipe.csv: not a regular file"), NULL, "%s", err.msg);
    ws_vidur_rows_free(&rows);
    cr_assert_eq(unlink(fifo), 0);
    cr_assert_eq(unlink(lic), 0);
    cr_assert_eq(mkfifo(lic, 0600), 0);
    cr_assert_neq(ws_import_read(one, 1, &rows, files, &n, &err), 0);
    cr_assert_neq(strstr(err.msg, "LICENSE: not a regular file"), NULL, "%s", err.msg);
    ws_vidur_rows_free(&rows);
    cr_assert_eq(unlink(lic), 0);
    const char *proc[] = {"/proc/self/status"};
    cr_assert_neq(ws_import_read(proc, 1, &rows, files, &n, &err), 0);
    cr_assert_str_eq(err.msg, "/proc/self/status: not a regular file on disk: its size is unknown "
                              "(0 bytes by stat, yet it reads)");
    ws_vidur_rows_free(&rows);
    /* the file, its folder and a link to it: one file */
    cr_assert_eq(symlink("attention.csv", link), 0);
    const char *twice[] = {csv, dir, link};
    cr_assert_eq(ws_import_read(twice, 3, &rows, files, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 1);
    cr_assert_eq(rows.n, 79);
    ws_vidur_rows_free(&rows);
    /* a path of 1100 bytes to the same file */
    char longp[1200];
    int l = snprintf(longp, sizeof longp, "%s", dir);
    while (l < 1080)
        l += snprintf(longp + l, sizeof longp - (size_t)l, "/.");
    snprintf(longp + l, sizeof longp - (size_t)l, "/attention.csv");
    const char *lp[] = {longp};
    cr_assert_neq(ws_import_read(lp, 1, &rows, files, &n, &err), 0, "a long path was cut");
    cr_assert_neq(strstr(err.msg, "longer than the 1023 a calibration's sources keep"), NULL, "%s",
                  err.msg);
    ws_vidur_rows_free(&rows);
}

/* What the import stores from outside is safe to print and to parse: a LICENSE's control
 * characters escaped, a file name with '"' and '\' valid JSON in each sample's params, and
 * provenance text given with a control character refused. */
Test(import, provenance_is_escaped_or_refused)
{
    char dir[64], from[128], to[128], lic[128], db[128];
    th_tmpdir(dir, sizeof dir);
    write_attention(dir);
    snprintf(from, sizeof from, "%s/attention.csv", dir);
    snprintf(to, sizeof to, "%s/q\"b\\s.csv", dir);
    cr_assert_eq(rename(from, to), 0);
    snprintf(lic, sizeof lic, "%s/LICENSE", dir);
    FILE *f = fopen(lic, "w");
    fprintf(f, "MIT \x1b[31mLicense\x7f\n");
    fclose(f);
    ws_store *s = open_store(dir);
    const char *paths[] = {dir};
    ws_import_opts o = {.paths = paths, .n_paths = 1, .tool = "Kineto\x1b[2J"};
    ws_import_result *r = calloc(1, sizeof *r);
    ws_err err = {0};
    cr_assert_eq(ws_calib_import(s, &o, r, &err), WS_EINVAL);
    cr_assert_str_eq(err.msg, "calib import: --tool holds a control character (byte 7)");
    o.tool = NULL;
    o.licence = "MIT\n";
    cr_assert_eq(ws_calib_import(s, &o, r, &err), WS_EINVAL);
    cr_assert_str_eq(err.msg, "calib import: --licence holds a control character (byte 4)");
    o.licence = NULL;
    cr_assert_eq(ws_calib_import(s, &o, r, &err), 0, "%s", err.msg);
    cr_assert_str_eq(r->files[0].licence, "MIT \\x1b[31mLicense\\x7f (LICENSE)");
    free(r);
    ws_store_close(s);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM samples"), 79);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM samples WHERE json_valid(params) AND "
                                   "json_extract(params, '$.file') = 'q\"b\\s.csv'"),
                 79);
}

/* `calib check` takes the precisions `calib import` takes, and no other. */
Test(import, check_takes_the_precisions_import_takes)
{
    char dir[64];
    th_tmpdir(dir, sizeof dir);
    write_attention(dir);
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open_embedded(&s, &err), 0, "%s", err.msg);
    const char *paths[] = {dir};
    ws_vidur_rows rows;
    ws_hw hw;
    ws_oppoints op;
    cr_assert_eq(ws_oppoints_check(s, paths, 1, "a100-80gb-sxm", "fp8", 0, 0, &rows, &hw, &op,
                                   &err),
                 WS_EINVAL);
    cr_assert_str_eq(err.msg, "operator points: precision 'fp8' (fp16, bf16 or fp32)");
    ws_import_opts o = {.paths = paths, .n_paths = 1, .dtype = "fp8"};
    ws_import_result *r = calloc(1, sizeof *r);
    cr_assert_eq(ws_calib_import(s, &o, r, &err), WS_EINVAL);
    cr_assert_str_eq(err.msg, "calib import: precision 'fp8' (fp16, bf16 or fp32)");
    free(r);
    cr_assert_eq(ws_oppoints_check(s, paths, 1, "a100-80gb-sxm", "bf16", 0, 0, &rows, &hw, &op,
                                   &err),
                 0, "%s", err.msg);
    ws_vidur_rows_free(&rows);
    ws_store_close(s);
}
