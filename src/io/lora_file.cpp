// The LoRA reader (lora_file.h): each key parsed and its stem resolved
// (lora_keys.h); the low-rank parts gathered per (expert, module) and checked
// as a pair; full deltas taken one key each; rank and alpha from the key,
// the metadata's LoraConfig (lora_adapter_config.h) or the rank; then every
// tensor checked (floating, finite) and converted to float32, and no tensor
// changed twice.
#include "io/lora_file.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

#include "io/lora_adapter_config.h"
#include "io/lora_keys.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "util/enum_names.h"
#include "util/error.h"

namespace ditgen::io {
namespace {

namespace fs = std::filesystem;

void refuse_pickle(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext == ".pt" || ext == ".pth" || ext == ".ckpt" || ext == ".bin")
    throw ConfigError(path + ": not read: a " + ext +
                      " file is a Python pickle, which can run code when it is loaded; ditgen reads LoRA files in "
                      "safetensors only (convert it once, e.g. with safetensors.torch.save_file)");
}

// The rank and alpha configs of the file: from its lora_adapter_metadata,
// or peft's adapter_config.json beside it (for `base_model.model.` keys).
std::map<std::string, LoraAdapterConfig> adapter_configs(const SafetensorsFile& st, const std::string& path) {
  auto it = st.metadata().find("lora_adapter_metadata");
  if (it != st.metadata().end()) return parse_lora_adapter_metadata(it->second, path + ": lora_adapter_metadata");
  const std::vector<std::string> names = st.names();
  const bool peft = std::any_of(names.begin(), names.end(),
                                [](const std::string& n) { return n.rfind("base_model.model.", 0) == 0; });
  const fs::path config = fs::path(path).parent_path() / "adapter_config.json";
  if (!peft || !fs::exists(config)) return {};
  return {{"", parse_lora_adapter_config(read_json_file(config.string()), config.string())}};
}

// A LoRA tensor as float32, checked: a floating dtype, every value finite,
// at least one element.
Tensor load_float(const SafetensorsFile& st, const std::string& key) {
  const TensorInfo& info = st.info(key);
  if (info.type != StoredType::kF32 && info.type != StoredType::kF16 && info.type != StoredType::kBF16)
    throw ModelError(st.path() + ": " + key + ": dtype " + stored_type_name(info.type) +
                     "; a LoRA tensor is F32, F16 or BF16");
  if (shape_numel(info.shape) == 0) throw ModelError(st.path() + ": " + key + ": empty, shape " + shape_str(info.shape));
  Tensor t = st.load(key).to(DType::kF32);
  const float* p = t.data();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(p[i]))
      throw ModelError(st.path() + ": " + key + ": element " + std::to_string(i) + " is " + std::to_string(p[i]));
  return t;
}

// The keys of one module's low-rank change.
struct Pair {
  LoraFormat format = LoraFormat::kDiffusers;
  std::string config_prefix;
  std::string down, up, up_bias, alpha;  // file keys; "" where absent
};

// A full-tensor delta's key.
struct Full {
  std::string key;
  LoraKind kind;
  std::string tensor;
  LoraExpert expert;
};

std::string& slot_for(Pair& pair, LoraPart part) {
  switch (part) {
    case LoraPart::kDown: return pair.down;
    case LoraPart::kUp: return pair.up;
    case LoraPart::kUpBias: return pair.up_bias;
    default: return pair.alpha;
  }
}

LoraExpert expert_of(const LoraKeyName& name, bool has_transformer_2) {
  if (name.config_prefix == "transformer_2") return LoraExpert::kTransformer2;
  if (name.config_prefix == "transformer" && has_transformer_2) return LoraExpert::kTransformer;
  return LoraExpert::kAny;
}

class Reader {
 public:
  Reader(const std::string& path, const LoraReadOptions& options)
      : path_(path), st_(SafetensorsFile::open(path)), configs_(adapter_configs(*st_, path)),
        resolver_(options.model_tensor_names) {}

  LoraFile read() {
    out_.path = path_;
    const std::vector<std::string> keys = st_->names();
    out_.keys = static_cast<int64_t>(keys.size());
    const bool has_t2 = std::any_of(keys.begin(), keys.end(),
                                    [](const std::string& k) { return k.rfind("transformer_2.", 0) == 0; });
    for (const std::string& key : keys) sort_key(key, has_t2);
    for (auto& [where, pair] : pairs_) add_pair(where.first, where.second, pair);
    for (const Full& full : fulls_) add_full(full);
    check_each_tensor_once();
    std::sort(out_.targets.begin(), out_.targets.end(), [](const LoraTarget& x, const LoraTarget& y) {
      return std::tie(x.expert, x.tensor) < std::tie(y.expert, y.tensor);
    });
    std::sort(formats_.begin(), formats_.end());
    out_.formats.assign(formats_.begin(), std::unique(formats_.begin(), formats_.end()));
    return std::move(out_);
  }

 private:
  std::string at(const std::string& key) const { return path_ + ": " + key; }

  // Parses and resolves one key into a pair slot, a full delta, skipped or unknown.
  void sort_key(const std::string& key, bool has_t2) {
    LoraKeyParse parse = parse_lora_key(key);
    if (!parse.skipped.empty()) return out_.skipped.push_back({key, parse.skipped});
    if (!parse.name) return out_.unknown.push_back({key, parse.unknown});
    const LoraKeyName& name = *parse.name;
    std::string why;
    std::optional<LoraNameResolver::Resolved> resolved = resolver_.resolve(name, &why);
    if (!resolved) return out_.unknown.push_back({key, why});
    formats_.push_back(name.format);
    const LoraExpert expert = expert_of(name, has_t2);
    switch (name.part) {
      case LoraPart::kDiff:
        if (resolved->parameter)
          return fulls_.push_back({key, resolved->table ? LoraKind::kTable : LoraKind::kWeight, resolved->name, expert});
        return fulls_.push_back({key, LoraKind::kWeight, resolved->name + ".weight", expert});
      case LoraPart::kDiffBias:
        return fulls_.push_back({key, LoraKind::kBias, resolved->name + ".bias", expert});
      case LoraPart::kDiffTable:
        return fulls_.push_back({key, LoraKind::kTable, resolved->name, expert});
      default:
        break;
    }
    if (resolved->parameter) return out_.unknown.push_back({key, "a low-rank part for '" + resolved->name +
                                                                     "', a parameter (LoRA takes a module's weight)"});
    Pair& pair = pairs_[{expert, resolved->name}];
    std::string& slot = slot_for(pair, name.part);
    if (!slot.empty())
      throw ModelError(at(key) + ": changes the same tensor as " + slot + " (" + resolved->name + ")");
    if (pair.down.empty() && pair.up.empty() && pair.up_bias.empty() && pair.alpha.empty()) {
      pair.format = name.format;
      pair.config_prefix = name.config_prefix;
    }
    slot = key;
  }

  // The config that gives this pair's rank and alpha, if any.
  const LoraAdapterConfig* config_for(const Pair& pair) const {
    if (pair.format != LoraFormat::kDiffusers && pair.format != LoraFormat::kPeft) return nullptr;
    auto it = configs_.find(pair.config_prefix);
    return it == configs_.end() ? nullptr : &it->second;
  }

  void add_pair(LoraExpert expert, const std::string& module, const Pair& pair) {
    if (pair.down.empty() || pair.up.empty()) {
      const std::string& present = !pair.down.empty() ? pair.down
                                   : !pair.up.empty() ? pair.up
                                   : !pair.alpha.empty() ? pair.alpha
                                                         : pair.up_bias;
      throw ModelError(at(present) + ": " + module + " has no " +
                       (pair.down.empty() ? "lora_A / lora_down" : "lora_B / lora_up") +
                       " weight in the file: a LoRA needs both halves");
    }
    const TensorInfo& down = st_->info(pair.down);
    const TensorInfo& up = st_->info(pair.up);
    if (down.shape.size() != 2 || up.shape.size() != 2) {
      const std::string reason = "a LoRA of a " + std::to_string(std::max(down.shape.size(), up.shape.size())) +
                                 "-D (convolution) weight: not supported";
      for (const std::string* k : {&pair.down, &pair.up, &pair.alpha, &pair.up_bias})
        if (!k->empty()) out_.unknown.push_back({*k, reason});
      return;
    }
    const int64_t rank = down.shape[0];
    if (up.shape[1] != rank)
      throw ModelError(at(pair.up) + ": shape " + shape_str(up.shape) + " has rank " + std::to_string(up.shape[1]) +
                       ", its down weight " + pair.down + " " + shape_str(down.shape) + " rank " + std::to_string(rank));
    LoraTarget t;
    t.tensor = module + ".weight";
    t.kind = LoraKind::kLowRank;
    t.expert = expert;
    t.a = load_float(*st_, pair.down);
    t.b = load_float(*st_, pair.up);
    t.rank = rank;
    // alpha: the pair's `.alpha` key, else the file's LoraConfig, else the
    // rank (scaling 1, diffusers' rule for a file that gives none)
    t.alpha = static_cast<double>(rank);
    t.scaling = 1;
    const LoraAdapterConfig* config = config_for(pair);
    if (config) {
      if (config->rank_for(module) != rank)
        throw ModelError(at(pair.down) + ": rank " + std::to_string(rank) + ", but the file's LoraConfig gives " +
                         module + " rank " + std::to_string(config->rank_for(module)));
      t.alpha = config->alpha_for(module);
      t.scaling = config->scaling(t.alpha, rank);
    }
    if (!pair.alpha.empty()) {
      const Tensor alpha = load_float(*st_, pair.alpha);
      if (alpha.numel() != 1)
        throw ModelError(at(pair.alpha) + ": shape " + shape_str(alpha.shape()) + "; alpha is one number");
      t.alpha = alpha.data()[0];
      t.scaling = t.alpha / static_cast<double>(rank);
    }
    t.keys = {pair.down, pair.up};
    if (!pair.alpha.empty()) t.keys.push_back(pair.alpha);
    if (!pair.up_bias.empty()) {
      LoraTarget bias;
      bias.tensor = module + ".bias";
      bias.kind = LoraKind::kBias;
      bias.expert = expert;
      bias.delta = load_float(*st_, pair.up_bias);
      if (bias.delta.ndim() != 1 || bias.delta.dim(0) != up.shape[0])
        throw ModelError(at(pair.up_bias) + ": shape " + shape_str(bias.delta.shape()) + "; the bias of a LoRA whose up weight is " +
                         shape_str(up.shape) + " has (" + std::to_string(up.shape[0]) + ")");
      bias.rank = t.rank;
      bias.alpha = t.alpha;
      bias.scaling = t.scaling;
      bias.keys = {pair.up_bias};
      out_.targets.push_back(std::move(bias));
    }
    out_.targets.push_back(std::move(t));
  }

  void add_full(const Full& full) {
    LoraTarget t;
    t.tensor = full.tensor;
    t.kind = full.kind;
    t.expert = full.expert;
    t.delta = load_float(*st_, full.key);
    if (full.kind == LoraKind::kBias && t.delta.ndim() != 1)
      throw ModelError(at(full.key) + ": shape " + shape_str(t.delta.shape()) + "; a bias's change is 1-D");
    t.keys = {full.key};
    out_.targets.push_back(std::move(t));
  }

  // Two keys changing one tensor (for one expert, or one of them for any):
  // ModelError naming both.
  void check_each_tensor_once() const {
    std::map<std::string, std::vector<const LoraTarget*>> by_tensor;
    for (const LoraTarget& t : out_.targets) by_tensor[t.tensor].push_back(&t);
    for (const auto& [tensor, targets] : by_tensor)
      for (size_t i = 0; i < targets.size(); ++i)
        for (size_t j = i + 1; j < targets.size(); ++j) {
          const LoraExpert x = targets[i]->expert, y = targets[j]->expert;
          if (x == y || x == LoraExpert::kAny || y == LoraExpert::kAny)
            throw ModelError(at(targets[j]->keys.front()) + ": changes " + tensor + ", as " +
                             targets[i]->keys.front() + " does (one change per tensor)");
        }
  }

  std::string path_;
  std::shared_ptr<SafetensorsFile> st_;
  std::map<std::string, LoraAdapterConfig> configs_;
  LoraNameResolver resolver_;
  std::map<std::pair<LoraExpert, std::string>, Pair> pairs_;
  std::vector<Full> fulls_;
  std::vector<LoraFormat> formats_;
  LoraFile out_;
};

}  // namespace

constexpr EnumName<LoraFormat> kFormatNames[] = {{LoraFormat::kDiffusers, "diffusers"},
                                                  {LoraFormat::kPeft, "peft"},
                                                  {LoraFormat::kKohya, "kohya"},
                                                  {LoraFormat::kComfy, "comfy"}};
constexpr EnumName<LoraKind> kKindNames[] = {{LoraKind::kLowRank, "low-rank"},
                                             {LoraKind::kWeight, "weight"},
                                             {LoraKind::kBias, "bias"},
                                             {LoraKind::kTable, "table"}};
constexpr EnumName<LoraExpert> kExpertNames[] = {{LoraExpert::kAny, "any"},
                                                 {LoraExpert::kTransformer, "transformer"},
                                                 {LoraExpert::kTransformer2, "transformer_2"}};

const char* lora_format_name(LoraFormat f) { return name_in(kFormatNames, f); }
const char* lora_kind_name(LoraKind k) { return name_in(kKindNames, k); }
const char* lora_expert_name(LoraExpert e) { return name_in(kExpertNames, e); }

LoraFile read_lora_file(const std::string& path, const LoraReadOptions& options) {
  refuse_pickle(path);
  return Reader(path, options).read();
}

}  // namespace ditgen::io
