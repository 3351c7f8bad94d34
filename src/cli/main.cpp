// ditgen entry point: parse the command line, run the job, and map every
// failure to its exit code (DESIGN.md §1) with one message naming the file
// and field at fault. Temporary output files are removed on any failure and
// on SIGINT/SIGTERM.
#include <cstdio>
#include <exception>
#include <new>

#include "cli/generate_command.h"
#include "config/cli_options.h"
#include "util/atomic_file.h"
#include "util/error.h"

int main(int argc, char** argv) {
  using namespace ditgen;
  install_signal_cleanup();
  try {
    const CliOptions opts = parse_cli(argc, argv);
    if (opts.exit_now) return kExitOk;
    if (opts.command == CliOptions::Command::plan)
      not_supported("ditgen plan (it comes with the parallel layouts)");
    cli::run_generate(opts);
    return kExitOk;
  } catch (const Error& e) {
    cleanup_temp_files_now();
    std::fprintf(stderr, "ditgen: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    cleanup_temp_files_now();
    std::fprintf(stderr, "ditgen: error: out of memory\n");
    return kExitRuntime;
  } catch (const std::exception& e) {
    cleanup_temp_files_now();
    std::fprintf(stderr, "ditgen: error: %s\n", e.what());
    return kExitOther;
  }
}
