// DiTTransformer2DModel forward, following diffusers (not the original DiT
// repository): per block, conditioning = TimestepEmbedding(sinusoid with
// flip_sin_to_cos, downscale_freq_shift=1) + LabelEmbedding; adaLN-Zero
// modulation chunks (shift, scale, gate) x (attention, MLP); attention branch
// LayerNorm eps 1e-6, MLP branch eps from config; the final layer is
// modulated by block 0's conditioning.
#include "models/dit.h"

#include <cmath>

#include "io/model_dir.h"
#include "ops/ops.h"
#include "util/error.h"
#include "util/profile.h"

namespace ditgen::models {

namespace {

constexpr int64_t kTimestepChannels = 256;  // Timesteps(num_channels=256) in CombinedTimestepLabelEmbeddings
constexpr float kAdaNormEps = 1e-6f;        // AdaLayerNormZero / norm_out eps

void require(bool ok, const std::string& path, const std::string& msg) {
  if (!ok) throw ModelError(path + ": " + msg);
}

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

DitTransformer DitTransformer::load(const io::WeightStore& w, const DitConfig& c) {
  const int64_t d = c.inner_dim(), f = c.ff_inner_dim, p = c.patch_size;
  // Validate every name and shape before loading anything.
  std::vector<std::pair<std::string, Shape>> expected = {
      {"pos_embed.proj.weight", {d, c.in_channels, p, p}}, {"pos_embed.proj.bias", {d}},
      {"proj_out_1.weight", {2 * d, d}},                    {"proj_out_1.bias", {2 * d}},
      {"proj_out_2.weight", {p * p * c.out_channels, d}},   {"proj_out_2.bias", {p * p * c.out_channels}}};
  auto block_tensors = [&](int64_t i) {
    const std::string b = "transformer_blocks." + std::to_string(i) + ".";
    return std::vector<std::pair<std::string, Shape>>{
        {b + "norm1.emb.timestep_embedder.linear_1.weight", {d, kTimestepChannels}},
        {b + "norm1.emb.timestep_embedder.linear_1.bias", {d}},
        {b + "norm1.emb.timestep_embedder.linear_2.weight", {d, d}},
        {b + "norm1.emb.timestep_embedder.linear_2.bias", {d}},
        {b + "norm1.emb.class_embedder.embedding_table.weight", {c.num_classes + 1, d}},
        {b + "norm1.linear.weight", {6 * d, d}},
        {b + "norm1.linear.bias", {6 * d}},
        {b + "attn1.to_q.weight", {d, d}},
        {b + "attn1.to_q.bias", {d}},
        {b + "attn1.to_k.weight", {d, d}},
        {b + "attn1.to_k.bias", {d}},
        {b + "attn1.to_v.weight", {d, d}},
        {b + "attn1.to_v.bias", {d}},
        {b + "attn1.to_out.0.weight", {d, d}},
        {b + "attn1.to_out.0.bias", {d}},
        {b + "ff.net.0.proj.weight", {f, d}},
        {b + "ff.net.0.proj.bias", {f}},
        {b + "ff.net.2.weight", {d, f}},
        {b + "ff.net.2.bias", {d}}};
  };
  for (int64_t i = 0; i < c.num_layers; ++i)
    for (auto& e : block_tensors(i)) expected.push_back(std::move(e));
  for (auto& [name, shape] : expected) w.expect(name, shape);
  if (w.contains("transformer_blocks." + std::to_string(c.num_layers) + ".norm1.linear.weight"))
    throw ModelError(w.dir() + ": holds more transformer_blocks than num_layers = " + std::to_string(c.num_layers) +
                     " in config.json");

  DitTransformer m;
  m.cfg_ = c;
  m.patch_w = w.load("pos_embed.proj.weight").reshape({d, c.in_channels * p * p});
  m.patch_b = w.load("pos_embed.proj.bias");
  m.pos_embed = ops::sincos_pos_embed_2d(d, c.grid(), c.grid(), static_cast<double>(c.grid()), 1.0);
  m.final_ada_w = w.load("proj_out_1.weight");
  m.final_ada_b = w.load("proj_out_1.bias");
  m.final_w = w.load("proj_out_2.weight");
  m.final_b = w.load("proj_out_2.bias");
  m.blocks.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string b = "transformer_blocks." + std::to_string(i) + ".";
    DitBlock& k = m.blocks[i];
    k.t_linear1_w = w.load(b + "norm1.emb.timestep_embedder.linear_1.weight");
    k.t_linear1_b = w.load(b + "norm1.emb.timestep_embedder.linear_1.bias");
    k.t_linear2_w = w.load(b + "norm1.emb.timestep_embedder.linear_2.weight");
    k.t_linear2_b = w.load(b + "norm1.emb.timestep_embedder.linear_2.bias");
    k.class_table = w.load(b + "norm1.emb.class_embedder.embedding_table.weight");
    k.ada_w = w.load(b + "norm1.linear.weight");
    k.ada_b = w.load(b + "norm1.linear.bias");
    k.q_w = w.load(b + "attn1.to_q.weight");
    k.q_b = w.load(b + "attn1.to_q.bias");
    k.k_w = w.load(b + "attn1.to_k.weight");
    k.k_b = w.load(b + "attn1.to_k.bias");
    k.v_w = w.load(b + "attn1.to_v.weight");
    k.v_b = w.load(b + "attn1.to_v.bias");
    k.out_w = w.load(b + "attn1.to_out.0.weight");
    k.out_b = w.load(b + "attn1.to_out.0.bias");
    k.ff1_w = w.load(b + "ff.net.0.proj.weight");
    k.ff1_b = w.load(b + "ff.net.0.proj.bias");
    k.ff2_w = w.load(b + "ff.net.2.weight");
    k.ff2_b = w.load(b + "ff.net.2.bias");
  }
  return m;
}

namespace {

// Conditioning of one block: TimestepEmbedding(t_emb) + class embedding, (B, D).
Tensor block_conditioning(const DitBlock& k, const Tensor& t_emb, const std::vector<int64_t>& labels) {
  Tensor h = ops::linear(t_emb, k.t_linear1_w, &k.t_linear1_b);
  ops::silu_(h);
  Tensor cond = ops::linear(h, k.t_linear2_w, &k.t_linear2_b);
  const int64_t d = cond.dim(1);
  for (size_t i = 0; i < labels.size(); ++i) {
    const float* row = k.class_table.data() + labels[i] * d;
    float* dst = cond.data() + static_cast<int64_t>(i) * d;
    for (int64_t j = 0; j < d; ++j) dst[j] += row[j];
  }
  return cond;
}

}  // namespace

Tensor DitTransformer::forward(const Tensor& x, const std::vector<float>& timesteps,
                               const std::vector<int64_t>& labels) const {
  const DitConfig& c = cfg_;
  const int64_t bsz = x.dim(0), d = c.inner_dim(), n = c.grid() * c.grid();
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

  // Patch embedding (a stride-p conv as patchify + linear) plus positions.
  Tensor hidden;  // (B, N, D) residual stream
  {
    profile::ScopedTimer t("patch_embed");
    hidden = ops::linear(ops::patchify(x, c.patch_size), patch_w, &patch_b);
    for (int64_t b = 0; b < bsz; ++b)
      for (int64_t i = 0; i < n * d; ++i) hidden.data()[b * n * d + i] += pos_embed.data()[i];
  }
  const Tensor t_emb = ops::timestep_embedding(timesteps, kTimestepChannels, true, 1.0f);  // (B, 256)

  Tensor normed = Tensor::empty({bsz, n, d});                 // (B, N, D) modulated LayerNorm output
  Tensor q = Tensor::empty({bsz, n, d}), k = Tensor::empty({bsz, n, d}), v = Tensor::empty({bsz, n, d});
  Tensor attn = Tensor::empty({bsz, n, d});                   // (B, N, D) attention before to_out
  Tensor block0_cond;                                         // (B, D) for the final layer
  ops::AttentionArgs args;
  args.q = q.data(), args.k = k.data(), args.v = v.data(), args.out = attn.data();
  args.batch = bsz, args.heads = c.num_heads, args.q_len = n, args.kv_len = n, args.head_dim = c.head_dim;
  args.q_row_stride = args.k_row_stride = args.v_row_stride = args.out_row_stride = d;
  args.q_batch_stride = args.k_batch_stride = args.v_batch_stride = args.out_batch_stride = n * d;
  args.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  for (size_t bi = 0; bi < blocks.size(); ++bi) {
    const DitBlock& blk = blocks[bi];
    Tensor mod;  // (B, 6D): shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp
    {
      profile::ScopedTimer t("adaln");
      Tensor cond = block_conditioning(blk, t_emb, labels);
      if (bi == 0) block0_cond = cond;
      mod = ops::linear(ops::silu(cond), blk.ada_w, &blk.ada_b);
    }
    const float* m = mod.data();
    const int64_t ms = 6 * d;
    {
      profile::ScopedTimer t("layer_norm");
      ops::layer_norm_modulate(hidden, m, m + d, ms, kAdaNormEps, normed);
    }
    {
      profile::ScopedTimer t("qkv_proj");
      ops::linear_into(normed, blk.q_w, &blk.q_b, q.data(), d);
      ops::linear_into(normed, blk.k_w, &blk.k_b, k.data(), d);
      ops::linear_into(normed, blk.v_w, &blk.v_b, v.data(), d);
    }
    {
      profile::ScopedTimer t("attention");
      ops::attention(args);
    }
    Tensor attn_out;
    {
      profile::ScopedTimer t("out_proj");
      attn_out = ops::linear(attn, blk.out_w, &blk.out_b);
    }
    {
      profile::ScopedTimer t("residual");
      ops::gated_residual_(hidden, attn_out, m + 2 * d, ms);
    }
    {
      profile::ScopedTimer t("layer_norm");
      ops::layer_norm_modulate(hidden, m + 3 * d, m + 4 * d, ms, c.norm_eps, normed);
    }
    Tensor ff;
    {
      profile::ScopedTimer t("mlp_in");
      ff = ops::linear(normed, blk.ff1_w, &blk.ff1_b);
    }
    {
      profile::ScopedTimer t("gelu");
      ops::gelu_tanh_(ff);
    }
    Tensor ff_out;
    {
      profile::ScopedTimer t("mlp_out");
      ff_out = ops::linear(ff, blk.ff2_w, &blk.ff2_b);
    }
    {
      profile::ScopedTimer t("residual");
      ops::gated_residual_(hidden, ff_out, m + 5 * d, ms);
    }
  }

  profile::ScopedTimer t("final_layer");
  Tensor final_mod = ops::linear(ops::silu(block0_cond), final_ada_w, &final_ada_b);  // (B, 2D): shift, scale
  ops::layer_norm_modulate(hidden, final_mod.data(), final_mod.data() + d, 2 * d, kAdaNormEps, normed);
  Tensor out = ops::linear(normed, final_w, &final_b);  // (B, N, p*p*out)
  return ops::unpatchify(out, c.grid(), c.grid(), c.patch_size, c.out_channels);
}

}  // namespace ditgen::models
