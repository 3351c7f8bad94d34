// Wan 2.2 TI2V's VAE (is_residual, patch_size 2: models/autoencoder_kl_wan.h,
// models/autoencoder_kl_wan_encoder.h) placed on the GPU, against
// diffusers on the committed fixture (tests/fixtures/wan22_vae, as
// tests/models/test_autoencoder_kl_wan22.cpp on the CPU): the decode before
// the clamp and the encode's normalised mode, float32 untiled and tiled at
// 1e-4 (the CPU test's 3e-6 with room for the CUDA convolutions' summation
// order), bfloat16 held to a loose bound (diffusers' own bfloat16: decode
// 1.8e-2, encode 1.1e-2 from float32).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "io/model_dir.h"
#include "models/autoencoder_kl_wan.h"
#include "models/autoencoder_kl_wan_encoder.h"
#include "models/fixture.h"
#include "models/registry.h"
#include "models/vae_decode.h"
#include "ops/test_helpers.h"

using namespace ditgen;

namespace {

std::string vae_dir() { return testing::fixture_dir("wan22_vae") + "/vae"; }
std::string config_path() { return vae_dir() + "/config.json"; }

models::AutoencoderKLWanConfig config() {
  return models::AutoencoderKLWanConfig::from_json(io::read_json_file(config_path()), config_path());
}

Tensor reference(const std::string& name) { return testing::fixture_tensor("wan22_vae", "vae22.safetensors", name); }

// diffusers' (1, C, ...) as ditgen's (C, ...).
Tensor unbatched(const Tensor& t) { return t.reshape(Shape(t.shape().begin() + 1, t.shape().end())); }

}  // namespace

TEST_CASE("Wan 2.2 VAE decode on CUDA matches diffusers (float32 untiled and tiled, bfloat16 loosely)") {
  const auto weights = io::WeightStore::open_dir(vae_dir());
  const double f32 = testing::rel_l2(
      models::AutoencoderKLWan::load(weights, config(), {Device::kCUDA, DType::kF32}).decode(reference("z")),
      reference("decoded_raw"));
  const double bf16 = testing::rel_l2(
      models::AutoencoderKLWan::load(weights, config(), {Device::kCUDA, DType::kBF16}).decode(reference("z")),
      reference("decoded_raw"));
  // Tiled through the seam: (F, 3, H, W) frames, clamped, against diffusers' (1, 3, F, H, W).
  const auto spec = models::vae_spec(io::read_json_file(config_path()), config_path());
  const auto decoder = spec->load(weights, {Device::kCUDA, DType::kF32});
  const Tensor z = unbatched(reference("zt")), want = reference("decoded_tiled");
  Tensor frames = Tensor::empty({spec->frames_of(z.dim(1)), 3, z.dim(2) * 16, z.dim(3) * 16});
  models::decode_latents(*decoder, *spec, z, frames, models::nn::tile_grid({32, 32, 16, 16}, 16));
  const int64_t f = frames.dim(0), hw = frames.dim(2) * frames.dim(3);
  Tensor got = Tensor::empty(want.shape());
  for (int64_t i = 0; i < f; ++i)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t p = 0; p < hw; ++p) got[(c * f + i) * hw + p] = std::clamp(frames[(i * 3 + c) * hw + p], -1.0f, 1.0f);
  const double tiled = testing::rel_l2(got, want);
  MESSAGE("CUDA decode: float32 " << f32 << ", tiled " << tiled << ", bfloat16 " << bf16);
  CHECK(f32 <= 1e-4);
  CHECK(tiled <= 1e-4);
  CHECK(bf16 < 4e-2);
}

TEST_CASE("Wan 2.2 VAE encoder on CUDA matches diffusers (float32 untiled and tiled, bfloat16 loosely)") {
  const auto weights = io::WeightStore::open_dir(vae_dir());
  const Tensor video = unbatched(reference("video"));
  const auto f32 = models::AutoencoderKLWanEncoder::load(weights, config(), {Device::kCUDA, DType::kF32});
  const double untiled = testing::rel_l2(f32.encode(video), unbatched(reference("latents")));
  const double tiled = testing::rel_l2(f32.encode(video, models::nn::encode_tile_grid({16, 24, 8, 8}, 16)),
                                       unbatched(reference("latents_tiled")));
  const double bf16 = testing::rel_l2(
      models::AutoencoderKLWanEncoder::load(weights, config(), {Device::kCUDA, DType::kBF16}).encode(video),
      unbatched(reference("latents")));
  MESSAGE("CUDA encode: float32 " << untiled << ", tiled " << tiled << ", bfloat16 " << bf16);
  CHECK(untiled <= 1e-4);
  CHECK(tiled <= 1e-4);
  CHECK(bf16 < 3e-2);
}
