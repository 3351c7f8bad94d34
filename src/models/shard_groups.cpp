#include "models/shard_groups.h"

#include <string>

#include "util/error.h"

namespace ditgen::models {

void check_shard_fits(const ShardGroups& shard, int64_t heads, int64_t ff_inner, FrameSharding frames,
                      const char* family) {
  const int tp = shard.tp_size(), sp = shard.sp_size();
  if (heads % tp || ff_inner % tp)
    throw ConfigError("tp = " + std::to_string(tp) + " must divide num_attention_heads " + std::to_string(heads) +
                      " and the MLP width " + std::to_string(ff_inner));
  if (sp > 1 && shard.dsp() && frames == FrameSharding::kImage)
    throw ConfigError("sp_mode dsp shards the frames of a video; this is an image model (use ulysses or ring)");
  if (sp > 1 && shard.dsp() && frames == FrameSharding::kWholeSequence)
    throw ConfigError(std::string("sp_mode dsp: a ") + family +
                      " model's attention spans every frame's tokens at once, with no separate temporal attention "
                      "to switch around (use ulysses or ring)");
  // Ulysses hands each sp rank heads / (sp * tp) of this rank's heads.
  if (sp > 1 && shard.mode == parallel::SpMode::kUlysses && (heads / tp) % sp)
    throw ConfigError("ulysses: sp * tp = " + std::to_string(sp * tp) + " must divide num_attention_heads " +
                      std::to_string(heads));
}

}  // namespace ditgen::models
