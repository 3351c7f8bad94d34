// The parts diffusers' VAE decoders share, written once for the families
// built on them: AutoencoderKL (models/autoencoder_kl.h) and the causal
// video VAEs, AutoencoderKLWan (models/autoencoder_kl_wan.h) and
// AutoencoderKLCogVideoX (models/autoencoder_kl_cogvideox.h). Their layers
// are the modules of models/nn/ (conv.h, norm.h, resnet2d.h,
// causal_conv3d.h, causal_resnet.h, pixel_attention.h); here is how a
// decoder walks and checks them.
//   up_block_prefix, walk_up_blocks, load_up_blocks
//                       the up blocks' resnets (names, channels) and block
//                       ends in decoder order, for the declarations and for
//                       loading (all three).
//   check_decoder_tensors, check_declared_tensors
//                       every declared decoder (or encoder) tensor checked
//                       before any is loaded (nn::check_tensors), and one
//                       the config does not account for refused.
//   decoder_causal_slots, begin_causal_call, start_causal_cache,
//   end_causal_call     a decode call's protocol over the causal convs'
//                       nn::CausalCache: their slots in the order the
//                       decoder runs them, allocated at a video's first
//                       call, all used by every call.
//   check_latent_video, check_stream_latents, decode_in_chunks
//                       the host side of a causal VAE's decode() and of its
//                       Stream::next: the latents checked, put on the
//                       placement a chunk at a time through one cache, and
//                       the frames each call makes gathered on the host.
//   CausalVae, CausalVaeSpec
//                       the causal VAE models' common base (placement,
//                       config, Cache, decode() and the seam's Stream) and
//                       their specs' (what the seam reads off the config).
// Each family keeps what is its own: its blocks and norms, which convs are
// causal, how its first chunk is padded, and how it chunks a video.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "models/config_spec.h"
#include "models/nn/causal_conv3d.h"
#include "models/nn/conv.h"
#include "models/nn/tensor_decl.h"
#include "models/placement.h"
#include "models/vae_spec.h"
#include "tensor/tensor.h"

namespace ditgen::models {

// ---- Up blocks and declared tensors ----------------------------------------------

// The channels of a decoder's up blocks, one entry a block in decoder order:
// the first resnet of block i goes from in[i] to out[i], the rest stay at
// out[i].
struct UpBlockChannels {
  std::vector<int64_t> in, out;
};

// diffusers' Decoder and CogVideoXDecoder3D: block i goes from the previous
// block's channels (the first block: its own) to
// reversed(block_out_channels)[i].
UpBlockChannels reversed_up_blocks(const std::vector<int64_t>& block_out_channels);

// "decoder.up_blocks.<i>.": where up block i is stored.
std::string up_block_prefix(size_t i);

// Resnet j of up block i.
struct UpResnet {
  size_t block;        // i
  std::string prefix;  // "decoder.up_blocks.<i>.resnets.<j>."
  int64_t cin, cout;
};

// For each up block i in order: resnet(r) for its `per_block` resnets, then
// block_end(i, up_block_prefix(i)) (where an upsampler goes).
void walk_up_blocks(const UpBlockChannels& channels, int64_t per_block,
                    const std::function<void(const UpResnet&)>& resnet,
                    const std::function<void(size_t, const std::string&)>& block_end);

// The up blocks in decoder order, each a Block with its resnets made by
// resnet(r) (as walk_up_blocks walks them), then finished by
// block_end(i, up_block_prefix(i), block) (its upsampler).
template <class Block, class Resnet, class BlockEnd>
std::vector<Block> load_up_blocks(const UpBlockChannels& channels, int64_t per_block, Resnet&& resnet,
                                  BlockEnd&& block_end) {
  std::vector<Block> blocks(channels.out.size());
  walk_up_blocks(
      channels, per_block, [&](const UpResnet& r) { blocks[r.block].resnets.push_back(resnet(r)); },
      [&](size_t i, const std::string& ub) { block_end(i, ub, blocks[i]); });
  return blocks;
}

// nn::check_tensors on `declared` (a decoder's every tensor), before
// anything is loaded; then ModelError "<file>: holds '<name>', which
// config.json (<keys>) does not account for" for any other tensor under
// "decoder." or "post_quant_conv." (config and weights disagree). The
// encoder's tensors are never read.
void check_decoder_tensors(const io::WeightStore& w, const nn::TensorDecls& declared, const std::string& keys);
// The same for any part of a VAE: nn::check_tensors on `declared`, then
// the ModelError for any other tensor under one of `prefixes` (an encoder's
// "encoder." and "quant_conv.").
void check_declared_tensors(const io::WeightStore& w, const nn::TensorDecls& declared,
                            const std::vector<std::string>& prefixes, const std::string& keys);

// ---- A decode call over the causal convolutions ------------------------------------

// A causal conv's cache slot: its input channels, at `scale` x the latent grid.
struct CausalSlot {
  int64_t channels, scale;
};

// A causal VAE's names in messages: "Wan VAE" decodes a latent "frame" per
// call, "CogVideoX VAE" a "chunk".
struct CausalVaeNames {
  const char* model;
  const char* call;
};

// Begins a decode call of z on `cache`. z must be (1, channels, n, h, w)
// with h, w >= 1 and n == frames (frames > 0) or n >= 1 (frames 0), else
// RuntimeFailure "<model> decode: latent <call> <shape> is not [1,
// <channels>, <frames, or n>, h, w]"; a later call must be on the first
// call's grid, else RuntimeFailure "<model> decode: latent <call> of hxw
// after <call>s of hxw". True on a video's first call: the caller then
// allocates the slots (start_causal_cache).
bool begin_causal_call(nn::CausalCache& cache, const Tensor& z, int64_t channels, int64_t frames,
                       const CausalVaeNames& names);

// Allocates the slots of `slots` (the causal convs in decoder order) for
// the first call's grid, once and before any activation, at their exact
// sizes (allocated later, each would take a larger freed block from the
// caching allocator), in the convolutions' dtype (bfloat16 ones round their
// input anyway: half the memory, the same padding): zeros under
// CausalPad::kZeros, uninitialised under kFirstFrame (the first call writes
// each slot before any read).
void start_causal_cache(nn::CausalCache& cache, const std::vector<CausalSlot>& slots, nn::CausalPad pad,
                        const Placement& place);

// The cache slots of a causal decoder laid out as both are, in the order
// they run: conv_in and the mid block's resnets at the latent grid; then
// each up block's resnets and its extra(block) causal conv when that is not
// null (Wan's time conv), the scale doubling after every block that
// upsamples; then conv_out. A resnet lists its causal convs' input channels
// (causal_inputs).
template <class Resnet, class Block, class Extra>
std::vector<CausalSlot> decoder_causal_slots(const nn::CausalConv3d& conv_in, std::initializer_list<const Resnet*> mid,
                                             const std::vector<Block>& up_blocks, const nn::CausalConv3d& conv_out,
                                             Extra&& extra) {
  std::vector<CausalSlot> slots;
  auto resnet = [&](const Resnet& r, int64_t scale) {
    for (const int64_t channels : r.causal_inputs()) slots.push_back({channels, scale});
  };
  slots.push_back({conv_in.in_channels(), 1});
  for (const Resnet* r : mid) resnet(*r, 1);
  int64_t scale = 1;
  for (const Block& blk : up_blocks) {
    for (const Resnet& r : blk.resnets) resnet(r, scale);
    if (const nn::CausalConv3d* c = extra(blk)) slots.push_back({c->in_channels(), scale});
    if (blk.upsample) scale *= 2;
  }
  slots.push_back({conv_out.in_channels(), scale});
  return slots;
}

// Ends a decode call: logic_error "<model> decode: cache slots used do not
// match the model" unless it used every slot; from then on the cache has
// started (its slots are the padding).
void end_causal_call(nn::CausalCache& cache, const CausalVaeNames& names);

// ---- The host side of decode() and Stream::next ----------------------------------

// RuntimeFailure "<model> decode: latents <shape> are not [1, <channels>, F,
// h, w]" unless z is (1, channels, F >= 1, h, w).
void check_latent_video(const Tensor& z, int64_t channels, const CausalVaeNames& names);
// RuntimeFailure "<model> stream: latents <shape> are not [<channels>, n, h,
// w]" unless a Stream::next's latents are (channels, n >= 1, h, w).
void check_stream_latents(const Tensor& latents, int64_t channels, const CausalVaeNames& names);

// A video's (or a stream call's) latent frames as decode calls.
struct ChunkedDecode {
  std::vector<int64_t> chunks;  // latent frames per decode call, in order (they sum to F)
  int64_t frames = 0;           // the output frames those calls make
  int64_t out_channels = 0;
  int64_t factor = 1;         // pixels per latent, each side
  bool frames_first = false;  // (frames, oc, H, W), Stream::next's, rather than (1, oc, frames, H, W)
};

// Latents (1, C, F, h, w) or (C, F, h, w), host float32, through `call`
// (one decode call on one cache) in d.chunks: each chunk is put on `place`
// as (1, C, n, h, w) (no copy when it is all F frames), and its (1, oc, t,
// H, W) result, brought back as host float32, is the next t output frames.
// logic_error unless the calls make d.frames frames of d.out_channels x
// (h d.factor) x (w d.factor).
Tensor decode_in_chunks(const Tensor& latents, const ChunkedDecode& d, const Placement& place,
                        const std::function<Tensor(const Tensor&)>& call, const CausalVaeNames& names);

// ---- The causal VAE models' base --------------------------------------------------

// What AutoencoderKLWan and AutoencoderKLCogVideoX (Derived, CRTP) share
// besides their blocks: the placement and config, the Cache, decode() of a
// whole video and the seam's Stream, both through decode_in_chunks with one
// cache. Derived's load sets place_, cfg_ and slots_ (its causal convs in
// the order decode_chunk runs them: decoder_causal_slots). Derived provides
// (public):
//   static constexpr CausalVaeNames kNames;
//   int64_t latent_channels() const;
//   ChunkedDecode chunked(int64_t latent_frames, const Cache& cache, bool stream) const;
//       the decoder calls of decode() (stream false: a whole video in the
//       family's chunks) or of one Stream::next (stream true: the caller's
//       chunk, at the cache's state), and the frames they make
//   Tensor decode_chunk(const Tensor& z, Cache& cache) const;  one decoder call
// and optionally Tensor to_pixels(Tensor, bool frames_first) const, hiding
// CausalVae's.
template <class Derived, class ConfigT>
class CausalVae {
 public:
  using Config = ConfigT;
  using Cache = nn::CausalCache;

  // A whole latent video (1, latent_channels, F, h, w), host float32,
  // ALREADY un-normalised, through decode_chunk in Derived's chunks with one
  // cache -> (1, out_channels, frames, H, W), host float32, raw (not
  // clamped). For tests; the pipeline decodes through the Stream.
  Tensor decode(const Tensor& z) const {
    const Derived& m = self();
    check_latent_video(z, m.latent_channels(), Derived::kNames);
    Cache cache;
    return m.to_pixels(decode_in_chunks(z, m.chunked(z.dim(2), cache, false), place_,
                                        [&](const Tensor& zi) { return m.decode_chunk(zi, cache); }, Derived::kNames),
                       false);
  }

  // The seam's stream (VaeDecoderOf<Derived, Stream>): one video's latents
  // through one cache, each next() (C, n, h, w) -> (frames, out_channels, H, W).
  class Stream final : public VaeDecoder::Stream {
   public:
    explicit Stream(const Derived& vae) : vae_(vae) {}
    Tensor next(const Tensor& latents) override {
      check_stream_latents(latents, vae_.latent_channels(), Derived::kNames);
      return vae_.to_pixels(decode_in_chunks(latents, vae_.chunked(latents.dim(1), cache_, true), vae_.placement(),
                                             [&](const Tensor& z) { return vae_.decode_chunk(z, cache_); },
                                             Derived::kNames),
                            true);
    }

   private:
    const Derived& vae_;
    Cache cache_;
  };

  const Config& config() const { return cfg_; }
  const Placement& placement() const { return place_; }
  // decode_in_chunks' host frames as the image's pixels (frames_first:
  // Stream::next's layout). As they are; Derived may hide this with its own
  // (Wan's unpatchify).
  Tensor to_pixels(Tensor frames, bool /*frames_first*/) const { return frames; }
  int64_t causal_convs() const { return static_cast<int64_t>(slots_.size()); }

 protected:
  Placement place_;
  Config cfg_;
  std::vector<CausalSlot> slots_;  // one per causal conv, in the order decode_chunk runs them

 private:
  const Derived& self() const { return static_cast<const Derived&>(*this); }
};

// What a causal VAE's spec (VaeSpec over Model::Config) reads off the config
// the same way for both: output channels, spatial and temporal factors,
// force_upcast, and the load (Model::load behind VaeDecoderOf with
// Model::Stream). The family's spec adds the rest (family, latent
// channels, normalisation, chunking).
template <class Model>
class CausalVaeSpec : public ConfigSpec<VaeSpec, typename Model::Config> {
 public:
  using ConfigSpec<VaeSpec, typename Model::Config>::ConfigSpec;
  int64_t out_channels() const override { return this->cfg_.out_channels; }
  int64_t spatial_factor() const override { return this->cfg_.spatial_factor(); }
  int64_t temporal_factor() const override { return this->cfg_.temporal_factor(); }
  bool force_upcast() const override { return this->cfg_.force_upcast; }
  int64_t decoder_params() const override { return declared_elements(Model::decoder_tensors(this->cfg_)); }
  void check_weights(const io::WeightStore& weights) const override { Model::check(weights, this->cfg_); }
  std::unique_ptr<VaeDecoder> load(const io::WeightStore& weights, const Placement& place) const override {
    return std::make_unique<VaeDecoderOf<Model, typename Model::Stream>>(Model::load(weights, this->cfg_, place));
  }
};

}  // namespace ditgen::models
