// DiTTransformer2DModel forward, following diffusers (not the original DiT
// repository): per block, conditioning = TimestepEmbedding(sinusoid with
// flip_sin_to_cos, downscale_freq_shift=1) + LabelEmbedding; adaLN-Zero
// modulation chunks (shift, scale, gate) x (attention, MLP); attention branch
// LayerNorm eps 1e-6, MLP branch eps from config; the final layer is
// modulated by block 0's conditioning.
#include "models/dit.h"

#include "io/model_dir.h"
#include "parallel/shard.h"
#include "parallel/token_shard.h"
#include "ops/ops.h"
#include "util/error.h"

namespace ditgen::models {

namespace {

constexpr float kAdaNormEps = 1e-6f;        // AdaLayerNormZero / norm_out eps

}  // namespace

DitConfig DitConfig::from_json(const nlohmann::json& cfg, const std::string& path) {
  using io::get_int;
  using io::get_int_or;
  const std::string cls = io::get_string_or(cfg, "_class_name", "", path);
  const std::string norm_type = io::get_string_or(cfg, "norm_type", "ada_norm_zero", path);
  require(cls == "DiTTransformer2DModel" || (cls == "Transformer2DModel" && norm_type == "ada_norm_zero"), path,
          "_class_name: expected DiTTransformer2DModel (or Transformer2DModel with norm_type ada_norm_zero), got '" +
              cls + "' with norm_type '" + norm_type + "'");
  require(norm_type == "ada_norm_zero", path, "norm_type: expected ada_norm_zero, got '" + norm_type + "'");
  DitConfig c;
  c.num_layers = get_int(cfg, "num_layers", path);
  c.num_heads = get_int(cfg, "num_attention_heads", path);
  c.head_dim = get_int(cfg, "attention_head_dim", path);
  c.in_channels = get_int(cfg, "in_channels", path);
  c.out_channels = cfg.contains("out_channels") && !cfg["out_channels"].is_null() ? get_int(cfg, "out_channels", path)
                                                                                 : c.in_channels;
  c.sample_size = get_int(cfg, "sample_size", path);
  c.patch_size = get_int(cfg, "patch_size", path);
  c.num_classes = get_int(cfg, "num_embeds_ada_norm", path);
  c.norm_eps = static_cast<float>(io::get_number_or(cfg, "norm_eps", 1e-5, path));
  c.ff_inner_dim = 4 * c.inner_dim();
  if (cfg.contains("ff_inner_dim") && !cfg["ff_inner_dim"].is_null()) c.ff_inner_dim = get_int(cfg, "ff_inner_dim", path);
  for (auto [key, v] : {std::pair{"num_layers", c.num_layers}, {"num_attention_heads", c.num_heads},
                        {"attention_head_dim", c.head_dim}, {"in_channels", c.in_channels},
                        {"out_channels", c.out_channels}, {"sample_size", c.sample_size},
                        {"patch_size", c.patch_size}, {"num_embeds_ada_norm", c.num_classes}})
    require(v > 0, path, std::string(key) + ": expected a positive integer, got " + std::to_string(v));
  require(c.sample_size % c.patch_size == 0, path, "sample_size " + std::to_string(c.sample_size) +
                                                       " is not divisible by patch_size " +
                                                       std::to_string(c.patch_size));
  require(c.inner_dim() % 4 == 0, path, "num_attention_heads * attention_head_dim must be divisible by 4 "
                                        "(2-D sin-cos position embedding)");
  const std::string act = io::get_string_or(cfg, "activation_fn", "gelu-approximate", path);
  if (act != "gelu-approximate") throw ModelError(path + ": activation_fn: not supported yet: '" + act + "'");
  if (io::get_bool_or(cfg, "norm_elementwise_affine", false, path))
    throw ModelError(path + ": norm_elementwise_affine: not supported yet: true (DiT uses false)");
  if (!io::get_bool_or(cfg, "attention_bias", true, path))
    throw ModelError(path + ": attention_bias: not supported yet: false (DiT uses true)");
  return c;
}

namespace {

constexpr const char* kBlocks = "transformer_blocks";

nn::TransformerBlockDims block_dims(const DitConfig& c) {
  const int64_t d = c.inner_dim();
  nn::TransformerBlockDims b;
  b.self = {c.num_heads, c.head_dim, d, d};
  b.ff = {d, c.ff_inner_dim, nn::FeedForwardActivation::kGeluTanh};
  b.attention_norm_eps = kAdaNormEps;  // AdaLayerNormZero's
  b.mlp_norm_eps = c.norm_eps;
  return b;
}

std::string block_prefix(int64_t i) { return std::string(kBlocks) + "." + std::to_string(i) + "."; }

}  // namespace

DitTransformer DitTransformer::load(const io::WeightStore& w, const DitConfig& c, const ShardGroups& shard,
                                   const Placement& place) {
  const int64_t d = c.inner_dim(), p = c.patch_size, out = p * p * c.out_channels;
  check_shard_fits(shard, c.num_heads, c.ff_inner_dim, /*video=*/false);
  if (c.grid() * c.grid() < shard.sp_size())
    throw ConfigError("sp = " + std::to_string(shard.sp_size()) + " exceeds the " +
                      std::to_string(c.grid() * c.grid()) + " tokens of this model");
  // Validate every name and shape before loading anything.
  nn::TensorDecls expected = nn::PatchEmbed::tensors("pos_embed.proj.", d, c.in_channels, p);
  nn::append(expected, nn::FinalLayer::linear_modulated_tensors("proj_out_1.", "proj_out_2.", d, out));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string b = block_prefix(i);
    nn::append(expected, nn::TimestepEmbedding::tensors(b + "norm1.emb.timestep_embedder.", d));
    nn::append(expected, nn::LabelEmbedding::tensors(b + "norm1.emb.class_embedder.embedding_table.weight",
                                                     c.num_classes, d));
    nn::append(expected, nn::AdaLnZero::tensors(b + "norm1.linear.", d));
    nn::append(expected, nn::TransformerBlock::tensors(b, block_dims(c)));
  }
  nn::check_tensors(w, expected);
  nn::reject_extra_layers(w, kBlocks, c.num_layers, "norm1.linear.weight");

  DitTransformer m;
  m.cfg_ = c;
  m.shard_ = shard;
  m.seq_attn_ = parallel::SequenceParallelAttention(shard.sp, shard.sequence_mode(), place.dtype, shard.sp_split);
  m.place_ = place;
  m.patch_embed_ = nn::PatchEmbed::load(w, "pos_embed.proj.", p, place);
  m.pos_embed_ = place.put(ops::sincos_pos_embed_2d(d, c.grid(), c.grid(), static_cast<double>(c.grid()), 1.0));
  m.final_layer_ = nn::FinalLayer::load_linear_modulated(w, "proj_out_1.", "proj_out_2.", place);
  // PipeFusion: a stage holds its own blocks only, and the last one also
  // block 0's embedders (the final layer's conditioning, as diffusers').
  m.pipe_ = parallel::PatchPipeline(shard.pp, c.num_layers, shard.pipeline);
  m.blocks_.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (!m.pipe_.holds(i) && !(i == 0 && m.pipe_.last_stage())) continue;
    const std::string b = block_prefix(i);
    DitBlock& k = m.blocks_[i];
    k.timestep = nn::TimestepEmbedding::load(w, b + "norm1.emb.timestep_embedder.", place);
    k.label = nn::LabelEmbedding::load(w, b + "norm1.emb.class_embedder.embedding_table.weight", place);
    if (!m.pipe_.holds(i)) continue;
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
                               parallel::StaleKeyValues* stale_kv) const {
  const DitConfig& c = cfg_;
  const int64_t bsz = x.dim(0), n = c.grid() * c.grid();
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
  // The tokens that go through the blocks together: the whole image, or
  // under PipeFusion each patch in turn (parallel/patch_pipeline.h); of
  // each, this rank's sp shard.
  const std::vector<parallel::Range> patches = pipe_.patches(n, stale_kv);
  // (B, 256) sinusoids (downscale_freq_shift 1), computed on the host (tiny) and moved once per forward.
  const Tensor t_emb = nn::TimestepEmbedding::sinusoid(timesteps, 1.0f, place_);
  Tensor patched;  // (B, N, C*p*p) the first stage's patchified latents
  if (pipe_.first_stage()) patched = patch_embed_.patches(x);
  Tensor out;          // (B, N, p*p*out), collected by the last stage
  Tensor final_shift;  // (B, 2D) the final layer's modulation (last stage)
  // (B, 6D) per block of this stage, once per forward (not per patch).
  std::vector<Tensor> mods;
  for (int64_t bi = pipe_.layers().begin; bi < pipe_.layers().end; ++bi) {
    const size_t i = static_cast<size_t>(bi);
    mods.push_back(blocks_[i].modulation(conditioning(i, t_emb, labels)));
  }

  for (const parallel::Range& patch : patches) {
    const parallel::Range rows = parallel::patch_rows(patch, shard_.sp_split, shard_.sp_size(), shard_.sp_rank());
    Tensor hidden;  // (B, P, D) residual stream of these tokens
    if (pipe_.first_stage()) {
      hidden = patch_embed_(parallel::token_rows(patched, rows), pos_embed_.slice0(rows.begin, rows.end));
    } else {
      hidden = place_.empty({bsz, rows.size(), c.inner_dim()});
      pipe_.receive(hidden);
    }
    run_blocks(hidden, patch, n, mods, pab, stale_kv);
    if (!pipe_.last_stage()) {
      pipe_.send(hidden);
      continue;
    }
    if (!final_shift.defined())  // once per forward, from block 0's conditioning (as diffusers)
      final_shift = final_layer_.shift_scale(conditioning(0, t_emb, labels));
    // (B, P, p*p*out), gathered over sp: every rank needs the whole prediction.
    pipe_.collect_output(shard_.sp, shard_.sp_split, final_layer_(hidden, final_shift), patch, n, out);
  }
  pipe_.share_output(out, {bsz, n, c.patch_size * c.patch_size * c.out_channels}, place_.device, place_.dtype);
  return ops::unpatchify(out, c.grid(), c.grid(), c.patch_size, c.out_channels).to(Device::kCPU, DType::kF32);
}

void DitTransformer::run_blocks(Tensor& hidden, parallel::Range patch, int64_t n, const std::vector<Tensor>& mods,
                                pab::BroadcastCache* pab, parallel::StaleKeyValues* stale_kv) const {
  for (int64_t bi = pipe_.layers().begin; bi < pipe_.layers().end; ++bi) {
    const nn::Modulation mod(mods[static_cast<size_t>(bi - pipe_.layers().begin)], cfg_.inner_dim());  // (B, 6D)
    const nn::AttentionCore core = nn::sequence_core(pipe_, bi, patch, n, cfg_.head_dim, stale_kv, seq_attn_);
    blocks_[static_cast<size_t>(bi)].body.forward(hidden, mod, {&core, nullptr, nullptr, nullptr, {pab, static_cast<int>(bi)}});
  }
}

}  // namespace ditgen::models
