// The prompt preprocessing of the text pipelines, before the tokenizer
// sees a prompt (docs/design.md §6; models::PromptCleaning says which):
//
// - diffusers' PixArt and Latte pipelines with clean_caption=False:
//   `text.lower().strip()`, Python's Unicode-aware lower() and strip().
//   (clean_caption=True needs bs4 and ftfy and rewrites captions with
//   dozens of regular expressions; ditgen does not do it: a prompt reaches
//   the tokenizer as the user wrote it, lower-cased and stripped.)
// - diffusers' WanPipeline (prompt_clean): html.unescape twice, strip(),
//   every run of whitespace to one space, strip(); no lower-casing.
//   diffusers first runs ftfy.fix_text where the ftfy package is installed;
//   ditgen does not (docs/text-wan.md lists what that changes).
// - diffusers' CogVideoXPipeline: the prompt as written.
#pragma once
#include <string>

#include "models/transformer.h"

namespace ditgen::pipeline {

// Python's `text.lower().strip()` on valid UTF-8 (std::invalid_argument
// otherwise: prompts are checked when read). lower() is the full Unicode
// lower-case mapping: the simple mapping of the C library's C.UTF-8
// locale, plus the cases Python's differs in (U+0130 becomes "i" + U+0307,
// a final capital sigma becomes U+03C2); strip() removes what Python's
// str.isspace() calls whitespace, at both ends.
std::string pipeline_prompt_text(const std::string& prompt);

// WanPipeline's prompt_clean without ftfy, exactly:
//   text = html.unescape(html.unescape(text)).strip()
//   text = regex.sub(r"\s+", " ", text).strip()
// where strip() removes what str.isspace() calls whitespace (U+001C..U+001F
// included) and the `regex` module's \s is Unicode's White_Space (TAB..CR,
// space, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F,
// U+205F, U+3000; not U+001C..U+001F, which Python's `re` would also
// match). Valid UTF-8 in and out (std::invalid_argument otherwise).
std::string unescape_collapse_prompt_text(const std::string& prompt);

// The cleaning `how` names.
std::string prompt_text(const std::string& prompt, models::PromptCleaning how);

}  // namespace ditgen::pipeline
