// The LoRA reader on files made here, one rule at a time: each naming's
// keys and where alpha comes from (checked against scalings worked out by
// hand from peft's and kohya's rules), experts, skipped and unknown keys
// with their reasons, and every bad input with its error and exit code.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "error_helpers.h"
#include "io/lora_file.h"
#include "io/safetensors.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::io;
using ditgen::testing::contains;
using ditgen::testing::model_error_of;

namespace {

using Entries = std::vector<std::pair<std::string, Tensor>>;

// A tensor of `shape` with values 0.1, 0.2, ... (distinct, finite).
Tensor ramp(const Shape& shape, float step = 0.1f) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = step * static_cast<float>(i + 1);
  return Tensor::from_vector(shape, v);
}

Tensor scalar(float v) { return Tensor::from_vector({}, {v}); }

// A LoRA pair on `stem` (down (rank, in), up (out, rank)) with the given
// part names.
Entries pair(const std::string& stem, int64_t rank, int64_t in, int64_t out, const std::string& down = "lora_A",
             const std::string& up = "lora_B") {
  return {{stem + "." + down + ".weight", ramp({rank, in})}, {stem + "." + up + ".weight", ramp({out, rank})}};
}

Entries operator+(Entries a, const Entries& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Files : ditgen::testing::TempDir {
  Files() : TempDir("ditgen_test_lora_file") {}
  std::string make(const std::string& name, const Entries& entries, const std::map<std::string, std::string>& meta = {}) {
    write_safetensors(file(name), entries, meta);
    return file(name);
  }
};

// Pointers into `f`, which must outlive them (no temporaries).
std::map<std::string, const LoraTarget*> by_tensor(const LoraFile& f) {
  std::map<std::string, const LoraTarget*> out;
  for (const LoraTarget& t : f.targets) out[t.tensor] = &t;
  return out;
}
void by_tensor(const LoraFile&&) = delete;

}  // namespace

TEST_CASE("lora file: diffusers keys, alpha from the metadata's LoraConfig (patterns, rsLoRA) or the rank") {
  Files dir;
  const Entries keys = pair("transformer.blocks.0.attn1.to_q", 4, 6, 5) + pair("transformer.blocks.0.ffn.net.2", 2, 3, 6) +
                       Entries{{"transformer.blocks.0.attn1.to_q.lora_B.bias", ramp({5})}};
  SUBCASE("no metadata: alpha = rank, scaling 1") {
    const LoraFile f = read_lora_file(dir.make("a.safetensors", keys));
    CHECK(f.formats == std::vector<LoraFormat>{LoraFormat::kDiffusers});
    REQUIRE(f.targets.size() == 3);
    const auto t = by_tensor(f);
    CHECK(t.at("blocks.0.attn1.to_q.weight")->kind == LoraKind::kLowRank);
    CHECK(t.at("blocks.0.attn1.to_q.weight")->rank == 4);
    CHECK(t.at("blocks.0.attn1.to_q.weight")->alpha == 4);
    CHECK(t.at("blocks.0.attn1.to_q.weight")->scaling == 1);
    CHECK(t.at("blocks.0.attn1.to_q.bias")->kind == LoraKind::kBias);
    CHECK(t.at("blocks.0.attn1.to_q.bias")->keys == std::vector<std::string>{"transformer.blocks.0.attn1.to_q.lora_B.bias"});
    CHECK(t.at("blocks.0.attn1.to_q.weight")->a.shape() == Shape{4, 6});
    CHECK(t.at("blocks.0.attn1.to_q.weight")->b.shape() == Shape{5, 4});
    CHECK(t.at("blocks.0.attn1.to_q.weight")->expert == LoraExpert::kAny);
  }
  SUBCASE("the metadata's r, lora_alpha, rank_pattern and alpha_pattern") {
    const std::string meta = R"({"transformer.r": 4, "transformer.lora_alpha": 6, "transformer.rank_pattern": {"ffn.net.2": 2},
                                 "transformer.alpha_pattern": {"^blocks.0.ffn.net.2": 1.5, "to_k": 9}, "transformer.use_rslora": false})";
    const LoraFile f = read_lora_file(dir.make("b.safetensors", keys, {{"lora_adapter_metadata", meta}}));
    const auto t = by_tensor(f);
    CHECK(t.at("blocks.0.attn1.to_q.weight")->alpha == 6);
    CHECK(t.at("blocks.0.attn1.to_q.weight")->scaling == 6.0 / 4);
    CHECK(t.at("blocks.0.attn1.to_q.bias")->scaling == 6.0 / 4);  // a LoRA's bias is scaled as its pair
    CHECK(t.at("blocks.0.ffn.net.2.weight")->alpha == 1.5);
    CHECK(t.at("blocks.0.ffn.net.2.weight")->scaling == 1.5 / 2);
  }
  SUBCASE("rsLoRA: alpha / sqrt(rank); a config without r and lora_alpha has LoraConfig's 8 and 8") {
    const std::string meta = R"({"transformer.r": 4, "transformer.lora_alpha": 3, "transformer.use_rslora": true,
                                 "transformer.rank_pattern": {"ffn.net.2": 2}})";
    const LoraFile f = read_lora_file(dir.make("c.safetensors", keys, {{"lora_adapter_metadata", meta}}));
    const auto t = by_tensor(f);
    CHECK(t.at("blocks.0.attn1.to_q.weight")->scaling == doctest::Approx(3.0 / 2));
    CHECK(t.at("blocks.0.ffn.net.2.weight")->scaling == doctest::Approx(3.0 / std::sqrt(2.0)));
    const Entries rank8 = pair("transformer.proj_out", 8, 3, 3);
    const LoraFile f8 = read_lora_file(
        dir.make("d.safetensors", rank8, {{"lora_adapter_metadata", "{\"transformer.use_rslora\": false}"}}));
    const auto d = by_tensor(f8);
    CHECK(d.at("proj_out.weight")->scaling == 1);
    CHECK(d.at("proj_out.weight")->alpha == 8);
  }
  SUBCASE("a model's own file: bare keys, unprefixed metadata") {
    const Entries bare = pair("blocks.0.attn1.to_q", 4, 6, 5);
    const LoraFile f = read_lora_file(dir.make("e.safetensors", bare, {{"lora_adapter_metadata", R"({"r": 4, "lora_alpha": 2})"}}));
    const auto t = by_tensor(f);
    CHECK(t.at("blocks.0.attn1.to_q.weight")->scaling == 0.5);
  }
}

TEST_CASE("lora file: peft's adapter_model.safetensors takes alpha from adapter_config.json beside it") {
  Files dir;
  dir.write("peft/adapter_config.json", R"({"r": 2, "lora_alpha": 5, "rank_pattern": {}, "alpha_pattern": {"to_v": 1}})");
  const std::string path = dir.make("peft/adapter_model.safetensors",
                                    pair("base_model.model.blocks.1.attn2.to_k", 2, 4, 4) +
                                        pair("base_model.model.blocks.1.attn2.to_v", 2, 4, 4));
  const LoraFile f = read_lora_file(path);
  CHECK(f.formats == std::vector<LoraFormat>{LoraFormat::kPeft});
  const auto t = by_tensor(f);
  CHECK(t.at("blocks.1.attn2.to_k.weight")->scaling == 2.5);
  CHECK(t.at("blocks.1.attn2.to_v.weight")->scaling == 0.5);
  dir.write("peft/adapter_config.json", R"({"r": "two"})");
  CHECK(contains(model_error_of([&] { read_lora_file(path); }), "adapter_config.json: r: expected an integer, got string"));
}

TEST_CASE("lora file: kohya and ComfyUI names, alpha keys, Wan's original names, full-tensor deltas") {
  Files dir;
  SUBCASE("musubi-tuner's Wan keys: original names with underscores, per-module alpha") {
    const Entries keys = pair("lora_unet_blocks_3_self_attn_o", 4, 6, 6, "lora_down", "lora_up") +
                         pair("lora_unet_blocks_3_ffn_0", 2, 6, 8, "lora_down", "lora_up") +
                         Entries{{"lora_unet_blocks_3_self_attn_o.alpha", scalar(2)},
                                 {"lora_unet_blocks_3_ffn_0.alpha", Tensor::from_vector({1}, {3})}};
    const LoraFile f = read_lora_file(dir.make("k.safetensors", keys));
    CHECK(f.formats == std::vector<LoraFormat>{LoraFormat::kKohya});
    const auto t = by_tensor(f);
    CHECK(t.at("blocks.3.attn1.to_out.0.weight")->scaling == 0.5);
    CHECK(t.at("blocks.3.attn1.to_out.0.weight")->alpha == 2);
    CHECK(t.at("blocks.3.attn1.to_out.0.weight")->keys.size() == 3);
    CHECK(t.at("blocks.3.ffn.net.0.proj.weight")->scaling == 1.5);
  }
  SUBCASE("kohya keys spelling diffusers' names resolve against the model's names, and only then") {
    const Entries keys = pair("lora_unet_transformer_blocks_0_attn1_to_out_0", 2, 4, 4, "lora_down", "lora_up") +
                         pair("lora_unet_proj_out_1", 2, 4, 4, "lora_down", "lora_up");
    const std::string path = dir.make("k2.safetensors", keys);
    const LoraFile unresolved = read_lora_file(path);
    CHECK(unresolved.targets.empty());
    REQUIRE(unresolved.unknown.size() == 4);
    CHECK(contains(unresolved.unknown[0].reason, "only the model's tensor names resolve"));
    const LoraFile f = read_lora_file(path, {{"transformer_blocks.0.attn1.to_out.0.weight",
                                              "transformer_blocks.0.attn1.to_out.0.bias", "proj_out_1.weight",
                                              "proj_out.1.weight"}});
    // proj_out_1 and proj_out.1 spell the same: ambiguous, not guessed
    CHECK(by_tensor(f).count("transformer_blocks.0.attn1.to_out.0.weight") == 1);
    REQUIRE(f.unknown.size() == 2);
    CHECK(contains(f.unknown[0].reason, "spells several of the model's tensors"));
  }
  SUBCASE("ComfyUI / lightx2v: diffusion_model. + Wan names, lora_A / lora_B, diff, diff_b, diff_m") {
    const Entries keys = pair("diffusion_model.blocks.0.cross_attn.k", 2, 4, 4) +
                         pair("diffusion_model.time_projection.1", 2, 4, 24, "lora_down", "lora_up") +
                         Entries{{"diffusion_model.blocks.0.cross_attn.k.diff_b", ramp({4})},
                                 {"diffusion_model.head.head.diff", ramp({6, 4})},
                                 {"diffusion_model.head.head.diff_b", ramp({6})},
                                 {"diffusion_model.blocks.0.norm3.diff", ramp({4})},
                                 {"diffusion_model.blocks.0.diff_m", ramp({1, 6, 4})},
                                 {"diffusion_model.head.diff_m", ramp({1, 2, 4})},
                                 {"diffusion_model.blocks.1.modulation.diff", ramp({1, 6, 4})},
                                 {"diffusion_model.patch_embedding.diff", ramp({4, 2, 1, 2, 2})}};
    const LoraFile f = read_lora_file(dir.make("c.safetensors", keys));
    CHECK(f.formats == std::vector<LoraFormat>{LoraFormat::kComfy});
    CHECK(f.unknown.empty());
    std::map<std::string, std::string> kinds;
    for (const LoraTarget& t : f.targets) kinds[t.tensor] = lora_kind_name(t.kind);
    CHECK(kinds == std::map<std::string, std::string>{{"blocks.0.attn2.to_k.weight", "low-rank"},
                                                      {"blocks.0.attn2.to_k.bias", "bias"},
                                                      {"condition_embedder.time_proj.weight", "low-rank"},
                                                      {"proj_out.weight", "weight"},
                                                      {"proj_out.bias", "bias"},
                                                      {"blocks.0.norm2.weight", "weight"},
                                                      {"blocks.0.scale_shift_table", "table"},
                                                      {"scale_shift_table", "table"},
                                                      {"blocks.1.scale_shift_table", "table"},
                                                      {"patch_embedding.weight", "weight"}});
    const auto t = by_tensor(f);
    CHECK(t.at("blocks.0.attn2.to_k.bias")->scaling == 1);  // diff_b: a full delta
    CHECK(t.at("patch_embedding.weight")->delta.shape() == Shape{4, 2, 1, 2, 2});
  }
  SUBCASE("ComfyUI keys in diffusers' names (families other than Wan)") {
    const Entries keys = pair("diffusion_model.transformer_blocks.1.attn2.to_v", 3, 4, 4, "lora_down", "lora_up") +
                         Entries{{"diffusion_model.transformer_blocks.1.attn2.to_v.alpha", scalar(6)},
                                 {"diffusion_model.scale_shift_table.diff", ramp({2, 4})},
                                 {"diffusion_model.transformer_blocks.1.scale_shift_table.diff", ramp({6, 4})}};
    const LoraFile f = read_lora_file(dir.make("d.safetensors", keys));
    const auto t = by_tensor(f);
    CHECK(t.at("transformer_blocks.1.attn2.to_v.weight")->scaling == 2);
    CHECK(t.at("scale_shift_table")->kind == LoraKind::kTable);
    CHECK(t.at("transformer_blocks.1.scale_shift_table")->kind == LoraKind::kTable);
  }
}

TEST_CASE("lora file: text-encoder keys and DoRA scales are skipped, adapters that are not LoRA are unknown") {
  Files dir;
  const Entries keys = pair("transformer.proj_out", 2, 4, 4) + pair("text_encoder.encoder.block.0.q", 2, 4, 4) +
                       pair("lora_te_text_model_encoder_layers_0_q_proj", 2, 4, 4, "lora_down", "lora_up") +
                       pair("lora_te2_x", 1, 2, 2) +
                       Entries{{"text_encoders.t5xxl.x.lora_A.weight", ramp({1, 2})},
                               {"transformer.proj_out.dora_scale", ramp({1, 4})},
                               {"lora_unet_blocks_0_self_attn_q.hada_w1_a", ramp({2, 2})},
                               {"blocks.0.attn1.to_q.lora_magnitude_vector", ramp({4})},
                               {"transformer.blocks.0.attn1.to_q.weight", ramp({4, 4})},
                               {"diffusion_model.blocks.0.self_attn.q.lora_mid.weight", ramp({2, 2})},
                               {"transformer.blocks.0.diff_m", ramp({1, 6, 4})},
                               {"diffusion_model.blocks.0.self_attn.q.diff_m", ramp({1, 6, 4})},
                               {"diffusion_model.blocks.0.modulation.lora_A.weight", ramp({2, 4})},
                               {".lora_A.weight", ramp({2, 4})}};
  const LoraFile f = read_lora_file(dir.make("s.safetensors", keys));
  REQUIRE(f.targets.size() == 1);
  CHECK(f.targets[0].tensor == "proj_out.weight");
  std::map<std::string, std::string> skipped, unknown;
  for (const LoraKeyNote& s : f.skipped) skipped[s.key] = s.reason;
  for (const LoraKeyNote& u : f.unknown) unknown[u.key] = u.reason;
  CHECK(skipped.size() == 8);
  CHECK(skipped.at("text_encoder.encoder.block.0.q.lora_A.weight") == "text encoder");
  CHECK(skipped.at("lora_te2_x.lora_B.weight") == "text encoder");
  CHECK(contains(skipped.at("transformer.proj_out.dora_scale"), "DoRA scale"));
  CHECK(contains(unknown.at("lora_unet_blocks_0_self_attn_q.hada_w1_a"), "LoHa"));
  CHECK(contains(unknown.at("blocks.0.attn1.to_q.lora_magnitude_vector"), "DoRA magnitude"));
  CHECK(contains(unknown.at("transformer.blocks.0.attn1.to_q.weight"), "no LoRA part"));
  CHECK(contains(unknown.at("diffusion_model.blocks.0.self_attn.q.lora_mid.weight"), "convolution"));
  CHECK(contains(unknown.at("transformer.blocks.0.diff_m"), "Wan's original names"));
  CHECK(contains(unknown.at("diffusion_model.blocks.0.self_attn.q.diff_m"), "is none"));
  CHECK(contains(unknown.at("diffusion_model.blocks.0.modulation.lora_A.weight"), "a parameter"));
  CHECK(contains(unknown.at(".lora_A.weight"), "no module name"));
  CHECK(f.keys == static_cast<int64_t>(f.skipped.size() + f.unknown.size() + 2));
}

TEST_CASE("lora file: a convolution LoRA is unknown, not misread") {
  Files dir;
  const Entries keys = {{"diffusion_model.patch_embedding.lora_down.weight", ramp({2, 4, 1, 2, 2})},
                        {"diffusion_model.patch_embedding.lora_up.weight", ramp({8, 2, 1, 1, 1})},
                        {"diffusion_model.patch_embedding.alpha", scalar(2)}};
  const LoraFile f = read_lora_file(dir.make("conv.safetensors", keys));
  CHECK(f.targets.empty());
  REQUIRE(f.unknown.size() == 3);
  CHECK(contains(f.unknown[0].reason, "5-D (convolution) weight: not supported"));
}

TEST_CASE("lora file: experts from transformer. / transformer_2. prefixes") {
  Files dir;
  SUBCASE("both") {
    const LoraFile f = read_lora_file(dir.make("b.safetensors", pair("transformer.proj_out", 2, 4, 4) +
                                                                 pair("transformer_2.proj_out", 2, 4, 4) +
                                                                 pair("transformer_2.blocks.0.ffn.net.2", 2, 4, 4)));
    REQUIRE(f.targets.size() == 3);
    CHECK(f.targets[0].expert == LoraExpert::kTransformer);  // sorted by expert, then tensor
    CHECK(f.targets[1].expert == LoraExpert::kTransformer2);
    CHECK(f.targets[1].tensor == "blocks.0.ffn.net.2.weight");
    CHECK(f.targets[2].expert == LoraExpert::kTransformer2);
  }
  SUBCASE("transformer. alone: any expert (the configuration's target decides)") {
    const LoraFile f = read_lora_file(dir.make("a.safetensors", pair("transformer.proj_out", 2, 4, 4)));
    CHECK(f.targets.at(0).expert == LoraExpert::kAny);
  }
  SUBCASE("each expert's metadata") {
    const std::string meta = R"({"transformer.lora_alpha": 1, "transformer.r": 2, "transformer_2.lora_alpha": 4, "transformer_2.r": 2})";
    const LoraFile f = read_lora_file(dir.make("m.safetensors", pair("transformer.proj_out", 2, 4, 4) +
                                                                 pair("transformer_2.proj_out", 2, 4, 4),
                                               {{"lora_adapter_metadata", meta}}));
    CHECK(f.targets.at(0).scaling == 0.5);
    CHECK(f.targets.at(1).scaling == 2);
  }
}

TEST_CASE("lora file: bad files fail with the file, the key and the exit code") {
  Files dir;
  auto read = [&](const Entries& entries, const std::map<std::string, std::string>& meta = {}) {
    const std::string path = dir.make("bad.safetensors", entries, meta);
    return model_error_of([&] { read_lora_file(path); });
  };
  SUBCASE("pickle checkpoints are not read") {
    for (const char* name : {"x.pt", "x.PTH", "x.ckpt", "x.bin"}) {
      CAPTURE(name);
      const std::string path = dir.write(name, "not opened");
      CHECK_THROWS_WITH_AS(read_lora_file(path), doctest::Contains((path + ": not read: a ").c_str()), ConfigError);
      CHECK_THROWS_WITH_AS(read_lora_file(path), doctest::Contains("pickle, which can run code"), ConfigError);
    }
  }
  SUBCASE("a missing file, and a file that is not safetensors") {
    CHECK(contains(model_error_of([&] { read_lora_file(dir.file("none.safetensors")); }), "none.safetensors"));
    const std::string junk = dir.write("junk.safetensors", "PK\x03\x04 a zip");
    CHECK(contains(model_error_of([&] { read_lora_file(junk); }), "junk.safetensors"));
  }
  SUBCASE("a missing half") {
    const std::string msg = read({{"transformer.proj_out.lora_A.weight", ramp({2, 4})}});
    CHECK(contains(msg, "bad.safetensors: transformer.proj_out.lora_A.weight: proj_out has no lora_B / lora_up weight"));
    CHECK(contains(read({{"lora_unet_blocks_0_ffn_2.lora_up.weight", ramp({4, 2})},
                         {"lora_unet_blocks_0_ffn_2.alpha", scalar(1)}}),
                   "lora_unet_blocks_0_ffn_2.lora_up.weight: blocks.0.ffn.net.2 has no lora_A / lora_down weight"));
    CHECK(contains(read({{"transformer.proj_out.lora_B.bias", ramp({4})}}), "both halves"));
  }
  SUBCASE("ranks that disagree, a bias of the wrong length, an empty tensor") {
    CHECK(contains(read({{"x.lora_A.weight", ramp({2, 4})}, {"x.lora_B.weight", ramp({4, 3})}}),
                   "x.lora_B.weight: shape [4, 3] has rank 3, its down weight x.lora_A.weight [2, 4] rank 2"));
    CHECK(contains(read(pair("x", 2, 4, 5) + Entries{{"x.lora_B.bias", ramp({4})}}),
                   "x.lora_B.bias: shape [4]; the bias of a LoRA whose up weight is [5, 2] has (5)"));
    CHECK(contains(read({{"x.lora_A.weight", ramp({0, 4})}, {"x.lora_B.weight", ramp({4, 0})}}), "empty"));
    CHECK(contains(read({{"diffusion_model.blocks.0.self_attn.q.diff_b", ramp({2, 2})}}), "a bias's change is 1-D"));
  }
  SUBCASE("alpha that is not one number") {
    CHECK(contains(read(pair("x", 2, 4, 4) + Entries{{"x.alpha", ramp({2})}}),
                   "x.alpha: shape [2]; alpha is one number"));
    CHECK(contains(read(pair("x", 2, 4, 4) + Entries{{"x.alpha", scalar(std::numeric_limits<float>::infinity())}}),
                   "x.alpha: element 0 is inf"));
  }
  SUBCASE("a dtype that is not floating, a value that is not finite") {
    Tensor ints = Tensor::zeros({2, 4}, Device::kCPU, DType::kI32);
    CHECK(contains(read({{"x.lora_A.weight", ints}, {"x.lora_B.weight", ramp({4, 2})}}),
                   "x.lora_A.weight: dtype I32; a LoRA tensor is F32, F16 or BF16"));
    Tensor nan = ramp({4, 2});
    nan.data()[5] = std::nanf("");
    CHECK(contains(read({{"x.lora_A.weight", ramp({2, 4})}, {"x.lora_B.weight", nan}}), "x.lora_B.weight: element 5 is nan"));
  }
  SUBCASE("one tensor changed twice") {
    CHECK(contains(read(pair("transformer.proj_out", 2, 4, 4) + pair("proj_out", 2, 4, 4)),
                   "changes the same tensor as"));
    CHECK(contains(read(pair("diffusion_model.head.head", 2, 4, 4, "lora_down", "lora_up") +
                        Entries{{"diffusion_model.head.head.diff", ramp({4, 4})}}),
                   "changes proj_out.weight, as "));
    CHECK(contains(read(pair("proj_out", 2, 4, 4) + Entries{{"proj_out.lora_B.bias", ramp({4})},
                                                            {"diffusion_model.head.head.diff_b", ramp({4})}}),
                   "changes proj_out.bias"));
    // one expert's change and every expert's
    CHECK(contains(read(pair("transformer.proj_out", 2, 4, 4) + pair("transformer_2.proj_out", 2, 4, 4) +
                        pair("diffusion_model.head.head", 2, 4, 4)),
                   "changes proj_out.weight"));
  }
  SUBCASE("metadata that is not a LoraConfig, or that disagrees with the shapes") {
    CHECK(contains(read(pair("transformer.x", 2, 4, 4), {{"lora_adapter_metadata", "{not json"}}),
                   "bad.safetensors: lora_adapter_metadata: not valid JSON"));
    CHECK(contains(read(pair("transformer.x", 2, 4, 4), {{"lora_adapter_metadata", R"({"transformer.lora_alpha": "8"})"}}),
                   "lora_adapter_metadata: transformer.lora_alpha: expected a number, got string"));
    CHECK(contains(read(pair("transformer.x", 2, 4, 4), {{"lora_adapter_metadata", R"({"transformer.r": 0})"}}),
                   "transformer.r: 0 is not a rank"));
    CHECK(contains(read(pair("transformer.x", 2, 4, 4), {{"lora_adapter_metadata", R"({"transformer.r": 4})"}}),
                   "transformer.x.lora_A.weight: rank 2, but the file's LoraConfig gives x rank 4"));
  }
  SUBCASE("adapters this reader does not support: ConfigError (exit 2)") {
    const std::string a = dir.make("dora.safetensors", pair("transformer.x", 2, 4, 4),
                                   {{"lora_adapter_metadata", R"({"transformer.use_dora": true})"}});
    CHECK_THROWS_WITH_AS(read_lora_file(a), doctest::Contains("transformer.use_dora: a DoRA adapter"), ConfigError);
    const std::string b = dir.make("regex.safetensors", pair("transformer.x", 2, 4, 4),
                                   {{"lora_adapter_metadata", R"({"transformer.rank_pattern": {"blocks\\.\\d+\\.x": 2}})"}});
    CHECK_THROWS_WITH_AS(read_lora_file(b), doctest::Contains("is a regular expression this reader does not evaluate"),
                         ConfigError);
  }
}
