// The adaLN-single block, following diffusers' BasicTransformerBlock
// (norm_type ada_norm_single): modulation = scale_shift_table[None] +
// timestep.reshape(B, 6, D), chunked shift_msa, scale_msa, gate_msa,
// shift_mlp, scale_mlp, gate_mlp; norm1 and norm2 are LayerNorms without
// affine at norm_eps; the cross-attention sees the residual stream as is.
#include "models/ada_single_block.h"

#include <stdexcept>

#include "ops/ops.h"
#include "parallel/sequence_attention.h"
#include "parallel/tensor_parallel.h"
#include "util/error.h"
#include "util/profile.h"

namespace ditgen::models {

namespace {

// Column offsets of the six chunks in a (B, 6D) modulation, in units of D.
enum Chunk { kShiftMsa = 0, kScaleMsa = 1, kGateMsa = 2, kShiftMlp = 3, kScaleMlp = 4, kGateMlp = 5 };

}  // namespace

std::vector<std::pair<std::string, Shape>> EmbedderMlp::tensors(const std::string& prefix, int64_t width) {
  return {{prefix + "linear_1.weight", {width, kChannels}},
          {prefix + "linear_1.bias", {width}},
          {prefix + "linear_2.weight", {width, width}},
          {prefix + "linear_2.bias", {width}}};
}

EmbedderMlp EmbedderMlp::load(const io::WeightStore& w, const std::string& prefix, const Placement& place) {
  return EmbedderMlp{load_matrix(w, prefix + "linear_1.weight", place), place.put(w.load(prefix + "linear_1.bias")),
                     load_matrix(w, prefix + "linear_2.weight", place), place.put(w.load(prefix + "linear_2.bias"))};
}

Tensor EmbedderMlp::embed(const std::vector<float>& values, const Placement& place) const {
  const Tensor sinusoid = place.put(ops::timestep_embedding(values, kChannels, true, 0.0f));
  Tensor h = ops::linear(sinusoid, linear1_w, &linear1_b);
  ops::silu_(h);
  return ops::linear(h, linear2_w, &linear2_b);
}

std::vector<std::pair<std::string, Shape>> AdaSingleBlock::tensors(const std::string& b, const AdaSingleBlockDims& s) {
  const int64_t d = s.inner_dim(), f = s.ff_inner, dc = s.cross_dim;
  std::vector<std::pair<std::string, Shape>> t = {
      {b + "scale_shift_table", {6, d}},
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
  if (dc > 0) {
    for (auto& e : std::vector<std::pair<std::string, Shape>>{{b + "attn2.to_q.weight", {d, d}},
                                                              {b + "attn2.to_q.bias", {d}},
                                                              {b + "attn2.to_k.weight", {d, dc}},
                                                              {b + "attn2.to_k.bias", {d}},
                                                              {b + "attn2.to_v.weight", {d, dc}},
                                                              {b + "attn2.to_v.bias", {d}},
                                                              {b + "attn2.to_out.0.weight", {d, d}},
                                                              {b + "attn2.to_out.0.bias", {d}}})
      t.push_back(std::move(e));
  }
  return t;
}

AdaSingleBlock AdaSingleBlock::load(const io::WeightStore& w, const std::string& b, const AdaSingleBlockDims& s,
                                    const ShardGroups& shard, const Placement& place) {
  const int tp = shard.tp_size();
  if (s.heads % tp || s.ff_inner % tp)
    throw ConfigError("tp = " + std::to_string(tp) + " must divide num_attention_heads " + std::to_string(s.heads) +
                      " and the MLP width " + std::to_string(s.ff_inner));
  AdaSingleBlock blk;
  blk.dims_ = s;
  blk.shard_ = shard;
  blk.place_ = place;
  // tp: this rank's rows of the column-split layers (its heads' q/k/v, its
  // MLP features) and the matching input columns of the row-split ones;
  // tp = 1 loads whole tensors. GEMM weights go through place_matrix.
  const parallel::Range heads = parallel::column_split(s.inner_dim(), shard.tp);
  const parallel::Range feats = parallel::column_split(s.ff_inner, shard.tp);
  auto whole = [&](const std::string& name) { return place.put(w.load(name)); };
  auto rows = [&](const std::string& name, parallel::Range r) {
    if (tp == 1) return w.info(name).shape.size() == 2 ? load_matrix(w, name, place) : whole(name);
    Tensor t = w.load_rows(name, r.begin, r.end);
    return t.ndim() == 2 ? place_matrix(w, name, t, place) : place.put(t);  // a weight's rows, or a bias's
  };
  auto cols = [&](const std::string& name, parallel::Range r) {
    return place_matrix(w, name, tp == 1 ? w.load(name) : w.load_cols(name, r.begin, r.end), place);
  };
  AdaSingleBlockWeights& k = blk.w_;
  k.scale_shift_table = whole(b + "scale_shift_table");
  k.q_w = rows(b + "attn1.to_q.weight", heads);
  k.q_b = rows(b + "attn1.to_q.bias", heads);
  k.k_w = rows(b + "attn1.to_k.weight", heads);
  k.k_b = rows(b + "attn1.to_k.bias", heads);
  k.v_w = rows(b + "attn1.to_v.weight", heads);
  k.v_b = rows(b + "attn1.to_v.bias", heads);
  k.out_w = cols(b + "attn1.to_out.0.weight", heads);
  k.out_b = whole(b + "attn1.to_out.0.bias");
  if (s.cross_dim > 0) {
    k.cross_q_w = rows(b + "attn2.to_q.weight", heads);
    k.cross_q_b = rows(b + "attn2.to_q.bias", heads);
    k.cross_k_w = rows(b + "attn2.to_k.weight", heads);
    k.cross_k_b = rows(b + "attn2.to_k.bias", heads);
    k.cross_v_w = rows(b + "attn2.to_v.weight", heads);
    k.cross_v_b = rows(b + "attn2.to_v.bias", heads);
    k.cross_out_w = cols(b + "attn2.to_out.0.weight", heads);
    k.cross_out_b = whole(b + "attn2.to_out.0.bias");
  }
  k.ff1_w = rows(b + "ff.net.0.proj.weight", feats);
  k.ff1_b = rows(b + "ff.net.0.proj.bias", feats);
  k.ff2_w = cols(b + "ff.net.2.weight", feats);
  k.ff2_b = whole(b + "ff.net.2.bias");
  return blk;
}

int64_t AdaSingleBlock::comm_bytes() const {
  return (shard_.tp ? shard_.tp->bytes_sent() : 0) + (shard_.sp ? shard_.sp->bytes_sent() : 0);
}

Tensor AdaSingleBlock::branch(const Pab& pab, pab::Kind kind, const std::function<Tensor()>& compute) const {
  if (pab.cache && pab.cache->reuse(pab.block, kind, pab.part)) {
    Tensor kept = pab.cache->cached(pab.block, kind, pab.part);
    pab.cache->reused(pab.block, kind, pab.part);
    return kept;
  }
  const int64_t sent_before = comm_bytes();
  Tensor out = compute();
  if (pab.cache) pab.cache->computed(pab.block, kind, out, comm_bytes() - sent_before, pab.part);
  return out;
}

void AdaSingleBlock::forward(Tensor& hidden, const Tensor& timestep_mod, const Text* text,
                             const AttentionCore& self_attention, const Pab& pab, const LayoutSwitch* around) const {
  const int64_t d = dims_.inner_dim(), bsz = hidden.dim(0), p = hidden.dim(1), dl = d / shard_.tp_size();
  if (dims_.cross_dim > 0 && (!text || !text->tokens))
    throw std::invalid_argument("AdaSingleBlock::forward: a block with cross-attention needs the text");
  // (B, 6D): shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp (D columns each)
  Tensor mod;
  {
    profile::ScopedTimer t("adaln");
    mod = timestep_mod.clone();
    ops::add_broadcast_(mod, w_.scale_shift_table);
  }
  Tensor normed = place_.empty({bsz, p, d});  // (B, P, D) modulated LayerNorm output

  Tensor attn_out = branch(pab, pab.self_kind, [&] {  // (B, P, D) before the gate
    {
      profile::ScopedTimer t("layer_norm");
      ops::layer_norm_modulate(hidden, mod, kShiftMsa * d, kScaleMsa * d, dims_.norm_eps, normed);
    }
    Tensor input = normed;  // (B', P', D) in the attention's layout
    if (around) {
      profile::ScopedTimer t("layout_switch");
      input = around->enter(normed);
    }
    const int64_t ab = input.dim(0), ap = input.dim(1);
    Tensor q = place_.empty({ab, ap, dl}), k = place_.empty({ab, ap, dl}), v = place_.empty({ab, ap, dl});
    {
      profile::ScopedTimer t("qkv_proj");
      ops::linear_into(input, w_.q_w, &w_.q_b, q, 0);
      ops::linear_into(input, w_.k_w, &w_.k_b, k, 0);
      ops::linear_into(input, w_.v_w, &w_.v_b, v, 0);
    }
    Tensor attn = place_.empty({ab, ap, dl});
    {
      profile::ScopedTimer t("attention");
      self_attention(q, k, v, attn);
    }
    if (around) {
      profile::ScopedTimer t("layout_switch");
      attn = around->leave(attn);
    }
    profile::ScopedTimer t("out_proj");
    return parallel::row_parallel_linear(shard_.tp, attn, w_.out_w, w_.out_b);
  });
  {
    profile::ScopedTimer t("residual");
    ops::gated_residual_(hidden, attn_out, mod, kGateMsa * d);
  }

  if (dims_.cross_dim > 0) {
    Tensor cross_out = branch(pab, pab::Kind::kCross, [&] {  // (B, P, D), added as is
      Tensor q, k, v;
      {
        profile::ScopedTimer t("cross_qkv_proj");
        q = ops::linear(hidden, w_.cross_q_w, &w_.cross_q_b);              // (B, P, Dl)
        k = ops::linear(*text->tokens, w_.cross_k_w, &w_.cross_k_b);       // (T, M, Dl), T = B / repeat
        v = ops::linear(*text->tokens, w_.cross_v_w, &w_.cross_v_b);       // (T, M, Dl)
      }
      const int64_t texts = k.dim(0);
      if (texts * text->repeat != bsz)
        throw std::logic_error("cross-attention: " + std::to_string(texts) + " texts x " +
                               std::to_string(text->repeat) + " samples each for a batch of " + std::to_string(bsz));
      Tensor attn = place_.empty({bsz, p, dl});
      {
        profile::ScopedTimer t("cross_attention");
        Tensor per_text = attn.reshape({texts, text->repeat * p, dl});  // a view: each text's queries in a row
        parallel::SequenceParallelAttention::cross_attention(q.reshape({texts, text->repeat * p, dl}), k, v,
                                                             dims_.head_dim, per_text, text->kv_lens, place_.dtype);
      }
      profile::ScopedTimer t("out_proj");
      return parallel::row_parallel_linear(shard_.tp, attn, w_.cross_out_w, w_.cross_out_b);
    });
    profile::ScopedTimer t("residual");
    ops::add_(hidden, cross_out);
  }

  Tensor ff_out = branch(pab, pab::Kind::kMlp, [&] {  // (B, P, D) before the gate
    {
      profile::ScopedTimer t("layer_norm");
      ops::layer_norm_modulate(hidden, mod, kShiftMlp * d, kScaleMlp * d, dims_.norm_eps, normed);
    }
    Tensor ff;
    {
      profile::ScopedTimer t("mlp_in");  // with its GELU, fused on the CPU
      ff = ops::linear(normed, w_.ff1_w, &w_.ff1_b, ops::Activation::kGeluTanh);
    }
    profile::ScopedTimer t("mlp_out");
    return parallel::row_parallel_linear(shard_.tp, ff, w_.ff2_w, w_.ff2_b);
  });
  profile::ScopedTimer t("residual");
  ops::gated_residual_(hidden, ff_out, mod, kGateMlp * d);
}

std::vector<std::pair<std::string, Shape>> AdaSingleStem::tensors(const AdaSingleStemDims& m) {
  const int64_t d = m.inner, p = m.patch;
  std::vector<std::pair<std::string, Shape>> out = {
      {"pos_embed.proj.weight", {d, m.in_channels, p, p}},
      {"pos_embed.proj.bias", {d}},
      {"adaln_single.linear.weight", {6 * d, d}},
      {"adaln_single.linear.bias", {6 * d}},
      {"caption_projection.linear_1.weight", {d, m.caption_channels}},
      {"caption_projection.linear_1.bias", {d}},
      {"caption_projection.linear_2.weight", {d, d}},
      {"caption_projection.linear_2.bias", {d}},
      {"scale_shift_table", {2, d}},
      {"proj_out.weight", {p * p * m.out_channels, d}},
      {"proj_out.bias", {p * p * m.out_channels}}};
  for (auto& e : EmbedderMlp::tensors("adaln_single.emb.timestep_embedder.", d)) out.push_back(std::move(e));
  return out;
}

AdaSingleStem AdaSingleStem::load(const io::WeightStore& w, const AdaSingleStemDims& m, const Placement& place) {
  auto whole = [&](const std::string& name) { return place.put(w.load(name)); };
  auto matrix = [&](const std::string& name) { return load_matrix(w, name, place); };
  AdaSingleStem s;
  s.patch_w = matrix("pos_embed.proj.weight").reshape({m.inner, m.in_channels * m.patch * m.patch});
  s.patch_b = whole("pos_embed.proj.bias");
  s.timestep_embedder = EmbedderMlp::load(w, "adaln_single.emb.timestep_embedder.", place);
  s.adaln_w = matrix("adaln_single.linear.weight");
  s.adaln_b = whole("adaln_single.linear.bias");
  s.caption1_w = matrix("caption_projection.linear_1.weight");
  s.caption1_b = whole("caption_projection.linear_1.bias");
  s.caption2_w = matrix("caption_projection.linear_2.weight");
  s.caption2_b = whole("caption_projection.linear_2.bias");
  s.final_table = whole("scale_shift_table");
  s.proj_out_w = matrix("proj_out.weight");
  s.proj_out_b = whole("proj_out.bias");
  return s;
}

Tensor AdaSingleStem::modulation(const Tensor& embedded) const {
  return ops::linear(ops::silu(embedded), adaln_w, &adaln_b);
}

Tensor AdaSingleStem::caption(const Tensor& text, const Placement& place) const {
  const Tensor projected = ops::linear(place.put(text), caption1_w, &caption1_b, ops::Activation::kGeluTanh);
  return ops::linear(projected, caption2_w, &caption2_b);
}

Tensor AdaSingleStem::final_layer(const Tensor& hidden, const Tensor& embedded, const Placement& place) const {
  constexpr float kFinalNormEps = 1e-6f;  // norm_out
  const int64_t rows = embedded.dim(0), d = embedded.dim(1);
  // (R, 2D): shift, scale = scale_shift_table + embedded timestep (no SiLU).
  Tensor final_mod = place.empty({rows, 2 * d});
  ops::copy_rows(embedded, 0, d, final_mod, 0, 2 * d, rows, d);
  ops::copy_rows(embedded, 0, d, final_mod, d, 2 * d, rows, d);
  ops::add_broadcast_(final_mod, final_table);
  Tensor normed = place.empty(hidden.shape());
  ops::layer_norm_modulate(hidden, final_mod, 0, d, kFinalNormEps, normed);
  return ops::linear(normed, proj_out_w, &proj_out_b);
}

void check_text_args(const ForwardArgs& a, int64_t batch, int64_t caption_channels,
                     const std::function<void(const std::string&)>& fail) {
  if (!a.text || a.text->ndim() != 3 || a.text->dim(0) != batch || a.text->dim(1) < 1 ||
      a.text->dim(2) != caption_channels)
    fail("text " + (a.text ? shape_str(a.text->shape()) : std::string("(none)")) + " is not [" +
         std::to_string(batch) + ", L, " + std::to_string(caption_channels) + "] (caption_channels)");
  if (a.text_lengths.empty()) return;
  if (static_cast<int64_t>(a.text_lengths.size()) != batch)
    fail(std::to_string(a.text_lengths.size()) + " text lengths for a batch of " + std::to_string(batch));
  for (int32_t len : a.text_lengths)
    if (len < 1 || len > a.text->dim(1))
      fail("text length " + std::to_string(len) + " outside [1, " + std::to_string(a.text->dim(1)) + "]");
}

}  // namespace ditgen::models
