/* fuzz_safetensors: the input is a whole .safetensors file (8-byte header
 * length, JSON header, data section), opened through a memfd path with
 * io::SafetensorsFile::open. For every tensor it runs load(), load_rows() of a
 * leading and a trailing range, load_cols() of two ranges when 2-D, converts
 * each result to float32 and reads every element.
 *
 * Expected failures: ditgen::Error (ModelError naming the file and tensor:
 * bad header, offsets, dtype, shape, a stored type with no tensor dtype).
 * Also accepted, only around the harness's own float32 conversion:
 * std::invalid_argument from convert_host, which by contract refuses an
 * integer tensor value float32 cannot hold exactly (tensor/convert.h); the
 * reader itself never converts. Anything else is a finding: a crash, an ASan
 * or UBSan report, a leak, or any other exception (it escapes and libFuzzer
 * reports it as a crash). */
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "fuzz_support.h"
#include "io/safetensors.h"
#include "util/error.h"

namespace {

volatile float g_sink;

void touch(const ditgen::Tensor& t) {
  ditgen::Tensor f;
  try {
    f = t.to(ditgen::DType::kF32);
  } catch (const std::invalid_argument&) {
    return;  // an integer value float32 cannot hold exactly (see above)
  }
  const float* p = f.numel() ? f.data() : nullptr;
  float sum = 0;
  for (int64_t i = 0; i < f.numel(); ++i) sum += p[i];
  g_sink = sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ditgen::fuzz::MemFile file(data, size);
  std::shared_ptr<ditgen::io::SafetensorsFile> st;
  try {
    st = ditgen::io::SafetensorsFile::open(file.path());
  } catch (const ditgen::Error&) {
    return 0;
  }
  for (const std::string& name : st->names()) {
    const ditgen::io::TensorInfo& info = st->info(name);
    ditgen::fuzz::allow_reader_errors([&] { touch(st->load(name)); });
    const int64_t rows = info.shape.empty() ? 0 : info.shape[0];
    ditgen::fuzz::allow_reader_errors([&] { touch(st->load_rows(name, 0, std::min<int64_t>(rows, 2))); });
    ditgen::fuzz::allow_reader_errors([&] { touch(st->load_rows(name, rows / 2, rows)); });
    ditgen::fuzz::allow_reader_errors([&] { st->load_rows(name, rows, rows + 1); });  // out of range: ModelError
    if (info.shape.size() == 2) {
      const int64_t cols = info.shape[1];
      ditgen::fuzz::allow_reader_errors([&] { touch(st->load_cols(name, 0, std::min<int64_t>(cols, 3))); });
      ditgen::fuzz::allow_reader_errors([&] { touch(st->load_cols(name, cols / 2, cols)); });
    }
  }
  return 0;
}
