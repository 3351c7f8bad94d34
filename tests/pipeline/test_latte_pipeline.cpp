// End-to-end parity with diffusers' LattePipeline on the committed tiny
// fixture (tests/fixtures/latte_tiny, scripts/fixtures/make_text_fixtures.py): the
// text stage's prompt and negative embeddings after mask_feature (both cut
// to the prompt's k tokens), then from the same initial noise the final
// latents after DDIM (3 steps, guidance 7.5, 3 frames of 80x80) and the
// decoded frames, each output as diffusers makes it alone (batch of one)
// whatever ditgen's batch; the video decode stage's chunks; the config
// rules of a video model.
#include <doctest/doctest.h>

#include <cstring>

#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include "pipeline/pipeline_checks.h"
#include "pipeline/text_fixture_requests.h"
#include "pipeline/text_pipeline.h"
#include "util/error.h"

using namespace ditgen;
using testing::check_close;
using testing::fixture_tensor;
using testing::latte_fixture_config;
using testing::latte_fixture_request;

namespace {

const std::vector<int32_t> kTokens = {19, 3};  // each prompt's pieces + EOS (case.json)

// The first k rows of sample i of an (N, L, D) tensor, (k, D).
Tensor rows(const Tensor& t, int64_t i, int64_t k) {
  return t.slice0(i, i + 1).reshape({t.dim(1), t.dim(2)}).slice0(0, k).clone();
}

}  // namespace

TEST_CASE("Latte pipeline: the text stage gives diffusers' embeddings after mask_feature (k rows of each)") {
  const auto pipe = testing::open_fixture_pipeline("latte_tiny");
  const pipeline::Request req = latte_fixture_request(*pipe, 2);
  CHECK(req.max_sequence_length == 120);
  const pipeline::Conditions c = pipe->condition(req);
  REQUIRE(c.prompt_embeds.shape() == Shape{2, 120, 40});
  REQUIRE(c.negative_embeds.shape() == Shape{1, 120, 40});
  for (int64_t i = 0; i < 2; ++i) {
    const std::string n = std::to_string(i);
    const int32_t k = kTokens[static_cast<size_t>(i)];
    CAPTURE(i);
    // diffusers cuts both to the prompt's k rows; ditgen keeps the 120 rows
    // and the cross-attention sees the first k of each.
    CHECK(c.prompt_lengths[static_cast<size_t>(i)] == k);
    CHECK(c.negative_lengths[static_cast<size_t>(i)] == k);
    check_close(rows(c.prompt_embeds, i, k), fixture_tensor("latte_tiny", "expected.safetensors", "prompt_embeds_" + n),
                "prompt_embeds_" + n, 1e-5);
    check_close(rows(c.negative_embeds, 0, k),
                fixture_tensor("latte_tiny", "expected.safetensors", "negative_embeds_" + n), "negative_embeds_" + n,
                1e-5);
  }
}

TEST_CASE("Latte pipeline latents and frames match diffusers (DDIM, 3 frames, batch sizes 2 and 1)") {
  const auto pipe = testing::open_fixture_pipeline("latte_tiny");
  const Tensor latents_ref = fixture_tensor("latte_tiny", "expected.safetensors", "latents_ddim");
  const Tensor frames_ref = fixture_tensor("latte_tiny", "expected.safetensors", "frames_ddim");  // (B, F, 3, H, W)
  for (const int batch : {2, 1}) {
    CAPTURE(batch);
    const pipeline::Result r = pipe->generate(latte_fixture_request(*pipe, batch));
    REQUIRE(r.latents.shape() == Shape{2, 4, 3, 10, 10});
    check_close(r.latents, latents_ref, "latents_ddim (batch " + std::to_string(batch) + ")", 1e-4);
    REQUIRE(r.frames.shape() == Shape{2, 3, 3, 80, 80});
    check_close(r.frames, frames_ref, "frames_ddim (batch " + std::to_string(batch) + ")", 1e-4);
  }
}

TEST_CASE("Latte decode: a video's frames are decoded independently, in chunks, whatever F") {
  const auto pipe = testing::open_fixture_pipeline("latte_tiny");
  const int64_t frames = pipe->vae().chunk_latent_frames() + 1;  // two chunks: 14 + 1
  const Tensor latents = testing::random_tensor({1, 4, frames, 10, 10}, 7, -2.0f, 2.0f);
  const Tensor video = pipe->decode(latents);
  REQUIRE(video.shape() == Shape{1, frames, 3, 80, 80});
  for (const int64_t f : {int64_t{0}, int64_t{13}, int64_t{14}}) {  // first, last of chunk 0, chunk 1
    CAPTURE(f);
    Tensor one = Tensor::empty({1, 4, 1, 10, 10});
    for (int64_t c = 0; c < 4; ++c)
      std::copy(latents.data() + (c * frames + f) * 100, latents.data() + (c * frames + f + 1) * 100,
                one.data() + c * 100);
    const Tensor alone = pipe->decode(one);
    const Tensor in_video = video.slice0(0, 1).reshape({frames, 3, 80, 80}).slice0(f, f + 1).clone();
    CHECK(testing::max_rel(alone.reshape({1, 3, 80, 80}), in_video) == 0.0);
  }
}

TEST_CASE("Latte pipeline: frames default to video_length, max_sequence_length is LattePipeline's 120") {
  const auto pipe = pipeline::Pipeline::open(testing::fixture_dir("latte_tiny"));
  GenerateConfig g = latte_fixture_config(2);
  g.frames = 0;
  g.height = g.width = 0;
  CHECK(pipe->prepare(g, "run.json").latent_shape == Shape{4, 3, 10, 10});
  g.frames = 1;  // a still image through the video model
  CHECK(pipe->prepare(g, "run.json").latent_shape == Shape{4, 1, 10, 10});
  g.frames = 7;  // diffusers rejects it; ditgen extends the temporal table
  CHECK(pipe->prepare(g, "run.json").latent_shape == Shape{4, 7, 10, 10});
  g.max_sequence_length = 120;
  CHECK(pipe->prepare(g, "run.json").max_sequence_length == 120);
  g.max_sequence_length = 16;
  CHECK_THROWS_WITH_AS(pipe->prepare(g, "run.json"),
                       doctest::Contains("run.json: generate.max_sequence_length: 16: a latte model's pipeline always "
                                         "tokenizes to 120 tokens"),
                       ConfigError);
  g.max_sequence_length = 0;
  g.height = 72;
  CHECK_THROWS_WITH_AS(pipe->prepare(g, "run.json"), doctest::Contains("run.json: generate.height/width: 72x80"),
                       ConfigError);
}

TEST_CASE("image models reject generate.frames (it is for video models)") {
  for (const std::string fixture : {"pixart_tiny", "dit_odd"}) {
    CAPTURE(fixture);
    const auto pipe = pipeline::Pipeline::open(testing::fixture_dir(fixture));
    GenerateConfig g;
    if (fixture == "dit_odd") g.class_labels = {1};
    else g.prompts = {"a cat"};
    g.frames = 4;
    CHECK_THROWS_WITH_AS(pipe->prepare(g, "run.json"), doctest::Contains("run.json: generate.frames: 4: a "),
                         ConfigError);
  }
}

TEST_CASE("Latte PAB: range 1 of every kind reproduces PAB off exactly, and each kind reuses by the rule") {
  const auto pipe = testing::open_fixture_pipeline("latte_tiny");
  // 20 DDIM steps, leading: t = 950, 900, ..., 0; the window (100, 800) holds steps 4..16
  pipeline::Request req = latte_fixture_request(*pipe, 2, 20);
  const Tensor off = pipe->sample(req);

  for (const pab::Kind k : {pab::Kind::kSpatial, pab::Kind::kTemporal, pab::Kind::kCross, pab::Kind::kMlp})
    req.pab[k] = {true, 1, 100, 800, k == pab::Kind::kMlp ? std::vector<int>{0, 1} : std::vector<int>{}};
  pipeline::PabSummary summary;
  const Tensor range1 = pipe->sample(req, {}, &summary);
  CHECK(std::memcmp(off.data(), range1.data(), off.nbytes()) == 0);
  for (const pab::Kind k : {pab::Kind::kSpatial, pab::Kind::kTemporal, pab::Kind::kCross})
    CHECK(summary.kinds[static_cast<int>(k)].reused == 0);
  CHECK(summary.kinds[static_cast<int>(pab::Kind::kSpatial)].computed == 20 * 2);   // 2 layers
  CHECK(summary.kinds[static_cast<int>(pab::Kind::kTemporal)].computed == 20 * 2);
  CHECK(summary.kinds[static_cast<int>(pab::Kind::kCross)].computed == 20 * 2);

  // The pyramid spatial < temporal < cross (docs/design.md §5): a step in the
  // window reuses when step % range != 0. Steps 4..16: range 2 reuses 5, 7,
  // ..., 15 (6); range 3 reuses 4, 5, 7, 8, 10, 11, 13, 14, 16 (9); range 4
  // reuses 5, 6, 7, 9, 10, 11, 13, 14, 15 (9). Per layer (2 layers); the
  // MLP of layer 0 (range 2) has two feed-forwards, spatial and temporal,
  // each with its own cache slot.
  req.pab[pab::Kind::kSpatial].range = 2;
  req.pab[pab::Kind::kTemporal].range = 3;
  req.pab[pab::Kind::kCross].range = 4;
  req.pab[pab::Kind::kMlp] = {true, 2, 100, 800, {0}};
  summary = {};
  const Tensor with_pab = pipe->sample(req, {}, &summary);
  CHECK(summary.kinds[static_cast<int>(pab::Kind::kSpatial)].reused == 6 * 2);
  CHECK(summary.kinds[static_cast<int>(pab::Kind::kTemporal)].reused == 9 * 2);
  CHECK(summary.kinds[static_cast<int>(pab::Kind::kCross)].reused == 9 * 2);
  CHECK(summary.kinds[static_cast<int>(pab::Kind::kMlp)].reused == 6 * 2);
  CHECK(summary.kinds[static_cast<int>(pab::Kind::kSpatial)].computed == 40 - 12);
  CHECK(summary.kinds[static_cast<int>(pab::Kind::kTemporal)].computed == 40 - 18);
  CHECK(summary.kinds[static_cast<int>(pab::Kind::kCross)].computed == 40 - 18);
  const double change = testing::rel_l2(with_pab, off);
  MESSAGE("Latte PAB changes the latents by relative L2 " << change);
  CHECK(change > 0);
  CHECK(change < 0.2);
}
