// CogVideoX forward against diffusers' CogVideoXTransformer3DModel on the
// committed fixture (tests/fixtures/cogvideox_tiny: 2 heads x 16, 2 layers,
// time_embed_dim 24, 16 text rows; made by
// scripts/fixtures/make_cogvideox_fixtures.py): a two-sample batch at
// timesteps 999 and 377 over 3 latent frames, for the 2b layout (3-D sin-cos
// positions, at the model's sample size) and the 5b layout (3-D rotary
// positions, at a size other than the sample size, so the rotary grid is
// resized and cropped as CogVideoXPipeline does), in float32 and bfloat16;
// the rotary tables against the pipeline's; each sample alone equals its
// row; CogVideoXSpec's answers (latent shapes, the joint Workload, text
// rules, TeaCache coefficients); config and weight errors naming the key.
#include <doctest/doctest.h>

#include <string>

#include "fixture.h"
#include "forward_checks.h"
#include "io/model_dir.h"
#include "models/cogvideox.h"
#include "models/cogvideox_spec.h"
#include "models/registry.h"
#include "../ops/test_helpers.h"
#include "parallel/layout.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::models;

namespace {

const std::string kFixture = "cogvideox_tiny";
const VaeFactors kCogVae{8, 4, "autoencoder_kl_cogvideox", 8};

std::string model_dir(const std::string& layout) {
  return testing::fixture_dir(kFixture) + (layout == "rope" ? "/reference/transformer_rope" : "/transformer");
}
nlohmann::json config_json(const std::string& layout = "sincos") {
  return io::read_json_file(model_dir(layout) + "/config.json");
}
std::unique_ptr<TransformerSpec> spec_of(const nlohmann::json& cfg) {
  return transformer_spec(cfg, "m/transformer/config.json");
}

std::unique_ptr<Transformer> load_via_registry(const std::string& layout, DType dtype = DType::kF32) {
  const auto spec = transformer_spec(config_json(layout), model_dir(layout) + "/config.json");
  REQUIRE(std::string(spec->family()) == "cogvideox");
  return spec->load(io::WeightStore::open_dir(model_dir(layout)), {}, Placement(Device::kCPU, dtype));
}

Tensor forward_tensor(const std::string& name) { return testing::fixture_tensor(kFixture, "forward.safetensors", name); }

struct ForwardCase {
  Tensor latents, text, sample;
  ForwardArgs args;

  explicit ForwardCase(const std::string& layout) {
    latents = forward_tensor(layout + "_latents");
    text = forward_tensor(layout + "_text");
    sample = forward_tensor(layout + "_output");
    const Tensor t = forward_tensor(layout + "_timesteps");
    args.latents = &latents;
    args.text = &text;
    args.timesteps.assign(t.data(), t.data() + t.numel());
  }
};

}  // namespace

TEST_CASE("cogvideox forward matches diffusers: sin-cos positions (2b) and rotary positions at another size (5b)") {
  for (const std::string layout : {"sincos", "rope"}) {
    CAPTURE(layout);
    const auto model = load_via_registry(layout);
    const ForwardCase c(layout);
    testing::check_forward_float32(*model, c.args, c.sample, "cogvideox " + layout);
  }
}

TEST_CASE("cogvideox forward in bfloat16 stays near diffusers' float32") {
  const auto model = load_via_registry("rope", DType::kBF16);
  const ForwardCase c("rope");
  testing::check_forward_bfloat16(*model, c.args, c.sample, "cogvideox rope");
}

TEST_CASE("cogvideox rotary tables equal CogVideoXPipeline's, after identity rows for the text") {
  const CogVideoXConfig cfg = CogVideoXConfig::from_json(config_json("rope"), "config.json");
  const ops::RotaryTables t = CogVideoXTransformer::rotary_tables(cfg, 5, {3, 2, 4});  // latent 4 x 8, patch 2
  const Tensor cos = forward_tensor("rope_rotary_cos"), sin = forward_tensor("rope_rotary_sin");  // (24, 16)
  REQUIRE(t.cos.shape() == Shape{5 + 24, 16});
  for (int64_t i = 0; i < 5 * 16; ++i) {
    CHECK(t.cos[i] == 1.0f);
    CHECK(t.sin[i] == 0.0f);
  }
  const Tensor video_cos = t.cos.slice0(5, 29).clone(), video_sin = t.sin.slice0(5, 29).clone();
  CHECK(testing::max_rel(video_cos, cos) < 1e-6);
  CHECK(testing::max_rel(video_sin, sin) < 1e-6);
}

TEST_CASE("cogvideox forward: each sample alone equals its row of the batch") {
  for (const std::string layout : {"sincos", "rope"}) {
    CAPTURE(layout);
    const auto model = load_via_registry(layout);
    const ForwardCase c(layout);
    testing::check_batch_of_one(*model, c.args);
  }
}

TEST_CASE("cogvideox forward: bad arguments are RuntimeFailures naming the model") {
  const auto model = load_via_registry("sincos");
  ForwardCase c("sincos");
  Tensor odd = Tensor::zeros({1, 4, 3, 4, 5});  // w not a multiple of the patch
  c.args.latents = &odd;
  c.args.timesteps = {1.0f};
  CHECK_THROWS_WITH_AS(model->forward(c.args), doctest::Contains("CogVideoX forward: latents"), RuntimeFailure);
  ForwardCase d("sincos");
  Tensor cut = Tensor::zeros({2, 8, 40});
  d.args.text = &cut;  // a sin-cos model's table has 16 text rows
  CHECK_THROWS_WITH_AS(model->forward(d.args), doctest::Contains("takes 16 (max_text_seq_length)"), RuntimeFailure);
}

TEST_CASE("cogvideox spec: latent shapes, the joint Workload, text rules and TeaCache coefficients") {
  const auto spec = spec_of(config_json());
  CHECK(std::string(spec->family()) == "cogvideox");
  CHECK(spec->conditioning() == Conditioning::kText);
  CHECK(spec->caption_channels() == 40);
  CHECK(spec->has_pab_kind(pab::Kind::kSpatial));
  CHECK(spec->has_pab_kind(pab::Kind::kMlp));
  CHECK_FALSE(spec->has_pab_kind(pab::Kind::kCross));
  CHECK_FALSE(spec->has_pab_kind(pab::Kind::kTemporal));
  CHECK(spec->latent_shape(32, 48, 17, kCogVae, "run.json: generate") == Shape{4, 5, 4, 6});
  CHECK(spec->latent_shape(0, 0, 0, kCogVae, "run.json: generate") == Shape{4, 5, 4, 6});  // sample size and frames
  CHECK_THROWS_WITH_AS(spec->latent_shape(32, 48, 13, kCogVae, "run.json: generate"),
                       doctest::Contains("run.json: generate.frames: 13 frames"), ConfigError);
  CHECK_THROWS_WITH_AS(spec->latent_shape(40, 48, 17, kCogVae, "run.json: generate"),
                       doctest::Contains("run.json: generate.height/width: 40x48"), ConfigError);
  // The text joins the video: one sequence of L + F*h*w/4 tokens, L the run's.
  parallel::Workload w = spec->workload(spec->latent_shape(32, 48, 17, kCogVae, ""));
  CHECK(w.text_joined);
  w.set_text_tokens(16);
  CHECK(w.sequence_tokens() == 16 + 5 * 6);
  REQUIRE(w.attention.size() == 1);
  CHECK(w.attention[0].kind == parallel::AttentionKind::kSpatioTemporal);
  CHECK(w.attention[0].tokens == 16 + 30);
  CHECK(w.tp_all_reduces_per_layer() == 2);
  CHECK(w.gathered_per_layer == 2 * 6 * 32);
  CHECK_FALSE(w.frames_shardable());
  // CogVideoXPipeline's text: as written, every row, the encoder unmasked;
  // a sin-cos model takes exactly its table's text rows, a rotary one any.
  const TextPipelineRules r = spec->text_pipeline_rules();
  CHECK(r.prompt_cleaning == PromptCleaning::kNone);
  CHECK(r.encoder_unmasked);
  CHECK(r.fixed_max_length == 16);
  CHECK(r.default_max_length == 226);
  CHECK_FALSE(r.divide_by_scaling_factor);
  CHECK(spec_of(config_json("rope"))->text_pipeline_rules().fixed_max_length == 0);
  CHECK(spec->run_defaults().guidance_scale == 6.0);
  CHECK(spec->teacache_coefficients().empty());  // no published calibration at these sizes
  nlohmann::json two_b = config_json();
  two_b["num_attention_heads"] = 30;
  two_b["attention_head_dim"] = 64;
  two_b["num_layers"] = 30;
  CHECK(spec_of(two_b)->teacache_coefficients().size() == 5);
}

TEST_CASE("cogvideox config and weights: errors name the file and the key or tensor") {
  auto error_of = [](const nlohmann::json& cfg) -> std::string {
    try {
      spec_of(cfg);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "(none)";
  };
  nlohmann::json c = config_json();
  c["patch_size_t"] = 2;
  CHECK(error_of(c).find("not supported yet: CogVideoX 1.5 models (m/transformer/config.json: patch_size_t = 2)") !=
        std::string::npos);
  c = config_json();
  c["in_channels"] = 8;
  CHECK(error_of(c).find("image-to-video") != std::string::npos);
  c = config_json();
  c["use_learned_positional_embeddings"] = true;
  CHECK(error_of(c).find("use_learned_positional_embeddings true") != std::string::npos);
  c = config_json();
  c["num_layers"] = "two";
  CHECK(error_of(c).find("m/transformer/config.json") != std::string::npos);
  CHECK(error_of(c).find("num_layers") != std::string::npos);
  c = config_json();
  c["attention_head_dim"] = 12;  // 24 wide: no 3-D sin-cos split
  CHECK(error_of(c).find("multiple of 16") != std::string::npos);
  // A config with more layers than the file holds: the missing tensor is named.
  c = config_json();
  c["num_layers"] = 3;
  const auto spec = transformer_spec(c, "config.json");
  CHECK_THROWS_WITH_AS(spec->load(io::WeightStore::open_dir(model_dir("sincos")), {}, {}),
                       doctest::Contains("transformer_blocks.2."), ModelError);
}
