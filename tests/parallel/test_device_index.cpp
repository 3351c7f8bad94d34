// local_device_index: which GPU a rank binds (docs/design.md §4), from a fake
// environment, so every launcher case and error message is checked on CPU.
#include <doctest/doctest.h>

#include <map>
#include <stdexcept>
#include <string>

#include "parallel/device_index.h"
#include "util/error.h"

using ditgen::parallel::local_device_index;

namespace {

struct FakeEnv {
  std::map<std::string, std::string> vars;
  ditgen::parallel::EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      const auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

std::string failure_text(const FakeEnv& env, int split_rank, int devices) {
  try {
    local_device_index(env.lookup(), split_rank, devices);
  } catch (const ditgen::RuntimeFailure& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("device index: Open MPI's local rank wins over the others") {
  FakeEnv env{{{"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"MPI_LOCALRANKID", "1"}}};
  CHECK(local_device_index(env.lookup(), 3, 4) == 2);
}

TEST_CASE("device index: MPICH's local rank, then the shared-memory split rank") {
  FakeEnv mpich{{{"MPI_LOCALRANKID", "1"}}};
  CHECK(local_device_index(mpich.lookup(), 3, 4) == 1);
  FakeEnv none;
  CHECK(local_device_index(none.lookup(), 3, 4) == 3);
  CHECK(local_device_index(none.lookup(), 0, 1) == 0);  // a plain single-process run
}

TEST_CASE("device index: malformed or empty variables fall through to the next source") {
  for (const char* bad : {"", "x", "1x", "-1", " 1"}) {
    FakeEnv env{{{"OMPI_COMM_WORLD_LOCAL_RANK", bad}}};
    CHECK(local_device_index(env.lookup(), 1, 2) == 1);
  }
}

TEST_CASE("device index: fewer devices than local ranks is a runtime failure") {
  FakeEnv env{{{"OMPI_COMM_WORLD_LOCAL_RANK", "2"}}};
  CHECK(failure_text(env, 0, 2) ==
        "local rank 2 needs CUDA device 2, but 2 are visible: run at most 2 ranks per node "
        "(one GPU each)");
  FakeEnv restricted{{{"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"CUDA_VISIBLE_DEVICES", "0"}}};
  CHECK(failure_text(restricted, 0, 1) ==
        "local rank 2 needs CUDA device 2, but 1 is visible (CUDA_VISIBLE_DEVICES=0): run at "
        "most 1 rank per node (one GPU each)");
  FakeEnv none;
  CHECK(failure_text(none, 0, 0) == "local rank 0 needs CUDA device 0, but no CUDA device is visible");
  CHECK_THROWS_AS(local_device_index(none.lookup(), -1, 2), std::invalid_argument);
}
