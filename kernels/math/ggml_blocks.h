// ggml's tensor element types (the `type` of a GGUF tensor) and the block
// formats of the quantized ones: sizes, and dequantization of one block into
// float32 as DITGEN_HD functions, so the GGUF loader (src/io/gguf.cpp), the
// CPU GEMM that dequantizes weight bands (src/ops/cpu/gemm.cpp) and the CUDA
// kernel that dequantizes a weight on the device (kernels/cuda/
// ggml_dequantize.cu) run the very same arithmetic.
//
// A block of a quantized type holds `block_size` consecutive elements of a
// row in `type_size` bytes: one or two float16 scales (d, and for the
// "_1" / K types a minimum dmin) plus packed small integers, all little
// endian. The layouts and the arithmetic are those of ggml-quants.c; the
// order of the float32 operations is that of gguf-py's numpy dequantizers
// (gguf/quants.py, one rounding per numpy operation: d * q, then + m), so
// the results are bit-identical to gguf-py's (tests/io/test_ggml_blocks.cpp
// checks every type against gguf-py's output). Every product here is exact
// in float32 (a float16 scale has 11 significant bits, a 6-bit sub-scale
// and a quantized value at most 8 more, 24 in all; Q6_K's 8-bit sub-scale
// times its 6-bit value is the one product that rounds, and nothing is
// added to it), so a compiler fusing d * q + m into one multiply-add (CUDA
// does by default, GCC with -ffp-contract=fast) gives the same bits.
//
// Each dequantizer is a few short loops of 16 or 32 independent lanes with
// the block's scales as loop constants, the form compilers vectorise.
#pragma once
#include <cstdint>

#include "kernels/math/hd.h"
#include "kernels/math/small_floats.h"

namespace ditgen::math {

// ggml's type numbers as GGUF stores them (ggml.h: enum ggml_type; gguf-py:
// GGMLQuantizationType). Every number ggml has assigned is listed, so a
// file's tensors can be sized and checked whatever their type; the ones
// marked "dequantized" below are those ditgen reads.
enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15,
  kIQ2_XXS = 16, kIQ2_XS = 17, kIQ3_XXS = 18, kIQ1_S = 19, kIQ4_NL = 20, kIQ3_S = 21, kIQ2_S = 22,
  kIQ4_XS = 23, kI8 = 24, kI16 = 25, kI32 = 26, kI64 = 27, kF64 = 28, kIQ1_M = 29, kBF16 = 30,
  kTQ1_0 = 34, kTQ2_0 = 35, kMXFP4 = 39,
};

struct GgmlTypeTraits {
  GgmlType type;
  const char* name;     // as gguf-py and llama.cpp print it: "Q4_K"
  int32_t block_size;   // elements per block (1 for the plain types)
  int32_t type_size;    // bytes per block
  bool dequantized;     // ditgen reads it (the 13 types below)
};

inline constexpr int32_t kQK = 32;    // elements of a Q4_0 .. Q8_0 block
inline constexpr int32_t kQK_K = 256;  // elements of a K-quant super-block

// Bytes per block of the read types (plain scalars, usable in device code).
inline constexpr int32_t kQ4_0Bytes = 2 + kQK / 2;
inline constexpr int32_t kQ4_1Bytes = 2 + 2 + kQK / 2;
inline constexpr int32_t kQ5_0Bytes = 2 + 4 + kQK / 2;
inline constexpr int32_t kQ5_1Bytes = 2 + 2 + 4 + kQK / 2;
inline constexpr int32_t kQ8_0Bytes = 2 + kQK;
inline constexpr int32_t kQ2_KBytes = 2 + 2 + kQK_K / 16 + kQK_K / 4;
inline constexpr int32_t kQ3_KBytes = 2 + kQK_K / 4 + kQK_K / 8 + 12;
inline constexpr int32_t kQ4_KBytes = 2 + 2 + kQK_K / 2 + 12;
inline constexpr int32_t kQ5_KBytes = 2 + 2 + kQK_K / 2 + kQK_K / 8 + 12;
inline constexpr int32_t kQ6_KBytes = 2 + kQK_K / 2 + kQK_K / 4 + kQK_K / 16;

inline constexpr GgmlTypeTraits kGgmlTypes[] = {
    {GgmlType::kF32, "F32", 1, 4, true},
    {GgmlType::kF16, "F16", 1, 2, true},
    {GgmlType::kQ4_0, "Q4_0", kQK, kQ4_0Bytes, true},
    {GgmlType::kQ4_1, "Q4_1", kQK, kQ4_1Bytes, true},
    {GgmlType::kQ5_0, "Q5_0", kQK, kQ5_0Bytes, true},
    {GgmlType::kQ5_1, "Q5_1", kQK, kQ5_1Bytes, true},
    {GgmlType::kQ8_0, "Q8_0", kQK, kQ8_0Bytes, true},
    {GgmlType::kQ8_1, "Q8_1", kQK, 4 + 4 + 32, false},
    {GgmlType::kQ2_K, "Q2_K", kQK_K, kQ2_KBytes, true},
    {GgmlType::kQ3_K, "Q3_K", kQK_K, kQ3_KBytes, true},
    {GgmlType::kQ4_K, "Q4_K", kQK_K, kQ4_KBytes, true},
    {GgmlType::kQ5_K, "Q5_K", kQK_K, kQ5_KBytes, true},
    {GgmlType::kQ6_K, "Q6_K", kQK_K, kQ6_KBytes, true},
    {GgmlType::kQ8_K, "Q8_K", kQK_K, 4 + kQK_K + kQK_K / 8, false},
    {GgmlType::kIQ2_XXS, "IQ2_XXS", kQK_K, 2 + kQK_K / 4, false},
    {GgmlType::kIQ2_XS, "IQ2_XS", kQK_K, 2 + kQK_K / 4 + kQK_K / 32, false},
    {GgmlType::kIQ3_XXS, "IQ3_XXS", kQK_K, 2 + kQK_K / 4 + kQK_K / 8, false},
    {GgmlType::kIQ1_S, "IQ1_S", kQK_K, 2 + kQK_K / 8 + kQK_K / 16, false},
    {GgmlType::kIQ4_NL, "IQ4_NL", kQK, 2 + 16, false},
    {GgmlType::kIQ3_S, "IQ3_S", kQK_K, 2 + kQK_K / 4 + kQK_K / 8 + kQK_K / 32 + 4, false},
    {GgmlType::kIQ2_S, "IQ2_S", kQK_K, 2 + kQK_K / 4 + kQK_K / 16, false},
    {GgmlType::kIQ4_XS, "IQ4_XS", kQK_K, 2 + 2 + kQK_K / 2 + kQK_K / 64, false},
    {GgmlType::kI8, "I8", 1, 1, false},
    {GgmlType::kI16, "I16", 1, 2, false},
    {GgmlType::kI32, "I32", 1, 4, false},
    {GgmlType::kI64, "I64", 1, 8, false},
    {GgmlType::kF64, "F64", 1, 8, false},
    {GgmlType::kIQ1_M, "IQ1_M", kQK_K, kQK_K / 8 + kQK_K / 16 + kQK_K / 32, false},
    {GgmlType::kBF16, "BF16", 1, 2, true},
    {GgmlType::kTQ1_0, "TQ1_0", kQK_K, 2 + 4 * 13, false},
    {GgmlType::kTQ2_0, "TQ2_0", kQK_K, 2 + 64, false},
    {GgmlType::kMXFP4, "MXFP4", kQK, 1 + 16, false},
};

// The traits of type number `raw` (as read from a file), or null when ggml
// has no such type.
constexpr const GgmlTypeTraits* find_ggml_type(uint32_t raw) {
  for (const GgmlTypeTraits& t : kGgmlTypes)
    if (static_cast<uint32_t>(t.type) == raw) return &t;
  return nullptr;
}

// The traits of a listed type (every enumerator has an entry).
constexpr const GgmlTypeTraits& ggml_traits(GgmlType type) { return *find_ggml_type(static_cast<uint32_t>(type)); }

// The bytes of a (rows, k) matrix stored as blocks of ggml type number
// `raw_type`, row after row (each row k / block_size blocks), or -1 when
// ditgen does not read that type, k is not a whole number of its blocks, or
// a size is negative or overflows.
constexpr int64_t ggml_matrix_bytes(uint32_t raw_type, int64_t rows, int64_t k) {
  const GgmlTypeTraits* t = find_ggml_type(raw_type);
  if (!t || !t->dequantized || rows < 0 || k < 0 || k % t->block_size != 0) return -1;
  const int64_t row_bytes = k / t->block_size * t->type_size;
  if (row_bytes > 0 && rows > INT64_MAX / row_bytes) return -1;
  return rows * row_bytes;
}

// ------------------------------------------------------------ block decoding

namespace ggml_detail {

DITGEN_HD float f16_at(const uint8_t* p) { return f16_bits_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

DITGEN_HD uint32_t u32_at(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

// The 6-bit scale and minimum of sub-block j (0..7) of a Q4_K / Q5_K block,
// packed in 12 bytes: bytes 0-3 hold the low 6 bits of scales 0-3 (their top
// 2 bits: the high bits of scales 4-7), bytes 4-7 the same for the minimums,
// bytes 8-11 the low 4 bits of scale and minimum 4-7.
DITGEN_HD void k_scale_min(const uint8_t* s, int j, float& scale, float& min) {
  if (j < 4) {
    scale = static_cast<float>(s[j] & 63);
    min = static_cast<float>(s[j + 4] & 63);
  } else {
    scale = static_cast<float>((s[j + 4] & 0x0f) | ((s[j - 4] >> 2) & 0x30));
    min = static_cast<float>((s[j + 4] >> 4) | ((s[j] >> 2) & 0x30));
  }
}

}  // namespace ggml_detail

// Q4_0: d (f16), 16 bytes of nibbles; element l is the low nibble of byte
// l, element l + 16 the high one; value d * (q - 8).
DITGEN_HD void dequantize_block_q4_0(const uint8_t* __restrict b, float* __restrict y) {
  const float d = ggml_detail::f16_at(b);
  const uint8_t* qs = b + 2;
  for (int l = 0; l < 16; ++l) {
    y[l] = d * static_cast<float>((qs[l] & 0x0f) - 8);
    y[l + 16] = d * static_cast<float>((qs[l] >> 4) - 8);
  }
}

// Q4_1: d, m (f16), nibbles as Q4_0; value d * q + m.
DITGEN_HD void dequantize_block_q4_1(const uint8_t* __restrict b, float* __restrict y) {
  const float d = ggml_detail::f16_at(b), m = ggml_detail::f16_at(b + 2);
  const uint8_t* qs = b + 4;
  for (int l = 0; l < 16; ++l) {
    y[l] = d * static_cast<float>(qs[l] & 0x0f) + m;
    y[l + 16] = d * static_cast<float>(qs[l] >> 4) + m;
  }
}

// Q5_0: d, 32 high bits (u32, bit l for element l), nibbles as Q4_0; value
// d * (q - 16).
DITGEN_HD void dequantize_block_q5_0(const uint8_t* __restrict b, float* __restrict y) {
  const float d = ggml_detail::f16_at(b);
  const uint32_t qh = ggml_detail::u32_at(b + 2);
  const uint8_t* qs = b + 6;
  for (int l = 0; l < 16; ++l) {
    const int lo = (qs[l] & 0x0f) | static_cast<int>(((qh >> l) & 1u) << 4);
    const int hi = (qs[l] >> 4) | static_cast<int>(((qh >> (l + 16)) & 1u) << 4);
    y[l] = d * static_cast<float>(lo - 16);
    y[l + 16] = d * static_cast<float>(hi - 16);
  }
}

// Q5_1: d, m, high bits, nibbles; value d * q + m.
DITGEN_HD void dequantize_block_q5_1(const uint8_t* __restrict b, float* __restrict y) {
  const float d = ggml_detail::f16_at(b), m = ggml_detail::f16_at(b + 2);
  const uint32_t qh = ggml_detail::u32_at(b + 4);
  const uint8_t* qs = b + 8;
  for (int l = 0; l < 16; ++l) {
    const int lo = (qs[l] & 0x0f) | static_cast<int>(((qh >> l) & 1u) << 4);
    const int hi = (qs[l] >> 4) | static_cast<int>(((qh >> (l + 16)) & 1u) << 4);
    y[l] = d * static_cast<float>(lo) + m;
    y[l + 16] = d * static_cast<float>(hi) + m;
  }
}

// Q8_0: d, 32 int8; value q * d.
DITGEN_HD void dequantize_block_q8_0(const uint8_t* __restrict b, float* __restrict y) {
  const float d = ggml_detail::f16_at(b);
  const uint8_t* qs = b + 2;
  for (int l = 0; l < 32; ++l) y[l] = static_cast<float>(static_cast<int8_t>(qs[l])) * d;
}

// Q2_K: 16 bytes of scales (low nibble: scale, high nibble: minimum, one per
// 16 elements), 64 bytes of 2-bit values, d, dmin. Element
// 128 h + 32 s + l is bits 2s..2s+1 of byte 32 h + l; value
// (d * scale) * q - (dmin * min).
DITGEN_HD void dequantize_block_q2_k(const uint8_t* __restrict b, float* __restrict y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = ggml_detail::f16_at(b + 80), dmin = ggml_detail::f16_at(b + 82);
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 4; ++s)
      for (int half = 0; half < 2; ++half) {
        const int group = 8 * h + 2 * s + half;  // which 16 elements
        const float dl = d * static_cast<float>(scales[group] & 0x0f);
        const float ml = dmin * static_cast<float>(scales[group] >> 4);
        const uint8_t* q = qs + 32 * h + 16 * half;
        float* out = y + 16 * group;
        for (int l = 0; l < 16; ++l) out[l] = dl * static_cast<float>((q[l] >> (2 * s)) & 3) - ml;
      }
}

// Q3_K: 32 bytes of high bits (element 32 j + l: bit j of byte l), 64 bytes
// of low 2-bit values (laid out as Q2_K's), 12 bytes of 6-bit signed scales
// (one per 16 elements; low 4 bits in bytes 0-7, high 2 bits in bytes 8-11),
// d. Value (d * (scale - 32)) * (low - (high bit ? 0 : 4)).
DITGEN_HD void dequantize_block_q3_k(const uint8_t* __restrict b, float* __restrict y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* sc = b + 96;
  const float d = ggml_detail::f16_at(b + 108);
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 4; ++s)
      for (int half = 0; half < 2; ++half) {
        const int group = 8 * h + 2 * s + half;
        const int low4 = group < 8 ? (sc[group] & 0x0f) : (sc[group - 8] >> 4);
        const int high2 = (sc[8 + group % 4] >> (2 * (group / 4))) & 3;
        const float dl = d * static_cast<float>((low4 | (high2 << 4)) - 32);
        const int bit = 4 * h + s;  // the element's 32-group: bit of hmask
        const uint8_t* q = qs + 32 * h + 16 * half;
        const uint8_t* m = hmask + 16 * half;
        float* out = y + 16 * group;
        for (int l = 0; l < 16; ++l) {
          const int low = (q[l] >> (2 * s)) & 3;
          const int high = ((m[l] >> bit) & 1) ? 0 : 4;
          out[l] = dl * static_cast<float>(low - high);
        }
      }
}

namespace ggml_detail {

// Q4_K and Q5_K: d, dmin, 12 bytes of 6-bit scales and minimums (one pair
// per 32 elements), for Q5_K 32 bytes of fifth bits (element 32 j + l: bit
// j of byte l), then 128 bytes of nibbles: element 64 c + 32 n + l is
// nibble n of byte 32 c + l. Value (d * scale) * q - (dmin * min).
template <bool FifthBit>
DITGEN_HD void dequantize_k_nibbles(const uint8_t* __restrict b, float* __restrict y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (FifthBit ? 48 : 16);
  for (int j = 0; j < 8; ++j) {
    float scale, min;
    k_scale_min(scales, j, scale, min);
    const float dl = d * scale, ml = dmin * min;
    const uint8_t* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    float* out = y + 32 * j;
    for (int l = 0; l < 32; ++l) {
      int v = (q[l] >> shift) & 0x0f;
      if (FifthBit) v |= ((qh[l] >> j) & 1) << 4;
      out[l] = dl * static_cast<float>(v) - ml;
    }
  }
}

}  // namespace ggml_detail

DITGEN_HD void dequantize_block_q4_k(const uint8_t* __restrict b, float* __restrict y) {
  ggml_detail::dequantize_k_nibbles<false>(b, y);
}

DITGEN_HD void dequantize_block_q5_k(const uint8_t* __restrict b, float* __restrict y) {
  ggml_detail::dequantize_k_nibbles<true>(b, y);
}

// Q6_K: 128 bytes of low nibbles (element 128 h + 64 n + l: nibble n of byte
// 64 h + l), 64 bytes of high 2-bit pairs (element 128 h + 32 s + l: bits
// 2s..2s+1 of byte 32 h + l), 16 int8 scales (one per 16 elements), d.
// Value (d * scale) * (q - 32).
DITGEN_HD void dequantize_block_q6_k(const uint8_t* __restrict b, float* __restrict y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const uint8_t* sc = b + 192;
  const float d = ggml_detail::f16_at(b + 208);
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 4; ++s) {
      const uint8_t* low = ql + 64 * h + 32 * (s % 2);
      const int shift = 4 * (s / 2);
      const uint8_t* high = qh + 32 * h;
      for (int half = 0; half < 2; ++half) {
        const int group = 8 * h + 2 * s + half;
        const float dl = d * static_cast<float>(static_cast<int8_t>(sc[group]));
        float* out = y + 16 * group;
        for (int l = 0; l < 16; ++l) {
          const int i = 16 * half + l;
          const int v = ((low[i] >> shift) & 0x0f) | (((high[i] >> (2 * s)) & 3) << 4);
          out[l] = dl * static_cast<float>(v - 32);
        }
      }
    }
}

// The plain types, one element per "block".
DITGEN_HD void dequantize_block_f32(const uint8_t* __restrict b, float* __restrict y) {
  y[0] = float_from_bits(ggml_detail::u32_at(b));
}
DITGEN_HD void dequantize_block_f16(const uint8_t* __restrict b, float* __restrict y) { y[0] = ggml_detail::f16_at(b); }
DITGEN_HD void dequantize_block_bf16(const uint8_t* __restrict b, float* __restrict y) {
  y[0] = float_from_bits(static_cast<uint32_t>(b[0] | (b[1] << 8)) << 16);
}

// One block format as a type: its bytes per block, its elements per block,
// and the block's dequantizer, so a loop over blocks (dequantize_blocks
// below, the CUDA kernel of kernels/cuda/ggml_dequantize.cu) is written once
// for every format and instantiated per format.
template <void (*Block)(const uint8_t* __restrict, float* __restrict), int32_t Bytes, int32_t Elements>
struct BlockFormat {
  static constexpr int32_t kBytes = Bytes;
  static constexpr int32_t kElements = Elements;
  DITGEN_HD static void dequantize(const uint8_t* __restrict b, float* __restrict y) { Block(b, y); }
};

// Calls f(BlockFormat<...>{}) with the format of `type` (one of the 13 read
// types) and returns true; false, calling nothing, for a type ditgen does
// not read.
template <class F>
DITGEN_HD bool with_block_format(GgmlType type, F&& f) {
  switch (type) {
    case GgmlType::kF32: f(BlockFormat<dequantize_block_f32, 4, 1>{}); return true;
    case GgmlType::kF16: f(BlockFormat<dequantize_block_f16, 2, 1>{}); return true;
    case GgmlType::kBF16: f(BlockFormat<dequantize_block_bf16, 2, 1>{}); return true;
    case GgmlType::kQ4_0: f(BlockFormat<dequantize_block_q4_0, kQ4_0Bytes, kQK>{}); return true;
    case GgmlType::kQ4_1: f(BlockFormat<dequantize_block_q4_1, kQ4_1Bytes, kQK>{}); return true;
    case GgmlType::kQ5_0: f(BlockFormat<dequantize_block_q5_0, kQ5_0Bytes, kQK>{}); return true;
    case GgmlType::kQ5_1: f(BlockFormat<dequantize_block_q5_1, kQ5_1Bytes, kQK>{}); return true;
    case GgmlType::kQ8_0: f(BlockFormat<dequantize_block_q8_0, kQ8_0Bytes, kQK>{}); return true;
    case GgmlType::kQ2_K: f(BlockFormat<dequantize_block_q2_k, kQ2_KBytes, kQK_K>{}); return true;
    case GgmlType::kQ3_K: f(BlockFormat<dequantize_block_q3_k, kQ3_KBytes, kQK_K>{}); return true;
    case GgmlType::kQ4_K: f(BlockFormat<dequantize_block_q4_k, kQ4_KBytes, kQK_K>{}); return true;
    case GgmlType::kQ5_K: f(BlockFormat<dequantize_block_q5_k, kQ5_KBytes, kQK_K>{}); return true;
    case GgmlType::kQ6_K: f(BlockFormat<dequantize_block_q6_k, kQ6_KBytes, kQK_K>{}); return true;
    default: return false;
  }
}

// Dequantizes `blocks` consecutive blocks of `type` (one of the 13 read
// types) from `src` into `y` (blocks * block_size floats). Returns false,
// writing nothing, for a type ditgen does not read.
DITGEN_HD bool dequantize_blocks(GgmlType type, const uint8_t* src, int64_t blocks, float* y) {
  return with_block_format(type, [&](auto format) {
    using Format = decltype(format);
    for (int64_t i = 0; i < blocks; ++i) Format::dequantize(src + Format::kBytes * i, y + Format::kElements * i);
  });
}

}  // namespace ditgen::math
