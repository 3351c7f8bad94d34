// Error types of ditgen. Each carries the process exit code of docs/design.md §1,
// and exit_code_for() below is the one rule from any caught exception to the
// process exit code, used by the single catch in main(). Messages name the
// file and the config path or tensor at fault.
#pragma once
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>

#include "util/run_stage.h"

namespace ditgen {

enum ExitCode : int {
  kExitOk = 0,
  kExitOther = 1,
  kExitBadConfig = 2,   // bad config or arguments, "not supported yet"
  kExitBadModel = 3,    // bad or missing model files
  kExitRuntime = 4,     // out of memory, device error, communication failure
  kExitSigint = 130,
  kExitSigterm = 143,
};

class Error : public std::runtime_error {
 public:
  Error(int exit_code, const std::string& message)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Bad config file, bad --set override, bad command line argument.
struct ConfigError : Error {
  explicit ConfigError(const std::string& m) : Error(kExitBadConfig, m) {}
};
// Missing or malformed model files (safetensors, config.json, shapes).
struct ModelError : Error {
  explicit ModelError(const std::string& m) : Error(kExitBadModel, m) {}
};
// Failure while running: allocation, I/O of outputs, devices, communication.
struct RuntimeFailure : Error {
  explicit RuntimeFailure(const std::string& m) : Error(kExitRuntime, m) {}
};

// The process exit code for an exception that ends the run (docs/design.md §1):
//
//   ConfigError     2   bad config or arguments, "not supported yet"
//   ModelError      3   bad or missing model files (config.json, tensor names,
//                       shapes, truncated safetensors)
//   RuntimeFailure  4   output I/O, device error, communication failure
//   std::bad_alloc  4   out of memory is a runtime failure
//   anything else   1   including std::invalid_argument / std::out_of_range /
//                       std::logic_error from an op's argument check
//
// Why an op's argument error is 1: what the user controls (the run config,
// the command line, the model's config.json and tensor shapes) is checked
// before any op runs and reported as 2 or 3, naming the file and key. An op
// (ops::linear, copy_rows, a collective) that then gets a bad shape or offset
// was handed it by ditgen's own code: an internal bug, not the user's input,
// so it must not be reported as a bad config or model. Code that turns user
// input directly into an op call wraps the op's error in a ConfigError or
// ModelError naming the field; what reaches main unwrapped is a bug.
inline int exit_code_for(const std::exception& e) {
  if (const auto* error = dynamic_cast<const Error*>(&e)) return error->exit_code();
  if (dynamic_cast<const std::bad_alloc*>(&e)) return kExitRuntime;
  return kExitOther;
}

// The message printed for that exception ("out of memory during <stage>"
// for bad_alloc, whose what() says only "std::bad_alloc").
inline std::string error_text(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) return "out of memory" + during_failed_stage();
  return e.what();
}

// The text of an errno value ("No such file or directory"), for messages.
inline std::string errno_text(int err) { return std::generic_category().message(err); }

// Throws E("<path>: <msg>") unless `ok`: the one form of a check on a
// file's contents (config.json keys, tensor shapes), so every such message
// starts with the file at fault. E defaults to ModelError, as model files are
// what these checks read; pass ConfigError for a run config.
template <class E = ModelError>
void require(bool ok, const std::string& path, const std::string& msg) {
  if (!ok) throw E(path + ": " + msg);
}

// A part of the contract that is not built yet (docs/design.md: exit 2).
[[noreturn]] inline void not_supported(const std::string& what) {
  throw ConfigError("not supported yet: " + what);
}

}  // namespace ditgen
