// Host dtype conversion (convert.h). Each element goes through float32 when
// both sides are floating (every bfloat16 / float16 value is a float32, so
// nothing is lost on the way), through int64 when both are integers, and
// through an exactness check when it crosses between the two kinds. Large
// arrays convert on the OpenMP pool (whole-checkpoint conversions at load).
#include "tensor/convert.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "tensor/half.h"

namespace ditgen {

namespace {

// Element i of a floating array as float32.
inline float load_float(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

inline void store_float(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kBF16: static_cast<uint16_t*>(p)[i] = f32_to_bf16(v); return;
    case DType::kF16: static_cast<uint16_t*>(p)[i] = f32_to_f16(v); return;
    default: static_cast<float*>(p)[i] = v; return;
  }
}

inline int64_t load_int(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kI8: return static_cast<const int8_t*>(p)[i];
    case DType::kI32: return static_cast<const int32_t*>(p)[i];
    default: return static_cast<const int64_t*>(p)[i];
  }
}

// v stored as integer dtype t, or false when it does not fit.
inline bool store_int(void* p, DType t, int64_t i, int64_t v) {
  switch (t) {
    case DType::kI8:
      if (v < INT8_MIN || v > INT8_MAX) return false;
      static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v);
      return true;
    case DType::kI32:
      if (v < INT32_MIN || v > INT32_MAX) return false;
      static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
      return true;
    default: static_cast<int64_t*>(p)[i] = v; return true;
  }
}

[[noreturn]] void inexact(DType from, DType to, const std::string& value) {
  throw std::invalid_argument(std::string("convert ") + dtype_name(from) + " to " + dtype_name(to) + ": " + value +
                              " is not exactly representable");
}

}  // namespace

void convert_host(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n) {
  if (n <= 0) return;
  if (src_dtype == dst_dtype) {
    std::memmove(dst, src, static_cast<size_t>(n) * dtype_size(src_dtype));
    return;
  }
  const bool src_float = is_floating(src_dtype), dst_float = is_floating(dst_dtype);
  if (src_float && dst_float) {
#pragma omp parallel for schedule(static) if (n > (1 << 20))
    for (int64_t i = 0; i < n; ++i) store_float(dst, dst_dtype, i, load_float(src, src_dtype, i));
    return;
  }
  // The rest involve integers: rare and small (index tensors), so serial and
  // checked element by element.
  for (int64_t i = 0; i < n; ++i) {
    if (!src_float && !dst_float) {
      const int64_t v = load_int(src, src_dtype, i);
      if (!store_int(dst, dst_dtype, i, v)) inexact(src_dtype, dst_dtype, std::to_string(v));
    } else if (src_float) {  // float -> integer: integral and in range
      const float f = load_float(src, src_dtype, i);
      if (!(f >= -0x1p63f && f < 0x1p63f) || std::trunc(f) != f ||
          !store_int(dst, dst_dtype, i, static_cast<int64_t>(f)))
        inexact(src_dtype, dst_dtype, std::to_string(f));
    } else {  // integer -> float: the float must give the integer back
      const int64_t v = load_int(src, src_dtype, i);
      store_float(dst, dst_dtype, i, static_cast<float>(v));
      const float f = load_float(dst, dst_dtype, i);  // as stored (a 16-bit type rounds again)
      if (!(f >= -0x1p63f && f < 0x1p63f) || static_cast<int64_t>(f) != v)
        inexact(src_dtype, dst_dtype, std::to_string(v));
    }
  }
}

}  // namespace ditgen
