// See int8_matmul.h. The activations go to oneDNN as s8, as quantized:
// AMX multiplies s8 x s8 natively, and on AVX512-VNNI oneDNN offsets the
// activations and corrects the sums itself (the correction's column sums
// are then part of the packed weight's layout).
//
// The epilogue (both scales, the bias, the activation) reads the int32
// sums; where the whole (m, n) s32 product went to memory first, that trip
// cost more than AMX saved (the product written, read back, the output
// written: 12 bytes per output against bfloat16's 4). oneDNN 2.6 cannot
// fuse it: its brgemm post-ops broadcast a per-row operand (s_x) only on
// 3-D problems, whose weights it then repacks at every call (no blocked
// layout for 3-D), slower than the trip. So the product runs in tiles:
// each thread takes (kTileRows x kTileCols) tiles of the output, runs
// oneDNN's matmul on its tile alone (one primitive per tile shape, called
// inside the parallel region, so single-threaded; the weight's columns
// [n0, n0 + cols) are a contiguous run of its N-blocked packed layout), and
// applies the epilogue while the tile's sums are still in its L2 (512 KiB
// of s32). Where the packed layout is not N-blocked (VNNI's compensated
// s8 weights, CPUs without AVX-512), one call writes the whole s32 product
// and one pass applies the epilogue. Primitives are cached for the process
// as onednn_matmul.cpp's are.
#include "ops/cpu/int8_matmul.h"

#include <dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
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

// A tile of the output: 256 x 512 s32 sums (512 KiB), in a core's L2 with
// its slice of the activations; a multiple of every N block below.
constexpr int64_t kTileRows = 256, kTileCols = 512;

struct PackedLayout {
  dnnl::memory::desc desc;  // the whole (k, n) weight
  tag format = tag::undef;  // its N-blocked format, or undef
  int64_t block_stride = 0;  // bytes from one N block (n_block columns) to the next
  int64_t n_block = 0;
};

// The weight layout oneDNN's s8 x s8 -> s32 matmul prefers for (k, n),
// asked with 256 rows (the answer does not depend on m), once per shape,
// and whether it is one of brgemm's N-blocked layouts (N blocks outermost,
// so a run of whole blocks is a smaller weight of the same layout).
const PackedLayout& packed_layout(int64_t n, int64_t k) {
  static std::mutex mutex;
  static std::map<std::pair<int64_t, int64_t>, PackedLayout> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find({n, k});
  if (it == cache.end()) {
    const dnnl::memory::desc a({256, k}, dt::s8, tag::ab);
    const dnnl::memory::desc b({k, n}, dt::s8, tag::any);
    const dnnl::memory::desc c({256, n}, dt::s32, tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), onednn_engine());
    PackedLayout l;
    l.desc = pd.weights_desc();
    for (const auto& [format, block] : {std::pair{tag::BA16a64b4a, 64}, {tag::BA16a48b4a, 48},
                                        {tag::BA16a32b4a, 32}, {tag::BA16a16b4a, 16}})
      if (dnnl::memory::desc({k, n}, dt::s8, format) == l.desc && kTileCols % block == 0) {
        l.format = format;
        l.n_block = block;
        l.block_stride = l.desc.data.format_desc.blocking.strides[1];
      }
    it = cache.emplace(std::make_pair(n, k), l).first;
  }
  return it->second;
}

struct Matmul {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, c, scratchpad;
  std::string kernel;
};

// One s8 x s8 -> s32 product of (rows, k) activations and the (k, cols)
// weight `b`, into dense (rows, cols) sums; a tile's runs with a scratchpad
// of the caller's (oneDNN's own is bound to the thread that built the
// primitive, and tiles run on every thread).
Matmul make_matmul(int64_t rows, int64_t cols, int64_t k, const dnnl::memory::desc& b, bool tile) {
  Matmul mm;
  mm.a = dnnl::memory::desc({rows, k}, dt::s8, tag::ab);
  mm.b = b;
  mm.c = dnnl::memory::desc({rows, cols}, dt::s32, tag::ab);
  dnnl::primitive_attr attr;
  if (tile) attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(mm.a, mm.b, mm.c), attr, onednn_engine());
  mm.scratchpad = pd.scratchpad_desc();
  mm.kernel = pd.impl_info_str();
  mm.primitive = dnnl::matmul(pd);
  return mm;
}

struct Prepared {
  bool tiled = false;
  // tiled: the product of each tile shape ((rows or the rows' tail) x
  // (cols or the cols' tail)); else one product of the whole (m, n).
  std::map<std::pair<int64_t, int64_t>, Matmul> tiles;
  Matmul whole;
  std::string kernel;
};

Prepared prepare(int64_t m, int64_t n, int64_t k) {
  const PackedLayout& layout = packed_layout(n, k);
  Prepared p;
  p.tiled = layout.format != tag::undef;
  if (!p.tiled) {
    p.whole = make_matmul(m, n, k, layout.desc, false);
    p.kernel = p.whole.kernel + " s32 + epilogue";
    return p;
  }
  for (int64_t m0 = 0; m0 < m; m0 += kTileRows)
    for (int64_t n0 = 0; n0 < n; n0 += kTileCols) {
      const int64_t rows = std::min(kTileRows, m - m0), cols = std::min(kTileCols, n - n0);
      if (p.tiles.count({rows, cols})) continue;
      const dnnl::memory::desc b({k, cols}, dt::s8, layout.format);
      p.tiles.emplace(std::make_pair(rows, cols), make_matmul(rows, cols, k, b, true));
    }
  p.kernel = p.tiles.begin()->second.kernel + " tiles + epilogue";
  return p;
}

const Prepared& cached(int64_t m, int64_t n, int64_t k) {
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, int64_t>, Prepared> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(m, n, k);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, prepare(m, n, k)).first;
  return it->second;
}

// The packed weight's bytes: oneDNN's layout (rounded up to 64 bytes),
// then n float32 scales.
size_t packed_values_bytes(int64_t n, int64_t k) { return (packed_layout(n, k).desc.get_size() + 63) / 64 * 64; }
const float* channel_scales(const void* packed, int64_t n, int64_t k) {
  return reinterpret_cast<const float*>(static_cast<const uint8_t*>(packed) + packed_values_bytes(n, k));
}

// The epilogue on a (rows, cols) block of sums (leading dimension ld_acc):
// y[i, j] = act(s_x[i] s_w[j] acc[i, j] + bias[j]); x_scales, w_scales,
// bias and y start at the block.
void epilogue_rows(const int32_t* acc, int64_t ld_acc, int64_t rows, int64_t cols, const float* x_scales,
                   const float* w_scales, const float* bias, Activation act, float* y, int64_t ldy) {
  for (int64_t i = 0; i < rows; ++i) {
    const float s = x_scales[i];
    const int32_t* src = acc + i * ld_acc;
    float* dst = y + i * ldy;
    if (bias) {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) dst[j] = static_cast<float>(src[j]) * (s * w_scales[j]) + bias[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) dst[j] = static_cast<float>(src[j]) * (s * w_scales[j]);
    }
    if (act == Activation::kGeluTanh)
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) dst[j] = math::gelu_tanh(dst[j]);
  }
}

void run_matmul(const Matmul& mm, const void* a, const void* b, int32_t* c) {
  auto& e = onednn_engine();
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory(mm.a, e, const_cast<void*>(a))},
                                             {DNNL_ARG_WEIGHTS, dnnl::memory(mm.b, e, const_cast<void*>(b))},
                                             {DNNL_ARG_DST, dnnl::memory(mm.c, e, c)}};
  if (const size_t bytes = mm.scratchpad.get_size()) {
    void* scratch = thread_scratch<CacheLine, kMatmulScratchpad>(static_cast<int64_t>((bytes + 63) / 64));
    args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(mm.scratchpad, e, scratch));
  }
  mm.primitive.execute(onednn_stream(), args);
  onednn_stream().wait();
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
    dnnl::memory plain(dnnl::memory::desc({k, n}, dt::s8, {1, k}), e, const_cast<int8_t*>(w));
    dnnl::memory blocked(packed_layout(n, k).desc, e, packed);
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
  with_onednn_errors([&] {
    const Prepared& p = cached(m, n, k);
    const float* w_scales = channel_scales(packed_w, n, k);
    if (!p.tiled) {
      int32_t* acc = thread_scratch<int32_t, kInt8MatmulSums>(m * n);
      run_matmul(p.whole, xq, packed_w, acc);
#pragma omp parallel for schedule(static) if (m * n > (1 << 16))
      for (int64_t i = 0; i < m; ++i)
        epilogue_rows(acc + i * n, n, 1, n, x_scales + i, w_scales, bias, act, y + i * ldy, ldy);
      return;
    }
    const PackedLayout& layout = packed_layout(n, k);
    const auto* weight = static_cast<const uint8_t*>(packed_w);
    const int64_t row_tiles = (m + kTileRows - 1) / kTileRows, col_tiles = (n + kTileCols - 1) / kTileCols;
    // A tile's error (a oneDNN failure) may not leave the parallel region:
    // the first is kept and rethrown after it.
    std::exception_ptr error;
#pragma omp parallel for collapse(2) schedule(static) if (row_tiles * col_tiles > 1)
    for (int64_t ti = 0; ti < row_tiles; ++ti)
      for (int64_t tj = 0; tj < col_tiles; ++tj) {
        const int64_t m0 = ti * kTileRows, n0 = tj * kTileCols;
        const int64_t rows = std::min(kTileRows, m - m0), cols = std::min(kTileCols, n - n0);
        try {
          int32_t* acc = thread_scratch<int32_t, kInt8MatmulSums>(kTileRows * kTileCols);
          run_matmul(p.tiles.at({rows, cols}), xq + m0 * k, weight + n0 / layout.n_block * layout.block_stride, acc);
          epilogue_rows(acc, cols, rows, cols, x_scales + m0, w_scales + n0, bias ? bias + n0 : nullptr, act,
                        y + m0 * ldy + n0, ldy);
        } catch (...) {
#pragma omp critical(ditgen_int8_tile_error)
          if (!error) error = std::current_exception();
        }
      }
    if (error) std::rethrow_exception(error);
  });
}

const char* int8_kernel_name(int64_t m, int64_t n, int64_t k) {
  const char* name = "";
  with_onednn_errors([&] { name = cached(m, n, k).kernel.c_str(); });
  return name;
}

}  // namespace ditgen::ops::cpu
