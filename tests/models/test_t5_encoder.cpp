// The T5 encoder against transformers: the relative-position buckets
// against transformers' own table (position_buckets.json), and three tiny
// random encoders (v1.0 relu in float32, v1.1 gated-gelu in sharded float16
// variant files named encoder.embed_tokens.weight, UMT5 in bfloat16) against
// transformers' last_hidden_state for the same ids and mask
// (scripts/fixtures/make_t5_encoder_fixtures.py). float32 compute must match to
// relL2 1e-5, bfloat16 weights to 2e-2 of transformers' bfloat16 run. Then
// the checkpoint checks: a config that disagrees with a tensor, a tensor of
// the wrong dtype, a missing tensor, each a ModelError naming file and tensor.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "fixture.h"
#include "io/model_dir.h"
#include "models/registry.h"
#include "models/t5_spec.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::models;
namespace fs = std::filesystem;

namespace {

const std::string kDir = testing::fixture_dir("t5_encoder");

double rel_l2(const Tensor& got, const Tensor& ref) {
  REQUIRE(got.numel() == ref.numel());
  double num = 0, den = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

struct Expected {
  TokenBatch tokens;
  Tensor f32, bf16;  // (N, L, D)
};

Expected expected_of(const std::string& model) {
  const auto file = io::SafetensorsFile::open(kDir + "/" + model + "/expected.safetensors");
  const Tensor ids = file->load("ids"), mask = file->load("mask");
  Expected e;
  const int64_t N = ids.dim(0), L = ids.dim(1);
  for (int64_t i = 0; i < N; ++i) {
    const int64_t* row = ids.data_as<int64_t>() + i * L;
    const int64_t* m = mask.data_as<int64_t>() + i * L;
    e.tokens.ids.emplace_back(row, row + L);
    int64_t len = 0;
    while (len < L && m[len] == 1) ++len;
    for (int64_t j = len; j < L; ++j) REQUIRE(m[j] == 0);  // the mask is a prefix
    e.tokens.lengths.push_back(len);
  }
  e.f32 = file->load("embeds_f32").clone();
  e.bf16 = file->load("embeds_bf16").clone();
  return e;
}

std::unique_ptr<TextEncoderSpec> spec_of(const std::string& encoder_dir) {
  const std::string path = encoder_dir + "/config.json";
  return text_encoder_spec(io::read_json_file(path), path);
}

Tensor encode(const std::string& encoder_dir, const TokenBatch& tokens, const Placement& place) {
  const io::WeightStore weights = io::WeightStore::open_dir(encoder_dir);
  return spec_of(encoder_dir)->load(weights, place)->encode(tokens);
}

std::string model_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ModelError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a ModelError: ") + e.what() + ">";
  }
  return "<no exception>";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("t5: relative position buckets equal transformers' table") {
  std::ifstream in(kDir + "/position_buckets.json");
  const nlohmann::json cases = nlohmann::json::parse(in)["cases"];
  REQUIRE(cases.size() >= 5);
  for (const auto& c : cases) {
    const int64_t nb = c["num_buckets"], md = c["max_distance"], first = c["first"];
    const auto& table = c["t5"];
    int64_t wrong = 0;
    for (size_t i = 0; i < table.size(); ++i)
      if (t5_position_bucket(first + static_cast<int64_t>(i), nb, md) != table[i].get<int64_t>()) ++wrong;
    CAPTURE(nb);
    CAPTURE(md);
    CHECK(wrong == 0);
  }
}

TEST_CASE("t5: config.json as transformers reads it") {
  const auto spec = spec_of(kDir + "/t5_gated/text_encoder");
  const auto& cfg = dynamic_cast<const T5Spec&>(*spec).config();
  CHECK(cfg.gated);
  CHECK(cfg.act == T5Activation::kGeluNew);
  CHECK_FALSE(cfg.umt5);
  CHECK(spec->hidden_size() == 40);
  CHECK(std::string(spec->variant()) == "T5 v1.1");
  CHECK(dynamic_cast<const T5Spec&>(*spec_of(kDir + "/umt5/text_encoder")).config().umt5);
  CHECK(std::string(spec_of(kDir + "/t5_relu/text_encoder")->variant()) == "T5 v1.0");
  // Parameters: embedding + per block (4 attention matrices + FF + 2 norms) + final norm (+ bias tables).
  const int64_t D = 40, inner = 40, ff = 72, V = 500;
  CHECK(spec->param_count() == V * D + D + 2 * (4 * inner * D + 3 * ff * D + 2 * D) + 32 * 5);
}

TEST_CASE("t5: three tiny encoders match transformers in float32 and bfloat16") {
  for (const std::string model : {"t5_relu", "t5_gated", "umt5"}) {
    CAPTURE(model);
    const Expected e = expected_of(model);
    const std::string dir = kDir + "/" + model + "/text_encoder";
    const Tensor f32 = encode(dir, e.tokens, Placement{});
    CHECK(f32.shape() == e.f32.shape());
    CHECK(rel_l2(f32, e.f32) <= 1e-5);
    const Placement bf16(Device::kCPU, DType::kBF16);
    const Tensor b = encode(dir, e.tokens, bf16);
    CHECK(rel_l2(b, e.bf16) <= 2e-2);
    CHECK(rel_l2(b, e.f32) <= 2e-2);
    // One prompt alone gives its rows of the batch (the padding is masked out).
    TokenBatch one{{e.tokens.ids[2]}, {e.tokens.lengths[2]}};
    const Tensor alone = encode(dir, one, Placement{});
    CHECK(rel_l2(alone, f32.slice0(2, 3).clone()) <= 1e-6);
  }
}

TEST_CASE("t5: checkpoints that disagree with config.json are ModelErrors naming file and tensor") {
  testing::TempDir tmp("t5_bad");
  const fs::path enc = tmp.path / "text_encoder";
  fs::copy(kDir + "/t5_relu/text_encoder", enc);
  const std::string cfg_path = (enc / "config.json").string();
  nlohmann::json cfg = io::read_json_file(cfg_path);
  const Expected e = expected_of("t5_relu");
  auto write_cfg = [&](const nlohmann::json& j) { std::ofstream(cfg_path) << j.dump(); };

  SUBCASE("d_ff disagrees with the tensors") {
    nlohmann::json bad = cfg;
    bad["d_ff"] = 73;
    write_cfg(bad);
    const std::string msg = model_error_of([&] { encode(enc.string(), e.tokens, Placement{}); });
    CHECK(contains(msg, "encoder.block.0.layer.1.DenseReluDense.wi.weight"));
    CHECK(contains(msg, "73"));
  }
  SUBCASE("a missing size") {
    nlohmann::json bad = cfg;
    bad.erase("d_kv");
    write_cfg(bad);
    const std::string msg = model_error_of([&] { spec_of(enc.string()); });
    CHECK(contains(msg, cfg_path));
    CHECK(contains(msg, "d_kv"));
  }
  SUBCASE("an unknown feed-forward") {
    nlohmann::json bad = cfg;
    bad["feed_forward_proj"] = "gated-mish";
    write_cfg(bad);
    CHECK(contains(model_error_of([&] { spec_of(enc.string()); }), "feed_forward_proj"));
  }
  SUBCASE("a tensor of the wrong dtype, and a missing one") {
    const std::string path = (enc / "model.safetensors").string();
    const std::string k_name = "encoder.block.1.layer.0.SelfAttention.k.weight";
    std::vector<std::pair<std::string, Tensor>> original;
    {
      const auto file = io::SafetensorsFile::open(path);
      for (const std::string& name : file->names()) original.emplace_back(name, file->load(name).clone());
    }
    auto rewrite = [&](const std::string& int_name, const std::string& dropped) {
      std::vector<std::pair<std::string, Tensor>> tensors;
      for (const auto& [name, t] : original) {
        if (name == dropped) continue;
        tensors.emplace_back(name, name == int_name ? Tensor::zeros(t.shape(), Device::kCPU, DType::kI32) : t);
      }
      io::write_safetensors(path, tensors);
    };
    rewrite(k_name, "");
    std::string msg = model_error_of([&] { encode(enc.string(), e.tokens, Placement{}); });
    CHECK(contains(msg, k_name));
    CHECK(contains(msg, "I32"));
    rewrite("", "encoder.final_layer_norm.weight");
    msg = model_error_of([&] { encode(enc.string(), e.tokens, Placement{}); });
    CHECK(contains(msg, "encoder.final_layer_norm.weight"));
    CHECK(contains(msg, path));
  }
  SUBCASE("no embedding under either name") {
    const auto file = io::SafetensorsFile::open((enc / "model.safetensors").string());
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const std::string& name : file->names())
      if (name != "shared.weight") tensors.emplace_back(name, file->load(name).clone());
    io::write_safetensors((enc / "model.safetensors").string(), tensors);
    const std::string msg = model_error_of([&] { encode(enc.string(), e.tokens, Placement{}); });
    CHECK(contains(msg, "shared.weight"));
    CHECK(contains(msg, "encoder.embed_tokens.weight"));
  }
}

TEST_CASE("t5: text encoder classes from transformers' config.json") {
  const std::string p = "m/text_encoder/config.json";
  CHECK(family_of(Part::kTextEncoder, {{"architectures", {"T5EncoderModel"}}}, p) == "t5");
  CHECK(family_of(Part::kTextEncoder, {{"architectures", {"UMT5EncoderModel"}}}, p) == "t5");
  CHECK(family_of(Part::kTextEncoder, {{"architectures", {"T5ForConditionalGeneration"}}}, p) == "t5");
  CHECK(family_of(Part::kTextEncoder, {{"model_type", "umt5"}}, p) == "t5");
  CHECK(contains(model_error_of([&] { family_of(Part::kTextEncoder, {{"architectures", {"CLIPTextModel"}}}, p); }),
                 "CLIPTextModel"));
}

TEST_CASE("umt5: the Wan fixture's text encoder equals transformers 5's last_hidden_state") {
  // tests/fixtures/wan_tiny/text_encoder (UMT5EncoderModel written by
  // transformers 5.24: "dtype" rather than "torch_dtype", scalable_attention)
  // on the three pipeline texts' ids and masks (reference/text_encoder.safetensors).
  const std::string root = testing::fixture_dir("wan_tiny");
  const std::string dir = root + "/text_encoder";
  const auto spec = spec_of(dir);
  CHECK(dynamic_cast<const T5Spec&>(*spec).config().umt5);
  CHECK(spec->hidden_size() == 32);
  const auto file = io::SafetensorsFile::open(root + "/reference/text_encoder.safetensors");
  const Tensor ids = file->load("ids"), mask = file->load("mask"), ref = file->load("last_hidden_state").clone();
  const int64_t N = ids.dim(0), L = ids.dim(1);
  REQUIRE(N == 3);
  TokenBatch batch;
  for (int64_t i = 0; i < N; ++i) {
    batch.ids.emplace_back(ids.data_as<int64_t>() + i * L, ids.data_as<int64_t>() + (i + 1) * L);
    int64_t len = 0;
    while (len < L && mask.data_as<int64_t>()[i * L + len] == 1) ++len;
    batch.lengths.push_back(len);
  }
  const Tensor got = encode(dir, batch, Placement{});
  const double err = rel_l2(got, ref);
  MESSAGE("wan_tiny UMT5 last_hidden_state relL2 " << err);
  CHECK(err <= 1e-5);
  // Each text alone gives its rows of the batch.
  for (int64_t i = 0; i < N; ++i) {
    const Tensor alone = encode(dir, TokenBatch{{batch.ids[static_cast<size_t>(i)]}, {batch.lengths[static_cast<size_t>(i)]}},
                                Placement{});
    CHECK(rel_l2(alone, ref.slice0(i, i + 1).clone()) <= 1e-5);
  }
}
