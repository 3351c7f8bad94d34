// The registry table: one row per diffusers class name a part's config.json
// may carry. Transformer2DModel is diffusers' legacy catch-all; its
// norm_type says which family it is, as diffusers remaps it on load
// (_CLASS_REMAPPING_DICT in diffusers/models/model_loading_utils.py:
// ada_norm_zero -> DiTTransformer2DModel, ada_norm_single ->
// PixArtTransformer2DModel).
#include "models/registry.h"

#include "io/model_dir.h"
#include "models/dit_spec.h"
#include "util/error.h"

namespace ditgen::models {

namespace {

using SpecFactory = std::unique_ptr<TransformerSpec> (*)(const nlohmann::json&, const std::string&);

struct Family {
  Part part;
  const char* class_name;
  const char* family;
  // Transformers: the spec factory; null = named by the contract, not built yet.
  SpecFactory spec = nullptr;
  bool built = true;  // vae / text encoder: whether this version runs it
};

// clang-format off
const Family kFamilies[] = {
    {Part::kTransformer, "DiTTransformer2DModel",    "dit",    &make_dit_spec},
    {Part::kTransformer, "PixArtTransformer2DModel", "pixart", nullptr},
    {Part::kTransformer, "LatteTransformer3DModel",  "latte",  nullptr},
    {Part::kVae,         "AutoencoderKL",            "vae",    nullptr, true},
    {Part::kTextEncoder, "T5EncoderModel",           "t5",     nullptr, false},
    {Part::kTextEncoder, "UMT5EncoderModel",         "t5",     nullptr, false},
};
// clang-format on

// Transformer2DModel: diffusers' legacy class, disambiguated by norm_type.
std::string legacy_transformer_class(const nlohmann::json& cfg, const std::string& path) {
  const std::string norm = io::get_string_or(cfg, "norm_type", "layer_norm", path);
  if (norm == "ada_norm_zero") return "DiTTransformer2DModel";
  if (norm == "ada_norm_single") return "PixArtTransformer2DModel";
  throw ModelError(path + ": _class_name: Transformer2DModel with norm_type '" + norm +
                   "' is no family ditgen runs (ada_norm_zero: DiT, ada_norm_single: PixArt)");
}

const Family& lookup(Part part, const nlohmann::json& cfg, const std::string& path) {
  std::string cls = io::get_string_or(cfg, "_class_name", "", path);
  if (part == Part::kTransformer && cls == "Transformer2DModel") cls = legacy_transformer_class(cfg, path);
  std::string known;
  for (const Family& f : kFamilies) {
    if (f.part != part) continue;
    if (f.class_name == cls) return f;
    known += std::string(known.empty() ? "" : ", ") + f.class_name;
  }
  throw ModelError(path + ": _class_name: '" + cls + "' is not a " + part_name(part) + " class ditgen knows (" +
                   known + ")");
}

}  // namespace

const char* part_name(Part part) {
  switch (part) {
    case Part::kTransformer: return "transformer";
    case Part::kVae: return "vae";
    case Part::kTextEncoder: return "text_encoder";
  }
  return "?";
}

std::string family_of(Part part, const nlohmann::json& cfg, const std::string& path) {
  return lookup(part, cfg, path).family;
}

std::unique_ptr<TransformerSpec> transformer_spec(const nlohmann::json& cfg, const std::string& path) {
  const Family& f = lookup(Part::kTransformer, cfg, path);
  if (!f.spec) not_supported(std::string(f.family) + " models (" + path + ": _class_name " + f.class_name + ")");
  return f.spec(cfg, path);
}

void check_vae_family(const nlohmann::json& cfg, const std::string& path) {
  const Family& f = lookup(Part::kVae, cfg, path);
  if (!f.built) not_supported(std::string(f.class_name) + " VAEs (" + path + ")");
}

}  // namespace ditgen::models
