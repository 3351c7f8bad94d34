#include "models/transformer_sizes.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>

#include "io/model_dir.h"
#include "util/error.h"

namespace ditgen::models {

TransformerSizes TransformerSizes::read(const nlohmann::json& cfg, const std::string& path) {
  using io::get_int;
  TransformerSizes c;
  c.num_layers = get_int(cfg, "num_layers", path);
  c.num_heads = get_int(cfg, "num_attention_heads", path);
  c.head_dim = get_int(cfg, "attention_head_dim", path);
  c.in_channels = get_int(cfg, "in_channels", path);
  c.out_channels = io::get_int_or(cfg, "out_channels", c.in_channels, path);  // null: in_channels
  c.sample_size = get_int(cfg, "sample_size", path);
  c.patch_size = get_int(cfg, "patch_size", path);
  for (auto [key, v] : {std::pair{"num_layers", c.num_layers}, {"num_attention_heads", c.num_heads},
                        {"attention_head_dim", c.head_dim}, {"in_channels", c.in_channels},
                        {"out_channels", c.out_channels}, {"sample_size", c.sample_size},
                        {"patch_size", c.patch_size}})
    require(v > 0, path, std::string(key) + ": expected a positive integer, got " + std::to_string(v));
  require(c.sample_size % c.patch_size == 0, path, "sample_size " + std::to_string(c.sample_size) +
                                                       " is not divisible by patch_size " +
                                                       std::to_string(c.patch_size));
  const int64_t d = c.inner_dim();
  require(d % 4 == 0, path, "num_attention_heads * attention_head_dim = " + std::to_string(d) +
                                " must be divisible by 4 (2-D sin-cos position embedding)");
  c.ff_inner_dim = 4 * d;
  return c;
}

void check_block_options(const nlohmann::json& cfg, const std::string& path, const char* family,
                         const BlockOptionDefaults& defaults) {
  const std::string uses = std::string(" (") + family + " uses ";
  const std::string act = io::get_string_or(cfg, "activation_fn", defaults.activation_fn, path);
  require(act == "gelu-approximate", path,
          "activation_fn: not supported yet: '" + act + "'" + uses + "gelu-approximate)");
  require(!io::get_bool_or(cfg, "norm_elementwise_affine", defaults.norm_elementwise_affine, path), path,
          "norm_elementwise_affine: not supported yet: true" + uses + "false)");
  require(io::get_bool_or(cfg, "attention_bias", defaults.attention_bias, path), path,
          "attention_bias: not supported yet: false" + uses + "true)");
}

namespace {

// The product of sizes, or a ModelError naming `what` where it would not
// fit int64 (a hostile config's sizes, e.g. a video_length of 1e17).
int64_t size_product(std::initializer_list<int64_t> factors, const std::string& what) {
  int64_t p = 1;
  for (int64_t f : factors)
    if (__builtin_mul_overflow(p, f, &p)) throw ModelError(what + ": too large (the product overflows int64)");
  return p;
}

// The operation of `kind` in a layer of `heads` heads over work's tokens and frames.
parallel::AttentionOp attention_op(parallel::AttentionKind kind, const parallel::Workload& work, int64_t heads) {
  using parallel::AttentionOp;
  const int64_t frames = std::max<int64_t>(work.frames, 1);
  switch (kind) {
    case parallel::AttentionKind::kSpatial: return AttentionOp::spatial(work.tokens, heads);
    case parallel::AttentionKind::kTemporal: return AttentionOp::temporal(frames, heads);
    case parallel::AttentionKind::kSpatioTemporal:
      return AttentionOp::spatio_temporal(size_product({frames, work.tokens}, "a video's tokens"), heads);
    case parallel::AttentionKind::kCross: return AttentionOp::cross(0, heads);  // the text's length: not the config's
  }
  return {};
}

}  // namespace

std::pair<int64_t, int64_t> latent_size(int64_t height, int64_t width, int64_t default_height, int64_t default_width,
                                        int64_t vae_factor, int64_t patch, const std::string& where) {
  const int64_t unit = vae_factor * patch;
  const int64_t h = height ? height : default_height, w = width ? width : default_width;
  for (const int64_t side : {h, w})
    if (side <= 0 || side % unit) {
      const int64_t below = side / unit * unit, above = below + unit;
      throw ConfigError(where + ".height/width: " + std::to_string(h) + "x" + std::to_string(w) +
                        ": height and width must be positive multiples of " + std::to_string(unit) + " (VAE factor " +
                        std::to_string(vae_factor) + " x patch_size " + std::to_string(patch) + "); the nearest to " +
                        std::to_string(side) + ": " + (below > 0 ? std::to_string(below) + " or " : std::string()) +
                        std::to_string(above));
    }
  return {h / vae_factor, w / vae_factor};
}

parallel::Workload sized_workload(const TransformerSizes& c, const Shape& latent,
                                  const std::vector<parallel::AttentionKind>& attention, int64_t feed_forwards,
                                  const nn::TensorDecls& layer, const nn::TensorDecls& once) {
  const bool video = latent.size() == 4;  // (C, F, h, w)
  const int64_t frames = video ? latent.at(1) : 1, h = latent.at(latent.size() - 2), w = latent.at(latent.size() - 1);
  // Sizes come from config files: every product is checked before use.
  const int64_t per_frame = size_product({h, w}, "the latent's height x width");
  parallel::Workload work;
  work.heads = c.num_heads;
  work.head_dim = c.head_dim;
  work.layers = c.num_layers;
  work.tokens = (h / c.patch_size) * (w / c.patch_size);  // per image or frame
  work.frames = video ? frames : 0;
  for (parallel::AttentionKind kind : attention) work.attention.push_back(attention_op(kind, work, c.num_heads));
  work.feed_forwards = feed_forwards;
  work.mlp_hidden = c.ff_inner_dim;
  work.output_per_token = size_product({c.patch_size, c.patch_size, c.out_channels}, "patch_size^2 x out_channels");
  work.input_elements = size_product({c.in_channels, frames, per_frame}, "the latent's elements");
  work.output_elements = size_product({c.out_channels, frames, per_frame}, "the prediction's elements");
  work.eps_elements = work.input_elements;
  const nn::ElementCount per_layer = nn::count_elements(layer);
  work.split_per_layer = per_layer.split;
  work.whole_per_layer = per_layer.whole;
  work.whole_once = nn::count_elements(once).total();
  return work;
}

}  // namespace ditgen::models
