// Layout arithmetic (rank order, groups, MPI split arguments, shards) and
// the layout checks: one case per rule, with the list of valid layouts
// worked out by hand. No MPI needed.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "parallel/layout.h"
#include "parallel/shard.h"
#include "util/error.h"

using namespace ditgen;
using namespace ditgen::parallel;

namespace {

// An image model's attention of `heads` heads over its tokens.
Workload with_heads(Workload m, int64_t heads) {
  m.heads = heads;
  m.attention = {AttentionOp::spatial(m.tokens, heads)};
  return m;
}

// 16 heads, MLP 64, 256 tokens: enough to exercise every divisibility rule.
Workload dims16() {
  Workload m;
  m.head_dim = 4;
  m.layers = 2;
  m.tokens = 256;
  m.mlp_hidden = 64;
  return with_heads(m, 16);
}

// `m` as a video model of `frames` frames with Latte's layers: spatial
// self-attention, cross-attention, temporal attention; two MLPs.
Workload as_video(Workload m, int64_t frames) {
  m.frames = frames;
  m.attention = {AttentionOp::spatial(m.tokens, m.heads), AttentionOp::cross(0, m.heads),
                 AttentionOp::temporal(frames, m.heads)};
  m.feed_forwards = 2;
  return m;
}

// The ConfigError message of validate_layout, or "" if it passes.
std::string error_of(const Layout& l, int world, const Workload& m, double guidance) {
  try {
    validate_layout(l, world, m, guidance, "run.json");
  } catch (const ConfigError& e) {
    CHECK(e.exit_code() == 2);
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& frag) { return s.find(frag) != std::string::npos; }

std::string names(const std::vector<Layout>& ls) {
  std::string s;
  for (const auto& l : ls) s += (s.empty() ? "" : ", ") + l.short_str();
  return s;
}

}  // namespace

TEST_CASE("layout strings") {
  CHECK(Layout{2, 2, 1, parallel::SpMode::kUlysses}.str() == "sp2 x cp2 x tp1 (ulysses)");
  CHECK(Layout{4, 2, 1, parallel::SpMode::kRing}.short_str() == "sp4 x cp2 ring");
  CHECK(Layout{1, 2, 4, parallel::SpMode::kUlysses}.short_str() == "cp2 x tp4");
  CHECK(Layout{}.short_str() == "single process");
  CHECK(Layout{2, 2, 2}.world_size() == 8);
}

TEST_CASE("coords and rank round trip for every rank") {
  for (const Layout& l : {Layout{1, 1, 1}, Layout{2, 2, 2}, Layout{3, 1, 2}, Layout{1, 2, 4}, Layout{4, 2, 1},
                          Layout{5, 1, 3}, Layout{3, 2, 3}}) {
    CAPTURE(l.str());
    std::set<std::tuple<int, int, int>> seen;
    for (int r = 0; r < l.world_size(); ++r) {
      const Coords c = coords_of(l, r);
      CHECK(c.cp >= 0);
      CHECK(c.cp < l.cp);
      CHECK(c.sp < l.sp);
      CHECK(c.tp < l.tp);
      CHECK(rank_of(l, c) == r);
      // tp fastest, then sp, then cp (docs/design.md §4).
      CHECK(r == (c.cp * l.sp + c.sp) * l.tp + c.tp);
      seen.insert({c.cp, c.sp, c.tp});
      // Each group has the axis size, contains the rank at its coordinate.
      CHECK(tp_group_ranks(l, r).size() == size_t(l.tp));
      CHECK(tp_group_ranks(l, r)[c.tp] == r);
      CHECK(sp_group_ranks(l, r)[c.sp] == r);
      CHECK(cp_group_ranks(l, r)[c.cp] == r);
    }
    CHECK(seen.size() == size_t(l.world_size()));
  }
  CHECK_THROWS(coords_of(Layout{2, 1, 1}, 2));
  CHECK_THROWS(rank_of(Layout{2, 1, 1}, Coords{0, 2, 0}));
}

TEST_CASE("PipeFusion's pp axis: between sp and cp in the rank order") {
  for (const Layout& l : {Layout{1, 1, 1, parallel::SpMode::kUlysses, 2}, Layout{1, 2, 2, parallel::SpMode::kUlysses, 2}, Layout{2, 2, 1, parallel::SpMode::kRing, 3},
                          Layout{1, 1, 3, parallel::SpMode::kUlysses, 4}}) {
    CAPTURE(l.str());
    std::set<std::tuple<int, int, int, int>> seen;
    for (int r = 0; r < l.world_size(); ++r) {
      const Coords c = coords_of(l, r);
      CHECK(rank_of(l, c) == r);
      CHECK(r == ((c.cp * l.pp + c.pp) * l.sp + c.sp) * l.tp + c.tp);
      seen.insert({c.cp, c.pp, c.sp, c.tp});
      CHECK(pp_group_ranks(l, r).size() == size_t(l.pp));
      CHECK(pp_group_ranks(l, r)[c.pp] == r);
      // Split colors: equal exactly for the ranks of one group.
      for (int o = 0; o < l.world_size(); ++o) {
        const Coords d = coords_of(l, o);
        CHECK((pp_split(l, r).color == pp_split(l, o).color) == (c.cp == d.cp && c.sp == d.sp && c.tp == d.tp));
        CHECK((tp_split(l, r).color == tp_split(l, o).color) == (c.cp == d.cp && c.pp == d.pp && c.sp == d.sp));
        CHECK((cp_split(l, r).color == cp_split(l, o).color) == (c.pp == d.pp && c.sp == d.sp && c.tp == d.tp));
        CHECK((sp_split(l, r).color == sp_split(l, o).color) == (c.cp == d.cp && c.pp == d.pp && c.tp == d.tp));
      }
    }
    CHECK(seen.size() == size_t(l.world_size()));
  }
  // pp2 x cp2 x tp2, rank 6 = ((1*2 + 1)*1 + 0)*2 + 0: cp 1, pp 1, tp 0.
  const Layout l{1, 2, 2, parallel::SpMode::kUlysses, 2};
  CHECK(coords_of(l, 6) == Coords{1, 0, 0, 1});
  CHECK(pp_group_ranks(l, 6) == std::vector<int>{4, 6});
  CHECK(cp_group_ranks(l, 6) == std::vector<int>{2, 6});
  CHECK(tp_group_ranks(l, 6) == std::vector<int>{6, 7});
  CHECK(l.str() == "pp2 x sp1 x cp2 x tp2 (ulysses; 2 patches, 1 warm-up step)");
  CHECK(Layout{1, 1, 1, parallel::SpMode::kUlysses, 2, 4, 3}.short_str() == "pp2 (4 patches)");
}

TEST_CASE("PipeFusion's rules, each named with its numbers") {
  const Workload m = dims16();  // 2 layers, 256 tokens
  CHECK(error_of(Layout{1, 2, 2, parallel::SpMode::kUlysses, 2}, 8, m, 4.0).empty());
  std::string e = error_of(Layout{1, 1, 1, parallel::SpMode::kUlysses, 3}, 3, m, 4.0);
  CHECK(has(e, "parallel.pp = 3 exceeds the 2 layers (every pipeline stage needs at least one)"));
  e = error_of(Layout{1, 1, 1, parallel::SpMode::kUlysses, 2, 300}, 2, m, 4.0);
  CHECK(has(e, "parallel.patches = 300 exceeds the 256 tokens per image"));
  e = error_of(Layout{1, 1, 1, parallel::SpMode::kUlysses, 2, 2, 0}, 2, m, 4.0);
  CHECK(has(e, "parallel.warmup_steps = 0: must be >= 1"));
  CHECK(error_of(Layout{2, 1, 1, parallel::SpMode::kUlysses, 2}, 4, m, 4.0).empty());  // Ulysses inside each stage
  e = error_of(Layout{2, 1, 1, parallel::SpMode::kRing, 2}, 4, m, 4.0);
  CHECK(has(e, "parallel.pp = 2 with sp_mode \"ring\": PipeFusion shares each patch over the sp ranks with Ulysses only"));
  e = error_of(Layout{4, 1, 1, parallel::SpMode::kUlysses, 2, 100}, 8, m, 4.0);
  CHECK(has(e, "parallel.patches = 100 leaves patches of 2 tokens, fewer than sp = 4"));
  e = error_of(Layout{1, 1, 1, parallel::SpMode::kUlysses, 2}, 4, m, 4.0);
  CHECK(has(e, "world size 4 != pp*sp*cp*tp = 2*1*1*1 = 2"));
  const Workload video = as_video(m, 4);
  CHECK(error_of(Layout{1, 1, 1, parallel::SpMode::kDsp, 2}, 2, video, 4.0).empty());  // a video: patches of every frame
  CHECK(has(error_of(Layout{2, 1, 1, parallel::SpMode::kDsp, 2}, 4, video, 4.0), "with Ulysses only"));
  // Never suggested: the lists keep pp = 1.
  for (const Layout& l : valid_layouts(4, m, 4.0)) CHECK(l.pp == 1);
}

TEST_CASE("groups of a 2x2x2 layout, by hand") {
  const Layout l{2, 2, 2};
  // rank 5 = (1*2 + 0)*2 + 1: cp 1, sp 0, tp 1.
  CHECK(coords_of(l, 5) == Coords{1, 0, 1});
  CHECK(tp_group_ranks(l, 5) == std::vector<int>{4, 5});
  CHECK(sp_group_ranks(l, 5) == std::vector<int>{5, 7});  // sp 0: 5, sp 1: (1*2+1)*2+1
  CHECK(cp_group_ranks(l, 5) == std::vector<int>{1, 5});  // cp 0: (0*2+0)*2+1
  // rank 2 = (0*2 + 1)*2 + 0: cp 0, sp 1, tp 0.
  CHECK(coords_of(l, 2) == Coords{0, 1, 0});
  CHECK(tp_group_ranks(l, 2) == std::vector<int>{2, 3});
  CHECK(sp_group_ranks(l, 2) == std::vector<int>{0, 2});
  CHECK(cp_group_ranks(l, 2) == std::vector<int>{2, 6});

  // MPI_Comm_split arguments: equal color <=> same group, key = group rank.
  using Split = GroupSplit (*)(const Layout&, int);
  using Group = std::vector<int> (*)(const Layout&, int);
  for (auto [split, group] : {std::pair<Split, Group>{tp_split, tp_group_ranks}, {sp_split, sp_group_ranks},
                              {cp_split, cp_group_ranks}}) {
    std::map<int, std::vector<int>> by_color;  // ranks in key order
    for (int r = 0; r < 8; ++r) {
      const GroupSplit s = split(l, r);
      auto& g = by_color[s.color];
      if (g.size() <= size_t(s.key)) g.resize(s.key + 1, -1);
      g[s.key] = r;
    }
    CHECK(by_color.size() == 4);
    for (int r = 0; r < 8; ++r) CHECK(by_color[split(l, r).color] == group(l, r));
  }
}

TEST_CASE("shard sizes: the first n % parts shards hold one more") {
  CHECK(shard_sizes(25, 4) == std::vector<int64_t>{7, 6, 6, 6});
  CHECK(shard_sizes(256, 8) == std::vector<int64_t>(8, 32));
  // Element by element: GCC 12.2 with -march=native on AVX-512 miscompiles
  // the constant std::vector<int64_t>{1, 1, 1, 0} into a broadcast {1, 1, 1, 1}.
  const auto empty_last = shard_sizes(3, 4);
  REQUIRE(empty_last.size() == 4);
  CHECK(empty_last[0] == 1);
  CHECK(empty_last[1] == 1);
  CHECK(empty_last[2] == 1);
  CHECK(empty_last[3] == 0);
  // The same shards as the sp implementation's even_shard (shard.h).
  for (int i = 0; i < 4; ++i) CHECK(shard_sizes(25, 4)[i] == even_shard(25, 4, i).size());
  CHECK(shard_sizes(10, 1) == std::vector<int64_t>{10});
}

// Largest remainder by a plain loop over exact fractions: hand out one unit
// at a time to the rank furthest below its exact quota n*w/W (ties: lower
// rank), which is what floor + largest remainders give.
std::vector<int64_t> shares_by_hand(int64_t n, const std::vector<int64_t>& w) {
  int64_t total = 0;
  for (int64_t x : w) total += x;
  std::vector<int64_t> got(w.size(), 0);
  for (int64_t unit = 0; unit < n; ++unit) {
    size_t best = 0;
    double best_gap = -1e300;
    for (size_t j = 0; j < w.size(); ++j) {
      const double gap = static_cast<double>(n) * static_cast<double>(w[j]) / static_cast<double>(total) -
                         static_cast<double>(got[j]);
      if (gap > best_gap + 1e-12) best = j, best_gap = gap;
    }
    ++got[best];
  }
  return got;
}

TEST_CASE("weighted shares (parallel.sp_weights): proportional, largest remainders, even when weights are equal") {
  const Sharding two_to_one({2, 1});
  CHECK(shard_sizes(25, 2, two_to_one) == std::vector<int64_t>{17, 8});
  CHECK(shard_sizes(25, 2, Sharding({1, 2})) == std::vector<int64_t>{8, 17});
  CHECK(shard_sizes(6, 2, two_to_one) == std::vector<int64_t>{4, 2});
  CHECK(two_to_one.range(25, 2, 1).begin == 17);
  CHECK(two_to_one.range(25, 2, 1).end == 25);
  CHECK(two_to_one.largest(25, 2) == 17);
  // Against the unit-by-unit hand-out, over many counts and weights.
  for (const std::vector<int64_t>& w : {std::vector<int64_t>{2, 1}, {3, 1, 1}, {1, 1, 1}, {5, 3, 2, 7}, {1, 4}}) {
    for (int64_t n : {0, 1, 2, 5, 7, 16, 25, 64, 257, 1000}) {
      CAPTURE(n);
      CHECK(weighted_sizes(n, w) == shares_by_hand(n, w));
    }
  }
  // Equal weights are the even shards exactly.
  for (int parts : {1, 2, 3, 4, 8})
    for (int64_t n : {0, 3, 25, 256, 1001})
      for (int j = 0; j < parts; ++j) {
        const Range a = Sharding(std::vector<int64_t>(static_cast<size_t>(parts), 7)).range(n, parts, j);
        const Range b = even_shard(n, parts, j);
        CHECK(a.begin == b.begin);
        CHECK(a.end == b.end);
      }
  CHECK_THROWS(Sharding({2, 0}));
  CHECK_THROWS(two_to_one.range(25, 3, 0));  // 2 weights for 3 ranks
}

TEST_CASE("sp_weights rules: ring, dsp and PipeFusion only, one per rank, every rank some work") {
  const Workload m = dims16();  // 2 layers, 256 tokens
  Layout ring{2, 1, 1, parallel::SpMode::kRing};
  ring.sp_weights = {2, 1};
  CHECK(error_of(ring, 2, m, 4.0).empty());
  CHECK(ring.str() == "sp2 x cp1 x tp1 (ring; weights 2:1)");
  CHECK(ring.short_str() == "sp2 ring 2:1");
  Layout ulysses{2, 1, 1, parallel::SpMode::kUlysses};
  ulysses.sp_weights = {2, 1};
  CHECK(has(error_of(ulysses, 2, m, 4.0),
            "parallel.sp_weights 2:1: sp_mode \"ulysses\" splits the attention heads evenly, so weights cannot "
            "balance it (weights are for ring, dsp and PipeFusion)"));
  ring.sp_weights = {2, 1, 1};
  CHECK(has(error_of(ring, 2, m, 4.0), "parallel.sp_weights 2:1:1 has 3 weights for sp = 2 ranks (one per rank)"));
  ring.sp_weights = {1000, 1};
  CHECK(has(error_of(ring, 2, m, 4.0), "parallel.sp_weights 1000:1 leave rank 1 none of the 256 tokens per image"));
  ring.sp_weights = {0, 1};
  CHECK(has(error_of(ring, 2, m, 4.0), "weight 0 is not in 1..1000000"));
  Layout single{1, 1, 1};
  single.sp_weights = {1};
  CHECK(has(error_of(single, 1, m, 4.0), "weights need sp > 1 (ring or dsp) or pp > 1"));
  // PipeFusion: per stage, sharing the layers.
  Layout stages{1, 1, 1, parallel::SpMode::kUlysses, 2};
  stages.sp_weights = {1, 1};
  CHECK(error_of(stages, 2, m, 4.0).empty());
  stages.sp_weights = {3, 1};  // 2 layers: 1.5 and 0.5, the tied remainder to stage 0: 2 and 0
  CHECK(has(error_of(stages, 2, m, 4.0), "leave stage 1 none of the 2 layers"));
  Workload one_layer = m;
  one_layer.layers = 3;
  stages.sp_weights = {5, 1};  // 3 layers: 2.5, 0.5 -> 3, 0
  CHECK(has(error_of(stages, 2, one_layer, 4.0), "leave stage 1 none of the 3 layers"));
  Layout both{2, 1, 1, parallel::SpMode::kUlysses, 2};  // pp and sp: which axis would the weights mean?
  both.sp_weights = {2, 1};
  CHECK(has(error_of(both, 4, m, 4.0), "weights need pp = 1 or sp = 1"));
  // dsp: frames and tokens.
  const Workload video = as_video(m, 4);
  Layout dsp{2, 1, 1, parallel::SpMode::kDsp};
  dsp.sp_weights = {3, 1};
  CHECK(error_of(dsp, 2, video, 4.0).empty());
  dsp.sp_weights = {9, 1};  // 4 frames: 3.6, 0.4 -> 4, 0
  CHECK(has(error_of(dsp, 2, video, 4.0), "leave rank 1 none of the 4 frames"));
}

TEST_CASE("validation: each rule named with its numbers") {
  const Workload m = dims16();
  CHECK(error_of(Layout{2, 2, 2}, 8, m, 4.0).empty());
  CHECK(error_of(Layout{3, 1, 2, parallel::SpMode::kRing}, 6, m, 4.0).empty());  // ring: heads % tp only

  std::string e = error_of(Layout{2, 2, 2}, 6, m, 4.0);
  CHECK(e.rfind("run.json: ", 0) == 0);
  CHECK(has(e, "world size 6 != sp*cp*tp = 2*2*2 = 8"));

  e = error_of(Layout{3, 1, 2, parallel::SpMode::kUlysses}, 6, m, 4.0);
  CHECK(has(e, "num_attention_heads 16 is not divisible by sp*tp = 6 (ulysses)"));
  CHECK(!has(e, "world size"));

  e = error_of(Layout{1, 1, 3}, 3, m, 4.0);
  CHECK(has(e, "num_attention_heads 16 is not divisible by tp = 3"));
  CHECK(has(e, "MLP inner size (ff_inner_dim) 64 is not divisible by tp = 3"));

  e = error_of(Layout{1, 3, 1}, 3, m, 4.0);
  CHECK(has(e, "parallel.cp = 3: cp must be 1 or 2"));

  e = error_of(Layout{1, 2, 1}, 2, m, 1.0);
  CHECK(has(e, "parallel.cp = 2 needs guidance_scale > 1 (got 1)"));

  e = error_of(Layout{512, 1, 1, parallel::SpMode::kRing}, 512, m, 4.0);
  CHECK(has(e, "parallel.sp = 512 exceeds the 256 tokens per image"));

  e = error_of(Layout{0, 1, 1}, 1, m, 4.0);
  CHECK(has(e, "parallel.sp = 0: must be >= 1"));

  // The config's "auto" is resolved per model before a layout is checked.
  e = error_of(Layout{2, 1, 1, SpMode::kAuto}, 2, m, 4.0);
  CHECK(has(e, "parallel.sp_mode = \"auto\": not resolved for this model"));

  // Several failures are all named.
  e = error_of(Layout{3, 3, 1}, 8, m, 1.0);
  CHECK(has(e, "cp must be 1 or 2"));
  CHECK(has(e, "world size 8 != sp*cp*tp = 3*3*1 = 9"));
}

TEST_CASE("validation lists the layouts that would work") {
  const Workload m = dims16();
  // 6 ranks, by hand: tp1 cp1 sp6: 16 % 6 -> ring only; tp1 cp2 sp3: ring
  // only; tp2 cp1 sp3: 16 % (3*2) -> ring only; tp2 cp2: 6/4 no; tp3, tp6:
  // 16 % 3 != 0.
  const std::string e = error_of(Layout{2, 2, 2}, 6, m, 4.0);
  CHECK(has(e, "Valid layouts for 6 ranks"));
  CHECK(has(e, ": sp6 ring, sp3 x cp2 ring, sp3 x tp2 ring"));
  CHECK(e.substr(e.size() - 14) == "sp3 x tp2 ring");

  // A model nothing fits: 2 heads, 2 tokens, 3 ranks, no guidance.
  Workload tiny = m;
  tiny.tokens = 2;
  tiny.mlp_hidden = 8;
  tiny = with_heads(tiny, 2);
  const std::string none = error_of(Layout{3, 1, 1}, 3, tiny, 1.0);
  CHECK(has(none, "No layout works for 3 ranks"));
  CHECK(valid_layouts(3, tiny, 1.0).empty());
}

TEST_CASE("valid layouts of 8 ranks for a 16-head model, by hand") {
  const Workload m = dims16();
  // tp 1: cp1 sp8 (16 % 8 = 0: ulysses and ring), cp2 sp4 (both);
  // tp 2: cp1 sp4 (16 % 8: both), cp2 sp2 (16 % 4: both);
  // tp 4: cp1 sp2 (16 % 8: both), cp2 sp1; tp 8: cp1 sp1 (16 % 8, 64 % 8).
  CHECK(names(valid_layouts(8, m, 4.0)) ==
        "sp8 ulysses, sp8 ring, sp4 x cp2 ulysses, sp4 x cp2 ring, sp4 x tp2 ulysses, sp4 x tp2 ring, "
        "sp2 x cp2 x tp2 ulysses, sp2 x cp2 x tp2 ring, sp2 x tp4 ulysses, sp2 x tp4 ring, cp2 x tp4, tp8");
  // Without guidance no cp = 2.
  CHECK(names(valid_layouts(8, m, 1.0)) ==
        "sp8 ulysses, sp8 ring, sp4 x tp2 ulysses, sp4 x tp2 ring, sp2 x tp4 ulysses, sp2 x tp4 ring, tp8");
  // 12 heads: ulysses sp8 fails (12 % 8), tp8 fails; sp4 x tp2 ulysses fails (12 % 8).
  const Workload m12 = with_heads(m, 12);
  CHECK(names(valid_layouts(8, m12, 4.0)) ==
        "sp8 ring, sp4 x cp2 ulysses, sp4 x cp2 ring, sp4 x tp2 ring, sp2 x cp2 x tp2 ulysses, "
        "sp2 x cp2 x tp2 ring, sp2 x tp4 ring, cp2 x tp4");
  for (const Layout& l : valid_layouts(8, m12, 4.0)) CHECK(error_of(l, 8, m12, 4.0).empty());
  CHECK(names(valid_layouts(1, m, 4.0)) == "single process");
}

// A tiny Latte's video workload: 4 heads, MLP 16, 3 frames of 25 tokens.
Workload video() {
  Workload m;
  m.head_dim = 8;
  m.layers = 2;
  m.tokens = 25;
  m.mlp_hidden = 16;
  return as_video(with_heads(m, 4), 3);
}

TEST_CASE("video layouts: dsp shards frames, ulysses and ring the tokens of each frame, by hand") {
  const Workload v = video();
  CHECK(v.tp_all_reduces_per_layer() == 5);
  CHECK(resolve_sp_mode(SpMode::kAuto, v) == SpMode::kDsp);
  CHECK(resolve_sp_mode(SpMode::kAuto, dims16()) == SpMode::kUlysses);
  CHECK(resolve_sp_mode(SpMode::kRing, v) == SpMode::kRing);
  // One table of names (vocab/sp_mode.h), read both ways.
  for (const auto& entry : kSpModeNames) CHECK(sp_mode_of(name_of(entry.value)) == entry.value);
  CHECK(sp_mode_of("dsp") == SpMode::kDsp);
  CHECK_THROWS_AS(sp_mode_of("stripes"), std::invalid_argument);
  // 4 ranks: tp1 cp1 sp4: dsp fails (4 ranks, 3 frames), ulysses (4 % 4)
  // and ring work; tp1 cp2 sp2 and tp2 cp1 sp2: all three (4 % (2*2) = 0
  // for ulysses); cp2 x tp2; tp4 (4 heads, MLP 16).
  CHECK(names(valid_layouts(4, v, 4.0)) ==
        "sp4 ulysses, sp4 ring, sp2 x cp2 dsp, sp2 x cp2 ulysses, sp2 x cp2 ring, sp2 x tp2 dsp, "
        "sp2 x tp2 ulysses, sp2 x tp2 ring, cp2 x tp2, tp4");
  // Fewer frames than ranks under dsp: named, with the layouts that work.
  const std::string e = error_of(Layout{4, 1, 1, parallel::SpMode::kDsp}, 4, v, 4.0);
  CHECK(has(e, "parallel.sp = 4 exceeds the 3 frames per video (dsp shards frames"));
  CHECK(has(e, "3 frames of 25 tokens"));
  CHECK(has(e, "Valid layouts for 4 ranks"));
  CHECK(has(e, "sp4 ulysses"));
  // Uneven shards are fine: 3 frames and 25 tokens on 2 or 3 ranks.
  CHECK(error_of(Layout{2, 1, 1, parallel::SpMode::kDsp}, 2, v, 4.0).empty());
  CHECK(error_of(Layout{3, 1, 1, parallel::SpMode::kDsp}, 3, v, 4.0).empty());
  CHECK(error_of(Layout{3, 1, 1, parallel::SpMode::kRing}, 3, v, 4.0).empty());
  // ulysses still splits heads: 4 % 3.
  CHECK(has(error_of(Layout{3, 1, 1, parallel::SpMode::kUlysses}, 3, v, 4.0), "not divisible by sp*tp = 3 (ulysses)"));
  // The tokens of a frame bound every mode.
  Workload small = v;
  small.tokens = 2;
  CHECK(has(error_of(Layout{3, 1, 1, parallel::SpMode::kRing}, 3, small, 4.0), "exceeds the 2 tokens per frame"));
  // dsp is for videos only, with a separate temporal attention to switch around.
  CHECK(has(error_of(Layout{2, 1, 1, parallel::SpMode::kDsp}, 2, dims16(), 4.0), "this is an image model"));
  Workload all_frames = v;  // Wan's kind: one self-attention over every frame's tokens
  all_frames.attention = {AttentionOp::spatio_temporal(v.frames * v.tokens, v.heads), AttentionOp::cross(0, v.heads)};
  all_frames.feed_forwards = 1;
  CHECK(has(error_of(Layout{2, 1, 1, parallel::SpMode::kDsp}, 2, all_frames, 4.0), "spans every frame's tokens at once"));
  CHECK(resolve_sp_mode(SpMode::kAuto, all_frames) == SpMode::kUlysses);
  CHECK(all_frames.tp_all_reduces_per_layer() == 3);
  CHECK(names(valid_layouts(2, all_frames, 4.0)) == "sp2 ulysses, sp2 ring, cp2, tp2");
  // An attention's own heads: a cross-attention of 3 heads stops tp2.
  Workload odd_cross = dims16();
  odd_cross.attention.push_back(AttentionOp::cross(0, 3));
  CHECK(has(error_of(Layout{1, 1, 2}, 2, odd_cross, 4.0), "num_attention_heads 3 is not divisible by tp = 2"));
  CHECK(names(valid_layouts(2, dims16(), 4.0)) == "sp2 ulysses, sp2 ring, cp2, tp2");
}

TEST_CASE("Workload: a joined text's tokens lead each sequence, and the run sets their count") {
  Workload joint = as_video(dims16(), 3);  // CogVideoX's kind: the text and every frame's tokens in one sequence
  joint.attention = {AttentionOp::spatio_temporal(joint.frames * joint.tokens, joint.heads)};
  joint.text_joined = true;
  const int64_t video_tokens = joint.frames * joint.tokens;
  CHECK(joint.sequence_tokens() == video_tokens);  // no text length known yet
  joint.set_text_tokens(7);
  CHECK(joint.joined_text_tokens == 7);
  CHECK(joint.sequence_tokens() == video_tokens + 7);
  CHECK(joint.attention.at(0).tokens == video_tokens + 7);  // the joint attention's keys
  joint.set_text_tokens(3);  // setting it again replaces, not adds
  CHECK(joint.sequence_tokens() == video_tokens + 3);
  CHECK(joint.attention.at(0).tokens == video_tokens + 3);
  // sp may shard past the video's tokens into the text's.
  Workload few = joint;
  few.frames = 1;
  few.tokens = 2;
  few.attention = {AttentionOp::spatio_temporal(2, few.heads)};
  few.set_text_tokens(2);
  CHECK(error_of(Layout{4, 1, 1, parallel::SpMode::kRing}, 4, few, 4.0).empty());
  CHECK(has(error_of(Layout{5, 1, 1, parallel::SpMode::kRing}, 5, few, 4.0), "exceeds the 4 tokens per video"));
  // Without a joined text, set_text_tokens sets the cross-attentions' keys only.
  Workload cross = as_video(dims16(), 3);
  cross.attention = {AttentionOp::spatio_temporal(cross.frames * cross.tokens, cross.heads), AttentionOp::cross(0, cross.heads)};
  cross.set_text_tokens(16);
  CHECK(cross.attention.at(1).tokens == 16);
  CHECK(cross.attention.at(0).tokens == cross.frames * cross.tokens);
  CHECK(cross.sequence_tokens() == cross.frames * cross.tokens);
}
