// One forward of the committed Wan image-conditioning fixtures
// (tests/fixtures/wan_i2v_tiny/<variant>/forward.safetensors): diffusers'
// inputs as ForwardArgs and its output. A 2-D timestep (ti2v) is per
// token; the step's timestep is then the noisy tokens' (the last token's).
#pragma once
#include <optional>
#include <string>

#include "fixture.h"
#include "io/safetensors.h"
#include "models/transformer.h"

namespace ditgen::testing {

inline std::string wan_i2v_dir(const std::string& variant) { return fixture_dir("wan_i2v_tiny") + "/" + variant; }

struct WanI2vCase {
  Tensor latents, text, sample;
  std::optional<Tensor> image;  // i2v, flf2v: the image tokens
  models::ForwardArgs args;

  explicit WanI2vCase(const std::string& variant) {
    const auto file = io::SafetensorsFile::open(wan_i2v_dir(variant) + "/forward.safetensors");
    auto load = [&](const std::string& name) { return file->load(name).to(DType::kF32).clone(); };
    latents = load("latents");
    text = load("encoder_hidden_states");
    sample = load("sample");
    const Tensor t = load("timestep");
    args.latents = &latents;
    args.text = &text;
    if (t.ndim() == 2) {
      args.token_timesteps.assign(t.data(), t.data() + t.numel());
      for (int64_t b = 0; b < t.dim(0); ++b) args.timesteps.push_back(t[b * t.dim(1) + t.dim(1) - 1]);
    } else {
      args.timesteps.assign(t.data(), t.data() + t.numel());
    }
    if (file->contains("encoder_hidden_states_image")) {
      image = load("encoder_hidden_states_image");
      args.image = &*image;
    }
  }
  WanI2vCase(const WanI2vCase&) = delete;
  WanI2vCase& operator=(const WanI2vCase&) = delete;
};

}  // namespace ditgen::testing
