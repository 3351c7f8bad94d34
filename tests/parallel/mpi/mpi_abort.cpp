// The failure rule of docs/design.md §1 under mpirun: rank 1 fails early while the
// other ranks are blocked in a collective that can never complete; the
// runtime's abort must end the whole job with the rank's exit code.
// tests/CMakeLists.txt runs it with -np 3 and requires exit code 4 (a hang
// is killed by mpirun --timeout and reads as failure; no bound on the time
// otherwise: machines differ).
// The try/catch/abort is the shape main() of ditgen has.
#include <cstdio>
#include <vector>

#include "parallel/mpi_runtime.h"
#include "util/error.h"

using ditgen::parallel::MpiRuntime;

int main(int argc, char** argv) {
  try {
    MpiRuntime::init(&argc, &argv);
    auto& world = MpiRuntime::world();
    // Past this barrier the others go straight into the all-reduce, which
    // rank 1 never joins (it may fail before or after they enter: either
    // way the abort must end them).
    world.barrier();
    if (world.rank() == 1) throw ditgen::RuntimeFailure("rank 1 fails on purpose");
    std::vector<float> data(1000, 1.f);
    world.all_reduce_sum(data.data(), static_cast<int64_t>(data.size()));
    std::fprintf(stderr, "rank %d: the all-reduce completed without rank 1\n", world.rank());
    MpiRuntime::finalize();
    return 0;
  } catch (const ditgen::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    MpiRuntime::abort(e.exit_code());
  }
}
