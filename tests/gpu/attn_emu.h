/* attn_emu: runs the GPU decode-attention kernels of kernels/cuda/attn_kernel.cuh on the
 * CPU, thread block by thread block, one std::thread per CUDA thread with real barriers
 * and lane exchanges (see attn_emu.cpp). It exists so that the kernel's indexing, tiling,
 * chunking, masking and both reductions are compared with ws_attn_ref on machines without
 * a GPU (tests/test_attn_emu.c); it says nothing about speed or about the CUDA API calls
 * around the kernels. Problems use host page addresses. */
#ifndef WS_ATTN_EMU_H
#define WS_ATTN_EMU_H

#include "attn.h"
#include "gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Plans like cu_attn_run (n_sm multiprocessors, chunk_tokens as ws_gpu_attn_opts), runs
 * pass 1 and, when needed, pass 2 into p->o / p->lse. 0 or WS_EUNSUP / WS_EINVAL. Aborts
 * the process if an emulated kernel deadlocks or shuffles outside its lane mask. */
int ws_attn_emu_run(const ws_attn_problem *p, int n_sm, int chunk_tokens,
                    ws_gpu_attn_stats *stats, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
