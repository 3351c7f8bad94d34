// CUDA implementations of the ops of src/ops/ops.h, on raw device pointers
// (CTranslate2 style: the op front end stays ops.h; these are the device
// primitives it will dispatch to). Each op has the semantics of its CPU
// counterpart in src/ops/cpu/, element for element.
//
// Conventions:
// - Pointers are device memory holding elements of `dtype` (float32,
//   bfloat16 or float16); all arithmetic is float32 (GEMMs accumulate in
//   float32, norms take float32 statistics), results are rounded once to the
//   storage type. Parameters that travel with an activation (LayerNorm /
//   GroupNorm affine, biases, adaLN shift/scale/gate, conv weights) have the
//   same dtype as it. Log-sum-exp values and timesteps are always float32.
// - Everything is enqueued on cuda::stream() (kernels/cuda/device.h) and
//   returns without synchronising; launch errors throw RuntimeFailure
//   (cuda_check.h), bad arguments std::invalid_argument.
// - Shapes as in ops.h: row-major, Linear weights [out, in], images NCHW,
//   token sequences [B, N, C]; sizes and strides in elements.
// - Host-only header without CUDA syntax: .cpp files include it.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "kernels/cuda/attention_path.h"
#include "kernels/cuda/dtype.h"
#include "vocab/attention_args.h"

namespace ditgen::cuda {

// ---- GEMM (gemm.cu) ----------------------------------------------------------
// float32 GEMMs are true float32 unless TF32 was allowed (cuda::set_allow_tf32
// of device.h; docs/design.md §3: "float32 means float32"); bf16/f16 GEMMs always
// accumulate in float32.
// C[M,N] = alpha * op(A) * op(B) + beta * C, row-major, A, B, C of one dtype.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a, int64_t lda,
          const void* b, int64_t ldb, float beta, void* c, int64_t ldc, DType dtype);

// `batch` independent GEMMs; matrix i of A/B/C starts stride_a/b/c elements
// after matrix i-1 (strides may be smaller than a matrix: heads interleaved
// in one token row).
void gemm_strided_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                          int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b, float beta,
                          void* c, int64_t ldc, int64_t stride_c, int64_t batch, DType dtype);

// y[M, N] (row stride ldy) = act(x[M, K] · w[N, K]^T + bias[N]) (bias may
// be null; act = gelu_tanh when asked, which needs ldy == N): cuBLASLt with
// its bias / GELU-bias epilogue, the algorithm chosen once per shape
// (gemm_lt_key.h); where cuBLASLt has none (or DITGEN_CUBLASLT=0),
// linear_unfused: cublasGemmEx, then the bias and GELU kernels.
void linear(const void* x, const void* w, const void* bias, void* y, int64_t m, int64_t n, int64_t k, int64_t ldy,
            DType dtype, bool gelu_tanh = false);
void linear_unfused(const void* x, const void* w, const void* bias, void* y, int64_t m, int64_t n, int64_t k,
                    int64_t ldy, DType dtype, bool gelu_tanh = false);
struct LinearPlanStats {
  size_t plans = 0, builds = 0, hits = 0;  // cached cuBLASLt keys (with no-algorithm ones), builds, cache hits
};
LinearPlanStats linear_plan_stats();

// ---- GGUF blocks (ggml_dequantize.cu) -----------------------------------------------
// y[rows, k] (dtype) from the (rows, k) matrix of ggml block type number
// `ggml_type` (one ditgen reads: kernels/math/ggml_blocks.h) whose `bytes`
// bytes of blocks lie at `blocks`, row after row: each element is
// math::dequantize_blocks' float32 value, rounded once to dtype. A size that
// does not fit the type is std::invalid_argument (ggml_dequantize_launch.h).
void dequantize_ggml(const void* blocks, size_t bytes, uint32_t ggml_type, void* y, int64_t rows, int64_t k,
                     DType dtype);

// ---- Elementwise (elementwise.cu) --------------------------------------------------
// y[n] = silu(x[n]) / gelu_tanh(x[n]) / relu(x[n]); y == x is allowed (in place).
void silu(const void* x, void* y, int64_t n, DType dtype);
void gelu_tanh(const void* x, void* y, int64_t n, DType dtype);
void gelu(const void* x, void* y, int64_t n, DType dtype);  // the exact (erf) GELU
void relu(const void* x, void* y, int64_t n, DType dtype);
// x[n] += y[n] / x[n] *= y[n].
void add_(void* x, const void* y, int64_t n, DType dtype);
void mul_(void* x, const void* y, int64_t n, DType dtype);
// x[B, N, C] += gate[b, :] * y[B, N, C], gate row b at gate + b * gate_stride.
void gated_residual_(void* x, const void* y, const void* gate, int64_t gate_stride, int64_t batch, int64_t tokens,
                     int64_t channels, DType dtype);

// x[r, j] += y[j] for r < rows, j < n (bias rows, position tables).
void add_broadcast_(void* x, const void* y, int64_t rows, int64_t n, DType dtype);
// y[i] = x[i] converted (round to nearest even), i < n; x and y must not overlap.
void cast(const void* x, DType x_dtype, void* y, DType y_dtype, int64_t n);

// ---- Normalisation (layer_norm.cu, rms_norm.cu, group_norm.cu, rms_norm_channels.cu) --
// y[rows, C] = LayerNorm(x[rows, C]) over the last dim; weight/bias [C] may be null.
void layer_norm(const void* x, const void* weight, const void* bias, void* y, int64_t rows, int64_t channels,
                float eps, DType dtype);
// y[rows, C] = weight * x / sqrt(mean(x^2) + eps) over the last dim (RMSNorm,
// T5LayerNorm); weight [C].
void rms_norm(const void* x, const void* weight, void* y, int64_t rows, int64_t channels, float eps, DType dtype);
// adaLN: y[B, N, C] = LN(x) * (1 + scale[b]) + shift[b], shift/scale row b at
// + b * mod_stride (chunks of the adaLN linear output, used in place).
void layer_norm_modulate(const void* x, const void* shift, const void* scale, int64_t mod_stride, void* y,
                         int64_t batch, int64_t tokens, int64_t channels, float eps, DType dtype);
// y[B, C, S] = GroupNorm(x) with affine weight/bias [C], then SiLU when
// fuse_silu (S = product of the spatial dims).
void group_norm(const void* x, const void* weight, const void* bias, void* y, int64_t batch, int64_t channels,
                int64_t spatial, int64_t groups, float eps, bool fuse_silu, DType dtype);
// y[B, C, S] = x / max(||x[b, :, s]||_2, 1e-12) * sqrt(C) * gamma[c] + bias[c]
// (bias may be null), then SiLU when fuse_silu: ops::rms_norm_channels
// (rms_norm_channels.cu).
void rms_norm_channels(const void* x, const void* gamma, const void* bias, void* y, int64_t batch, int64_t channels,
                       int64_t spatial, bool fuse_silu, DType dtype);

// ---- Convolution and resampling (conv2d.cu, conv3d.cu, upsample.cu) ---------------------
// y[B, Cout, Ho, Wo] = conv2d(x[B, Cin, H, W], w[Cout, Cin, kh, kw]) + bias[Cout]
// (bias may be null), zero padding; Ho = (H + 2 pad - kh) / stride + 1.
void conv2d(const void* x, const void* w, const void* bias, void* y, int64_t batch, int64_t in_channels,
            int64_t height, int64_t width, int64_t out_channels, int64_t kernel_h, int64_t kernel_w, int64_t stride,
            int64_t padding, DType dtype);
// y[B, C, H*f, W*f] = nearest upsampling of x[B, C, H, W].
void upsample_nearest(const void* x, void* y, int64_t batch, int64_t channels, int64_t height, int64_t width,
                      int64_t factor, DType dtype);
// y[B, Cout, To, Ho, Wo] = conv3d(x[B, Cin, T, H, W], w[Cout, Cin, kt, kh, kw])
// + bias[Cout] (bias may be null), per-axis (t, h, w) stride and symmetric
// zero padding; To = (T + 2 pt - kt) / st + 1, and so on (conv3d.cu).
void conv3d(const void* x, const void* w, const void* bias, void* y, int64_t batch, int64_t in_channels,
            std::array<int64_t, 3> in_size, int64_t out_channels, std::array<int64_t, 3> kernel,
            std::array<int64_t, 3> stride, std::array<int64_t, 3> padding, DType dtype);

// ---- Patches (embeddings.cu) ----------------------------------------------------------
// y[B, (H/p)*(W/p), C*p*p] from x[B, C, H, W], (c, i, j) order inside a patch.
void patchify(const void* x, void* y, int64_t batch, int64_t channels, int64_t height, int64_t width, int64_t p,
              DType dtype);
// y[B, C, h*p, w*p] from x[B, h*w, p*p*C], (i, j, c) order inside a patch.
void unpatchify(const void* x, void* y, int64_t batch, int64_t h, int64_t w, int64_t p, int64_t channels,
                DType dtype);
// y[B, f*h*w, C*pt*ph*pw] from x[B, C, T, H, W] (size = {T, H, W}, patch =
// {pt, ph, pw}), (c, a, i, j) order inside a patch.
void patchify3d(const void* x, void* y, int64_t batch, int64_t channels, std::array<int64_t, 3> size,
                std::array<int64_t, 3> patch, DType dtype);
// y[B, C, f*pt, h*ph, w*pw] from x[B, f*h*w, pt*ph*pw*C] (grid = {f, h, w}),
// (a, i, j, c) order inside a patch.
void unpatchify3d(const void* x, void* y, int64_t batch, std::array<int64_t, 3> grid, std::array<int64_t, 3> patch,
                  int64_t channels, DType dtype);

// ---- Rotary position embedding (rotary.cu) ------------------------------------------------
// `rows` rows of `width` (heads * head_dim) elements, row r at x + r *
// x_stride, rotated into y + r * y_stride (y == x: in place) with table row
// r % tokens of cos / sin (float32 [*, head_dim], from the first token's row
// on): interleaved pairs, ops::rotary_embed_.
void rotary_embed(const void* x, int64_t x_stride, void* y, int64_t y_stride, int64_t rows, int64_t tokens,
                  int64_t width, const float* cos, const float* sin, int64_t head_dim, DType dtype);

// ---- Attention (attention.cu, attention_flash.cu, attention_math.cu) ----------------------
// The operands' layout (src/vocab/attention_args.h) on device pointers.
using ditgen::AttentionArgs;

// Runs the path choose_attention_path picks for the current device (kAuto)
// or the forced one; forcing flash where neither cuDNN nor the own flash
// kernel can run throws. A kCudnn call cuDNN has no plan for runs the own
// flash kernel (or math, where that cannot run).
void attention(const AttentionArgs& args, AttentionMode mode = AttentionMode::kAuto);
// The path attention() takes for these arguments on the current device.
AttentionPath attention_path(const AttentionArgs& args, AttentionMode mode = AttentionMode::kAuto);
// The two implementations, directly (tests; attention() checks support).
void attention_flash(const AttentionArgs& args);
// Whether this build holds a flash image for the current device (an sm_80+
// image, or PTX of compute_80+); attention() falls back to math otherwise.
bool flash_image_available();
void attention_math(const AttentionArgs& args);
// cuDNN's fused flash attention (attention_cudnn.cpp): whether this build
// has it and this process loaded libcudnn 9 (tried once; off with
// DITGEN_CUDNN_ATTENTION=0), a line saying which cuDNN or why not, and the
// call itself: true when it ran, false when cuDNN has no plan for the
// shape (or is unavailable, or the operands are not 16-byte aligned), in
// which case nothing was done. Graphs are built once per shape (SdpaKey).
bool cudnn_attention_available();
std::string cudnn_attention_status();
bool attention_cudnn(const AttentionArgs& args);
struct CudnnAttentionStats {
  size_t graphs = 0, builds = 0, hits = 0;  // cached keys (with no-plan ones), builds, cache hits
};
CudnnAttentionStats cudnn_attention_stats();

// Merges a partial result (out2, lse2) over another key block into (out, lse)
// in place (ops::attention_merge_): out rows as AttentionArgs, lse float32
// (batch, heads, q_len).
void attention_merge_(void* out, float* lse, const void* out2, const float* lse2, int64_t batch, int64_t heads,
                      int64_t q_len, int64_t head_dim, int64_t row_stride, int64_t batch_stride, DType dtype);

}  // namespace ditgen::cuda
