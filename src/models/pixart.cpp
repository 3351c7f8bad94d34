// PixArtTransformer2DModel forward, following diffusers: positions for the
// actual token grid (base_size = sample_size // patch_size); timestep ->
// Timesteps(256, flip_sin_to_cos, shift 0) -> TimestepEmbedding = the
// embedded timestep (+ the micro-conditions: resolution h and w through one
// embedder, aspect ratio through another, D/3 columns each); adaln_single's
// linear of its SiLU is the (B, 6D) modulation every block shares; the
// caption projection (linear, GELU tanh, linear) runs on all L text rows and
// the text mask becomes per-sample key counts; the final layer is modulated
// by its own (2, D) table plus the embedded timestep (no SiLU), LayerNorm
// eps 1e-6.
#include "models/pixart.h"

#include "models/family_spec.h"
#include "models/forward_checks.h"
#include "ops/ops.h"
#include "ops/rows.h"
#include "parallel/shard.h"
#include "parallel/token_shard.h"
#include "util/error.h"

namespace ditgen::models {

namespace {

const std::string kMicroConditions[] = {"adaln_single.emb.resolution_embedder.",
                                        "adaln_single.emb.aspect_ratio_embedder."};

}  // namespace

nn::TensorDecls PixArtTransformer::stem_tensors(const PixArtConfig& c) {
  nn::TensorDecls t = AdaSingleStem::tensors(c);
  if (c.use_additional_conditions)
    for (const std::string& prefix : kMicroConditions)
      nn::append(t, nn::TimestepEmbedding::tensors(prefix, c.inner_dim() / 3));
  return t;
}

nn::TensorDecls PixArtTransformer::layer_tensors(const PixArtConfig& c, int64_t layer) {
  return AdaSingleBlock::tensors("transformer_blocks." + std::to_string(layer) + ".", c, /*cross=*/true);
}

PixArtTransformer PixArtTransformer::load(const io::WeightStore& w, const PixArtConfig& c, const ShardGroups& shard,
                                          const Placement& place) {
  check_before_load<PixArtTransformer>(w, c, shard, FrameSharding::kImage, "PixArt", {"transformer_blocks"},
                                       "scale_shift_table");

  PixArtTransformer m;
  m.load_stem(w, c, shard, place);
  if (c.use_additional_conditions) {
    m.resolution_embedder = nn::TimestepEmbedding::load(w, kMicroConditions[0], place);
    m.aspect_ratio_embedder = nn::TimestepEmbedding::load(w, kMicroConditions[1], place);
  }
  // PipeFusion: a stage holds its own blocks only.
  const parallel::Range layers = m.stage_.layers();
  for (int64_t i = layers.begin; i < layers.end; ++i)
    m.blocks_.push_back(
        AdaSingleBlock::load(w, "transformer_blocks." + std::to_string(i) + ".", c, /*cross=*/true, shard, place));
  return m;
}

void PixArtTransformer::check_args(const ForwardArgs& a) const {
  const PixArtConfig& c = cfg_;
  auto fail = [](const std::string& msg) { throw RuntimeFailure("PixArt forward: " + msg); };
  const int64_t bsz =
      check_text_forward_args(a, c.in_channels, {0, c.patch_size, c.patch_size}, c.caption_channels, fail);
  const auto count = [](size_t n) { return std::to_string(n); };
  if (c.use_additional_conditions &&
      (static_cast<int64_t>(a.resolution.size()) != bsz || static_cast<int64_t>(a.aspect_ratio.size()) != bsz))
    fail("this model uses micro-conditions: " + count(a.resolution.size()) + " resolutions and " +
         count(a.aspect_ratio.size()) + " aspect ratios for a batch of " + std::to_string(bsz));
  const int64_t tokens = (a.latents->dim(2) / c.patch_size) * (a.latents->dim(3) / c.patch_size);
  if (tokens < stage_.shard().sp_size())
    fail("sp = " + std::to_string(stage_.shard().sp_size()) + " exceeds the " + std::to_string(tokens) + " tokens");
}

Tensor PixArtTransformer::embedded_timestep(const ForwardArgs& a) const {
  const Placement& place = stage_.place();
  Tensor emb = stem_.adaln.embed(a.timesteps, place);  // (B, D)
  if (!cfg_.use_additional_conditions) return emb;
  // cat(resolution_embedder(h), resolution_embedder(w), aspect_ratio_embedder(ar)), D/3 columns each.
  const int64_t bsz = emb.dim(0), d = cfg_.inner_dim(), width = d / 3;
  std::vector<float> sides;  // h then w of each sample: resolution.flatten()
  for (const auto& hw : a.resolution) sides.insert(sides.end(), hw.begin(), hw.end());
  const Tensor res = resolution_embedder(nn::TimestepEmbedding::sinusoid(sides, 0.0f, place));  // (2B, D/3) = (B, 2D/3)
  const Tensor ratio = aspect_ratio_embedder(nn::TimestepEmbedding::sinusoid(a.aspect_ratio, 0.0f, place));  // (B, D/3)
  Tensor sizes = place.empty({bsz, d});
  ops::copy_rows(res, 0, 2 * width, sizes, 0, d, bsz, 2 * width);
  ops::copy_rows(ratio, 0, width, sizes, 2 * width, d, bsz, width);
  ops::add_(emb, sizes);
  return emb;
}

Tensor PixArtTransformer::forward(const ForwardArgs& a) const {
  check_args(a);
  const PixArtConfig& c = cfg_;
  const Tensor& x = *a.latents;
  const int64_t p = c.patch_size, bsz = x.dim(0);
  const int64_t grid_h = x.dim(2) / p, grid_w = x.dim(3) / p, n = grid_h * grid_w;
  Tensor patched, pos;  // the first stage's (B, N, C*p*p) patchified latents and (N, D) positions
  if (stage_.pipeline().first_stage()) {
    patched = stem_.patch.patches(x);
    pos = stem_.positions(c, grid_h, grid_w, stage_.place());
  }
  const Tensor embedded = embedded_timestep(a);     // (B, D)
  const Tensor shared_mod = stem_.adaln(embedded);  // (B, 6D)
  const Tensor caption = stem_.caption(*a.text);    // (B, L, D)
  const nn::CrossContext text{&caption, a.text_lengths.empty() ? nullptr : a.text_lengths.data()};

  Stage::Pass pass;
  pass.embed = [&](parallel::Range rows) {
    return stem_.patch(parallel::token_rows(patched, rows), pos.slice0(rows.begin, rows.end));
  };
  pass.layers = [&](Tensor& hidden, parallel::Range patch, parallel::Range span, const Stage::Samples& samples) {
    // A step cache's subset of the samples: their modulation and captions.
    const Tensor mod = ops::sample_rows(shared_mod, samples);
    const TextOfSamples texts(text, samples);
    for (int64_t i = span.begin; i < span.end; ++i) {
      const nn::AttentionCore core = stage_.core(i, patch, n, c.head_dim, a.stale_kv);
      blocks_[static_cast<size_t>(i - stage_.layers().begin)].forward(
          hidden, mod, {&core, nullptr, nullptr, &texts.context(), {a.pab, static_cast<int>(i)}});
    }
  };
  pass.teacache_signal = [&](const Tensor& hidden) {  // block 0's modulated attention input
    return Stage::Pass::Signal{blocks_[0].attention_input(hidden, shared_mod), true};
  };
  pass.head = [&](const Tensor& hidden, parallel::Range) { return stem_.final_layer(hidden, stem_.final_layer.shift_scale(embedded)); };
  const Tensor out = stage_.run(n, bsz, c.inner_dim(), p * p * c.out_channels, a.stale_kv, pass, a.step_cache);
  return ops::unpatchify(out, grid_h, grid_w, p, c.out_channels).to(Device::kCPU, DType::kF32);
}

}  // namespace ditgen::models
