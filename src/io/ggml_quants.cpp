// ggml types on the host: dequantization ranges (whole blocks through
// kernels/math/ggml_blocks.h, partial blocks through a scratch block) and
// the quantizers, written after gguf-py's numpy code one operation at a
// time so every intermediate float32 rounds as numpy's does. Compiled with
// -ffp-contract=off (CMakeLists.txt): the quantizers' x * (1 / d) + 0.5,
// contracted, would round once where numpy rounds twice, and truncate to a
// different integer when the sum lands next to one.
#include "io/ggml_quants.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "io/ggml_kquants.h"
#include "tensor/half.h"

namespace ditgen::io {
namespace {

using math::ggml_traits;
using math::GgmlTypeTraits;
using math::kQK;

// Work per OpenMP chunk, in output elements: large enough that a chunk's
// dispatch is negligible, small enough to share a row band among threads.
constexpr int64_t kChunkElements = 1 << 14;
// Below this many elements a range is decoded on the calling thread.
constexpr int64_t kParallelElements = 1 << 16;

void store_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  p[0] = static_cast<uint8_t>(h & 0xff);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// numpy's float32 -> integer cast as x86 performs it (cvttss2si): truncation,
// and the "integer indefinite" 0x80000000 for NaN, infinities and values out
// of int32's range; astype(uint8 / int8) then keeps the low byte. Reached
// only when a block's 1 / d overflows (d subnormal): there numpy's result is
// this, not an error.
int32_t numpy_to_int(float v) {
  return (v > -2147483648.0f && v < 2147483648.0f) ? static_cast<int32_t>(v) : INT32_MIN;
}

uint8_t clip_u8(float v, int hi) {  // trunc(v).astype(uint8).clip(0, hi)
  const uint8_t u = static_cast<uint8_t>(numpy_to_int(std::trunc(v)) & 0xff);
  return static_cast<uint8_t>(std::min<int>(u, hi));
}

// np.where(d == 0, 0, 1 / d)
float inverse_or_zero(float d) { return d == 0.0f ? 0.0f : 1.0f / d; }

// The element of largest magnitude, the first one on ties (numpy's argmax
// of abs), with its sign.
float signed_absmax(const float* x) {
  float best = x[0], best_abs = std::fabs(x[0]);
  for (int i = 1; i < kQK; ++i)
    if (std::fabs(x[i]) > best_abs) best_abs = std::fabs(x[i]), best = x[i];
  return best;
}

void min_max(const float* x, float& lo, float& hi) {
  lo = hi = x[0];
  for (int i = 1; i < kQK; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
}

// Q8_0 (gguf-py Q8_0.quantize_blocks: bit-exact with ggml's reference):
// d = max|x| / 127, q = round-half-away(x / d) as int8.
void quantize_block_q8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int i = 0; i < kQK; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = inverse_or_zero(d);
  store_f16(b, d);
  for (int i = 0; i < kQK; ++i) {
    const float v = x[i] * id;
    // np_roundf: floor(|v|) + floor(2 * frac(|v|)), signed: std::round exactly.
    b[2 + i] = static_cast<uint8_t>(numpy_to_int(std::round(v)) & 0xff);
  }
}

// Q4_0 / Q5_0: d = (signed max-magnitude value) / -2^(bits-1),
// q = trunc(x / d + 2^(bits-1) + 0.5) clipped.
void quantize_symmetric(const float* x, int bits, float q[kQK], float& d) {
  const float half = static_cast<float>(1 << (bits - 1));
  d = signed_absmax(x) / -half;
  const float id = inverse_or_zero(d);
  const float offset = half + 0.5f;
  for (int i = 0; i < kQK; ++i) q[i] = clip_u8(x[i] * id + offset, (1 << bits) - 1);
}

// Q4_1 / Q5_1: d = (max - min) / (2^bits - 1), q = trunc((x - min) / d + 0.5).
void quantize_affine(const float* x, int bits, float q[kQK], float& d, float& m) {
  float hi;
  min_max(x, m, hi);
  d = (hi - m) / static_cast<float>((1 << bits) - 1);
  const float id = inverse_or_zero(d);
  for (int i = 0; i < kQK; ++i) q[i] = clip_u8((x[i] - m) * id + 0.5f, (1 << bits) - 1);
}

// Nibbles: element l in the low half of byte l, element l + 16 in the high half.
void pack_nibbles(const float q[kQK], uint8_t* qs) {
  for (int l = 0; l < 16; ++l)
    qs[l] = static_cast<uint8_t>((static_cast<int>(q[l]) & 0x0f) | ((static_cast<int>(q[l + 16]) << 4) & 0xf0));
}

// The fifth bits, element l at bit l of a little-endian u32.
void pack_high_bits(const float q[kQK], uint8_t* qh) {
  uint32_t bits = 0;
  for (int l = 0; l < kQK; ++l) bits |= static_cast<uint32_t>((static_cast<int>(q[l]) >> 4) & 1) << l;
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(bits >> (8 * k));
}

void quantize_block(GgmlType type, const float* x, uint8_t* b) {
  float q[kQK], d = 0, m = 0;
  switch (type) {
    case GgmlType::kQ8_0:
      quantize_block_q8_0(x, b);
      return;
    case GgmlType::kQ4_0:
      quantize_symmetric(x, 4, q, d);
      store_f16(b, d);
      pack_nibbles(q, b + 2);
      return;
    case GgmlType::kQ5_0:
      quantize_symmetric(x, 5, q, d);
      store_f16(b, d);
      pack_high_bits(q, b + 2);
      pack_nibbles(q, b + 6);
      return;
    case GgmlType::kQ4_1:
      quantize_affine(x, 4, q, d, m);
      store_f16(b, d);
      store_f16(b + 2, m);
      pack_nibbles(q, b + 4);
      return;
    case GgmlType::kQ5_1:
      quantize_affine(x, 5, q, d, m);
      store_f16(b, d);
      store_f16(b + 2, m);
      pack_high_bits(q, b + 4);
      pack_nibbles(q, b + 8);
      return;
    case GgmlType::kQ2_K: kquants::quantize_block_q2_k(x, b); return;
    case GgmlType::kQ3_K: kquants::quantize_block_q3_k(x, b); return;
    case GgmlType::kQ4_K: kquants::quantize_block_q4_k(x, b); return;
    case GgmlType::kQ5_K: kquants::quantize_block_q5_k(x, b); return;
    case GgmlType::kQ6_K: kquants::quantize_block_q6_k(x, b); return;
    default:
      throw std::logic_error("quantize_block: no block quantizer for this type");
  }
}

// Runs body(first_block, blocks) over [0, total_blocks) in chunks, on
// OpenMP threads when the range is large.
template <class Body>
void for_block_chunks(int64_t total_blocks, int32_t block_size, const Body& body) {
  const int64_t chunk = std::max<int64_t>(1, kChunkElements / block_size);
  const int64_t chunks = (total_blocks + chunk - 1) / chunk;
  const bool parallel = total_blocks * block_size >= kParallelElements;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < chunks; ++c) body(c * chunk, std::min(chunk, total_blocks - c * chunk));
}

}  // namespace

bool parse_ggml_type(const std::string& name, GgmlType& out) {
  for (const GgmlTypeTraits& t : math::kGgmlTypes) {
    const std::string n = t.name;
    if (n.size() == name.size() &&
        std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) { return a == std::toupper(b); })) {
      out = t.type;
      return true;
    }
  }
  return false;
}

bool whole_blocks(GgmlType type, int64_t elements) { return elements % ggml_traits(type).block_size == 0; }

bool ggml_bytes(GgmlType type, uint64_t elements, uint64_t& bytes) {
  const GgmlTypeTraits& t = ggml_traits(type);
  if (elements % static_cast<uint64_t>(t.block_size) != 0) return false;
  return !__builtin_mul_overflow(elements / static_cast<uint64_t>(t.block_size), static_cast<uint64_t>(t.type_size),
                                 &bytes);
}

void dequantize(GgmlType type, const uint8_t* data, int64_t first, int64_t count, float* out) {
  const GgmlTypeTraits& t = ggml_traits(type);
  if (!t.dequantized) throw std::invalid_argument(std::string("dequantize: ggml type ") + t.name + " is not supported");
  if (count <= 0) return;
  const int64_t bs = t.block_size, ts = t.type_size;
  float scratch[math::kQK_K];
  // A partial block at the start: decode it whole, keep the wanted part.
  int64_t block = first / bs;
  if (const int64_t skip = first % bs; skip != 0) {
    math::dequantize_blocks(type, data + block * ts, 1, scratch);
    const int64_t n = std::min(count, bs - skip);
    std::copy(scratch + skip, scratch + skip + n, out);
    out += n, count -= n, ++block;
  }
  const int64_t whole = count / bs;
  const uint8_t* src = data + block * ts;
  for_block_chunks(whole, t.block_size, [&](int64_t b0, int64_t n) {
    math::dequantize_blocks(type, src + b0 * ts, n, out + b0 * bs);
  });
  if (const int64_t rest = count - whole * bs; rest != 0) {  // a partial block at the end
    math::dequantize_blocks(type, src + whole * ts, 1, scratch);
    std::copy(scratch, scratch + rest, out + whole * bs);
  }
}

bool can_quantize(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: case GgmlType::kF16: case GgmlType::kBF16:
    case GgmlType::kQ8_0: case GgmlType::kQ4_0: case GgmlType::kQ4_1: case GgmlType::kQ5_0: case GgmlType::kQ5_1:
    case GgmlType::kQ2_K: case GgmlType::kQ3_K: case GgmlType::kQ4_K: case GgmlType::kQ5_K: case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

void quantize(GgmlType type, const float* in, int64_t count, uint8_t* out) {
  const GgmlTypeTraits& t = ggml_traits(type);
  if (!can_quantize(type)) throw std::invalid_argument(std::string("quantize: no quantizer for ggml type ") + t.name);
  if (count < 0 || count % t.block_size != 0)
    throw std::invalid_argument("quantize: " + std::to_string(count) + " elements are not a whole number of " +
                                t.name + " blocks of " + std::to_string(t.block_size));
  switch (type) {
    case GgmlType::kF32:
      if (count) std::memcpy(out, in, static_cast<size_t>(count) * 4);
      return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < count; ++i) store_f16(out + 2 * i, in[i]);
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < count; ++i) {
        const uint16_t h = f32_to_bf16(in[i]);
        out[2 * i] = static_cast<uint8_t>(h & 0xff), out[2 * i + 1] = static_cast<uint8_t>(h >> 8);
      }
      return;
    default:
      break;
  }
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(in[i]))
      throw std::invalid_argument("quantize: element " + std::to_string(i) + " is " + std::to_string(in[i]) +
                                  "; " + t.name + " holds finite values only");
  for_block_chunks(count / t.block_size, t.block_size, [&](int64_t b0, int64_t n) {
    for (int64_t b = b0; b < b0 + n; ++b) quantize_block(type, in + b * t.block_size, out + b * t.type_size);
  });
}

}  // namespace ditgen::io
