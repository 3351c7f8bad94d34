/* fuzz_gguf: the input is a whole weights file, opened through a memfd path.
 * As a GGUF file (io::GgufFile::open): every metadata value is walked
 * (arrays and nested arrays included); for every tensor it runs load(),
 * load_rows() of a leading and a trailing range, load_cols() of two ranges
 * when 2-D, reads every element as float32, and dequantizes an element
 * range cut inside blocks. Then, whatever the format (GGUF, or safetensors
 * when the input does not begin with "GGUF"), io::WeightStore::open_file
 * with an architecture and a prefix, and load_f32() of every tensor: the
 * single-file store, ComfyUI's prefix and scaled float8 convention.
 *
 * Expected failures: ditgen::Error (ModelError naming the file and the key
 * or tensor: bad header, value, offset, size, type, shape or scale).
 * Also accepted, only around the harness's own float32 conversion:
 * std::invalid_argument from convert_host, which by contract refuses an
 * integer tensor value float32 cannot hold exactly (tensor/convert.h).
 * Anything else is a finding: a crash, an ASan or UBSan report, a leak, or
 * any other exception (it escapes and libFuzzer reports it as a crash). */
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "fuzz_support.h"
#include "fuzz_weight_file.h"
#include "io/ggml_quants.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "util/error.h"

namespace {

volatile float g_sink;
volatile uint64_t g_count;
using ditgen::fuzz::read_as_float32;

void walk(const ditgen::io::GgufValue& v) {
  uint64_t n = v.u + static_cast<uint64_t>(v.i) + v.s.size() + static_cast<uint64_t>(v.f == 0);
  for (const ditgen::io::GgufValue& item : v.items) walk(item);
  g_count = g_count + n;
}

void fuzz_gguf(const std::string& path) {
  std::shared_ptr<ditgen::io::GgufFile> f;
  try {
    f = ditgen::io::GgufFile::open(path);
  } catch (const ditgen::Error&) {
    return;
  }
  for (const auto& [key, value] : f->metadata()) walk(value);
  g_count = g_count + f->architecture().value_or("").size();
  ditgen::fuzz::read_every_tensor(*f);
  for (const ditgen::io::GgufTensor& t : f->tensors()) {
    // A range that begins and ends inside blocks, straight from the bytes.
    const int64_t numel = ditgen::shape_numel(t.shape);
    if (ditgen::math::ggml_traits(t.type).dequantized && numel > 2) {
      std::vector<float> out(static_cast<size_t>(numel - 2));
      ditgen::io::dequantize(t.type, f->data(t.name), 1, numel - 2, out.data());
      g_sink = out[out.size() / 2];
    }
    f->release_pages(t.name);
  }
}

void fuzz_store(const std::string& path) {
  ditgen::io::SingleFileOptions options;
  options.architecture = "wan";
  options.prefix = "model.diffusion_model.";
  ditgen::fuzz::allow_reader_errors([&] {
    const ditgen::io::WeightStore store = ditgen::io::WeightStore::open_file(path, options);
    for (const std::string& name : store.names()) {
      ditgen::fuzz::allow_reader_errors([&] { read_as_float32(store.load_f32(name)); });
      const ditgen::Shape& shape = store.info(name).shape;
      const int64_t rows = shape.empty() ? 0 : shape[0];
      ditgen::fuzz::allow_reader_errors([&] { read_as_float32(store.load_rows(name, rows / 2, rows)); });
      if (shape.size() == 2)
        ditgen::fuzz::allow_reader_errors([&] { read_as_float32(store.load_cols(name, 0, std::min<int64_t>(shape[1], 2))); });
    }
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ditgen::fuzz::MemFile file(data, size);
  fuzz_gguf(file.path());
  fuzz_store(file.path());
  return 0;
}
