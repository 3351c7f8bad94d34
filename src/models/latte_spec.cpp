// LatteConfig from config.json, as LatteTransformer3DModel.__init__ reads
// it (sizes always from the file; a missing key takes diffusers' default,
// which for the block type, activation, norm affinity and attention bias
// is then rejected as "not supported yet": every published Latte config
// sets them), and LatteSpec: Latte's sizes as the generic seams want them.
// The weight counts are those of the tensors LatteTransformer declares,
// split as they declare (adaln_single, the embedders and the caption
// projection are held whole on every rank).
#include "models/latte_spec.h"

#include <algorithm>

#include "io/model_dir.h"
#include "models/latte.h"
#include "util/error.h"

namespace ditgen::models {

LatteConfig LatteConfig::from_json(const nlohmann::json& cfg, const std::string& path) {
  using io::get_int;
  const std::string cls = io::get_string_or(cfg, "_class_name", "", path);
  require(cls == "LatteTransformer3DModel", path, "_class_name: expected LatteTransformer3DModel, got '" + cls + "'");
  LatteConfig c;
  static_cast<AdaSingleConfig&>(c) = read_ada_single_sizes(cfg, path, "Latte");
  c.video_length = get_int(cfg, "video_length", path);
  require(c.video_length > 0, path,
          "video_length: expected a positive integer, got " + std::to_string(c.video_length));
  c.norm_eps = static_cast<float>(io::get_number_or(cfg, "norm_eps", 1e-5, path));  // diffusers' default 1e-5
  // diffusers: max(sample_size // 64, 1), no config key.
  c.interpolation_scale = static_cast<double>(std::max<int64_t>(c.sample_size / 64, 1));

  // diffusers' defaults for these (layer_norm, geglu, affine norms, no
  // attention bias) make another block than Latte's published models use.
  const std::string norm_type = io::get_string_or(cfg, "norm_type", "layer_norm", path);
  require(norm_type == "ada_norm_single", path,
          "norm_type: not supported yet: '" + norm_type + "' (Latte uses ada_norm_single)");
  check_block_options(cfg, path, "Latte", {"geglu", true, false});
  return c;
}

Shape LatteSpec::latent_shape(int64_t height, int64_t width, int64_t frames, const VaeFactors& vae,
                              const std::string& where) const {
  const auto [h, w] = cfg_.latent_size(height, width, vae.spatial, where);
  const int64_t f = frames ? frames : cfg_.video_length;
  if (f < 1)
    throw ConfigError(where + ".frames: " + std::to_string(f) + ": expected at least 1 frame (default " +
                      std::to_string(cfg_.video_length) + ", the model's video_length)");
  vae.check_frames(f, where + ".frames");  // any count for an image VAE
  return {cfg_.in_channels, vae.latent_frames_of(f), h, w};
}

parallel::Workload LatteSpec::workload(const Shape& latent) const {
  using parallel::AttentionKind;
  // Per layer: the spatial block's self-attention over each frame's tokens,
  // its cross-attention to the text and MLP, then the temporal block's
  // self-attention over each token's frames and MLP (5 tp all-reduces);
  // adaln_single is held whole: nothing gathered over tp.
  parallel::Workload w = sized(latent, {AttentionKind::kSpatial, AttentionKind::kCross, AttentionKind::kTemporal}, 2);
  // + the native spatial position table and the temporal one kept.
  w.whole_once += static_cast<double>(cfg_.grid() * cfg_.grid() + cfg_.video_length) * cfg_.inner_dim();
  return w;
}

std::vector<double> LatteSpec::teacache_coefficients() const {
  // ali-vilab/TeaCache 7c10efc, eval/teacache/experiments/latte.py:180, calibrated on Latte-1
  // (maxin-cn/Latte-1: 28 layers of 16 heads x 72).
  if (cfg_.num_layers == 28 && cfg_.inner_dim() == 1152)
    return {-2.46434137e+03, 3.08044764e+02, 8.07447667e+01, -4.11385132e+00, 1.11001402e-01};
  return {};
}

}  // namespace ditgen::models
