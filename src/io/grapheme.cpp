#include "io/grapheme.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace ditgen::io {

namespace {

enum class Gcb : uint8_t {
  kOther, kCR, kLF, kControl, kExtend, kZWJ, kRegionalIndicator, kPrepend, kSpacingMark, kL, kV, kT, kLV, kLVT
};
struct GcbRange {
  uint32_t first, last;
  Gcb value;
};
struct CodeRange {
  uint32_t first, last;
};

#include "io/grapheme_break.inc"

Gcb gcb(char32_t c) {
  if (c >= 0xAC00 && c <= 0xD7A3) return (c - 0xAC00) % 28 == 0 ? Gcb::kLV : Gcb::kLVT;
  const auto* end = std::end(kGcbRanges);
  const auto* it = std::upper_bound(std::begin(kGcbRanges), end, static_cast<uint32_t>(c),
                                    [](uint32_t v, const GcbRange& r) { return v < r.first; });
  if (it == std::begin(kGcbRanges)) return Gcb::kOther;
  --it;
  return c <= it->last ? it->value : Gcb::kOther;
}

bool extended_pictographic(char32_t c) {
  const auto* end = std::end(kExtendedPictographic);
  const auto* it = std::upper_bound(std::begin(kExtendedPictographic), end, static_cast<uint32_t>(c),
                                    [](uint32_t v, const CodeRange& r) { return v < r.first; });
  if (it == std::begin(kExtendedPictographic)) return false;
  --it;
  return c <= it->last;
}

bool control_like(Gcb g) { return g == Gcb::kControl || g == Gcb::kCR || g == Gcb::kLF; }

}  // namespace

size_t grapheme_end(const std::u32string& s, size_t start) {
  const size_t n = s.size();
  if (start >= n) return n;
  Gcb prev = gcb(s[start]);
  // GB11: an Extended_Pictographic, then Extend*, then ZWJ, joins the next
  // Extended_Pictographic. pict_state: 0 none, 1 after ExtPict Extend*, 2 after that + ZWJ.
  int pict_state = extended_pictographic(s[start]) ? 1 : 0;
  int regional = prev == Gcb::kRegionalIndicator ? 1 : 0;  // RIs in a row ending at i-1 (GB12/13)
  size_t i = start + 1;
  for (; i < n; ++i) {
    const Gcb next = gcb(s[i]);
    const bool pict = extended_pictographic(s[i]);
    bool join;
    if (prev == Gcb::kCR && next == Gcb::kLF) join = true;                       // GB3
    else if (control_like(prev) || control_like(next)) join = false;             // GB4, GB5
    else if (prev == Gcb::kL && (next == Gcb::kL || next == Gcb::kV || next == Gcb::kLV || next == Gcb::kLVT))
      join = true;                                                               // GB6
    else if ((prev == Gcb::kLV || prev == Gcb::kV) && (next == Gcb::kV || next == Gcb::kT)) join = true;  // GB7
    else if ((prev == Gcb::kLVT || prev == Gcb::kT) && next == Gcb::kT) join = true;                      // GB8
    else if (next == Gcb::kExtend || next == Gcb::kZWJ) join = true;             // GB9
    else if (next == Gcb::kSpacingMark) join = true;                             // GB9a
    else if (prev == Gcb::kPrepend) join = true;                                 // GB9b
    else if (pict_state == 2 && pict) join = true;                               // GB11
    else if (prev == Gcb::kRegionalIndicator && next == Gcb::kRegionalIndicator) join = regional % 2 == 1;  // GB12, GB13
    else join = false;                                                           // GB999
    if (!join) break;
    // Update the GB11 and GB12/13 states with s[i].
    if (pict) pict_state = 1;
    else if (pict_state == 1 && next == Gcb::kExtend) pict_state = 1;
    else if (pict_state == 1 && next == Gcb::kZWJ) pict_state = 2;
    else pict_state = 0;
    regional = next == Gcb::kRegionalIndicator ? regional + 1 : 0;
    prev = next;
  }
  return i;
}

}  // namespace ditgen::io
