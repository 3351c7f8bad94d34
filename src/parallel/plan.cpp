// The formulas of plan.h, term by term in the same order, in double
// precision (XL-size products overflow nothing, but byte counts are shown as
// fractions of MiB anyway).
#include "parallel/plan.h"

#include <algorithm>
#include <cstdio>

#include "util/error.h"
#include "util/strings.h"

namespace ditgen::parallel {

namespace {

std::string pad(const std::string& s, size_t w, bool right) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

}  // namespace

double weight_elements_per_rank(const Workload& m, int tp) {
  return m.layers * (m.split_per_layer / tp + m.whole_per_layer) + m.whole_once;
}

PlanRow plan_layout(const Layout& l, const Workload& m, int64_t images_per_batch, bool cfg, int e) {
  const int64_t sequences = images_per_batch * (cfg ? 2 : 1);
  if (l.cp == 2 && !cfg) throw ConfigError("parallel.cp = 2 needs classifier-free guidance (guidance_scale > 1)");
  if (l.cp < 1 || l.sp < 1 || l.tp < 1 || sequences % l.cp != 0)
    throw ConfigError("plan: layout " + l.str() + " cannot split " + std::to_string(sequences) + " sequences");

  PlanRow r;
  r.layout = l;
  const auto shards = shard_sizes(m.tokens, l.sp);
  const double b = static_cast<double>(sequences / l.cp), n = m.tokens, p = shards[0];
  const double p1 = l.sp > 1 ? shards[1] : p;
  r.batch_per_rank = sequences / l.cp;
  r.tokens_per_rank = shards[0];
  const double d = m.hidden(), dt = d / l.tp, f = m.mlp_hidden, g = m.gathered_per_layer, L = m.layers;
  const double sp = l.sp, tp = l.tp;
  const bool ulysses = l.sp_mode == "ulysses";

  r.weight_bytes_per_rank = weight_elements_per_rank(m, l.tp) * e;

  // Activations: live through the block + the larger stage.
  const double throughout = 2 * b * p * d + b * d + b * g + (l.tp > 1 ? b * g / tp : 0) +
                            b * (static_cast<double>(m.input_elements) + m.output_elements);
  double attention = 3 * b * p * dt + b * p * dt + b * p * d;
  if (l.sp > 1) attention += ulysses ? 4 * b * n * dt / sp : 2 * b * p * dt + b * p * m.heads / tp;
  const double mlp = b * p * f / tp + b * p * d;
  r.activation_bytes_per_rank = (throughout + std::max(attention, mlp)) * e;

  // Communication per step (one forward), elements sent by rank 0.
  if (l.sp > 1) {
    r.comm_sp = ulysses ? L * (3 * b * p * dt * (sp - 1) / sp + b * (n - p) * dt / sp)
                        : L * 2 * b * (n - p1) * dt;
    r.comm_gather += (sp - 1) * b * p * m.output_per_token;
  }
  if (l.tp > 1) {
    // Product first, then the division, as the communicator counts: exact
    // in double for every size ditgen meets, so plan and run agree to the byte.
    r.comm_tp = L * m.tp_all_reduces_per_layer * (2 * (tp - 1) * (b * p * d) / tp);
    r.comm_gather += L * b * g * (tp - 1) / tp;
  }
  if (l.cp == 2) r.comm_cp = b * m.eps_elements;
  r.comm_sp *= e;
  r.comm_tp *= e;
  r.comm_cp *= e;
  r.comm_gather *= e;
  r.comm_bytes_per_step_per_rank = r.comm_sp + r.comm_tp + r.comm_cp + r.comm_gather;
  return r;
}

std::vector<PlanRow> plan_valid_layouts(int world_size, const Workload& m, int64_t images_per_batch,
                                        double guidance_scale, int e) {
  std::vector<PlanRow> rows;
  for (const Layout& l : valid_layouts(world_size, m, guidance_scale))
    rows.push_back(plan_layout(l, m, images_per_batch, guidance_scale > 1.0, e));
  return rows;
}

std::string format_plan_table(const std::vector<PlanRow>& rows, const std::string& title) {
  const std::vector<std::string> head = {"layout",    "b x p",       "weights/rank", "activations/rank",
                                         "comm/step", "sp attention", "tp all-reduce", "cp eps", "gathers"};
  std::vector<std::vector<std::string>> cells;
  for (const PlanRow& r : rows) {
    cells.push_back({r.layout.short_str(), std::to_string(r.batch_per_rank) + " x " + std::to_string(r.tokens_per_rank),
                     format_bytes(r.weight_bytes_per_rank), format_bytes(r.activation_bytes_per_rank),
                     format_bytes(r.comm_bytes_per_step_per_rank), format_bytes(r.comm_sp), format_bytes(r.comm_tp),
                     format_bytes(r.comm_cp), format_bytes(r.comm_gather)});
  }
  std::vector<size_t> width(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& row : cells) width[c] = std::max(width[c], row[c].size());
  }
  // Layout left-aligned, figures right-aligned so their units line up.
  auto line = [&](const std::vector<std::string>& v) {
    std::string s;
    for (size_t c = 0; c < v.size(); ++c) s += (c ? "  " : "") + pad(v[c], width[c], c > 0);
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string out = title.empty() ? "" : title + "\n";
  out += line(head);
  for (const auto& row : cells) out += line(row);
  out += "(per rank; comm = bytes sent per denoising step = sp attention + tp all-reduce + cp eps + gathers)\n";
  return out;
}

}  // namespace ditgen::parallel
