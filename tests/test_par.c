/* test_par: the parallel map (platform/ws_par.c) and `sim grid` spread over MPI ranks.
 * In this process (not launched by mpirun): the single backend evaluates every point in
 * order, reports a point's error as it is, and refuses bad sizes. Through the par_check
 * driver (tests/par/par_check.c), one process and `mpirun -n 2|3`: records come back in
 * point order on rank 0 or every rank, a failing point reaches every rank (the lowest index
 * wins, as one process would have met it), and a failing step (ws_par_agree) too. The CLI:
 * `sim grid --db` stores one sim_grids row and every point's run and prints what a plain run
 * prints; under `mpirun -n 2` the --json output and the stored rows equal the one-process
 * run's (apart from ids, timestamps and wall time); a bad database, or one rank 0 cannot
 * write at the end (held by another writer), stops every rank with one message. `plan` under
 * `mpirun -n 2` prints the one-process JSON (wall times aside). The MPI tests skip with one
 * line when mpirun is absent. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "simdb.h"
#include "store.h"
#include "ws_par.h"

/* mpirun as root, on a machine with fewer cores than ranks, with no single-copy shared
 * memory (containers often forbid the ptrace it needs); Open MPI's plugins stay loaded to
 * the end, so a sanitizer's report can name them. */
static const char *const mpi_env[] = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                                      "OMPI_MCA_btl_vader_single_copy_mechanism=none",
                                      "OMPI_MCA_mca_base_component_disable_dlclose=1", NULL};

static int have_mpirun(void)
{
    const char *argv[] = {"sh", "-c", "command -v mpirun >/dev/null 2>&1", NULL};
    th_run r = th_command(argv, NULL);
    int ok = r.status == 0;
    th_run_free(&r);
    return ok;
}

#define SKIP_WITHOUT_MPIRUN()                                                                  \
    do {                                                                                       \
        if (!have_mpirun())                                                                    \
            cr_skip_test("MPI tests: mpirun not found (make deps installs Open MPI)");          \
    } while (0)

static const char *par_check(void)
{
    const char *p = getenv("WRITESCOPE_PAR_CHECK");
    return p && *p ? p : "build/tests/ws_par_check";
}

static const char *ws_bin(void)
{
    const char *p = getenv("WRITESCOPE_BIN");
    return p && *p ? p : "bin/writescope";
}

/* Runs `[mpirun -n ranks --oversubscribe] prog args...` (ranks 0: no mpirun). */
static th_run launch(int ranks, const char *prog, const char *const *args)
{
    const char *argv[40];
    char n[16];
    int k = 0;
    if (ranks) {
        snprintf(n, sizeof n, "%d", ranks);
        argv[k++] = "mpirun";
        argv[k++] = "-n";
        argv[k++] = n;
        argv[k++] = "--oversubscribe";
    }
    argv[k++] = prog;
    for (; *args && k < 39; args++)
        argv[k++] = *args;
    argv[k] = NULL;
    /* Under `make sanitize` (LSAN_OPTIONS names tests/lsan_mpi.supp): Open MPI's libraries
     * have no frame pointers, and only the slow unwinder reaches their frames, which the
     * suppressions match. */
    const char *lsan = getenv("LSAN_OPTIONS");
    char lsan_kv[1024];
    const char *env[8];
    int e = 0;
    for (const char *const *x = mpi_env; *x; x++)
        env[e++] = *x;
    if (lsan && *lsan) {
        snprintf(lsan_kv, sizeof lsan_kv, "LSAN_OPTIONS=%s:fast_unwind_on_malloc=0", lsan);
        env[e++] = lsan_kv;
    }
    env[e] = NULL;
    return th_command(argv, env);
}

/* ---- in this process: the single backend ---- */

static int square(void *ctx, size_t i, void *rec, ws_err *err)
{
    const size_t *fail = ctx;
    if (fail && i == *fail)
        return ws_err_set(err, WS_EIO, "point %zu: disk on fire", i);
    *(unsigned long long *)rec = (unsigned long long)i * i;
    return 0;
}

Test(par, single_backend_maps_in_order)
{
    ws_par *p;
    ws_err err = {0};
    cr_assert_eq(ws_par_init(&p, &err), 0, "%s", err.msg);
    cr_assert_str_eq(ws_par_backend(p), "single");
    cr_assert_eq(ws_par_rank(p), 0);
    cr_assert_eq(ws_par_size(p), 1);
    cr_assert_eq(ws_par_share(p, 17), 17);
    unsigned long long v[17];
    cr_assert_eq(ws_par_map(p, 17, sizeof v[0], square, NULL, v, WS_PAR_TO_ROOT, &err), 0, "%s",
                 err.msg);
    for (size_t i = 0; i < 17; i++)
        cr_assert_eq(v[i], i * i);
    size_t fail = 5;
    cr_assert_eq(ws_par_map(p, 17, sizeof v[0], square, &fail, v, WS_PAR_TO_ALL, &err), WS_EIO);
    cr_assert_str_eq(err.msg, "point 5: disk on fire"); /* no rank prefix in one process */
    cr_assert_eq(ws_par_map(p, 0, sizeof v[0], square, NULL, NULL, WS_PAR_TO_ROOT, &err), 0);
    cr_assert_eq(ws_par_map(p, 3, 0, square, NULL, v, WS_PAR_TO_ROOT, &err), WS_EINVAL);
    cr_assert_eq(ws_par_map(p, 3, sizeof v[0], square, NULL, NULL, WS_PAR_TO_ROOT, &err), WS_EINVAL);
    cr_assert_eq(ws_par_agree(p, 0, &err), 0);
    ws_err_set(&err, WS_EDB, "locked");
    cr_assert_eq(ws_par_agree(p, WS_EDB, &err), WS_EDB);
    cr_assert_str_eq(err.msg, "locked");
    ws_par *again;
    cr_assert_eq(ws_par_init(&again, &err), WS_EINVAL); /* once per process */
    ws_par_finalize(p);
}

/* ---- the driver: one process, then mpirun ---- */

static void expect_check(int ranks, const char *const *args, const char *want)
{
    th_run r = launch(ranks, par_check(), args);
    cr_assert_eq(r.status, 0, "%d ranks, %s %s: exit %d\nstdout: %s\nstderr: %s", ranks, args[0],
                 args[1], r.status, r.out, r.err);
    cr_assert_neq(strstr(r.out, want), NULL, "%d ranks: %s", ranks, r.out);
    cr_assert_eq(th_lines(r.out), 1, "only rank 0 prints: %s", r.out);
    th_run_free(&r);
}

Test(par, driver_one_process)
{
    expect_check(0, (const char *[]){"map", "41", "root", NULL}, "size=1 backend=single share0=41 ok");
    expect_check(0, (const char *[]){"fail", "20", "6", NULL}, "err=point 6 refused ok");
    expect_check(0, (const char *[]){"agree", "0", NULL}, "rc=1 err=rank 0 said no ok");
}

Test(par, driver_under_mpirun)
{
    SKIP_WITHOUT_MPIRUN();
    th_run probe = launch(2, par_check(), (const char *[]){"map", "1", "root", NULL});
    if (strstr(probe.err, "built without MPI")) {
        th_run_free(&probe);
        cr_skip_test("MPI tests: this build has no MPI (mpicc was not found when it was made)");
    }
    th_run_free(&probe);
    /* 41 points: 21 on rank 0 of 2, 14 on rank 0 of 3 */
    expect_check(2, (const char *[]){"map", "41", "root", NULL}, "size=2 backend=mpi share0=21 ok");
    expect_check(2, (const char *[]){"map", "41", "all", NULL}, "size=2 backend=mpi share0=21 ok");
    expect_check(3, (const char *[]){"map", "41", "all", NULL}, "size=3 backend=mpi share0=14 ok");
    expect_check(3, (const char *[]){"map", "2", "root", NULL}, "size=3 backend=mpi share0=1 ok");
    expect_check(3, (const char *[]){"map", "0", "all", NULL}, "size=3 backend=mpi share0=0 ok");
    /* points 7 (rank 1 of 3) and 8 (rank 2) fail: every rank gets point 7's error */
    expect_check(3, (const char *[]){"fail", "20", "7", NULL}, "err=rank 1: point 7 refused ok");
    expect_check(2, (const char *[]){"fail", "20", "7", NULL}, "err=rank 1: point 7 refused ok");
    expect_check(3, (const char *[]){"agree", "2", NULL}, "err=rank 2: rank 2 said no ok");
    expect_check(2, (const char *[]){"agree", "5", NULL}, "rc=0"); /* no such rank: all agree */
}

/* ---- sim grid ---- */

static void tmp_db(char *path, size_t cap, const char *name)
{
    char dir[64];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, cap, "%s/%s", dir, name);
}

/* The same number, NaN included. */
static int same_num(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

/* The rows of the newest grid of a database. */
static ws_simdb_run *grid_rows(const char *path, ws_simdb_grid *g, size_t *n)
{
    ws_store *s;
    ws_err err = {0};
    cr_assert_eq(ws_store_open_readonly(path, &s, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_simdb_get_grid(s, 0, g, &err), 0, "%s", err.msg);
    ws_simdb_run *v;
    cr_assert_eq(ws_simdb_get_grid_runs(s, g->id, &v, n, &err), 0, "%s", err.msg);
    ws_store_close(s);
    return v;
}

/* Two grids' rows are the same simulations: every column but id, started_at, wall_s and
 * grid_id. */
static void same_rows(const ws_simdb_run *a, const ws_simdb_run *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const ws_simdb_run *x = &a[i], *y = &b[i];
        cr_assert_str_eq(x->model, y->model, "row %zu", i);
        cr_assert_str_eq(x->gpu_profile, y->gpu_profile);
        cr_assert_str_eq(x->host_profile, y->host_profile);
        cr_assert_str_eq(x->policy, y->policy, "row %zu", i);
        cr_assert_str_eq(x->workload, y->workload);
        cr_assert_str_eq(x->detail, y->detail);
        cr_assert_str_eq(x->params, y->params, "row %zu", i);
        cr_assert_str_eq(x->tool_version, y->tool_version);
        cr_assert_str_eq(x->label, y->label);
        cr_assert(x->batch == y->batch && x->prompt_tokens == y->prompt_tokens &&
                      x->output_tokens == y->output_tokens && x->seed == y->seed,
                  "row %zu", i);
        cr_assert(x->events == y->events && x->requests == y->requests &&
                      x->completed == y->completed && x->oom == y->oom &&
                      x->tokens_out == y->tokens_out && x->slo_met == y->slo_met,
                  "row %zu", i);
        const double xa[] = {x->sim_s,    x->tokens_per_s, x->ttft_p50, x->ttft_p90,
                             x->ttft_p99, x->tpot_p50,     x->tpot_p90, x->tpot_p99,
                             x->slo_ttft, x->slo_tpot,     x->goodput};
        const double ya[] = {y->sim_s,    y->tokens_per_s, y->ttft_p50, y->ttft_p90,
                             y->ttft_p99, y->tpot_p50,     y->tpot_p90, y->tpot_p99,
                             y->slo_ttft, y->slo_tpot,     y->goodput};
        for (size_t k = 0; k < sizeof xa / sizeof xa[0]; k++)
            cr_assert(same_num(xa[k], ya[k]), "row %zu, number %zu: %.17g vs %.17g", i, k, xa[k],
                      ya[k]);
    }
}

/* Everything after the first line (which names where the profiles came from) and before
 * the last `from` lines. */
static char *middle(const char *text, int drop_last)
{
    const char *a = strchr(text, '\n');
    cr_assert_not_null(a);
    char *m = strdup(a + 1);
    for (int i = 0; i < drop_last; i++) {
        size_t len = strlen(m);
        if (len && m[len - 1] == '\n')
            m[--len] = '\0';
        char *nl = strrchr(m, '\n');
        if (nl)
            nl[1] = '\0';
    }
    return m;
}

Test(par, grid_db_stores_every_point_and_prints_the_same, .timeout = 120)
{
    char db[256], none[256];
    tmp_db(db, sizeof db, "grid.db");
    tmp_db(none, sizeof none, "absent.db");
    char envdb[300];
    snprintf(envdb, sizeof envdb, "WRITESCOPE_DB=%s", none);
    const char *const plain_env[] = {envdb, NULL};
    th_run plain = th_writescope(
        (const char *[]){"sim", "grid", "--model", "deepseek-v2-lite", "--gpu", "a100-40gb-pcie",
                         NULL},
        plain_env);
    cr_assert_eq(plain.status, 0, "%s", plain.err);
    th_run stored = th_writescope((const char *[]){"sim", "grid", "--model", "deepseek-v2-lite",
                                                   "--gpu", "a100-40gb-pcie", "--db", db, NULL},
                                  NULL);
    cr_assert_eq(stored.status, 0, "%s", stored.err);
    char want[400];
    snprintf(want, sizeof want, "stored: grid 1, runs 1-63 in %s (modeled)\n", db);
    cr_assert_neq(strstr(stored.out, want), NULL, "%s", stored.out);
    char *a = middle(plain.out, 0), *b = middle(stored.out, 1);
    cr_assert_str_eq(a, b);
    free(a);
    free(b);
    th_run_free(&plain);
    th_run_free(&stored);
    ws_simdb_grid g;
    size_t n;
    ws_simdb_run *v = grid_rows(db, &g, &n);
    cr_assert_eq(n, 63); /* 3 batches x 3 prompts x 7 policies */
    cr_assert_eq(g.ranks, 1);
    cr_assert_neq(strstr(g.params, "\"models\":[\"deepseek-v2-lite\"]"), NULL, "%s", g.params);
    cr_assert_neq(strstr(g.params, "\"gpus\":[\"a100-40gb-pcie\"]"), NULL, "%s", g.params);
    cr_assert_str_eq(v[0].policy, "writescope");
    cr_assert_eq(v[0].batch, 4);
    cr_assert_eq(v[0].prompt_tokens, 2048);
    cr_assert_eq(v[62].batch, 32);
    cr_assert_eq(v[62].prompt_tokens, 32768);
    cr_assert_str_eq(v[62].policy, "migrate");
    cr_assert_eq(v[0].requests, 4);
    cr_assert_gt(v[0].tokens_per_s, 0);
    free(v);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM sim_requests"), 0);
}

Test(par, grid_under_mpirun_equals_one_process, .timeout = 180)
{
    SKIP_WITHOUT_MPIRUN();
    char db1[256], db2[256];
    tmp_db(db1, sizeof db1, "one.db");
    tmp_db(db2, sizeof db2, "two.db");
    const char *args1[] = {"sim", "grid", "--model", "qwen3-30b-a3b", "--gpu", "v100-32gb-pcie",
                           "--db", db1, "--json", NULL};
    const char *args2[] = {"sim", "grid", "--model", "qwen3-30b-a3b", "--gpu", "v100-32gb-pcie",
                           "--db", db2, "--json", NULL};
    th_run one = launch(0, ws_bin(), args1);
    cr_assert_eq(one.status, 0, "%s", one.err);
    th_run two = launch(2, ws_bin(), args2);
    if (strstr(two.err, "built without MPI")) {
        th_run_free(&one);
        th_run_free(&two);
        cr_skip_test("MPI tests: this build has no MPI (mpicc was not found when it was made)");
    }
    cr_assert_eq(two.status, 0, "exit %d\nstderr: %s", two.status, two.err);
    json_error_t je;
    json_t *j1 = json_loads(one.out, 0, &je), *j2 = json_loads(two.out, 0, &je);
    cr_assert_not_null(j1, "%s", one.out);
    cr_assert_not_null(j2, "only rank 0 prints one JSON document: %s", two.out);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j2, "written"), "database")),
                     db2);
    json_object_del(j1, "written"); /* names the database */
    json_object_del(j2, "written");
    cr_assert_eq(json_array_size(json_object_get(j1, "points")), 63);
    cr_assert(json_equal(j1, j2), "the two runs' JSON differ");
    json_decref(j1);
    json_decref(j2);
    th_run_free(&one);
    th_run_free(&two);
    ws_simdb_grid g1, g2;
    size_t n1, n2;
    ws_simdb_run *v1 = grid_rows(db1, &g1, &n1), *v2 = grid_rows(db2, &g2, &n2);
    cr_assert_eq(n1, 63);
    cr_assert_eq(n2, n1);
    cr_assert_eq(g1.ranks, 1);
    cr_assert_eq(g2.ranks, 2);
    cr_assert_str_eq(g1.params, g2.params);
    same_rows(v1, v2, n1);
    free(v1);
    free(v2);
}

Test(par, grid_errors_stop_every_rank_with_one_message, .timeout = 120)
{
    char dir[64], junk[256];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "junk.db", "this is not a database\n", junk, sizeof junk);
    const char *args[] = {"sim", "grid", "--model", "mixtral-8x7b", "--db", junk, NULL};
    th_run one = launch(0, ws_bin(), args);
    cr_assert_eq(one.status, 1);
    cr_assert_neq(strstr(one.err, "not a SQLite database"), NULL, "%s", one.err);
    cr_assert_eq(th_lines(one.err), 1, "%s", one.err);
    th_run_free(&one);
    SKIP_WITHOUT_MPIRUN();
    th_run two = launch(2, ws_bin(), args);
    cr_assert_neq(two.status, 0);
    if (strstr(two.err, "built without MPI")) {
        th_run_free(&two);
        cr_skip_test("MPI tests: this build has no MPI (mpicc was not found when it was made)");
    }
    const char *hit = strstr(two.err, "not a SQLite database");
    cr_assert_not_null(hit, "%s", two.err);
    cr_assert_null(strstr(hit + 1, "not a SQLite database"), "printed by more than rank 0: %s",
                   two.err);
    cr_assert_str_eq(two.out, "");
    th_run_free(&two);
}

/* Rank 0 alone writes, at the end: when another writer holds the database then, every rank
 * exits non-zero, the message is printed once, and the grid left no row. */
Test(par, grid_store_failure_on_rank_0_stops_every_rank, .timeout = 120)
{
    SKIP_WITHOUT_MPIRUN();
    char db[256];
    tmp_db(db, sizeof db, "held.db");
    th_run init = th_writescope((const char *[]){"db", "init", "--db", db, NULL}, NULL);
    cr_assert_eq(init.status, 0, "%s", init.err);
    th_run_free(&init);
    sqlite3 *h;
    cr_assert_eq(sqlite3_open(db, &h), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    const char *argv[] = {"mpirun", "-n", "2", "--oversubscribe", ws_bin(), "sim", "grid",
                          "--model", "deepseek-v2-lite", "--gpu", "v100-32gb-pcie", "--db", db,
                          NULL};
    const char *env[8];
    int e = 0;
    for (const char *const *x = mpi_env; *x; x++)
        env[e++] = *x;
    env[e++] = "WRITESCOPE_DB_TIMEOUT_MS=50";
    env[e] = NULL;
    th_run r = th_command(argv, env);
    sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(h);
    if (strstr(r.err, "built without MPI")) {
        th_run_free(&r);
        cr_skip_test("MPI tests: this build has no MPI (mpicc was not found when it was made)");
    }
    cr_assert_neq(r.status, 0, "stdout: %s", r.out);
    cr_assert_str_eq(r.out, "");
    const char *hit = strstr(r.err, "writescope: ");
    cr_assert_not_null(hit, "%s", r.err);
    cr_assert_null(strstr(hit + 1, "writescope: "), "printed by more than rank 0: %s", r.err);
    th_run_free(&r);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM sim_grids"), 0);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM sim_runs"), 0);
}

/* Drops every "wall*" key (wall-clock seconds differ between runs) from a JSON tree. */
static void drop_wall(json_t *j)
{
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        void *tmp;
        json_object_foreach_safe(j, tmp, k, v)
        {
            if (!strncmp(k, "wall", 4))
                json_object_del(j, k);
            else
                drop_wall(v);
        }
    } else if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++)
            drop_wall(json_array_get(j, i));
    }
}

Test(par, plan_under_mpirun_equals_one_process, .timeout = 180)
{
    SKIP_WITHOUT_MPIRUN();
    const char *args[] = {"plan", "--model", "qwen3-30b-a3b", "--gpu",
                          "v100-32gb-pcie,a100-40gb-pcie", "--host", "xeon-gold-5318y",
                          "--arrivals", "poisson", "--requests", "24", "--prompt-dist",
                          "fixed:8192", "--output-dist", "fixed:64", "--slo-tpot", "300ms",
                          "--policy", "writescope,stream", "--json", NULL};
    th_run one = launch(0, ws_bin(), args);
    cr_assert_eq(one.status, 0, "%s", one.err);
    th_run two = launch(2, ws_bin(), args);
    if (strstr(two.err, "built without MPI")) {
        th_run_free(&one);
        th_run_free(&two);
        cr_skip_test("MPI tests: this build has no MPI (mpicc was not found when it was made)");
    }
    cr_assert_eq(two.status, 0, "exit %d\nstderr: %s", two.status, two.err);
    json_error_t je;
    json_t *j1 = json_loads(one.out, 0, &je), *j2 = json_loads(two.out, 0, &je);
    cr_assert_not_null(j1, "%s", one.out);
    cr_assert_not_null(j2, "only rank 0 prints one JSON document: %s", two.out);
    cr_assert_gt(json_array_size(json_object_get(j1, "results")), 0);
    drop_wall(j1);
    drop_wall(j2);
    cr_assert(json_equal(j1, j2), "the two plans' JSON differ");
    json_decref(j1);
    json_decref(j2);
    th_run_free(&one);
    th_run_free(&two);
}
