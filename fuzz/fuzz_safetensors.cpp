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
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "fuzz_weight_file.h"
#include "io/safetensors.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ditgen::fuzz::MemFile file(data, size);
  std::shared_ptr<ditgen::io::SafetensorsFile> st;
  try {
    st = ditgen::io::SafetensorsFile::open(file.path());
  } catch (const ditgen::Error&) {
    return 0;
  }
  ditgen::fuzz::read_every_tensor(*st);
  return 0;
}
