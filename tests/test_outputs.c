/* test_outputs: every command option that writes a file, end to end, against the targets a
 * hostile or careless user can give it and the failures a machine can throw at it, all
 * under the test's own temporary folder (a device-like file there stands for a device:
 * tests/helpers.h th_device_like):
 *   - a symbolic link, a FIFO, a folder and a device-like file at the target are each
 *     refused with one line before any work, and left as they were (the link's victim
 *     unchanged, nothing new beside them);
 *   - a full disk (a file-size limit: writes fail with EFBIG) fails the command with one
 *     line, leaves the old target as it was and no temporary file beside it;
 *   - SIGINT or SIGTERM during `sim --csv --chrome-trace` leaves no temporary file and ends
 *     with the signal's status.
 * The options: db export --output (JSON, CSV), trace gen --out, trace convert --out,
 * sim --chrome-trace, sim --csv (a folder), plot NAME --out (PNG, SVG, PDF), plan --plot,
 * validate --plot. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

static char g_dir[64], g_db[128], g_src[128], g_model[128], g_env_db[200];
static const char *g_env[] = {g_env_db, NULL};

/* A calibration run of one link fit over three samples: what `plot calib` draws. */
static const char *const k_calib_rows =
    "INSERT INTO hosts(id, fingerprint, cpu_model, cpu_cores, mem_bytes, isa, first_seen) "
    "VALUES (1, 'f00d', 'Test CPU', 2, 1e9, 'avx2', 'then');"
    "INSERT INTO calib_runs(id, host_id, tool_version, mode, scope, started_at, finished_at) "
    "VALUES (1, 1, 'test', 'quick', 'link', 'then', 'then');"
    "INSERT INTO samples(run_id, device, op, flops, bytes, repeats, t_median, t_min, t_max) "
    "VALUES (1, 'link', 'h2d', 0, 1e6, 3, 1.2e-4, 1e-4, 1.3e-4),"
    "(1, 'link', 'h2d', 0, 1e7, 3, 1.001e-3, 1e-3, 1.002e-3),"
    "(1, 'link', 'h2d', 0, 1e8, 3, 1.0001e-2, 1e-2, 1.0002e-2);"
    "INSERT INTO fits(run_id, device, op, form, c0, bandwidth, r2, heldout_mape_pct, "
    "n_samples, good) VALUES (1, 'link', 'h2d', 'transfer', 1e-6, 1e10, 0.999, 1.0, 3, 1);";

/* The shared inputs: a database with the datasheet profiles and a calibration run, a trace
 * of 2000 requests, the tiny model; no default database (WRITESCOPE_DB names none). */
static void setup(void)
{
    th_tmpdir(g_dir, sizeof g_dir);
    snprintf(g_db, sizeof g_db, "%s/ws.db", g_dir);
    snprintf(g_env_db, sizeof g_env_db, "WRITESCOPE_DB=%s/none.db", g_dir);
    th_run r = th_writescope((const char *[]){"db", "init", "--db", g_db, NULL}, g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    th_exec_sql(g_db, k_calib_rows);
    snprintf(g_src, sizeof g_src, "%s/src.csv", g_dir);
    FILE *f = fopen(g_src, "w");
    cr_assert_not_null(f);
    fputs("arrival_s,prompt_tokens,output_tokens\n", f);
    for (int i = 0; i < 2000; i++)
        fprintf(f, "%d.5,%d,%d\n", i, 100 + i, 1 + i % 7);
    cr_assert_eq(fclose(f), 0);
    th_write(g_dir, "tiny.json", th_tiny_moe, g_model, sizeof g_model);
}

TestSuite(outputs, .init = setup, .timeout = 120);

/* One output option: its command line, "@OUT" standing for the target; the full-disk limit
 * its output exceeds. */
typedef struct out_cmd {
    const char *name, *ext;
    long fsize;
    int gnuplot;
    const char *argv[40];
} out_cmd;

#define SIM_ARGS                                                                                   \
    "sim", "--model", "qwen3-30b-a3b", "--gpu", "a100-40gb-pcie", "--host", "xeon-gold-5318y",     \
        "--policy", "writescope", "--detail", "step", "--prompt", "64", "--output", "4",           \
        "--batch", "2"

static const out_cmd k_cmds[] = {
    {"db export --output", ".json", 4096, 0, {"db", "export", "--db", "@DB", "--output", "@OUT"}},
    {"db export --format csv --output",
     ".csv",
     2048,
     0,
     {"db", "export", "--db", "@DB", "--format", "csv", "--table", "profile_params", "--output",
      "@OUT"}},
    {"trace gen --out",
     ".csv",
     4096,
     0,
     {"trace", "gen", "--arrivals", "poisson", "--rate", "10", "--requests", "2000",
      "--prompt-dist", "fixed:100", "--output-dist", "fixed:10", "--out", "@OUT"}},
    {"trace convert --out", ".csv", 4096, 0, {"trace", "convert", "@SRC", "--out", "@OUT"}},
    {"sim --chrome-trace", ".json", 1024, 0, {SIM_ARGS, "--chrome-trace", "@OUT"}},
    {"plot --out (PNG)", ".png", 2048, 1, {"plot", "calib", "--db", "@DB", "--out", "@OUT"}},
    {"plot --out (SVG)", ".svg", 2048, 1, {"plot", "calib", "--db", "@DB", "--out", "@OUT"}},
    {"plot --out (PDF)", ".pdf", 2048, 1, {"plot", "calib", "--db", "@DB", "--out", "@OUT"}},
    {"plan --plot",
     ".png",
     2048,
     1,
     {"plan",
      "--model",
      "qwen3-30b-a3b",
      "--gpu",
      "a100-40gb-pcie",
      "--host",
      "xeon-gold-5318y",
      "--slo-tpot",
      "1",
      "--prompt",
      "64",
      "--output",
      "2",
      "--max-users",
      "1",
      "--policy",
      "writescope",
      "--fit-batches",
      "none",
      "--plot",
      "@OUT"}},
    {"validate --plot",
     ".png",
     2048,
     1,
     {"validate", "--model", "@MODEL", "--host", "xeon-gold-5318y", "--batch", "2", "--prompt",
      "300", "--output", "6", "--layers", "2", "--threads", "2", "--plot", "@OUT"}},
};
#define N_CMDS (sizeof k_cmds / sizeof k_cmds[0])


/* c's argv with its placeholders filled; out replaces "@OUT". */
static void fill(const out_cmd *c, const char *out, const char **argv)
{
    int i = 0;
    for (; c->argv[i]; i++) {
        const char *a = c->argv[i];
        argv[i] = !strcmp(a, "@OUT")     ? out
                  : !strcmp(a, "@DB")    ? g_db
                  : !strcmp(a, "@SRC")   ? g_src
                  : !strcmp(a, "@MODEL") ? g_model
                                         : a;
    }
    argv[i] = NULL;
}

/* Lines of s that start with "writescope" (a command's own messages carry its name; its
 * progress lines do not). */
static int error_lines(const char *s)
{
    int n = 0;
    for (const char *p = s; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
        n += !strncmp(p, "writescope", 10);
    return n;
}

/* A folder of its own under the test's folder, for one case. */
static void subdir(const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s", g_dir, name);
    cr_assert_eq(mkdir(buf, 0755), 0, "%s", buf);
}

/* The four targets that are not a regular file, in folder dir: a link to dir/victim, a FIFO,
 * a folder and a device-like file, each named <kind><ext>; their paths into t, what the
 * refusal calls them into what. */
static void make_targets(const char *dir, const char *ext, char t[4][256], const char *what[4])
{
    char victim[256];
    th_write(dir, "victim", "keep me\n", victim, sizeof victim);
    static const char *const kind[] = {"link", "fifo", "folder", "device"};
    for (int i = 0; i < 4; i++)
        snprintf(t[i], 256, "%s/%s%s", dir, kind[i], ext);
    cr_assert_eq(symlink(victim, t[0]), 0);
    cr_assert_eq(mkfifo(t[1], 0600), 0);
    cr_assert_eq(mkdir(t[2], 0755), 0);
    what[0] = "a symbolic link";
    what[1] = "a FIFO";
    what[2] = "a folder";
    what[3] = th_device_like(t[3]);
}

/* Each target is as make_targets left it and nothing else is in dir. */
static void targets_untouched(const char *dir, char t[4][256])
{
    char victim[256], buf[256];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    cr_assert(th_same_file_bytes(victim, "keep me\n", 8), "the link's victim was written");
    struct stat st;
    cr_assert(lstat(t[0], &st) == 0 && S_ISLNK(st.st_mode), "%s is no longer a link", t[0]);
    const ssize_t n = readlink(t[0], buf, sizeof buf - 1);
    cr_assert(n > 0 && (buf[n] = 0, !strcmp(buf, victim)), "%s points elsewhere", t[0]);
    cr_assert(lstat(t[1], &st) == 0 && S_ISFIFO(st.st_mode), "%s is no longer a FIFO", t[1]);
    cr_assert(lstat(t[2], &st) == 0 && S_ISDIR(st.st_mode), "%s is no longer a folder", t[2]);
    cr_assert_eq(th_dir_entries(t[2]), 0, "something was written into %s", t[2]);
    cr_assert(th_is_device_like(t[3]), "%s changed", t[3]);
    cr_assert_eq(th_dir_entries(dir), 5, "a temporary file was left in %s", dir);
}

/* The command refuses each target with one line naming it and what it is, before any work
 * (nothing on stdout), exit 1. */
static void refuses_targets(const out_cmd *c, const char *case_name)
{
    if (c->gnuplot && !th_have_gnuplot())
        cr_skip_test("gnuplot is not installed (make deps installs it)");
    char dir[128], t[4][256];
    const char *what[4];
    subdir(case_name, dir, sizeof dir);
    make_targets(dir, c->ext, t, what);
    for (int i = 0; i < 4; i++) {
        const char *argv[40];
        fill(c, t[i], argv);
        th_run r = th_writescope(argv, g_env);
        cr_assert_eq(r.status, 1, "%s %s: exit %d, stderr: %s", c->name, t[i], r.status, r.err);
        cr_assert_eq(th_lines(r.err), 1, "%s %s: one line: %s", c->name, t[i], r.err);
        cr_assert_neq(strstr(r.err, t[i]), NULL, "%s: names %s: %s", c->name, t[i], r.err);
        cr_assert_neq(strstr(r.err, what[i]), NULL, "%s: says %s: %s", c->name, what[i], r.err);
        cr_assert_str_eq(r.out, "", "%s %s: refused before any work", c->name, t[i]);
        th_run_free(&r);
    }
    targets_untouched(dir, t);
}

Test(outputs, db_export_refuses_links_fifos_folders_devices)
{
    refuses_targets(&k_cmds[0], "a");
}
Test(outputs, db_export_csv_refuses_links_fifos_folders_devices)
{
    refuses_targets(&k_cmds[1], "a");
}
Test(outputs, trace_gen_refuses_links_fifos_folders_devices)
{
    refuses_targets(&k_cmds[2], "a");
}
Test(outputs, trace_convert_refuses_links_fifos_folders_devices)
{
    refuses_targets(&k_cmds[3], "a");
}
Test(outputs, sim_chrome_trace_refuses_links_fifos_folders_devices)
{
    refuses_targets(&k_cmds[4], "a");
}
Test(outputs, plot_out_refuses_links_fifos_folders_devices)
{
    refuses_targets(&k_cmds[5], "png");
    refuses_targets(&k_cmds[6], "svg");
    refuses_targets(&k_cmds[7], "pdf");
}
Test(outputs, plan_plot_refuses_links_fifos_folders_devices)
{
    refuses_targets(&k_cmds[8], "a");
}
Test(outputs, validate_plot_refuses_links_fifos_folders_devices)
{
    refuses_targets(&k_cmds[9], "a");
}

/* sim --csv DIR: DIR itself a link (to a folder: the files would land there), a FIFO, a
 * device-like file or a regular file; and each of the three files in a real DIR a link, a
 * FIFO, a folder or a device-like file. Each refused before the simulation, left as it was. */
Test(outputs, sim_csv_refuses_links_fifos_folders_devices)
{
    char dir[128], victim_dir[256], t[4][256], inner[300];
    const char *what[4];
    subdir("csvdir", dir, sizeof dir);
    make_targets(dir, "", t, what);
    snprintf(victim_dir, sizeof victim_dir, "%s/victim_dir", g_dir);
    cr_assert_eq(mkdir(victim_dir, 0755), 0);
    th_write(victim_dir, "keep", "keep me\n", inner, sizeof inner);
    char dir_link[256];
    snprintf(dir_link, sizeof dir_link, "%s/dirlink", g_dir);
    cr_assert_eq(symlink(victim_dir, dir_link), 0);
    char plain[256];
    th_write(g_dir, "plain", "keep me\n", plain, sizeof plain);
    const char *const as_dir[] = {dir_link, t[1], t[3], t[0], plain};
    const char *const as_what[] = {"a symbolic link", "a FIFO", what[3], "a symbolic link",
                                   "a regular file"};
    for (size_t i = 0; i < sizeof as_dir / sizeof as_dir[0]; i++) {
        th_run r = th_writescope((const char *[]){SIM_ARGS, "--csv", as_dir[i], NULL}, g_env);
        cr_assert_eq(r.status, 1, "--csv %s: exit %d: %s", as_dir[i], r.status, r.err);
        cr_assert_eq(th_lines(r.err), 1, "%s", r.err);
        cr_assert_neq(strstr(r.err, as_dir[i]), NULL, "%s", r.err);
        cr_assert_neq(strstr(r.err, as_what[i]), NULL, "%s", r.err);
        cr_assert_str_eq(r.out, "");
        th_run_free(&r);
    }
    targets_untouched(dir, t);
    cr_assert_eq(th_dir_entries(victim_dir), 1, "written into the link's folder");
    cr_assert(th_same_file_bytes(inner, "keep me\n", 8));
    cr_assert(th_same_file_bytes(plain, "keep me\n", 8));
    /* the files inside: steps.csv is the second one opened, so requests.csv's temporary
     * file exists when it is refused */
    static const char *const files[] = {"requests.csv", "steps.csv", "summary.csv"};
    char victim[300];
    th_write(g_dir, "inner_victim", "keep me\n", victim, sizeof victim);
    for (int f = 0; f < 3; f++)
        for (int i = 0; i < 4; i++) {
            char name[16], in[128], target[300];
            const char *kind = i == 3 ? NULL : what[i];
            snprintf(name, sizeof name, "in%d%d", f, i);
            subdir(name, in, sizeof in);
            snprintf(target, sizeof target, "%s/%s", in, files[f]);
            if (i == 0)
                cr_assert_eq(symlink(victim, target), 0);
            else if (i == 1)
                cr_assert_eq(mkfifo(target, 0600), 0);
            else if (i == 2)
                cr_assert_eq(mkdir(target, 0755), 0);
            else
                kind = th_device_like(target);
            th_run r = th_writescope((const char *[]){SIM_ARGS, "--csv", in, NULL}, g_env);
            cr_assert_eq(r.status, 1, "%s: exit %d: %s", target, r.status, r.err);
            cr_assert_eq(th_lines(r.err), 1, "%s", r.err);
            cr_assert_neq(strstr(r.err, target), NULL, "%s", r.err);
            cr_assert_neq(strstr(r.err, kind), NULL, "%s", r.err);
            th_run_free(&r);
            cr_assert_eq(th_dir_entries(in), 1, "%s: a temporary file was left", in);
            struct stat st;
            cr_assert_eq(lstat(target, &st), 0);
            cr_assert(i == 0   ? S_ISLNK(st.st_mode)
                      : i == 1 ? S_ISFIFO(st.st_mode)
                      : i == 2 ? S_ISDIR(st.st_mode)
                               : th_is_device_like(target),
                      "%s changed", target);
        }
    cr_assert(th_same_file_bytes(victim, "keep me\n", 8), "written through a link");
}

/* A full disk for every output kind: the command fails with one line of its own (validate
 * also prints its progress), the old target is as it was, no temporary file beside it. */
static void full_disk(const out_cmd *c, const char *case_name)
{
    if (c->gnuplot && !th_have_gnuplot())
        cr_skip_test("gnuplot is not installed (make deps installs it)");
    char dir[128], out[256];
    subdir(case_name, dir, sizeof dir);
    snprintf(out, sizeof out, "%s/out%s", dir, c->ext);
    th_write(dir, strrchr(out, '/') + 1, "old\n", out, sizeof out);
    const char *argv[40];
    fill(c, out, argv);
    /* without the limit the command succeeds: the failure below is the disk's */
    char probe[256];
    snprintf(probe, sizeof probe, "%s/probe%s", g_dir, c->ext);
    fill(c, probe, argv);
    th_run ok = th_writescope(argv, g_env);
    cr_assert_eq(ok.status, 0, "%s without a limit: %s", c->name, ok.err);
    th_run_free(&ok);
    struct stat st;
    cr_assert(stat(probe, &st) == 0 && st.st_size > c->fsize, "%s: %lld bytes, not past %ld",
              c->name, (long long)st.st_size, c->fsize);
    unlink(probe);
    fill(c, out, argv);
    /* A reader of the database kept open, so that a database in WAL mode has its shared
     * memory file already: the limit is for the command's output, not for SQLite's files. */
    sqlite3 *hold;
    cr_assert_eq(sqlite3_open_v2(g_db, &hold, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(hold, "SELECT count(*) FROM profiles", NULL, NULL, NULL), SQLITE_OK);
    th_run r = th_writescope_fsize(argv, g_env, c->fsize);
    sqlite3_close(hold);
    cr_assert_neq(r.status, 0, "%s on a full disk: exit 0: %s", c->name, r.out);
    cr_assert_eq(error_lines(r.err), 1, "%s: one line: %s", c->name, r.err);
    if (strncmp(c->name, "validate", 8))
        cr_assert_eq(th_lines(r.err), 1, "%s: one line: %s", c->name, r.err);
    cr_assert_neq(strstr(r.err, out), NULL, "%s: names %s: %s", c->name, out, r.err);
    th_run_free(&r);
    cr_assert(th_same_file_bytes(out, "old\n", 4), "%s: the old target changed", c->name);
    cr_assert_eq(th_dir_entries(dir), 1, "%s: a temporary file was left in %s", c->name, dir);
}

Test(outputs, db_export_on_a_full_disk)
{
    full_disk(&k_cmds[0], "a");
}
Test(outputs, db_export_csv_on_a_full_disk)
{
    full_disk(&k_cmds[1], "a");
}
Test(outputs, trace_gen_on_a_full_disk)
{
    full_disk(&k_cmds[2], "a");
}
Test(outputs, trace_convert_on_a_full_disk)
{
    full_disk(&k_cmds[3], "a");
}
Test(outputs, sim_chrome_trace_on_a_full_disk)
{
    full_disk(&k_cmds[4], "a");
}
Test(outputs, figures_on_a_full_disk)
{
    full_disk(&k_cmds[5], "png");
    full_disk(&k_cmds[6], "svg");
    full_disk(&k_cmds[7], "pdf");
}
Test(outputs, plan_plot_on_a_full_disk)
{
    full_disk(&k_cmds[8], "a");
}
Test(outputs, validate_plot_on_a_full_disk)
{
    full_disk(&k_cmds[9], "a");
}

/* sim --csv on a full disk: the three old files stay as they were, all of them -- the
 * requests file, small enough to be written whole, is not replaced while the others fail. */
Test(outputs, sim_csv_on_a_full_disk)
{
    char dir[128], path[300];
    subdir("csv", dir, sizeof dir);
    static const char *const files[] = {"requests.csv", "steps.csv", "summary.csv"};
    for (int i = 0; i < 3; i++)
        th_write(dir, files[i], "old\n", path, sizeof path);
    th_run r = th_writescope_fsize((const char *[]){SIM_ARGS, "--csv", dir, NULL}, g_env, 600);
    cr_assert_neq(r.status, 0, "exit 0 on a full disk: %s", r.out);
    cr_assert_eq(th_lines(r.err), 1, "one line: %s", r.err);
    cr_assert_neq(strstr(r.err, dir), NULL, "%s", r.err);
    th_run_free(&r);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        cr_assert(th_same_file_bytes(path, "old\n", 4), "%s was replaced", files[i]);
    }
    cr_assert_eq(th_dir_entries(dir), 3, "a temporary file was left in %s", dir);
    /* and the requests file alone is below the limit: the test is of the others' failure */
    char fresh[128];
    subdir("csv_free", fresh, sizeof fresh);
    r = th_writescope((const char *[]){SIM_ARGS, "--csv", fresh, NULL}, g_env);
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_run_free(&r);
    struct stat st;
    snprintf(path, sizeof path, "%s/requests.csv", fresh);
    cr_assert(stat(path, &st) == 0 && st.st_size < 600, "requests.csv: %lld bytes",
              (long long)st.st_size);
}

/* Hidden files sim is writing in dir (names starting with '.', other than . and ..). */
static int hidden_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

/* SIGINT or SIGTERM while sim streams into --csv and --chrome-trace: the temporary files go,
 * the old files stay, the status is the signal's (130, 143). The run is far too long to end
 * by itself (10^8 requests); the signal is sent once its temporary files exist. */
static void interrupted(int sig, const char *name)
{
    char dir[128], csv[300], trace[300], out[300], err[300], path[300];
    subdir(name, dir, sizeof dir);
    snprintf(csv, sizeof csv, "%s/csv", dir);
    cr_assert_eq(mkdir(csv, 0755), 0);
    th_write(csv, "requests.csv", "old\n", path, sizeof path);
    th_write(dir, "trace.json", "old\n", trace, sizeof trace);
    snprintf(out, sizeof out, "%s/stdout", g_dir);
    snprintf(err, sizeof err, "%s/stderr-%s", g_dir, name);
    const int pid = th_spawn((const char *[]){"sim",
                                              "--model",
                                              "qwen3-30b-a3b",
                                              "--gpu",
                                              "a100-40gb-pcie",
                                              "--host",
                                              "xeon-gold-5318y",
                                              "--policy",
                                              "writescope",
                                              "--detail",
                                              "step",
                                              "--arrivals",
                                              "poisson",
                                              "--rate",
                                              "1000",
                                              "--requests",
                                              "100000000",
                                              "--prompt-dist",
                                              "fixed:512",
                                              "--output-dist",
                                              "fixed:8",
                                              "--csv",
                                              csv,
                                              "--chrome-trace",
                                              trace,
                                              NULL},
                             g_env, out, err);
    int seen = 0;
    for (int i = 0; i < 3000 && seen < 4; i++) { /* up to 30 s for the four to appear */
        seen = hidden_files(csv) + hidden_files(dir);
        if (seen < 4)
            usleep(10000);
    }
    cr_assert_eq(seen, 4, "sim's temporary files (3 CSV, 1 trace) did not appear");
    kill(pid, sig);
    const int status = th_wait(pid);
    char *e = th_slurp(err, NULL);
    cr_assert_eq(status, 128 + sig, "status %d, stderr: %s", status, e);
    free(e);
    cr_assert_eq(hidden_files(csv), 0, "a temporary CSV file was left in %s", csv);
    cr_assert_eq(hidden_files(dir), 0, "a temporary trace file was left in %s", dir);
    cr_assert_eq(th_dir_entries(csv), 1);
    cr_assert(th_same_file_bytes(path, "old\n", 4));
    cr_assert(th_same_file_bytes(trace, "old\n", 4));
}

Test(outputs, sigint_during_sim_csv_leaves_no_temporary_file)
{
    interrupted(SIGINT, "int");
}
Test(outputs, sigterm_during_sim_csv_leaves_no_temporary_file)
{
    interrupted(SIGTERM, "term");
}
