// Shared helpers of the GPU op tests (tests/gpu/test_*.cpp): host tensors
// uploaded to the device in a storage type and read back as float, the
// rounding the storage type applies (so the CPU reference sees the very
// inputs the GPU saw), and the tolerances per storage type. Host-only.
//
// Tolerances are relative L2 (docs/design.md §7) against the CPU op on the
// rounded inputs:
//   float32  1e-5   same math, different summation order
//   float16  2e-3   output (and attention's P) rounded to 11 bits: ~3e-4 each
//   bfloat16 1e-2   the same at 8 bits: ~2.5e-3 each
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "ops/test_helpers.h"
#include "tensor/tensor.h"

namespace ditgen::gputest {

using cuda::DType;

inline constexpr DType kAllTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

inline double tolerance(DType t) {
  switch (t) {
    case DType::kF32: return 1e-5;
    case DType::kF16: return 2e-3;
    case DType::kBF16: return 1e-2;
    default: return 0;
  }
}

// x after a round trip through storage type t.
inline float round_trip(float x, DType t) {
  switch (t) {
    case DType::kF32: return x;
    case DType::kBF16: return __bfloat162float(__float2bfloat16(x));
    case DType::kF16: return __half2float(__float2half(x));
    default: return x;
  }
}

inline Tensor rounded(const Tensor& x, DType t) {
  Tensor y = x.clone();
  for (int64_t i = 0; i < y.numel(); ++i) y[i] = round_trip(y[i], t);
  return y;
}

// A device array of `numel` elements of storage type t.
class DeviceTensor {
 public:
  DeviceTensor(int64_t numel, DType t)
      : buf_(static_cast<size_t>(numel) * cuda::dtype_size(t)), numel_(numel), dtype_(t) {}
  // Uploads host (converted to t, rounding to nearest even).
  DeviceTensor(const Tensor& host, DType t) : DeviceTensor(host.numel(), t) {
    const size_t bytes = static_cast<size_t>(numel_) * cuda::dtype_size(t);
    if (t == DType::kF32) {
      cuda::copy_to_device(buf_.get(), host.data(), bytes);
    } else {
      std::vector<uint16_t> bits(numel_);
      for (int64_t i = 0; i < numel_; ++i) bits[i] = to_bits(host[i], t);
      cuda::copy_to_device(buf_.get(), bits.data(), bytes);
    }
  }

  void* data() { return buf_.get(); }
  const void* data() const { return buf_.get(); }
  // Address of element i.
  void* at(int64_t i) { return static_cast<char*>(buf_.get()) + i * static_cast<int64_t>(cuda::dtype_size(dtype_)); }
  DType dtype() const { return dtype_; }

  // Synchronous read-back as float32 of the given shape (numel must match).
  Tensor to_host(Shape shape) const {
    Tensor out = Tensor::empty(std::move(shape));
    const size_t bytes = static_cast<size_t>(numel_) * cuda::dtype_size(dtype_);
    if (dtype_ == DType::kF32) {
      cuda::copy_to_host(out.data(), buf_.get(), bytes);
    } else {
      std::vector<uint16_t> bits(numel_);
      cuda::copy_to_host(bits.data(), buf_.get(), bytes);
      for (int64_t i = 0; i < numel_; ++i) out[i] = from_bits(bits[i], dtype_);
    }
    return out;
  }

 private:
  static uint16_t to_bits(float x, DType t) {
    if (t == DType::kBF16) return static_cast<__nv_bfloat16_raw>(__float2bfloat16(x)).x;
    return static_cast<__half_raw>(__float2half(x)).x;
  }
  static float from_bits(uint16_t u, DType t) {
    if (t == DType::kBF16) {
      __nv_bfloat16_raw r;
      r.x = u;
      return __bfloat162float(__nv_bfloat16(r));
    }
    __half_raw r;
    r.x = u;
    return __half2float(__half(r));
  }

  cuda::DeviceBuffer buf_;
  int64_t numel_;
  DType dtype_;
};

}  // namespace ditgen::gputest
