// The T5 family's registry entry: T5Config is text_encoder/config.json as
// transformers reads it (T5Config / UMT5Config, with their defaults for
// absent keys), T5Spec answers the TextEncoderSpec questions from it (the
// parameter count from T5Encoder's declared tensors) and checks every
// declared tensor of the checkpoint before load() builds a T5Encoder.
// The bucketed relative position of T5's attention bias lives here too,
// written as transformers computes it (float32 log ratio truncated toward
// zero), so it is tested against transformers' own table.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "models/config_spec.h"
#include "models/nn/t5_layers.h"
#include "models/text_encoder.h"

namespace ditgen::models {

using nn::T5Activation;  // the feed-forward's (models/nn/t5_layers.h)

struct T5Config {
  bool umt5 = false;             // a relative position table in every block (else block 0's, shared)
  int64_t vocab_size = 0;
  int64_t d_model = 0;           // D
  int64_t d_kv = 0;              // per-head size
  int64_t num_heads = 0;         // H
  int64_t d_ff = 0;
  int64_t num_layers = 0;        // encoder blocks
  int64_t num_buckets = 32;      // relative_attention_num_buckets
  int64_t max_distance = 128;    // relative_attention_max_distance
  float eps = 1e-6f;             // layer_norm_epsilon
  bool gated = false;            // feed_forward_proj "gated-*"
  T5Activation act = T5Activation::kRelu;
  std::string feed_forward_proj = "relu";
  std::string path;              // config.json, for messages

  int64_t inner_dim() const { return num_heads * d_kv; }
  // ModelError naming `path` and the key for a missing or malformed field.
  static T5Config from_json(const nlohmann::json& cfg, const std::string& path);
};

// transformers' bidirectional relative-position bucket of
// relative_position = key position - query position.
int64_t t5_position_bucket(int64_t relative_position, int64_t num_buckets, int64_t max_distance);

class T5Spec final : public ConfigSpec<TextEncoderSpec, T5Config> {
 public:
  using ConfigSpec::ConfigSpec;
  const char* family() const override { return "t5"; }
  const char* variant() const override;
  int64_t hidden_size() const override { return cfg_.d_model; }
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  int64_t param_count() const override;
  // llama.cpp's t5encoder GGUF files (city96's umt5-xxl-encoder): names
  // mapped back by models/t5_gguf_names.h; transformers' names otherwise
  // (ComfyUI's umt5_xxl_*.safetensors, plain or scaled fp8).
  io::SingleFileOptions single_file_options() const override;
  void check_weights(const io::WeightStore& weights) const override;
  std::unique_ptr<TextEncoder> load(const io::WeightStore& weights, const Placement& place) const override;
};

std::unique_ptr<TextEncoderSpec> make_t5_spec(const nlohmann::json& cfg, const std::string& path);

}  // namespace ditgen::models
