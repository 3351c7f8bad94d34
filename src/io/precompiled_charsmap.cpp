#include "io/precompiled_charsmap.h"

#include <cstring>

#include "io/grapheme.h"
#include "util/error.h"
#include "util/utf8.h"

namespace ditgen::io {

namespace {

// darts-clone's unit layout (spm_precompiled's ArrayUnit).
bool has_leaf(uint32_t u) { return ((u >> 8) & 1) == 1; }
uint32_t value_of(uint32_t u) { return u & ((1u << 31) - 1); }
uint32_t label_of(uint32_t u) { return u & ((1u << 31) | 0xFFu); }
uint32_t offset_of(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

size_t utf8_length(unsigned char lead) { return lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2; }

}  // namespace

PrecompiledCharsmap::PrecompiledCharsmap(const std::string& blob, std::string source) : source_(std::move(source)) {
  if (blob.size() < 4) throw ModelError(source_ + ": precompiled_charsmap: " + std::to_string(blob.size()) +
                                        " bytes, too short for its 4-byte trie size");
  uint32_t trie_size = 0;
  for (int k = 3; k >= 0; --k) trie_size = (trie_size << 8) | static_cast<unsigned char>(blob[static_cast<size_t>(k)]);
  if (trie_size > blob.size() - 4)
    throw ModelError(source_ + ": precompiled_charsmap: its trie of " + std::to_string(trie_size) +
                     " bytes runs past the map's end (" + std::to_string(blob.size()) + " bytes)");
  trie_.resize(trie_size / 4);  // as spm_precompiled: trailing bytes of a partial unit are ignored
  for (size_t i = 0; i < trie_.size(); ++i) {
    uint32_t u = 0;
    for (int k = 3; k >= 0; --k) u = (u << 8) | static_cast<unsigned char>(blob[4 + 4 * i + static_cast<size_t>(k)]);
    trie_[i] = u;
  }
  normalized_ = blob.substr(4 + trie_size);
  const size_t bad = first_invalid_utf8(normalized_);
  if (bad != std::string::npos)
    throw ModelError(source_ + ": precompiled_charsmap: its replacement strings are not UTF-8 (byte " +
                     std::to_string(bad) + ")");
  if (trie_.empty()) throw ModelError(source_ + ": precompiled_charsmap: an empty trie");
}

const char* PrecompiledCharsmap::transform(const char* chunk, size_t len, size_t& out_len) const {
  // DoubleArray::common_prefix_search, keeping only the first (shortest) result.
  size_t node = 0;
  uint32_t unit = trie_[0];
  node ^= offset_of(unit);
  for (size_t i = 0; i < len; ++i) {
    const auto c = static_cast<unsigned char>(chunk[i]);
    if (c == 0) break;
    node ^= c;
    if (node >= trie_.size()) return nullptr;  // a hostile map: no key continues here
    unit = trie_[node];
    if (label_of(unit) != c) return nullptr;
    node ^= offset_of(unit);
    if (has_leaf(unit)) {
      if (node >= trie_.size()) return nullptr;
      const size_t index = value_of(trie_[node]);
      if (index > normalized_.size() ||
          (index < normalized_.size() && (static_cast<unsigned char>(normalized_[index]) & 0xC0) == 0x80))
        throw ModelError(source_ + ": precompiled_charsmap: a trie value (" + std::to_string(index) +
                         ") outside its " + std::to_string(normalized_.size()) + " bytes of replacement strings");
      const char* text = normalized_.data() + index;
      out_len = strnlen(text, normalized_.size() - index);
      return text;
    }
  }
  return nullptr;
}

std::string PrecompiledCharsmap::normalize(const std::string& text) const {
  if (trie_.empty()) return text;
  const std::u32string cps = utf8_decode(text);
  // Byte offsets of each code point.
  std::vector<size_t> at(cps.size() + 1, 0);
  for (size_t i = 0, b = 0; i < cps.size(); ++i) {
    at[i] = b;
    b += utf8_length(static_cast<unsigned char>(text[b]));
    at[i + 1] = b;
  }
  std::string out;
  out.reserve(text.size());
  for (size_t g = 0; g < cps.size();) {
    const size_t end = grapheme_end(cps, g);
    const size_t bytes = at[end] - at[g];
    size_t n = 0;
    if (bytes < 6) {
      if (const char* r = transform(text.data() + at[g], bytes, n)) {
        out.append(r, n);
        g = end;
        continue;
      }
    }
    for (size_t i = g; i < end; ++i) {
      const size_t len = at[i + 1] - at[i];
      if (const char* r = transform(text.data() + at[i], len, n))
        out.append(r, n);
      else
        out.append(text, at[i], len);
    }
    g = end;
  }
  return out;
}

}  // namespace ditgen::io
