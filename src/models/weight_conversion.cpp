// See weight_conversion.h. The input is opened from the outside in: a model
// folder's component subfolder, a part folder's config.json (its family,
// through the registry) before its weights, a lone file's own names and
// GGUF architecture (registry: transformer_file_family) before it is
// reopened in the naming they tell.
#include "models/weight_conversion.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include "io/gguf.h"
#include "io/model_dir.h"
#include "models/placement.h"
#include "util/error.h"

namespace ditgen::models {
namespace {

namespace fs = std::filesystem;

struct Component {
  const char* name;
  Part part;
};
constexpr Component kComponents[] = {{"transformer", Part::kTransformer},
                                     {"transformer_2", Part::kTransformer},
                                     {"text_encoder", Part::kTextEncoder},
                                     {"vae", Part::kVae}};

Part part_of(const std::string& component) {
  for (const Component& c : kComponents)
    if (component == c.name) return c.part;
  throw std::invalid_argument("open_conversion_input: unknown component '" + component + "'");
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// One part's folder: its config.json says the family, then its weights open.
ConversionInput open_part_folder(const std::string& dir, Part part) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  const nlohmann::json config = io::read_json_file(config_path);
  ConversionInput in;
  in.part = part;
  if (part == Part::kTransformer) {
    const std::unique_ptr<TransformerSpec> spec = transformer_spec(config, config_path);
    const SingleFileNaming naming = spec->single_file_naming();
    in.family = spec->family();
    in.architecture = naming.read.architecture.empty() ? in.family : naming.read.architecture;
    in.file_name = naming.file_name;
  } else {
    in.family = family_of(part, config, config_path);
    in.architecture = in.family;
  }
  in.weights = io::WeightStore::open_dir(dir);
  return in;
}

// general.architecture of a GGUF file; "" for a safetensors file or a GGUF
// without the key.
std::string gguf_architecture(const std::string& path) {
  char magic[4] = {};
  std::ifstream(path, std::ios::binary).read(magic, 4);
  if (std::memcmp(magic, "GGUF", 4) != 0) return "";
  return io::GgufFile::open(path)->architecture().value_or("");
}

// One file: a transformer's in the naming its names or architecture tell
// (diffusers' otherwise), any other part's as stored.
ConversionInput open_lone_file(const std::string& path, Part part) {
  ConversionInput in;
  in.part = part;
  const std::string architecture = gguf_architecture(path);
  in.architecture = architecture;
  if (part != Part::kTransformer) {
    in.weights = io::WeightStore::open_file(path);
    return in;
  }
  const std::vector<std::string> names = io::WeightStore::open_file(path).names();
  if (std::optional<FileFamily> found = transformer_file_family(names, architecture)) {
    in.family = found->family;
    if (!found->naming.read.architecture.empty()) in.architecture = found->naming.read.architecture;
    in.file_name = found->naming.file_name;
    in.weights = io::WeightStore::open_file(path, found->naming.read);
    return in;
  }
  in.weights = io::WeightStore::open_file(path, diffusers_single_file_naming().read);
  return in;
}

// Whether a block type quantizes this tensor (weight_conversion.h).
bool block_quantizable(Part part, const std::string& name, const Shape& shape) {
  if (shape.size() != 2 || !ends_with(name, "weight")) return false;
  switch (part) {
    case Part::kTransformer: return Placement::int8_eligible(name);
    case Part::kTextEncoder: return name.find("relative_attention_bias") == std::string::npos;
    case Part::kVae: return false;
  }
  return false;
}

// Whether convert reads the tensor as floating-point values.
bool floating(const io::TensorInfo& info) {
  if (info.ggml_type) return math::ggml_traits(*info.ggml_type).dequantized && info.type != io::StoredType::kI32 &&
                             info.type != io::StoredType::kI64;
  switch (info.type) {
    case io::StoredType::kF32: case io::StoredType::kF16: case io::StoredType::kBF16:
    case io::StoredType::kF8E4M3: case io::StoredType::kF8E5M2:
      return true;
    default:
      return false;
  }
}

}  // namespace

io::GgmlType gguf_tensor_type(Part part, const std::string& name, const std::string& file_name, const Shape& shape,
                              io::GgmlType type) {
  using io::GgmlType;
  if (type == GgmlType::kF32) return type;
  if (type == GgmlType::kF16 || type == GgmlType::kBF16) {
    const bool keep = shape.size() <= 1 || shape.size() > 4 || shape_numel(shape) <= 1024 ||
                      file_name.find(".modulation") != std::string::npos;
    return keep ? GgmlType::kF32 : type;
  }
  if (!block_quantizable(part, name, shape)) return GgmlType::kF32;
  return io::whole_blocks(type, shape.back()) ? type : GgmlType::kF16;
}

const std::vector<std::string>& conversion_components() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Component& c : kComponents) out.emplace_back(c.name);
    return out;
  }();
  return names;
}

ConversionInput open_conversion_input(const std::string& input, const std::string& component) {
  const Part part = part_of(component);
  std::error_code ec;
  const fs::file_status status = fs::status(input, ec);
  if (!fs::exists(status)) throw ModelError(input + ": no such file or folder");
  if (!fs::is_directory(status)) return open_lone_file(input, part);
  if (!fs::exists(fs::path(input) / "model_index.json", ec)) return open_part_folder(input, part);
  io::ModelDir::open(input);  // a model folder's index is valid JSON
  const fs::path sub = fs::path(input) / component;
  if (!fs::is_directory(sub, ec)) {
    std::string present;
    for (const Component& c : kComponents)
      if (fs::is_directory(fs::path(input) / c.name, ec)) present += std::string(present.empty() ? "" : ", ") + c.name;
    throw ModelError(input + ": the model has no " + component + "/ folder (its components: " +
                     (present.empty() ? "none" : present) + ")");
  }
  return open_part_folder(sub.string(), part);
}

std::vector<io::ConvertedTensor> conversion_plan(const ConversionInput& in, io::GgmlType type, bool gguf) {
  const io::WeightStore& weights = in.weights;
  const std::vector<std::string> names = weights.names();
  std::set<std::string> scales;  // written into their weights, not themselves
  for (const std::string& name : names)
    if (const std::string* scale = weights.scale_of(name)) scales.insert(*scale);
  std::vector<io::ConvertedTensor> plan;
  std::map<std::string, std::string> written;  // output name -> model name
  for (const std::string& name : names) {
    if (name == "scaled_fp8" || scales.count(name)) continue;
    const io::TensorInfo& info = weights.info(name);
    if (!floating(info))
      throw ModelError(weights.file_of(name) + ": tensor '" + name + "' has type " + io::element_type_name(info) +
                       "; convert writes floating-point weights only (F32, F16, BF16, float8, GGUF blocks)");
    std::string file_name = name;
    if (in.file_name) {
      const std::optional<std::string> renamed = in.file_name(name);
      if (!renamed)
        throw ModelError(weights.file_of(name) + ": tensor '" + name + "' has no name in the " + in.family +
                         " single-file naming (a tensor of another model?)");
      file_name = *renamed;
    }
    if (const auto [at, fresh] = written.emplace(file_name, name); !fresh)
      throw ModelError(weights.dir() + ": tensors '" + at->second + "' and '" + name + "' are both named '" +
                       file_name + "' in the " + in.family + " single-file naming");
    plan.push_back({name, file_name, gguf ? gguf_tensor_type(in.part, name, file_name, info.shape, type) : type});
  }
  std::sort(plan.begin(), plan.end(),
            [](const io::ConvertedTensor& a, const io::ConvertedTensor& b) { return a.name < b.name; });
  return plan;
}

}  // namespace ditgen::models
