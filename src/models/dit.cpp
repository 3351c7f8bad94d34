// DiTTransformer2DModel forward, following diffusers (not the original DiT
// repository): per block, conditioning = TimestepEmbedding(sinusoid with
// flip_sin_to_cos, downscale_freq_shift=1) + LabelEmbedding; adaLN-Zero
// modulation chunks (shift, scale, gate) x (attention, MLP); attention branch
// LayerNorm eps 1e-6, MLP branch eps from config; the final layer is
// modulated by block 0's conditioning.
#include "models/dit.h"

#include <cmath>
#include <cstring>

#include "parallel/sequence_attention.h"
#include "parallel/shard.h"
#include "parallel/tensor_parallel.h"
#include "parallel/token_shard.h"
#include "io/model_dir.h"
#include "ops/ops.h"
#include "util/error.h"
#include "util/profile.h"

namespace ditgen::models {

namespace {

constexpr int64_t kTimestepChannels = 256;  // Timesteps(num_channels=256) in CombinedTimestepLabelEmbeddings
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

DitTransformer DitTransformer::load(const io::WeightStore& w, const DitConfig& c, const ShardGroups& shard,
                                   const Placement& place) {
  const int64_t d = c.inner_dim(), f = c.ff_inner_dim, p = c.patch_size;
  const int tp = shard.tp_size(), sp = shard.sp_size();
  // The layout was validated against the config before loading; these
  // guard the slicing arithmetic below.
  if (c.num_heads % tp || f % tp)
    throw ConfigError("tp = " + std::to_string(tp) + " must divide num_attention_heads " +
                      std::to_string(c.num_heads) + " and the MLP width " + std::to_string(f));
  if (sp > 1 && shard.dsp())
    throw ConfigError("sp_mode dsp shards the frames of a video; this is an image model (use ulysses or ring)");
  if (!shard.ring() && (c.num_heads / tp) % sp)
    throw ConfigError("ulysses: sp * tp = " + std::to_string(sp * tp) + " must divide num_attention_heads " +
                      std::to_string(c.num_heads));
  if (c.grid() * c.grid() < sp)
    throw ConfigError("sp = " + std::to_string(sp) + " exceeds the " + std::to_string(c.grid() * c.grid()) +
                      " tokens of this model");
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
  m.shard_ = shard;
  m.seq_attn_ = parallel::SequenceParallelAttention(shard.sp, shard.sequence_mode(), place.dtype, shard.sp_split);
  m.place_ = place;
  // Every weight goes to the model's device and dtype once, here; on the
  // CPU the GEMM weights (matrix) take the compute dtype (as stored,
  // borrowed from the mmapped file, or packed: models/placement.h), and the
  // rest (put) becomes float32.
  auto whole = [&](const std::string& name) { return place.put(w.load(name)); };
  auto matrix = [&](const std::string& name) { return load_matrix(w, name, place); };
  m.patch_w = matrix("pos_embed.proj.weight").reshape({d, c.in_channels * p * p});
  m.patch_b = whole("pos_embed.proj.bias");
  m.pos_embed = place.put(ops::sincos_pos_embed_2d(d, c.grid(), c.grid(), static_cast<double>(c.grid()), 1.0));
  m.final_ada_w = matrix("proj_out_1.weight");
  m.final_ada_b = whole("proj_out_1.bias");
  m.final_w = matrix("proj_out_2.weight");
  m.final_b = whole("proj_out_2.bias");
  // tp: this rank's rows of the column-split layers (its heads' q/k/v and
  // adaLN columns, its MLP features; borrowed from the file, zero copy) and
  // the matching input columns of the row-split ones (parallel/tensor_parallel.h).
  const parallel::Range heads = parallel::column_split(d, shard.tp), feats = parallel::column_split(f, shard.tp);
  auto rows = [&](const std::string& name, parallel::Range r, int64_t offset = 0) {
    Tensor t = w.load_rows(name, offset + r.begin, offset + r.end);
    return t.ndim() == 2 ? place_matrix(w, name, t, place) : place.put(t);  // a weight's rows, or a bias's
  };
  auto cols = [&](const std::string& name, parallel::Range r) {
    return place_matrix(w, name, tp == 1 ? w.load(name) : w.load_cols(name, r.begin, r.end), place);
  };
  // PipeFusion: a stage holds its own blocks only, and the last one also
  // block 0's embedder (the final layer's conditioning, as diffusers').
  m.pipe_ = parallel::PatchPipeline(shard.pp, c.num_layers, shard.pipeline);
  m.blocks.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (!m.pipe_.holds(i) && !(i == 0 && m.pipe_.last_stage())) continue;
    const std::string b = "transformer_blocks." + std::to_string(i) + ".";
    DitBlock& k = m.blocks[i];
    k.t_linear1_w = matrix(b + "norm1.emb.timestep_embedder.linear_1.weight");
    k.t_linear1_b = whole(b + "norm1.emb.timestep_embedder.linear_1.bias");
    k.t_linear2_w = matrix(b + "norm1.emb.timestep_embedder.linear_2.weight");
    k.t_linear2_b = whole(b + "norm1.emb.timestep_embedder.linear_2.bias");
    k.class_table = whole(b + "norm1.emb.class_embedder.embedding_table.weight");
    if (!m.pipe_.holds(i)) continue;
    for (int chunk = 0; chunk < 6; ++chunk) {
      k.ada_w[chunk] = rows(b + "norm1.linear.weight", heads, chunk * d);
      k.ada_b[chunk] = rows(b + "norm1.linear.bias", heads, chunk * d);
    }
    k.q_w = rows(b + "attn1.to_q.weight", heads);
    k.q_b = rows(b + "attn1.to_q.bias", heads);
    k.k_w = rows(b + "attn1.to_k.weight", heads);
    k.k_b = rows(b + "attn1.to_k.bias", heads);
    k.v_w = rows(b + "attn1.to_v.weight", heads);
    k.v_b = rows(b + "attn1.to_v.bias", heads);
    k.out_w = cols(b + "attn1.to_out.0.weight", heads);
    k.out_b = whole(b + "attn1.to_out.0.bias");
    k.ff1_w = rows(b + "ff.net.0.proj.weight", feats);
    k.ff1_b = rows(b + "ff.net.0.proj.bias", feats);
    k.ff2_w = cols(b + "ff.net.2.weight", feats);
    k.ff2_b = whole(b + "ff.net.2.bias");
  }
  return m;
}

namespace {

// Conditioning of one block: TimestepEmbedding(t_emb) + class embedding, (B, D).
Tensor block_conditioning(const DitBlock& k, const Tensor& t_emb, const std::vector<int64_t>& labels) {
  Tensor h = ops::linear(t_emb, k.t_linear1_w, &k.t_linear1_b);
  ops::silu_(h);
  Tensor cond = ops::linear(h, k.t_linear2_w, &k.t_linear2_b);
  ops::add_(cond, ops::gather_rows(k.class_table, labels));
  return cond;
}

}  // namespace

Tensor DitTransformer::modulation(const DitBlock& blk, const Tensor& cond) const {
  const int64_t bsz = cond.dim(0), dl = cfg_.inner_dim() / shard_.tp_size();
  const Tensor act = ops::silu(cond);
  Tensor local = place_.empty({bsz, 6 * dl});  // this rank's columns of each chunk
  for (int chunk = 0; chunk < 6; ++chunk) ops::linear_into(act, blk.ada_w[chunk], &blk.ada_b[chunk], local, chunk * dl);
  return parallel::gather_chunk_columns(shard_.tp, local, 6);  // (B, 6D)
}

int64_t DitTransformer::comm_bytes() const {
  return (shard_.tp ? shard_.tp->bytes_sent() : 0) + (shard_.sp ? shard_.sp->bytes_sent() : 0);
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
  // (B, 256) sinusoids, computed on the host (tiny) and moved once per forward.
  const Tensor t_emb = place_.put(ops::timestep_embedding(timesteps, kTimestepChannels, true, 1.0f));
  Tensor patched;  // (B, N, C*p*p) the first stage's patchified latents
  if (pipe_.first_stage()) patched = ops::patchify(place_.put(x), c.patch_size);
  Tensor out;        // (B, N, p*p*out), collected by the last stage
  Tensor final_mod;  // (B, 2D) the final layer's modulation (last stage)
  // (B, 6D) per block of this stage, once per forward (not per patch):
  // shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp (D each).
  std::vector<Tensor> mods;
  {
    profile::ScopedTimer t("adaln");
    for (int64_t bi = pipe_.layers().begin; bi < pipe_.layers().end; ++bi) {
      const DitBlock& blk = blocks[static_cast<size_t>(bi)];
      mods.push_back(modulation(blk, block_conditioning(blk, t_emb, labels)));
    }
  }

  for (const parallel::Range& patch : patches) {
    const parallel::Range rows = parallel::patch_rows(patch, shard_.sp_split, shard_.sp_size(), shard_.sp_rank());
    Tensor hidden;  // (B, P, D) residual stream of these tokens
    if (pipe_.first_stage()) {
      profile::ScopedTimer t("patch_embed");  // a stride-p conv as patchify + linear, plus positions
      hidden = ops::linear(parallel::token_rows(patched, rows), patch_w, &patch_b);
      ops::add_broadcast_(hidden, pos_embed.slice0(rows.begin, rows.end));
    } else {
      hidden = place_.empty({bsz, rows.size(), c.inner_dim()});
      pipe_.receive(hidden);
    }
    run_blocks(hidden, patch, rows.size(), n, mods, pab, stale_kv);
    if (!pipe_.last_stage()) {
      pipe_.send(hidden);
      continue;
    }
    profile::ScopedTimer t("final_layer");
    if (!final_mod.defined())  // once per forward: (B, 2D) shift, scale from block 0's embedder (as diffusers)
      final_mod = ops::linear(ops::silu(block_conditioning(blocks[0], t_emb, labels)), final_ada_w, &final_ada_b);
    Tensor normed = place_.empty(hidden.shape());
    ops::layer_norm_modulate(hidden, final_mod, 0, c.inner_dim(), kAdaNormEps, normed);
    // (B, P, p*p*out), gathered over sp: every rank needs the whole prediction.
    pipe_.collect_output(shard_.sp, shard_.sp_split, ops::linear(normed, final_w, &final_b), patch, n, out);
  }
  pipe_.share_output(out, {bsz, n, c.patch_size * c.patch_size * c.out_channels}, place_.device, place_.dtype);
  return ops::unpatchify(out, c.grid(), c.grid(), c.patch_size, c.out_channels).to(Device::kCPU, DType::kF32);
}

void DitTransformer::run_blocks(Tensor& hidden, parallel::Range patch, int64_t p, int64_t n,
                                const std::vector<Tensor>& mods, pab::BroadcastCache* pab,
                                parallel::StaleKeyValues* stale_kv) const {
  const DitConfig& c = cfg_;
  const int64_t bsz = hidden.dim(0), d = c.inner_dim(), dl = d / shard_.tp_size();
  Tensor normed = place_.empty({bsz, p, d});  // (B, P, D) modulated LayerNorm output
  Tensor q = place_.empty({bsz, p, dl}), k = place_.empty({bsz, p, dl}), v = place_.empty({bsz, p, dl});
  Tensor attn = place_.empty({bsz, p, dl});  // (B, P, Dl) attention of this rank's heads

  for (int64_t bi = pipe_.layers().begin; bi < pipe_.layers().end; ++bi) {
    const DitBlock& blk = blocks[static_cast<size_t>(bi)];
    const Tensor& mod = mods[static_cast<size_t>(bi - pipe_.layers().begin)];  // (B, 6D)
    const int block = static_cast<int>(bi);
    Tensor attn_out;  // (B, P, D) attention branch before its gate
    if (pab && pab->reuse(block, pab::Kind::kSpatial)) {
      attn_out = pab->cached(block, pab::Kind::kSpatial);
      pab->reused(block, pab::Kind::kSpatial);
    } else {
      const int64_t sent_before = comm_bytes();
      {
        profile::ScopedTimer t("layer_norm");
        ops::layer_norm_modulate(hidden, mod, 0, d, kAdaNormEps, normed);
      }
      {
        profile::ScopedTimer t("qkv_proj");
        ops::linear_into(normed, blk.q_w, &blk.q_b, q, 0);
        ops::linear_into(normed, blk.k_w, &blk.k_b, k, 0);
        ops::linear_into(normed, blk.v_w, &blk.v_b, v, 0);
      }
      {
        profile::ScopedTimer t("attention");
        pipe_.attention(bi, patch, n, q, k, v, c.head_dim, attn, stale_kv, seq_attn_);
      }
      {
        profile::ScopedTimer t("out_proj");
        attn_out = parallel::row_parallel_linear(shard_.tp, attn, blk.out_w, blk.out_b);
      }
      if (pab) pab->computed(block, pab::Kind::kSpatial, attn_out, comm_bytes() - sent_before);
    }
    {
      profile::ScopedTimer t("residual");
      ops::gated_residual_(hidden, attn_out, mod, 2 * d);
    }
    Tensor ff_out;  // (B, P, D) MLP branch before its gate
    if (pab && pab->reuse(block, pab::Kind::kMlp)) {
      ff_out = pab->cached(block, pab::Kind::kMlp);
      pab->reused(block, pab::Kind::kMlp);
    } else {
      const int64_t sent_before = comm_bytes();
      {
        profile::ScopedTimer t("layer_norm");
        ops::layer_norm_modulate(hidden, mod, 3 * d, 4 * d, c.norm_eps, normed);
      }
      Tensor ff;
      {
        profile::ScopedTimer t("mlp_in");  // with its GELU, fused on the CPU
        ff = ops::linear(normed, blk.ff1_w, &blk.ff1_b, ops::Activation::kGeluTanh);
      }
      {
        profile::ScopedTimer t("mlp_out");
        ff_out = parallel::row_parallel_linear(shard_.tp, ff, blk.ff2_w, blk.ff2_b);
      }
      if (pab) pab->computed(block, pab::Kind::kMlp, ff_out, comm_bytes() - sent_before);
    }
    {
      profile::ScopedTimer t("residual");
      ops::gated_residual_(hidden, ff_out, mod, 5 * d);
    }
  }
}

}  // namespace ditgen::models
