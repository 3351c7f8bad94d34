// The prompt preprocessing of diffusers' PixArt and Latte pipelines with
// clean_caption=False (DESIGN.md §6): `text.lower().strip()`, Python's
// Unicode-aware lower() and strip(), applied before the tokenizer sees the
// prompt. (clean_caption=True needs bs4 and ftfy and rewrites captions with
// dozens of regular expressions; ditgen does not do it: a prompt reaches
// the tokenizer as the user wrote it, lower-cased and stripped.)
#pragma once
#include <string>

namespace ditgen::pipeline {

// Python's `text.lower().strip()` on valid UTF-8 (std::invalid_argument
// otherwise: prompts are checked when read). lower() is the full Unicode
// lower-case mapping: the simple mapping of the C library's C.UTF-8
// locale, plus the cases Python's differs in (U+0130 becomes "i" + U+0307,
// a final capital sigma becomes U+03C2); strip() removes what Python's
// str.isspace() calls whitespace, at both ends.
std::string pipeline_prompt_text(const std::string& prompt);

}  // namespace ditgen::pipeline
