// The requests of the text-conditional fixtures (tests/fixtures/pixart_tiny,
// latte_tiny: scripts/fixtures/make_text_fixtures.py; wan_tiny:
// make_wan_fixtures.py; cogvideox_tiny: make_cogvideox_fixtures.py), as
// diffusers ran them, for the
// CPU suites (test_text_pipeline.cpp, test_latte_pipeline.cpp) and the CUDA
// ones (tests/gpu/test_text_model_parity.cpp) alike: the prompts, sampling
// settings and diffusers' initial noise, the text encoder in float32.
#pragma once
#include <memory>
#include <string>

#include "models/fixture.h"
#include "models/placement.h"
#include "pipeline/pipeline.h"
#include "util/error.h"

namespace ditgen::testing {

// The fixture's pipeline with its weights loaded at `place` (the CPU by default).
inline std::unique_ptr<pipeline::Pipeline> open_fixture_pipeline(const std::string& fixture,
                                                                 const models::Placement& place = {}) {
  auto pipe = pipeline::Pipeline::open(fixture_dir(fixture));
  pipe->load_weights({}, place);
  return pipe;
}

// PixArt: two prompts, 4 steps, guidance 4.5, max_sequence_length 16.
inline pipeline::Request pixart_fixture_request(const pipeline::Pipeline& pipe, sched::Sampler scheduler,
                                                int batch_size) {
  GenerateConfig g;
  g.prompts = {"a red circle", "A Cat walking on the GRASS  "};
  g.steps = 4;
  g.guidance_scale = 4.5;
  g.scheduler = scheduler;
  g.batch_size = batch_size;
  g.max_sequence_length = 16;
  pipeline::Request req = pipe.prepare(g, "run.json");
  req.text_encoder_dtype = DTypeChoice::kFloat32;
  req.init_noise = fixture_tensor("pixart_tiny", "noise.safetensors", "noise");
  return req;
}

// Latte: two prompts, DDIM, guidance 7.5, 3 frames of 80x80 (3 steps in the
// fixture's reference).
inline GenerateConfig latte_fixture_config(int batch_size, int steps = 3) {
  GenerateConfig g;
  g.prompts = {"a red circle moving left", "a cat"};
  g.steps = steps;
  g.guidance_scale = 7.5;
  g.scheduler = sched::Sampler::kDdim;
  g.batch_size = batch_size;
  g.frames = 3;
  g.height = 80;
  g.width = 80;
  return g;
}

inline pipeline::Request latte_fixture_request(const pipeline::Pipeline& pipe, int batch_size, int steps = 3) {
  pipeline::Request req = pipe.prepare(latte_fixture_config(batch_size, steps), "run.json");
  req.text_encoder_dtype = DTypeChoice::kFloat32;
  req.init_noise = fixture_tensor("latte_tiny", "noise.safetensors", "noise");
  return req;
}

// Wan (tests/fixtures/wan_tiny, wan22_tiny): as the fixture's run configs
// (reference/run_unipc.json, run_euler.json): two prompts and a negative,
// 9 frames of 48 x 80, 4 steps, guidance 5, max_sequence_length 16.
inline GenerateConfig wan_fixture_config(sched::Sampler scheduler, int batch_size) {
  GenerateConfig g;
  g.prompts = {"a red cat moving left", "A Cat &amp; the  GRASS, walking on the moon at night"};
  g.negative_prompt = "low quality,   blurry &amp;amp; static";
  g.negative_prompt_given = true;
  g.frames = 9;
  g.height = 48;
  g.width = 80;
  g.steps = 4;
  g.guidance_scale = 5.0;
  g.scheduler = scheduler;
  g.max_sequence_length = 16;
  g.batch_size = batch_size;
  return g;
}

// `g` on the fixture's pipeline with diffusers' noise (its
// reference/noise.safetensors), the text encoder in float32.
inline pipeline::Request fixture_request(const pipeline::Pipeline& pipe, const GenerateConfig& g,
                                             const std::string& fixture) {
  pipeline::Request req = pipe.prepare(g, "run.json");
  req.text_encoder_dtype = DTypeChoice::kFloat32;
  req.init_noise = fixture_tensor(fixture, "noise.safetensors", "noise");
  return req;
}

// CogVideoX (tests/fixtures/cogvideox_tiny: make_cogvideox_fixtures.py), as
// its reference/run.json: two prompts as written, the default negative "",
// 17 frames of 32 x 48, 4 steps, guidance 6, the model's DDIM, 16 tokens.
inline GenerateConfig cogvideox_fixture_config(int batch_size) {
  GenerateConfig g;
  g.prompts = {"a red cat moving left", "A Cat walking on the GRASS  "};
  g.frames = 17;
  g.height = 32;
  g.width = 48;
  g.steps = 4;
  g.guidance_scale = 6.0;
  g.max_sequence_length = 16;
  g.batch_size = batch_size;
  return g;
}

// The ConfigError prepare() gives `g`, or "(no ConfigError)".
inline std::string prepare_error(const pipeline::Pipeline& pipe, const GenerateConfig& g) {
  try {
    pipe.prepare(g, "run.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

}  // namespace ditgen::testing
