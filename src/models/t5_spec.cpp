// T5Config parsing follows transformers' T5Config.__init__ (feed_forward_proj
// "relu" | "gated-gelu" | "<act>" | "gated-<act>", gated-gelu meaning
// gelu_new) and its defaults; UMT5 is told by model_type "umt5" or a UMT5
// class name. The position bucket mirrors
// T5Attention._relative_position_bucket (bidirectional) operation for
// operation in float32, because its truncation makes the last bit matter:
// with 32 buckets and max_distance 128 the ratio log(16/8)/log(128/8)*8 is
// an exact 2 in real numbers, and float32 rounding decides the bucket.
#include "models/t5_spec.h"

#include <cmath>

#include "io/model_dir.h"
#include "models/t5.h"
#include "models/t5_gguf_names.h"
#include "util/error.h"

namespace ditgen::models {

namespace {

std::string class_name_of(const nlohmann::json& cfg, const std::string& path) {
  std::string cls = io::get_string_or(cfg, "_class_name", "", path);
  if (cls.empty() && cfg.contains("architectures") && cfg["architectures"].is_array() &&
      !cfg["architectures"].empty() && cfg["architectures"][0].is_string())
    cls = cfg["architectures"][0].get<std::string>();
  return cls;
}

}  // namespace

T5Config T5Config::from_json(const nlohmann::json& cfg, const std::string& path) {
  using io::get_int;
  using io::get_int_or;
  T5Config c;
  c.path = path;
  const std::string model_type = io::get_string_or(cfg, "model_type", "", path);
  c.umt5 = model_type == "umt5" || class_name_of(cfg, path).rfind("UMT5", 0) == 0;
  c.vocab_size = get_int(cfg, "vocab_size", path);
  c.d_model = get_int(cfg, "d_model", path);
  c.d_kv = get_int(cfg, "d_kv", path);
  c.num_heads = get_int(cfg, "num_heads", path);
  c.d_ff = get_int(cfg, "d_ff", path);
  c.num_layers = get_int(cfg, "num_layers", path);
  c.num_buckets = get_int_or(cfg, "relative_attention_num_buckets", 32, path);
  c.max_distance = get_int_or(cfg, "relative_attention_max_distance", 128, path);
  c.eps = static_cast<float>(io::get_number_or(cfg, "layer_norm_epsilon", 1e-6, path));
  for (auto [key, v] : {std::pair{"vocab_size", c.vocab_size}, {"d_model", c.d_model}, {"d_kv", c.d_kv},
                        {"num_heads", c.num_heads}, {"d_ff", c.d_ff}, {"num_layers", c.num_layers}})
    require(v > 0 && v <= (int64_t{1} << 24), path,
            std::string(key) + ": expected a positive integer up to 2^24, got " + std::to_string(v));
  // Bidirectional buckets: half per direction, half of those exact.
  require(c.num_buckets >= 4 && c.num_buckets <= 4096, path,
          "relative_attention_num_buckets: expected 4 to 4096, got " + std::to_string(c.num_buckets));
  require(c.max_distance > c.num_buckets / 4 && c.max_distance <= (int64_t{1} << 24), path,
          "relative_attention_max_distance: expected more than relative_attention_num_buckets / 4 (" +
              std::to_string(c.num_buckets / 4) + "), got " + std::to_string(c.max_distance));
  require(c.eps > 0 && std::isfinite(c.eps), path, "layer_norm_epsilon: expected a positive number");

  c.feed_forward_proj = io::get_string_or(cfg, "feed_forward_proj", c.umt5 ? "gated-gelu" : "relu", path);
  std::string act = c.feed_forward_proj;
  if (act.rfind("gated-", 0) == 0) {
    c.gated = true;
    act = act.substr(6);
  }
  if (c.feed_forward_proj == "gated-gelu") act = "gelu_new";  // as transformers' T5Config
  if (act == "relu")
    c.act = T5Activation::kRelu;
  else if (act == "gelu_new")
    c.act = T5Activation::kGeluNew;
  else if (act == "silu" || act == "swish")
    c.act = T5Activation::kSilu;
  else
    throw ModelError(path + ": feed_forward_proj: '" + c.feed_forward_proj +
                     "' is not a feed-forward ditgen computes (relu, gated-gelu, gelu_new, silu, and their gated- forms)");
  return c;
}

int64_t t5_position_bucket(int64_t relative_position, int64_t num_buckets, int64_t max_distance) {
  const int64_t half = num_buckets / 2;
  int64_t bucket = relative_position > 0 ? half : 0;
  const int64_t distance = relative_position < 0 ? -relative_position : relative_position;
  const int64_t max_exact = half / 2;
  if (distance < max_exact) return bucket + distance;
  // torch: log(float(distance) / max_exact) / math.log(max_distance / max_exact) * (half - max_exact),
  // every step in float32 (a Python float operand is rounded to float32 first).
  const float ratio = static_cast<float>(distance) / static_cast<float>(max_exact);
  const float denom = static_cast<float>(std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)));
  const float scaled = std::log(ratio) / denom * static_cast<float>(half - max_exact);
  const int64_t large = std::min<int64_t>(max_exact + static_cast<int64_t>(scaled), half - 1);
  return bucket + large;
}

const char* T5Spec::variant() const {
  if (cfg_.umt5) return "UMT5";
  if (!cfg_.gated && cfg_.act == T5Activation::kRelu) return "T5 v1.0";
  return "T5 v1.1";
}

int64_t T5Spec::param_count() const {
  // Block 0 holds T5's one position table, UMT5's blocks one each.
  double n = nn::count_elements(T5Encoder::stem_tensors(cfg_)).total() +
             nn::count_elements(T5Encoder::layer_tensors(cfg_, 0)).total();
  if (cfg_.num_layers > 1)
    n += static_cast<double>(cfg_.num_layers - 1) * nn::count_elements(T5Encoder::layer_tensors(cfg_, 1)).total();
  return static_cast<int64_t>(n);
}

io::SingleFileOptions T5Spec::single_file_options() const {
  io::SingleFileOptions o;
  o.architecture = "t5encoder";
  o.other_naming_probe = "token_embd.weight";
  o.rename = [gated = cfg_.gated](const std::string& name) { return t5_gguf_to_transformers(name, gated); };
  return o;
}

void T5Spec::check_weights(const io::WeightStore& weights) const { T5Encoder::check(weights, cfg_); }

std::unique_ptr<TextEncoder> T5Spec::load(const io::WeightStore& weights, const Placement& place) const {
  check_weights(weights);
  return std::make_unique<T5Encoder>(cfg_, weights, place);
}

std::unique_ptr<TextEncoderSpec> make_t5_spec(const nlohmann::json& cfg, const std::string& path) {
  return make_config_spec<T5Spec>(cfg, path);
}

}  // namespace ditgen::models
