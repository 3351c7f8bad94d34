// Attention on the CPU: flash-attention style tiling with an online softmax,
// so memory is O(tile) per thread instead of O(n^2). Work items are
// (batch, head, query tile); each computes S = Q K^T tile by tile with sgemm
// straight from the strided projection outputs (no transposes or gathers),
// rescales its running output when the row maximum grows, and accumulates
// P V with another sgemm. Inside the parallel region the OpenMP OpenBLAS runs
// single-threaded, so tiles never oversubscribe the cores.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernels/math/activations.h"
#include "ops/ops.h"

namespace ditgen::ops {

namespace {
constexpr int64_t kQueryTile = 64;
constexpr int64_t kKeyTile = 256;
}  // namespace

void attention(const AttentionArgs& a) {
  if (!a.q || !a.k || !a.v || !a.out || a.head_dim <= 0 || a.q_len < 0 || a.kv_len <= 0)
    throw std::invalid_argument("attention: bad arguments");
  const int64_t d = a.head_dim;
  const int64_t q_tiles = (a.q_len + kQueryTile - 1) / kQueryTile;
  const int64_t tasks = a.batch * a.heads * q_tiles;

#pragma omp parallel
  {
    std::vector<float> scores(kQueryTile * kKeyTile);  // (Bq, Bk) logits, then probabilities
    std::vector<float> acc(kQueryTile * d);           // (Bq, D) unnormalised output
    std::vector<float> row_max(kQueryTile), row_sum(kQueryTile);

#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t qt = task % q_tiles;
      const int64_t bh = task / q_tiles;
      const int64_t h = bh % a.heads, b = bh / a.heads;
      const int64_t q0 = qt * kQueryTile, bq = std::min(kQueryTile, a.q_len - q0);
      const float* q = a.q + b * a.q_batch_stride + q0 * a.q_row_stride + h * d;
      const float* kb = a.k + b * a.k_batch_stride + h * d;
      const float* vb = a.v + b * a.v_batch_stride + h * d;

      std::fill(row_max.begin(), row_max.begin() + bq, -std::numeric_limits<float>::infinity());
      std::fill(row_sum.begin(), row_sum.begin() + bq, 0.0f);
      std::fill(acc.begin(), acc.begin() + bq * d, 0.0f);

      for (int64_t k0 = 0; k0 < a.kv_len; k0 += kKeyTile) {
        const int64_t bk = std::min(kKeyTile, a.kv_len - k0);
        // S = scale * Q K^T  (bq, bk), leading dimension bk.
        gemm(false, true, bq, bk, d, a.scale, q, a.q_row_stride, kb + k0 * a.k_row_stride, a.k_row_stride, 0.0f,
             scores.data(), bk);
        for (int64_t i = 0; i < bq; ++i) {
          float* s = scores.data() + i * bk;
          float m = row_max[i];
          for (int64_t j = 0; j < bk; ++j) m = std::max(m, s[j]);
          const float correction = math::fast_exp(row_max[i] - m);  // 0 on the first tile (-inf)
          float sum = 0;
#pragma omp simd reduction(+ : sum)
          for (int64_t j = 0; j < bk; ++j) {
            s[j] = math::fast_exp(s[j] - m);
            sum += s[j];
          }
          row_sum[i] = row_sum[i] * correction + sum;
          row_max[i] = m;
          if (correction != 1.0f) {
            float* o = acc.data() + i * d;
#pragma omp simd
            for (int64_t j = 0; j < d; ++j) o[j] *= correction;
          }
        }
        // acc += P V  (bq, d)
        gemm(false, false, bq, d, bk, 1.0f, scores.data(), bk, vb + k0 * a.v_row_stride, a.v_row_stride, 1.0f,
             acc.data(), d);
      }

      float* out = a.out + b * a.out_batch_stride + q0 * a.out_row_stride + h * d;
      for (int64_t i = 0; i < bq; ++i) {
        const float inv = 1.0f / row_sum[i];
        const float* o = acc.data() + i * d;
        float* dst = out + i * a.out_row_stride;
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) dst[j] = o[j] * inv;
      }
    }
  }
}

}  // namespace ditgen::ops
