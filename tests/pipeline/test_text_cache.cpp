// The prompt embedding cache (pipeline/text_cache.h) on the tiny PixArt
// fixture's T5: every result is held against the text stage run without a
// cache, bit for bit; hits, misses and ignored entries are counted by the
// cache itself and checked against what the test did to its directory.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "../models/fixture.h"
#include "pipeline/text_cache.h"
#include "pipeline/text_encoding.h"
#include "temp_dir.h"

using namespace ditgen;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kTexts = {"a red circle", "a blue square", "a red circle", ""};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::equal(a.data(), a.data() + a.numel(), b.data(),
                                              [](float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; });
}

std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("text cache: a miss encodes and stores, a hit gives the same bits without the encoder") {
  testing::TempDir tmp("text_cache");
  const pipeline::TextStage stage = pipeline::TextStage::open(testing::fixture_dir("pixart_tiny"));
  const models::Placement place{Device::kCPU, DType::kF32};
  const pipeline::PromptEmbeddings ref = stage.encode(kTexts, 16, place);
  const std::string dir = tmp.file("cache");

  const pipeline::CachedEncoding first = pipeline::encode_with_cache(stage, kTexts, 16, place, dir);
  CHECK(first.hits == 0);
  CHECK(first.misses == 3);  // three distinct texts
  CHECK(same_bits(first.embeds, ref.embeds));
  CHECK(first.num_tokens == ref.tokens.num_tokens);
  CHECK(entries(dir).size() == 3);

  const pipeline::CachedEncoding second = pipeline::encode_with_cache(stage, kTexts, 16, place, dir);
  CHECK(second.hits == 3);
  CHECK(second.misses == 0);  // the encoder was never loaded
  CHECK(same_bits(second.embeds, ref.embeds));
  CHECK(second.num_tokens == ref.tokens.num_tokens);

  // Another max length is another key: all misses, the right length.
  const pipeline::CachedEncoding longer = pipeline::encode_with_cache(stage, {"a red circle"}, 24, place, dir);
  CHECK(longer.misses == 1);
  CHECK(same_bits(longer.embeds, stage.encode({"a red circle"}, 24, place).embeds));

  // No cache: exactly the stage.
  const pipeline::CachedEncoding none = pipeline::encode_with_cache(stage, kTexts, 16, place, "");
  CHECK(none.hits + none.misses == 0);
  CHECK(same_bits(none.embeds, ref.embeds));
}

TEST_CASE("text cache: an encoder given as one file keys on that file, not on text_encoder/") {
  testing::TempDir tmp("text_cache_file");
  const std::string model = testing::fixture_dir("wan_quant"), files = model + "/single_files/";
  const models::Placement place{Device::kCPU, DType::kF32};
  const std::string dir = tmp.file("cache");
  const std::vector<std::string> text = {"a red cat"};
  const pipeline::TextStage folder = pipeline::TextStage::open(model);
  CHECK(pipeline::encode_with_cache(folder, text, 16, place, dir).misses == 1);
  // The float16 file holds the folder's values, yet it is another encoder's entry.
  const pipeline::TextStage fp16 = pipeline::TextStage::open(model, true, files + "umt5_tiny_fp16.safetensors");
  CHECK(pipeline::encode_with_cache(fp16, text, 16, place, dir).misses == 1);
  const pipeline::CachedEncoding again = pipeline::encode_with_cache(fp16, text, 16, place, dir);
  CHECK(again.hits == 1);
  CHECK(same_bits(again.embeds, fp16.encode(text, 16, place).embeds));
  const pipeline::TextStage q8 = pipeline::TextStage::open(model, true, files + "umt5-tiny-encoder-Q8_0.gguf");
  const pipeline::CachedEncoding gguf = pipeline::encode_with_cache(q8, text, 16, place, dir);
  CHECK(gguf.misses == 1);
  CHECK_FALSE(same_bits(gguf.embeds, again.embeds));
}

TEST_CASE("text cache: a corrupt or mismatched entry is ignored with a warning, then rewritten") {
  testing::TempDir tmp("text_cache_bad");
  const pipeline::TextStage stage = pipeline::TextStage::open(testing::fixture_dir("pixart_tiny"));
  const models::Placement place{Device::kCPU, DType::kF32};
  const std::vector<std::string> texts = {"a red circle", "a blue square"};
  const pipeline::PromptEmbeddings ref = stage.encode(texts, 16, place);
  const std::string dir = tmp.file("cache");
  pipeline::encode_with_cache(stage, {texts[0]}, 16, place, dir);
  const fs::path red = entries(dir).at(0);
  pipeline::encode_with_cache(stage, texts, 16, place, dir);
  std::vector<fs::path> both = entries(dir);
  REQUIRE(both.size() == 2);
  const fs::path blue = both[0] == red ? both[1] : both[0];

  SUBCASE("truncated") {
    const auto size = fs::file_size(red);
    fs::resize_file(red, size / 2);
  }
  SUBCASE("garbage") { std::ofstream(red, std::ios::binary) << "not a safetensors file"; }
  SUBCASE("another prompt's entry under this prompt's name") {
    fs::copy_file(blue, red, fs::copy_options::overwrite_existing);
  }
  SUBCASE("a token count out of range") {
    // The file still parses; the count's range check catches it.
    std::fstream f(red, std::ios::binary | std::ios::in | std::ios::out);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t tail = bytes.size() - 8;  // num_tokens is the last tensor: its 8 bytes close the file
    f.seekp(static_cast<std::streamoff>(tail));
    const int64_t bad = 1000;
    f.write(reinterpret_cast<const char*>(&bad), sizeof bad);
  }
  const pipeline::CachedEncoding got = pipeline::encode_with_cache(stage, texts, 16, place, dir);
  CHECK(got.hits == 1);  // the blue square
  CHECK(got.misses == 1);
  CHECK(same_bits(got.embeds, ref.embeds));
  CHECK(got.num_tokens == ref.tokens.num_tokens);
  // The entry was written again: the next run hits both.
  const pipeline::CachedEncoding again = pipeline::encode_with_cache(stage, texts, 16, place, dir);
  CHECK(again.hits == 2);
  CHECK(same_bits(again.embeds, ref.embeds));
}
