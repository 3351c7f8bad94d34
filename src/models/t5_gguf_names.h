// T5 encoder tensor names in llama.cpp's GGUF layout (architecture
// "t5encoder": convert_hf_to_gguf.py's T5EncoderModel, the names of gguf-py's
// TensorNameMap; city96's umt5-xxl-encoder files) mapped back to
// transformers' (T5EncoderModel / UMT5EncoderModel, what models/t5.h loads),
// as ComfyUI-GGUF's T5_SD_MAP and the inverse of TensorNameMap map them:
//
//   token_embd                 shared
//   enc.output_norm            encoder.final_layer_norm
//   enc.blk.N.attn_norm        encoder.block.N.layer.0.layer_norm
//   enc.blk.N.attn_{q,k,v,o}   encoder.block.N.layer.0.SelfAttention.{q,k,v,o}
//   enc.blk.N.attn_rel_b       encoder.block.N.layer.0.SelfAttention.relative_attention_bias
//   enc.blk.N.ffn_norm         encoder.block.N.layer.1.layer_norm
//   enc.blk.N.ffn_gate         encoder.block.N.layer.1.DenseReluDense.wi_0
//   enc.blk.N.ffn_up           encoder.block.N.layer.1.DenseReluDense.wi_1 (gated), wi (T5 v1.0)
//   enc.blk.N.ffn_down         encoder.block.N.layer.1.DenseReluDense.wo
//
// each with its ".weight" (T5 has no biases).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace ditgen::models {

// "enc.blk.3.attn_q.weight" -> "encoder.block.3.layer.0.SelfAttention.q.weight";
// `gated`: the feed-forward is gated (UMT5, T5 v1.1), so ffn_up is wi_1;
// nullopt for a name of no T5 encoder tensor.
std::optional<std::string> t5_gguf_to_transformers(std::string_view name, bool gated);

}  // namespace ditgen::models
