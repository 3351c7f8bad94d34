#include "models/nn/transformer_block.h"

#include <stdexcept>

#include "ops/ops.h"
#include "util/profile.h"

namespace ditgen::models::nn {

TensorDecls TransformerBlock::tensors(const std::string& prefix, const TransformerBlockDims& d) {
  const TransformerBlockNames& n = d.names;
  TensorDecls t = Attention::tensors(prefix + n.self, d.self);
  if (d.has_cross()) {
    if (d.cross_norm)
      for (const char* part : {"weight", "bias"}) t.push_back({prefix + n.cross_norm + part, {d.cross.query_dim}});
    append(t, Attention::tensors(prefix + n.cross, d.cross));
  }
  append(t, FeedForward::tensors(prefix + n.ff, d.ff));
  return t;
}

TransformerBlock TransformerBlock::load(const io::WeightStore& w, const std::string& prefix,
                                        const TransformerBlockDims& d, const ShardGroups& shard,
                                        const Placement& place) {
  TransformerBlock b;
  b.dims_ = d;
  b.shard_ = shard;
  b.place_ = place;
  const TransformerBlockNames& n = d.names;
  b.attn1_ = Attention::load(w, prefix + n.self, d.self, shard.tp, place);
  if (d.has_cross()) {
    if (d.cross_norm) {
      b.cross_norm_w_ = place.put(w.load(prefix + n.cross_norm + "weight"));
      b.cross_norm_b_ = place.put(w.load(prefix + n.cross_norm + "bias"));
    }
    b.attn2_ = Attention::load(w, prefix + n.cross, d.cross, shard.tp, place);
  }
  b.ff_ = FeedForward::load(w, prefix + n.ff, d.ff, shard.tp, place);
  return b;
}

Tensor TransformerBlock::attention_input(const Tensor& hidden, const Modulation& mod) const {
  Tensor normed = place_.empty(hidden.shape());
  mod.normalize(hidden, Branch::kAttention, dims_.attention_norm_eps, normed);
  return normed;
}

void TransformerBlock::forward(Tensor& hidden, const Modulation& mod, const BlockInputs& in) const {
  if (!in.core) throw std::invalid_argument("TransformerBlock::forward: no self-attention core");
  if (dims_.has_cross() && (!in.text || !in.text->tokens))
    throw std::invalid_argument("TransformerBlock::forward: a block with cross-attention needs the text");
  Tensor normed = place_.empty(hidden.shape());  // (B, P, D) modulated LayerNorm output

  const Tensor attn_out = in.pab.branch(in.self_kind, shard_, [&] {  // (B, P, D) before the gate
    mod.normalize(hidden, Branch::kAttention, dims_.attention_norm_eps, normed);
    return attn1_.self_attention(normed, *in.core, in.around, in.rotary);
  });
  mod.add_gated(hidden, attn_out, Branch::kAttention);

  if (dims_.has_cross()) {
    const Tensor cross_out = in.pab.branch(pab::Kind::kCross, shard_, [&] {  // (B, P, D), added as is
      if (!dims_.cross_norm) return attn2_.cross_attention(hidden, *in.text, in.image);
      return attn2_.cross_attention(ops::layer_norm(hidden, &cross_norm_w_, &cross_norm_b_, dims_.cross_norm_eps),
                                    *in.text, in.image);
    });
    profile::ScopedTimer t("residual");
    ops::add_(hidden, cross_out);
  }

  const Tensor ff_out = in.pab.branch(pab::Kind::kMlp, shard_, [&] {  // (B, P, D) before the gate
    mod.normalize(hidden, Branch::kFeedForward, dims_.mlp_norm_eps, normed);
    return ff_(normed);
  });
  mod.add_gated(hidden, ff_out, Branch::kFeedForward);
}

}  // namespace ditgen::models::nn
