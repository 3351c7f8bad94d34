// Softmax pieces shared by the CPU attention and the CUDA attention kernels
// (DITGEN_HD), so both run the same online-softmax recurrence and the same
// log-sum-exp merge:
//
//   online softmax over key chunks, per query row with running (max m, sum l)
//   and unnormalised output o:
//     m' = max(m, max_j s_j)            c = exp(m - m')  (0 on the first chunk: m = -inf)
//     p_j = exp(s_j - m')               l' = l * c + sum_j p_j      o' = o * c + sum_j p_j v_j
//   and at the end out = o / l, lse = m + log(l).
//
//   merging two results over disjoint key sets (ring attention), with
//   lse = log sum exp of each set's scores:
//     m = max(l1, l2)  w1 = exp(l1 - m)  w2 = exp(l2 - m)
//     out = (o1 w1 + o2 w2) / (w1 + w2)   lse = m + log(w1 + w2)
//
// The exponentials inside the online softmax are math::fast_exp (branch-free:
// the CPU loops vectorise with it); the merge uses expf/logf. Functions are
// branch-free where the CPU calls them inside `omp simd` loops.
#pragma once
#include <math.h>

#include "kernels/math/activations.h"
#include "kernels/math/hd.h"

namespace ditgen::math {

// Factor that rescales the running sum and output when the row max moves
// from old_max to new_max (old_max = -inf on the first chunk gives ~0:
// fast_exp clamps its argument, and the running values are 0 then anyway).
DITGEN_HD float softmax_rescale(float old_max, float new_max) { return fast_exp(old_max - new_max); }

// Unnormalised probability of a score under the running max.
DITGEN_HD float softmax_weight(float score, float row_max) { return fast_exp(score - row_max); }

// log-sum-exp of a row from its final running max and sum.
DITGEN_HD float softmax_lse(float row_max, float row_sum) { return row_max + logf(row_sum); }

// Weights of two partial results and the merged lse (see the header comment).
// Both lse = -inf (no key on either side) keeps the first result unchanged
// instead of producing NaN.
struct LseMerge {
  float w1, w2;  // normalised: w1 + w2 = 1
  float lse;
};
DITGEN_HD LseMerge lse_merge(float lse1, float lse2) {
  const float m = lse1 > lse2 ? lse1 : lse2;
  if (!(m > -INFINITY)) return LseMerge{1.0f, 0.0f, m};
  const float e1 = expf(lse1 - m), e2 = expf(lse2 - m);
  const float inv = 1.0f / (e1 + e2);
  return LseMerge{e1 * inv, e2 * inv, m + logf(e1 + e2)};
}

DITGEN_HD float lse_merge_value(const LseMerge& w, float o1, float o2) { return o1 * w.w1 + o2 * w.w2; }

}  // namespace ditgen::math
