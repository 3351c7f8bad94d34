// The pipelines' prompt preprocessing against Python's own
// `text.lower().strip()` on 101 strings chosen to exercise Unicode case
// mapping (final sigma, dotted I, Georgian, Cherokee, astral Deseret, title
// case digraphs, ...) and every kind of whitespace Python strips and some
// it does not (tests/fixtures/t5_encoder/prompt_preprocess.json).
#include <doctest/doctest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "pipeline/prompt_text.h"

using ditgen::pipeline::pipeline_prompt_text;

TEST_CASE("prompt text: lower().strip() as Python computes it") {
  std::ifstream in(std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/t5_encoder/prompt_preprocess.json");
  const nlohmann::json cases = nlohmann::json::parse(in)["cases"];
  REQUIRE(cases.size() >= 100);
  int wrong = 0;
  for (const auto& c : cases) {
    const std::string raw = c["raw"], want = c["processed"];
    const std::string got = pipeline_prompt_text(raw);
    if (got != want) {
      ++wrong;
      MESSAGE("raw '" << raw << "': got '" << got << "', Python '" << want << "'");
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE("prompt text: plain ASCII, and invalid UTF-8 is refused") {
  CHECK(pipeline_prompt_text("  A Red CIRCLE.  \n") == "a red circle.");
  CHECK(pipeline_prompt_text("") == "");
  CHECK_THROWS_AS(pipeline_prompt_text("bad \xff"), std::invalid_argument);
}
