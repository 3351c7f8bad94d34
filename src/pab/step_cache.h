// First-Block Cache (DESIGN.md §8; docs/step-caches.md): after a forward's
// first block, decide per output whether the rest of the blocks can be
// replaced by the residual they added at that output's last computed step.
//
// The rule is diffusers 0.42.1's FBCHeadBlockHook (hooks/first_block_cache.py)
// with the first block's output residual r = out_0 - in_0:
//     compute = no step computed yet  or  mean|r - r_prev| / mean|r_prev| > threshold
//     (r_prev: r at the last computed step; mean over the output's elements,
//     so the ratio of sums)
// A computed step keeps r and the rest's residual (last block's output -
// first block's output); a skipped step adds that kept residual to the
// first block's output and leaves both kept tensors as they were.
//
// Decisions are per output (an output's CFG halves decide together, as one
// batched diffusers forward does), so an output's result does not depend on
// the rest of its batch; the forward runs the rest of the blocks unless every
// output of the batch skips. This layer holds the state and the rule and
// knows no model: the models' Stage (models/stage.cpp) does the tensor work
// and sums the metric over its sp group; `combine_halves` (set by the
// pipeline) sums it over the cp group, so every rank decides alike.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "tensor/tensor.h"

namespace ditgen::pab {

// One output's decision at one step (--cache-stats, parity tests).
struct StepDecision {
  int step = 0;
  double timestep = 0;
  int64_t output = 0;     // index inside its batch
  double metric = -1;     // mean|r - r_prev| / mean|r_prev|; -1 when no step was computed before
  bool computed = true;
};

struct StepCacheStats {
  int64_t steps_computed = 0;     // forwards that ran the rest of the blocks
  int64_t steps_skipped = 0;      // forwards that skipped them for every output
  int64_t comm_bytes_skipped = 0; // what the skipped forwards' rest would have sent (this rank)
  std::vector<StepDecision> decisions;
};

class FirstBlockCache {
 public:
  explicit FirstBlockCache(double threshold);

  // A new batch: `outputs` outputs, this rank's model batch `samples` rows
  // (sample s belongs to output s % outputs: CFG's [cond, uncond] halves).
  // Drops what the last batch kept.
  void begin_batch(int64_t outputs, int64_t samples);
  void begin_step(int step, double timestep);

  int64_t outputs() const { return outputs_; }
  int64_t samples() const { return samples_; }
  int64_t output_of(int64_t sample) const { return sample % outputs_; }
  bool has_previous() const { return has_previous_; }

  // Sums the metric's 2 * outputs values (per output: sum|r - r_prev|,
  // sum|r_prev|) over the ranks holding other CFG halves; unset: one rank
  // holds every half.
  void set_combine_halves(std::function<void(float* sums, int64_t count)> f) { combine_halves_ = std::move(f); }
  void combine_halves(std::vector<float>& sums) const;

  // Decides every output from its combined sums (empty: no step computed
  // yet, every output computes); records the decisions.
  std::vector<bool> decide(const std::vector<float>& sums);
  // The forward ran the rest for some outputs (`bytes`: what that sent) or skipped it for all.
  void rest_computed(int64_t bytes);
  void rest_skipped();

  // Kept tensors, in the layout of this rank's hidden rows (the Stage's):
  // the first block's residual (host float32) and the rest's residual (the
  // hidden's device and dtype). Written by the Stage on computed steps.
  Tensor first_residual;
  Tensor rest_residual;
  void mark_computed() { has_previous_ = true; }

  double threshold() const { return threshold_; }
  const StepCacheStats& stats() const { return stats_; }

 private:
  double threshold_;
  int64_t outputs_ = 1, samples_ = 1;
  bool has_previous_ = false;
  int step_ = 0;
  double timestep_ = 0;
  int64_t last_rest_bytes_ = 0;
  std::function<void(float*, int64_t)> combine_halves_;
  StepCacheStats stats_;
};

}  // namespace ditgen::pab
