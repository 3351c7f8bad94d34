#include "models/stage.h"

#include "parallel/shard.h"

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

Tensor Stage::run(int64_t n, int64_t batch, int64_t width, int64_t out_width, parallel::StaleKeyValues* stale_kv,
                  const Pass& pass) const {
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
    pass.layers(hidden, patch);
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
