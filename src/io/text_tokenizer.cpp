#include "io/text_tokenizer.h"

#include <filesystem>

#include "io/unigram_t5_tokenizer.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace ditgen::io {

namespace {

fs::path tokenizer_folder(const std::string& dir) {
  fs::path folder = dir;
  std::error_code ec;
  if (fs::is_directory(folder / "tokenizer", ec)) folder /= "tokenizer";
  return folder;
}

class SentencePieceTokenizer final : public PromptTokenizer {
 public:
  explicit SentencePieceTokenizer(T5Tokenizer tok)
      : tok_(std::move(tok)), folder_(fs::path(tok_.spiece_path()).parent_path().string()) {}
  T5Tokens encode(const std::vector<std::string>& prompts, int64_t max_length) const override {
    return tok_.encode(prompts, max_length);
  }
  int64_t vocab_size() const override { return tok_.vocab_size(); }
  const std::string& folder() const override { return folder_; }
  const std::string& source() const override { return tok_.spiece_path(); }
  T5TokenizerKind kind() const override { return T5TokenizerKind::kSentencePiece; }

 private:
  T5Tokenizer tok_;
  std::string folder_;
};

class UnigramTokenizer final : public PromptTokenizer {
 public:
  explicit UnigramTokenizer(UnigramT5Tokenizer tok) : tok_(std::move(tok)) {}
  T5Tokens encode(const std::vector<std::string>& prompts, int64_t max_length) const override {
    return tok_.encode(prompts, max_length);
  }
  int64_t vocab_size() const override { return tok_.vocab_size(); }
  const std::string& folder() const override { return tok_.folder(); }
  const std::string& source() const override { return tok_.source(); }
  T5TokenizerKind kind() const override { return T5TokenizerKind::kUnigram; }

 private:
  UnigramT5Tokenizer tok_;
};

}  // namespace

const char* t5_tokenizer_kind_name(T5TokenizerKind kind) {
  return kind == T5TokenizerKind::kUnigram ? "transformers 5 T5Tokenizer (Unigram, no byte fallback)"
                                           : "transformers 4 T5Tokenizer (libsentencepiece)";
}

T5TokenizerKind t5_tokenizer_kind(const std::string& dir, const std::string& pipeline_tokenizer_class) {
  std::error_code ec;
  if (fs::exists(tokenizer_folder(dir) / "tokenizer.json", ec)) return T5TokenizerKind::kUnigram;
  return pipeline_tokenizer_class == "T5TokenizerFast" ? T5TokenizerKind::kUnigram : T5TokenizerKind::kSentencePiece;
}

std::unique_ptr<PromptTokenizer> open_t5_tokenizer(const std::string& dir, const std::string& pipeline_tokenizer_class) {
  // A model folder (it has model_index.json) without its tokenizer/: a
  // download that missed it. Said of tokenizer/, not of the model folder
  // where a bare tokenizer folder's files would be looked for.
  std::error_code ec;
  if (!fs::is_directory(fs::path(dir) / "tokenizer", ec) && fs::is_regular_file(fs::path(dir) / "model_index.json", ec))
    throw ModelError((fs::path(dir) / "tokenizer").string() +
                     ": missing (the model's tokenizer folder, with spiece.model or tokenizer.json): the download "
                     "is incomplete; fetch the whole model again");
  if (t5_tokenizer_kind(dir, pipeline_tokenizer_class) == T5TokenizerKind::kUnigram)
    return std::make_unique<UnigramTokenizer>(UnigramT5Tokenizer::open(dir));
  return std::make_unique<SentencePieceTokenizer>(T5Tokenizer::open(dir));
}

}  // namespace ditgen::io
