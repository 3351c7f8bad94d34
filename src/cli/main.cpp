// ditgen entry point: parse the command line, run the job, and map every
// failure to its exit code (docs/design.md §1) with one message naming the file
// and field at fault. Temporary output files are removed on any failure and
// on SIGINT/SIGTERM (util/signals.h). Under mpirun a failing rank aborts the whole job
// (MPI_Abort with the same exit code), so no rank waits forever in a
// collective; a signal sent to mpirun ends the ranks with mpirun's own exit
// code (MPI_Abort is not async-signal-safe, so handlers only _exit).
#include <chrono>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <thread>

#include "cli/convert_command.h"
#include "cli/encode_command.h"
#include "cli/generate_command.h"
#include "cli/plan_command.h"
#include "config/cli_options.h"
#include "parallel/mpi_runtime.h"
#include "util/atomic_file.h"
#include "util/created_folders.h"
#include "util/openmp_wait.h"
#include "util/signals.h"
#include "util/error.h"

namespace {

// Before any shared library's initialiser, libgomp's among them (which
// reads its wait policy once): util/openmp_wait.h.
void before_libraries_start(int, char** argv, char** envp) { ditgen::reexec_with_short_openmp_spin(argv, envp); }
[[gnu::used, gnu::section(".preinit_array")]] void (*const preinit_openmp_wait)(int, char**, char**) =
    &before_libraries_start;

[[noreturn]] void fail(int code, const std::string& message) {
  using namespace ditgen;
  cleanup_temp_files_now();
  remove_empty_created_folders_now();  // the output folders this run made and left empty
  const auto& world = parallel::MpiRuntime::world();
  if (world.size() > 1) {
    // Config errors are found identically by every rank: rank 0 speaks and
    // aborts. The others give it a moment first: an abort from them could
    // kill rank 0 before its message is out (seen as a flaky CLI test). The
    // wait is bounded, so a rank 0 that somehow did not fail cannot hang it.
    const bool silent = code == kExitBadConfig && world.rank() != 0;
    if (!silent) {
      std::fprintf(stderr, "ditgen[rank %d]: error: %s\n", world.rank(), message.c_str());
      std::fflush(stderr);
    } else {
      std::this_thread::sleep_for(std::chrono::seconds(3));
    }
    parallel::MpiRuntime::abort(code);  // ends every rank
  }
  std::fprintf(stderr, "ditgen: error: %s\n", message.c_str());
  std::fflush(stderr);
  std::exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ditgen;
  install_signal_handlers();
  try {
    parallel::MpiRuntime::init(&argc, &argv);
    const CliOptions opts = parse_cli(argc, argv);
    if (opts.exit_now) return kExitOk;
    if (opts.command == CliOptions::Command::plan)
      cli::run_plan(opts);
    else if (opts.command == CliOptions::Command::encode)
      cli::run_encode(opts);
    else if (opts.command == CliOptions::Command::convert)
      cli::run_convert(opts);
    else
      cli::run_generate(opts);
    parallel::MpiRuntime::finalize();
    return kExitOk;
  } catch (const std::exception& e) {
    fail(exit_code_for(e), error_text(e));  // the one rule: util/error.h
  } catch (...) {
    fail(kExitOther, "unknown error");
  }
}
