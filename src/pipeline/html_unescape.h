// Python's html.unescape (CPython 3.x, Lib/html/__init__.py), which
// diffusers' WanPipeline applies twice to every prompt (docs/design.md §6,
// docs/text-wan.md). The same rules, code point for code point:
//
//   a reference is '&' followed by  #[0-9]+;?  |  #[xX][0-9a-fA-F]+;?  |
//   1 to 32 code points none of which is TAB, LF, FF, space, '<', '&', '#'
//   or ';', then an optional ';' (the longest such run).
//   numeric: html._invalid_charrefs first (NUL -> U+FFFD, CR -> CR, 0x80..0x9F
//     -> their Windows-1252 characters), then a surrogate or a value past
//     U+10FFFF -> U+FFFD, then html._invalid_codepoints (C0/C1 controls but
//     TAB/LF/FF/CR, U+FDD0..U+FDEF, the U+xFFFE/U+xFFFF non-characters) ->
//     nothing, else the character. Any number of digits (values saturate).
//   named: the run (with its ';' when present) if it is one of the 2231
//     names of html.entities.html5, else its longest prefix of at least two
//     code points that is (the rest kept as text), else the text unchanged.
//
// The tables are generated from Python's own (scripts/text/make_text_tables.py
// -> html5_entities.inc); tests/pipeline/test_wan_text.cpp checks 600 strings
// against Python's results (tests/fixtures/wan_text/html_unescape.json).
#pragma once
#include <string>

namespace ditgen::pipeline {

// `text` must be valid UTF-8 (std::invalid_argument otherwise); the result is.
std::string html_unescape(const std::string& text);

}  // namespace ditgen::pipeline
