// The registry and DiT's entry in it: class names (and diffusers' legacy
// Transformer2DModel) to families, the families the contract names but this
// version does not build, and DitSpec's answers from config.json alone —
// its weight counts checked against the counts worked out by hand (and the
// published DiT-XL/2 parameter count).
#include <doctest/doctest.h>

#include "models/dit_spec.h"
#include "models/registry.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::models;

namespace {

nlohmann::json dit_json(int64_t layers, int64_t heads, int64_t head_dim, int64_t sample, int64_t classes) {
  return {{"_class_name", "DiTTransformer2DModel"}, {"num_layers", layers},     {"num_attention_heads", heads},
          {"attention_head_dim", head_dim},         {"in_channels", 4},        {"out_channels", 8},
          {"sample_size", sample},                  {"patch_size", 2},         {"num_embeds_ada_norm", classes}};
}

std::string error_of(const nlohmann::json& cfg, int* code) {
  try {
    transformer_spec(cfg, "m/transformer/config.json");
  } catch (const Error& e) {
    *code = e.exit_code();
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("registry: class names and diffusers' legacy names to families") {
  const std::string path = "m/transformer/config.json";
  CHECK(family_of(Part::kTransformer, dit_json(1, 2, 4, 4, 10), path) == "dit");
  nlohmann::json legacy = dit_json(1, 2, 4, 4, 10);
  legacy["_class_name"] = "Transformer2DModel";
  legacy["norm_type"] = "ada_norm_zero";
  CHECK(family_of(Part::kTransformer, legacy, path) == "dit");
  CHECK(std::string(transformer_spec(legacy, path)->family()) == "dit");
  legacy["norm_type"] = "ada_norm_single";
  CHECK(family_of(Part::kTransformer, legacy, path) == "pixart");
  CHECK(family_of(Part::kTransformer, {{"_class_name", "LatteTransformer3DModel"}}, path) == "latte");
  CHECK(family_of(Part::kVae, {{"_class_name", "AutoencoderKL"}}, "m/vae/config.json") == "vae");
  CHECK(family_of(Part::kTextEncoder, {{"_class_name", "T5EncoderModel"}}, "m/text_encoder/config.json") == "t5");
  CHECK(family_of(Part::kTextEncoder, {{"_class_name", "UMT5EncoderModel"}}, "m/text_encoder/config.json") == "t5");
}

TEST_CASE("registry: unknown classes are model errors, every named transformer family parses its config") {
  int code = 0;
  std::string e = error_of({{"_class_name", "UNet2DConditionModel"}}, &code);
  CHECK(code == kExitBadModel);
  CHECK(e.find("m/transformer/config.json: _class_name: 'UNet2DConditionModel'") != std::string::npos);
  CHECK(e.find("DiTTransformer2DModel") != std::string::npos);  // lists what exists

  // PixArt and Latte are built: their configs are parsed (these bare ones
  // lack their sizes), under every name, never "not supported yet".
  for (const char* cls : {"PixArtTransformer2DModel", "Transformer2DModel", "LatteTransformer3DModel"}) {
    CAPTURE(cls);
    e = error_of({{"_class_name", cls}, {"norm_type", "ada_norm_single"}}, &code);
    CHECK(code == kExitBadModel);
    CHECK(e.find("m/transformer/config.json: missing key 'num_layers'") != std::string::npos);
    CHECK(e.find("not supported yet") == std::string::npos);
  }

  e = error_of({{"_class_name", "Transformer2DModel"}, {"norm_type", "layer_norm"}}, &code);
  CHECK(code == kExitBadModel);
  CHECK(e.find("norm_type 'layer_norm'") != std::string::npos);

  CHECK_THROWS_AS(vae_spec({{"_class_name", "AutoencoderTiny"}}, "m/vae/config.json"), ModelError);
  CHECK(vae_spec({{"_class_name", "AutoencoderKL"}}, "m/vae/config.json")->spatial_factor() == 1);
  // diffusers' defaults: Wan 2.1's VAE (tests/models/test_autoencoder_kl_wan.cpp).
  CHECK(vae_spec({{"_class_name", "AutoencoderKLWan"}}, "m/vae/config.json")->temporal_factor() == 4);
  // diffusers' defaults: Wan 2.1 14B's transformer (tests/models/test_wan.cpp);
  // an image-to-video one (tests/models/test_wan_i2v.cpp) sets image_dim
  // with added_kv_proj_dim = the inner dim, or neither: one alone is exit 3.
  CHECK(std::string(transformer_spec({{"_class_name", "WanTransformer3DModel"}}, "m/transformer/config.json")
                        ->family()) == "wan");
  CHECK_THROWS_WITH_AS(transformer_spec({{"_class_name", "WanTransformer3DModel"}, {"image_dim", 1280}},
                                        "m/transformer/config.json"),
                       doctest::Contains("image_dim 1280 and added_kv_proj_dim 0"), ModelError);
  CHECK(transformer_spec({{"_class_name", "WanTransformer3DModel"}, {"image_dim", 1280}, {"added_kv_proj_dim", 5120}},
                         "m/transformer/config.json")
            ->in_channels() == 16);
}

TEST_CASE("DitSpec: sizes, PAB kinds, latent shape") {
  const auto spec = transformer_spec(dit_json(3, 2, 4, 4, 10), "m/transformer/config.json");
  CHECK(spec->conditioning() == Conditioning::kClassLabels);
  CHECK(spec->num_layers() == 3);
  CHECK(spec->head_dim() == 4);
  CHECK(spec->in_channels() == 4);
  CHECK(spec->out_channels() == 8);
  CHECK(spec->num_classes() == 10);
  CHECK(spec->has_pab_kind(pab::Kind::kSpatial));
  CHECK(spec->has_pab_kind(pab::Kind::kMlp));
  CHECK_FALSE(spec->has_pab_kind(pab::Kind::kTemporal));
  CHECK_FALSE(spec->has_pab_kind(pab::Kind::kCross));
  CHECK(spec->latent_shape(0, 0, 0, {8}, "run.json: generate") == Shape{4, 4, 4});
  CHECK(spec->latent_shape(32, 32, 0, {8}, "run.json: generate") == Shape{4, 4, 4});
  CHECK_THROWS_WITH_AS(spec->latent_shape(0, 0, 1, {8}, "run.json: generate"),
                       doctest::Contains("run.json: generate.frames: 1: a dit model makes images"), ConfigError);
  CHECK_THROWS_WITH_AS(spec->latent_shape(64, 32, 0, {8}, "run.json: generate"),
                       "run.json: generate.height/width: this DiT model generates 32x32 only (sample_size 4 x VAE "
                       "factor 8)",
                       ConfigError);
}

TEST_CASE("DitSpec workload: the tiny DiT's weights and sizes, by hand") {
  // L = 1, H = 2, head_dim 4 (D = 8), latent 4x4, patch 2 (N = 4, P2 = 4),
  // F = 32, C = 4, O = 8, 10 classes. tp-split per block: QKV 3*64+3*8 =
  // 216, out 64, MLP in 8*32+32 = 288, MLP out 32*8 = 256, adaLN 6*64+6*8 =
  // 432: 1256. Whole per block: biases 8+8 = 16, timestep embedder
  // 256*8+8+64+8 = 2128, class table 11*8 = 88: 2232. Once: patch 8*4*4+8 =
  // 136, pos_embed 4*8 = 32, final adaLN 2*64+16 = 144, final projection
  // 4*8*8+32 = 288: 600.
  const DitSpec spec(DitConfig::from_json(dit_json(1, 2, 4, 4, 10), "c.json"));
  const parallel::Workload w = spec.workload(spec.latent_shape(0, 0, 0, {8}, ""));
  CHECK(w.split_per_layer == 1256);
  CHECK(w.whole_per_layer == 2232);
  CHECK(w.whole_once == 600);
  CHECK(w.heads == 2);
  CHECK(w.head_dim == 4);
  CHECK(w.tokens == 4);
  CHECK(w.mlp_hidden == 32);
  REQUIRE(w.attention.size() == 1);  // self-attention over the image's tokens
  CHECK(w.attention[0].kind == parallel::AttentionKind::kSpatial);
  CHECK(w.attention[0].tokens == 4);
  CHECK(w.tp_all_reduces_per_layer() == 2);
  CHECK(w.gathered_per_layer == 48);
  CHECK(w.output_per_token == 32);
  CHECK(w.input_elements == 64);
  CHECK(w.output_elements == 128);
  CHECK(w.eps_elements == 64);
  CHECK(dit_param_count(spec.config(), true) == 1256 + 2232 + 600 - 32);
}

TEST_CASE("DiT-XL/2 parameter count") {
  const DitConfig c = DitConfig::from_json(dit_json(28, 16, 72, 32, 1000), "c.json");
  const int64_t tokens = 16 * 16, hidden = 16 * 72;
  // The original DiT repository counts 675,129,632: one shared timestep
  // embedder and class table, and its fixed pos_embed (N*D) as a parameter.
  CHECK(dit_param_count(c, false) + tokens * hidden == 675129632);
  // diffusers' DiTTransformer2DModel has one embedder per block (27 more
  // copies of 256*D + D + D*D + D + 1001*D = 2,777,472) and pos_embed as a
  // buffer.
  CHECK(dit_param_count(c, true) == 675129632 - 294912 + 27 * 2777472);
  CHECK(dit_param_count(c, true) == 749826464);
  // What a rank holds without tp: all of it, plus the pos_embed table.
  const DitSpec spec(c);
  const parallel::Workload w = spec.workload(spec.latent_shape(0, 0, 0, {8}, ""));
  CHECK(w.layers * (w.split_per_layer + w.whole_per_layer) + w.whole_once == 749826464.0 + 294912);
}

// A hostile config's sizes (found by fuzz_model_configs: a Latte
// video_length of 1.7e17): the workload's products are checked, a
// ModelError naming what overflowed, not undefined behaviour.
TEST_CASE("workload: sizes whose products overflow int64 are model errors") {
  // The fuzzer's input (fuzz/corpus/fuzz_model_configs/latte-huge-video-length).
  const nlohmann::json latte = nlohmann::json::parse(R"({
    "_class_name": "LatteTransformer3DModel", "activation_fn": "gelu-approximate", "attention_bias": true,
    "attention_head_dim": 32, "caption_channels": 64, "cross_attention_dim": 128, "in_channels": 4,
    "norm_elementwise_affine": false, "norm_eps": 1e-06, "norm_type": "ada_norm_single",
    "num_attention_heads": 4, "num_embeds_ada_norm": 1000, "num_layers": 4, "out_channels": 8,
    "patch_size": 2, "sample_size": 8, "video_length": 165555555555555555})");
  const auto spec = transformer_spec(latte, "m/transformer/config.json");
  const Shape latent = spec->latent_shape(0, 0, 0, {8}, "run.json: generate");
  CHECK_THROWS_WITH_AS(spec->workload(latent), doctest::Contains("too large (the product overflows int64)"),
                       ModelError);
}
