// diffusers' Wan I2V default frame size (see the header).
#include "io/i2v_frame_size.h"

#include <cmath>
#include <string>

#include "util/error.h"

namespace ditgen::io {

FrameSize i2v_default_frame_size(int64_t image_height, int64_t image_width, int64_t max_area, int64_t multiple) {
  if (image_height < 1 || image_width < 1 || max_area < 1 || multiple < 1)
    throw ConfigError("image-to-video frame size: image " + std::to_string(image_width) + " x " +
                      std::to_string(image_height) + ", area " + std::to_string(max_area) + ", multiple " +
                      std::to_string(multiple) + ": every value must be positive");
  const double aspect_ratio = static_cast<double>(image_height) / static_cast<double>(image_width);
  const double area = static_cast<double>(max_area);
  // std::nearbyint rounds half to even in the default rounding mode, as Python's round().
  const auto side = [&](double squared) {
    return static_cast<int64_t>(std::nearbyint(std::sqrt(squared))) / multiple * multiple;
  };
  const FrameSize size{side(area * aspect_ratio), side(area / aspect_ratio)};
  if (size.height < 1 || size.width < 1)
    throw ConfigError("image-to-video frame size: a " + std::to_string(image_width) + " x " +
                      std::to_string(image_height) + " image gives " + std::to_string(size.width) + " x " +
                      std::to_string(size.height) + " at area " + std::to_string(max_area) + " in multiples of " +
                      std::to_string(multiple) + "; give height and width");
  return size;
}

}  // namespace ditgen::io
