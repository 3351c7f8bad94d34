// The formulas of plan.h, term by term in the same order, in double
// precision (XL-size products overflow nothing, but byte counts are shown as
// fractions of MiB anyway).
#include "parallel/plan.h"

#include <algorithm>
#include <cstdio>

#include "util/error.h"

namespace ditgen::parallel {

namespace {

// Per block: the parts tensor parallelism splits.
double block_sharded(const ModelDims& m) {
  const double d = m.hidden(), f = m.ff_inner, k = m.adaln_chunks;
  return (3 * d * d + 3 * d)  // QKV
         + d * d              // out projection weight
         + (d * f + f)        // MLP in
         + f * d              // MLP out weight
         + (k * d * d + k * d);  // adaLN modulation
}

// Per block: the timestep embedder and class table (diffusers: one per block).
double block_embedder(const ModelDims& m) {
  const double d = m.hidden();
  return (256 * d + d + d * d + d) + (m.num_classes + 1) * d;
}

// Per block, replicated besides the embedder: biases added after all-reduce.
double block_row_biases(const ModelDims& m) { return 2.0 * m.hidden(); }

// Once per model, replicated, excluding pos_embed.
double model_once(const ModelDims& m) {
  const double d = m.hidden(), pa = m.patch_area();
  return (d * m.latent_channels * pa + d)        // patch embedding
         + (2 * d * d + 2 * d)                   // final adaLN
         + (pa * m.out_channels * d + pa * m.out_channels);  // final projection
}

std::string pad(const std::string& s, size_t w, bool right) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

}  // namespace

double weight_elements_per_rank(const ModelDims& m, int tp) {
  const double pos_embed = static_cast<double>(m.tokens) * m.hidden();
  return m.layers * (block_sharded(m) / tp + block_row_biases(m) + block_embedder(m)) + model_once(m) + pos_embed;
}

int64_t dit_param_count(const ModelDims& m, bool embedders_per_block) {
  const double n = m.layers * (block_sharded(m) + block_row_biases(m)) +
                   (embedders_per_block ? m.layers : 1) * block_embedder(m) + model_once(m);
  return static_cast<int64_t>(n);
}

PlanRow plan_layout(const Layout& l, const ModelDims& m, int64_t images_per_batch, bool cfg, int e) {
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
  const double d = m.hidden(), dt = d / l.tp, f = m.ff_inner, k = m.adaln_chunks, L = m.layers;
  const double sp = l.sp, tp = l.tp, latent = static_cast<double>(m.latent_h) * m.latent_w;
  const bool ulysses = l.sp_mode == "ulysses";

  r.weight_bytes_per_rank = weight_elements_per_rank(m, l.tp) * e;

  // Activations: live through the block + the larger stage.
  const double throughout = 2 * b * p * d + b * d + b * k * d + (l.tp > 1 ? b * k * d / tp : 0) +
                            b * (m.latent_channels + m.out_channels) * latent;
  double attention = 3 * b * p * dt + b * p * dt + b * p * d;
  if (l.sp > 1) attention += ulysses ? 4 * b * n * dt / sp : 2 * b * p * dt + b * p * m.heads / tp;
  const double mlp = b * p * f / tp + b * p * d;
  r.activation_bytes_per_rank = (throughout + std::max(attention, mlp)) * e;

  // Communication per step (one forward), elements sent by rank 0.
  if (l.sp > 1) {
    r.comm_sp = ulysses ? L * (3 * b * p * dt * (sp - 1) / sp + b * (n - p) * dt / sp)
                        : L * 2 * b * (n - p1) * dt;
    r.comm_gather += (sp - 1) * b * p * m.patch_area() * m.out_channels;
  }
  if (l.tp > 1) {
    r.comm_tp = L * 2 * (2 * (tp - 1) / tp * b * p * d);
    r.comm_gather += L * b * k * d * (tp - 1) / tp;
  }
  if (l.cp == 2) r.comm_cp = b * m.latent_channels * latent;
  r.comm_sp *= e;
  r.comm_tp *= e;
  r.comm_cp *= e;
  r.comm_gather *= e;
  r.comm_bytes_per_step_per_rank = r.comm_sp + r.comm_tp + r.comm_cp + r.comm_gather;
  return r;
}

std::vector<PlanRow> plan_valid_layouts(int world_size, const ModelDims& m, int64_t images_per_batch,
                                        double guidance_scale, int e) {
  std::vector<PlanRow> rows;
  for (const Layout& l : valid_layouts(world_size, m, guidance_scale))
    rows.push_back(plan_layout(l, m, images_per_batch, guidance_scale > 1.0, e));
  return rows;
}

std::string format_bytes(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", bytes, units[u]);
  return buf;
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
