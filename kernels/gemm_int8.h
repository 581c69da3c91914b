/* gemm_int8: the routed experts' feed-forward block with int8 weights on the CPU,
 * y = (silu(x Wg) * (x Wu)) Wd, fp32 activations in and out: what KTransformers' AMXINT8
 * experts and llama.cpp's q8_0 dot products run (W8A8), here through oneDNN's int8 matmul
 * (libdnnl, the Debian package the bf16 FFN already links). The runtime runs CPU experts
 * through it under `run --cpu-expert-weights int8` and the calibrator times it
 * (cpu.expert_gemm.int8), so a calibration's int8 rates are this code's.
 *
 * Weights: symmetric int8, one fp32 scale per output channel (w = q * s, |q| <= qmax),
 * quantized at load from bf16 or fp32 (ws_int8_quantize_*), with each row's sum of q. Each
 * token's row of activations (x, then h) is quantized dynamically to s8 with its own scale
 * (max |x| / 127) and handed to oneDNN shifted by 128 as u8; oneDNN multiplies u8 x s8 into
 * exact s32, and one pass per row takes 128 x the row sum back off and applies the weights'
 * and the token's scales. With s8 activations oneDNN 2.6 re-reads the weights for its
 * compensation on every call, and a per-row scale on its output drops it to its reference
 * kernel (docs/notes/int8-experts.md). oneDNN picks the instructions (AMX-INT8, AVX512-VNNI,
 * AVX2-VNNI, AVX-512/AVX2 pmaddubsw) up to DNNL_MAX_CPU_ISA; of its implementations the
 * kernel takes AMX's, else its JIT gemm (its brgemm repacks plain weights per call).
 * Without VNNI, pmaddubsw sums pairs of u8 x s8 products in saturating 16 bits: there the
 * weights are quantized to 7 bits (ws_gemm_int8_qmax) and 8-bit ones are refused.
 *
 * Calls are thread-safe and run concurrently: each calling thread has its own oneDNN stream,
 * primitive cache (by m, H, I, threads) and scratch, freed when the thread exits or by
 * ws_gemm_int8_release(). ws_expert_ffn_int8_ref is the same FFN in plain C (int32 dot
 * products), with the bound by which the kernel may differ from it. */
#ifndef WS_GEMM_INT8_H
#define WS_GEMM_INT8_H

#include <stddef.h>
#include <stdint.h>

#include "gemm_bf16.h"
#include "ws_err.h"

/* An expert in [out x in] layout (as ws_expert_bf16): rows of int8 weights, one scale each. */
typedef struct ws_expert_int8 {
    int hidden, inter;          /* H, I */
    const int8_t *w_gate_up;    /* [2I x H]: gate rows 0..I-1, up rows I..2I-1 */
    const float *s_gate_up;     /* [2I] scales */
    const int32_t *sum_gate_up; /* [2I] sums of each row's q (ws_int8_row_sums) */
    const int8_t *w_down;       /* [H x I] */
    const float *s_down;        /* [H] */
    const int32_t *sum_down;    /* [H] */
    int qmax;                   /* |q| <= qmax: 127, or 63 (7-bit, for CPUs without VNNI) */
} ws_expert_int8;

/* Per-row symmetric quantization of a [rows x cols] matrix: scale[r] = max_c |w| / qmax
 * (0 for a zero row), q = round-to-nearest-even(w / scale). qmax in 1..127. */
void ws_int8_quantize_f32(const float *w, int rows, int cols, int qmax, int8_t *q, float *scale);
void ws_int8_quantize_bf16(const uint16_t *w, int rows, int cols, int qmax, int8_t *q,
                           float *scale);
/* sum[r] = the sum of row r's q. */
void ws_int8_row_sums(const int8_t *q, int rows, int cols, int32_t *sum);

/* Bytes of one expert's int8 weights, scales and row sums as ws_expert_int8_from_bf16 lays
 * them out. */
size_t ws_expert_int8_bytes(int hidden, int inter);
/* Quantizes e into mem (64-byte aligned, ws_expert_int8_bytes), *out pointing into it. */
int ws_expert_int8_from_bf16(const ws_expert_bf16 *e, int qmax, void *mem, ws_expert_int8 *out,
                             ws_err *err);

/* y[m x H] = expert(x[m x H]) through oneDNN. threads <= 0: the library's default. */
int ws_expert_ffn_int8(const ws_expert_int8 *e, const float *x, float *y, int m, int threads,
                       ws_err *err);

/* The same FFN in plain C: x and h quantized per token as the kernel does, exact int32 dot
 * products, silu in double. tol (NULL: not wanted) gets per output the bound on |kernel -
 * reference|: both quantize identical h up to float rounding, so only elements of h within
 * 1e-3 of a rounding tie may land one step apart (each moves y by sh * s_d * |q_d|), plus
 * 1e-5 of the sum of |terms| for the float arithmetic. */
void ws_expert_ffn_int8_ref(const ws_expert_int8 *e, const float *x, float *y, double *tol, int m);

/* The largest weight magnitude the kernel accepts under the ISA oneDNN runs: 127 with VNNI
 * or AMX, 63 without. */
int ws_gemm_int8_qmax(void);
/* oneDNN's instruction set (its effective ISA: the CPU's, capped by DNNL_MAX_CPU_ISA):
 * "avx2", "avx2_vnni", "avx512_core", "avx512_core_vnni", "avx512_core_bf16",
 * "avx512_core_amx", ... */
const char *ws_gemm_int8_isa(void);
/* The instruction family the int8 matmul runs on: "amx_int8", "avx512_vnni", "avx2_vnni",
 * "avx512bw" or "avx2" (pmaddubsw, 7-bit weights), from the implementation oneDNN chose at
 * that shape ("brg:avx512_core_amx") or else its effective ISA. */
const char *ws_gemm_int8_family(int hidden, int inter, int m);
/* oneDNN's implementation for the shape's matmuls ("gemm:jit", "brg:avx512_core_vnni"),
 * into buf; "" when oneDNN cannot create one. */
void ws_gemm_int8_impl(int hidden, int inter, int m, char *buf, size_t cap);
/* "onednn <impl> <family>", the backend label the runtime and the calibrator record. */
void ws_gemm_int8_describe(int hidden, int inter, int m, char *buf, size_t cap);
/* Frees the calling thread's primitives, stream and scratch. */
void ws_gemm_int8_release(void);

/* Flops and bytes of one call on m tokens: int8 weights (1 B) and their scales and sums
 * (8 B per row), the fp32 activations (x, y, gate|up, h: 4 B), their int8 copies (x, h:
 * 1 B) and the int32 products (gate|up, y: 4 B). */
void ws_expert_int8_cost(int hidden, int inter, int m, double *flops, double *bytes);

#endif
