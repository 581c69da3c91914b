/* vidur_csv: Vidur's operator profiling CSVs (microsoft/vidur data/profiling: attention.csv,
 * mlp_<model>.csv) read into typed operator rows, for the calibration importer
 * (calib/import.h) and the operator checks (validate/oppoints.h).
 *
 * A file is detected by its header: attention (time_stats.attn_decode.* and .attn_prefill.*
 * with n_embd, n_q_head, n_kv_head, num_tensor_parallel_workers, batch_size, kv_cache_size,
 * prefill_chunk_size, is_prefill) or MLP (time_stats.<op>.* for the per-layer operations with
 * n_head, n_kv_head, n_embd, n_expanded_embd, num_tokens, num_tensor_parallel_workers). Each
 * attention row is one decode or prefill row; each MLP row gives the four GEMMs (QKV, output,
 * gate-up, down projections) and five memory-bound operations (two RMSNorms, RoPE, the
 * activation, the residual add) as separate rows. Shapes are per GPU: heads divided by the
 * tensor-parallel workers, the QKV and up projections split along their output, the output
 * and down projections along their input. Times are Vidur's milliseconds, stored in seconds
 * (median, and min and max when the file has them). The embedding and the reshapes are read
 * past: the cost model has no such operation.
 *
 * Files come from anywhere: every field is checked (numbers whole and finite, shapes positive
 * and bounded, heads divisible by the workers, the median present and at least 1 ns where
 * the row has the operation, min <= median <= max, one model per file and one attention
 * kind per list, blank lines only at the end) and a problem is one line naming the file,
 * the line and the column. Pure parsing: no I/O, no allocation but the rows. The held-out
 * split is defined here once, so the importer fits on rows the checks never reuse: every
 * 5th row of each operation in its own file's order, a property of the file and the row
 * whatever other files are read with it (checking one file of a folder imported whole
 * holds out the rows the import held out). */
#ifndef WS_VIDUR_CSV_H
#define WS_VIDUR_CSV_H

#include <stddef.h>

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_VIDUR_HOLDOUT_EVERY 5    /* rows i % 5 == 4 of each operation of a file held out */
#define WS_VIDUR_T_MIN_MS 1e-6      /* the shortest median a row may have: 1 ns */
#define WS_VIDUR_DIM_MAX (1 << 24)  /* bound on every shape field */
#define WS_VIDUR_FIELDS_MAX 256     /* columns a file may have */

/* What a row measures; the groups the checks report. */
typedef enum ws_vidur_group {
    WS_VIDUR_DECODE_ATTN = 0,
    WS_VIDUR_PREFILL_ATTN,
    WS_VIDUR_GEMM,
    WS_VIDUR_ELEM,
    WS_VIDUR_GROUPS
} ws_vidur_group;

typedef enum ws_vidur_op {
    WS_VOP_ATTN_DECODE = 0, /* attn_decode */
    WS_VOP_ATTN_PREFILL,    /* attn_prefill */
    WS_VOP_QKV,             /* attn_pre_proj: M x H by H x (nq + 2 nkv) d / tp */
    WS_VOP_OPROJ,           /* attn_post_proj: M x nq d / tp by ... x H */
    WS_VOP_UP,              /* mlp_up_proj: M x H by H x (gated ? 2 : 1) I / tp */
    WS_VOP_DOWN,            /* mlp_down_proj: M x I / tp by ... x H */
    WS_VOP_NORM_IN,         /* input_layernorm over H */
    WS_VOP_NORM_POST,       /* post_attention_layernorm over H */
    WS_VOP_ROPE,            /* attn_rope of (nq + nkv) / tp heads of d */
    WS_VOP_ACT,             /* mlp_act over I / tp */
    WS_VOP_ADD,             /* add over H */
    WS_VOP_COUNT
} ws_vidur_op;

/* "attn_decode", "attn_pre_proj", ... (Vidur's column names). */
const char *ws_vidur_op_name(int op);
ws_vidur_group ws_vidur_op_group(int op);
/* "decode attention", "prefill attention", "GEMM", "elementwise". */
const char *ws_vidur_group_name(int group);

typedef struct ws_vidur_row {
    int op;                        /* ws_vidur_op */
    int line;                      /* 1-based line of the file */
    int q_heads, kv_heads, head_dim; /* per GPU (attention, RoPE) */
    int tp;                        /* tensor-parallel workers the row was measured with */
    int batch, kv, chunk;          /* attention: sequences, cached tokens each, prefill chunk */
    double M, K, N;                /* GEMM: per-GPU shape; elementwise: M tokens, K width */
    double t, t_min, t_max;        /* seconds: median, min and max (NAN when not given) */
    int heldout;                   /* 1: in the held-out part */
} ws_vidur_row;

typedef struct ws_vidur_rows {
    ws_vidur_row *v;
    int n, cap;
    char kind[16];                 /* "attention" | "mlp" */
    char backend[64], method[64];  /* attention_backend, profile_method ("" when absent) */
} ws_vidur_rows;

/* Parses one file's text (len bytes; need not be NUL-terminated) named `name` in messages,
 * appending its rows to *out (zeroed or from an earlier call: a folder's files in one list;
 * kind is the last file's). Marks the file's held-out rows. 0, or an error
 * "<name>:<line>: <problem>" (WS_EPARSE) with *out as it was before the call. */
int ws_vidur_parse(const char *text, size_t len, const char *name, ws_vidur_rows *out,
                   ws_err *err);
void ws_vidur_rows_free(ws_vidur_rows *r);

#ifdef __cplusplus
}
#endif
#endif
