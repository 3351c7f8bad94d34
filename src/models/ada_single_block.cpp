// The adaLN-single block, following diffusers' BasicTransformerBlock
// (norm_type ada_norm_single): modulation = scale_shift_table[None] +
// timestep.reshape(B, 6, D), chunked shift_msa, scale_msa, gate_msa,
// shift_mlp, scale_mlp, gate_mlp; norm1 and norm2 are LayerNorms without
// affine at norm_eps; the cross-attention sees the residual stream as is.
#include "models/ada_single_block.h"

namespace ditgen::models {

namespace {

const nn::FinalLayerNames kFinalLayer{nn::FinalLayerNames::Modulation::kTable, "scale_shift_table", "proj_out."};
const nn::AdaLnSingleNames kAdaLnSingle{"adaln_single.emb.timestep_embedder.", "adaln_single.linear."};

nn::TransformerBlockDims block_dims(const AdaSingleConfig& c, bool cross) {
  const int64_t d = c.inner_dim();
  nn::TransformerBlockDims b;
  b.self = {c.num_heads, c.head_dim, d, d};
  if (cross) b.cross = {c.num_heads, c.head_dim, d, d};  // the caption projection makes the text D wide
  b.ff = {d, c.ff_inner_dim, nn::FeedForwardActivation::kGeluTanh};
  b.attention_norm_eps = b.mlp_norm_eps = c.norm_eps;
  return b;
}

}  // namespace

nn::TensorDecls AdaSingleBlock::tensors(const std::string& prefix, const AdaSingleConfig& c, bool cross) {
  return tensors(prefix, block_dims(c, cross), false);
}

AdaSingleBlock AdaSingleBlock::load(const io::WeightStore& w, const std::string& prefix, const AdaSingleConfig& c,
                                    bool cross, const ShardGroups& shard, const Placement& place) {
  return load(w, prefix, block_dims(c, cross), shard, place);
}

nn::TensorDecls AdaSingleBlock::tensors(const std::string& prefix, const nn::TransformerBlockDims& dims,
                                        bool table_leading_one) {
  nn::TensorDecls t = nn::ScaleShiftTable::tensors(prefix + "scale_shift_table", nn::kModulationChunks,
                                                   dims.self.query_dim, table_leading_one);
  nn::append(t, nn::TransformerBlock::tensors(prefix, dims));
  return t;
}

AdaSingleBlock AdaSingleBlock::load(const io::WeightStore& w, const std::string& prefix,
                                    const nn::TransformerBlockDims& dims, const ShardGroups& shard,
                                    const Placement& place) {
  AdaSingleBlock blk;
  blk.dim_ = dims.self.query_dim;
  blk.table_ = nn::ScaleShiftTable::load(w, prefix + "scale_shift_table", place);
  blk.body_ = nn::TransformerBlock::load(w, prefix, dims, shard, place);
  return blk;
}

void AdaSingleBlock::forward(Tensor& hidden, const Tensor& shared_mod, const nn::BlockInputs& in) const {
  body_.forward(hidden, nn::Modulation(table_.add_to(shared_mod), dim_), in);
}

nn::TensorDecls AdaSingleStem::tensors(const AdaSingleConfig& c) {
  const int64_t d = c.inner_dim(), p = c.patch_size;
  nn::TensorDecls t = nn::PatchEmbed::tensors("pos_embed.proj.", d, c.in_channels, p);
  nn::append(t, nn::AdaLnSingle::tensors(kAdaLnSingle, d));
  nn::append(t, nn::TextProjection::tensors("caption_projection.", c.caption_channels, d));
  nn::append(t, nn::FinalLayer::tensors(kFinalLayer, d, p * p * c.out_channels));
  return t;
}

AdaSingleStem AdaSingleStem::load(const io::WeightStore& w, const AdaSingleConfig& c, const Placement& place) {
  return {nn::PatchEmbed::load(w, "pos_embed.proj.", c.patch_size, place),
          nn::AdaLnSingle::load(w, kAdaLnSingle, place), nn::TextProjection::load(w, "caption_projection.", place),
          nn::FinalLayer::load(w, kFinalLayer, place), place.put(c.position_table(c.grid(), c.grid()))};
}

Tensor AdaSingleStem::positions(const AdaSingleConfig& c, int64_t grid_h, int64_t grid_w,
                                const Placement& place) const {
  const bool native = grid_h == c.grid() && grid_w == c.grid();
  return native ? native_positions : place.put(c.position_table(grid_h, grid_w));
}

}  // namespace ditgen::models
