// CUDA implementations of the ops of src/ops/ops.h on device tensors: each
// unpacks shapes and pointers and calls the raw-pointer kernels of
// kernels/cuda/cuda_ops.h. Called only by the front end (ops.cpp), after it
// has checked the arguments and that every operand is on CUDA with one
// dtype. Compiled only in CUDA builds (DITGEN_WITH_CUDA).
#pragma once
#include <array>
#include <cstdint>

#include "ops/ops.h"

namespace ditgen::ops::gpu {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const Tensor& a, const Tensor& b,
          float beta, Tensor& c);
// act: cuBLASLt's GELU-bias epilogue (kernels/cuda/gemm.cu), bias likewise.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act = Activation::kNone);
void linear_into(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, int64_t col);
// w: a block-quantized (N, K) weight whose blocks are on the device.
Tensor dequantize_gemm_weight(const Tensor& w, DType dtype);

void silu_(Tensor& x);
Tensor silu(const Tensor& x);
void gelu_tanh_(Tensor& x);
void gelu_(Tensor& x);
void relu_(Tensor& x);
void add_(Tensor& x, const Tensor& y);
void mul_(Tensor& x, const Tensor& y);
void add_broadcast_(Tensor& x, const Tensor& y);
void gated_residual_(Tensor& x, const Tensor& y, const Tensor& mod, int64_t gate_col);

Tensor layer_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, float eps);
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps);
void layer_norm_modulate(const Tensor& x, const Tensor& mod, int64_t shift_col, int64_t scale_col, float eps,
                         Tensor& out);
Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias, float eps,
                  bool fuse_silu);
Tensor rms_norm_channels(const Tensor& x, const Tensor& gamma, const Tensor* bias, bool fuse_silu);

void attention(const AttentionArgs& args, AttentionMode mode);
void attention_merge_(Tensor& out, Tensor& lse, const Tensor& out2, const Tensor& lse2, int64_t heads);

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding);
Tensor upsample_nearest(const Tensor& x, int64_t factor);
Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, std::array<int64_t, 3> stride,
              std::array<int64_t, 3> padding);
Tensor patchify(const Tensor& x, int64_t p);
Tensor unpatchify(const Tensor& x, int64_t h, int64_t w, int64_t p, int64_t channels);
Tensor patchify3d(const Tensor& x, std::array<int64_t, 3> patch);
Tensor unpatchify3d(const Tensor& x, std::array<int64_t, 3> grid, std::array<int64_t, 3> patch, int64_t channels);
// `rows` rows of x (row r at x_offset + r * x_stride) rotated into y's (y
// may be x: in place), row r with table row first_token + r % tokens of the
// float32 tables cos / sin [*, head_dim].
void rotary_embed(const Tensor& x, int64_t x_offset, int64_t x_stride, Tensor& y, int64_t y_offset, int64_t y_stride,
                  int64_t rows, int64_t tokens, int64_t width, const Tensor& cos, const Tensor& sin,
                  int64_t first_token);

void copy_rows(const Tensor& src, int64_t src_offset, int64_t src_stride, Tensor& dst, int64_t dst_offset,
               int64_t dst_stride, int64_t rows, int64_t row_len);

// The attention path (flash / math) the current device takes for this head
// size and dtype under `mode`, for the run's log line.
const char* attention_path_name(int64_t head_dim, DType dtype, AttentionMode mode);

}  // namespace ditgen::ops::gpu
