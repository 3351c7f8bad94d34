// Latte forward against diffusers' LatteTransformer3DModel on the committed
// fixture (tests/fixtures/latte_tiny: 4 heads x 8, 2 layers, 5x5 tokens per
// frame, video_length 3): 3 frames and one frame, the position tables, the
// text rows the cross-attention sees, frame counts diffusers rejects,
// PAB's cache keys of a layer's two blocks; config and weight errors;
// LatteSpec's answers from config.json.
#include <doctest/doctest.h>

#include <string>

#include "fixture.h"
#include "forward_checks.h"
#include "pab_schedules.h"
#include "io/model_dir.h"
#include "models/latte.h"
#include "models/latte_spec.h"
#include "models/registry.h"
#include "../ops/test_helpers.h"
#include "pab/broadcast.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::models;

namespace {

const std::string kFixture = "latte_tiny";

std::string transformer_dir() { return testing::fixture_dir(kFixture) + "/transformer"; }

nlohmann::json config_json() { return io::read_json_file(transformer_dir() + "/config.json"); }

LatteConfig config() { return LatteConfig::from_json(config_json(), transformer_dir() + "/config.json"); }

LatteTransformer load_latte(const ShardGroups& shard = {}) {
  return LatteTransformer::load(io::WeightStore::open_dir(transformer_dir()), config(), shard);
}

std::unique_ptr<Transformer> load_via_registry(DType dtype = DType::kF32) {
  const auto spec = transformer_spec(config_json(), transformer_dir() + "/config.json");
  REQUIRE(std::string(spec->family()) == "latte");
  return spec->load(io::WeightStore::open_dir(transformer_dir()), {}, Placement(Device::kCPU, dtype));
}

Tensor forward_tensor(const std::string& name) { return testing::fixture_tensor(kFixture, "forward.safetensors", name); }

// reference/forward.safetensors as LattePipeline calls the transformer: no mask.
struct ForwardCase {
  Tensor latents, text, sample;
  ForwardArgs args;

  explicit ForwardCase(const std::string& suffix = "") {
    latents = forward_tensor("latents" + suffix);
    text = forward_tensor("encoder_hidden_states");
    sample = forward_tensor("sample" + suffix);
    const Tensor t = forward_tensor("timestep");
    args.latents = &latents;
    args.text = &text;
    args.timesteps.assign(t.data(), t.data() + t.numel());
  }
};

std::string model_error(const nlohmann::json& cfg) {
  try {
    LatteConfig::from_json(cfg, "x/config.json");
  } catch (const ModelError& e) {
    return e.what();
  }
  return "(no ModelError)";
}

// Sample b of a (B, ...) tensor as a batch of one.
Tensor sample_of(const Tensor& t, int64_t b) { return t.slice0(b, b + 1).clone(); }

}  // namespace

TEST_CASE("latte position tables are diffusers': the 2-D pos_embed and temp_pos_embed") {
  const LatteTransformer m = load_latte();
  const Tensor pos = forward_tensor("pos_embed"), temporal = forward_tensor("temp_pos_embed");
  REQUIRE(m.position_table(5, 5).shape() == pos.shape());
  CHECK(testing::max_rel(m.position_table(5, 5), pos) < 1e-6);
  REQUIRE(m.temporal_table(3).shape() == temporal.shape());
  CHECK(testing::max_rel(m.temporal_table(3), temporal) < 1e-6);
  // Row f does not depend on the frame count: a longer table extends it.
  const Tensor longer = m.temporal_table(7);
  CHECK(testing::max_rel(longer.slice0(0, 3).clone(), temporal) == 0.0);
}

TEST_CASE("latte forward matches diffusers: 3 frames (video_length) and one frame") {
  const auto model = load_via_registry();
  for (const std::string suffix : {"", "_f1"}) {
    CAPTURE(suffix);
    const ForwardCase c(suffix);
    testing::check_forward_float32(*model, c.args, c.sample, "latte_tiny sample" + suffix);
  }
}

TEST_CASE("latte forward in bfloat16 stays near diffusers' float32") {
  const auto model = load_via_registry(DType::kBF16);
  for (const std::string suffix : {"", "_f1"}) {
    CAPTURE(suffix);
    const ForwardCase c(suffix);
    testing::check_forward_bfloat16(*model, c.args, c.sample, "latte_tiny sample" + suffix);
  }
}

TEST_CASE("latte forward: each video as its own batch of one, text lengths are the first rows seen") {
  const auto model = load_via_registry();
  ForwardCase c;
  const Tensor batch = testing::check_batch_of_one(*model, c.args);
  // All 12 rows as lengths: the same as no lengths.
  c.args.text_lengths = {12, 12};
  CHECK(testing::max_rel(model->forward(c.args), batch) == 0.0);
  // Lengths (7, 3) equal text cut to those rows (LattePipeline's mask_feature
  // cut), whatever the rows after them hold.
  c.args.text_lengths = {7, 3};
  const Tensor cut_by_length = model->forward(c.args);
  CHECK(testing::rel_l2(cut_by_length, batch) > 1e-3);
  Tensor scribbled = c.text.clone();
  for (int64_t j = 7 * 40; j < 12 * 40; ++j) scribbled[j] = 5.0f;
  for (int64_t j = 3 * 40; j < 12 * 40; ++j) scribbled[12 * 40 + j] = -5.0f;
  c.args.text = &scribbled;
  CHECK(testing::max_rel(model->forward(c.args), cut_by_length) == 0.0);
  const Tensor latents1 = sample_of(c.latents, 1);
  Tensor text1 = Tensor::empty({1, 3, 40});
  std::copy(c.text.data() + 12 * 40, c.text.data() + 15 * 40, text1.data());
  ForwardArgs cut;
  cut.latents = &latents1;
  cut.text = &text1;
  cut.timesteps = {c.args.timesteps[1]};
  CHECK(testing::rel_l2(model->forward(cut), sample_of(cut_by_length, 1)) < 1e-6);
}

TEST_CASE("latte forward: frame counts diffusers rejects (2, 5) run with the extended temporal table") {
  // diffusers adds its fixed (video_length, D) temp_pos_embed and fails for
  // F other than 1 and video_length; ditgen computes the same sin-cos rows
  // for any F (README: a departure). Frames mix through the temporal blocks.
  const auto model = load_via_registry();
  const ForwardCase c;
  for (const int64_t frames : {2, 5}) {
    CAPTURE(frames);
    Tensor latents = Tensor::empty({2, 4, frames, 10, 10});
    for (int64_t i = 0; i < latents.numel(); ++i) latents[i] = c.latents[i % c.latents.numel()];
    ForwardArgs a = c.args;
    a.latents = &latents;
    const Tensor y = model->forward(a);
    REQUIRE(y.shape() == Shape{2, 8, frames, 10, 10});
    // Frame 0 of the video changes when frame 1 does.
    Tensor changed = latents.clone();
    for (int64_t i = 0; i < 100; ++i) changed[100 + i] += 1.0f;  // b 0, channel 0, frame 1
    a.latents = &changed;
    const Tensor z = model->forward(a);
    double frame0 = 0;
    for (int64_t i = 0; i < 100; ++i) frame0 = std::max(frame0, static_cast<double>(std::abs(z[i] - y[i])));
    CHECK(frame0 > 1e-4);
  }
}

TEST_CASE("latte forward rejects inputs that do not fit the model") {
  const auto model = load_via_registry();
  ForwardCase c;
  c.args.text_lengths = {12, 13};
  CHECK_THROWS_WITH_AS(model->forward(c.args), doctest::Contains("text length 13"), RuntimeFailure);
  ForwardCase d;
  Tensor image = Tensor::zeros({2, 4, 10, 10});
  d.args.latents = &image;
  CHECK_THROWS_WITH_AS(model->forward(d.args), doctest::Contains("[B, 4, F, h, w]"), RuntimeFailure);
  Tensor odd = Tensor::zeros({2, 4, 3, 9, 10});
  d.args.latents = &odd;
  CHECK_THROWS_WITH_AS(model->forward(d.args), doctest::Contains("multiples of patch_size 2"), RuntimeFailure);
  ForwardCase e;
  e.args.text = nullptr;
  CHECK_THROWS_WITH_AS(model->forward(e.args), doctest::Contains("caption_channels"), RuntimeFailure);
}

TEST_CASE("latte PAB: the spatial and temporal blocks of a layer keep their MLP outputs apart") {
  // Two steps at one timestep with the same inputs: every branch of every
  // block is computed in step 0 and reused in step 1, so the outputs match
  // only if each block gets its own cached output back. A shared (layer,
  // mlp) key would hand the spatial block the temporal block's MLP output.
  const auto model = load_via_registry();
  ForwardCase c;
  pab::Schedule s =
      testing::reuse_every_branch({pab::Kind::kSpatial, pab::Kind::kTemporal, pab::Kind::kCross, pab::Kind::kMlp});
  pab::BroadcastCache cache(s, 2);
  c.args.timesteps = {500, 500};
  c.args.pab = &cache;
  cache.begin_step(500, 500);
  const Tensor first = model->forward(c.args);
  // Kept: per layer spatial, cross, temporal and two MLP outputs, each
  // (B*F, N, D) = (6, 25, 32) float32.
  const int64_t output_bytes = 6 * 25 * 32 * 4;
  CHECK(cache.cache_bytes() == 2 * 5 * output_bytes);
  cache.begin_step(500, std::nullopt);
  const Tensor second = model->forward(c.args);
  CHECK(testing::max_rel(second, first) == 0.0);
  for (pab::Kind k : {pab::Kind::kSpatial, pab::Kind::kTemporal, pab::Kind::kCross}) {
    CAPTURE(pab::kind_name(k));
    CHECK(cache.stats(k).computed == 2);
    CHECK(cache.stats(k).reused == 2);
  }
  CHECK(cache.stats(pab::Kind::kMlp).computed == 4);  // two layers x (spatial, temporal)
  CHECK(cache.stats(pab::Kind::kMlp).reused == 4);
  // mlp.blocks lists layers: layer 1 alone reuses both of its MLPs, layer 0's are computed.
  s[pab::Kind::kMlp].blocks = {1};
  pab::BroadcastCache one_layer(s, 2);
  c.args.pab = &one_layer;
  one_layer.begin_step(500, 500);
  model->forward(c.args);
  one_layer.begin_step(500, std::nullopt);
  CHECK(testing::max_rel(model->forward(c.args), first) == 0.0);
  CHECK(one_layer.stats(pab::Kind::kMlp).computed == 2);
  CHECK(one_layer.stats(pab::Kind::kMlp).reused == 2);
}

TEST_CASE("latte config errors are model errors naming the file and key") {
  const nlohmann::json good = config_json();
  nlohmann::json cfg = good;
  cfg["cross_attention_dim"] = 40;
  CHECK(model_error(cfg).find("x/config.json: cross_attention_dim: 40 must equal") != std::string::npos);
  cfg = good;
  cfg.erase("video_length");
  CHECK(model_error(cfg).find("x/config.json: missing key 'video_length'") != std::string::npos);
  cfg = good;
  cfg["video_length"] = 0;
  CHECK(model_error(cfg).find("video_length: expected a positive integer") != std::string::npos);
  cfg = good;
  cfg.erase("norm_type");  // diffusers' default layer_norm is another block
  CHECK(model_error(cfg).find("norm_type: not supported yet: 'layer_norm'") != std::string::npos);
  cfg = good;
  cfg.erase("activation_fn");  // diffusers' default geglu
  CHECK(model_error(cfg).find("activation_fn: not supported yet: 'geglu'") != std::string::npos);
  cfg = good;
  cfg["norm_elementwise_affine"] = true;
  CHECK(model_error(cfg).find("norm_elementwise_affine: not supported yet") != std::string::npos);
  cfg = good;
  cfg["caption_channels"] = nullptr;
  CHECK(model_error(cfg).find("caption_channels: missing") != std::string::npos);
  cfg = good;
  cfg["sample_size"] = 9;
  CHECK(model_error(cfg).find("sample_size 9 is not divisible by patch_size 2") != std::string::npos);
  cfg = good;
  cfg["_class_name"] = "PixArtTransformer2DModel";
  CHECK(model_error(cfg).find("expected LatteTransformer3DModel") != std::string::npos);
  // A config whose sizes disagree with the weights: the tensor is named.
  cfg = good;
  cfg["num_layers"] = 3;
  const auto weights = io::WeightStore::open_dir(transformer_dir());
  CHECK_THROWS_WITH_AS(LatteTransformer::load(weights, LatteConfig::from_json(cfg, "c.json")),
                       doctest::Contains("transformer_blocks.2."), ModelError);
  cfg["num_layers"] = 1;
  CHECK_THROWS_WITH_AS(LatteTransformer::load(weights, LatteConfig::from_json(cfg, "c.json")),
                       doctest::Contains("holds more transformer_blocks than num_layers = 1"), ModelError);
}

TEST_CASE("LatteSpec: family, kinds, text rules, latent shapes (C, F, h, w)") {
  const auto spec = transformer_spec(config_json(), "m/transformer/config.json");
  CHECK(std::string(spec->family()) == "latte");
  CHECK(spec->conditioning() == Conditioning::kText);
  CHECK(spec->caption_channels() == 40);
  CHECK(spec->out_channels() == 8);
  CHECK_FALSE(spec->micro_conditions());
  for (int k = 0; k < pab::kKinds; ++k) CHECK(spec->has_pab_kind(static_cast<pab::Kind>(k)));
  const TextPipelineRules rules = spec->text_pipeline_rules();
  CHECK(rules.negative_cut_to_prompt);
  CHECK(rules.fixed_max_length == 120);
  CHECK_FALSE(rules.divide_by_scaling_factor);
  CHECK(spec->latent_shape(0, 0, 0, {8}, "run.json: generate") == Shape{4, 3, 10, 10});  // video_length frames
  CHECK(spec->latent_shape(64, 96, 1, {8}, "run.json: generate") == Shape{4, 1, 8, 12});
  CHECK(spec->latent_shape(0, 0, 16, {8}, "run.json: generate") == Shape{4, 16, 10, 10});
  CHECK_THROWS_WITH_AS(spec->latent_shape(72, 80, 0, {8}, "run.json: generate"),
                       doctest::Contains("run.json: generate.height/width: 72x80: height and width must be positive "
                                         "multiples of 16"),
                       ConfigError);
  CHECK_THROWS_WITH_AS(spec->latent_shape(0, 0, -2, {8}, "run.json: generate"),
                       doctest::Contains("run.json: generate.frames: -2: expected at least 1 frame"), ConfigError);

}

TEST_CASE("LatteSpec workload: weights match the files' tensors, a sequence is a video of F frames of N tokens") {
  const LatteSpec spec(config());
  const auto weights = io::WeightStore::open_dir(transformer_dir());
  int64_t stored = 0;
  for (const std::string& name : weights.names()) stored += shape_numel(weights.info(name).shape);
  CHECK(latte_param_count(spec.config()) == stored);
  const parallel::Workload w = spec.workload(spec.latent_shape(64, 96, 5, {8}, ""));
  const int64_t d = 32;
  CHECK(w.tokens == 24);  // per frame
  CHECK(w.frames == 5);
  using parallel::AttentionKind;
  REQUIRE(w.attention.size() == 3);  // per layer, in order: spatial, cross, temporal
  CHECK(w.attention[0].kind == AttentionKind::kSpatial);
  CHECK(w.attention[0].tokens == 24);
  CHECK(w.attention[1].kind == AttentionKind::kCross);
  CHECK(w.attention[1].keys == parallel::KeySource::kOtherSequence);
  CHECK(w.attention[2].kind == AttentionKind::kTemporal);
  CHECK(w.attention[2].tokens == 5);
  for (const parallel::AttentionOp& op : w.attention) CHECK(op.heads == 4);
  CHECK(w.feed_forwards == 2);
  CHECK(w.frames_shardable());
  CHECK(w.heads == 4);
  CHECK(w.layers == 2);
  CHECK(w.mlp_hidden == 4 * d);
  CHECK(w.tp_all_reduces_per_layer() == 5);  // spatial self- and cross-attention, temporal attention, two MLPs
  CHECK(w.input_elements == 4 * 5 * 8 * 12);
  CHECK(w.output_elements == 8 * 5 * 8 * 12);
  CHECK(w.eps_elements == 4 * 5 * 8 * 12);
  // What one rank holds without tp: every stored tensor plus the native
  // spatial (25 rows) and temporal (video_length 3 rows) tables.
  CHECK(w.layers * (w.split_per_layer + w.whole_per_layer) + w.whole_once ==
        static_cast<double>(stored + (25 + 3) * d));
}

TEST_CASE("Latte-1 sizes: parameter count, by hand") {
  // 28 layers, 16 heads x 72 (D = 1152, F = 4608), T5-XXL captions (4096).
  // Spatial block as PixArt's: 21,255,552; temporal block: attn1 4*(D^2+D)
  // = 5,313,024, ff 2*D*F+F+D = 10,622,592, table 6D = 6,912: 15,942,528.
  // Once: patch 1152*16+1152 = 19,584, timestep embedder 256D+D+D^2+D =
  // 1,624,320, adaln_single 6D^2+6D = 7,969,536, caption projection
  // 4096D+D+D^2+D = 6,048,000, final table 2,304, proj_out 32D+32 = 36,896:
  // 15,700,640.
  const nlohmann::json cfg = {{"_class_name", "LatteTransformer3DModel"},
                              {"num_layers", 28},
                              {"num_attention_heads", 16},
                              {"attention_head_dim", 72},
                              {"in_channels", 4},
                              {"out_channels", 8},
                              {"sample_size", 64},
                              {"patch_size", 2},
                              {"caption_channels", 4096},
                              {"cross_attention_dim", 1152},
                              {"video_length", 16},
                              {"norm_type", "ada_norm_single"},
                              {"activation_fn", "gelu-approximate"},
                              {"norm_elementwise_affine", false},
                              {"attention_bias", true},
                              {"norm_eps", 1e-6}};
  const LatteConfig c = LatteConfig::from_json(cfg, "c.json");
  CHECK(c.interpolation_scale == 1.0);
  CHECK(latte_param_count(c) == 28 * (21255552 + 15942528) + 15700640);
}
