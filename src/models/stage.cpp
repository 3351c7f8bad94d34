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

void Stage::run_cached(Tensor& hidden, parallel::Range patch, const Pass& pass, pab::FirstBlockCache& cache) const {
  const parallel::Range all = pipe_.layers();
  if (pipe_.stages() > 1) throw ConfigError("not supported yet: a step cache together with PipeFusion (parallel.pp > 1)");
  const int64_t samples = cache.samples();
  if (hidden.dim(0) % samples != 0)
    throw std::logic_error("Stage: hidden rows " + std::to_string(hidden.dim(0)) + " are not " +
                           std::to_string(samples) + " samples' worth");
  const int64_t per_sample = hidden.numel() / samples;  // a sample's rows are contiguous (Latte: its frames)

  const Tensor in0 = host_copy(hidden);
  pass.layers(hidden, patch, {all.begin, all.begin + 1});
  const Tensor out0 = host_copy(hidden);
  Tensor r = Tensor::empty(out0.shape());  // the first block's output residual
  {
    const float* a = out0.data();
    const float* b = in0.data();
    float* d = r.data();
    for (int64_t i = 0; i < r.numel(); ++i) d[i] = a[i] - b[i];
  }

  // Per output: sum|r - r_prev| and sum|r_prev| over this rank's rows, then
  // over the sp group's shards and the cp group's halves (tp ranks hold the
  // same rows: nothing to add).
  std::vector<float> sums;
  if (cache.has_previous()) {
    std::vector<double> local(static_cast<size_t>(2 * cache.outputs()), 0.0);
    const float* cur = r.data();
    const float* prev = cache.first_residual.data();
    for (int64_t s = 0; s < samples; ++s) {
      double diff = 0, base = 0;
      for (int64_t i = s * per_sample; i < (s + 1) * per_sample; ++i) {
        diff += std::fabs(static_cast<double>(cur[i]) - prev[i]);
        base += std::fabs(static_cast<double>(prev[i]));
      }
      const size_t o = static_cast<size_t>(cache.output_of(s));
      local[2 * o] += diff;
      local[2 * o + 1] += base;
    }
    sums.assign(local.begin(), local.end());
    if (shard_.sp_size() > 1) shard_.sp->all_reduce_sum(sums.data(), static_cast<int64_t>(sums.size()));
    cache.combine_halves(sums);
  }
  const std::vector<bool> compute = cache.decide(sums);
  bool any = false, every = true;
  for (bool c : compute) {
    any = any || c;
    every = every && c;
  }

  if (!any) {  // every output skips: the rest's kept residual, nothing sent
    cache.rest_skipped();
    ops::add_(hidden, cache.rest_residual.to(hidden.device(), hidden.dtype()));
    return;
  }
  const int64_t sent_before = shard_.sent_bytes();
  pass.layers(hidden, patch, {all.begin + 1, all.end});
  cache.rest_computed(shard_.sent_bytes() - sent_before);
  Tensor out = host_copy(hidden);
  if (every) {
    Tensor rest = Tensor::empty(out.shape());
    const float* a = out.data();
    const float* b = out0.data();
    float* d = rest.data();
    for (int64_t i = 0; i < rest.numel(); ++i) d[i] = a[i] - b[i];
    cache.first_residual = r;
    cache.rest_residual = rest;
    cache.mark_computed();
    return;
  }
  // Some outputs skip: their rows take the kept residual, the others' keep theirs.
  float* o_rows = out.data();
  float* first = cache.first_residual.data();
  float* rest = cache.rest_residual.data();
  const float* r_rows = r.data();
  const float* base = out0.data();
  for (int64_t s = 0; s < samples; ++s) {
    const bool c = compute[static_cast<size_t>(cache.output_of(s))];
    for (int64_t i = s * per_sample; i < (s + 1) * per_sample; ++i) {
      if (c) {
        first[i] = r_rows[i];
        rest[i] = o_rows[i] - base[i];
      } else {
        o_rows[i] = base[i] + rest[i];
      }
    }
  }
  hidden.copy_from(out);
}

Tensor Stage::run(int64_t n, int64_t batch, int64_t width, int64_t out_width, parallel::StaleKeyValues* stale_kv,
                  const Pass& pass, pab::FirstBlockCache* cache) const {
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
    else pass.layers(hidden, patch, pipe_.layers());
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
