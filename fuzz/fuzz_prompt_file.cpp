/* fuzz_prompt_file: the input's first byte picks the format (odd: JSONL,
 * even: plain text), the rest is a prompt file. parse_prompt_text must
 * accept it or refuse it with a ConfigError naming file and line; every
 * accepted prompt (and negative prompt) then goes through the pipelines'
 * preprocessing (Python's lower().strip()) and the T5 tokenizer of the
 * committed byte-fallback fixture, and through WanPipeline's cleaning
 * (html.unescape twice, whitespace collapsed) and transformers 5's
 * tokenizer of the Wan fixture, as `ditgen encode` would. Invariants
 * checked: accepted prompts are valid UTF-8 within kMaxPromptBytes, the
 * preprocessed text is valid UTF-8 with no ASCII whitespace at either end
 * (and, cleaned for Wan, no two spaces in a row), and each tokenizer
 * returns L ids with a prefix mask ending in </s>. */
#include <cctype>
#include <cstdint>
#include <string>

#include "config/prompt_file.h"
#include "fuzz_support.h"
#include "io/t5_tokenizer.h"
#include "io/unigram_t5_tokenizer.h"
#include "pipeline/prompt_text.h"
#include "util/error.h"
#include "util/utf8.h"

namespace {

constexpr int64_t kLength = 32;

template <class Tokenizer>
void check_tokens(const Tokenizer& tok, const std::string& text) {
  using ditgen::fuzz::harness_failure;
  const ditgen::io::T5Tokens t = tok.encode({text}, kLength);
  const int64_t n = t.num_tokens.at(0);
  if (static_cast<int64_t>(t.ids.at(0).size()) != kLength || n < 1 || n > kLength ||
      t.ids[0][static_cast<size_t>(n - 1)] != tok.eos_id())
    harness_failure("tokenizer result malformed for '" + text + "'");
  for (int64_t j = 0; j < kLength; ++j)
    if (t.mask[0][static_cast<size_t>(j)] != (j < n ? 1 : 0)) harness_failure("mask is not a prefix");
}

void check_wan(const ditgen::io::UnigramT5Tokenizer& tok, const std::string& prompt) {
  using ditgen::fuzz::harness_failure;
  const std::string text = ditgen::pipeline::unescape_collapse_prompt_text(prompt);
  if (ditgen::first_invalid_utf8(text) != std::string::npos) harness_failure("Wan cleaning made invalid UTF-8");
  if (text.find("  ") != std::string::npos) harness_failure("Wan cleaning left two spaces in a row: '" + text + "'");
  if (!text.empty() && (std::isspace(static_cast<unsigned char>(text.front())) ||
                        std::isspace(static_cast<unsigned char>(text.back()))))
    harness_failure("Wan cleaning left whitespace at an end: '" + text + "'");
  check_tokens(tok, text);
}

void check_prompt(const ditgen::io::T5Tokenizer& tok, const std::string& prompt) {
  using ditgen::fuzz::harness_failure;
  if (prompt.size() > ditgen::config::kMaxPromptBytes || ditgen::first_invalid_utf8(prompt) != std::string::npos)
    harness_failure("parse_prompt_text accepted an invalid prompt");
  const std::string text = ditgen::pipeline::pipeline_prompt_text(prompt);
  if (ditgen::first_invalid_utf8(text) != std::string::npos) harness_failure("preprocessing made invalid UTF-8");
  if (!text.empty() && (std::isspace(static_cast<unsigned char>(text.front())) ||
                        std::isspace(static_cast<unsigned char>(text.back()))))
    harness_failure("preprocessing left whitespace at an end: '" + text + "'");
  check_tokens(tok, text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ditgen::io::T5Tokenizer tok =
      ditgen::io::T5Tokenizer::open(std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/t5_tokenizer/bytefb");
  static const ditgen::io::UnigramT5Tokenizer wan =
      ditgen::io::UnigramT5Tokenizer::open(std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/wan_tiny");
  if (size == 0) return 0;
  const bool jsonl = data[0] & 1;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    for (const ditgen::config::PromptEntry& e : ditgen::config::parse_prompt_text(text, "prompts", jsonl)) {
      check_prompt(tok, e.prompt);
      check_wan(wan, e.prompt);
      if (e.negative_prompt) {
        check_prompt(tok, *e.negative_prompt);
        check_wan(wan, *e.negative_prompt);
      }
    }
  } catch (const ditgen::ConfigError&) {
  }
  return 0;
}
