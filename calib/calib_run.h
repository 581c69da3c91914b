/* calib_run: a whole calibration of this machine as one call -- what `writescope calib
 * [run]` does between parsing its options and printing the stored run.
 *
 * Two steps, in the order the command takes them: ws_calib_run_devices says what a run
 * will measure (--only's choice against the devices this machine has; asking for a GPU or
 * the link without a CUDA device is an error before any database is touched), then
 * ws_calib_run_exec fingerprints the machine, measures (calib/measure.h), fits every key
 * (calib.h) and stores the run in the store it is given, in one transaction. A run stopped
 * through cfg->stop (the CLI sets it from SIGINT/SIGTERM) or failing before the commit
 * stores nothing; a stop that arrives during the commit waits for it.
 *
 * Nothing is printed here: progress goes through cfg->progress, and the one line a user
 * should see before the minutes of measuring (no CUDA device: the CPU alone) through
 * cfg->notice. The caller reads the stored run back with ws_calib_show to print it. */
#ifndef WS_CALIB_RUN_H
#define WS_CALIB_RUN_H

#include <signal.h>

#include "calib.h"
#include "measure.h"
#include "store.h"
#include "ws_err.h"

typedef struct ws_calib_run_cfg {
    /* what to measure: ws_calib_run_devices sets these */
    int do_cpu, do_gpu, do_link;
    int only;                      /* 1: one part was asked for (scope names it) */
    int has_gpu;                   /* a CUDA device was found */
    char scope[16];                /* all | cpu | gpu | link, as the run is stored */
    char no_gpu[WS_ERR_MSG_MAX];   /* without a device: why, as the backend said ("": none) */
    /* how */
    int quick;                     /* the coarse sweep */
    int threads;                   /* worker threads for the CPU kernels; 0: every CPU */
    volatile sig_atomic_t *stop;   /* set asynchronously to stop: WS_ECANCELED */
    ws_calib_progress_fn progress; /* NULL: none */
    void *progress_ctx;
    void (*notice)(void *ctx, const char *line); /* before measuring; NULL: none */
    void *notice_ctx;
} ws_calib_run_cfg;

typedef struct ws_calib_run_out {
    long long run_id; /* the stored run */
    int measured;     /* 1 once measuring began (progress may have been shown) */
} ws_calib_run_out;

/* The parts a run measures: only NULL, the CPU and, with a CUDA device, the GPU and the
 * link; else "cpu", "gpu" or "link" alone. WS_EDEVICE when it names the GPU or the link and
 * there is no device. */
int ws_calib_run_devices(ws_calib_run_cfg *cfg, const char *only, ws_err *err);

/* Measures, fits and stores one run of cfg's parts into s; its id in out->run_id. */
int ws_calib_run_exec(ws_store *s, const ws_calib_run_cfg *cfg, ws_calib_run_out *out,
                      ws_err *err);

#endif
