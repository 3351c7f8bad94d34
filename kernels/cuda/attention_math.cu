// Math attention on the GPU: the path for compute capability < 8.0, for
// head sizes the flash kernel is not built for, and for calls with a score
// bias (kernels/cuda/attention_path.h).
//
// Per batch item and chunk of queries, for all heads at once:
//   S[h] = scale * Q[h] K[h]^T     cuBLAS strided-batched GEMM, float32 scores
//                                  (bf16/f16 inputs, float32 accumulation)
//   P[h] = softmax(S[h] + bias[h]) softmax_rows_kernel, by rows: adds the
//                                  optional float32 score bias (T5's
//                                  relative position bias) as it reads S;
//                                  max, sum of exp, normalise; writes each
//                                  row's log-sum-exp (of the biased scores)
//                                  when asked; P in the storage type (in
//                                  place for float32) because cuBLAS wants A
//                                  and B of one type
//   out[h] = P[h] V[h]             strided-batched GEMM into the strided output
// Heads are the GEMM batch: their matrices are interleaved in the token rows
// (batch stride head_dim, leading dimension the row stride), so Q/K/V/out are
// read and written in place without transposes. The query chunk is sized so
// the score buffers stay under kScoreBytes whatever the sequence length.
// The softmax uses kernels/math/softmax.h, as the CPU and flash kernels do.
// Per-sample key counts (kv_lens) shrink the key dimension of that sample's
// GEMMs and softmax to its first kv_lens[b] keys.
#include "kernels/cuda/attention_checks.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/gemm_ex.h"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/math/softmax.h"

namespace ditgen::cuda {

namespace {

constexpr int64_t kScoreBytes = int64_t{256} << 20;
constexpr int kSoftmaxThreads = 128;

// Where the score bias of a chunk's rows lies: row i of head h at
// bias + h * head_stride + i * row_stride, bias pre-offset to the chunk's
// first query q0 (AttentionArgs::bias); bias null: none.
struct ScoreBias {
  const float* bias;
  int64_t head_stride, row_stride;
};

// One block per score row: row r = h * rows + i of scores [heads, rows, kv]
// (float32), plus the bias row of (h, i) when there is one; probabilities to
// probs (same layout, storage type; may alias scores for float32). lse (if
// any) of row (b, h, q0 + i) at lse[(b * heads + h) * q_len + q0 + i], passed
// pre-offset to (b, q0).
template <class T>
__global__ void softmax_rows_kernel(const float* scores, T* probs, int64_t rows, int64_t kv_len, ScoreBias sb,
                                    float* lse, int64_t q_len) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const int64_t h = r / rows, i = r - h * rows;
  const float* s = scores + r * kv_len;
  const float* b = sb.bias ? sb.bias + h * sb.head_stride + i * sb.row_stride : nullptr;
  auto score = [&](int64_t j) { return b ? s[j] + b[j] : s[j]; };
  T* p = probs + r * kv_len;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < kv_len; j += blockDim.x) mx = fmaxf(mx, score(j));
  mx = block_max(mx, scratch);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < kv_len; j += blockDim.x) sum += math::softmax_weight(score(j), mx);
  sum = block_sum(sum, scratch);
  const float inv = 1.0f / sum;
  // Each element is read before it is overwritten by the same thread, so
  // probs may alias scores.
  for (int64_t j = threadIdx.x; j < kv_len; j += blockDim.x)
    p[j] = from_float<T>(math::softmax_weight(score(j), mx) * inv);
  if (lse && threadIdx.x == 0) lse[h * q_len + i] = math::softmax_lse(mx, sum);
}

}  // namespace

void attention_math(const AttentionArgs& a) {
  check_attention_args(a, "attention_math");
  if (a.batch == 0 || a.q_len == 0) return;
  const int64_t H = a.heads, D = a.head_dim, kv_max = a.kv_len;
  const int64_t esize = static_cast<int64_t>(dtype_size(a.dtype));
  const bool f32 = a.dtype == DType::kF32;
  // Bytes per query row of all heads: float32 scores, plus the separate
  // probabilities unless they overwrite the scores (float32).
  const int64_t row_bytes = H * kv_max * (4 + (f32 ? 0 : esize));
  const int64_t chunk = std::clamp<int64_t>(kScoreBytes / row_bytes, 1, a.q_len);
  DeviceBuffer scores(static_cast<size_t>(H * chunk * kv_max) * 4);  // [heads, chunk, kv] float32
  DeviceBuffer probs_buf(f32 ? 0 : static_cast<size_t>(H * chunk * kv_max * esize));  // [heads, chunk, kv] storage type
  void* probs = f32 ? scores.get() : probs_buf.get();
  auto at = [&](const void* base, int64_t off) { return static_cast<const char*>(base) + off * esize; };

  for (int64_t b = 0; b < a.batch; ++b) {
    // This sample's keys: its first kv_lens[b] (the score rows shrink to
    // them, so the softmax and lse see no others).
    const int64_t kv = a.kv_lens ? a.kv_lens[b] : kv_max;
    for (int64_t q0 = 0; q0 < a.q_len; q0 += chunk) {
      const int64_t rows = std::min(chunk, a.q_len - q0);
      const void* q = at(a.q, b * a.q_batch_stride + q0 * a.q_row_stride);
      const void* k = at(a.k, b * a.k_batch_stride);
      const void* v = at(a.v, b * a.v_batch_stride);
      void* out = const_cast<char*>(at(a.out, b * a.out_batch_stride + q0 * a.out_row_stride));
      // S[h] (rows x kv) = scale * Q[h] (rows x D) · K[h]^T (D x kv)
      gemm_strided_batched_ex(false, true, rows, kv, D, a.scale, q, a.q_row_stride, D, k, a.k_row_stride, D, 0.0f,
                              scores.get(), kv, rows * kv, H, a.dtype, DType::kF32);
      const unsigned blocks = static_cast<unsigned>(checked_int(H * rows, "attention_math softmax rows"));
      float* lse = a.lse ? a.lse + b * H * a.q_len + q0 : nullptr;
      // The bias is the same for every sample; this chunk's rows start at query q0.
      const ScoreBias sb{a.bias ? a.bias + q0 * a.bias_row_stride : nullptr, a.bias_head_stride, a.bias_row_stride};
      dispatch_dtype(a.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        softmax_rows_kernel<T><<<blocks, kSoftmaxThreads, 0, stream()>>>(scores.as<float>(), static_cast<T*>(probs),
                                                                        rows, kv, sb, lse, a.q_len);
        DITGEN_CUDA_CHECK_LAUNCH();
      });
      // out[h] (rows x D) = P[h] (rows x kv) · V[h] (kv x D)
      gemm_strided_batched_ex(false, false, rows, D, kv, 1.0f, probs, kv, rows * kv, v, a.v_row_stride, D, 0.0f, out,
                              a.out_row_stride, D, H, a.dtype, a.dtype);
    }
  }
}

}  // namespace ditgen::cuda
