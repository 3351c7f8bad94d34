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

#include "ops/ops.h"
#include "parallel/shard.h"
#include "parallel/token_shard.h"
#include "util/error.h"

namespace ditgen::models {

PixArtTransformer PixArtTransformer::load(const io::WeightStore& w, const PixArtConfig& c, const ShardGroups& shard,
                                          const Placement& place) {
  const int64_t d = c.inner_dim(), size_width = d / 3;
  check_shard_fits(shard, c.num_heads, c.ff_inner_dim, /*video=*/false);
  const AdaSingleBlockDims dims{c.num_heads, c.head_dim, c.ff_inner_dim, d, c.norm_eps};
  const AdaSingleStemDims stem{d, c.in_channels, c.out_channels, c.patch_size, c.caption_channels};

  // Validate every name and shape before loading anything.
  nn::TensorDecls expected = AdaSingleStem::tensors(stem);
  if (c.use_additional_conditions) {
    nn::append(expected, nn::TimestepEmbedding::tensors("adaln_single.emb.resolution_embedder.", size_width));
    nn::append(expected, nn::TimestepEmbedding::tensors("adaln_single.emb.aspect_ratio_embedder.", size_width));
  }
  for (int64_t i = 0; i < c.num_layers; ++i)
    nn::append(expected, AdaSingleBlock::tensors("transformer_blocks." + std::to_string(i) + ".", dims));
  nn::check_tensors(w, expected);
  nn::reject_extra_layers(w, "transformer_blocks", c.num_layers, "scale_shift_table");

  PixArtTransformer m;
  m.cfg_ = c;
  m.shard_ = shard;
  m.seq_attn_ = parallel::SequenceParallelAttention(shard.sp, shard.sequence_mode(), place.dtype, shard.sp_split);
  m.place_ = place;
  m.stem_ = AdaSingleStem::load(w, stem, place);
  m.native_pos = place.put(m.position_table(c.base_grid(), c.base_grid()));
  if (c.use_additional_conditions) {
    m.resolution_embedder = nn::TimestepEmbedding::load(w, "adaln_single.emb.resolution_embedder.", place);
    m.aspect_ratio_embedder = nn::TimestepEmbedding::load(w, "adaln_single.emb.aspect_ratio_embedder.", place);
  }
  // PipeFusion: a stage holds its own blocks only.
  m.pipe_ = parallel::PatchPipeline(shard.pp, c.num_layers, shard.pipeline);
  m.blocks_.reserve(m.pipe_.layers().size());
  for (int64_t i = m.pipe_.layers().begin; i < m.pipe_.layers().end; ++i)
    m.blocks_.push_back(AdaSingleBlock::load(w, "transformer_blocks." + std::to_string(i) + ".", dims, shard, place));
  return m;
}

Tensor PixArtTransformer::position_table(int64_t grid_h, int64_t grid_w) const {
  return ops::sincos_pos_embed_2d(cfg_.inner_dim(), grid_h, grid_w, static_cast<double>(cfg_.base_grid()),
                                  cfg_.interpolation_scale);
}

void PixArtTransformer::check_args(const ForwardArgs& a) const {
  const PixArtConfig& c = cfg_;
  auto fail = [](const std::string& msg) { throw RuntimeFailure("PixArt forward: " + msg); };
  if (!a.latents || a.latents->ndim() != 4 || a.latents->dim(1) != c.in_channels || a.latents->dim(2) <= 0 ||
      a.latents->dim(3) <= 0 || a.latents->dim(2) % c.patch_size || a.latents->dim(3) % c.patch_size)
    fail("latents " + (a.latents ? shape_str(a.latents->shape()) : std::string("(none)")) +
         " are not [B, " + std::to_string(c.in_channels) + ", h, w] with h and w multiples of patch_size " +
         std::to_string(c.patch_size));
  const int64_t bsz = a.latents->dim(0);
  const auto count = [](size_t n) { return std::to_string(n); };
  if (static_cast<int64_t>(a.timesteps.size()) != bsz)
    fail("batch of " + std::to_string(bsz) + " latents with " + count(a.timesteps.size()) + " timesteps");
  check_text_args(a, bsz, c.caption_channels, fail);
  if (c.use_additional_conditions &&
      (static_cast<int64_t>(a.resolution.size()) != bsz || static_cast<int64_t>(a.aspect_ratio.size()) != bsz))
    fail("this model uses micro-conditions: " + count(a.resolution.size()) + " resolutions and " +
         count(a.aspect_ratio.size()) + " aspect ratios for a batch of " + std::to_string(bsz));
  const int64_t tokens = (a.latents->dim(2) / c.patch_size) * (a.latents->dim(3) / c.patch_size);
  if (tokens < shard_.sp_size())
    fail("sp = " + std::to_string(shard_.sp_size()) + " exceeds the " + std::to_string(tokens) + " tokens");
}

Tensor PixArtTransformer::embedded_timestep(const ForwardArgs& a) const {
  Tensor emb = stem_.adaln.embed(a.timesteps, place_);  // (B, D)
  if (!cfg_.use_additional_conditions) return emb;
  // cat(resolution_embedder(h), resolution_embedder(w), aspect_ratio_embedder(ar)), D/3 columns each.
  const int64_t bsz = emb.dim(0), d = cfg_.inner_dim(), width = d / 3;
  std::vector<float> sides;  // h then w of each sample: resolution.flatten()
  for (const auto& hw : a.resolution) sides.insert(sides.end(), hw.begin(), hw.end());
  const Tensor res = resolution_embedder(nn::TimestepEmbedding::sinusoid(sides, 0.0f, place_));  // (2B, D/3) = (B, 2D/3)
  const Tensor ratio = aspect_ratio_embedder(nn::TimestepEmbedding::sinusoid(a.aspect_ratio, 0.0f, place_));  // (B, D/3)
  Tensor sizes = place_.empty({bsz, d});
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
  // The tokens that go through the blocks together: the whole image, or
  // under PipeFusion each patch in turn (parallel/patch_pipeline.h); of
  // each, this rank's sp shard.
  const std::vector<parallel::Range> patches = pipe_.patches(n, a.stale_kv);

  Tensor patched, pos;  // the first stage's (B, N, C*p*p) patchified latents and (N, D) positions
  if (pipe_.first_stage()) {
    patched = stem_.patch.patches(x);
    const bool native = grid_h == c.base_grid() && grid_w == c.base_grid();
    pos = native ? native_pos : place_.put(position_table(grid_h, grid_w));
  }
  const Tensor embedded = embedded_timestep(a);      // (B, D)
  const Tensor shared_mod = stem_.adaln(embedded);   // (B, 6D)
  const Tensor caption = stem_.caption(*a.text);     // (B, L, D)
  const nn::CrossContext text{&caption, a.text_lengths.empty() ? nullptr : a.text_lengths.data()};
  Tensor out;  // (B, N, p*p*out), collected by the last stage

  for (const parallel::Range& patch : patches) {
    const parallel::Range rows = parallel::patch_rows(patch, shard_.sp_split, shard_.sp_size(), shard_.sp_rank());
    Tensor hidden;  // (B, P, D) residual stream of these tokens
    if (pipe_.first_stage()) {
      hidden = stem_.patch(parallel::token_rows(patched, rows), pos.slice0(rows.begin, rows.end));
    } else {
      hidden = place_.empty({bsz, rows.size(), c.inner_dim()});
      pipe_.receive(hidden);
    }
    for (int64_t bi = pipe_.layers().begin; bi < pipe_.layers().end; ++bi) {
      const nn::AttentionCore core = nn::sequence_core(pipe_, bi, patch, n, c.head_dim, a.stale_kv, seq_attn_);
      blocks_[static_cast<size_t>(bi - pipe_.layers().begin)].forward(
          hidden, shared_mod, {&core, nullptr, nullptr, &text, {a.pab, static_cast<int>(bi)}, pab::Kind::kSpatial});
    }
    if (!pipe_.last_stage()) {
      pipe_.send(hidden);
      continue;
    }
    // (B, P, p*p*out), gathered over sp: every rank needs the whole prediction.
    const Tensor rows_out = stem_.final_layer(hidden, stem_.final_layer.shift_scale(embedded));
    pipe_.collect_output(shard_.sp, shard_.sp_split, rows_out, patch, n, out);
  }
  pipe_.share_output(out, {bsz, n, p * p * c.out_channels}, place_.device, place_.dtype);
  return ops::unpatchify(out, grid_h, grid_w, p, c.out_channels).to(Device::kCPU, DType::kF32);
}

}  // namespace ditgen::models
