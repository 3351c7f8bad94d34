// The config's `pab` and `cache` sections as a pab::Schedule and step cache settings (block indices checked
// against the model), and the run's PAB summary as a stderr line and as the
// --pab-stats JSON of docs/design.md §5.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "pab/broadcast.h"
#include "models/transformer.h"
#include "pipeline/pipeline.h"

namespace ditgen::cli {

// ConfigError naming `config_path` and the field for a kind of attention
// the model does not have, or pab.mlp.blocks[i] for a block it does not have.
pab::Schedule pab_schedule(const RunConfig& cfg, const std::string& config_path, const models::TransformerSpec& model);

std::string pab_summary_line(const pipeline::PabSummary& s);
nlohmann::json pab_summary_json(const pipeline::PabSummary& s, const pab::Schedule& schedule);
// The config's `cache` section as the step cache's settings (empty: off);
// a teacache section without coefficients takes the model's published
// ones, and a ConfigError naming `config_path` and cache.coefficients when
// it has none.
std::optional<pab::StepCacheSettings> step_cache_settings(const RunConfig& cfg, const std::string& config_path,
                                                          const models::TransformerSpec& model);
// The step cache (pab/step_cache.h): the stderr line and --cache-stats' JSON.
std::string cache_summary_line(const pab::StepCacheStats& s, const pab::StepCacheSettings& settings);
nlohmann::json cache_summary_json(const pab::StepCacheStats& s, const pab::StepCacheSettings& settings);

// --pab-analyze DIR: DIR/pab.csv (every row) and DIR/pab.png (mean relative
// change over blocks per step, one line per kind: spatial blue, temporal
// green, cross purple, mlp orange; the legend swatches in that order).
void write_pab_analysis(const std::string& dir, const pab::ChangeRecorder& recorder);

}  // namespace ditgen::cli
