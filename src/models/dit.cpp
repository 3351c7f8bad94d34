// DiTTransformer2DModel forward, following diffusers (not the original DiT
// repository): per block, conditioning = TimestepEmbedding(sinusoid with
// flip_sin_to_cos, downscale_freq_shift=1) + LabelEmbedding; adaLN-Zero
// modulation chunks (shift, scale, gate) x (attention, MLP); attention branch
// LayerNorm eps 1e-6, MLP branch eps from config; the final layer is
// modulated by block 0's conditioning.
#include "models/dit.h"

#include "io/model_dir.h"
#include "models/family_spec.h"
#include "parallel/shard.h"
#include "parallel/token_shard.h"
#include "ops/ops.h"
#include "ops/rows.h"
#include "util/error.h"

namespace ditgen::models {

namespace {

constexpr float kAdaNormEps = 1e-6f;  // AdaLayerNormZero's

}  // namespace

DitConfig DitConfig::from_json(const nlohmann::json& cfg, const std::string& path) {
  const std::string cls = io::get_string_or(cfg, "_class_name", "", path);
  const std::string norm_type = io::get_string_or(cfg, "norm_type", "ada_norm_zero", path);
  require(cls == "DiTTransformer2DModel" || (cls == "Transformer2DModel" && norm_type == "ada_norm_zero"), path,
          "_class_name: expected DiTTransformer2DModel (or Transformer2DModel with norm_type ada_norm_zero), got '" +
              cls + "' with norm_type '" + norm_type + "'");
  require(norm_type == "ada_norm_zero", path, "norm_type: expected ada_norm_zero, got '" + norm_type + "'");
  DitConfig c;
  static_cast<TransformerSizes&>(c) = TransformerSizes::read(cfg, path);
  c.num_classes = io::get_int(cfg, "num_embeds_ada_norm", path);
  require(c.num_classes > 0, path,
          "num_embeds_ada_norm: expected a positive integer, got " + std::to_string(c.num_classes));
  c.norm_eps = static_cast<float>(io::get_number_or(cfg, "norm_eps", 1e-5, path));
  c.ff_inner_dim = io::get_int_or(cfg, "ff_inner_dim", c.ff_inner_dim, path);  // null: 4 * inner_dim
  check_block_options(cfg, path, "DiT", {"gelu-approximate", false, true});
  return c;
}

namespace {

constexpr const char* kBlocks = "transformer_blocks";
const nn::FinalLayerNames kFinalLayer{nn::FinalLayerNames::Modulation::kLinearOfSilu, "proj_out_1.", "proj_out_2."};

nn::TransformerBlockDims block_dims(const DitConfig& c) {
  const int64_t d = c.inner_dim();
  nn::TransformerBlockDims b;
  b.self = {c.num_heads, c.head_dim, d, d};
  b.ff = {d, c.ff_inner_dim, nn::FeedForwardActivation::kGeluTanh};
  b.attention_norm_eps = kAdaNormEps;
  b.mlp_norm_eps = c.norm_eps;
  return b;
}

std::string block_prefix(int64_t i) { return std::string(kBlocks) + "." + std::to_string(i) + "."; }

}  // namespace

nn::TensorDecls DitTransformer::stem_tensors(const DitConfig& c) {
  const int64_t d = c.inner_dim(), p = c.patch_size;
  nn::TensorDecls t = nn::PatchEmbed::tensors("pos_embed.proj.", d, c.in_channels, p);
  nn::append(t, nn::FinalLayer::tensors(kFinalLayer, d, p * p * c.out_channels));
  return t;
}

nn::TensorDecls DitTransformer::embedder_tensors(const DitConfig& c, int64_t layer) {
  const std::string b = block_prefix(layer) + "norm1.emb.";
  nn::TensorDecls t = nn::TimestepEmbedding::tensors(b + "timestep_embedder.", c.inner_dim());
  nn::append(t,
             nn::LabelEmbedding::tensors(b + "class_embedder.embedding_table.weight", c.num_classes, c.inner_dim()));
  return t;
}

nn::TensorDecls DitTransformer::block_tensors(const DitConfig& c, int64_t layer) {
  const std::string b = block_prefix(layer);
  nn::TensorDecls t = nn::AdaLnZero::tensors(b + "norm1.linear.", c.inner_dim());
  nn::append(t, nn::TransformerBlock::tensors(b, block_dims(c)));
  return t;
}

nn::TensorDecls DitTransformer::layer_tensors(const DitConfig& c, int64_t layer) {
  nn::TensorDecls t = embedder_tensors(c, layer);
  nn::append(t, block_tensors(c, layer));
  return t;
}

DitTransformer DitTransformer::load(const io::WeightStore& w, const DitConfig& c, const ShardGroups& shard,
                                   const Placement& place) {
  check_before_load<DitTransformer>(w, c, shard, FrameSharding::kImage, "DiT", {kBlocks}, "norm1.linear.weight");
  if (c.grid() * c.grid() < shard.sp_size())
    throw ConfigError("sp = " + std::to_string(shard.sp_size()) + " exceeds the " +
                      std::to_string(c.grid() * c.grid()) + " tokens of this model");

  const int64_t d = c.inner_dim();
  DitTransformer m;
  m.cfg_ = c;
  m.stage_ = Stage(shard, place, c.num_layers);
  m.patch_embed_ = nn::PatchEmbed::load(w, "pos_embed.proj.", c.patch_size, place);
  m.pos_embed_ = place.put(ops::sincos_pos_embed_2d(d, c.grid(), c.grid(), static_cast<double>(c.grid()), 1.0));
  m.final_layer_ = nn::FinalLayer::load(w, kFinalLayer, place);
  // PipeFusion: a stage holds its own blocks only, and the last one also
  // block 0's embedders (the final layer's conditioning, as diffusers').
  const parallel::PatchPipeline& pipe = m.stage_.pipeline();
  m.blocks_.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (!pipe.holds(i) && !(i == 0 && pipe.last_stage())) continue;
    const std::string b = block_prefix(i);
    DitBlock& k = m.blocks_[i];
    k.timestep = nn::TimestepEmbedding::load(w, b + "norm1.emb.timestep_embedder.", place);
    k.label = nn::LabelEmbedding::load(w, b + "norm1.emb.class_embedder.embedding_table.weight", place);
    if (!pipe.holds(i)) continue;
    k.modulation = nn::AdaLnZero::load(w, b + "norm1.linear.", d, shard.tp, place);
    k.body = nn::TransformerBlock::load(w, b, block_dims(c), shard, place);
  }
  return m;
}

Tensor DitTransformer::conditioning(size_t i, const Tensor& t_emb, const std::vector<int64_t>& labels) const {
  const DitBlock& k = blocks_[i];
  Tensor cond = k.timestep(t_emb);  // TimestepEmbedding(t_emb) + class embedding, (B, D)
  ops::add_(cond, k.label(labels));
  return cond;
}

Tensor DitTransformer::forward(const Tensor& x, const std::vector<float>& timesteps,
                               const std::vector<int64_t>& labels, pab::BroadcastCache* pab,
                               parallel::StaleKeyValues* stale_kv, pab::StepCache* step_cache) const {
  const DitConfig& c = cfg_;
  const int64_t bsz = x.dim(0), n = c.grid() * c.grid(), d = c.inner_dim();
  if (x.ndim() != 4 || x.dim(1) != c.in_channels || x.dim(2) != c.sample_size || x.dim(3) != c.sample_size)
    throw RuntimeFailure("DiT forward: latents " + shape_str(x.shape()) + " do not match the model's [B, " +
                         std::to_string(c.in_channels) + ", " + std::to_string(c.sample_size) + ", " +
                         std::to_string(c.sample_size) + "]");
  if (static_cast<int64_t>(timesteps.size()) != bsz || static_cast<int64_t>(labels.size()) != bsz)
    throw RuntimeFailure("DiT forward: batch of " + std::to_string(bsz) + " latents with " +
                         std::to_string(timesteps.size()) + " timesteps and " + std::to_string(labels.size()) +
                         " labels");
  for (int64_t l : labels)
    if (l < 0 || l > c.num_classes)
      throw RuntimeFailure("DiT forward: class label " + std::to_string(l) + " outside [0, " +
                           std::to_string(c.num_classes) + "]");
  const parallel::Range layers = stage_.layers();
  // (B, 256) sinusoids (downscale_freq_shift 1), computed on the host (tiny) and moved once per forward.
  const Tensor t_emb = nn::TimestepEmbedding::sinusoid(timesteps, 1.0f, stage_.place());
  Tensor patched;  // (B, N, C*p*p) the first stage's patchified latents
  if (stage_.pipeline().first_stage()) patched = patch_embed_.patches(x);
  // (B, 6D) per block of this stage, once per forward (not per patch).
  std::vector<Tensor> mods;
  for (int64_t bi = layers.begin; bi < layers.end; ++bi) {
    const size_t i = static_cast<size_t>(bi);
    mods.push_back(blocks_[i].modulation(conditioning(i, t_emb, labels)));
  }
  Tensor final_shift;  // (B, 2D) the final layer's modulation, once per forward from block 0's conditioning

  Stage::Pass pass;
  pass.embed = [&](parallel::Range rows) {
    return patch_embed_(parallel::token_rows(patched, rows), pos_embed_.slice0(rows.begin, rows.end));
  };
  pass.layers = [&](Tensor& hidden, parallel::Range patch, parallel::Range span, const Stage::Samples& samples) {
    for (int64_t bi = span.begin; bi < span.end; ++bi) {
      const nn::AttentionCore core = stage_.core(bi, patch, n, c.head_dim, stale_kv);
      const nn::Modulation mod(ops::sample_rows(mods[static_cast<size_t>(bi - layers.begin)], samples), d);
      blocks_[static_cast<size_t>(bi)].body.forward(hidden, mod,
                                                    {&core, nullptr, nullptr, nullptr, {pab, static_cast<int>(bi)}});
    }
  };
  pass.teacache_signal = [&](const Tensor& hidden) {  // block 0's AdaLayerNormZero output
    return Stage::Pass::Signal{blocks_[0].body.attention_input(hidden, nn::Modulation(mods[0], d)), true};
  };
  pass.head = [&](const Tensor& hidden, parallel::Range) {
    if (!final_shift.defined()) final_shift = final_layer_.shift_scale(conditioning(0, t_emb, labels));
    return final_layer_(hidden, final_shift);
  };
  const Tensor out = stage_.run(n, bsz, d, c.patch_size * c.patch_size * c.out_channels, stale_kv, pass, step_cache);
  return ops::unpatchify(out, c.grid(), c.grid(), c.patch_size, c.out_channels).to(Device::kCPU, DType::kF32);
}

}  // namespace ditgen::models
