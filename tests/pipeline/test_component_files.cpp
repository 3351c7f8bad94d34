// Component files whose part has no config.json in model.path
// (pipeline/component_files.h): the published config in configs/models/
// whose tensor shapes the file matches is read, and the note says which.
// The tiny fixture's files (tests/fixtures/wan_quant) fit no published model,
// so a folder of published configs is made beside the real ones holding the
// fixture's; the real ones are held against a file laid out as Wan 2.1's VAE
// (the original release's names and shapes, from Wan-AI's
// wan/modules/vae.py Decoder3d, written below; a sparse file: only its
// header is ever read).
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "component_folders.h"
#include "io/model_dir.h"
#include "models/registry.h"
#include "pipeline/component_files.h"
#include "pipeline/pipeline.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace ditgen;
namespace fs = std::filesystem;

namespace {

const std::string kFixture = "wan_quant";

std::string source_configs() { return std::string(DITGEN_SOURCE_DIR) + "/configs/models"; }

// DITGEN_MODEL_CONFIGS for the scope; unset (the built-in folders) by default.
struct ConfigsFolder {
  explicit ConfigsFolder(const std::string& dir = "") {
    if (dir.empty()) ::unsetenv("DITGEN_MODEL_CONFIGS");
    else ::setenv("DITGEN_MODEL_CONFIGS", dir.c_str(), 1);
  }
  ~ConfigsFolder() { ::unsetenv("DITGEN_MODEL_CONFIGS"); }
};

// Wan 2.1's VAE decoder in the original names (base_dim 96, z_dim 16,
// dim_mult [1, 2, 4, 4], num_res_blocks 2, temperal upsampling [true, true,
// false]), every tensor bfloat16: name -> shape.
std::vector<std::pair<std::string, Shape>> wan21_vae_decoder() {
  std::vector<std::pair<std::string, Shape>> t;
  const auto conv = [&](const std::string& name, Shape w) {
    t.push_back({name + ".bias", {w[0]}});
    t.push_back({name + ".weight", std::move(w)});
  };
  const auto residual = [&](const std::string& name, int64_t in, int64_t out) {
    t.push_back({name + ".residual.0.gamma", {in, 1, 1, 1}});
    conv(name + ".residual.2", {out, in, 3, 3, 3});
    t.push_back({name + ".residual.3.gamma", {out, 1, 1, 1}});
    conv(name + ".residual.6", {out, out, 3, 3, 3});
    if (in != out) conv(name + ".shortcut", {out, in, 1, 1, 1});
  };
  conv("conv2", {16, 16, 1, 1, 1});
  const std::vector<int64_t> dims = {384, 384, 384, 192, 96};
  conv("decoder.conv1", {384, 16, 3, 3, 3});
  residual("decoder.middle.0", 384, 384);
  t.push_back({"decoder.middle.1.norm.gamma", {384, 1, 1}});
  conv("decoder.middle.1.to_qkv", {3 * 384, 384, 1, 1});
  conv("decoder.middle.1.proj", {384, 384, 1, 1});
  residual("decoder.middle.2", 384, 384);
  const bool temporal[3] = {true, true, false};
  int k = 0;
  for (int i = 0; i < 4; ++i) {
    int64_t in = i == 0 ? dims[0] : dims[i] / 2;
    const int64_t out = dims[i + 1];
    for (int r = 0; r < 3; ++r, in = out) residual("decoder.upsamples." + std::to_string(k++), in, out);
    if (i == 3) break;
    const std::string up = "decoder.upsamples." + std::to_string(k++);
    conv(up + ".resample.1", {out / 2, out, 3, 3});
    if (temporal[i]) conv(up + ".time_conv", {2 * out, out, 3, 1, 1});
  }
  t.push_back({"decoder.head.0.gamma", {96, 1, 1, 1}});
  conv("decoder.head.2", {3, 96, 3, 3, 3});
  return t;
}

// A safetensors file of those tensors whose data is a hole (never read).
void write_sparse_bf16(const std::string& path, const std::vector<std::pair<std::string, Shape>>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  int64_t offset = 0;
  for (const auto& [name, shape] : tensors) {
    const int64_t bytes = 2 * shape_numel(shape);
    header[name] = {{"dtype", "BF16"}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  {
    std::ofstream out(path, std::ios::binary);
    const uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  fs::resize_file(path, 8 + text.size() + static_cast<uint64_t>(offset));
}

}  // namespace

TEST_CASE("component files without a config.json take the published config they fit, and say which") {
  testing::TempDir tmp("published_configs");
  const ConfigsFolder configs(testing::published_with_tiny(tmp));
  const std::string model = testing::folder_without_parts(tmp);
  const pipeline::ComponentFiles files{testing::wan_quant_file("wan2.1-t2v-tiny-Q8_0.gguf"), "",
                                       testing::wan_quant_file("umt5-tiny-encoder-Q8_0.gguf"),
                                       testing::wan_quant_file("wan_2.1_vae_tiny.safetensors")};
  const auto pipe = pipeline::Pipeline::open(model, pipeline::Pipeline::OpenFor::kRun, files);
  CHECK(std::string(pipe->transformer().family()) == "wan");
  const std::vector<std::string>& notes = pipe->notes();
  REQUIRE(notes.size() == 3);
  const std::string tiny = tmp.file("published") + "/WanTiny/";
  for (const auto& [note, file, field, part] :
       {std::tuple{notes[0], files.transformer, "model.transformer", "transformer"},
        std::tuple{notes[1], files.vae, "model.vae", "vae"},
        std::tuple{notes[2], files.text_encoder, "model.text_encoder", "text_encoder"}}) {
    CAPTURE(note);
    CHECK(note.rfind(file + " (" + field + "): " + model + "/" + part + "/config.json is missing", 0) == 0);
    CHECK(note.find("read as " + tiny + part + "/config.json") != std::string::npos);
  }
  // With the model folder's own configs, nothing is looked up or said.
  CHECK(pipeline::Pipeline::open(testing::fixture_dir(kFixture), pipeline::Pipeline::OpenFor::kRun, files)
            ->notes()
            .empty());
}

TEST_CASE("a file no published config fits is exit 3 naming it, its field and why each did not fit") {
  testing::TempDir tmp("published_none");
  const std::string model = testing::folder_without_parts(tmp);
  const ConfigsFolder configs;  // configs/models itself: every model in it is far larger than the fixture's
  const std::string vae = testing::wan_quant_file("wan_2.1_vae_tiny.safetensors");
  try {
    pipeline::Pipeline::open(model, pipeline::Pipeline::OpenFor::kPlan,
                             {testing::wan_quant_file("wan2.1-t2v-tiny-Q8_0.gguf"), "", "", vae});
    FAIL("no error");
  } catch (const ModelError& e) {
    const std::string m = e.what();
    CAPTURE(m);
    CHECK(m.rfind(testing::wan_quant_file("wan2.1-t2v-tiny-Q8_0.gguf") + ": model.transformer: " + model +
                      "/transformer/config.json is missing, and no published transformer config in ",
                  0) == 0);
    CHECK(m.find("Wan2.1-T2V-1.3B-Diffusers: tensor 'patch_embedding.weight' has shape [256, 16, 1, 2, 2], "
                 "expected [1536, 16, 1, 2, 2]") != std::string::npos);
    CHECK(m.find("CogVideoX-5b: missing tensor") != std::string::npos);
  }
  // A text encoder file for a model conditioned on class labels.
  const std::string umt5 = testing::wan_quant_file("umt5_tiny_fp16.safetensors");
  CHECK_THROWS_WITH_AS(
      pipeline::Pipeline::open(testing::fixture_dir("dit_odd"), pipeline::Pipeline::OpenFor::kRun, {"", "", umt5, ""}),
      doctest::Contains((umt5 + ": model.text_encoder: this model has no text encoder").c_str()), ModelError);
  // A part without a config and without a file is the folder's error, as before.
  CHECK_THROWS_WITH_AS(pipeline::Pipeline::open(model, pipeline::Pipeline::OpenFor::kPlan),
                       doctest::Contains("model part directory 'transformer' not found"), ModelError);
  // DITGEN_MODEL_CONFIGS naming no folder.
  const ConfigsFolder nowhere(tmp.file("absent"));
  CHECK_THROWS_WITH_AS(pipeline::published_configs_dir(), doctest::Contains("DITGEN_MODEL_CONFIGS: not a folder"),
                       ModelError);
}

TEST_CASE("the published configs: a file laid out as Wan 2.1's VAE takes Wan 2.1's vae/config.json") {
  testing::TempDir tmp("published_wan21_vae");
  const ConfigsFolder configs;
  REQUIRE(fs::equivalent(pipeline::published_configs_dir(), source_configs()));
  const std::string file = tmp.file("wan_2.1_vae.safetensors");
  write_sparse_bf16(file, wan21_vae_decoder());
  const pipeline::PartConfig c = pipeline::part_config(tmp.file("model/vae/config.json"), "vae", file, "model.vae",
                                                       pipeline::spec_fits(file, models::vae_spec));
  // CogVideoX's VAEs do not fit; the first of the three published models with Wan 2.1's VAE is read.
  CHECK(fs::equivalent(c.path, source_configs() + "/Wan2.1-T2V-1.3B-Diffusers/vae/config.json"));
  CHECK(c.note.find("read as " + c.path) != std::string::npos);
  CHECK(models::vae_spec(c.json, c.path)->latent_channels() == 16);
}
