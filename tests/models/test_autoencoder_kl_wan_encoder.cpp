// Wan VAE encoder (AutoencoderKLWanEncoder) against diffusers 0.42.1 on the
// tiny VAE of tests/fixtures/wan_tiny and the video of
// tests/fixtures/wan_vae_encode (scripts/fixtures/make_wan_vae_encode_fixtures.py):
// the normalised mode of a 9-frame video (chunks 1, 4, 4) untiled, tiled
// with tiles smaller than the image, and with one tile; bfloat16
// convolutions; the seam's load_encoder; the original release's names;
// shape, config and weight errors. Every reference comes from diffusers,
// never from ditgen.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "fixture.h"
#include "io/model_dir.h"
#include "models/autoencoder_kl_wan_encoder.h"
#include "models/registry.h"
#include "../component_folders.h"
#include "../ops/test_helpers.h"
#include "util/error.h"

using namespace ditgen;
using models::AutoencoderKLWanEncoder;

namespace {

std::string vae_dir() { return testing::fixture_dir("wan_tiny") + "/vae"; }

models::AutoencoderKLWanConfig config_of(const std::string& dir) {
  const std::string path = dir + "/config.json";
  return models::AutoencoderKLWanConfig::from_json(io::read_json_file(path), path);
}

AutoencoderKLWanEncoder load_encoder(DType dtype = DType::kF32) {
  return AutoencoderKLWanEncoder::load(io::WeightStore::open_dir(vae_dir()), config_of(vae_dir()),
                                       {Device::kCPU, dtype});
}

Tensor reference(const std::string& name) {
  return testing::fixture_tensor("wan_vae_encode", "encode.safetensors", name);
}

// diffusers' (1, C, ...) as ditgen's (C, ...).
Tensor unbatched(const Tensor& t) {
  Shape s(t.shape().begin() + 1, t.shape().end());
  return t.reshape(s);
}

Tensor video() { return unbatched(reference("video")); }  // (3, 9, 32, 48)

// Frames [0, n) of a (C, F, H, W) tensor.
Tensor first_frames(const Tensor& x, int64_t n) {
  const int64_t c = x.dim(0), f = x.dim(1), hw = x.dim(2) * x.dim(3);
  Tensor out = Tensor::empty({c, n, x.dim(2), x.dim(3)});
  for (int64_t ch = 0; ch < c; ++ch) std::memcpy(out.data() + ch * n * hw, x.data() + ch * f * hw, sizeof(float) * n * hw);
  return out;
}

void check_close(const Tensor& got, const Tensor& ref, double tol, const char* what) {
  REQUIRE(got.shape() == ref.shape());
  const double l2 = testing::rel_l2(got, ref), mx = testing::max_rel(got, ref);
  MESSAGE(std::string(what) << ": relative L2 " << l2 << ", max|d|/max|ref| " << mx);
  CHECK(l2 <= tol);
  CHECK(mx <= tol);
}

// The fixture's tiles: 32 x 40 pixels every 16 (2 x 3 tiles on 32 x 48).
models::nn::TileGrid fixture_tiles() { return models::nn::encode_tile_grid({32, 40, 16, 16}, 8); }

}  // namespace

TEST_CASE("Wan VAE encode matches diffusers: float32, 9 frames of 32x48 -> normalised mode, 3 latent frames of 4x6") {
  const auto enc = load_encoder();
  // conv_in + 4 levels x 1 resnet x 2 + 2 time convs + 4 mid + conv_out.
  CHECK(enc.causal_convs() == 16);
  const Tensor x = video();
  REQUIRE(x.shape() == Shape{3, 9, 32, 48});

  // The mode before the normalisation: the mean channels of diffusers' _encode.
  const Tensor mode = enc.encode_mode(x), params = unbatched(reference("params"));
  REQUIRE(mode.shape() == Shape{6, 3, 4, 6});
  check_close(mode, params.slice0(0, 6), 1e-5, "mode vs _encode's mean channels");

  check_close(enc.encode(x), unbatched(reference("latents")), 1e-5, "normalised latents");
}

TEST_CASE("Wan VAE encode is causal: an image, and the first 5 frames, give diffusers' first latent frames") {
  const auto enc = load_encoder();
  const Tensor ref = unbatched(reference("latents"));
  for (const int64_t frames : {1, 5}) {
    CAPTURE(frames);
    const int64_t latent_frames = 1 + (frames - 1) / 4;
    check_close(enc.encode(first_frames(video(), frames)), first_frames(ref, latent_frames), 1e-5,
                frames == 1 ? "an image" : "5 frames");
  }
}

TEST_CASE("Wan VAE tiled encode matches diffusers' tiled_encode") {
  const auto enc = load_encoder();
  const models::nn::TileGrid grid = fixture_tiles();
  // diffusers' sizes: tiles of 32 x 40 pixels every 16, blended over 2 x 3 latents, 2 x 2 kept.
  CHECK(grid.height == models::nn::TileAxis{32, 16, 2, 2});
  CHECK(grid.width == models::nn::TileAxis{40, 16, 3, 2});
  CHECK(models::nn::tile_starts(grid.height, 32) == std::vector<int64_t>{0, 16});
  CHECK(models::nn::tile_starts(grid.width, 48) == std::vector<int64_t>{0, 16, 32});
  CHECK(models::nn::needs_tiles(grid, 32, 48));

  const Tensor tiled = enc.encode(video(), grid), ref = unbatched(reference("latents_tiled"));
  check_close(tiled, ref, 1e-5, "tiled");
  // Tiling changes the latents as much as it changes diffusers'.
  const Tensor plain = unbatched(reference("latents"));
  const double ours = testing::rel_l2(tiled, enc.encode(video())), theirs = testing::rel_l2(ref, plain);
  MESSAGE("tiled vs untiled: ditgen " << ours << ", diffusers " << theirs);
  CHECK(theirs > 1e-2);
  CHECK(ours == doctest::Approx(theirs).epsilon(1e-4));

  // One tile covering the image: diffusers does not tile, and neither does the caller.
  const models::nn::TileGrid one = models::nn::encode_tile_grid({32, 48, 32, 48}, 8);
  CHECK_FALSE(models::nn::needs_tiles(one, 32, 48));
  check_close(enc.encode(video(), one), unbatched(reference("latents_one_tile")), 1e-5, "one tile");
}

TEST_CASE("Wan VAE encode with bfloat16 convolution weights stays near diffusers' float32") {
  const auto enc = load_encoder(DType::kBF16);
  const double err = testing::rel_l2(enc.encode(video()), unbatched(reference("latents")));
  MESSAGE("bfloat16: Wan VAE encode relative L2 " << err);
  // diffusers' own bfloat16 encode of this video (the whole model cast) is
  // 7.7e-3 from its float32 one (the fixture's metadata).
  CHECK(err < 2e-2);
  CHECK(err > 1e-5);  // bfloat16 arithmetic really ran
}

TEST_CASE("Wan VAE encoder through the seam (VaeSpec::load_encoder), and other families refuse") {
  const std::string path = vae_dir() + "/config.json";
  const auto spec = models::make_autoencoder_kl_wan_spec(io::read_json_file(path), path);
  const auto enc = spec->load_encoder(io::WeightStore::open_dir(vae_dir()), {Device::kCPU, DType::kF32});
  check_close(enc->encode(video()), unbatched(reference("latents")), 1e-5, "through the seam");

  const std::string pixart = testing::fixture_dir("pixart_tiny") + "/vae";
  const auto akl = models::vae_spec(io::read_json_file(pixart + "/config.json"), pixart + "/config.json");
  CHECK_THROWS_WITH_AS(akl->load_encoder(io::WeightStore::open_dir(pixart), {}),
                       doctest::Contains("not supported yet: encoding with the autoencoder_kl VAE"), ConfigError);
}

TEST_CASE("Wan VAE encoder from one file in the original release's names: the folder's encoder") {
  // wan_quant's VAE (base_dim 2, num_res_blocks 2) as ComfyUI's
  // wan_2.1_vae.safetensors names it, and as its diffusers folder.
  const std::string dir = testing::fixture_dir("wan_quant") + "/vae";
  const std::string path = dir + "/config.json";
  const auto spec = models::make_autoencoder_kl_wan_spec(io::read_json_file(path), path);
  const io::WeightStore file =
      io::WeightStore::open_file(testing::wan_quant_file("wan_2.1_vae_tiny.safetensors"), spec->single_file_options());
  const Tensor x = first_frames(video(), 5);
  const Tensor from_file = spec->load_encoder(file, {})->encode(x);
  const Tensor from_folder = spec->load_encoder(io::WeightStore::open_dir(dir), {})->encode(x);
  REQUIRE(from_file.shape() == Shape{16, 2, 4, 6});
  // The bfloat16 file holds the folder's float32 values exactly.
  CHECK(testing::rel_l2(from_file, from_folder) == 0.0);
  CHECK(testing::rel_l2(from_folder, Tensor::zeros(from_folder.shape())) > 0.0);
}

TEST_CASE("Wan VAE encoder: weights validated against config.json, bad videos and tiles refused") {
  const auto weights = io::WeightStore::open_dir(vae_dir());
  const auto cfg = config_of(vae_dir());
  auto bad = cfg;
  bad.num_res_blocks = 2;  // the file holds one resnet per level
  CHECK_THROWS_AS(AutoencoderKLWanEncoder::load(weights, bad), ModelError);
  bad = cfg;
  bad.num_res_blocks = 0;
  CHECK_THROWS_WITH_AS(AutoencoderKLWanEncoder::load(weights, bad), doctest::Contains("not supported yet"), ConfigError);
  bad = cfg;
  bad.temperal_downsample = {true, true, false};  // level 0 would need a time conv
  CHECK_THROWS_WITH_AS(AutoencoderKLWanEncoder::load(weights, bad), doctest::Contains("down_blocks.1.time_conv"),
                       ModelError);
  bad = cfg;
  bad.z_dim = 4;
  CHECK_THROWS_WITH_AS(AutoencoderKLWanEncoder::load(weights, bad), doctest::Contains("conv_out.weight"), ModelError);

  const auto enc = AutoencoderKLWanEncoder::load(weights, cfg);
  CHECK_THROWS_WITH_AS(enc.encode(Tensor::zeros({3, 6, 32, 48})), doctest::Contains("1 + 4k"), RuntimeFailure);
  CHECK_THROWS_AS(enc.encode(Tensor::zeros({3, 5, 36, 48})), RuntimeFailure);   // not multiples of 8
  CHECK_THROWS_AS(enc.encode(Tensor::zeros({4, 5, 32, 48})), RuntimeFailure);   // channels
  CHECK_THROWS_AS(enc.encode(Tensor::zeros({1, 3, 5, 32, 48})), RuntimeFailure);  // batched
  CHECK_THROWS_WITH_AS(enc.encode(Tensor::zeros({3, 1, 32, 48}), models::nn::encode_tile_grid({32, 32, 20, 20}, 8)),
                       doctest::Contains("not multiples of 8"), RuntimeFailure);
  // A chunk out of turn: four frames on a fresh cache.
  AutoencoderKLWanEncoder::Cache cache;
  CHECK_THROWS_AS(enc.encode_chunk(Tensor::zeros({1, 3, 4, 32, 48}), cache), RuntimeFailure);
}
