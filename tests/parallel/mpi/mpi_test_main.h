// The main of the doctest programs run under mpirun (tests/parallel/mpi/):
// every rank runs every test case; rank 0 reports in full, the others only
// their failures; the job fails if any rank failed.
#pragma once
#include <mpi.h>

#include <cstdio>

#include <doctest/doctest.h>

#include "parallel/mpi_runtime.h"

namespace ditgen::testing {

inline int run_mpi_doctest(int argc, char** argv, const char* program) {
  using parallel::MpiRuntime;
  if (!MpiRuntime::launched_by_mpirun()) {
    std::fprintf(stderr, "%s: run me under mpirun -np N (N >= 2)\n", program);
    return 1;
  }
  MpiRuntime::init(&argc, &argv);
  doctest::Context context(argc, argv);
  const int rank = MpiRuntime::world().rank();
  if (rank != 0) context.setOption("minimal", true);
  int failed = context.run() != 0 ? 1 : 0;
  if (context.shouldExit()) return failed;
  if (failed) std::fprintf(stderr, "%s: rank %d failed\n", program, rank);
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MpiRuntime::finalize();
  return failed;
}

}  // namespace ditgen::testing
