// W8A8 linear layers on the CPU: int8 weights with one scale per output
// channel, activations quantized per row (token) when the layer runs, and
// oneDNN's int8 matmul (AMX or VNNI: on AMX 1.5 to 2.1 times its bfloat16
// rate at Wan's shapes, docs/quantized-benchmark.md).
//
//   weights      w_q[n, k] = round(w[n, k] / s_w[n]),  s_w[n] = max_k |w[n, k]| / 127
//                (symmetric, per output channel; made once at load from a
//                float or a Q8_0 / fp8 weight)
//   activations  x_q[m, k] = round(x[m, k] / s_x[m]),  s_x[m] = max_k |x[m, k]| / 127
//                (symmetric, per row, at every call: "dynamic per-token")
//   output       y[m, n] = s_x[m] s_w[n] sum_k x_q[m, k] w_q[n, k] + b[n], then the activation
// round() is round-half-to-even, as torch.round; the integer sums are
// exact (|sum| < 2^31 for K < 2^17), so the result is the quantized
// operands' product to float rounding, whatever the kernel.
//
// oneDNN runs the integer product (s8 x s8: AMX's native int8 product;
// on AVX512-VNNI oneDNN offsets and corrects the activations itself) in
// tiles, each thread applying both scales, the bias and the activation to
// its tile's int32 sums while they are in its cache (int8_matmul.cpp says
// why not oneDNN's post-ops). A weight is packed once at load into the
// blocked layout oneDNN prefers, with its scales appended, as the bfloat16
// weights are packed (onednn_matmul.h).
#pragma once
#include <cstdint>
#include <vector>

#include "ops/ops.h"

namespace ditgen::ops::cpu {

// Row-wise symmetric int8 quantization of a (rows, k) float32 matrix with
// leading dimension ld: q (rows, k) dense, scales (rows). A row of zeros
// gets scale 0 and zeros (its product is then exactly 0).
void quantize_rows_s8(const float* x, int64_t rows, int64_t k, int64_t ld, int8_t* q, float* scales);

// Bytes of an (n, k) int8 weight packed for int8_linear: its values in
// oneDNN's layout and its n scales (float32).
size_t packed_weight_bytes_s8(int64_t n, int64_t k);
// w (n, k) dense int8 values with their per-row scales (n) -> packed
// (packed_weight_bytes_s8(n, k) bytes).
void pack_weight_s8(int64_t n, int64_t k, const int8_t* w, const float* scales, void* packed);

// y[m, ldy] = act(s_x * s_w * (x_q · w_q^T) + bias): x (m, k) float32 with
// leading dimension ldx, w packed by pack_weight_s8, bias (n) or null; y
// float32 (m, n) with leading dimension ldy.
void int8_linear(const float* x, int64_t m, int64_t k, int64_t ldx, const void* packed_w, int64_t n,
                 const float* bias, Activation act, float* y, int64_t ldy);

// The kernel oneDNN runs for an (m, n, k) int8 linear and how the product
// is split ("brg:avx512_core_amx_int8 tiles + epilogue", or "... s32 +
// epilogue" for one call on the whole), for benchmarks.
const char* int8_kernel_name(int64_t m, int64_t n, int64_t k);

}  // namespace ditgen::ops::cpu
