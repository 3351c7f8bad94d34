// Error types of ditgen. Each carries the process exit code of DESIGN.md §1,
// so the single catch in main() maps any failure to the right code. Messages
// name the file and the config path or tensor at fault.
#pragma once
#include <stdexcept>
#include <string>
#include <system_error>

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

// The text of an errno value ("No such file or directory"), for messages.
inline std::string errno_text(int err) { return std::generic_category().message(err); }

// A part of the contract that is not built yet (DESIGN.md: exit 2).
[[noreturn]] inline void not_supported(const std::string& what) {
  throw ConfigError("not supported yet: " + what);
}

}  // namespace ditgen
