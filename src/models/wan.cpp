// WanConfig from config.json and WanTransformer3DModel's forward, following
// diffusers 0.42.1 (transformer_wan.py): rotary tables for the (F/pt, h/ph,
// w/pw) token grid (WanRotaryPosEmbed: float64 angles, rounded once to
// float32); patch_embedding; temb = time_embedder(Timesteps(freq_dim,
// flip_sin_to_cos, shift 0)(t)), timestep_proj = time_proj(SiLU(temb)) (t
// per token when timestep.ndim == 2: then both per token);
// text = text_embedder(encoder_hidden_states), the image tokens through
// image_embedder (WanTimeTextImageEmbedding); per block, scale_shift_table
// + timestep_proj chunked shift, scale, gate of the self-attention and of
// the feed-forward; then norm_out modulated by (scale_shift_table + temb)
// (shift, scale), proj_out, unpatchify3d.
#include "models/wan.h"

#include <optional>

#include "io/model_dir.h"
#include "models/family_spec.h"
#include "models/forward_checks.h"
#include "models/nn/rotary.h"
#include "ops/ops.h"
#include "ops/rows.h"
#include "parallel/patch_pipeline.h"
#include "parallel/token_shard.h"
#include "util/error.h"

namespace ditgen::models {

namespace {

const nn::AdaLnSingleNames kConditionEmbedder{"condition_embedder.time_embedder.", "condition_embedder.time_proj."};
const std::string kTextEmbedder = "condition_embedder.text_embedder.";
const std::string kImageEmbedder = "condition_embedder.image_embedder.";
const nn::FinalLayerNames kFinalLayer{nn::FinalLayerNames::Modulation::kTable, "scale_shift_table", "proj_out.",
                                      /*table_leading_one=*/true};

std::string block_prefix(int64_t layer) { return "blocks." + std::to_string(layer) + "."; }

// WanTransformerBlock as an nn::TransformerBlock: RMSNorm across heads on q
// and k of both attentions, norm2 before the cross-attention, "ffn.".
nn::TransformerBlockDims block_dims(const WanConfig& c) {
  const int64_t d = c.inner_dim();
  nn::TransformerBlockDims b;
  b.names.ff = "ffn.";
  const nn::AttentionDims attn{c.num_heads, c.head_dim, d, d, nn::QkNorm::kRmsNorm, nn::QkNormSpan::kAcrossHeads,
                               c.eps};
  b.self = attn;
  b.cross = attn;  // the text embedder makes the text D wide
  b.cross.added_kv_dim = c.added_kv_dim;  // the image embedder's D-wide tokens
  b.cross_norm = c.cross_attn_norm;
  b.cross_norm_eps = c.eps;
  b.ff = {d, c.ff_inner_dim, nn::FeedForwardActivation::kGeluTanh};
  b.attention_norm_eps = b.mlp_norm_eps = c.eps;
  return b;
}

// An optional positive integer of the config: null or absent = 0 (none).
int64_t optional_size(const nlohmann::json& cfg, const char* key, const std::string& path) {
  if (!cfg.contains(key) || cfg[key].is_null()) return 0;
  const int64_t v = io::get_int_or(cfg, key, 0, path);
  require(v > 0, path, std::string(key) + ": expected a positive integer or null, got " + cfg[key].dump());
  return v;
}

// The per-token rows of a (B*n, W) tensor: tokens `rows` of `samples`
// (empty: all B), as (S*P, W).
Tensor token_block(const Tensor& per_token, int64_t batch, int64_t n, parallel::Range rows,
                   const Stage::Samples& samples) {
  const int64_t width = per_token.dim(1);
  const Tensor mine = parallel::token_rows(per_token.reshape({batch, n, width}), rows);  // (B, P, W)
  const Tensor some = ops::sample_rows(mine, samples);                                   // (S, P, W)
  return some.reshape({some.dim(0) * rows.size(), width});
}

}  // namespace

WanConfig WanConfig::from_json(const nlohmann::json& cfg, const std::string& path) {
  using io::get_int_or;
  const std::string cls = io::get_string_or(cfg, "_class_name", "", path);
  require(cls == "WanTransformer3DModel", path, "_class_name: expected WanTransformer3DModel, got '" + cls + "'");
  WanConfig c;
  if (cfg.contains("patch_size")) {
    const nlohmann::json& p = cfg["patch_size"];
    require(p.is_array() && p.size() == 3 && p[0].is_number_integer() && p[1].is_number_integer() &&
                p[2].is_number_integer(),
            path, "patch_size: expected three integers [t, h, w], got " + p.dump());
    c.patch = {p[0].get<int64_t>(), p[1].get<int64_t>(), p[2].get<int64_t>()};
  }
  c.num_heads = get_int_or(cfg, "num_attention_heads", 40, path);
  c.head_dim = get_int_or(cfg, "attention_head_dim", 128, path);
  c.in_channels = get_int_or(cfg, "in_channels", 16, path);
  c.out_channels = get_int_or(cfg, "out_channels", c.in_channels, path);  // null: in_channels
  c.text_dim = get_int_or(cfg, "text_dim", 4096, path);
  c.freq_dim = get_int_or(cfg, "freq_dim", 256, path);
  c.ff_inner_dim = get_int_or(cfg, "ffn_dim", 13824, path);
  c.num_layers = get_int_or(cfg, "num_layers", 40, path);
  c.rope_max_seq_len = get_int_or(cfg, "rope_max_seq_len", 1024, path);
  c.cross_attn_norm = io::get_bool_or(cfg, "cross_attn_norm", true, path);
  c.eps = static_cast<float>(io::get_number_or(cfg, "eps", 1e-6, path));
  for (auto [key, v] : {std::pair{"num_attention_heads", c.num_heads}, {"attention_head_dim", c.head_dim},
                        {"in_channels", c.in_channels}, {"out_channels", c.out_channels}, {"text_dim", c.text_dim},
                        {"freq_dim", c.freq_dim}, {"ffn_dim", c.ff_inner_dim}, {"num_layers", c.num_layers},
                        {"rope_max_seq_len", c.rope_max_seq_len}, {"patch_size[0]", c.patch[0]},
                        {"patch_size[1]", c.patch[1]}, {"patch_size[2]", c.patch[2]}})
    require(v > 0, path, std::string(key) + ": expected a positive integer, got " + std::to_string(v));
  require(c.eps > 0, path, "eps: expected a positive number");
  require(c.freq_dim % 2 == 0, path, "freq_dim: " + std::to_string(c.freq_dim) + " must be even (cos and sin halves)");
  require(c.head_dim % 2 == 0 && c.head_dim >= 6, path,
          "attention_head_dim: " + std::to_string(c.head_dim) +
              " must be even and at least 6 (rotary pairs on the frame, height and width axes)");
  if (c.patch[0] != 1 || c.patch[1] != c.patch[2])
    not_supported("a Wan patch_size other than [1, p, p] (" + path + ": patch_size [" + std::to_string(c.patch[0]) +
                  ", " + std::to_string(c.patch[1]) + ", " + std::to_string(c.patch[2]) + "])");
  const std::string qk = io::get_string_or(cfg, "qk_norm", "rms_norm_across_heads", path);
  if (qk != "rms_norm_across_heads")
    not_supported("Wan qk_norm '" + qk + "' (" + path + ": qk_norm; the published models use rms_norm_across_heads)");
  c.image_dim = optional_size(cfg, "image_dim", path);
  c.added_kv_dim = optional_size(cfg, "added_kv_proj_dim", path);
  c.pos_embed_seq_len = optional_size(cfg, "pos_embed_seq_len", path);
  // The image embedder makes the image tokens inner_dim wide; add_k_proj reads them.
  if (c.image_dim > 0 || c.added_kv_dim > 0)
    require(c.image_dim > 0 && c.added_kv_dim == c.inner_dim(), path,
            "image_dim " + std::to_string(c.image_dim) + " and added_kv_proj_dim " + std::to_string(c.added_kv_dim) +
                ": an image-to-video model sets both, added_kv_proj_dim = num_attention_heads x attention_head_dim = " +
                std::to_string(c.inner_dim()));
  require(c.pos_embed_seq_len == 0 || c.image_dim > 0, path,
          "pos_embed_seq_len: set without image_dim (it positions the image tokens)");
  c.patch_size = c.patch[1];
  c.sample_size = 0;
  return c;
}

std::array<int64_t, 3> WanConfig::rotary_dims() const { return ops::rotary_split_3d(head_dim); }

nn::TensorDecls WanTransformer::stem_tensors(const WanConfig& c) {
  const int64_t d = c.inner_dim();
  nn::TensorDecls t = nn::PatchEmbed::tensors3d("patch_embedding.", d, c.in_channels, c.patch);
  nn::append(t, nn::AdaLnSingle::tensors(kConditionEmbedder, d, nn::kModulationChunks, c.freq_dim));
  nn::append(t, nn::TextProjection::tensors(kTextEmbedder, c.text_dim, d));
  if (c.image_dim > 0) nn::append(t, WanImageEmbedding::tensors(kImageEmbedder, c.image_dim, d, c.pos_embed_seq_len));
  nn::append(t, nn::FinalLayer::tensors(kFinalLayer, d, c.out_per_token()));
  return t;
}

nn::TensorDecls WanTransformer::layer_tensors(const WanConfig& c, int64_t layer) {
  return AdaSingleBlock::tensors(block_prefix(layer), block_dims(c), /*table_leading_one=*/true);
}

WanTransformer WanTransformer::load(const io::WeightStore& w, const WanConfig& c, const ShardGroups& shard,
                                    const Placement& place) {
  check_before_load<WanTransformer>(w, c, shard, FrameSharding::kWholeSequence, "Wan", {"blocks"}, "scale_shift_table");
  WanTransformer m;
  m.cfg_ = c;
  m.stage_ = Stage(shard, place, c.num_layers);
  m.patch_ = nn::PatchEmbed::load3d(w, "patch_embedding.", c.patch, place);
  m.time_ = nn::AdaLnSingle::load(w, kConditionEmbedder, place);
  m.text_ = nn::TextProjection::load(w, kTextEmbedder, place);
  if (c.image_dim > 0) m.image_ = WanImageEmbedding::load(w, kImageEmbedder, c.pos_embed_seq_len > 0, place);
  m.final_ = nn::FinalLayer::load(w, kFinalLayer, place, c.eps);
  // PipeFusion: a stage holds its own blocks only.
  const parallel::Range layers = m.stage_.layers();
  for (int64_t i = layers.begin; i < layers.end; ++i)
    m.blocks_.push_back(AdaSingleBlock::load(w, block_prefix(i), block_dims(c), shard, place));
  return m;
}

void WanTransformer::check_args(const ForwardArgs& a) const {
  const WanConfig& c = cfg_;
  auto fail = [](const std::string& msg) { throw RuntimeFailure("Wan forward: " + msg); };
  check_text_forward_args(a, c.in_channels, c.patch, c.text_dim, fail);
  const Tensor* x = a.latents;
  for (int axis = 0; axis < 3; ++axis)
    if (x->dim(2 + axis) / c.patch[static_cast<size_t>(axis)] > c.rope_max_seq_len)
      fail("latents " + shape_str(x->shape()) + ": more than rope_max_seq_len " + std::to_string(c.rope_max_seq_len) +
           " patches along an axis");
  const int64_t tokens = (x->dim(2) / c.patch[0]) * (x->dim(3) / c.patch[1]) * (x->dim(4) / c.patch[2]);
  const int64_t bsz = x->dim(0);
  if (c.image_dim > 0 && !a.image)
    fail("this image-to-video model (image_dim " + std::to_string(c.image_dim) +
         ") needs the image encoder's tokens (ForwardArgs::image), none given");
  if (c.image_dim == 0 && a.image)
    fail("image tokens given to a model without image_dim (its config has no image embedder)");
  if (a.image) {
    const Tensor& im = *a.image;
    const bool rows_ok = c.pos_embed_seq_len == 0 ? im.ndim() == 3 && im.dim(1) > 0 : im.ndim() == 3 && im.dim(1) == c.pos_embed_seq_len;
    if (im.ndim() != 3 || im.dim(0) != bsz || im.dim(2) != c.image_dim || !rows_ok)
      fail("image tokens " + shape_str(im.shape()) + ": expected (" + std::to_string(bsz) + ", " +
           (c.pos_embed_seq_len ? std::to_string(c.pos_embed_seq_len) : std::string("M")) + ", " +
           std::to_string(c.image_dim) + ")");
  }
  if (!a.token_timesteps.empty() && static_cast<int64_t>(a.token_timesteps.size()) != bsz * tokens)
    fail(std::to_string(a.token_timesteps.size()) + " token timesteps for " + std::to_string(bsz) + " x " +
         std::to_string(tokens) + " tokens");
  if (tokens < stage_.shard().sp_size())
    fail("sp = " + std::to_string(stage_.shard().sp_size()) + " exceeds the " + std::to_string(tokens) + " tokens");
}

Tensor WanTransformer::forward(const ForwardArgs& a) const {
  check_args(a);
  const WanConfig& c = cfg_;
  const ShardGroups& shard = stage_.shard();
  const Placement& place = stage_.place();
  const Tensor& x = *a.latents;
  const int64_t bsz = x.dim(0);
  const std::array<int64_t, 3> grid = {x.dim(2) / c.patch[0], x.dim(3) / c.patch[1], x.dim(4) / c.patch[2]};
  const int64_t n = grid[0] * grid[1] * grid[2];  // the whole video's tokens: one sequence

  // (n, head_dim) float32 tables on the placement's device, rows in token order.
  const nn::RotaryTable rope(ops::rotary_tables_3d(c.rotary_dims(), grid), place);

  Tensor patched;  // the first stage's (B, n, C*pt*ph*pw) patches
  if (stage_.pipeline().first_stage()) patched = patch_.patches(x);
  const bool per_token = !a.token_timesteps.empty();  // TI2V: a timestep per token
  const Tensor temb = time_.embed(per_token ? a.token_timesteps : a.timesteps, place);  // (B, D) or (B*n, D)
  const Tensor shared_mod = time_(temb);  // (B, 6D) or (B*n, 6D) timestep_proj
  const Tensor text = text_(*a.text);     // (B, L, D)
  const nn::CrossContext context{&text, a.text_lengths.empty() ? nullptr : a.text_lengths.data()};
  Tensor image;  // (B, M, D): the image tokens, context like the text (image_dim models)
  if (a.image) image = image_(*a.image);
  const nn::CrossContext image_context{&image};

  Stage::Pass pass;
  pass.embed = [&](parallel::Range rows) { return patch_(parallel::token_rows(patched, rows)); };
  pass.layers = [&](Tensor& hidden, parallel::Range patch, parallel::Range span, const Stage::Samples& samples) {
    // This rank's tokens of the patch: its q and k take their table rows.
    const int64_t first =
        parallel::patch_rows(patch, shard.sp_split, shard.sp_size(), shard.sp_rank()).begin;
    const parallel::Range rows{first, first + hidden.dim(1)};
    // A step cache's subset of the samples: their modulation (per token: their rows of these tokens), texts, images.
    const Tensor mod = per_token ? token_block(shared_mod, bsz, n, rows, samples) : ops::sample_rows(shared_mod, samples);
    const TextOfSamples texts(context, samples);
    std::optional<TextOfSamples> images;
    if (a.image) images.emplace(image_context, samples);
    const nn::Rotary rotary = rope.rows_from(first);
    for (int64_t i = span.begin; i < span.end; ++i) {
      const nn::AttentionCore core = stage_.core(i, patch, n, c.head_dim, a.stale_kv);
      nn::BlockInputs in{&core, nullptr, &rotary, &texts.context(), {a.pab, static_cast<int>(i)}};
      in.image = images ? &images->context() : nullptr;
      blocks_[static_cast<size_t>(i - stage_.layers().begin)].forward(hidden, mod, in);
    }
  };
  // TeaCache4Wan2.1's signal (use_ret_steps off): the time embedding, whole on every rank (per token: every token's).
  pass.teacache_signal = [&](const Tensor&) { return Stage::Pass::Signal{temb, false}; };
  pass.head = [&](const Tensor& hidden, parallel::Range rows) {
    if (!per_token) return final_(hidden, final_.shift_scale(temb));
    // norm_out's shift and scale per token: the tokens as one-token rows.
    const Tensor shift_scale = final_.shift_scale(token_block(temb, bsz, n, rows, {}));  // (B*P, 2D)
    const Tensor out = final_(hidden.reshape({bsz * rows.size(), 1, hidden.dim(2)}), shift_scale);
    return out.reshape({bsz, rows.size(), out.dim(2)});
  };
  const Tensor out = stage_.run(n, bsz, c.inner_dim(), c.out_per_token(), a.stale_kv, pass, a.step_cache);
  return ops::unpatchify3d(out, grid, c.patch, c.out_channels).to(Device::kCPU, DType::kF32);
}

}  // namespace ditgen::models
