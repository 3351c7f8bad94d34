// The formulas of plan.h, term by term in the same order, in double
// precision (XL-size products overflow nothing, but byte counts are shown as
// fractions of MiB anyway).
#include "parallel/plan.h"

#include <algorithm>
#include <cstdio>

#include "parallel/shard.h"
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

PlanRow plan_layout(const Layout& l, const Workload& m, int64_t images_per_batch, bool cfg, ElementSizes bytes) {
  const int e = bytes.activations, em = bytes.messages;
  const int64_t sequences = images_per_batch * (cfg ? 2 : 1);
  if (l.cp == 2 && !cfg) throw ConfigError("parallel.cp = 2 needs classifier-free guidance (guidance_scale > 1)");
  if (l.cp < 1 || l.sp < 1 || l.tp < 1 || l.pp < 1 || sequences % l.cp != 0)
    throw ConfigError("plan: layout " + l.str() + " cannot split " + std::to_string(sequences) + " sequences");

  PlanRow r;
  r.layout = l;
  const bool video = m.video(), dsp = video && l.sp > 1 && l.sp_mode == SpMode::kDsp;
  const bool ulysses = l.sp > 1 && l.sp_mode == SpMode::kUlysses, ring = l.sp > 1 && l.sp_mode == SpMode::kRing;
  const Sharding split = l.sp_split();
  // The token sequences sp shards: an image's, each frame's, or (an
  // attention over every frame at once) the whole video's.
  const int64_t seq_tokens = m.sequence_tokens();
  const auto tokens = shard_sizes(seq_tokens, l.sp, split);
  const int64_t bi = sequences / l.cp, ti = video ? m.frames : 1;
  const int64_t fi = dsp ? shard_sizes(m.frames, l.sp, split)[0] : ti;
  const double b = static_cast<double>(bi), n = static_cast<double>(seq_tokens), p = tokens[0],
               p1 = l.sp > 1 ? tokens[1] : p;
  const double frames = static_cast<double>(ti), f = static_cast<double>(fi);
  // Outside the temporal attention: S sequences of P tokens, rows = S*P.
  const double seqs = dsp ? b * f : b * static_cast<double>(m.sequences_per_sample()), per_seq = dsp ? n : p,
               rows = seqs * per_seq;
  r.batch_per_rank = bi;
  r.frames_per_rank = video ? fi : 0;
  r.tokens_per_rank = static_cast<int64_t>(per_seq);
  r.rows_per_rank = rows;
  const double d = m.hidden(), dt = d / l.tp, ff = m.mlp_hidden, g = m.gathered_per_layer;
  const double sp = l.sp, tp = l.tp;
  // PipeFusion: rank 0 is the first stage, holding a largest share of the layers.
  const double L = static_cast<double>(l.stage_split().size(m.layers, l.pp, 0));

  const double split_bytes = bytes.layer_matrices > 0 ? bytes.layer_matrices : bytes.weights;
  r.weight_bytes_per_rank =
      L * (m.split_per_layer / tp * split_bytes + m.whole_per_layer * bytes.weights) + m.whole_once * bytes.weights;

  // PipeFusion x Ulysses: the all-to-alls run per patch, over its tokens
  // (rank 0's share pm of each patch Pm); the warm-up's whole image gives
  // the same figure when the shards divide evenly.
  double patch_rows = p, patch_ulysses = 0;  // rank 0's tokens of all patches of a step, their all-to-alls
  if (l.pp > 1) {
    const int patches = l.pipeline_patches();
    patch_rows = 0;
    for (int i = 0; i < patches; ++i) {
      const double whole = static_cast<double>(even_shard(seq_tokens, patches, i).size());
      const double pm = static_cast<double>(split.size(static_cast<int64_t>(whole), l.sp, 0));
      patch_rows += pm;
      if (ulysses) patch_ulysses += (3 * seqs * pm * dt * (sp - 1) / sp + seqs * (whole - pm) * dt / sp) * em;
    }
  }

  // Activations: live through the block + the largest stage.
  const double throughout = 2 * rows * d + b * d + b * g + (l.tp > 1 ? b * g / tp : 0) +
                            b * (static_cast<double>(m.input_elements) + m.output_elements);
  double attention = 3 * rows * dt + rows * dt + rows * d;
  if (ulysses) attention += 4 * seqs * n * dt / sp;
  // Ring's K/V buffers hold the largest shard (rank 0's, unless weighted).
  if (ring) attention += 2 * seqs * static_cast<double>(split.largest(seq_tokens, l.sp)) * dt + rows * m.heads / tp;
  const double temporal =
      dsp && m.has(AttentionKind::kTemporal) ? b * frames * p * d + 4 * b * frames * p * dt + rows * dt + rows * d : 0;
  const double mlp = rows * ff / tp + rows * d;
  r.activation_bytes_per_rank = (throughout + std::max({attention, temporal, mlp})) * e;
  if (l.pp > 1) {
    // The keys and values of every token kept per layer of the stage, the
    // whole model output every stage receives.
    r.stale_kv_bytes = 2 * L * seqs * n * dt / sp * e;  // every frame's; its head shard under Ulysses
    r.activation_bytes_per_rank += r.stale_kv_bytes + seqs * n * m.output_per_token * e;
    const double patches = l.pipeline_patches();
    r.pipeline_bubble = (l.pp - 1) / (patches + l.pp - 1);
    // Every patch's residual rows go on to the next stage (the warm-up's
    // whole image too); the last stage broadcasts the output to the others.
    r.comm_pp = seqs * patch_rows * d * em;
    r.comm_pp_last = (l.pp - 1) * seqs * n * m.output_per_token * em;
  }

  // Communication, bytes sent by rank 0, each call as the communicator counts it.
  const int64_t ar = l.tp > 1 ? 2 * int64_t{l.tp - 1} * static_cast<int64_t>(rows * d) * em / l.tp : 0;
  // What an attention over tokens sharded by sp sends (the tokens of each
  // frame, or of all frames at once: per-frame shards make the same bytes),
  // and what dsp's switch around a temporal attention sends.
  double token_sharded = 0, switch_bytes = 0;
  if (ulysses)
    token_sharded = l.pp > 1 ? patch_ulysses : (3 * seqs * p * dt * (sp - 1) / sp + seqs * (n - p) * dt / sp) * em;
  if (ring) token_sharded = 2 * seqs * (n - p1) * dt * em;
  if (dsp) switch_bytes = (b * f * (n - p) * d + b * (frames - f) * p * dt) * em;
  // Per attention operation of a layer: its sp bytes, and its branch's
  // (what a PAB reuse of it skips: sp bytes + the tp all-reduce of its
  // output). Keys from another sequence (the text) are whole on every rank.
  double sp_per_layer = 0;
  for (const AttentionOp& op : m.attention_ops()) {
    double sent = 0;
    if (op.keys == KeySource::kSameSequence)
      sent = op.kind == AttentionKind::kTemporal ? switch_bytes : token_sharded;
    sp_per_layer += sent;
    const double branch = sent + static_cast<double>(ar);
    switch (op.kind) {
      case AttentionKind::kSpatial:
      case AttentionKind::kSpatioTemporal: r.branch_spatial = std::max(r.branch_spatial, branch); break;
      case AttentionKind::kTemporal: r.branch_temporal = std::max(r.branch_temporal, branch); break;
      case AttentionKind::kCross: r.branch_cross = std::max(r.branch_cross, branch); break;
    }
  }
  r.branch_mlp = m.feed_forwards > 0 ? static_cast<double>(ar) : 0;

  r.comm_sp = L * sp_per_layer;
  r.comm_tp = L * static_cast<double>(m.tp_all_reduces_per_layer()) * static_cast<double>(ar);
  if (l.tp > 1 && m.qk_norms_across_heads) {
    // Per attention: q's rows and k's (the sequence's rows, or b texts of
    // op.tokens rows), each one all-reduce of a float per row.
    const auto reduced = [&](double count) {
      return static_cast<double>(2 * int64_t{l.tp - 1} * static_cast<int64_t>(count) * em / l.tp);
    };
    double norms = 0;
    for (const AttentionOp& op : m.attention_ops())
      norms += reduced(rows) + reduced(op.keys == KeySource::kSameSequence ? rows : b * static_cast<double>(op.tokens)) +
               (op.added_tokens > 0 ? reduced(b * static_cast<double>(op.added_tokens)) : 0.0);
    r.comm_tp += L * norms;
  }
  // The output is gathered over sp by the last stage only (rank 0 is the first).
  if (l.sp > 1 && l.pp == 1) r.comm_gather += (sp - 1) * rows * m.output_per_token * em;
  if (l.tp > 1) r.comm_gather += L * b * g * (tp - 1) / tp * em;
  if (l.cp == 2) r.comm_cp = b * m.eps_elements * em;
  r.comm_bytes_per_step_per_rank = r.comm_sp + r.comm_tp + r.comm_cp + r.comm_gather + r.comm_pp;
  return r;
}

std::vector<PlanRow> plan_valid_layouts(int world_size, const Workload& m, int64_t images_per_batch,
                                        double guidance_scale, ElementSizes e) {
  std::vector<PlanRow> rows;
  for (const Layout& l : valid_layouts(world_size, m, guidance_scale))
    rows.push_back(plan_layout(l, m, images_per_batch, guidance_scale > 1.0, e));
  return rows;
}

std::string format_plan_table(const std::vector<PlanRow>& rows, const std::string& title) {
  const bool video = !rows.empty() && rows.front().frames_per_rank > 0;
  const bool pipelined = std::any_of(rows.begin(), rows.end(), [](const PlanRow& r) { return r.layout.pp > 1; });
  std::vector<std::string> head = {"layout",    video ? "b x f x p" : "b x p",       "weights/rank", "activations/rank",
                                   "comm/step", "sp attention", "tp all-reduce", "cp eps", "gathers"};
  if (pipelined) head.insert(head.end(), {"pp hops", "bubble"});
  std::vector<std::vector<std::string>> cells;
  for (const PlanRow& r : rows) {
    const std::string frames = r.frames_per_rank > 0 ? std::to_string(r.frames_per_rank) + " x " : "";
    cells.push_back({r.layout.short_str(),
                     std::to_string(r.batch_per_rank) + " x " + frames + std::to_string(r.tokens_per_rank),
                     format_bytes(r.weight_bytes_per_rank), format_bytes(r.activation_bytes_per_rank),
                     format_bytes(r.comm_bytes_per_step_per_rank), format_bytes(r.comm_sp), format_bytes(r.comm_tp),
                     format_bytes(r.comm_cp), format_bytes(r.comm_gather)});
    if (pipelined) {
      char bubble[32];
      std::snprintf(bubble, sizeof bubble, "%.0f%%", 100 * r.pipeline_bubble);
      cells.back().insert(cells.back().end(), {format_bytes(r.comm_pp), bubble});
    }
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
  out += "(per rank; comm = bytes sent per denoising step = sp attention + tp all-reduce + cp eps + gathers";
  out += pipelined ? " + pp hops; bubble: share of a step a stage waits while the pipeline fills and drains)\n" : ")\n";
  return out;
}

}  // namespace ditgen::parallel
