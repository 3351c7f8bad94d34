// oneDNN matmul with a process-wide primitive cache (onednn_matmul.h).
// oneDNN 2.6 API (Debian 12): matmul::desc + primitive_desc(desc, attr,
// engine). Operands are described with explicit strides, so transposed
// and strided operands (a weight's [N, K] rows, columns of a wider output)
// need no copies.
#include "ops/cpu/onednn_matmul.h"

#include <dnnl.hpp>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "ops/cpu/onednn_runtime.h"
#include "ops/cpu/thread_scratch.h"

namespace ditgen::ops::cpu {

namespace {

dnnl::memory::data_type dnnl_type(DType t) {
  switch (t) {
    case DType::kF32: return dnnl::memory::data_type::f32;
    case DType::kBF16: return dnnl::memory::data_type::bf16;
    default: throw std::invalid_argument(std::string("oneDNN matmul: no ") + dtype_name(t) + " operands");
  }
}

// An m x n row-major matrix with leading dimension ld, or its transpose.
dnnl::memory::desc matrix_desc(int64_t rows, int64_t cols, bool trans, int64_t ld, dnnl::memory::data_type t) {
  return trans ? dnnl::memory::desc({rows, cols}, t, {1, ld}) : dnnl::memory::desc({rows, cols}, t, {ld, 1});
}

auto key_of(const MatmulCall& c) {
  return std::make_tuple(c.m, c.n, c.k, c.trans_a, c.trans_b, c.lda, c.ldb, c.ldc, static_cast<int>(c.dtype), c.alpha,
                         c.beta, c.bias, static_cast<int>(c.act), c.packed_b);
}

// The layout oneDNN's bf16 matmul prefers for a (k, n) weight (format_tag
// any, asked with 256 rows: the answer does not depend on m), once per shape.
const dnnl::memory::desc& packed_weight_desc(int64_t n, int64_t k) {
  static std::mutex mutex;
  static std::map<std::pair<int64_t, int64_t>, dnnl::memory::desc> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find({n, k});
  if (it == cache.end()) {
    using dt = dnnl::memory::data_type;
    const dnnl::memory::desc a({256, k}, dt::bf16, dnnl::memory::format_tag::ab);
    const dnnl::memory::desc b({k, n}, dt::bf16, dnnl::memory::format_tag::any);
    const dnnl::memory::desc c({256, n}, dt::f32, dnnl::memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), onednn_engine());
    it = cache.emplace(std::make_pair(n, k), pd.weights_desc()).first;
  }
  return it->second;
}

struct Prepared {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, bias, c;
  dnnl::memory::desc scratchpad;  // oneDNN's working memory for one call, ours (below)
  std::string kernel;
  // c is written to a contiguous scratch, then copied into the caller's
  // strided rows: oneDNN 2.6 has no optimised kernel for some strided
  // outputs (a packed weight into the columns of a wider output at a few
  // rows: the adaLN chunks) and runs its reference loops, 50x slower.
  bool dense_c = false;
};

Prepared prepare_with(const MatmulCall& c, int64_t ldc) {
  const auto t = dnnl_type(c.dtype);
  Prepared p;
  p.a = matrix_desc(c.m, c.k, c.trans_a, c.lda, t);
  p.b = c.packed_b ? packed_weight_desc(c.n, c.k) : matrix_desc(c.k, c.n, c.trans_b, c.ldb, t);
  p.c = matrix_desc(c.m, c.n, false, ldc, dnnl::memory::data_type::f32);
  dnnl::primitive_attr attr;
  // The scratchpad comes from the calling thread's buffer (onednn_matmul):
  // oneDNN's own ("library" mode) is bound to the thread that built the
  // primitive, so two threads running one primitive at once (attention's
  // matmuls inside its parallel loop, attention_onednn.cpp) wrote over each
  // other's blocks.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (c.alpha != 1.0f) attr.set_output_scales(0, {c.alpha});
  dnnl::post_ops ops;
  if (c.beta != 0.0f) ops.append_sum(c.beta);
  if (c.act == Activation::kGeluTanh) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
  attr.set_post_ops(ops);
  std::unique_ptr<dnnl::matmul::desc> d;
  if (c.bias) {
    p.bias = dnnl::memory::desc({1, c.n}, dnnl::memory::data_type::f32, {c.n, 1});
    d = std::make_unique<dnnl::matmul::desc>(p.a, p.b, p.bias, p.c);
  } else {
    d = std::make_unique<dnnl::matmul::desc>(p.a, p.b, p.c);
  }
  const dnnl::matmul::primitive_desc pd(*d, attr, onednn_engine());
  p.kernel = pd.impl_info_str();
  p.scratchpad = pd.scratchpad_desc();
  p.primitive = dnnl::matmul(pd);
  return p;
}

bool is_reference(const Prepared& p) { return p.kernel.compare(0, 3, "ref") == 0; }

Prepared prepare(const MatmulCall& c) {
  Prepared p = prepare_with(c, c.ldc);
  if (c.ldc == c.n || !is_reference(p)) return p;
  Prepared dense = prepare_with(c, c.n);
  if (is_reference(dense)) return p;  // no better: keep the direct call
  dense.dense_c = true;
  return dense;
}


// The cache: shapes are few (a model's distinct GEMMs), so a map under a
// mutex; the lookup costs well under a microsecond against calls of tens
// of microseconds and more.
const Prepared& cached(const MatmulCall& c) {
  static std::mutex mutex;
  static std::map<decltype(key_of(c)), Prepared> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto key = key_of(c);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(std::move(key), prepare(c)).first;
  return it->second;
}

bool cpu_has_avx512() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

}  // namespace

bool onednn_fast(DType dtype) {
  if (dtype == DType::kF32) return true;
  if (dtype != DType::kBF16) return false;
  // Ask oneDNN itself: the kernel it picks for a typical shape is its
  // reference implementation ("ref:any") where it has no bf16 code for this
  // CPU (below AVX-512 in oneDNN 2.6).
  static const bool fast = [] {
    if (!cpu_has_avx512()) return false;
    const MatmulCall probe{64, 64, 64, false, true, 64, 64, 64, DType::kBF16};
    return std::strncmp(onednn_kernel_name(probe), "ref", 3) != 0;
  }();
  return fast;
}

bool onednn_packs_weight(int64_t n, int64_t k) {
  if (n <= 0 || k <= 0 || !onednn_fast(DType::kBF16)) return false;
  bool packs = false;
  with_onednn_errors([&] {
    const dnnl::memory::desc& d = packed_weight_desc(n, k);
    packs = d.get_size() == static_cast<size_t>(n * k) * 2 &&
            d != matrix_desc(k, n, true, k, dnnl::memory::data_type::bf16);  // plain already: nothing to gain
  });
  return packs;
}

void onednn_pack_weight(int64_t n, int64_t k, const void* w, void* packed) {
  if (!onednn_packs_weight(n, k))
    throw std::invalid_argument("oneDNN matmul: a " + std::to_string(n) + "x" + std::to_string(k) +
                                " weight does not pack");
  onednn_pack_b(n, k, true, w, packed);
}

size_t onednn_packed_b_bytes(int64_t n, int64_t k) {
  size_t bytes = 0;
  with_onednn_errors([&] { bytes = packed_weight_desc(n, k).get_size(); });
  return bytes;
}

void onednn_pack_b(int64_t n, int64_t k, bool trans_b, const void* b, void* packed) {
  with_onednn_errors([&] {
    auto& e = onednn_engine();
    const dnnl::memory::desc source = matrix_desc(k, n, trans_b, trans_b ? k : n, dnnl::memory::data_type::bf16);
    dnnl::memory plain(source, e, const_cast<void*>(b));
    dnnl::memory blocked(packed_weight_desc(n, k), e, packed);
    dnnl::reorder(plain, blocked).execute(onednn_stream(), plain, blocked);
    onednn_stream().wait();
  });
}

const char* onednn_kernel_name(const MatmulCall& call) { return cached(call).kernel.c_str(); }

void onednn_matmul(const MatmulCall& call, const void* a, const void* b, const float* bias, float* c) {
  if (call.m <= 0 || call.n <= 0 || call.k <= 0)
    throw std::invalid_argument("oneDNN matmul: empty shape " + std::to_string(call.m) + "x" + std::to_string(call.n) +
                                "x" + std::to_string(call.k));
  if (call.bias && call.alpha != 1.0f) throw std::invalid_argument("oneDNN matmul: a bias needs alpha 1");
  with_onednn_errors([&] {
    const Prepared& p = cached(call);
    auto& e = onednn_engine();
    const size_t row_bytes = static_cast<size_t>(call.n) * sizeof(float);
    float* out = c;
    if (p.dense_c) {
      out = thread_scratch<float, kDenseMatmulOutput>(call.m * call.n);
      if (call.beta != 0.0f)
        for (int64_t i = 0; i < call.m; ++i) std::memcpy(out + i * call.n, c + i * call.ldc, row_bytes);
    }
    // Memory objects wrap the caller's pointers: no copies.
    dnnl::memory am(p.a, e, const_cast<void*>(a)), bm(p.b, e, const_cast<void*>(b)), cm(p.c, e, out);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
    if (call.bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(p.bias, e, const_cast<float*>(bias)));
    if (const size_t bytes = p.scratchpad.get_size()) {
      void* scratch = thread_scratch<CacheLine, kMatmulScratchpad>(static_cast<int64_t>((bytes + 63) / 64));
      args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(p.scratchpad, e, scratch));
    }
    p.primitive.execute(onednn_stream(), args);
    onednn_stream().wait();
    if (p.dense_c)
      for (int64_t i = 0; i < call.m; ++i) std::memcpy(c + i * call.ldc, out + i * call.n, row_bytes);
  });
}

}  // namespace ditgen::ops::cpu
