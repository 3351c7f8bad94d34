// Files and folders for the component-file tests on tests/fixtures/wan_quant
// (the models', the pipeline's and the CLI's): its single files, a model
// folder without the parts the files give, and a folder of published
// configs that holds the fixture's too.
#pragma once
#include <filesystem>
#include <string>

#include "models/fixture.h"
#include "temp_dir.h"

namespace ditgen::testing {

// tests/fixtures/wan_quant/single_files/<name>.
inline std::string wan_quant_file(const std::string& name) { return fixture_dir("wan_quant") + "/single_files/" + name; }

// The real published configs (configs/models) plus "WanTiny": the
// wan_quant fixture's transformer, text encoder and VAE configs.
inline std::string published_with_tiny(const TempDir& tmp) {
  namespace fs = std::filesystem;
  const fs::path dir = tmp.file("published");
  fs::copy(std::string(DITGEN_SOURCE_DIR) + "/configs/models", dir, fs::copy_options::recursive);
  for (const char* part : {"transformer", "text_encoder", "vae"}) {
    fs::create_directories(dir / "WanTiny" / part);
    fs::copy_file(fixture_dir("wan_quant") + "/" + part + "/config.json", dir / "WanTiny" / part / "config.json");
  }
  return dir.string();
}

// The wan_quant model folder with model_index.json, scheduler/ and tokenizer/ only.
inline std::string folder_without_parts(const TempDir& tmp) {
  namespace fs = std::filesystem;
  const fs::path dir = tmp.file("model");
  fs::create_directories(dir);
  fs::copy_file(fixture_dir("wan_quant") + "/model_index.json", dir / "model_index.json");
  for (const char* part : {"scheduler", "tokenizer"})
    fs::copy(fixture_dir("wan_quant") + "/" + part, dir / part, fs::copy_options::recursive);
  return dir.string();
}

}  // namespace ditgen::testing
