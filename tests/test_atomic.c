/* test_atomic: whole-or-nothing file writes (common/ws_atomic.c): a regular file is
 * replaced whole, links, FIFOs, devices and folders are refused, and no failure leaves a
 * temporary file behind. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
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
    const char *const paths[] = {link, fifo, folder, "/dev/null"};
    const char *const what[] = {"a symbolic link", "a FIFO", "a folder", "a device"};
    for (int i = 0; i < 4; i++) {
        ws_atomic_file a;
        ws_err err = {0};
        cr_assert_eq(ws_atomic_open(&a, paths[i], &err), WS_EIO, "%s", paths[i]);
        cr_assert_neq(strstr(err.msg, what[i]), NULL, "%s", err.msg);
        cr_assert_null(a.f);
    }
    cr_assert_eq(th_dir_entries(dir), 4);
    cr_assert(th_same_file_bytes(target, "keep", 4));
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
