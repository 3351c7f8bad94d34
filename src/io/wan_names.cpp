// The Wan name table and its lookups (wan_names.h). A name is split into its
// block prefix ("blocks.N.", kept as written) and the rest, which must be a
// row's name exactly, or a module row's name + ".weight" / ".bias".
#include "io/wan_names.h"

#include <cctype>
#include <span>

namespace ditgen::io {
namespace {

struct Row {
  const char* original;
  const char* diffusers;
  bool parameter;  // a tensor of its own (no .weight / .bias)
};

// After "blocks.N.".
constexpr Row kBlockRows[] = {
    {"self_attn.q", "attn1.to_q", false},
    {"self_attn.k", "attn1.to_k", false},
    {"self_attn.v", "attn1.to_v", false},
    {"self_attn.o", "attn1.to_out.0", false},
    {"self_attn.norm_q", "attn1.norm_q", false},
    {"self_attn.norm_k", "attn1.norm_k", false},
    {"cross_attn.q", "attn2.to_q", false},
    {"cross_attn.k", "attn2.to_k", false},
    {"cross_attn.v", "attn2.to_v", false},
    {"cross_attn.o", "attn2.to_out.0", false},
    {"cross_attn.norm_q", "attn2.norm_q", false},
    {"cross_attn.norm_k", "attn2.norm_k", false},
    {"cross_attn.k_img", "attn2.add_k_proj", false},
    {"cross_attn.v_img", "attn2.add_v_proj", false},
    {"cross_attn.norm_k_img", "attn2.norm_added_k", false},
    // The original norm3 is the cross-attention's (affine), norm2 the
    // feed-forward's; diffusers numbers them the other way round.
    {"norm3", "norm2", false},
    {"norm2", "norm3", false},
    {"ffn.0", "ffn.net.0.proj", false},
    {"ffn.2", "ffn.net.2", false},
    {"modulation", "scale_shift_table", true},
};

constexpr Row kGlobalRows[] = {
    {"patch_embedding", "patch_embedding", false},
    {"text_embedding.0", "condition_embedder.text_embedder.linear_1", false},
    {"text_embedding.2", "condition_embedder.text_embedder.linear_2", false},
    {"time_embedding.0", "condition_embedder.time_embedder.linear_1", false},
    {"time_embedding.2", "condition_embedder.time_embedder.linear_2", false},
    {"time_projection.1", "condition_embedder.time_proj", false},
    {"head.head", "proj_out", false},
    {"head.modulation", "scale_shift_table", true},
    {"img_emb.proj.0", "condition_embedder.image_embedder.norm1", false},
    {"img_emb.proj.1", "condition_embedder.image_embedder.ff.net.0.proj", false},
    {"img_emb.proj.3", "condition_embedder.image_embedder.ff.net.2", false},
    {"img_emb.proj.4", "condition_embedder.image_embedder.norm2", false},
    // First-last-frame models: the image tokens' learned positions (1, 514, image_dim).
    {"img_emb.emb_pos", "condition_embedder.image_embedder.pos_embed", true},
};

// A block number as the names write it: 1 to 9 digits, no leading zero.
size_t block_number_length(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && n < 10 && std::isdigit(static_cast<unsigned char>(s[n]))) ++n;
  if (n == 0 || n > 9 || (n > 1 && s[0] == '0')) return 0;
  return n;
}

// `name` split at its block prefix ("blocks.N." or "blocks_N_" with
// separator '_'), or nullopt when it starts with "blocks" but is not one.
struct Split {
  std::string_view block;  // "" for a global name
  std::string_view rest;
};
std::optional<Split> split_block(std::string_view name, char sep) {
  const std::string head = std::string("blocks") + sep;
  if (name.substr(0, head.size()) != head) return Split{"", name};
  const size_t digits = block_number_length(name.substr(head.size()));
  const size_t end = head.size() + digits;
  if (digits == 0 || end >= name.size() || name[end] != sep) return std::nullopt;
  return Split{name.substr(0, end + 1), name.substr(end + 1)};
}

std::span<const Row> rows_for(const Split& split) {
  if (split.block.empty()) return kGlobalRows;
  return kBlockRows;
}

enum class Side { kOriginal, kDiffusers };
const char* side_name(const Row& row, Side side) { return side == Side::kOriginal ? row.original : row.diffusers; }

std::optional<std::string> convert(std::string_view name, Side from, Side to) {
  const std::optional<Split> split = split_block(name, '.');
  if (!split) return std::nullopt;
  for (const Row& row : rows_for(*split)) {
    const std::string_view base = side_name(row, from);
    if (split->rest.substr(0, base.size()) != base) continue;
    const std::string_view suffix = split->rest.substr(base.size());
    if (suffix.empty() || (!row.parameter && (suffix == ".weight" || suffix == ".bias")))
      return std::string(split->block) + side_name(row, to) + std::string(suffix);
  }
  return std::nullopt;
}

std::string underscored(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c == '.') c = '_';
  return out;
}

}  // namespace

std::optional<std::string> wan_original_to_diffusers(std::string_view name) {
  return convert(name, Side::kOriginal, Side::kDiffusers);
}

std::optional<std::string> wan_diffusers_to_original(std::string_view name) {
  return convert(name, Side::kDiffusers, Side::kOriginal);
}

std::optional<std::string> wan_original_from_underscored(std::string_view name) {
  const std::optional<Split> split = split_block(name, '_');
  if (!split) return std::nullopt;
  for (const Row& row : rows_for(*split))
    if (split->rest == underscored(row.original)) {
      if (split->block.empty()) return std::string(row.original);
      // "blocks_N_" -> "blocks.N."
      return "blocks." + std::string(split->block.substr(7, split->block.size() - 8)) + "." + row.original;
    }
  return std::nullopt;
}

bool wan_is_parameter(std::string_view name) {
  const std::optional<Split> split = split_block(name, '.');
  if (!split) return false;
  for (const Row& row : rows_for(*split))
    if (row.parameter && (split->rest == row.original || split->rest == row.diffusers)) return true;
  return false;
}

}  // namespace ditgen::io
