/* calib: a calibration run -- its samples, its fits, and their storage.
 *
 * A run collects timed samples (one row per measured configuration, median and spread of
 * its repeats), groups them by key (device, op, dtype, attention kind), fits each group
 * (calib/fit.c) and writes host, run, samples and fits in ONE transaction, then rebuilds
 * the host's fitted profile "host:<fingerprint>" (and "gpu:<name>") from the newest good
 * fit of every key. A run that is interrupted or fails before the commit leaves the
 * database exactly as it was. A run may also be imported (calib/import.h): then its samples
 * are someone else's measurements of a GPU, its host is that GPU (no CPU), its sources say
 * which files they came from, and its GPU profile has its own name. The rows themselves are
 * written and read by store/calibdb.c (the only code that sees SQL); the measurements are in
 * calib/measure.c; a whole run, measured to stored, is calib/calib_run.h. */
#ifndef WS_CALIB_H
#define WS_CALIB_H

#include <jansson.h>
#include <signal.h>

#include "calibdb.h"
#include "fingerprint.h"
#include "fit.h"
#include "store.h"

/* What a sample measures (device, op, dtype, attention kind) and one measured
 * configuration: the database's row types (store/calibdb.h). */
typedef ws_calibdb_key ws_calib_key;
typedef ws_calibdb_sample ws_calib_sample;

typedef struct ws_calib_fit {
    ws_calib_key key;
    ws_fit_result r;
    double spread_pct;        /* median spread of the key's samples (NAN: none kept) */
    char fallback[96];        /* what the cost model would use without the fit ("": none) */
    double fallback_mape_pct; /* that fallback's error on the key's samples (NAN: none) */
} ws_calib_fit;

typedef struct ws_calib_run {
    ws_host_fp host;
    char mode[16];  /* quick | default */
    char scope[16]; /* all | cpu | gpu | link */
    char started_at[32], finished_at[32];
    char note[256];
    ws_calib_sample *samples;
    int n_samples, cap_samples;
    ws_calib_fit *fits;
    int n_fits, cap_fits;
    /* Machine figures measured in this run; they decide which roofline rate a fit of
     * constant-intensity samples holds fixed (0 = not measured). */
    double read_bw;       /* bytes/s, all threads */
    double read_bw_1t;    /* bytes/s, one thread */
    double peak_flops[2]; /* flop/s of the attention dot-product path: [all, 1 thread] */
    double gpu_bw;        /* bytes/s, device copy (read + write) */
    double gpu_peak;      /* flop/s, best cuBLAS GEMM rate seen in the run */
    /* The reference probe (below): its drift over the run in percent (NAN: not probed),
     * whether the run was measured again for it, and whether it is flagged (still drifting
     * or loaded: stored, none of its fits used). */
    double drift_pct;
    int remeasured, flagged;
    double probe_bw; /* the probe's read rate over the run (ws_calib_estimate), B/s; NAN */
    /* An imported run (calib/import.h): the files read, and the GPU profile's name ("": the
     * calibrator's "gpu:<device name>"). */
    const ws_calibdb_source *sources;
    int n_sources;
    char gpu_profile[160];
} ws_calib_run;

void ws_calib_run_init(ws_calib_run *run);
void ws_calib_run_free(ws_calib_run *run);
int ws_calib_add_sample(ws_calib_run *run, const ws_calib_sample *s, ws_err *err);
/* The protocol's robust estimate of n > 0 repeat times (sorted in place): the median of the
 * fastest half. Load from elsewhere only ever slows a call, so the fastest half is the
 * machine's own speed, and its median is not one lucky call. */
double ws_calib_estimate(double *t, int n);
/* Adds a sample of key (device, op, dtype, attention kind) from the n repeat times in t
 * (sorted in place): median, min, max, the robust estimate fits use (t_est, the median of
 * the fastest half: a repeat slowed by other load on the host moves it least) and the
 * spread (interquartile range / t_est); params_fmt formats its JSON object text. */
int ws_calib_add_timed(ws_calib_run *run, ws_err *err, const char *device, const char *op,
                       const char *dtype, const char *kind, double flops, double bytes, double *t,
                       int n, const char *params_fmt, ...) __attribute__((format(printf, 11, 12)));
/* Fits every key of the run's samples (appends to run->fits), each from its samples' robust
 * estimates: the better held-out of the forms tried is kept, and used (good) only where it
 * beats the fallback the cost model would take without it (its machine figures: c0 0, the
 * measured peak and bandwidth), which the fit names with that fallback's error; a key with
 * no fallback (the bandwidth sweeps themselves) is used within WS_FIT_GOOD_MAPE_PCT. A
 * flagged run's fits are all kept unused. */
int ws_calib_fit_all(ws_calib_run *run, ws_err *err);
/* Stores the whole run in one transaction; returns its id in *run_id. */
int ws_calib_store(ws_store *store, const ws_calib_run *run, long long *run_id, ws_err *err);
/* Fits of one run (run_id 0 = newest) as JSON: {run: {...}, fits: [...]}. */
json_t *ws_calib_show(ws_store *store, long long run_id, ws_err *err);
/* The files an imported run read, as the JSON array `calib show` and `calib import` print:
 * one object per source (path, sha256, bytes, rows, what, measured_by, tool, gpu, dtype,
 * licence). */
json_t *ws_calib_sources_json(const ws_calibdb_source *src, int n);

/* This machine's calibrated profile name, "host:<fingerprint>" (the fingerprint calib
 * stores it under), into buf; 1 when store s holds that profile, 0 when it does not (buf
 * still names it) or the machine cannot be fingerprinted (buf empty). */
int ws_calib_host_profile(ws_store *s, char *buf, size_t cap);

/* Test hook (fault injection): when >= 0, ws_calib_store fails after writing this many
 * sample rows, inside its transaction. */
extern int ws_calib_fault_after_samples;

/* How a run measures (calib/measure.c, calib/measure_gpu.c). A reference probe (a read of
 * 128 MB from DRAM, the fastest of 7 over ~100 ms) is timed before the first sweep and after
 * every one. A shared host's bandwidth dips for seconds at a time (on the 2-vCPU development
 * VM the probe alone ranged 35-79 GB/s within 90 s); the round-robin rounds and each sample's
 * fastest-half estimate ride out such dips, so what the probe judges is whether the run as
 * a whole moved: its drift (the median of the second half of probes against the first's)
 * beyond WS_CALIB_DRIFT_PCT, or more than WS_CALIB_DIP_SHARE of probes WS_CALIB_DIP_PCT
 * slower than the run's quiet speed (the median of its fastest half: at most half the probes
 * are slower at all, so a quarter this slow is a host loaded from elsewhere much of the
 * time). Such a run is measured
 * once more, and if that one is too it is stored flagged, none of its fits used. */
#define WS_CALIB_DRIFT_PCT 10.0
#define WS_CALIB_DIP_PCT 15.0
#define WS_CALIB_DIP_SHARE 0.25
/* The attention reference: every bf16 attention sweep of a dense-attention model times
 * WS_CALIB_ATTN_REF_BATCH sequences of WS_CALIB_ATTN_REF_CTX tokens, and the host profile
 * keeps that sample's read rate as cpu.reference_attn.<model>.bf16.bandwidth. A read probe
 * misses some of what slows a kernel on shared cores (a neighbour taking the core's
 * caches): validate times the same call again (ws_calib_attn_probe, measure.h) and holds
 * it against this one. */
#define WS_CALIB_ATTN_REF_BATCH 4
#define WS_CALIB_ATTN_REF_CTX 8192
#define WS_CALIB_STR_(x) #x
#define WS_CALIB_STR(x) WS_CALIB_STR_(x)
typedef void (*ws_calib_progress_fn)(void *ctx, double frac, const char *what);

/* ws_calib_opts.sweeps: 0 runs every sweep of the scope; else only the CPU expert GEMM
 * sweeps named by its bits (no machine figures: their fits need none, the token counts span
 * intensities). */
#define WS_CALIB_SWEEP_EXPERT_BF16 1 /* cpu.expert_gemm.bf16 */
#define WS_CALIB_SWEEP_EXPERT_INT8 2 /* cpu.expert_gemm.int8 */

typedef struct ws_calib_opts {
    int quick;  /* coarse sweep (< 60 s on 2 cores) */
    int sweeps; /* 0: all; else WS_CALIB_SWEEP_* bits */
    int do_cpu, do_gpu, do_link;
    int threads; /* 0 = every logical CPU */
    ws_calib_progress_fn progress;
    void *progress_ctx;
    volatile sig_atomic_t *stop; /* set asynchronously to stop: WS_ECANCELED */
} ws_calib_opts;

#endif
