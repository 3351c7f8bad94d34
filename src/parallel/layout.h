// Parallel layout of a run (docs/design.md §4): the sp / cp / tp sizes, where a
// rank sits in them, which ranks form its groups, and the checks that reject
// an impossible layout before any weight is loaded.
//
// Rank order is fixed by the design: tp varies fastest (it communicates the
// most, so its group stays inside a node), then sp, then pp (PipeFusion's
// stages, xDiT's order), then cp:
//     rank = ((cp_rank * pp + pp_rank) * sp + sp_rank) * tp + tp_rank
// (with pp = 1 the formula of docs/design.md §4).
// Every group helper here derives from that one formula, so the MPI split
// (color = the other coordinates, key = the coordinate along the axis)
// and the tests agree by construction.
//
// This layer knows no model and no config: callers pass plain sizes
// (Workload) and the config file name for messages.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/shard.h"
#include "vocab/sp_mode.h"

namespace ditgen::parallel {

struct Layout {
  int sp = 1, cp = 1, tp = 1;
  // How the sp ranks share a sequence (vocab/sp_mode.h); irrelevant when
  // sp == 1. Never kAuto here: resolve_sp_mode turns a config's "auto" into
  // a mode per model.
  SpMode sp_mode = SpMode::kUlysses;
  // PipeFusion (xDiT's displaced patch pipeline, parallel/patch_pipeline.h):
  // pp stages of consecutive layers; after `warmup_steps` synchronous steps
  // the tokens travel the stages as `patches` patches (0 = pp), each
  // attending to the other patches' keys and values as last computed.
  // patches and warmup_steps mean nothing when pp == 1.
  int pp = 1;
  int patches = 0;
  int warmup_steps = 1;
  // parallel.sp_weights: per-rank shares for machines of mixed capacity
  // (parallel/shard.h), one weight per rank of the axis that splits the
  // work: the sp ranks' tokens (ring) or frames and tokens (dsp), or with
  // pp > 1 (and sp = 1) the stages' layers. Empty: even shares.
  std::vector<int64_t> sp_weights = {};

  int world_size() const { return pp * sp * cp * tp; }
  int pipeline_patches() const { return patches > 0 ? patches : pp; }
  // The Sharding of the sp ranks and of the pipeline stages (one of them
  // carries sp_weights; the other is even).
  Sharding sp_split() const { return pp > 1 ? Sharding() : Sharding(sp_weights); }
  Sharding stage_split() const { return pp > 1 ? Sharding(sp_weights) : Sharding(); }
  // Full form, for headers and errors: "sp2 x cp2 x tp1 (ulysses)"; with
  // pp > 1 "pp2 x sp1 x cp2 x tp1 (ulysses; 2 patches, 1 warm-up step)".
  std::string str() const;
  // Compact form for lists: factors > 1 only, the mode when sp > 1:
  // "sp4 x cp2 ring", "tp8", "pp2 x cp2 (4 patches)", "single process".
  std::string short_str() const;
  bool operator==(const Layout&) const = default;
};

// A rank's coordinate along each axis.
struct Coords {
  int cp = 0, sp = 0, tp = 0, pp = 0;
  bool operator==(const Coords&) const = default;
};

Coords coords_of(const Layout& layout, int rank);
int rank_of(const Layout& layout, Coords c);

// World ranks of `rank`'s group along one axis, in group-rank order (the
// element at index i is the rank whose coordinate along the axis is i).
std::vector<int> tp_group_ranks(const Layout& layout, int rank);
std::vector<int> sp_group_ranks(const Layout& layout, int rank);
std::vector<int> cp_group_ranks(const Layout& layout, int rank);
std::vector<int> pp_group_ranks(const Layout& layout, int rank);

// Arguments for MPI_Comm_split: ranks with equal color form one group and
// are ordered by key (= their coordinate along the axis).
struct GroupSplit {
  int color = 0, key = 0;
};
GroupSplit tp_split(const Layout& layout, int rank);
GroupSplit sp_split(const Layout& layout, int rank);
GroupSplit cp_split(const Layout& layout, int rank);
GroupSplit pp_split(const Layout& layout, int rank);

// Sizes of `parts` sequence shards of `n` tokens: the first n % parts shards
// hold one token more (numpy.array_split's convention), so shard 0 is always
// a largest one; or shares by `split`'s weights. Built on Sharding (shard.h),
// the sharding the sp implementation uses, so that planned and measured
// bytes agree.
std::vector<int64_t> shard_sizes(int64_t n, int parts, const Sharding& split = {});

// What kind of attention an operation is, by what its queries attend to.
enum class AttentionKind {
  kSpatial,         // the tokens of their own image or frame
  kTemporal,        // the frames of their own token (a video's separate temporal attention)
  kSpatioTemporal,  // every token of every frame of their video at once
  kCross,           // another sequence (the text)
};
const char* attention_kind_name(AttentionKind kind);  // "spatial", "temporal", "spatio-temporal", "cross"

// Where an attention's keys and values come from.
enum class KeySource {
  kSameSequence,   // the queries' own sequence: sharded by sp like it
  kOtherSequence,  // another sequence every rank holds whole (the text): no sp communication
};

// One attention operation of a layer, as the parallel layer sees it.
struct AttentionOp {
  AttentionKind kind = AttentionKind::kSpatial;
  int64_t tokens = 0;  // keys each query attends to (cross: the text's; 0 = not known from the config)
  int64_t heads = 0;   // sp (Ulysses) and tp split them
  KeySource keys = KeySource::kSameSequence;
  // A cross-attention's second context (Wan I2V's image tokens, whole on
  // every rank like the text): its own keys and values, attended by the same
  // queries, the output added before the one output projection (no extra
  // all-reduce). 0 = none.
  int64_t added_tokens = 0;

  static AttentionOp spatial(int64_t tokens, int64_t heads) { return {AttentionKind::kSpatial, tokens, heads}; }
  static AttentionOp temporal(int64_t frames, int64_t heads) { return {AttentionKind::kTemporal, frames, heads}; }
  static AttentionOp spatio_temporal(int64_t tokens, int64_t heads) {
    return {AttentionKind::kSpatioTemporal, tokens, heads};
  }
  static AttentionOp cross(int64_t text_tokens, int64_t heads) {
    return {AttentionKind::kCross, text_tokens, heads, KeySource::kOtherSequence};
  }
};

// What one forward pass of a transformer asks of the parallel layer, in its
// own terms: tokens, heads, widths and element counts. A model family fills
// it in from its config.json (models/: the registry's `workload`), so this
// layer never learns a model's fields. The layout checks use the attention
// and MLP sizes; `plan` also uses the element counts.
//
// The shape assumed: `layers` layers, each a list of attention operations
// (`attention`, in order: what each attends over, how many heads, whether
// its keys are the sequence's own or another's) and `feed_forwards` MLPs
// over the `tokens` of each image or frame of the input (`frames` of them
// per video; sp shards the tokens of each frame, or under dsp the frames,
// or, when a layer attends over every frame's tokens at once
// (kSpatioTemporal), the whole video's tokens as one sequence).
// tp splits every attention's heads and every MLP's inner width; each of
// them ends in a row-split output projection all-reduced over tp. Per
// layer a conditioning vector of `gathered_per_layer` elements per
// sequence is all-gathered over tp (DiT's adaLN modulation); the model
// output is gathered over sp once per forward; the cp pair exchanges
// `eps_elements`. What a layout may do follows from the list: dsp needs a
// separate temporal attention to switch around (and no attention over all
// frames' tokens at once), Ulysses needs the heads of every attention it
// runs over the sp group to divide by sp * tp.
struct Workload {
  int64_t heads = 0, head_dim = 0, layers = 0;  // the model's width D = heads * head_dim
  int64_t tokens = 0;              // per image, or per frame of a video (ulysses and ring shard them)
  int64_t frames = 0;              // video models: frames per sample (dsp shards them); 0: an image model
  std::vector<AttentionOp> attention;  // each layer's attention operations, in order (see attention_ops)
  int64_t feed_forwards = 1;       // each layer's MLPs
  int64_t mlp_hidden = 0;          // the MLP's inner width F (tp splits it)
  int64_t gathered_per_layer = 0;  // elements per sequence all-gathered over tp per block (0: none)
  // Each attention's q and k are RMS-normalised over all heads (Wan): under
  // tp every rank all-reduces one float per row of q and one per row of k
  // (a cross-attention's keys: the text's rows, AttentionOp::tokens, and
  // the added context's, AttentionOp::added_tokens).
  bool qk_norms_across_heads = false;
  // The text joins each sequence (an MM-DiT's joint attention, CogVideoX):
  // its tokens lead the image's or video's in one sequence that every
  // self-attention, norm and MLP runs over, and sp shards that sequence
  // whole. joined_text_tokens is how many: the run's text length
  // (set_text_tokens), not the config's.
  bool text_joined = false;
  int64_t joined_text_tokens = 0;
  int64_t output_per_token = 0;    // model output elements per token (gathered over sp)
  int64_t input_elements = 0;      // per sequence: the model's input (latents)
  int64_t output_elements = 0;     // per sequence: the model's output
  int64_t eps_elements = 0;        // per sequence: the noise prediction the cp pair exchanges
  // Weight elements: per block, what tp splits and what every rank holds
  // whole; and once per model (replicated). Per rank: layers * (split / tp
  // + whole) + once.
  double split_per_layer = 0, whole_per_layer = 0, whole_once = 0;

  int64_t hidden() const { return heads * head_dim; }
  bool video() const { return frames > 0; }
  // A video whose self-attention spans every frame's tokens at once (Wan):
  // sp (ulysses, ring) and PipeFusion shard the whole video's tokens as one
  // sequence, not each frame's.
  bool whole_video_sequence() const { return video() && has(AttentionKind::kSpatioTemporal); }
  // The tokens of one sequence sp shards (an image's, a frame's, or a
  // whole video's), how many such sequences a sample has, and their name
  // in messages ("tokens per frame").
  int64_t sequence_tokens() const {
    return (whole_video_sequence() ? frames * tokens : tokens) + (text_joined ? joined_text_tokens : 0);
  }
  int64_t sequences_per_sample() const { return video() && !whole_video_sequence() ? frames : 1; }
  const char* sequence_unit() const {
    return whole_video_sequence() ? "tokens per video" : video() ? "tokens per frame" : "tokens per image";
  }
  // The run's text length: the keys of every cross-attention and the
  // tokens a joined text adds to each sequence (and to the self-attentions
  // over it).
  void set_text_tokens(int64_t text_tokens);
  // Each layer's attention operations: the list, or when it is empty an
  // image model's one self-attention of `heads` heads over its tokens.
  std::vector<AttentionOp> attention_ops() const;
  // Whether a layer has an attention of this kind.
  bool has(AttentionKind kind) const;
  // Row-split output projections per layer, each all-reduced over tp: one
  // per attention operation and one per MLP (DiT 2, PixArt 3, Latte 5).
  int64_t tp_all_reduces_per_layer() const {
    return static_cast<int64_t>(attention_ops().size()) + feed_forwards;
  }
  // Whether dsp can run it: a video whose attention across frames is a
  // separate temporal one, so every other op sees whole frames.
  bool frames_shardable() const {
    return video() && has(AttentionKind::kTemporal) && !has(AttentionKind::kSpatioTemporal);
  }
};

// The sp_mode a config's "auto" means for this model: dsp for video
// models with a separate temporal attention, else ulysses. Any other mode
// is returned as given.
SpMode resolve_sp_mode(SpMode mode, const Workload& work);

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
// ordered by tp, then cp (sp is what remains); when sp > 1, each valid mode
// is listed separately: dsp (video models with a temporal attention),
// ulysses, ring. PipeFusion
// (pp > 1) and naive_patch are approximations a run asks for by name: they
// are valid but never listed.
std::vector<Layout> valid_layouts(int world_size, const Workload& work, double guidance_scale);

}  // namespace ditgen::parallel
