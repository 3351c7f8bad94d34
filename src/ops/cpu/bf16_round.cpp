#include "ops/cpu/bf16_round.h"

#include <immintrin.h>

#include "tensor/half.h"

namespace ditgen::ops::cpu {

void round_to_bf16(const float* src, int64_t n, uint16_t* dst) {
  int64_t e = 0;
#if defined(__AVX512BF16__)
  for (; e + 16 <= n; e += 16) {
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + e));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + e), reinterpret_cast<const __m256i&>(h));
  }
#endif
  for (; e < n; ++e) dst[e] = f32_to_bf16(src[e]);
}

}  // namespace ditgen::ops::cpu
