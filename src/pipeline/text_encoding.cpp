#include "pipeline/text_encoding.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "io/model_dir.h"
#include "models/registry.h"
#include "ops/backend.h"
#include "pipeline/prompt_text.h"
#include "pipeline/component_files.h"
#include "util/error.h"

namespace ditgen::pipeline {

namespace fs = std::filesystem;

models::Placement text_encoder_placement(Device device, DTypeChoice dtype) {
  // Read once per prompt: packing would cost more than it saves.
  return {device, resolve_dtype(dtype, device, ops::cpu_has_bf16()), /*pack=*/false};
}

int64_t TextStage::default_max_length() const {
  if (rules_.fixed_max_length > 0) return rules_.fixed_max_length;
  return rules_.default_max_length > 0 ? rules_.default_max_length : 120;
}

TextStage TextStage::open(const std::string& model_dir, bool with_tokenizer, const std::string& encoder_file) {
  const fs::path root(model_dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw ModelError(model_dir + ": not a directory (expected a model directory)");
  const fs::path encoder_dir = root / "text_encoder";
  const fs::path config_path = encoder_dir / "config.json";
  if (encoder_file.empty() && !fs::is_regular_file(config_path, ec))
    throw ModelError(config_path.string() + ": missing (a text-conditional model needs text_encoder/config.json "
                     "and its safetensors beside tokenizer/spiece.model)");
  // The pipeline class and the tokenizer class it names (model_index.json:
  // "tokenizer": ["transformers", "T5TokenizerFast"]).
  TextStage stage;
  std::string tokenizer_class;
  const fs::path index = root / "model_index.json";
  if (fs::is_regular_file(index, ec)) {
    const nlohmann::json mi = io::read_json_file(index.string());
    stage.pipeline_class_ = io::get_string_or(mi, "_class_name", "", index.string());
    const auto tok = mi.find("tokenizer");
    if (tok != mi.end() && !tok->is_null()) {
      if (!tok->is_array() || tok->size() != 2 || !((*tok)[1].is_string() || (*tok)[1].is_null()))
        throw ModelError(index.string() + ": tokenizer: expected [library, class], got " + tok->dump());
      if ((*tok)[1].is_string()) tokenizer_class = (*tok)[1].get<std::string>();
    }
  }
  stage.rules_ = models::pipeline_text_rules(stage.pipeline_class_);
  stage.encoder_dir_ = encoder_dir.string();
  stage.encoder_file_ = encoder_file;
  PartConfig config = part_config(config_path.string(), "text_encoder", encoder_file, "model.text_encoder",
                                  spec_fits(encoder_file, models::text_encoder_spec));
  stage.spec_ = models::text_encoder_spec(config.json, config.path);
  stage.config_path_ = config.path;
  stage.note_ = config.note;
  // The file holds every tensor the encoder reads: said now, not after the transformer has loaded.
  if (!encoder_file.empty())
    check_component(encoder_file, "model.text_encoder", [&] { stage.spec_->check_weights(stage.weights()); });
  if (!with_tokenizer) return stage;
  stage.tokenizer_ = io::open_t5_tokenizer(model_dir, tokenizer_class);
  if (stage.tokenizer_->vocab_size() > stage.spec_->vocab_size())
    throw ModelError(stage.config_path_ + ": vocab_size: " + std::to_string(stage.spec_->vocab_size()) +
                     " rows of embeddings, but the tokenizer (" + stage.tokenizer_->source() + ") has " +
                     std::to_string(stage.tokenizer_->vocab_size()) + " ids");
  return stage;
}

io::WeightStore TextStage::weights() const {
  if (encoder_file_.empty()) return io::WeightStore::open_dir(encoder_dir_);
  return io::WeightStore::open_file(encoder_file_, spec_->single_file_options());
}

const io::PromptTokenizer& TextStage::tokenizer() const {
  if (!tokenizer_) throw std::logic_error("TextStage: opened without its tokenizer (for plan)");
  return *tokenizer_;
}

PromptEmbeddings TextStage::tokenize(const std::vector<std::string>& prompts, int64_t max_length) const {
  if (max_length < 1 || max_length > kMaxSequenceLength)
    throw ConfigError("max_sequence_length: expected 1 to " + std::to_string(kMaxSequenceLength) + ", got " +
                      std::to_string(max_length));
  PromptEmbeddings out;
  out.texts.reserve(prompts.size());
  for (const std::string& p : prompts) out.texts.push_back(prompt_text(p, rules_.prompt_cleaning));
  out.tokens = tokenizer().encode(out.texts, max_length);
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
      // CogVideoXPipeline calls the encoder without a mask: every row attends.
      unique.lengths.push_back(rules_.encoder_unmasked ? max_length : out.tokens.num_tokens[i]);
    }
    slot[i] = it->second;
  }
  const int64_t L = max_length, D = spec_->hidden_size(), n = static_cast<int64_t>(out.texts.size());
  const int64_t distinct = static_cast<int64_t>(unique.ids.size());
  Tensor encoded = Tensor::empty({distinct, L, D});
  {
    // The encoder lives in this scope only: its weights are released on the way out.
    const io::WeightStore weights = this->weights();
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
      if (rules_.zero_padded_unmasked) {
        // WanPipeline: u[:seq_len] then zeros (the encoder's padding rows dropped).
        const int64_t k = unique.lengths[static_cast<size_t>(u)];
        float* rows = encoded.data() + (u * L + k) * D;
        std::fill(rows, rows + (L - k) * D, 0.0f);
      }
    }
  }
  out.embeds = Tensor::empty({n, L, D});
  for (int64_t i = 0; i < n; ++i) out.embeds.slice0(i, i + 1).copy_from(encoded.slice0(slot[i], slot[i] + 1));
  return out;
}

}  // namespace ditgen::pipeline
