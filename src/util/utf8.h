// UTF-8 validation, decoding and encoding: the one implementation behind
// the tokenizer's prompt check, the prompt-file reader and the pipelines'
// prompt preprocessing. Strict (RFC 3629): overlong forms, surrogates and
// code points past U+10FFFF are invalid.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace ditgen {

// The byte offset of the first invalid UTF-8 sequence in `s`, or npos.
size_t first_invalid_utf8(const std::string& s);

// The code points of valid UTF-8 text (call first_invalid_utf8 first:
// std::invalid_argument for invalid input).
std::u32string utf8_decode(const std::string& s);
std::string utf8_encode(const std::u32string& s);

// `s` safe to print on a terminal: control bytes and bytes that are not
// part of valid UTF-8 become "\xNN"; valid UTF-8 and printable ASCII stay
// (a binary file's bytes quoted in an error message must not reach the
// terminal raw).
std::string printable_text(const std::string& s);

}  // namespace ditgen
