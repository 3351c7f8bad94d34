// See int8_matmul.h. The activations go to oneDNN as s8, as quantized:
// AMX multiplies s8 x s8 natively, and on AVX512-VNNI oneDNN adds the
// offset and its correction itself (the correction, a column sum, is part
// of the packed weight's layout there). The whole epilogue runs inside the
// matmul, on each output tile while it is in cache, as oneDNN 2.6 post-ops
// on a (1, m, n) problem (its brgemm kernels broadcast a per-row operand
// only for 3-D outputs):
//   binary mul  s_w (1, 1, n)  the weight's per-channel scales
//   binary mul  s_x (1, m, 1)  the activations' per-row scales
//   binary add  bias (1, 1, n)
//   eltwise     gelu_tanh, where the layer has one
// so the int32 sums never go to memory (oneDNN 2.6's brgemm takes only
// constant output scales, hence a binary mul for the weight scales). Where
// oneDNN has no optimised kernel for that fused problem (its reference
// loops: CPUs without AVX-512), the product goes out as s32 and one pass
// here applies the same epilogue. One primitive per (shape, bias,
// activation) serves every weight of that shape; primitives are cached for
// the process as onednn_matmul.cpp's are.
#include "ops/cpu/int8_matmul.h"

#include <dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

#include "kernels/math/activations.h"
#include "ops/cpu/onednn_runtime.h"
#include "ops/cpu/thread_scratch.h"

namespace ditgen::ops::cpu {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// A (1, rows, cols) matrix with leading dimension ld.
dnnl::memory::desc matrix3(int64_t rows, int64_t cols, int64_t ld, dt type) {
  return dnnl::memory::desc({1, rows, cols}, type, {rows * ld, ld, 1});
}

// The weight layout oneDNN's s8 x s8 -> s32 matmul prefers for (k, n),
// asked with 256 rows (the answer does not depend on m), once per shape.
// The fused primitives below are built on this layout, not asked for
// their own, so a packed weight serves both paths.
const dnnl::memory::desc& packed_desc(int64_t n, int64_t k) {
  static std::mutex mutex;
  static std::map<std::pair<int64_t, int64_t>, dnnl::memory::desc> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find({n, k});
  if (it == cache.end()) {
    const dnnl::memory::desc a = matrix3(256, k, k, dt::s8);
    const dnnl::memory::desc b({1, k, n}, dt::s8, tag::any);
    const dnnl::memory::desc c = matrix3(256, n, n, dt::s32);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), onednn_engine());
    it = cache.emplace(std::make_pair(n, k), pd.weights_desc()).first;
  }
  return it->second;
}

bool is_reference(const std::string& kernel) { return kernel.compare(0, 3, "ref") == 0; }

struct Prepared {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, c;
  // The epilogue's operands (fused only).
  dnnl::memory::desc row_scales, col_vector;
  // Fused: y = act(s_x s_w (x_q · w_q^T) + bias) straight into the output;
  // else s32 sums into scratch and the epilogue here.
  bool fused = false;
  // The fused output goes to a contiguous scratch, then into the caller's
  // strided rows, where oneDNN has no optimised kernel for the strided one.
  bool dense_c = false;
  std::string kernel;
};

std::pair<dnnl::matmul::primitive_desc, std::string> fused_pd(int64_t m, int64_t n, int64_t k, int64_t ldy,
                                                              bool bias, Activation act) {
  dnnl::post_ops ops;
  ops.append_binary(dnnl::algorithm::binary_mul, dnnl::memory::desc({1, 1, n}, dt::f32, tag::abc));
  ops.append_binary(dnnl::algorithm::binary_mul, dnnl::memory::desc({1, m, 1}, dt::f32, tag::abc));
  if (bias) ops.append_binary(dnnl::algorithm::binary_add, dnnl::memory::desc({1, 1, n}, dt::f32, tag::abc));
  if (act == Activation::kGeluTanh) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  const dnnl::matmul::desc d(matrix3(m, k, k, dt::s8), packed_desc(n, k), matrix3(m, n, ldy, dt::f32));
  dnnl::matmul::primitive_desc pd(d, attr, onednn_engine());
  std::string kernel = pd.impl_info_str();
  return {std::move(pd), std::move(kernel)};
}

Prepared prepare(int64_t m, int64_t n, int64_t k, int64_t ldy, bool bias, Activation act) {
  Prepared p;
  p.a = matrix3(m, k, k, dt::s8);
  p.b = packed_desc(n, k);
  p.row_scales = dnnl::memory::desc({1, m, 1}, dt::f32, tag::abc);
  p.col_vector = dnnl::memory::desc({1, 1, n}, dt::f32, tag::abc);
  for (const int64_t ld : {ldy, n}) {
    if (ld != ldy && ldy == n) break;
    try {
      auto [pd, kernel] = fused_pd(m, n, k, ld, bias, act);
      if (is_reference(kernel)) continue;
      p.c = matrix3(m, n, ld, dt::f32);
      p.fused = true;
      p.dense_c = ld != ldy;
      p.kernel = kernel + " fused";
      p.primitive = dnnl::matmul(pd);
      return p;
    } catch (const dnnl::error&) {
      // No implementation of the fused problem at all: the unfused path.
    }
  }
  p.c = matrix3(m, n, n, dt::s32);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, p.b, p.c), onednn_engine());
  p.kernel = std::string(pd.impl_info_str()) + " s32 + epilogue";
  p.primitive = dnnl::matmul(pd);
  return p;
}

const Prepared& cached(int64_t m, int64_t n, int64_t k, int64_t ldy, bool bias, Activation act) {
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool, Activation>, Prepared> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(m, n, k, ldy, bias, act);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, prepare(m, n, k, ldy, bias, act)).first;
  return it->second;
}

// The packed weight's bytes: oneDNN's layout (rounded up to 64 bytes),
// then n float32 scales.
size_t packed_values_bytes(int64_t n, int64_t k) { return (packed_desc(n, k).get_size() + 63) / 64 * 64; }
const float* channel_scales(const void* packed, int64_t n, int64_t k) {
  return reinterpret_cast<const float*>(static_cast<const uint8_t*>(packed) + packed_values_bytes(n, k));
}

// y[i, :] = act(s_x[i] s_w[:] acc[i, :] + bias): the epilogue, where
// oneDNN could not fuse it.
void apply_epilogue(const int32_t* acc, int64_t m, int64_t n, const float* x_scales, const float* w_scales,
                    const float* bias, Activation act, float* y, int64_t ldy) {
#pragma omp parallel for schedule(static) if (m * n > (1 << 16))
  for (int64_t i = 0; i < m; ++i) {
    const float s = x_scales[i];
    const int32_t* src = acc + i * n;
    float* dst = y + i * ldy;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<float>(src[j]) * w_scales[j] * s;
    if (bias)
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) dst[j] += bias[j];
    if (act == Activation::kGeluTanh)
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) dst[j] = math::gelu_tanh(dst[j]);
  }
}

}  // namespace

void quantize_rows_s8(const float* x, int64_t rows, int64_t k, int64_t ld, int8_t* q, float* scales) {
#pragma omp parallel for schedule(static) if (rows * k > (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * ld;
    float amax = 0.0f;
#pragma omp simd reduction(max : amax)
    for (int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(row[j]));
    const float scale = amax / 127.0f;
    scales[r] = scale;
    const float inv = scale == 0.0f ? 0.0f : 1.0f / scale;
    int8_t* out = q + r * k;
    // |row[j] * inv| <= 127 up to one rounding of inv; nearbyint rounds
    // half to even in the default rounding mode.
#pragma omp simd
    for (int64_t j = 0; j < k; ++j)
      out[j] = static_cast<int8_t>(std::clamp(std::nearbyint(row[j] * inv), -127.0f, 127.0f));
  }
}

size_t packed_weight_bytes_s8(int64_t n, int64_t k) {
  size_t bytes = 0;
  with_onednn_errors([&] { bytes = packed_values_bytes(n, k) + static_cast<size_t>(n) * sizeof(float); });
  return bytes;
}

void pack_weight_s8(int64_t n, int64_t k, const int8_t* w, const float* scales, void* packed) {
  with_onednn_errors([&] {
    std::memcpy(const_cast<float*>(channel_scales(packed, n, k)), scales, static_cast<size_t>(n) * sizeof(float));
    auto& e = onednn_engine();
    // The plain weight: (k, n) as the transpose of the stored (n, k) rows.
    dnnl::memory plain(dnnl::memory::desc({1, k, n}, dt::s8, {k * n, 1, k}), e, const_cast<int8_t*>(w));
    dnnl::memory blocked(packed_desc(n, k), e, packed);
    dnnl::reorder(plain, blocked).execute(onednn_stream(), plain, blocked);
    onednn_stream().wait();
  });
}

void int8_linear(const float* x, int64_t m, int64_t k, int64_t ldx, const void* packed_w, int64_t n,
                 const float* bias, Activation act, float* y, int64_t ldy) {
  if (m <= 0 || n <= 0 || k <= 0)
    throw std::invalid_argument("int8 linear: empty shape " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                                std::to_string(k));
  int8_t* xq = thread_scratch<int8_t, kQuantizedInput>(m * k);
  float* x_scales = thread_scratch<float, kQuantizedInputScales>(m);
  quantize_rows_s8(x, m, k, ldx, xq, x_scales);
  const float* w_scales = nullptr;
  int32_t* acc = nullptr;
  float* dense = nullptr;
  with_onednn_errors([&] {
    const Prepared& p = cached(m, n, k, ldy, bias != nullptr, act);
    w_scales = channel_scales(packed_w, n, k);
    auto& e = onednn_engine();
    void* out = y;
    if (!p.fused) out = acc = thread_scratch<int32_t, kInt8MatmulSums>(m * n);
    else if (p.dense_c) out = dense = thread_scratch<float, kDenseMatmulOutput>(m * n);
    dnnl::memory am(p.a, e, xq), bm(p.b, e, const_cast<void*>(packed_w)), cm(p.c, e, out);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
    if (p.fused) {
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] =
          dnnl::memory(p.col_vector, e, const_cast<float*>(w_scales));
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1] = dnnl::memory(p.row_scales, e, x_scales);
      if (bias) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(2) | DNNL_ARG_SRC_1] =
          dnnl::memory(p.col_vector, e, const_cast<float*>(bias));
    }
    p.primitive.execute(onednn_stream(), args);
    onednn_stream().wait();
  });
  if (acc) return apply_epilogue(acc, m, n, x_scales, w_scales, bias, act, y, ldy);
  if (dense)
#pragma omp parallel for schedule(static) if (m * n > (1 << 16))
    for (int64_t i = 0; i < m; ++i) std::memcpy(y + i * ldy, dense + i * n, static_cast<size_t>(n) * sizeof(float));
}

const char* int8_kernel_name(int64_t m, int64_t n, int64_t k) {
  const char* name = "";
  with_onednn_errors([&] { name = cached(m, n, k, n, true, Activation::kNone).kernel.c_str(); });
  return name;
}

}  // namespace ditgen::ops::cpu
