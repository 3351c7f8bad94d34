// The T5 tokenizer: transformers' slow `T5Tokenizer` (the sentencepiece one,
// what diffusers' PixArt and Latte pipelines load from a model's tokenizer/
// folder), called as those pipelines call it:
//
//   tokenizer(prompts, padding="max_length", max_length=L, truncation=True,
//             add_special_tokens=True)
//
// The SentencePiece model (spiece.model) is run by libsentencepiece, Google's
// own library: no tokenization is written here. What is written here is the
// thin layer transformers puts around it, mirrored line for line: the added
// tokens (<pad>, </s>, <unk>, <extra_id_k>) are split out of the text first
// (with their lstrip/rstrip whitespace rules), each remaining chunk is encoded
// by sentencepiece, the pieces are looked up, the ids truncated to L-1, `</s>`
// appended (unless the ids already end with it, as transformers does), and
// padded with <pad> to L. `legacy` (tokenizer_config.json; absent or null
// means true, as in transformers) selects T5Tokenizer's two behaviours; with
// legacy=false the model is loaded with add_dummy_prefix off and "▁" is
// prepended by hand, exactly as transformers does it.
//
// tests/io/test_t5_tokenizer.cpp checks every prompt of
// tests/fixtures/t5_tokenizer/ id for id against transformers' output.
//
// Which folders get this tokenizer and which transformers 5's
// (io/unigram_t5_tokenizer.h): io/text_tokenizer.h.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/t5_tokens.h"

namespace ditgen::io {

class T5Tokenizer {
 public:
  // `dir`: a model directory with a tokenizer/ folder, or a tokenizer folder.
  // Reads spiece.model (required) and tokenizer_config.json /
  // special_tokens_map.json when present. `legacy` overrides the config's.
  // ModelError naming the file for a missing, empty or corrupt spiece.model
  // (a folder with only tokenizer.json is told so), or a bad config value.
  static T5Tokenizer open(const std::string& dir, std::optional<bool> legacy = std::nullopt);

  T5Tokenizer(T5Tokenizer&&) noexcept;
  T5Tokenizer& operator=(T5Tokenizer&&) noexcept;
  ~T5Tokenizer();

  // The pipelines' call. ConfigError for max_length < 1, or for a prompt that
  // is not valid UTF-8 (naming the prompt's index).
  T5Tokens encode(const std::vector<std::string>& prompts, int64_t max_length) const;
  // The ids of one text, without </s>, truncation or padding
  // (T5Tokenizer.tokenize + convert_tokens_to_ids). The text must be UTF-8.
  std::vector<int64_t> tokenize(const std::string& text) const;

  const std::string& spiece_path() const;
  bool legacy() const;
  int64_t vocab_size() const;  // sentencepiece pieces + extra ids
  int64_t eos_id() const;
  int64_t pad_id() const;

 private:
  struct Impl;
  explicit T5Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ditgen::io
