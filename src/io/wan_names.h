// Wan transformer tensor names: the original release's (Wan-AI's model.py,
// ComfyUI's, lightx2v's and musubi-tuner's LoRA files, the GGUF files) and
// diffusers' (WanTransformer3DModel, what ditgen's modules load), both ways.
//
// One table (wan_names.cpp) of module and parameter names, per block
// (`blocks.N.`) or global, is the whole map; each row holds for a module's
// `.weight` and `.bias` and for the bare module name (a LoRA key's stem).
// The rules are those of diffusers 0.42.1's
// convert_wan_transformer_to_diffusers (loaders/single_file_utils.py) for the
// text-to-video and image-to-video transformer: self_attn / cross_attn ->
// attn1 / attn2, q k v o -> to_q to_k to_v to_out.0, k_img v_img ->
// add_k_proj add_v_proj, norm_k_img -> norm_added_k, norm2 <-> norm3
// swapped, ffn.0 / ffn.2 -> ffn.net.0.proj / ffn.net.2, modulation ->
// scale_shift_table, head.head -> proj_out, the embedders under
// condition_embedder. (tests/io/test_wan_names.cpp checks every pair against
// that function's output, tests/fixtures/lora/wan_names.json.) VACE, Animate
// and S2V blocks are not in it. The caller strips a checkpoint's
// `model.diffusion_model.` / `diffusion_model.` prefix first.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace ditgen::io {

// "blocks.3.self_attn.q.weight" -> "blocks.3.attn1.to_q.weight",
// "blocks.3.self_attn.q" -> "blocks.3.attn1.to_q", "head.modulation" ->
// "scale_shift_table"; nullopt for a name the table does not hold.
std::optional<std::string> wan_original_to_diffusers(std::string_view name);
// The inverse: "blocks.3.norm2.weight" -> "blocks.3.norm3.weight".
std::optional<std::string> wan_diffusers_to_original(std::string_view name);

// An original module or parameter name with every dot written as an
// underscore (musubi-tuner's LoRA keys after `lora_unet_`), dotted again:
// "blocks_3_cross_attn_k_img" -> "blocks.3.cross_attn.k_img",
// "time_projection_1" -> "time_projection.1"; nullopt if it is none of the
// table's names.
std::optional<std::string> wan_original_from_underscored(std::string_view name);

// Whether `name` (original or diffusers, no suffix) is one of the table's
// parameters (a modulation table) rather than a module.
bool wan_is_parameter(std::string_view name);

}  // namespace ditgen::io
