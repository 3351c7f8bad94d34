// CogVideoXConfig from config.json and CogVideoXTransformer3DModel's forward,
// following diffusers 0.42.1 (cogvideox_transformer_3d.py, the
// CogVideoXPatchEmbed / get_3d_sincos_pos_embed / get_3d_rotary_pos_embed of
// embeddings.py, CogVideoXPipeline._prepare_rotary_positional_embeddings):
// emb = time_embedding(Timesteps(D, flip_sin_to_cos, freq_shift)(t)); the
// joint sequence [text_proj(text); patch_embed(video) + positions]; per
// block the modulated norms, the joint attention and feed-forward with
// gated residuals; norm_final, norm_out modulated by (shift, scale) of emb,
// proj_out on the video rows, unpatchified from (F, h, w, C, p, p).
#include "models/cogvideox.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "io/model_dir.h"
#include "models/config_spec.h"
#include "models/family_spec.h"
#include "models/forward_checks.h"
#include "ops/ops.h"
#include "ops/rows.h"
#include "parallel/patch_pipeline.h"
#include "parallel/token_shard.h"
#include "util/error.h"
#include "util/torch_linspace.h"

namespace ditgen::models {

namespace {

const std::string kPatchEmbed = "patch_embed.proj.";
const std::string kTextProj = "patch_embed.text_proj.";
const std::string kTimeEmbedding = "time_embedding.";
const std::string kNormFinal = "norm_final.", kNormOut = "norm_out.norm.";
const std::string kNorm1 = "norm1.", kNorm2 = "norm2.", kAttention = "attn1.", kFeedForward = "ff.";

// proj_out's patch is stored (c, i, j): loaded channels last, as unpatchify3d reads it.
nn::FinalLayerNames final_layer(const CogVideoXConfig& c) {
  return {nn::FinalLayerNames::Modulation::kLinearOfSilu, "norm_out.linear.", "proj_out.", false, c.out_channels};
}

std::string block_prefix(int64_t layer) { return "transformer_blocks." + std::to_string(layer) + "."; }

nn::AttentionDims attention_dims(const CogVideoXConfig& c) {
  const int64_t d = c.inner_dim();
  // diffusers' Attention(qk_norm="layer_norm", eps=1e-6): a LayerNorm with affine over each head.
  return {c.num_heads, c.head_dim, d, d, nn::QkNorm::kLayerNorm, nn::QkNormSpan::kPerHead, 1e-6f};
}

nn::FeedForwardDims ff_dims(const CogVideoXConfig& c) {
  return {c.inner_dim(), c.ff_inner_dim, nn::FeedForwardActivation::kGeluTanh};
}

// Python's round(): half to even.
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

}  // namespace

CogVideoXConfig CogVideoXConfig::from_json(const nlohmann::json& cfg, const std::string& path) {
  using io::get_bool_or;
  using io::get_number_or;
  using io::get_string_or;
  const std::string cls = get_string_or(cfg, "_class_name", "", path);
  require(cls == "CogVideoXTransformer3DModel", path,
          "_class_name: expected CogVideoXTransformer3DModel, got '" + cls + "'");
  auto refuse_if_set = [&](const char* key, const std::string& what) {
    if (cfg.contains(key) && !cfg[key].is_null())
      not_supported(what + " (" + path + ": " + key + " = " + cfg[key].dump() + ")");
  };
  refuse_if_set("patch_size_t", "CogVideoX 1.5 models");
  refuse_if_set("ofs_embed_dim", "CogVideoX image-to-video models");
  // diffusers' defaults (CogVideoX-2b's sizes); out_channels null: in_channels.
  CogVideoXConfig c;
  c.num_heads = 30, c.head_dim = 64, c.in_channels = 16, c.num_layers = 30, c.patch_size = 2;
  read_positive_ints(cfg, path,
                     {{"num_attention_heads", &c.num_heads}, {"attention_head_dim", &c.head_dim},
                      {"in_channels", &c.in_channels}, {"out_channels", &c.out_channels, &c.in_channels},
                      {"time_embed_dim", &c.time_embed_dim}, {"text_embed_dim", &c.text_dim},
                      {"num_layers", &c.num_layers}, {"sample_width", &c.sample_width},
                      {"sample_height", &c.sample_height}, {"sample_frames", &c.sample_frames},
                      {"patch_size", &c.patch_size}, {"temporal_compression_ratio", &c.temporal_compression_ratio},
                      {"max_text_seq_length", &c.max_text_seq_length}});
  // Bounds no published model nears, so no product of sizes overflows.
  for (auto [key, v, most] : {std::tuple{"num_attention_heads", c.num_heads, 1024}, {"attention_head_dim", c.head_dim, 4096},
                              {"time_embed_dim", c.time_embed_dim, 65536}, {"text_embed_dim", c.text_dim, 65536},
                              {"in_channels", c.in_channels, 4096}, {"num_layers", c.num_layers, 1024},
                              {"patch_size", c.patch_size, 64}, {"sample_width", c.sample_width, 65536},
                              {"sample_height", c.sample_height, 65536}, {"sample_frames", c.sample_frames, 65536},
                              {"temporal_compression_ratio", c.temporal_compression_ratio, 64},
                              {"max_text_seq_length", c.max_text_seq_length, 65536}})
    require(v <= most, path, std::string(key) + ": " + std::to_string(v) + " is more than " + std::to_string(most));
  for (auto [key, v] : {std::pair{"sample_height", c.sample_height}, {"sample_width", c.sample_width}})
    require(v % c.patch_size == 0, path,
            std::string(key) + ": " + std::to_string(v) + " must be a multiple of patch_size " +
                std::to_string(c.patch_size) + " (the rotary grid and the default size are sample size / patch)");
  c.freq_shift = static_cast<float>(get_number_or(cfg, "freq_shift", 0.0, path));
  c.norm_eps = static_cast<float>(get_number_or(cfg, "norm_eps", 1e-5, path));
  c.spatial_interpolation_scale = get_number_or(cfg, "spatial_interpolation_scale", 1.875, path);
  c.temporal_interpolation_scale = get_number_or(cfg, "temporal_interpolation_scale", 1.0, path);
  c.rotary = get_bool_or(cfg, "use_rotary_positional_embeddings", false, path);
  require(c.norm_eps > 0, path, "norm_eps: expected a positive number");
  require(c.spatial_interpolation_scale > 0 && c.temporal_interpolation_scale > 0, path,
          "spatial_interpolation_scale / temporal_interpolation_scale: expected positive numbers");
  if (get_bool_or(cfg, "use_learned_positional_embeddings", false, path))
    not_supported("CogVideoX image-to-video models (" + path + ": use_learned_positional_embeddings true)");
  if (c.in_channels != c.out_channels)
    not_supported("CogVideoX image-to-video models (" + path + ": in_channels " + std::to_string(c.in_channels) +
                  " != out_channels " + std::to_string(c.out_channels) + ")");
  require(get_bool_or(cfg, "flip_sin_to_cos", true, path), path,
          "flip_sin_to_cos: false is not a CogVideoX model ditgen knows (the published ones use true)");
  for (const char* key : {"attention_bias", "norm_elementwise_affine", "patch_bias"})
    if (!get_bool_or(cfg, key, true, path))
      not_supported(std::string("CogVideoX with ") + key + " false (" + path + "; the published models use true)");
  const std::string act = get_string_or(cfg, "activation_fn", "gelu-approximate", path);
  if (act != "gelu-approximate") not_supported("CogVideoX activation_fn '" + act + "' (" + path + ")");
  const std::string tact = get_string_or(cfg, "timestep_activation_fn", "silu", path);
  if (tact != "silu") not_supported("CogVideoX timestep_activation_fn '" + tact + "' (" + path + ")");
  const int64_t d = c.inner_dim();
  if (c.rotary)
    require(c.head_dim % 16 == 0, path,
            "attention_head_dim: " + std::to_string(c.head_dim) +
                " must be a multiple of 16 (rotary channels: a quarter for frames, 3/8 each for rows and columns, "
                "each an even number of rotated pairs)");
  else
    require(d % 16 == 0, path,
            "num_attention_heads x attention_head_dim: " + std::to_string(d) +
                " must be a multiple of 16 (3-D sin-cos positions: a quarter for frames, 3/8 each for columns "
                "and rows, each half sines, half cosines)");
  c.ff_inner_dim = 4 * d;
  c.sample_size = 0;
  return c;
}

std::array<int64_t, 3> CogVideoXConfig::rotary_dims() const {
  return {head_dim / 4, head_dim / 8 * 3, head_dim / 8 * 3};
}

// ---- CogVideoXBlock ----------------------------------------------------------

nn::TensorDecls CogVideoXBlock::tensors(const std::string& prefix, const CogVideoXConfig& c) {
  const int64_t d = c.inner_dim();
  nn::TensorDecls t = nn::JointNormZero::tensors(prefix + kNorm1, d, c.time_embed_dim);
  nn::append(t, nn::JointNormZero::tensors(prefix + kNorm2, d, c.time_embed_dim));
  nn::append(t, nn::JointAttention::tensors(prefix + kAttention, attention_dims(c)));
  nn::append(t, nn::FeedForward::tensors(prefix + kFeedForward, ff_dims(c)));
  return t;
}

CogVideoXBlock CogVideoXBlock::load(const io::WeightStore& w, const std::string& prefix, const CogVideoXConfig& c,
                                    const ShardGroups& shard, const Placement& place) {
  CogVideoXBlock b;
  b.shard_ = shard;
  const int64_t d = c.inner_dim();
  b.norm1_ = nn::JointNormZero::load(w, prefix + kNorm1, d, c.norm_eps, shard.tp, place);
  b.norm2_ = nn::JointNormZero::load(w, prefix + kNorm2, d, c.norm_eps, shard.tp, place);
  b.attn1_ = nn::JointAttention::load(w, prefix + kAttention, attention_dims(c), shard.tp, place);
  b.ff_ = nn::FeedForward::load(w, prefix + kFeedForward, ff_dims(c), shard.tp, place);
  return b;
}

void CogVideoXBlock::forward(nn::JointRows& rows, const Tensor& emb, const nn::AttentionCore& core,
                             const nn::Rotary* rotary, const nn::PabSite& pab) const {
  const nn::JointModulation mod1 = norm1_(emb);
  const Tensor attn_out = pab.branch(pab::Kind::kSpatial, shard_, [&] {  // (B, P, D) before the gates
    return attn1_(mod1.normalize(rows), core, rotary);
  });
  mod1.add_gated(rows, attn_out);

  const nn::JointModulation mod2 = norm2_(emb);
  const Tensor ff_out = pab.branch(pab::Kind::kMlp, shard_, [&] { return ff_(mod2.normalize(rows)); });
  mod2.add_gated(rows, ff_out);
}

// ---- CogVideoXTransformer ----------------------------------------------------

nn::TensorDecls CogVideoXTransformer::stem_tensors(const CogVideoXConfig& c) {
  const int64_t d = c.inner_dim();
  nn::TensorDecls t = nn::PatchEmbed::tensors(kPatchEmbed, d, c.in_channels, c.patch_size);
  nn::append(t, nn::linear_tensors(kTextProj, d, c.text_dim));
  nn::append(t, nn::TimestepEmbedding::tensors(kTimeEmbedding, c.time_embed_dim, d));
  nn::append(t, nn::LayerNorm::tensors(kNormFinal, d));
  nn::append(t, nn::linear_tensors(final_layer(c).modulation, 2 * d, c.time_embed_dim));
  nn::append(t, nn::LayerNorm::tensors(kNormOut, d));
  nn::append(t, nn::linear_tensors(final_layer(c).out, c.out_per_token(), d));
  return t;
}

nn::TensorDecls CogVideoXTransformer::layer_tensors(const CogVideoXConfig& c, int64_t layer) {
  return CogVideoXBlock::tensors(block_prefix(layer), c);
}

CogVideoXTransformer CogVideoXTransformer::load(const io::WeightStore& w, const CogVideoXConfig& c,
                                                const ShardGroups& shard, const Placement& place) {
  // The probe of a layer past num_layers: a block's first tensor ("norm1.linear.weight").
  check_before_load<CogVideoXTransformer>(w, c, shard, FrameSharding::kWholeSequence, "CogVideoX",
                                          {"transformer_blocks"}, CogVideoXBlock::tensors("", c)[0].name);
  const int64_t d = c.inner_dim();
  CogVideoXTransformer m;
  m.cfg_ = c;
  m.stage_ = Stage(shard, place, c.num_layers);
  m.patch_ = nn::PatchEmbed::load3d(w, kPatchEmbed, {1, c.patch_size, c.patch_size}, place);
  m.text_proj_ = nn::Linear::load(w, kTextProj, place);
  m.time_ = nn::TimestepEmbedding::load(w, kTimeEmbedding, place);
  m.norm_final_ = nn::LayerNorm::load(w, kNormFinal, d, c.norm_eps, place);
  m.final_ = nn::FinalLayer::load(w, final_layer(c), place, c.norm_eps);
  m.norm_out_ = nn::LayerNorm::load(w, kNormOut, d, c.norm_eps, Placement{});  // host float32: folded per forward
  // The sin-cos table of the model's own size, made once (the first stage embeds).
  if (!c.rotary && m.stage_.pipeline().first_stage())
    m.native_positions_ = place.put(sincos_positions(c, c.native_grid()));
  // PipeFusion: a stage holds its own blocks only.
  const parallel::Range layers = m.stage_.layers();
  for (int64_t i = layers.begin; i < layers.end; ++i)
    m.blocks_.push_back(CogVideoXBlock::load(w, block_prefix(i), c, shard, place));
  return m;
}

Tensor CogVideoXTransformer::sincos_positions(const CogVideoXConfig& c, std::array<int64_t, 3> grid) {
  const int64_t d = c.inner_dim(), dt = d / 4, half = 3 * d / 8;
  const int64_t frames = grid[0], gh = grid[1], gw = grid[2];
  // Positions are float32 in diffusers (arange / scale), widened for the
  // float64 sin-cos; each axis's 1-D rows made once, then copied per token.
  auto axis = [](int64_t n, int64_t dim, double scale) {
    std::vector<float> rows(static_cast<size_t>(n * dim));
    for (int64_t i = 0; i < n; ++i)
      nn::sincos_1d(static_cast<double>(static_cast<float>(i) / static_cast<float>(scale)), dim, rows.data() + i * dim);
    return rows;
  };
  const std::vector<float> t_rows = axis(frames, dt, c.temporal_interpolation_scale),
                           x_rows = axis(gw, half, c.spatial_interpolation_scale),
                           y_rows = axis(gh, half, c.spatial_interpolation_scale);
  Tensor t = Tensor::empty({frames * gh * gw, d});
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t y = 0; y < gh; ++y)
      for (int64_t x = 0; x < gw; ++x) {
        float* row = t.data() + ((f * gh + y) * gw + x) * d;  // frame, then column, then row ("xy")
        std::memcpy(row, t_rows.data() + f * dt, static_cast<size_t>(dt) * sizeof(float));
        std::memcpy(row + dt, x_rows.data() + x * half, static_cast<size_t>(half) * sizeof(float));
        std::memcpy(row + dt + half, y_rows.data() + y * half, static_cast<size_t>(half) * sizeof(float));
      }
  return t;
}

std::array<int64_t, 3> CogVideoXConfig::native_grid() const {
  return {(sample_frames - 1) / temporal_compression_ratio + 1, sample_height / patch_size, sample_width / patch_size};
}

ops::RotaryTables CogVideoXTransformer::rotary_tables(const CogVideoXConfig& c, int64_t text_rows,
                                                      std::array<int64_t, 3> grid) {
  const int64_t hd = c.head_dim, frames = grid[0], gh = grid[1], gw = grid[2];
  // get_resize_crop_region_for_grid((gh, gw), base_width, base_height): the
  // grid resized to fit the model's sample grid, centred.
  const int64_t tw = c.sample_width / c.patch_size, th = c.sample_height / c.patch_size;
  int64_t resize_h = 0, resize_w = 0;
  if (static_cast<double>(gh) / static_cast<double>(gw) > static_cast<double>(th) / static_cast<double>(tw)) {
    resize_h = th;
    resize_w = round_half_even(static_cast<double>(th) / static_cast<double>(gh) * static_cast<double>(gw));
  } else {
    resize_w = tw;
    resize_h = round_half_even(static_cast<double>(tw) / static_cast<double>(gw) * static_cast<double>(gh));
  }
  const int64_t top = round_half_even(static_cast<double>(th - resize_h) / 2.0);
  const int64_t left = round_half_even(static_cast<double>(tw - resize_w) / 2.0);
  // grid_type "linspace": positions from the crop's start to stop * (n - 1) / n.
  auto axis = [](int64_t start, int64_t stop, int64_t n) {
    return torch_linspace_f32(static_cast<double>(start),
                              static_cast<double>(stop) * static_cast<double>(n - 1) / static_cast<double>(n), n);
  };
  const std::vector<float> pos_t = axis(0, frames, frames), pos_h = axis(top, top + resize_h, gh),
                           pos_w = axis(left, left + resize_w, gw);
  const std::array<int64_t, 3> dims = c.rotary_dims();
  const int64_t n = text_rows + frames * gh * gw;
  ops::RotaryTables r{Tensor::empty({n, hd}), Tensor::empty({n, hd})};
  for (int64_t i = 0; i < text_rows * hd; ++i) {  // the text's rows are not rotated
    r.cos[i] = 1.0f;
    r.sin[i] = 0.0f;
  }
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t y = 0; y < gh; ++y)
      for (int64_t x = 0; x < gw; ++x) {
        const int64_t row = (text_rows + (f * gh + y) * gw + x) * hd;
        float* cs = r.cos.data() + row;
        float* sn = r.sin.data() + row;
        nn::rotary_axis_f32(pos_t[static_cast<size_t>(f)], dims[0], cs, sn);
        nn::rotary_axis_f32(pos_h[static_cast<size_t>(y)], dims[1], cs + dims[0], sn + dims[0]);
        nn::rotary_axis_f32(pos_w[static_cast<size_t>(x)], dims[2], cs + dims[0] + dims[1], sn + dims[0] + dims[1]);
      }
  return r;
}

CogVideoXTransformer::Sequence CogVideoXTransformer::check_args(const ForwardArgs& a) const {
  const CogVideoXConfig& c = cfg_;
  auto fail = [](const std::string& msg) { throw RuntimeFailure("CogVideoX forward: " + msg); };
  const int64_t p = c.patch_size;
  Sequence s;
  s.batch = check_text_forward_args(a, c.in_channels, {1, p, p}, c.text_dim, fail);
  s.text_rows = a.text->dim(1);
  if (!c.rotary && s.text_rows != c.max_text_seq_length)
    fail("text of " + std::to_string(s.text_rows) + " rows: a CogVideoX model with sin-cos positions takes " +
         std::to_string(c.max_text_seq_length) + " (max_text_seq_length)");
  const Tensor& x = *a.latents;
  s.grid = {x.dim(2), x.dim(3) / p, x.dim(4) / p};
  s.tokens = s.text_rows + s.grid[0] * s.grid[1] * s.grid[2];
  if (s.tokens < stage_.shard().sp_size())
    fail("sp = " + std::to_string(stage_.shard().sp_size()) + " exceeds the " + std::to_string(s.tokens) + " tokens");
  return s;
}

Tensor CogVideoXTransformer::forward(const ForwardArgs& a) const {
  const Sequence seq = check_args(a);
  // (Plain copies, not a structured binding: lambdas below capture them.)
  const int64_t bsz = seq.batch, text_rows = seq.text_rows, n = seq.tokens;  // n: the joint sequence, text first
  const std::array<int64_t, 3> grid = seq.grid;
  const CogVideoXConfig& c = cfg_;
  const ShardGroups& shard = stage_.shard();
  const Placement& place = stage_.place();
  const int64_t d = c.inner_dim();

  // (n, head_dim) rotary tables on the device, rows in joint-sequence order (5b).
  const nn::RotaryTable rope = c.rotary ? nn::RotaryTable(rotary_tables(c, text_rows, grid), place) : nn::RotaryTable();
  Tensor patched, text, positions;  // the first stage's (B, N, C*p*p) patches, (B, L, D) text, (N, D) positions
  if (stage_.pipeline().first_stage()) {
    patched = patch_.patches(*a.latents);
    text = text_proj_(place.put(*a.text));
    if (!c.rotary) positions = grid == c.native_grid() ? native_positions_ : place.put(sincos_positions(c, grid));
  }
  const Tensor emb = time_(nn::TimestepEmbedding::sinusoid(a.timesteps, c.freq_shift, place, d));  // (B, T)

  // This rank's rows [first, first + P) of a patch of the joint sequence.
  auto first_row = [&](parallel::Range patch) {
    return parallel::patch_rows(patch, shard.sp_split, shard.sp_size(), shard.sp_rank()).begin;
  };
  Stage::Pass pass;
  pass.embed = [&](parallel::Range rows) {  // the band's text rows, then its video rows
    const int64_t t_begin = std::min(rows.begin, text_rows), t_end = std::min(rows.end, text_rows);
    nn::JointRows band{ops::take_rows(text, t_begin, t_end - t_begin), Tensor()};
    const parallel::Range video{std::max(rows.begin, text_rows) - text_rows, rows.end - text_rows};
    if (video.end <= video.begin) return band.text;
    const Tensor patches = parallel::token_rows(patched, video);
    band.video = c.rotary ? patch_(patches) : patch_(patches, positions.slice0(video.begin, video.end));
    return band.joined();
  };
  pass.layers = [&](Tensor& hidden, parallel::Range patch, parallel::Range span, const Stage::Samples& samples) {
    const Tensor e = ops::sample_rows(emb, samples);  // a step cache's subset of the samples
    const int64_t first = first_row(patch);
    const nn::Rotary rotary = c.rotary ? rope.rows_from(first) : nn::Rotary();
    nn::JointRows rows = nn::JointRows::split(hidden, text_rows - first);
    for (int64_t i = span.begin; i < span.end; ++i) {
      const nn::AttentionCore core = stage_.core(i, patch, n, c.head_dim, a.stale_kv);
      blocks_[static_cast<size_t>(i - stage_.layers().begin)].forward(rows, e, core, c.rotary ? &rotary : nullptr,
                                                                      {a.pab, static_cast<int>(i)});
    }
    hidden = rows.joined();
  };
  // TeaCache4CogVideoX's signal: the time embedding, whole on every rank.
  pass.teacache_signal = [&](const Tensor&) { return Stage::Pass::Signal{emb, false}; };
  // norm_out's (B, 2D) shift and scale, its LayerNorm's affine folded in: once, not per patch.
  const Tensor out_shift_scale = nn::fold_norm_affine(final_.shift_scale(emb), norm_out_, {{0, 1}}, place);
  pass.head = [&](const Tensor& hidden, parallel::Range) { return final_(norm_final_(hidden), out_shift_scale); };
  // (B, n, p*p*C): every token's patch, channels last; the video rows unpatchified.
  const Tensor out = stage_.run(n, bsz, d, c.out_per_token(), a.stale_kv, pass, a.step_cache);
  const Tensor video = ops::take_rows(out, text_rows, n - text_rows);
  return ops::unpatchify3d(video, grid, {1, c.patch_size, c.patch_size}, c.out_channels).to(Device::kCPU, DType::kF32);
}

}  // namespace ditgen::models
