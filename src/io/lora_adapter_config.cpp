// peft's LoraConfig fields, parsed and checked once; peft's pattern rule
// (lora_adapter_config.h).
#include "io/lora_adapter_config.h"

#include <cmath>

#include "util/error.h"

namespace ditgen::io {
namespace {

// The regular-expression characters this reader does not evaluate ('.' it
// does; '^' only leading).
constexpr const char* kUnsupportedRegex = "\\*+?[](){}|$^";

std::string pattern_body(const std::string& pattern) {
  return !pattern.empty() && pattern[0] == '^' ? pattern.substr(1) : pattern;
}

void check_pattern(const std::string& pattern, const std::string& where) {
  const std::string body = pattern_body(pattern);
  if (body.empty() || body.find_first_of(kUnsupportedRegex) != std::string::npos)
    throw ConfigError(where + ": pattern '" + pattern +
                      "' is a regular expression this reader does not evaluate (it takes module names, '.' and a "
                      "leading '^'): not supported");
}

double finite_number(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number()) throw ModelError(where + ": expected a number, got " + std::string(v.type_name()));
  const double d = v.get<double>();
  if (!std::isfinite(d)) throw ModelError(where + ": not finite");
  return d;
}

int64_t positive_int(const nlohmann::json& v, const std::string& where) {
  constexpr int64_t kMaxRank = int64_t{1} << 40;
  if (!v.is_number_integer()) throw ModelError(where + ": expected an integer, got " + std::string(v.type_name()));
  const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() >= 1 && v.get<uint64_t>() <= uint64_t{kMaxRank}
                                               : v.get<int64_t>() >= 1 && v.get<int64_t>() <= kMaxRank;
  if (!in_range) throw ModelError(where + ": " + v.dump() + " is not a rank (1 to 2^40)");
  return v.get<int64_t>();
}

bool boolean(const nlohmann::json& v, const std::string& where) {
  if (!v.is_boolean()) throw ModelError(where + ": expected true or false, got " + std::string(v.type_name()));
  return v.get<bool>();
}

template <class T, class Read>
std::vector<std::pair<std::string, T>> patterns(const nlohmann::json& v, const std::string& where, Read read) {
  if (!v.is_object()) throw ModelError(where + ": expected an object, got " + std::string(v.type_name()));
  std::vector<std::pair<std::string, T>> out;
  for (const auto& [pattern, value] : v.items()) {
    check_pattern(pattern, where);
    out.emplace_back(pattern, read(value, where + "." + pattern));
  }
  return out;
}

template <class T>
const T* first_match(const std::vector<std::pair<std::string, T>>& patterns, const std::string& module) {
  for (const auto& [pattern, value] : patterns)
    if (peft_pattern_matches(pattern, module)) return &value;
  return nullptr;
}

}  // namespace

bool peft_pattern_matches(const std::string& pattern, const std::string& module) {
  const bool anchored = !pattern.empty() && pattern[0] == '^';
  const std::string body = pattern_body(pattern);
  // re.match(r"(.*\.)?(BODY)$", module): BODY spans module[start:], where
  // start is 0 or follows a dot ('^' in BODY: start 0 only).
  for (size_t start = 0; start <= module.size(); ++start) {
    if (start > 0 && (anchored || module[start - 1] != '.')) continue;
    if (module.size() - start != body.size()) continue;
    bool same = true;
    for (size_t j = 0; j < body.size() && same; ++j) same = body[j] == '.' || body[j] == module[start + j];
    if (same) return true;
  }
  return false;
}

int64_t LoraAdapterConfig::rank_for(const std::string& module) const {
  const int64_t* r_match = first_match(rank_pattern, module);
  return r_match ? *r_match : r;
}

double LoraAdapterConfig::alpha_for(const std::string& module) const {
  const double* a_match = first_match(alpha_pattern, module);
  return a_match ? *a_match : lora_alpha;
}

double LoraAdapterConfig::scaling(double alpha, int64_t rank) const {
  return use_rslora ? alpha / std::sqrt(static_cast<double>(rank)) : alpha / static_cast<double>(rank);
}

LoraAdapterConfig parse_lora_adapter_config(const nlohmann::json& fields, const std::string& where,
                                            const std::string& field_prefix) {
  if (!fields.is_object()) throw ModelError(where + ": expected an object, got " + std::string(fields.type_name()));
  LoraAdapterConfig c;
  auto field = [&](const char* name) -> const nlohmann::json* {
    auto it = fields.find(name);
    return it == fields.end() || it->is_null() ? nullptr : &*it;
  };
  const std::string at = where + ": " + field_prefix;
  if (auto* v = field("r")) c.r = positive_int(*v, at + "r");
  if (auto* v = field("lora_alpha")) c.lora_alpha = finite_number(*v, at + "lora_alpha");
  if (auto* v = field("rank_pattern")) c.rank_pattern = patterns<int64_t>(*v, at + "rank_pattern", positive_int);
  if (auto* v = field("alpha_pattern")) c.alpha_pattern = patterns<double>(*v, at + "alpha_pattern", finite_number);
  if (auto* v = field("use_rslora")) c.use_rslora = boolean(*v, at + "use_rslora");
  if (auto* v = field("use_dora"); v && boolean(*v, at + "use_dora"))
    throw ConfigError(at + "use_dora: a DoRA adapter (weight-decomposed LoRA): not supported");
  return c;
}

std::map<std::string, LoraAdapterConfig> parse_lora_adapter_metadata(const std::string& json_text,
                                                                     const std::string& where) {
  nlohmann::json all;
  try {
    all = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw ModelError(where + ": not valid JSON (" + e.what() + ")");
  }
  if (!all.is_object()) throw ModelError(where + ": expected an object, got " + std::string(all.type_name()));
  std::map<std::string, nlohmann::json> by_prefix;
  for (const auto& [key, value] : all.items()) {
    const size_t dot = key.find('.');
    const std::string prefix = dot == std::string::npos ? "" : key.substr(0, dot);
    const std::string name = dot == std::string::npos ? key : key.substr(dot + 1);
    by_prefix[prefix][name] = value;
  }
  std::map<std::string, LoraAdapterConfig> out;
  for (const auto& [prefix, fields] : by_prefix)
    out[prefix] = parse_lora_adapter_config(fields, where, prefix.empty() ? "" : prefix + ".");
  return out;
}

}  // namespace ditgen::io
