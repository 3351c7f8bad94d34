// A diffusers-layout model directory: model_index.json at the root and one
// sub-directory per part (transformer/, vae/, scheduler/, ...), each with a
// config.json (scheduler: scheduler_config.json) and its safetensors.
// JSON files are parsed once here; type errors name the file and the key.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ditgen::io {

// The bytes of the file at `path` (a tokenizer's model); ModelError naming
// it when it cannot be opened or read.
std::string read_file_bytes(const std::string& path);

// Reads and parses a JSON file; ModelError("<path>: ...") if missing or invalid.
nlohmann::json read_json_file(const std::string& path);

class ModelDir {
 public:
  // ModelError if the directory or its model_index.json is missing/invalid.
  static ModelDir open(const std::string& root);

  const std::string& root() const { return root_; }
  const nlohmann::json& model_index() const { return model_index_; }
  std::string part_dir(const std::string& part) const;  // root/part; ModelError if missing
  // <root>/<part>/config.json parsed (scheduler: scheduler_config.json).
  nlohmann::json part_config(const std::string& part) const;
  std::string part_config_path(const std::string& part) const;
  // model_index.json "id2label" (string keys "0".. to names), empty if absent.
  std::vector<std::pair<int, std::string>> id2label() const;

 private:
  std::string root_;
  nlohmann::json model_index_;
};

// Typed access to config.json fields with errors that name file and key:
//   get_int(cfg, "num_layers", path) -> ModelError("<path>: num_layers: expected an integer, got string")
int64_t get_int(const nlohmann::json& cfg, const std::string& key, const std::string& path);
int64_t get_int_or(const nlohmann::json& cfg, const std::string& key, int64_t fallback, const std::string& path);
double get_number_or(const nlohmann::json& cfg, const std::string& key, double fallback, const std::string& path);
bool get_bool_or(const nlohmann::json& cfg, const std::string& key, bool fallback, const std::string& path);
std::string get_string_or(const nlohmann::json& cfg, const std::string& key, const std::string& fallback,
                          const std::string& path);

}  // namespace ditgen::io
