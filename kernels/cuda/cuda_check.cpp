// throw_error: the one place that formats CUDA / cuBLAS / NCCL failures (the
// format is in cuda_check.h). __FILE__ is the absolute path the build passed
// to the compiler; the repository prefix is cut so messages stay short and
// the same on every machine.
#include "kernels/cuda/cuda_check.h"

#include <cstring>
#include <string>

#include "util/error.h"

namespace ditgen::cuda {

namespace {

const char* repository_relative(const char* file) {
#ifdef DITGEN_SOURCE_PREFIX
  const size_t prefix_length = std::strlen(DITGEN_SOURCE_PREFIX);
  if (std::strncmp(file, DITGEN_SOURCE_PREFIX, prefix_length) == 0) return file + prefix_length;
#endif
  return file;
}

}  // namespace

void throw_error(const char* library, const char* call, const char* message, const char* file,
                 int line) {
  throw RuntimeFailure(std::string(library) + " error: " + call + ": " +
                       (message != nullptr ? message : "unknown error") + " (" +
                       repository_relative(file) + ":" + std::to_string(line) + ")");
}

}  // namespace ditgen::cuda
