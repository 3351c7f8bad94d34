// End-to-end parity of the text-conditional pipelines on the CUDA backend:
// PixArt (image) and Latte (video), T5 text encoder, transformer and VAE all
// placed on the GPU, against diffusers' PixArtAlphaPipeline / LattePipeline
// on the committed tiny fixtures (tests/fixtures/pixart_tiny, latte_tiny:
// the same references, inputs and CPU bounds as tests/pipeline/
// test_text_pipeline.cpp and test_latte_pipeline.cpp), and the CPU pipeline
// itself for what has no diffusers reference (Latte with PAB).
// Placement{kCUDA, kF32} must match at the CPU tests' 1e-4 (float32 cuBLAS
// without TF32); bfloat16 is reported and held to test_model_parity.cpp's
// loose bounds (relative L2 5e-2 on latents, 2e-2 on decoded pixels).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "models/fixture.h"
#include "models/placement.h"
#include "ops/test_helpers.h"
#include "pipeline/pipeline_checks.h"
#include "pipeline/text_fixture_requests.h"
#include "pipeline/text_pipeline.h"

using namespace ditgen;
using testing::check_close;
using testing::fixture_tensor;
using testing::half_image_bound;
using testing::half_latent_bound;
using testing::latte_fixture_request;
using testing::open_fixture_pipeline;
using testing::pixart_fixture_request;
using testing::reported_rel_l2;


TEST_CASE("model parity: PixArt on CUDA float32 matches diffusers (T5 on the GPU, DPM-Solver++ and DDIM)") {
  const auto pipe = open_fixture_pipeline("pixart_tiny", {Device::kCUDA, DType::kF32});
  for (const int batch : {2, 1}) {
    CAPTURE(batch);
    const pipeline::Result r = pipe->generate(pixart_fixture_request(*pipe, sched::Sampler::kDpmpp2m, batch));
    check_close(r.latents, fixture_tensor("pixart_tiny", "expected.safetensors", "latents_dpm"),
                "pixart cuda float32: latents_dpm", 1e-4);
    check_close(testing::images_of(r.frames), fixture_tensor("pixart_tiny", "expected.safetensors", "images_dpm"),
                "pixart cuda float32: images_dpm", 1e-4);
    check_close(pipe->sample(pixart_fixture_request(*pipe, sched::Sampler::kDdim, batch)),
                fixture_tensor("pixart_tiny", "expected.safetensors", "latents_ddim"), "pixart cuda float32: latents_ddim",
                1e-4);
  }
}

TEST_CASE("model parity: PixArt on CUDA bfloat16 stays near diffusers' float32") {
  const auto pipe = open_fixture_pipeline("pixart_tiny", {Device::kCUDA, DType::kBF16});
  const pipeline::Result r = pipe->generate(pixart_fixture_request(*pipe, sched::Sampler::kDpmpp2m, 2));
  CHECK(reported_rel_l2(r.latents, fixture_tensor("pixart_tiny", "expected.safetensors", "latents_dpm"),
                    "pixart cuda bfloat16: latents_dpm") < half_latent_bound(DType::kBF16));
  CHECK(reported_rel_l2(testing::images_of(r.frames), fixture_tensor("pixart_tiny", "expected.safetensors", "images_dpm"),
                    "pixart cuda bfloat16: images_dpm") < half_image_bound(DType::kBF16));
}

TEST_CASE("model parity: Latte on CUDA float32 matches diffusers (T5 on the GPU, DDIM, 3 frames)") {
  const auto pipe = open_fixture_pipeline("latte_tiny", {Device::kCUDA, DType::kF32});
  for (const int batch : {2, 1}) {
    CAPTURE(batch);
    const pipeline::Result r = pipe->generate(latte_fixture_request(*pipe, batch));
    check_close(r.latents, fixture_tensor("latte_tiny", "expected.safetensors", "latents_ddim"),
                "latte cuda float32: latents_ddim", 1e-4);
    check_close(r.frames, fixture_tensor("latte_tiny", "expected.safetensors", "frames_ddim"),
                "latte cuda float32: frames_ddim", 1e-4);
  }
}

TEST_CASE("model parity: Latte on CUDA bfloat16 stays near diffusers' float32") {
  const auto pipe = open_fixture_pipeline("latte_tiny", {Device::kCUDA, DType::kBF16});
  const pipeline::Result r = pipe->generate(latte_fixture_request(*pipe, 2));
  CHECK(reported_rel_l2(r.latents, fixture_tensor("latte_tiny", "expected.safetensors", "latents_ddim"),
                    "latte cuda bfloat16: latents_ddim") < half_latent_bound(DType::kBF16));
  CHECK(reported_rel_l2(r.frames, fixture_tensor("latte_tiny", "expected.safetensors", "frames_ddim"),
                    "latte cuda bfloat16: frames_ddim") < half_image_bound(DType::kBF16));
}

TEST_CASE("model parity: Latte with PAB on CUDA float32 equals the CPU pipeline with the same schedule") {
  const auto cpu = open_fixture_pipeline("latte_tiny");
  const auto gpu = open_fixture_pipeline("latte_tiny", {Device::kCUDA, DType::kF32});
  // test_latte_pipeline.cpp's pyramid: 20 DDIM steps, window (100, 800),
  // spatial range 2 < temporal 3 < cross 4, MLP of layer 0 range 2.
  pipeline::Request req = latte_fixture_request(*cpu, 2, 20);
  req.pab[pab::Kind::kSpatial] = {true, 2, 100, 800, {}};
  req.pab[pab::Kind::kTemporal] = {true, 3, 100, 800, {}};
  req.pab[pab::Kind::kCross] = {true, 4, 100, 800, {}};
  req.pab[pab::Kind::kMlp] = {true, 2, 100, 800, {0}};
  pipeline::PabSummary on_cpu, on_gpu;
  const Tensor want = cpu->sample(req, {}, &on_cpu);
  const Tensor got = gpu->sample(req, {}, &on_gpu);
  for (int k = 0; k < 4; ++k) {
    CAPTURE(k);
    CHECK(on_gpu.kinds[k].reused == on_cpu.kinds[k].reused);
    CHECK(on_gpu.kinds[k].computed == on_cpu.kinds[k].computed);
  }
  CHECK(on_gpu.kinds[static_cast<int>(pab::Kind::kSpatial)].reused == 12);
  check_close(got, want, "latte PAB cuda float32 vs cpu: latents", 1e-4);
}
