// TeaCache's published rescaling polynomials (docs/step-caches.md) against
// their source: the table below is copied by hand from ali-vilab/TeaCache
// at commit 7c10efc4702c6b619f47805f7abe4a7a08085aa0, file and line given
// per row, and is not read from ditgen's code, so a typo in a spec fails
// here. Each published model's own transformer config (configs/models/...,
// scripts/gpu/models/latte-1/config.json) through the registry must give
// exactly its row, bit for bit (both sides parse the same decimal
// literals); a config one size away gives none (the run then needs
// cache.coefficients: tests/cli/test_step_cache_layouts.cpp).
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/registry.h"

using namespace ditgen;

namespace {

struct Published {
  const char* model;
  const char* config;  // the model's transformer config, in this repository
  const char* source;  // where TeaCache publishes the row (use_ret_steps off for Wan)
  std::vector<double> coefficients;
};

const Published kPublished[] = {
    {"Wan2.1-T2V-1.3B", "configs/models/Wan2.1-T2V-1.3B-Diffusers/transformer/config.json",
     "TeaCache4Wan2.1/teacache_generate.py:890",
     {2.39676752e+03, -1.31110545e+03, 2.01331979e+02, -8.29855975e+00, 1.37887774e-01}},
    {"Wan2.1-T2V-14B", "configs/models/Wan2.1-T2V-14B-Diffusers/transformer/config.json",
     "TeaCache4Wan2.1/teacache_generate.py:892",
     {-5784.54975374, 5449.50911966, -1811.16591783, 256.27178429, -13.02252404}},
    {"Latte-1", "scripts/gpu/models/latte-1/config.json", "eval/teacache/experiments/latte.py:180",
     {-2.46434137e+03, 3.08044764e+02, 8.07447667e+01, -4.11385132e+00, 1.11001402e-01}},
    {"CogVideoX-2B", "configs/models/CogVideoX-2b/transformer/config.json",
     "eval/teacache/experiments/cogvideox.py:75",
     {-3.10658903e+01, 2.54732368e+01, -5.92380459e+00, 1.75769064e+00, -3.61568434e-03}},
    {"CogVideoX-5B", "configs/models/CogVideoX-5b/transformer/config.json",
     "eval/teacache/experiments/cogvideox.py:78",
     {-1.53880483e+03, 8.43202495e+02, -1.34363087e+02, 7.97131516e+00, -5.23162339e-02}},
};

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
