#include "models/stage.h"

#include <cmath>
#include <stdexcept>

#include "ops/ops.h"
#include "parallel/shard.h"
#include "util/error.h"

namespace ditgen::models {

Stage::Stage(const ShardGroups& shard, const Placement& place, int64_t layers)
    : shard_(shard),
      place_(place),
      seq_attn_(shard.sp, shard.sequence_mode(), place.dtype, shard.sp_split),
      pipe_(shard.pp, layers, shard.pipeline) {}

nn::AttentionCore Stage::core(int64_t layer, parallel::Range patch, int64_t n, int64_t head_dim,
                              parallel::StaleKeyValues* stale_kv,
                              const parallel::SequenceParallelAttention* seq) const {
  return nn::sequence_core(pipe_, layer, patch, n, head_dim, stale_kv, seq ? *seq : seq_attn_);
}

namespace {

// A host float32 copy (never an alias of `t`).
Tensor host_copy(const Tensor& t) {
  return t.is_cpu() && t.dtype() == DType::kF32 ? t.clone() : t.to(Device::kCPU, DType::kF32);
}

}  // namespace

Tensor sample_rows(const Tensor& t, const std::vector<int64_t>& samples, int64_t rows_per_sample) {
  if (samples.empty()) return t;
  Shape shape = t.shape();
  shape[0] = static_cast<int64_t>(samples.size()) * rows_per_sample;
  Tensor out = Tensor::empty(shape, t.device(), t.dtype());
  for (size_t i = 0; i < samples.size(); ++i) {
    const int64_t s = samples[i], at = static_cast<int64_t>(i);
    out.slice0(at * rows_per_sample, (at + 1) * rows_per_sample)
        .copy_from(t.slice0(s * rows_per_sample, (s + 1) * rows_per_sample));
  }
  return out;
}

std::vector<int32_t> sample_values(const std::vector<int32_t>& v, const std::vector<int64_t>& samples) {
  if (samples.empty() || v.empty()) return v;
  std::vector<int32_t> out;
  for (int64_t s : samples) out.push_back(v.at(static_cast<size_t>(s)));
  return out;
}

void Stage::run_cached(Tensor& hidden, parallel::Range patch, const Pass& pass, pab::StepCache& cache) const {
  const parallel::Range all = pipe_.layers();
  if (pipe_.stages() > 1) throw ConfigError("not supported yet: a step cache together with PipeFusion (parallel.pp > 1)");
  if (hidden.dim(0) % cache.samples() != 0)
    throw std::logic_error("Stage: hidden rows " + std::to_string(hidden.dim(0)) + " are not " +
                           std::to_string(cache.samples()) + " samples' worth");
  // The span the cache may skip, its input (host float32) and the signal it decides on.
  parallel::Range span = all;
  Tensor in;
  Tensor signal;
  bool per_token = true;  // the signal's rows are this rank's tokens (summed over sp), or whole on every rank
  if (cache.rule() == pab::StepCacheRule::kFirstBlock) {
    const Tensor in0 = host_copy(hidden);
    pass.layers(hidden, patch, {all.begin, all.begin + 1}, {});
    in = host_copy(hidden);
    signal = Tensor::empty(in.shape());  // the first block's output residual
    const float* a = in.data();
    const float* b = in0.data();
    float* d = signal.data();
    for (int64_t i = 0; i < signal.numel(); ++i) d[i] = a[i] - b[i];
    span.begin = all.begin + 1;
  } else {
    if (!pass.teacache_signal) throw std::logic_error("Stage: this family gives no TeaCache signal");
    in = host_copy(hidden);
    const Pass::Signal m = pass.teacache_signal(hidden);
    signal = host_copy(m.values);
    per_token = m.per_token;
  }

  // Per unit: sum|s - s_prev| and sum|s_prev| over this rank's rows, then
  // over the sp group's shards and (halves together) the cp pair's halves;
  // tp ranks hold the same rows: nothing to add.
  std::vector<float> sums;
  if (cache.has_previous()) {
    sums = cache.local_sums(signal);
    if (per_token && shard_.sp_size() > 1) shard_.sp->all_reduce_sum(sums.data(), static_cast<int64_t>(sums.size()));
    cache.combine_halves(sums);
  }
  const std::vector<bool> compute = cache.decide(sums, signal);
  bool any = false, every = true;
  for (bool c : compute) {
    any = any || c;
    every = every && c;
  }
  if (!any) {  // every unit skips: the span's kept residual, nothing sent
    const Tensor& residual = cache.span_skipped(static_cast<int>(span.begin), static_cast<int>(span.end));
    ops::add_(hidden, residual.to(hidden.device(), hidden.dtype()));
    return;
  }
  const int64_t sent_before = shard_.sent_bytes();
  if (every || cache.pab_active()) {
    // Every sample (PAB keeps whole-batch outputs: with PAB a mixed step runs them all too).
    pass.layers(hidden, patch, span, {});
  } else {  // only the computing units' samples: a smaller batch through the span
    Samples samples;
    for (int64_t s = 0; s < cache.samples(); ++s)
      if (compute[static_cast<size_t>(cache.unit_of(s))]) samples.push_back(s);
    const int64_t per_sample = hidden.dim(0) / cache.samples();
    Tensor some = sample_rows(hidden, samples, per_sample);
    pass.layers(some, patch, span, samples);
    for (size_t i = 0; i < samples.size(); ++i) {
      const int64_t s = samples[i], at = static_cast<int64_t>(i);
      hidden.slice0(s * per_sample, (s + 1) * per_sample).copy_from(some.slice0(at * per_sample, (at + 1) * per_sample));
    }
  }
  Tensor out = host_copy(hidden);
  cache.span_computed(out, in, compute, shard_.sent_bytes() - sent_before);
  if (!every) hidden.copy_from(out.to(hidden.device(), hidden.dtype()));  // the skipping units' rows
}

Tensor Stage::run(int64_t n, int64_t batch, int64_t width, int64_t out_width, parallel::StaleKeyValues* stale_kv,
                  const Pass& pass, pab::StepCache* cache) const {
  const bool frames_sharded = static_cast<bool>(pass.gather_frames);
  Tensor out;  // (batch, n, R), collected by the last stage
  for (const parallel::Range& patch : pipe_.patches(n, stale_kv)) {
    const parallel::Range rows = frames_sharded ? parallel::Range{0, n}
                                                : parallel::patch_rows(patch, shard_.sp_split, shard_.sp_size(),
                                                                       shard_.sp_rank());
    Tensor hidden;  // (B, P, D) the residual stream of these tokens
    if (pipe_.first_stage()) {
      hidden = pass.embed(rows);
    } else {
      hidden = place_.empty({batch, rows.size(), width});
      pipe_.receive(hidden);
    }
    if (cache) run_cached(hidden, patch, pass, *cache);
    else pass.layers(hidden, patch, pipe_.layers(), {});
    if (!pipe_.last_stage()) {
      pipe_.send(hidden);
      continue;
    }
    // Every rank needs the whole prediction: gather the frames (dsp) or the tokens.
    const Tensor out_rows = pass.head(hidden);
    if (frames_sharded) {
      out = pass.gather_frames(out_rows);
      break;  // the whole video as one patch (PipeFusion does not take dsp)
    }
    pipe_.collect_output(shard_.sp, shard_.sp_split, out_rows, patch, n, out);
  }
  pipe_.share_output(out, {batch, n, out_width}, place_.device, place_.storage());
  return out;
}

}  // namespace ditgen::models
