/* test_rundb: runtime results in the database (store/rundb.c): a run with its steps and
 * (step, layer) records is written whole, NULL where a number is NAN; a run whose GPU
 * times are neither modeled nor measured is refused and nothing is written; a failure
 * inside the transaction (a duplicate key) leaves the database as it was. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "rundb.h"

static ws_store *open_tmp(char *path, size_t cap)
{
    char dir[64];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, cap, "%s/ws.db", dir);
    ws_store *s = NULL;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(path, &s, &err), 0, "%s", err.msg);
    return s;
}

static void a_run(ws_rundb_run *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->model, sizeof r->model, "qwen3-30b-a3b");
    snprintf(r->gpu, sizeof r->gpu, "modeled:a100-40gb-pcie");
    snprintf(r->gpu_source, sizeof r->gpu_source, "modeled");
    snprintf(r->gpu_profile, sizeof r->gpu_profile, "a100-40gb-pcie");
    snprintf(r->host_profile, sizeof r->host_profile, "xeon-gold-5318y");
    snprintf(r->policy, sizeof r->policy, "writescope");
    r->batch = 2, r->prompt_tokens = 100, r->output_tokens = 3, r->layers = 2;
    r->model_layers = 48;
    r->verify_max_err = NAN;
}

Test(rundb, a_run_is_written_whole)
{
    char path[128];
    ws_store *s = open_tmp(path, sizeof path);
    ws_rundb_run run;
    a_run(&run);
    ws_rundb_step st[3] = {{.idx = 0, .verify_err = NAN},
                           {.idx = 1, .verify_err = NAN},
                           {.idx = 2, .verify_err = NAN}};
    ws_rundb_layer ly[6];
    for (int i = 0; i < 6; i++)
        ly[i] = (ws_rundb_layer){.step = i / 2, .layer = i % 2, .cpu_attn_s = 1e-3};
    ws_err err = {0};
    cr_assert_eq(ws_rundb_store_run(s, &run, st, 3, ly, 6, &err), 0, "%s", err.msg);
    cr_assert(run.id > 0);
    ws_store_close(s);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM run_steps WHERE verify_err IS NULL"), 3);
    cr_assert_eq(
        th_count_file(path, "SELECT count(*) FROM run_layers WHERE gpu_source = 'modeled'"), 6);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM run_runs WHERE verify_max_err IS NULL"),
                 1);
}

Test(rundb, refused_or_failed_runs_write_nothing)
{
    char path[128];
    ws_store *s = open_tmp(path, sizeof path);
    ws_rundb_run run;
    a_run(&run);
    snprintf(run.gpu_source, sizeof run.gpu_source, "guessed");
    ws_err err = {0};
    cr_assert_eq(ws_rundb_store_run(s, &run, NULL, 0, NULL, 0, &err), WS_EINVAL);
    cr_assert(strstr(err.msg, "guessed"), "%s", err.msg);
    a_run(&run);
    ws_rundb_step st[2] = {{.idx = 0}, {.idx = 0}}; /* duplicate key: fails half-way */
    cr_assert_eq(ws_rundb_store_run(s, &run, st, 2, NULL, 0, &err), WS_EDB);
    ws_store_close(s);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM run_runs"), 0);
    cr_assert_eq(th_count_file(path, "SELECT count(*) FROM run_steps"), 0);
}
