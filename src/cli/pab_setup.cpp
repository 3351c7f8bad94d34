#include "cli/pab_setup.h"

#include <array>
#include <cstdio>

#include "io/line_plot.h"
#include "util/strings.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ditgen::cli {

pab::Schedule pab_schedule(const RunConfig& cfg, const std::string& config_path,
                           const models::TransformerSpec& model) {
  const int num_layers = static_cast<int>(model.num_layers());
  pab::Schedule s;
  const std::pair<pab::Kind, const std::optional<PabKindConfig>*> kinds[] = {
      {pab::Kind::kSpatial, &cfg.pab.spatial},
      {pab::Kind::kTemporal, &cfg.pab.temporal},
      {pab::Kind::kCross, &cfg.pab.cross},
      {pab::Kind::kMlp, &cfg.pab.mlp}};
  for (const auto& [kind, conf] : kinds) {
    if (!conf->has_value()) continue;
    const PabKindConfig& c = **conf;
    if (!model.has_pab_kind(kind)) {
      std::string kinds;
      for (int k = 0; k < pab::kKinds; ++k)
        if (model.has_pab_kind(static_cast<pab::Kind>(k)))
          kinds += std::string(kinds.empty() ? "" : " and ") + "pab." + pab::kind_name(static_cast<pab::Kind>(k));
      throw ConfigError(config_path + ": pab." + pab::kind_name(kind) + ": a " + model.family() + " model has no " +
                        pab::kind_name(kind) + " attention (only " + kinds + " apply)");
    }
    for (size_t i = 0; i < c.blocks.size(); ++i)
      if (c.blocks[i] >= num_layers)
        throw ConfigError(config_path + ": pab.mlp.blocks[" + std::to_string(i) + "]: block " +
                          std::to_string(c.blocks[i]) + " does not exist (the model has " +
                          std::to_string(num_layers) + " blocks, 0.." + std::to_string(num_layers - 1) + ")");
    s[kind] = {true, c.range, c.threshold[0], c.threshold[1], c.blocks};
  }
  return s;
}

std::optional<pab::StepCacheSettings> step_cache_settings(const RunConfig& cfg, const std::string& config_path,
                                                          const models::TransformerSpec& model) {
  if (!cfg.cache.enabled()) return std::nullopt;
  pab::StepCacheSettings s;
  s.threshold = cfg.cache.threshold;
  s.kind = *cfg.cache.kind;
  if (s.kind == CacheKind::kFirstBlock) return s;
  s.coefficients = cfg.cache.coefficients.empty() ? model.teacache_coefficients() : cfg.cache.coefficients;
  if (s.coefficients.empty())
    throw ConfigError(config_path + ": cache.coefficients: required for teacache on this " + model.family() +
                      " model: TeaCache's authors published coefficients for Wan2.1-T2V-1.3B, Wan2.1-T2V-14B, "
                      "CogVideoX-2b, CogVideoX-5b and Latte-1 only (docs/step-caches.md says how to fit them)");
  return s;
}

std::string pab_summary_line(const pipeline::PabSummary& s) {
  std::string line = "pab:";
  int64_t skipped = 0;
  for (int k = 0; k < pab::kKinds; ++k) {
    const auto& st = s.kinds[k];
    skipped += st.comm_bytes_skipped;
    if (st.computed + st.reused == 0) continue;
    line += std::string(" ") + pab::kind_name(static_cast<pab::Kind>(k)) + " " + std::to_string(st.computed) +
            " computed / " + std::to_string(st.reused) + " reused,";
  }
  return line + " communication skipped " + format_bytes(static_cast<double>(skipped)) + ", cache peak " +
         format_bytes(static_cast<double>(s.cache_peak_bytes));
}

nlohmann::json pab_summary_json(const pipeline::PabSummary& s, const pab::Schedule& schedule) {
  nlohmann::json j;
  j["per"] = "rank 0; outputs of (block, step) pairs over every generation of the run";
  for (int k = 0; k < pab::kKinds; ++k) {
    const auto kind = static_cast<pab::Kind>(k);
    if (!schedule[kind].configured) continue;
    const auto& st = s.kinds[k];
    j["kinds"][pab::kind_name(kind)] = {{"computed", st.computed},
                                        {"reused", st.reused},
                                        {"comm_bytes_skipped", st.comm_bytes_skipped},
                                        {"range", schedule[kind].range},
                                        {"threshold", {schedule[kind].lo, schedule[kind].hi}}};
  }
  j["cache_peak_bytes"] = s.cache_peak_bytes;
  return j;
}

std::string cache_summary_line(const pab::StepCacheStats& s, const pab::StepCacheSettings& settings) {
  return std::string("cache: ") + name_of(settings.kind) + " " + std::to_string(s.steps_computed) + " steps computed / " +
         std::to_string(s.steps_skipped) + " skipped, communication skipped " +
         format_bytes(static_cast<double>(s.comm_bytes_skipped));
}

nlohmann::json cache_summary_json(const pab::StepCacheStats& s, const pab::StepCacheSettings& settings) {
  nlohmann::json j;
  j["per"] = "rank 0; forwards (steps of a batch) over every generation of the run; decisions per output (and CFG half where they decide apart)";
  j["kind"] = name_of(settings.kind);
  j["threshold"] = settings.threshold;
  if (settings.kind == CacheKind::kTeaCache) j["coefficients"] = settings.coefficients;
  j["steps_computed"] = s.steps_computed;
  j["steps_skipped"] = s.steps_skipped;
  j["comm_bytes_skipped"] = s.comm_bytes_skipped;
  nlohmann::json decisions = nlohmann::json::array();
  for (const pab::StepDecision& d : s.decisions) {
    nlohmann::json e = {{"step", d.step}, {"timestep", d.timestep}, {"output", d.output}, {"computed", d.computed}};
    if (d.half >= 0) e["half"] = d.half == 0 ? "cond" : "uncond";  // the family's halves decide apart
    if (settings.kind == CacheKind::kTeaCache) e["accumulated"] = d.accumulated;
    e["metric"] = d.metric < 0 ? nlohmann::json(nullptr) : nlohmann::json(d.metric);
    decisions.push_back(e);
  }
  j["decisions"] = decisions;
  return j;
}

void write_pab_analysis(const std::string& dir, const pab::ChangeRecorder& recorder) {
  const std::string csv = recorder.csv();
  write_file_atomic(dir + "/pab.csv", csv.data(), csv.size());
  static const std::array<uint8_t, 3> colours[pab::kKinds] = {
      {31, 119, 180}, {44, 160, 44}, {148, 103, 189}, {255, 127, 14}};
  std::vector<io::PlotSeries> series;
  std::string legend;
  for (const auto& [kind, points] : recorder.mean_by_kind()) {
    io::PlotSeries s{colours[static_cast<int>(kind)], {}};
    for (const auto& [step, value] : points) s.points.emplace_back(step, value);
    series.push_back(std::move(s));
    legend += std::string(legend.empty() ? "" : ", ") + pab::kind_name(kind);
  }
  io::write_line_plot(dir + "/pab.png", series, 800, 400,
                      {{"Title", "PAB analysis: mean relative change of each output from the previous step"},
                       {"Description", "x: denoising step; y: ||o_s - o_{s-1}|| / ||o_{s-1}||, mean over blocks; "
                                       "lines (legend swatches, left to right): " + legend +
                                       " (spatial blue, temporal green, cross purple, mlp orange)"}});
}

}  // namespace ditgen::cli
