// The text stage of the text-conditional pipelines (docs/design.md §2, §6) and
// of `ditgen encode`: prompts -> the pipeline's cleaning (prompt_text) ->
// T5 tokenizer (padding to max_length, truncation, </s>; the kind the
// tokenizer folder and the pipeline call for, io/text_tokenizer.h) -> text
// encoder -> one embedding row per token, with the rows past a text's own
// tokens zeroed where the pipeline does so (WanPipeline). The rules are the
// pipeline class's, from model_index.json (models::pipeline_text_rules), so they
// hold without a transformer (`ditgen encode`). Each
// distinct prompt is encoded once (a negative prompt shared by a batch, a
// prompt repeated in a file), alone (one text per encoder pass, so its
// embeddings are the same bits whatever else is encoded), and the encoder is
// released when encode() returns: its weights are unmapped before any
// denoising starts, as docs/design.md §2 asks.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/t5_tokenizer.h"
#include "io/text_tokenizer.h"
#include "models/placement.h"
#include "vocab/dtype_choice.h"
#include "models/text_encoder.h"
#include "models/transformer.h"
#include "tensor/tensor.h"

namespace ditgen::pipeline {

// What the transformer stage receives for N prompts.
struct PromptEmbeddings {
  std::vector<std::string> texts;  // N, after preprocessing
  io::T5Tokens tokens;             // ids and mask (N x L) and each prompt's token count
  Tensor embeds;                   // (N, L, D) host float32; undefined when only tokenized
};

// Where and in what dtype the text encoder runs, from --device and
// model.dtype / --dtype (docs/design.md §2, models/placement.h): "auto" is
// bfloat16 on CUDA and on CPUs with bfloat16 dot products
// (ops::cpu_has_bf16), float32 elsewhere; "float16" computes as float32 on
// the CPU.
models::Placement text_encoder_placement(Device device, DTypeChoice dtype);

class TextStage {
 public:
  // A model directory with text_encoder/ and tokenizer/ (model_index.json
  // optional: a bare pair works). Reads configs and the tokenizer, no
  // weights. ModelError naming the file for a missing part, an unknown
  // encoder class, or a tokenizer whose ids do not fit the encoder's table.
  // with_tokenizer false (`plan`, which counts max_sequence_length rows and
  // tokenizes nothing): tokenizer/ is not read, and may be absent.
  // encoder_file (model.text_encoder; "" = text_encoder/'s weights): one
  // file holding the encoder, read as its spec reads single files and
  // checked to hold every tensor the encoder reads (ModelError naming it
  // and the first that does not fit); without text_encoder/config.json the
  // published config it fits is taken (component_files.h: note()).
  static TextStage open(const std::string& model_dir, bool with_tokenizer = true,
                        const std::string& encoder_file = "");

  // The pipeline's max_sequence_length default, from model_index.json's
  // pipeline class: Latte and PixArt-α 120, PixArt-Σ 300, Wan 512; 120
  // without one.
  int64_t default_max_length() const;
  // The text-side rules of the model's pipeline class (models::pipeline_text_rules).
  const models::TextPipelineRules& rules() const { return rules_; }
  const std::string& pipeline_class() const { return pipeline_class_; }
  const models::TextEncoderSpec& encoder_spec() const { return *spec_; }
  const io::PromptTokenizer& tokenizer() const;
  const std::string& encoder_dir() const { return encoder_dir_; }
  // The encoder's config.json as read, and its single weights file ("" = encoder_dir()'s).
  const std::string& encoder_config_path() const { return config_path_; }
  const std::string& encoder_file() const { return encoder_file_; }
  // Which published config the encoder file took, for the user ("" = none).
  const std::string& note() const { return note_; }

  // Cleans and tokenizes (ConfigError for max_length outside [1,
  // kMaxSequenceLength]).
  PromptEmbeddings tokenize(const std::vector<std::string>& prompts, int64_t max_length) const;
  // tokenize, then loads the encoder onto `place`, encodes each distinct
  // text once, and releases the encoder. Rows past a text's tokens are
  // exact zeros where rules().zero_padded_unmasked says so (what the
  // pipeline feeds the transformer), the encoder's output otherwise.
  PromptEmbeddings encode(const std::vector<std::string>& prompts, int64_t max_length,
                          const models::Placement& place) const;

  static constexpr int64_t kMaxSequenceLength = 2048;

 private:
  TextStage() = default;
  std::unique_ptr<io::PromptTokenizer> tokenizer_;
  // The encoder's weights: encoder_file_ or encoder_dir_'s.
  io::WeightStore weights() const;

  std::unique_ptr<models::TextEncoderSpec> spec_;
  std::string encoder_dir_;
  std::string config_path_;
  std::string encoder_file_;
  std::string note_;
  std::string pipeline_class_;
  models::TextPipelineRules rules_;
};

}  // namespace ditgen::pipeline
