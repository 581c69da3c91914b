/* calibdb: calibration runs in the database -- hosts, runs, raw samples and fits -- as
 * typed rows, so the calibrator (calib/) fills and reads plain structs and never sees SQL.
 *
 * Writers (ws_calibdb_put_*) run inside the caller's transaction (ws_store_begin): the
 * calibrator stores a whole run, and the profiles rebuilt from it, or nothing. Readers
 * return heap arrays the caller frees. Numbers a row leaves unset (a transfer fit has no
 * peak flop rate, a factor no fixed cost) are NAN here and NULL in the table. Text longer
 * than a field (only a hand-edited database has such) is cut to the field. */
#ifndef WS_CALIBDB_H
#define WS_CALIBDB_H

#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a sample or fit measures: device, operation, dtype, attention kind. */
typedef struct ws_calibdb_key {
    char device[16];    /* cpu | gpu | link */
    char op[48];        /* attn, attn_1t, membw_read, membw_triad, expert_gemm, h2d, ... */
    char dtype[16];     /* bf16 | fp16 | fp32 | '' */
    char attn_kind[24]; /* gqa | mla | mla-sparse | '' */
} ws_calibdb_key;

/* The machine a run measured (calib/fingerprint.h detects it). */
typedef struct ws_calibdb_host {
    char fingerprint[17];
    char cpu_model[96];
    int cpu_cores;
    double mem_bytes;
    char isa[160];
    int has_gpu; /* 0: the gpu_* fields and pcie_link are NULL */
    char gpu_name[128];
    char gpu_cc[8];
    double gpu_mem_bytes;
    char gpu_driver[16];
    char pcie_link[32];
} ws_calibdb_host;

typedef struct ws_calibdb_run {
    long long id, host_id;
    char tool_version[16];
    char mode[16];  /* quick | default */
    char scope[16]; /* all | cpu | gpu | link */
    char started_at[32], finished_at[32];
    char note[256];
    int n_samples;    /* read: samples stored with the run */
    double drift_pct; /* the reference probe's drift over the run (NAN: none) */
    int remeasured;   /* 1: measured again because the probe drifted */
    int flagged;      /* 1: still drifting when measured again: no fit of it is used */
    double probe_bw;  /* the reference probe's read rate over the run (its estimate), B/s */
} ws_calibdb_run;

/* One measured configuration: median and spread of its timed repeats. */
typedef struct ws_calibdb_sample {
    ws_calibdb_key key;
    char params[192]; /* JSON object: ctx, batch, threads, bytes, model, ... */
    double flops, bytes;
    int repeats;
    double t_median, t_min, t_max; /* seconds */
    double t_est;                  /* the estimate fits use: median of the fastest half (0:
                                    * not kept; the median stands in) */
    double spread_pct;             /* interquartile range of the repeats / t_est (NAN: not
                                    * kept) */
} ws_calibdb_sample;

typedef struct ws_calibdb_fit {
    long long id, run_id; /* read only */
    ws_calibdb_key key;
    char form[12];    /* roofline | transfer | factor | serial | saturating | piecewise */
    double c0, c0_se; /* seconds */
    double peak_flops, peak_flops_se, bandwidth, bandwidth_se, factor, factor_se;
    double r2, heldout_mape_pct;
    int n_samples, good, p_fixed, w_fixed, compute_bound;
    char note[160];
    double spread_pct;        /* the samples' median spread of repeats (NAN: not kept) */
    char fallback[96];        /* what the cost model uses without this fit ("": none) */
    double fallback_mape_pct; /* its error on the same samples (NAN: none) */
    char pieces[320];         /* piecewise: the pieces below the top one, a JSON array of
                               * {upto, c0, peak_flops, bandwidth} ("": one piece) */
} ws_calibdb_fit;

/* A file an imported calibration read (calib import): what, by whom, where from. */
typedef struct ws_calibdb_source {
    char path[1024];
    char sha256[65];
    long long bytes;
    int rows;
    char what[160];       /* the operations it holds */
    char measured_by[96]; /* who measured: "Vidur (microsoft/vidur)" */
    char tool[64];        /* "PyTorch Kineto profiler" */
    char gpu[128];        /* the device */
    char dtype[16];
    char licence[160];
} ws_calibdb_source;

/* Writing a run, inside the caller's transaction. The host row is shared by every run
 * on the same fingerprint; its id comes back in *host_id. */
int ws_calibdb_put_host(ws_store *s, const ws_calibdb_host *h, long long *host_id, ws_err *err);
/* Inserts run (its host_id set) and returns its id in run->id. */
int ws_calibdb_put_run(ws_store *s, ws_calibdb_run *run, ws_err *err);
int ws_calibdb_put_samples(ws_store *s, long long run_id, const ws_calibdb_sample *x, int n,
                           ws_err *err);
int ws_calibdb_put_fits(ws_store *s, long long run_id, const ws_calibdb_fit *f, int n, ws_err *err);
int ws_calibdb_put_sources(ws_store *s, long long run_id, const ws_calibdb_source *src, int n,
                           ws_err *err);
/* Records that profile `name` was rebuilt from host_id's fits as of run run_id. */
int ws_calibdb_link_profile(ws_store *s, const char *name, long long host_id, long long run_id,
                            ws_err *err);

/* The newest good fit of every key that host_id's runs fitted on one of the n devices,
 * ordered by device, op, attention kind, dtype. *out is NULL when there is none. */
int ws_calibdb_newest_good_fits(ws_store *s, long long host_id, const char *const *devices,
                                int n_devices, ws_calibdb_fit **out, int *n_out, ws_err *err);

/* The reference probe's median read rate (B/s) of host_id's newest unflagged run that
 * probed, and that run's id; WS_ENOTFOUND when there is none. */
int ws_calibdb_newest_probe(ws_store *s, long long host_id, double *bw, long long *run_id,
                            ws_err *err);

/* Reading: run run_id (0 = the newest) and its host; WS_ENOTFOUND when there is none. */
int ws_calibdb_get_run(ws_store *s, long long run_id, ws_calibdb_run *run, ws_calibdb_host *host,
                       ws_err *err);
/* The fits of a run, in the order they were stored. */
int ws_calibdb_get_fits(ws_store *s, long long run_id, ws_calibdb_fit **out, int *n_out,
                        ws_err *err);
/* The files an imported run read, in the order stored (none for a calibrator's run). */
int ws_calibdb_get_sources(ws_store *s, long long run_id, ws_calibdb_source **out, int *n_out,
                           ws_err *err);
/* The samples of a run: all in the order stored (key NULL), or those of one key by bytes. */
int ws_calibdb_get_samples(ws_store *s, long long run_id, const ws_calibdb_key *key,
                           ws_calibdb_sample **out, int *n_out, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
