// See schema.h. The schema is a flat list of dotted paths; sections are the
// paths that prefix others. The list is tiny, so linear scans are fine.
#include "config/schema.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "config/did_you_mean.h"
#include "config/foreign_names.h"

namespace ditgen::config {
namespace {

const std::vector<std::string>& schema_paths() {
  static const std::vector<std::string> paths = [] {
    std::vector<std::string> p = {
        "model", "model.path", "model.source", "model.dtype", "model.vae_dtype", "model.transformer",
        "model.transformer_2", "model.text_encoder", "model.vae", "model.quantize",
        "generate", "generate.class_labels", "generate.prompts", "generate.negative_prompt",
        "generate.prompt_file", "generate.image", "generate.last_image", "generate.max_sequence_length",
        "generate.seed", "generate.steps", "generate.guidance_scale", "generate.guidance_scale_2",
        "generate.scheduler", "generate.shift",
        "generate.batch_size", "generate.frames", "generate.height", "generate.width",
        "parallel", "parallel.sp", "parallel.cp", "parallel.tp", "parallel.sp_mode", "parallel.pp", "parallel.patches",
        "parallel.warmup_steps", "parallel.sp_weights",
        "pab",
        "cache", "cache.kind", "cache.threshold", "cache.coefficients",
        "output", "output.path", "output.format", "output.fps", "output.crf", "output.grid",
        "output.skip_existing",
        "lora", "lora_strict", "lora_apply",
        "vae", "vae.tiling", "vae.tile_sample_min_height", "vae.tile_sample_min_width",
        "vae.tile_sample_stride_height", "vae.tile_sample_stride_width",
    };
    for (const char* kind : {"spatial", "temporal", "cross", "mlp"}) {
      const std::string section = std::string("pab.") + kind;
      p.push_back(section);
      p.push_back(section + ".range");
      p.push_back(section + ".threshold");
    }
    p.push_back("pab.mlp.blocks");  // only MLP broadcast is chosen per block
    return p;
  }();
  return paths;
}

std::string last_segment(const std::string& dotted_path) {
  const auto dot = dotted_path.rfind('.');
  return dot == std::string::npos ? dotted_path : dotted_path.substr(dot + 1);
}

void reject_unknown_in(const nlohmann::json& object, const std::string& path,
                       const ConfigContext& context) {
  for (const auto& [key, value] : object.items()) {
    const std::string child = join_path(path, key);
    if (const char* feature = not_built_yet(child)) context.fail(child, std::string("not supported yet: ") + feature);
    if (!is_schema_path(child)) context.fail(child, unknown_key_message(child));
    if (value.is_object() && is_schema_section(child)) reject_unknown_in(value, child, context);
  }
}

}  // namespace

const char* not_built_yet(const std::string& dotted_path) {
  // The design's keys (docs/config.md) not built yet, each until it is: a
  // config that uses one fails then, not with "unknown key". (None now:
  // the image inputs were the last.)
  static const std::vector<std::pair<const char*, const char*>> kPlanned = {};
  for (const auto& [path, feature] : kPlanned)
    if (dotted_path == path) return feature;
  return nullptr;
}

bool is_schema_path(const std::string& dotted_path) {
  const auto& paths = schema_paths();
  return std::find(paths.begin(), paths.end(), dotted_path) != paths.end();
}

bool is_schema_section(const std::string& dotted_path) {
  const std::string prefix = dotted_path + ".";
  for (const auto& p : schema_paths())
    if (p.compare(0, prefix.size(), prefix) == 0) return true;
  return false;
}

std::string suggest_schema_path(const std::string& dotted_path) {
  // Another tool's name for a setting ("num_inference_steps" -> "generate.steps").
  if (const char* meant = schema_path_for_foreign_name(last_segment(dotted_path))) return meant;
  // A typo in any segment: nearest whole path, within the reach a typo of
  // the last segment would have ("generate.stpes" -> "generate.steps").
  const std::size_t reach = last_segment(dotted_path).size() <= 4 ? 1 : 2;
  std::string best;
  std::size_t best_distance = reach + 1;
  for (const auto& p : schema_paths()) {
    const std::size_t distance = edit_distance(dotted_path, p);
    if (distance < best_distance) {
      best = p;
      best_distance = distance;
    }
  }
  if (!best.empty()) return best;
  // The right key in the wrong section ("generate.fps" -> "output.fps").
  const std::string key = last_segment(dotted_path);
  for (const auto& p : schema_paths())
    if (last_segment(p) == key) return p;
  return "";
}

std::string unknown_key_message(const std::string& dotted_path) {
  const std::string suggestion = suggest_schema_path(dotted_path);
  return suggestion.empty() ? "unknown key" : "unknown key (did you mean " + suggestion + "?)";
}

void reject_unknown_keys(const nlohmann::json& document, const ConfigContext& context) {
  if (document.is_object()) reject_unknown_in(document, "", context);
}

}  // namespace ditgen::config
