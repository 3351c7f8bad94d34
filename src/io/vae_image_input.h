// The image-to-video VAE input: diffusers' VideoProcessor(vae_scale_factor)
// .preprocess(image, height, width) for one RGB image, as
// WanImageToVideoPipeline calls it (VaeImageProcessor's defaults: resize on,
// resample "lanczos", reducing_gap None, normalise on, no RGB or grey
// conversion):
//   1. size: the given height / width, or the image's own where not given,
//      each rounded down to a multiple of vae_scale_factor
//      (get_default_height_width);
//   2. resize to it with Pillow's LANCZOS (io/pillow_resample.h; a copy
//      when the image has that size already);
//   3. to float32 as pil_to_numpy then normalize do it: v / 255 (float32),
//      then 2 * x - 1, each step rounded to float32.
#pragma once
#include <cstdint>
#include <optional>

#include "io/rgb_image.h"
#include "tensor/tensor.h"

namespace ditgen::io {

// (3, H, W) float32 in [-1, 1]. ConfigError when the size rounds down to 0
// (an image or a size smaller than vae_scale_factor).
Tensor vae_image_input(const RgbImage& image, std::optional<int64_t> height, std::optional<int64_t> width,
                       int64_t vae_scale_factor);

}  // namespace ditgen::io
