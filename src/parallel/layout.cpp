// Layout arithmetic and checks. The rules live in one function
// (layout_problems) so that validate_layout's message and the list of valid
// layouts can never disagree: a layout is listed iff it has no problem.
#include "parallel/layout.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "parallel/shard.h"
#include "util/error.h"
#include "util/strings.h"

namespace ditgen::parallel {

namespace {

void check_rank(const Layout& l, int rank) {
  if (l.sp < 1 || l.cp < 1 || l.tp < 1 || l.pp < 1 || rank < 0 || rank >= l.world_size())
    throw std::invalid_argument("rank " + std::to_string(rank) + " is outside layout " + l.str());
}

std::string num(double v) {
  std::ostringstream s;
  s << v;  // "1", "4", "7.5": as a user wrote it
  return s.str();
}

}  // namespace

namespace {

// "2:1"
std::string weights_str(const std::vector<int64_t>& w) {
  std::string s;
  for (size_t i = 0; i < w.size(); ++i) {
    if (i) s += ':';
    s += std::to_string(w[i]);
  }
  return s;
}

// "2 patches, 1 warm-up step"
std::string pipeline_str(const Layout& l) {
  const int m = l.pipeline_patches(), w = l.warmup_steps;
  return std::to_string(m) + (m == 1 ? " patch, " : " patches, ") + std::to_string(w) +
         (w == 1 ? " warm-up step" : " warm-up steps");
}

}  // namespace

std::string Layout::str() const {
  const std::string factors =
      "sp" + std::to_string(sp) + " x cp" + std::to_string(cp) + " x tp" + std::to_string(tp) + " (" + name_of(sp_mode);
  const std::string weights = sp_weights.empty() ? "" : "; weights " + weights_str(sp_weights);
  if (pp == 1) return factors + weights + ")";
  return "pp" + std::to_string(pp) + " x " + factors + "; " + pipeline_str(*this) + weights + ")";
}

std::string Layout::short_str() const {
  std::string s;
  auto add = [&](const char* name, int n) {
    if (n == 1) return;
    if (!s.empty()) s += " x ";
    s += name + std::to_string(n);
  };
  add("pp", pp);
  add("sp", sp);
  add("cp", cp);
  add("tp", tp);
  if (s.empty()) return "single process";
  if (sp > 1) s += std::string(" ") + name_of(sp_mode);
  if (pp > 1) s += " (" + std::to_string(pipeline_patches()) + " patches)";
  if (!sp_weights.empty()) {
    s += ' ';
    s += weights_str(sp_weights);
  }
  return s;
}

Coords coords_of(const Layout& l, int rank) {
  check_rank(l, rank);
  Coords c;
  c.tp = rank % l.tp;
  c.sp = (rank / l.tp) % l.sp;
  c.pp = (rank / (l.tp * l.sp)) % l.pp;
  c.cp = rank / (l.tp * l.sp * l.pp);
  return c;
}

int rank_of(const Layout& l, Coords c) {
  if (c.cp < 0 || c.cp >= l.cp || c.sp < 0 || c.sp >= l.sp || c.tp < 0 || c.tp >= l.tp || c.pp < 0 || c.pp >= l.pp)
    throw std::invalid_argument("coordinates outside layout " + l.str());
  return ((c.cp * l.pp + c.pp) * l.sp + c.sp) * l.tp + c.tp;
}

namespace {

// The ranks whose coordinates are `rank`'s but along `axis`, of `size`, in axis order.
std::vector<int> group_ranks(const Layout& l, int rank, int Coords::*axis, int size) {
  Coords c = coords_of(l, rank);
  std::vector<int> r;
  for (c.*axis = 0; c.*axis < size; ++(c.*axis)) r.push_back(rank_of(l, c));
  return r;
}

// Color: the world rank of the group's first member (the other coordinates
// fixed, `axis` 0), the same for the whole group and unique to it; key: the
// coordinate along the axis, so group rank = coordinate.
GroupSplit axis_split(const Layout& l, int rank, int Coords::*axis) {
  Coords c = coords_of(l, rank);
  const int key = c.*axis;
  c.*axis = 0;
  return {rank_of(l, c), key};
}

}  // namespace

std::vector<int> tp_group_ranks(const Layout& l, int rank) { return group_ranks(l, rank, &Coords::tp, l.tp); }
std::vector<int> sp_group_ranks(const Layout& l, int rank) { return group_ranks(l, rank, &Coords::sp, l.sp); }
std::vector<int> cp_group_ranks(const Layout& l, int rank) { return group_ranks(l, rank, &Coords::cp, l.cp); }
std::vector<int> pp_group_ranks(const Layout& l, int rank) { return group_ranks(l, rank, &Coords::pp, l.pp); }

GroupSplit tp_split(const Layout& l, int rank) { return axis_split(l, rank, &Coords::tp); }
GroupSplit sp_split(const Layout& l, int rank) { return axis_split(l, rank, &Coords::sp); }
GroupSplit cp_split(const Layout& l, int rank) { return axis_split(l, rank, &Coords::cp); }
GroupSplit pp_split(const Layout& l, int rank) { return axis_split(l, rank, &Coords::pp); }

const char* attention_kind_name(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::kSpatial: return "spatial";
    case AttentionKind::kTemporal: return "temporal";
    case AttentionKind::kSpatioTemporal: return "spatio-temporal";
    case AttentionKind::kCross: return "cross";
  }
  return "?";
}

std::vector<AttentionOp> Workload::attention_ops() const {
  return attention.empty() ? std::vector<AttentionOp>{AttentionOp::spatial(tokens, heads)} : attention;
}

void Workload::set_text_tokens(int64_t text_tokens) {
  const int64_t before = text_joined ? joined_text_tokens : 0;
  if (text_joined) joined_text_tokens = text_tokens;
  for (AttentionOp& op : attention) {
    if (op.kind == AttentionKind::kCross)
      op.tokens = text_tokens;
    else if (text_joined && op.kind != AttentionKind::kTemporal)
      op.tokens += joined_text_tokens - before;  // a joint attention's keys: the text's too
  }
}

bool Workload::has(AttentionKind kind) const {
  const std::vector<AttentionOp> ops = attention_ops();
  return std::any_of(ops.begin(), ops.end(), [kind](const AttentionOp& op) { return op.kind == kind; });
}

SpMode resolve_sp_mode(SpMode mode, const Workload& work) {
  if (mode != SpMode::kAuto) return mode;
  return work.frames_shardable() ? SpMode::kDsp : SpMode::kUlysses;
}

std::vector<int64_t> shard_sizes(int64_t n, int parts, const Sharding& split) {
  if (parts < 1 || n < 0) throw std::invalid_argument("shard_sizes: bad arguments");
  std::vector<int64_t> s(parts);
  for (int i = 0; i < parts; ++i) s[i] = split.size(n, parts, i);
  return s;
}

std::vector<std::string> layout_problems(const Layout& l, int world_size, const Workload& d,
                                         double guidance_scale) {
  std::vector<std::string> p;
  bool sizes_ok = true;
  for (auto [name, v] : {std::pair{"sp", l.sp}, {"cp", l.cp}, {"tp", l.tp}, {"pp", l.pp}}) {
    if (v < 1) {
      p.push_back("parallel." + std::string(name) + " = " + std::to_string(v) + ": must be >= 1");
      sizes_ok = false;
    }
  }
  const bool ulysses = l.sp_mode == SpMode::kUlysses, dsp = l.sp_mode == SpMode::kDsp;
  if (l.sp_mode == SpMode::kAuto)  // a caller's slip: a config's "auto" is resolved before any check
    p.push_back("parallel.sp_mode = \"auto\": not resolved for this model");
  if (dsp && !d.video())
    p.push_back("parallel.sp_mode = \"dsp\" shards the frames of a video; this is an image model (use ulysses or "
                "ring)");
  else if (dsp && !d.frames_shardable())
    p.push_back("parallel.sp_mode = \"dsp\" switches a frame shard to a token shard around a separate temporal "
                "attention; this model's self-attention spans every frame's tokens at once (use ulysses or ring)");
  if (l.cp > 2) p.push_back("parallel.cp = " + std::to_string(l.cp) + ": cp must be 1 or 2");
  // cp splits the two CFG halves; without guidance there is only one.
  if (l.cp == 2 && !(guidance_scale > 1.0))
    p.push_back("parallel.cp = 2 needs guidance_scale > 1 (got " + num(guidance_scale) + ")");
  if (!sizes_ok) return p;

  if (world_size != l.world_size()) {
    if (l.pp == 1)
      p.push_back("world size " + std::to_string(world_size) + " != sp*cp*tp = " + std::to_string(l.sp) + "*" +
                  std::to_string(l.cp) + "*" + std::to_string(l.tp) + " = " + std::to_string(l.world_size()));
    else
      p.push_back("world size " + std::to_string(world_size) + " != pp*sp*cp*tp = " + std::to_string(l.pp) + "*" +
                  std::to_string(l.sp) + "*" + std::to_string(l.cp) + "*" + std::to_string(l.tp) + " = " +
                  std::to_string(l.world_size()));
  }
  if (!l.sp_weights.empty()) {
    // Per-rank shares (parallel/shard.h) of the axis that splits the work.
    const bool stages = l.pp > 1;
    const int ranks = stages ? l.pp : l.sp;
    const std::string what = "parallel.sp_weights " + weights_str(l.sp_weights);
    bool weights_ok = true;
    for (int64_t w : l.sp_weights)
      if (w < 1 || w > 1000000) {
        p.push_back(what + ": weight " + std::to_string(w) + " is not in 1..1000000");
        weights_ok = false;
      }
    if (ranks == 1) {
      p.push_back(what + ": weights need sp > 1 (ring or dsp) or pp > 1 (PipeFusion's stages)");
    } else if (stages && l.sp > 1) {
      // One list cannot say which axis it means.
      p.push_back(what + ": with both pp > 1 and sp > 1 it is unclear whether the weights size the stages or the sp "
                  "ranks; weights need pp = 1 or sp = 1");
    } else if (static_cast<int>(l.sp_weights.size()) != ranks) {
      p.push_back(what + " has " + std::to_string(l.sp_weights.size()) + " weights for " +
                  (stages ? "pp = " : "sp = ") + std::to_string(ranks) + " ranks (one per rank)");
    } else if (!stages && l.sp_mode != SpMode::kRing && l.sp_mode != SpMode::kDsp) {
      p.push_back(what + ": sp_mode \"" + name_of(l.sp_mode) + "\" splits " +
                  (l.sp_mode == SpMode::kUlysses ? "the attention heads evenly, so weights cannot balance it"
                                                 : "the image into even bands") +
                  " (weights are for ring, dsp and PipeFusion)");
    } else if (weights_ok) {
      // Every rank needs some of the work.
      const Sharding split(l.sp_weights);
      auto check = [&](int64_t n, const std::string& unit) {
        const auto sizes = shard_sizes(n, ranks, split);
        for (int j = 0; j < ranks; ++j)
          if (sizes[static_cast<size_t>(j)] < 1)
            p.push_back(what + " leave " + (stages ? "stage " : "rank ") + std::to_string(j) + " none of the " +
                        std::to_string(n) + " " + unit);
      };
      if (stages) check(d.layers, "layers");
      else check(d.sequence_tokens(), d.sequence_unit());
      if (!stages && dsp && d.video()) check(d.frames, "frames");
    }
  }
  if (l.pp > 1) {
    // PipeFusion (parallel/patch_pipeline.h): every stage needs a layer and
    // every patch a token; the first step has no earlier keys and values.
    if (l.pp > d.layers)
      p.push_back("parallel.pp = " + std::to_string(l.pp) + " exceeds the " + std::to_string(d.layers) +
                  " layers (every pipeline stage needs at least one)");
    if (l.patches < 0) p.push_back("parallel.patches = " + std::to_string(l.patches) + ": must be >= 1 (0 = pp)");
    else if (l.pipeline_patches() > d.sequence_tokens())
      p.push_back("parallel.patches = " + std::to_string(l.pipeline_patches()) + " exceeds the " +
                  std::to_string(d.sequence_tokens()) + " " + d.sequence_unit() +
                  " (every patch needs at least one)");
    if (l.warmup_steps < 1)
      p.push_back("parallel.warmup_steps = " + std::to_string(l.warmup_steps) +
                  ": must be >= 1 (the first step has no earlier keys and values to reuse)");
    if (l.sp > 1 && !ulysses)
      p.push_back("parallel.pp = " + std::to_string(l.pp) + " with sp_mode \"" + name_of(l.sp_mode) +
                  "\": PipeFusion shares each patch over the sp ranks with Ulysses only");
    // Ulysses shards each patch's tokens: the smallest patch needs one per sp rank.
    const int64_t smallest_patch = d.sequence_tokens() / std::max(1, l.pipeline_patches());
    if (l.sp > 1 && l.patches >= 0 && l.pipeline_patches() <= d.sequence_tokens() && smallest_patch < l.sp)
      p.push_back("parallel.patches = " + std::to_string(l.pipeline_patches()) + " leaves patches of " +
                  std::to_string(smallest_patch) + " tokens, fewer than sp = " + std::to_string(l.sp) +
                  " (every sp rank needs a token of each patch)");
  }
  // Each attention's heads: QKV is column-split by whole heads over tp, and
  // Ulysses' all-to-all turns a token shard of the attentions it runs over
  // the sp group (the sequence's own keys, sharded by token) into a shard
  // of heads/(sp*tp) heads. One message per head count that fails.
  std::vector<int64_t> failed;
  for (const AttentionOp& op : d.attention_ops()) {
    const bool over_sp = ulysses && l.sp > 1 && op.keys == KeySource::kSameSequence &&
                         op.kind != AttentionKind::kTemporal;  // frames stay whole under ulysses
    const int64_t ranks = over_sp ? int64_t{l.sp} * l.tp : l.tp;
    if (op.heads % ranks == 0 || std::find(failed.begin(), failed.end(), op.heads) != failed.end()) continue;
    failed.push_back(op.heads);
    p.push_back("num_attention_heads " + std::to_string(op.heads) + " is not divisible by " +
                (over_sp ? "sp*tp = " + std::to_string(l.sp * l.tp) + " (ulysses)" : "tp = " + std::to_string(l.tp)));
  }
  if (d.mlp_hidden % l.tp != 0)
    p.push_back("MLP inner size (ff_inner_dim) " + std::to_string(d.mlp_hidden) + " is not divisible by tp = " +
                std::to_string(l.tp));
  // Uneven shards are fine; an empty one is not. ulysses and ring shard the
  // tokens of each image or frame (or a whole video's); dsp shards frames,
  // and around the temporal attention the tokens of each frame.
  if (l.sp > d.sequence_tokens())
    p.push_back("parallel.sp = " + std::to_string(l.sp) + " exceeds the " + std::to_string(d.sequence_tokens()) +
                " " + d.sequence_unit() + " (every sp rank needs at least one)");
  if (dsp && d.video() && l.sp > d.frames)
    p.push_back("parallel.sp = " + std::to_string(l.sp) + " exceeds the " + std::to_string(d.frames) +
                " frames per video (dsp shards frames: every sp rank needs at least one)");
  return p;
}

std::vector<Layout> valid_layouts(int world_size, const Workload& d, double guidance_scale) {
  std::vector<Layout> out;
  if (world_size < 1) return out;
  for (int tp = 1; tp <= world_size; ++tp) {
    if (world_size % tp != 0) continue;
    for (int cp = 1; cp <= 2; ++cp) {
      if ((world_size / tp) % cp != 0) continue;
      const int sp = world_size / tp / cp;
      for (SpMode mode : {SpMode::kDsp, SpMode::kUlysses, SpMode::kRing}) {
        if (!d.frames_shardable() && mode == SpMode::kDsp) continue;
        Layout l{sp, cp, tp, mode};
        if (layout_problems(l, world_size, d, guidance_scale).empty()) out.push_back(l);
        if (sp == 1) break;  // the mode means nothing without sp
      }
    }
  }
  return out;
}

void validate_layout(const Layout& l, int world_size, const Workload& d, double guidance_scale,
                     const std::string& where) {
  const auto problems = layout_problems(l, world_size, d, guidance_scale);
  if (problems.empty()) return;
  std::string msg = where + ": parallel layout " + l.str() + " cannot run: ";
  for (size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
  const std::string model = " of this model (" + std::to_string(d.heads) + " heads, MLP " +
                            std::to_string(d.mlp_hidden) + ", " +
                            (d.video() ? std::to_string(d.frames) + " frames of " + std::to_string(d.tokens) +
                                             " tokens"
                                       : std::to_string(d.tokens) + " tokens") +
                            ", guidance_scale " + num(guidance_scale) + ")";
  const auto valid = valid_layouts(world_size, d, guidance_scale);
  if (valid.empty()) {
    msg += ". No layout works for " + std::to_string(world_size) + " ranks" + model;
  } else {
    std::vector<std::string> names;
    for (const Layout& v : valid) names.push_back(v.short_str());
    msg += ". Valid layouts for " + std::to_string(world_size) + " ranks" + model + ": " + join(names);
  }
  throw ConfigError(msg);
}

}  // namespace ditgen::parallel
