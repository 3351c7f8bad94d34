// The frame size of an image-to-video run when the config gives no height
// and width: the image's aspect ratio at the model's default area, each side
// a multiple of the VAE's spatial scale factor times the patch size, exactly
// as diffusers' Wan I2V example (pipeline_wan_i2v.py) computes it:
//   aspect_ratio = image.height / image.width
//   height = round(sqrt(max_area * aspect_ratio)) // multiple * multiple
//   width  = round(sqrt(max_area / aspect_ratio)) // multiple * multiple
// in double precision, round() to nearest with ties to even (Python's).
//
// Wan's own image2video.py floors instead of rounding,
//   lat_h = round(sqrt(max_area * aspect_ratio) // vae_stride // patch * patch),
// so the two differ by one multiple where the square root lies just under a
// multiple: a 480 x 832 image at Wan 2.1 480P's area 480 * 832 gives
// 480 x 832 here and 464 x 832 in Wan's code (sqrt = 479.99999999999997).
// tests/io/test_image_frame_size.cpp lists such cases.
#pragma once
#include <cstdint>

namespace ditgen::io {

struct FrameSize {
  int64_t height = 0;
  int64_t width = 0;
};

// ConfigError when a side comes out 0 (an image too elongated for the area)
// or an argument is not positive.
FrameSize i2v_default_frame_size(int64_t image_height, int64_t image_width, int64_t max_area, int64_t multiple);

}  // namespace ditgen::io
