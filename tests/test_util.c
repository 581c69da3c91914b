/* test_util: the small shared helpers (common/ws_err.c, ws_util.c, ws_dtype.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "ws_dtype.h"
#include "ws_err.h"
#include "ws_util.h"

Test(util, err_one_line_and_prefix)
{
    ws_err err = {0};
    cr_assert_eq(ws_err_set(&err, WS_EPARSE, "bad\nvalue %d", 3), WS_EPARSE);
    cr_assert_str_eq(err.msg, "bad value 3");
    ws_err_prefix(&err, "file %s", "x.json");
    cr_assert_str_eq(err.msg, "file x.json: bad value 3");
    cr_assert_eq(ws_err_set(NULL, WS_EIO, "dropped"), WS_EIO);
}

Test(util, dtype_names)
{
    ws_dtype t;
    cr_assert_eq(ws_dtype_parse("bfloat16", &t), 0);
    cr_assert_eq(t, WS_DT_BF16);
    cr_assert_eq(ws_dtype_parse("fp16", &t), 0);
    cr_assert_eq(ws_dtype_size(t), 2);
    cr_assert_eq(ws_dtype_size(WS_DT_FP8), 1);
    cr_assert_eq(ws_dtype_parse("int4", &t), -1);
}

Test(util, read_file_and_root)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    th_write(dir, "a.txt", "hello", path, sizeof path);
    size_t len;
    ws_err err = {0};
    char *s = ws_read_file(path, &len, &err);
    cr_assert_not_null(s);
    cr_assert_eq(len, 5);
    cr_assert_str_eq(s, "hello");
    free(s);
    cr_assert_null(ws_read_file("/no/such/file", &len, &err));
    cr_assert_eq(err.code, WS_EIO);
    char root[4096], models[4200];
    cr_assert_eq(ws_root_dir(root, sizeof root, &err), 0, "%s", err.msg);
    snprintf(models, sizeof models, "%s/models", root);
    cr_assert(ws_dir_exists(models));
}

/* A FIFO without a writer, a folder and an over-cap file are refused, promptly: a reader
 * that blocks on the FIFO's open is killed by the alarm and the test fails. (An alarm, not
 * Criterion's .timeout: two tests with timeouts at once leak inside libcriterion under
 * ASan.) */
Test(util, read_file_refuses_fifo_folder_and_huge)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    ws_err err = {0};
    size_t len;
    snprintf(path, sizeof path, "%s/fifo", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    alarm(20);
    cr_assert_null(ws_read_file(path, &len, &err));
    alarm(0);
    cr_assert_eq(err.code, WS_EIO);
    cr_assert_neq(strstr(err.msg, "not a regular file"), NULL, "%s", err.msg);
    cr_assert_neq(strstr(err.msg, path), NULL, "%s", err.msg);
    unlink(path);

    ws_err_clear(&err);
    cr_assert_null(ws_read_file(dir, &len, &err));
    cr_assert_neq(strstr(err.msg, "not a regular file"), NULL, "%s", err.msg);

    snprintf(path, sizeof path, "%s/huge.json", dir);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(ftruncate(fileno(f), (off_t)WS_READ_FILE_MAX + 1), 0); /* sparse */
    fclose(f);
    ws_err_clear(&err);
    cr_assert_null(ws_read_file(path, &len, &err));
    cr_assert_eq(err.code, WS_EINVAL);
    cr_assert_neq(strstr(err.msg, "64 MiB"), NULL, "%s", err.msg);
    unlink(path);

    /* Up to the cap is read whole. */
    th_write(dir, "ok.json", "{\"a\": 1}", path, sizeof path);
    char *s = ws_read_file(path, &len, &err);
    cr_assert_not_null(s, "%s", err.msg);
    cr_assert_eq(len, 8);
    free(s);
    unlink(path);
    rmdir(dir);
}

/* ws_open_regular, the streaming readers' open: the same refusals, and a blocking
 * descriptor on a regular file within the cap. */
Test(util, open_regular_refuses_fifo_folder_and_over_cap)
{
    char dir[64], path[256];
    th_tmpdir(dir, sizeof dir);
    ws_err err = {0};
    snprintf(path, sizeof path, "%s/fifo", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    alarm(20);
    cr_assert_eq(ws_open_regular(path, 1 << 20, &err), -1);
    alarm(0);
    cr_assert_neq(strstr(err.msg, "not a regular file"), NULL, "%s", err.msg);
    unlink(path);
    ws_err_clear(&err);
    cr_assert_eq(ws_open_regular(dir, 1 << 20, &err), -1);
    cr_assert_neq(strstr(err.msg, "not a regular file"), NULL, "%s", err.msg);

    th_write(dir, "t.csv", "0123456789", path, sizeof path);
    ws_err_clear(&err);
    cr_assert_eq(ws_open_regular(path, 9, &err), -1);
    cr_assert_eq(err.code, WS_EINVAL);
    int fd = ws_open_regular(path, 10, &err);
    cr_assert_geq(fd, 0, "%s", err.msg);
    char buf[16];
    cr_assert_eq(read(fd, buf, sizeof buf), 10);
    close(fd);
    unlink(path);
    rmdir(dir);
}

/* ws_grow: room for element n, doubling from `first`, contents kept, nothing changed below cap. */
Test(util, grow_doubles_and_keeps)
{
    int *v = NULL;
    size_t cap = 0;
    for (size_t n = 0; n < 1000; n++) {
        cr_assert_eq(ws_grow((void **)&v, &cap, n, sizeof *v, 16), 0);
        cr_assert_gt(cap, n);
        v[n] = (int)n;
    }
    cr_assert_eq(cap, 1024, "16 doubled six times");
    for (size_t n = 0; n < 1000; n++)
        cr_assert_eq(v[n], (int)n);
    int *same = v;
    cr_assert_eq(ws_grow((void **)&v, &cap, 500, sizeof *v, 16), 0);
    cr_assert_eq(v, same, "room already there: no realloc");
    cr_assert_eq(ws_grow((void **)&v, &cap, 5000, sizeof *v, 16), 0);
    cr_assert_eq(cap, 8192, "a jump past double grows until it fits");
    free(v);
}
