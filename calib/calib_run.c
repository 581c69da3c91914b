/* calib_run: a whole calibration, fingerprint to stored run (see calib_run.h). */
#include "calib_run.h"

#include <stdio.h>
#include <string.h>

#include "attn_cpu.h"
#include "backend.h"
#include "ws_util.h"

int ws_calib_run_devices(ws_calib_run_cfg *cfg, const char *only, ws_err *err)
{
    ws_err derr = {0};
    const ws_backend *cuda = ws_backend_cuda(&derr);
    cfg->has_gpu = cuda && cuda->device_count(&derr) > 0;
    snprintf(cfg->no_gpu, sizeof cfg->no_gpu, "%s", cfg->has_gpu ? "" : derr.msg);
    cfg->only = only != NULL;
    snprintf(cfg->scope, sizeof cfg->scope, "%s", only ? only : "all");
    cfg->do_cpu = cfg->do_gpu = cfg->do_link = 0;
    if (!only) {
        cfg->do_cpu = 1;
        cfg->do_gpu = cfg->do_link = cfg->has_gpu;
        return 0;
    }
    if (!strcmp(only, "cpu")) {
        cfg->do_cpu = 1;
        return 0;
    }
    if (!cfg->has_gpu)
        return ws_err_set(err, WS_EDEVICE, "--only %s: no CUDA device (%s); nothing to calibrate",
                          only, cfg->no_gpu[0] ? cfg->no_gpu : "none found");
    cfg->do_gpu = !strcmp(only, "gpu");
    cfg->do_link = !strcmp(only, "link");
    return 0;
}

/* The run's header: this machine, mode, scope, the note of a CPU-only run, the start. */
static int run_begin(const ws_calib_run_cfg *cfg, ws_calib_run *run, ws_err *err)
{
    ws_isa isa;
    int rc;
    if ((rc = ws_isa_resolve(WS_ISA_AUTO, &isa, err)) ||
        (rc = ws_host_fp_detect(ws_isa_name(isa), &run->host, err)))
        return rc;
    snprintf(run->mode, sizeof run->mode, "%s", cfg->quick ? "quick" : "default");
    snprintf(run->scope, sizeof run->scope, "%s", cfg->scope);
    if (!cfg->only && !cfg->has_gpu) {
        snprintf(run->note, sizeof run->note, "CPU only: %.200s",
                 cfg->no_gpu[0] ? cfg->no_gpu : "no CUDA device");
        if (cfg->notice) {
            char line[WS_ERR_MSG_MAX + 64];
            snprintf(line, sizeof line, "no CUDA device (%s): calibrating the CPU only",
                     cfg->no_gpu[0] ? cfg->no_gpu : "none found");
            cfg->notice(cfg->notice_ctx, line);
        }
    }
    ws_utc_now(run->started_at, sizeof run->started_at);
    return 0;
}

int ws_calib_run_exec(ws_store *s, const ws_calib_run_cfg *cfg, ws_calib_run_out *out,
                      ws_err *err)
{
    memset(out, 0, sizeof *out);
    ws_calib_run run;
    ws_calib_run_init(&run);
    int rc = run_begin(cfg, &run, err);
    if (rc)
        return rc;
    const ws_calib_opts o = {.quick = cfg->quick,
                             .threads = cfg->threads,
                             .do_cpu = cfg->do_cpu,
                             .do_gpu = cfg->do_gpu,
                             .do_link = cfg->do_link,
                             .progress = cfg->progress,
                             .progress_ctx = cfg->progress_ctx,
                             .stop = cfg->stop};
    out->measured = 1;
    rc = ws_calib_measure(&o, &run, err);
    if (!rc)
        rc = ws_calib_fit_all(&run, err);

    ws_utc_now(run.finished_at, sizeof run.finished_at);
    /* ws_calib_store holds a stop that lands during the commit until it is done: the run is
     * stored whole, and then it is not "interrupted". */
    if (!rc && !(cfg->stop && *cfg->stop))
        rc = ws_calib_store(s, &run, &out->run_id, err);
    else if (!rc)
        rc = ws_err_set(err, WS_ECANCELED, "calibration interrupted; nothing was written");
    ws_calib_run_free(&run);
    return rc;
}
