#include "util/run_stage.h"

#include <atomic>
#include <exception>

namespace ditgen {

namespace {
std::atomic<const char*> g_stage{""};
// The innermost stage an exception last unwound out of: by the time main
// prints a std::bad_alloc, every StageScope is gone, so the stage it was
// thrown in is kept here. Cleared when a new stage starts.
std::atomic<const char*> g_unwound_stage{nullptr};  // null: none
}  // namespace

const char* current_stage() { return g_stage.load(std::memory_order_relaxed); }

StageScope::StageScope(const char* name)
    : previous_(g_stage.exchange(name, std::memory_order_relaxed)), exceptions_(std::uncaught_exceptions()) {
  g_unwound_stage.store(nullptr, std::memory_order_relaxed);
}

StageScope::~StageScope() {
  const char* name = g_stage.exchange(previous_, std::memory_order_relaxed);
  const char* none = nullptr;
  // Kept only if no inner stage was recorded already (the innermost names it best).
  if (std::uncaught_exceptions() > exceptions_) g_unwound_stage.compare_exchange_strong(none, name);
}

std::string during_stage() {
  const char* stage = current_stage();
  return stage[0] ? std::string(" during ") + stage : std::string();
}

std::string during_failed_stage() {
  const char* stage = current_stage();
  if (!stage[0]) {
    const char* unwound = g_unwound_stage.load(std::memory_order_relaxed);
    if (unwound) stage = unwound;
  }
  return stage[0] ? std::string(" during ") + stage : std::string();
}

}  // namespace ditgen
