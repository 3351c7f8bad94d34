// PixArt forward against diffusers' PixArtTransformer2DModel on the committed
// fixtures: the native 5x5-token grid and a non-square 4x6 one (interpolated
// positions), text with masked padding (key counts), the 1024 models'
// micro-conditions and interpolation_scale 2, the legacy Transformer2DModel
// config; config and weight errors; PixArtSpec's answers from config.json.
#include <doctest/doctest.h>

#include <string>

#include "fixture.h"
#include "pab_schedules.h"
#include "io/model_dir.h"
#include "models/pixart.h"
#include "models/pixart_spec.h"
#include "models/registry.h"
#include "../ops/test_helpers.h"
#include "ops/ops.h"
#include "pab/broadcast.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::models;

namespace {

std::string transformer_dir(const std::string& fixture, const std::string& part = "transformer") {
  return testing::fixture_dir(fixture) + "/" + part;
}

nlohmann::json config_of(const std::string& fixture, const std::string& part = "transformer") {
  return io::read_json_file(transformer_dir(fixture, part) + "/config.json");
}

PixArtTransformer load_pixart(const std::string& fixture) {
  const PixArtConfig cfg = PixArtConfig::from_json(config_of(fixture), transformer_dir(fixture) + "/config.json");
  return PixArtTransformer::load(io::WeightStore::open_dir(transformer_dir(fixture)), cfg);
}

// One forward case of reference/forward.safetensors (suffix "" or "_8x12")
// as the pipeline would pass it: the 0/1 mask (a prefix of ones) as key counts.
struct ForwardCase {
  Tensor latents, text, sample;
  ForwardArgs args;

  ForwardCase(const std::string& fixture, const std::string& suffix, bool micro) {
    auto load = [&](const std::string& name) {
      return testing::fixture_tensor(fixture, "forward.safetensors", name + suffix);
    };
    latents = load("latents");
    text = load("encoder_hidden_states");
    sample = load("sample");
    const Tensor t = load("timestep"), mask = load("encoder_attention_mask");
    args.latents = &latents;
    args.text = &text;
    args.timesteps.assign(t.data(), t.data() + t.numel());
    const int64_t bsz = mask.dim(0), len = mask.dim(1);
    for (int64_t b = 0; b < bsz; ++b) {
      int32_t count = 0;
      while (count < len && mask[b * len + count] == 1.0f) ++count;
      for (int64_t j = count; j < len; ++j) REQUIRE_MESSAGE(mask[b * len + j] == 0.0f, "mask is not a prefix");
      args.text_lengths.push_back(count);
    }
    if (micro) {
      const Tensor res = load("resolution"), ar = load("aspect_ratio");
      for (int64_t b = 0; b < bsz; ++b) {
        args.resolution.push_back({res[2 * b], res[2 * b + 1]});
        args.aspect_ratio.push_back(ar[b]);
      }
    }
  }
};

void check_parity(const Transformer& model, const std::string& fixture, const std::string& suffix, bool micro) {
  const ForwardCase c(fixture, suffix, micro);
  const Tensor y = model.forward(c.args);
  REQUIRE(y.shape() == c.sample.shape());
  const double err = testing::rel_l2(y, c.sample);
  MESSAGE(fixture << " sample" << suffix << ": forward relative L2 error " << err);
  CHECK(err <= 1e-5);
  CHECK(testing::max_rel(y, c.sample) < 1e-4);
}

std::unique_ptr<Transformer> load_via_registry(const std::string& fixture, const std::string& part = "transformer",
                                               DType dtype = DType::kF32) {
  const std::string path = transformer_dir(fixture, part) + "/config.json";
  const auto spec = transformer_spec(config_of(fixture, part), path);
  REQUIRE(std::string(spec->family()) == "pixart");
  return spec->load(io::WeightStore::open_dir(transformer_dir(fixture)), {}, Placement(Device::kCPU, dtype));
}

std::string model_error(const nlohmann::json& cfg) {
  try {
    PixArtConfig::from_json(cfg, "x/config.json");
  } catch (const ModelError& e) {
    return e.what();
  }
  return "(no ModelError)";
}

}  // namespace

TEST_CASE("pixart position table is diffusers': native grid and non-square 4x6, interpolation_scale 1 and 2") {
  for (const std::string fixture : {"pixart_tiny", "pixart_1024_tiny"}) {
    CAPTURE(fixture);
    const PixArtTransformer m = load_pixart(fixture);
    for (auto [suffix, gh, gw] : {std::tuple{"", 5, 5}, {"_8x12", 4, 6}}) {
      CAPTURE(suffix);
      const Tensor ref = testing::fixture_tensor(fixture, "forward.safetensors", std::string("pos_embed") + suffix);
      const Tensor got = m.position_table(gh, gw);
      REQUIRE(got.shape() == ref.shape());
      CHECK(testing::max_rel(got, ref) < 1e-6);
    }
  }
}

TEST_CASE("pixart forward matches diffusers: 5x5 grid, masked text, learned sigma") {
  check_parity(*load_via_registry("pixart_tiny"), "pixart_tiny", "", false);
}

TEST_CASE("pixart forward matches diffusers: non-native 8x12 latent (4x6 tokens)") {
  check_parity(*load_via_registry("pixart_tiny"), "pixart_tiny", "_8x12", false);
}

TEST_CASE("pixart forward matches diffusers: micro-conditions, interpolation_scale 2 (1024 models)") {
  const auto model = load_via_registry("pixart_1024_tiny");
  check_parity(*model, "pixart_1024_tiny", "", true);
  check_parity(*model, "pixart_1024_tiny", "_8x12", true);
}

TEST_CASE("pixart forward in bfloat16 stays near diffusers' float32") {
  for (const std::string fixture : {"pixart_tiny", "pixart_1024_tiny"}) {
    CAPTURE(fixture);
    const ForwardCase c(fixture, "", fixture == "pixart_1024_tiny");
    const Tensor y = load_via_registry(fixture, "transformer", DType::kBF16)->forward(c.args);
    const double err = testing::rel_l2(y, c.sample);
    MESSAGE(fixture << " bfloat16: forward relative L2 error " << err);
    CHECK(err < 2e-2);
    CHECK(err > 1e-5);  // bfloat16 arithmetic really ran
  }
}

TEST_CASE("pixart: the legacy Transformer2DModel config loads as PixArt and gives the same output") {
  const auto legacy = load_via_registry("pixart_1024_tiny", "transformer_legacy");
  const auto modern = load_via_registry("pixart_1024_tiny");
  const ForwardCase c("pixart_1024_tiny", "", true);
  const Tensor a = legacy->forward(c.args), b = modern->forward(c.args);
  REQUIRE(a.shape() == b.shape());
  CHECK(testing::max_rel(a, b) == 0.0);
  CHECK(testing::rel_l2(a, c.sample) <= 1e-5);
}

TEST_CASE("pixart: masked text rows take no part (key counts), the mask matters") {
  const auto model = load_via_registry("pixart_tiny");
  ForwardCase c("pixart_tiny", "", false);
  REQUIRE(c.args.text_lengths == std::vector<int32_t>{12, 5});
  const Tensor y = model->forward(c.args);
  // Changing the masked rows of sample 1 changes nothing.
  Tensor text = c.text.clone();
  for (int64_t j = 5 * 40; j < 12 * 40; ++j) text[12 * 40 + j] = 7.0f;
  c.args.text = &text;
  CHECK(testing::max_rel(model->forward(c.args), y) == 0.0);
  // Without the counts sample 1 sees the padded rows: another output.
  c.args.text = &c.text;
  c.args.text_lengths.clear();
  CHECK(testing::rel_l2(model->forward(c.args), c.sample) > 1e-3);
}

TEST_CASE("pixart forward rejects inputs that do not fit the model") {
  const auto model = load_via_registry("pixart_1024_tiny");
  ForwardCase c("pixart_1024_tiny", "", true);
  c.args.resolution.clear();
  CHECK_THROWS_WITH_AS(model->forward(c.args), doctest::Contains("micro-conditions"), RuntimeFailure);
  ForwardCase d("pixart_1024_tiny", "", true);
  d.args.text_lengths = {12, 13};
  CHECK_THROWS_WITH_AS(model->forward(d.args), doctest::Contains("text length 13"), RuntimeFailure);
  Tensor odd = Tensor::zeros({1, 4, 9, 10});
  d.args.latents = &odd;
  CHECK_THROWS_WITH_AS(model->forward(d.args), doctest::Contains("multiples of patch_size 2"), RuntimeFailure);
}

TEST_CASE("pixart PAB: a reused branch gives the output its computation would give") {
  // Two steps at the same timestep with the same inputs: every branch of
  // every block is computed in step 0 and reused in step 1, so the outputs match.
  const auto model = load_via_registry("pixart_tiny");
  ForwardCase c("pixart_tiny", "", false);
  pab::BroadcastCache cache(testing::reuse_every_branch({pab::Kind::kSpatial, pab::Kind::kCross, pab::Kind::kMlp}), 2);
  c.args.timesteps = {500, 500};
  c.args.pab = &cache;
  cache.begin_step(500, 500);
  const Tensor first = model->forward(c.args);
  cache.begin_step(500, std::nullopt);
  const Tensor second = model->forward(c.args);
  CHECK(testing::max_rel(second, first) == 0.0);
  for (pab::Kind k : {pab::Kind::kSpatial, pab::Kind::kCross, pab::Kind::kMlp}) {
    CAPTURE(pab::kind_name(k));
    CHECK(cache.stats(k).computed == 2);
    CHECK(cache.stats(k).reused == 2);
  }
  CHECK(cache.stats(pab::Kind::kTemporal).computed == 0);
}

TEST_CASE("pixart config errors are model errors naming the file and key") {
  const nlohmann::json good = config_of("pixart_tiny");
  nlohmann::json cfg = good;
  cfg["cross_attention_dim"] = 40;
  std::string e = model_error(cfg);
  CHECK(e.find("x/config.json: cross_attention_dim: 40 must equal") != std::string::npos);
  CHECK(e.find("32") != std::string::npos);
  cfg = good;
  cfg["activation_fn"] = "geglu";
  CHECK(model_error(cfg).find("x/config.json: activation_fn: not supported yet: 'geglu'") != std::string::npos);
  cfg = good;
  cfg["num_layers"] = "two";
  CHECK(model_error(cfg).find("x/config.json: num_layers") != std::string::npos);
  cfg = good;
  cfg.erase("caption_channels");
  CHECK(model_error(cfg).find("x/config.json: caption_channels") != std::string::npos);
  cfg = good;
  cfg["norm_elementwise_affine"] = true;
  CHECK(model_error(cfg).find("x/config.json: norm_elementwise_affine") != std::string::npos);
  cfg = good;
  cfg["use_additional_conditions"] = true;  // D = 32 does not divide by 3
  CHECK(model_error(cfg).find("x/config.json: use_additional_conditions") != std::string::npos);
  cfg = good;
  cfg["_class_name"] = "Transformer2DModel";
  cfg["norm_type"] = "ada_norm_zero";  // the legacy name of DiT
  CHECK(model_error(cfg).find("x/config.json: _class_name") != std::string::npos);
}

TEST_CASE("pixart config: defaults as diffusers derives them") {
  nlohmann::json cfg = config_of("pixart_tiny");
  PixArtConfig c = PixArtConfig::from_json(cfg, "x/config.json");
  CHECK(c.interpolation_scale == 1.0);  // null: max(sample_size // 64, 1)
  CHECK_FALSE(c.use_additional_conditions);
  CHECK(c.out_channels == 8);
  CHECK(c.ff_inner_dim == 128);
  cfg["sample_size"] = 128;
  cfg["num_attention_heads"] = 6;  // D = 48 divides by 3
  cfg["cross_attention_dim"] = 48;
  cfg["use_additional_conditions"] = nullptr;  // null: sample_size == 128
  cfg["out_channels"] = nullptr;
  c = PixArtConfig::from_json(cfg, "x/config.json");
  CHECK(c.interpolation_scale == 2.0);
  CHECK(c.use_additional_conditions);
  CHECK(c.out_channels == 4);
}

TEST_CASE("pixart weights are validated against config.json before loading") {
  const std::string path = transformer_dir("pixart_tiny") + "/config.json";
  const auto weights = io::WeightStore::open_dir(transformer_dir("pixart_tiny"));
  PixArtConfig cfg = PixArtConfig::from_json(config_of("pixart_tiny"), path);
  cfg.caption_channels = 48;  // the file's caption projection reads 40
  CHECK_THROWS_WITH_AS(PixArtTransformer::load(weights, cfg), doctest::Contains("caption_projection.linear_1.weight"),
                       ModelError);
  cfg = PixArtConfig::from_json(config_of("pixart_tiny"), path);
  cfg.num_layers = 3;  // the file holds 2 blocks
  CHECK_THROWS_WITH_AS(PixArtTransformer::load(weights, cfg), doctest::Contains("transformer_blocks.2."), ModelError);
  cfg.num_layers = 1;
  CHECK_THROWS_WITH_AS(PixArtTransformer::load(weights, cfg), doctest::Contains("more transformer_blocks"),
                       ModelError);
  cfg = PixArtConfig::from_json(config_of("pixart_tiny"), path);
  cfg.use_additional_conditions = true;  // the file has no micro-condition embedders
  CHECK_THROWS_WITH_AS(PixArtTransformer::load(weights, cfg), doctest::Contains("resolution_embedder"), ModelError);
}

TEST_CASE("PixArtSpec: sizes, PAB kinds, latent shapes for any multiple of the patch") {
  const auto spec = transformer_spec(config_of("pixart_1024_tiny"), "m/transformer/config.json");
  CHECK(std::string(spec->family()) == "pixart");
  CHECK(spec->conditioning() == Conditioning::kText);
  CHECK(spec->num_layers() == 2);
  CHECK(spec->head_dim() == 6);
  CHECK(spec->in_channels() == 4);
  CHECK(spec->out_channels() == 8);
  CHECK(spec->caption_channels() == 40);
  CHECK(spec->micro_conditions());
  CHECK(spec->has_pab_kind(pab::Kind::kSpatial));
  CHECK(spec->has_pab_kind(pab::Kind::kCross));
  CHECK(spec->has_pab_kind(pab::Kind::kMlp));
  CHECK_FALSE(spec->has_pab_kind(pab::Kind::kTemporal));
  CHECK(spec->latent_shape(0, 0, 0, {8}, "run.json: generate") == Shape{4, 10, 10});
  CHECK(spec->latent_shape(64, 96, 0, {8}, "run.json: generate") == Shape{4, 8, 12});
  CHECK_THROWS_WITH_AS(spec->latent_shape(0, 0, 3, {8}, "run.json: generate"),
                       doctest::Contains("run.json: generate.frames: 3: a pixart model makes images"), ConfigError);
  CHECK_THROWS_WITH_AS(spec->latent_shape(72, 96, 0, {8}, "run.json: generate"),
                       "run.json: generate.height/width: 72x96: height and width must be positive multiples of 16 (VAE "
                       "factor 8 x patch_size 2); the nearest to 72: 64 or 80",
                       ConfigError);
  CHECK_FALSE(transformer_spec(config_of("pixart_tiny"), "m/transformer/config.json")->micro_conditions());
}

TEST_CASE("PixArtSpec workload: weights match the files' tensors, sizes follow the latent") {
  for (const std::string fixture : {"pixart_tiny", "pixart_1024_tiny"}) {
    CAPTURE(fixture);
    const PixArtSpec spec(PixArtConfig::from_json(config_of(fixture), "c.json"));
    const auto weights = io::WeightStore::open_dir(transformer_dir(fixture));
    int64_t stored = 0;
    for (const std::string& name : weights.names()) stored += shape_numel(weights.info(name).shape);
    CHECK(pixart_param_count(spec.config()) == stored);
    const parallel::Workload w = spec.workload(spec.latent_shape(64, 96, 0, {8}, ""));
    const int64_t d = spec.config().inner_dim();
    CHECK(w.tokens == 24);
    CHECK(w.heads == 4);
    CHECK(w.mlp_hidden == 4 * d);
    CHECK(w.gathered_per_layer == 0);
    CHECK(w.tp_all_reduces_per_layer() == 3);  // self- and cross-attention, MLP
    REQUIRE(w.attention.size() == 2);
    CHECK(w.attention[0].kind == parallel::AttentionKind::kSpatial);
    CHECK(w.attention[1].kind == parallel::AttentionKind::kCross);
    CHECK_FALSE(w.frames_shardable());
    CHECK(w.output_per_token == 32);
    CHECK(w.input_elements == 4 * 8 * 12);
    CHECK(w.output_elements == 8 * 8 * 12);
    // What one rank holds without tp: every stored tensor plus the native position table.
    CHECK(w.layers * (w.split_per_layer + w.whole_per_layer) + w.whole_once == static_cast<double>(stored + 25 * d));
  }
}

TEST_CASE("PixArt-XL-2-1024-MS sizes: parameter count, by hand") {
  // 28 layers, 16 heads x 72 (D = 1152, F = 4608), T5-XXL captions (4096),
  // micro-conditions (sample_size 128). Per block: attn1 and attn2 4*(D^2+D)
  // = 5,313,024 each, ff 2*D*F+F+D = 10,622,592, table 6D = 6,912:
  // 21,255,552 (x 28 = 595,155,456). Once: patch 1152*16+1152 = 19,584,
  // timestep embedder 256D+D+D^2+D = 1,624,320, two size embedders (D/3 =
  // 384) 2*246,528 = 493,056, adaln_single 6D^2+6D = 7,969,536, caption
  // projection 4096D+D+D^2+D = 6,048,000, final table 2,304, proj_out
  // 32D+32 = 36,896: 16,193,696.
  const nlohmann::json cfg = {{"_class_name", "PixArtTransformer2DModel"},
                              {"num_layers", 28},
                              {"num_attention_heads", 16},
                              {"attention_head_dim", 72},
                              {"in_channels", 4},
                              {"out_channels", 8},
                              {"sample_size", 128},
                              {"patch_size", 2},
                              {"caption_channels", 4096},
                              {"cross_attention_dim", 1152}};
  const PixArtConfig c = PixArtConfig::from_json(cfg, "c.json");
  CHECK(c.use_additional_conditions);
  CHECK(c.interpolation_scale == 2.0);
  CHECK(pixart_param_count(c) == 595155456 + 16193696);
}
