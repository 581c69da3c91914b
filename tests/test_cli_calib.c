/* test_cli_calib: `writescope calib` end to end: an interrupted run writes nothing, the
 * GPU-only scope without a device is a clear error, `calib show` on an empty database;
 * `plot calib` treats what it reads from the database and its --out path as data; `calib
 * import` and `calib check` of operator profiles: one-line errors that leave no new database,
 * a fit not used printed with its reason, no row named for a group without one, the held-out
 * rows of a file the same whether it is read alone or with its folder, and no hang on a
 * FIFO among the files (fidelity --ops too). */
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
    if (!th_have_gnuplot())
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

/* A small attention profile in Vidur's format: decode rows of c0 10 us + KV bytes / 1.6 TB/s. */
static void vidur_attention(const char *dir, char *path, size_t cap)
{
    char text[8192] = "time_stats.attn_decode.median,n_embd,n_q_head,n_kv_head,"
                      "num_tensor_parallel_workers,batch_size,kv_cache_size,prefill_chunk_size,"
                      "is_prefill,profile_method\n";
    for (int b = 1; b <= 32; b *= 2)
        for (int kv = 128; kv <= 4096; kv *= 2) {
            char row[160];
            snprintf(row, sizeof row, "%.12g,8192,64,8,2,%d,%d,0,False,ProfileMethod.KINETO\n",
                     1e3 * (10e-6 + b * (double)kv * 2048 / 1.6e12), b, kv);
            strcat(text, row);
        }
    th_write(dir, "attention.csv", text, path, cap);
}

Test(cli_calib, import_and_check)
{
    char dir[64], db[128], csv[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    vidur_attention(dir, csv, sizeof csv);
    th_run r = th_writescope((const char *[]){"calib", "import", "--help", NULL}, NULL);
    cr_assert_eq(r.status, 0);
    cr_assert_neq(strstr(r.out, "Vidur's CSV format"), NULL, "%s", r.out);
    cr_assert_neq(strstr(r.out, "--gpu NAME"), NULL, "%s", r.out);
    th_run_free(&r);
    r = th_writescope((const char *[]){"calib", "check", "--help", NULL}, NULL);
    cr_assert_eq(r.status, 0);
    cr_assert_neq(strstr(r.out, "--heldout"), NULL, "%s", r.out);
    th_run_free(&r);
    json_t *j = th_writescope_json(
        (const char *[]){"calib", "import", csv, "--db", db, "--licence", "CC0", "--json", NULL},
        NULL);
    cr_assert_str_eq(json_string_value(json_object_get(j, "profile")), "imported:a100-80gb-sxm");
    json_t *f = json_array_get(json_object_get(j, "fits"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(f, "key")), "gpu.attn.gqa.fp16");
    cr_assert_float_eq(json_number_value(json_object_get(f, "c0")), 10e-6, 1e-9);
    cr_assert_float_eq(json_number_value(json_object_get(f, "bandwidth")), 1.6e12, 1e9);
    cr_assert(json_is_number(json_object_get(f, "kfold_mape_pct")));
    cr_assert(json_is_number(json_object_get(f, "heldout_worst_pct")));
    json_t *src = json_array_get(json_object_get(j, "sources"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(src, "licence")), "CC0");
    cr_assert_str_eq(json_string_value(json_object_get(src, "measured_by")),
                     "Vidur (microsoft/vidur)");
    json_decref(j);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM calib_sources"), 1);
    /* `db show` of the datasheet name lists the imported keys beside the datasheet's */
    r = th_writescope((const char *[]){"db", "show", "a100-80gb-sxm", "--db", db, NULL}, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, "calibration: imported:a100-80gb-sxm"), NULL, "%s", r.out);
    cr_assert_neq(strstr(r.out, "gpu.attn.gqa.fp16.bandwidth"), NULL, "%s", r.out);
    th_run_free(&r);
    r = th_writescope((const char *[]){"calib", "show", "--db", db, NULL}, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, "source    "), NULL, "%s", r.out);
    cr_assert_neq(strstr(r.out, "sha256"), NULL, "%s", r.out);
    th_run_free(&r);
    j = th_writescope_json(
        (const char *[]){"calib", "check", csv, "--db", db, "--heldout", "--json", NULL}, NULL);
    json_t *g = json_array_get(json_object_get(j, "groups"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(g, "group")), "decode attention");
    cr_assert_eq(json_integer_value(json_object_get(g, "rows")), 7, "every 5th of 36");
    cr_assert_lt(json_number_value(json_object_get(g, "worst_pct")), 0.01);
    json_decref(j);
}

Test(cli_calib, import_errors_are_one_line)
{
    char dir[64], db[128], path[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    th_write(dir, "bad.csv",
             "time_stats.attn_decode.median,n_embd,n_q_head,n_kv_head,"
             "num_tensor_parallel_workers,batch_size,kv_cache_size,prefill_chunk_size,is_prefill\n"
             "0.01,8192,64,8,2,1,64,0,False\n0.01,8192,64,8,2,x,64,0,False\n",
             path, sizeof path);
    th_expect_fail((const char *[]){"calib", "import", path, "--db", db, NULL}, 1,
                   "bad.csv:3: batch_size 'x': not a whole number", NULL);
    th_expect_fail((const char *[]){"calib", "import", "--db", db, NULL}, 2,
                   "give the profile files", NULL);
    th_expect_fail((const char *[]){"calib", "import", dir, "--gpu", "h9000", "--db", db, NULL}, 1,
                   "no datasheet profile named 'h9000'", NULL);
    th_expect_fail((const char *[]){"calib", "check", "/nonexistent/x.csv", NULL}, 1,
                   "/nonexistent/x.csv", NULL);
    th_expect_fail((const char *[]){"calib", "check", dir, "--dtype", "fp8", NULL}, 1,
                   "precision 'fp8' (fp16, bf16 or fp32)", NULL);
    th_expect_fail((const char *[]){"calib", "import", path, "--tool", "a\x1b[2J", "--db", db,
                                    NULL},
                   1, "--tool holds a control character (byte 2)", NULL);
    th_expect_fail((const char *[]){"calib", "import", path, "--replace", "--db", db, NULL}, 2,
                   "--replace goes with --name", NULL);
    th_expect_fail((const char *[]){"calib", "foo", NULL}, 2,
                   "unknown subcommand 'foo' (run, show, import, check, export or load)", NULL);
    /* each failed import created the database and took it away again */
    cr_assert_neq(access(db, F_OK), 0, "a failed import left %s behind", db);
}

/* A group without rows names no worst row (JSON null, "-" in text), never another group's. */
Test(cli_calib, check_names_no_row_for_a_group_without_one)
{
    char dir[64], db[128], csv[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    vidur_attention(dir, csv, sizeof csv);
    json_t *j = th_writescope_json(
        (const char *[]){"calib", "import", csv, "--db", db, "--licence", "CC0", "--json", NULL},
        NULL);
    json_decref(j);
    j = th_writescope_json((const char *[]){"calib", "check", csv, "--db", db, "--heldout",
                                            "--min-us", "1e9", "--json", NULL},
                           NULL);
    json_t *groups = json_object_get(j, "groups");
    cr_assert_eq(json_array_size(groups), 4);
    for (size_t g = 0; g < 4; g++) {
        json_t *x = json_array_get(groups, g);
        const long long rows = json_integer_value(json_object_get(x, "rows"));
        cr_assert_eq(rows, g ? 0 : 7, "group %zu", g);
        cr_assert(g ? json_is_null(json_object_get(x, "worst_row"))
                    : json_is_string(json_object_get(x, "worst_row")),
                  "group %zu's worst row", g);
        cr_assert(json_is_null(json_object_get(x, "worst_long_row")), "no row of 1000 s");
    }
    json_decref(j);
    th_run r = th_writescope(
        (const char *[]){"calib", "check", csv, "--db", db, "--min-us", "1e9", NULL}, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *line = strstr(r.out, "\ndecode attention");
    cr_assert_not_null(line, "%s", r.out);
    const char *end = strchr(line + 1, '\n');
    cr_assert(end && !strncmp(end - 3, "  -", 3), "no long row, yet one named: %.*s",
              (int)(end ? end - line : 0), line);
    cr_assert_eq(th_lines(r.out), 3, "no line for the empty groups: %s", r.out);
    th_run_free(&r);
}

/* Decode rows of c0 10 us + KV bytes / 1.6 TB/s at batch 1..n into dir/name. */
static void decode_rows(const char *dir, const char *name, int n)
{
    char text[4096] = "time_stats.attn_decode.median,n_embd,n_q_head,n_kv_head,"
                      "num_tensor_parallel_workers,batch_size,kv_cache_size,prefill_chunk_size,"
                      "is_prefill\n",
         path[256];
    for (int b = 1; b <= n; b++) {
        char row[128];
        snprintf(row, sizeof row, "%.12g,8192,64,8,2,%d,1024,0,False\n",
                 1e3 * (10e-6 + b * 1024.0 * 2048 / 1.6e12), b);
        strcat(text, row);
    }
    th_write(dir, name, text, path, sizeof path);
}

/* `calib check --heldout` of one file of a folder imported whole judges exactly the rows the
 * import held out of that file. */
Test(cli_calib, check_heldout_rows_are_those_the_import_held_out)
{
    char dir[64], sub[96], db[128], b[160];
    th_tmpdir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/p", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    decode_rows(sub, "a.csv", 4);
    decode_rows(sub, "b.csv", 6);
    snprintf(b, sizeof b, "%s/b.csv", sub);
    json_t *j = th_writescope_json(
        (const char *[]){"calib", "import", sub, "--db", db, "--licence", "CC0", "--json", NULL},
        NULL);
    json_decref(j);
    const int held = th_count_file(db, "SELECT count(*) FROM samples WHERE json_extract(params, "
                                       "'$.file') = 'b.csv' AND json_extract(params, "
                                       "'$.heldout') = 1");
    const int line6 = th_count_file(db, "SELECT count(*) FROM samples WHERE json_extract(params, "
                                        "'$.file') = 'b.csv' AND json_extract(params, "
                                        "'$.heldout') = 1 AND json_extract(params, '$.line') = 6");
    j = th_writescope_json(
        (const char *[]){"calib", "check", b, "--db", db, "--heldout", "--json", NULL}, NULL);
    json_t *g = json_array_get(json_object_get(j, "groups"), 0);
    cr_assert_eq(json_integer_value(json_object_get(g, "rows")), held,
                 "check holds out %lld rows of b.csv, the import held out %d",
                 (long long)json_integer_value(json_object_get(g, "rows")), held);
    cr_assert_eq(held, 1);
    cr_assert_eq(line6, 1, "the 5th row of b.csv, line 6");
    cr_assert_str_eq(json_string_value(json_object_get(g, "worst_row")), "attn_decode line 6");
    json_decref(j);
}

/* A fit outside the GPU's bounds is printed NOT USED with the bound it broke. */
Test(cli_calib, import_prints_why_a_fit_is_not_used)
{
    char dir[64], db[128], path[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    char text[4096] = "time_stats.attn_decode.median,n_embd,n_q_head,n_kv_head,"
                      "num_tensor_parallel_workers,batch_size,kv_cache_size,prefill_chunk_size,"
                      "is_prefill\n";
    for (int b = 1; b <= 10; b++) { /* every kernel 1e9 ms: a fixed cost of 1e6 s */
        char row[64];
        snprintf(row, sizeof row, "1e9,8192,64,8,2,%d,1024,0,False\n", b);
        strcat(text, row);
    }
    th_write(dir, "attention.csv", text, path, sizeof path);
    th_run r = th_writescope((const char *[]){"calib", "import", path, "--db", db, NULL}, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, "NOT USED: fixed cost 1e+06 s above 1 s"), NULL, "%s", r.out);
    th_run_free(&r);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM fits WHERE good = 1"), 0);
}

/* A FIFO among the files, or as the LICENSE beside them, is one error, never a hang. */
Test(cli_calib, a_fifo_among_the_files_is_an_error, .timeout = 60)
{
    char dir[64], db[128], csv[256], fifo[160];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    vidur_attention(dir, csv, sizeof csv);
    snprintf(fifo, sizeof fifo, "%s/pipe.csv", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    th_expect_fail((const char *[]){"calib", "import", dir, "--db", db, NULL}, 1,
                   "pipe.csv: not a regular file", NULL);
    th_expect_fail((const char *[]){"calib", "check", dir, NULL}, 1,
                   "pipe.csv: not a regular file", NULL);
    th_expect_fail((const char *[]){"fidelity", "--ops", dir, "--group", "op GEMM", NULL}, 1,
                   "pipe.csv: not a regular file", NULL);
    cr_assert_eq(unlink(fifo), 0);
    snprintf(fifo, sizeof fifo, "%s/LICENSE", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    th_expect_fail((const char *[]){"calib", "check", csv, NULL}, 1,
                   "LICENSE: not a regular file", NULL);
}
