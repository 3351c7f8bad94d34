// MpiRuntime: the process-wide MPI lifecycle of a ditgen run.
//
// Design: MPI starts only when the process was launched by mpirun (or
// another PMI/PMIx launcher); a plain `ditgen` never touches MPI, and
// world() is then a SelfCommunicator, so the rest of the program is written
// once for any world size.
//
// How main() uses it:
//   MpiRuntime::init(&argc, &argv);      // first thing; no-op without mpirun
//   try { ... run with MpiRuntime::world() ... }
//   catch (const std::exception& e) { report; MpiRuntime::abort(exit_code_for(e)); }
//   catch (...)                      { report; MpiRuntime::abort(kExitOther); }
//   return 0;                            // finalize() runs at exit
// Failure rule (docs/design.md §1): a failing rank must stop the whole job
// promptly, never leave the others hanging in a collective. So every error
// exit under MPI goes through abort(code), i.e. MPI_Abort(MPI_COMM_WORLD,
// code): mpirun kills all ranks and itself exits with that code. Signals are
// the exception: the handlers only remove temporary files and _exit (MPI_Abort
// is not async-signal-safe); mpirun then ends the job with its own code. Never return an error code from main()
// while MPI is active: the exit-time MPI_Finalize would wait for ranks that
// are blocked in a collective.
#pragma once
#include <memory>

#include "parallel/communicator.h"

namespace ditgen::parallel {

class MpiRuntime {
 public:
  // True when OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK is set.
  static bool launched_by_mpirun();

  // MPI_Init_thread(MPI_THREAD_FUNNELED) when launched by mpirun, else
  // nothing. Sets MPI_ERRORS_RETURN on MPI_COMM_WORLD and registers
  // finalize() with atexit. Idempotent. Throws RuntimeFailure when MPI
  // cannot give FUNNELED.
  static void init(int* argc, char*** argv);

  // MPI initialised and not yet finalised.
  static bool active();

  // MPI_COMM_WORLD while MPI is active, else a process-wide
  // SelfCommunicator. Lives until the process exits.
  static Communicator& world();

  // MPI_Comm_split of the parent: ranks with the same color form one new
  // communicator, ordered by key (then by parent rank). Collective over the
  // parent. A SelfCommunicator parent gives a new SelfCommunicator.
  // color must be >= 0 (every rank joins a group).
  static std::unique_ptr<Communicator> split(const Communicator& parent, int color, int key);

  // Rank and count of the processes on this node (device = local rank):
  // OMPI_COMM_WORLD_LOCAL_RANK / _SIZE, else MPI_Comm_split_type SHARED
  // (done inside init(), where every rank is, so these never communicate),
  // else 0 / 1 without MPI.
  static int local_rank();
  static int local_size();

  // MPI_Finalize when active; idempotent; also runs at exit.
  static void finalize();

  // Ends the process with exit_code: MPI_Abort(MPI_COMM_WORLD, exit_code)
  // while MPI is active (kills every rank; mpirun exits with exit_code),
  // else std::exit(exit_code). Flushes stdout and stderr first.
  [[noreturn]] static void abort(int exit_code);
};

}  // namespace ditgen::parallel
