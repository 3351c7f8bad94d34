// Flash attention on the GPU (compute capability >= 8.0, head sizes 64, 72,
// 128; see attention_path.h): tiled, online softmax in float32
// (kernels/math/softmax.h, the CPU kernel's recurrence), no n x n buffer,
// any q/kv length (partial tiles masked), strided Q/K/V/out rows as
// AttentionArgs, optional log-sum-exp output, optional per-sample key
// counts (each block walks only its sample's first kv_lens[b] keys). No
// score bias: calls with one take the math path (attention_path.h).
//
// bf16 / f16 storage: tensor cores through mma.sync.m16n8k16 (sm_80 PTX,
// float32 accumulation). A block is 4 warps and 64 queries, each warp owns
// 16 query rows; keys go in tiles of 64 through shared memory (K and V
// tiles, 64 x (head_dim padded) 16-bit values each: 35 KB at head_dim 128,
// under the 48 KB static limit, no opt-in). The fragment layouts are the PTX
// ISA's for m16n8k16: thread (group g = lane / 4, t = lane % 4) holds
// accumulator rows g and g + 8, columns 2t and 2t + 1 of each 8-wide tile.
// That makes the score accumulators of two adjacent key tiles exactly the A
// fragment of P for the P·V product (FlashAttention-2's register trick), so
// the softmax runs in registers, with row max / sum reduced over the 4
// threads of a group by shuffles. Head size 72 pads the Q·K^T reduction to
// 80 with zeros in shared memory; P·V needs no padding (9 tiles of 8).
// Fragments are read from shared memory with 32-bit loads (row pitch
// padded by 8 elements: conflict-free for these pitches); ldmatrix and
// cp.async double buffering would be the next speed-ups.
//
// float32 storage: a CUDA-core kernel (float32 means float32: no TF32, no
// down-conversion). 32 queries and 32 keys per tile, 128 threads: four
// threads per query row, each computing 8 of the row's 32 scores and a
// quarter of its output columns; rows padded by one float against bank
// conflicts.
//
// Grids put (batch, head, query tile) on x (up to 2^31 - 1 blocks).
#include <cstring>
#include <type_traits>

#include "kernels/cuda/attention_checks.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/math/softmax.h"

namespace ditgen::cuda {

namespace {

// Element offsets of one (batch, head) slice; rows are tokens.
struct Operand {
  const void* base;
  int64_t row_stride, batch_stride;
};

struct FlashParams {
  Operand q, k, v;
  void* out;
  int64_t out_row_stride, out_batch_stride;
  float* lse;
  const int32_t* kv_lens;  // device copy of AttentionArgs::kv_lens, or null
  int64_t heads, q_len, kv_len, q_tiles;
  float scale;
};

// ---------------------------------------------------------------- bf16 / f16

// Compiled for an arch below sm_80 the kernel body is a trap, leaving these
// helpers unreferenced: silence that warning (177) for this section only.
#pragma nv_diagnostic push
#pragma nv_diag_suppress 177

constexpr int kMmaWarps = 4;
constexpr int kMmaRows = 16 * kMmaWarps;  // queries per block
constexpr int kMmaKeys = 64;              // keys per tile

template <class T> struct MmaType;
template <> struct MmaType<__nv_bfloat16> {
  __device__ static uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low 16 bits) = lo
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
  }
};
template <> struct MmaType<__half> {
  __device__ static uint32_t pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
  }
};

// c[16x8] += a[16x16] · b[16x8], float32 accumulators.
template <class T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#else
  (void)c, (void)a, (void)b0, (void)b1;
#endif
}

__device__ __forceinline__ uint32_t lds32(const uint16_t* p) { return *reinterpret_cast<const uint32_t*>(p); }
__device__ __forceinline__ uint32_t pack16(uint16_t lo, uint16_t hi) { return uint32_t{lo} | (uint32_t{hi} << 16); }

// Copies rows [row0, row0 + kRows) x columns [0, kCols) of one (batch, head)
// slice into tile (pitch kPitch, 16-bit elements), zero past the last row
// or past head_dim (kDim). kVec: 16-byte loads (pointer, strides and head
// offset all multiples of 8 elements, checked on the host).
template <int kRows, int kCols, int kPitch, int kDim, bool kVec>
__device__ __forceinline__ void load_tile16(uint16_t* tile, const uint16_t* src, int64_t row_stride, int64_t row0,
                                            int64_t rows) {
  if constexpr (kVec) {
    constexpr int kChunks = kCols / 8;
    for (int idx = threadIdx.x; idx < kRows * kChunks; idx += blockDim.x) {
      const int r = idx / kChunks, c = (idx % kChunks) * 8;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (row0 + r < rows && c < kDim) v = *reinterpret_cast<const uint4*>(src + (row0 + r) * row_stride + c);
      *reinterpret_cast<uint4*>(tile + r * kPitch + c) = v;
    }
  } else {
    for (int idx = threadIdx.x; idx < kRows * kCols; idx += blockDim.x) {
      const int r = idx / kCols, c = idx % kCols;
      tile[r * kPitch + c] = row0 + r < rows && c < kDim ? src[(row0 + r) * row_stride + c] : uint16_t{0};
    }
  }
}

template <class T, int D, bool kVec>
__global__ void __launch_bounds__(kMmaWarps * 32) flash_mma_kernel(FlashParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  static_assert(D % 8 == 0, "P·V uses 8-column tiles");
  constexpr int kDk = (D + 15) / 16 * 16;  // Q·K^T reduction length, zero padded
  constexpr int kPitch = kDk + 8;          // shared row pitch (elements): conflict-free fragment loads
  constexpr int kSteps = kDk / 16;         // k-steps of Q·K^T
  constexpr int kOutTiles = D / 8;         // 8-column tiles of the output
  constexpr int kKeyTiles = kMmaKeys / 8;  // 8-key tiles of the scores
  __shared__ __align__(16) uint16_t ks[kMmaRows * kPitch];  // Q tile, then K tiles
  __shared__ __align__(16) uint16_t vs[kMmaKeys * kPitch];  // V tiles
  static_assert(kMmaRows == kMmaKeys, "ks holds the Q tile too");

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t tile = blockIdx.x % p.q_tiles, bh = blockIdx.x / p.q_tiles;
  const int64_t h = bh % p.heads, b = bh / p.heads;
  const int64_t q0 = tile * kMmaRows;
  const int64_t kv_len = p.kv_lens ? p.kv_lens[b] : p.kv_len;  // this sample's keys
  auto slice = [&](const Operand& o) {
    return static_cast<const uint16_t*>(o.base) + b * o.batch_stride + h * D;
  };

  // Q fragments stay in registers for the whole key loop.
  load_tile16<kMmaRows, kDk, kPitch, D, kVec>(ks, slice(p.q), p.q.row_stride, q0, p.q_len);
  __syncthreads();
  uint32_t qf[kSteps][4];
  {
    const uint16_t* r0 = ks + (warp * 16 + g) * kPitch + 2 * t;
    const uint16_t* r8 = r0 + 8 * kPitch;
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      qf[s][0] = lds32(r0 + s * 16);
      qf[s][1] = lds32(r8 + s * 16);
      qf[s][2] = lds32(r0 + s * 16 + 8);
      qf[s][3] = lds32(r8 + s * 16 + 8);
    }
  }

  float o[kOutTiles][4];
#pragma unroll
  for (int n = 0; n < kOutTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};  // rows g and g + 8 of this warp
  float row_sum[2] = {0.0f, 0.0f};            // this thread's share; summed over the group at the end

  for (int64_t k0 = 0; k0 < kv_len; k0 += kMmaKeys) {
    __syncthreads();  // Q fragments / previous tile's fragments are read before the tiles are overwritten
    load_tile16<kMmaKeys, kDk, kPitch, D, kVec>(ks, slice(p.k), p.k.row_stride, k0, kv_len);
    load_tile16<kMmaKeys, D, kPitch, D, kVec>(vs, slice(p.v), p.v.row_stride, k0, kv_len);
    __syncthreads();

    // Scores S = Q K^T for 16 rows x 64 keys per warp.
    float s[kKeyTiles][4];
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
      const uint16_t* kr = ks + (j * 8 + g) * kPitch + 2 * t;  // B[k][n] = K[key n][dim k]
#pragma unroll
      for (int st = 0; st < kSteps; ++st) mma_16816<T>(s[j], qf[st], lds32(kr + st * 16), lds32(kr + st * 16 + 8));
    }

    // Scale, mask keys past the end, online softmax per row (g: c0/c1, g + 8: c2/c3).
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t key = k0 + j * 8 + 2 * t + (c & 1);
        s[j][c] = key < kv_len ? s[j][c] * p.scale : -INFINITY;
        tile_max[c >> 1] = fmaxf(tile_max[c >> 1], s[j][c]);
      }
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float new_max = fmaxf(row_max[r], tile_max[r]);  // finite: every tile has a valid key
      corr[r] = math::softmax_rescale(row_max[r], new_max);
      row_max[r] = new_max;
      row_sum[r] *= corr[r];
    }
#pragma unroll
    for (int j = 0; j < kKeyTiles; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        // Masked keys contribute exactly 0 (fast_exp(-inf) is tiny, not 0).
        const float pr = s[j][c] == -INFINITY ? 0.0f : math::softmax_weight(s[j][c], row_max[c >> 1]);
        s[j][c] = pr;
        row_sum[c >> 1] += pr;
      }
#pragma unroll
    for (int n = 0; n < kOutTiles; ++n) {
      o[n][0] *= corr[0];
      o[n][1] *= corr[0];
      o[n][2] *= corr[1];
      o[n][3] *= corr[1];
    }

    // O += P V: k-step kk covers keys 16kk .. 16kk + 15 = score tiles 2kk, 2kk + 1.
#pragma unroll
    for (int kk = 0; kk < kMmaKeys / 16; ++kk) {
      const uint32_t a[4] = {MmaType<T>::pack(s[2 * kk][0], s[2 * kk][1]), MmaType<T>::pack(s[2 * kk][2], s[2 * kk][3]),
                             MmaType<T>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             MmaType<T>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      const uint16_t* v0 = vs + (kk * 16 + 2 * t) * kPitch + g;  // B[k][n] = V[key k][col n]
#pragma unroll
      for (int n = 0; n < kOutTiles; ++n) {
        const uint16_t* vc = v0 + n * 8;
        const uint32_t b0 = pack16(vc[0], vc[kPitch]);
        const uint32_t b1 = pack16(vc[8 * kPitch], vc[9 * kPitch]);
        mma_16816<T>(o[n], a, b0, b1);
      }
    }
  }

  // Normalise and store rows g and g + 8 of this warp's 16.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
  }
  T* out = static_cast<T*>(p.out) + b * p.out_batch_stride + h * D;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = q0 + warp * 16 + g + 8 * r;
    if (row >= p.q_len) continue;
    const float inv = 1.0f / row_sum[r];
    T* dst = out + row * p.out_row_stride + 2 * t;
#pragma unroll
    for (int n = 0; n < kOutTiles; ++n) {
      dst[n * 8] = from_float<T>(o[n][2 * r] * inv);
      dst[n * 8 + 1] = from_float<T>(o[n][2 * r + 1] * inv);
    }
    if (p.lse && t == 0) p.lse[(b * p.heads + h) * p.q_len + row] = math::softmax_lse(row_max[r], row_sum[r]);
  }
#else
  __trap();  // launched only on compute capability >= 8.0 (attention_path.h)
#endif
}

#pragma nv_diagnostic pop

// ---------------------------------------------------------------- float32

constexpr int kF32Rows = 32;  // queries per block
constexpr int kF32Keys = 32;  // keys per tile
constexpr int kF32Threads = 128;
constexpr int kF32Lanes = kF32Threads / kF32Rows;  // threads per query row
constexpr int kF32KeysPerThread = kF32Keys / kF32Lanes;
static_assert(kF32Rows == kF32Keys, "one tile loader for the Q and K/V tiles");

template <int D>
__global__ void __launch_bounds__(kF32Threads) flash_f32_kernel(FlashParams p) {
  static_assert(D % kF32Lanes == 0, "each row's threads split its columns evenly");
  constexpr int kPitch = D + 1;  // odd pitch: the 8 rows a warp touches fall in distinct banks
  constexpr int kCols = D / kF32Lanes;
  __shared__ float qs[kF32Rows * kPitch];
  __shared__ float kvs[kF32Keys * kPitch];  // K tile, then V tile
  __shared__ float ps[kF32Rows * (kF32Keys + 1)];

  const int row = threadIdx.x / kF32Lanes, lane4 = threadIdx.x % kF32Lanes;
  const int64_t tile = blockIdx.x % p.q_tiles, bh = blockIdx.x / p.q_tiles;
  const int64_t h = bh % p.heads, b = bh / p.heads;
  const int64_t q0 = tile * kF32Rows;
  const int64_t kv_len = p.kv_lens ? p.kv_lens[b] : p.kv_len;  // this sample's keys
  auto slice = [&](const Operand& o) { return static_cast<const float*>(o.base) + b * o.batch_stride + h * D; };
  // rows [row0, row0 + 32) of a slice into dst, zero past `rows`.
  auto load = [&](float* dst, const float* src, int64_t row_stride, int64_t row0, int64_t rows) {
    for (int idx = threadIdx.x; idx < kF32Keys * D; idx += kF32Threads) {
      const int r = idx / D, c = idx % D;
      dst[r * kPitch + c] = row0 + r < rows ? src[(row0 + r) * row_stride + c] : 0.0f;
    }
  };

  load(qs, slice(p.q), p.q.row_stride, q0, p.q_len);
  float o[kCols];
#pragma unroll
  for (int i = 0; i < kCols; ++i) o[i] = 0.0f;
  float row_max = -INFINITY, row_sum = 0.0f;  // row_sum: this thread's share
  const float* qrow = qs + row * kPitch;

  for (int64_t k0 = 0; k0 < kv_len; k0 += kF32Keys) {
    __syncthreads();  // previous P·V done with kvs and ps (first pass: qs loaded)
    load(kvs, slice(p.k), p.k.row_stride, k0, kv_len);
    __syncthreads();
    // Keys lane4 + 4j of this tile.
    float s[kF32KeysPerThread];
#pragma unroll
    for (int j = 0; j < kF32KeysPerThread; ++j) s[j] = 0.0f;
    for (int e = 0; e < D; ++e) {
      const float qv = qrow[e];
#pragma unroll
      for (int j = 0; j < kF32KeysPerThread; ++j) s[j] += qv * kvs[(lane4 + kF32Lanes * j) * kPitch + e];
    }
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kF32KeysPerThread; ++j) {
      const bool valid = k0 + lane4 + kF32Lanes * j < kv_len;
      s[j] = valid ? s[j] * p.scale : -INFINITY;
      tile_max = fmaxf(tile_max, s[j]);
    }
    // The row's four threads are adjacent lanes of one warp.
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float new_max = fmaxf(row_max, tile_max);  // finite: every tile has a valid key
    const float corr = math::softmax_rescale(row_max, new_max);
    row_max = new_max;
    row_sum *= corr;
#pragma unroll
    for (int j = 0; j < kF32KeysPerThread; ++j) {
      const float pr = s[j] == -INFINITY ? 0.0f : math::softmax_weight(s[j], row_max);
      row_sum += pr;
      ps[row * (kF32Keys + 1) + lane4 + kF32Lanes * j] = pr;
    }
#pragma unroll
    for (int i = 0; i < kCols; ++i) o[i] *= corr;
    __syncthreads();  // ps written; everyone is done reading K
    load(kvs, slice(p.v), p.v.row_stride, k0, kv_len);
    __syncthreads();
    const float* prow = ps + row * (kF32Keys + 1);
    for (int j = 0; j < kF32Keys; ++j) {
      const float pr = prow[j];
      const float* vrow = kvs + j * kPitch + lane4;
#pragma unroll
      for (int i = 0; i < kCols; ++i) o[i] += pr * vrow[kF32Lanes * i];
    }
  }

  row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
  row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);
  const int64_t q = q0 + row;
  if (q >= p.q_len) return;
  const float inv = 1.0f / row_sum;
  float* dst = static_cast<float*>(p.out) + b * p.out_batch_stride + q * p.out_row_stride + h * D + lane4;
#pragma unroll
  for (int i = 0; i < kCols; ++i) dst[kF32Lanes * i] = o[i] * inv;
  if (p.lse && lane4 == 0) p.lse[(b * p.heads + h) * p.q_len + q] = math::softmax_lse(row_max, row_sum);
}

// ---------------------------------------------------------------- launch

bool aligned16(const void* ptr, int64_t row_stride, int64_t batch_stride) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && row_stride % 8 == 0 && batch_stride % 8 == 0;
}

template <int D>
void launch_flash(const AttentionArgs& a, FlashParams& p) {
  if (a.dtype == DType::kF32) {
    p.q_tiles = (a.q_len + kF32Rows - 1) / kF32Rows;
    const unsigned blocks = static_cast<unsigned>(checked_int(a.batch * a.heads * p.q_tiles, "attention blocks"));
    flash_f32_kernel<D><<<blocks, kF32Threads, 0, stream()>>>(p);
    DITGEN_CUDA_CHECK_LAUNCH();
    return;
  }
  p.q_tiles = (a.q_len + kMmaRows - 1) / kMmaRows;
  const unsigned blocks = static_cast<unsigned>(checked_int(a.batch * a.heads * p.q_tiles, "attention blocks"));
  // 16-byte tile loads when every Q/K/V row start is 16-byte aligned (D is a
  // multiple of 8, so the head offset keeps the alignment).
  const bool vec = aligned16(a.q, a.q_row_stride, a.q_batch_stride) &&
                   aligned16(a.k, a.k_row_stride, a.k_batch_stride) && aligned16(a.v, a.v_row_stride, a.v_batch_stride);
  dispatch_dtype(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, float>) {
      if (vec)
        flash_mma_kernel<T, D, true><<<blocks, kMmaWarps * 32, 0, stream()>>>(p);
      else
        flash_mma_kernel<T, D, false><<<blocks, kMmaWarps * 32, 0, stream()>>>(p);
      DITGEN_CUDA_CHECK_LAUNCH();
    }
  });
}

// Compiled like the flash kernels, so the driver picks the same image for it.
__global__ void flash_image_probe() {}

}  // namespace

bool flash_image_available() {
  // The mma kernel body exists only in images built for sm_80 or newer; with
  // an architecture list below 80 (e.g. DITGEN_CUDA_ARCHITECTURES=75) an
  // Ampere+ GPU would JIT compute_75 PTX, whose body is a trap. ptxVersion
  // is the virtual architecture of the image chosen for this device.
  cudaFuncAttributes attr{};
  DITGEN_CUDA_CHECK(cudaFuncGetAttributes(&attr, flash_image_probe));
  return attr.ptxVersion >= 80;
}

void attention_flash(const AttentionArgs& a) {
  check_attention_args(a, "attention_flash");
  if (a.bias)
    throw std::invalid_argument("attention_flash: no score bias (AttentionArgs::bias) support; use the math path");
  if (!flash_head_dim_supported(static_cast<int>(std::min<int64_t>(a.head_dim, 1 << 20))))
    throw std::invalid_argument("attention_flash: head_dim " + std::to_string(a.head_dim) +
                                " has no flash kernel (64, 72, 128); use the math path");
  if (a.batch == 0 || a.q_len == 0) return;
  FlashParams p{};
  p.q = {a.q, a.q_row_stride, a.q_batch_stride};
  p.k = {a.k, a.k_row_stride, a.k_batch_stride};
  p.v = {a.v, a.v_row_stride, a.v_batch_stride};
  p.out = a.out;
  p.out_row_stride = a.out_row_stride;
  p.out_batch_stride = a.out_batch_stride;
  p.lse = a.lse;
  p.heads = a.heads;
  p.q_len = a.q_len;
  p.kv_len = a.kv_len;
  p.scale = a.scale;
  // Per-sample key counts live in host memory: the kernels read a device
  // copy (a blocking copy, only for calls that pass them; the buffer's
  // release is stream-ordered like every DeviceBuffer's).
  DeviceBuffer kv_lens;
  if (a.kv_lens) {
    kv_lens = DeviceBuffer(static_cast<size_t>(a.batch) * sizeof(int32_t));
    copy_to_device(kv_lens.get(), a.kv_lens, kv_lens.bytes());
    p.kv_lens = kv_lens.as<const int32_t>();
  }
  switch (a.head_dim) {
    case 64: launch_flash<64>(a, p); break;
    case 72: launch_flash<72>(a, p); break;
    case 128: launch_flash<128>(a, p); break;
  }
}

}  // namespace ditgen::cuda
