// The image-to-video CLIP image input: transformers' CLIPImageProcessor as
// transformers 5.24 runs it without torchvision (its PIL backend,
// CLIPImageProcessorPil, which CLIPImageProcessor falls back to; with
// torchvision installed it resizes with torch instead and the values
// differ), configured by the model's image_processor/preprocessor_config.json:
//   1. convert_to_rgb: an image that still lists a transparency colour (see
//      DecodedImage::transparency) is composited onto white, so pixels of
//      exactly that colour become white;
//   2. resize: "size" {"shortest_edge": s} scales the shorter side to s and
//      the longer to int(s * long / short), {"height", "width"} to that size;
//      Pillow's filter "resample" (1 LANCZOS, 2 BILINEAR, 3 BICUBIC);
//   3. centre crop to "crop_size", the offsets floor((size - crop) / 2),
//      zeros where the crop reaches past the image;
//   4. rescale: float32(double(v) * "rescale_factor");
//   5. normalize: (x - mean) / std in float32, per channel.
// Each step only when its do_* key is true (all are by default). Keys left
// out take CLIPImageProcessor's defaults.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "io/image_reader.h"
#include "io/pillow_resample.h"
#include "tensor/tensor.h"

namespace ditgen::io {

struct ClipImageProcessorConfig {
  bool do_convert_rgb = true;
  bool do_resize = true;
  int64_t shortest_edge = 224;  // > 0: resize the shorter side to it
  int64_t resize_height = 0, resize_width = 0;  // used when shortest_edge is 0
  ResampleFilter resample = ResampleFilter::kBicubic;
  bool do_center_crop = true;
  int64_t crop_height = 224, crop_width = 224;
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255.0;
  bool do_normalize = true;
  std::array<float, 3> image_mean = {0.48145466f, 0.4578275f, 0.40821073f};  // OPENAI_CLIP_MEAN
  std::array<float, 3> image_std = {0.26862954f, 0.26130258f, 0.27577711f};  // OPENAI_CLIP_STD
};

// Reads a preprocessor_config.json. ModelError naming the file and key for a
// missing or malformed file, a wrong type, and what the processor would do
// otherwise than above ("longest_edge", "max_height", a resample filter
// other than 1-3, an image_processor_type that is not CLIP's).
ClipImageProcessorConfig read_clip_image_processor_config(const std::string& path);

// (3, H, W) float32: (3, crop_height, crop_width) with the crop on.
Tensor clip_image_input(const DecodedImage& image, const ClipImageProcessorConfig& config);

}  // namespace ditgen::io
