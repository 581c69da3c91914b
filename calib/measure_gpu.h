/* measure_gpu: the calibrator's GPU and PCIe-link sweeps, through the device backend table
 * (no CUDA header here): device copy bandwidth, GPU decode attention over contexts, cuBLAS
 * GEMM on the experts' shapes, H2D and D2H pinned and pageable from 4 KB to 1 GB, H2D
 * concurrent with D2H, and H2D while the CPU runs expert GEMMs (the contention the cost
 * model needs). Called by ws_calib_measure when a CUDA device exists. */
#ifndef WS_MEASURE_GPU_H
#define WS_MEASURE_GPU_H

#include "calib.h"

/* Adds the samples of the requested scopes (o->do_gpu, o->do_link) to run; progress is
 * reported as phases [phase0, phase0 + 2) of n_phases. */
int ws_calib_measure_gpu(const ws_calib_opts *o, ws_calib_run *run, int phase0, int n_phases,
                         ws_err *err);

#endif
