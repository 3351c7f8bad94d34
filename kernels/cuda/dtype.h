// Storage element types of the CUDA ops: ditgen::DType (src/vocab/dtype.h)
// under the ditgen::cuda namespace, so kernels and host code name one enum.
// Device tensors hold float32, bfloat16 or float16 values behind void
// pointers plus this tag; the kernels are templated on the matching C++ type
// inside the .cu files and always compute in float32. No CUDA includes: host
// code (the attention path choice, its CPU test) uses it without the toolkit.
#pragma once
#include "vocab/dtype.h"

namespace ditgen::cuda {

using ditgen::DType;
using ditgen::dtype_name;
using ditgen::dtype_size;

}  // namespace ditgen::cuda
