// The config.json checks shared by the families' Config::from_json
// (models/config_spec.h).
#include "models/config_spec.h"

#include "io/model_dir.h"
#include "util/error.h"

namespace ditgen::models {

void check_class_and_known_keys(const nlohmann::json& cfg, const std::string& path, const std::string& class_name,
                                const std::set<std::string>& known_keys) {
  require(cfg.is_object(), path, "expected a JSON object");
  const std::string cls = io::get_string_or(cfg, "_class_name", "", path);
  require(cls == class_name, path, "_class_name: not an " + class_name + " (got '" + cls + "')");
  for (const auto& [key, value] : cfg.items())
    if (!key.empty() && key[0] != '_' && !known_keys.count(key))
      throw ModelError(path + ": " + key + ": not a key diffusers' " + class_name +
                       " takes (not supported yet; ditgen refuses what it would otherwise ignore)");
}

void read_positive_ints(const nlohmann::json& cfg, const std::string& path, std::initializer_list<IntKey> keys) {
  for (const IntKey& k : keys) *k.field = io::get_int_or(cfg, k.key, k.fallback ? *k.fallback : *k.field, path);
  for (const IntKey& k : keys)
    require(*k.field > 0, path, std::string(k.key) + ": expected a positive integer, got " + std::to_string(*k.field));
}

void read_positive_int_list(const nlohmann::json& cfg, const std::string& path, const char* key, size_t max,
                            std::vector<int64_t>* field) {
  if (!cfg.contains(key) || cfg[key].is_null()) return;
  const auto& a = cfg[key];
  require(a.is_array() && !a.empty() && a.size() <= max, path,
          std::string(key) + ": expected a non-empty array of at most " + std::to_string(max) + " integers, got " +
              a.dump());
  field->clear();
  for (size_t i = 0; i < a.size(); ++i) {
    require(a[i].is_number_integer() && a[i].get<int64_t>() > 0, path,
            std::string(key) + "[" + std::to_string(i) + "]: expected a positive integer, got " + a[i].dump());
    field->push_back(a[i].get<int64_t>());
  }
}

}  // namespace ditgen::models
