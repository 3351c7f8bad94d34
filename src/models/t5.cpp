// T5Encoder: loads block by block (each GEMM weight placed, and its source
// pages released when that made a copy, before the next is read: a float32
// checkpoint encoded in bfloat16 never holds both whole copies) and runs the
// batch through the blocks in chunks of kPromptsPerPass prompts, so
// activation memory does not grow with the number of prompts.
#include "models/t5.h"

#include <algorithm>

#include "ops/ops.h"
#include "util/error.h"
#include "util/profile.h"

namespace ditgen::models {

namespace {

constexpr int64_t kPromptsPerPass = 8;

// Where each part is stored, written once: the declarations and the load
// both follow these.
const std::string kEmbedding = "shared.";
const std::string kLegacyEmbedding = "encoder.embed_tokens.";  // the same table, as older checkpoints name it
const std::string kFinalNorm = "encoder.final_layer_norm.";
const std::string kBlocks = "encoder.block";
const std::string kAttentionLayer = "layer.0.", kFeedForwardLayer = "layer.1.", kLayerNorm = "layer_norm.";

std::string block(int64_t i) { return kBlocks + "." + std::to_string(i) + "."; }
std::string attention_norm(int64_t i) { return block(i) + kAttentionLayer + kLayerNorm; }
std::string attention(int64_t i) { return block(i) + kAttentionLayer + "SelfAttention."; }
std::string ff_norm(int64_t i) { return block(i) + kFeedForwardLayer + kLayerNorm; }
std::string feed_forward(int64_t i) { return block(i) + kFeedForwardLayer + "DenseReluDense."; }

nn::T5AttentionDims attention_dims(const T5Config& c, int64_t layer) {
  return {c.d_model, c.num_heads, c.d_kv, c.num_buckets, layer == 0 || c.umt5};
}

nn::T5FeedForwardDims ff_dims(const T5Config& c) { return {c.d_model, c.d_ff, c.gated, c.act}; }

// The token embedding: (vocab, D) under either name.
nn::TensorDecl embedding_tensor(const T5Config& c) {
  return {kEmbedding + "weight", {c.vocab_size, c.d_model}, nn::TpSplit::kWhole, std::nullopt,
          {kLegacyEmbedding + "weight"}};
}

}  // namespace

nn::TensorDecls T5Encoder::stem_tensors(const T5Config& c) {
  nn::TensorDecls t = {embedding_tensor(c)};
  nn::append(t, nn::RmsNorm::tensors(kFinalNorm, c.d_model));
  return t;
}

nn::TensorDecls T5Encoder::layer_tensors(const T5Config& c, int64_t i) {
  nn::TensorDecls t = nn::RmsNorm::tensors(attention_norm(i), c.d_model);
  nn::append(t, nn::T5Attention::tensors(attention(i), attention_dims(c, i)));
  nn::append(t, nn::RmsNorm::tensors(ff_norm(i), c.d_model));
  nn::append(t, nn::T5FeedForward::tensors(feed_forward(i), ff_dims(c)));
  return t;
}

void T5Encoder::check(const io::WeightStore& w, const T5Config& c) {
  // The probe of a block past num_layers: its first tensor, named under the
  // list ("layer.0.layer_norm.weight" of "encoder.block.<n>.").
  const std::string probe = layer_tensors(c, 0)[0].name.substr(block(0).size());
  nn::check_model_tensors(w, stem_tensors(c), c.num_layers, [&](int64_t i) { return layer_tensors(c, i); },
                          {kBlocks}, probe);
}

T5Encoder::T5Encoder(const T5Config& cfg, const io::WeightStore& w, const Placement& place)
    : cfg_(cfg), place_(place) {
  embed_table_ = nn::load_as(w, embedding_tensor(cfg), place, nn::Placed::kTable);
  blocks_.resize(static_cast<size_t>(cfg.num_layers));
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    Block& b = blocks_[static_cast<size_t>(i)];
    b.attn_norm = nn::RmsNorm::load(w, attention_norm(i), cfg.d_model, cfg.eps, place);
    b.attention = nn::T5Attention::load(w, attention(i), attention_dims(cfg, i), place);
    b.ff_norm = nn::RmsNorm::load(w, ff_norm(i), cfg.d_model, cfg.eps, place);
    b.feed_forward = nn::T5FeedForward::load(w, feed_forward(i), ff_dims(cfg), place);
  }
  final_norm_ = nn::RmsNorm::load(w, kFinalNorm, cfg.d_model, cfg.eps, place);
}

Tensor T5Encoder::embed(const TokenBatch& tokens) const {
  const int64_t L = tokens.max_length();
  Tensor out = place_.empty({static_cast<int64_t>(tokens.ids.size()) * L, cfg_.d_model});
  int64_t row = 0;
  for (const std::vector<int64_t>& ids : tokens.ids)
    for (const int64_t id : ids) {
      if (id < 0 || id >= cfg_.vocab_size)
        throw ModelError(cfg_.path + ": vocab_size: token id " + std::to_string(id) +
                         " is outside the embedding table of " + std::to_string(cfg_.vocab_size) +
                         " rows (does the tokenizer belong to this encoder?)");
      Tensor dst = out.slice0(row, row + 1);
      dst.copy_from(embed_table_.slice0(id, id + 1));  // converts a bfloat16 row to the compute dtype
      ++row;
    }
  return out;
}

Tensor T5Encoder::position_bias(const Tensor& table, int64_t L) const {
  const int64_t H = cfg_.num_heads;
  std::vector<int64_t> bucket(static_cast<size_t>(2 * L - 1));  // by j - i + L - 1
  for (int64_t r = -(L - 1); r <= L - 1; ++r)
    bucket[static_cast<size_t>(r + L - 1)] = t5_position_bucket(r, cfg_.num_buckets, cfg_.max_distance);
  Tensor bias = Tensor::empty({H, L, L});
  const float* t = table.data();  // (num_buckets, H)
  float* out = bias.data();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < L; ++j) out[(h * L + i) * L + j] = t[bucket[static_cast<size_t>(j - i + L - 1)] * H + h];
  return bias.to(place_.device, DType::kF32);
}

void T5Encoder::run_block(const Block& b, const Tensor& bias, const std::vector<int32_t>& lengths, int64_t n,
                          int64_t L, Tensor& h) const {
  Tensor x;
  {
    profile::ScopedTimer t("t5.rms_norm");
    x = b.attn_norm(h);  // (rows, D)
  }
  ops::add_(h, b.attention(x, bias, lengths, n, L));
  {
    profile::ScopedTimer t("t5.rms_norm");
    x = b.ff_norm(h);
  }
  ops::add_(h, b.feed_forward(x));
}

Tensor T5Encoder::encode(const TokenBatch& tokens) const {
  const int64_t N = static_cast<int64_t>(tokens.ids.size()), L = tokens.max_length(), D = cfg_.d_model;
  if (N == 0) return Tensor::empty({0, 0, D});
  if (static_cast<int64_t>(tokens.lengths.size()) != N)
    throw std::invalid_argument("T5Encoder::encode: " + std::to_string(N) + " prompts with " +
                                std::to_string(tokens.lengths.size()) + " lengths");
  for (int64_t i = 0; i < N; ++i)
    if (static_cast<int64_t>(tokens.ids[i].size()) != L || tokens.lengths[i] < 1 || tokens.lengths[i] > L)
      throw std::invalid_argument("T5Encoder::encode: prompt " + std::to_string(i) + " has " +
                                  std::to_string(tokens.ids[i].size()) + " ids and length " +
                                  std::to_string(tokens.lengths[i]) + " (expected " + std::to_string(L) + ")");

  Tensor out = Tensor::empty({N, L, D});
  // Block 0's bias serves every block of T5; UMT5's blocks make their own.
  const Tensor shared_bias = cfg_.umt5 ? Tensor() : position_bias(blocks_[0].attention.position_table(), L);
  for (int64_t p0 = 0; p0 < N; p0 += kPromptsPerPass) {
    const int64_t n = std::min(kPromptsPerPass, N - p0);
    TokenBatch chunk;
    std::vector<int32_t> lengths;
    for (int64_t i = p0; i < p0 + n; ++i) {
      chunk.ids.push_back(tokens.ids[i]);
      chunk.lengths.push_back(tokens.lengths[i]);
      lengths.push_back(static_cast<int32_t>(tokens.lengths[i]));
    }
    Tensor h = embed(chunk);  // (n*L, D) residual stream
    for (const Block& b : blocks_)
      run_block(b, cfg_.umt5 ? position_bias(b.attention.position_table(), L) : shared_bias, lengths, n, L, h);
    const Tensor result = final_norm_(h).to(Device::kCPU, DType::kF32);
    out.slice0(p0, p0 + n).copy_from(result);
  }
  return out;
}

}  // namespace ditgen::models
