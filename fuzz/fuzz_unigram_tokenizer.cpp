/* fuzz_unigram_tokenizer: transformers 5's T5Tokenizer reader
 * (io/unigram_t5_tokenizer.h), which parses tokenizer.json, the
 * SentencePiece protobuf (spiece.model) and the precompiled character map
 * itself. The first byte picks the folder kind:
 *   even: the rest split at the first two NUL bytes into tokenizer.json,
 *         tokenizer_config.json (absent without a NUL) and a text to encode;
 *   odd:  a 4-byte little-endian length n, then n bytes of spiece.model, then
 *         the text (the spiece.model-only kind).
 * An opened tokenizer must encode the text (when it is UTF-8) and a fixed one
 * with the padding and </s> invariants. Expected failures: ditgen::Error
 * (ModelError naming the file and field; ConfigError for a text that is
 * not UTF-8). Seeds: the Wan fixtures' two tokenizer folders. */
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "io/unigram_t5_tokenizer.h"
#include "util/error.h"

namespace {

void place(const std::string& path, const std::vector<std::string_view>& parts, size_t i) {
  std::error_code ec;
  if (i < parts.size())
    ditgen::fuzz::write_bytes(path, parts[i]);
  else
    std::filesystem::remove(path, ec);
}

void check(const ditgen::io::UnigramT5Tokenizer& tok, const std::string& text) {
  constexpr int64_t kLength = 24;
  const ditgen::io::T5Tokens t = tok.encode({text}, kLength);
  const int64_t n = t.num_tokens.at(0);
  if (static_cast<int64_t>(t.ids.at(0).size()) != kLength || n < 1 || n > kLength ||
      t.ids[0][static_cast<size_t>(n - 1)] != tok.eos_id())
    ditgen::fuzz::harness_failure("tokenizer result malformed");
  for (int64_t j = 0; j < kLength; ++j) {
    const int64_t id = t.ids[0][static_cast<size_t>(j)];
    if (id < 0 || id >= tok.vocab_size()) ditgen::fuzz::harness_failure("an id outside the vocabulary");
    if (j >= n && id != tok.pad_id()) ditgen::fuzz::harness_failure("padding is not pad_id");
    if (t.mask[0][static_cast<size_t>(j)] != (j < n ? 1 : 0)) ditgen::fuzz::harness_failure("mask is not a prefix");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ditgen::fuzz::ScratchDir dir;
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string text;
  std::error_code ec;
  if ((data[0] & 1) == 0) {
    const auto parts = ditgen::fuzz::split(input, '\0', 3);
    place(dir / "tokenizer.json", parts, 0);
    place(dir / "tokenizer_config.json", parts, 1);
    if (parts.size() > 2) text = std::string(parts[2]);
    std::filesystem::remove(dir / "spiece.model", ec);
  } else {
    if (input.size() < 4) return 0;
    uint32_t n = 0;
    for (int k = 3; k >= 0; --k) n = (n << 8) | static_cast<unsigned char>(input[static_cast<size_t>(k)]);
    const std::string_view rest = input.substr(4);
    const size_t model_size = std::min<size_t>(n, rest.size());
    ditgen::fuzz::write_bytes(dir / "spiece.model", rest.substr(0, model_size));
    text = std::string(rest.substr(model_size));
    std::filesystem::remove(dir / "tokenizer.json", ec);
    std::filesystem::remove(dir / "tokenizer_config.json", ec);
  }
  ditgen::fuzz::allow_reader_errors([&] {
    const ditgen::io::UnigramT5Tokenizer tok = ditgen::io::UnigramT5Tokenizer::open(dir.path());
    check(tok, "a red circle moving left &amp; \xE2\x98\x83 <extra_id_0> </s>");
    check(tok, text);
  });
  return 0;
}
