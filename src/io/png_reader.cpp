// read_png_rgb: stb_image's PNG decoder (compiled here, once, static, PNG
// only). It reads the files a run of ditgen wrote (a resumed run's contact
// sheet), which a user may have replaced, so it is bounded as a reader of
// hostile input (fuzz/fuzz_png_read.cpp): the header's size is checked
// before any pixel is decoded (the run's size, at most kMaxPixels), and
// every allocation stb makes is capped at what a genuine image of that size
// needs, so a compressed stream that inflates without end (a zlib bomb)
// fails instead of taking the machine's memory.
#include "io/png.h"

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace {

// Bytes stb may allocate at once while decoding the current image; 0 while
// reading the header.
thread_local size_t t_allocation_cap = 0;

void* capped_malloc(size_t size) { return size > t_allocation_cap ? nullptr : std::malloc(size); }
void* capped_realloc(void* p, size_t size) { return size > t_allocation_cap ? nullptr : std::realloc(p, size); }

}  // namespace

#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_PNG
#define STBI_MALLOC(size) capped_malloc(size)
#define STBI_REALLOC(p, size) capped_realloc(p, size)
#define STBI_FREE(p) std::free(p)
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
namespace {

// Far above any output ditgen writes (a 4096 x 4096 image).
constexpr size_t kMaxPixels = size_t{1} << 24;

}  // namespace

bool read_png_rgb(const std::string& path, int width, int height, std::vector<uint8_t>& pixels, int& out_width,
                  int& out_height) {
  struct FileClose {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  const std::unique_ptr<std::FILE, FileClose> file(std::fopen(path.c_str(), "rb"));
  if (!file) return false;
  int w = 0, h = 0, channels = 0;
  t_allocation_cap = size_t{1} << 16;  // the header's reader
  if (!stbi_info_from_file(file.get(), &w, &h, &channels)) return false;
  if (w <= 0 || h <= 0 || (width > 0 && w != width) || (height > 0 && h != height)) return false;
  const size_t count = static_cast<size_t>(w) * static_cast<size_t>(h);
  if (count > kMaxPixels) return false;
  // A genuine image's largest buffer: its inflated rows, 16-bit RGBA with a
  // filter byte each (8 bytes a pixel + 1 a row), which stb may grow once
  // by doubling; plus room for the chunks' own small buffers.
  t_allocation_cap = 2 * (count * 8 + static_cast<size_t>(h)) + (size_t{1} << 20);
  stbi_uc* data = stbi_load_from_file(file.get(), &w, &h, &channels, 3);
  t_allocation_cap = 0;
  if (!data) return false;
  pixels.assign(data, data + count * 3);
  stbi_image_free(data);
  out_width = w;
  out_height = h;
  return true;
}

}  // namespace ditgen::io
