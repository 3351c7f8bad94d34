// CPU implementations of the ops of src/ops/ops.h: float32 on host memory,
// OpenMP threads, OpenBLAS GEMMs. Called by the front end (ops.cpp) after it
// has checked the arguments (dtypes included), and by the CUDA tests as the
// reference. Raw pointers where the front end passes offsets into tensors
// (row strides of adaLN chunks, attention operands); everything is float32
// except GEMM weights, which may also be bfloat16 (a bfloat16 GEMM) or
// float16 (widened to float32 block by block inside the GEMM, gemm.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "ops/cpu/onednn_conv.h"
#include "ops/cpu/onednn_matmul.h"
#include "ops/ops.h"

namespace ditgen::ops::cpu {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// The same with b of any floating dtype, which is the GEMM's arithmetic
// (gemm.cpp): float32; bfloat16 (a rounded to bfloat16, float32 sums);
// float16 widened to float32. Then c += bias[n] (alpha == 1 or not) and the
// activation, fused into the matmul where oneDNN runs it. A b of layout
// kGemmPacked (pack_gemm_weight) is a bfloat16 weight under trans_b, ldb = k.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const void* b, DType b_dtype, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias = nullptr,
          Activation act = Activation::kNone, Layout b_layout = Layout::kRowMajor);
// w (N, K) packed for the bfloat16 GEMM (onednn_matmul.h) where that pays
// and the CPU runs it natively: a CPU bfloat16 row-major 2-D weight whose
// shape packs, and not under the emulation hook; otherwise w itself.
Tensor pack_gemm_weight(const Tensor& w);
Tensor quantize_gemm_weight(const Tensor& w);
Tensor dequantize_gemm_weight(const Tensor& w);
// x, bias float32; w float32, bfloat16 or float16 (its dtype is the arithmetic, as gemm).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act = Activation::kNone);
// Rows of length N written into y with row stride ldy.
void linear_into(const Tensor& x, const Tensor& w, const Tensor* bias, float* y, int64_t ldy,
                 Activation act = Activation::kNone);
// Tests only: how bfloat16 GEMMs and attention run, so that every path is
// checked on one machine. emulate: the bf16 arithmetic emulated in float32
// (operands rounded, float32 kernels) even where the CPU has bf16 dot
// products; gemm_block_elements > 0: a GEMM's input rows are rounded in
// blocks of that many elements (default 16M). attention: which kernel runs
// bfloat16 attention when not emulated (attention_onednn.h): kAuto = oneDNN's
// matmuls where they run on AMX, the tile kernel elsewhere; the other two
// force one. attention_key_chunk, attention_query_rows > 0: the matmul path's
// keys per chunk and queries per pass over the keys (default: from its
// scratch budget), so that small tests cross them.
enum class Bf16AttentionKernel { kAuto, kTiles, kMatmul };
struct Bf16Hooks {
  bool emulate = false;
  int64_t gemm_block_elements = 0;
  Bf16AttentionKernel attention = Bf16AttentionKernel::kAuto;
  int64_t attention_key_chunk = 0;
  int64_t attention_query_rows = 0;
};
void set_bf16_hooks(const Bf16Hooks& hooks);
const Bf16Hooks& bf16_hooks();

void silu_(Tensor& x);
Tensor silu(const Tensor& x);
void gelu_tanh_(Tensor& x);
void gelu_(Tensor& x);
void relu_(Tensor& x);
void add_(Tensor& x, const Tensor& y);
void mul_(Tensor& x, const Tensor& y);
void add_broadcast_(Tensor& x, const Tensor& y);
// gate row b at gate + b * gate_stride.
void gated_residual_(Tensor& x, const Tensor& y, const float* gate, int64_t gate_stride);

Tensor layer_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, float eps);
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps);
// shift/scale row b at + b * mod_stride.
void layer_norm_modulate(const Tensor& x, const float* shift, const float* scale, int64_t mod_stride, float eps,
                         Tensor& out);
Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias, float eps,
                  bool fuse_silu);
Tensor rms_norm_channels(const Tensor& x, const Tensor& gamma, const Tensor* bias, bool fuse_silu);

// args.q/k/v/out are host float32 pointers.
void attention(const AttentionArgs& args);
void attention_merge_(float* out, float* lse, const float* out2, const float* lse2, int64_t batch, int64_t heads,
                      int64_t q_len, int64_t head_dim, int64_t row_stride, int64_t batch_stride);

// rows x row_len floats between two strided layouts; arguments checked by
// ops::copy_rows. Ranges must not overlap (ops.h): the memmove per row keeps
// an overlap within one row harmless, but rows overlapping other rows are
// not supported.
void copy_rows(const float* src, int64_t src_stride, float* dst, int64_t dst_stride, int64_t rows, int64_t row_len);

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding);
Tensor upsample_nearest(const Tensor& x, int64_t factor);
// slab_bytes: onednn_conv3d's bound on its copies of a slab (tests take
// small ones to exercise the slabs).
Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, std::array<int64_t, 3> stride,
              std::array<int64_t, 3> padding, int64_t slab_bytes = kConvSlabBytes);

Tensor timestep_embedding(const std::vector<float>& timesteps, int64_t dim, bool flip_sin_to_cos,
                          float downscale_freq_shift, float scale, float max_period);
Tensor sincos_pos_embed_2d(int64_t dim, int64_t grid_h, int64_t grid_w, double base_size, double interpolation_scale);
Tensor patchify(const Tensor& x, int64_t p);
Tensor unpatchify(const Tensor& x, int64_t h, int64_t w, int64_t p, int64_t channels);
Tensor patchify3d(const Tensor& x, std::array<int64_t, 3> patch);
Tensor unpatchify3d(const Tensor& x, std::array<int64_t, 3> grid, std::array<int64_t, 3> patch, int64_t channels);

RotaryTables rotary_tables_3d(std::array<int64_t, 3> dims, std::array<int64_t, 3> grid, double theta);
// rows rows of width elements, row r at x + r * x_stride, written to y + r *
// y_stride (y == x: in place); row r takes table row r % tokens of cos / sin
// ([*, head_dim] from the first token's row on).
void rotary_embed(const float* x, int64_t x_stride, float* y, int64_t y_stride, int64_t rows, int64_t tokens,
                  int64_t width, const float* cos, const float* sin, int64_t head_dim);

}  // namespace ditgen::ops::cpu
