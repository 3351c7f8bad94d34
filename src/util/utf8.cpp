#include "util/utf8.h"

#include <cstdint>
#include <stdexcept>

namespace ditgen {

namespace {

// Decodes the sequence at s[i]; false when it is not valid UTF-8.
bool decode_one(const std::string& s, size_t& i, char32_t& out) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t len = 0;
  uint32_t min = 0;
  if (c < 0x80) {
    out = c;
    ++i;
    return true;
  }
  if (c >= 0xC2 && c <= 0xDF) { len = 2; min = 0x80; }
  else if (c >= 0xE0 && c <= 0xEF) { len = 3; min = 0x800; }
  else if (c >= 0xF0 && c <= 0xF4) { len = 4; min = 0x10000; }
  else return false;
  if (i + len > s.size()) return false;
  uint32_t cp = c & (0x3F >> (len - 1));
  for (size_t k = 1; k < len; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return false;
    cp = (cp << 6) | (cc & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  out = cp;
  i += len;
  return true;
}

}  // namespace

size_t first_invalid_utf8(const std::string& s) {
  size_t i = 0;
  char32_t cp = 0;
  while (i < s.size()) {
    const size_t at = i;
    if (!decode_one(s, i, cp)) return at;
  }
  return std::string::npos;
}

std::u32string utf8_decode(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  char32_t cp = 0;
  while (i < s.size()) {
    if (!decode_one(s, i, cp)) throw std::invalid_argument("utf8_decode: invalid UTF-8 at byte " + std::to_string(i));
    out.push_back(cp);
  }
  return out;
}

std::string utf8_encode(const std::u32string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char32_t cp : s) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

std::string printable_text(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  size_t i = 0;
  char32_t cp = 0;
  while (i < s.size()) {
    const size_t at = i;
    if (decode_one(s, i, cp) && (cp >= 0x80 ? cp >= 0xA0 : cp >= 0x20 && cp != 0x7F)) {
      out.append(s, at, i - at);
      continue;
    }
    // One byte escaped; an invalid sequence's next byte is looked at again.
    const auto byte = static_cast<unsigned char>(s[at]);
    out += "\\x";
    out += kHex[byte >> 4];
    out += kHex[byte & 0xF];
    i = at + 1;
  }
  return out;
}

}  // namespace ditgen
