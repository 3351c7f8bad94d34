// A model that is not there yet (issue 43): a shipped real-model config run
// before its download, or a Hugging Face Hub id given as model.path, used
// to fail with the model layer's "not a directory". This check runs first
// and says what is missing and how to get it: the config's model.source
// (the Hub id it comes from), or, for a path that is itself a Hub id, the
// download command; docs/real-models.md has the commands, sizes and memory.
#pragma once
#include <string>

#include "config/config.h"

namespace ditgen::cli {

// ModelError (exit 3) unless cfg.model.path is a folder. `config_path`
// names the config in the message.
void require_model_folder(const RunConfig& cfg, const std::string& config_path);

// The same for a folder given on the command line (`ditgen encode --model`).
void require_model_folder(const std::string& folder, const std::string& option);

}  // namespace ditgen::cli
