#include "models/stage.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "ops/ops.h"
#include "ops/rows.h"
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

TextOfSamples::TextOfSamples(const nn::CrossContext& text, const std::vector<int64_t>& samples) : context_(text) {
  if (samples.empty()) return;
  tokens_ = ops::sample_rows(*text.tokens, samples);
  if (text.kv_lens)
    for (int64_t s : samples) lengths_.push_back(text.kv_lens[s]);
  context_.tokens = &tokens_;
  context_.kv_lens = lengths_.empty() ? nullptr : lengths_.data();
}

// This rank's signal sums per unit (sum|s - s_prev|, sum|s_prev|) over
// its rows, then over the sp group's shards (per-token signals) and the pp
// stages (the first computes it; others add zeros), and (halves deciding
// together) over the cp pair; tp ranks hold the same rows. Then the
// decision, alike on every rank.
std::vector<bool> Stage::decide(const Tensor& signal, bool per_token, pab::StepCache& cache) const {
  std::vector<float> sums;
  if (cache.has_previous()) {
    sums = pipe_.first_stage() ? cache.local_sums(signal) : std::vector<float>(2 * cache.units(), 0.0f);
    if (pipe_.first_stage() && per_token && shard_.sp_size() > 1)
      shard_.sp->all_reduce_sum(sums.data(), static_cast<int64_t>(sums.size()));
    if (shard_.pp_size() > 1) shard_.pp->all_reduce_sum(sums.data(), static_cast<int64_t>(sums.size()));
    cache.combine_halves(sums);
  }
  return cache.decide(sums, signal);
}

Stage::Prepared Stage::prepare_cached(const std::vector<parallel::Range>& patches, int64_t n, const Pass& pass,
                                      pab::StepCache& cache) const {
  const parallel::Range all = pipe_.layers();
  const bool first_block = cache.kind() == CacheKind::kFirstBlock;
  Prepared p;
  p.span = {first_block && pipe_.first_stage() ? all.begin + 1 : all.begin, all.end};
  if (!pipe_.first_stage()) {  // the first stage's signal decides: a stand-in of the kept shape
    const std::vector<bool> compute = decide(Tensor::zeros({cache.samples(), 1}), true, cache);
    p.compute = compute;
    return p;
  }
  // The first stage's rows of every patch (after the first block for
  // first_block: PipeFusion's later patches' first block reads the earlier
  // ones' fresh keys and values either way) and their signal.
  std::vector<Tensor> signals;
  bool per_token = true;
  for (const parallel::Range& patch : patches) {
    Tensor hidden = pass.embed(token_rows(patch, n, pass));
    if (first_block) {
      const Tensor in0 = host_copy(hidden);
      pass.layers(hidden, patch, {all.begin, all.begin + 1}, {});
      Tensor r = host_copy(hidden);  // the first block's output residual
      float* d = r.data();
      const float* b = in0.data();
      for (int64_t i = 0; i < r.numel(); ++i) d[i] -= b[i];
      signals.push_back(r);
    } else {
      if (!pass.teacache_signal) throw std::logic_error("Stage: this family gives no TeaCache signal");
      const Pass::Signal m = pass.teacache_signal(hidden);
      per_token = m.per_token;
      signals.push_back(host_copy(m.values));
    }
    p.first_rows.push_back(hidden);
  }
  // One signal over the patches' tokens (a per-sample signal is whole in each).
  Tensor signal = signals.front();
  if (per_token && signals.size() > 1) {
    const int64_t rows = signal.dim(0), width = signal.dim(2);
    int64_t tokens = 0;
    for (const Tensor& s : signals) tokens += s.dim(1);
    signal = Tensor::empty({rows, tokens, width});
    int64_t at = 0;
    for (const Tensor& s : signals) {
      for (int64_t r = 0; r < rows; ++r)
        std::copy(s.data() + r * s.dim(1) * width, s.data() + (r + 1) * s.dim(1) * width,
                  signal.data() + (r * tokens + at) * width);
      at += s.dim(1);
    }
  }
  p.compute = decide(signal, per_token, cache);
  return p;
}

void Stage::run_span(Tensor& hidden, parallel::Range patch, int64_t row0, int64_t tokens, const Prepared& p,
                     const Pass& pass, pab::StepCache& cache) const {
  if (hidden.dim(0) % cache.samples() != 0)
    throw std::logic_error("Stage: hidden rows " + std::to_string(hidden.dim(0)) + " are not " +
                           std::to_string(cache.samples()) + " samples' worth");
  const std::vector<bool>& compute = p.compute;
  const bool any = std::find(compute.begin(), compute.end(), true) != compute.end();
  const bool every = std::find(compute.begin(), compute.end(), false) == compute.end();
  if (!any) {  // every unit skips: the span's kept residual, nothing sent
    const Tensor residual = cache.span_skipped(static_cast<int>(p.span.begin), static_cast<int>(p.span.end), row0,
                                               hidden.dim(1), tokens);
    ops::add_(hidden, residual.to(hidden.device(), hidden.dtype()));
    return;
  }
  const Tensor in = host_copy(hidden);
  const int64_t sent_before = shard_.sent_bytes();
  if (every || cache.pab_active() || pipe_.stages() > 1) {
    // Every sample: PAB keeps whole-batch outputs and PipeFusion whole-batch
    // keys and values, so with either a mixed step runs them all too.
    pass.layers(hidden, patch, p.span, {});
  } else {  // only the computing units' samples: a smaller batch through the span
    Samples samples;
    for (int64_t s = 0; s < cache.samples(); ++s)
      if (compute[static_cast<size_t>(cache.unit_of(s))]) samples.push_back(s);
    const int64_t per_sample = hidden.dim(0) / cache.samples();
    Tensor some = ops::sample_rows(hidden, samples, per_sample);
    pass.layers(some, patch, p.span, samples);
    ops::put_sample_rows(hidden, some, samples, per_sample);
  }
  Tensor out = host_copy(hidden);
  cache.span_computed(out, in, compute, shard_.sent_bytes() - sent_before, row0, tokens);
  if (!every) hidden.copy_from(out.to(hidden.device(), hidden.dtype()));  // the skipping units' rows
}

parallel::Range Stage::token_rows(parallel::Range patch, int64_t n, const Pass& pass) const {
  if (pass.gather_frames) return {0, n};  // frames sharded: every token of this rank's frames
  return parallel::patch_rows(patch, shard_.sp_split, shard_.sp_size(), shard_.sp_rank());
}

Tensor Stage::run(int64_t n, int64_t batch, int64_t width, int64_t out_width, parallel::StaleKeyValues* stale_kv,
                  const Pass& pass, pab::StepCache* cache) const {
  const std::vector<parallel::Range> patches = pipe_.patches(n, stale_kv);
  // With a step cache: the decision, made before any patch runs the span
  // (the first stage runs the first block of every patch, or takes the
  // TeaCache signal of their rows).
  Prepared prepared;
  if (cache) prepared = prepare_cached(patches, n, pass, *cache);
  // The tokens this rank's patches cover (each patch's rows in turn).
  int64_t tokens = 0;
  for (const parallel::Range& patch : patches) tokens += token_rows(patch, n, pass).size();
  Tensor out;  // (batch, n, R), collected by the last stage
  int64_t row0 = 0;
  for (size_t i = 0; i < patches.size(); ++i) {
    const parallel::Range& patch = patches[i];
    const parallel::Range rows = token_rows(patch, n, pass);
    Tensor hidden;  // (B, P, D) the residual stream of these tokens
    if (pipe_.first_stage()) {
      hidden = cache ? prepared.first_rows[i] : pass.embed(rows);
    } else {
      hidden = place_.empty({batch, rows.size(), width});
      pipe_.receive(hidden);
    }
    if (cache) run_span(hidden, patch, row0, tokens, prepared, pass, *cache);
    else pass.layers(hidden, patch, pipe_.layers(), {});
    row0 += rows.size();
    if (!pipe_.last_stage()) {
      pipe_.send(hidden);
      continue;
    }
    // Every rank needs the whole prediction: gather the frames (dsp) or the tokens.
    const Tensor out_rows = pass.head(hidden, rows);
    if (pass.gather_frames) {
      out = pass.gather_frames(out_rows);
      break;  // the whole video as one patch (PipeFusion does not take dsp)
    }
    pipe_.collect_output(shard_.sp, shard_.sp_split, out_rows, patch, n, out);
  }
  if (cache) cache->finish_step();
  pipe_.share_output(out, {batch, n, out_width}, place_.device, place_.storage());
  return out;
}

}  // namespace ditgen::models
