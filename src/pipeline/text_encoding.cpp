#include "pipeline/text_encoding.h"

#include <filesystem>
#include <map>

#include "io/model_dir.h"
#include "models/registry.h"
#include "ops/backend.h"
#include "pipeline/prompt_text.h"
#include "util/error.h"

namespace ditgen::pipeline {

namespace fs = std::filesystem;

models::Placement text_encoder_placement(Device device, const std::string& dtype) {
  DType want = DType::kF32;
  if (dtype == "auto")
    want = device == Device::kCUDA || ops::cpu_has_bf16() ? DType::kBF16 : DType::kF32;
  else if (dtype == "bfloat16")
    want = DType::kBF16;
  else if (dtype == "float16")
    want = device == Device::kCUDA ? DType::kF16 : DType::kF32;  // no float16 arithmetic on CPUs
  else if (dtype != "float32")
    throw ConfigError("text encoder dtype: expected auto, float32, bfloat16 or float16, got '" + dtype + "'");
  return {device, want, /*pack=*/false};  // read once per prompt: packing would cost more than it saves
}

TextStage TextStage::open(const std::string& model_dir) {
  const fs::path root(model_dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw ModelError(model_dir + ": not a directory (expected a model directory)");
  const fs::path encoder_dir = root / "text_encoder";
  const fs::path config_path = encoder_dir / "config.json";
  if (!fs::is_regular_file(config_path, ec))
    throw ModelError(config_path.string() + ": missing (a text-conditional model needs text_encoder/config.json "
                     "and its safetensors beside tokenizer/spiece.model)");
  TextStage stage(io::T5Tokenizer::open(model_dir));
  stage.encoder_dir_ = encoder_dir.string();
  stage.spec_ = models::text_encoder_spec(io::read_json_file(config_path.string()), config_path.string());
  if (stage.tokenizer_.vocab_size() > stage.spec_->vocab_size())
    throw ModelError(config_path.string() + ": vocab_size: " + std::to_string(stage.spec_->vocab_size()) +
                     " rows of embeddings, but the tokenizer (" + stage.tokenizer_.spiece_path() + ") has " +
                     std::to_string(stage.tokenizer_.vocab_size()) + " ids");
  const fs::path index = root / "model_index.json";
  if (fs::is_regular_file(index, ec)) {
    const std::string cls = io::get_string_or(io::read_json_file(index.string()), "_class_name", "", index.string());
    if (cls == "PixArtSigmaPipeline") stage.default_max_length_ = 300;
  }
  return stage;
}

PromptEmbeddings TextStage::tokenize(const std::vector<std::string>& prompts, int64_t max_length) const {
  if (max_length < 1 || max_length > kMaxSequenceLength)
    throw ConfigError("max_sequence_length: expected 1 to " + std::to_string(kMaxSequenceLength) + ", got " +
                      std::to_string(max_length));
  PromptEmbeddings out;
  out.texts.reserve(prompts.size());
  for (const std::string& p : prompts) out.texts.push_back(pipeline_prompt_text(p));
  out.tokens = tokenizer_.encode(out.texts, max_length);
  return out;
}

PromptEmbeddings TextStage::encode(const std::vector<std::string>& prompts, int64_t max_length,
                                   const models::Placement& place) const {
  PromptEmbeddings out = tokenize(prompts, max_length);
  // Each distinct text once.
  std::map<std::string, int64_t> slot_of;
  std::vector<int64_t> slot(out.texts.size());
  models::TokenBatch unique;
  for (size_t i = 0; i < out.texts.size(); ++i) {
    auto [it, fresh] = slot_of.emplace(out.texts[i], static_cast<int64_t>(unique.ids.size()));
    if (fresh) {
      unique.ids.push_back(out.tokens.ids[i]);
      unique.lengths.push_back(out.tokens.num_tokens[i]);
    }
    slot[i] = it->second;
  }
  const int64_t L = max_length, D = spec_->hidden_size(), n = static_cast<int64_t>(out.texts.size());
  const int64_t distinct = static_cast<int64_t>(unique.ids.size());
  Tensor encoded = Tensor::empty({distinct, L, D});
  {
    // The encoder lives in this scope only: its weights are released on the way out.
    const io::WeightStore weights = io::WeightStore::open_dir(encoder_dir_);
    const std::unique_ptr<models::TextEncoder> encoder = spec_->load(weights, place);
    // One text per pass: a GEMM's last bits depend on how many rows it
    // has, so a text encoded with others would not match the same text
    // encoded alone. Alone, a prompt's embeddings are the same bits in
    // every run (a resumed batch, a cached prompt, a subset of a file).
    for (int64_t u = 0; u < distinct; ++u) {
      models::TokenBatch one;
      one.ids.push_back(unique.ids[static_cast<size_t>(u)]);
      one.lengths.push_back(unique.lengths[static_cast<size_t>(u)]);
      encoded.slice0(u, u + 1).copy_from(encoder->encode(one));
    }
  }
  out.embeds = Tensor::empty({n, L, D});
  for (int64_t i = 0; i < n; ++i) out.embeds.slice0(i, i + 1).copy_from(encoded.slice0(slot[i], slot[i] + 1));
  return out;
}

}  // namespace ditgen::pipeline
