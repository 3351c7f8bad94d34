// The shipped default model (samples/dit-shapes, trained by
// scripts/train_default.py): parity with diffusers on two classes (fixture
// made by scripts/make_default_reference.py), and the quality check of
// DESIGN.md §7: every class is generated twice, and the colour + shape
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
#include "pipeline/dit_pipeline.h"

using namespace ditgen;

namespace {

const std::string kModel = std::string(DITGEN_SOURCE_DIR) + "/samples/dit-shapes";
const std::string kReference = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/dit_shapes_reference/";

Tensor reference(const std::string& file, const std::string& name) {
  return io::SafetensorsFile::open(kReference + file)->load(name).clone();
}

}  // namespace

TEST_CASE("default model: ditgen matches diffusers for 'red circle' and 'blue star'") {
  const auto pipe = pipeline::DitPipeline::load(kModel);
  pipeline::DitRequest req;
  req.labels = {pipe.label_id(std::string("red circle"), "test"), pipe.label_id(std::string("blue star"), "test")};
  req.steps = 25;
  req.guidance_scale = 4.0f;
  req.scheduler = "ddim";
  req.init_noise = reference("noise.safetensors", "noise");
  const Tensor latents = pipe.sample(req);
  const Tensor want = reference("expected.safetensors", "latents");
  REQUIRE(latents.shape() == want.shape());
  MESSAGE("latents: relative L2 " << testing::rel_l2(latents, want) << ", max|d|/max|ref| "
                                  << testing::max_rel(latents, want));
  CHECK(testing::rel_l2(latents, want) < 1e-4);
  CHECK(testing::max_rel(latents, want) < 1e-4);
  const Tensor images = pipe.decode(latents);
  const Tensor want_images = reference("expected.safetensors", "image");
  MESSAGE("images: relative L2 " << testing::rel_l2(images, want_images));
  CHECK(testing::rel_l2(images, want_images) < 1e-4);
}

TEST_CASE("default model: generated images show the requested colour and shape (>= 90%)") {
  const auto pipe = pipeline::DitPipeline::load(kModel);
  const auto& colours = eval::shape_colour_names();
  const auto& shapes = eval::shape_names();
  const int64_t classes = static_cast<int64_t>(colours.size() * shapes.size());
  pipeline::DitRequest req;  // the default config's settings: DDIM 25 steps, guidance 4, seed 0
  for (int repeat = 0; repeat < 2; ++repeat)
    for (int64_t id = 0; id < classes; ++id) req.labels.push_back(id);
  req.steps = 25;
  req.guidance_scale = 4.0f;
  req.scheduler = "ddim";
  req.batch_size = 30;
  const pipeline::DitResult result = pipe.generate(req);

  int colour_ok = 0, shape_ok = 0, both_ok = 0;
  const int n = static_cast<int>(req.labels.size());
  for (int i = 0; i < n; ++i) {
    const int64_t id = req.labels[i];
    REQUIRE(pipe.label_name(id) == colours[id / 5] + " " + shapes[id % 5]);  // id2label as the classifier assumes
    const Tensor img = result.images.slice0(i, i + 1).reshape(
        {result.images.dim(1), result.images.dim(2), result.images.dim(3)});
    const auto rgb = io::float_image_to_rgb8(img);
    const auto g = eval::classify_shape_image(rgb.data(), img.dim(1), img.dim(2));
    const bool c = g.colour == id / 5, s = g.shape == id % 5;
    colour_ok += c, shape_ok += s, both_ok += c && s;
    if (!(c && s))
      MESSAGE("output " << i << " asked '" << pipe.label_name(id) << "', looks like '"
                        << (g.colour >= 0 ? colours[g.colour] : "?") << " " << (g.shape >= 0 ? shapes[g.shape] : "?")
                        << "'");
  }
  MESSAGE("class agreement: colour " << colour_ok << "/" << n << ", shape " << shape_ok << "/" << n << ", both "
                                     << both_ok << "/" << n);
  CHECK(both_ok * 10 >= n * 9);
}
