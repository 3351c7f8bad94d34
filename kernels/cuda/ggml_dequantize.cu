// GGUF block dequantization on the device (cuda::dequantize_ggml): a
// block-quantized weight uploaded as the file stores it (a Q4_K weight is
// 4.5 bits an element) becomes a row-major weight in the compute dtype, so a
// quantized model loads to a GPU without a float copy on the host. The
// arithmetic is the DITGEN_HD block dequantizers of kernels/math/
// ggml_blocks.h, the CPU's own, instantiated per format through
// math::with_block_format; the launch geometry (one thread per block, tiles
// staged in shared memory for a coalesced store) is ggml_dequantize_launch.h.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/ggml_dequantize_launch.h"
#include "kernels/cuda/kernel_utils.cuh"

namespace ditgen::cuda {

namespace {

// Blocks [tile * kBlocks, ...) of `total` are dequantized by thread i into
// the shared tile, block i at tile + i * kStride; the tile is then stored
// element by element into y, in order.
template <class Format, class T>
__global__ void __launch_bounds__(ggml_tile_blocks(Format::kElements))
    dequantize_kernel(const uint8_t* __restrict__ blocks, T* __restrict__ y, int64_t total) {
  constexpr int kBlocks = ggml_tile_blocks(Format::kElements);
  constexpr int kStride = ggml_tile_stride(Format::kElements);
  constexpr int64_t kElements = Format::kElements;
  static_assert(ggml_tile_bytes(Format::kElements) <= kStaticSharedBytes, "the tile exceeds static shared memory");
  __shared__ float tile[kBlocks * kStride];
  for (int64_t first = blockIdx.x * int64_t{kBlocks}; first < total; first += int64_t{gridDim.x} * kBlocks) {
    const int64_t block = first + threadIdx.x;
    if (block < total) Format::dequantize(blocks + block * Format::kBytes, tile + threadIdx.x * kStride);
    __syncthreads();
    const int64_t count = (total - first < kBlocks ? total - first : kBlocks) * kElements;
    T* out = y + first * kElements;
    for (int64_t e = threadIdx.x; e < count; e += kBlocks)
      out[e] = from_float<T>(tile[e / kElements * kStride + e % kElements]);
    __syncthreads();  // the tile is rewritten by the next round
  }
}

}  // namespace

void dequantize_ggml(const void* blocks, size_t bytes, uint32_t ggml_type, void* y, int64_t rows, int64_t k,
                     DType dtype) {
  const GgmlDequantizeLaunch launch = ggml_dequantize_launch(ggml_type, rows, k, bytes);
  if (launch.grid == 0) return;
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    math::with_block_format(launch.type, [&](auto format) {
      using Format = decltype(format);
      dequantize_kernel<Format, T><<<launch.grid, launch.threads, 0, stream()>>>(static_cast<const uint8_t*>(blocks),
                                                                                 static_cast<T*>(y), launch.blocks);
      DITGEN_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace ditgen::cuda
