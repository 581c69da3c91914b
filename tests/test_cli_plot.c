/* test_cli_plot: `writescope plot NAME` end to end on a small database made by the real
 * commands (closed-batch and generator simulations, a one-layer live run) plus a
 * calibration run stored by hand: every figure renders a non-empty PNG, the speedup figure
 * pairs exactly the points the database says were both served, strings read from the
 * database reach gnuplot as text and never as code, and unknown figures, bad options and
 * missing data are one-line errors. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

static const char *const figures[] = {"calib", "speedup", "throughput", "share", "latency", "util"};
#define N_FIGURES (sizeof figures / sizeof figures[0])

static void need_gnuplot(void)
{
    if (!th_have_gnuplot())
        cr_skip_test("gnuplot is not installed (make deps installs it)");
}

static void ok(const char *const *args)
{
    th_run r = th_writescope(args, NULL);
    cr_assert_eq(r.status, 0, "%s: %s", args[0], r.err);
    th_run_free(&r);
}

#define SIM(db, ...)                                                                               \
    ok((const char *[]){"sim", "--model", "qwen3-30b-a3b", "--gpu", "a100-40gb-pcie", "--host",    \
                        "xeon-gold-5318y", "--detail", "step", "--db", db, __VA_ARGS__, NULL})

/* A calibration run with a transfer fit of (link, op) over three samples, stored by hand. */
static void calib_rows(const char *db, const char *op)
{
    char *sql = sqlite3_mprintf(
        "INSERT INTO hosts(id, fingerprint, cpu_model, cpu_cores, mem_bytes, isa, first_seen) "
        "VALUES (1, 'f00d', 'Test CPU', 2, 1e9, 'avx2', 'then');"
        "INSERT INTO calib_runs(id, host_id, tool_version, mode, scope, started_at, finished_at) "
        "VALUES (1, 1, 'test', 'quick', 'link', 'then', 'then');"
        "INSERT INTO samples(run_id, device, op, flops, bytes, repeats, t_median, t_min, t_max) "
        "VALUES (1, 'link', %Q, 0, 1e6, 3, 1.2e-4, 1e-4, 1.3e-4),"
        "(1, 'link', %Q, 0, 1e7, 3, 1.001e-3, 1e-3, 1.002e-3),"
        "(1, 'link', %Q, 0, 1e8, 3, 1.0001e-2, 1e-2, 1.0002e-2);"
        "INSERT INTO fits(run_id, device, op, form, c0, bandwidth, r2, heldout_mape_pct, "
        "n_samples, good) VALUES (1, 'link', %Q, 'transfer', 1e-6, 1e10, 0.999, 1.0, 3, 1);",
        op, op, op, op);
    th_exec_sql(db, sql);
    sqlite3_free(sql);
}

/* The database every figure draws from, in dir/ws.db (path into db). */
static void make_db(const char *dir, char *db, size_t cap)
{
    snprintf(db, cap, "%s/ws.db", dir);
    SIM(db, "--batch", "2", "--prompt", "2048", "--output", "8");
    SIM(db, "--batch", "2", "--prompt", "8192", "--output", "8");
    SIM(db, "--batch", "4", "--prompt", "8192", "--output", "8");
    SIM(db, "--batch", "8", "--arrivals", "poisson", "--rate", "2", "--requests", "12",
        "--prompt-dist", "uniform:1024:4096", "--output-dist", "uniform:4:16", "--seed", "3");
    ok((const char *[]){"run", "--model", "qwen3-30b-a3b", "--batch", "1", "--prompt", "1024",
                        "--output", "4", "--layers", "1", "--threads", "1", "--db", db, NULL});
    calib_rows(db, "h2d");
}

/* Renders figure `name` (extra args may be NULL) into out; asserts success and a file
 * that starts like its format. Returns the printed line (caller frees). */
static char *render(const char *db, const char *name, const char *extra, const char *extra_v,
                    const char *out)
{
    th_run r = th_writescope((const char *[]){"plot", name, "--db", db, "--out", out, extra,
                                              extra_v, NULL},
                             NULL);
    cr_assert_eq(r.status, 0, "plot %s: %s", name, r.err);
    cr_assert_eq(th_lines(r.out), 1, "%s", r.out);
    size_t len;
    char *img = th_slurp(out, &len);
    cr_assert_not_null(img, "plot %s wrote no %s", name, out);
    if (strstr(out, ".png"))
        cr_assert(len > 1000 && !memcmp(img, "\x89PNG", 4), "plot %s: not a PNG (%zu bytes)",
                  name, len);
    else
        cr_assert(len > 1000 && strstr(img, "<svg"), "plot %s: not an SVG", name);
    free(img);
    char *line = r.out;
    r.out = NULL;
    th_run_free(&r);
    return line;
}

Test(cli_plot, every_figure_renders_a_png, .timeout = 180)
{
    need_gnuplot();
    char dir[64], db[128], out[192];
    th_tmpdir(dir, sizeof dir);
    make_db(dir, db, sizeof db);
    for (size_t i = 0; i < N_FIGURES; i++) {
        snprintf(out, sizeof out, "%s/%s.png", dir, figures[i]);
        free(render(db, figures[i], NULL, NULL, out));
    }
    snprintf(out, sizeof out, "%s/live-share.png", dir);
    char *line = render(db, "share", "--live", "0", out);
    cr_assert_neq(strstr(line, "live run 1"), NULL, "%s", line);
    free(line);
    snprintf(out, sizeof out, "%s/live-util.png", dir);
    free(render(db, "util", "--live", "1", out));

    /* speedup pairs: every baseline point with writescope's, both served without OOM */
    int pairs = th_count_file(
        db, "SELECT count(*) FROM sim_runs w JOIN sim_runs b ON b.batch = w.batch AND "
            "b.prompt_tokens = w.prompt_tokens AND b.policy <> 'writescope' WHERE "
            "w.policy = 'writescope' AND w.workload = 'closed' AND b.workload = 'closed' AND "
            "w.oom = 0 AND b.oom = 0 AND w.completed > 0 AND b.completed > 0");
    cr_assert_gt(pairs, 0);
    snprintf(out, sizeof out, "%s/speedup.svg", dir);
    line = render(db, "speedup", NULL, NULL, out);
    char want[64];
    snprintf(want, sizeof want, "(1 panels, %d point pairs, modeled)", pairs);
    cr_assert_neq(strstr(line, want), NULL, "'%s' lacks '%s'", line, want);
    free(line);
    /* throughput: a panel per batch of the newest closed run's model and hardware */
    snprintf(out, sizeof out, "%s/throughput2.png", dir);
    line = render(db, "throughput", "--run", "1", out);
    cr_assert_neq(strstr(line, "(2 panels, qwen3-30b-a3b on a100-40gb-pcie"), NULL, "%s", line);
    free(line);
    /* latency: every policy that served a request on the generator's workload */
    int served = th_count_file(db, "SELECT count(*) FROM sim_runs WHERE workload = 'generator' "
                                   "AND completed > 0");
    snprintf(out, sizeof out, "%s/latency2.png", dir);
    line = render(db, "latency", NULL, NULL, out);
    snprintf(want, sizeof want, "(%d policies of", served);
    cr_assert_neq(strstr(line, want), NULL, "'%s' lacks '%s'", line, want);
    free(line);
}

Test(cli_plot, strings_from_the_database_are_never_code, .timeout = 180)
{
    need_gnuplot();
    char dir[64], db[128], out[192], pwned[160], bin[4096];
    th_tmpdir(dir, sizeof dir);
    make_db(dir, db, sizeof db);
    /* gnuplot's system() would run in its working folder: make that the test's folder. */
    const char *b = getenv("WRITESCOPE_BIN");
    cr_assert_not_null(realpath(b && *b ? b : "bin/writescope", bin));
    setenv("WRITESCOPE_BIN", bin, 1);
    cr_assert_eq(chdir(dir), 0);
    snprintf(pwned, sizeof pwned, "%s/PWNED", dir);
    const char *code = "x'; system(\"touch PWNED\"); print \"\t\n#\"";
    char *sql = sqlite3_mprintf(
        "UPDATE sim_runs SET model = %Q, host_profile = %Q, generator = %Q;"
        "UPDATE sim_runs SET policy = %Q WHERE policy = 'stream';"
        "UPDATE run_runs SET model = %Q, gpu = %Q, policy = %Q;"
        "UPDATE samples SET op = %Q; UPDATE fits SET op = %Q;",
        code, code, code, "#\"; system(\"touch PWNED\") #", code, code, code, code, code);
    th_exec_sql(db, sql);
    sqlite3_free(sql);
    for (size_t i = 0; i < N_FIGURES; i++) {
        snprintf(out, sizeof out, "%s/it's %s.svg", dir, figures[i]);
        free(render(db, figures[i], NULL, NULL, out));
        cr_assert_eq(access(pwned, F_OK), -1, "figure %s ran a shell command", figures[i]);
        size_t len;
        char *svg = th_slurp(out, &len);
        /* the text is drawn as text (figures that print it) */
        if (strcmp(figures[i], "speedup") && strcmp(figures[i], "throughput") &&
            strcmp(figures[i], "latency"))
            cr_assert_neq(strstr(svg, "system("), NULL, "figure %s lost the text", figures[i]);
        free(svg);
    }
    free(render(db, "share", "--live", "0", "live.png"));
    free(render(db, "util", "--live", "0", "live.svg"));
    cr_assert_eq(access(pwned, F_OK), -1, "a live figure ran a shell command");
}

Test(cli_plot, unknown_figures_bad_options_and_missing_data)
{
    char dir[64], db[128], out[160];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/empty.db", dir);
    snprintf(out, sizeof out, "%s/x.png", dir);
    ok((const char *[]){"db", "init", "--db", db, NULL});
    th_expect_fail((const char *[]){"plot", "nonsense", "--db", db, NULL}, 2,
                   "no figure 'nonsense'", NULL);
    th_expect_fail((const char *[]){"plot", "--db", db, NULL}, 2, "which figure", NULL);
    th_expect_fail((const char *[]){"plot", "calib", "--live", "1", "--db", db, NULL}, 2,
                   "takes no --live", NULL);
    th_expect_fail((const char *[]){"plot", "share", "--live", "1", "--run", "2", "--db", db, NULL},
                   2, "give one", NULL);
    th_expect_fail((const char *[]){"plot", "util", "--run", "0", "--db", db, NULL}, 2, "--run",
                   NULL);
    const char *missing[N_FIGURES] = {"no calibration run", "no closed-batch simulation",
                                      "no closed-batch simulation", "no simulation run",
                                      "no simulation run", "no simulation run"};
    for (size_t i = 0; i < N_FIGURES; i++)
        th_expect_fail((const char *[]){"plot", figures[i], "--db", db, "--out", out, NULL}, 1,
                       missing[i], NULL);
    th_expect_fail((const char *[]){"plot", "share", "--live", "0", "--db", db, "--out", out, NULL},
                   1, "no runtime run", NULL);
    th_expect_fail((const char *[]){"plot", "util", "--run", "7", "--db", db, "--out", out, NULL},
                   1, "no simulation run 7", NULL);
    struct stat st;
    cr_assert_neq(stat(out, &st), 0, "a failed figure left %s", out);
}

/* A figure never goes through a link or into a FIFO or device: refused with one line before
 * gnuplot runs, the target and what it points at untouched; an existing figure is replaced
 * whole, and nothing is left in the output's folder but the figure. */
Test(cli_plot, figures_refuse_what_is_not_a_regular_file, .timeout = 60)
{
    need_gnuplot();
    char dir[64], db[128], victim[256], link[192], fifo[192], out[192];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    ok((const char *[]){"db", "init", "--db", db, NULL});
    calib_rows(db, "h2d");
    th_write(dir, "victim.txt", "keep me\n", victim, sizeof victim);
    snprintf(link, sizeof link, "%s/l.png", dir);
    cr_assert_eq(symlink(victim, link), 0);
    snprintf(fifo, sizeof fifo, "%s/f.png", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    char dev[192];
    snprintf(dev, sizeof dev, "%s/dev.png", dir);
    th_device_like(dev);
    const char *bad[] = {link, fifo, dev};
    for (int i = 0; i < 3; i++)
        th_expect_fail((const char *[]){"plot", "calib", "--db", db, "--out", bad[i], NULL}, 1,
                       bad[i], NULL);
    char *text = th_slurp(victim, NULL);
    cr_assert_str_eq(text, "keep me\n");
    free(text);
    struct stat st;
    cr_assert(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    cr_assert(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    cr_assert(th_is_device_like(dev));
    /* an existing file is replaced by the whole figure */
    th_write(dir, "c.png", "old", out, sizeof out);
    free(render(db, "calib", NULL, NULL, out));
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) /* ws.db-wal and -shm are the database's */
        n += e->d_name[0] != '.' && strncmp(e->d_name, "ws.db-", 6);
    closedir(d);
    cr_assert_eq(n, 6, "db, victim, link, fifo, device and the figure, no temporary file: %d", n);
}

/* The figure's type follows --out's extension, case aside: .png PNG, .svg SVG, .pdf PDF (it
 * used to write PNG into x.pdf); any other name is a usage error before anything is drawn
 * or created. plan --plot and validate --plot take the same names. */
Test(cli_plot, figure_type_follows_the_extension, .timeout = 60)
{
    need_gnuplot();
    char dir[64], db[128], out[192];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    ok((const char *[]){"db", "init", "--db", db, NULL});
    calib_rows(db, "h2d");
    static const char *const ext[] = {"pdf", "PDF", "svg", "png"};
    static const char *const magic[] = {"%PDF", "%PDF", "<?xml", "\x89PNG"};
    for (int i = 0; i < 4; i++) {
        snprintf(out, sizeof out, "%s/c%d.%s", dir, i, ext[i]);
        th_run r =
            th_writescope((const char *[]){"plot", "calib", "--db", db, "--out", out, NULL}, NULL);
        cr_assert_eq(r.status, 0, "%s: %s", out, r.err);
        th_run_free(&r);
        size_t len;
        char *img = th_slurp(out, &len);
        cr_assert(img && len > 1000 && !memcmp(img, magic[i], strlen(magic[i])),
                  "%s is not a %s file", out, ext[i]);
        free(img);
    }
    static const char *const bad[] = {"c.jpg", "c", "c.png.txt"};
    for (int i = 0; i < 3; i++) {
        snprintf(out, sizeof out, "%s/new/%s", dir, bad[i]);
        th_expect_fail((const char *[]){"plot", "calib", "--db", db, "--out", out, NULL}, 2,
                       ".png, .svg or .pdf", NULL);
        th_expect_fail((const char *[]){"plan", "--model", "qwen3-30b-a3b", "--gpu",
                                        "a100-40gb-pcie", "--host", "xeon-gold-5318y", "--slo-tpot",
                                        "1", "--prompt", "64", "--output", "2", "--plot", out,
                                        NULL},
                       2, ".png, .svg or .pdf", NULL);
        th_expect_fail(
            (const char *[]){"validate", "--model", "qwen3-30b-a3b", "--plot", out, NULL}, 2,
            ".png, .svg or .pdf", NULL);
    }
    struct stat st;
    snprintf(out, sizeof out, "%s/new", dir);
    cr_assert_neq(stat(out, &st), 0, "a refused figure created %s", out);
}

/* A fit whose samples are not stored (a damaged or hand-made database) is left out of the
 * figure, the others drawn; it used to be drawn from no data (qsort(NULL, 0), undefined
 * behaviour under UBSan). */
Test(cli_plot, a_fit_without_samples_is_left_out, .timeout = 60)
{
    need_gnuplot();
    char dir[64], db[128], out[192];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    ok((const char *[]){"db", "init", "--db", db, NULL});
    calib_rows(db, "h2d");
    th_exec_sql(db, "INSERT INTO fits(run_id, device, op, form, c0, bandwidth, r2, "
                    "heldout_mape_pct, n_samples, good) VALUES (1, 'link', 'd2h', 'transfer', "
                    "1e-6, 1e10, 0.999, 1.0, 3, 1);");
    snprintf(out, sizeof out, "%s/c.png", dir);
    char *line = render(db, "calib", NULL, NULL, out);
    cr_assert_neq(strstr(line, "(1 panels,"), NULL, "the fit without samples is left out: %s",
                  line);
    free(line);
}

/* A validation's simulation and runtime runs (2 of the model's layers) are not runs of
 * `sim` or `run`: throughput, latency and share --live draw the commands' own, and a
 * validation's run asked for by id says what it is and the layers it covers. */
Test(cli_plot, validation_runs_are_not_user_runs)
{
    need_gnuplot();
    char dir[64], db[128], model[160], out[192];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/ws.db", dir);
    snprintf(out, sizeof out, "%s/f.png", dir);
    th_write(dir, "tiny.json", th_tiny_moe, model, sizeof model);
    SIM(db, "--batch", "2", "--prompt", "2048", "--output", "8", "--policy", "writescope");
    ok((const char *[]){"validate", "--model", model, "--host", "xeon-gold-5318y", "--batch", "2",
                        "--prompt", "300", "--output", "6", "--layers", "2", "--threads", "2",
                        "--db", db, NULL});
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM sim_runs WHERE id = 2 AND model = 'tiny'"),
                 1, "the validation's simulation is run 2");
    char *line = render(db, "throughput", NULL, NULL, out);
    cr_assert_neq(strstr(line, "qwen3-30b-a3b on a100-40gb-pcie"), NULL, "%s", line);
    free(line);
    line = render(db, "latency", NULL, NULL, out);
    cr_assert_neq(strstr(line, "of simulation run 1's workload"), NULL, "%s", line);
    free(line);
    line = render(db, "share", NULL, NULL, out);
    cr_assert_neq(strstr(line, "simulation run 1,"), NULL, "%s", line);
    free(line);
    line = render(db, "latency", "--run", "2", out);
    cr_assert_neq(strstr(line, "a validation's simulation of 2 layers"), NULL, "%s", line);
    free(line);
    th_expect_fail((const char *[]){"plot", "throughput", "--run", "2", "--db", db, "--out", out,
                                    NULL},
                   1, "is a validation's (2 layers)", NULL);
    th_expect_fail((const char *[]){"plot", "share", "--live", "0", "--db", db, "--out", out,
                                    NULL},
                   1, "no runtime run yet", NULL);
    line = render(db, "share", "--live", "1", out);
    cr_assert_neq(strstr(line, "a validation's run"), NULL, "%s", line);
    free(line);
}
