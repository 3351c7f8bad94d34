// The Wan transformer with image conditioning against diffusers'
// WanTransformer3DModel on the committed fixtures (tests/fixtures/
// wan_i2v_tiny, made by scripts/fixtures/make_wan_i2v_fixtures.py): Wan 2.1
// I2V (36 input channels, 257 image tokens through the image embedder, the
// blocks' added keys and values), FLF2V (514 image tokens with learned
// positions), Wan 2.2 I2V-A14B (36 channels, no image tokens) and TI2V-5B
// (48 channels, a timestep per token, 0 on the first frame's), in float32
// and bfloat16; the I2V weights in the original Wan release's names; PAB
// and both step caches on the I2V and TI2V transformers; bad inputs and
// configs.
#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "fixture.h"
#include "forward_checks.h"
#include "pab_schedules.h"
#include "wan_i2v_case.h"
#include "io/model_dir.h"
#include "models/registry.h"
#include "models/wan.h"
#include "models/wan_spec.h"
#include "../ops/test_helpers.h"
#include "pab/broadcast.h"
#include "pab/step_cache.h"
#include "parallel/plan.h"
#include "parallel/step_cost.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::models;

namespace {

std::string transformer_dir(const std::string& variant) { return testing::wan_i2v_dir(variant) + "/transformer"; }
nlohmann::json config_json(const std::string& variant) {
  return io::read_json_file(transformer_dir(variant) + "/config.json");
}

std::unique_ptr<Transformer> load_variant(const std::string& variant, DType dtype = DType::kF32) {
  const auto spec = transformer_spec(config_json(variant), transformer_dir(variant) + "/config.json");
  REQUIRE(std::string(spec->family()) == "wan");
  return spec->load(io::WeightStore::open_dir(transformer_dir(variant)), {}, Placement(Device::kCPU, dtype));
}

using Case = testing::WanI2vCase;

}  // namespace

TEST_CASE("wan i2v forward matches diffusers: I2V (257 image tokens, added k/v), FLF2V (514 with positions), I2V-A14B, TI2V-5B") {
  for (const std::string variant : {"i2v", "flf2v", "i2v_a14b", "ti2v"}) {
    CAPTURE(variant);
    const auto model = load_variant(variant);
    const Case c(variant);
    testing::check_forward_float32(*model, c.args, c.sample, "wan_i2v_tiny " + variant);
  }
}

TEST_CASE("wan i2v forward in bfloat16 stays near diffusers' float32: I2V and TI2V") {
  for (const std::string variant : {"i2v", "ti2v"}) {
    CAPTURE(variant);
    const auto model = load_variant(variant, DType::kBF16);
    const Case c(variant);
    testing::check_forward_bfloat16(*model, c.args, c.sample, "wan_i2v_tiny " + variant);
  }
}

TEST_CASE("wan i2v: the conditioning is used - other image tokens or one timestep for every token change the output") {
  {
    const auto model = load_variant("i2v");
    Case c("i2v");
    const Tensor base = model->forward(c.args);
    Tensor other = c.image->clone();  // not a scaling: the embedder's first LayerNorm would undo that
    for (int64_t i = 0; i < other.numel(); ++i) other[i] += 0.5f * static_cast<float>(i % 7 - 3);
    c.args.image = &other;
    CHECK(testing::rel_l2(model->forward(c.args), base) > 1e-3);
  }
  const auto model = load_variant("ti2v");
  Case c("ti2v");
  c.args.token_timesteps.clear();  // every token at the step's timestep: not what diffusers computed
  CHECK(testing::rel_l2(model->forward(c.args), c.sample) > 1e-3);
}

TEST_CASE("wan i2v: the weights in the original Wan release's names (k_img, v_img, norm_k_img, img_emb.proj) give the same forward") {
  const std::string file = testing::wan_i2v_dir("i2v") + "/i2v_original.safetensors";
  const io::WeightStore store = io::WeightStore::open_file(file, wan_single_file_naming().read);
  CHECK(store.contains("blocks.1.attn2.add_k_proj.weight"));
  CHECK(store.contains("condition_embedder.image_embedder.ff.net.0.proj.weight"));
  const auto spec = transformer_spec(config_json("i2v"), transformer_dir("i2v") + "/config.json");
  const auto model = spec->load(store, {}, Placement(Device::kCPU, DType::kF32));
  const Case c("i2v");
  testing::check_forward_float32(*model, c.args, c.sample, "wan_i2v_tiny i2v, original names");
  // Both ways: diffusers' names back to the original release's.
  CHECK(wan_single_file_naming().file_name("condition_embedder.image_embedder.pos_embed") == "img_emb.emb_pos");
  CHECK(wan_single_file_naming().file_name("blocks.3.attn2.norm_added_k.weight") == "blocks.3.cross_attn.norm_k_img.weight");
}

TEST_CASE("wan i2v: bad arguments are RuntimeFailures naming what is wrong") {
  const auto i2v = load_variant("i2v");
  {
    Case c("i2v");
    c.args.image = nullptr;
    CHECK_THROWS_WITH_AS(i2v->forward(c.args), doctest::Contains("Wan forward: this image-to-video model (image_dim 12) needs the image encoder's tokens"),
                         RuntimeFailure);
    Tensor narrow = Tensor::zeros({2, 257, 8});
    c.args.image = &narrow;
    CHECK_THROWS_WITH_AS(i2v->forward(c.args), doctest::Contains("image tokens [2, 257, 8]: expected (2, M, 12)"),
                         RuntimeFailure);
  }
  {
    const auto flf2v = load_variant("flf2v");
    Case c("flf2v");
    Tensor one_image = Tensor::zeros({1, 257, 12});
    c.args.image = &one_image;
    CHECK_THROWS_WITH_AS(flf2v->forward(c.args), doctest::Contains("expected (1, 514, 12)"), RuntimeFailure);
  }
  {
    const auto a14b = load_variant("i2v_a14b");
    Case c("i2v_a14b");
    Tensor image = Tensor::zeros({1, 257, 12});
    c.args.image = &image;
    CHECK_THROWS_WITH_AS(a14b->forward(c.args), doctest::Contains("image tokens given to a model without image_dim"),
                         RuntimeFailure);
  }
  const auto ti2v = load_variant("ti2v");
  Case c("ti2v");
  c.args.token_timesteps.pop_back();
  CHECK_THROWS_WITH_AS(ti2v->forward(c.args), doctest::Contains("44 token timesteps for 1 x 45 tokens"), RuntimeFailure);
}

TEST_CASE("wan i2v config: image_dim and added_kv_proj_dim together (= inner dim), pos_embed_seq_len with image_dim") {
  auto spec_of = [](const nlohmann::json& cfg) { return transformer_spec(cfg, "m/transformer/config.json"); };
  nlohmann::json cfg = config_json("i2v");
  CHECK(spec_of(cfg)->in_channels() == 36);
  cfg["added_kv_proj_dim"] = nullptr;
  CHECK_THROWS_WITH_AS(spec_of(cfg), doctest::Contains("m/transformer/config.json: image_dim 12 and added_kv_proj_dim 0"), ModelError);
  cfg = config_json("i2v");
  cfg["added_kv_proj_dim"] = 12;
  CHECK_THROWS_WITH_AS(spec_of(cfg), doctest::Contains("added_kv_proj_dim = num_attention_heads x attention_head_dim = 24"),
                       ModelError);
  cfg = config_json("i2v_a14b");
  cfg["pos_embed_seq_len"] = 514;
  CHECK_THROWS_WITH_AS(spec_of(cfg), doctest::Contains("pos_embed_seq_len: set without image_dim"), ModelError);
  cfg = config_json("i2v");
  cfg["image_dim"] = -3;
  CHECK_THROWS_WITH_AS(spec_of(cfg), doctest::Contains("image_dim: expected a positive integer or null"), ModelError);
}

TEST_CASE("wan i2v PAB: every branch (spatial, cross with the image tokens, mlp) computed then reused exactly") {
  const auto model = load_variant("i2v");
  Case c("i2v");
  pab::BroadcastCache cache(testing::reuse_every_branch({pab::Kind::kSpatial, pab::Kind::kCross, pab::Kind::kMlp}), 2);
  c.args.timesteps = {500, 500};
  c.args.pab = &cache;
  cache.begin_step(500, 500);
  const Tensor first = model->forward(c.args);
  cache.begin_step(500, std::nullopt);
  // The image tokens change: a reused cross branch still gives step 0's output.
  Tensor other = c.image->clone();
  for (int64_t i = 0; i < other.numel(); ++i) other[i] = -other[i];
  c.args.image = &other;
  CHECK(testing::max_rel(model->forward(c.args), first) == 0.0);
  for (pab::Kind k : {pab::Kind::kSpatial, pab::Kind::kCross, pab::Kind::kMlp}) {
    CAPTURE(pab::kind_name(k));
    CHECK(cache.stats(k).computed == 2);
    CHECK(cache.stats(k).reused == 2);
  }
}

TEST_CASE("wan i2v step caches: first-block (I2V) and TeaCache (TI2V's per-token time embedding) skip a repeated step, a unit computed alone equals its forward") {
  for (const std::string variant : {"i2v", "ti2v"}) {
    CAPTURE(variant);
    const auto model = load_variant(variant);
    Case c(variant);
    // A batch of two for ti2v (its fixture has one sample): the sample twice.
    Tensor latents2, text2;
    std::vector<float> token2;
    if (variant == "ti2v") {
      latents2 = Tensor::empty({2, c.latents.dim(1), c.latents.dim(2), c.latents.dim(3), c.latents.dim(4)});
      text2 = Tensor::empty({2, c.text.dim(1), c.text.dim(2)});
      for (int64_t b = 0; b < 2; ++b) {
        std::copy(c.latents.data(), c.latents.data() + c.latents.numel(), latents2.data() + b * c.latents.numel());
        std::copy(c.text.data(), c.text.data() + c.text.numel(), text2.data() + b * c.text.numel());
      }
      c.args.latents = &latents2;
      c.args.text = &text2;
      c.args.timesteps = {c.args.timesteps[0], c.args.timesteps[0]};
      token2 = c.args.token_timesteps;
      token2.insert(token2.end(), c.args.token_timesteps.begin(), c.args.token_timesteps.end());
      c.args.token_timesteps = token2;
    }
    pab::StepCacheSettings settings;
    settings.kind = variant == "i2v" ? CacheKind::kFirstBlock : CacheKind::kTeaCache;
    settings.threshold = 0.05;
    if (variant == "ti2v") settings.coefficients = {1.0, 0.0};  // the identity rescale
    pab::StepCache cache(settings);
    cache.begin_batch(2, {false}, /*halves_apart=*/true, 4);  // step 2 is not the last (always computed)
    c.args.step_cache = &cache;
    cache.begin_step(0, 500);
    const Tensor first = model->forward(c.args);
    cache.begin_step(1, 500);  // the same inputs: both units skip
    const Tensor second = model->forward(c.args);
    CHECK(testing::rel_l2(second, first) < 1e-6);
    CHECK(cache.stats().steps_skipped == 1);
    // Sample 1's input changes a lot (first-block: its latents; TeaCache,
    // whose signal is the time embedding: its noisy tokens' timestep): it
    // computes alone (the subset of the samples: its image tokens, its
    // per-token modulation), sample 0 skips.
    Tensor moved = c.args.latents->clone();
    if (variant == "i2v") {
      const int64_t per = moved.numel() / 2;
      for (int64_t i = per; i < moved.numel(); ++i) moved[i] = 3.0f * moved[i] + 1.0f;
      c.args.latents = &moved;
    } else {
      const size_t per = c.args.token_timesteps.size() / 2;
      for (size_t i = per; i < 2 * per; ++i)
        if (c.args.token_timesteps[i] > 0) c.args.token_timesteps[i] = 300.0f;
    }
    cache.begin_step(2, 500);
    const Tensor third = model->forward(c.args);
    c.args.step_cache = nullptr;
    const Tensor fresh = model->forward(c.args);
    const int64_t out_per = fresh.numel() / 2;
    Tensor fresh1 = Tensor::empty({out_per}), third1 = Tensor::empty({out_per});
    std::copy(fresh.data() + out_per, fresh.data() + 2 * out_per, fresh1.data());
    std::copy(third.data() + out_per, third.data() + 2 * out_per, third1.data());
    CHECK(testing::rel_l2(third1, fresh1) < 1e-6);
    const auto& d = cache.stats().decisions;
    REQUIRE(d.size() >= 2);
    CHECK_FALSE(d[d.size() - 2].computed);  // sample 0 at step 2
    CHECK(d.back().computed);               // sample 1
  }
}

TEST_CASE("wan i2v spec: the published Wan 2.2 TI2V-5B config parses") {
  const std::string root = std::string(DITGEN_SOURCE_DIR) + "/configs/models/";
  const auto ti2v = transformer_spec(io::read_json_file(root + "Wan2.2-TI2V-5B-Diffusers/transformer/config.json"), "c");
  CHECK(ti2v->in_channels() == 48);
  CHECK(ti2v->num_layers() == 30);
}

TEST_CASE("wan i2v spec: the workload's weights are every stored tensor, its cross-attention attends 257 image tokens (FLF2V 514), plan's FLOPs count them") {
  for (const std::string variant : {"i2v", "flf2v"}) {
    CAPTURE(variant);
    const auto spec = transformer_spec(config_json(variant), "c");
    parallel::Workload w = spec->workload({36, 2, 6, 10});
    w.set_text_tokens(512);
    REQUIRE(w.attention.size() == 2);
    const int64_t image_tokens = variant == "i2v" ? 257 : 514;
    CHECK(w.attention[1].added_tokens == image_tokens);
    CHECK(w.attention[1].tokens == 512);
    const io::WeightStore store = io::WeightStore::open_dir(transformer_dir(variant));
    double stored = 0;
    for (const std::string& name : store.names()) stored += static_cast<double>(shape_numel(store.info(name).shape));
    CHECK(w.layers * (w.split_per_layer + w.whole_per_layer) + w.whole_once == stored);
    // The image tokens' k and v projections (2 b M D 2 D) and their attention (4 rows M D), per layer.
    const parallel::Layout one{1, 1, 1, parallel::SpMode::kUlysses};
    const parallel::PlanRow row = parallel::plan_layout(one, w, 2, false);
    parallel::Workload text_only = w;
    text_only.attention[1].added_tokens = 0;
    const double d = static_cast<double>(w.hidden()), m = static_cast<double>(image_tokens), rows = 2.0 * 30;
    const double expected = static_cast<double>(w.layers) * (2 * 2 * m * d * 2 * d + 4 * rows * m * d);
    CHECK(parallel::step_cost(row, w).flops - parallel::step_cost(row, text_only).flops == doctest::Approx(expected));
  }
}
