// Which T5 tokenizer a model's tokenizer folder gets (docs/text-wan.md), and
// the one interface the text stage calls either through:
//
//   tokenizer/tokenizer.json exists              -> transformers 5's T5Tokenizer
//                                                   (io/unigram_t5_tokenizer.h)
//   spiece.model only, and the pipeline names
//   T5TokenizerFast (model_index.json's
//   "tokenizer" entry: Wan)                      -> the same, built from spiece.model
//                                                   as transformers converts it
//   spiece.model only otherwise (T5Tokenizer:
//   PixArt, Latte; a bare folder)                 -> the slow, sentencepiece-based
//                                                   T5Tokenizer (io/t5_tokenizer.h)
//
// This is what the pipelines' own references were made with: transformers
// 4's T5Tokenizer is libsentencepiece itself (byte pieces where the model
// has byte fallback), its T5TokenizerFast and every T5 tokenizer of
// transformers 5 are tokenizers' Unigram without byte fallback (a character
// outside the vocabulary is <unk>). The PixArt and Latte fixtures were made
// with transformers 4's T5Tokenizer, the Wan fixtures with transformers 5.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/t5_tokenizer.h"

namespace ditgen::io {

enum class T5TokenizerKind {
  kSentencePiece,  // transformers 4's slow T5Tokenizer: libsentencepiece
  kUnigram,        // transformers 5's T5Tokenizer (and every T5TokenizerFast)
};

const char* t5_tokenizer_kind_name(T5TokenizerKind kind);

// The rule above. `dir`: a model directory with tokenizer/, or the folder
// itself; `pipeline_tokenizer_class`: model_index.json's tokenizer class
// ("" when there is no model_index.json).
T5TokenizerKind t5_tokenizer_kind(const std::string& dir, const std::string& pipeline_tokenizer_class);

class PromptTokenizer {
 public:
  virtual ~PromptTokenizer() = default;
  // Padded to max_length with <pad>, truncated to keep </s>, as the
  // pipelines call their tokenizer. ConfigError for max_length < 1 or a
  // prompt that is not UTF-8.
  virtual T5Tokens encode(const std::vector<std::string>& prompts, int64_t max_length) const = 0;
  virtual int64_t vocab_size() const = 0;        // one past the largest id it gives
  virtual const std::string& folder() const = 0;  // the tokenizer folder
  virtual const std::string& source() const = 0;  // the file its vocabulary comes from
  virtual T5TokenizerKind kind() const = 0;
};

// Opens `dir`'s tokenizer with the kind the rule gives.
std::unique_ptr<PromptTokenizer> open_t5_tokenizer(const std::string& dir, const std::string& pipeline_tokenizer_class);

}  // namespace ditgen::io
