// Lower-casing goes through towlower_l in glibc's built-in C.UTF-8 locale
// (Unicode simple case mapping, the process locale untouched); Python's
// differences from it are applied here by hand, and
// tests/pipeline/test_prompt_text.cpp checks the whole function against
// Python's own results (tests/fixtures/t5_encoder/prompt_preprocess.json).
#include "pipeline/prompt_text.h"

#include <locale.h>
#include <wctype.h>

#include <stdexcept>

#include "pipeline/html_unescape.h"
#include "util/utf8.h"

namespace ditgen::pipeline {

namespace {

locale_t utf8_locale() {
  static locale_t loc = [] {
    locale_t l = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
    if (!l) throw std::runtime_error("prompt preprocessing: the C.UTF-8 locale is not available");
    return l;
  }();
  return loc;
}

char32_t simple_lower(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  return static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), utf8_locale()));
}
char32_t simple_upper(char32_t c) { return static_cast<char32_t>(towupper_l(static_cast<wint_t>(c), utf8_locale())); }

// str.isspace(): Unicode White_Space plus the C0 separators U+001C..U+001F.
bool python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Unicode's White_Space: the `regex` module's \s (and Rust's
// char::is_whitespace); str.isspace() adds U+001C..U+001F.
bool unicode_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::u32string python_strip(const std::u32string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end && python_space(s[begin])) ++begin;
  while (end > begin && python_space(s[end - 1])) --end;
  return s.substr(begin, end - begin);
}

// Unicode's Cased and Case_Ignorable, as far as the final-sigma rule needs
// them: a letter with a case mapping either way or a lower/upper class;
// apostrophes, dots, combining marks and modifier letters between it and
// the sigma are skipped.
bool cased(char32_t c) {
  return iswupper_l(static_cast<wint_t>(c), utf8_locale()) || iswlower_l(static_cast<wint_t>(c), utf8_locale()) ||
         simple_lower(c) != c || simple_upper(c) != c;
}
bool case_ignorable(char32_t c) {
  return c == 0x27 || c == 0x2E || c == 0x3A || c == 0x5E || c == 0x60 || c == 0xA8 || c == 0xAD || c == 0xAF ||
         c == 0xB4 || c == 0xB7 || c == 0xB8 || c == 0x2018 || c == 0x2019 || c == 0x2024 || c == 0x2027 ||
         (c >= 0x0300 && c <= 0x036F) || (c >= 0x02B0 && c <= 0x02FF) || (c >= 0x1AB0 && c <= 0x1AFF) ||
         (c >= 0x1DC0 && c <= 0x1DFF) || (c >= 0x20D0 && c <= 0x20FF) || (c >= 0xFE00 && c <= 0xFE0F) ||
         (c >= 0xFE20 && c <= 0xFE2F);
}

// Python's final-sigma context: a cased letter before (skipping
// case-ignorables) and none after.
bool final_sigma(const std::u32string& s, size_t i) {
  size_t j = i;
  while (j > 0 && case_ignorable(s[j - 1])) --j;
  if (j == 0 || !cased(s[j - 1])) return false;
  size_t k = i + 1;
  while (k < s.size() && case_ignorable(s[k])) ++k;
  return k == s.size() || !cased(s[k]);
}

}  // namespace

std::string pipeline_prompt_text(const std::string& prompt) {
  const std::u32string in = utf8_decode(prompt);
  size_t begin = 0, end = in.size();
  while (begin < end && python_space(in[begin])) ++begin;
  while (end > begin && python_space(in[end - 1])) --end;
  std::u32string out;
  out.reserve(end - begin);
  for (size_t i = begin; i < end; ++i) {
    const char32_t c = in[i];
    if (c == 0x0130) {  // İ: SpecialCasing's one unconditional two-letter lower case
      out += U"i\u0307";
    } else if (c == 0x03A3) {  // Σ: σ, or ς at the end of a word (judged on the unstripped text, as Python)
      out.push_back(final_sigma(in, i) ? char32_t{0x03C2} : char32_t{0x03C3});
    } else {
      out.push_back(simple_lower(c));
    }
  }
  return utf8_encode(out);
}

std::string unescape_collapse_prompt_text(const std::string& prompt) {
  if (first_invalid_utf8(prompt) != std::string::npos)
    throw std::invalid_argument("prompt cleaning: invalid UTF-8");
  const std::u32string unescaped = python_strip(utf8_decode(html_unescape(html_unescape(prompt))));
  std::u32string collapsed;
  collapsed.reserve(unescaped.size());
  for (size_t i = 0; i < unescaped.size();) {
    if (unicode_white_space(unescaped[i])) {
      collapsed.push_back(U' ');
      while (i < unescaped.size() && unicode_white_space(unescaped[i])) ++i;
    } else {
      collapsed.push_back(unescaped[i++]);
    }
  }
  return utf8_encode(python_strip(collapsed));
}

std::string prompt_text(const std::string& prompt, models::PromptCleaning how) {
  switch (how) {
    case models::PromptCleaning::kLowerStrip: return pipeline_prompt_text(prompt);
    case models::PromptCleaning::kUnescapeCollapseWhitespace: return unescape_collapse_prompt_text(prompt);
    case models::PromptCleaning::kNone: return prompt;
  }
  throw std::logic_error("prompt_text: unknown cleaning");
}

}  // namespace ditgen::pipeline
