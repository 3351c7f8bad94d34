/* fuzz_tokenizer_dir: the JSON files of a T5 tokenizer folder. The input is
 * split at the first NUL byte into tokenizer_config.json and
 * special_tokens_map.json (no NUL: the second file is absent); beside them lies
 * the committed byte-fallback fixture's spiece.model (the SentencePiece
 * protobuf itself is libsentencepiece's to parse, not ours). Then
 * io::T5Tokenizer::open (with legacy unset, true and false), and an opened
 * tokenizer must encode a fixed text with the padding-id and EOS invariants.
 *
 * Expected failures: ditgen::Error (ModelError naming the file and key: a
 * mistyped pad/eos/unk token, extra_ids that disagree with the added tokens,
 * invalid JSON). Mutations that keep the file valid JSON come from the seed
 * corpus (the fixtures' own folders). Anything else is a finding. */
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "io/t5_tokenizer.h"
#include "util/error.h"

namespace {

struct Fixture {
  ditgen::fuzz::ScratchDir dir;
  Fixture() {
    std::filesystem::copy_file(std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/t5_tokenizer/bytefb/spiece.model",
                               std::filesystem::path(dir / "spiece.model"));
  }
};

void place(const std::string& path, const std::vector<std::string_view>& parts, size_t i) {
  std::error_code ec;
  if (i < parts.size())
    ditgen::fuzz::write_bytes(path, parts[i]);
  else
    std::filesystem::remove(path, ec);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture;
  const auto parts = ditgen::fuzz::split(std::string_view(reinterpret_cast<const char*>(data), size), '\0', 2);
  place(fixture.dir / "tokenizer_config.json", parts, 0);
  place(fixture.dir / "special_tokens_map.json", parts, 1);
  for (const std::optional<bool> legacy : {std::optional<bool>(), std::optional<bool>(true), std::optional<bool>(false)}) {
    ditgen::fuzz::allow_reader_errors([&] {
      const ditgen::io::T5Tokenizer tok = ditgen::io::T5Tokenizer::open(fixture.dir.path(), legacy);
      constexpr int64_t kLength = 16;
      const ditgen::io::T5Tokens t = tok.encode({"a red circle moving left"}, kLength);
      const int64_t n = t.num_tokens.at(0);
      if (static_cast<int64_t>(t.ids.at(0).size()) != kLength || n < 1 || n > kLength ||
          t.ids[0][static_cast<size_t>(n - 1)] != tok.eos_id())
        ditgen::fuzz::harness_failure("tokenizer result malformed");
      for (int64_t j = n; j < kLength; ++j)
        if (t.ids[0][static_cast<size_t>(j)] != tok.pad_id()) ditgen::fuzz::harness_failure("padding is not pad_id");
    });
  }
  return 0;
}
