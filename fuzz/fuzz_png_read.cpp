/* fuzz_png_read: the input is a file in an output folder that a resumed run
 * reads back for its contact sheet (io/png.h read_png_rgb, stb_image's PNG
 * decoder). Any size is asked for (0 x 0), so the decoder sees every input
 * it can parse; it must refuse what it cannot read (false), never crash or
 * read out of bounds. A decoded image must have the pixels its size says. */
#include <cstdint>
#include <vector>

#include "fuzz_support.h"
#include "io/png.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ditgen::fuzz::MemFile file(data, size);
  std::vector<uint8_t> pixels;
  int width = 0, height = 0;
  if (ditgen::io::read_png_rgb(file.path(), 0, 0, pixels, width, height) &&
      pixels.size() != static_cast<size_t>(width) * static_cast<size_t>(height) * 3)
    ditgen::fuzz::harness_failure("read_png_rgb: pixels do not match the size");
  return 0;
}
