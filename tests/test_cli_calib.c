/* test_cli_calib: `writescope calib` end to end: an interrupted run writes nothing, the
 * GPU-only scope without a device is a clear error, `calib show` on an empty database;
 * `plot calib` treats what it reads from the database and its --out path as data. */
#include <criterion/criterion.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* A database at `path` holding one calibration run with one transfer fit of key
 * (link, op) over three samples, stored by hand. */
static void plot_db(const char *path, const char *op)
{
    th_run r = th_writescope((const char *[]){"db", "init", "--db", path, NULL}, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    char *sql = sqlite3_mprintf(
        "INSERT INTO hosts(id, fingerprint, cpu_model, cpu_cores, mem_bytes, isa, first_seen) "
        "VALUES (1, 'f00d', 'Test CPU', 2, 1e9, 'avx2', 'then');"
        "INSERT INTO calib_runs(id, host_id, tool_version, mode, scope, started_at, finished_at) "
        "VALUES (1, 1, 'test', 'quick', 'link', 'then', 'then');"
        "INSERT INTO samples(run_id, device, op, flops, bytes, repeats, t_median, t_min, t_max) "
        "VALUES (1, 'link', %Q, 0, 1e6, 3, 1.01e-4, 1e-4, 1.02e-4),"
        "(1, 'link', %Q, 0, 1e7, 3, 1.001e-3, 1e-3, 1.002e-3),"
        "(1, 'link', %Q, 0, 1e8, 3, 1.0001e-2, 1e-2, 1.0002e-2);"
        "INSERT INTO fits(run_id, device, op, form, c0, bandwidth, r2, heldout_mape_pct, "
        "n_samples, good) VALUES (1, 'link', %Q, 'transfer', 1e-6, 1e10, 0.999, 1.0, 3, 1);",
        op, op, op, op);
    th_exec_sql(path, sql);
    sqlite3_free(sql);
}

static void need_gnuplot(void)
{
    if (system("command -v gnuplot >/dev/null 2>&1") != 0)
        cr_skip_test("gnuplot is not installed (make deps installs it)");
}

Test(cli_calib, plot_titles_from_the_database_are_never_code)
{
    need_gnuplot();
    char dir[64], db[128], out[160], pwned[160], bin[4096];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    snprintf(out, sizeof out, "%s/calib.svg", dir);
    snprintf(pwned, sizeof pwned, "%s/PWNED", dir);
    plot_db(db, "h2d'; system(\"touch PWNED\"); '");
    /* gnuplot's system() would run in its working folder: make that the test's folder. */
    const char *b = getenv("WRITESCOPE_BIN");
    cr_assert_not_null(realpath(b && *b ? b : "bin/writescope", bin));
    setenv("WRITESCOPE_BIN", bin, 1);
    cr_assert_eq(chdir(dir), 0);
    th_run r = th_writescope((const char *[]){"plot", "calib", "--db", db, "--out", out, NULL}, NULL);
    cr_assert_eq(access(pwned, F_OK), -1, "a fit name from the database ran a shell command");
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    struct stat st;
    cr_assert(stat(out, &st) == 0 && st.st_size > 0, "no figure at %s", out);
}

Test(cli_calib, plot_out_path_with_an_apostrophe)
{
    need_gnuplot();
    char dir[64], db[128], out[160];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    snprintf(out, sizeof out, "%s/it's calib.png", dir);
    plot_db(db, "h2d");
    th_run r = th_writescope((const char *[]){"plot", "calib", "--db", db, "--out", out, NULL}, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, "(1 panels, calibration run 1"), NULL, "%s", r.out);
    th_run_free(&r);
    struct stat st;
    cr_assert(stat(out, &st) == 0 && st.st_size > 0, "no figure at %s", out);
}

/* SIGTERM stops a calibration as SIGINT does, with the status a shell gives a command that a
 * signal ended: 128 + 15 (sim and plan end by the signal itself). */
Test(cli_calib, sigterm_exits_143, .timeout = 120)
{
    char dir[64], db[128], out[128], err[128];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    int pid = th_spawn((const char *[]){"calib", "--quick", "--db", db, NULL}, NULL, out, err);
    for (int i = 0; i < 100; i++) { /* into the measurements: its handler is in place */
        char *e = th_slurp(err, NULL);
        int started = e && strstr(e, "calib:") != NULL;
        free(e);
        if (started)
            break;
        usleep(100000);
    }
    kill(pid, SIGTERM);
    int status = th_wait(pid);
    char *e = th_slurp(err, NULL);
    cr_assert_eq(status, 143, "status %d, stderr: %s", status, e);
    cr_assert_neq(strstr(e, "interrupted; nothing was written"), NULL, "%s", e);
    free(e);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM calib_runs"), 0);
}

/* `calib show` prints the database's text escaped: a host's CPU model or a run's note with an
 * ESC sequence or a newline cannot drive the terminal or fake a line. */
Test(cli_calib, show_escapes_stored_text)
{
    char dir[64], db[128];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    th_run r = th_writescope((const char *[]){"db", "init", "--db", db, NULL}, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    th_exec_sql(
        db, "INSERT INTO hosts(id, fingerprint, cpu_model, cpu_cores, mem_bytes, isa, "
            "first_seen) VALUES (1, 'f00d', 'CPU' || char(27) || '[31m', 2, 1e9, 'avx2', 'then');"
            "INSERT INTO calib_runs(id, host_id, tool_version, mode, scope, started_at, "
            "finished_at, note) VALUES (1, 1, 'test', 'quick', 'link', 'then', 'then', "
            "'a' || char(10) || 'run 2  fake' || char(27) || '[2J');");
    r = th_writescope((const char *[]){"calib", "show", "--db", db, NULL}, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_null(strchr(r.out, 27), "an ESC reached the terminal: %s", r.out);
    cr_assert_null(strstr(r.out, "\nrun 2"), "a stored newline started a line: %s", r.out);
    cr_assert_neq(strstr(r.out, "CPU\\x1b[31m"), NULL, "%s", r.out);
    cr_assert_neq(strstr(r.out, "a\\nrun 2  fake\\x1b[2J"), NULL, "%s", r.out);
    th_run_free(&r);
}
