// The shipped default model (samples/dit-shapes, trained by
// scripts/train/train_default.py): parity with diffusers on two classes (fixture
// made by scripts/fixtures/make_default_reference.py), and the quality check of
// docs/design.md §7: every class is generated twice, and the colour + shape
// classifier of src/eval (a port of the training script's check) must agree
// with the requested class for at least 90% of the outputs.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include "eval/shape_classifier.h"
#include "io/png.h"
#include "io/safetensors.h"
#include "pipeline/class_pipeline.h"
#include "pipeline/pipeline_checks.h"

using namespace ditgen;

namespace {

const std::string kModel = std::string(DITGEN_SOURCE_DIR) + "/samples/dit-shapes";
const std::string kReference = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/dit_shapes_reference/";

Tensor reference(const std::string& file, const std::string& name) {
  return io::SafetensorsFile::open(kReference + file)->load(name).to(DType::kF32).clone();
}

}  // namespace

TEST_CASE("default model: ditgen matches diffusers for 'red circle' and 'blue star'") {
  const auto pipe = pipeline::ClassPipeline::load(kModel);
  pipeline::Request req;
  req.labels = {pipe.label_id(std::string("red circle"), "test"), pipe.label_id(std::string("blue star"), "test")};
  req.steps = 25;
  req.guidance_scale = 4.0f;
  req.scheduler = sched::Sampler::kDdim;
  req.init_noise = reference("noise.safetensors", "noise");
  const Tensor latents = pipe.sample(req);
  const Tensor want = reference("expected.safetensors", "latents");
  REQUIRE(latents.shape() == want.shape());
  MESSAGE("latents: relative L2 " << testing::rel_l2(latents, want) << ", max|d|/max|ref| "
                                  << testing::max_rel(latents, want));
  CHECK(testing::rel_l2(latents, want) < 1e-4);
  CHECK(testing::max_rel(latents, want) < 1e-4);
  const Tensor images = testing::images_of(pipe.decode(latents));
  const Tensor want_images = reference("expected.safetensors", "image");
  MESSAGE("images: relative L2 " << testing::rel_l2(images, want_images));
  CHECK(testing::rel_l2(images, want_images) < 1e-4);
}

TEST_CASE("default model: generated images show the requested colour and shape (>= 90%)") {
  const auto pipe = pipeline::ClassPipeline::load(kModel);
  const testing::ClassAgreement a = testing::class_agreement(pipe, "cpu float32");
  CHECK(a.both * 10 >= a.outputs * 9);
}
