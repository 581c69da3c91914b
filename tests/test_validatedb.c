/* test_validatedb: validations in the database (store/validatedb.c): a validation and its
 * rows read back as written (NAN as NULL and back, ids of 0 as NULL); bad labels are refused
 * before anything is written; the newest is read with id 0; a missing one is WS_ENOTFOUND. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "store.h"
#include "validatedb.h"

static ws_store *open_db(char *path, size_t cap)
{
    char dir[64];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, cap, "%s/v.db", dir);
    ws_store *s = NULL;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    return s;
}

static void fill(ws_validatedb_run *r, ws_validatedb_stat *st, ws_validatedb_point *pt,
                 ws_validatedb_term *tm)
{
    memset(r, 0, sizeof *r);
    snprintf(r->model, sizeof r->model, "tiny");
    snprintf(r->gpu, sizeof r->gpu, "modeled:a100-40gb-pcie");
    snprintf(r->gpu_source, sizeof r->gpu_source, "modeled");
    snprintf(r->host_profile, sizeof r->host_profile, "xeon-gold-5318y");
    snprintf(r->policy, sizeof r->policy, "writescope");
    r->batch = 2, r->prompt_tokens = 300, r->output_tokens = 4, r->layers = 1, r->repeats = 1;
    r->warmup = 1;
    snprintf(r->verdict, sizeof r->verdict, "within the goal");
    snprintf(r->params, sizeof r->params, "{\"run_ids\": []}");
    memset(st, 0, sizeof *st);
    snprintf(st->quantity, sizeof st->quantity, "cpu_attn");
    snprintf(st->scope, sizeof st->scope, "layer");
    snprintf(st->measured_source, sizeof st->measured_source, "measured");
    snprintf(st->unit, sizeof st->unit, "s");
    st->n = 3, st->mean_ape = 1.5, st->p95_ape = 4.0;
    st->noise_mean_ape = NAN, st->noise_p95_ape = NAN;
    st->mean_measured = 2e-3, st->mean_predicted = 1.9e-3;
    memset(pt, 0, sizeof *pt);
    snprintf(pt->quantity, sizeof pt->quantity, "cpu_attn");
    pt->step = 2, pt->layer = 0, pt->measured = 2e-3, pt->predicted = NAN;
    memset(tm, 0, sizeof *tm);
    snprintf(tm->term, sizeof tm->term, "engine");
    snprintf(tm->unit, sizeof tm->unit, "s/step");
    tm->measured = 1e-4, tm->predicted = 0, tm->error_pct = NAN, tm->step_share_pct = 0.5;
    snprintf(tm->note, sizeof tm->note, "not in the model");
}

Test(validatedb, round_trip)
{
    char path[128];
    ws_store *s = open_db(path, sizeof path);
    ws_validatedb_run r, b;
    ws_validatedb_stat st, *bs;
    ws_validatedb_point pt, *bp;
    ws_validatedb_term tm, *bt;
    size_t ns, np, nt;
    ws_err err = {0};
    fill(&r, &st, &pt, &tm);
    cr_assert_eq(ws_validatedb_store(s, &r, &st, 1, &pt, 1, &tm, 1, &err), 0, "%s", err.msg);
    cr_assert(r.id > 0 && r.started_at[0] && r.tool_version[0]);
    cr_assert_eq(ws_validatedb_get(s, 0, &b, &bs, &ns, &bp, &np, &bt, &nt, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(b.id, r.id);
    cr_assert_str_eq(b.gpu, r.gpu);
    cr_assert_eq(b.warmup, 1);
    cr_assert_eq(b.run_id, 0, "an id of 0 is NULL and reads back as 0");
    cr_assert_str_eq(b.verdict, r.verdict);
    cr_assert_eq(ns, 1);
    cr_assert_eq(np, 1);
    cr_assert_eq(nt, 1);
    cr_assert_float_eq(bs[0].mean_ape, 1.5, 1e-12);
    cr_assert(isnan(bs[0].noise_mean_ape));
    cr_assert(isnan(bp[0].predicted) && bp[0].step == 2 && bp[0].layer == 0);
    cr_assert_str_eq(bt[0].term, "engine");
    cr_assert(isnan(bt[0].error_pct));
    free(bs), free(bp), free(bt);
    cr_assert_eq(ws_validatedb_get(s, r.id + 7, &b, NULL, NULL, NULL, NULL, NULL, NULL, &err),
                 WS_ENOTFOUND);
    ws_store_close(s);
}

Test(validatedb, bad_labels_write_nothing)
{
    char path[128];
    ws_store *s = open_db(path, sizeof path);
    ws_validatedb_run r;
    ws_validatedb_stat st;
    ws_validatedb_point pt;
    ws_validatedb_term tm;
    ws_err err = {0};
    fill(&r, &st, &pt, &tm);
    snprintf(r.gpu_source, sizeof r.gpu_source, "guessed");
    cr_assert_eq(ws_validatedb_store(s, &r, &st, 1, &pt, 1, &tm, 1, &err), WS_EINVAL);
    fill(&r, &st, &pt, &tm);
    snprintf(st.scope, sizeof st.scope, "run");
    cr_assert_eq(ws_validatedb_store(s, &r, &st, 1, &pt, 1, &tm, 1, &err), WS_EINVAL);
    fill(&r, &st, &pt, &tm);
    snprintf(r.params, sizeof r.params, "[1]");
    cr_assert_eq(ws_validatedb_store(s, &r, &st, 1, &pt, 1, &tm, 1, &err), WS_EINVAL);
    /* a duplicate point violates the primary key: the whole validation is rolled back */
    fill(&r, &st, &pt, &tm);
    ws_validatedb_point two[2] = {pt, pt};
    cr_assert_eq(ws_validatedb_store(s, &r, &st, 1, two, 2, &tm, 1, &err), WS_EDB);
    ws_store_close(s);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM validate_runs"), 0);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM validate_stats"), 0);
}
