// End-to-end parity with diffusers' DiTPipeline on the committed fixtures:
// from the same initial noise, the final latents after DDIM and DPM-Solver++
// 2M sampling (with and without CFG) and the decoded images.
#include <doctest/doctest.h>

#include "models/autoencoder_kl.h"

#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include <cstring>

#include "config/device_choice.h"
#include "pipeline/class_pipeline.h"
#include "pipeline/pipeline_checks.h"
#include "sched/noise.h"
#include "util/error.h"

using namespace ditgen;
using testing::fixture_tensor;

namespace {

using testing::check_close;
using testing::kBf16;
using testing::kOdd;
using testing::run_fixture;
using testing::images_of;
using Case = testing::FixtureCase;


}  // namespace

TEST_CASE("DiT pipeline latents match diffusers (DDIM, DPM-Solver++ 2M, no CFG)") {
  for (const Case& c : {kOdd, kBf16}) {
    const auto pipe = pipeline::ClassPipeline::load(testing::fixture_dir(c.fixture));
    check_close(run_fixture(pipe, c, "ddim", c.guidance, 4), fixture_tensor(c.fixture, "expected.safetensors", "ddim_latents"),
                c.fixture + " ddim", 1e-4);
    check_close(run_fixture(pipe, c, "dpmpp_2m", c.guidance, 4),
                fixture_tensor(c.fixture, "expected.safetensors", "dpm_latents"), c.fixture + " dpmpp_2m", 1e-4);
  }
  const auto pipe = pipeline::ClassPipeline::load(testing::fixture_dir(kOdd.fixture));
  check_close(run_fixture(pipe, kOdd, "ddim", 1.0f, 4),
              fixture_tensor(kOdd.fixture, "expected.safetensors", "ddim_latents_nocfg"), "dit_odd ddim no CFG", 1e-4);
}

TEST_CASE("the model's own scheduler is the default, and batching does not change results") {
  const auto pipe = pipeline::ClassPipeline::load(testing::fixture_dir(kOdd.fixture));
  CHECK(pipe.sampler_of(pipeline::Request{}) == sched::Sampler::kDdim);
  const Tensor batched = run_fixture(pipe, kOdd, "", kOdd.guidance, 2);
  const Tensor single = run_fixture(pipe, kOdd, "", kOdd.guidance, 1);  // one output per forward
  CHECK(testing::rel_l2(single, batched) < 1e-6);
  check_close(batched, fixture_tensor(kOdd.fixture, "expected.safetensors", "ddim_latents"), "default scheduler",
              1e-4);
}

TEST_CASE("VAE decoding of the final latents matches diffusers' image") {
  for (const Case& c : {kOdd, kBf16}) {
    const auto pipe = pipeline::ClassPipeline::load(testing::fixture_dir(c.fixture));
    const Tensor images = images_of(pipe.decode(fixture_tensor(c.fixture, "expected.safetensors", "ddim_latents")));
    check_close(images, fixture_tensor(c.fixture, "expected.safetensors", "image"), c.fixture + " image", 1e-4);
  }
}

TEST_CASE("drawn noise: output i depends only on seed + i") {
  const auto pipe = pipeline::ClassPipeline::load(testing::fixture_dir(kOdd.fixture));
  pipeline::Request req;
  req.labels = {1, 7, 3};
  req.seed = 100;
  req.steps = 2;
  req.batch_size = 2;
  const Tensor all = pipe.sample(req);
  req.labels = {3};
  req.seed = 102;
  const Tensor third = pipe.sample(req);
  CHECK(testing::rel_l2(third, all.slice0(2, 3).clone()) < 1e-6);
}

TEST_CASE("class names resolve through id2label, with comma-separated synonyms") {
  const auto pipe = pipeline::ClassPipeline::load(testing::fixture_dir(kOdd.fixture));
  CHECK(pipe.label_id(std::string("scarlet ring"), "f") == 0);
  CHECK(pipe.label_id(std::string("pale heart"), "f") == 7);
  CHECK(pipe.label_id(int64_t{9}, "f") == 9);
  CHECK_THROWS_WITH_AS(pipe.label_id(std::string("purple cow"), "run.json: generate.class_labels[2]"),
                       doctest::Contains("run.json: generate.class_labels[2]: unknown class name 'purple cow'"),
                       ConfigError);
  CHECK_THROWS_AS(pipe.label_id(int64_t{10}, "f"), ConfigError);  // 10 is the null class, not a label
}

TEST_CASE("PAB: range 1 reproduces the output without PAB exactly, counts follow the rule") {
  const auto pipe = pipeline::ClassPipeline::load(testing::fixture_dir(kOdd.fixture));
  Case c = kOdd;
  c.steps = 20;  // DDIM leading: t = 950, 900, ..., 0
  pipeline::Request req;
  req.labels = c.labels;
  req.steps = c.steps;
  req.guidance_scale = c.guidance;
  req.init_noise = fixture_tensor(c.fixture, "noise.safetensors", "noise");
  const Tensor off = pipe.sample(req);

  req.pab[pab::Kind::kSpatial] = {true, 1, 100, 800, {}};
  pipeline::PabSummary summary;
  const Tensor range1 = pipe.sample(req, {}, &summary);
  CHECK(std::memcmp(off.data(), range1.data(), off.nbytes()) == 0);
  CHECK(summary.kinds[0].reused == 0);
  CHECK(summary.kinds[0].computed == 20 * 2);

  // spatial range 2 in (100, 800): steps 4..16 are inside; reused where
  // step % 2 != 0: 5, 7, 9, 11, 13, 15 -> 6 steps x 2 blocks. MLP of block 1,
  // range 3: steps 4..16 with step % 3 != 0 -> 9.
  req.pab[pab::Kind::kSpatial].range = 2;
  req.pab[pab::Kind::kMlp] = {true, 3, 100, 800, {1}};
  summary = {};
  const Tensor with_pab = pipe.sample(req, {}, &summary);
  CHECK(summary.kinds[0].reused == 12);
  CHECK(summary.kinds[0].computed == 28);
  CHECK(summary.kinds[3].reused == 9);
  CHECK(summary.kinds[3].computed == 11);
  CHECK(summary.cache_peak_bytes == 3 * 2 * 2 * 25 * 96 * 4);  // 3 outputs of (2 CFG x 2 images, 25 tokens, 96)
  const double change = testing::rel_l2(with_pab, off);
  MESSAGE("PAB changes the latents by relative L2 " << change);
  CHECK(change > 0);
  CHECK(change < 0.1);
}

TEST_CASE("a class name listed under several ids resolves to the last, as DiTPipeline's dict does") {
  const std::vector<std::pair<int, std::string>> id2label = {{134, "crane"}, {200, "tabby, tabby cat"},
                                                             {517, "crane"}};
  CHECK(pipeline::resolve_class_label(std::string("crane"), id2label, 1000, "f") == 517);
  CHECK(pipeline::resolve_class_label(std::string("tabby cat"), id2label, 1000, "f") == 200);
  CHECK(pipeline::resolve_class_label(int64_t{999}, id2label, 1000, "f") == 999);
}

TEST_CASE("the VAE placement follows model.vae_dtype, and float16 with force_upcast decodes in float32 as diffusers does") {
  models::AutoencoderKLConfig cfg;  // force_upcast defaults to true, as in diffusers
  models::AutoencoderKLSpec vae(cfg);
  const Device cuda = Device::kCUDA;
  CHECK(pipeline::vae_placement(cuda, DType::kF16, vae).dtype == DType::kF32);
  CHECK(pipeline::vae_placement(cuda, DType::kF16, vae).device == Device::kCUDA);
  CHECK(pipeline::vae_placement(cuda, DType::kBF16, vae).dtype == DType::kBF16);  // diffusers upcasts float16 only
  CHECK(pipeline::vae_placement(Device::kCPU, DType::kF32, vae).dtype == DType::kF32);
  CHECK(pipeline::vae_placement(Device::kCPU, DType::kBF16, vae).dtype == DType::kBF16);
  // model.vae_dtype as written to the decoder's dtype on each device.
  CHECK(choose_vae_dtype(DTypeChoice::kFloat32, cuda) == DType::kF32);
  CHECK(choose_vae_dtype(DTypeChoice::kBFloat16, Device::kCPU) == DType::kBF16);
  CHECK(choose_vae_dtype(DTypeChoice::kFloat16, Device::kCPU) == DType::kF32);  // no float16 arithmetic on CPUs
  CHECK(choose_vae_dtype(DTypeChoice::kFloat16, cuda) == DType::kF16);
  cfg.force_upcast = false;
  CHECK(pipeline::vae_placement(cuda, DType::kF16, models::AutoencoderKLSpec(cfg)).dtype == DType::kF16);
  // Read from vae/config.json: the fixture says true; absent means true.
  const auto dir = io::ModelDir::open(testing::fixture_dir("dit_odd"));
  CHECK(models::AutoencoderKLConfig::from_json(dir.part_config("vae"), "vae/config.json").force_upcast);
  CHECK_FALSE(models::AutoencoderKLConfig::from_json({{"_class_name", "AutoencoderKL"}, {"force_upcast", false}}, "c.json")
                  .force_upcast);
  CHECK(models::AutoencoderKLConfig::from_json({{"_class_name", "AutoencoderKL"}}, "c.json").force_upcast);
}
