// A LoRA's targets against the model's tensors, and the report line
// (lora_coverage.h).
#include "io/lora_coverage.h"

#include <filesystem>
#include <map>

#include "util/error.h"
#include "util/strings.h"

namespace ditgen::io {
namespace {

bool for_expert(LoraExpert target, LoraExpert model) {
  if (target == LoraExpert::kAny) return true;
  return target == (model == LoraExpert::kAny ? LoraExpert::kTransformer : model);
}

// The shape the target changes, for the message and the check.
Shape changed_shape(const LoraTarget& t) {
  if (t.kind == LoraKind::kLowRank) return {t.b.dim(0), t.a.dim(1)};
  return t.delta.shape();
}

// Why `t` does not fit the model's tensor of shape `have` ("" if it does).
std::string mismatch(const LoraTarget& t, const std::optional<Shape>& have) {
  if (!have) return "the model has no tensor " + t.tensor;
  if (*have != changed_shape(t))
    return t.tensor + " is " + shape_str(*have) + ", the LoRA changes " + shape_str(changed_shape(t));
  return "";
}

constexpr size_t kKeysNamed = 5;  // in a coverage error

}  // namespace

LoraMatch match_lora(const LoraFile& file, LoraExpert expert,
                     const std::function<std::optional<Shape>(const std::string&)>& shape_of) {
  LoraMatch m;
  for (const LoraTarget& t : file.targets) {
    if (!for_expert(t.expert, expert)) {
      m.other_expert.push_back(&t);
      continue;
    }
    const std::string why = mismatch(t, shape_of(t.tensor));
    if (why.empty()) {
      m.applied.push_back(&t);
      continue;
    }
    for (const std::string& key : t.keys) m.unmatched.push_back({key, why});
  }
  m.unmatched.insert(m.unmatched.end(), file.unknown.begin(), file.unknown.end());
  return m;
}

std::string lora_report_line(const LoraFile& file, const LoraMatch& match) {
  std::vector<std::string> formats;
  for (LoraFormat f : file.formats) formats.push_back(lora_format_name(f));
  size_t keys_applied = 0;
  std::map<std::string, size_t> kinds, skipped;
  for (const LoraTarget* t : match.applied) {
    keys_applied += t->keys.size();
    ++kinds[lora_kind_name(t->kind)];
  }
  for (const LoraKeyNote& s : file.skipped) ++skipped[s.reason];
  auto counts = [](const std::map<std::string, size_t>& by) {
    std::vector<std::string> items;
    for (const auto& [what, n] : by) items.push_back(std::to_string(n) + " " + what);
    return items.empty() ? std::string() : " (" + join(items) + ")";
  };
  std::string line = "lora " + std::filesystem::path(file.path).filename().string() +
                     (formats.empty() ? "" : " (" + join(formats, "+") + ")") + ": " + std::to_string(keys_applied) +
                     " keys applied to " + std::to_string(match.applied.size()) + " tensors" + counts(kinds) + ", " +
                     std::to_string(file.skipped.size()) + " skipped" + counts(skipped) + ", " +
                     std::to_string(match.unmatched.size()) + " unmatched";
  if (!match.other_expert.empty()) {
    size_t keys = 0;
    for (const LoraTarget* t : match.other_expert) keys += t->keys.size();
    line += ", " + std::to_string(keys) + " for the other expert";
  }
  return line;
}

std::string check_lora_coverage(const LoraFile& file, const LoraMatch& match, bool strict) {
  if (match.unmatched.empty()) return "";
  std::vector<std::string> first;
  for (size_t i = 0; i < match.unmatched.size() && i < kKeysNamed; ++i)
    first.push_back(match.unmatched[i].key + ": " + match.unmatched[i].reason);
  if (match.unmatched.size() > kKeysNamed) first.push_back("...");
  const std::string text = file.path + ": " + std::to_string(match.unmatched.size()) + " LoRA key" +
                           (match.unmatched.size() == 1 ? "" : "s") + " match no tensor of the model: " +
                           join(first, "; ");
  if (strict) throw ConfigError(text + " (lora_strict: false applies the rest)");
  return text;
}

}  // namespace ditgen::io
