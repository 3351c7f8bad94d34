// Parallel layout of a run (DESIGN.md §4): the sp / cp / tp sizes, where a
// rank sits in them, which ranks form its groups, and the checks that reject
// an impossible layout before any weight is loaded.
//
// Rank order is fixed by the design: tp varies fastest (it communicates the
// most, so its group stays inside a node), then sp, then cp:
//     rank = (cp_rank * sp + sp_rank) * tp + tp_rank
// Every group helper here derives from that one formula, so the MPI split
// (color = the other two coordinates, key = the coordinate along the axis)
// and the tests agree by construction.
//
// This layer knows no model and no config: callers pass plain sizes
// (ModelDims) and the config file name for messages.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ditgen::parallel {

struct Layout {
  int sp = 1, cp = 1, tp = 1;
  std::string sp_mode = "ulysses";  // ulysses | ring; irrelevant when sp == 1

  int world_size() const { return sp * cp * tp; }
  // Full form, for headers and errors: "sp2 x cp2 x tp1 (ulysses)".
  std::string str() const;
  // Compact form for lists: factors > 1 only, the mode when sp > 1:
  // "sp4 x cp2 ring", "tp8", "single process".
  std::string short_str() const;
  bool operator==(const Layout&) const = default;
};

// A rank's coordinate along each axis.
struct Coords {
  int cp = 0, sp = 0, tp = 0;
  bool operator==(const Coords&) const = default;
};

Coords coords_of(const Layout& layout, int rank);
int rank_of(const Layout& layout, Coords c);

// World ranks of `rank`'s group along one axis, in group-rank order (the
// element at index i is the rank whose coordinate along the axis is i).
std::vector<int> tp_group_ranks(const Layout& layout, int rank);
std::vector<int> sp_group_ranks(const Layout& layout, int rank);
std::vector<int> cp_group_ranks(const Layout& layout, int rank);

// Arguments for MPI_Comm_split: ranks with equal color form one group and
// are ordered by key (= their coordinate along the axis).
struct GroupSplit {
  int color = 0, key = 0;
};
GroupSplit tp_split(const Layout& layout, int rank);
GroupSplit sp_split(const Layout& layout, int rank);
GroupSplit cp_split(const Layout& layout, int rank);

// Sizes of `parts` sequence shards of `n` tokens: the first n % parts shards
// hold one token more (numpy.array_split's convention), so shard 0 is always
// a largest one. Built on even_shard (shard.h), the sharding the sp
// implementation uses, so that planned and measured bytes agree.
std::vector<int64_t> shard_sizes(int64_t n, int parts);

// The model sizes the layout checks and the plan need (DiT, diffusers
// layout). Plain integers so that parallel/ stays independent of models/.
struct ModelDims {
  int64_t heads = 0, head_dim = 0, layers = 0;
  int64_t tokens = 0;           // per image: (latent_h / patch) * (latent_w / patch)
  int64_t ff_inner = 0;         // MLP hidden size F
  int64_t latent_channels = 0;  // C: transformer in_channels (= the eps channels)
  int64_t latent_h = 0, latent_w = 0;
  int64_t out_channels = 0;     // 2C when sigma is learned
  int64_t num_classes = 0;      // the class table has num_classes + 1 rows (null class)
  int64_t adaln_chunks = 6;     // adaLN-Zero: shift, scale, gate for attention and MLP
  int64_t params = 0;           // total parameter count, if known (informational)

  int64_t hidden() const { return heads * head_dim; }
  // patch * patch, from latent_h * latent_w = tokens * patch^2.
  int64_t patch_area() const;
};

// Throws ConfigError when `layout` cannot run `world_size` ranks of this
// model. The message starts with `where` (the config file), names every
// failing rule with its numbers, e.g.
//   "world size 6 != sp*cp*tp = 2*2*2 = 8"
//   "num_attention_heads 16 is not divisible by sp*tp = 6 (ulysses)"
//   "parallel.cp = 3: cp must be 1 or 2"
//   "parallel.cp = 2 needs guidance_scale > 1 (got 1)"
// and ends with the layouts that would work for this world size and model,
// or says that none exists.
void validate_layout(const Layout& layout, int world_size, const ModelDims& dims,
                     double guidance_scale, const std::string& where);

// The rules validate_layout applies, one message per failure; empty = valid.
std::vector<std::string> layout_problems(const Layout& layout, int world_size, const ModelDims& dims,
                                         double guidance_scale);

// Every layout valid for `world_size` ranks: each (sp, cp, tp) factorisation,
// ordered by tp, then cp (sp is what remains); when sp > 1, ulysses and ring
// are listed separately where both are valid (ulysses first).
std::vector<Layout> valid_layouts(int world_size, const ModelDims& dims, double guidance_scale);

}  // namespace ditgen::parallel
