// The T5 tokenizers' shared batch building; see t5_tokens.h.
#include "io/t5_tokens.h"

#include <algorithm>

#include "util/error.h"
#include "util/utf8.h"

namespace ditgen::io {

T5Tokens encode_t5_tokens(const std::vector<std::string>& prompts, int64_t max_length, int64_t eos_id,
                          int64_t pad_id, EosRule eos,
                          const std::function<std::vector<int64_t>(const std::string&)>& tokenize) {
  if (max_length < 1)
    throw ConfigError("max_sequence_length: must be at least 1 (room for </s>), got " + std::to_string(max_length));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const size_t bad = first_invalid_utf8(prompts[i]);
    if (bad != std::string::npos)
      throw ConfigError("prompt " + std::to_string(i) + ": invalid UTF-8 at byte " + std::to_string(bad));
  }
  T5Tokens out;
  out.max_length = max_length;
  for (const auto& prompt : prompts) {
    std::vector<int64_t> ids = tokenize(prompt);
    // Truncation leaves room for the one special token, then </s>.
    if (static_cast<int64_t>(ids.size()) > max_length - 1) ids.resize(static_cast<size_t>(max_length - 1));
    if (eos == EosRule::kAlways || ids.empty() || ids.back() != eos_id) ids.push_back(eos_id);
    const auto n = static_cast<int64_t>(ids.size());
    std::vector<int64_t> mask(static_cast<size_t>(max_length), 0);
    std::fill(mask.begin(), mask.begin() + n, 1);
    ids.resize(static_cast<size_t>(max_length), pad_id);
    out.ids.push_back(std::move(ids));
    out.mask.push_back(std::move(mask));
    out.num_tokens.push_back(n);
  }
  return out;
}

void check_text_utf8(const std::string& text) {
  const size_t bad = first_invalid_utf8(text);
  if (bad != std::string::npos) throw ConfigError("text: invalid UTF-8 at byte " + std::to_string(bad));
}

}  // namespace ditgen::io
