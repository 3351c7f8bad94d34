// Step caches (docs/design.md §8; docs/step-caches.md): once per step, decide per
// unit whether a span of the transformer's blocks can be replaced by the
// residual that span added at the unit's last computed step.
//
//   first_block  diffusers 0.42.1's FirstBlockCache (hooks/first_block_cache.py,
//                after ParaAttention): block 0 always runs; the signal is
//                its output residual r = out_0 - in_0, and
//                    compute = no step computed yet  or  mean|r - r_prev| / mean|r_prev| > threshold
//                (r_prev: r at the last computed step; the ratio of sums).
//                The span is blocks 1..N-1.
//   teacache     Liu et al. 2024 (ali-vilab/TeaCache, commit 7c10efc; the
//                rule of TeaCache4Wan2.1/teacache_generate.py and
//                eval/teacache/experiments/latte.py): the signal m is the
//                family's modulated input (models give it: the first
//                block's modulated attention input, or Wan's time
//                embedding); acc += poly(mean|m - m_prev| / mean|m_prev|)
//                (coefficients highest power first); the first and the last
//                step compute; otherwise skip while acc < threshold, and a
//                computed step sets acc = 0. m_prev is m of the previous
//                step, skipped or not. The span is every block.
// A computed step keeps the span's residual (its output minus its input); a
// skipped step adds the kept residual to the span's input.
//
// A unit is an output, its CFG halves deciding together (one batched
// diffusers forward: DiT, PixArt, Latte), or an output's half, each with its
// own state (WanPipeline's separate "cond" and "uncond" cache contexts). So
// an output's result does not depend on the rest of its batch; the forward
// runs the span unless every unit skips, and then writes the skipping units'
// rows from their kept residual. This layer holds the state, the rule and the
// per-row bookkeeping on host float32 copies, and knows no model: the
// models' Stage (models/stage.cpp) runs the blocks and sums the metric over
// its sp group; `combine_halves` (set by the pipeline) sums it over the cp
// pair, so every rank decides alike.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "pab/broadcast.h"
#include "tensor/tensor.h"
#include "vocab/cache_kind.h"

namespace ditgen::pab {

struct StepCacheSettings {
  CacheKind kind = CacheKind::kFirstBlock;
  double threshold = 0.05;           // > 0
  std::vector<double> coefficients;  // teacache: the rescaling polynomial, highest power first
};

// One unit's decision at one step (--cache-stats, parity tests).
struct StepDecision {
  int step = 0;
  double timestep = 0;
  int64_t output = 0;     // index inside its batch
  int half = -1;          // -1: the output's CFG halves together; 0 cond, 1 uncond
  double metric = -1;     // mean|s - s_prev| / mean|s_prev|; -1 when there is no previous signal
  bool computed = true;
  double accumulated = 0; // teacache: acc after this step (0 on a computed step)
};

struct StepCacheStats {
  int64_t steps_computed = 0;     // forwards that ran the span
  int64_t steps_skipped = 0;      // forwards that skipped it for every unit
  int64_t comm_bytes_skipped = 0; // what the skipped forwards' span would have sent (this rank)
  std::vector<StepDecision> decisions;
};

// TeaCache's rescale: the polynomial at x, coefficients highest power first (numpy.poly1d).
double polynomial(const std::vector<double>& coefficients, double x);

class StepCache {
 public:
  explicit StepCache(StepCacheSettings settings);

  // A new batch of `outputs` outputs over `steps` steps; this rank's model
  // batch holds the CFG halves `halves` (false: cond, true: uncond), each
  // `outputs` samples, in that order (sample s is output s % outputs of half
  // halves[s / outputs]). `halves_apart`: each half decides alone. Drops what
  // the last batch kept.
  void begin_batch(int64_t outputs, const std::vector<bool>& halves, bool halves_apart, int steps);
  void begin_step(int step, double timestep);

  CacheKind kind() const { return settings_.kind; }
  // This rank's decision units, and the unit each of its samples is in.
  int64_t units() const { return halves_apart_ ? samples_ : outputs_; }
  int64_t samples() const { return samples_; }
  int64_t unit_of(int64_t sample) const { return halves_apart_ ? sample : sample % outputs_; }
  bool has_previous() const { return signal_.defined(); }

  // Per unit: sum|s - s_prev| and sum|s_prev| over this rank's rows of the
  // signal `s` (host float32; each sample's values contiguous). Needs a
  // previous signal.
  std::vector<float> local_sums(const Tensor& signal) const;
  // Sums `sums` over the ranks holding other CFG halves of the same units;
  // unset: one rank holds every half, or the halves decide apart.
  void set_combine_halves(std::function<void(float* sums, int64_t count)> f) { combine_halves_ = std::move(f); }
  void combine_halves(std::vector<float>& sums) const;

  // Decides every unit from its combined sums (empty: no previous signal),
  // records the decisions, counts the forward, and keeps `signal` as the
  // rule says (first_block: the computing units' rows; teacache: every row).
  std::vector<bool> decide(const std::vector<float>& sums, const Tensor& signal);

  // The span's input `in` and output `out` are (R, P, D) host float32: R
  // rows (each sample's together), P tokens, here tokens [row0, row0 + P)
  // of the `tokens` the kept residual covers (PipeFusion's patches; 0: P,
  // all of them). After the span ran (`bytes`: what it sent): keeps out -
  // in as the computing units' residual and writes the skipping units' rows
  // of `out` as in + their kept residual.
  void span_computed(Tensor& out, const Tensor& in, const std::vector<bool>& compute, int64_t bytes,
                     int64_t row0 = 0, int64_t tokens = 0);
  // Every unit skipped the span, layers [first, last): the kept residual of
  // those tokens, (R, P, D) host float32, to add to the span's input. PAB
  // (set_pab) does not count the step for those layers.
  Tensor span_skipped(int first, int last, int64_t row0 = 0, int64_t P = 0, int64_t tokens = 0);
  // The forward is over: what its span sent, against a whole batch's span
  // (the last step that ran it over every sample), counts as skipped.
  void finish_step();
  void set_pab(BroadcastCache* pab) { pab_ = pab; }
  bool pab_active() const { return pab_ != nullptr; }

  const StepCacheSettings& settings() const { return settings_; }
  const StepCacheStats& stats() const { return stats_; }

 private:
  bool forced_step() const;  // teacache: the first and the last step compute

  StepCacheSettings settings_;
  int64_t outputs_ = 1, samples_ = 1;
  std::vector<bool> halves_{false};
  bool halves_apart_ = false;
  int steps_ = 0, step_ = 0;
  double timestep_ = 0;
  Tensor signal_;                    // the kept signal (first residual / modulated input), host float32
  Tensor residual_;                  // the span's kept residual, host float32
  std::vector<double> accumulated_;  // teacache: per unit
  int64_t whole_span_bytes_ = -1;  // what the span sent over every sample, at the last such step
  int64_t step_bytes_ = 0;         // what the span sent in this forward
  enum class Computing { kEvery, kSome, kNone };
  Computing computing_ = Computing::kEvery;  // this forward's units
  std::function<void(float*, int64_t)> combine_halves_;
  BroadcastCache* pab_ = nullptr;
  StepCacheStats stats_;
};

}  // namespace ditgen::pab
