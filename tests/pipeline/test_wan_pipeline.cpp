// End-to-end parity with diffusers' WanPipeline on the committed tiny
// fixtures (tests/fixtures/wan_tiny and wan22_tiny, made by
// scripts/fixtures/make_wan_fixtures.py): from the fixture's noise, two
// prompts (the second truncated to 16 tokens), a cleaned negative prompt,
// 9 frames of 48 x 80, 4 steps, guidance 5: the final latents and decoded
// frames with UniPC and with Euler, each output as diffusers makes it alone
// whatever ditgen's batch; prompt 0 at the call's default 512 tokens; Wan
// 2.2 A14B's two experts (the high-noise one for t >= 875, guidance 4, the
// low-noise one below, guidance_scale_2 3); and the request checks against
// the model (guidance_scale_2 on a one-expert model, frame counts, sizes,
// samplers of the other kind); the text encoder computes from its mapped
// file and releases it before the denoising loop starts.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include "mapping.h"
#include "pipeline/pipeline_checks.h"
#include "pipeline/text_fixture_requests.h"
#include "pipeline/text_pipeline.h"
#include "util/error.h"
#include "util/profile.h"

using namespace ditgen;
using testing::check_close;
using testing::fixture_tensor;

namespace {

Tensor first(const Tensor& t) { return t.slice0(0, 1).clone(); }

}  // namespace

namespace {

// What profile's sync hook saw: every timed op (profile::ScopedTimer, each
// of the T5 encoder's among them) calls it as it starts and ends, so it
// looks at this process's mappings from inside the encoder's forward.
std::string g_watched_file;
std::vector<uint64_t> g_mapped_at_ops;
void record_mapping() { g_mapped_at_ops.push_back(testing::mapped_bytes_of(g_watched_file)); }

}  // namespace

// The encoder computes from its mmapped file (float32 weights run in float32
// are borrowed, not copied) and unmaps it when conditioning returns: its
// file is seen mapped, whole, at every one of its ops, and not mapped after,
// nor at any denoising step. (An encoder that copied its weights and kept
// them would show no mapping while it runs.)
TEST_CASE("Wan pipeline: the text encoder's file is mapped while it encodes and released before denoising") {
  const auto pipe = testing::open_fixture_pipeline("wan_tiny");
  const std::string encoder = testing::fixture_dir("wan_tiny") + "/text_encoder/model.safetensors";
  const std::string transformer = testing::fixture_dir("wan_tiny") + "/transformer/diffusion_pytorch_model.safetensors";
  // float32 weights run in float32 stay mapped (zero copy): the transformer's are, from load_weights on.
  REQUIRE(testing::mapped_bytes_of(transformer) > 0);
  CHECK(testing::mapped_bytes_of(encoder) == 0);  // load_weights does not load the encoder
  // fixture_request runs the encoder in float32: its weights borrowed from the mapping.
  const pipeline::Request req = testing::fixture_request(*pipe, testing::wan_fixture_config(sched::Sampler::kUnipc, 2), "wan_tiny");

  g_watched_file = encoder;
  g_mapped_at_ops.clear();
  profile::reset();
  profile::enable(true);
  profile::set_sync(&record_mapping);
  const pipeline::Conditions cond = pipe->condition(req);
  profile::set_sync(nullptr);
  profile::enable(false);
  // The timers: condition()'s own ("text_encoder": its first look is before
  // the encoder is loaded, its last after it is released) around the
  // encoder's ops ("t5.*"), two looks per op.
  long encoder_ops = 0, stage = 0, other = 0;
  for (const auto& [name, total] : profile::totals())
    (name.rfind("t5.", 0) == 0 ? encoder_ops : name == "text_encoder" ? stage : other) += total.second;
  profile::reset();
  CHECK(stage == 1);
  CHECK(other == 0);
  REQUIRE(encoder_ops > 0);
  REQUIRE(g_mapped_at_ops.size() == 2 * static_cast<size_t>(encoder_ops + 1));
  CHECK(g_mapped_at_ops.front() == 0);
  CHECK(g_mapped_at_ops.back() == 0);
  const uint64_t file_size = std::filesystem::file_size(encoder);
  for (size_t i = 1; i + 1 < g_mapped_at_ops.size(); ++i) {
    CAPTURE(i);
    CHECK(g_mapped_at_ops[i] >= file_size);  // whole, while it computes
  }

  CHECK(testing::mapped_bytes_of(encoder) == 0);
  int steps_seen = 0;
  pipe->denoise(req, cond, [&](int, int, int, int) {
    ++steps_seen;
    CHECK(testing::mapped_bytes_of(encoder) == 0);
  });
  CHECK(steps_seen == 4);
}

TEST_CASE("Wan pipeline latents and frames match diffusers: UniPC, batch sizes 2 and 1") {
  const auto pipe = testing::open_fixture_pipeline("wan_tiny");
  const Tensor latents_ref = fixture_tensor("wan_tiny", "expected.safetensors", "latents_unipc");
  const Tensor frames_ref = fixture_tensor("wan_tiny", "expected.safetensors", "frames_unipc");  // (B, F, 3, H, W)
  for (const int batch : {2, 1}) {
    CAPTURE(batch);
    const pipeline::Result r = pipe->generate(testing::fixture_request(*pipe, testing::wan_fixture_config(sched::Sampler::kUnipc, batch), "wan_tiny"));
    CHECK(r.scheduler == sched::Sampler::kUnipc);
    REQUIRE(r.latents.shape() == Shape{2, 6, 3, 6, 10});
    check_close(r.latents, latents_ref, "latents_unipc (batch " + std::to_string(batch) + ")", 1e-4);
    REQUIRE(r.frames.shape() == Shape{2, 9, 3, 48, 80});
    check_close(r.frames, frames_ref, "frames_unipc (batch " + std::to_string(batch) + ")", 1e-4);
  }
}

TEST_CASE("Wan pipeline with Euler (flow_shift carried over as shift) matches diffusers") {
  const auto pipe = testing::open_fixture_pipeline("wan_tiny");
  const pipeline::Result r = pipe->generate(testing::fixture_request(*pipe, testing::wan_fixture_config(sched::Sampler::kEuler, 2), "wan_tiny"));
  check_close(r.latents, fixture_tensor("wan_tiny", "expected.safetensors", "latents_euler"), "latents_euler", 1e-4);
  check_close(first(r.frames), fixture_tensor("wan_tiny", "expected.safetensors", "frames_euler"), "frames_euler",
              1e-4);
}

TEST_CASE("Wan pipeline at the call's default 512 tokens: the zero rows are keys, as in diffusers") {
  const auto pipe = testing::open_fixture_pipeline("wan_tiny");
  GenerateConfig g = testing::wan_fixture_config(sched::Sampler::kUnipc, 1);
  g.prompts.resize(1);
  g.max_sequence_length = 0;
  pipeline::Request req = testing::fixture_request(*pipe, g, "wan_tiny");
  CHECK(req.max_sequence_length == 512);
  req.init_noise = first(*req.init_noise);
  const Tensor latents = pipe->sample(req);
  check_close(latents, fixture_tensor("wan_tiny", "expected.safetensors", "latents_unipc_512_0"),
              "latents_unipc_512_0", 1e-4);
}

TEST_CASE("Wan 2.2 A14B: the high-noise expert above the boundary, transformer_2 with guidance_scale_2 below") {
  const auto pipe = testing::open_fixture_pipeline("wan22_tiny");
  for (const auto scheduler : {sched::Sampler::kUnipc, sched::Sampler::kEuler}) {
    const std::string name = sched::name_of(scheduler);
    CAPTURE(name);
    GenerateConfig g = testing::wan_fixture_config(scheduler, 2);
    g.guidance_scale = 4.0;
    g.guidance_scale_2 = 3.0;
    const pipeline::Request req = testing::fixture_request(*pipe, g, "wan22_tiny");
    CHECK(req.guidance_scale_2 == 3.0f);
    const pipeline::Result r = pipe->generate(req);
    check_close(r.latents, fixture_tensor("wan22_tiny", "expected.safetensors", "latents_" + name),
                "A14B latents_" + name, 1e-4);
    if (scheduler == sched::Sampler::kUnipc)
      check_close(first(r.frames), fixture_tensor("wan22_tiny", "expected.safetensors", "frames_unipc"),
                  "A14B frames_unipc", 1e-4);
  }
  // guidance_scale_2 defaults to guidance_scale (diffusers: 4.0 instead of 3.0 moves the latents).
  GenerateConfig g = testing::wan_fixture_config(sched::Sampler::kUnipc, 2);
  g.guidance_scale = 4.0;
  const pipeline::Request req = testing::fixture_request(*pipe, g, "wan22_tiny");
  CHECK(req.guidance_scale_2 == 4.0f);
  CHECK(testing::rel_l2(pipe->sample(req), fixture_tensor("wan22_tiny", "expected.safetensors", "latents_unipc")) >
        1e-2);
}

TEST_CASE("Wan pipeline: a request the model cannot make is a ConfigError naming the field") {
  const auto pipe = pipeline::Pipeline::open(testing::fixture_dir("wan_tiny"));
  GenerateConfig g = testing::wan_fixture_config(sched::Sampler::kUnipc, 2);
  g.guidance_scale_2 = 3.0;  // one transformer (boundary_ratio null): diffusers raises
  CHECK(testing::prepare_error(*pipe, g).find("run.json: generate.guidance_scale_2: this model has one transformer") !=
        std::string::npos);
  g = testing::wan_fixture_config(sched::Sampler::kUnipc, 2);
  g.frames = 10;
  CHECK(testing::prepare_error(*pipe, g).find("run.json: generate.frames: 10 frames") != std::string::npos);
  CHECK(testing::prepare_error(*pipe, g).find("9 or 13") != std::string::npos);
  g = testing::wan_fixture_config(sched::Sampler::kUnipc, 2);
  g.height = 40;
  CHECK(testing::prepare_error(*pipe, g).find("run.json: generate.height/width: 40x80") != std::string::npos);
  g = testing::wan_fixture_config(sched::Sampler::kDdim, 2);
  CHECK(testing::prepare_error(*pipe, g).find("use unipc or euler") != std::string::npos);
  // Defaults: WanPipeline's 81 frames of 480 x 832.
  g = testing::wan_fixture_config(sched::Sampler::kUnipc, 2);
  g.frames = g.height = g.width = 0;
  CHECK(pipe->prepare(g, "run.json").latent_shape == Shape{6, 21, 60, 104});
}
