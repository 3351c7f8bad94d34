// The text encoder and the VAE from the single files people download
// (model.text_encoder, model.vae), against transformers and diffusers on
// tests/fixtures/wan_quant (scripts/fixtures/make_wan_quant_fixtures.py):
// ComfyUI's UMT5 in float16 and transformers' names, llama.cpp's t5encoder
// GGUF in Q8_0 (the encoder of transformers holding gguf-py's dequantized
// weights is the reference), ComfyUI's Wan VAE in the original release's
// names (diffusers' from_single_file gives the folder's VAE). The name maps
// are checked against the names diffusers and transformers saved the same
// tensors under in the fixture's folders, value for value.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>

#include "component_folders.h"
#include "fixture.h"
#include "io/model_dir.h"
#include "models/autoencoder_kl_wan.h"
#include "models/nn/tensor_decl.h"
#include "models/registry.h"
#include "models/t5_gguf_names.h"
#include "models/text_encoder.h"
#include "models/wan_vae_names.h"
#include "../ops/test_helpers.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::models;

namespace {

const std::string kFixture = "wan_quant";

std::string part_dir(const std::string& part) { return testing::fixture_dir(kFixture) + "/" + part; }

std::unique_ptr<TextEncoderSpec> encoder_spec() {
  const std::string path = part_dir("text_encoder") + "/config.json";
  return text_encoder_spec(io::read_json_file(path), path);
}

std::unique_ptr<VaeSpec> vae_spec_of_fixture() {
  const std::string path = part_dir("vae") + "/config.json";
  return vae_spec(io::read_json_file(path), path);
}

// The reference's prompt: its ids, its length (the mask's count of ones).
TokenBatch reference_tokens() {
  const auto file = io::SafetensorsFile::open(testing::fixture_dir(kFixture) + "/reference/text_encoder.safetensors");
  const Tensor ids = file->load("input_ids"), mask = file->load("attention_mask");
  const int64_t L = ids.dim(1);
  TokenBatch t;
  t.ids.emplace_back(ids.data_as<int64_t>(), ids.data_as<int64_t>() + L);
  int64_t length = 0;
  for (int64_t j = 0; j < L; ++j) length += mask.data_as<int64_t>()[j];
  t.lengths.push_back(length);
  return t;
}

Tensor encode_file(const std::string& file, const Placement& place) {
  const auto spec = encoder_spec();
  const io::WeightStore w = io::WeightStore::open_file(testing::wan_quant_file(file), spec->single_file_options());
  return spec->load(w, place)->encode(reference_tokens());
}

// Every tensor of `file` (opened as `options` say) is a tensor of the folder
// `dir` under the same name, holding the same values to `tolerance`
// (max|d| / max|ref|), and the two hold the same names.
void check_same_tensors(const io::WeightStore& file, const std::string& dir, double tolerance) {
  const io::WeightStore folder = io::WeightStore::open_dir(dir);
  const std::vector<std::string> names = file.names(), want = folder.names();
  CHECK(std::set<std::string>(names.begin(), names.end()) == std::set<std::string>(want.begin(), want.end()));
  for (const std::string& name : names) {
    CAPTURE(name);
    if (!folder.contains(name)) continue;
    const Tensor got = file.load_f32(name), ref = folder.load_f32(name);
    REQUIRE(got.shape() == ref.shape());
    CHECK(testing::max_rel(got, ref) <= tolerance);
  }
}

}  // namespace

TEST_CASE("UMT5 from one file: ComfyUI's float16 safetensors and llama.cpp's Q8_0 GGUF match transformers") {
  const auto ref = [](const std::string& name) {
    return testing::fixture_tensor(kFixture, "text_encoder.safetensors", name);
  };
  const Tensor float32 = ref("last_hidden_state_float32"), q8 = ref("last_hidden_state_gguf_Q8_0");
  const Placement f32(Device::kCPU, DType::kF32, false);
  // The float16 file holds the float32 folder's values exactly (case.json).
  const Tensor fp16 = encode_file("umt5_tiny_fp16.safetensors", f32);
  REQUIRE(fp16.shape() == float32.shape());
  const double fp16_err = testing::rel_l2(fp16, float32);
  MESSAGE("umt5 float16 file: relative L2 to transformers' float32 encoder " << fp16_err);
  CHECK(fp16_err <= 1e-5);

  // Q8_0: the matrices computed on their blocks, the table dequantized.
  const Tensor gguf = encode_file("umt5-tiny-encoder-Q8_0.gguf", f32);
  const double exact = testing::rel_l2(gguf, q8), to_float = testing::rel_l2(gguf, float32);
  MESSAGE("umt5 Q8_0 GGUF: relative L2 to transformers on gguf-py's weights " << exact << ", to the float32 encoder "
                                                                            << to_float);
  CHECK(exact <= 1e-5);
  CHECK(to_float > 1e-2);  // case.json: 0.056, the quantization really is in the weights read

  // bfloat16 compute on the blocks stays about as near as bfloat16 compute
  // on the float file does (the float file's values are bfloat16's already;
  // the blocks' dequantized values are rounded to bfloat16 once more).
  const Placement bf16(Device::kCPU, DType::kBF16, false);
  const double gguf_bf16 = testing::rel_l2(encode_file("umt5-tiny-encoder-Q8_0.gguf", bf16), q8);
  const double float_bf16 = testing::rel_l2(encode_file("umt5_tiny_fp16.safetensors", bf16), float32);
  MESSAGE("in bfloat16: Q8_0 GGUF relative L2 " << gguf_bf16 << ", float16 file " << float_bf16);
  CHECK(gguf_bf16 < 3 * float_bf16);
}

TEST_CASE("UMT5 GGUF: llama.cpp's names map back to transformers', the matrices stay blocks") {
  const auto spec = encoder_spec();
  const io::WeightStore gguf =
      io::WeightStore::open_file(testing::wan_quant_file("umt5-tiny-encoder-Q8_0.gguf"), spec->single_file_options());
  // Every tensor is the folder's tensor of that name: exact where the file
  // keeps floats (norms, the F16 position tables), within Q8_0's rounding elsewhere.
  check_same_tensors(gguf, part_dir("text_encoder"), 1e-2);
  const std::string norm = "encoder.block.1.layer.0.layer_norm.weight";
  CHECK(testing::max_rel(gguf.load_f32(norm), io::WeightStore::open_dir(part_dir("text_encoder")).load_f32(norm)) == 0);

  // A GEMM weight is read in place in its Q8_0 blocks; the token table is dequantized.
  const Placement place(Device::kCPU, DType::kF32, false);
  const nn::TensorDecl q{"encoder.block.0.layer.0.SelfAttention.q.weight", {64, 64}};
  CHECK(nn::load_as(gguf, q, place, nn::Placed::kMatrix).layout() == Layout::kBlockQuantized);
  const nn::TensorDecl table{"shared.weight", {560, 64}};
  const Tensor t = nn::load_as(gguf, table, place, nn::Placed::kTable);
  CHECK(t.layout() == Layout::kRowMajor);
  CHECK(t.dtype() == DType::kF32);

  // The map itself: gguf-py's T5 rows, ffn_up by the feed-forward's kind.
  CHECK(t5_gguf_to_transformers("enc.blk.12.ffn_up.weight", true) == "encoder.block.12.layer.1.DenseReluDense.wi_1.weight");
  CHECK(t5_gguf_to_transformers("enc.blk.12.ffn_up.weight", false) == "encoder.block.12.layer.1.DenseReluDense.wi.weight");
  CHECK(t5_gguf_to_transformers("enc.blk.0.attn_rel_b.weight", true) ==
        "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight");
  for (const char* foreign : {"dec.blk.0.attn_q.weight", "enc.blk.x.attn_q.weight", "enc.blk.0.attn_q.bias",
                              "enc.blk..attn_q.weight", "output.weight", "token_embd"})
    CHECK_FALSE(t5_gguf_to_transformers(foreign, true));
}

TEST_CASE("Wan VAE from one file, in the original names or diffusers': the folder's names and values, diffusers' decode") {
  const auto spec = vae_spec_of_fixture();
  const io::WeightStore file =
      io::WeightStore::open_file(testing::wan_quant_file("wan_2.1_vae_tiny.safetensors"), spec->single_file_options());
  // The bfloat16 file holds the folder's float32 values exactly (case.json);
  // the encoder's tensors map too, though the decoder alone is read.
  check_same_tensors(file, part_dir("vae"), 0.0);

  const Tensor z = testing::fixture_tensor(kFixture, "vae_decode.safetensors", "z");
  const Tensor ref = testing::fixture_tensor(kFixture, "vae_decode.safetensors", "sample");
  const auto& cfg = dynamic_cast<const AutoencoderKLWanSpec&>(*spec).config();
  // The original-names file, and a file in diffusers' names (the folder's, given as one file).
  const io::WeightStore diffusers_names =
      io::WeightStore::open_file(part_dir("vae") + "/diffusion_pytorch_model.safetensors", spec->single_file_options());
  for (const io::WeightStore* weights : {&file, &diffusers_names}) {
    CAPTURE(weights->dir());
    Tensor y = AutoencoderKLWan::load(*weights, cfg, {Device::kCPU, DType::kF32}).decode(z);
    REQUIRE(y.shape() == ref.shape());
    for (int64_t i = 0; i < y.numel(); ++i) y[i] = std::clamp(y[i], -1.0f, 1.0f);  // decode().sample is clamped
    const double err = testing::rel_l2(y, ref);
    MESSAGE(weights->dir() << ": relative L2 to diffusers' decode " << err);
    // diffusers' float32 decode of this fixture is itself 9.0e-6 from its
    // float64 decode; ditgen's upsamplers sum the 3x3 taps in another order
    // (nn/upsample_conv.h): 1.6e-5 from the float32 reference (6.8e-6 before).
    CHECK(err <= 2.5e-5);
  }

  // The published layout's names, as diffusers' convert_wan_vae_to_diffusers writes them out.
  CHECK(wan_vae_original_to_diffusers("decoder.upsamples.4.shortcut.weight", 3, 4) ==
        "decoder.up_blocks.1.resnets.0.conv_shortcut.weight");
  CHECK(wan_vae_original_to_diffusers("decoder.upsamples.11.resample.1.bias", 3, 4) ==
        "decoder.up_blocks.2.upsamplers.0.resample.1.bias");
  CHECK(wan_vae_original_to_diffusers("decoder.upsamples.14.residual.6.weight", 3, 4) ==
        "decoder.up_blocks.3.resnets.2.conv2.weight");
  for (const char* foreign : {"decoder.upsamples.15.residual.0.gamma",  // past the last block
                              "decoder.upsamples.3.residual.0.gamma",   // an upsampler's place
                              "decoder.upsamples.14.time_conv.weight",  // the last block has no upsampler
                              "decoder.middle.0.shortcut.weight", "encoder.downsamples.x.residual.0.gamma",
                              "first_stage_model.decoder.conv1.weight", "decoder.conv1.gamma"})
    CHECK_FALSE(wan_vae_original_to_diffusers(foreign, 3, 4));
}

TEST_CASE("component files of another part are ModelErrors naming the file and the tensor") {
  const auto encoder = encoder_spec();
  const auto vae = vae_spec_of_fixture();
  const auto open_as = [](const std::string& file, const auto& spec) {
    return io::WeightStore::open_file(file, spec->single_file_options());
  };
  // The VAE's file as the text encoder: no token table.
  const std::string vae_file = testing::wan_quant_file("wan_2.1_vae_tiny.safetensors");
  CHECK_THROWS_WITH_AS(encoder->check_weights(open_as(vae_file, encoder)),
                       doctest::Contains((vae_file + ": missing tensor 'shared.weight'").c_str()), ModelError);
  // The UMT5 files as the VAE: no post_quant_conv.
  for (const std::string file : {"umt5_tiny_fp16.safetensors", "umt5-tiny-encoder-Q8_0.gguf"}) {
    CAPTURE(file);
    CHECK_THROWS_WITH_AS(vae->check_weights(open_as(testing::wan_quant_file(file), vae)),
                         doctest::Contains((testing::wan_quant_file(file) + ": missing tensor 'post_quant_conv.weight'").c_str()),
                         ModelError);
  }
  // The transformer's GGUF as the text encoder: its architecture is wan.
  const std::string wan = testing::wan_quant_file("wan2.1-t2v-tiny-Q8_0.gguf");
  CHECK_THROWS_WITH_AS(open_as(wan, encoder), doctest::Contains("'wan', expected 't5encoder'"), ModelError);
  // An original-names VAE file holding a tensor no Wan VAE has.
  testing::TempDir tmp("component_files");
  const std::string odd = tmp.file("odd_vae.safetensors");
  io::write_safetensors(odd, {{"decoder.conv1.weight", Tensor::zeros({8, 16, 3, 3, 3})},
                              {"decoder.upsamples.3.residual.0.gamma", Tensor::zeros({8, 1, 1, 1})}});
  CHECK_THROWS_WITH_AS(open_as(odd, vae), doctest::Contains("tensor 'decoder.upsamples.3.residual.0.gamma'"),
                       ModelError);
}
