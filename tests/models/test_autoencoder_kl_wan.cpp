// Wan VAE decoder (AutoencoderKLWan) against diffusers 0.42.1 on the
// committed fixture tests/fixtures/wan_tiny (docs/wan-fixtures.md): the
// decode of a 3-latent-frame video before the clamp, the seam's stream fed
// one latent frame at a time (the causal cache: 1, 4, 4 frames), the
// pipeline's frames from its VAE input, the spec (frames 1 + 4k, per-channel
// normalisation), config errors and weight validation. Every reference comes
// from diffusers, never from ditgen.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "fixture.h"
#include "io/model_dir.h"
#include "models/autoencoder_kl_wan.h"
#include "models/registry.h"
#include "ops/ops.h"
#include "../ops/test_helpers.h"
#include "util/error.h"

using namespace ditgen;

namespace {

std::string vae_dir() { return testing::fixture_dir("wan_tiny") + "/vae"; }
std::string published(const std::string& model) {
  return std::string(DITGEN_SOURCE_DIR) + "/configs/models/" + model + "/vae/config.json";
}

models::AutoencoderKLWanConfig fixture_config() {
  const std::string path = vae_dir() + "/config.json";
  return models::AutoencoderKLWanConfig::from_json(io::read_json_file(path), path);
}

models::AutoencoderKLWan load_vae(DType dtype = DType::kF32) {
  return models::AutoencoderKLWan::load(io::WeightStore::open_dir(vae_dir()), fixture_config(), {Device::kCPU, dtype});
}

Tensor reference(const std::string& name) {
  return testing::fixture_tensor("wan_tiny", "vae_decode.safetensors", name);
}

// Output frames [first, first + n) of a (1, C, F, H, W) video as (n, C, H, W).
Tensor frames_of(const Tensor& video, int64_t first, int64_t n) {
  const int64_t c = video.dim(1), f = video.dim(2), hw = video.dim(3) * video.dim(4);
  Tensor out = Tensor::empty({n, c, video.dim(3), video.dim(4)});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      std::memcpy(out.data() + (i * c + ch) * hw, video.data() + (ch * f + first + i) * hw, sizeof(float) * hw);
  return out;
}

// Latent frames [first, first + n) of a (B, C, F, h, w) tensor's sample b as (C, n, h, w).
Tensor latent_chunk(const Tensor& z, int64_t b, int64_t first, int64_t n) {
  const int64_t c = z.dim(1), f = z.dim(2), hw = z.dim(3) * z.dim(4);
  Tensor out = Tensor::empty({c, n, z.dim(3), z.dim(4)});
  for (int64_t ch = 0; ch < c; ++ch)
    std::memcpy(out.data() + ch * n * hw, z.data() + ((b * c + ch) * f + first) * hw, sizeof(float) * n * hw);
  return out;
}

nlohmann::json fixture_json() { return io::read_json_file(vae_dir() + "/config.json"); }

models::AutoencoderKLWanConfig parse(const nlohmann::json& cfg) {
  return models::AutoencoderKLWanConfig::from_json(cfg, "x/vae/config.json");
}

}  // namespace

TEST_CASE("Wan VAE decode matches diffusers: float32, 3 latent frames of 3x5 -> 9 frames of 24x40") {
  const auto vae = load_vae();
  CHECK(vae.config().spatial_factor() == 8);
  CHECK(vae.config().temporal_factor() == 4);
  // 1 conv_in + 4 mid + 4 up blocks x 2 resnets x 2 + 2 time convs + 1 conv_out.
  CHECK(vae.causal_convs() == 24);
  const Tensor z = reference("z");

  // Staged: post_quant_conv (1x1x1) alone, from the file's weights.
  {
    const auto w = io::WeightStore::open_dir(vae_dir());
    const Tensor pw = w.load("post_quant_conv.weight").clone(), pb = w.load("post_quant_conv.bias").clone();
    const Tensor got = ops::conv3d(z, pw, &pb, {1, 1, 1}, {0, 0, 0});
    const Tensor ref = reference("post_quant_conv");
    REQUIRE(got.shape() == ref.shape());
    const double err = testing::rel_l2(got, ref);
    MESSAGE("post_quant_conv relative L2 " << err);
    CHECK(err <= 1e-6);
  }

  const Tensor y = vae.decode(z), ref = reference("decoded_raw");
  REQUIRE(y.shape() == ref.shape());
  REQUIRE(y.shape() == Shape{1, 3, 9, 24, 40});
  const double l2 = testing::rel_l2(y, ref), mx = testing::max_rel(y, ref);
  MESSAGE("Wan VAE decode (before the clamp) relative L2 " << l2 << ", max|d|/max|ref| " << mx);
  CHECK(l2 <= 1e-5);
  CHECK(mx <= 1e-5);
}

TEST_CASE("Wan VAE stream: one latent frame per next() gives 1, 4, 4 frames = diffusers' chunked decode") {
  const auto spec = models::vae_spec(fixture_json(), vae_dir() + "/config.json");
  CHECK(std::string(spec->family()) == "autoencoder_kl_wan");
  REQUIRE(spec->chunk_latent_frames() == 1);
  const auto decoder = spec->load(io::WeightStore::open_dir(vae_dir()), models::Placement{});
  const Tensor z = reference("z"), ref = reference("decoded_raw");

  auto stream = decoder->begin();
  const int64_t expect_frames[3] = {1, 4, 4};
  int64_t first = 0;
  std::vector<Tensor> one_by_one;
  for (int64_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    const Tensor out = stream->next(latent_chunk(z, 0, i, 1));  // (frames, 3, 24, 40)
    REQUIRE(out.shape() == Shape{expect_frames[i], 3, 24, 40});
    CHECK(spec->frames_of(i + 1) == first + out.dim(0));
    const Tensor want = frames_of(ref, first, out.dim(0));
    const double err = testing::rel_l2(out, want);
    MESSAGE("latent frame " << i << " -> output frames " << first << ".." << first + out.dim(0) - 1
                            << ": relative L2 " << err);
    CHECK(err <= 1e-5);
    one_by_one.push_back(out);
    first += out.dim(0);
  }
  CHECK(first == 9);

  // All three latent frames in one call: the stream still runs them one by
  // one through its cache, so the result is the same, bit for bit.
  const Tensor all = decoder->begin()->next(latent_chunk(z, 0, 0, 3));
  REQUIRE(all.shape() == Shape{9, 3, 24, 40});
  int64_t at = 0;
  bool same = true;
  for (const Tensor& t : one_by_one)
    for (int64_t j = 0; j < t.numel(); ++j) same = same && t[j] == all[at++];
  CHECK(same);

  // Causality: a fresh stream fed frames 0..1 gives exactly the first 5.
  auto s2 = decoder->begin();
  CHECK(s2->next(latent_chunk(z, 0, 0, 2)).dim(0) == 5);
  CHECK_THROWS_AS(s2->next(Tensor::zeros({6, 1, 4, 5})), RuntimeFailure);  // another latent grid
  CHECK_THROWS_AS(decoder->begin()->next(Tensor::zeros({5, 1, 3, 5})), RuntimeFailure);  // not z_dim channels
}

TEST_CASE("Wan VAE through the seam reproduces WanPipeline's frames (normalisation, decode, clamp)") {
  const auto spec = models::vae_spec(fixture_json(), vae_dir() + "/config.json");
  const models::LatentNormalization norm = spec->normalization();
  REQUIRE(norm.per_channel());
  REQUIRE(norm.mean.size() == 6);
  const Tensor latents = testing::fixture_tensor("wan_tiny", "expected.safetensors", "latents_unipc");
  const Tensor vae_input = testing::fixture_tensor("wan_tiny", "expected.safetensors", "vae_input_unipc");
  const Tensor frames = testing::fixture_tensor("wan_tiny", "expected.safetensors", "frames_unipc");  // [B, F, C, H, W]
  // Pipeline::decode's un-normalisation: latents / (1 / std) + mean.
  const int64_t per_channel = latents.dim(2) * latents.dim(3) * latents.dim(4);
  double max_in = 0;
  for (int64_t i = 0; i < latents.numel(); ++i) {
    const size_t c = static_cast<size_t>((i / per_channel) % latents.dim(1));
    const float z = latents[i] / (1.0f / norm.std[c]) + norm.mean[c];
    max_in = std::max(max_in, static_cast<double>(std::fabs(z - vae_input[i])));
  }
  CHECK(max_in == 0.0);

  const auto decoder = spec->load(io::WeightStore::open_dir(vae_dir()), models::Placement{});
  for (int64_t b = 0; b < 2; ++b) {
    CAPTURE(b);
    auto stream = decoder->begin();
    Tensor got = Tensor::empty({9, 3, 48, 80});
    int64_t at = 0;
    for (int64_t i = 0; i < vae_input.dim(2); ++i) {
      const Tensor out = stream->next(latent_chunk(vae_input, b, i, 1));
      for (int64_t j = 0; j < out.numel(); ++j) got[at++] = std::clamp(out[j] / 2.0f + 0.5f, 0.0f, 1.0f);
    }
    REQUIRE(at == got.numel());
    const Tensor want = frames.slice0(b, b + 1).reshape({9, 3, 48, 80});
    double max_abs = 0;
    for (int64_t j = 0; j < want.numel(); ++j) max_abs = std::max(max_abs, static_cast<double>(std::fabs(got[j] - want[j])));
    MESSAGE("sample " << b << ": frames max|d| " << max_abs << ", relative L2 " << testing::rel_l2(got, want));
    CHECK(max_abs < 1e-5);
  }
}

TEST_CASE("Wan VAE decode with bfloat16 convolution weights (model.vae_dtype) stays near diffusers' float32") {
  const auto vae = load_vae(DType::kBF16);
  const double err = testing::rel_l2(vae.decode(reference("z")), reference("decoded_raw"));
  MESSAGE("bfloat16: Wan VAE decode relative L2 " << err);
  // diffusers' own bfloat16 decode of this fixture (the whole model cast to
  // bfloat16) is 2.5e-2 from its float32 one; ditgen rounds only the
  // convolutions' operands (1.9e-2).
  CHECK(err < 3e-2);
  CHECK(err > 1e-5);  // bfloat16 arithmetic really ran
}

TEST_CASE("Wan VAE spec: published configs, frames 1 + 4k, normalisation") {
  for (const std::string model : {"Wan2.1-T2V-1.3B-Diffusers", "Wan2.1-T2V-14B-Diffusers", "Wan2.2-T2V-A14B-Diffusers"}) {
    CAPTURE(model);
    const auto spec = models::vae_spec(io::read_json_file(published(model)), published(model));
    CHECK(spec->latent_channels() == 16);
    CHECK(spec->out_channels() == 3);
    CHECK(spec->spatial_factor() == 8);
    CHECK(spec->temporal_factor() == 4);
    CHECK(spec->chunk_latent_frames() == 1);
    CHECK(spec->force_upcast());
    CHECK(spec->frames_of(21) == 81);
    CHECK(spec->latent_frames_of(81) == 21);
    const auto norm = spec->normalization();
    REQUIRE(norm.mean.size() == 16);
    REQUIRE(norm.std.size() == 16);
    CHECK(norm.mean[7] == doctest::Approx(1.5508));
    CHECK(norm.std[15] == doctest::Approx(1.916));
    const auto& c = dynamic_cast<const models::AutoencoderKLWanSpec&>(*spec).config();
    CHECK(c.dims() == std::vector<int64_t>{384, 384, 384, 192, 96});
  }
  // Wan 2.2 TI2V-5B's VAE (residual blocks, patchify): tests/models/test_autoencoder_kl_wan22.cpp.

  const auto spec = models::vae_spec(fixture_json(), vae_dir() + "/config.json");
  CHECK_NOTHROW(spec->check_frames(9, "run.json: generate.frames"));
  CHECK_NOTHROW(spec->check_frames(1, "run.json: generate.frames"));
  CHECK_THROWS_WITH_AS(spec->check_frames(10, "run.json: generate.frames"),
                       doctest::Contains("run.json: generate.frames: 10 frames"), ConfigError);
  CHECK_THROWS_WITH_AS(spec->check_frames(10, "run.json: generate.frames"), doctest::Contains("9 or 13"), ConfigError);
  CHECK_THROWS_WITH_AS(spec->check_frames(0, "f"), doctest::Contains("1 + 4k"), ConfigError);
}

TEST_CASE("Wan VAE config errors name the file and key") {
  auto expect_model_error = [](nlohmann::json cfg, const std::string& text) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(parse(cfg), doctest::Contains(text.c_str()), ModelError);
  };
  auto expect_not_supported = [](nlohmann::json cfg, const std::string& text) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(parse(cfg), doctest::Contains(("not supported yet: x/vae/config.json: " + text).c_str()), ConfigError);
  };
  nlohmann::json cfg = fixture_json();
  CHECK_NOTHROW(parse(cfg));

  cfg = fixture_json();
  cfg["_class_name"] = "AutoencoderKL";
  expect_model_error(cfg, "x/vae/config.json: _class_name: not an AutoencoderKLWan");
  cfg = fixture_json();
  cfg["latents_mean"] = {0.0, 1.0};
  expect_model_error(cfg, "x/vae/config.json: latents_mean: expected z_dim = 6 values, got 2");
  cfg = fixture_json();
  cfg["latents_std"][2] = 0.0;
  expect_model_error(cfg, "latents_std[2]");
  cfg = fixture_json();
  cfg["latents_std"][1] = "2";
  expect_model_error(cfg, "latents_std[1]: expected a number");
  cfg = fixture_json();
  cfg.erase("latents_mean");  // diffusers' default has 16 values, z_dim is 6
  expect_model_error(cfg, "latents_mean: expected z_dim = 6 values, got 16");
  cfg = fixture_json();
  cfg["temperal_downsample"] = {false, true};
  expect_model_error(cfg, "temperal_downsample: expected 3 entries");
  cfg = fixture_json();
  cfg["dim_mult"] = {1, 0, 4, 4};
  expect_model_error(cfg, "dim_mult[1]");
  cfg = fixture_json();
  cfg["scale_factor_spatial"] = 16;
  expect_model_error(cfg, "scale_factor_spatial: 16, but the decoder upsamples by 8");
  cfg = fixture_json();
  cfg["scale_factor_temporal"] = 8;
  expect_model_error(cfg, "scale_factor_temporal: 8");
  cfg = fixture_json();
  cfg["base_dim"] = "4";
  expect_model_error(cfg, "base_dim");
  cfg = fixture_json();
  cfg["mid_block_attention"] = true;  // a key diffusers' AutoencoderKLWan does not take
  expect_model_error(cfg, "x/vae/config.json: mid_block_attention: not a key diffusers' AutoencoderKLWan takes");

  cfg = fixture_json();
  cfg["patch_size"] = 2;  // 3 channels are not whole 2x2 patches
  expect_model_error(cfg, "x/vae/config.json: in_channels: 3 is not a multiple of patch_size^2 = 4");
  cfg = fixture_json();
  cfg["attn_scales"] = {0.5};
  expect_not_supported(cfg, "attn_scales [0.5]");
  cfg = fixture_json();
  cfg["dropout"] = 0.1;
  expect_not_supported(cfg, "dropout 0.1");

  // Accepted: what the published configs carry (clip_output false: Wan
  // 2.2's; diffusers 0.42.1 ignores it and clamps, as the pipeline does).
  cfg = fixture_json();
  cfg["clip_output"] = false;
  CHECK_NOTHROW(parse(cfg));
  cfg["clip_output"] = true;
  cfg["patch_size"] = nullptr;
  cfg["decoder_base_dim"] = nullptr;
  cfg["_name_or_path"] = "somewhere";
  CHECK_NOTHROW(parse(cfg));
  cfg["force_upcast"] = false;
  CHECK_FALSE(parse(cfg).force_upcast);
}

TEST_CASE("Wan VAE weights are validated against config.json before loading") {
  const auto weights = io::WeightStore::open_dir(vae_dir());
  const auto cfg = fixture_config();
  auto bad = cfg;
  bad.num_res_blocks = 2;  // the file holds 2 resnets per up block
  CHECK_THROWS_WITH_AS(models::AutoencoderKLWan::load(weights, bad), doctest::Contains("resnets.2"), ModelError);
  bad = cfg;
  bad.num_res_blocks = 0;  // the file's resnets.1 are unaccounted for
  CHECK_THROWS_WITH_AS(models::AutoencoderKLWan::load(weights, bad), doctest::Contains("resnets.1"), ModelError);
  bad = cfg;
  bad.temperal_downsample = {true, true, false};  // up block 2 would need a time conv, up block 0 would have none
  CHECK_THROWS_AS(models::AutoencoderKLWan::load(weights, bad), ModelError);
  bad = cfg;
  bad.base_dim = bad.decoder_base_dim = 8;
  CHECK_THROWS_WITH_AS(models::AutoencoderKLWan::load(weights, bad), doctest::Contains("shape"), ModelError);
  bad = cfg;
  bad.z_dim = 4;
  CHECK_THROWS_WITH_AS(models::AutoencoderKLWan::load(weights, bad), doctest::Contains("post_quant_conv.weight"),
                       ModelError);
  const auto vae = models::AutoencoderKLWan::load(weights, cfg);
  CHECK_THROWS_AS(vae.decode(Tensor::zeros({1, 4, 2, 3, 5})), RuntimeFailure);
}
