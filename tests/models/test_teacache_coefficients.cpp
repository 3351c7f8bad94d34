// TeaCache's published rescaling polynomials (docs/step-caches.md) against
// their source: tests/teacache_published.h, copied by hand from
// ali-vilab/TeaCache at commit 7c10efc, file and line given per row, and
// not read from ditgen's code, so a typo in a spec fails here. Each
// published model's own transformer config (configs/models/...,
// scripts/gpu/models/latte-1/config.json) through the registry must give
// exactly its row, bit for bit (both sides parse the same decimal
// literals); a config one size away gives none (the run then needs
// cache.coefficients: tests/cli/test_teacache_published.cpp).
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "models/registry.h"
#include "teacache_published.h"

using namespace ditgen;

namespace {

using Published = testing::PublishedTeaCache;
const auto& kPublished = testing::kPublishedTeaCache;

nlohmann::json config_of(const Published& p) {
  std::ifstream in(std::string(DITGEN_SOURCE_DIR) + "/" + p.config);
  REQUIRE_MESSAGE(in.good(), p.config);
  return nlohmann::json::parse(in);
}

std::vector<double> coefficients_of(const nlohmann::json& config) {
  return models::transformer_spec(config, "m/transformer/config.json")->teacache_coefficients();
}

}  // namespace

TEST_CASE("TeaCache coefficients: each published model's config gives TeaCache's published row exactly") {
  for (const Published& p : kPublished) {
    CAPTURE(p.model);
    CAPTURE(p.source);
    CHECK(coefficients_of(config_of(p)) == p.coefficients);
  }
}

// The rows are matched by the model's sizes (layers, width; CogVideoX also
// by its positions): one size away, no row.
TEST_CASE("TeaCache coefficients: a config one size away from a published model has none") {
  for (const Published& p : kPublished) {
    CAPTURE(p.model);
    nlohmann::json fewer = config_of(p);
    fewer["num_layers"] = fewer["num_layers"].get<int>() - 1;
    CHECK(coefficients_of(fewer).empty());
    nlohmann::json narrower = config_of(p);
    narrower["num_attention_heads"] = narrower["num_attention_heads"].get<int>() - 2;
    if (narrower.contains("cross_attention_dim"))  // Latte's must equal the width
      narrower["cross_attention_dim"] = narrower["num_attention_heads"].get<int>() * narrower["attention_head_dim"].get<int>();
    CHECK(coefficients_of(narrower).empty());
  }
  // CogVideoX-2B's sizes with rotary positions (CogVideoX-5B's kind) are neither row.
  nlohmann::json rotary = config_of(kPublished[3]);
  rotary["use_rotary_positional_embeddings"] = true;
  rotary["use_learned_positional_embeddings"] = false;
  CHECK(coefficients_of(rotary).empty());
}
