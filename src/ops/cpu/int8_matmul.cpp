// See int8_matmul.h. oneDNN 2.6's fast int8 kernels (brgemm on
// AVX512-VNNI and AMX) take an unsigned source: the activations go in as
// u8 = s8 + 128, and the exact integer correction 128 * sum_k w[n, k]
// (kept beside the packed weight) comes off the s32 sums afterwards, in
// the same pass that applies both scales, the bias and the activation.
// One primitive per shape serves every weight of that shape; primitives
// are cached for the process as onednn_matmul.cpp's are.
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

#include "kernels/math/activations.h"
#include "ops/cpu/onednn_runtime.h"
#include "ops/cpu/thread_scratch.h"

namespace ditgen::ops::cpu {

namespace {

using dt = dnnl::memory::data_type;

// The weight layout oneDNN's s8 x s8 matmul prefers for (k, n), asked with
// 256 rows (the answer does not depend on m), once per shape.
const dnnl::memory::desc& packed_desc(int64_t n, int64_t k) {
  static std::mutex mutex;
  static std::map<std::pair<int64_t, int64_t>, dnnl::memory::desc> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find({n, k});
  if (it == cache.end()) {
    const dnnl::memory::desc a({256, k}, dt::u8, dnnl::memory::format_tag::ab);
    const dnnl::memory::desc b({k, n}, dt::s8, dnnl::memory::format_tag::any);
    const dnnl::memory::desc c({256, n}, dt::s32, dnnl::memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), onednn_engine());
    it = cache.emplace(std::make_pair(n, k), pd.weights_desc()).first;
  }
  return it->second;
}

struct Prepared {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, c;
  std::string kernel;
};

const Prepared& cached(int64_t m, int64_t n, int64_t k) {
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, int64_t>, Prepared> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(m, n, k);
  auto it = cache.find(key);
  if (it == cache.end()) {
    Prepared p;
    p.a = dnnl::memory::desc({m, k}, dt::u8, dnnl::memory::format_tag::ab);
    p.b = packed_desc(n, k);
    p.c = dnnl::memory::desc({m, n}, dt::s32, dnnl::memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, p.b, p.c), onednn_engine());
    p.kernel = pd.impl_info_str();
    p.primitive = dnnl::matmul(pd);
    it = cache.emplace(key, std::move(p)).first;
  }
  return it->second;
}

// Symmetric per-row int8 quantization (scale = max|row| / 127, values
// rounded half to even as torch.round, clamped to +-127), stored as Out
// after adding kOffset: int8 weights (0) or oneDNN's u8 activations (128).
// A zero row has scale 0 and all values kOffset.
template <typename Out, int kOffset>
void quantize_rows_offset(const float* x, int64_t rows, int64_t k, int64_t ld, Out* q, float* scales) {
#pragma omp parallel for schedule(static) if (rows * k > (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * ld;
    float amax = 0.0f;
#pragma omp simd reduction(max : amax)
    for (int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(row[j]));
    const float scale = amax / 127.0f;
    scales[r] = scale;
    const float inv = scale == 0.0f ? 0.0f : 1.0f / scale;
    Out* out = q + r * k;
    // |row[j] * inv| <= 127 up to one rounding of inv; nearbyint rounds
    // half to even in the default rounding mode.
#pragma omp simd
    for (int64_t j = 0; j < k; ++j)
      out[j] = static_cast<Out>(std::clamp(std::nearbyint(row[j] * inv), -127.0f, 127.0f) + float(kOffset));
  }
}

// The rows quantized as quantize_rows_s8 does, stored offset by 128 (u8).
void quantize_rows_u8(const float* x, int64_t rows, int64_t k, int64_t ld, uint8_t* q, float* scales) {
  quantize_rows_offset<uint8_t, 128>(x, rows, k, ld, q, scales);
}

}  // namespace

void quantize_rows_s8(const float* x, int64_t rows, int64_t k, int64_t ld, int8_t* q, float* scales) {
  quantize_rows_offset<int8_t, 0>(x, rows, k, ld, q, scales);
}

namespace {

// The packed weight's bytes: oneDNN's layout (rounded up to 64 bytes),
// then n int32 column sums, then n float32 scales.
size_t packed_values_bytes(int64_t n, int64_t k) { return (packed_desc(n, k).get_size() + 63) / 64 * 64; }
const int32_t* column_sums(const void* packed, int64_t n, int64_t k) {
  return reinterpret_cast<const int32_t*>(static_cast<const uint8_t*>(packed) + packed_values_bytes(n, k));
}
const float* row_scales(const void* packed, int64_t n, int64_t k) {
  return reinterpret_cast<const float*>(column_sums(packed, n, k) + n);
}

}  // namespace

size_t packed_weight_bytes_s8(int64_t n, int64_t k) {
  size_t bytes = 0;
  with_onednn_errors([&] { bytes = packed_values_bytes(n, k) + static_cast<size_t>(n) * 8; });
  return bytes;
}

void pack_weight_s8(int64_t n, int64_t k, const int8_t* w, const float* scales, void* packed) {
  int32_t* sums = const_cast<int32_t*>(column_sums(packed, n, k));
  for (int64_t j = 0; j < n; ++j) {
    int32_t sum = 0;
    for (int64_t t = 0; t < k; ++t) sum += w[j * k + t];
    sums[j] = sum;
  }
  std::memcpy(const_cast<float*>(row_scales(packed, n, k)), scales, static_cast<size_t>(n) * sizeof(float));
  with_onednn_errors([&] {
    auto& e = onednn_engine();
    // The plain weight: (k, n) as the transpose of the stored (n, k) rows.
    dnnl::memory plain(dnnl::memory::desc({k, n}, dt::s8, {1, k}), e, const_cast<int8_t*>(w));
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
  uint8_t* xq = thread_scratch<uint8_t, kQuantizedInput>(m * k);
  float* x_scales = thread_scratch<float, kQuantizedInputScales>(m);
  quantize_rows_u8(x, m, k, ldx, xq, x_scales);
  int32_t* acc = thread_scratch<int32_t, kInt8MatmulSums>(m * n);
  const int32_t* sums = nullptr;
  const float* w_scales = nullptr;
  with_onednn_errors([&] {
    const Prepared& p = cached(m, n, k);
    sums = column_sums(packed_w, n, k);
    w_scales = row_scales(packed_w, n, k);
    auto& e = onednn_engine();
    dnnl::memory am(p.a, e, xq), bm(p.b, e, const_cast<void*>(packed_w)), cm(p.c, e, acc);
    p.primitive.execute(onednn_stream(), {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    onednn_stream().wait();
  });
  // The u8 offset's exact correction, both scales, the bias, the
  // activation: one pass over the output.
#pragma omp parallel for schedule(static) if (m * n > (1 << 16))
  for (int64_t i = 0; i < m; ++i) {
    const float s = x_scales[i];
    const int32_t* src = acc + i * n;
    float* dst = y + i * ldy;
    if (bias) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<float>(src[j] - 128 * sums[j]) * (s * w_scales[j]) + bias[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<float>(src[j] - 128 * sums[j]) * (s * w_scales[j]);
    }
    if (act == Activation::kGeluTanh)
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) dst[j] = math::gelu_tanh(dst[j]);
  }
}

const char* int8_kernel_name(int64_t m, int64_t n, int64_t k) {
  const char* name = "";
  with_onednn_errors([&] { name = cached(m, n, k).kernel.c_str(); });
  return name;
}

}  // namespace ditgen::ops::cpu
