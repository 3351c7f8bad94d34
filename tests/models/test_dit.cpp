// DiT forward against diffusers' DiTTransformer2DModel on the committed
// fixtures (float32 weights; bf16 sharded weights upcast by both sides: here
// converted once at load), and in bfloat16 compute against the same
// float32 reference.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fixture.h"
#include "io/model_dir.h"
#include "models/dit.h"
#include "ops/cpu/cpu_ops.h"
#include "../ops/test_helpers.h"
#include "util/error.h"
#include "mapping.h"

using namespace ditgen;

// The forward on the fixture's input against diffusers' float32 output:
// within 1e-5 in float32; in bfloat16 (GEMMs on bf16 weights and rounded
// inputs, float32 sums) within 2e-2, and visibly not the float32 result.
static void check_forward(const std::string& name, DType dtype = DType::kF32) {
  auto dir = io::ModelDir::open(testing::fixture_dir(name));
  auto cfg = models::DitConfig::from_json(dir.part_config("transformer"), dir.part_config_path("transformer"));
  auto dit = models::DitTransformer::load(io::WeightStore::open_dir(dir.part_dir("transformer")), cfg, {},
                                          models::Placement(Device::kCPU, dtype));
  Tensor x = testing::fixture_tensor(name, "expected.safetensors", "forward_input");
  Tensor t = testing::fixture_tensor(name, "expected.safetensors", "forward_timestep");
  Tensor l = testing::fixture_tensor(name, "expected.safetensors", "forward_labels");
  Tensor ref = testing::fixture_tensor(name, "expected.safetensors", "forward_output");
  std::vector<float> ts(t.data(), t.data() + t.numel());
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < l.numel(); ++i) labels.push_back(static_cast<int64_t>(l[i]));
  Tensor y = dit.forward(x, ts, labels);
  REQUIRE(y.shape() == ref.shape());
  const double err = testing::rel_l2(y, ref);
  MESSAGE(name << " " << std::string(dtype_name(dtype)) << ": forward relative L2 error " << err);
  if (dtype == DType::kF32) {
    CHECK(err < 1e-5);
    CHECK(testing::max_rel(y, ref) < 1e-4);
  } else {
    CHECK(err < 2e-2);
    CHECK(err > 1e-5);  // bfloat16 arithmetic really ran
  }
}

TEST_CASE("DiT forward matches diffusers: odd 5x5 grid, 12 heads, learned sigma") { check_forward("dit_odd"); }
TEST_CASE("DiT forward matches diffusers: sharded bf16 weights, no learned sigma") {
  check_forward("dit_small_bf16");
}
TEST_CASE("DiT forward in bfloat16 stays near diffusers' float32: both fixtures") {
  check_forward("dit_odd", DType::kBF16);
  check_forward("dit_small_bf16", DType::kBF16);
}

using testing::points_into_mapping_of;

TEST_CASE("DiT on the CPU in bfloat16 keeps bf16 GEMM weights as stored (mmapped, or packed), the rest float32") {
  auto dir = io::ModelDir::open(testing::fixture_dir("dit_small_bf16"));
  auto cfg = models::DitConfig::from_json(dir.part_config("transformer"), dir.part_config_path("transformer"));
  const auto store = io::WeightStore::open_dir(dir.part_dir("transformer"));
  const std::string q = "transformer_blocks.0.attn1.to_q.weight", ff2 = "transformer_blocks.0.ff.net.2.weight";
  {
    // Without packing: borrowed from the mapping, zero copy.
    const models::Placement plain(Device::kCPU, DType::kBF16, /*pack=*/false);
    const auto dit = models::DitTransformer::load(store, cfg, {}, plain);
    const models::DitBlock& b = dit.block(0);
    const models::nn::Attention& attn = b.body.self_attention();
    const models::nn::FeedForward& ff = b.body.feed_forward();
    for (const Tensor* w : {&attn.to_q().weight, &b.modulation.chunk(3).weight, &ff.proj_in().weight,
                            &ff.proj_out().weight, &attn.to_out().weight, &b.timestep.mlp.linear_2.weight}) {
      CHECK(w->dtype() == DType::kBF16);  // never widened on load
      CHECK(w->device() == Device::kCPU);
      CHECK(w->layout() == Layout::kRowMajor);
    }
    CHECK(points_into_mapping_of(attn.to_q().weight.raw(), store.file_of(q)));  // borrowed: zero copy
    CHECK(attn.to_q().weight.raw() == store.load(q).raw());
    CHECK(points_into_mapping_of(ff.proj_out().weight.raw(), store.file_of(ff2)));
    // Biases and the class table (read by gather_rows) are converted once to float32.
    CHECK(attn.to_q().bias.dtype() == DType::kF32);
    CHECK(b.modulation.chunk(0).bias.dtype() == DType::kF32);
    CHECK(b.label.table.dtype() == DType::kF32);
  }
  {
    // As the pipeline loads a transformer: packed where this CPU packs the shape.
    const auto dit = models::DitTransformer::load(store, cfg, {}, models::Placement(Device::kCPU, DType::kBF16));
    const Tensor& w = dit.block(0).body.self_attention().to_q().weight;
    CHECK(w.dtype() == DType::kBF16);
    if (ops::cpu::onednn_packs_weight(w.dim(0), w.dim(1))) {
      CHECK(w.layout() == Layout::kGemmPacked);
      CHECK_FALSE(points_into_mapping_of(w.raw(), store.file_of(q)));
    } else {
      CHECK(w.layout() == Layout::kRowMajor);
      CHECK(w.raw() == store.load(q).raw());
    }
  }
  // Under float32 compute the same weights are converted once, at load.
  const auto dit = models::DitTransformer::load(store, cfg);
  const Tensor& q_w = dit.block(0).body.self_attention().to_q().weight;
  CHECK(q_w.dtype() == DType::kF32);
  CHECK_FALSE(points_into_mapping_of(q_w.raw(), store.file_of(q)));
}

TEST_CASE("DiT config errors name the file and key") {
  nlohmann::json cfg = io::read_json_file(testing::fixture_dir("dit_odd") + "/transformer/config.json");
  cfg["num_layers"] = "two";
  CHECK_THROWS_WITH_AS(models::DitConfig::from_json(cfg, "x/config.json"),
                       doctest::Contains("x/config.json: num_layers"), ModelError);
  cfg = io::read_json_file(testing::fixture_dir("dit_odd") + "/transformer/config.json");
  cfg["_class_name"] = "UNet2DConditionModel";
  CHECK_THROWS_WITH_AS(models::DitConfig::from_json(cfg, "x/config.json"), doctest::Contains("_class_name"),
                       ModelError);
  cfg = io::read_json_file(testing::fixture_dir("dit_odd") + "/transformer/config.json");
  cfg["_class_name"] = "Transformer2DModel";  // legacy name of the published checkpoints
  CHECK(models::DitConfig::from_json(cfg, "x/config.json").num_heads == 12);
}

TEST_CASE("DiT weights are validated against config.json before loading") {
  auto dir = io::ModelDir::open(testing::fixture_dir("dit_odd"));
  auto cfg = models::DitConfig::from_json(dir.part_config("transformer"), dir.part_config_path("transformer"));
  auto weights = io::WeightStore::open_dir(dir.part_dir("transformer"));
  cfg.num_layers = 3;  // the file holds 2 blocks
  CHECK_THROWS_WITH_AS(models::DitTransformer::load(weights, cfg),
                       doctest::Contains("transformer_blocks.2."), ModelError);
  cfg.num_layers = 2;
  cfg.head_dim = 16;  // wrong shapes everywhere
  CHECK_THROWS_WITH_AS(models::DitTransformer::load(weights, cfg), doctest::Contains("shape"), ModelError);
}
