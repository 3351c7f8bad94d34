// local_device_index: the launcher's local rank, checked against the
// devices this process can see. Kept apart from the NCCL communicator so the
// CPU build tests it.
#include "parallel/device_index.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "util/error.h"

namespace ditgen::parallel {

namespace {

// A non-negative integer from the environment, or -1 (unset or malformed:
// fall through to the next source rather than guess).
int env_rank(const EnvLookup& env, const char* name) {
  const char* value = env(name);
  if (value == nullptr || value[0] == '\0') return -1;
  char* end = nullptr;
  const long x = std::strtol(value, &end, 10);
  return (*end == '\0' && x >= 0 && x <= (1 << 30)) ? static_cast<int>(x) : -1;
}

}  // namespace

int local_device_index(const EnvLookup& env, int shared_split_rank, int device_count) {
  int local_rank = env_rank(env, "OMPI_COMM_WORLD_LOCAL_RANK");
  if (local_rank < 0) local_rank = env_rank(env, "MPI_LOCALRANKID");
  if (local_rank < 0) local_rank = shared_split_rank;
  if (local_rank < 0) {
    throw std::invalid_argument("local_device_index: negative local rank " +
                                std::to_string(local_rank));
  }
  if (local_rank < device_count) return local_rank;

  std::string message = "local rank " + std::to_string(local_rank) + " needs CUDA device " +
                        std::to_string(local_rank) + ", but ";
  if (device_count == 0) {
    message += "no CUDA device is visible";
  } else {
    message += std::to_string(device_count) + (device_count == 1 ? " is" : " are") + " visible";
  }
  if (const char* visible = env("CUDA_VISIBLE_DEVICES")) {
    message += " (CUDA_VISIBLE_DEVICES=" + std::string(visible) + ")";
  }
  if (device_count > 0) {
    message += ": run at most " + std::to_string(device_count) +
               (device_count == 1 ? " rank" : " ranks") + " per node (one GPU each)";
  }
  throw RuntimeFailure(message);
}

}  // namespace ditgen::parallel
