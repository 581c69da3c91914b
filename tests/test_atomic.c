/* test_atomic: whole-or-nothing file writes (common/ws_atomic.c): a regular file is
 * replaced whole, links, FIFOs, devices and folders are refused, and no failure leaves a
 * temporary file behind; the up-front check; the cleanup a signal handler runs; a full
 * disk fails the commit. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "ws_atomic.h"

Test(atomic, replaces_a_regular_file_whole)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "out.txt", "old\n", path, sizeof path);
    ws_atomic_file a;
    ws_err err = {0};
    cr_assert_eq(ws_atomic_open(&a, path, &err), 0, "%s", err.msg);
    fputs("new text\n", a.f);
    cr_assert(th_same_file_bytes(path, "old\n", 4), "the target changed before the commit");
    cr_assert_eq(th_dir_entries(dir), 2); /* target + temporary file */
    cr_assert_eq(ws_atomic_commit(&a, &err), 0, "%s", err.msg);
    cr_assert(th_same_file_bytes(path, "new text\n", 9));
    cr_assert_eq(th_dir_entries(dir), 1);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0044, 0044, "an export is readable like any file (mode %o)",
                 st.st_mode & 0777);
    /* A new file in a folder given relative to the working folder. */
    cr_assert_eq(chdir(dir), 0);
    cr_assert_eq(ws_atomic_open(&a, "fresh.txt", &err), 0, "%s", err.msg);
    fputs("x", a.f);
    cr_assert_eq(ws_atomic_commit(&a, &err), 0, "%s", err.msg);
    cr_assert(th_same_file_bytes("fresh.txt", "x", 1));
    cr_assert_eq(th_dir_entries("."), 2);
}

Test(atomic, abort_leaves_nothing)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/out.txt", dir);
    ws_atomic_file a;
    ws_err err = {0};
    cr_assert_eq(ws_atomic_open(&a, path, &err), 0, "%s", err.msg);
    fputs("half", a.f);
    ws_atomic_abort(&a);
    ws_atomic_abort(&a); /* twice is harmless */
    cr_assert_eq(th_dir_entries(dir), 0);
}

Test(atomic, refuses_what_is_not_a_regular_file)
{
    char dir[64], target[256], link[256], fifo[256], folder[256];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "target", "keep", target, sizeof target);
    snprintf(link, sizeof link, "%s/link", dir);
    cr_assert_eq(symlink(target, link), 0);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    cr_assert_eq(mkfifo(fifo, 0644), 0);
    snprintf(folder, sizeof folder, "%s/folder", dir);
    cr_assert_eq(mkdir(folder, 0755), 0);
    char dev[256];
    snprintf(dev, sizeof dev, "%s/dev", dir);
    const char *const paths[] = {link, fifo, folder, dev};
    const char *const what[] = {"a symbolic link", "a FIFO", "a folder", th_device_like(dev)};
    for (int i = 0; i < 4; i++) {
        ws_atomic_file a;
        ws_err err = {0};
        cr_assert_eq(ws_atomic_open(&a, paths[i], &err), WS_EIO, "%s", paths[i]);
        cr_assert_neq(strstr(err.msg, what[i]), NULL, "%s", err.msg);
        cr_assert_null(a.f);
    }
    cr_assert_eq(th_dir_entries(dir), 5);
    cr_assert(th_same_file_bytes(target, "keep", 4));
    cr_assert(th_is_device_like(dev));
}

/* A link planted at the target while the temporary file is written: the commit refuses
 * it, removes the temporary file and leaves the link. */
Test(atomic, target_swapped_for_a_link_before_commit)
{
    char dir[64], target[256], path[256];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "victim", "keep", target, sizeof target);
    snprintf(path, sizeof path, "%s/out", dir);
    ws_atomic_file a;
    ws_err err = {0};
    cr_assert_eq(ws_atomic_open(&a, path, &err), 0, "%s", err.msg);
    fputs("data", a.f);
    cr_assert_eq(symlink(target, path), 0);
    cr_assert_eq(ws_atomic_commit(&a, &err), WS_EIO);
    cr_assert_neq(strstr(err.msg, "symbolic link"), NULL, "%s", err.msg);
    cr_assert_eq(th_dir_entries(dir), 2); /* victim + link, no temporary file */
    struct stat st;
    cr_assert(lstat(path, &st) == 0 && S_ISLNK(st.st_mode));
    cr_assert(th_same_file_bytes(target, "keep", 4));
}

/* A folder that cannot take the temporary file: a clear error, nothing left. */
Test(atomic, missing_folder)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/none/out", dir);
    ws_atomic_file a;
    ws_err err = {0};
    cr_assert_eq(ws_atomic_open(&a, path, &err), WS_EIO);
    cr_assert_neq(strstr(err.msg, path), NULL, "%s", err.msg);
    cr_assert_eq(th_dir_entries(dir), 0);
}

/* The up-front check: a missing folder, a target that is not a regular file, a folder that
 * is a file are each refused naming the path; an absent target in a real folder and a
 * regular file pass, and nothing is created. */
Test(atomic, check_before_any_work)
{
    char dir[64], file[256], link[256], p[300];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "file", "x", file, sizeof file);
    snprintf(link, sizeof link, "%s/link", dir);
    cr_assert_eq(symlink(file, link), 0);
    ws_err err = {0};
    snprintf(p, sizeof p, "%s/new.csv", dir);
    cr_assert_eq(ws_atomic_check(p, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_atomic_check(file, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_atomic_check(link, &err), WS_EIO);
    cr_assert_neq(strstr(err.msg, "a symbolic link"), NULL, "%s", err.msg);
    snprintf(p, sizeof p, "%s/none/out.csv", dir);
    cr_assert_eq(ws_atomic_check(p, &err), WS_EIO);
    cr_assert_neq(strstr(err.msg, p), NULL, "%s", err.msg);
    snprintf(p, sizeof p, "%s/file/out.csv", dir);
    cr_assert_eq(ws_atomic_check(p, &err), WS_EIO);
    cr_assert_neq(strstr(err.msg, "not a folder"), NULL, "%s", err.msg);
    cr_assert_eq(ws_atomic_check("", &err), WS_EINVAL);
    cr_assert_eq(th_dir_entries(dir), 2);
}

/* What a signal handler calls: every temporary file being written goes, a registered
 * private folder goes with its files, the registered child is stopped; files committed
 * or aborted before are not touched. */
Test(atomic, cleanup_removes_what_is_being_written)
{
    char dir[64], path[256], done[256], priv[300], inner[400];
    th_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/out.csv", dir);
    snprintf(done, sizeof done, "%s/done.csv", dir);
    ws_err err = {0};
    ws_atomic_file a, b;
    cr_assert_eq(ws_atomic_open(&b, done, &err), 0, "%s", err.msg);
    fputs("kept", b.f);
    cr_assert_eq(ws_atomic_commit(&b, &err), 0, "%s", err.msg);
    cr_assert_eq(ws_atomic_open(&a, path, &err), 0, "%s", err.msg);
    fputs("half", a.f);
    fflush(a.f);
    snprintf(priv, sizeof priv, "%s/private", dir);
    cr_assert_eq(mkdir(priv, 0700), 0);
    for (int i = 0; i < 300; i++) { /* more entries than one getdents64 buffer holds */
        char name[32];
        snprintf(name, sizeof name, "data-file-%03d.dat", i);
        th_write(priv, name, "1 2\n", inner, sizeof inner);
    }
    cr_assert_eq(ws_atomic_live_add(priv, 1), 0);
    const pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        for (;;)
            pause();
    }
    ws_atomic_live_child(child);
    cr_assert_eq(th_dir_entries(dir), 3); /* done.csv, the temporary file, the folder */
    ws_atomic_cleanup();
    cr_assert_eq(th_dir_entries(dir), 1, "only the committed file is left");
    cr_assert(th_same_file_bytes(done, "kept", 4));
    cr_assert_eq(kill(child, 0), -1, "the child was stopped and reaped");
    ws_atomic_abort(&a); /* its file is gone already: harmless */
    cr_assert_eq(th_dir_entries(dir), 1);
}

/* A commit checks its writes: a write past a file-size limit (as on a full disk) fails the
 * commit with the cause, the target is as it was and no temporary file is left. */
Test(atomic, full_disk_fails_the_commit)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "out.txt", "old\n", path, sizeof path);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        const struct rlimit rl = {1024, 1024};
        setrlimit(RLIMIT_FSIZE, &rl);
        ws_atomic_file a;
        ws_err err = {0};
        if (ws_atomic_open(&a, path, &err))
            _exit(10);
        for (int i = 0; i < 1000; i++)
            fputs("0123456789\n", a.f);
        const int rc = ws_atomic_commit(&a, &err);
        _exit(rc == WS_EIO && strstr(err.msg, path) && strstr(err.msg, "too large") ? 0 : 11);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
    cr_assert(th_same_file_bytes(path, "old\n", 4));
    cr_assert_eq(th_dir_entries(dir), 1);
}
