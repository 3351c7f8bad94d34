// The image-to-video conditioning (pipeline/image_condition.h) against
// diffusers 0.42.1's WanImageToVideoPipeline.prepare_latents on the tiny
// Wan 2.1 VAE of tests/fixtures/wan_tiny, for the committed input images
// resized to 32 x 48 (tests/fixtures/wan_i2v_condition, made by
// scripts/fixtures/make_wan_i2v_pipeline_fixtures.py): image-to-video and
// first-last-frame conditions (mask ++ normalised latents, 9 frames), the
// expand_timesteps condition, step input, per-token timesteps and the
// replacement after the loop; the masks against plain loops over the rule
// diffusers' reshapes amount to; the errors.
#include <doctest/doctest.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "io/image_reader.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "io/vae_image_input.h"
#include "models/autoencoder_kl_wan_encoder.h"
#include "pipeline/image_condition.h"
#include "../models/fixture.h"
#include "../ops/test_helpers.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::pipeline;

namespace {

Tensor reference(const std::string& name) {
  const std::string path = testing::fixture_dir("wan_i2v_condition") + "/prepare_latents.safetensors";
  const Tensor t = io::SafetensorsFile::open(path)->load(name).to(DType::kF32).clone();
  Shape s(t.shape().begin() + 1, t.shape().end());  // diffusers' batch of one
  return t.reshape(s);
}

Tensor input_image(const std::string& file) {
  const io::InputImage img = io::read_input_image(testing::fixture_dir("wan_i2v_inputs") + "/" + file);
  return io::vae_image_input(img.image.rgb, 32, 48, 8);
}

const models::AutoencoderKLWanEncoder& encoder() {
  static const models::AutoencoderKLWanEncoder enc = [] {
    const std::string dir = testing::fixture_dir("wan_tiny") + "/vae";
    const std::string config = dir + "/config.json";
    return models::AutoencoderKLWanEncoder::load(
        io::WeightStore::open_dir(dir),
        models::AutoencoderKLWanConfig::from_json(io::read_json_file(config), config), {Device::kCPU, DType::kF32});
  }();
  return enc;
}

void check_close(const Tensor& got, const Tensor& ref, double tol, const char* what) {
  REQUIRE(got.shape() == ref.shape());
  const double l2 = testing::rel_l2(got, ref), mx = testing::max_rel(got, ref);
  MESSAGE(std::string(what) << ": relative L2 " << l2 << ", max|d|/max|ref| " << mx);
  CHECK(l2 <= tol);
  CHECK(mx <= tol);
}

// The mask channels (the first 4) exactly.
void check_mask_exact(const Tensor& got, const Tensor& ref) {
  const int64_t n = 4 * got.dim(1) * got.dim(2) * got.dim(3);
  for (int64_t i = 0; i < n; ++i) REQUIRE(got[i] == ref[i]);
}

}  // namespace

TEST_CASE("image condition: image-to-video (mask ++ latents) equals diffusers' prepare_latents, 9 frames") {
  const Tensor image = input_image("first.png");
  const ImageCondition c = encode_image_condition(encoder(), image, nullptr, 9, 4, ConditionMode::kChannels);
  const Tensor ref = reference("i2v.condition");  // (10, 3, 4, 6)
  check_mask_exact(c.condition, ref);
  check_close(c.condition, ref, 1e-5, "i2v condition");
  CHECK(model_input_channels(c, 6) == 16);
}

TEST_CASE("image condition: first-last-frame equals diffusers' prepare_latents with last_image") {
  const Tensor image = input_image("first.png"), last = input_image("last.png");
  const ImageCondition c = encode_image_condition(encoder(), image, &last, 9, 4, ConditionMode::kChannels);
  const Tensor ref = reference("flf2v.condition");
  check_mask_exact(c.condition, ref);
  check_close(c.condition, ref, 1e-5, "flf2v condition");
  // The last image changed the latents, not only the mask.
  CHECK(testing::rel_l2(c.condition, reference("i2v.condition")) > 1e-2);
}

TEST_CASE("image condition: expand_timesteps (TI2V) condition, step input, token timesteps, final replacement") {
  const Tensor image = input_image("first.png");
  const ImageCondition c = encode_image_condition(encoder(), image, nullptr, 9, 4, ConditionMode::kExpandTimesteps);
  check_close(c.condition, reference("expand.condition"), 1e-5, "expand condition");
  const Tensor mask_ref = reference("expand.first_frame_mask");  // (1, 3, 4, 6)
  REQUIRE(c.first_frame_mask.numel() == mask_ref.numel());
  for (int64_t i = 0; i < mask_ref.numel(); ++i) REQUIRE(c.first_frame_mask[i] == mask_ref[i]);

  // The step input and the replacement from diffusers' own condition, so
  // they are checked exactly.
  ImageCondition exact = c;
  exact.condition = reference("expand.condition").reshape({6, 1, 4, 6});
  const Tensor latents = reference("expand.latents");  // (6, 3, 4, 6)
  const Tensor want = reference("expand.model_input");
  Tensor got = Tensor::empty(latents.shape());
  write_model_input(exact, latents.data(), latents.shape(), got.data());
  for (int64_t i = 0; i < want.numel(); ++i) REQUIRE(got[i] == want[i]);
  Tensor replaced = latents.clone();
  replace_first_frame(exact, replaced.data(), replaced.shape());
  for (int64_t i = 0; i < want.numel(); ++i) REQUIRE(replaced[i] == want[i]);

  const std::vector<float> ts = token_timesteps(c.first_frame_mask, 937.0f, 2, 2);
  const Tensor ts_ref = reference("expand.timestep");  // (18)
  REQUIRE(static_cast<int64_t>(ts.size()) == ts_ref.numel());
  for (size_t i = 0; i < ts.size(); ++i) CHECK(ts[i] == ts_ref[static_cast<int64_t>(i)]);
}

TEST_CASE("image condition: the masks against the rule they amount to (plain loops), odd sizes") {
  for (const bool last : {false, true})
    for (const int64_t frames : {5, 9, 13, 81}) {
      CAPTURE(frames);
      CAPTURE(last);
      const int64_t latent_frames = (frames - 1) / 4 + 1;
      const Tensor m = condition_mask(frames, 4, 3, 5, last);
      REQUIRE(m.shape() == Shape{4, latent_frames, 3, 5});
      for (int64_t c = 0; c < 4; ++c)
        for (int64_t t = 0; t < latent_frames; ++t) {
          // frame 0 fills latent frame 0; the last image is frame F - 1, the
          // 4th of the last latent frame's group.
          const float want = (t == 0 || (last && t == latent_frames - 1 && c == 3)) ? 1.0f : 0.0f;
          for (int64_t i = 0; i < 15; ++i) REQUIRE(m[((c * latent_frames + t) * 15) + i] == want);
        }
    }
  // Text-to-video on TI2V: nothing replaced, every token at t.
  const ImageCondition t2v = text_only_expand_condition(3, 4, 6);
  const std::vector<float> ts = token_timesteps(t2v.first_frame_mask, 500.0f, 2, 2);
  REQUIRE(ts.size() == 3u * 2 * 3);
  for (float t : ts) CHECK(t == 500.0f);
  const Tensor x = Tensor::from_vector({2, 3, 4, 6}, std::vector<float>(144, 0.25f));
  Tensor in = Tensor::zeros(x.shape());
  write_model_input(t2v, x.data(), x.shape(), in.data());
  for (int64_t i = 0; i < in.numel(); ++i) REQUIRE(in[i] == 0.25f);
}

TEST_CASE("image condition: bad frame counts and mismatched images are refused") {
  const Tensor image = Tensor::zeros({3, 16, 16});
  const Tensor other = Tensor::zeros({3, 16, 24});
  CHECK_THROWS_WITH_AS(condition_mask(8, 4, 2, 2, false), doctest::Contains("1 + 4k"), ConfigError);
  CHECK_THROWS_WITH_AS(video_condition(image, nullptr, 1, ConditionMode::kChannels),
                       doctest::Contains("at least 2"), ConfigError);
  CHECK_THROWS_WITH_AS(video_condition(image, &image, 2, ConditionMode::kChannels),
                       doctest::Contains("at least 3"), ConfigError);
  CHECK_THROWS_WITH_AS(video_condition(image, &other, 5, ConditionMode::kChannels),
                       doctest::Contains("the last image is"), ConfigError);
  const Tensor v = video_condition(image, nullptr, 5, ConditionMode::kExpandTimesteps);
  CHECK(v.shape() == Shape{3, 1, 16, 16});
}

TEST_CASE("image condition: every output's condition from its decoded images, resized to the run's size") {
  auto read = [](const std::string& file) {
    return std::make_shared<const io::InputImage>(
        io::read_input_image(testing::fixture_dir("wan_i2v_inputs") + "/" + file));
  };
  const auto first = read("first.png"), last = read("last.png");
  // Two outputs of one image (one encode), one first-last-frame output.
  const std::vector<OutputImages> images = {{first, nullptr, 0}, {first, nullptr, 0}, {first, last, 2}};
  const std::vector<ImageCondition> c =
      image_conditions(images, encoder(), 32, 48, 9, 8, 4, ConditionMode::kChannels);
  REQUIRE(c.size() == 3u);
  check_close(c[0].condition, reference("i2v.condition"), 1e-5, "output 0");
  CHECK(c[1].condition.raw() == c[0].condition.raw());  // shared
  check_close(c[2].condition, reference("flf2v.condition"), 1e-5, "output 2 (first and last)");
  // TI2V: an output without an image is text-to-video's condition.
  const std::vector<ImageCondition> ti2v =
      image_conditions({{first, nullptr, 0}, {nullptr, nullptr, 0}}, encoder(), 32, 48, 9, 8, 4,
                       ConditionMode::kExpandTimesteps);
  check_close(ti2v[0].condition, reference("expand.condition"), 1e-5, "ti2v output 0");
  CHECK_FALSE(ti2v[1].condition.defined());
  CHECK(ti2v[1].first_frame_mask.shape() == Shape{3, 4, 6});
  CHECK_THROWS_AS(image_conditions({{nullptr, nullptr, 0}}, encoder(), 32, 48, 9, 8, 4, ConditionMode::kChannels),
                  std::invalid_argument);
}
