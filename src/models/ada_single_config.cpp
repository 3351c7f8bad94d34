#include "models/ada_single_config.h"

#include "io/model_dir.h"
#include "util/error.h"

namespace ditgen::models {

AdaSingleConfig read_ada_single_sizes(const nlohmann::json& cfg, const std::string& path, const char* family) {
  using io::get_int;
  AdaSingleConfig c;
  c.num_layers = get_int(cfg, "num_layers", path);
  c.num_heads = get_int(cfg, "num_attention_heads", path);
  c.head_dim = get_int(cfg, "attention_head_dim", path);
  c.in_channels = get_int(cfg, "in_channels", path);
  c.out_channels = io::get_int_or(cfg, "out_channels", c.in_channels, path);  // null: in_channels
  c.sample_size = get_int(cfg, "sample_size", path);
  c.patch_size = get_int(cfg, "patch_size", path);
  require(cfg.contains("caption_channels") && !cfg["caption_channels"].is_null(), path,
          "caption_channels: missing (a " + std::string(family) +
              " model without a caption projection is not supported yet)");
  c.caption_channels = get_int(cfg, "caption_channels", path);
  const int64_t cross_dim = get_int(cfg, "cross_attention_dim", path);
  for (auto [key, v] : {std::pair{"num_layers", c.num_layers}, {"num_attention_heads", c.num_heads},
                        {"attention_head_dim", c.head_dim}, {"in_channels", c.in_channels},
                        {"out_channels", c.out_channels}, {"sample_size", c.sample_size},
                        {"patch_size", c.patch_size}, {"caption_channels", c.caption_channels},
                        {"cross_attention_dim", cross_dim}})
    require(v > 0, path, std::string(key) + ": expected a positive integer, got " + std::to_string(v));
  const int64_t d = c.inner_dim();
  require(cross_dim == d, path,
          "cross_attention_dim: " + std::to_string(cross_dim) + " must equal num_attention_heads * " +
              "attention_head_dim = " + std::to_string(d) + " (the cross-attention reads the caption projection, " +
              std::to_string(d) + " wide)");
  require(c.sample_size % c.patch_size == 0, path, "sample_size " + std::to_string(c.sample_size) +
                                                       " is not divisible by patch_size " +
                                                       std::to_string(c.patch_size));
  require(d % 4 == 0, path, "num_attention_heads * attention_head_dim = " + std::to_string(d) +
                                " must be divisible by 4 (2-D sin-cos position embedding)");
  c.ff_inner_dim = 4 * d;
  return c;
}

void check_ada_single_options(const nlohmann::json& cfg, const std::string& path, const char* family,
                              const AdaSingleOptionDefaults& defaults) {
  const std::string uses = std::string(" (") + family + " uses ";
  const std::string act = io::get_string_or(cfg, "activation_fn", defaults.activation_fn, path);
  require(act == "gelu-approximate", path,
          "activation_fn: not supported yet: '" + act + "'" + uses + "gelu-approximate)");
  require(!io::get_bool_or(cfg, "norm_elementwise_affine", defaults.norm_elementwise_affine, path), path,
          "norm_elementwise_affine: not supported yet: true" + uses + "false)");
  require(io::get_bool_or(cfg, "attention_bias", defaults.attention_bias, path), path,
          "attention_bias: not supported yet: false" + uses + "true)");
}

std::pair<int64_t, int64_t> AdaSingleConfig::latent_size(int64_t height, int64_t width, int64_t vae_factor,
                                                         const std::string& where) const {
  const int64_t unit = vae_factor * patch_size, native = sample_size * vae_factor;
  const int64_t h = height ? height : native, w = width ? width : native;
  if (h <= 0 || w <= 0 || h % unit || w % unit)
    throw ConfigError(where + ".height/width: " + std::to_string(h) + "x" + std::to_string(w) +
                      ": height and width must be positive multiples of " + std::to_string(unit) +
                      " (VAE factor " + std::to_string(vae_factor) + " x patch_size " + std::to_string(patch_size) +
                      ")");
  return {h / vae_factor, w / vae_factor};
}

}  // namespace ditgen::models
