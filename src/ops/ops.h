// Op front end: the one place models call for compute. Every op works on
// float32 row-major tensors; each has a CPU implementation in ops/cpu/ (and,
// with the CUDA backend, a kernels/cuda/ one chosen here by tensor device).
// Shapes use the diffusers/PyTorch conventions: Linear weights are [out, in],
// images NCHW, token sequences [B, N, C].
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace ditgen::ops {

// Threads used by ops and by BLAS (one OpenMP pool shared by both).
// Also sets flush-to-zero / denormals-are-zero on the pool threads.
void set_num_threads(int n);
int num_threads();
// "openmp" / "pthread" / "serial": OpenBLAS's threading build, for diagnostics.
const char* blas_threading();
// OpenBLAS's kernel family in use ("SkylakeX", "Haswell", ...).
const char* blas_core();

// ---- GEMM ---------------------------------------------------------------
// C[M,N] = alpha * op(A) * op(B) + beta * C, row-major, leading dimensions
// in elements.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// y[..., N] = x[..., K] · w[N, K]^T + bias[N]  (torch.nn.Linear).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias);
// Same, writing rows of length N into y with row stride ldy (for writing
// into a slice of a wider buffer).
void linear_into(const Tensor& x, const Tensor& w, const Tensor* bias, float* y, int64_t ldy);

// ---- Elementwise ----------------------------------------------------------
void silu_(Tensor& x);                       // x * sigmoid(x), in place
Tensor silu(const Tensor& x);
void gelu_tanh_(Tensor& x);                  // GELU, tanh approximation, in place
void add_(Tensor& x, const Tensor& y);       // x += y (same shape)

// ---- Normalisation ----------------------------------------------------------
// LayerNorm over the last dim, optional affine (weight/bias may be null).
Tensor layer_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, float eps);

// adaLN modulation: x [B, N, C]; out = LN(x) * (1 + scale[b]) + shift[b]
// where shift/scale point at row b of a [B, *] matrix with row stride
// mod_stride (the chunks of an adaLN linear output, used in place).
void layer_norm_modulate(const Tensor& x, const float* shift, const float* scale, int64_t mod_stride, float eps,
                         Tensor& out);

// x [B, N, C] += gate[b] * y [B, N, C]   (adaLN-Zero gated residual).
void gated_residual_(Tensor& x, const Tensor& y, const float* gate, int64_t gate_stride);

// GroupNorm on NCHW-like [B, C, *] with affine weight/bias [C]; optionally
// followed by SiLU (the VAE always pairs them).
Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias, float eps,
                  bool fuse_silu);

// ---- Attention ----------------------------------------------------------------
// Scaled dot-product attention with O(n) extra memory (tiled, online
// softmax). Tokens are rows: element (b, n, h, d) of q lives at
// q + b*q_batch_stride + n*q_row_stride + h*head_dim + d; same for k, v, out.
// This reads Q/K/V straight out of projection outputs, no transposes.
struct AttentionArgs {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  int64_t batch = 1, heads = 1, q_len = 0, kv_len = 0, head_dim = 0;
  int64_t q_row_stride = 0, k_row_stride = 0, v_row_stride = 0, out_row_stride = 0;
  int64_t q_batch_stride = 0, k_batch_stride = 0, v_batch_stride = 0, out_batch_stride = 0;
  float scale = 0;  // usually 1/sqrt(head_dim)
  // Optional (batch, heads, q_len) output: each row's log-sum-exp of the
  // scaled scores, so partial results over key blocks can be merged (ring
  // attention). Null: not written.
  float* lse = nullptr;
};
void attention(const AttentionArgs& args);

// Merges a partial attention result (out2, lse2) over another key block into
// the running one (out, lse), in place: the softmax over the union of keys.
// out rows as AttentionArgs (row_stride between tokens, heads*head_dim wide,
// batch_stride between samples); lse (batch, heads, q_len).
void attention_merge_(float* out, float* lse, const float* out2, const float* lse2, int64_t batch, int64_t heads,
                      int64_t q_len, int64_t head_dim, int64_t row_stride, int64_t batch_stride);

// ---- Convolution and resampling (VAE) --------------------------------------------
// 2-D convolution, NCHW: x [B, Cin, H, W], w [Cout, Cin, kh, kw], bias [Cout];
// stride and zero padding in both directions.
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding);
// Nearest-neighbour upsampling by an integer factor: [B, C, H, W] -> [B, C, H*f, W*f].
Tensor upsample_nearest(const Tensor& x, int64_t factor);

// ---- Embeddings and patches -------------------------------------------------------
// diffusers get_timestep_embedding: out [len(t), dim].
Tensor timestep_embedding(const std::vector<float>& timesteps, int64_t dim, bool flip_sin_to_cos,
                          float downscale_freq_shift, float scale = 1.0f, float max_period = 10000.0f);
// diffusers get_2d_sincos_pos_embed for a grid_h x grid_w grid: out [grid_h*grid_w, dim].
Tensor sincos_pos_embed_2d(int64_t dim, int64_t grid_h, int64_t grid_w, double base_size, double interpolation_scale);
// [B, C, H, W] -> [B, (H/p)*(W/p), C*p*p] with (c, i, j) order inside a patch
// (matching a Conv2d(kernel=stride=p) weight flattened as [out, C*p*p]).
Tensor patchify(const Tensor& x, int64_t p);
// [B, h*w, p*p*C] with (i, j, c) order inside a patch -> [B, C, h*p, w*p]
// (DiT's einsum "nhwpqc->nchpwq").
Tensor unpatchify(const Tensor& x, int64_t h, int64_t w, int64_t p, int64_t channels);

}  // namespace ditgen::ops
