// Element conversion between host arrays of any two tensor dtypes: the one
// routine behind Tensor::to / copy_from on the CPU and the host side of
// uploads. Floating types convert as src/tensor/half.h says (round to nearest
// even); integers and floats convert by exact casts: a value that the target
// cannot hold exactly (a fraction, NaN, out of range, an int64 beyond float's
// 24-bit significand) is std::invalid_argument, never a silent change.
#pragma once
#include <cstdint>

#include "vocab/dtype.h"

namespace ditgen {

// dst[i] = src[i] converted, for n elements; src and dst must not overlap
// unless the dtypes are equal (then it is a memmove).
void convert_host(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n);

}  // namespace ditgen
