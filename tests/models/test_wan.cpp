// Wan forward against diffusers' WanTransformer3DModel on the committed
// fixture (tests/fixtures/wan_tiny: 6 heads x 8, 2 layers, 3 latent frames
// of 3 x 5 tokens; made by scripts/fixtures/make_wan_fixtures.py): the
// two-sample batch at timesteps 999 and 437.25 (sample 1's text rows past 7
// zero) and a one-frame video, in float32 and bfloat16; each sample alone
// equals its row of the batch; WanSpec's answers from config.json (latent
// shapes through the VAE's factors, the Workload, the layout rules: no
// dsp); config and weight errors; an image-to-video config's workload.
#include <doctest/doctest.h>

#include <string>

#include "fixture.h"
#include "forward_checks.h"
#include "io/model_dir.h"
#include "models/registry.h"
#include "models/wan.h"
#include "models/wan_spec.h"
#include "../ops/test_helpers.h"
#include "parallel/layout.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::models;

namespace {

const std::string kFixture = "wan_tiny";
const VaeFactors kWanVae{8, 4, "autoencoder_kl_wan"};

std::string transformer_dir() { return testing::fixture_dir(kFixture) + "/transformer"; }
nlohmann::json config_json() { return io::read_json_file(transformer_dir() + "/config.json"); }

std::unique_ptr<TransformerSpec> spec_of(const nlohmann::json& cfg) { return transformer_spec(cfg, "m/transformer/config.json"); }

std::unique_ptr<Transformer> load_via_registry(DType dtype = DType::kF32) {
  const auto spec = transformer_spec(config_json(), transformer_dir() + "/config.json");
  REQUIRE(std::string(spec->family()) == "wan");
  return spec->load(io::WeightStore::open_dir(transformer_dir()), {}, Placement(Device::kCPU, dtype));
}

Tensor forward_tensor(const std::string& name) {
  return testing::fixture_tensor(kFixture, "transformer_forward.safetensors", name);
}

// transformer(hidden_states, timestep, encoder_hidden_states) as the fixture calls it: no mask.
struct ForwardCase {
  Tensor latents, text, sample;
  ForwardArgs args;

  explicit ForwardCase(const std::string& suffix = "") {
    latents = forward_tensor("latents" + suffix);
    text = forward_tensor("encoder_hidden_states");
    if (!suffix.empty()) text = text.slice0(0, 1).clone();  // sample_f1 reads sample 0's text
    sample = forward_tensor("sample" + suffix);
    const Tensor t = forward_tensor("timestep" + suffix);
    args.latents = &latents;
    args.text = &text;
    args.timesteps.assign(t.data(), t.data() + t.numel());
  }
};

}  // namespace

TEST_CASE("wan forward matches diffusers: 3 latent frames (two timesteps, zero text rows) and one frame") {
  const auto model = load_via_registry();
  for (const std::string suffix : {"", "_f1"}) {
    CAPTURE(suffix);
    const ForwardCase c(suffix);
    testing::check_forward_float32(*model, c.args, c.sample, "wan_tiny sample" + suffix);
  }
}

TEST_CASE("wan forward in bfloat16 stays near diffusers' float32") {
  const auto model = load_via_registry(DType::kBF16);
  const ForwardCase c;
  testing::check_forward_bfloat16(*model, c.args, c.sample, "wan_tiny");
}

TEST_CASE("wan forward: each sample alone equals its row of the batch - all text rows as lengths change nothing") {
  const auto model = load_via_registry();
  ForwardCase c;
  const Tensor batch = testing::check_batch_of_one(*model, c.args);
  c.args.text_lengths = {16, 16};  // WanPipeline: every row seen
  CHECK(testing::max_rel(model->forward(c.args), batch) == 0.0);
  c.args.text_lengths = {16, 7};  // the zero rows are keys too: cutting them changes the result
  CHECK(testing::rel_l2(model->forward(c.args), batch) > 1e-4);
}

TEST_CASE("wan forward: bad arguments are RuntimeFailures naming the model") {
  const auto model = load_via_registry();
  ForwardCase c;
  Tensor odd = Tensor::zeros({1, 6, 3, 5, 10});  // h not a multiple of the patch
  c.args.latents = &odd;
  c.args.timesteps = {1.0f};
  CHECK_THROWS_WITH_AS(model->forward(c.args), doctest::Contains("Wan forward: latents"), RuntimeFailure);
  ForwardCase d;
  d.args.timesteps = {1.0f};
  CHECK_THROWS_WITH_AS(model->forward(d.args), doctest::Contains("timesteps"), RuntimeFailure);
}

TEST_CASE("wan spec: latent shapes through the VAE's factors, defaults and errors naming the field") {
  const auto spec = spec_of(config_json());
  CHECK(std::string(spec->family()) == "wan");
  CHECK(spec->conditioning() == Conditioning::kText);
  CHECK(spec->caption_channels() == 32);
  CHECK(spec->has_pab_kind(pab::Kind::kSpatial));
  CHECK(spec->has_pab_kind(pab::Kind::kCross));
  CHECK(spec->has_pab_kind(pab::Kind::kMlp));
  CHECK_FALSE(spec->has_pab_kind(pab::Kind::kTemporal));
  CHECK(spec->latent_shape(48, 80, 9, kWanVae, "run.json: generate") == Shape{6, 3, 6, 10});
  CHECK(spec->latent_shape(48, 80, 1, kWanVae, "run.json: generate") == Shape{6, 1, 6, 10});
  CHECK(spec->latent_shape(0, 0, 0, kWanVae, "run.json: generate") == Shape{6, 21, 60, 104});  // 480 x 832, 81
  CHECK_THROWS_WITH_AS(spec->latent_shape(48, 80, 10, kWanVae, "run.json: generate"),
                       doctest::Contains("run.json: generate.frames: 10 frames"), ConfigError);
  CHECK_THROWS_WITH_AS(spec->latent_shape(48, 80, 10, kWanVae, "run.json: generate"), doctest::Contains("9 or 13"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(spec->latent_shape(40, 80, 9, kWanVae, "run.json: generate"),
                       doctest::Contains("run.json: generate.height/width: 40x80"), ConfigError);
  CHECK_THROWS_WITH_AS(spec->latent_shape(40, 80, 9, kWanVae, "run.json: generate"),
                       doctest::Contains("multiples of 16 (VAE factor 8 x patch_size 2); the nearest to 40: 32 or 48"),
                       ConfigError);
}

TEST_CASE("wan spec: one spatio-temporal self-attention and a cross-attention per layer - dsp refused, ulysses over the video's tokens") {
  const auto spec = spec_of(config_json());
  const parallel::Workload w = spec->workload(spec->latent_shape(48, 80, 9, kWanVae, ""));
  CHECK(w.frames == 3);
  CHECK(w.tokens == 15);
  CHECK(w.sequence_tokens() == 45);
  CHECK(w.sequences_per_sample() == 1);
  REQUIRE(w.attention.size() == 2);
  CHECK(w.attention[0].kind == parallel::AttentionKind::kSpatioTemporal);
  CHECK(w.attention[0].tokens == 45);
  CHECK(w.attention[1].kind == parallel::AttentionKind::kCross);
  CHECK(w.tp_all_reduces_per_layer() == 3);
  CHECK(w.mlp_hidden == 64);
  CHECK(w.output_per_token == 24);
  CHECK_FALSE(w.frames_shardable());
  CHECK(parallel::resolve_sp_mode(parallel::SpMode::kAuto, w) == parallel::SpMode::kUlysses);
  // Weights: what WanTransformer declares, every tensor of the fixture.
  const io::WeightStore store = io::WeightStore::open_dir(transformer_dir());
  double stored = 0;
  for (const std::string& name : store.names()) stored += static_cast<double>(shape_numel(store.info(name).shape));
  CHECK(w.layers * (w.split_per_layer + w.whole_per_layer) + w.whole_once == stored);
  CHECK(wan_param_count(WanConfig::from_json(config_json(), "c")) == static_cast<int64_t>(stored));

  parallel::Layout dsp;
  dsp.sp = 2;
  dsp.sp_mode = parallel::SpMode::kDsp;
  const auto problems = parallel::layout_problems(dsp, 2, w, 5.0);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("spans every frame's tokens at once") != std::string::npos);
  // 45 tokens over 2 or 3 ranks (uneven shards), 6 heads over sp * tp.
  for (const int sp : {2, 3}) {
    parallel::Layout l;
    l.sp = sp;
    l.sp_mode = parallel::SpMode::kUlysses;
    CHECK(parallel::layout_problems(l, sp, w, 5.0).empty());
    l.sp_mode = parallel::SpMode::kRing;
    CHECK(parallel::layout_problems(l, sp, w, 5.0).empty());
  }
}

TEST_CASE("wan spec: the published Wan 2.1 / 2.2 T2V configs parse - sizes as published") {
  const std::string root = std::string(DITGEN_SOURCE_DIR) + "/configs/models/";
  const auto small = spec_of(io::read_json_file(root + "Wan2.1-T2V-1.3B-Diffusers/transformer/config.json"));
  CHECK(small->num_layers() == 30);
  CHECK(small->head_dim() == 128);
  CHECK(small->caption_channels() == 4096);
  const parallel::Workload w = small->workload(small->latent_shape(0, 0, 0, {8, 4, "autoencoder_kl_wan"}, ""));
  CHECK(w.sequence_tokens() == 21 * 30 * 52);
  CHECK(w.heads == 12);
  const auto big = spec_of(io::read_json_file(root + "Wan2.1-T2V-14B-Diffusers/transformer/config.json"));
  CHECK(big->num_layers() == 40);
}

TEST_CASE("wan config: an image-to-video config parses (its cross-attention attends 257 image tokens too) - unbuilt options are 'not supported yet' (exit 2), bad values ModelErrors") {
  const nlohmann::json i2v =
      io::read_json_file(testing::fixture_dir("wan_i2v_config") + "/transformer/config.json");
  const auto i2v_spec = spec_of(i2v);
  CHECK(i2v_spec->in_channels() == 16);
  const parallel::Workload w = i2v_spec->workload(i2v_spec->latent_shape(48, 80, 9, kWanVae, ""));
  REQUIRE(w.attention.size() == 2);
  CHECK(w.attention[1].added_tokens == 257);
  CHECK(w.attention[0].added_tokens == 0);
  nlohmann::json cfg = config_json();
  cfg["patch_size"] = {2, 2, 2};
  CHECK_THROWS_WITH_AS(spec_of(cfg), doctest::Contains("not supported yet: a Wan patch_size"), ConfigError);
  cfg = config_json();
  cfg["qk_norm"] = "rms_norm";
  CHECK_THROWS_WITH_AS(spec_of(cfg), doctest::Contains("qk_norm 'rms_norm'"), ConfigError);
  cfg = config_json();
  cfg["patch_size"] = "two";
  CHECK_THROWS_WITH_AS(spec_of(cfg), doctest::Contains("m/transformer/config.json: patch_size: expected three integers"),
                       ModelError);
  cfg = config_json();
  cfg["num_layers"] = 0;
  CHECK_THROWS_WITH_AS(spec_of(cfg), doctest::Contains("num_layers: expected a positive integer"), ModelError);
  cfg = config_json();
  cfg["attention_head_dim"] = 7;
  CHECK_THROWS_WITH_AS(spec_of(cfg), doctest::Contains("attention_head_dim: 7 must be even"), ModelError);
}

TEST_CASE("wan load: weights checked by name and shape against config.json before any is loaded") {
  nlohmann::json cfg = config_json();
  cfg["num_layers"] = 3;  // the file has 2
  const auto more = spec_of(cfg);
  CHECK_THROWS_WITH_AS(more->load(io::WeightStore::open_dir(transformer_dir()), {}, {}),
                       doctest::Contains("blocks.2."), ModelError);
  cfg = config_json();
  cfg["num_layers"] = 1;  // the file has 2
  CHECK_THROWS_WITH_AS(spec_of(cfg)->load(io::WeightStore::open_dir(transformer_dir()), {}, {}),
                       doctest::Contains("blocks"), ModelError);
  cfg = config_json();
  cfg["freq_dim"] = 32;  // time_embedder.linear_1 is (48, 16)
  CHECK_THROWS_WITH_AS(spec_of(cfg)->load(io::WeightStore::open_dir(transformer_dir()), {}, {}),
                       doctest::Contains("condition_embedder.time_embedder.linear_1.weight"), ModelError);
}
