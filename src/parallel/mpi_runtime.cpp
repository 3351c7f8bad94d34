// MpiRuntime: MPI start, world/split communicators, node-local rank, and the
// two ways out (finalize at a normal exit, MPI_Abort on failure). State is
// process-global because MPI itself is.
#include "parallel/mpi_runtime.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "parallel/mpi_communicator.h"
#include "util/error.h"

namespace ditgen::parallel {

namespace {

int g_local_rank = 0;
int g_local_size = 1;

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0';
}

// An integer from the environment, or -1.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0') return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return (*end == '\0' && x >= 0 && x <= 1 << 30) ? static_cast<int>(x) : -1;
}

void find_local_rank() {
  const int rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK");
  const int size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (rank >= 0 && size > rank) {
    g_local_rank = rank;
    g_local_size = size;
    return;
  }
  MPI_Comm node;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
  check_mpi(MPI_Comm_rank(node, &g_local_rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(node, &g_local_size), "MPI_Comm_size");
  MPI_Comm_free(&node);
}

void finalize_at_exit() { MpiRuntime::finalize(); }

}  // namespace

bool MpiRuntime::launched_by_mpirun() {
  return env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMI_SIZE") || env_set("PMIX_RANK");
}

bool MpiRuntime::active() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

void MpiRuntime::init(int* argc, char*** argv) {
  if (!launched_by_mpirun()) return;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = MPI_THREAD_SINGLE;
  // MPI_Init_thread fails fatally (the default handler) if it fails at all.
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  std::atexit(finalize_at_exit);
  // From here on, errors come back as codes and become RuntimeFailure;
  // communicators split from the world inherit the handler.
  check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  if (provided < MPI_THREAD_FUNNELED) {
    throw RuntimeFailure("MPI provides thread level " + std::to_string(provided) +
                         ", ditgen needs MPI_THREAD_FUNNELED (OpenMP threads beside MPI)");
  }
  find_local_rank();
}

Communicator& MpiRuntime::world() {
  if (active()) {
    static MpiCommunicator world_comm(MPI_COMM_WORLD);
    return world_comm;
  }
  static SelfCommunicator self;
  return self;
}

std::unique_ptr<Communicator> MpiRuntime::split(const Communicator& parent, int color, int key) {
  if (color < 0) {
    throw std::invalid_argument("MpiRuntime::split: color " + std::to_string(color) +
                                " < 0 (every rank must join a group)");
  }
  if (const auto* mpi = dynamic_cast<const MpiCommunicator*>(&parent)) {
    MPI_Comm comm;
    check_mpi(MPI_Comm_split(mpi->comm(), color, key, &comm), "MPI_Comm_split");
    return std::make_unique<MpiCommunicator>(comm);
  }
  if (parent.size() == 1) return make_self_communicator();
  throw std::invalid_argument("MpiRuntime::split: the parent is not an MPI communicator");
}

int MpiRuntime::local_rank() { return g_local_rank; }
int MpiRuntime::local_size() { return g_local_size; }

void MpiRuntime::finalize() {
  if (active()) MPI_Finalize();
}

void MpiRuntime::abort(int exit_code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (active()) {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; in case it does
  }
  std::exit(exit_code);
}

}  // namespace ditgen::parallel
