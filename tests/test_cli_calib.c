/* test_cli_calib: `writescope calib` end to end: an interrupted run writes nothing, the
 * GPU-only scope without a device is a clear error, `calib show` on an empty database. */
#include <criterion/criterion.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

Test(cli_calib, interrupted_run_writes_nothing, .timeout = 120)
{
    char dir[64], db[128], out[128], err[128];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    int pid = th_spawn((const char *[]){"calib", "--quick", "--db", db, NULL}, NULL, out, err);
    /* Let it get into the measurements (the database is opened first). */
    for (int i = 0; i < 100; i++) {
        char *e = th_slurp(err, NULL);
        int started = e && strstr(e, "calib:") != NULL;
        free(e);
        if (started)
            break;
        usleep(100000);
    }
    usleep(500000);
    kill(pid, SIGINT);
    int status = th_wait(pid);
    char *e = th_slurp(err, NULL);
    cr_assert_eq(status, 130, "status %d, stderr: %s", status, e);
    cr_assert_neq(strstr(e, "interrupted; nothing was written"), NULL, "%s", e);
    free(e);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM calib_runs"), 0);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM samples"), 0);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM hosts"), 0);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM profiles WHERE name LIKE 'host:%'"), 0);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
}

Test(cli_calib, show_empty_and_gpu_scope)
{
    char dir[64], env[160];
    th_tmpdir(dir, sizeof dir);
    snprintf(env, sizeof env, "WRITESCOPE_DB=%s/ws.db", dir);
    const char *envs[] = {env, NULL};
    th_run r = th_writescope((const char *[]){"calib", "show", NULL}, envs);
    cr_assert_eq(r.status, 1);
    cr_assert_neq(strstr(r.err, "no calibration run yet"), NULL, "%s", r.err);
    cr_assert_eq(th_lines(r.err), 1);
    th_run_free(&r);
    r = th_writescope((const char *[]){"calib", "--only", "tpu", NULL}, envs);
    cr_assert_eq(r.status, 2);
    th_run_free(&r);
    r = th_writescope((const char *[]){"device", "--json", NULL}, envs);
    int has_gpu = strstr(r.out, "\"compute_capability\"") != NULL;
    th_run_free(&r);
    if (has_gpu)
        cr_skip_test("a CUDA device is present: the no-device error path does not apply");
    r = th_writescope((const char *[]){"calib", "--only", "gpu", NULL}, envs);
    cr_assert_eq(r.status, 1);
    cr_assert_neq(strstr(r.err, "no CUDA device"), NULL, "%s", r.err);
    cr_assert_eq(th_lines(r.err), 1, "%s", r.err);
    th_run_free(&r);
}
