// PixArtConfig from config.json, as PixArtTransformer2DModel.__init__ reads
// it (sizes always from the file, never the XL defaults), and PixArtSpec:
// PixArt's sizes as the generic seams want them. The weight counts are
// those of the tensors PixArtTransformer declares, split as they declare
// (the shared adaln_single, the embedders and the caption projection are
// held whole on every rank).
#include "models/pixart_spec.h"

#include <algorithm>

#include "io/model_dir.h"
#include "models/pixart.h"
#include "util/error.h"

namespace ditgen::models {

PixArtConfig PixArtConfig::from_json(const nlohmann::json& cfg, const std::string& path) {
  using io::get_int;
  const std::string cls = io::get_string_or(cfg, "_class_name", "", path);
  const std::string norm_type = io::get_string_or(cfg, "norm_type", "ada_norm_single", path);
  require(cls == "PixArtTransformer2DModel" || (cls == "Transformer2DModel" && norm_type == "ada_norm_single"), path,
          "_class_name: expected PixArtTransformer2DModel (or Transformer2DModel with norm_type ada_norm_single), "
          "got '" + cls + "' with norm_type '" + norm_type + "'");
  require(norm_type == "ada_norm_single", path, "norm_type: expected ada_norm_single, got '" + norm_type + "'");
  PixArtConfig c;
  static_cast<AdaSingleConfig&>(c) = read_ada_single_sizes(cfg, path, "PixArt");
  const int64_t d = c.inner_dim();
  c.norm_eps = static_cast<float>(io::get_number_or(cfg, "norm_eps", 1e-6, path));
  // diffusers: config.interpolation_scale, or max(sample_size // 64, 1) when null.
  const double default_scale = static_cast<double>(std::max<int64_t>(c.sample_size / 64, 1));
  c.interpolation_scale = io::get_number_or(cfg, "interpolation_scale", default_scale, path);
  require(c.interpolation_scale > 0, path,
          "interpolation_scale: expected a positive number, got " + std::to_string(c.interpolation_scale));
  // diffusers: null means sample_size == 128 (the 1024 models).
  c.use_additional_conditions = io::get_bool_or(cfg, "use_additional_conditions", c.sample_size == 128, path);
  require(!c.use_additional_conditions || d % 3 == 0, path,
          "use_additional_conditions: the resolution and aspect-ratio embeddings are D/3 wide each, but "
          "num_attention_heads * attention_head_dim = " + std::to_string(d) + " is not divisible by 3");

  // PixArtTransformer2DModel's defaults are the published block.
  check_block_options(cfg, path, "PixArt", {"gelu-approximate", false, true});
  const std::string attention_type = io::get_string_or(cfg, "attention_type", "default", path);
  require(attention_type == "default", path, "attention_type: not supported yet: '" + attention_type + "'");
  // Legacy Transformer2DModel keys that would make it another model.
  for (const char* key : {"only_cross_attention", "double_self_attention"})
    require(!io::get_bool_or(cfg, key, false, path), path, std::string(key) + ": not supported yet: true");
  require(!cfg.contains("num_vector_embeds") || cfg["num_vector_embeds"].is_null(), path,
          "num_vector_embeds: not supported yet (discrete inputs; PixArt takes latents)");
  return c;
}

Shape PixArtSpec::latent_shape(int64_t height, int64_t width, int64_t frames, const VaeFactors& vae,
                               const std::string& where) const {
  reject_frames(frames, family(), where);
  const auto [h, w] = cfg_.latent_size(height, width, vae.spatial, where);
  return {cfg_.in_channels, h, w};
}

parallel::Workload PixArtSpec::workload(const Shape& latent) const {
  // Per layer: self-attention over the image's tokens, cross-attention to
  // the text, one MLP; adaln_single is held whole: nothing gathered over tp.
  parallel::Workload w = sized(latent, {parallel::AttentionKind::kSpatial, parallel::AttentionKind::kCross}, 1);
  w.whole_once += static_cast<double>(cfg_.grid() * cfg_.grid()) * cfg_.inner_dim();  // + the native positions kept
  return w;
}

}  // namespace ditgen::models
