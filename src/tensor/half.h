// The one host implementation of the 16-bit float formats: bfloat16 and IEEE
// float16 to and from float32, bit exact, rounding to nearest even as torch
// does (c10::BFloat16 / c10::Half), so a weight converted here holds the bits
// torch would have written. Widening is exact for every input (subnormals,
// +-0, inf, NaN payloads); narrowing turns NaN into the quiet NaN torch gives
// (bfloat16 0x7FC0, float16 sign | 0x7E00) and overflow into +-inf.
// Plain inline C++ (no CUDA syntax, no intrinsics): the tensor layer's
// conversions, the CPU GEMM's weight widening and the tests use these.
//
// BFloat16 / Float16 are the element types Tensor::data_as<T>() hands out for
// 16-bit tensors: a uint16_t of storage, distinct types so a bfloat16 tensor
// cannot be read as float16 by mistake.
#pragma once
#include <bit>
#include <cstdint>

namespace ditgen {

struct BFloat16 {
  uint16_t bits;
};
struct Float16 {
  uint16_t bits;
};

// bfloat16 is the upper half of a float32.
inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  // Add just under half an ulp, plus one when the kept part is odd: ties go to even.
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float (both factors are).
    bits = sign | std::bit_cast<uint32_t>(static_cast<float>(mantissa) * 0x1p-24f);
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (a >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 2^16 (or inf): inf
  // Keep `shift` low bits' worth of precision off `m`, rounding to nearest even.
  auto round_shift = [](uint32_t m, uint32_t shift) {
    const uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return r + (rem > half || (rem == half && (r & 1u)) ? 1u : 0u);
  };
  if (a >= 0x38800000u) {  // >= 2^-14: a normal float16 (a carry may round up to the next binade or inf)
    const uint32_t biased = ((a >> 23) - (127 - 15)) << 23 | (a & 0x7fffffu);
    return static_cast<uint16_t>(sign | round_shift(biased, 13));
  }
  // Subnormal float16: value / 2^-24 = m * 2^(e - 126), e <= 112; below 2^-25 everything rounds to zero.
  const uint32_t e = a >> 23;
  if (e < 102) return static_cast<uint16_t>(sign);
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  return static_cast<uint16_t>(sign | round_shift(m, 126 - e));
}

}  // namespace ditgen
