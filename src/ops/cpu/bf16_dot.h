// acc (16 float32 lanes) += a[2i] * b[2i] + a[2i+1] * b[2i+1], a and b 32
// bfloat16 values each: AVX512-BF16's vdpbf16ps, the core of the bf16
// micro-kernels (attention.cpp, small_gemm_bf16.cpp). Written as inline
// assembly on integer vectors rather than as the _mm512_dpbf16_ps
// intrinsic: clang 16 crashes compiling the intrinsic's conversions of an
// integer vector to the __m512bh type (always under AddressSanitizer, which
// the fuzz build uses, and in some forms without), and the bits are the
// same either way.
#pragma once

#include <immintrin.h>

namespace ditgen::ops::cpu {

#if defined(__AVX512BF16__)
inline __m512 dot_bf16_pairs(__m512 acc, __m512i a, __m512i b) {
  __asm__("vdpbf16ps %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}
#endif

}  // namespace ditgen::ops::cpu
