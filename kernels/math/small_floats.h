// Decoding the small float formats of weight files into float32, exact for
// every bit pattern, as DITGEN_HD functions so the CPU loaders and (later)
// the CUDA kernels that dequantize weights share them:
//
//   float16  IEEE binary16: the scales inside ggml's quantized blocks
//            (kernels/math/ggml_blocks.h) and GGUF's F16 tensors;
//   float8   e4m3fn (torch.float8_e4m3fn: bias 7, no infinities, the one
//            NaN 0x7f / 0xff) and e5m2 (torch.float8_e5m2: the top byte of
//            a float16), the element types F8_E4M3 / F8_E5M2 of
//            safetensors files.
//
// Branch-free (selects, no table), so a loop over a row vectorises. The
// host-only float16 conversions of the tensor layer (src/tensor/half.h,
// both directions, rounding) stay where they are; this is the decode half
// in a form device code can call, checked against it on all 65536 inputs
// (tests/io/test_ggml_blocks.cpp). Subnormal inputs are decoded exactly
// through normal-number arithmetic only, so neither a flush-to-zero mode
// nor x86's slow path for subnormal operands touches them.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/math/hd.h"

namespace ditgen::math {

DITGEN_HD float float_from_bits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// float16 bits -> float32. The exponent and mantissa are moved into
// float32's fields and the exponent rebased (+112); exponent 31 (infinities,
// NaNs, payload kept) is rebased to 255; a subnormal or zero is built as
// 2^-14 * (1 + m / 1024) and 2^-14 taken off again, exactly m * 2^-24.
// Every float operation sees normal numbers only: x86 takes a slow
// microcode path for a subnormal operand, which a multiply by 2^112 of the
// moved fields would hit for every float16 subnormal.
DITGEN_HD float f16_bits_to_f32(uint16_t h) {
  const uint32_t shifted = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const uint32_t exponent = shifted & 0x0f800000u;
  const uint32_t rebased = shifted + (112u << 23);
  const float normal = float_from_bits(rebased);
  const float special = float_from_bits(rebased + (112u << 23));
  const float subnormal = float_from_bits(rebased + (1u << 23)) - float_from_bits(113u << 23);
  const float value = exponent == 0x0f800000u ? special : exponent == 0 ? subnormal : normal;
  return (h & 0x8000u) ? -value : value;  // negation flips the sign bit alone (NaN, zero included)
}

// float8 e5m2 is float16 with the low mantissa byte cut off. Its NaNs come
// out quiet (the quiet bit set, the payload kept), as torch's conversion
// (through the CPU's float16 instructions) gives them.
DITGEN_HD float f8e5m2_bits_to_f32(uint8_t b) {
  const bool nan = (b & 0x7fu) > 0x7cu;
  const float quiet_nan = float_from_bits(static_cast<uint32_t>(b & 0x80u) << 24 | 0x7fc00000u |
                                          static_cast<uint32_t>(b & 3u) << 21);
  return nan ? quiet_nan : f16_bits_to_f32(static_cast<uint16_t>(b << 8));
}

// float8 e4m3fn: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0
// holds the subnormals m * 2^-9; S.1111.111 is NaN and there is no infinity
// (S.1111.xxx below it are the normals up to 448).
DITGEN_HD float f8e4m3fn_bits_to_f32(uint8_t b) {
  const uint32_t magnitude = b & 0x7fu;
  // As for float16: the fields moved into place (exponent 4 -> 8 bits,
  // mantissa 3 -> 23 bits), the exponent rebased by 127 - 7, a subnormal
  // built as 2^-6 * (1 + m / 8) - 2^-6 = m * 2^-9 (normal operands only).
  // The NaN is the one torch's conversion gives (c10::Float8_e4m3fn:
  // 0x7ff00000, signed).
  const uint32_t rebased = (magnitude << 20) + (120u << 23);
  const float normal = float_from_bits(rebased);
  const float subnormal = float_from_bits(rebased + (1u << 23)) - float_from_bits(121u << 23);
  const float value = magnitude == 0x7fu ? float_from_bits(0x7ff00000u) : magnitude < 8 ? subnormal : normal;
  return (b & 0x80u) ? -value : value;
}

}  // namespace ditgen::math
