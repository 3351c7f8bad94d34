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
// (Workload) and the config file name for messages.
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

// What one forward pass of a transformer asks of the parallel layer, in its
// own terms: tokens, heads, widths and element counts. A model family fills
// it in from its config.json (models/: the registry's `workload`), so this
// layer never learns a model's fields. The layout checks use the attention
// and MLP sizes; `plan` also uses the element counts.
//
// The shape assumed (DiT, PixArt, and Latte's spatial blocks): `layers`
// blocks, each one self-attention over the whole sequence (sp shards it,
// tp splits its heads) and one MLP (tp splits its inner width), their
// output projections row-split and all-reduced over tp; per block a
// conditioning vector of `gathered_per_layer` elements per sequence is
// all-gathered over tp (DiT's adaLN modulation); the model output is
// gathered over sp once per forward; the cp pair exchanges `eps_elements`.
struct Workload {
  int64_t heads = 0, head_dim = 0, layers = 0;
  int64_t tokens = 0;              // per sequence (sp shards them)
  int64_t mlp_hidden = 0;          // the MLP's inner width F (tp splits it)
  int64_t gathered_per_layer = 0;  // elements per sequence all-gathered over tp per block (0: none)
  // Row-split output projections per block, each all-reduced over tp
  // ((B, P, D) each): attention and MLP; PixArt's cross-attention adds one.
  int64_t tp_all_reduces_per_layer = 2;
  int64_t output_per_token = 0;    // model output elements per token (gathered over sp)
  int64_t input_elements = 0;      // per sequence: the model's input (latents)
  int64_t output_elements = 0;     // per sequence: the model's output
  int64_t eps_elements = 0;        // per sequence: the noise prediction the cp pair exchanges
  // Weight elements: per block, what tp splits and what every rank holds
  // whole; and once per model (replicated). Per rank: layers * (split / tp
  // + whole) + once.
  double split_per_layer = 0, whole_per_layer = 0, whole_once = 0;
  // Non-empty: this model runs no sp layout yet, and why (the layout checks
  // then reject sp > 1 with "not supported yet: " and this text).
  std::string sp_not_supported;

  int64_t hidden() const { return heads * head_dim; }
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
void validate_layout(const Layout& layout, int world_size, const Workload& work,
                     double guidance_scale, const std::string& where);

// The rules validate_layout applies, one message per failure; empty = valid.
std::vector<std::string> layout_problems(const Layout& layout, int world_size, const Workload& work,
                                         double guidance_scale);

// Every layout valid for `world_size` ranks: each (sp, cp, tp) factorisation,
// ordered by tp, then cp (sp is what remains); when sp > 1, ulysses and ring
// are listed separately where both are valid (ulysses first).
std::vector<Layout> valid_layouts(int world_size, const Workload& work, double guidance_scale);

}  // namespace ditgen::parallel
