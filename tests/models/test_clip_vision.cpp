// The CLIP vision encoder against transformers' CLIPVisionModel
// (scripts/fixtures/make_clip_vision_fixtures.py: a tiny random model, 3
// layers, saved with the published "vision_model." names): its
// hidden_states[-2] for two images, in float32 to relL2 1e-6, in bfloat16
// to 2e-2 of transformers' bfloat16 run; from the image files through the
// fixture's CLIPImageProcessor config too; with transformers 5's unprefixed
// names (written here from the published file, last layer and
// post_layernorm left out: the encoder never reads them). Then config.json
// and the checkpoint checks: each a ModelError naming the file and the key
// or tensor.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixture.h"
#include "io/clip_image_processor.h"
#include "io/image_reader.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "models/clip_vision.h"
#include "models/clip_vision_spec.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::models;
namespace fs = std::filesystem;

namespace {

const std::string kDir = testing::fixture_dir("clip_vision");
const std::string kEncoder = kDir + "/image_encoder";

Tensor expected(const std::string& name) {
  return io::SafetensorsFile::open(kDir + "/expected.safetensors")->load(name).to(DType::kF32).clone();
}

double rel_l2(const Tensor& got, const Tensor& ref) {
  REQUIRE(got.shape() == ref.shape());
  double num = 0, den = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ModelError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a ModelError: ") + e.what() + ">";
  }
  return "<no exception>";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A copy of the fixture's encoder in `dir`: its config.json, and its tensors
// renamed by `rename` (an empty name drops the tensor).
void write_encoder(const std::string& dir, const std::function<std::string(const std::string&)>& rename,
                   const std::function<Tensor(const std::string&, const Tensor&)>& edit = nullptr) {
  fs::create_directories(dir);
  fs::copy_file(kEncoder + "/config.json", dir + "/config.json");
  const auto file = io::SafetensorsFile::open(kEncoder + "/model.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : file->names()) {
    const std::string to = rename(name);
    if (to.empty()) continue;
    const Tensor t = file->load(name).clone();
    tensors.emplace_back(to, edit ? edit(name, t) : t);
  }
  io::write_safetensors(dir + "/model.safetensors", tensors);
}

std::string unprefixed(const std::string& name) {
  const std::string root = "vision_model.";
  REQUIRE(name.rfind(root, 0) == 0);
  return name.substr(root.size());
}

}  // namespace

TEST_CASE("clip vision: config.json as transformers writes it, and its counts") {
  const ClipVisionSpec spec = clip_vision_spec(kEncoder);
  const ClipVisionConfig& c = spec.config();
  CHECK(c.hidden_size == 32);
  CHECK(c.num_layers == 3);
  CHECK(c.layers_run() == 2);
  CHECK(c.tokens() == 17);  // (56 / 14)^2 + the class token
  CHECK(c.act == ClipActivation::kGelu);
  // Loaded: class (D) + patch (D*3*14*14) + positions (T*D) + pre-norm (2D),
  // and per layer run 4 (D*D + D) + 2 norms (2D each) + fc1 (F*D + F) + fc2 (D*F + D).
  const int64_t D = 32, F = 64, T = 17;
  const int64_t stem = D + D * 3 * 14 * 14 + T * D + 2 * D;
  const int64_t layer = 4 * (D * D + D) + 4 * D + F * D + F + D * F + D;
  CHECK(spec.param_count() == stem + 2 * layer);
  CHECK(spec.weight_bytes({Device::kCPU, DType::kF32}) == doctest::Approx(4.0 * (stem + 2 * layer)));
  // bfloat16 on the CPU: the GEMM weights halve, the rest stays float32.
  const double matrices = D * 3 * 14 * 14 + 2.0 * (4 * D * D + 2 * F * D);
  CHECK(spec.weight_bytes({Device::kCPU, DType::kBF16}) ==
        doctest::Approx(4.0 * (stem + 2 * layer) - 2.0 * matrices));
  CHECK(spec.encode_bytes({Device::kCPU, DType::kF32}, 2) > 2.0 * T * D * 4);

  // A CLIPConfig (CLIPModel's config.json) with the vision tower inside.
  const nlohmann::json vision = io::read_json_file(kEncoder + "/config.json");
  const ClipVisionConfig nested = ClipVisionConfig::from_json(
      {{"model_type", "clip"}, {"vision_config", vision}, {"text_config", {{"hidden_size", 8}}}}, "clip/config.json");
  CHECK(nested.hidden_size == 32);
  CHECK(nested.tokens() == 17);
}

TEST_CASE("clip vision: a config.json it cannot compute is refused naming file and key") {
  const nlohmann::json good = io::read_json_file(kEncoder + "/config.json");
  auto refused = [&](const std::string& key, const nlohmann::json& value) {
    nlohmann::json cfg = good;
    if (value.is_null())
      cfg.erase(key);
    else
      cfg[key] = value;
    return error_of([&] { ClipVisionConfig::from_json(cfg, "enc/config.json"); });
  };
  // Absent, hidden_act is CLIPVisionConfig's default quick_gelu, which ditgen does not compute.
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"hidden_act", "quick_gelu"}, {"hidden_act", nullptr}, {"hidden_act", 3}, {"num_attention_heads", 5},
           {"hidden_size", -32}, {"hidden_size", "32"}, {"num_hidden_layers", 100000}, {"patch_size", 57},
           {"num_channels", 1}, {"layer_norm_eps", 0}, {"image_size", 1 << 20}, {"model_type", "siglip_vision_model"}}) {
    CAPTURE(key);
    CAPTURE(value.dump());
    const std::string msg = refused(key, value);
    CHECK(contains(msg, "enc/config.json"));
    CHECK(contains(msg, key));
  }
  CHECK(contains(refused("hidden_act", "quick_gelu"), "'quick_gelu' is not an activation"));
  CHECK(contains(refused("hidden_act", "gelu_pytorch_tanh"), "<no exception>"));
}

TEST_CASE("clip vision: float32 hidden_states[-2] equal transformers' (published vision_model. names)") {
  const Tensor pixels = expected("pixel_values");  // (2, 3, 56, 56)
  const Tensor want = expected("hidden_f32");       // (2, 17, 32)
  const auto enc = load_clip_vision(kEncoder, {Device::kCPU, DType::kF32});
  const Tensor got = enc->encode(pixels);
  CHECK(rel_l2(got, want) < 1e-6);
  // The penultimate layer, not the last one.
  CHECK(rel_l2(got, expected("last_f32")) > 0.1);
  // One image as (3, S, S): the same row.
  const Tensor one = enc->encode(pixels.slice0(1, 2).reshape({3, 56, 56}));
  CHECK(one.shape() == Shape{1, 17, 32});
  CHECK(rel_l2(one, want.slice0(1, 2).clone()) < 1e-6);
  // Unpacked GEMM weights (what a caller that encodes once passes): the same.
  const auto unpacked = load_clip_vision(kEncoder, {Device::kCPU, DType::kF32, false});
  CHECK(rel_l2(unpacked->encode(pixels), want) < 1e-6);
  // A wrong input shape is the caller's bug.
  CHECK_THROWS_AS(enc->encode(Tensor::zeros({2, 3, 56, 55})), std::invalid_argument);
  CHECK_THROWS_AS(enc->encode(Tensor::zeros({3, 56})), std::invalid_argument);
}

TEST_CASE("clip vision: from the image files through the image processor, end to end") {
  const io::ClipImageProcessorConfig proc =
      io::read_clip_image_processor_config(kDir + "/image_processor/preprocessor_config.json");
  const Tensor want_pixels = expected("pixel_values"), want = expected("hidden_f32");
  const auto enc = load_clip_vision(kEncoder, {Device::kCPU, DType::kF32});
  int64_t i = 0;
  for (const char* src : {"rgb_97x61.png", "rgb_61x97.png"}) {
    CAPTURE(src);
    const io::InputImage in = io::read_input_image(testing::fixture_dir("images") + "/inputs/" + src);
    const Tensor x = io::clip_image_input(in.image, proc);  // (3, 56, 56)
    const Tensor ref_x = want_pixels.slice0(i, i + 1).reshape({3, 56, 56});
    double worst = 0;
    for (int64_t e = 0; e < x.numel(); ++e) worst = std::max(worst, static_cast<double>(std::abs(x[e] - ref_x[e])));
    CHECK(worst <= 1e-6);
    CHECK(rel_l2(enc->encode(x), want.slice0(i, i + 1).clone()) < 1e-6);
    ++i;
  }
}

TEST_CASE("clip vision: bfloat16 stays within bfloat16's reach of transformers' bfloat16 run") {
  const Tensor pixels = expected("pixel_values");
  for (const bool pack : {true, false}) {  // packed for oneDNN's bfloat16 kernels, or as converted
    CAPTURE(pack);
    const Tensor got = load_clip_vision(kEncoder, {Device::kCPU, DType::kBF16, pack})->encode(pixels);
    const double to_bf16 = rel_l2(got, expected("hidden_bf16")), to_f32 = rel_l2(got, expected("hidden_f32"));
    MESSAGE("bfloat16 relL2: " << to_bf16 << " to transformers' bfloat16, " << to_f32 << " to its float32");
    CHECK(to_bf16 < 2e-2);
    CHECK(to_f32 < 2e-2);
    CHECK(to_f32 > 1e-5);  // it did compute in bfloat16
  }
}

TEST_CASE("clip vision: transformers 5's unprefixed names read the same, without the unread last layer") {
  testing::TempDir tmp("clip_vision");
  const std::string dir = tmp.file("image_encoder");
  // save_pretrained's names; the last layer (index 2) and post_layernorm dropped.
  write_encoder(dir, [](const std::string& name) {
    const std::string to = unprefixed(name);
    return to.rfind("encoder.layers.2.", 0) == 0 || to.rfind("post_layernorm.", 0) == 0 ? std::string() : to;
  });
  const io::WeightStore store = io::WeightStore::open_dir(dir);
  CHECK(ClipVisionEncoder::naming_root(store).empty());
  CHECK(ClipVisionEncoder::naming_root(io::WeightStore::open_dir(kEncoder)) == "vision_model.");
  const Tensor got = load_clip_vision(dir, {Device::kCPU, DType::kF32})->encode(expected("pixel_values"));
  CHECK(rel_l2(got, expected("hidden_f32")) < 1e-6);
}

TEST_CASE("clip vision: a checkpoint that does not fit is a ModelError naming file and tensor") {
  testing::TempDir tmp("clip_vision_bad");
  const auto load = [](const std::string& dir) {
    return error_of([&] { load_clip_vision(dir, {Device::kCPU, DType::kF32}); });
  };
  SUBCASE("a missing tensor, either naming") {
    const std::string missing = "vision_model.encoder.layers.1.mlp.fc2.bias";
    write_encoder(tmp.file("a"), [&](const std::string& n) { return n == missing ? std::string() : n; });
    const std::string msg = load(tmp.file("a"));
    CHECK(contains(msg, tmp.file("a")));
    CHECK(contains(msg, "missing tensor '" + missing + "'"));
    write_encoder(tmp.file("b"), [&](const std::string& n) { return n == missing ? std::string() : unprefixed(n); });
    CHECK(contains(load(tmp.file("b")), "missing tensor 'encoder.layers.1.mlp.fc2.bias'"));
  }
  SUBCASE("neither naming: the published name of the first tensor is missing") {
    write_encoder(tmp.file("c"), [](const std::string& n) { return "model." + n; });
    const std::string msg = load(tmp.file("c"));
    CHECK(contains(msg, tmp.file("c")));
    CHECK(contains(msg, "missing tensor 'vision_model.embeddings.class_embedding'"));
  }
  SUBCASE("a tensor of the wrong shape") {
    const std::string bad = "vision_model.encoder.layers.0.mlp.fc1.weight";  // (64, 32) stored (32, 64)
    write_encoder(tmp.file("d"), [](const std::string& n) { return n; },
                  [&](const std::string& n, const Tensor& t) { return n == bad ? t.reshape({32, 64}) : t; });
    const std::string msg = load(tmp.file("d"));
    CHECK(contains(msg, tmp.file("d") + "/model.safetensors"));
    CHECK(contains(msg, "'" + bad + "'"));
    CHECK(contains(msg, "[64, 32]"));
  }
  SUBCASE("a patch conv of another patch size") {
    write_encoder(tmp.file("e"), [](const std::string& n) { return n; },
                  [](const std::string& n, const Tensor& t) {
                    return n == "vision_model.embeddings.patch_embedding.weight" ? t.reshape({32, 3, 7, 28}) : t;
                  });
    CHECK(contains(load(tmp.file("e")), "'vision_model.embeddings.patch_embedding.weight'"));
  }
  SUBCASE("more layers than num_hidden_layers") {
    write_encoder(tmp.file("f"), [](const std::string& n) { return n; });
    auto file = io::SafetensorsFile::open(tmp.file("f") + "/model.safetensors");
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const std::string& n : file->names()) tensors.emplace_back(n, file->load(n).clone());
    tensors.emplace_back("vision_model.encoder.layers.3.layer_norm1.weight", Tensor::zeros({32}));
    file.reset();
    io::write_safetensors(tmp.file("f") + "/model.safetensors", tensors);
    const std::string msg = load(tmp.file("f"));
    CHECK(contains(msg, tmp.file("f")));
    CHECK(contains(msg, "num_hidden_layers = 3"));
  }
}
