// ClipVisionConfig parsing follows transformers' CLIPVisionConfig (its
// defaults for absent keys; a CLIPConfig's vision_config read the same
// way), with bounds that keep every size plan multiplies finite. The counts
// come from ClipVisionEncoder's declarations, so they cannot drift from
// what loads.
#include "models/clip_vision_spec.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "io/model_dir.h"
#include "models/clip_vision.h"
#include "models/config_spec.h"
#include "util/error.h"

namespace ditgen::models {

namespace {

constexpr int64_t kMaxWidth = int64_t{1} << 16, kMaxLayers = 1024, kMaxImage = 4096;

// The GEMM weights of the declarations (the 2-D ones: the linears and the
// patch conv, declared as its GEMM) and the rest, in elements. The position
// table is 2-D too but placed as a plain weight (Placement::put).
struct Elements {
  double matrices = 0, other = 0;
};

Elements elements_of(const nn::TensorDecls& decls) {
  Elements e;
  for (const nn::TensorDecl& d : decls) {
    double n = 1;
    for (int64_t extent : d.shape) n *= static_cast<double>(extent);
    (d.shape.size() == 2 && d.name.find("position_embedding") == std::string::npos ? e.matrices : e.other) += n;
  }
  return e;
}

// Stem + every loaded layer (all alike: layer 0's declarations times the count).
Elements loaded_elements(const ClipVisionConfig& c) {
  Elements stem = elements_of(ClipVisionEncoder::stem_tensors(c, ""));
  const Elements layer = elements_of(ClipVisionEncoder::layer_tensors(c, "", 0));
  stem.matrices += static_cast<double>(c.layers_run()) * layer.matrices;
  stem.other += static_cast<double>(c.layers_run()) * layer.other;
  return stem;
}

}  // namespace

ClipVisionConfig ClipVisionConfig::from_json(const nlohmann::json& json, const std::string& path) {
  require(json.is_object(), path, "expected a JSON object");
  // A CLIPConfig (model_type "clip") holds the vision tower's config under vision_config.
  const bool nested = json.contains("vision_config") && !json["vision_config"].is_null();
  require(!nested || json["vision_config"].is_object(), path, "vision_config: expected a JSON object");
  const nlohmann::json& cfg = nested ? json["vision_config"] : json;
  const std::string where = nested ? path + ": vision_config" : path;
  const std::string model_type = io::get_string_or(cfg, "model_type", "clip_vision_model", where);
  require(model_type == "clip_vision_model" || (!nested && model_type == "clip"), where,
          "model_type: '" + model_type + "' is not a CLIP vision model (clip_vision_model)");

  ClipVisionConfig c;
  c.path = path;
  read_positive_ints(cfg, where,
                     {{"hidden_size", &c.hidden_size},
                      {"intermediate_size", &c.intermediate_size},
                      {"num_hidden_layers", &c.num_layers},
                      {"num_attention_heads", &c.num_heads},
                      {"num_channels", &c.num_channels},
                      {"image_size", &c.image_size},
                      {"patch_size", &c.patch_size}});
  for (auto [key, v, max] : {std::tuple{"hidden_size", c.hidden_size, kMaxWidth},
                             {"intermediate_size", c.intermediate_size, 4 * kMaxWidth},
                             {"num_hidden_layers", c.num_layers, kMaxLayers},
                             {"image_size", c.image_size, kMaxImage}})
    require(v <= max, where, std::string(key) + ": expected at most " + std::to_string(max) + ", got " + std::to_string(v));
  require(c.hidden_size % c.num_heads == 0, where,
          "num_attention_heads: " + std::to_string(c.num_heads) + " does not divide hidden_size " +
              std::to_string(c.hidden_size));
  require(c.patch_size <= c.image_size, where,
          "patch_size: " + std::to_string(c.patch_size) + " is larger than image_size " + std::to_string(c.image_size));
  require(c.num_channels == 3, where,
          "num_channels: expected 3 (the image processor's RGB), got " + std::to_string(c.num_channels));
  c.eps = static_cast<float>(io::get_number_or(cfg, "layer_norm_eps", 1e-5, where));
  require(c.eps > 0 && std::isfinite(c.eps), where, "layer_norm_eps: expected a positive number");

  c.hidden_act = io::get_string_or(cfg, "hidden_act", "quick_gelu", where);  // CLIPVisionConfig's default
  if (c.hidden_act == "gelu")
    c.act = ClipActivation::kGelu;
  else if (c.hidden_act == "gelu_new" || c.hidden_act == "gelu_pytorch_tanh")
    c.act = ClipActivation::kGeluTanh;
  else
    throw ModelError(where + ": hidden_act: '" + c.hidden_act +
                     "' is not an activation ditgen's CLIP encoder computes (gelu, gelu_new, gelu_pytorch_tanh)");
  return c;
}

int64_t ClipVisionSpec::param_count() const {
  const Elements e = loaded_elements(cfg_);
  return static_cast<int64_t>(e.matrices + e.other);
}

double ClipVisionSpec::weight_bytes(const Placement& place) const {
  const Elements e = loaded_elements(cfg_);
  return e.matrices * static_cast<double>(dtype_size(place.dtype)) +
         e.other * static_cast<double>(dtype_size(place.storage()));
}

double ClipVisionSpec::encode_bytes(const Placement& place, int64_t images) const {
  const double n = static_cast<double>(std::min(images, ClipVisionEncoder::kImagesPerPass));
  const double rows = n * static_cast<double>(cfg_.tokens());
  const double D = static_cast<double>(cfg_.hidden_size), F = static_cast<double>(cfg_.intermediate_size);
  // A layer's live tensors at its widest: the residual, the norm, q, k, v,
  // the attention output and its projection (7 rows of D), then the
  // MLP's hidden (F) beside the residual, the norm and fc2's output.
  const double pass = rows * std::max(7 * D, 3 * D + F) * static_cast<double>(dtype_size(place.storage()));
  const double output = static_cast<double>(images) * static_cast<double>(cfg_.tokens()) * D * 4;
  return pass + output;
}

void ClipVisionSpec::check_weights(const io::WeightStore& weights) const { ClipVisionEncoder::check(weights, cfg_); }

std::unique_ptr<ClipVisionEncoder> ClipVisionSpec::load(const io::WeightStore& weights, const Placement& place) const {
  check_weights(weights);
  return std::make_unique<ClipVisionEncoder>(cfg_, weights, place);
}

ClipVisionSpec clip_vision_spec(const std::string& dir) {
  const std::string path = dir + "/config.json";
  return ClipVisionSpec(ClipVisionConfig::from_json(io::read_json_file(path), path));
}

std::unique_ptr<ClipVisionEncoder> load_clip_vision(const std::string& dir, const Placement& place) {
  const ClipVisionSpec spec = clip_vision_spec(dir);
  return spec.load(io::WeightStore::open_dir(dir), place);
}

}  // namespace ditgen::models
