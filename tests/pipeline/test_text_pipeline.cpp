// End-to-end parity with diffusers' PixArtAlphaPipeline on the committed
// tiny fixture (tests/fixtures/pixart_tiny, scripts/fixtures/make_text_fixtures.py):
// the text stage's prompt and negative embeddings, then from the same
// initial noise the final latents after DPM-Solver++ and DDIM (4 steps,
// guidance 4.5, max_sequence_length 16) and the decoded images, each output
// as diffusers makes it alone (batch of one) whatever ditgen's batch.
#include <doctest/doctest.h>

#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include "pipeline/pipeline_checks.h"
#include "pipeline/text_fixture_requests.h"
#include "pipeline/text_pipeline.h"
#include "util/error.h"

using namespace ditgen;
using testing::check_close;
using testing::fixture_tensor;
using testing::pixart_fixture_request;

namespace {

Tensor row(const Tensor& t, int64_t i) { return t.slice0(i, i + 1).reshape({t.dim(1), t.dim(2)}).clone(); }

}  // namespace

TEST_CASE("PixArt pipeline: the text stage gives diffusers' prompt and negative embeddings") {
  const auto pipe = testing::open_fixture_pipeline("pixart_tiny");
  const pipeline::Request req = pixart_fixture_request(*pipe, sched::Sampler::kModelDefault, 2);
  const pipeline::Conditions c = pipe->condition(req);
  REQUIRE(c.prompt_embeds.shape() == Shape{2, 16, 40});
  for (int64_t i = 0; i < 2; ++i) {
    const std::string n = std::to_string(i);
    check_close(row(c.prompt_embeds, i), fixture_tensor("pixart_tiny", "expected.safetensors", "prompt_embeds_" + n),
                "prompt_embeds_" + n, 1e-5);
    check_close(row(c.negative_embeds, 0),
                fixture_tensor("pixart_tiny", "expected.safetensors", "negative_embeds_" + n), "negative_embeds", 1e-5);
    const Tensor mask = io::SafetensorsFile::open(testing::fixture_dir("pixart_tiny") + "/reference/expected.safetensors")
                            ->load("prompt_mask_" + n);
    int64_t ones = 0;
    for (int64_t j = 0; j < mask.numel(); ++j) ones += mask.data_as<int64_t>()[j];
    CHECK(c.prompt_lengths[static_cast<size_t>(i)] == ones);
    CHECK(c.negative_lengths[static_cast<size_t>(i)] == 1);  // "" is </s> alone
  }
}

TEST_CASE("PixArt pipeline latents and images match diffusers (DPM-Solver++, DDIM, any batch size)") {
  const auto pipe = testing::open_fixture_pipeline("pixart_tiny");
  for (const int batch : {2, 1}) {
    CAPTURE(batch);
    const pipeline::Request dpm = pixart_fixture_request(*pipe, sched::Sampler::kDpmpp2m, batch);
    const pipeline::Result r = pipe->generate(dpm);
    check_close(r.latents, fixture_tensor("pixart_tiny", "expected.safetensors", "latents_dpm"), "latents_dpm", 1e-4);
    check_close(testing::images_of(r.frames), fixture_tensor("pixart_tiny", "expected.safetensors", "images_dpm"),
                "images_dpm", 1e-4);
    const pipeline::Request ddim = pixart_fixture_request(*pipe, sched::Sampler::kDdim, batch);
    check_close(pipe->sample(ddim), fixture_tensor("pixart_tiny", "expected.safetensors", "latents_ddim"),
                "latents_ddim", 1e-4);
  }
}

TEST_CASE("PixArt pipeline: class labels and bad prompts are config errors naming the field") {
  const auto pipe = pipeline::Pipeline::open(testing::fixture_dir("pixart_tiny"));
  GenerateConfig g;
  g.class_labels = {1};
  CHECK_THROWS_WITH_AS(pipe->prepare(g, "run.json"), doctest::Contains("generate.prompts"), ConfigError);
  g.class_labels.clear();
  g.prompts = {"ok", "bad \xff"};
  CHECK_THROWS_WITH_AS(pipe->prepare(g, "run.json"), doctest::Contains("generate.prompts[1]"), ConfigError);
  g.prompts = {"ok"};
  g.max_sequence_length = 5000;
  CHECK_THROWS_WITH_AS(pipe->prepare(g, "run.json"), doctest::Contains("max_sequence_length"), ConfigError);
}
