// Wan's transformer from the single files people download (GGUF in every
// block type, fp8 plain and ComfyUI-scaled, bf16 in the original Wan names)
// against diffusers on tests/fixtures/wan_quant (made by
// scripts/fixtures/make_wan_quant_fixtures.py): a float32 forward on GGUF
// blocks equals diffusers' float32 model holding gguf-py's dequantized
// weights (the '_exact' references) to float rounding, and stays as near
// diffusers' own GGUF forward as the published tolerance of that one
// (GGUFQuantizationConfig rounds each dequantized tile through its compute
// dtype); model.quantize int8 is W8A8 on the eligible matrices only.
#include <doctest/doctest.h>

#include <string>

#include "fixture.h"
#include "io/model_dir.h"
#include "models/placed_bytes.h"
#include "models/registry.h"
#include "models/transformer.h"
#include "../ops/test_helpers.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::models;

namespace {

const std::string kFixture = "wan_quant";

std::string single_file(const std::string& name) { return testing::fixture_dir(kFixture) + "/single_files/" + name; }

std::unique_ptr<TransformerSpec> fixture_spec() {
  const std::string path = testing::fixture_dir(kFixture) + "/transformer/config.json";
  return transformer_spec(io::read_json_file(path), path);
}

std::unique_ptr<Transformer> load_file(const std::string& file, const Placement& place) {
  const auto spec = fixture_spec();
  return spec->load(io::WeightStore::open_file(single_file(file), spec->single_file_options()), {}, place);
}

std::unique_ptr<Transformer> load_folder(const Placement& place) {
  return fixture_spec()->load(io::WeightStore::open_dir(testing::fixture_dir(kFixture) + "/transformer"), {}, place);
}

Tensor reference(const std::string& name) {
  return testing::fixture_tensor(kFixture, "transformer_forward.safetensors", name);
}

// The fixture's call: latents (2, 16, 3, 6, 10), text (2, 16, 64), both at t = 812.5.
struct ForwardCase {
  Tensor latents = reference("latents"), text = reference("encoder_hidden_states");
  ForwardArgs args;
  ForwardCase() {
    args.latents = &latents;
    args.text = &text;
    const Tensor t = reference("timestep");
    args.timesteps.assign(t.data(), t.data() + t.numel());
  }
};

}  // namespace

TEST_CASE("wan from GGUF: a float32 forward on the blocks equals diffusers' on gguf-py's dequantized weights") {
  const ForwardCase c;
  const Tensor float32 = reference("sample_float32");
  for (const std::string stem : {"F16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_S", "Q6_K"}) {
    CAPTURE(stem);
    const auto model = load_file("wan2.1-t2v-tiny-" + stem + ".gguf", Placement(Device::kCPU, DType::kF32));
    const Tensor y = model->forward(c.args);
    const double exact = testing::rel_l2(y, reference("sample_gguf_" + stem + "_exact"));
    const double diffusers = testing::rel_l2(y, reference("sample_gguf_" + stem));
    const double to_float = testing::rel_l2(y, float32);
    MESSAGE(stem << ": relative L2 to the exact twin " << exact << ", to diffusers' GGUF forward " << diffusers
                 << ", to the float32 model " << to_float);
    CHECK(exact <= 1e-5);
    CHECK(diffusers <= 1e-3);  // diffusers' own distance to the exact twin is up to 6.5e-4 (case.json stats)
    if (stem == "F16") CHECK(to_float <= 1e-5);
    else CHECK(to_float > 1e-3);  // the blocks' rounding really is in the weights read
  }
}

TEST_CASE("wan from GGUF in bfloat16: blocks dequantized to bfloat16 stay near the float32 result") {
  const ForwardCase c;
  const auto model = load_file("wan2.1-t2v-tiny-Q8_0.gguf", Placement(Device::kCPU, DType::kBF16));
  const double err = testing::rel_l2(model->forward(c.args), reference("sample_gguf_Q8_0_exact"));
  MESSAGE("Q8_0 in bfloat16: relative L2 to the float32 exact twin " << err);
  CHECK(err < 2e-2);
  CHECK(err > 1e-5);
}

TEST_CASE("wan from fp8 safetensors: plain float8_e4m3fn and ComfyUI's scaled file, as ComfyUI dequantizes them") {
  const ForwardCase c;
  for (const auto& [file, ref] : {std::pair<std::string, std::string>{"wan2.1_t2v_tiny_fp8_e4m3fn.safetensors",
                                                                      "sample_fp8_e4m3fn"},
                                  {"wan2.1_t2v_tiny_fp8_scaled.safetensors", "sample_fp8_scaled"}}) {
    CAPTURE(file);
    const auto model = load_file(file, Placement(Device::kCPU, DType::kF32));
    const double err = testing::rel_l2(model->forward(c.args), reference(ref));
    MESSAGE(file << ": relative L2 to diffusers on ComfyUI's weights " << err);
    CHECK(err <= 1e-5);
  }
}

TEST_CASE("wan from the original names: ComfyUI's bf16 file gives the diffusers folder's forward") {
  const ForwardCase c;
  const auto model = load_file("wan2.1_t2v_tiny_bf16.safetensors", Placement(Device::kCPU, DType::kF32));
  CHECK(testing::rel_l2(model->forward(c.args), reference("sample_float32")) <= 1e-5);
}

TEST_CASE("wan with model.quantize int8: W8A8 on the blocks' matrices, near the float32 forward") {
  const ForwardCase c;
  const Tensor float32 = reference("sample_float32");
  Placement place(Device::kCPU, DType::kF32);
  place.int8 = true;
  const double folder = testing::rel_l2(load_folder(place)->forward(c.args), float32);
  const double q8 = testing::rel_l2(load_file("wan2.1-t2v-tiny-Q8_0.gguf", place)->forward(c.args), float32);
  MESSAGE("int8 from the float folder: relative L2 " << folder << "; int8 from the Q8_0 file " << q8);
  CHECK(folder < 2e-2);
  CHECK(folder > 1e-4);  // int8 arithmetic really ran
  CHECK(q8 < 3e-2);
}

TEST_CASE("wan single files: another model's GGUF, a missing tensor and a pickle are errors naming the file") {
  const auto spec = fixture_spec();
  // The UMT5 GGUF is a text encoder's: its architecture is not wan.
  const std::string umt5 = single_file("umt5-tiny-encoder-Q8_0.gguf");
  CHECK_THROWS_WITH_AS(io::WeightStore::open_file(umt5, spec->single_file_options()),
                       doctest::Contains(umt5.c_str()), ModelError);
  // The VAE's original-names file opened as the transformer.
  const std::string vae = single_file("wan_2.1_vae_tiny.safetensors");
  CHECK_THROWS_WITH_AS(spec->load(io::WeightStore::open_file(vae, spec->single_file_options()), {}, {}),
                       doctest::Contains(vae.c_str()), ModelError);
}

// Each block holds ten 256 x 256 matrices (self- and cross-attention q, k,
// v, o; ffn.0, ffn.2): Q4_K_M stores both v and ffn.2 in Q6_K (210 bytes
// per 256), the other seven in Q4_K (144 per 256), as case.json records.
TEST_CASE("the bytes per weight plan counts for the blocks' matrices, from the file's tensor table") {
  const auto spec = fixture_spec();
  const auto bytes_of = [&](const std::string& file, const Placement& place) {
    return block_matrix_bytes_per_element(io::WeightStore::open_file(single_file(file), spec->single_file_options()),
                                          place);
  };
  const Placement f32(Device::kCPU, DType::kF32), bf16(Device::kCPU, DType::kBF16);
  CHECK(bytes_of("wan2.1-t2v-tiny-Q8_0.gguf", f32) == 34.0 / 32);
  CHECK(bytes_of("wan2.1-t2v-tiny-Q4_K_M.gguf", bf16) == doctest::Approx((7 * 144.0 + 3 * 210) / (10 * 256)));
  CHECK(bytes_of("wan2.1-t2v-tiny-F16.gguf", f32) == 2);  // float16 widened inside the GEMM
  CHECK(bytes_of("wan2.1_t2v_tiny_bf16.safetensors", f32) == 4);
  CHECK(bytes_of("wan2.1_t2v_tiny_bf16.safetensors", bf16) == 2);
  Placement int8 = f32;
  int8.int8 = true;
  CHECK(bytes_of("wan2.1-t2v-tiny-Q8_0.gguf", int8) == 1 + 4.0 / 256);  // a float32 scale per row of 256
  const Placement cuda(Device::kCUDA, DType::kBF16);
  CHECK(bytes_of("wan2.1-t2v-tiny-Q8_0.gguf", cuda) == 2);  // dequantized in full at load there
}
