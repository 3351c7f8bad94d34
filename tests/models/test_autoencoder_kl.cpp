// VAE decoder against diffusers' AutoencoderKL.decode on the committed
// fixtures (float32 weights, and float16 weights upcast by both sides), plus
// the legacy attention names of pre-0.14 checkpoints and config errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "fixture.h"
#include "io/model_dir.h"
#include "models/autoencoder_kl.h"
#include "../ops/test_helpers.h"
#include "util/error.h"

using namespace ditgen;

namespace {

models::AutoencoderKL load_vae(const std::string& dir, DType dtype = DType::kF32) {
  auto cfg = models::AutoencoderKLConfig::from_json(io::read_json_file(dir + "/config.json"), dir + "/config.json");
  return models::AutoencoderKL::load(io::WeightStore::open_dir(dir), cfg, {Device::kCPU, dtype});
}

// PSNR of decoded images in [-1, 1] (as pixel values 0..255, unquantised).
double psnr(const Tensor& got, const Tensor& ref) {
  double mse = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double d = 127.5 * (std::clamp(got[i], -1.0f, 1.0f) - std::clamp(ref[i], -1.0f, 1.0f));
    mse += d * d;
  }
  mse /= static_cast<double>(ref.numel());
  return 10.0 * std::log10(255.0 * 255.0 / mse);
}

void check_decode(const models::AutoencoderKL& vae, const std::string& fixture) {
  Tensor z = testing::fixture_tensor(fixture, "expected.safetensors", "vae_input");
  Tensor ref = testing::fixture_tensor(fixture, "expected.safetensors", "vae_output");
  Tensor y = vae.decode(z);
  REQUIRE(y.shape() == ref.shape());
  const double err = testing::max_rel(y, ref);
  MESSAGE(fixture << ": VAE decode max|d|/max|ref| " << err << ", relative L2 " << testing::rel_l2(y, ref));
  CHECK(err < 1e-4);
}

}  // namespace

TEST_CASE("VAE decode matches diffusers: float32, 10x10 latents -> 20x20") {
  auto vae = load_vae(testing::fixture_dir("dit_odd") + "/vae");
  CHECK(vae.config().scale_factor() == 2);
  CHECK(vae.config().scaling_factor == doctest::Approx(0.18215));
  check_decode(vae, "dit_odd");
}

TEST_CASE("VAE decode matches diffusers: float16 weights") {
  check_decode(load_vae(testing::fixture_dir("dit_small_bf16") + "/vae"), "dit_small_bf16");
}

TEST_CASE("VAE decode in bfloat16 (model.vae_dtype) stays near diffusers' float32") {
  for (const std::string fixture : {"dit_odd", "dit_small_bf16"}) {
    CAPTURE(fixture);
    const auto vae = load_vae(testing::fixture_dir(fixture) + "/vae", DType::kBF16);
    const Tensor z = testing::fixture_tensor(fixture, "expected.safetensors", "vae_input");
    const Tensor ref = testing::fixture_tensor(fixture, "expected.safetensors", "vae_output");
    const double err = testing::rel_l2(vae.decode(z), ref);
    MESSAGE(fixture << " bfloat16: VAE decode relative L2 " << err);
    CHECK(err < 2e-2);
    CHECK(err > 1e-5);  // bfloat16 arithmetic really ran
  }
}

TEST_CASE("VAE decode in bfloat16 of the default video model's latents: PSNR against float32 decode") {
  // The diffusers parity fixture's final latents (2 clips of 16 frames),
  // decoded frame by frame by samples/latte-shapes/vae in both dtypes.
  const std::string dir = std::string(DITGEN_SOURCE_DIR) + "/samples/latte-shapes/vae";
  const std::string fixture = std::string(DITGEN_SOURCE_DIR) + "/tests/fixtures/latte_shapes_reference";
  const Tensor latents = io::SafetensorsFile::open(fixture + "/expected.safetensors")->load("latents");
  const auto f32 = load_vae(dir), bf16 = load_vae(dir, DType::kBF16);
  const float sf = f32.config().scaling_factor;
  // (2, 4, 16, 8, 8) -> (32, 4, 8, 8) frames, divided by the scaling factor.
  const int64_t clips = latents.dim(0), c = latents.dim(1), frames = latents.dim(2), hw = 64;
  Tensor z = Tensor::empty({clips * frames, c, 8, 8});
  for (int64_t b = 0; b < clips; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t f = 0; f < frames; ++f)
        for (int64_t i = 0; i < hw; ++i)
          z[((b * frames + f) * c + ch) * hw + i] = latents[((b * c + ch) * frames + f) * hw + i] / sf;
  const double db = psnr(bf16.decode(z), f32.decode(z));
  MESSAGE("default video model: bfloat16 VAE decode against float32, PSNR " << db << " dB");
  CHECK(db > 40.0);
}

TEST_CASE("VAE accepts the legacy attention names of pre-0.14 checkpoints (1x1 conv shaped)") {
  // Rewrite the fixture with query/key/value/proj_attn as [C, C, 1, 1] tensors.
  const std::string src = testing::fixture_dir("dit_odd") + "/vae";
  const auto dir = std::filesystem::temp_directory_path() / ("ditgen_test_vae_legacy_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto weights = io::WeightStore::open_dir(src);
  const std::string att = "decoder.mid_block.attentions.0.";
  const std::pair<std::string, std::string> renames[] = {
      {"to_q", "query"}, {"to_k", "key"}, {"to_v", "value"}, {"to_out.0", "proj_attn"}};
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& name : weights.names()) {
    std::string out = name;
    Tensor t = weights.load(name);
    for (const auto& [now, old] : renames)
      if (name.rfind(att + now + ".", 0) == 0) {
        out = att + old + name.substr((att + now).size());
        if (t.ndim() == 2) t = t.reshape({t.dim(0), t.dim(1), 1, 1});
      }
    tensors.emplace_back(out, t);
  }
  io::write_safetensors((dir / "diffusion_pytorch_model.safetensors").string(), tensors);
  std::filesystem::copy_file(src + "/config.json", dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto legacy = load_vae(dir.string());
  check_decode(legacy, "dit_odd");
  std::filesystem::remove_all(dir);
}

TEST_CASE("VAE config errors name the file and key") {
  const std::string path = testing::fixture_dir("dit_odd") + "/vae/config.json";
  nlohmann::json cfg = io::read_json_file(path);
  cfg["_class_name"] = "VQModel";
  CHECK_THROWS_WITH_AS(models::AutoencoderKLConfig::from_json(cfg, "x/config.json"),
                       doctest::Contains("x/config.json: _class_name: not an AutoencoderKL"), ModelError);
  cfg = io::read_json_file(path);
  cfg["block_out_channels"] = {16, "32"};
  CHECK_THROWS_WITH_AS(models::AutoencoderKLConfig::from_json(cfg, "x/config.json"),
                       doctest::Contains("block_out_channels[1]"), ModelError);
  cfg = io::read_json_file(path);
  cfg["block_out_channels"] = {16, 36};  // not a multiple of norm_num_groups 8
  CHECK_THROWS_WITH_AS(models::AutoencoderKLConfig::from_json(cfg, "x/config.json"), doctest::Contains("norm_num_groups"),
                       ModelError);
  cfg = io::read_json_file(path);
  cfg["up_block_types"] = {"UpDecoderBlock2D", "AttnUpDecoderBlock2D"};
  CHECK_THROWS_WITH_AS(models::AutoencoderKLConfig::from_json(cfg, "x/config.json"), doctest::Contains("up_block_types"),
                       ModelError);
  cfg = io::read_json_file(path);
  cfg["act_fn"] = "gelu";
  CHECK_THROWS_WITH_AS(models::AutoencoderKLConfig::from_json(cfg, "x/config.json"), doctest::Contains("act_fn"), ModelError);
}

TEST_CASE("VAE config: a non-null shift_factor is refused, null or absent is fine") {
  const std::string path = testing::fixture_dir("dit_odd") + "/vae/config.json";
  nlohmann::json cfg = io::read_json_file(path);
  cfg["shift_factor"] = 0.1;
  CHECK_THROWS_WITH_AS(models::AutoencoderKLConfig::from_json(cfg, "x/config.json"),
                       doctest::Contains("x/config.json: shift_factor: not supported yet"), ModelError);
  cfg["shift_factor"] = nullptr;
  CHECK_NOTHROW(models::AutoencoderKLConfig::from_json(cfg, "x/config.json"));
  cfg.erase("shift_factor");
  CHECK_NOTHROW(models::AutoencoderKLConfig::from_json(cfg, "x/config.json"));
}

TEST_CASE("VAE weights are validated against config.json before loading") {
  const std::string dir = testing::fixture_dir("dit_odd") + "/vae";
  auto weights = io::WeightStore::open_dir(dir);
  auto cfg = models::AutoencoderKLConfig::from_json(io::read_json_file(dir + "/config.json"), dir + "/config.json");
  auto bad = cfg;
  bad.block_out_channels = {16, 64};
  CHECK_THROWS_WITH_AS(models::AutoencoderKL::load(weights, bad), doctest::Contains("shape"), ModelError);
  bad = cfg;
  bad.layers_per_block = 2;  // the file holds 2 resnets per up block
  CHECK_THROWS_WITH_AS(models::AutoencoderKL::load(weights, bad), doctest::Contains("resnets.2"), ModelError);
  bad = cfg;
  bad.layers_per_block = 0;
  CHECK_THROWS_WITH_AS(models::AutoencoderKL::load(weights, bad), doctest::Contains("resnets.1"), ModelError);
  bad = cfg;
  bad.block_out_channels = {32};  // one block: the file's second up block is unaccounted for
  CHECK_THROWS_AS(models::AutoencoderKL::load(weights, bad), ModelError);
  bad = cfg;
  bad.mid_block_add_attention = false;
  CHECK_THROWS_WITH_AS(models::AutoencoderKL::load(weights, bad), doctest::Contains("mid_block_add_attention"),
                       ModelError);
  auto vae = models::AutoencoderKL::load(weights, cfg);
  CHECK_THROWS_AS(vae.decode(Tensor::zeros({1, 3, 4, 4})), RuntimeFailure);
}
