// End-to-end parity with diffusers' CogVideoXPipeline on the committed tiny
// fixture (tests/fixtures/cogvideox_tiny, made by
// scripts/fixtures/make_cogvideox_fixtures.py): from the fixture's noise,
// two prompts as written (the second truncated to 16 tokens), the default
// empty negative prompt, 17 frames (5 latent frames, decoded in chunks of 3
// and 2) of 32 x 48, 4 steps of CogVideoX's DDIM, guidance 6: the final
// latents and the decoded frames, each output as diffusers makes it alone
// whatever ditgen's batch; the pipeline's defaults and the requests the
// model cannot make.
#include <doctest/doctest.h>

#include <string>

#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include "pipeline/pipeline_checks.h"
#include "pipeline/text_fixture_requests.h"
#include "pipeline/text_pipeline.h"
#include "util/error.h"

using namespace ditgen;
using testing::check_close;
using testing::fixture_tensor;

TEST_CASE("CogVideoX pipeline latents and frames match diffusers: batch sizes 2 and 1") {
  const auto pipe = testing::open_fixture_pipeline("cogvideox_tiny");
  const Tensor latents_ref = fixture_tensor("cogvideox_tiny", "expected.safetensors", "latents");  // (B, C, F, h, w)
  const Tensor frames_ref = fixture_tensor("cogvideox_tiny", "expected.safetensors", "frames");    // (B, F, 3, H, W)
  // A reference that checks the values: the fixture's VAE has its last layer
  // scaled (the tiny random transformer's latents have std ~56), so its
  // frames are mostly inside (0, 1), not clamped to exact 0s and 1s (they
  // were 97% so before: then a 1e-3 check tested 3% of the values).
  int64_t inside = 0;
  for (int64_t i = 0; i < frames_ref.numel(); ++i) inside += frames_ref[i] > 0.0f && frames_ref[i] < 1.0f ? 1 : 0;
  MESSAGE("frames reference: " << inside << " of " << frames_ref.numel() << " values inside (0, 1)");
  REQUIRE(inside >= frames_ref.numel() * 9 / 10);
  for (const int batch : {2, 1}) {
    CAPTURE(batch);
    const pipeline::Result r = pipe->generate(testing::fixture_request(*pipe, testing::cogvideox_fixture_config(batch), "cogvideox_tiny"));
    CHECK(r.scheduler == sched::Sampler::kDdim);
    REQUIRE(r.latents.shape() == Shape{2, 4, 5, 4, 6});
    check_close(r.latents, latents_ref, "latents (batch " + std::to_string(batch) + ")", 1e-4);
    REQUIRE(r.frames.shape() == Shape{2, 17, 3, 32, 48});
    check_close(r.frames, frames_ref, "frames (batch " + std::to_string(batch) + ")", 1e-4);
  }
}

TEST_CASE("CogVideoX pipeline: defaults, and a request the model cannot make is a ConfigError naming the field") {
  const auto pipe = pipeline::Pipeline::open(testing::fixture_dir("cogvideox_tiny"));
  GenerateConfig g = testing::cogvideox_fixture_config(2);
  g.frames = 13;  // 4 latent frames: the VAE's pairs after an odd first chunk need 1 + 8k
  CHECK(testing::prepare_error(*pipe, g).find("run.json: generate.frames: 13 frames") != std::string::npos);
  CHECK(testing::prepare_error(*pipe, g).find("9 or 17") != std::string::npos);
  g = testing::cogvideox_fixture_config(2);
  g.max_sequence_length = 20;  // the sin-cos table has 16 text rows
  CHECK(testing::prepare_error(*pipe, g).find("run.json: generate.max_sequence_length: 20") != std::string::npos);
  CHECK(testing::prepare_error(*pipe, g).find("takes 16 text rows (") != std::string::npos);
  CHECK(testing::prepare_error(*pipe, g).find("transformer/config.json: max_text_seq_length)") != std::string::npos);
  g = testing::cogvideox_fixture_config(2);
  g.height = 40;
  CHECK(testing::prepare_error(*pipe, g).find("run.json: generate.height/width: 40x48") != std::string::npos);
  g = testing::cogvideox_fixture_config(2);
  g.scheduler = sched::Sampler::kUnipc;
  CHECK(testing::prepare_error(*pipe, g).find("use ddim or dpmpp_2m") != std::string::npos);
  // Unset: the transformer's sample size and frames (32 x 48, 17), 16 tokens.
  g = testing::cogvideox_fixture_config(2);
  g.frames = g.height = g.width = 0;
  g.max_sequence_length = 0;
  const pipeline::Request req = pipe->prepare(g, "run.json");
  CHECK(req.latent_shape == Shape{4, 5, 4, 6});
  CHECK(req.max_sequence_length == 16);
}
