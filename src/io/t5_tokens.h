// What both T5 tokenizers (io/t5_tokenizer.h, transformers 4's
// sentencepiece one, and io/unigram_t5_tokenizer.h, transformers 5's) give
// the pipelines, and the one place they build it: the checks on the prompts
// and max_length, then per prompt truncation to L - 1 ids, </s> and padding
// to L with the mask. The tokenizers differ only in their pieces and in
// whether </s> is appended to ids that already end with it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ditgen::io {

// The pipeline's view of a batch of prompts: ids [N][L] and mask [N][L].
struct T5Tokens {
  int64_t max_length = 0;
  std::vector<std::vector<int64_t>> ids;   // per prompt: L ids, <pad> (0) after the real ones
  std::vector<std::vector<int64_t>> mask;  // per prompt: 1 for real tokens (pieces and </s>), 0 for padding
  // Per prompt: the real tokens (pieces + </s>, after truncation), the count
  // LattePipeline's mask_feature cuts the embeddings to.
  std::vector<int64_t> num_tokens;
};

// How a tokenizer appends </s> after truncation.
enum class EosRule {
  kIfAbsent,  // transformers 4's _add_eos_if_not_present: not after a </s>
  kAlways,    // TemplateProcessing "$A </s>": whatever the ids end with
};

// The batch of `prompts`, each tokenized by `tokenize` (its ids without
// </s>; called only on valid UTF-8), truncated to max_length - 1 ids, </s>
// (eos_id) appended as `eos` says, padded with pad_id to max_length.
// ConfigError for max_length < 1, or for a prompt that is not valid UTF-8
// (naming the prompt's index), before any prompt is tokenized.
T5Tokens encode_t5_tokens(const std::vector<std::string>& prompts, int64_t max_length, int64_t eos_id,
                          int64_t pad_id, EosRule eos,
                          const std::function<std::vector<int64_t>(const std::string&)>& tokenize);

// ConfigError naming the byte unless `text` is valid UTF-8: the check of a
// tokenizer's tokenize(text).
void check_text_utf8(const std::string& text);

// What both T5 tokenizers (io/t5_tokenizer.h, io/unigram_t5_tokenizer.h) do
// through their implementation `impl` (tokenize(text) without </s>, eos_id,
// pad_id): tokenize checked text, and encode a batch under their EOS rule.
template <class Impl>
std::vector<int64_t> tokenize_checked(const Impl& impl, const std::string& text) {
  check_text_utf8(text);
  return impl.tokenize(text);
}
template <class Impl>
T5Tokens encode_with(const Impl& impl, const std::vector<std::string>& prompts, int64_t max_length, EosRule eos) {
  return encode_t5_tokens(prompts, max_length, impl.eos_id, impl.pad_id, eos,
                          [&](const std::string& prompt) { return impl.tokenize(prompt); });
}

}  // namespace ditgen::io
