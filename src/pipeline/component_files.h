// Component files (docs/quantized.md): a part of the model given as one
// file (model.transformer, transformer_2, text_encoder, vae). What every
// part's file goes through: it must be there and not a pickle
// (check_component_file); its errors name its config field
// (check_component); and a part whose <part>/config.json the model folder
// lacks (a user who has only the GGUF removed transformer/) reads the
// config.json of that part of a published model in configs/models/
// (configs/models/README.md) whose tensor shapes the file matches, and
// ditgen says which (part_config). The candidates go in folder name order;
// the first the file fits is taken (the published models that share a part
// share its config: Wan 2.1's VAE, UMT5-XXL). What "fits" means is the
// part's spec's check_weights (every tensor it reads, by name and shape),
// given by the caller, so this file names no model family.
#pragma once
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"

namespace ditgen::pipeline {

// A component file named by the config field `field`: there, and a format
// ditgen reads (a PyTorch pickle is refused, naming why); ModelError
// otherwise. "" passes.
void check_component_file(const std::string& path, const char* field);

// Runs `check` (opening `file`, checking its tensors); a ModelError about
// the file ("<file>: ...") comes out naming the field after it:
// "<file>: model.vae: missing tensor 'post_quant_conv.weight'".
void check_component(const std::string& file, const char* field, const std::function<void()>& check);

// The folder of published model configs: $DITGEN_MODEL_CONFIGS when set
// (ModelError when it is not a folder), else configs/models beside the
// executable's folder (<repo>/build/ditgen -> <repo>/configs/models), else
// that of the source tree ditgen was built from; "" when neither is there.
std::string published_configs_dir();

// A part's parsed config.json and where it came from.
struct PartConfig {
  nlohmann::json json;
  std::string path;  // the file read, for messages
  std::string note;  // a published config's: which one, and why (for the user); "" otherwise
};

// Throws (ModelError, ConfigError) why the config at `path` does not fit the file.
using FitCheck = std::function<void(const nlohmann::json& config, const std::string& path)>;

// The FitCheck of a part whose spec `make_spec(config, path)` builds (a
// registry factory: models::transformer_spec, vae_spec, text_encoder_spec):
// `file` opened as the spec reads single files, every tensor it reads there.
template <class MakeSpec>
FitCheck spec_fits(const std::string& file, MakeSpec make_spec) {
  return [file, make_spec](const nlohmann::json& config, const std::string& path) {
    const auto spec = make_spec(config, path);
    spec->check_weights(io::WeightStore::open_file(file, spec->single_file_options()));
  };
}

// `own` (the model folder's <part>/config.json) when it exists or `file` is
// "" (io::read_json_file: ModelError when missing); else the first
// <published_configs_dir()>/<model>/<part>/config.json that `fits` accepts.
// None: ModelError naming `file`, `field` (its config key), that `own` is
// missing, and why each candidate did not fit.
PartConfig part_config(const std::string& own, const std::string& part, const std::string& file,
                       const std::string& field, const FitCheck& fits);

}  // namespace ditgen::pipeline
