/* test_steprow: the one step row and layer row (store/steprow.c). Every column of the tables
 * is a column of sim_steps, run_steps and run_layers (an insert names each); rows written
 * through the table read back equal, NAN as NULL and back; the CSV header and the JSON keys
 * are the column names, in order, and a NAN is empty in CSV and null in JSON. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "rundb.h"
#include "simdb.h"
#include "steprow.h"

static ws_step_row a_step(int i)
{
    ws_step_row r = {.idx = i,
                     .t_start = 0.5 * i,
                     .t_end = 0.5 * i + 0.25,
                     .batch = 4,
                     .tokens = 4,
                     .context = 1000 + i,
                     .r_star = i ? 0.3 : NAN,
                     .r_real = 0.25,
                     .busy_gpu = 1e-3,
                     .busy_h2d = 2e-3,
                     .busy_d2h = 0,
                     .busy_cpu = 3e-3,
                     .wall_s = i ? 0.01 : NAN,
                     .verify_err = NAN};
    snprintf(r.busy_other, sizeof r.busy_other, "{\"cpu_attn\": %d}", i);
    return r;
}

static void same_step(const ws_step_row *a, const ws_step_row *b)
{
    for (int i = 0; ws_step_cols[i].name; i++) {
        const ws_col *c = &ws_step_cols[i];
        const char *x = (const char *)a + c->off, *y = (const char *)b + c->off;
        if (c->type == WS_COL_REAL) {
            const double u = *(const double *)x, v = *(const double *)y;
            cr_assert(u == v || (isnan(u) && isnan(v)), "%s: %g vs %g", c->name, u, v);
        } else if (c->type == WS_COL_TEXT) {
            cr_assert_str_eq(x, y, "%s", c->name);
        } else {
            cr_assert_eq(memcmp(x, y, c->cap), 0, "%s", c->name);
        }
    }
}

Test(steprow, rows_round_trip_through_both_step_tables_and_the_layer_table)
{
    char dir[64], path[128];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ws.db", dir);
    ws_store *s = NULL;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    ws_rundb_run run = {0};
    snprintf(run.model, sizeof run.model, "m");
    snprintf(run.gpu_source, sizeof run.gpu_source, "modeled");
    snprintf(run.policy, sizeof run.policy, "writescope");
    run.verify_max_err = NAN;
    ws_step_row st[3] = {a_step(0), a_step(1), a_step(2)};
    ws_layer_row ly[2] = {{.step = 0, .layer = 0, .n_cpu = 10, .gpu_s = 1e-4, .r_star = NAN},
                          {.step = 0, .layer = 1, .m_xfer = 20, .gpu_measured = 1, .a_est = 2e-9}};
    cr_assert_eq(ws_rundb_store_run(s, &run, st, 3, ly, 2, &err), 0, "%s", err.msg);
    ws_step_row *back;
    size_t n;
    cr_assert_eq(ws_rundb_get_steps(s, run.id, &back, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 3);
    for (size_t i = 0; i < n; i++)
        same_step(&back[i], &st[i]);
    free(back);
    ws_layer_row *lb;
    cr_assert_eq(ws_rundb_get_layers(s, run.id, &lb, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 2);
    cr_assert_eq(lb[1].m_xfer, 20);
    cr_assert_eq(lb[1].gpu_measured, 1);
    cr_assert_eq(lb[0].gpu_measured, 0);
    cr_assert(isnan(lb[0].r_star));
    cr_assert_eq(lb[1].a_est, 2e-9);
    free(lb);
    /* the simulator's table takes the same row */
    ws_simdb_run sr = {0};
    snprintf(sr.model, sizeof sr.model, "m");
    snprintf(sr.detail, sizeof sr.detail, "layer");
    snprintf(sr.workload, sizeof sr.workload, "closed");
    cr_assert_eq(ws_simdb_store_run(s, &sr, NULL, 0, st, 3, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_simdb_get_steps(s, sr.id, &back, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 3);
    for (size_t i = 0; i < n; i++)
        same_step(&back[i], &st[i]);
    free(back);
    ws_store_close(s);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM sim_steps WHERE r_star IS NULL"), 1);
}

Test(steprow, csv_and_json_use_the_column_names)
{
    char dir[64], path[128];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/rows.csv", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    const ws_step_row r = a_step(0);
    ws_row_csv_header(f, "policy,", ws_step_cols);
    ws_row_csv(f, "static,", ws_step_cols, &r);
    fclose(f);
    char *text = th_slurp(path, NULL);
    char want[1024] = "policy";
    for (int i = 0; ws_step_cols[i].name; i++)
        strcat(strcat(want, ","), ws_step_cols[i].name);
    cr_assert_eq(strncmp(text, want, strlen(want)), 0, "%s", text);
    /* r_star NAN: an empty field; busy_other quoted (it holds no comma here, so bare) */
    cr_assert(strstr(text, "static,0,0,0.25,4,4,1000,,0.25,"), "%s", text);
    free(text);
    json_t *o = ws_row_json(ws_step_cols, &r);
    cr_assert_eq(json_object_size(o), ws_cols_count(ws_step_cols));
    cr_assert(json_is_null(json_object_get(o, "r_star")));
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(o, "busy_other"), "cpu_attn")),
                 0);
    cr_assert_eq(json_real_value(json_object_get(o, "t_end")), 0.25);
    json_decref(o);
    o = ws_row_json(ws_layer_cols, &(ws_layer_row){.gpu_measured = 1});
    cr_assert_str_eq(json_string_value(json_object_get(o, "gpu_source")), "measured");
    json_decref(o);
}
