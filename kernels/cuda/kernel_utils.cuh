// Device-side helpers shared by the kernels/cuda/*.cu files (CUDA-only
// header): storage-type conversion to and from float (every kernel computes
// in float32), the DType -> C++ type dispatch for launches, 1-D launch
// geometry for grid-stride loops, and warp reductions.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/dtype.h"

namespace ditgen::cuda {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <class T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }

template <class T> struct TypeTag { using type = T; };

// Calls f(TypeTag<T>{}) with T the storage type of `t`:
//   dispatch_dtype(dtype, [&](auto tag) { using T = typename decltype(tag)::type; ... });
template <class F> void dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kF32: f(TypeTag<float>{}); return;
    case DType::kBF16: f(TypeTag<__nv_bfloat16>{}); return;
    case DType::kF16: f(TypeTag<__half>{}); return;
    case DType::kI32:
    case DType::kI64:
    case DType::kI8: break;  // host-only integer tensors never reach a kernel
  }
  throw std::invalid_argument(std::string("cuda: unsupported dtype ") + dtype_name(t));
}

// Blocks for a grid-stride loop over n items: enough to fill any current GPU
// several times over, capped so the x dimension stays far below its limit.
constexpr int kThreads = 256;
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t{1} << 16));
}

// cuBLAS takes int sizes: larger ones are an error, not a silent wrap.
inline int checked_int(int64_t v, const char* what) {
  if (v < 0 || v > INT32_MAX) throw std::invalid_argument(std::string("cuda: ") + what + " out of int range");
  return static_cast<int>(v);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum / max over a block whose size is a multiple of 32 (at most 1024);
// every thread gets the result. `scratch` holds 32 floats of shared memory
// and may be reused right after the call returns (the trailing barrier).
template <float (*WarpReduce)(float)>
__device__ __forceinline__ float block_reduce(float v, float* scratch, float identity) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = WarpReduce(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : identity;
  v = WarpReduce(v);
  __syncthreads();
  return v;
}

__device__ __forceinline__ float block_sum(float v, float* scratch) { return block_reduce<warp_sum>(v, scratch, 0.0f); }
__device__ __forceinline__ float block_max(float v, float* scratch) {
  return block_reduce<warp_max>(v, scratch, -INFINITY);
}

}  // namespace ditgen::cuda
