// What the VAE and text-encoder specs share (VaeSpec, TextEncoderSpec: the
// seams of models/vae_spec.h and models/text_encoder.h): a spec is its
// family's parsed config.json behind the seam's interface. ConfigSpec holds
// that config and hands it out; make_config_spec is the registry row's
// factory (Spec::Config::from_json, then the Spec). The transformers'
// FamilySpec (models/family_spec.h) is the same idea with more to share.
// Below them, the checks a Config::from_json repeats from family to family
// (the class name and the keys diffusers' class takes, positive integers,
// a list of positive integers), each ModelError naming the file and key.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ditgen::models {

template <class SeamType, class ConfigType>
class ConfigSpec : public SeamType {
 public:
  using Seam = SeamType;
  using Config = ConfigType;
  explicit ConfigSpec(Config cfg) : cfg_(std::move(cfg)) {}
  const Config& config() const { return cfg_; }

 protected:
  Config cfg_;
};

template <class Spec>
std::unique_ptr<typename Spec::Seam> make_config_spec(const nlohmann::json& cfg, const std::string& path) {
  return std::make_unique<Spec>(Spec::Config::from_json(cfg, path));
}

// Requires `cfg` (the file `path`) to be a JSON object whose _class_name is
// `class_name` (ModelError "<path>: _class_name: not an <class_name> (got
// '<name>')") and whose every key is in `known_keys` (ModelError "<path>:
// <key>: not a key diffusers' <class_name> takes (...)": ditgen refuses what
// it would otherwise ignore). Keys starting with '_' are metadata.
void check_class_and_known_keys(const nlohmann::json& cfg, const std::string& path, const std::string& class_name,
                                const std::set<std::string>& known_keys);

// An integer key of a config and the field it is read into. Absent or null,
// the field keeps its value (the Config's default, diffusers'), or takes
// *fallback when that is given: a default that is another key's value, read
// before it in the same call (Wan's decoder_base_dim: base_dim).
struct IntKey {
  const char* key;
  int64_t* field;
  const int64_t* fallback = nullptr;
};

// Reads each key in order (io::get_int_or: ModelError naming `path` and the
// key when it is not an integer), then requires every value to be positive:
// ModelError "<path>: <key>: expected a positive integer, got <v>".
void read_positive_ints(const nlohmann::json& cfg, const std::string& path, std::initializer_list<IntKey> keys);

// Reads `key`, when present and not null, into *field: a non-empty array of
// at most `max` positive integers, else ModelError "<path>: <key>: expected a
// non-empty array of at most <max> integers, got <json>" or "<path>:
// <key>[i]: expected a positive integer, got <json>". Absent or null,
// *field keeps its default.
void read_positive_int_list(const nlohmann::json& cfg, const std::string& path, const char* key, size_t max,
                            std::vector<int64_t>* field);

}  // namespace ditgen::models
