// read_png_rgb: stb_image's PNG decoder (compiled here, once, static, PNG
// only). It reads the files a run of ditgen wrote (a resumed run's contact
// sheet), not arbitrary input; still, the size is checked from the header
// first, so a file of another size is never decoded.
#include "io/png.h"

#include <cstdio>
#include <memory>

#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_PNG
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#pragma GCC diagnostic ignored "-Wconversion"
#include <stb_image.h>
#pragma GCC diagnostic pop

namespace ditgen::io {

bool read_png_rgb(const std::string& path, int width, int height, std::vector<uint8_t>& pixels, int& out_width,
                  int& out_height) {
  struct FileClose {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  const std::unique_ptr<std::FILE, FileClose> file(std::fopen(path.c_str(), "rb"));
  if (!file) return false;
  int w = 0, h = 0, channels = 0;
  if (!stbi_info_from_file(file.get(), &w, &h, &channels)) return false;
  if (w <= 0 || h <= 0 || (width > 0 && w != width) || (height > 0 && h != height)) return false;
  stbi_uc* data = stbi_load_from_file(file.get(), &w, &h, &channels, 3);
  if (!data) return false;
  pixels.assign(data, data + static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
  stbi_image_free(data);
  out_width = w;
  out_height = h;
  return true;
}

}  // namespace ditgen::io
