// The stage a run is in ("loading weights", "text encoder", "denoise",
// "decode"), for the messages of failures that carry no context of their
// own: running out of memory (a failed tensor allocation, a std::bad_alloc
// from anywhere) and a mapped model file that changed under the run
// (SIGBUS). Set by RAII around each stage; read anywhere, a signal handler
// included: it is one atomic pointer to a string literal, process-wide, so
// every thread (OpenMP workers too) sees the run's stage.
#pragma once
#include <string>

namespace ditgen {

// "" outside any stage.
const char* current_stage();

class StageScope {
 public:
  explicit StageScope(const char* name);  // a string literal (it is kept, not copied)
  ~StageScope();
  StageScope(const StageScope&) = delete;
  StageScope& operator=(const StageScope&) = delete;

 private:
  const char* previous_;
  int exceptions_;  // std::uncaught_exceptions() at construction: unwinding shows as more
};

// " during <stage>", or "" outside any stage: the suffix failure messages append.
std::string during_stage();

// The same for an exception caught after its stages unwound (main's report
// of a std::bad_alloc): the current stage, else the innermost one the last
// exception unwound out of.
std::string during_failed_stage();

}  // namespace ditgen
