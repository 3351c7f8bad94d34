/* fuzz_image_reader: the input is an image file (PNG or JPEG, or anything),
 * decoded by io::decode_image as read_input_image decodes a user's file,
 * with a smaller size limit (1024 a side, 2^18 pixels) so that a header's
 * dimensions cannot make one execution allocate gigabytes. Every decoded
 * image then goes through what the pipelines do with it: Pillow's resize
 * (each filter in turn, to a size picked from the input's length) and the
 * CLIP preprocessing with a small crop. The EXIF and XMP orientation parsers
 * also see the raw bytes directly.
 *
 * Invariants checked: a decoded image is within the limits, its pixel buffer
 * holds width x height x 3 bytes, its orientation is 1-8, and the
 * resized and preprocessed outputs have the asked shapes with finite values.
 * Expected failures: ditgen::Error (ConfigError naming the file: not an
 * image, truncated, corrupt, refused kind, beyond the limits). Anything else
 * is a finding. */
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "io/clip_image_processor.h"
#include "io/exif_orientation.h"
#include "io/image_reader.h"
#include "io/pillow_resample.h"

namespace {

using ditgen::fuzz::harness_failure;
namespace io = ditgen::io;

void check(const io::DecodedImage& d, size_t size) {
  const io::RgbImage& rgb = d.rgb;
  if (rgb.width < 1 || rgb.height < 1 || rgb.width > 1024 || rgb.height > 1024 || rgb.width * rgb.height > (1 << 18))
    harness_failure("decoded image outside the limits");
  if (rgb.pixels.size() != size_t(rgb.width * rgb.height * 3)) harness_failure("pixel buffer of the wrong size");
  if (d.orientation < 1 || d.orientation > 8) harness_failure("orientation outside 1-8");

  const io::ResampleFilter filter = size % 3 == 0   ? io::ResampleFilter::kLanczos
                                    : size % 3 == 1 ? io::ResampleFilter::kBicubic
                                                    : io::ResampleFilter::kBilinear;
  const int64_t w = 1 + int64_t(size % 37), h = 1 + int64_t(size / 37 % 29);
  const io::RgbImage resized = io::pillow_resize(rgb, w, h, filter);
  if (resized.width != w || resized.height != h || resized.pixels.size() != size_t(w * h * 3))
    harness_failure("resize gave the wrong shape");

  io::ClipImageProcessorConfig clip;
  clip.shortest_edge = 12;
  clip.crop_height = 10;
  clip.crop_width = 14;
  clip.resample = filter;
  const ditgen::Tensor t = io::clip_image_input(d, clip);
  if (t.shape() != ditgen::Shape{3, 10, 14}) harness_failure("CLIP input of the wrong shape");
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.data()[i])) harness_failure("CLIP input not finite");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const io::ImageLimits limits{1024, 1 << 18};
  ditgen::fuzz::allow_reader_errors([&] { check(io::decode_image(data, size, "fuzz-input", limits), size); });
  const auto tag = io::exif_orientation_tag(data, size);
  const auto xmp = io::xmp_orientation(std::string_view(reinterpret_cast<const char*>(data), size));
  if (xmp && (*xmp < 0 || *xmp > 9)) harness_failure("XMP orientation is not one digit");
  (void)tag;
  return 0;
}
