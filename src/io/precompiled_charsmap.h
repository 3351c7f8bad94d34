// tokenizers' Precompiled normalizer (the `normalizers.Precompiled` that
// transformers 5's T5Tokenizer puts in front of its Unigram model when the
// SentencePiece model, or tokenizer.json, carries a compiled character
// map; spm_precompiled's format): a darts-clone double-array trie of
// UTF-8 keys whose values index '\0'-terminated replacement strings.
//
// The text is walked by extended grapheme clusters (io/grapheme.h), as
// tokenizers does: a cluster shorter than 6 bytes whose bytes begin with a
// key is replaced whole by the replacement of the SHORTEST such key (so
// "e" U+0301 U+0301 becomes "é" and a fullwidth A with an accent becomes
// "A": tokenizers' behaviour, kept); otherwise each code point is replaced
// by its key's replacement or kept. Unlike libsentencepiece's own
// normalizer (longest match over bytes), this is what transformers 5 does.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ditgen::io {

class PrecompiledCharsmap {
 public:
  PrecompiledCharsmap() = default;
  // The map's bytes (spiece.model's normalizer_spec.precompiled_charsmap,
  // or tokenizer.json's base64-decoded precompiled_charsmap). ModelError
  // naming `source` for a blob that is not one (too short, a trie size past
  // its end, replacement strings that are not UTF-8).
  PrecompiledCharsmap(const std::string& blob, std::string source);

  bool empty() const { return trie_.empty(); }
  // Valid UTF-8 in (unchecked), UTF-8 out. ModelError naming the source
  // when a trie value points outside the replacement strings.
  std::string normalize(const std::string& text) const;

 private:
  // The replacement of the shortest key that is a prefix of `chunk`, or null.
  const char* transform(const char* chunk, size_t len, size_t& out_len) const;

  std::vector<uint32_t> trie_;
  std::string normalized_;
  std::string source_;
};

}  // namespace ditgen::io
