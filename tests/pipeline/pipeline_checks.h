// What the pipeline parity and quality tests share, on any placement (the
// CPU suites in tests/pipeline/, the CUDA ones in tests/gpu/): the fixture
// runs from diffusers' noise, the relative-error check with its printed
// figures, and the default model's class-agreement count (docs/design.md §7).
#pragma once
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "eval/shape_classifier.h"
#include "io/png.h"
#include "models/fixture.h"
#include "ops/test_helpers.h"
#include "pipeline/class_pipeline.h"

namespace ditgen::testing {

struct FixtureCase {
  std::string fixture;
  std::vector<int64_t> labels;
  int steps;
  float guidance;
};

inline const FixtureCase kOdd{"dit_odd", {1, 7}, 6, 4.0f};
inline const FixtureCase kBf16{"dit_small_bf16", {0, 3}, 5, 1.5f};

// Final latents of the fixture's request from diffusers' initial noise.
inline Tensor run_fixture(const pipeline::ClassPipeline& pipe, const FixtureCase& c, const std::string& scheduler,
                          float guidance, int batch_size) {
  pipeline::Request req;
  req.labels = c.labels;
  req.steps = c.steps;
  req.guidance_scale = guidance;
  req.scheduler = *sched::sampler_named(scheduler);
  req.batch_size = batch_size;
  req.init_noise = fixture_tensor(c.fixture, "noise.safetensors", "noise");
  return pipe.sample(req);
}

// Decoded images of an image pipeline, (n, 1, 3, H, W) frames, as (n, 3, H, W).
inline Tensor images_of(const Tensor& frames) {
  REQUIRE(frames.ndim() == 5);
  REQUIRE(frames.dim(1) == 1);
  return frames.reshape({frames.dim(0), frames.dim(2), frames.dim(3), frames.dim(4)});
}

// Relative L2 and max|d|/max|ref| both under tol; prints both.
inline void check_close(const Tensor& got, const Tensor& ref, const std::string& what, double tol) {
  REQUIRE(got.shape() == ref.shape());
  const double l2 = rel_l2(got, ref), mx = max_rel(got, ref);
  MESSAGE(what << ": relative L2 " << l2 << ", max|d|/max|ref| " << mx);
  CHECK(l2 < tol);
  CHECK(mx < tol);
}

// Relative L2 of got against ref, printed with max|d|/max|ref|, for the
// half-precision checks whose bound is on the relative L2 alone.
inline double reported_rel_l2(const Tensor& got, const Tensor& ref, const std::string& what) {
  REQUIRE(got.shape() == ref.shape());
  const double l2 = rel_l2(got, ref);
  MESSAGE(what << ": relative L2 " << l2 << ", max|d|/max|ref| " << max_rel(got, ref));
  return l2;
}

// Loose bounds of bfloat16 / float16 placements against diffusers' float32
// (tests/gpu/test_model_parity.cpp's top comment says how they were set).
inline double half_latent_bound(DType t) { return t == DType::kBF16 ? 5e-2 : 1e-2; }
inline double half_image_bound(DType t) { return t == DType::kBF16 ? 2e-2 : 5e-3; }

struct ClassAgreement {
  int colour = 0, shape = 0, both = 0, outputs = 0;
};

// The default model's quality run: every class of samples/dit-shapes twice
// (DDIM 25 steps, guidance 4, seed 0, batch 30, as configs/shapes-image.json),
// each output classified by src/eval's port of the training script's
// classifier; mismatches and the totals are printed.
inline ClassAgreement class_agreement(const pipeline::ClassPipeline& pipe, const std::string& what) {
  const auto& colours = eval::shape_colour_names();
  const auto& shapes = eval::shape_names();
  const int64_t classes = static_cast<int64_t>(colours.size() * shapes.size());
  pipeline::Request req;
  for (int repeat = 0; repeat < 2; ++repeat)
    for (int64_t id = 0; id < classes; ++id) req.labels.push_back(id);
  req.steps = 25;
  req.guidance_scale = 4.0f;
  req.scheduler = sched::Sampler::kDdim;
  req.batch_size = 30;
  const pipeline::Result result = pipe.generate(req);

  ClassAgreement a;
  a.outputs = static_cast<int>(req.labels.size());
  const Tensor images = images_of(result.frames);
  REQUIRE(images.dim(0) == a.outputs);
  for (int i = 0; i < a.outputs; ++i) {
    const int64_t id = req.labels[i];
    REQUIRE(pipe.label_name(id) == colours[id / 5] + " " + shapes[id % 5]);  // id2label as the classifier assumes
    const Tensor img = images.slice0(i, i + 1).reshape({images.dim(1), images.dim(2), images.dim(3)});
    const auto rgb = io::float_image_to_rgb8(img);
    const auto g = eval::classify_shape_image(rgb.data(), img.dim(1), img.dim(2));
    const bool c = g.colour == id / 5, s = g.shape == id % 5;
    a.colour += c, a.shape += s, a.both += c && s;
    if (!(c && s))
      MESSAGE("output " << i << " asked '" << pipe.label_name(id) << "', looks like '"
                        << (g.colour >= 0 ? colours[g.colour] : "?") << " " << (g.shape >= 0 ? shapes[g.shape] : "?")
                        << "'");
  }
  MESSAGE(what << " class agreement: colour " << a.colour << "/" << a.outputs << ", shape " << a.shape << "/"
               << a.outputs << ", both " << a.both << "/" << a.outputs);
  return a;
}

}  // namespace ditgen::testing
