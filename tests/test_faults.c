/* test_faults: the commands that write the database, under faults, each as a child process
 * of $WRITESCOPE_BIN working in the test's own temporary folder. SIGINT and SIGKILL at
 * random points of calib, sim --db, plan --db and validate --db (the delays are drawn per
 * run from a seed the messages print), then the database is opened: PRAGMA integrity_check
 * is ok and no row reads as a finished run unless the whole run is there. A full disk is a
 * file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored, so a write past it fails with EFBIG):
 * the command fails with one line and stores nothing that looks complete; calib finds it
 * before measuring. A read-only file or folder is refused before any work; a reader works
 * while a long sim --db writes; a second writer waits for the first instead of giving up
 * after a few seconds. No test here sets .timeout: Criterion 2.4's runner leaks a block when
 * tests with timeouts overlap, which `make sanitize` reports; every command run here ends by
 * itself and every wait on one is bounded. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

#define NOBODY 65534 /* the user a root test runs the read-only cases as */

static char g_dir[64];
static unsigned g_seed;

static void setup(void)
{
    th_tmpdir(g_dir, sizeof g_dir);
    g_seed = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16);
    unsetenv("WRITESCOPE_DB_TIMEOUT_MS"); /* the default wait is part of what is tested */
}

TestSuite(faults, .init = setup);

/* A delay in [lo, hi] seconds, from the suite's seed. */
static double draw(double lo, double hi)
{
    return lo + (hi - lo) * (double)rand_r(&g_seed) / RAND_MAX;
}

static void sleep_s(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    while (nanosleep(&t, &t) && errno == EINTR)
        ;
}

typedef struct child_opts {
    long long fsize;  /* > 0: RLIMIT_FSIZE in bytes, SIGXFSZ ignored */
    int uid;          /* > 0: run as this user (and group) */
    const char *env;  /* "NAME=VALUE" added to the environment, or NULL */
} child_opts;

/* Starts $WRITESCOPE_BIN args with stdout and stderr in g_dir/<tag>.out and .err. */
static int spawn(const char *tag, const char *const *args, child_opts o)
{
    char out[128], err[128];
    snprintf(out, sizeof out, "%s/%s.out", g_dir, tag);
    snprintf(err, sizeof err, "%s/%s.err", g_dir, tag);
    const char *bin = getenv("WRITESCOPE_BIN");
    if (!bin || !*bin)
        bin = "bin/writescope";
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork failed");
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fo, 1);
        dup2(fe, 2);
        if (o.env)
            putenv((char *)o.env);
        /* the child meets a signal as a foreground command does, however the tests were
         * started (a background job starts with SIGINT ignored) */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        if (o.fsize > 0) {
            signal(SIGXFSZ, SIG_IGN); /* kept across exec: a write past the limit is EFBIG */
            struct rlimit rl = {(rlim_t)o.fsize, (rlim_t)o.fsize};
            if (setrlimit(RLIMIT_FSIZE, &rl))
                _exit(126);
        }
        if (o.uid > 0 && (setgroups(0, NULL) || setgid((gid_t)o.uid) || setuid((uid_t)o.uid)))
            _exit(125);
        const char *argv[64];
        int n = 0;
        argv[n++] = bin;
        for (const char *const *a = args; *a && n < 63; a++)
            argv[n++] = *a;
        argv[n] = NULL;
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    return (int)pid;
}

/* Runs args to its end; *err_text (caller frees) gets its stderr. */
static int run_child(const char *tag, const char *const *args, child_opts o, char **err_text)
{
    const int st = th_wait(spawn(tag, args, o));
    char path[128];
    snprintf(path, sizeof path, "%s/%s.err", g_dir, tag);
    *err_text = th_slurp(path, NULL);
    if (!*err_text)
        *err_text = strdup("");
    return st;
}

/* Lines of text that start with "writescope: " (the error line). */
static int error_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; p && *p;) {
        n += !strncmp(p, "writescope: ", 12);
        const char *nl = strchr(p, '\n');
        p = nl ? nl + 1 : NULL;
    }
    return n;
}

/* Waits up to max_s for `needle` in g_dir/<tag>.err while pid runs; 1 when seen. */
static int wait_for(const char *tag, const char *needle, int pid, double max_s)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s.err", g_dir, tag);
    for (double t = 0; t < max_s; t += 0.01) {
        char *e = th_slurp(path, NULL);
        const int seen = e && strstr(e, needle);
        free(e);
        if (seen)
            return 1;
        if (waitpid((pid_t)pid, NULL, WNOHANG) == pid)
            return 0;
        sleep_s(0.01);
    }
    return 0;
}

static void db_init(const char *db)
{
    char *e;
    const int st = run_child("init", (const char *[]){"db", "init", "--db", db, NULL},
                             (child_opts){0}, &e);
    cr_assert_eq(st, 0, "db init: %s", e);
    free(e);
}

static void assert_intact(const char *db, const char *what)
{
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM pragma_integrity_check WHERE "
                                   "integrity_check = 'ok'"),
                 1, "%s: integrity_check is not ok (seed %u)", what, g_seed);
}

/* Sim runs that read as finished but lack rows: their request count or steps (params)
 * differ from the rows stored with them. */
#define SIM_PARTIAL                                                                                \
    "SELECT count(*) FROM sim_runs r WHERE requests IS NOT (SELECT count(*) FROM sim_requests q " \
    "WHERE q.run_id = r.id) OR json_extract(params, '$.steps') IS NOT (SELECT count(*) FROM "     \
    "sim_steps s WHERE s.run_id = r.id)"
/* Plans without their points or results. */
#define PLAN_PARTIAL                                                                               \
    "SELECT count(*) FROM plan_runs p WHERE NOT EXISTS (SELECT 1 FROM plan_points q WHERE "       \
    "q.plan_id = p.id) OR NOT EXISTS (SELECT 1 FROM plan_results r WHERE r.plan_id = p.id)"
/* Runtime runs and simulations that no stored validation names: left by a validation that
 * did not finish (only validate writes into this database). */
#define VAL_ORPHAN_RUNS                                                                            \
    "SELECT count(*) FROM run_runs r WHERE NOT EXISTS (SELECT 1 FROM validate_runs v, "           \
    "json_each(v.params, '$.run_ids') j WHERE j.value = r.id)"
#define VAL_ORPHAN_SIMS                                                                            \
    "SELECT count(*) FROM sim_runs r WHERE NOT EXISTS (SELECT 1 FROM validate_runs v WHERE "      \
    "v.sim_run_id = r.id)"

/* Starts args, signals it after `delay` seconds (at once when it ended first), and returns
 * its exit status. */
static int kill_after(const char *tag, const char *const *args, double delay, int sig)
{
    const int pid = spawn(tag, args, (child_opts){0});
    sleep_s(delay);
    kill(pid, sig);
    return th_wait(pid);
}

static const char *signame(int sig) { return sig == SIGKILL ? "SIGKILL" : "SIGINT"; }

/* ---- killed at random points ---- */

Test(faults, calib_killed_stores_nothing)
{
    char db[128];
    snprintf(db, sizeof db, "%s/ws.db", g_dir);
    db_init(db);
    const char *args[] = {"calib", "--quick", "--only", "cpu", "--threads", "1", "--db", db,
                          NULL};
    const int sigs[] = {SIGKILL, SIGKILL, SIGINT};
    for (int i = 0; i < 3; i++) {
        const double d = draw(0.05, 1.5);
        const int st = kill_after("calib", args, d, sigs[i]);
        char what[96];
        snprintf(what, sizeof what, "calib, %s after %.3f s", signame(sigs[i]), d);
        cr_assert(st == 130 || st == 128 + SIGKILL, "%s: exit %d (seed %u)", what, st, g_seed);
        assert_intact(db, what);
        cr_assert_eq(th_count_file(db, "SELECT (SELECT count(*) FROM calib_runs) + (SELECT "
                                       "count(*) FROM samples) + (SELECT count(*) FROM fits)"),
                     0, "%s: rows of the killed run were stored (seed %u)", what, g_seed);
    }
}

#define SIM_ARGS(db)                                                                               \
    "sim", "--model", "qwen3-30b-a3b", "--gpu", "a100-40gb-pcie", "--host", "xeon-gold-5318y",    \
        "--arrivals", "poisson", "--rate", "20", "--requests", "1500", "--prompt-dist",           \
        "fixed:512", "--output-dist", "fixed:16", "--db", db

Test(faults, sim_killed_keeps_only_whole_runs)
{
    char db[128];
    snprintf(db, sizeof db, "%s/ws.db", g_dir);
    db_init(db);
    const char *args[] = {SIM_ARGS(db), NULL};
    for (int i = 0; i < 4; i++) {
        const int sig = i % 2 ? SIGINT : SIGKILL;
        const double d = draw(0.02, 1.0);
        const int st = kill_after("sim", args, d, sig);
        char what[96];
        snprintf(what, sizeof what, "sim --db, %s after %.3f s", signame(sig), d);
        cr_assert(st == 0 || st == 128 + sig, "%s: exit %d (seed %u)", what, st, g_seed);
        assert_intact(db, what);
        cr_assert_eq(th_count_file(db, SIM_PARTIAL), 0, "%s: a run without all its rows (seed %u)",
                     what, g_seed);
    }
}

#define PLAN_ARGS(db)                                                                              \
    "plan", "--model", "qwen3-30b-a3b", "--host", "xeon-gold-5318y", "--gpu",                      \
        "v100-32gb-pcie,a100-40gb-pcie", "--arrivals", "poisson", "--rate", "2", "--requests",    \
        "120", "--prompt-dist", "fixed:2048", "--output-dist", "fixed:64", "--slo-tpot", "300ms", \
        "--policy", "writescope,stream", "--fit-batches", "1,4", "--db", db

Test(faults, plan_killed_keeps_only_whole_plans)
{
    char db[128];
    snprintf(db, sizeof db, "%s/ws.db", g_dir);
    db_init(db);
    const char *args[] = {PLAN_ARGS(db), NULL};
    for (int i = 0; i < 4; i++) {
        const int sig = i % 2 ? SIGKILL : SIGINT;
        const double d = draw(0.02, 1.5);
        const int st = kill_after("plan", args, d, sig);
        char what[96];
        snprintf(what, sizeof what, "plan --db, %s after %.3f s", signame(sig), d);
        cr_assert(st == 0 || st == 128 + sig, "%s: exit %d (seed %u)", what, st, g_seed);
        assert_intact(db, what);
        cr_assert_eq(th_count_file(db, PLAN_PARTIAL), 0, "%s: a plan without its rows (seed %u)",
                     what, g_seed);
    }
}

static char g_model[128];

#define VAL_ARGS(db, output, repeat)                                                               \
    "validate", "--model", g_model, "--host", "xeon-gold-5318y", "--batch", "2", "--prompt",      \
        "1000", "--output", output, "--layers", "2", "--threads", "2", "--repeat", repeat,       \
        "--db", db

static void tiny_model(void)
{
    char path[128];
    th_write(g_dir, "tiny.json", th_tiny_moe, path, sizeof path);
    snprintf(g_model, sizeof g_model, "%s", path);
}

/* A validation killed anywhere leaves its runtime runs and simulation only with the
 * comparison that names them; killed during its second repeat, nothing at all. */
Test(faults, validate_killed_stores_all_or_nothing)
{
    char db[128];
    snprintf(db, sizeof db, "%s/ws.db", g_dir);
    db_init(db);
    tiny_model();
    const char *args[] = {VAL_ARGS(db, "150", "5"), NULL};
    /* During the second repeat: the first one is done. */
    int pid = spawn("val", args, (child_opts){0});
    const int seen = wait_for("val", "runtime run 2/5", pid, 20);
    kill(pid, SIGKILL);
    const int st = th_wait(pid);
    cr_assert(seen, "validate never reached its second repeat (exit %d)", st);
    assert_intact(db, "validate --db, SIGKILL in repeat 2");
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM run_runs"), 0,
                 "killed in repeat 2: the first repeat's run was stored on its own");
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM sim_runs"), 0);
    for (int i = 0; i < 4; i++) {
        const int sig = i % 2 ? SIGINT : SIGKILL;
        const double d = draw(0.02, 0.6);
        const int s2 = kill_after("val", args, d, sig);
        char what[96];
        snprintf(what, sizeof what, "validate --db, %s after %.3f s", signame(sig), d);
        cr_assert(s2 == 0 || s2 == 128 + sig, "%s: exit %d (seed %u)", what, s2, g_seed);
        assert_intact(db, what);
        cr_assert_eq(th_count_file(db, VAL_ORPHAN_RUNS), 0,
                     "%s: runtime runs without their validation (seed %u)", what, g_seed);
        cr_assert_eq(th_count_file(db, VAL_ORPHAN_SIMS), 0,
                     "%s: a simulation without its validation (seed %u)", what, g_seed);
    }
}

/* ---- a full disk ---- */

static long long file_size(const char *path)
{
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0, "%s", path);
    return (long long)sb.st_size;
}

/* One error line, and the rows asked about (sql) count 0. */
static void full_disk_case(const char *tag, const char *const *args, long long limit,
                           const char *db, const char *sql)
{
    char *e;
    const int st = run_child(tag, args, (child_opts){.fsize = limit}, &e);
    cr_assert_eq(st, 1, "%s under a %lld-byte file limit: exit %d, stderr: %s", tag, limit, st, e);
    cr_assert_eq(error_lines(e), 1, "%s: one error line: %s", tag, e);
    free(e);
    assert_intact(db, tag);
    cr_assert_eq(th_count_file(db, sql), 0, "%s: rows of the failed run were stored", tag);
}

Test(faults, full_disk_stores_nothing_that_looks_complete)
{
    char db[128];
    snprintf(db, sizeof db, "%s/ws.db", g_dir);
    db_init(db);
    tiny_model();
    /* 64 KiB: room to open the database and for a test write, not for a run's rows. */
    const long long small = 64 << 10;
    full_disk_case("sim", (const char *[]){SIM_ARGS(db), "--policy", "writescope", NULL}, small,
                   db, "SELECT count(*) FROM sim_runs");
    full_disk_case("plan",
                   (const char *[]){"plan", "--model", "qwen3-30b-a3b", "--host",
                                    "xeon-gold-5318y", "--gpu", "v100-32gb-pcie,a100-40gb-pcie",
                                    "--prompt", "16384", "--output", "16", "--slo-tpot", "300ms",
                                    "--policy", "all", "--fit-batches", "1,2,4,8,16,32", "--db",
                                    db, NULL},
                   small, db, "SELECT count(*) FROM plan_runs");
    /* The validation: what it writes (G, measured on a scratch database) is more than twice
     * the seeded file, and the limit leaves the file room for a third of it: written run by
     * run, the first repeats would fit; written whole, it does not. */
    char scratch[128];
    snprintf(scratch, sizeof scratch, "%s/scratch.db", g_dir);
    db_init(scratch);
    const long long size0 = file_size(scratch);
    char *e;
    const int st = run_child("val0", (const char *[]){VAL_ARGS(scratch, "150", "5"), NULL},
                             (child_opts){0}, &e);
    cr_assert_eq(st, 0, "%s", e);
    free(e);
    const long long grown = file_size(scratch) - size0;
    cr_assert_gt(grown, 2 * size0, "the validation writes %lld bytes: too little for this test",
                 grown);
    full_disk_case("validate", (const char *[]){VAL_ARGS(db, "150", "5"), NULL},
                   file_size(db) + grown / 3, db,
                   "SELECT (SELECT count(*) FROM run_runs) + (SELECT count(*) FROM sim_runs) + "
                   "(SELECT count(*) FROM validate_runs)");
}

/* A disk with no room at all: calib says so before it measures anything. */
Test(faults, calib_full_disk_refused_before_measuring)
{
    char db[128];
    snprintf(db, sizeof db, "%s/ws.db", g_dir);
    db_init(db);
    char *e;
    const int st = run_child("calib",
                             (const char *[]){"calib", "--quick", "--only", "cpu", "--threads",
                                              "1", "--db", db, NULL},
                             (child_opts){.fsize = 1024}, &e);
    cr_assert_eq(st, 1, "exit %d, stderr: %s", st, e);
    cr_assert_eq(th_lines(e), 1, "one line, before any measurement: %s", e);
    cr_assert_null(strstr(e, "calib:"), "it measured first: %s", e);
    cr_assert_neq(strstr(e, db), NULL, "names the database: %s", e);
    free(e);
    assert_intact(db, "calib under a 1 KiB file limit");
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM calib_runs"), 0);
}

/* ---- a read-only file or folder ---- */

/* The user the read-only cases run as: this one, or nobody when this is root (whom file
 * modes do not stop); -1 when root cannot become nobody (the test then skips). g_as: the
 * uid to switch the children to (0: none). */
static int g_as;
static int ro_user(void)
{
    if (geteuid() != 0)
        return (int)geteuid();
    char *e;
    const int st =
        run_child("probe", (const char *[]){"--help", NULL}, (child_opts){.uid = NOBODY}, &e);
    free(e);
    g_as = NOBODY;
    return st == 0 ? NOBODY : -1;
}

static void own(const char *path, int uid, mode_t mode)
{
    if (geteuid() == 0)
        cr_assert_eq(chown(path, (uid_t)uid, (gid_t)uid), 0, "chown %s", path);
    cr_assert_eq(chmod(path, mode), 0, "chmod %s", path);
}

/* Every command that writes the database refuses it, one line naming why, before work. */
static void writers_refuse(const char *db, const char *needle)
{
    const char *const cmds[][24] = {
        {"calib", "--quick", "--only", "cpu", "--db", db, NULL},
        {SIM_ARGS(db), "--policy", "writescope", NULL},
        {"plan", "--model", "qwen3-30b-a3b", "--host", "xeon-gold-5318y", "--gpu",
         "v100-32gb-pcie", "--prompt", "16384", "--output", "16", "--slo-tpot", "300ms",
         "--fit-batches", "none", "--db", db, NULL},
        {VAL_ARGS(db, "6", "1"), NULL},
        {"run", "--model", g_model, "--host", "xeon-gold-5318y", "--batch", "2", "--prompt",
         "300", "--output", "4", "--layers", "2", "--threads", "2", "--db", db, NULL},
        {"db", "init", "--db", db, NULL}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char *e;
        const int st = run_child("ro", cmds[i], (child_opts){.uid = g_as}, &e);
        cr_assert_eq(st, 1, "%s on %s: exit %d, stderr: %s", cmds[i][0], db, st, e);
        cr_assert_eq(th_lines(e), 1, "%s: one line before any work: %s", cmds[i][0], e);
        cr_assert_neq(strstr(e, needle), NULL, "%s: '%s' not in: %s", cmds[i][0], needle, e);
        free(e);
    }
}

Test(faults, read_only_file_or_folder_refused_before_work)
{
    const int uid = ro_user();
    if (uid < 0)
        cr_skip_test("running as root and cannot switch to user %d for the read-only cases",
                     NOBODY);
    tiny_model();
    own(g_dir, (int)geteuid(), 0755);
    own(g_model, (int)geteuid(), 0644);
    char sub[128], db[160], sub2[128], db2[160];
    /* A read-only file in a writable folder. */
    snprintf(sub, sizeof sub, "%s/rofile", g_dir);
    cr_assert_eq(mkdir(sub, 0755), 0);
    snprintf(db, sizeof db, "%s/ws.db", sub);
    db_init(db);
    own(sub, uid, 0755);
    own(db, uid, 0444);
    writers_refuse(db, "read-only");
    /* A writable file in a read-only folder: no journal can be made beside it. */
    snprintf(sub2, sizeof sub2, "%s/rodir", g_dir);
    cr_assert_eq(mkdir(sub2, 0755), 0);
    snprintf(db2, sizeof db2, "%s/ws.db", sub2);
    db_init(db2);
    own(db2, uid, 0644);
    own(sub2, uid, 0555);
    writers_refuse(db2, "not writable");
    /* Readers still read it, WAL mode and all. */
    char *e;
    const int st = run_child("show", (const char *[]){"db", "show", "--db", db2, NULL},
                             (child_opts){.uid = g_as}, &e);
    cr_assert_eq(st, 0, "db show in a read-only folder: %s", e);
    free(e);
    own(sub2, uid, 0755);
}

/* ---- concurrent use ---- */

/* While one sim --db writes a long run, readers (db show, db export) succeed at once. */
Test(faults, readers_work_while_sim_writes)
{
    char db[128];
    snprintf(db, sizeof db, "%s/ws.db", g_dir);
    db_init(db);
    const char *args[] = {"sim", "--model", "qwen3-30b-a3b", "--gpu", "a100-40gb-pcie",
                          "--host", "xeon-gold-5318y", "--policy", "writescope", "--arrivals",
                          "poisson", "--rate", "50", "--requests", "60000", "--prompt-dist",
                          "fixed:256", "--output-dist", "fixed:8", "--db", db, NULL};
    const int pid = spawn("writer", args, (child_opts){0});
    /* Each reader gives up after 300 ms: it must never wait for the writer. */
    const child_opts ro = {.env = "WRITESCOPE_DB_TIMEOUT_MS=300"};
    int during = 0, status = -1;
    for (int i = 0; status < 0; i++) {
        char *e;
        const char *show[] = {"db", "show", "--db", db, NULL};
        const char *exp[] = {"db", "export", "--db", db, "--format", "csv", "--table", "sim_runs",
                             NULL};
        const int st = run_child("reader", i % 2 ? exp : show, ro, &e);
        cr_assert_eq(st, 0, "reader %d while sim --db writes: exit %d, %s", i, st, e);
        free(e);
        int ws;
        if (waitpid((pid_t)pid, &ws, WNOHANG) == pid)
            status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        else
            during++;
    }
    cr_assert_eq(status, 0, "the writer failed");
    cr_assert_geq(during, 3, "only %d reads while the writer ran", during);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM sim_requests"), 60000);
}

/* A second writer waits for the first writer's transaction (longer than the 5 s it used to
 * give up after) and then writes. */
Test(faults, second_writer_waits_for_the_first)
{
    char db[128];
    snprintf(db, sizeof db, "%s/ws.db", g_dir);
    db_init(db);
    sqlite3 *h;
    cr_assert_eq(sqlite3_open(db, &h), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    const int pid = spawn("second", (const char *[]){"db", "init", "--db", db, NULL},
                          (child_opts){0});
    sleep_s(6);
    int ws = 0;
    const int waiting = waitpid((pid_t)pid, &ws, WNOHANG) == 0;
    sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(h);
    const int st = waiting ? th_wait(pid) : WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    char path[128];
    snprintf(path, sizeof path, "%s/second.err", g_dir);
    char *e = th_slurp(path, NULL);
    cr_assert(waiting, "the second writer gave up while the first held the lock: %s", e);
    cr_assert_eq(st, 0, "exit %d: %s", st, e);
    free(e);
}
