/* hw: the hardware room of the cost model -- a GPU and a host profile read ONCE into plain
 * rates, each with its source (calibrated key, else datasheet x efficiency, labelled), and
 * the loading every run starts with (a model by name or path, the two profiles by name from
 * the database). Every operation on a device costs the roofline
 *     t = c0 + max(F / P, B / W)          F flop, B bytes, P flop/s, W B/s, c0 s
 * with (c0, P, W) per (device, operation); c0 is one kernel's fixed cost. The keys read, and
 * what stands in for a missing one, are listed in docs/design.md ("Hardware rates"). After
 * loading, nothing here does I/O: the deployment (deploy.h) scales the CPU's rates for the
 * sockets and threads a run uses, and the operations (cost.h) are arithmetic on the result. */
#ifndef WS_RUNTIME_HW_H
#define WS_RUNTIME_HW_H

#include "model.h"
#include "profile.h"
#include "store.h"
#include "wformat.h"
#include "ws_dtype.h"
#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One rate or constant with where it came from. */
typedef struct ws_hw_val {
    double v;              /* SI units: s, flop/s, B/s, B or 1 */
    ws_profile_source src; /* datasheet, measured, fitted or modeled */
    char from[192];        /* the profile key(s) it was read from, or how it was derived */
} ws_hw_val;

/* A roofline: t = c0 + max(F / P, B / W); P or W of 0 drops that side. */
typedef struct ws_hw_roof {
    ws_hw_val c0, P, W;
    int serial; /* 1: c0 + F/P + B/W (the profile's <prefix>.serial), a kernel that streams and
                 * computes in turn; 0: the roofline's max */
    /* A piecewise fit (<prefix>.low<k>.*): an operation of intensity F/B at most low[k].upto
     * (the first such k) takes that piece's c0, P and W (a rate of 0 is left out), in the
     * same form; above the last, the fields above. */
    int n_low;
    struct ws_hw_piece {
        ws_hw_val upto, c0, P, W;
    } low[2];
} ws_hw_roof;

/* Prefill attention: t = c0 + F / (P k / (k + half)), k the keys attended per query. */
typedef struct ws_hw_curve {
    ws_hw_val c0, P, half; /* s, flop/s, keys */
} ws_hw_curve;

/* The memory-bound per-layer operations on the GPU (calibrated key gpu.<name>.<dtype>). */
typedef enum ws_hw_elem {
    WS_ELEM_NORM = 0, /* RMSNorm: "rmsnorm" */
    WS_ELEM_ROPE,     /* rotary embedding of q and k: "rope" */
    WS_ELEM_ACT,      /* gated activation, act(gate) x up: "act" */
    WS_ELEM_ADD,      /* residual add (also the KV append and the merge): "add" */
    WS_ELEM_MOE,      /* MoE top-k, permute and combine: "moe_route" */
    WS_ELEM_KINDS
} ws_hw_elem;

/* "rmsnorm", "rope", "act", "add", "moe_route". */
const char *ws_hw_elem_name(int kind);

/* The hardware as the cost model sees it. */
typedef struct ws_hw {
    char gpu[160], host[160];      /* profile names */
    ws_hw_roof cpu_attn;           /* CPU decode attention for the model's kind and KV dtype */
    ws_hw_val cpu_attn_after_moe;  /* t(attention right after a MoE phase) / t(alone), the
                                    * calibrator's cpu.attn_after_moe_factor; 1 without one */
    ws_hw_roof cpu_expert;         /* one routed-expert FFN call on all CPU cores */
    ws_hw_val cpu_attn_copy;       /* W(CPU decode attention beside a host-memory copy) /
                                    * W(alone), the calibrator's cpu.attn_copy_factor for the
                                    * kind (at most 1); 1 without one */
    ws_hw_val cpu_probe_bw;        /* B/s of the calibrator's reference probe when this host
                                    * was calibrated (cpu.reference_read.bandwidth); 0 without
                                    * one. Not in the cost model: validate holds the host's
                                    * probe now against it */
    ws_hw_val cpu_attn_ref_bw;     /* B/s of the model's attention reference when this host
                                    * was calibrated (cpu.reference_attn.<model>.bf16, calib.h;
                                    * ws_hw_load_model); 0 without one. Not in the cost model:
                                    * validate times the same call now */
    ws_hw_val cpu_copy_contention; /* W(CPU experts, host-memory copies running beside
                                    * them) / W(alone), in (0, 1]: the calibrator's
                                    * cpu.expert_copy_factor, else the host's
                                    * cpu_copy_contention; 1 without either */
    ws_hw_val cpu_mem_bw;          /* B/s, DRAM read on all cores (host copies) */
    ws_hw_val kv_reformat;   /* B/s, re-laying a single-state KV cache (host kv_reformat_bw) */
    ws_hw_roof gpu_attn;     /* GPU decode attention over HBM-resident pages */
    ws_hw_curve gpu_prefill; /* GPU prefill attention (FlashAttention's own curve) */
    ws_hw_roof gpu_gemm;     /* GPU GEMM at the weight dtype (projections, experts, MLPs) */
    ws_hw_roof gpu_gemm_wc[WS_WC_COUNT];   /* gpu_gemm with the peak of each weight format's
                                            * compute: bf16/fp16 the tensor rate, fp8 fp8_flops,
                                            * int8 int8_flops, fp32 fp32_flops (each x
                                            * tensor_eff; a key the GPU lacks: the fp16 rate) */
    ws_hw_roof cpu_expert_wc[WS_WC_COUNT]; /* cpu_expert per compute: the calibrated
                                            * cpu.expert_gemm.<bf16|int8|fp32>.* fit, else
                                            * cpu_peak.<family> x flops_eff for the family the
                                            * host has (int8: amx_int8, avx512_vnni; bf16:
                                            * amx_bf16, avx512_bf16), else fp32_flops x
                                            * flops_eff */
    ws_hw_roof gpu_elem[WS_ELEM_KINDS];    /* memory-bound kernels: c0 + B / W, and P the bytes/s
                                            * of one row where calibrated (0: none) */
    ws_hw_val step;           /* s per forward step: scheduling, launches, synchronisation */
    ws_hw_roof h2d, d2h;      /* pinned copies: c0 + bytes / W (P unused) */
    ws_hw_val h2d_contention; /* W_h2d(CPU computing) / W_h2d, in (0, 1] */
    ws_hw_val h2d_pageable;   /* W_h2d(pageable host memory) / W_h2d(pinned), in (0, 1] */
    ws_hw_roof h2d_weights;   /* the stream of host-memory weights to the GPU: h2d, at the
                               * pageable rate where the deployment's weights are pageable */
    ws_hw_val handoff_c0;     /* s, fixed cost of one CPU<->GPU hand-off of hidden states; 0:
                               * the copy's own c0 (the deployment sets an engine's) */
    ws_hw_val gpu_mem;        /* B of device memory */
    ws_hw_val host_mem;       /* B of host DRAM (host mem_bytes); 0: not in the profile */
    ws_hw_val sockets;        /* CPU sockets (host sockets; 1 when not given) */
    ws_hw_val cores;          /* CPU cores over all sockets (host cores; 1 when not given) */
    ws_hw_val core_bw;        /* B/s one core reads from DRAM alone: the calibrated
                               * cpu.membw_read_1t.bandwidth, else the host's core_bw; 0:
                               * not known (fewer threads then keep the sockets' bandwidth) */
} ws_hw;

/* Reads the rates for attention kind `kind` with `kv` KV and `wt` weights. Missing keys with
 * no fallback: WS_ENOTFOUND naming the profile and key; a rate <= 0 where one is needed
 * (a V100's bf16_flops): the fp16 rate, else WS_EINVAL. */
int ws_hw_from_profiles(const ws_profile *gpu, const ws_profile *host, ws_attn_kind kind,
                        ws_dtype kv, ws_dtype wt, ws_hw *hw, ws_err *err);
/* The GPU's half of it alone (the GPU fields and name; the rest as hw held): what the GPU's
 * kernels cost, for checks against a GPU's operator measurements (validate/oppoints.h). */
int ws_hw_gpu_from_profile(const ws_profile *gpu, ws_attn_kind kind, ws_dtype kv, ws_dtype wt,
                           ws_hw *hw, ws_err *err);

/* The piece of r an operation of flops over bytes takes: a low piece, or NULL for r's own
 * c0, P and W. */
static inline const struct ws_hw_piece *ws_hw_roof_piece(const ws_hw_roof *r, double flops,
                                                         double bytes)
{
    for (int k = 0; k < r->n_low; k++)
        if (bytes > 0 && flops <= r->low[k].upto.v * bytes)
            return &r->low[k];
    return NULL;
}

/* The fixed cost of one operation of flops over bytes (its piece's). */
static inline double ws_hw_roof_c0(const ws_hw_roof *r, double flops, double bytes)
{
    const struct ws_hw_piece *p = ws_hw_roof_piece(r, flops, bytes);
    return p ? p->c0.v : r->c0.v;
}

/* The bandwidth of an operation of flops over bytes (its piece's). */
static inline double ws_hw_roof_W(const ws_hw_roof *r, double flops, double bytes)
{
    const struct ws_hw_piece *p = ws_hw_roof_piece(r, flops, bytes);
    return p ? p->W.v : r->W.v;
}

/* The roofline time of one operation (s). */
static inline double ws_hw_roof_time(const ws_hw_roof *r, double flops, double bytes)
{
    const struct ws_hw_piece *p = ws_hw_roof_piece(r, flops, bytes);
    const double P = p ? p->P.v : r->P.v, W = p ? p->W.v : r->W.v;
    double tf = P > 0 ? flops / P : 0.0, tb = W > 0 ? bytes / W : 0.0;
    return (p ? p->c0.v : r->c0.v) + (r->serial ? tf + tb : tf > tb ? tf : tb);
}

/* The host's cores: its profile's, 1 when it has none. */
int ws_hw_cores(const ws_hw *hw);
/* Loads model `model` (a shipped name or a path) and the profiles `gpu` and `host` from s,
 * and the rates for the model's attention kind and weights, KV at kv; *cores (if non-NULL):
 * the host profile's cores (1 when it has none). The GPU profile must be a GPU's and the
 * host's a host's; a calibrated host lacking kv_reformat_bw gets the datasheet's. */
int ws_hw_load(ws_store *s, const char *model, const char *gpu, const char *host, ws_dtype kv,
               ws_model *m, ws_hw *hw, int *cores, ws_err *err);
/* The same for a model already loaded (and perhaps changed: another weight dtype). */
int ws_hw_load_model(ws_store *s, const ws_model *m, const char *gpu, const char *host, ws_dtype kv,
                     ws_hw *hw, int *cores, ws_err *err);

#ifdef __cplusplus
}
#endif
#endif
