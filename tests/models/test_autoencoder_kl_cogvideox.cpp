// CogVideoX VAE decoder (AutoencoderKLCogVideoX) against diffusers 0.42.1 on
// the committed fixture tests/fixtures/cogvideox_vae (made by
// scripts/fixtures/make_cogvideox_vae_fixtures.py): the spec (factors, frame
// counts 1 + 8k, diffusers' latent chunking), the decode of 1, 3 and 5 latent
// frames on a 4x6 grid through the seam's stream in the spec's chunks, config
// errors and weight validation. Every reference comes from diffusers'
// AutoencoderKLCogVideoX.decode, never from ditgen.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "fixture.h"
#include "io/model_dir.h"
#include "models/autoencoder_kl_cogvideox.h"
#include "models/registry.h"
#include "temp_dir.h"
#include "../ops/test_helpers.h"
#include "util/error.h"

using namespace ditgen;

namespace {

std::string vae_dir() { return testing::fixture_dir("cogvideox_vae") + "/vae"; }
std::string config_path() { return vae_dir() + "/config.json"; }
nlohmann::json fixture_json() { return io::read_json_file(config_path()); }

std::unique_ptr<models::VaeSpec> fixture_spec() { return models::vae_spec(fixture_json(), config_path()); }

Tensor reference(const std::string& name) {
  return io::SafetensorsFile::open(testing::fixture_dir("cogvideox_vae") + "/reference.safetensors")
      ->load(name)
      .to(DType::kF32)
      .clone();
}

models::AutoencoderKLCogVideoXConfig parse(const nlohmann::json& cfg) {
  return models::AutoencoderKLCogVideoXConfig::from_json(cfg, "x/vae/config.json");
}

// Latent frames [first, first + n) of a (1, C, F, h, w) tensor as (C, n, h, w).
Tensor latent_chunk(const Tensor& z, int64_t first, int64_t n) {
  const int64_t c = z.dim(1), f = z.dim(2), hw = z.dim(3) * z.dim(4);
  Tensor out = Tensor::empty({c, n, z.dim(3), z.dim(4)});
  for (int64_t ch = 0; ch < c; ++ch)
    std::memcpy(out.data() + ch * n * hw, z.data() + (ch * f + first) * hw, sizeof(float) * n * hw);
  return out;
}

// A video's latents through one stream in `chunks`, the frames put back in
// diffusers' layout (1, C, frames, H, W).
Tensor stream_decode(const models::VaeDecoder& decoder, const Tensor& z, const std::vector<int64_t>& chunks) {
  auto stream = decoder.begin();
  std::vector<Tensor> parts;
  int64_t first = 0, frames = 0;
  for (const int64_t n : chunks) {
    parts.push_back(stream->next(latent_chunk(z, first, n)));  // (t, C, H, W)
    first += n;
    frames += parts.back().dim(0);
  }
  const int64_t c = parts[0].dim(1), h = parts[0].dim(2), w = parts[0].dim(3), hw = h * w;
  Tensor out = Tensor::empty({1, c, frames, h, w});
  int64_t at = 0;
  for (const Tensor& p : parts) {
    for (int64_t t = 0; t < p.dim(0); ++t)
      for (int64_t ch = 0; ch < c; ++ch)
        std::memcpy(out.data() + (ch * frames + at + t) * hw, p.data() + (t * c + ch) * hw, sizeof(float) * hw);
    at += p.dim(0);
  }
  return out;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

}  // namespace

TEST_CASE("CogVideoX VAE spec: factors, frames 1 + 8k, diffusers' chunking of the latent frames") {
  const auto spec = fixture_spec();
  CHECK(std::string(spec->family()) == "autoencoder_kl_cogvideox");
  CHECK(spec->latent_channels() == 4);
  CHECK(spec->out_channels() == 3);
  CHECK(spec->spatial_factor() == 8);
  CHECK(spec->temporal_factor() == 4);
  CHECK(spec->frame_step() == 8);
  CHECK(spec->chunk_latent_frames() == 2);
  CHECK_FALSE(spec->force_upcast());  // CogVideoXPipeline ignores force_upcast
  const models::LatentNormalization norm = spec->normalization();
  CHECK_FALSE(norm.per_channel());
  CHECK(norm.scaling_factor == doctest::Approx(1.15258426));

  // _decode's batches: pairs, the odd remainder in the first.
  using V = std::vector<int64_t>;
  CHECK(spec->latent_chunks(1) == V{1});
  CHECK(spec->latent_chunks(2) == V{2});
  CHECK(spec->latent_chunks(3) == V{3});
  CHECK(spec->latent_chunks(4) == V{2, 2});
  CHECK(spec->latent_chunks(5) == V{3, 2});
  CHECK(spec->latent_chunks(13) == V{3, 2, 2, 2, 2, 2});

  CHECK(spec->frames_of(1) == 1);
  CHECK(spec->frames_of(3) == 9);
  CHECK(spec->frames_of(5) == 17);
  CHECK(spec->frames_of(13) == 49);
  CHECK(spec->latent_frames_of(49) == 13);
  CHECK_NOTHROW(spec->check_frames(49, "run.json: generate.frames"));
  CHECK_NOTHROW(spec->check_frames(1, "run.json: generate.frames"));
  CHECK_NOTHROW(spec->check_frames(9, "run.json: generate.frames"));
  // 45 frames = 12 latent frames: an even count, which decodes to 48.
  CHECK_THROWS_WITH_AS(spec->check_frames(45, "run.json: generate.frames"),
                       doctest::Contains("run.json: generate.frames: 45 frames"), ConfigError);
  CHECK_THROWS_WITH_AS(spec->check_frames(45, "f"), doctest::Contains("1 + 8k"), ConfigError);
  CHECK_THROWS_WITH_AS(spec->check_frames(45, "f"), doctest::Contains("41 or 49"), ConfigError);

  // A chunk's own frame count (CogVideoXUpsample3D twice).
  const auto& c = dynamic_cast<const models::AutoencoderKLCogVideoXSpec&>(*spec).config();
  CHECK(c.chunk_frames(1) == 1);
  CHECK(c.chunk_frames(2) == 8);
  CHECK(c.chunk_frames(3) == 9);
}

TEST_CASE("CogVideoX VAE decode matches diffusers: 1, 3, 5 latent frames of 4x6 through the stream's chunks") {
  const auto spec = fixture_spec();
  const auto decoder = spec->load(io::WeightStore::open_dir(vae_dir()), models::Placement{});
  // Tolerance: max |d| <= 1e-4 on outputs of std ~1 and max |x| ~11 (float32
  // through 16 resnets, with other summation orders in the convolutions and
  // the GroupNorm statistics summed in double). Measured: 6.7e-6 (1 latent
  // frame), 1.1e-5 (3), 8.6e-6 (5: chunks {3, 2}); relative L2 about 8e-7.
  for (const int64_t n : {1, 3, 5}) {
    CAPTURE(n);
    const Tensor z = reference("latents_f" + std::to_string(n));
    const Tensor ref = reference("sample_f" + std::to_string(n));
    REQUIRE(ref.shape() == Shape{1, 3, spec->frames_of(n), 32, 48});
    const std::vector<int64_t> chunks = spec->latent_chunks(n);
    const Tensor got = stream_decode(*decoder, z, chunks);
    REQUIRE(got.shape() == ref.shape());
    const double err = max_abs_diff(got, ref);
    MESSAGE(n << " latent frames (" << chunks.size() << " chunks): max|d| " << err << ", relative L2 "
              << testing::rel_l2(got, ref));
    CHECK(err <= 1e-4);
  }

  // The whole-video decode (for tests) is the same chunks through one cache.
  const auto cfg = models::AutoencoderKLCogVideoXConfig::from_json(fixture_json(), config_path());
  const auto vae = models::AutoencoderKLCogVideoX::load(io::WeightStore::open_dir(vae_dir()), cfg);
  CHECK(vae.causal_convs() == 1 + 4 + 4 * 2 * 2 + 1);
  const Tensor whole = vae.decode(reference("latents_f5"));
  CHECK(max_abs_diff(whole, reference("sample_f5")) <= 1e-4);

  // The chunking is part of the result: all five latent frames in one call
  // (norm statistics over 17 frames instead of 9 and 8) is another video.
  const Tensor one_chunk = stream_decode(*decoder, reference("latents_f5"), {5});
  REQUIRE(one_chunk.shape() == Shape{1, 3, 17, 32, 48});
  const double apart = max_abs_diff(one_chunk, reference("sample_f5"));
  MESSAGE("5 latent frames in one chunk instead of {3, 2}: max|d| " << apart);
  CHECK(apart > 1e-2);

  // Stream errors: another latent grid after the first chunk, another channel count.
  auto s = decoder->begin();
  CHECK(s->next(latent_chunk(reference("latents_f3"), 0, 3)).dim(0) == 9);
  CHECK_THROWS_AS(s->next(Tensor::zeros({4, 2, 4, 5})), RuntimeFailure);
  CHECK_THROWS_AS(decoder->begin()->next(Tensor::zeros({3, 1, 4, 6})), RuntimeFailure);
}

TEST_CASE("CogVideoX VAE decode with bfloat16 convolution weights stays near diffusers' float32") {
  const auto spec = fixture_spec();
  const auto decoder = spec->load(io::WeightStore::open_dir(vae_dir()), models::Placement{Device::kCPU, DType::kBF16});
  const Tensor ref = reference("sample_f3");
  const double err = testing::rel_l2(stream_decode(*decoder, reference("latents_f3"), spec->latent_chunks(3)), ref);
  MESSAGE("bfloat16: CogVideoX VAE decode relative L2 " << err);
  // Only the convolutions' operands are rounded to bfloat16: measured 8.3e-3.
  CHECK(err < 3e-2);
  CHECK(err > 1e-5);  // bfloat16 arithmetic really ran
}

TEST_CASE("CogVideoX VAE config errors name the file and key") {
  auto expect_model_error = [](nlohmann::json cfg, const std::string& text) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(parse(cfg), doctest::Contains(text.c_str()), ModelError);
  };
  auto expect_not_supported = [](nlohmann::json cfg, const std::string& text) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(parse(cfg), doctest::Contains(("not supported yet: x/vae/config.json: " + text).c_str()),
                         ConfigError);
  };
  nlohmann::json cfg = fixture_json();
  CHECK_NOTHROW(parse(cfg));
  cfg["sample_size"] = 256;  // diffusers 0.30's key (CogVideoX-2b's first config): ignored, as diffusers does
  CHECK_NOTHROW(parse(cfg));
  cfg = fixture_json();
  cfg["layers_per_block"] = 1000000;  // bounded before any tensor name is made
  expect_model_error(cfg, "layers_per_block: expected an integer in [0, 64]");

  cfg = fixture_json();
  cfg["_class_name"] = "AutoencoderKLWan";
  expect_model_error(cfg, "x/vae/config.json: _class_name: not an AutoencoderKLCogVideoX");
  cfg = fixture_json();
  cfg["mid_block_type"] = "CogVideoXMidBlock3D";  // a key diffusers' AutoencoderKLCogVideoX does not take
  expect_model_error(cfg, "x/vae/config.json: mid_block_type: not a key diffusers' AutoencoderKLCogVideoX takes");
  cfg = fixture_json();
  cfg["up_block_types"][1] = "UpDecoderBlock2D";
  expect_model_error(cfg, "x/vae/config.json: up_block_types[1]: \"UpDecoderBlock2D\"");
  cfg = fixture_json();
  cfg["down_block_types"].erase(0);
  expect_model_error(cfg, "down_block_types: 3 blocks for 4 block_out_channels entries");
  cfg = fixture_json();
  cfg["block_out_channels"] = {8, 8, 16, 18};
  expect_model_error(cfg, "norm_num_groups: 4 does not divide block_out_channels[3] = 18");
  cfg = fixture_json();
  cfg["block_out_channels"][0] = 0;
  expect_model_error(cfg, "block_out_channels[0]");
  cfg = fixture_json();
  cfg["temporal_compression_ratio"] = 3;
  expect_model_error(cfg, "temporal_compression_ratio: expected a power of two, got 3");
  cfg = fixture_json();
  cfg["temporal_compression_ratio"] = 16;
  expect_model_error(cfg, "temporal_compression_ratio: 16, but 4 blocks have only 3 upsamplers");
  cfg = fixture_json();
  cfg["latent_channels"] = "4";
  expect_model_error(cfg, "x/vae/config.json: latent_channels");
  cfg = fixture_json();
  cfg["scaling_factor"] = -1.0;
  expect_model_error(cfg, "scaling_factor: expected a positive number");
  cfg = fixture_json();
  cfg["force_upcast"] = "yes";
  expect_model_error(cfg, "force_upcast");

  cfg = fixture_json();
  cfg["use_post_quant_conv"] = true;
  expect_not_supported(cfg, "use_post_quant_conv true");
  cfg = fixture_json();
  cfg["act_fn"] = "gelu";
  expect_not_supported(cfg, "act_fn 'gelu'");
  cfg = fixture_json();
  cfg["shift_factor"] = 0.5;
  expect_not_supported(cfg, "shift_factor 0.5");
  cfg = fixture_json();
  cfg["latents_mean"] = {0.0, 0.0, 0.0, 0.0};
  expect_not_supported(cfg, "latents_mean");

  // Accepted: encoder-side keys, null defaults, metadata.
  cfg = fixture_json();
  cfg["use_quant_conv"] = true;
  cfg["invert_scale_latents"] = true;
  cfg["act_fn"] = "swish";
  cfg["latents_std"] = nullptr;
  cfg["_name_or_path"] = "somewhere";
  cfg["temporal_compression_ratio"] = 4.0;
  CHECK_NOTHROW(parse(cfg));
  cfg["force_upcast"] = false;
  CHECK_FALSE(parse(cfg).force_upcast);
  // The spatial norms' GroupNorm eps is diffusers' fixed 1e-6: norm_eps is the encoder's.
  cfg["norm_eps"] = 1e-3;
  CHECK(parse(cfg).norm_eps == doctest::Approx(1e-3));
}

TEST_CASE("CogVideoX VAE weights are validated against config.json before loading") {
  const auto weights = io::WeightStore::open_dir(vae_dir());
  const auto cfg = models::AutoencoderKLCogVideoXConfig::from_json(fixture_json(), config_path());
  auto bad = cfg;
  bad.layers_per_block = 2;  // the file holds 2 resnets per up block
  CHECK_THROWS_WITH_AS(models::AutoencoderKLCogVideoX::load(weights, bad), doctest::Contains("resnets.2"), ModelError);
  bad = cfg;
  bad.layers_per_block = 0;  // the file's resnets.1 are unaccounted for
  CHECK_THROWS_WITH_AS(models::AutoencoderKLCogVideoX::load(weights, bad),
                       doctest::Contains("holds 'decoder.up_blocks.0.resnets.1."), ModelError);
  bad = cfg;
  bad.latent_channels = 6;
  CHECK_THROWS_WITH_AS(models::AutoencoderKLCogVideoX::load(weights, bad),
                       doctest::Contains("tensor 'decoder.conv_in.conv.weight' has shape [16, 4, 3, 3, 3], expected "
                                         "[16, 6, 3, 3, 3]"),
                       ModelError);

  // A file whose tensor is mis-shaped, or missing, or truncated: ModelError
  // naming the file and the tensor.
  testing::TempDir tmp("ditgen_test_cogvideox_vae");
  const std::string dir = tmp.file("vae"), file = dir + "/diffusion_pytorch_model.safetensors";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(config_path(), dir + "/config.json");
  const std::string victim = "decoder.up_blocks.1.upsamplers.0.conv.weight";
  auto write_without = [&](bool reshape) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const std::string& name : weights.names()) {
      Tensor t = weights.load(name);
      if (name == victim) {
        if (!reshape) continue;
        t = t.reshape({16, 16, 9});
      }
      tensors.emplace_back(name, t);
    }
    io::write_safetensors(file, tensors);
  };
  const auto spec = fixture_spec();
  write_without(true);
  const std::string misshaped = file + ": tensor '" + victim + "' has shape [16, 16, 9], expected [16, 16, 3, 3]";
  CHECK_THROWS_WITH_AS(spec->load(io::WeightStore::open_dir(dir), models::Placement{}),
                       doctest::Contains(misshaped.c_str()), ModelError);
  write_without(false);
  CHECK_THROWS_WITH_AS(spec->load(io::WeightStore::open_dir(dir), models::Placement{}),
                       doctest::Contains(victim.c_str()), ModelError);
  {
    const auto size = std::filesystem::file_size(vae_dir() + "/diffusion_pytorch_model.safetensors");
    std::filesystem::copy_file(vae_dir() + "/diffusion_pytorch_model.safetensors", file,
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::resize_file(file, size / 2);
  }
  CHECK_THROWS_WITH_AS(spec->load(io::WeightStore::open_dir(dir), models::Placement{}), doctest::Contains(file.c_str()),
                       ModelError);

  const auto vae = models::AutoencoderKLCogVideoX::load(weights, cfg);
  CHECK_THROWS_AS(vae.decode(Tensor::zeros({1, 3, 2, 4, 6})), RuntimeFailure);
}
