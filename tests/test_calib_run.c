/* test_calib_run: a whole calibration as one call (calib/calib_run.h), without measuring:
 * --only's choice of parts against this machine's devices, and a run stopped before its
 * first sweep stores nothing, having said first (no device) that it calibrates the CPU. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "calib_run.h"
#include "helpers.h"
#include "store.h"

Test(calib_run, only_picks_the_parts)
{
    ws_calib_run_cfg cfg = {0};
    ws_err err = {0};
    cr_assert_eq(ws_calib_run_devices(&cfg, NULL, &err), 0, "%s", err.msg);
    cr_assert_str_eq(cfg.scope, "all");
    cr_assert(cfg.do_cpu && cfg.do_gpu == cfg.has_gpu && cfg.do_link == cfg.has_gpu);
    cr_assert_eq(ws_calib_run_devices(&cfg, "cpu", &err), 0, "%s", err.msg);
    cr_assert_str_eq(cfg.scope, "cpu");
    cr_assert(cfg.do_cpu && !cfg.do_gpu && !cfg.do_link);
    const int rc = ws_calib_run_devices(&cfg, "link", &err);
    if (cfg.has_gpu) {
        cr_assert_eq(rc, 0, "%s", err.msg);
        cr_assert(!cfg.do_cpu && !cfg.do_gpu && cfg.do_link);
    } else {
        cr_assert_eq(rc, WS_EDEVICE);
        cr_assert_neq(strstr(err.msg, "--only link: no CUDA device"), NULL, "%s", err.msg);
    }
}

static void count_notice(void *ctx, const char *line)
{
    cr_assert_neq(strstr(line, "calibrating the CPU only"), NULL, "%s", line);
    ++*(int *)ctx;
}

Test(calib_run, a_stopped_run_stores_nothing)
{
    char dir[64], db[128];
    th_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/c.db", dir);
    ws_store *st;
    ws_err err = {0};
    cr_assert_eq(ws_store_open(db, &st, &err), 0, "%s", err.msg);
    static volatile sig_atomic_t stop = SIGINT;
    int notices = 0;
    ws_calib_run_cfg cfg = {
        .quick = 1, .threads = 1, .stop = &stop, .notice = count_notice, .notice_ctx = &notices};
    cr_assert_eq(ws_calib_run_devices(&cfg, NULL, &err), 0, "%s", err.msg);
    cfg.do_gpu = cfg.do_link = 0; /* the CPU's first sweep sees the stop */
    ws_calib_run_out out;
    cr_assert_eq(ws_calib_run_exec(st, &cfg, &out, &err), WS_ECANCELED);
    cr_assert_str_eq(err.msg, "calibration interrupted; nothing was written");
    cr_assert(out.measured);
    cr_assert_eq(out.run_id, 0);
    cr_assert_eq(notices, !cfg.has_gpu);
    ws_store_close(st);
    cr_assert_eq(th_count_file(db, "SELECT count(*) FROM calib_runs"), 0);
}
