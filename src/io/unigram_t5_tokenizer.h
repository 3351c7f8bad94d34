// The T5 tokenizer of transformers 5: `T5Tokenizer` (T5TokenizerFast is the
// same class there), backed by Hugging Face's tokenizers library, called as
// diffusers' WanPipeline calls it:
//
//   tokenizer(prompts, padding="max_length", max_length=L, truncation=True,
//             add_special_tokens=True, return_attention_mask=True)
//
// transformers 5 builds that tokenizer the same way from either kind of
// tokenizer folder (docs/text-wan.md):
//
// - tokenizer.json: the Unigram vocabulary (pieces and scores) and, when its
//   normalizer is (or holds, in a Sequence) a Precompiled one, that
//   character map. Everything else T5Tokenizer fixes for itself, whatever
//   the file says: byte_fallback false, unk id 2, no other normalizer, the
//   pre-tokenizer WhitespaceSplit + Metaspace("▁", prepend always, split),
//   the post-processor "$A </s>". ditgen reads and type-checks those fields
//   (model.type must be "Unigram") and then does the same.
// - spiece.model alone: its pieces and scores, then <extra_id_{n-1}> ..
//   <extra_id_0> (tokenizer_config.json's extra_ids, default 100) with
//   score 0, and the model's precompiled character map; the same fixed rules.
//   So a character outside the vocabulary is <unk> even where the
//   SentencePiece model has byte_fallback (libsentencepiece would spell its
//   bytes), and a run of such characters is one <unk>.
//
// Encoding a text, as tokenizers does: split out the added tokens (those
// with normalized=false on the raw text, with their lstrip / rstrip /
// single_word rules), normalize each remaining piece with the character map
// (io/precompiled_charsmap.h), split out the normalized=true added tokens,
// split at whitespace (Unicode White_Space), prefix every word with "▁" and
// split it before each "▁", then segment each piece with the Unigram
// model's Viterbi (tokenizers' encode_optimized: the best total score,
// ties to the earlier start; a character no piece starts with is <unk> at
// min score - 10; consecutive <unk> fused into one). Then: truncate to
// L - 1 ids, append </s> (always: "a </s>" gives </s> twice), pad with
// <pad> to L.
//
// The added tokens, as transformers 5 collects them: tokenizer_config.json's
// added_tokens_decoder when it has one; otherwise added_tokens.json (no
// strip) and tokenizer.json's added_tokens; then the pad / eos / unk tokens
// and the extra special tokens (the SentencePiece model's control and
// user-defined pieces and <extra_id_k>, or the config's list) that are not
// among them yet. A token's id is its vocabulary id.
//
// tests/io/test_unigram_t5_tokenizer.cpp checks it against transformers 5 on
// the Wan fixtures (tokenizer_cases.json) and on 340 prompts with an NFKC
// character map (tests/fixtures/wan_text/fast_t5_tokenizer.json).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/t5_tokens.h"

namespace ditgen::io {

class UnigramT5Tokenizer {
 public:
  // `dir`: a model directory with a tokenizer/ folder, or a tokenizer
  // folder. Reads tokenizer.json when present, else spiece.model, plus
  // tokenizer_config.json, special_tokens_map.json and added_tokens.json
  // when present. ModelError naming the file and field for anything
  // missing, malformed or of the wrong type.
  static UnigramT5Tokenizer open(const std::string& dir);

  UnigramT5Tokenizer(UnigramT5Tokenizer&&) noexcept;
  UnigramT5Tokenizer& operator=(UnigramT5Tokenizer&&) noexcept;
  ~UnigramT5Tokenizer();

  // The pipeline's call. ConfigError for max_length < 1 or a prompt that is
  // not valid UTF-8 (naming its index).
  T5Tokens encode(const std::vector<std::string>& prompts, int64_t max_length) const;
  // The ids of one text, without </s>, truncation or padding. The text must
  // be UTF-8 (ConfigError otherwise).
  std::vector<int64_t> tokenize(const std::string& text) const;

  const std::string& folder() const;
  const std::string& source() const;  // the file the vocabulary came from
  int64_t vocab_size() const;         // every id it can give
  int64_t eos_id() const;
  int64_t pad_id() const;
  int64_t unk_id() const;
  bool has_charsmap() const;

 private:
  struct Impl;
  explicit UnigramT5Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ditgen::io
