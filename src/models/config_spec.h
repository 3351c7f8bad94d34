// What the VAE and text-encoder specs share (VaeSpec, TextEncoderSpec: the
// seams of models/vae_spec.h and models/text_encoder.h): a spec is its
// family's parsed config.json behind the seam's interface. ConfigSpec holds
// that config and hands it out; make_config_spec is the registry row's
// factory (Spec::Config::from_json, then the Spec). The transformers'
// FamilySpec (models/family_spec.h) is the same idea with more to share.
#pragma once
#include <memory>
#include <string>
#include <utility>

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

}  // namespace ditgen::models
