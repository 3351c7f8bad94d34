// float32 -> bfloat16 rounding of arrays for the CPU's bfloat16 compute
// (GEMM inputs, attention operands): nearest even, as tensor/half.h's
// f32_to_bf16 rounds one value. Built with AVX-512 where the machine has it
// (CMakeLists.txt: the vector-kernel files), one instruction per 16 values
// with AVX512-BF16.
#pragma once
#include <cstdint>

namespace ditgen::ops::cpu {

// dst[i] = bfloat16 bits of src[i], i < n.
void round_to_bf16(const float* src, int64_t n, uint16_t* dst);

}  // namespace ditgen::ops::cpu
