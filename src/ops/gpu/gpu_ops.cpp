// Tensor-level CUDA ops (see gpu_ops.h): shape unpacking only, no arithmetic.
// Outputs are allocated on the device with the input's dtype; everything is
// enqueued on cuda::stream() and nothing synchronises here.
#include "ops/gpu/gpu_ops.h"

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"

namespace ditgen::ops::gpu {

namespace {

Tensor like(const Tensor& x, Shape shape) { return Tensor::empty(std::move(shape), Device::kCUDA, x.dtype()); }

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const Tensor& a, const Tensor& b,
          float beta, Tensor& c) {
  cuda::gemm(trans_a, trans_b, m, n, k, alpha, a.raw(), a.dim(1), b.raw(), b.dim(1), beta, c.raw(), n, a.dtype());
}

void linear_into(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, int64_t col) {
  const int64_t k = w.dim(1), n = w.dim(0), m = x.numel() / k;
  cuda::linear(x.raw(), w.raw(), bias ? bias->raw() : nullptr, y.raw_at(col), m, n, k, y.dim(-1), x.dtype());
}

Tensor dequantize_gemm_weight(const Tensor& w, DType dtype) {
  Tensor y = Tensor::empty(w.shape(), Device::kCUDA, dtype);
  cuda::dequantize_ggml(w.raw(), w.nbytes(), w.block_type(), y.raw(), w.dim(0), w.dim(1), dtype);
  return y;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act) {
  Shape shape = x.shape();
  shape.back() = w.dim(0);
  Tensor y = like(x, shape);
  const int64_t k = w.dim(1), n = w.dim(0), m = x.numel() / k;
  cuda::linear(x.raw(), w.raw(), bias ? bias->raw() : nullptr, y.raw(), m, n, k, n, x.dtype(),
               act == Activation::kGeluTanh);
  return y;
}

void silu_(Tensor& x) { cuda::silu(x.raw(), x.raw(), x.numel(), x.dtype()); }

Tensor silu(const Tensor& x) {
  Tensor y = like(x, x.shape());
  cuda::silu(x.raw(), y.raw(), x.numel(), x.dtype());
  return y;
}

void gelu_tanh_(Tensor& x) { cuda::gelu_tanh(x.raw(), x.raw(), x.numel(), x.dtype()); }

void gelu_(Tensor& x) { cuda::gelu(x.raw(), x.raw(), x.numel(), x.dtype()); }

void relu_(Tensor& x) { cuda::relu(x.raw(), x.raw(), x.numel(), x.dtype()); }

void add_(Tensor& x, const Tensor& y) { cuda::add_(x.raw(), y.raw(), x.numel(), x.dtype()); }

void mul_(Tensor& x, const Tensor& y) { cuda::mul_(x.raw(), y.raw(), x.numel(), x.dtype()); }

void add_broadcast_(Tensor& x, const Tensor& y) {
  cuda::add_broadcast_(x.raw(), y.raw(), x.numel() / y.numel(), y.numel(), x.dtype());
}

void gated_residual_(Tensor& x, const Tensor& y, const Tensor& mod, int64_t gate_col) {
  cuda::gated_residual_(x.raw(), y.raw(), mod.raw_at(gate_col), mod.dim(1), x.dim(0), x.dim(1), x.dim(2), x.dtype());
}

Tensor layer_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, float eps) {
  Tensor y = like(x, x.shape());
  const int64_t c = x.dim(-1);
  cuda::layer_norm(x.raw(), weight ? weight->raw() : nullptr, bias ? bias->raw() : nullptr, y.raw(), x.numel() / c,
                   c, eps, x.dtype());
  return y;
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) {
  Tensor y = like(x, x.shape());
  const int64_t c = x.dim(-1);
  cuda::rms_norm(x.raw(), weight.raw(), y.raw(), c > 0 ? x.numel() / c : 0, c, eps, x.dtype());
  return y;
}

void layer_norm_modulate(const Tensor& x, const Tensor& mod, int64_t shift_col, int64_t scale_col, float eps,
                         Tensor& out) {
  cuda::layer_norm_modulate(x.raw(), mod.raw_at(shift_col), mod.raw_at(scale_col), mod.dim(1), out.raw(), x.dim(0),
                            x.dim(1), x.dim(2), eps, x.dtype());
}

Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias, float eps,
                  bool fuse_silu) {
  Tensor y = like(x, x.shape());
  const int64_t b = x.dim(0), c = x.dim(1), spatial = b * c > 0 ? x.numel() / (b * c) : 0;
  cuda::group_norm(x.raw(), weight.raw(), bias.raw(), y.raw(), b, c, spatial, groups, eps, fuse_silu, x.dtype());
  return y;
}

Tensor rms_norm_channels(const Tensor& x, const Tensor& gamma, const Tensor* bias, bool fuse_silu) {
  Tensor y = like(x, x.shape());
  const int64_t b = x.dim(0), c = x.dim(1), spatial = b * c > 0 ? x.numel() / (b * c) : 0;
  cuda::rms_norm_channels(x.raw(), gamma.raw(), bias ? bias->raw() : nullptr, y.raw(), b, c, spatial, fuse_silu,
                          x.dtype());
  return y;
}

void attention(const AttentionArgs& a, AttentionMode mode) { cuda::attention(a, mode); }

const char* attention_path_name(int64_t head_dim, DType dtype, AttentionMode mode) {
  cuda::AttentionArgs probe;
  probe.head_dim = head_dim;
  probe.dtype = dtype;
  return cuda::attention_path_name(cuda::attention_path(probe, mode));
}

void attention_merge_(Tensor& out, Tensor& lse, const Tensor& out2, const Tensor& lse2, int64_t heads) {
  const int64_t b = out.dim(0), n = out.dim(1), c = out.dim(2);
  cuda::attention_merge_(out.raw(), static_cast<float*>(lse.raw()), out2.raw(), static_cast<const float*>(lse2.raw()),
                         b, heads, n, c / heads, c, n * c, out.dtype());
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding) {
  const int64_t ho = (x.dim(2) + 2 * padding - w.dim(2)) / stride + 1;
  const int64_t wo = (x.dim(3) + 2 * padding - w.dim(3)) / stride + 1;
  Tensor y = like(x, {x.dim(0), w.dim(0), ho, wo});
  cuda::conv2d(x.raw(), w.raw(), bias ? bias->raw() : nullptr, y.raw(), x.dim(0), x.dim(1), x.dim(2), x.dim(3),
               w.dim(0), w.dim(2), w.dim(3), stride, padding, x.dtype());
  return y;
}

Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, std::array<int64_t, 3> stride,
              std::array<int64_t, 3> padding) {
  const std::array<int64_t, 3> in{x.dim(2), x.dim(3), x.dim(4)}, kernel{w.dim(2), w.dim(3), w.dim(4)};
  Shape out{x.dim(0), w.dim(0)};
  for (int a = 0; a < 3; ++a) out.push_back((in[a] + 2 * padding[a] - kernel[a]) / stride[a] + 1);
  Tensor y = like(x, out);
  cuda::conv3d(x.raw(), w.raw(), bias ? bias->raw() : nullptr, y.raw(), x.dim(0), x.dim(1), in, w.dim(0), kernel,
               stride, padding, x.dtype());
  return y;
}

Tensor upsample_nearest(const Tensor& x, int64_t factor) {
  Tensor y = like(x, {x.dim(0), x.dim(1), x.dim(2) * factor, x.dim(3) * factor});
  cuda::upsample_nearest(x.raw(), y.raw(), x.dim(0), x.dim(1), x.dim(2), x.dim(3), factor, x.dtype());
  return y;
}

Tensor patchify(const Tensor& x, int64_t p) {
  const int64_t b = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  Tensor y = like(x, {b, (h / p) * (w / p), c * p * p});
  cuda::patchify(x.raw(), y.raw(), b, c, h, w, p, x.dtype());
  return y;
}

Tensor unpatchify(const Tensor& x, int64_t h, int64_t w, int64_t p, int64_t channels) {
  Tensor y = like(x, {x.dim(0), channels, h * p, w * p});
  cuda::unpatchify(x.raw(), y.raw(), x.dim(0), h, w, p, channels, x.dtype());
  return y;
}

Tensor patchify3d(const Tensor& x, std::array<int64_t, 3> patch) {
  const int64_t c = x.dim(1), tokens = (x.dim(2) / patch[0]) * (x.dim(3) / patch[1]) * (x.dim(4) / patch[2]);
  Tensor y = like(x, {x.dim(0), tokens, c * patch[0] * patch[1] * patch[2]});
  cuda::patchify3d(x.raw(), y.raw(), x.dim(0), c, {x.dim(2), x.dim(3), x.dim(4)}, patch, x.dtype());
  return y;
}

Tensor unpatchify3d(const Tensor& x, std::array<int64_t, 3> grid, std::array<int64_t, 3> patch, int64_t channels) {
  Tensor y = like(x, {x.dim(0), channels, grid[0] * patch[0], grid[1] * patch[1], grid[2] * patch[2]});
  cuda::unpatchify3d(x.raw(), y.raw(), x.dim(0), grid, patch, channels, x.dtype());
  return y;
}

void rotary_embed(const Tensor& x, int64_t x_offset, int64_t x_stride, Tensor& y, int64_t y_offset, int64_t y_stride,
                  int64_t rows, int64_t tokens, int64_t width, const Tensor& cos, const Tensor& sin,
                  int64_t first_token) {
  const int64_t head_dim = cos.dim(1);
  cuda::rotary_embed(x.raw_at(x_offset), x_stride, y.raw_at(y_offset), y_stride, rows, tokens, width,
                     static_cast<const float*>(cos.raw()) + first_token * head_dim,
                     static_cast<const float*>(sin.raw()) + first_token * head_dim, head_dim, x.dtype());
}

void copy_rows(const Tensor& src, int64_t src_offset, int64_t src_stride, Tensor& dst, int64_t dst_offset,
               int64_t dst_stride, int64_t rows, int64_t row_len) {
  const size_t es = src.element_size();
  cuda::copy_2d_on_device(dst.raw_at(dst_offset), dst_stride * es, src.raw_at(src_offset), src_stride * es,
                          row_len * es, rows);
}

}  // namespace ditgen::ops::gpu
