// The adaLN-single block, following diffusers' BasicTransformerBlock
// (norm_type ada_norm_single): modulation = scale_shift_table[None] +
// timestep.reshape(B, 6, D), chunked shift_msa, scale_msa, gate_msa,
// shift_mlp, scale_mlp, gate_mlp; norm1 and norm2 are LayerNorms without
// affine at norm_eps; the cross-attention sees the residual stream as is.
#include "models/ada_single_block.h"

namespace ditgen::models {

namespace {

nn::TransformerBlockDims block_dims(const AdaSingleBlockDims& s) {
  const int64_t d = s.inner_dim();
  nn::TransformerBlockDims b;
  b.self = {s.heads, s.head_dim, d, d};
  if (s.cross_dim > 0) b.cross = {s.heads, s.head_dim, d, s.cross_dim};
  b.ff = {d, s.ff_inner, nn::FeedForwardActivation::kGeluTanh};
  b.attention_norm_eps = b.mlp_norm_eps = s.norm_eps;
  return b;
}

}  // namespace

nn::TensorDecls AdaSingleBlock::tensors(const std::string& prefix, const AdaSingleBlockDims& s) {
  nn::TensorDecls t = nn::ScaleShiftTable::tensors(prefix + "scale_shift_table", nn::kModulationChunks, s.inner_dim());
  nn::append(t, nn::TransformerBlock::tensors(prefix, block_dims(s)));
  return t;
}

AdaSingleBlock AdaSingleBlock::load(const io::WeightStore& w, const std::string& prefix, const AdaSingleBlockDims& s,
                                    const ShardGroups& shard, const Placement& place) {
  AdaSingleBlock blk;
  blk.dim_ = s.inner_dim();
  blk.table_ = nn::ScaleShiftTable::load(w, prefix + "scale_shift_table", place);
  blk.body_ = nn::TransformerBlock::load(w, prefix, block_dims(s), shard, place);
  return blk;
}

void AdaSingleBlock::forward(Tensor& hidden, const Tensor& shared_mod, const nn::BlockInputs& in) const {
  body_.forward(hidden, nn::Modulation(table_.add_to(shared_mod), dim_), in);
}

nn::TensorDecls AdaSingleStem::tensors(const AdaSingleStemDims& m) {
  const int64_t d = m.inner, p = m.patch;
  nn::TensorDecls t = nn::PatchEmbed::tensors("pos_embed.proj.", d, m.in_channels, p);
  nn::append(t, nn::AdaLnSingle::tensors("adaln_single.", d));
  nn::append(t, nn::TextProjection::tensors("caption_projection.", m.caption_channels, d));
  nn::append(t, nn::FinalLayer::table_modulated_tensors("scale_shift_table", "proj_out.", d, p * p * m.out_channels));
  return t;
}

AdaSingleStem AdaSingleStem::load(const io::WeightStore& w, const AdaSingleStemDims& m, const Placement& place) {
  return {nn::PatchEmbed::load(w, "pos_embed.proj.", m.patch, place), nn::AdaLnSingle::load(w, "adaln_single.", place),
          nn::TextProjection::load(w, "caption_projection.", place),
          nn::FinalLayer::load_table_modulated(w, "scale_shift_table", "proj_out.", place)};
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
