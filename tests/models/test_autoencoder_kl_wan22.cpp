// Wan 2.2's VAE (AutoencoderKLWan with is_residual true and patch_size 2:
// residual up and down blocks with DupUp3D / AvgDown3D shortcuts,
// patchified pixels) against diffusers 0.42.1 on the tiny random VAE of
// tests/fixtures/wan22_vae (scripts/fixtures/make_wan22_vae_fixtures.py):
// the decode of 3 latent frames before the clamp, the seam's stream one
// latent frame at a time, tiled decode (tiles blended as patches), the
// normalised encode of a 9-frame video untiled and tiled (tiles read in
// patches), bfloat16 convolutions, TI2V-5B's published config, and config
// errors naming the key. Every reference comes from diffusers, never from
// ditgen.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "fixture.h"
#include "io/model_dir.h"
#include "models/autoencoder_kl_wan.h"
#include "models/autoencoder_kl_wan_encoder.h"
#include "models/nn/vae_patches.h"
#include "models/registry.h"
#include "models/vae_decode.h"
#include "models/wan_vae_names.h"
#include "../ops/test_helpers.h"
#include "util/error.h"

using namespace ditgen;

namespace {

std::string vae_dir() { return testing::fixture_dir("wan22_vae") + "/vae"; }
std::string config_path() { return vae_dir() + "/config.json"; }

models::AutoencoderKLWanConfig fixture_config() {
  return models::AutoencoderKLWanConfig::from_json(io::read_json_file(config_path()), config_path());
}

Tensor reference(const std::string& name) { return testing::fixture_tensor("wan22_vae", "vae22.safetensors", name); }

// diffusers' (1, C, ...) as ditgen's (C, ...).
Tensor unbatched(const Tensor& t) {
  Shape s(t.shape().begin() + 1, t.shape().end());
  return t.reshape(s);
}

// (F, C, H, W) frames as diffusers' (1, C, F, H, W) video.
Tensor as_video(const Tensor& frames) {
  const int64_t f = frames.dim(0), c = frames.dim(1), hw = frames.dim(2) * frames.dim(3);
  Tensor out = Tensor::empty({1, c, f, frames.dim(2), frames.dim(3)});
  for (int64_t i = 0; i < f; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      std::memcpy(out.data() + (ch * f + i) * hw, frames.data() + (i * c + ch) * hw, sizeof(float) * hw);
  return out;
}

Tensor clamped(Tensor t) {
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = std::clamp(t[i], -1.0f, 1.0f);
  return t;
}

void check_close(const Tensor& got, const Tensor& ref, double tol, const std::string& what) {
  REQUIRE(got.numel() == ref.numel());
  const double l2 = testing::rel_l2(got, ref), mx = testing::max_rel(got, ref);
  MESSAGE(what << ": relative L2 " << l2 << ", max|d|/max|ref| " << mx);
  CHECK(l2 <= tol);
  CHECK(mx <= 10 * tol);
}

struct LoadedVae {
  std::unique_ptr<models::VaeSpec> spec;
  std::unique_ptr<models::VaeDecoder> decoder;
};

LoadedVae load_seam(DType dtype = DType::kF32) {
  LoadedVae v;
  v.spec = models::vae_spec(io::read_json_file(config_path()), config_path());
  v.decoder = v.spec->load(io::WeightStore::open_dir(vae_dir()), {Device::kCPU, dtype});
  return v;
}

// The seam's decode of (C, F, h, w) latents, diffusers' layout, optionally tiled.
Tensor seam_decode(const LoadedVae& v, const Tensor& z, const std::optional<models::nn::TileGrid>& tiles) {
  const int64_t f = v.spec->spatial_factor();
  Tensor out = Tensor::empty({v.spec->frames_of(z.dim(1)), v.spec->out_channels(), z.dim(2) * f, z.dim(3) * f});
  models::decode_latents(*v.decoder, *v.spec, z, out, tiles);
  return as_video(out);
}

}  // namespace

TEST_CASE("Wan 2.2 VAE: patchify and unpatchify are diffusers' permutations") {
  // (1, 2, 1, 4, 6) numbered values; diffusers: channel (c p + i) p + j holds pixel (y p + j, x p + i).
  Tensor x = Tensor::empty({1, 2, 1, 4, 6});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(i);
  const Tensor p = models::nn::patchify_pixels(x, 2);
  REQUIRE(p.shape() == Shape{1, 8, 1, 2, 3});
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t y = 0; y < 2; ++y)
          for (int64_t xx = 0; xx < 3; ++xx)
            CHECK(p[(((c * 2 + i) * 2 + j) * 2 + y) * 3 + xx] == x[(c * 4 + y * 2 + j) * 6 + xx * 2 + i]);
  CHECK(testing::rel_l2(models::nn::unpatchify_pixels(p, 2), x) == 0.0);
  CHECK_THROWS_AS(models::nn::patchify_pixels(Tensor::zeros({1, 3, 1, 5, 6}), 2), std::invalid_argument);
}

TEST_CASE("Wan 2.2 VAE decode matches diffusers: float32, 3 latent frames of 2x3 -> 9 frames of 32x48") {
  const auto vae = models::AutoencoderKLWan::load(io::WeightStore::open_dir(vae_dir()), fixture_config());
  CHECK(vae.config().spatial_factor() == 16);
  CHECK(vae.config().network_factor() == 8);
  CHECK(vae.config().image_channels() == 3);
  // 1 conv_in + 4 mid + 4 up blocks x 2 resnets x 2 + 2 time convs + 1 conv_out.
  CHECK(vae.causal_convs() == 24);
  const Tensor raw = vae.decode(reference("z"));
  REQUIRE(raw.shape() == Shape{1, 3, 9, 32, 48});
  check_close(raw, reference("decoded_raw"), 3e-6, "decode before the clamp");

  // The seam: the stream one latent frame at a time (1, 4, 4 frames), unpatchified.
  const LoadedVae v = load_seam();
  CHECK(v.spec->out_channels() == 3);
  CHECK(v.spec->spatial_factor() == 16);
  CHECK(v.spec->patch_size() == 2);
  CHECK(v.spec->latent_channels() == 8);
  check_close(seam_decode(v, unbatched(reference("z")), std::nullopt), reference("decoded_raw"), 3e-6,
              "through the seam's stream");
}

TEST_CASE("Wan 2.2 VAE tiled decode matches diffusers' tiled_decode (tiles blended as patches)") {
  const LoadedVae v = load_seam();
  // diffusers' enable_tiling(32, 32, 16, 16) at 16 pixels a latent: tiles of
  // 2 latents every 1 (3 x 3 tiles on 3 x 3), blended over 8 patches (16 pixels), 8 kept.
  const models::nn::TileGrid grid = models::nn::tile_grid({32, 32, 16, 16}, 16);
  CHECK(grid.height == models::nn::TileAxis{2, 1, 16, 16});
  const Tensor z = unbatched(reference("zt")), want = reference("decoded_tiled");
  const Tensor tiled = clamped(seam_decode(v, z, grid));
  check_close(tiled, want, 3e-6, "tiled");
  // It did tile: the untiled decode is far from diffusers' tiled one.
  CHECK(testing::rel_l2(clamped(seam_decode(v, z, std::nullopt)), want) > 1e-2);
}

TEST_CASE("Wan 2.2 VAE decode with bfloat16 convolution weights stays near diffusers' float32") {
  const auto vae =
      models::AutoencoderKLWan::load(io::WeightStore::open_dir(vae_dir()), fixture_config(), {Device::kCPU, DType::kBF16});
  const double err = testing::rel_l2(vae.decode(reference("z")), reference("decoded_raw"));
  MESSAGE("bfloat16: Wan 2.2 VAE decode relative L2 " << err);
  // diffusers' own bfloat16 decode (the whole model cast) is 1.8e-2 from its float32 one (the fixture's metadata).
  CHECK(err < 3e-2);
  CHECK(err > 1e-5);  // bfloat16 arithmetic really ran
}

TEST_CASE("Wan 2.2 VAE encode matches diffusers: 9 frames of 32x48 -> normalised mode, untiled and tiled") {
  const auto spec = models::vae_spec(io::read_json_file(config_path()), config_path());
  const auto weights = io::WeightStore::open_dir(vae_dir());
  const auto enc = models::AutoencoderKLWanEncoder::load(weights, fixture_config());
  const Tensor video = unbatched(reference("video"));
  REQUIRE(video.shape() == Shape{3, 9, 32, 48});
  const Tensor mode = enc.encode_mode(video), params = unbatched(reference("params"));
  REQUIRE(mode.shape() == Shape{8, 3, 2, 3});
  check_close(mode, params.slice0(0, 8), 3e-6, "mode vs _encode's mean channels");
  const auto seam = spec->load_encoder(weights, {Device::kCPU, DType::kF32});
  check_close(seam->encode(video), unbatched(reference("latents")), 3e-6, "normalised, through the seam");

  // diffusers' enable_tiling(16, 24, 8, 8): tiled_encode reads them in
  // patches of the patchified 16 x 24 video, 8 patches a latent.
  const models::nn::TileGrid grid = models::nn::encode_tile_grid({16, 24, 8, 8}, spec->spatial_factor());
  const Tensor tiled = seam->encode(video, grid), want = unbatched(reference("latents_tiled"));
  check_close(tiled, want, 3e-6, "tiled");
  CHECK(testing::rel_l2(want, unbatched(reference("latents"))) > 1e-2);  // it did tile

  const auto bf16 = spec->load_encoder(weights, {Device::kCPU, DType::kBF16});
  const double err = testing::rel_l2(bf16->encode(video), unbatched(reference("latents")));
  MESSAGE("bfloat16: Wan 2.2 VAE encode relative L2 " << err);
  // diffusers' own bfloat16 encode is 1.1e-2 from its float32 one.
  CHECK(err < 2e-2);
  CHECK(err > 1e-5);

  // Whole patches and latents only.
  CHECK_THROWS_WITH_AS(enc.encode(Tensor::zeros({3, 1, 24, 48})), doctest::Contains("multiples of 16"), RuntimeFailure);
  CHECK_THROWS_AS(enc.encode(Tensor::zeros({12, 1, 32, 48})), RuntimeFailure);  // patches are not the input
  CHECK_THROWS_WITH_AS(enc.encode(video, models::nn::encode_tile_grid({16, 20, 8, 8}, 16)),
                       doctest::Contains("20 patches"), RuntimeFailure);
}

TEST_CASE("Wan 2.2 TI2V-5B's published VAE config: z_dim 48, 16 pixels a latent, 3 channels out") {
  const std::string path = std::string(DITGEN_SOURCE_DIR) + "/configs/models/Wan2.2-TI2V-5B-Diffusers/vae/config.json";
  const auto spec = models::vae_spec(io::read_json_file(path), path);
  CHECK(spec->latent_channels() == 48);
  CHECK(spec->spatial_factor() == 16);
  CHECK(spec->temporal_factor() == 4);
  CHECK(spec->out_channels() == 3);
  CHECK(spec->patch_size() == 2);
  CHECK(spec->normalization().mean.size() == 48);
  CHECK(spec->normalization().std[47] == doctest::Approx(0.7744));
  const auto& c = dynamic_cast<const models::AutoencoderKLWanSpec&>(*spec).config();
  CHECK(c.is_residual);
  CHECK(c.dims() == std::vector<int64_t>{1024, 1024, 1024, 512, 256});
  // The decoder's weights: post_quant_conv, conv_in, mid, 4 up blocks, conv_out.
  CHECK(spec->decoder_params() > 0);
  // A 480 x 832 decode's estimate is positive and grows with the size.
  CHECK(spec->decode_bytes(30, 52) > 0.0);
  CHECK(spec->decode_bytes(44, 80) > spec->decode_bytes(30, 52));
}

TEST_CASE("Wan 2.2 VAE config errors name the file and key") {
  const nlohmann::json base = io::read_json_file(config_path());
  auto parse = [](const nlohmann::json& cfg) {
    return models::AutoencoderKLWanConfig::from_json(cfg, "x/vae/config.json");
  };
  CHECK_NOTHROW(parse(base));
  nlohmann::json cfg = base;
  cfg["patch_size"] = 4;
  cfg["in_channels"] = cfg["out_channels"] = 48;
  cfg["scale_factor_spatial"] = 32;
  CHECK_THROWS_WITH_AS(parse(cfg), doctest::Contains("not supported yet: x/vae/config.json: patch_size 4"), ConfigError);
  cfg = base;
  cfg["patch_size"] = 0;
  CHECK_THROWS_WITH_AS(parse(cfg), doctest::Contains("x/vae/config.json: patch_size"), ModelError);
  cfg = base;
  cfg["patch_size"] = "2";
  CHECK_THROWS_WITH_AS(parse(cfg), doctest::Contains("patch_size"), ModelError);
  cfg = base;
  cfg["out_channels"] = 10;
  CHECK_THROWS_WITH_AS(parse(cfg), doctest::Contains("out_channels: 10 is not a multiple of patch_size^2 = 4"),
                       ModelError);
  cfg = base;
  cfg["in_channels"] = 3;
  CHECK_THROWS_WITH_AS(parse(cfg), doctest::Contains("in_channels: 3"), ModelError);
  cfg = base;
  cfg["scale_factor_spatial"] = 8;  // Wan 2.1's: the patches are forgotten
  CHECK_THROWS_WITH_AS(parse(cfg), doctest::Contains("scale_factor_spatial: 8, but the decoder upsamples by 16"),
                       ModelError);
  cfg = base;
  cfg["is_residual"] = "yes";
  CHECK_THROWS_WITH_AS(parse(cfg), doctest::Contains("is_residual"), ModelError);
  cfg = base;
  cfg["dim_mult"] = {1, 2, 4, 3};  // up block 0: 12 channels cannot repeat into 12 x 8 / 16
  CHECK_THROWS_WITH_AS(parse(cfg), doctest::Contains("dim_mult"), ModelError);
  cfg = base;
  cfg["dim_mult"] = {1, 8, 8, 2};  // the encoder's level 1: 2 channels x 4 pixels cannot average into 16
  cfg["temperal_downsample"] = {false, false, false};
  cfg["scale_factor_temporal"] = 1;
  CHECK_THROWS_WITH_AS(parse(cfg), doctest::Contains("dim_mult: down block 1's AvgDown3D"), ModelError);
  cfg = base;
  cfg["dim_mult"] = {1, 1, 1, 4};  // up block 1 (upsample2d): 4 channels into 1 x 4: one repeat each
  cfg["temperal_downsample"] = {false, false, true};
  cfg["scale_factor_temporal"] = 2;
  CHECK_THROWS_WITH_AS(parse(cfg), doctest::Contains("not supported yet: x/vae/config.json: is_residual true"),
                       ConfigError);

  // Accepted: Wan 2.2's clip_output false (diffusers 0.42.1 ignores it and clamps; so does the pipeline).
  cfg = base;
  cfg["clip_output"] = false;
  CHECK_NOTHROW(parse(cfg));
  cfg["patch_size"] = nullptr;  // no patches: then 12 channels in and out are the image's
  cfg["scale_factor_spatial"] = 8;
  CHECK(parse(cfg).image_channels() == 12);
}

TEST_CASE("Wan 2.2 VAE weights are validated against config.json: Wan 2.1's layout is refused, naming a tensor") {
  const auto weights = io::WeightStore::open_dir(vae_dir());
  auto cfg = fixture_config();
  cfg.is_residual = false;  // Wan 2.1's upsamplers.0. names and C/2 channels
  CHECK_THROWS_WITH_AS(models::AutoencoderKLWan::load(weights, cfg), doctest::Contains("upsamplers.0"), ModelError);
  CHECK_THROWS_AS(models::AutoencoderKLWanEncoder::load(weights, cfg), ModelError);
}

TEST_CASE("Wan 2.2 VAE: the release's tensor names (wan2.2_vae.safetensors) map to diffusers' as convert_vae_22 does") {
  // Every tensor of the fixture VAE under its release name (the fixture
  // script checks them against diffusers' convert_vae_22 renaming).
  const nlohmann::json names = io::read_json_file(testing::fixture_dir("wan22_vae") + "/reference/original_names.json");
  REQUIRE(names.size() > 100);
  const auto spec = models::vae_spec(io::read_json_file(config_path()), config_path());
  const io::SingleFileOptions options = spec->single_file_options();
  CHECK(options.other_naming_probe == "decoder.conv1.weight");
  REQUIRE(options.rename);
  const auto weights = io::WeightStore::open_dir(vae_dir());
  for (const auto& [original, diffusers] : names.items()) {
    CAPTURE(original);
    CHECK(options.rename(original) == diffusers.get<std::string>());
    CHECK(weights.contains(diffusers.get<std::string>()));
  }
  for (const char* foreign : {"decoder.upsamples.1.residual.0.gamma",        // Wan 2.1's flat list
                              "decoder.upsamples.x.upsamples.0.residual.0.gamma", "encoder.downsamples.0.resample.1.weight",
                              "decoder.upsamples.0.upsamples.1.avg_shortcut.weight", "decoder.conv1.gamma"})
    CHECK_FALSE(models::wan22_vae_original_to_diffusers(foreign));
}
