// LatteTransformer3DModel forward, following diffusers (0.35): latents
// (B, C, F, h, w) -> frames (B*F, C, h, w) -> PatchEmbed (a stride-p conv,
// plus the 2-D sin-cos positions of the actual grid, base_size
// sample_size // patch_size) -> (B*F, N, D); timestep -> Timesteps(256,
// flip_sin_to_cos, shift 0) -> TimestepEmbedding = the embedded timestep;
// adaln_single's linear of its SiLU is the (B, 6D) modulation every block
// shares; the caption projection (linear, GELU tanh, linear) of the text,
// repeated per frame; per layer the spatial block, then (after adding the
// temporal positions before the first one when F > 1) the temporal block;
// the final layer modulated by its own (2, D) table plus the embedded
// timestep (no SiLU), LayerNorm eps 1e-6, proj_out, unpatchify, back to
// (B, C_out, F, h, w).
#include "models/latte.h"

#include <cmath>
#include <cstring>

#include "models/family_spec.h"
#include "models/forward_checks.h"
#include "ops/attention_operands.h"
#include "ops/ops.h"
#include "ops/rows.h"
#include "parallel/frame_switch.h"
#include "parallel/sequence_attention.h"
#include "parallel/shard.h"
#include "parallel/token_shard.h"
#include "util/error.h"

namespace ditgen::models {

namespace {

const std::string kSpatialBlocks = "transformer_blocks.", kTemporalBlocks = "temporal_transformer_blocks.";

// Frames [f.begin, f.end) of every video of x (B, C, F, h, w) as one
// image each, (B * |f|, C, h, w) in (video, frame) order.
Tensor frames_as_images(const Tensor& x, parallel::Range f) {
  const int64_t bsz = x.dim(0), channels = x.dim(1), frames = x.dim(2), hw = x.dim(3) * x.dim(4), count = f.size();
  Tensor images = Tensor::empty({bsz * count, channels, x.dim(3), x.dim(4)});
  for (int64_t b = 0; b < bsz; ++b)
    for (int64_t ch = 0; ch < channels; ++ch)
      for (int64_t i = 0; i < count; ++i)
        std::memcpy(images.data() + ((b * count + i) * channels + ch) * hw,
                    x.data() + ((b * channels + ch) * frames + f.begin + i) * hw,
                    static_cast<size_t>(hw) * sizeof(float));
  return images;
}

// The inverse for every frame: images (B*F, C, h, w) -> (B, C, F, h, w).
Tensor images_as_video(const Tensor& images, int64_t frames) {
  const int64_t bsz = images.dim(0) / frames, channels = images.dim(1), h = images.dim(2), w = images.dim(3);
  const int64_t hw = h * w;
  Tensor video = Tensor::empty({bsz, channels, frames, h, w});
  for (int64_t b = 0; b < bsz; ++b)
    for (int64_t ch = 0; ch < channels; ++ch)
      for (int64_t f = 0; f < frames; ++f)
        std::memcpy(video.data() + ((b * channels + ch) * frames + f) * hw,
                    images.data() + ((b * frames + f) * channels + ch) * hw, static_cast<size_t>(hw) * sizeof(float));
  return video;
}

// Attention across the frames of each token. q, k, v, out: (B*F, N, Dl)
// rows in (video, frame, token) order; per video the N tokens are the
// samples (one row apart) and each attends over its F frames (N rows apart).
void temporal_attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, int64_t frames,
                        int64_t head_dim, DType compute) {
  const int64_t n = q.dim(1), dl = q.dim(2), videos = q.dim(0) / frames, video = frames * n * dl;
  for (int64_t b = 0; b < videos; ++b) {
    auto rows = [&](const Tensor& t) { return ops::TokenRows{&t, b * video, n * dl, frames, dl}; };
    ops::AttentionArgs a = ops::attention_args(rows(q), rows(k), rows(v), rows(out), n, dl / head_dim, head_dim);
    a.compute = compute;
    ops::attention(a);
  }
}

}  // namespace

nn::TensorDecls LatteTransformer::stem_tensors(const LatteConfig& c) { return AdaSingleStem::tensors(c); }

nn::TensorDecls LatteTransformer::layer_tensors(const LatteConfig& c, int64_t layer) {
  const std::string n = std::to_string(layer) + ".";
  nn::TensorDecls t = AdaSingleBlock::tensors(kSpatialBlocks + n, c, /*cross=*/true);
  nn::append(t, AdaSingleBlock::tensors(kTemporalBlocks + n, c, /*cross=*/false));
  return t;
}

LatteTransformer LatteTransformer::load(const io::WeightStore& w, const LatteConfig& c, const ShardGroups& shard,
                                        const Placement& place) {
  check_before_load<LatteTransformer>(w, c, shard, FrameSharding::kFrames, "Latte",
                                      {"transformer_blocks", "temporal_transformer_blocks"}, "scale_shift_table");
  for (int64_t i = 0; i < c.num_layers; ++i)
    if (w.contains(kTemporalBlocks + std::to_string(i) + ".attn2.to_q.weight"))
      throw ModelError(w.dir() + ": " + kTemporalBlocks + std::to_string(i) +
                       ".attn2: Latte's temporal blocks have no cross-attention");

  LatteTransformer m;
  m.load_stem(w, c, shard, place);
  m.native_temporal = place.put(m.temporal_table(c.video_length));
  // PipeFusion: a stage holds its own layers (both blocks of each) only.
  const parallel::Range layers = m.stage_.layers();
  for (int64_t i = layers.begin; i < layers.end; ++i) {
    const std::string n = std::to_string(i) + ".";
    m.spatial_.push_back(AdaSingleBlock::load(w, kSpatialBlocks + n, c, /*cross=*/true, shard, place));
    m.temporal_.push_back(AdaSingleBlock::load(w, kTemporalBlocks + n, c, /*cross=*/false, shard, place));
  }
  return m;
}

Tensor LatteTransformer::temporal_table(int64_t frames) const {
  const int64_t d = cfg_.inner_dim();
  Tensor t = Tensor::empty({frames, d});
  for (int64_t f = 0; f < frames; ++f) nn::sincos_1d(static_cast<double>(f), d, t.data() + f * d);
  return t;
}

void LatteTransformer::check_args(const ForwardArgs& a) const {
  const LatteConfig& c = cfg_;
  auto fail = [](const std::string& msg) { throw RuntimeFailure("Latte forward: " + msg); };
  check_text_forward_args(a, c.in_channels, {1, c.patch_size, c.patch_size}, c.caption_channels, fail);
}

Tensor LatteTransformer::forward(const ForwardArgs& a) const {
  check_args(a);
  const LatteConfig& c = cfg_;
  const ShardGroups& shard = stage_.shard();
  const Placement& place = stage_.place();
  const Tensor& x = *a.latents;
  const int64_t bsz = x.dim(0), frames = x.dim(2), p = c.patch_size;
  const int64_t grid_h = x.dim(3) / p, grid_w = x.dim(4) / p, n = grid_h * grid_w;
  // This rank's part of the video outside the temporal attention (docs/design.md
  // §4): under dsp its frames, every token of them; under ulysses and ring
  // its tokens of every frame; single process all of it.
  const int sp = shard.sp_size();
  const bool dsp = sp > 1 && shard.dsp();
  if (dsp && (frames < sp || n < sp))
    throw RuntimeFailure("Latte forward: dsp over " + std::to_string(sp) + " ranks needs at least as many frames and "
                         "tokens per frame; the video has " + std::to_string(frames) + " frames of " +
                         std::to_string(n) + " tokens");
  const parallel::VideoFrameShard frame_shard(dsp ? shard.sp : nullptr, shard.sp_split, frames, n);
  const parallel::Range my_frames = frame_shard.frames();
  const int64_t local_frames = my_frames.size();
  const int64_t clips = bsz * local_frames;  // the spatial blocks' batch: this rank's frames of every video

  Tensor patched, pos;  // the first stage's (B*F_me, N, C*p*p) patchified frames and (N, D) positions
  if (stage_.pipeline().first_stage()) {
    patched = stem_.patch.patches(frames_as_images(x, my_frames));
    pos = stem_.positions(c, grid_h, grid_w, place);
  }
  const Tensor embedded = stem_.adaln.embed(a.timesteps, place);  // (B, D)
  // diffusers repeats the (B, 6D) modulation per frame (spatial blocks)
  // and per token (temporal blocks); in the (B*F, N, D) layout both are
  // one row per frame of each video: (B*F_me, 6D).
  const Tensor modulation = ops::repeat_rows(stem_.adaln(embedded), local_frames);
  // One caption per video: the spatial blocks' cross-attention projects
  // its keys and values once and lets every frame's queries attend to
  // them (CrossContext::repeat).
  const Tensor caption = stem_.caption(*a.text);  // (B, L, D)
  const nn::CrossContext text{&caption, a.text_lengths.empty() ? nullptr : a.text_lengths.data(), local_frames};

  // Spatial attention: over the N tokens of each frame; ulysses and ring
  // gather them across the sp group, dsp holds them whole.
  const parallel::SequenceParallelAttention whole_frames(nullptr, parallel::SequenceMode::kUlysses, place.dtype);
  // Temporal attention: over the F frames of each token, which ulysses,
  // ring and a PipeFusion patch hold already (every frame of their tokens):
  // no communication, and exact under PipeFusion. Under dsp the switch
  // around it turns the frame shard into a token shard and back
  // (parallel/frame_switch.h).
  const nn::AttentionCore across_frames = [&](const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out) {
    temporal_attention(q, k, v, out, frames, c.head_dim, place.dtype);
  };
  const nn::LayoutSwitch dsp_switch{
      [&](const Tensor& normed) { return frame_shard.to_tokens(normed); },  // B: this call's videos (a step cache's)
      [&](const Tensor& attn) { return frame_shard.to_frames(attn); }};

  Stage::Pass pass;
  pass.embed = [&](parallel::Range rows) {  // (B*F_me, N_me, D) residual stream, (video, frame, token) order
    return stem_.patch(parallel::token_rows(patched, rows), pos.slice0(rows.begin, rows.end));
  };
  pass.layers = [&](Tensor& hidden, parallel::Range patch, parallel::Range span, const Stage::Samples& samples) {
    // A step cache's subset of the videos: their frames' modulation and their captions.
    const Tensor mod = ops::sample_rows(modulation, samples, local_frames);
    const TextOfSamples texts(text, samples);
    for (int64_t i = span.begin; i < span.end; ++i) {
      const nn::AttentionCore spatial = stage_.core(i, patch, n, c.head_dim, a.stale_kv, dsp ? &whole_frames : nullptr);
      const size_t local = static_cast<size_t>(i - stage_.layers().begin);
      const int layer = static_cast<int>(i);
      spatial_[local].forward(hidden, mod, {&spatial, nullptr, nullptr, &texts.context(), {a.pab, layer, kSpatialPart}});
      if (i == 0 && frames > 1) {  // the temporal positions, before the first temporal block
        const Tensor table = frames <= c.video_length ? native_temporal : place.put(temporal_table(frames));
        for (int64_t clip = 0; clip < hidden.dim(0); ++clip) {
          Tensor tokens = hidden.slice0(clip, clip + 1);  // a view: one frame of one video
          const int64_t f = my_frames.begin + clip % local_frames;
          ops::add_broadcast_(tokens, table.slice0(f, f + 1));
        }
      }
      temporal_[local].forward(hidden, mod,
                               {&across_frames, dsp ? &dsp_switch : nullptr, nullptr, nullptr,
                                {a.pab, layer, kTemporalPart}, pab::Kind::kTemporal});
    }
  };
  pass.teacache_signal = [&](const Tensor& hidden) {  // spatial block 0's modulated attention input
    return Stage::Pass::Signal{spatial_[0].attention_input(hidden, modulation), true};
  };
  // (B*F_me, N_me, p*p*out), each frame modulated by its video's embedded timestep
  pass.head = [&](const Tensor& hidden, parallel::Range) {
    return stem_.final_layer(hidden, stem_.final_layer.shift_scale(ops::repeat_rows(embedded, local_frames)));
  };
  if (dsp) pass.gather_frames = [&](const Tensor& rows) { return frame_shard.gather(rows); };  // (B*F, N, R)
  const Tensor out = stage_.run(n, clips, c.inner_dim(), p * p * c.out_channels, a.stale_kv, pass, a.step_cache);
  // (B*F, C_out, h, w) -> (B, C_out, F, h, w)
  return images_as_video(ops::unpatchify(out, grid_h, grid_w, p, c.out_channels).to(Device::kCPU, DType::kF32),
                         frames);
}

}  // namespace ditgen::models
