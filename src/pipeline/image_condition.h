// The image-to-video conditioning, exactly as diffusers 0.42.1's
// WanImageToVideoPipeline.prepare_latents builds it and its loop uses it
// (pipelines/wan/pipeline_wan_i2v.py), and WanPipeline's expand_timesteps
// loop for Wan 2.2 TI2V-5B as text-to-video (pipeline_wan.py).
//
// Two ways to condition, told by the model (pipeline/i2v_kind.h):
//
//  - Channels (Wan 2.1 I2V / FLF2V, Wan 2.2 I2V-A14B): the frames
//    [image, zeros..., (last image)] (3, F, H, W) through the VAE encoder
//    give normalised latents (z, T', h, w); a mask (t, T', h, w), t the
//    VAE's temporal factor, is 1 where a frame was given: frame 0's value
//    repeated t times, then frames 1..F-1, regrouped t frames a latent frame
//    (so (1 + 4k) + 3 = 4T' values a pixel). condition = mask ++ latents
//    (t + z channels, 20 for z 16), the same every step; the transformer's
//    input is latents ++ condition (in_channels = 2z + t, 36).
//  - expand_timesteps (Wan 2.2 TI2V-5B): only the image is encoded,
//    (z, 1, h, w); first_frame_mask (T', h, w) is 0 on latent frame 0 and 1
//    elsewhere (all 1 without an image); each step's input is
//    (1 - mask) * condition + mask * latents (frame 0 the image's latents),
//    each token's timestep mask[:, ::2, ::2] * t flattened (frame 0's
//    tokens at 0), and after the loop the latents take the same blend once.
//
// Everything here is float32 on the host, one output's tensors without the
// batch dimension, so a batch of outputs with images of their own (a JSONL
// prompt file) conditions each on its own.
#pragma once
#include <cstdint>
#include <vector>

#include "models/vae_spec.h"
#include "pipeline/input_images.h"
#include "tensor/tensor.h"

namespace ditgen::pipeline {

enum class ConditionMode {
  kChannels,         // mask ++ latents concatenated to the latents each step
  kExpandTimesteps,  // the first latent frame replaced, per-token timesteps
};

// One output's conditioning.
struct ImageCondition {
  ConditionMode mode = ConditionMode::kChannels;
  // kChannels: (t + z, T', h, w) mask ++ latents; kExpandTimesteps: (z, 1, h, w)
  // the image's latents, or undefined (text-to-video: nothing replaced).
  Tensor condition;
  Tensor first_frame_mask;  // kExpandTimesteps: (T', h, w), 0 = the image's frame
};

// The frames prepare_latents encodes: (3, frames, H, W) = the image, zeros,
// and (given) the last image, or the image alone (3, 1, H, W) for
// expand_timesteps. `image`, `last_image`: (3, H, W) in [-1, 1]
// (io/vae_image_input.h). ConfigError for sizes that differ or frames < 2
// (3 with a last image).
Tensor video_condition(const Tensor& image, const Tensor* last_image, int64_t frames, ConditionMode mode);

// The (temporal_factor, T', h, w) mask for `frames` frames (1 + k x
// temporal_factor), a last image given or not.
Tensor condition_mask(int64_t frames, int64_t temporal_factor, int64_t latent_height, int64_t latent_width,
                      bool last_image);

// first_frame_mask (T', h, w): latent frame 0 at 0 when `image`, the rest 1.
Tensor first_frame_mask(int64_t latent_frames, int64_t latent_height, int64_t latent_width, bool image);

// One output's conditioning from its image(s): video_condition through the
// encoder (normalised latents), then the mask. `frames` the run's video
// frames; `temporal_factor` the VAE's.
ImageCondition encode_image_condition(const models::VaeEncoder& encoder, const Tensor& image,
                                      const Tensor* last_image, int64_t frames, int64_t temporal_factor,
                                      ConditionMode mode);

// TI2V-5B as text-to-video: expand_timesteps with no image (mask all 1).
ImageCondition text_only_expand_condition(int64_t latent_frames, int64_t latent_height, int64_t latent_width);

// The condition stage's side: every output's condition from its decoded
// images (Request::images), each resized to the run's height x width as
// VideoProcessor.preprocess does (io/vae_image_input.h) and encoded; outputs
// with the same files share one encode; an output without an image (TI2V
// as text-to-video) gets text_only_expand_condition. `spatial_factor`,
// `temporal_factor`: the VAE's.
std::vector<ImageCondition> image_conditions(const std::vector<OutputImages>& images,
                                             const models::VaeEncoder& encoder, int64_t height, int64_t width,
                                             int64_t frames, int64_t spatial_factor, int64_t temporal_factor,
                                             ConditionMode mode);

// The loop side. The transformer's input for one output of a step:
// `latents` (C, T', h, w) of that output, written to `model_in` (C_in, T', h, w):
// kChannels: latents ++ condition (C_in = C + t + z); kExpandTimesteps:
// (1 - mask) * condition + mask * latents (C_in = C), or the latents as
// they are without a condition.
void write_model_input(const ImageCondition& condition, const float* latents, const Shape& latent_shape,
                       float* model_in);

// The model-input channels a conditioning gives for latents of `channels`.
int64_t model_input_channels(const ImageCondition& condition, int64_t channels);

// expand_timesteps: each token's timestep, (mask[:, ::ph, ::pw] * t)
// flattened (T' x ceil(h/ph) x ceil(w/pw) values; diffusers' [::2, ::2]
// with the transformer's patch size 2).
std::vector<float> token_timesteps(const Tensor& first_frame_mask, float timestep, int64_t patch_height,
                                   int64_t patch_width);

// expand_timesteps after the loop: latents (C, T', h, w) = (1 - mask) *
// condition + mask * latents, in place (nothing without a condition).
void replace_first_frame(const ImageCondition& condition, float* latents, const Shape& latent_shape);

}  // namespace ditgen::pipeline
