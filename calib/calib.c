/* calib: run bookkeeping, fitting by key, transactional storage, profiles (see calib.h). */
#include "calib.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_util.h"

int ws_calib_fault_after_samples = -1;

void ws_calib_run_init(ws_calib_run *run) { memset(run, 0, sizeof *run); }

void ws_calib_run_free(ws_calib_run *run)
{
    free(run->samples);
    free(run->fits);
    memset(run, 0, sizeof *run);
}

int ws_calib_add_sample(ws_calib_run *run, const ws_calib_sample *s, ws_err *err)
{
    if (run->n_samples == run->cap_samples) {
        int cap = run->cap_samples ? 2 * run->cap_samples : 64;
        ws_calib_sample *n = realloc(run->samples, sizeof *n * (size_t)cap);
        if (!n)
            return ws_err_set(err, WS_ENOMEM, "calib: out of memory");
        run->samples = n;
        run->cap_samples = cap;
    }
    run->samples[run->n_samples++] = *s;
    return 0;
}

int ws_calib_add_timed(ws_calib_run *run, ws_err *err, const char *device, const char *op,
                       const char *dtype, const char *kind, double flops, double bytes, double *t,
                       int n, const char *params_fmt, ...)
{
    if (n <= 0)
        return ws_err_set(err, WS_EINVAL, "calib: %s: no timed repeat", op);
    const double med = ws_median_sort(t, n); /* t is sorted: extremes at both ends */
    ws_calib_sample x = {.flops = flops,
                         .bytes = bytes,
                         .repeats = n,
                         .t_median = med,
                         .t_min = t[0],
                         .t_max = t[n - 1]};
    snprintf(x.key.device, sizeof x.key.device, "%s", device);
    snprintf(x.key.op, sizeof x.key.op, "%s", op);
    snprintf(x.key.dtype, sizeof x.key.dtype, "%s", dtype);
    snprintf(x.key.attn_kind, sizeof x.key.attn_kind, "%s", kind);
    va_list ap;
    va_start(ap, params_fmt);
    vsnprintf(x.params, sizeof x.params, params_fmt, ap);
    va_end(ap);
    return ws_calib_add_sample(run, &x, err);
}

static int same_key(const ws_calib_key *a, const ws_calib_key *b)
{
    return !strcmp(a->device, b->device) && !strcmp(a->op, b->op) && !strcmp(a->dtype, b->dtype) &&
           !strcmp(a->attn_kind, b->attn_kind);
}

/* Ops whose cost is a transfer (t = c0 + B/W); everything else is a roofline. */
static int is_transfer_op(const char *op)
{
    static const char *const ops[] = {"membw_read", "membw_read_1t", "membw_triad", "h2d",
                                      "h2d_pageable", "d2h", "d2h_pageable", "d2d",
                                      "h2d_concurrent", "h2d_under_gemm", NULL};
    for (int i = 0; ops[i]; i++)
        if (!strcmp(op, ops[i]))
            return 1;
    return 0;
}

/* Ops that are single measurements of the machine, not fitted. */
static int is_unfitted_op(const char *op)
{
    return !strcmp(op, "peak_flops") || !strcmp(op, "peak_flops_1t") || !strcmp(op, "pinned_cmp") ||
           !strcmp(op, "membw_read_1t") || !strcmp(op, "membw_triad");
}

static int add_fit(ws_calib_run *run, const ws_calib_key *k, const ws_fit_result *r, ws_err *err);

/* Factor fits from paired samples: op "pinned_cmp" with params "memory": pinned/pageable
 * gives key op "pinned_read_factor" = t(pinned) / t(pageable). */
static int fit_factors(ws_calib_run *run, ws_err *err)
{
    const ws_calib_sample *num = NULL, *den = NULL;
    for (int i = 0; i < run->n_samples; i++) {
        const ws_calib_sample *s = &run->samples[i];
        if (strcmp(s->key.op, "pinned_cmp"))
            continue;
        if (strstr(s->params, "\"memory\": \"pinned\""))
            num = s;
        else if (strstr(s->params, "\"memory\": \"pageable\""))
            den = s;
    }
    int rc = 0;
    /* Link contention: the H2D bandwidth while the CPU runs expert GEMMs (or while D2H
     * runs) over the H2D bandwidth alone, from the two transfer fits. */
    const ws_calib_fit *alone = NULL;
    for (int i = 0; i < run->n_fits; i++)
        if (!strcmp(run->fits[i].key.op, "h2d") && !strcmp(run->fits[i].key.device, "link"))
            alone = &run->fits[i];
    for (int i = 0; alone && alone->r.good && i < run->n_fits && !rc; i++) {
        const ws_calib_fit *f = &run->fits[i];
        const char *name = !strcmp(f->key.op, "h2d_under_gemm")   ? "h2d_gemm_contention_factor"
                           : !strcmp(f->key.op, "h2d_concurrent") ? "h2d_duplex_factor"
                                                                  : NULL;
        if (!name || !f->r.good)
            continue;
        ws_fit_result r = {.form = WS_FIT_FACTOR, .n = f->r.n, .converged = 1, .good = 1,
                           .r2 = NAN, .heldout_mape_pct = NAN};
        r.factor = f->r.bandwidth / alone->r.bandwidth;
        double a = f->r.bandwidth_se / f->r.bandwidth, b = alone->r.bandwidth_se / alone->r.bandwidth;
        r.factor_se = r.factor * sqrt(a * a + b * b);
        snprintf(r.note, sizeof r.note, "W(%s) / W(h2d)", f->key.op);
        ws_calib_key k = f->key;
        snprintf(k.op, sizeof k.op, "%s", name);
        rc = add_fit(run, &k, &r, err);
    }
    if (rc || !num || !den)
        return rc;
    ws_fit_result r;
    double a[3] = {num->t_median, num->t_min, num->t_max}, b[3] = {den->t_median, den->t_min, den->t_max};
    rc = ws_fit_factor(a, b, num->repeats < den->repeats ? num->repeats : den->repeats, &r, err);
    if (rc)
        return rc;
    ws_calib_key k = num->key;
    snprintf(k.op, sizeof k.op, "pinned_read_factor");
    return add_fit(run, &k, &r, err);
}

static int add_fit(ws_calib_run *run, const ws_calib_key *k, const ws_fit_result *r, ws_err *err)
{
    if (run->n_fits == run->cap_fits) {
        int cap = run->cap_fits ? 2 * run->cap_fits : 16;
        ws_calib_fit *n = realloc(run->fits, sizeof *n * (size_t)cap);
        if (!n)
            return ws_err_set(err, WS_ENOMEM, "calib: out of memory");
        run->fits = n;
        run->cap_fits = cap;
    }
    run->fits[run->n_fits].key = *k;
    run->fits[run->n_fits].r = *r;
    run->n_fits++;
    return 0;
}

int ws_calib_fit_all(ws_calib_run *run, ws_err *err)
{
    char *done = calloc((size_t)run->n_samples + 1, 1);
    ws_fit_point *pts = malloc(sizeof *pts * ((size_t)run->n_samples + 1));
    if (!done || !pts) {
        free(done);
        free(pts);
        return ws_err_set(err, WS_ENOMEM, "calib: out of memory");
    }
    int rc = 0;
    for (int i = 0; i < run->n_samples && !rc; i++) {
        if (done[i] || is_unfitted_op(run->samples[i].key.op))
            continue;
        const ws_calib_key *k = &run->samples[i].key;
        int n = 0;
        double ai_min = INFINITY, ai_max = 0;
        for (int j = i; j < run->n_samples; j++) {
            if (done[j] || !same_key(k, &run->samples[j].key))
                continue;
            done[j] = 1;
            const ws_calib_sample *s = &run->samples[j];
            pts[n++] = (ws_fit_point){s->flops, s->bytes, s->t_median};
            double ai = s->bytes > 0 ? s->flops / s->bytes : 0;
            ai_min = fmin(ai_min, ai);
            ai_max = fmax(ai_max, ai);
        }
        ws_fit_result r;
        ws_err ferr = {0};
        if (n < 3) {
            memset(&r, 0, sizeof r);
            r.n = n;
            r.heldout_mape_pct = NAN;
            snprintf(r.note, sizeof r.note, "too few samples (%d) to fit", n);
        } else if (is_transfer_op(k->op)) {
            if (ws_fit_transfer(pts, n, &r, &ferr))
                return ws_err_set(err, ferr.code, "calib: %s: %s", k->op, ferr.msg);
        } else {
            /* One intensity: only one rate is identifiable. Hold the other at the
             * machine's measured figure, on the side the samples do not sit on. */
            int one_thread = strstr(k->op, "_1t") != NULL, gpu = !strcmp(k->device, "gpu");
            double P = gpu ? run->gpu_peak : run->peak_flops[one_thread];
            double W = gpu ? run->gpu_bw : one_thread ? run->read_bw_1t : run->read_bw;
            double p_fix = 0, w_fix = 0;
            if (ai_max <= 1.5 * ai_min && P > 0 && W > 0) {
                if (ai_max * W < P)
                    p_fix = P; /* memory bound: fit W */
                else
                    w_fix = W; /* compute bound: fit P */
            } else if (ai_max <= 1.5 * ai_min) {
                p_fix = INFINITY; /* no machine figures: fit the byte rate alone */
            }
            if (ws_fit_roofline(pts, n, p_fix, w_fix, &r, &ferr))
                return ws_err_set(err, ferr.code, "calib: %s: %s", k->op, ferr.msg);
            if (isinf(p_fix))
                r.p_fixed = 0; /* P was left out, not held at a measurement */
        }
        rc = add_fit(run, k, &r, err);
    }
    free(done);
    free(pts);
    return rc ? rc : fit_factors(run, err);
}

#define DB_FAIL(store, err, what)                                                               \
    ws_err_set(err, WS_EDB, "%s: %s: %s (%s:%d)", ws_store_path(store), what,                   \
               sqlite3_errmsg(ws_store_db(store)), __FILE__, __LINE__)

static sqlite3_int64 upsert_host(ws_store *st, const ws_host_fp *h, ws_err *err)
{
    sqlite3 *db = ws_store_db(st);
    sqlite3_stmt *s;
    char now[32];
    ws_utc_now(now, sizeof now);
    if (sqlite3_prepare_v2(db,
                           "INSERT OR IGNORE INTO hosts(fingerprint, cpu_model, cpu_cores, mem_bytes, "
                           "isa, gpu_name, gpu_cc, gpu_mem_bytes, gpu_driver, pcie_link, first_seen) "
                           "VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)",
                           -1, &s, NULL) != SQLITE_OK)
        return DB_FAIL(st, err, "cannot store host"), -1;
    sqlite3_bind_text(s, 1, h->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, h->cpu_model, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 3, h->cpu_cores);
    sqlite3_bind_double(s, 4, h->mem_bytes);
    sqlite3_bind_text(s, 5, h->isa, -1, SQLITE_STATIC);
    if (h->has_gpu) {
        sqlite3_bind_text(s, 6, h->gpu_name, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 7, h->gpu_cc, -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 8, h->gpu_mem_bytes);
        sqlite3_bind_text(s, 9, h->gpu_driver, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 10, h->pcie_link, -1, SQLITE_STATIC);
    }
    sqlite3_bind_text(s, 11, now, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return DB_FAIL(st, err, "cannot store host"), -1;
    sqlite3_int64 id = -1;
    if (sqlite3_prepare_v2(db, "SELECT id FROM hosts WHERE fingerprint = ?1", -1, &s, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_text(s, 1, h->id, -1, SQLITE_STATIC);
        if (sqlite3_step(s) == SQLITE_ROW)
            id = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
    }
    if (id < 0)
        DB_FAIL(st, err, "cannot find host");
    return id;
}

static void bind_key(sqlite3_stmt *s, int first, const ws_calib_key *k)
{
    sqlite3_bind_text(s, first, k->device, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, first + 1, k->op, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, first + 2, k->dtype, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, first + 3, k->attn_kind, -1, SQLITE_STATIC);
}

static void bind_num(sqlite3_stmt *s, int i, double v)
{
    if (isfinite(v))
        sqlite3_bind_double(s, i, v);
    else
        sqlite3_bind_null(s, i);
}

/* Rebuilds profile `name` from the newest good fit of every key of this host whose
 * device is in `devices` (a SQL list literal such as "('cpu')"). */
static int rebuild_profile(ws_store *st, sqlite3_int64 host_id, const char *name, const char *kind,
                           const char *devices, const char *desc, sqlite3_int64 run_id,
                           ws_err *err)
{
    sqlite3 *db = ws_store_db(st);
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT f.id, f.run_id, f.device, f.op, f.dtype, f.attn_kind, f.c0, f.peak_flops, "
             "f.bandwidth, f.p_fixed, f.w_fixed, f.form, f.factor FROM fits f JOIN calib_runs r ON "
             "r.id = f.run_id WHERE r.host_id = ?1 AND f.good = 1 AND f.device IN %s AND f.id = "
             "(SELECT max(g.id) FROM fits g JOIN calib_runs q ON q.id = g.run_id WHERE "
             "q.host_id = ?1 AND g.good = 1 AND g.device = f.device AND g.op = f.op AND "
             "g.dtype = f.dtype AND g.attn_kind = f.attn_kind) ORDER BY f.device, f.op, "
             "f.attn_kind, f.dtype",
             devices);
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
        return DB_FAIL(st, err, "cannot read fits");
    sqlite3_bind_int64(q, 1, host_id);
    /* Collect first: nothing to write when the host has no good fit on these devices. */
    json_t *profile = json_object(), *params = json_object();
    int rows = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        rows++;
        char key[128] = "";
        static const int order[] = {2, 3, 5, 4}; /* device.op.attn_kind.dtype */
        for (int c = 0; c < 4; c++) {
            const char *part = (const char *)sqlite3_column_text(q, order[c]);
            if (part && *part) {
                size_t l = strlen(key);
                snprintf(key + l, sizeof key - l, "%s%s", l ? "." : "", part);
            }
        }
        char ref[96], pk[160];
        snprintf(ref, sizeof ref, "fit %lld of run %lld", (long long)sqlite3_column_int64(q, 0),
                 (long long)sqlite3_column_int64(q, 1));
        struct {
            const char *suffix, *unit;
            int col, fixed_col;
        } cols[] = {{"c0", "s", 6, -1},
                    {"peak_flops", "flop/s", 7, 9},
                    {"bandwidth", "B/s", 8, 10},
                    {"factor", "1", 12, -1}};
        for (int c = 0; c < 4; c++) {
            if (sqlite3_column_type(q, cols[c].col) == SQLITE_NULL)
                continue;
            double v = sqlite3_column_double(q, cols[c].col);
            if ((c > 0 && !(v > 0)) || (c == 0 && sqlite3_column_type(q, 12) != SQLITE_NULL))
                continue; /* a factor has no fixed cost */
            int fixed = cols[c].fixed_col >= 0 && sqlite3_column_int(q, cols[c].fixed_col);
            snprintf(pk, sizeof pk, "%s.%s", key, cols[c].suffix);
            json_t *p = json_object();
            json_object_set_new(p, "value", json_real(v));
            json_object_set_new(p, "unit", json_string(cols[c].unit));
            json_object_set_new(p, "source", json_string(fixed ? "measured" : "fitted"));
            json_object_set_new(p, "reference",
                                fixed ? json_sprintf("%s (held at the run's measured peak/bandwidth)", ref)
                                      : json_string(ref));
            json_object_set_new(params, pk, p);
        }
    }
    sqlite3_finalize(q);
    int rc = 0;
    if (rows > 0) {
        json_object_set_new(profile, "name", json_string(name));
        json_object_set_new(profile, "kind", json_string(kind));
        json_object_set_new(profile, "description", json_string(desc));
        json_object_set_new(profile, "params", params);
        json_t *file = json_object(), *arr = json_array();
        json_array_append_new(arr, profile);
        json_object_set_new(file, "profiles", arr);
        char *text = json_dumps(file, 0);
        json_decref(file);
        rc = ws_store_import_profiles(st, text, name, NULL, err); /* joins our transaction */
        free(text);
        if (!rc) {
            sqlite3_stmt *u;
            if (sqlite3_prepare_v2(db, "UPDATE profiles SET host_id = ?1, run_id = ?2 WHERE name = ?3",
                                   -1, &u, NULL) != SQLITE_OK)
                return DB_FAIL(st, err, "cannot link profile");
            sqlite3_bind_int64(u, 1, host_id);
            sqlite3_bind_int64(u, 2, run_id);
            sqlite3_bind_text(u, 3, name, -1, SQLITE_STATIC);
            rc = sqlite3_step(u) == SQLITE_DONE ? 0 : DB_FAIL(st, err, "cannot link profile");
            sqlite3_finalize(u);
        }
    } else {
        json_decref(profile);
        json_decref(params);
    }
    return rc;
}

static int store_in_tx(ws_store *st, const ws_calib_run *run, long long *run_id, ws_err *err)
{
    sqlite3 *db = ws_store_db(st);
    sqlite3_int64 host_id = upsert_host(st, &run->host, err);
    if (host_id < 0)
        return WS_EDB;
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO calib_runs(host_id, tool_version, mode, scope, started_at, "
                           "finished_at, note) VALUES (?1,?2,?3,?4,?5,?6,?7)",
                           -1, &s, NULL) != SQLITE_OK)
        return DB_FAIL(st, err, "cannot store run");
    sqlite3_bind_int64(s, 1, host_id);
    sqlite3_bind_text(s, 2, WS_VERSION, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, run->mode, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, run->scope, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, run->started_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, run->finished_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 7, run->note, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return DB_FAIL(st, err, "cannot store run");
    sqlite3_int64 rid = sqlite3_last_insert_rowid(db);

    if (sqlite3_prepare_v2(db,
                           "INSERT INTO samples(run_id, device, op, dtype, attn_kind, params, flops, "
                           "bytes, repeats, t_median, t_min, t_max) VALUES "
                           "(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)",
                           -1, &s, NULL) != SQLITE_OK)
        return DB_FAIL(st, err, "cannot store samples");
    for (int i = 0; i < run->n_samples; i++) {
        if (ws_calib_fault_after_samples >= 0 && i >= ws_calib_fault_after_samples) {
            sqlite3_finalize(s);
            return ws_err_set(err, WS_EDB, "%s: injected fault after %d samples",
                              ws_store_path(st), i);
        }
        const ws_calib_sample *x = &run->samples[i];
        sqlite3_reset(s);
        sqlite3_bind_int64(s, 1, rid);
        bind_key(s, 2, &x->key);
        sqlite3_bind_text(s, 6, x->params[0] ? x->params : "{}", -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 7, x->flops);
        sqlite3_bind_double(s, 8, x->bytes);
        sqlite3_bind_int(s, 9, x->repeats);
        sqlite3_bind_double(s, 10, x->t_median);
        sqlite3_bind_double(s, 11, x->t_min);
        sqlite3_bind_double(s, 12, x->t_max);
        if (sqlite3_step(s) != SQLITE_DONE) {
            sqlite3_finalize(s);
            return DB_FAIL(st, err, "cannot store sample");
        }
    }
    sqlite3_finalize(s);

    if (sqlite3_prepare_v2(db,
                           "INSERT INTO fits(run_id, device, op, dtype, attn_kind, form, c0, c0_se, "
                           "peak_flops, peak_flops_se, bandwidth, bandwidth_se, r2, "
                           "heldout_mape_pct, n_samples, good, note, p_fixed, w_fixed, "
                           "compute_bound, factor, factor_se) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,"
                           "?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22)",
                           -1, &s, NULL) != SQLITE_OK)
        return DB_FAIL(st, err, "cannot store fits");
    for (int i = 0; i < run->n_fits; i++) {
        const ws_calib_fit *f = &run->fits[i];
        sqlite3_reset(s);
        sqlite3_clear_bindings(s); /* a form leaves some columns unbound: NULL, not the last row's */
        sqlite3_bind_int64(s, 1, rid);
        bind_key(s, 2, &f->key);
        sqlite3_bind_text(s, 6,
                          f->r.form == WS_FIT_TRANSFER ? "transfer"
                          : f->r.form == WS_FIT_FACTOR ? "factor"
                                                       : "roofline",
                          -1, SQLITE_STATIC);
        bind_num(s, 7, f->r.c0);
        bind_num(s, 8, f->r.c0_se);
        if (f->r.form == WS_FIT_ROOFLINE && f->r.peak_flops > 0) {
            bind_num(s, 9, f->r.peak_flops);
            bind_num(s, 10, f->r.peak_flops_se);
        }
        bind_num(s, 11, f->r.bandwidth);
        bind_num(s, 12, f->r.bandwidth_se);
        if (f->r.form == WS_FIT_FACTOR) {
            bind_num(s, 21, f->r.factor);
            bind_num(s, 22, f->r.factor_se);
        }
        bind_num(s, 13, f->r.r2);
        bind_num(s, 14, f->r.heldout_mape_pct);
        sqlite3_bind_int(s, 15, f->r.n);
        sqlite3_bind_int(s, 16, f->r.good);
        sqlite3_bind_text(s, 17, f->r.note, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 18, f->r.p_fixed);
        sqlite3_bind_int(s, 19, f->r.w_fixed);
        sqlite3_bind_int(s, 20, f->r.compute_bound);
        if (sqlite3_step(s) != SQLITE_DONE) {
            sqlite3_finalize(s);
            return DB_FAIL(st, err, "cannot store fit");
        }
    }
    sqlite3_finalize(s);

    char name[160], desc[320];
    snprintf(name, sizeof name, "host:%s", run->host.id);
    snprintf(desc, sizeof desc, "calibrated host: %s, %d CPUs (%s)", run->host.cpu_model,
             run->host.cpu_cores, run->host.isa);
    if ((rc = rebuild_profile(st, host_id, name, "host", "('cpu')", desc, rid, err)))
        return rc;
    if (run->host.has_gpu) {
        snprintf(name, sizeof name, "gpu:%s", run->host.gpu_name);
        snprintf(desc, sizeof desc, "calibrated GPU %s (sm %s) and its host link, on host %s",
                 run->host.gpu_name, run->host.gpu_cc, run->host.id);
        if ((rc = rebuild_profile(st, host_id, name, "gpu", "('gpu','link')", desc, rid, err)))
            return rc;
    }
    *run_id = rid;
    return 0;
}

int ws_calib_store(ws_store *store, const ws_calib_run *run, long long *run_id, ws_err *err)
{
    /* Ctrl-C during the commit must not split it: hold SIGINT/SIGTERM until it is done
     * (SQLite's journal covers a kill -9). */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &old);
    int rc = ws_store_begin(store, err);
    if (!rc) {
        rc = store_in_tx(store, run, run_id, err);
        if (!rc)
            rc = ws_store_commit(store, err);
        if (rc)
            ws_store_rollback(store);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static json_t *col(sqlite3_stmt *s, int i)
{
    switch (sqlite3_column_type(s, i)) {
    case SQLITE_INTEGER: return json_integer(sqlite3_column_int64(s, i));
    case SQLITE_FLOAT: return json_real(sqlite3_column_double(s, i));
    case SQLITE_NULL: return json_null();
    default: return json_string((const char *)sqlite3_column_text(s, i));
    }
}

json_t *ws_calib_show(ws_store *store, long long run_id, ws_err *err)
{
    sqlite3 *db = ws_store_db(store);
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(db,
                           "SELECT r.id, r.tool_version, r.mode, r.scope, r.started_at, "
                           "r.finished_at, h.fingerprint, h.cpu_model, h.cpu_cores, h.isa, "
                           "h.gpu_name, (SELECT count(*) FROM samples WHERE run_id = r.id) FROM "
                           "calib_runs r JOIN hosts h ON h.id = r.host_id WHERE ?1 = 0 OR r.id = ?1 "
                           "ORDER BY r.id DESC LIMIT 1",
                           -1, &s, NULL) != SQLITE_OK) {
        DB_FAIL(store, err, "cannot read runs");
        return NULL;
    }
    sqlite3_bind_int64(s, 1, run_id);
    if (sqlite3_step(s) != SQLITE_ROW) {
        sqlite3_finalize(s);
        if (run_id)
            ws_err_set(err, WS_ENOTFOUND, "%s: no calibration run %lld", ws_store_path(store),
                       run_id);
        else
            ws_err_set(err, WS_ENOTFOUND, "%s: no calibration run yet (run 'writescope calib')",
                       ws_store_path(store));
        return NULL;
    }
    static const char *const run_cols[] = {"id", "tool_version", "mode", "scope", "started_at",
                                           "finished_at", "host", "cpu_model", "cpu_cores",
                                           "isa", "gpu_name", "samples"};
    json_t *out = json_object(), *r = json_object();
    for (int i = 0; i < 12; i++)
        json_object_set_new(r, run_cols[i], col(s, i));
    long long rid = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    json_object_set_new(out, "run", r);
    if (sqlite3_prepare_v2(db,
                           "SELECT id, device, op, dtype, attn_kind, form, c0, c0_se, peak_flops, "
                           "peak_flops_se, bandwidth, bandwidth_se, p_fixed, w_fixed, "
                           "compute_bound, r2, heldout_mape_pct, n_samples, good, note, factor, "
                           "factor_se FROM fits "
                           "WHERE run_id = ?1 ORDER BY id",
                           -1, &s, NULL) != SQLITE_OK) {
        json_decref(out);
        DB_FAIL(store, err, "cannot read fits");
        return NULL;
    }
    sqlite3_bind_int64(s, 1, rid);
    static const char *const fit_cols[] = {
        "id", "device", "op", "dtype", "attn_kind", "form", "c0", "c0_se", "peak_flops",
        "peak_flops_se", "bandwidth", "bandwidth_se", "p_fixed", "w_fixed", "compute_bound",
        "r2", "heldout_mape_pct", "n_samples", "good", "note", "factor", "factor_se"};
    json_t *fits = json_array();
    while (sqlite3_step(s) == SQLITE_ROW) {
        json_t *f = json_object();
        char key[128];
        snprintf(key, sizeof key, "%s.%s%s%s%s%s", sqlite3_column_text(s, 1),
                 sqlite3_column_text(s, 2), *sqlite3_column_text(s, 4) ? "." : "",
                 sqlite3_column_text(s, 4), *sqlite3_column_text(s, 3) ? "." : "",
                 sqlite3_column_text(s, 3));
        json_object_set_new(f, "key", json_string(key));
        for (int i = 0; i < 22; i++) {
            int flag = (i >= 12 && i <= 14) || i == 18;
            json_object_set_new(f, fit_cols[i],
                                flag ? json_boolean(sqlite3_column_int(s, i)) : col(s, i));
        }
        json_array_append_new(fits, f);
    }
    sqlite3_finalize(s);
    json_object_set_new(out, "fits", fits);
    /* Single measurements of the machine (not fitted): rates from their samples. */
    json_t *meas = json_array();
    if (sqlite3_prepare_v2(db,
                           "SELECT device, op, dtype, flops, bytes, t_median, params FROM samples "
                           "WHERE run_id = ?1 AND op IN ('membw_read_1t', 'membw_triad', "
                           "'peak_flops', 'peak_flops_1t') ORDER BY id",
                           -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, rid);
        while (sqlite3_step(s) == SQLITE_ROW) {
            json_t *m = json_object();
            int is_flops = sqlite3_column_double(s, 3) > 0;
            double t = sqlite3_column_double(s, 5);
            json_object_set_new(m, "key", json_sprintf("%s.%s", sqlite3_column_text(s, 0),
                                                       sqlite3_column_text(s, 1)));
            json_object_set_new(m, "value",
                                json_real(sqlite3_column_double(s, is_flops ? 3 : 4) / t));
            json_object_set_new(m, "unit", json_string(is_flops ? "flop/s" : "B/s"));
            json_object_set_new(m, "source", json_string("measured"));
            json_object_set_new(m, "params", json_string((const char *)sqlite3_column_text(s, 6)));
            json_array_append_new(meas, m);
        }
        sqlite3_finalize(s);
    }
    json_object_set_new(out, "measured", meas);
    return out;
}
