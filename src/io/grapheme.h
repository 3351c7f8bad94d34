// Extended grapheme clusters (Unicode UAX #29), as the Rust crate
// unicode-segmentation splits a string for tokenizers' Precompiled
// normalizer (io/precompiled_charsmap.h): rules GB3..GB13 on the
// Grapheme_Cluster_Break and Extended_Pictographic properties, generated
// from the `regex` module's Unicode data into grapheme_break.inc
// (scripts/text/make_text_tables.py). Rule GB9c (Indic conjuncts, Unicode
// 15.1) is not applied: it only joins clusters of 3-byte characters,
// which the normalizer handles character by character either way.
#pragma once
#include <cstddef>
#include <string>

namespace ditgen::io {

// One past the last code point of the cluster that starts at s[start]
// (start < s.size()).
size_t grapheme_end(const std::u32string& s, size_t start);

}  // namespace ditgen::io
