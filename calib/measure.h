/* measure: the calibrator's sweeps -- the real project kernels timed on this machine.
 *
 * Host: read bandwidth and triad from DRAM (each pass evicted from the caches first; membw.h),
 * checked against each other; the dot-product peak of the attention instruction path; CPU
 * decode attention for GQA, MLA and sparse MLA (shapes from the shipped model configs) in bf16
 * and fp16 over 1K..1M tokens of one layer, at the runtime's batch sizes, 1 vs all threads,
 * each repeat on pages evicted from every cache level just before (cold, as in a decode step);
 * attention over pinned vs pageable memory, right after a MoE phase, and beside a host-memory
 * copy; the routed-expert phases the runtime runs (bf16 and int8: E distinct experts, one
 * pool task each, single-threaded, through kernels/experts.h, all evicted first) for the
 * models' expert shapes over 1..512 tokens an expert. With a CUDA device, the GPU and link
 * sweeps of the device backend (calib/measure_gpu.c).
 *
 * A shared host's protocol: repeats are taken in interleaved rounds over each sweep's
 * configurations, a sample's estimate is the median of its fastest half (t_est, with its
 * spread), and a reference read probe is timed at the start and after every sweep. A run
 * whose probe drifted or dipped past WS_CALIB_DRIFT_PCT / WS_CALIB_DIP_* is measured once
 * more from scratch, then flagged (calib.h). Progress names each sweep, its spread and the
 * probe. Called by a calibration run (calib/calib_run.h); its options, ws_calib_opts, are in
 * calib.h, where measure_gpu reads them too. */
#ifndef WS_MEASURE_H
#define WS_MEASURE_H

#include "calib.h"
#include "pool.h"

/* Runs the sweeps into run->samples (and the machine figures into run). */
int ws_calib_measure(const ws_calib_opts *o, ws_calib_run *run, ws_err *err);

/* The reference probe on its own, n times on the pool's threads: *bw the read rate of the
 * protocol's estimate (ws_calib_estimate), B/s, the figure a run stores as probe_bw. For holding
 * the host later against the minutes it was calibrated in (validate). */
int ws_calib_probe(ws_pool *pool, int n, double *bw, ws_err *err);

/* The attention reference on its own: model's bf16 decode attention at the reference shape
 * (WS_CALIB_ATTN_REF_BATCH sequences of WS_CALIB_ATTN_REF_CTX tokens, calib.h), timed as
 * the attention sweep times it (cold KV, the CPU region's layout for this ISA) reps times
 * on the pool's threads; *bw its KV read rate at the protocol's estimate, B/s. A read probe
 * does not see all that slows a kernel on shared cores: validate holds this one against the
 * calibration's sample of the same call. WS_EINVAL for a sparse model. */
int ws_calib_attn_probe(ws_pool *pool, const char *model, int reps, double *bw, ws_err *err);

#endif
