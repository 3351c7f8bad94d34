// GroupNorm (+ optional fused SiLU) on the GPU, torch.nn.GroupNorm semantics.
//
// x [B, C, S] is B*G contiguous groups of L = (C/G)*S values. VAE groups are
// large (L ~ 4M) and few (B*G ~ 32), so one block per group would leave most
// SMs idle: each group is split into `splits` chunks, one block each.
//   1. moments_kernel: per block, Welford moments (count, mean, M2) of its
//      chunk in float32, combined across threads with Chan's formula
//      (kernels/math/norm.h): every partial is centred on its own mean, so no
//      E[x^2] - E[x]^2 cancellation when |mean| >> std.
//   2. finalize_kernel: one thread per group combines its chunks' moments
//      into mean and rstd.
//   3. apply_kernel: y = (x - mean) * (w[c] * rstd) + b[c], then SiLU when
//      asked (math::group_norm_apply / math::silu, as the CPU op).
// Scratch (moments, statistics) comes from the stream-ordered allocator.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/math/activations.h"
#include "kernels/math/norm.h"

namespace ditgen::cuda {

namespace {

constexpr int64_t kChunk = 16384;    // values per moments block (at most)
constexpr int64_t kMaxSplits = 1024;

__device__ __forceinline__ math::Moments shfl_moments(const math::Moments& m, int offset) {
  math::Moments o;
  o.n = __shfl_xor_sync(0xffffffffu, m.n, offset);
  o.mean = __shfl_xor_sync(0xffffffffu, m.mean, offset);
  o.m2 = __shfl_xor_sync(0xffffffffu, m.m2, offset);
  return o;
}

// partial[blockIdx.x] = moments of chunk (blockIdx.x % splits) of group
// (blockIdx.x / splits); group_len values per group, chunk values per chunk.
template <class T>
__global__ void moments_kernel(const T* __restrict__ x, int64_t group_len, int64_t chunk, int64_t splits,
                               math::Moments* __restrict__ partial) {
  __shared__ float warp_n[32], warp_mean[32], warp_m2[32];  // plain floats: no constructors in __shared__
  const int64_t bg = blockIdx.x / splits, s = blockIdx.x % splits;
  const int64_t begin = s * chunk, end = min(group_len, begin + chunk);
  const T* xg = x + bg * group_len;
  math::Moments m;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) math::moments_push(m, to_float(xg[i]));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = math::moments_combine(m, shfl_moments(m, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    warp_n[warp] = m.n;
    warp_mean[warp] = m.mean;
    warp_m2[warp] = m.m2;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    math::Moments total;
    for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) {
      math::Moments part;
      part.n = warp_n[w];
      part.mean = warp_mean[w];
      part.m2 = warp_m2[w];
      total = math::moments_combine(total, part);
    }
    partial[blockIdx.x] = total;
  }
}

// stats[2*bg] = mean, stats[2*bg+1] = rstd of group bg.
__global__ void finalize_kernel(const math::Moments* __restrict__ partial, int64_t groups_total, int64_t splits,
                                float eps, float* __restrict__ stats) {
  const int64_t bg = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (bg >= groups_total) return;
  math::Moments total = partial[bg * splits];
  for (int64_t s = 1; s < splits; ++s) total = math::moments_combine(total, partial[bg * splits + s]);
  stats[2 * bg] = total.mean;
  stats[2 * bg + 1] = math::norm_rstd(total.m2, total.n, eps);
}

template <class T, bool kSilu>
__global__ void apply_kernel(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
                             const float* __restrict__ stats, T* __restrict__ y, int64_t channels, int64_t spatial,
                             int64_t cpg, int64_t groups, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t bc = i / spatial, c = bc % channels, b = bc / channels;
    const int64_t bg = b * groups + c / cpg;
    const float a = to_float(weight[c]) * stats[2 * bg + 1];
    float v = math::group_norm_apply(to_float(x[i]), stats[2 * bg], 0.0f, a, to_float(bias[c]));
    if (kSilu) v = math::silu(v);
    y[i] = from_float<T>(v);
  }
}

}  // namespace

void group_norm(const void* x, const void* weight, const void* bias, void* y, int64_t batch, int64_t channels,
                int64_t spatial, int64_t groups, float eps, bool fuse_silu, DType dtype) {
  if (groups < 1 || channels % groups != 0)
    throw std::invalid_argument("group_norm: " + std::to_string(channels) + " channels not divisible into " +
                                std::to_string(groups) + " groups");
  if (!weight || !bias) throw std::invalid_argument("group_norm: weight and bias are required");
  const int64_t n = batch * channels * spatial;
  if (n <= 0) return;
  const int64_t cpg = channels / groups, group_len = cpg * spatial, groups_total = batch * groups;
  const int64_t splits = std::clamp<int64_t>((group_len + kChunk - 1) / kChunk, 1, kMaxSplits);
  const int64_t chunk = (group_len + splits - 1) / splits;
  DeviceBuffer partial(static_cast<size_t>(groups_total * splits) * sizeof(math::Moments));
  DeviceBuffer stats(static_cast<size_t>(groups_total) * 2 * sizeof(float));
  const unsigned moment_blocks = static_cast<unsigned>(checked_int(groups_total * splits, "group_norm blocks"));
  dispatch_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    moments_kernel<T><<<moment_blocks, kThreads, 0, stream()>>>(static_cast<const T*>(x), group_len, chunk, splits,
                                                                partial.as<math::Moments>());
    DITGEN_CUDA_CHECK_LAUNCH();
    finalize_kernel<<<static_cast<unsigned>((groups_total + 127) / 128), 128, 0, stream()>>>(
        partial.as<math::Moments>(), groups_total, splits, eps, stats.as<float>());
    DITGEN_CUDA_CHECK_LAUNCH();
    auto apply = fuse_silu ? apply_kernel<T, true> : apply_kernel<T, false>;
    apply<<<grid_for(n), kThreads, 0, stream()>>>(static_cast<const T*>(x), static_cast<const T*>(weight),
                                                  static_cast<const T*>(bias), stats.as<float>(),
                                                  static_cast<T*>(y), channels, spatial, cpg, groups, n);
    DITGEN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ditgen::cuda
