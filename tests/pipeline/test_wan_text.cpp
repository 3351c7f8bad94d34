// The Wan text side (docs/text-wan.md) against what diffusers' WanPipeline
// and Python compute (fixtures made by scripts/fixtures/make_wan_fixtures.py
// and make_wan_text_fixtures.py; never ditgen's own output):
// - html_unescape against Python's html.unescape on 600 strings, once and twice;
// - WanPipeline's prompt_clean without ftfy on 222 strings and on the 21
//   tokenizer cases, and exactly which of those ftfy would change;
// - the pipeline-class rules (WanPipeline: cleaning, 512, zero padding);
// - the text stage on tests/fixtures/wan_tiny (tokenizer.json) and
//   wan22_tiny (spiece.model only): the pipeline's ids, masks and
//   embeddings (rows past the prompt's tokens exactly zero) at
//   max_sequence_length 16 and at the pipeline default 512, relL2 <= 1e-5.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "io/model_dir.h"
#include "io/safetensors.h"
#include "models/registry.h"
#include "pipeline/html_unescape.h"
#include "pipeline/prompt_text.h"
#include "pipeline/text_encoding.h"

using namespace ditgen;
using nlohmann::json;

namespace {

const std::string kRoot = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures";

double rel_l2(const float* got, const float* ref, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num += (static_cast<double>(got[i]) - ref[i]) * (static_cast<double>(got[i]) - ref[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

std::vector<int64_t> row_of(const Tensor& t) { return std::vector<int64_t>(t.data_as<int64_t>(), t.data_as<int64_t>() + t.numel()); }

}  // namespace

TEST_CASE("html unescape: Python's html.unescape, once and twice, on 600 strings") {
  const json cases = io::read_json_file(kRoot + "/wan_text/html_unescape.json")["cases"];
  REQUIRE(cases.size() == 600);
  int wrong = 0;
  for (const auto& c : cases) {
    const std::string raw = c["raw"], once = c["once"], twice = c["twice"];
    const std::string got1 = pipeline::html_unescape(raw), got2 = pipeline::html_unescape(got1);
    if ((got1 != once || got2 != twice) && ++wrong <= 10)
      MESSAGE("raw " << json(raw).dump() << ": ditgen " << json(got1).dump() << " / " << json(got2).dump()
                     << ", Python " << json(once).dump() << " / " << json(twice).dump());
  }
  CHECK(wrong == 0);
  CHECK(pipeline::html_unescape("&notit; &amp &#x110000; &#128;") == "\xC2\xACit; & \xEF\xBF\xBD \xE2\x82\xAC");
  CHECK_THROWS_AS(pipeline::html_unescape("bad \xff &amp;"), std::invalid_argument);
}

TEST_CASE("wan prompt cleaning: prompt_clean without ftfy on 222 strings") {
  const json cases = io::read_json_file(kRoot + "/wan_text/prompt_clean.json")["cases"];
  REQUIRE(cases.size() == 222);
  int wrong = 0;
  for (const auto& c : cases) {
    const std::string raw = c["raw"], want = c["cleaned"];
    const std::string got = pipeline::prompt_text(raw, models::PromptCleaning::kUnescapeCollapseWhitespace);
    if (got != want && ++wrong <= 10)
      MESSAGE("raw " << json(raw).dump() << ": ditgen " << json(got).dump() << ", diffusers " << json(want).dump());
  }
  CHECK(wrong == 0);
  // No lower-casing; \x1c..\x1f are stripped at the ends (str.strip) but not
  // collapsed inside (regex's \s), U+0085 is both.
  CHECK(pipeline::unescape_collapse_prompt_text(" A\x1f\xC2\x85 B &amp;amp; C ") == "A\x1f B & C");
  CHECK(pipeline::prompt_text("  A B ", models::PromptCleaning::kLowerStrip) == "a b");
}

TEST_CASE("wan prompt cleaning: the 21 tokenizer cases, and what ftfy would change") {
  const json cases = io::read_json_file(kRoot + "/wan_tiny/reference/tokenizer_cases.json")["cases"];
  REQUIRE(cases.size() == 21);
  std::set<std::string> ftfy_changed;
  for (const auto& c : cases) {
    const std::string name = c["name"];
    CAPTURE(name);
    const std::string got = pipeline::unescape_collapse_prompt_text(c["raw"].get<std::string>());
    CHECK(got == c["cleaned_without_ftfy"].get<std::string>());
    if (got != c["cleaned"].get<std::string>()) ftfy_changed.insert(name);
    CHECK((got != c["cleaned"].get<std::string>()) == c["ftfy_changed_result"].get<bool>());
  }
  // docs/text-wan.md lists these six, each with what ftfy makes of it.
  CHECK(ftfy_changed == std::set<std::string>{"html_triple", "mojibake", "ftfy_quotes_ligature_width", "controls",
                                               "combining", "terminal_escape"});
}

TEST_CASE("pipeline text rules: by model_index.json's pipeline class") {
  const models::TextPipelineRules wan = models::pipeline_text_rules("WanPipeline");
  CHECK(wan.prompt_cleaning == models::PromptCleaning::kUnescapeCollapseWhitespace);
  CHECK(wan.default_max_length == 512);
  CHECK(wan.zero_padded_unmasked);
  CHECK_FALSE(wan.negative_cut_to_prompt);
  CHECK(wan.fixed_max_length == 0);
  const models::TextPipelineRules sigma = models::pipeline_text_rules("PixArtSigmaPipeline");
  CHECK(sigma.default_max_length == 300);
  CHECK(sigma.prompt_cleaning == models::PromptCleaning::kLowerStrip);
  CHECK_FALSE(sigma.zero_padded_unmasked);
  // LattePipeline's entry is the Latte family's own rules.
  const std::string latte_cfg = kRoot + "/latte_tiny/transformer/config.json";
  const auto latte = models::transformer_spec(io::read_json_file(latte_cfg), latte_cfg)->text_pipeline_rules();
  const models::TextPipelineRules table = models::pipeline_text_rules("LattePipeline");
  CHECK(table.negative_cut_to_prompt == latte.negative_cut_to_prompt);
  CHECK(table.fixed_max_length == latte.fixed_max_length);
  CHECK(table.divide_by_scaling_factor == latte.divide_by_scaling_factor);
  CHECK(table.prompt_cleaning == latte.prompt_cleaning);
  CHECK(table.zero_padded_unmasked == latte.zero_padded_unmasked);
  CHECK(models::pipeline_text_rules("").default_max_length == 0);
  CHECK(pipeline::TextStage::open(kRoot + "/wan_tiny").default_max_length() == 512);
  CHECK(pipeline::TextStage::open(kRoot + "/latte_tiny").default_max_length() == 120);
}

TEST_CASE("wan text stage: the pipeline's ids, masks and zero-padded embeddings (16 and 512)") {
  const json pipe = io::read_json_file(kRoot + "/wan_tiny/reference/case.json")["pipeline"];
  const auto prompts = pipe["prompts"].get<std::vector<std::string>>();
  const std::string negative = pipe["negative_prompt"];
  const auto ref = io::SafetensorsFile::open(kRoot + "/wan_tiny/reference/expected.safetensors");
  for (const std::string model : {"wan_tiny", "wan22_tiny"}) {
    CAPTURE(model);
    const pipeline::TextStage stage = pipeline::TextStage::open(kRoot + "/" + model);
    CHECK(stage.tokenizer().kind() == io::T5TokenizerKind::kUnigram);
    CHECK(stage.rules().zero_padded_unmasked);
    const std::vector<std::string> texts = {prompts[0], prompts[1], negative};
    const pipeline::PromptEmbeddings e = stage.encode(texts, 16, models::Placement{});
    CHECK(e.texts[1] == pipe["prompt_tokens"][1]["cleaned"].get<std::string>());
    CHECK(e.texts[2] == pipe["negative_cleaned"].get<std::string>());
    const std::vector<std::string> names = {"prompt_embeds_0", "prompt_embeds_1", "negative_embeds"};
    const std::vector<std::string> ids = {"prompt_ids_0", "prompt_ids_1", "negative_ids"};
    const std::vector<std::string> masks = {"prompt_mask_0", "prompt_mask_1", "negative_mask"};
    for (int64_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      CHECK(e.tokens.ids[i] == row_of(ref->load(ids[i])));
      CHECK(e.tokens.mask[i] == row_of(ref->load(masks[i])));
      const Tensor want = ref->load(names[i]);
      const float* got = e.embeds.data() + i * 16 * 32;
      const double err = rel_l2(got, want.data_as<float>(), 16 * 32);
      MESSAGE(model << " " << names[i] << " relL2 " << err);
      CHECK(err <= 1e-5);
      const int64_t k = e.tokens.num_tokens[i];
      CHECK(std::all_of(got + k * 32, got + 16 * 32, [](float v) { return v == 0.0f; }));  // exactly zero past the tokens
    }
    // The pipeline call's default length, 512: the first k rows as diffusers', the rest exactly 0.
    const pipeline::PromptEmbeddings l = stage.encode({prompts[0], negative}, stage.default_max_length(), models::Placement{});
    REQUIRE(l.embeds.dim(1) == 512);
    for (int64_t i = 0; i < 2; ++i) {
      const Tensor want = ref->load(i == 0 ? "prompt_embeds_512_0_rows" : "negative_embeds_512_rows");
      const int64_t k = want.dim(0);
      CHECK(l.tokens.num_tokens[i] == k);
      const float* got = l.embeds.data() + i * 512 * 32;
      const double err = rel_l2(got, want.data_as<float>(), k * 32);
      MESSAGE(model << " 512 rows of " << (i == 0 ? "prompt 0" : "negative") << " relL2 " << err);
      CHECK(err <= 1e-5);
      CHECK(std::all_of(got + k * 32, got + 512 * 32, [](float v) { return v == 0.0f; }));
    }
  }
}
