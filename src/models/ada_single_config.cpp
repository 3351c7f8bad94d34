// AdaSingleConfig from config.json, beyond the sizes every DiT reads.
#include "models/ada_single_config.h"

#include "io/model_dir.h"
#include "ops/ops.h"
#include "util/error.h"

namespace ditgen::models {

AdaSingleConfig read_ada_single_sizes(const nlohmann::json& cfg, const std::string& path, const char* family) {
  using io::get_int;
  AdaSingleConfig c;
  static_cast<TransformerSizes&>(c) = TransformerSizes::read(cfg, path);
  require(cfg.contains("caption_channels") && !cfg["caption_channels"].is_null(), path,
          "caption_channels: missing (a " + std::string(family) +
              " model without a caption projection is not supported yet)");
  c.caption_channels = get_int(cfg, "caption_channels", path);
  const int64_t cross_dim = get_int(cfg, "cross_attention_dim", path);
  for (auto [key, v] : {std::pair{"caption_channels", c.caption_channels}, {"cross_attention_dim", cross_dim}})
    require(v > 0, path, std::string(key) + ": expected a positive integer, got " + std::to_string(v));
  const int64_t d = c.inner_dim();
  require(cross_dim == d, path,
          "cross_attention_dim: " + std::to_string(cross_dim) + " must equal num_attention_heads * " +
              "attention_head_dim = " + std::to_string(d) + " (the cross-attention reads the caption projection, " +
              std::to_string(d) + " wide)");
  return c;
}

std::pair<int64_t, int64_t> AdaSingleConfig::latent_size(int64_t height, int64_t width, int64_t vae_factor,
                                                         const std::string& where) const {
  const int64_t native = sample_size * vae_factor;
  return models::latent_size(height, width, native, native, vae_factor, patch_size, where);
}

Tensor AdaSingleConfig::position_table(int64_t grid_h, int64_t grid_w) const {
  return ops::sincos_pos_embed_2d(inner_dim(), grid_h, grid_w, static_cast<double>(grid()), interpolation_scale);
}

}  // namespace ditgen::models
