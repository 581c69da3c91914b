/* membw: what this machine's memory and cores can do, measured with the same thread pool
 * and instruction paths as the attention kernels, so a kernel's bandwidth can be stated as
 * a fraction of the machine's in the same run.
 *
 *   read bandwidth: a vectorised read-only streaming reduction over a buffer, split into one
 *                   contiguous slice per task, first touched by the thread that reads it;
 *   gather:         the same reads over seeded random rows (segments) of a given size, each
 *                   software-prefetched ahead, as a sparse token list's rows are read;
 *   triad:          STREAM's a[i] = b[i] + s*c[i] in vector code, counted as STREAM does
 *                   (3 x 8 bytes per element: two reads and one write; the write-allocate
 *                   read of a, where the core does one, is not counted);
 *   peak flop/s:    independent dot-product accumulations in registers with the instruction
 *                   the attention path uses for q.k and p.V (FMA, or VDPBF16PS in the hi+lo
 *                   form the avx512bf16 path runs), on every thread of the pool.
 * DRAM figures do not depend on what the machine says its caches are: before every timed
 * pass the pool's threads evict exactly what the pass reads (and writes) from every cache
 * level (ws_membw_evict), so the pass starts in DRAM at any buffer size, and the threads
 * are awake when the clock starts. Read and triad of one run are checked against each
 * other (ws_membw_triad_check_rounds). Why: docs/notes/membw.md.
 * On a pool over several NUMA nodes (pool.h) the read buffer and the triad's arrays are one
 * region per node, placed there and read by that node's threads; the gather's random rows
 * span every node. Each returns the median over `repeats` timed runs (after one untimed
 * warm-up), in GB/s (1e9 bytes/s) or GFLOP/s. Callers: calib/probe/bench.c, the calibrator. */
#ifndef WS_MEMBW_H
#define WS_MEMBW_H

#include <stddef.h>
#include <stdint.h>

#include "attn_cpu.h"
#include "pool.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The method, as recorded with the figures. */
#define WS_MEMBW_METHOD "clflush before each pass" /* how caches are defeated */
/* Default read buffer: a size that gives passes of tens of ms; not tied to any cache. */
#define WS_MEMBW_DEFAULT_BYTES ((size_t)1 << 30)
/* Expected triad (STREAM counting) over read from DRAM in the same run: 0.75 when the
 * write-allocate read of a costs as much as any read, up to ~1 when full-line stores skip
 * it (this Zen 5 host: 0.98), less with read/write turnaround; outside this band one of the
 * two is not a DRAM figure (e.g. served from a cache) or the host disturbed the run. */
#define WS_MEMBW_TRIAD_READ_LO 0.5
#define WS_MEMBW_TRIAD_READ_HI 1.2

/* 1 when a triad / read ratio is inside the expected band, 0 when they disagree (NaN too). */
int ws_membw_triad_in_band(double ratio);
/* The check of a run's interleaved rounds: the median over rounds k of the triad's rate over the
 * read's of round k (seconds t_read[k] for read_bytes, t_triad[k] for triad_bytes), so a
 * shift of the host's bandwidth between rounds does not pit a fast minute of one against
 * a slow minute of the other. */
int ws_membw_triad_check_rounds(const double *t_read, double read_bytes, const double *t_triad,
                                double triad_bytes, int rounds, double *ratio);
/* Writes back and evicts [p, p + bytes) from every cache level of every core
 * (CLFLUSHOPT, else CLFLUSH; coherent, so lines another core or CCD holds go too) and
 * waits until that is done. */
void ws_membw_evict(const void *p, size_t bytes);
/* Bytes ws_membw_evict has evicted in this process so far (tests check that what is timed
 * was evicted first). */
unsigned long long ws_membw_evicted_bytes(void);
/* Median read bandwidth over `bytes` (rounded down to whole 4 KiB per thread). */
int ws_membw_read(ws_pool *pool, size_t bytes, int repeats, double *gbps_out, ws_err *err);
/* A read buffer kept for repeated passes (first touched by the pool's threads and read
 * once as a warm-up at creation), for timing reads interleaved with other work. A pass
 * reads the first `bytes` (at most the capacity, rounded down as ws_membw_read does) and
 * returns the seconds; covered_out (may be NULL) gets the bytes read. */
typedef struct ws_membw_reader ws_membw_reader;
ws_membw_reader *ws_membw_reader_create(ws_pool *pool, size_t bytes, ws_err *err);
double ws_membw_reader_pass(ws_membw_reader *r, size_t bytes, size_t *covered_out);
/* The same pass run by another pool's threads (e.g. one thread, to compare with a kernel
 * run on one): the same bytes, split over the same tasks. */
double ws_membw_reader_pass_on(ws_membw_reader *r, ws_pool *pool, size_t bytes,
                               size_t *covered_out);
/* A gather pass over the same buffer: segments of seg_bytes (a multiple of 64) at seeded
 * random 64-byte aligned offsets, about `bytes` in all, split over the reader's tasks and
 * run on `pool` (NULL: the reader's; at least one segment per task), each segment
 * prefetched ~8 KiB of segments ahead and then read with vector loads: what a sparse token
 * list's rows cost the memory system, as the read pass measures what streaming costs.
 * *sec_out gets the seconds, covered_out (may be NULL) the bytes read. */
int ws_membw_reader_gather(ws_membw_reader *r, ws_pool *pool, size_t seg_bytes, size_t bytes,
                           uint64_t seed, double *sec_out, size_t *covered_out, ws_err *err);
void ws_membw_reader_destroy(ws_membw_reader *r);
/* Read times over n sizes from one buffer of the largest, in `rounds` round-robin rounds
 * (each round times every size once, so drift of the host's bandwidth during the sweep
 * hits every size alike): t_out[i * rounds + r] is size i in round r, in seconds, and
 * covered_out[i] (may be NULL) the bytes that read actually covered. */
int ws_membw_read_sweep(ws_pool *pool, const size_t *bytes, int n, int rounds, double *t_out,
                        size_t *covered_out, ws_err *err);
/* Median STREAM triad bandwidth; `bytes` is the total of the three double arrays. */
int ws_membw_triad(ws_pool *pool, size_t bytes, int repeats, double *gbps_out, ws_err *err);
/* The triad's arrays kept for passes interleaved with other work (placed, first touched
 * and run once as a warm-up at creation): a pass evicts the arrays, times one triad and
 * returns the seconds; counted_out (may be NULL) gets the bytes STREAM counts. */
typedef struct ws_membw_triader ws_membw_triader;
ws_membw_triader *ws_membw_triader_create(ws_pool *pool, size_t bytes, ws_err *err);
double ws_membw_triader_pass(ws_membw_triader *t, size_t *counted_out);
void ws_membw_triader_destroy(ws_membw_triader *t);
/* Peak dot-product GFLOP/s of the instruction path `isa` (WS_ISA_AUTO resolves as
 * ws_attn_cpu does) on all threads of the pool. Flops are the useful multiply-adds x 2: for
 * avx512bf16, one VDPBF16PS pair (q hi and lo) counts as 32 multiply-adds, and for amx one
 * TDPBF16PS as half its 16x16x32, as the kernels spend them. */
int ws_cpu_peak_gflops(ws_pool *pool, ws_isa isa, double *gflops_out, ws_err *err);
/* The roofline's peak for KV of dtype kv_dtype: the fastest dot-product instruction this
 * CPU offers for it, whatever a kernel's loop uses, each candidate measured as above on
 * every thread of the pool and counted as all the products it does: TDPBF16PS (amx) and
 * VDPBF16PS (AVX512_BF16) for bf16 KV, and the widest fp32 FMA (zmm, ymm, else scalar C).
 * *instr_out (may be NULL) gets its name ("tdpbf16ps", "vdpbf16ps", "vfmadd231ps zmm",
 * "vfmadd231ps ymm", "scalar"). The peak of `bench attn-cpu` and of the calibrator's fits. */
int ws_cpu_roof_peak(ws_pool *pool, ws_dtype kv_dtype, double *gflops_out, const char **instr_out,
                     ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
