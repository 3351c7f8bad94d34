#include "pipeline/html_unescape.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "util/utf8.h"

namespace ditgen::pipeline {

namespace {

struct HtmlEntity {
  const char* name;  // UTF-8 (ASCII in practice), ';' included where the name has one
  const char* text;  // UTF-8 replacement
};
struct InvalidCharref {
  uint32_t code;
  const char* text;
};

#include "pipeline/html5_entities.inc"

// The entity named exactly `name` (UTF-8), or null.
const HtmlEntity* find_entity(std::string_view name) {
  const auto* begin = std::begin(kHtml5Entities);
  const auto* end = std::end(kHtml5Entities);
  const auto* it = std::lower_bound(begin, end, name, [](const HtmlEntity& e, std::string_view n) {
    return std::string_view(e.name) < n;  // byte order: the table is sorted by UTF-8 bytes
  });
  return it != end && std::string_view(it->name) == name ? it : nullptr;
}

bool ascii_digit(char32_t c) { return c >= U'0' && c <= U'9'; }
bool ascii_hex(char32_t c) { return ascii_digit(c) || (c >= U'a' && c <= U'f') || (c >= U'A' && c <= U'F'); }
uint32_t hex_value(char32_t c) {
  return ascii_digit(c) ? c - U'0' : (c >= U'a' ? c - U'a' + 10 : c - U'A' + 10);
}
// [^\t\n\f <&#;]
bool name_char(char32_t c) {
  return c != U'\t' && c != U'\n' && c != U'\f' && c != U' ' && c != U'<' && c != U'&' && c != U'#' && c != U';';
}

// html._replace_charref for a numeric reference of value `num` (saturated
// past U+10FFFF: every such value gives U+FFFD alike).
std::u32string numeric_text(uint64_t num) {
  for (const InvalidCharref& r : kInvalidCharrefs)
    if (r.code == num) return utf8_decode(r.text);
  if ((num >= 0xD800 && num <= 0xDFFF) || num > 0x10FFFF) return U"\uFFFD";
  if (std::binary_search(std::begin(kInvalidCodepoints), std::end(kInvalidCodepoints), static_cast<uint32_t>(num)))
    return U"";
  return std::u32string(1, static_cast<char32_t>(num));
}

}  // namespace

std::string html_unescape(const std::string& text) {
  if (text.find('&') == std::string::npos) {
    if (first_invalid_utf8(text) != std::string::npos) throw std::invalid_argument("html_unescape: invalid UTF-8");
    return text;
  }
  const std::u32string s = utf8_decode(text);
  std::u32string out;
  out.reserve(s.size());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    if (s[i] != U'&') {
      out.push_back(s[i++]);
      continue;
    }
    // s[i] == '&': try the three alternatives of html._charref in order.
    const size_t start = i + 1;
    if (start < n && s[start] == U'#') {
      size_t j = start + 1;
      if (j < n && ascii_digit(s[j])) {  // #[0-9]+;?
        uint64_t num = 0;
        while (j < n && ascii_digit(s[j])) {
          num = std::min<uint64_t>(num * 10 + (s[j] - U'0'), 0x110000);
          ++j;
        }
        if (j < n && s[j] == U';') ++j;
        out += numeric_text(num);
        i = j;
        continue;
      }
      if (j < n && (s[j] == U'x' || s[j] == U'X') && j + 1 < n && ascii_hex(s[j + 1])) {  // #[xX][0-9a-fA-F]+;?
        ++j;
        uint64_t num = 0;
        while (j < n && ascii_hex(s[j])) {
          num = std::min<uint64_t>(num * 16 + hex_value(s[j]), 0x110000);
          ++j;
        }
        if (j < n && s[j] == U';') ++j;
        out += numeric_text(num);
        i = j;
        continue;
      }
      // '#' cannot start a name: no reference here.
      out.push_back(U'&');
      ++i;
      continue;
    }
    // [^\t\n\f <&#;]{1,32};?
    size_t j = start;
    while (j < n && j - start < 32 && name_char(s[j])) ++j;
    if (j == start) {
      out.push_back(U'&');
      ++i;
      continue;
    }
    if (j < n && s[j] == U';') ++j;
    const std::u32string name = s.substr(start, j - start);
    if (const HtmlEntity* e = find_entity(utf8_encode(name))) {
      out += utf8_decode(e->text);
    } else {
      // The longest prefix (of at least two code points) that is a name.
      bool found = false;
      for (size_t x = name.size() - 1; x >= 2 && x < name.size(); --x) {
        if (const HtmlEntity* p = find_entity(utf8_encode(name.substr(0, x)))) {
          out += utf8_decode(p->text);
          out += name.substr(x);
          found = true;
          break;
        }
      }
      if (!found) {
        out.push_back(U'&');
        out += name;
      }
    }
    i = j;
  }
  return utf8_encode(out);
}

}  // namespace ditgen::pipeline
