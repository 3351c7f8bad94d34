// The op front end (ops.h): checks each op's arguments once, for every
// device, then dispatches by the tensors' device and dtype to ops/cpu or, in
// a CUDA build, ops/gpu. This file is the only place that knows both
// backends exist, and the only place that decides which dtypes reach them:
// the CPU computes in float32, so every CPU operand is float32 except a
// GEMM weight (linear, linear_into, gemm's b), which may stay bfloat16 or
// float16 as it was stored (the CPU GEMM widens it in blocks); CUDA takes
// float32, bfloat16 or float16, every operand of one op in one dtype.
#include "ops/ops.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/math/ggml_blocks.h"
#include "ops/cpu/cpu_ops.h"
#include "tensor/convert.h"
#ifdef DITGEN_WITH_CUDA
#include "ops/gpu/gpu_ops.h"
#endif

namespace ditgen::ops {

namespace {

AttentionMode g_attention_mode = AttentionMode::kAuto;

std::string where(const Tensor& t) {
  return std::string(device_name(t.device())) + " " + dtype_name(t.dtype()) + " " + shape_str(t.shape());
}

// Every operand on the first one's device, with its dtype (the dispatch
// then checks that dtype once for the device).
void same_place(const char* op, const Tensor& first, std::initializer_list<const Tensor*> others) {
  if (!first.defined()) throw std::invalid_argument(std::string(op) + ": undefined input tensor");
  for (const Tensor* t : others) {
    if (!t) continue;
    if (!t->defined()) throw std::invalid_argument(std::string(op) + ": undefined tensor argument");
    if (t->device() != first.device() || t->dtype() != first.dtype())
      throw std::invalid_argument(std::string(op) + ": tensors on different devices or dtypes: " + where(first) +
                                  " and " + where(*t));
  }
}

bool on_cuda(const Tensor& t) { return t.device() == Device::kCUDA; }

// The CPU ops compute in float32: an operand of another dtype is the
// caller's to convert (ops::convert), never converted silently here.
void require_cpu_float32(const char* op, const Tensor& t) {
  if (t.dtype() != DType::kF32)
    throw std::invalid_argument(std::string(op) + ": the CPU computes in float32, got a " + where(t) +
                                " tensor (convert it with ops::convert)");
}

// A GEMM weight beside activations x: x's device; on the CPU float32,
// bfloat16 or float16 (widened inside the GEMM), on CUDA x's dtype.
void weight_place(const char* op, const Tensor& x, const Tensor& w) {
  if (!w.defined()) throw std::invalid_argument(std::string(op) + ": undefined weight tensor");
  if (w.device() != x.device() || (on_cuda(x) && w.dtype() != x.dtype()))
    throw std::invalid_argument(std::string(op) + ": tensors on different devices or dtypes: " + where(x) +
                                " and weight " + where(w));
  const bool int8_weight = w.layout() == Layout::kInt8Packed && w.is_cpu();  // quantize_gemm_weight's
  if (w.layout() == Layout::kBlockQuantized && (!w.is_cpu() || std::string(op) != "linear"))
    throw std::invalid_argument(std::string(op) + ": a block-quantized weight is a CPU linear layer's (" + where(w) +
                                ")");
  if (!is_floating(w.dtype()) && !int8_weight)
    throw std::invalid_argument(std::string(op) + ": weight must be float32, bfloat16 or float16 (or a CPU int8 "
                                "weight from quantize_gemm_weight), got " + where(w));
}

#ifndef DITGEN_WITH_CUDA
[[noreturn]] void unreachable_cuda(const char* op) {
  // A CUDA tensor cannot be created in a CPU-only build (Tensor::empty
  // refuses), so this is a logic error if it is ever reached.
  throw std::logic_error(std::string(op) + ": CUDA tensor in a build without the CUDA backend");
}
#endif

void check_modulation(const char* op, const Tensor& x, const Tensor& mod, std::initializer_list<int64_t> cols) {
  if (x.ndim() != 3 || mod.ndim() != 2 || mod.dim(0) != x.dim(0))
    throw std::invalid_argument(std::string(op) + ": x " + shape_str(x.shape()) + " with modulation " +
                                shape_str(mod.shape()));
  for (int64_t c : cols)
    if (c < 0 || c + x.dim(2) > mod.dim(1))
      throw std::invalid_argument(std::string(op) + ": columns [" + std::to_string(c) + ", " +
                                  std::to_string(c + x.dim(2)) + ") outside modulation " + shape_str(mod.shape()));
}

}  // namespace

// The dispatch, macros so the CUDA branch exists only in CUDA builds.
// DITGEN_DISPATCH_ON(lead, ...): by the lead operand's device and dtype (on
// the CPU it must be float32; same_place has made the others match it);
// gpu_call / cpu_call are the ops::gpu / ops::cpu calls (DITGEN_DISPATCH:
// the same call when the signatures match). DITGEN_DISPATCH_TO(cuda, ...):
// by device alone, for attention, which checks its own dtype.
#ifdef DITGEN_WITH_CUDA
#define DITGEN_DISPATCH_TO(cuda, op_name, gpu_call, cpu_call) \
  if (cuda) return gpu::gpu_call;                              \
  return cpu::cpu_call
#else
#define DITGEN_DISPATCH_TO(cuda, op_name, gpu_call, cpu_call) \
  if (cuda) unreachable_cuda(op_name);                         \
  return cpu::cpu_call
#endif
#define DITGEN_DISPATCH_ON(lead, op_name, gpu_call, cpu_call) \
  if (!on_cuda(lead)) require_cpu_float32(op_name, lead);      \
  DITGEN_DISPATCH_TO(on_cuda(lead), op_name, gpu_call, cpu_call)
#define DITGEN_DISPATCH(tensor, op_name, call) DITGEN_DISPATCH_ON(tensor, op_name, call, call)

Tensor convert(const Tensor& x, DType dtype) {
  if (!x.defined()) throw std::invalid_argument("convert: undefined input tensor");
  if (on_cuda(x) && !is_floating(dtype))
    throw std::invalid_argument(std::string("convert: CUDA tensors are floating, not ") + dtype_name(dtype));
  return x.to(x.device(), dtype);
}

void gemm(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta, Tensor& c) {
  same_place("gemm", a, {&c});
  weight_place("gemm", a, b);
  if (a.ndim() != 2 || b.ndim() != 2 || c.ndim() != 2)
    throw std::invalid_argument("gemm: 2-D operands expected, got " + shape_str(a.shape()) + ", " +
                                shape_str(b.shape()) + ", " + shape_str(c.shape()));
  const int64_t m = trans_a ? a.dim(1) : a.dim(0), k = trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = trans_b ? b.dim(1) : b.dim(0), n = trans_b ? b.dim(0) : b.dim(1);
  if (k != kb || c.dim(0) != m || c.dim(1) != n)
    throw std::invalid_argument("gemm: op(a) " + std::to_string(m) + "x" + std::to_string(k) + ", op(b) " +
                                std::to_string(kb) + "x" + std::to_string(n) + ", c " + shape_str(c.shape()));
  DITGEN_DISPATCH_ON(a, "gemm", gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c),
                     gemm(trans_a, trans_b, m, n, k, alpha, a.data(), a.dim(1), b.raw(), b.dtype(), b.dim(1), beta,
                          c.data(), n, nullptr, Activation::kNone, b.layout()));
}

namespace {
void check_linear(const Tensor& x, const Tensor& w, const Tensor* bias) {
  same_place("linear", x, {bias});
  weight_place("linear", x, w);
  if (w.ndim() != 2) throw std::invalid_argument("linear: weight must be 2-D, got " + shape_str(w.shape()));
  if (x.ndim() < 1 || x.dim(-1) != w.dim(1))
    throw std::invalid_argument("linear: input " + shape_str(x.shape()) + " does not match weight " +
                                shape_str(w.shape()));
  if (bias && bias->numel() != w.dim(0)) throw std::invalid_argument("linear: bias " + shape_str(bias->shape()));
}
}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias, Activation act) {
  check_linear(x, w, bias);
#ifdef DITGEN_WITH_CUDA
  if (on_cuda(x)) return gpu::linear(x, w, bias, act);  // CUDA: bias and activation in cuBLASLt's epilogue
#endif
  DITGEN_DISPATCH_ON(x, "linear", linear(x, w, bias), linear(x, w, bias, act));
}

void linear_into(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, int64_t col) {
  check_linear(x, w, bias);
  same_place("linear_into", x, {&y});
  const int64_t rows = x.numel() / w.dim(1), width = y.ndim() ? y.dim(-1) : 0;
  if (y.ndim() < 1 || y.numel() != rows * width || col < 0 || col + w.dim(0) > width)
    throw std::invalid_argument("linear_into: columns [" + std::to_string(col) + ", " +
                                std::to_string(col + w.dim(0)) + ") of " + shape_str(y.shape()) + " for " +
                                std::to_string(rows) + " rows");
  DITGEN_DISPATCH_ON(x, "linear_into", linear_into(x, w, bias, y, col),
                     linear_into(x, w, bias, y.data() + col, width));
}

Tensor pack_gemm_weight(const Tensor& w) {
  if (!w.defined() || !w.is_cpu()) return w;
  return cpu::pack_gemm_weight(w);
}

Tensor dequantize_gemm_weight(const Tensor& w, DType dtype) {
  if (!w.defined() || w.layout() != Layout::kBlockQuantized || w.ndim() != 2)
    throw std::invalid_argument("dequantize_gemm_weight: a block-quantized (N, K) weight, not " + where(w));
  if (!is_floating(dtype))
    throw std::invalid_argument(std::string("dequantize_gemm_weight: to float32, bfloat16 or float16, not ") +
                                dtype_name(dtype));
  if (math::ggml_matrix_bytes(w.block_type(), w.dim(0), w.dim(1)) != static_cast<int64_t>(w.nbytes())) {
    const math::GgmlTypeTraits* type = math::find_ggml_type(w.block_type());
    throw std::invalid_argument("dequantize_gemm_weight: " + std::to_string(w.nbytes()) + " bytes of " +
                                (type ? type->name : "ggml type " + std::to_string(w.block_type())) + " blocks are no " +
                                shape_str(w.shape()) + " weight");
  }
  DITGEN_DISPATCH_TO(on_cuda(w), "dequantize_gemm_weight", dequantize_gemm_weight(w, dtype),
                     dequantize_gemm_weight(w).to(dtype));
}

Tensor quantize_gemm_weight(const Tensor& w) {
  if (!w.is_cpu()) throw std::invalid_argument("quantize_gemm_weight: int8 weights are CPU weights");
  return cpu::quantize_gemm_weight(w);
}

void silu_(Tensor& x) { DITGEN_DISPATCH(x, "silu_", silu_(x)); }
Tensor silu(const Tensor& x) { DITGEN_DISPATCH(x, "silu", silu(x)); }
void gelu_tanh_(Tensor& x) { DITGEN_DISPATCH(x, "gelu_tanh_", gelu_tanh_(x)); }
void gelu_(Tensor& x) { DITGEN_DISPATCH(x, "gelu_", gelu_(x)); }
void relu_(Tensor& x) { DITGEN_DISPATCH(x, "relu_", relu_(x)); }

void add_(Tensor& x, const Tensor& y) {
  same_place("add_", x, {&y});
  if (x.shape() != y.shape())
    throw std::invalid_argument("add_: shapes " + shape_str(x.shape()) + " and " + shape_str(y.shape()));
  DITGEN_DISPATCH(x, "add_", add_(x, y));
}

void mul_(Tensor& x, const Tensor& y) {
  same_place("mul_", x, {&y});
  if (x.shape() != y.shape())
    throw std::invalid_argument("mul_: shapes " + shape_str(x.shape()) + " and " + shape_str(y.shape()));
  DITGEN_DISPATCH(x, "mul_", mul_(x, y));
}

void add_broadcast_(Tensor& x, const Tensor& y) {
  same_place("add_broadcast_", x, {&y});
  if (y.numel() == 0 || x.numel() % y.numel() != 0)
    throw std::invalid_argument("add_broadcast_: " + shape_str(y.shape()) + " does not tile " +
                                shape_str(x.shape()));
  DITGEN_DISPATCH(x, "add_broadcast_", add_broadcast_(x, y));
}

Tensor layer_norm(const Tensor& x, const Tensor* weight, const Tensor* bias, float eps) {
  same_place("layer_norm", x, {weight, bias});
  if (x.ndim() < 1 || (weight && weight->numel() != x.dim(-1)) || (bias && bias->numel() != x.dim(-1)))
    throw std::invalid_argument("layer_norm: input " + shape_str(x.shape()) + " with affine of another size");
  DITGEN_DISPATCH(x, "layer_norm", layer_norm(x, weight, bias, eps));
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) {
  same_place("rms_norm", x, {&weight});
  if (x.ndim() < 1 || weight.numel() != x.dim(-1))
    throw std::invalid_argument("rms_norm: input " + shape_str(x.shape()) + " with weight " +
                                shape_str(weight.shape()));
  DITGEN_DISPATCH(x, "rms_norm", rms_norm(x, weight, eps));
}

void layer_norm_modulate(const Tensor& x, const Tensor& mod, int64_t shift_col, int64_t scale_col, float eps,
                         Tensor& out) {
  same_place("layer_norm_modulate", x, {&mod, &out});
  check_modulation("layer_norm_modulate", x, mod, {shift_col, scale_col});
  if (out.shape() != x.shape())
    throw std::invalid_argument("layer_norm_modulate: x " + shape_str(x.shape()) + ", out " +
                                shape_str(out.shape()));
  DITGEN_DISPATCH_ON(x, "layer_norm_modulate", layer_norm_modulate(x, mod, shift_col, scale_col, eps, out),
                     layer_norm_modulate(x, mod.data() + shift_col, mod.data() + scale_col, mod.dim(1), eps, out));
}

void gated_residual_(Tensor& x, const Tensor& y, const Tensor& mod, int64_t gate_col) {
  same_place("gated_residual_", x, {&y, &mod});
  if (x.shape() != y.shape())
    throw std::invalid_argument("gated_residual_: shapes " + shape_str(x.shape()) + " and " + shape_str(y.shape()));
  check_modulation("gated_residual_", x, mod, {gate_col});
  DITGEN_DISPATCH_ON(x, "gated_residual_", gated_residual_(x, y, mod, gate_col),
                     gated_residual_(x, y, mod.data() + gate_col, mod.dim(1)));
}

Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias, float eps,
                  bool fuse_silu) {
  same_place("group_norm", x, {&weight, &bias});
  if (x.ndim() < 2 || groups <= 0 || x.dim(1) % groups != 0 || weight.numel() != x.dim(1) ||
      bias.numel() != x.dim(1))
    throw std::invalid_argument("group_norm: input " + shape_str(x.shape()) + ", " + std::to_string(groups) +
                                " groups, affine " + shape_str(weight.shape()));
  DITGEN_DISPATCH(x, "group_norm", group_norm(x, groups, weight, bias, eps, fuse_silu));
}

Tensor rms_norm_channels(const Tensor& x, const Tensor& gamma, const Tensor* bias, bool fuse_silu) {
  same_place("rms_norm_channels", x, {&gamma, bias});
  if (x.ndim() < 2 || gamma.numel() != x.dim(1) || (bias && bias->numel() != x.dim(1)))
    throw std::invalid_argument("rms_norm_channels: input " + shape_str(x.shape()) + " (channels on dim 1) with gamma " +
                                shape_str(gamma.shape()) + (bias ? ", bias " + shape_str(bias->shape()) : ""));
  DITGEN_DISPATCH(x, "rms_norm_channels", rms_norm_channels(x, gamma, bias, fuse_silu));
}

void attention(const AttentionArgs& a) {
  if (!a.q || !a.k || !a.v || !a.out || a.head_dim <= 0 || a.heads <= 0 || a.batch < 0 || a.q_len < 0 ||
      a.kv_len <= 0)
    throw std::invalid_argument("attention: bad arguments (null operand or non-positive size)");
  if (a.device == Device::kCPU && a.dtype != DType::kF32)
    throw std::invalid_argument("attention: CPU operands must be float32");
  // CUDA computes in its operands' dtype (float16 included) and ignores `compute`.
  if (a.device == Device::kCPU && a.compute != DType::kF32 && a.compute != DType::kBF16)
    throw std::invalid_argument(std::string("attention: CPU compute in float32 or bfloat16, not ") +
                                dtype_name(a.compute));
  if (a.kv_lens)
    for (int64_t b = 0; b < a.batch; ++b)
      if (a.kv_lens[b] < 1 || a.kv_lens[b] > a.kv_len)
        throw std::invalid_argument("attention: kv_lens[" + std::to_string(b) + "] = " + std::to_string(a.kv_lens[b]) +
                                    " outside [1, kv_len = " + std::to_string(a.kv_len) + "]");
  [[maybe_unused]] const AttentionMode mode = a.follow_attention_mode ? g_attention_mode : AttentionMode::kAuto;
  DITGEN_DISPATCH_TO(a.device == Device::kCUDA, "attention", attention(a, mode), attention(a));
}

void set_attention_mode(AttentionMode mode) { g_attention_mode = mode; }
AttentionMode attention_mode() { return g_attention_mode; }

void attention_merge_(Tensor& out, Tensor& lse, const Tensor& out2, const Tensor& lse2, int64_t heads) {
  same_place("attention_merge_", out, {&out2});
  same_place("attention_merge_ (lse)", lse, {&lse2});
  if (out.ndim() != 3 || out2.shape() != out.shape() || heads <= 0 || out.dim(2) % heads != 0 ||
      lse.shape() != Shape{out.dim(0), heads, out.dim(1)} || lse2.shape() != lse.shape() ||
      lse.dtype() != DType::kF32 || lse.device() != out.device())
    throw std::invalid_argument("attention_merge_: out " + shape_str(out.shape()) + ", lse " + where(lse) +
                                " for " + std::to_string(heads) + " heads");
  const int64_t b = out.dim(0), n = out.dim(1), c = out.dim(2);
  DITGEN_DISPATCH_TO(on_cuda(out), "attention_merge_", attention_merge_(out, lse, out2, lse2, heads),
                     attention_merge_(out.data(), lse.data(), out2.data(), lse2.data(), b, heads, n, c / heads, c,
                                      n * c));
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding) {
  same_place("conv2d", x, {bias});
  weight_place("conv2d", x, w);  // the CPU takes a float32 or bfloat16 weight: the arithmetic
  if (x.ndim() != 4 || w.ndim() != 4 || w.dim(1) != x.dim(1) || (bias && bias->numel() != w.dim(0)) ||
      stride <= 0 || padding < 0 || x.dim(2) + 2 * padding < w.dim(2) || x.dim(3) + 2 * padding < w.dim(3))
    throw std::invalid_argument("conv2d: input " + shape_str(x.shape()) + ", weight " + shape_str(w.shape()) +
                                ", stride " + std::to_string(stride) + ", padding " + std::to_string(padding));
  DITGEN_DISPATCH(x, "conv2d", conv2d(x, w, bias, stride, padding));
}

Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, std::array<int64_t, 3> stride,
              std::array<int64_t, 3> padding) {
  same_place("conv3d", x, {bias});
  weight_place("conv3d", x, w);  // the CPU takes a float32 or bfloat16 weight: the arithmetic
  bool ok = x.ndim() == 5 && w.ndim() == 5 && w.dim(1) == x.dim(1) && (!bias || bias->numel() == w.dim(0));
  for (int a = 0; ok && a < 3; ++a)
    ok = stride[a] >= 1 && padding[a] >= 0 && x.dim(2 + a) + 2 * padding[a] >= w.dim(2 + a);
  if (!ok)
    throw std::invalid_argument("conv3d: input " + shape_str(x.shape()) + ", weight " + shape_str(w.shape()) +
                                (bias ? ", bias " + shape_str(bias->shape()) : "") + ", stride " +
                                shape_str({stride[0], stride[1], stride[2]}) + ", padding " +
                                shape_str({padding[0], padding[1], padding[2]}));
  DITGEN_DISPATCH(x, "conv3d", conv3d(x, w, bias, stride, padding));
}

Tensor upsample_nearest(const Tensor& x, int64_t factor) {
  if (x.ndim() != 4 || factor <= 0)
    throw std::invalid_argument("upsample_nearest: input " + shape_str(x.shape()) + ", factor " +
                                std::to_string(factor));
  DITGEN_DISPATCH(x, "upsample_nearest", upsample_nearest(x, factor));
}

Tensor timestep_embedding(const std::vector<float>& timesteps, int64_t dim, bool flip_sin_to_cos,
                          float downscale_freq_shift, float scale, float max_period) {
  return cpu::timestep_embedding(timesteps, dim, flip_sin_to_cos, downscale_freq_shift, scale, max_period);
}

Tensor sincos_pos_embed_2d(int64_t dim, int64_t grid_h, int64_t grid_w, double base_size,
                           double interpolation_scale) {
  return cpu::sincos_pos_embed_2d(dim, grid_h, grid_w, base_size, interpolation_scale);
}

Tensor patchify(const Tensor& x, int64_t p) {
  if (x.ndim() != 4 || p <= 0 || x.dim(2) % p || x.dim(3) % p)
    throw std::invalid_argument("patchify: input " + shape_str(x.shape()) + ", patch " + std::to_string(p));
  DITGEN_DISPATCH(x, "patchify", patchify(x, p));
}

Tensor unpatchify(const Tensor& x, int64_t h, int64_t w, int64_t p, int64_t channels) {
  if (x.ndim() != 3 || x.dim(1) != h * w || x.dim(2) != p * p * channels)
    throw std::invalid_argument("unpatchify: input " + shape_str(x.shape()) + " for a " + std::to_string(h) + "x" +
                                std::to_string(w) + " grid of " + std::to_string(p) + "x" + std::to_string(p) +
                                " patches of " + std::to_string(channels) + " channels");
  DITGEN_DISPATCH(x, "unpatchify", unpatchify(x, h, w, p, channels));
}

Tensor patchify3d(const Tensor& x, std::array<int64_t, 3> patch) {
  bool ok = x.ndim() == 5;
  for (int a = 0; ok && a < 3; ++a) ok = patch[a] >= 1 && x.dim(2 + a) % patch[a] == 0;
  if (!ok)
    throw std::invalid_argument("patchify3d: input " + shape_str(x.shape()) + ", patch " +
                                shape_str({patch[0], patch[1], patch[2]}));
  DITGEN_DISPATCH(x, "patchify3d", patchify3d(x, patch));
}

Tensor unpatchify3d(const Tensor& x, std::array<int64_t, 3> grid, std::array<int64_t, 3> patch, int64_t channels) {
  const bool ok = x.ndim() == 3 && grid[0] >= 0 && grid[1] >= 0 && grid[2] >= 0 && patch[0] >= 1 && patch[1] >= 1 &&
                  patch[2] >= 1 && channels >= 1 && x.dim(1) == grid[0] * grid[1] * grid[2] &&
                  x.dim(2) == patch[0] * patch[1] * patch[2] * channels;
  if (!ok)
    throw std::invalid_argument("unpatchify3d: input " + shape_str(x.shape()) + " for a " +
                                shape_str({grid[0], grid[1], grid[2]}) + " grid of " +
                                shape_str({patch[0], patch[1], patch[2]}) + " patches of " + std::to_string(channels) +
                                " channels");
  DITGEN_DISPATCH(x, "unpatchify3d", unpatchify3d(x, grid, patch, channels));
}

std::array<int64_t, 3> rotary_split_3d(int64_t head_dim) {
  if (head_dim <= 0 || head_dim % 2)
    throw std::invalid_argument("rotary_split_3d: head_dim " + std::to_string(head_dim) + " (positive, even)");
  const int64_t hw = 2 * (head_dim / 6);
  return {head_dim - 2 * hw, hw, hw};
}

RotaryTables rotary_tables_3d(std::array<int64_t, 3> dims, std::array<int64_t, 3> grid, double theta) {
  bool ok = dims[0] + dims[1] + dims[2] > 0 && theta > 0;
  for (int a = 0; ok && a < 3; ++a) ok = dims[a] >= 0 && dims[a] % 2 == 0 && grid[a] >= 0;
  if (!ok)
    throw std::invalid_argument("rotary_tables_3d: axis channels " + shape_str({dims[0], dims[1], dims[2]}) +
                                " (even, not all zero), grid " + shape_str({grid[0], grid[1], grid[2]}) +
                                ", theta " + std::to_string(theta));
  return cpu::rotary_tables_3d(dims, grid, theta);
}

namespace {

// The tables beside x: float32 [rows, head_dim] on x's device, head_dim even
// and dividing width, rows first_token .. first_token + tokens present.
int64_t rotary_head_dim(const char* op, const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t tokens,
                        int64_t width, int64_t first_token) {
  if (!x.defined() || !cos.defined() || !sin.defined())
    throw std::invalid_argument(std::string(op) + ": undefined tensor argument");
  if (cos.device() != x.device() || sin.device() != x.device() || cos.dtype() != DType::kF32 ||
      sin.dtype() != DType::kF32 || cos.ndim() != 2 || sin.shape() != cos.shape())
    throw std::invalid_argument(std::string(op) + ": tables cos " + where(cos) + ", sin " + where(sin) +
                                " for x " + where(x) + " (float32 [rows, head_dim] on x's device)");
  const int64_t head_dim = cos.dim(1);
  if (head_dim <= 0 || head_dim % 2 || width <= 0 || width % head_dim || first_token < 0 || tokens < 0 ||
      first_token + tokens > cos.dim(0))
    throw std::invalid_argument(std::string(op) + ": rows of " + std::to_string(width) + " channels, tokens [" +
                                std::to_string(first_token) + ", " + std::to_string(first_token + tokens) +
                                ") with tables " + shape_str(cos.shape()));
  return head_dim;
}

// x's (batch, tokens, width): [S, W], [B, S, W] or [B, S, H, head_dim].
std::array<int64_t, 3> rotary_rows(const char* op, const Tensor& x, const Tensor& cos) {
  if (x.ndim() == 2) return {1, x.dim(0), x.dim(1)};
  if (x.ndim() == 3) return {x.dim(0), x.dim(1), x.dim(2)};
  if (x.ndim() == 4 && cos.ndim() == 2 && x.dim(3) == cos.dim(1)) return {x.dim(0), x.dim(1), x.dim(2) * x.dim(3)};
  throw std::invalid_argument(std::string(op) + ": x " + shape_str(x.shape()) +
                              " (expected [S, W], [B, S, W] or [B, S, heads, head_dim]) with tables " +
                              shape_str(cos.shape()));
}

// One dispatch for the three forms: rows of x (from x_offset, x_stride
// apart) rotated into y's (y may be x).
void rotary_dispatch(const Tensor& x, int64_t x_offset, int64_t x_stride, Tensor& y, int64_t y_offset,
                     int64_t y_stride, int64_t rows, int64_t tokens, int64_t width, const Tensor& cos,
                     const Tensor& sin, int64_t first_token, int64_t head_dim) {
  if (rows == 0) return;
  DITGEN_DISPATCH_ON(x, "rotary_embed",
                     rotary_embed(x, x_offset, x_stride, y, y_offset, y_stride, rows, tokens, width, cos, sin,
                                  first_token),
                     rotary_embed(x.data() + x_offset, x_stride, y.data() + y_offset, y_stride, rows, tokens, width,
                                  cos.data() + first_token * head_dim, sin.data() + first_token * head_dim, head_dim));
}

}  // namespace

void rotary_embed_rows_(Tensor& x, int64_t offset, int64_t row_stride, int64_t batch, int64_t tokens, int64_t width,
                        const Tensor& cos, const Tensor& sin, int64_t first_token) {
  const int64_t head_dim = rotary_head_dim("rotary_embed_rows_", x, cos, sin, tokens, width, first_token);
  const int64_t rows = batch * tokens;
  if (batch < 0 || offset < 0 || row_stride < width ||
      (rows > 0 && offset + (rows - 1) * row_stride + width > x.numel()))
    throw std::invalid_argument("rotary_embed_rows_: " + std::to_string(batch) + " x " + std::to_string(tokens) +
                                " rows of " + std::to_string(width) + " from offset " + std::to_string(offset) +
                                " stride " + std::to_string(row_stride) + " of " + where(x));
  rotary_dispatch(x, offset, row_stride, x, offset, row_stride, rows, tokens, width, cos, sin, first_token, head_dim);
}

void rotary_embed_(Tensor& x, const Tensor& cos, const Tensor& sin, int64_t first_token) {
  if (!x.defined()) throw std::invalid_argument("rotary_embed_: undefined input tensor");
  const auto [b, s, w] = rotary_rows("rotary_embed_", x, cos);
  rotary_embed_rows_(x, 0, w, b, s, w, cos, sin, first_token);
}

Tensor rotary_embed(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t first_token) {
  if (!x.defined()) throw std::invalid_argument("rotary_embed: undefined input tensor");
  const auto [b, s, w] = rotary_rows("rotary_embed", x, cos);
  const int64_t head_dim = rotary_head_dim("rotary_embed", x, cos, sin, s, w, first_token);
  Tensor y = Tensor::empty(x.shape(), x.device(), x.dtype());
  rotary_dispatch(x, 0, w, y, 0, w, b * s, s, w, cos, sin, first_token, head_dim);
  return y;
}

void copy_rows(const Tensor& src, int64_t src_offset, int64_t src_stride, Tensor& dst, int64_t dst_offset,
               int64_t dst_stride, int64_t rows, int64_t row_len) {
  // A float32 <-> bfloat16 pair on the CPU converts (a causal VAE's
  // bfloat16 conv cache slots beside its float32 staging).
  const bool converts = src.defined() && dst.defined() && src.device() == Device::kCPU &&
                        dst.device() == Device::kCPU && src.dtype() != dst.dtype() &&
                        (src.dtype() == DType::kF32 || src.dtype() == DType::kBF16) &&
                        (dst.dtype() == DType::kF32 || dst.dtype() == DType::kBF16);
  if (!converts) same_place("copy_rows", src, {&dst});
  if (rows <= 0 || row_len <= 0) return;
  auto inside = [&](const Tensor& t, int64_t offset, int64_t stride) {
    return offset >= 0 && stride >= row_len && offset + (rows - 1) * stride + row_len <= t.numel();
  };
  if (!inside(src, src_offset, src_stride) || !inside(dst, dst_offset, dst_stride))
    throw std::invalid_argument("copy_rows: " + std::to_string(rows) + " rows of " + std::to_string(row_len) +
                                " from offset " + std::to_string(src_offset) + " stride " +
                                std::to_string(src_stride) + " of " + shape_str(src.shape()) + " to offset " +
                                std::to_string(dst_offset) + " stride " + std::to_string(dst_stride) + " of " +
                                shape_str(dst.shape()));
  if (converts) {
    const size_t src_size = dtype_size(src.dtype()), dst_size = dtype_size(dst.dtype());
    const auto* from = static_cast<const char*>(src.raw());
    auto* to = static_cast<char*>(dst.raw());
    for (int64_t r = 0; r < rows; ++r)
      convert_host(from + static_cast<size_t>(src_offset + r * src_stride) * src_size, src.dtype(),
                   to + static_cast<size_t>(dst_offset + r * dst_stride) * dst_size, dst.dtype(), row_len);
    return;
  }
  DITGEN_DISPATCH_ON(src, "copy_rows",
                     copy_rows(src, src_offset, src_stride, dst, dst_offset, dst_stride, rows, row_len),
                     copy_rows(src.data() + src_offset, src_stride, dst.data() + dst_offset, dst_stride, rows,
                               row_len));
}

Tensor gather_rows(const Tensor& table, const std::vector<int64_t>& rows) {
  if (table.ndim() != 2) throw std::invalid_argument("gather_rows: table " + shape_str(table.shape()));
  const int64_t c = table.dim(1), n = static_cast<int64_t>(rows.size());
  Tensor out = Tensor::empty({n, c}, table.device(), table.dtype());
  for (int64_t i = 0; i < n; ++i) {
    if (rows[i] < 0 || rows[i] >= table.dim(0))
      throw std::invalid_argument("gather_rows: row " + std::to_string(rows[i]) + " of a " +
                                  shape_str(table.shape()) + " table");
    copy_rows(table, rows[i] * c, c, out, i * c, c, 1, c);
  }
  return out;
}

}  // namespace ditgen::ops
