// Prompt files (docs/design.md §2 generate.prompt_file, --prompt-file): plain
// text, one prompt per line (blank lines and lines starting with '#'
// skipped, a trailing '\r' dropped), or, for a `.jsonl` file, one JSON
// object per line with `prompt` and optionally `negative_prompt`, `seed`,
// `frames`, `name` (the output file's stem), and `image` / `last_image`
// (image-to-video: files relative to the prompt file's folder, given as
// read_prompt_file resolves them; not read here). Every line is checked:
// valid UTF-8, at most kMaxPromptBytes, JSON fields of the right type, no
// unknown key, a name that is a plain file stem. Errors are ConfigError
// "<file>:<line>: ..." (exit 2), so a bad line is found before any model
// is loaded.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ditgen::config {

// Longest prompt accepted, in bytes: far beyond what any text encoder
// reads (T5 truncates at a few hundred tokens), small enough that a file of
// garbage is refused instead of tokenized.
constexpr size_t kMaxPromptBytes = 64 * 1024;
// Largest prompt file read.
constexpr uint64_t kMaxPromptFileBytes = uint64_t{64} << 20;

struct PromptEntry {
  std::string prompt;
  std::optional<std::string> negative_prompt;
  std::optional<uint64_t> seed;
  std::optional<int> frames;
  std::string name;  // output stem; "" = numbered
  std::string image;       // "" = the run's generate.image
  std::string last_image;  // "" = the run's generate.last_image
  int line = 0;      // 1-based, for messages
};

// Reads `path` (JSONL when it ends in ".jsonl"). ConfigError when it cannot
// be read, holds no prompt, or any line is bad.
std::vector<PromptEntry> read_prompt_file(const std::string& path);
// The same on text in memory; `file` names it in messages.
std::vector<PromptEntry> parse_prompt_text(const std::string& text, const std::string& file, bool jsonl);
// ConfigError "<where>: ..." unless `prompt` is valid UTF-8 of at most
// kMaxPromptBytes (for prompts given on the command line or in a config).
void check_prompt_text(const std::string& prompt, const std::string& where);
// "the prompt is empty; ..." for an empty or whitespace-only prompt, else
// "" (issue 36: such a prompt ran and made an output of nothing asked
// for). Generation checks its prompts with it; not negative prompts, where
// "" is the default, nor `ditgen encode`, which may encode "".
std::string empty_prompt_problem(const std::string& prompt);

}  // namespace ditgen::config
