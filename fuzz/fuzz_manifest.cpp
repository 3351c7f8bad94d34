/* fuzz_manifest: the batch manifest a resumed run reads back
 * (<stem>_manifest.jsonl, cli/batch_manifest.h). The input is the manifest's
 * text. Two output files exist at fixed paths, /tmp/ditgen_fuzz_manifest/
 * out_0000.png and out_0001.png (fixed so that the seed corpus can name
 * them), so lines that name only them are kept and others dropped. Then
 * cli::Manifest(path, resume = true) must read it, keep only well-formed
 * lines with an integer index whose files all exist, and rewrite it; the
 * rewritten file must be one JSON object per line, each index once, and it
 * must agree with has(); one more line is appended and read back.
 *
 * Expected failures: none (a line that does not parse is dropped, never an
 * error); a RuntimeFailure could only come from the scratch directory. */
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/batch_manifest.h"
#include "fuzz_support.h"
#include "util/error.h"

namespace {

constexpr const char* kFiles = "/tmp/ditgen_fuzz_manifest";

struct Fixture {
  ditgen::fuzz::ScratchDir dir;
  Fixture() {
    std::filesystem::create_directories(kFiles);
    ditgen::fuzz::write_bytes(std::string(kFiles) + "/out_0000.png", "png");
    ditgen::fuzz::write_bytes(std::string(kFiles) + "/out_0001.png", "png");
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture;
  const std::string path = fixture.dir / "out_manifest.jsonl";
  ditgen::fuzz::write_bytes(path, std::string_view(reinterpret_cast<const char*>(data), size));
  ditgen::cli::Manifest manifest(path, /*resume=*/true);
  std::set<int> seen;
  {
    std::ifstream in(path);
    std::string text;
    while (std::getline(in, text)) {
      const nlohmann::json line = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (!line.is_object() || !line.contains("index") || !line["index"].is_number_integer())
        ditgen::fuzz::harness_failure("a kept manifest line is malformed: " + text);
      const int index = line["index"].get<int>();
      if (!seen.insert(index).second) ditgen::fuzz::harness_failure("an index kept twice");
      if (!manifest.has(index)) ditgen::fuzz::harness_failure("has() misses a kept index");
    }
  }
  const int next = seen.empty() ? 0 : *seen.rbegin() + 1;
  manifest.append({{"index", next}, {"files", {std::string(kFiles) + "/out_0000.png"}}});
  if (!manifest.has(next)) ditgen::fuzz::harness_failure("has() misses an appended index");
  ditgen::cli::Manifest again(path, /*resume=*/true);
  if (!again.has(next)) ditgen::fuzz::harness_failure("an appended line was not kept on resume");
  return 0;
}
