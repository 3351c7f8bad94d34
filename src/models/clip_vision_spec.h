// The CLIP vision encoder's config and its questions answered from it alone
// (what plan asks before anything loads): ClipVisionConfig is
// image_encoder/config.json as transformers reads it for CLIPVisionModel
// (CLIPVisionConfig, its defaults for absent keys), or a CLIPConfig whose
// vision_config holds it; ClipVisionSpec counts the weights the encoder
// loads and the bytes it holds, checks a checkpoint's tensors and loads a
// ClipVisionEncoder (models/clip_vision.h).
//
// Only what Wan 2.1 image-to-video reads is computed: hidden_states[-2],
// the output of the next-to-last encoder layer. The last layer and
// post_layernorm feed only hidden_states[-1] and the pooled output, so they
// are neither checked nor loaded nor run (ViT-H/14: 1/32 of the layers'
// weights and time).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "models/placement.h"

namespace ditgen::models {

class ClipVisionEncoder;

// hidden_act: transformers' ACT2FN names ditgen computes.
enum class ClipActivation {
  kGelu,      // "gelu": exact, erf (the published ViT-H/14's)
  kGeluTanh,  // "gelu_new", "gelu_pytorch_tanh": the tanh approximation
};

struct ClipVisionConfig {
  int64_t hidden_size = 768;        // D
  int64_t intermediate_size = 3072; // F
  int64_t num_layers = 12;          // num_hidden_layers
  int64_t num_heads = 12;           // num_attention_heads
  int64_t num_channels = 3;
  int64_t image_size = 224;
  int64_t patch_size = 32;
  float eps = 1e-5f;                // layer_norm_eps
  ClipActivation act = ClipActivation::kGelu;
  std::string hidden_act = "quick_gelu";  // as written (CLIPVisionConfig's default, refused)
  std::string path;                 // config.json, for messages

  int64_t head_dim() const { return hidden_size / num_heads; }
  int64_t grid() const { return image_size / patch_size; }  // patches per side (the conv's floor)
  int64_t tokens() const { return grid() * grid() + 1; }    // T: the class token, then the patches
  int64_t layers_run() const { return num_layers - 1; }     // up to hidden_states[-2]
  // ModelError naming `path` and the key for a missing, malformed or
  // out-of-range field and an activation ditgen does not compute.
  static ClipVisionConfig from_json(const nlohmann::json& cfg, const std::string& path);
};

class ClipVisionSpec {
 public:
  explicit ClipVisionSpec(ClipVisionConfig cfg) : cfg_(std::move(cfg)) {}
  const ClipVisionConfig& config() const { return cfg_; }
  int64_t hidden_size() const { return cfg_.hidden_size; }
  int64_t tokens() const { return cfg_.tokens(); }
  // The parameters load() reads (the stem and the first num_layers - 1
  // layers; not the last layer nor post_layernorm).
  int64_t param_count() const;
  // What the encoder holds once loaded on `place`: its GEMM weights in the
  // compute dtype, the rest in place.storage() (models/placement.h).
  double weight_bytes(const Placement& place) const;
  // What one encode of `images` images adds on top (activations of one pass
  // of at most ClipVisionEncoder::kImagesPerPass images, in storage(), and
  // the float32 output), for plan's memory count.
  double encode_bytes(const Placement& place, int64_t images) const;
  // Checks every tensor load() reads (under either naming: models/
  // clip_vision.h) against `weights`, reading none: ModelError naming the
  // file and the first tensor that does not fit.
  void check_weights(const io::WeightStore& weights) const;
  std::unique_ptr<ClipVisionEncoder> load(const io::WeightStore& weights, const Placement& place) const;

 private:
  ClipVisionConfig cfg_;
};

// `dir`/config.json read as a ClipVisionSpec.
ClipVisionSpec clip_vision_spec(const std::string& dir);
// The encoder of the folder `dir` (image_encoder/: config.json and its
// safetensors), checked and loaded onto `place`.
std::unique_ptr<ClipVisionEncoder> load_clip_vision(const std::string& dir, const Placement& place);

}  // namespace ditgen::models
