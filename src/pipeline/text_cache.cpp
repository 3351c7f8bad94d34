#include "pipeline/text_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "util/atomic_file.h"
#include "util/content_hash.h"
#include "util/error.h"

namespace ditgen::pipeline {
namespace {

namespace fs = std::filesystem;

void warn(const std::string& message) { std::fprintf(stderr, "ditgen: warning: text cache: %s\n", message.c_str()); }

// A file's content hash, remembered under cache_dir/fingerprints by its
// absolute path, size and modification time.
std::string remembered_file_hash(const fs::path& file, const fs::path& cache_dir) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) throw RuntimeFailure(file.string() + ": cannot stat");
  const std::string identity = fs::absolute(file).lexically_normal().string() + "\n" + std::to_string(st.st_size) +
                               "\n" + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  const fs::path memo = cache_dir / "fingerprints" / (hash_text(identity) + ".txt");
  {
    std::ifstream in(memo);
    std::string stored_identity, line, hash;
    while (std::getline(in, line)) {
      if (line.rfind("hash ", 0) == 0) hash = line.substr(5);
      else stored_identity += (stored_identity.empty() ? "" : "\n") + line;
    }
    if (stored_identity == identity && hash.size() == 32) return hash;
  }
  const std::string hash = hash_file(file.string());
  try {
    const std::string text = identity + "\nhash " + hash + "\n";
    write_file_atomic(memo.string(), text.data(), text.size());
  } catch (const Error& e) {
    warn(std::string("cannot remember a file hash: ") + e.what());
  }
  return hash;
}

// Every regular file of a folder, by name: "name hash" lines.
std::string folder_hash(const fs::path& dir, const fs::path& cache_dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::string lines;
  for (const fs::path& f : files) lines += f.filename().string() + " " + remembered_file_hash(f, cache_dir) + "\n";
  return hash_text(lines);
}

// The cached row of `key`, or false (with a warning when an entry exists
// but cannot be used).
bool load_entry(const fs::path& file, const std::string& key, int64_t L, int64_t D, Tensor& row, int64_t& tokens) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return false;
  try {
    const auto f = io::SafetensorsFile::open(file.string());
    const auto it = f->metadata().find("key");
    if (it == f->metadata().end() || it->second != key)
      throw ConfigError("its key is not this prompt's (another prompt, tokenizer, encoder, dtype or length)");
    if (!f->contains("embeds") || f->info("embeds").type != io::StoredType::kF32 || f->info("embeds").shape != Shape{L, D})
      throw ConfigError("tensor 'embeds' is missing or not float32 [" + std::to_string(L) + ", " +
                        std::to_string(D) + "]");
    if (!f->contains("num_tokens") || f->info("num_tokens").type != io::StoredType::kI64 ||
        f->info("num_tokens").shape != Shape{1})
      throw ConfigError("tensor 'num_tokens' is missing or not int64 [1]");
    const Tensor n = f->load("num_tokens");
    tokens = n.data_as<int64_t>()[0];
    if (tokens < 1 || tokens > L) throw ConfigError("num_tokens " + std::to_string(tokens) + " is outside [1, L]");
    row = f->load("embeds").clone();  // detached from the mapping
    return true;
  } catch (const std::exception& e) {
    warn(file.string() + ": ignored (" + e.what() + ")");
    return false;
  }
}

}  // namespace

CachedEncoding encode_with_cache(const TextStage& stage, const std::vector<std::string>& texts, int64_t max_length,
                                 const models::Placement& place, const std::string& cache_dir) {
  CachedEncoding out;
  if (cache_dir.empty()) {
    PromptEmbeddings e = stage.encode(texts, max_length, place);
    out.embeds = e.embeds;
    out.num_tokens = e.tokens.num_tokens;
    return out;
  }
  const int64_t L = max_length, D = stage.encoder_spec().hidden_size(), n = static_cast<int64_t>(texts.size());
  stage.tokenize({}, max_length);  // the same range check as an uncached run
  const fs::path dir(cache_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ConfigError("--text-cache " + cache_dir + ": cannot create the directory: " + ec.message());
  nlohmann::json common = {
      {"format", 1},
      {"tokenizer", folder_hash(stage.tokenizer().folder(), dir)},
      {"encoder", stage.encoder_file().empty()
                      ? folder_hash(stage.encoder_dir(), dir)
                      : hash_text("config " + remembered_file_hash(stage.encoder_config_path(), dir) + "\nweights " +
                                  remembered_file_hash(stage.encoder_file(), dir))},
      {"dtype", dtype_name(place.dtype)},
      {"device", device_name(place.device)},
      {"max_length", L}};
  // The pipeline's text rules and the tokenizer's kind, where they are not
  // the PixArt / Latte ones (whose keys stay as they were): the same files
  // under another pipeline clean, tokenize or pad differently.
  const models::TextPipelineRules& rules = stage.rules();
  if (rules.prompt_cleaning != models::PromptCleaning::kLowerStrip || rules.zero_padded_unmasked ||
      rules.encoder_unmasked || stage.tokenizer().kind() != io::T5TokenizerKind::kSentencePiece) {
    common["text_rules"] = {{"cleaning", static_cast<int>(rules.prompt_cleaning)},
                            {"zero_padded_unmasked", rules.zero_padded_unmasked},
                            {"tokenizer", io::t5_tokenizer_kind_name(stage.tokenizer().kind())}};
    if (rules.encoder_unmasked) common["text_rules"]["encoder_unmasked"] = true;
  }

  out.embeds = Tensor::empty({n, L, D});
  out.num_tokens.assign(static_cast<size_t>(n), 0);
  std::map<std::string, std::vector<int64_t>> missing;  // text -> its indices
  std::map<std::string, bool> seen;
  for (int64_t i = 0; i < n; ++i) {
    const std::string& text = texts[static_cast<size_t>(i)];
    if (missing.count(text)) {
      missing[text].push_back(i);
      continue;
    }
    nlohmann::json key = common;
    key["prompt"] = text;
    const std::string key_text = key.dump();
    Tensor row;
    int64_t tokens = 0;
    if (load_entry(dir / (hash_text(key_text) + ".safetensors"), key_text, L, D, row, tokens)) {
      out.embeds.slice0(i, i + 1).copy_from(row.reshape({1, L, D}));
      out.num_tokens[static_cast<size_t>(i)] = tokens;
      if (!seen[text]) ++out.hits;
      seen[text] = true;
    } else {
      missing[text].push_back(i);
    }
  }
  if (missing.empty()) return out;  // every text cached: the encoder is never loaded

  std::vector<std::string> todo;
  for (const auto& [text, where] : missing) todo.push_back(text);
  out.misses = static_cast<int>(todo.size());
  const PromptEmbeddings e = stage.encode(todo, max_length, place);
  for (size_t t = 0; t < todo.size(); ++t) {
    const Tensor row = e.embeds.slice0(static_cast<int64_t>(t), static_cast<int64_t>(t) + 1);
    for (const int64_t i : missing[todo[t]]) {
      out.embeds.slice0(i, i + 1).copy_from(row);
      out.num_tokens[static_cast<size_t>(i)] = e.tokens.num_tokens[t];
    }
    nlohmann::json key = common;
    key["prompt"] = todo[t];
    const std::string key_text = key.dump();
    Tensor count = Tensor::empty({1}, Device::kCPU, DType::kI64);
    count.data_as<int64_t>()[0] = e.tokens.num_tokens[t];
    try {
      io::write_safetensors((dir / (hash_text(key_text) + ".safetensors")).string(),
                            {{"embeds", row.clone().reshape({L, D})}, {"num_tokens", count}}, {{"key", key_text}});
    } catch (const Error& err) {
      warn(std::string("cannot store an entry: ") + err.what());
    }
  }
  return out;
}

}  // namespace ditgen::pipeline
