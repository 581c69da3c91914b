/* schedule: one layer of a forward step as data, built in one place (ws_sched_build) for the
 * simulator, the live runtime and the controller. Each op has a kind, the resource it holds
 * (GPU compute stream, H2D and D2H copy engines, the CPU worker pool; none for a barrier),
 * its predecessors in this layer or in layer l-1 or l-2 (their anchors: end, main op, last
 * H2D copy) and a duration from runtime/cost. An op is the chain of kernels one stream runs
 * back to back, each paying its fixed cost. Where an op runs is read from the deployment's
 * per-layer table (deploy.h) and nowhere else decided.
 *
 * A decode layer: qkv -> append -> [indexer] -> CPU half || GPU half (XFER pages streamed
 * through the ping-pong buffers, prefetched during layer l-1's MoE phase) -> merge -> o_proj
 * -> router -> CPU experts || GPU experts || shared experts -> layer end; a prefill chunk's
 * layer runs prefill attention instead, and may stream its host-resident weights to the
 * GPU (prefill_gpu). The full rules are in docs/design.md ("The layer schedule").
 *
 * ws_sched_play is the exact player of these ops on first-come first-served resources (ops
 * in order of readiness, ties in schedule order); within a step it equals the simulator's
 * event graph on FIFO resources (sim/step.c), which tests hold to 1e-9. From layer 2 on a
 * layer's ops depend on l only through its kind, so a player may build them once per step
 * and kind. */
#ifndef WS_SCHEDULE_H
#define WS_SCHEDULE_H

#include "cost.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ws_res {
    WS_RES_GPU = 0, /* compute stream */
    WS_RES_H2D = 1, /* host-to-device copy engine */
    WS_RES_D2H = 2, /* device-to-host copy engine */
    WS_RES_CPU = 3, /* worker pool (every CPU op takes all of it) */
    WS_RES_COUNT
} ws_res;
#define WS_RES_NONE (-1) /* a barrier: holds nothing */

typedef enum ws_op_kind {
    WS_OP_QKV = 0,    /* QKV projection (GPU) */
    WS_OP_APPEND,     /* the new tokens' KV into the D-window (GPU) */
    WS_OP_INDEX,      /* sparse attention's indexer (GPU) */
    WS_OP_HOST,       /* the runtime's own work (CPU; 0 in the model) */
    WS_OP_MIGRATE,    /* reformat of a single-state cache (CPU) */
    WS_OP_CPU_ATTN,   /* CPU half (CPU) */
    WS_OP_H2D_PRE,    /* prefetch of the XFER pages, <= one ping-pong half (H2D) */
    WS_OP_H2D_REST,   /* the rest of the XFER pages (H2D) */
    WS_OP_GPU_ATTN,   /* GPU attention over XFER + D-window pages (GPU) */
    WS_OP_GPU_END,    /* GPU half done: attention and last copy (barrier) */
    WS_OP_MERGE,      /* the two halves' merge (GPU) */
    WS_OP_OPROJ,      /* output projection (GPU) */
    WS_OP_ROUTER,     /* router GEMM + top-k (beside the routed experts) */
    WS_OP_EXP_CPU,    /* routed experts on the CPU */
    WS_OP_EXP_GPU,    /* routed experts on the GPU */
    WS_OP_SHARED,     /* shared experts (GPU) */
    WS_OP_DENSE,      /* dense MLP of a dense layer (GPU) */
    WS_OP_END,        /* layer end (barrier) */
    WS_OP_PF_ATTN,    /* prefill attention of a chunk (GPU) */
    WS_OP_WRITE,      /* prefill KV written D2H */
    WS_OP_FLUSH,      /* D-window flush D2H */
    WS_OP_STEP,       /* the step's overhead before layer 0 (barrier with a duration) */
    WS_OP_H2D_EXP,    /* prefill: the CPU experts' weights streamed to the GPU (H2D) */
    WS_OP_EXP_STREAM, /* prefill: those experts on the GPU (GPU) */
    WS_OP_TO_HOST,    /* hidden states to the host for the CPU experts (latency, no resource) */
    WS_OP_TO_GPU,     /* the CPU experts' output back to the GPU (latency, no resource) */
    WS_OP_KINDS
} ws_op_kind;

/* "qkv", "append", ... (the simulator's timeline labels). */
const char *ws_op_name(int kind);

typedef enum ws_sched_anchor {
    WS_ANCHOR_END = 0,  /* the layer's end */
    WS_ANCHOR_MAIN = 1, /* its GPU attention (prefill: qkv) */
    WS_ANCHOR_H2D = 2,  /* its last H2D copy, or the layer before's */
    WS_ANCHORS
} ws_sched_anchor;

typedef struct ws_sched_dep {
    signed char back; /* 0: op `ref` of this layer; 1, 2: anchor `ref` of layer l-back */
    signed char ref;
} ws_sched_dep;

#define WS_SCHED_MAX_OPS 24
#define WS_SCHED_MAX_DEPS 4

typedef struct ws_sched_op {
    int kind;       /* ws_op_kind */
    int res;        /* ws_res or WS_RES_NONE */
    double seconds; /* >= 0 */
    int n_dep;
    ws_sched_dep dep[WS_SCHED_MAX_DEPS];
} ws_sched_op;

typedef struct ws_sched_layer {
    int layer;
    int n;
    ws_sched_op op[WS_SCHED_MAX_OPS];
    int at[WS_OP_KINDS];    /* op index of each kind, -1 when absent */
    int anchor[WS_ANCHORS]; /* op index, -1: none (H2D: the layer before's) */
} ws_sched_layer;

/* One prompt's chunk in a step: q new tokens after ctx of its tokens already in the KV. */
typedef struct ws_sched_chunk {
    double q, ctx;
} ws_sched_chunk;

/* What one step does in a layer (token counts summed over the batch). A step is a decode
 * step (n_seqs > 0), a prefill step (prefill_q > 0) or both at once (a mixed batch: the
 * decode and prompt tokens share the projections and the experts, each sequence attends
 * its own KV). */
typedef struct ws_sched_in {
    double T;             /* tokens through the GEMMs (decode tokens or the chunk) */
    int nospill;          /* 1: all KV in HBM (gpu-only, ktrans) */
    double n_cpu;         /* attended tokens in the CPU region */
    double m_xfer;        /* attended tokens streamed from XFER */
    double resident;      /* attended tokens in HBM (D-windows; everything for no-spill) */
    double n_seqs;        /* decode sequences (for the append) */
    double indexer_s;     /* GPU indexer time per layer (sparse models), s */
    double prefill_q;     /* prompt tokens of the step, summed over its chunks (0: none) */
    double prefill_ctx;   /* one chunk (n_chunks 0): tokens of its prompt before it */
    const ws_sched_chunk *chunks; /* n_chunks > 0: the step's chunks (their q sum to
                                   * prefill_q); the caller's, valid while the step plays */
    int n_chunks;
    double write_bytes;   /* prefill KV written D2H per layer, B */
    double flush_bytes;   /* D-window flush D2H per layer, B (0: none) */
    double migrate_bytes; /* host bytes reformatted per layer (migrate), B */
    double host_s;        /* the runtime's own CPU work in the layer, s (0: none) */
    int prefill_gpu;      /* 1: the chunks' CPU experts streamed to the GPU, and the CPU layers
                           * too when no sequence decodes in the step */
} ws_sched_in;

/* Layer l's ops for `in`, durations from cm (the CPU half from the split's terms). */
void ws_sched_build(const ws_cost_model *cm, const ws_cost_split *split, const ws_sched_in *in,
                    int l, ws_sched_layer *out);
/* The duration of the op of `kind` in s (no-op when the layer has none). */
void ws_sched_set(ws_sched_layer *s, int kind, double seconds);
/* The model's duration of layer l's op of `kind` for `in` as ws_sched_build makes it (0 when
 * the layer has none): what a measured op is held against. */
double ws_sched_op_time(const ws_cost_model *cm, const ws_sched_in *in, int l, int kind);

/* One layer as played (seconds, absolute times): what both sides record. */
typedef struct ws_sched_times {
    double t_start, t_end; /* layer start (its qkv ready) and end */
    double qkv_end;        /* qkv projection end */
    double attn_start;     /* the attention halves may start (append, indexer done) */
    double cpu_s;          /* CPU half duration (0: none) */
    double gpu_end;        /* GPU half end (attention and last copy) */
    double gpu_main_end;   /* GPU attention kernel end */
    double moe_start;      /* router (dense: o_proj) end */
    double moe_s;          /* MoE (or dense MLP) phase: moe_start -> layer end */
    double exp_cpu_s;      /* the routed experts on the CPU (0: none) */
} ws_sched_times;

/* Folds one ended op (kind, ready, start, end) into its layer's times. */
void ws_sched_times_op(ws_sched_times *t, int kind, double t_ready, double t_start, double t_end);

/* The player of a step's layers, in order. */
typedef struct ws_sched_play {
    double t0;                    /* the step's start */
    double free[WS_RES_COUNT];    /* when each resource is next free */
    double anchor[2][WS_ANCHORS]; /* ends of layers l-1 ([0]) and l-2 ([1]); NAN: none */
    double busy[WS_RES_COUNT];    /* busy seconds per resource so far */
    double t_end;                 /* the latest op end so far */
} ws_sched_play;

void ws_sched_play_start(ws_sched_play *p, double t0);
/* Plays layer s; its times into *t and, when ends is not NULL, each op's end into ends[i]. */
void ws_sched_play_layer(ws_sched_play *p, const ws_sched_layer *s, ws_sched_times *t,
                         double *ends);
/* Builds and plays layers 0 .. layers-1 of one step for `in` from t = 0 (layers of one kind
 * from the third on built once); each layer's times into lay[l] when lay is not NULL.
 * Returns the step's end: every estimate of a layer or a step is this. */
double ws_sched_play_step(const ws_cost_model *cm, const ws_cost_split *split,
                          const ws_sched_in *in, int layers, ws_sched_times *lay);

#ifdef __cplusplus
}
#endif
#endif
