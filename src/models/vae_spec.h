// The VAE seam, beside the transformer's (models/transformer.h) and the text
// encoder's (models/text_encoder.h): what a decoder family answers from its
// config.json alone (VaeSpec: latent channels, spatial and temporal
// factors, which frame counts it can make, how latents are normalised) and
// the decoder a pipeline runs (VaeDecoder: a video's latent frames decoded
// chunk by chunk, so memory is bounded by a chunk, not by the video's
// length). A family is a model file implementing both (a Stream class
// wrapped by VaeDecoderOf, a ConfigSpec of models/config_spec.h) plus one
// row in the registry (models/registry.cpp); pipelines speak only to these
// interfaces.
//
// AutoencoderKL (models/autoencoder_kl.h) is the first: spatial factor
// 2^(levels - 1), no time axis (a video is decoded frame by frame), one
// scaling factor. A causal video VAE (Wan's: temporal factor 4, frames
// 1 + 4k, per-channel mean and std, one latent frame at a time through its
// feature cache) fits the same interface; the causal ones (Wan's,
// CogVideoX's) share their Stream and spec through CausalVae and
// CausalVaeSpec (models/vae_decoder_parts.h).
//
// The encoder half (VaeEncoder: pixels to normalised latents, what an
// image-to-video pipeline conditions on) is optional: a family that has one
// answers load_encoder(); Wan's is the first
// (models/autoencoder_kl_wan_encoder.h).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "models/nn/tensor_decl.h"
#include "models/nn/vae_tiles.h"
#include "models/placement.h"
#include "tensor/tensor.h"

namespace ditgen::models {

// How the transformer's latents relate to the VAE's: diffusers' pipelines
// undo either one scaling factor (latents / scaling_factor, or
// latents * (1 / scaling_factor): the pipelines differ in the last bit) or
// a per-channel normalisation (latents / (1 / std) + mean, as WanPipeline
// writes it).
struct LatentNormalization {
  float scaling_factor = 1.0f;
  std::vector<float> mean, std;  // per latent channel; empty: scaling_factor alone
  bool per_channel() const { return !mean.empty(); }
};

// The geometry a VAE gives the latents of a requested size: pixels per
// latent on each side, and output frames per latent frame after the first
// (1 for image VAEs, which decode a video frame by frame; 4 for Wan's
// causal VAE: frames 1 + 4k). What a transformer's latent_shape needs of
// the VAE (models/transformer.h), as a value so a spec answers without one.
struct VaeFactors {
  int64_t spatial = 8;
  int64_t temporal = 1;
  const char* family = "vae";  // names the VAE in messages ("autoencoder_kl_wan")
  // The frame counts it makes are 1 + frame_step * k: temporal for most;
  // 2 * temporal for CogVideoX's, which decodes latent frames in pairs
  // after an odd first chunk (so only odd latent frame counts give
  // frames_of() frames). 0 = temporal.
  int64_t frame_step = 0;

  // Output frames of `latent_frames` latent frames, and back.
  int64_t frames_of(int64_t latent_frames) const { return 1 + temporal * (latent_frames - 1); }
  int64_t latent_frames_of(int64_t frames) const { return 1 + (frames - 1) / temporal; }
  // ConfigError naming `where` (the config file and field, "run.json:
  // generate.frames") unless this VAE can make `frames` frames (1 +
  // frame_step * k), with the nearest counts it can make.
  void check_frames(int64_t frames, const std::string& where) const;
};

class VaeDecoder {
 public:
  virtual ~VaeDecoder() = default;

  // One output's latent frames, in order, a chunk at a time. next() takes
  // (C, n, h, w) latents, already un-normalised (the pipeline's job), and
  // returns the (frames, out_channels, H, W) frames they decode to, raw
  // (about [-1, 1], not clamped). A causal decoder keeps what it needs of
  // earlier chunks inside the stream.
  class Stream {
   public:
    virtual ~Stream() = default;
    virtual Tensor next(const Tensor& latents) = 0;
  };
  virtual std::unique_ptr<Stream> begin() const = 0;
};

// The VaeDecoder of a loaded model: each begin() is a StreamType reading the
// model (constructed from a const Model&).
template <class Model, class StreamType>
class VaeDecoderOf final : public VaeDecoder {
 public:
  explicit VaeDecoderOf(Model model) : model_(std::move(model)) {}
  std::unique_ptr<Stream> begin() const override { return std::make_unique<StreamType>(model_); }

 private:
  Model model_;
};

class VaeEncoder {
 public:
  virtual ~VaeEncoder() = default;
  // A video (in_channels, F, H, W), host float32 in [-1, 1], (F a frame
  // count the VAE makes, H and W multiples of its spatial factor) -> its
  // latents (latent_channels, latent_frames_of(F), H/f, W/f), host
  // float32: the latent distribution's mode, normalised as the pipelines
  // normalise their latents (the inverse of VaeSpec::normalization()), a
  // chunk of frames at a time. With `tiles` (nn::encode_tile_grid of the
  // sizes and spatial_factor()), tiled as diffusers' tiled_encode, whatever
  // the size (the caller decides when to tile: nn::needs_tiles on the
  // pixels). A VAE with a patch_size p > 1 reads the tile sizes as diffusers
  // does, in patches of the patchified video (a 256 tile covers 256 p
  // pixels).
  virtual Tensor encode(const Tensor& video, const std::optional<nn::TileGrid>& tiles = std::nullopt) const = 0;
};

class VaeSpec {
 public:
  virtual ~VaeSpec() = default;

  virtual const char* family() const = 0;  // "autoencoder_kl"
  virtual int64_t latent_channels() const = 0;
  virtual int64_t out_channels() const = 0;
  virtual int64_t spatial_factor() const = 0;  // pixels per latent, each side
  // Pixels per side of the patches the decoder makes as channels (diffusers'
  // AutoencoderKLWan patch_size: Wan 2.2 TI2V's 2; 1 for the rest): a
  // tiled decode blends its tiles as patches, as diffusers' tiled_decode
  // does (models/vae_decode.h).
  virtual int64_t patch_size() const { return 1; }
  // Frames per latent frame after the first: 1 for image VAEs (a video is
  // decoded frame by frame), 4 for Wan's causal VAE (frames 1 + 4k).
  virtual int64_t temporal_factor() const { return 1; }
  // The step between the frame counts it makes (VaeFactors::frame_step;
  // 0 = temporal_factor()).
  virtual int64_t frame_step() const { return 0; }
  VaeFactors factors() const { return {spatial_factor(), temporal_factor(), family(), frame_step()}; }
  // VaeFactors' answers for this VAE.
  int64_t frames_of(int64_t latent_frames) const { return factors().frames_of(latent_frames); }
  int64_t latent_frames_of(int64_t frames) const { return factors().latent_frames_of(frames); }
  void check_frames(int64_t frames, const std::string& where) const { factors().check_frames(frames, where); }

  virtual LatentNormalization normalization() const = 0;
  // diffusers' force_upcast: a float16 pipeline decodes this VAE in float32.
  virtual bool force_upcast() const { return true; }
  // Latent frames a Stream::next call takes by default (latent_chunks' step):
  // bounds the decoder's memory (AutoencoderKL: LattePipeline's
  // decode_chunk_size; Wan's VAE: 1; CogVideoX's: 2, its first chunk 3 for
  // an odd count).
  virtual int64_t chunk_latent_frames() const = 0;
  // The sizes of the chunks a video of `latent_frames` latent frames goes
  // through Stream::next in, in order (they sum to latent_frames): by
  // default chunk_latent_frames() each, the last what remains. A VAE whose
  // result depends on the chunking (its norms span a chunk) says its own
  // reference's.
  virtual std::vector<int64_t> latent_chunks(int64_t latent_frames) const;

  // diffusers' enable_tiling defaults for this VAE, in pixels (tiled
  // decode: models/vae_decode.h, the config's vae section).
  virtual nn::TileSampleSizes default_tile_sizes() const = 0;
  // An estimate of the peak bytes an untiled decode of h x w latents works
  // in beyond its weights and the decoded frames (one chunk of
  // latent_chunks() through the stream): what vae.tiling "auto" weighs
  // against the memory limit. Tiled, the same for the tile's h x w.
  virtual double decode_bytes(int64_t h, int64_t w) const = 0;
  // The decoder's weight elements (what load() places), from the config:
  // what `plan` counts for the VAE's weights.
  virtual int64_t decoder_params() const = 0;

  // How one file of this VAE is read (model.vae): its other naming
  // (io::SingleFileOptions). Default: the names as stored.
  virtual io::SingleFileOptions single_file_options() const { return {}; }
  // Checks every decoder tensor load() reads against `weights` (name, shape,
  // floating type; a decoder tensor the config does not account for),
  // reading none: ModelError naming the file and the first that does not fit.
  virtual void check_weights(const io::WeightStore& weights) const = 0;
  // Validates every weight's name and shape against the config, then loads
  // the decoder onto `place`.
  virtual std::unique_ptr<VaeDecoder> load(const io::WeightStore& weights, const Placement& place) const = 0;

  // The encoder half, for the pipelines that encode pixels (image-to-video):
  // its weights validated against the config, then loaded onto `place`.
  // By default ConfigError "not supported yet: encoding with the <family>
  // VAE" (exit 2).
  virtual std::unique_ptr<VaeEncoder> load_encoder(const io::WeightStore& weights, const Placement& place) const;
};

// A rough decode_bytes() from a decoder's full-resolution level, where its
// activations peak: `frames` output frames of one chunk at `pixels`
// pixels, `upsampled_channels` out of the last nearest x2 upsampler,
// `channels` after its conv, and `causal_convs` full-resolution causal
// convs keeping two frames each (0 for a 2-D VAE); float32, four live
// copies of the level's activation (a block's input, its norm's output,
// the conv's staged input and output). Not measured (AutoencoderKL,
// CogVideoX); Wan's VAE has its own measured account.
// The elements of a decoder's declared tensors (decoder_params()).
int64_t declared_elements(const nn::TensorDecls& decls);

double full_resolution_bytes(int64_t pixels, int64_t frames, int64_t upsampled_channels, int64_t channels,
                             int64_t causal_convs);

}  // namespace ditgen::models
